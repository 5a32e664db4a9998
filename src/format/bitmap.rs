//! RoaringBitmapArray: the bytes of one deletion vector.
//!
//! Portable layout (the only one we write), all little-endian:
//!
//! ```text
//! ┌──────────────┬─────────────────────┬──────────────────────────────────────────┐
//! │ magic u32 LE │ bucket count u64 LE │ per bucket, keys strictly ascending:     │
//! │ 1681511377   │                     │   key u32 LE (high 32 bits of the row)   │
//! │              │                     │   32-bit RoaringBitmap (portable format) │
//! └──────────────┴─────────────────────┴──────────────────────────────────────────┘
//!   bytes 0..4       bytes 4..12          bytes 12..
//! ```
//!
//! This is the 64-bit "portable" layout of the RoaringFormatSpec with a magic in
//! front, i.e. exactly what `roaring::RoaringTreemap::serialize_into` writes.
//!
//! Older native layout (read only), header **big-endian**:
//!
//! ```text
//! ┌──────────────┬───────────────────┬────────────────────────────────────────────┐
//! │ magic u32 BE │ bitmap count i32  │ per bitmap i = 0, 1, …: size i32 BE, then  │
//! │ 1681511376   │ BE                │ `size` bytes of a portable RoaringBitmap;  │
//! │              │                   │ its key is its position i                  │
//! └──────────────┴───────────────────┴────────────────────────────────────────────┘
//! ```
//!
//! Decoding validates everything: magic, counts against the bytes actually
//! present (so a lying header cannot trigger a huge allocation), ascending keys
//! with the top bit clear, each 32-bit bitmap through roaring's checked
//! decoder, and no trailing bytes.

use std::collections::TryReserveError;
use std::io::Cursor;

use roaring::{RoaringBitmap, RoaringTreemap};

use crate::error::{Error, Result};

/// Magic of the portable layout (little-endian on disk).
pub const PORTABLE_MAGIC: u32 = 1_681_511_377;
/// Magic of the older native layout (big-endian on disk).
pub const NATIVE_MAGIC: u32 = 1_681_511_376;
/// Largest allowed bucket key: the reference keeps the top bit clear.
pub const MAX_KEY: u32 = i32::MAX as u32;
/// Largest row index a deletion vector can hold.
pub const MAX_ROW_INDEX: u64 = ((MAX_KEY as u64) << 32) | u32::MAX as u64;

const MAGIC_LEN: usize = 4;
const PORTABLE_COUNT_LEN: usize = 8;
const KEY_LEN: usize = 4;
const NATIVE_COUNT_LEN: usize = 4;
const NATIVE_SIZE_LEN: usize = 4;
/// Smallest serialized 32-bit RoaringBitmap: cookie (4) + container count (4).
const MIN_BITMAP_LEN: usize = 8;

fn read_array<const N: usize>(bytes: &[u8], at: usize, what: &'static str) -> Result<[u8; N]> {
    bytes
        .get(at..at.saturating_add(N))
        .and_then(|s| <[u8; N]>::try_from(s).ok())
        .ok_or_else(|| {
            Error::corrupt(
                at as u64,
                what,
                format!("{N} bytes"),
                format!("{} bytes left", bytes.len().saturating_sub(at)),
            )
        })
}

/// Decode one 32-bit portable RoaringBitmap from `bytes[at..end]`.
/// Returns the bitmap and the number of bytes it used.
fn decode_bitmap32(bytes: &[u8], at: usize, end: usize) -> Result<(RoaringBitmap, usize)> {
    let slice = bytes.get(at..end).ok_or_else(|| {
        Error::corrupt(
            at as u64,
            "32-bit roaring bitmap",
            format!("bytes {at}..{end}"),
            format!("{} bytes", bytes.len()),
        )
    })?;
    let mut cursor = Cursor::new(slice);
    let bitmap = RoaringBitmap::deserialize_from(&mut cursor).map_err(|e| {
        Error::corrupt(
            at as u64,
            "32-bit roaring bitmap",
            "a valid portable RoaringBitmap",
            e,
        )
    })?;
    Ok((bitmap, cursor.position() as usize))
}

/// Decode a RoaringBitmapArray (portable, or the older native layout).
pub fn deserialize(bytes: &[u8]) -> Result<RoaringTreemap> {
    let magic = read_array::<MAGIC_LEN>(bytes, 0, "magic")?;
    if u32::from_le_bytes(magic) == PORTABLE_MAGIC {
        deserialize_portable(bytes)
    } else if u32::from_be_bytes(magic) == NATIVE_MAGIC {
        deserialize_native(bytes)
    } else {
        Err(Error::corrupt(
            0,
            "magic",
            format!("{PORTABLE_MAGIC} (portable) or {NATIVE_MAGIC} (native)"),
            u32::from_le_bytes(magic),
        ))
    }
}

