//! Puffin files holding Iceberg v3 deletion vectors (`deletion-vector-v1` blobs).
//!
//! ```text
//! offset 0  ┌──────────────────────┐
//!           │ magic "PFA1"         │
//! offset 4  ├──────────────────────┤ ◄── blob 1: content_offset
//!           │ length u32 BE        │     = 4 + bitmap bytes (magic + portable roaring)
//!           │ magic D1 D3 39 64    │ ┐
//!           │ portable roaring 64  │ ┘ the Delta DV's RoaringBitmapArray bytes
//!           │ CRC-32 u32 BE        │     of magic + bitmap
//!           ├──────────────────────┤ ◄── blob 2 …
//!           │ …                    │
//!           ├──────────────────────┤ footer:
//!           │ magic "PFA1"         │
//!           │ footer payload JSON  │ {"blobs":[{type, fields, snapshot-id, sequence-number,
//!           │                      │   offset, length, properties}], "properties":{…}}
//!           │ payload size i32 LE  │
//!           │ flags 4 bytes = 0    │ (bit 0 of byte 0: compressed footer; never set)
//!           │ magic "PFA1"         │
//!           └──────────────────────┘
//! ```
//!
//! A `deletion-vector-v1` blob is byte for byte one frame of a Delta DV file
//! (`[dataSize BE][bitmap][CRC BE]`, see [`crate::format::file`]): the Iceberg
//! spec chose its layout for that. Pure: bytes in, bytes out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::format::bitmap::PORTABLE_MAGIC;

/// File magic at both ends ("Puffin Fratercula arctica, version 1").
pub const MAGIC: [u8; 4] = *b"PFA1";
const MAGIC_LEN: usize = 4;
/// Bytes after the footer payload: payload size (4), flags (4), magic (4).
const FOOTER_TAIL_LEN: usize = 12;
/// The blob type of a deletion vector.
pub const DV_BLOB_TYPE: &str = "deletion-vector-v1";
/// Reserved field id of `_pos`, the column a deletion vector applies to.
pub const ROW_POSITION_FIELD_ID: i32 = 2_147_483_645;
/// Blob property: the data file the DV applies to.
pub const REFERENCED_DATA_FILE: &str = "referenced-data-file";
/// Blob property: the number of deleted positions.
pub const CARDINALITY: &str = "cardinality";
/// Footer property naming the writer.
pub const CREATED_BY: &str = "created-by";
/// Bytes of the big-endian length before a DV blob's magic.
const LENGTH_LEN: usize = 4;
/// Bytes of the big-endian CRC-32 after a DV blob's bitmap.
const CRC_LEN: usize = 4;

/// One blob as the footer lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobMetadata {
    #[serde(rename = "type")]
    pub kind: String,
    pub fields: Vec<i32>,
    #[serde(rename = "snapshot-id")]
    pub snapshot_id: i64,
    #[serde(rename = "sequence-number")]
    pub sequence_number: i64,
    pub offset: u64,
    pub length: u64,
    #[serde(
        rename = "compression-codec",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub compression_codec: Option<String>,
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Footer {
    blobs: Vec<BlobMetadata>,
    #[serde(default)]
    properties: BTreeMap<String, String>,
}

/// Where a blob went: a delete manifest entry's `content_offset` and
/// `content_size_in_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobSlot {
    pub offset: u64,
    pub length: u64,
}

/// Builds one Puffin file of deletion vectors in memory.
#[derive(Debug)]
pub struct PuffinWriter {
    buf: Vec<u8>,
    blobs: Vec<BlobMetadata>,
}

impl Default for PuffinWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl PuffinWriter {
    pub fn new() -> Self {
        PuffinWriter {
            buf: MAGIC.to_vec(),
            blobs: Vec::new(),
        }
    }

