//! DV files (storage types `u` and `p`): many deletion vectors in one file.
//!
//! ```text
//! offset 0   ┌─────────────────────┐
//!            │ version u8 = 1      │
//! offset 1   ├─────────────────────┤ ◄── descriptor.offset of the first DV
//!            │ dataSize i32 BE     │     (= sizeInBytes)
//!            │ bitmap bytes        │     RoaringBitmapArray, see `bitmap`
//!            │ CRC-32 u32 BE       │     java.util.zip.CRC32 of the bitmap bytes
//!            ├─────────────────────┤ ◄── offset of the next DV
//!            │ …                   │
//!            └─────────────────────┘
//! ```
//!
//! Reading one DV needs exactly `[offset, offset + 4 + sizeInBytes + 4)`.

use std::io::Write;

use roaring::RoaringTreemap;

use crate::error::{Error, Location, Result};
use crate::format::{bitmap, rows};

/// The only DV file format version.
pub const FORMAT_VERSION: u8 = 1;
/// Bytes of the version header.
pub const VERSION_LEN: u64 = 1;
/// Bytes of the big-endian `dataSize` before each bitmap.
pub const SIZE_LEN: u64 = 4;
/// Bytes of the big-endian CRC-32 after each bitmap.
pub const CHECKSUM_LEN: u64 = 4;
/// Offset of the first DV in a file (right after the version byte).
pub const FIRST_DV_OFFSET: u64 = VERSION_LEN;

/// Where one DV sits in its file and what it holds: the descriptor's
/// `offset`, `sizeInBytes` and `cardinality`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DvSlot {
    pub offset: u64,
    pub size_in_bytes: u32,
    pub cardinality: u64,
}

impl DvSlot {
    /// The byte range `[start, end)` of this DV's frame (size, bitmap, CRC).
    pub fn frame_range(&self) -> (u64, u64) {
        (
            self.offset,
            self.offset
                .saturating_add(SIZE_LEN + u64::from(self.size_in_bytes) + CHECKSUM_LEN),
        )
    }
}

/// Appends deletion vectors to one DV file.
///
/// ```
/// use deltadv::format::file::DvFileWriter;
/// let mut w = DvFileWriter::new(Vec::new()).unwrap();
/// let slot = w.append(&[3u64, 7].into_iter().collect()).unwrap();
/// assert_eq!(slot.offset, 1);
/// let bytes = w.finish();
/// ```
pub struct DvFileWriter<W: Write> {
    out: W,
    position: u64,
    scratch: Vec<u8>,
}

impl<W: Write> DvFileWriter<W> {
    /// Start a file: writes the version byte.
    pub fn new(mut out: W) -> Result<Self> {
        out.write_all(&[FORMAT_VERSION]).map_err(write_error)?;
        Ok(DvFileWriter {
            out,
            position: VERSION_LEN,
            scratch: Vec::new(),
        })
    }

    /// Bytes written so far (the offset the next DV will get).
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Append one DV; returns where it went.
    pub fn append(&mut self, map: &RoaringTreemap) -> Result<DvSlot> {
        self.scratch.clear();
        bitmap::serialize_into(map, &mut self.scratch)?;
        let size = i32::try_from(self.scratch.len()).map_err(|_| {
            Error::InvalidArgument(format!(
                "deletion vector of {} bytes exceeds the format's 2^31-1 byte limit",
                self.scratch.len()
            ))
        })?;
        let checksum = crc32fast::hash(&self.scratch);
        self.out
            .write_all(&size.to_be_bytes())
            .and_then(|()| self.out.write_all(&self.scratch))
            .and_then(|()| self.out.write_all(&checksum.to_be_bytes()))
            .map_err(write_error)?;
        let slot = DvSlot {
            offset: self.position,
            size_in_bytes: size as u32,
            cardinality: map.len(),
        };
        self.position = slot.frame_range().1;
        Ok(slot)
    }

    /// Finish and hand back the writer.
    pub fn finish(mut self) -> Result<W> {
        self.out.flush().map_err(write_error)?;
        Ok(self.out)
    }
}

fn write_error(source: std::io::Error) -> Error {
    Error::Io {
        path: "<deletion vector writer>".to_string(),
        source,
    }
}