fn deserialize_portable(bytes: &[u8]) -> Result<RoaringTreemap> {
    let mut at = MAGIC_LEN;
    let count = u64::from_le_bytes(read_array(bytes, at, "bucket count")?);
    at += PORTABLE_COUNT_LEN;
    let room = (bytes.len() - at) / (KEY_LEN + MIN_BITMAP_LEN);
    if count > room as u64 {
        return Err(Error::corrupt(
            MAGIC_LEN as u64,
            "bucket count",
            format!("at most {room} buckets in {} bytes", bytes.len()),
            count,
        ));
    }
    let mut buckets = Vec::with_capacity(count as usize);
    let mut previous: Option<u32> = None;
    for _ in 0..count {
        let key = u32::from_le_bytes(read_array(bytes, at, "bucket key")?);
        check_key(key, previous, at)?;
        previous = Some(key);
        at += KEY_LEN;
        let (bitmap, used) = decode_bitmap32(bytes, at, bytes.len())?;
        at += used;
        buckets.push((key, bitmap));
    }
    finish(bytes, at, buckets)
}

/// The buckets, if the bitmap ended exactly at `at` (no trailing bytes).
fn finish(bytes: &[u8], at: usize, buckets: Vec<(u32, RoaringBitmap)>) -> Result<RoaringTreemap> {
    if at != bytes.len() {
        return Err(Error::corrupt(
            at as u64,
            "end of bitmap",
            format!("{at} bytes"),
            format!("{} bytes ({} trailing)", bytes.len(), bytes.len() - at),
        ));
    }
    Ok(RoaringTreemap::from_bitmaps(buckets))
}

pub(crate) fn check_key(key: u32, previous: Option<u32>, at: usize) -> Result<()> {
    if key > MAX_KEY {
        return Err(Error::corrupt(
            at as u64,
            "bucket key",
            format!("at most {MAX_KEY} (top bit clear)"),
            key,
        ));
    }
    if let Some(prev) = previous {
        if key <= prev {
            return Err(Error::corrupt(
                at as u64,
                "bucket key",
                format!("greater than previous key {prev}"),
                key,
            ));
        }
    }
    Ok(())
}

fn deserialize_native(bytes: &[u8]) -> Result<RoaringTreemap> {
    let mut at = MAGIC_LEN;
    let count = i32::from_be_bytes(read_array(bytes, at, "bitmap count")?);
    at += NATIVE_COUNT_LEN;
    let room = (bytes.len() - at) / (NATIVE_SIZE_LEN + MIN_BITMAP_LEN);
    if count < 0 || count as usize > room {
        return Err(Error::corrupt(
            MAGIC_LEN as u64,
            "bitmap count",
            format!("0..={room} for {} bytes", bytes.len()),
            count,
        ));
    }
    let mut buckets = Vec::with_capacity(count as usize);
    for key in 0..count as u32 {
        let size = i32::from_be_bytes(read_array(bytes, at, "bitmap size")?);
        let size_at = at;
        at += NATIVE_SIZE_LEN;
        let remaining = bytes.len() - at;
        if size < 0 || size as usize > remaining {
            return Err(Error::corrupt(
                size_at as u64,
                "bitmap size",
                format!("0..={remaining}"),
                size,
            ));
        }
        let end = at + size as usize;
        let (bitmap, used) = decode_bitmap32(bytes, at, end)?;
        if used != size as usize {
            return Err(Error::corrupt(
                at as u64,
                "bitmap length",
                format!("{size} bytes"),
                format!("{used} bytes"),
            ));
        }
        at = end;
        if !bitmap.is_empty() {
            buckets.push((key, bitmap));
        }
    }
    finish(bytes, at, buckets)
}

/// Refuse row indexes the format cannot carry (bucket key with the top bit set).
pub fn check_writable(map: &RoaringTreemap) -> Result<()> {
    match map.max() {
        Some(max) if max > MAX_ROW_INDEX => Err(Error::InvalidArgument(format!(
            "row index {max} exceeds the largest storable row index {MAX_ROW_INDEX}"
        ))),
        _ => Ok(()),
    }
}

/// All row indexes, ascending, 32-bit bucket by bucket. Buckets whose rows
/// sit mostly in run containers are filled run by run (a bulk fill per run);
/// the others row by row. roaring 0.12's bulk `next_many` is not used: it
/// overflows on run containers. The output is allocated up front; an
/// allocation that fails (a set of billions of rows) is an error, not an abort.
pub fn to_vec(map: &RoaringTreemap) -> std::result::Result<Vec<u64>, TryReserveError> {
    let mut out = Vec::new();
    out.try_reserve_exact(usize::try_from(map.len()).unwrap_or(usize::MAX))?;
    for (high, bitmap) in map.bitmaps() {
        let high = u64::from(high) << 32;
        let stats = bitmap.statistics();
        if stats.n_values_run_containers * 2 >= bitmap.len() {
            let mut it = bitmap.iter();
            while let Some(run) = it.next_range() {
                out.extend((high | u64::from(*run.start()))..=(high | u64::from(*run.end())));
            }
        } else {
            out.extend(bitmap.iter().map(|low| high | u64::from(low)));
        }
    }
    Ok(out)
}