    /// Append the DV of `referenced_data_file` whose Delta bitmap bytes
    /// (RoaringBitmapArray, portable layout: magic then 64-bit roaring) are
    /// `bitmap`, holding `cardinality` rows. The blob is framed exactly as a
    /// Delta DV file frame.
    pub fn add_dv(
        &mut self,
        referenced_data_file: &str,
        bitmap: &[u8],
        cardinality: u64,
    ) -> Result<BlobSlot> {
        let magic = bitmap.get(..4).unwrap_or_default();
        if magic != PORTABLE_MAGIC.to_le_bytes() {
            return Err(Error::InvalidArgument(format!(
                "deletion vector of {referenced_data_file}: an Iceberg deletion-vector-v1 blob \
                 needs the portable layout (magic {:02X?}), found {magic:02X?}",
                PORTABLE_MAGIC.to_le_bytes()
            )));
        }
        let length = u32::try_from(bitmap.len()).map_err(|_| {
            Error::InvalidArgument(format!(
                "deletion vector of {referenced_data_file} has {} bytes, more than a blob's \
                 4-byte length holds",
                bitmap.len()
            ))
        })?;
        let offset = self.buf.len() as u64;
        self.buf.extend_from_slice(&length.to_be_bytes());
        self.buf.extend_from_slice(bitmap);
        self.buf
            .extend_from_slice(&crc32fast::hash(bitmap).to_be_bytes());
        let slot = BlobSlot {
            offset,
            length: self.buf.len() as u64 - offset,
        };
        self.blobs.push(BlobMetadata {
            kind: DV_BLOB_TYPE.to_string(),
            fields: vec![ROW_POSITION_FIELD_ID],
            snapshot_id: -1,
            sequence_number: -1,
            offset: slot.offset,
            length: slot.length,
            compression_codec: None,
            properties: BTreeMap::from([
                (
                    REFERENCED_DATA_FILE.to_string(),
                    referenced_data_file.to_string(),
                ),
                (CARDINALITY.to_string(), cardinality.to_string()),
            ]),
        });
        Ok(slot)
    }

    /// Number of blobs so far.
    pub fn len(&self) -> usize {
        self.blobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.blobs.is_empty()
    }

    /// Write the footer and return the file's bytes.
    pub fn finish(self) -> Result<Vec<u8>> {
        let PuffinWriter { mut buf, blobs } = self;
        let footer = Footer {
            blobs,
            properties: BTreeMap::from([(
                CREATED_BY.to_string(),
                format!("deltadv {}", env!("CARGO_PKG_VERSION")),
            )]),
        };
        let payload = serde_json::to_vec(&footer).map_err(|e| Error::Json {
            context: "Puffin footer".to_string(),
            source: e,
        })?;
        let size = i32::try_from(payload.len()).map_err(|_| {
            Error::InvalidArgument(format!(
                "Puffin footer of {} bytes is too large",
                payload.len()
            ))
        })?;
        buf.extend_from_slice(&MAGIC);
        buf.extend_from_slice(&payload);
        buf.extend_from_slice(&size.to_le_bytes());
        buf.extend_from_slice(&[0u8; 4]);
        buf.extend_from_slice(&MAGIC);
        Ok(buf)
    }
}

fn corrupt(file: &str, detail: String) -> Error {
    Error::CorruptIceberg {
        file: file.to_string(),
        detail,
    }
}