/// The bitmap bytes of the DV described by `slot` in `buf`, which holds the
/// file's bytes starting at file position `buf_start` (a single DV frame, a
/// coalesced range covering several, or the whole file), with the file offset
/// they start at. The frame is checked, each a distinct error naming `path` and
/// the offset: the version byte (when `buf` starts at 0), that the frame lies
/// inside `buf`, dataSize equal to `sizeInBytes`, and the CRC-32. The bitmap's
/// own structure is not: [`read_dv`] and [`read_dv_serialized`] check it.
pub fn dv_payload<'a>(
    buf: &'a [u8],
    buf_start: u64,
    slot: &DvSlot,
    path: &str,
) -> Result<(&'a [u8], u64)> {
    let location = slot_location(slot, path);
    let fail = |offset: u64, what: &'static str, expected: String, actual: String| {
        Error::CorruptDeletionVector {
            location: location.clone(),
            offset,
            what,
            expected,
            actual,
        }
    };
    if buf_start == 0 {
        match buf.first() {
            Some(&FORMAT_VERSION) => {}
            Some(&v) => {
                return Err(fail(
                    0,
                    "format version",
                    FORMAT_VERSION.to_string(),
                    v.to_string(),
                ))
            }
            None => {
                return Err(fail(
                    0,
                    "format version",
                    "1 byte".into(),
                    "empty file".into(),
                ))
            }
        }
    }
    if slot.offset < FIRST_DV_OFFSET {
        return Err(fail(
            slot.offset,
            "DV offset",
            format!("at least {FIRST_DV_OFFSET}"),
            slot.offset.to_string(),
        ));
    }
    let (start, end) = slot.frame_range();
    let buf_end = buf_start.saturating_add(buf.len() as u64);
    if start < buf_start || end > buf_end {
        return Err(fail(
            start,
            "DV frame",
            format!("bytes {start}..{end}"),
            format!("only bytes {buf_start}..{buf_end} available (truncated file?)"),
        ));
    }
    let local = (start - buf_start) as usize;
    let frame = buf.get(local..(end - buf_start) as usize).ok_or_else(|| {
        fail(
            start,
            "DV frame",
            format!("bytes {start}..{end}"),
            format!("only bytes {buf_start}..{buf_end} available (truncated file?)"),
        )
    })?;
    let truncated = || {
        fail(
            start,
            "DV frame",
            format!("{} bytes", end - start),
            format!("{}", frame.len()),
        )
    };
    let (size_bytes, rest) = frame
        .split_at_checked(SIZE_LEN as usize)
        .ok_or_else(truncated)?;
    let (data, crc_bytes) = rest
        .split_at_checked(slot.size_in_bytes as usize)
        .ok_or_else(truncated)?;
    let data_size = i32::from_be_bytes(size_bytes.try_into().map_err(|_| truncated())?);
    if i64::from(data_size) != i64::from(slot.size_in_bytes) {
        return Err(fail(
            start,
            "dataSize",
            format!("{} (descriptor sizeInBytes)", slot.size_in_bytes),
            data_size.to_string(),
        ));
    }
    let stored_crc = u32::from_be_bytes(crc_bytes.try_into().map_err(|_| truncated())?);
    let actual_crc = crc32fast::hash(data);
    if stored_crc != actual_crc {
        return Err(fail(
            end - CHECKSUM_LEN,
            "CRC-32 checksum",
            format!("{stored_crc:#010x} (stored)"),
            format!("{actual_crc:#010x} (computed)"),
        ));
    }
    Ok((data, start + SIZE_LEN))
}

/// Decode the DV described by `slot` from `buf` (as [`dv_payload`]), then
/// check the bitmap (magic and structure) and its cardinality against the
/// descriptor's.
pub fn read_dv(buf: &[u8], buf_start: u64, slot: &DvSlot, path: &str) -> Result<RoaringTreemap> {
    let (data, at) = dv_payload(buf, buf_start, slot, path)?;
    let location = slot_location(slot, path);
    let map = bitmap::deserialize(data).map_err(|e| e.relocate(&location, at))?;
    check_count(map.len(), slot.cardinality, &location, at - SIZE_LEN)?;
    Ok(map)
}

/// The DV described by `slot` as its serialized bitmap, checked exactly as
/// [`read_dv`] checks it ([`rows::validate`]), without building the bitmap.
pub fn read_dv_serialized(
    buf: &[u8],
    buf_start: u64,
    slot: &DvSlot,
    path: &str,
) -> Result<SerializedDv> {
    let (data, at) = dv_payload(buf, buf_start, slot, path)?;
    let location = slot_location(slot, path);
    let rows = rows::validate(data).map_err(|e| e.relocate(&location, at))?;
    check_count(rows, slot.cardinality, &location, at - SIZE_LEN)?;
    Ok(SerializedDv {
        bytes: data.to_vec(),
        cardinality: rows,
    })
}

/// A deletion vector's RoaringBitmapArray bytes, already checked (structure,
/// payloads, the descriptor's cardinality), and the number of rows they hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SerializedDv {
    pub bytes: Vec<u8>,
    pub cardinality: u64,
}

fn slot_location(slot: &DvSlot, path: &str) -> Location {
    Location::File {
        path: path.to_string(),
        dv_offset: slot.offset,
    }
}

/// The decoded cardinality must equal the descriptor's.
pub fn check_cardinality(
    map: &RoaringTreemap,
    expected: u64,
    location: &Location,
    offset: u64,
) -> Result<()> {
    check_count(map.len(), expected, location, offset)
}

/// `actual` decoded rows must equal the descriptor's `expected` cardinality.
pub fn check_count(actual: u64, expected: u64, location: &Location, offset: u64) -> Result<()> {
    if actual != expected {
        return Err(Error::CorruptDeletionVector {
            location: location.clone(),
            offset,
            what: "cardinality",
            expected: format!("{expected} (descriptor)"),
            actual: format!("{actual} (decoded)"),
        });
    }
    Ok(())
}