/// All row indexes, ascending, written into `out` (memory allocated
/// elsewhere, such as a numpy array), which must have room for exactly
/// `map.len()` rows ([`Error::InvalidArgument`] otherwise, nothing written).
pub fn write_to_slice(map: &RoaringTreemap, out: &mut [u64]) -> Result<()> {
    if map.len() != out.len() as u64 {
        return Err(Error::InvalidArgument(format!(
            "the set holds {} rows, the output has room for {}",
            map.len(),
            out.len()
        )));
    }
    for (slot, row) in out.iter_mut().zip(map.iter()) {
        *slot = row;
    }
    Ok(())
}

/// Size in bytes of [`serialize`]'s output.
pub fn serialized_size(map: &RoaringTreemap) -> usize {
    MAGIC_LEN + map.serialized_size()
}

/// Append the portable layout of `map` to `out`.
pub fn serialize_into(map: &RoaringTreemap, out: &mut Vec<u8>) -> Result<()> {
    check_writable(map)?;
    out.reserve(serialized_size(map));
    out.extend_from_slice(&PORTABLE_MAGIC.to_le_bytes());
    map.serialize_into(&mut *out).map_err(|source| Error::Io {
        path: "<memory>".to_string(),
        source,
    })
}

/// The portable layout of `map`.
pub fn serialize(map: &RoaringTreemap) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    serialize_into(map, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows written into a slice are those `to_vec` lists (runs, arrays
    /// and bitmaps, across 32-bit buckets); a slice of another length is
    /// refused, untouched.
    #[test]
    fn rows_written_into_a_slice_equal_the_listed_rows() {
        let mut map: RoaringTreemap = (0..70_000u64).step_by(3).collect();
        map.insert_range((1 << 32) + 10..(1 << 32) + 100_000);
        map.insert((9 << 32) + 1);
        let listed = to_vec(&map).unwrap();
        let mut out = vec![0u64; listed.len()];
        write_to_slice(&map, &mut out).unwrap();
        assert_eq!(out, listed);
        let mut short = vec![7u64; listed.len() - 1];
        let err = write_to_slice(&map, &mut short).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(short.iter().all(|&v| v == 7));
    }

    #[test]
    fn round_trip_across_buckets() {
        let map: RoaringTreemap = [0u64, 5, 70_000, 1 << 32, (7 << 32) + 9]
            .into_iter()
            .collect();
        let bytes = serialize(&map).unwrap();
        assert_eq!(bytes.len(), serialized_size(&map));
        assert_eq!(&bytes[..4], &PORTABLE_MAGIC.to_le_bytes());
        assert_eq!(deserialize(&bytes).unwrap(), map);
    }

    #[test]
    fn rejects_top_bit_key_on_write_and_read() {
        let map: RoaringTreemap = [1u64 << 63].into_iter().collect();
        assert!(serialize(&map).is_err());
        let mut bytes = PORTABLE_MAGIC.to_le_bytes().to_vec();
        map.serialize_into(&mut bytes).unwrap();
        let err = deserialize(&bytes).unwrap_err().to_string();
        assert!(err.contains("bucket key"), "{err}");
    }

    #[test]
    fn rejects_descending_keys_and_trailing_bytes() {
        let a: RoaringTreemap = [(2u64 << 32) + 1].into_iter().collect();
        let b: RoaringTreemap = [(1u64 << 32) + 1].into_iter().collect();
        let mut bytes = PORTABLE_MAGIC.to_le_bytes().to_vec();
        bytes.extend_from_slice(&2u64.to_le_bytes());
        for m in [&a, &b] {
            let mut one = Vec::new();
            m.serialize_into(&mut one).unwrap();
            bytes.extend_from_slice(&one[8..]); // key + bitmap, without the count
        }
        assert!(deserialize(&bytes)
            .unwrap_err()
            .to_string()
            .contains("greater than previous"));

        let mut ok = serialize(&a).unwrap();
        ok.push(0);
        assert!(deserialize(&ok)
            .unwrap_err()
            .to_string()
            .contains("trailing"));
    }

    #[test]
    fn huge_count_fails_without_allocating() {
        let mut bytes = PORTABLE_MAGIC.to_le_bytes().to_vec();
        bytes.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(deserialize(&bytes)
            .unwrap_err()
            .to_string()
            .contains("bucket count"));
    }
}