/// The footer's blob list of the Puffin file `bytes` (named `file` in
/// errors), checked: both magics, the footer size against the file, the flags
/// (an uncompressed footer), the JSON, and every blob inside the blob area.
pub fn read_footer(bytes: &[u8], file: &str) -> Result<Vec<BlobMetadata>> {
    let len = bytes.len();
    if len < 2 * MAGIC_LEN + FOOTER_TAIL_LEN {
        return Err(corrupt(
            file,
            format!(
                "{len} bytes, fewer than the {} of an empty Puffin file",
                2 * MAGIC_LEN + FOOTER_TAIL_LEN
            ),
        ));
    }
    let slice = |at: usize, n: usize| bytes.get(at..at + n).unwrap_or_default();
    for at in [0, len - MAGIC_LEN] {
        if slice(at, MAGIC_LEN) != MAGIC {
            return Err(corrupt(
                file,
                format!(
                    "magic at byte {at}: expected {MAGIC:02X?}, found {:02X?}",
                    slice(at, MAGIC_LEN)
                ),
            ));
        }
    }
    let flags = slice(len - 8, 4);
    if flags != [0u8; 4] {
        return Err(corrupt(
            file,
            format!(
                "footer flags at byte {}: expected 00000000 (uncompressed), found {flags:02X?}",
                len - 8
            ),
        ));
    }
    let size_bytes: [u8; 4] = slice(len - FOOTER_TAIL_LEN, 4)
        .try_into()
        .map_err(|_| corrupt(file, "footer size unreadable".into()))?;
    let size = i32::from_le_bytes(size_bytes);
    let payload_end = len - FOOTER_TAIL_LEN;
    let max = payload_end.saturating_sub(2 * MAGIC_LEN);
    let size = usize::try_from(size)
        .ok()
        .filter(|&s| s <= max)
        .ok_or_else(|| {
            corrupt(
                file,
                format!(
                    "footer payload size at byte {}: expected 0..={max}, found {size}",
                    len - FOOTER_TAIL_LEN
                ),
            )
        })?;
    let footer_start = payload_end - size - MAGIC_LEN;
    if slice(footer_start, MAGIC_LEN) != MAGIC {
        return Err(corrupt(
            file,
            format!(
                "footer magic at byte {footer_start}: expected {MAGIC:02X?}, found {:02X?}",
                slice(footer_start, MAGIC_LEN)
            ),
        ));
    }
    let footer: Footer = serde_json::from_slice(slice(footer_start + MAGIC_LEN, size))
        .map_err(|e| corrupt(file, format!("footer JSON: {e}")))?;
    for blob in &footer.blobs {
        let end = blob.offset.checked_add(blob.length);
        if blob.offset < MAGIC_LEN as u64 || end.is_none_or(|e| e > footer_start as u64) {
            return Err(corrupt(
                file,
                format!(
                    "blob at offset {} of length {}: expected inside bytes {MAGIC_LEN}..{footer_start}",
                    blob.offset, blob.length
                ),
            ));
        }
    }
    Ok(footer.blobs)
}

/// The Delta bitmap bytes (magic + portable roaring) of the
/// `deletion-vector-v1` blob `blob` of the Puffin file `bytes`, checked:
/// blob type, length field, magic and CRC-32.
pub fn read_dv_blob<'a>(bytes: &'a [u8], blob: &BlobMetadata, file: &str) -> Result<&'a [u8]> {
    let at = blob.offset;
    let fail = |what: String| corrupt(file, format!("DV blob at offset {at}: {what}"));
    if blob.kind != DV_BLOB_TYPE {
        return Err(fail(format!(
            "type: expected {DV_BLOB_TYPE}, found {}",
            blob.kind
        )));
    }
    if blob.compression_codec.is_some() {
        return Err(fail(format!(
            "compression: expected none, found {:?}",
            blob.compression_codec
        )));
    }
    let start = usize::try_from(blob.offset).map_err(|_| fail("offset too large".into()))?;
    let length = usize::try_from(blob.length).map_err(|_| fail("length too large".into()))?;
    let frame = bytes
        .get(start..start.saturating_add(length))
        .ok_or_else(|| fail(format!("{length} bytes past the end of the file")))?;
    if length < LENGTH_LEN + 4 + CRC_LEN {
        return Err(fail(format!("{length} bytes, shorter than an empty DV")));
    }
    let (head, rest) = frame.split_at(LENGTH_LEN);
    let (data, crc) = rest.split_at(length - LENGTH_LEN - CRC_LEN);
    let stored_len = u32::from_be_bytes(head.try_into().map_err(|_| fail("length".into()))?);
    if stored_len as usize != data.len() {
        return Err(fail(format!(
            "length field: expected {} (blob length - 8), found {stored_len}",
            data.len()
        )));
    }
    if data.get(..4) != Some(&PORTABLE_MAGIC.to_le_bytes()[..]) {
        return Err(fail(format!(
            "magic: expected {:02X?}, found {:02X?}",
            PORTABLE_MAGIC.to_le_bytes(),
            data.get(..4)
        )));
    }
    let stored = u32::from_be_bytes(crc.try_into().map_err(|_| fail("CRC".into()))?);
    let actual = crc32fast::hash(data);
    if stored != actual {
        return Err(fail(format!(
            "CRC-32: stored {stored:#010x}, computed {actual:#010x}"
        )));
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{bitmap, file::DvFileWriter};
    use roaring::RoaringTreemap;

    fn bitmap_bytes(rows: &[u64]) -> Vec<u8> {
        let map: RoaringTreemap = rows.iter().copied().collect();
        let mut out = Vec::new();
        bitmap::serialize_into(&map, &mut out).unwrap();
        out
    }

    #[test]
    fn round_trip_and_blob_is_delta_frame() {
        let rows_a = [0u64, 5, 7, 1 << 33];
        let rows_b = [3u64];
        let (a, b) = (bitmap_bytes(&rows_a), bitmap_bytes(&rows_b));
        let mut w = PuffinWriter::new();
        let sa = w.add_dv("file:///t/a.parquet", &a, 4).unwrap();
        let sb = w.add_dv("file:///t/b.parquet", &b, 1).unwrap();
        assert_eq!(sa.offset, 4);
        assert_eq!(sb.offset, sa.offset + sa.length);
        let bytes = w.finish().unwrap();
        assert_eq!(&bytes[..4], b"PFA1");
        assert_eq!(&bytes[bytes.len() - 4..], b"PFA1");
        let blobs = read_footer(&bytes, "x.puffin").unwrap();
        assert_eq!(blobs.len(), 2);
        assert_eq!(blobs[0].fields, vec![ROW_POSITION_FIELD_ID]);
        assert_eq!(blobs[0].snapshot_id, -1);
        assert_eq!(blobs[0].sequence_number, -1);
        assert_eq!(blobs[0].properties[CARDINALITY], "4");
        assert_eq!(
            blobs[1].properties[REFERENCED_DATA_FILE],
            "file:///t/b.parquet"
        );
        let data = read_dv_blob(&bytes, &blobs[0], "x.puffin").unwrap();
        let map = bitmap::deserialize(data).unwrap();
        assert_eq!(map.iter().collect::<Vec<_>>(), rows_a.to_vec());

        // The blob equals the frame a Delta DV file holds for the same rows.
        let mut dv = DvFileWriter::new(Vec::new()).unwrap();
        let slot = dv.append(&rows_a.iter().copied().collect()).unwrap();
        let dv_file = dv.finish().unwrap();
        let (s, e) = slot.frame_range();
        assert_eq!(
            &bytes[sa.offset as usize..(sa.offset + sa.length) as usize],
            &dv_file[s as usize..e as usize]
        );
        // The footer JSON uses the spec's key names.
        let text = String::from_utf8_lossy(&bytes);
        for key in [
            "\"snapshot-id\":-1",
            "\"sequence-number\":-1",
            "\"fields\":[2147483645]",
        ] {
            assert!(text.contains(key), "{key} missing");
        }
    }

    #[test]
    fn corrupt_files_are_errors() {
        let a = bitmap_bytes(&[1, 2]);
        let mut w = PuffinWriter::new();
        w.add_dv("f", &a, 2).unwrap();
        let good = w.finish().unwrap();
        // Truncations never panic.
        for n in 0..good.len() {
            let _ = read_footer(&good[..n], "t");
        }
        let mut bad = good.clone();
        bad[0] = b'X';
        assert!(read_footer(&bad, "t")
            .unwrap_err()
            .to_string()
            .contains("magic"));
        let mut bad = good.clone();
        let n = bad.len();
        bad[n - 8] = 1;
        assert!(read_footer(&bad, "t")
            .unwrap_err()
            .to_string()
            .contains("flags"));
        let blobs = read_footer(&good, "t").unwrap();
        let mut bad = good.clone();
        bad[blobs[0].offset as usize + 9] ^= 0xFF;
        assert!(read_dv_blob(&bad, &blobs[0], "t")
            .unwrap_err()
            .to_string()
            .contains("CRC"));
        // Non-portable bitmaps are refused.
        let mut w = PuffinWriter::new();
        assert!(w.add_dv("f", &[0, 0, 0, 0, 1], 1).is_err());
    }
}
