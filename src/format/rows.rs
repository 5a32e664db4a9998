//! Row indexes straight from RoaringBitmapArray bytes, without building a bitmap.
//!
//! [`bitmap::deserialize`](super::bitmap::deserialize) builds a `RoaringTreemap`
//! (one allocation per container) that set operations need. To list the rows,
//! this module walks the same bytes instead: once to check the structure and
//! count the rows, once to append every row index, ascending, to one output
//! reserved up front. Both layouts of [`bitmap`](super::bitmap) are read
//! (portable and the older native one); each holds 32-bit portable
//! RoaringBitmaps, laid out as in the RoaringFormatSpec, all little-endian:
//!
//! ```text
//! header, no run containers            header, with run containers
//! ┌────────────────────────────┐       ┌─────────────────────────────────────────┐
//! │ cookie u32 = 12346         │       │ cookie u32: low 16 bits = 12347,        │
//! │ container count u32        │       │   high 16 bits = container count - 1    │
//! └────────────────────────────┘       │ run flags: ceil(count / 8) bytes, bit i │
//!                                      │   (LSB first) set = container i is runs │
//!                                      └─────────────────────────────────────────┘
//! then, for both:
//! ┌──────────────────────────────────────────────────────────────────────────────┐
//! │ count × (key u16, cardinality - 1 u16), keys strictly ascending              │
//! │ count × offset u32: always without run containers; with them, only when      │
//! │   count >= 4 (not needed to read: the payloads follow one another in order)  │
//! │ count × payload, in key order:                                               │
//! │   run container    run count u16 (> 0), then per run: start u16, length-1 u16│
//! │   array container  cardinality <= 4096: the values, u16 ascending            │
//! │   bitmap container cardinality >  4096: 1024 u64 words, bit v set = value v  │
//! └──────────────────────────────────────────────────────────────────────────────┘
//! row index = 32-bit bucket key << 32 | container key << 16 | value
//! ```
//!
//! The checks are those of roaring's checked decoder (which
//! [`bitmap::deserialize`](super::bitmap::deserialize) uses), so both accept the
//! same bytes and list the same rows: known cookie, at most 2^16 containers,
//! container keys strictly ascending, array values strictly ascending, a bitmap's
//! set bits equal to its cardinality, runs non-empty, within 16 bits, ascending
//! and neither overlapping nor touching. Like roaring, the cardinality field of a
//! run container is not used (its runs say how many rows it holds). On top come
//! the checks of the 64-bit layout: magic, bucket keys ascending with the top bit
//! clear, counts that fit the bytes, no trailing bytes.
//!
//! The row count used to reserve the output comes from container payloads that
//! are present in the input (an array value takes 2 bytes, a bitmap container
//! 8 KiB for at most 65,536 rows, a run 4 bytes for at most 65,536 rows), so a
//! lying header fails as truncated input before anything is allocated, and the
//! output is at most 16,384 rows per input byte. A reservation that still fails
//! is [`Error::OutOfMemory`], not an abort.

use crate::error::{Error, Result};

use super::bitmap::{check_key, NATIVE_MAGIC, PORTABLE_MAGIC};

/// Cookie of a 32-bit bitmap without run containers (a full u32).
const COOKIE_NO_RUNS: u32 = 12_346;
/// Cookie of a 32-bit bitmap with run containers (the low 16 bits of the u32).
const COOKIE_RUNS: u32 = 12_347;
/// With run containers, the offset header is present from this many containers on.
const OFFSETS_FROM: usize = 4;
/// Most containers in one 32-bit bitmap (one per 16-bit key).
const MAX_CONTAINERS: usize = 1 << 16;
/// Largest cardinality stored as an array container; above it, a bitmap container.
const ARRAY_MAX: u32 = 4_096;
/// Bytes of a bitmap container: 1024 u64 words.
const BITMAP_BYTES: usize = 8_192;
/// Bytes of one container description (key u16, cardinality - 1 u16) or offset (u32).
const DESCRIPTION_LEN: usize = 4;
const OFFSET_LEN: usize = 4;
/// Bytes of one run (start u16, length - 1 u16).
const RUN_LEN: usize = 4;
/// Portable layout: magic, bucket count u64; per bucket a key u32.
const MAGIC_LEN: usize = 4;
const PORTABLE_HEADER_LEN: usize = MAGIC_LEN + 8;
const KEY_LEN: usize = 4;
/// Native layout: magic, bitmap count i32 BE; per bitmap a size i32 BE.
const NATIVE_HEADER_LEN: usize = MAGIC_LEN + 4;
const NATIVE_SIZE_LEN: usize = 4;
/// Smallest 32-bit bitmap: cookie + container count.
const MIN_BITMAP_LEN: usize = 8;

/// Number of rows in `bytes`, after every check (structure and payloads):
/// `Ok` exactly when [`decode`] succeeds, with the length it returns.
pub fn validate(bytes: &[u8]) -> Result<u64> {
    let mut counter = Counter {
        rows: 0,
        payloads: true,
    };
    walk(bytes, &mut counter)?;
    Ok(counter.rows)
}

/// All row indexes of `bytes` (a RoaringBitmapArray, either layout), ascending.
pub fn decode(bytes: &[u8]) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    decode_into(bytes, &mut out)?;
    Ok(out)
}

/// Append all row indexes of `bytes`, ascending, to `out`: one reservation of
/// the exact row count, then each container written in bulk. On error, `out`
/// may hold part of the rows.
pub fn decode_into(bytes: &[u8], out: &mut Vec<u64>) -> Result<()> {
    // First pass: structure and row count only (payload contents are checked
    // while they are written).
    let mut counter = Counter {
        rows: 0,
        payloads: false,
    };
    walk(bytes, &mut counter)?;
    let rows = counter.rows;
    let out_of_memory = || Error::OutOfMemory {
        what: "row indexes",
        bytes: rows.saturating_mul(8),
    };
    let additional = usize::try_from(rows).map_err(|_| out_of_memory())?;
    out.try_reserve_exact(additional)
        .map_err(|_| out_of_memory())?;
    let start = out.len();
    walk(bytes, &mut Writer { out: &mut *out })?;
    let written = out.len() - start;
    if written as u64 != rows {
        return Err(Error::Internal(format!(
            "deletion vector decode wrote {written} rows, its headers count {rows}"
        )));
    }
    Ok(())
}

/// Write all row indexes of `bytes`, ascending, into `out`, which must hold
/// exactly that many rows (e.g. [`validate`]'s count): for a buffer allocated
/// elsewhere, such as a numpy array. The structure is checked and the rows
/// counted before anything is written; a wrong length is then
/// [`Error::InvalidArgument`]. On a corrupt payload `out` may hold part of the rows.
pub fn decode_to_slice(bytes: &[u8], out: &mut [u64]) -> Result<()> {
    let mut counter = Counter {
        rows: 0,
        payloads: false,
    };
    walk(bytes, &mut counter)?;
    if counter.rows != out.len() as u64 {
        return Err(Error::InvalidArgument(format!(
            "deletion vector holds {} rows, the output has room for {}",
            counter.rows,
            out.len()
        )));
    }
    let mut writer = SliceWriter { rest: out };
    walk(bytes, &mut writer)?;
    if !writer.rest.is_empty() {
        return Err(Error::Internal(format!(
            "deletion vector decode left {} of {} rows unwritten",
            writer.rest.len(),
            counter.rows
        )));
    }
    Ok(())
}

/// What a walk does with each container's payload. The walker has already
/// checked the structure (lengths, keys) and the runs of run containers.
trait Sink {
    /// An array container: its values (LE u16) start at byte `at`.
    fn array(&mut self, high: u64, values: &[[u8; 2]], at: usize) -> Result<()>;
    /// A bitmap container of `cardinality` rows: its words (LE u64) start at `at`.
    fn bitmap(&mut self, high: u64, words: &[[u8; 8]], cardinality: u32, at: usize) -> Result<()>;
    /// A run container holding `cardinality` rows, its runs already checked.
    fn runs(&mut self, high: u64, runs: &[[u8; 4]], cardinality: u32) -> Result<()>;
}

/// Counts rows; with `payloads`, also checks array order and bitmap cardinality.
struct Counter {
    rows: u64,
    payloads: bool,
}

impl Sink for Counter {
    fn array(&mut self, _high: u64, values: &[[u8; 2]], at: usize) -> Result<()> {
        if self.payloads {
            check_ascending(values, at)?;
        }
        self.rows += values.len() as u64;
        Ok(())
    }

    fn bitmap(&mut self, _high: u64, words: &[[u8; 8]], cardinality: u32, at: usize) -> Result<()> {
        if self.payloads {
            check_bitmap_cardinality(words, cardinality, at)?;
        }
        self.rows += u64::from(cardinality);
        Ok(())
    }

    fn runs(&mut self, _high: u64, _runs: &[[u8; 4]], cardinality: u32) -> Result<()> {
        self.rows += u64::from(cardinality);
        Ok(())
    }
}

/// Appends rows to a vector reserved for all of them, checking payloads.
struct Writer<'a> {
    out: &'a mut Vec<u64>,
}

impl Sink for Writer<'_> {
    fn array(&mut self, high: u64, values: &[[u8; 2]], at: usize) -> Result<()> {
        check_ascending(values, at)?;
        self.out.extend(
            values
                .iter()
                .map(|v| high | u64::from(u16::from_le_bytes(*v))),
        );
        Ok(())
    }

    fn bitmap(&mut self, high: u64, words: &[[u8; 8]], cardinality: u32, at: usize) -> Result<()> {
        check_bitmap_cardinality(words, cardinality, at)?;
        let mut base = high;
        for word in words {
            let mut bits = u64::from_le_bytes(*word);
            if bits != 0 {
                // Exactly count_ones() items from a range: `extend` reserves once
                // per word and writes without a capacity check per row.
                self.out.extend((0..bits.count_ones()).map(|_| {
                    let row = base | u64::from(bits.trailing_zeros());
                    bits &= bits.wrapping_sub(1);
                    row
                }));
            }
            base += 64;
        }
        Ok(())
    }

    fn runs(&mut self, high: u64, runs: &[[u8; 4]], _cardinality: u32) -> Result<()> {
        for run in runs {
            let (start, last) = run_bounds(run);
            self.out
                .extend((high | u64::from(start))..=(high | u64::from(last)));
        }
        Ok(())
    }
}

/// Fills a slice sized for all rows (counted beforehand), checking payloads.
struct SliceWriter<'a> {
    rest: &'a mut [u64],
}

impl<'a> SliceWriter<'a> {
    /// The next `n` slots of the output.
    fn next(&mut self, n: usize) -> Result<&'a mut [u64]> {
        let rest = std::mem::take(&mut self.rest);
        let available = rest.len();
        match rest.split_at_mut_checked(n) {
            Some((head, tail)) => {
                self.rest = tail;
                Ok(head)
            }
            None => Err(Error::Internal(format!(
                "deletion vector decode needs {n} more rows of output, {available} left"
            ))),
        }
    }
}

impl Sink for SliceWriter<'_> {
    fn array(&mut self, high: u64, values: &[[u8; 2]], at: usize) -> Result<()> {
        check_ascending(values, at)?;
        let out = self.next(values.len())?;
        for (slot, v) in out.iter_mut().zip(values) {
            *slot = high | u64::from(u16::from_le_bytes(*v));
        }
        Ok(())
    }

    fn bitmap(&mut self, high: u64, words: &[[u8; 8]], cardinality: u32, at: usize) -> Result<()> {
        check_bitmap_cardinality(words, cardinality, at)?;
        let mut out = self.next(cardinality as usize)?;
        let mut base = high;
        for word in words {
            let mut bits = u64::from_le_bytes(*word);
            // `cardinality` is the total of count_ones (checked above): never short.
            let Some((head, tail)) = out.split_at_mut_checked(bits.count_ones() as usize) else {
                return Err(Error::Internal("bitmap container outgrew its count".into()));
            };
            for slot in head {
                *slot = base | u64::from(bits.trailing_zeros());
                bits &= bits.wrapping_sub(1);
            }
            out = tail;
            base += 64;
        }
        Ok(())
    }

    fn runs(&mut self, high: u64, runs: &[[u8; 4]], cardinality: u32) -> Result<()> {
        let mut out = self.next(cardinality as usize)?;
        for run in runs {
            let (start, last) = run_bounds(run);
            let Some((head, tail)) = out.split_at_mut_checked((last - start) as usize + 1) else {
                return Err(Error::Internal("run container outgrew its count".into()));
            };
            for (slot, row) in head.iter_mut().zip((high | u64::from(start))..) {
                *slot = row;
            }
            out = tail;
        }
        Ok(())
    }
}

/// First value and last value of a run (in u32: a corrupt run may pass 65535).
fn run_bounds(run: &[u8; 4]) -> (u32, u32) {
    let [s0, s1, l0, l1] = *run;
    let start = u32::from(u16::from_le_bytes([s0, s1]));
    (start, start + u32::from(u16::from_le_bytes([l0, l1])))
}

/// Array values strictly ascending (no duplicates), else an error at the first
/// value out of order.
fn check_ascending(values: &[[u8; 2]], at: usize) -> Result<()> {
    let pairs = || values.iter().zip(values.iter().skip(1));
    let ascending = |(a, b): (&[u8; 2], &[u8; 2])| u16::from_le_bytes(*a) < u16::from_le_bytes(*b);
    // Branch-free over the whole container (vectorizes); locate only on failure.
    if pairs().fold(true, |ok, pair| ok & ascending(pair)) {
        return Ok(());
    }
    let bad = pairs().position(|pair| !ascending(pair)).unwrap_or(0) + 1;
    let (previous, found) = match (values.get(bad - 1), values.get(bad)) {
        (Some(p), Some(f)) => (u16::from_le_bytes(*p), u16::from_le_bytes(*f)),
        _ => (0, 0),
    };
    Err(Error::corrupt(
        (at + 2 * bad) as u64,
        "array container value",
        format!("greater than the previous value {previous}"),
        found,
    ))
}

/// A bitmap container's set bits must number its cardinality.
fn check_bitmap_cardinality(words: &[[u8; 8]], cardinality: u32, at: usize) -> Result<()> {
    let set: u32 = words
        .iter()
        .map(|w| u64::from_le_bytes(*w).count_ones())
        .sum();
    if set != cardinality {
        return Err(Error::corrupt(
            at as u64,
            "bitmap container",
            format!("{cardinality} set bits (its cardinality)"),
            format!("{set} set bits"),
        ));
    }
    Ok(())
}

/// Runs non-overlapping, ascending, not touching, within 16 bits; returns the
/// number of rows they hold (at most 65,536).
fn check_runs(runs: &[[u8; 4]], at: usize) -> Result<u32> {
    let mut rows = 0u32;
    let mut previous_last: Option<u32> = None;
    for (i, run) in runs.iter().enumerate() {
        let (start, last) = run_bounds(run);
        let run_at = (at + i * RUN_LEN) as u64;
        if last > u32::from(u16::MAX) {
            return Err(Error::corrupt(
                run_at,
                "run",
                "a run ending at most at 65535",
                format!("{start}..={last}"),
            ));
        }
        if let Some(prev) = previous_last {
            // A run must start after a gap: roaring merges touching runs.
            if start <= prev + 1 {
                return Err(Error::corrupt(
                    run_at,
                    "run",
                    format!("a start above {}", prev + 1),
                    format!("{start}..={last}"),
                ));
            }
        }
        previous_last = Some(last);
        rows += last - start + 1;
    }
    Ok(rows)
}

/// Checked little-endian reads over `bytes`, tracking the position.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn left(&self) -> String {
        format!("{} bytes left", self.bytes.len().saturating_sub(self.at))
    }

    /// The next `len` bytes.
    fn take(&mut self, len: usize, what: &'static str) -> Result<&'a [u8]> {
        let slice = self
            .at
            .checked_add(len)
            .and_then(|end| self.bytes.get(self.at..end))
            .ok_or_else(|| {
                Error::corrupt(self.at as u64, what, format!("{len} bytes"), self.left())
            })?;
        self.at += len;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let array = self
            .bytes
            .get(self.at..)
            .and_then(|rest| rest.first_chunk::<N>())
            .copied()
            .ok_or_else(|| {
                Error::corrupt(self.at as u64, what, format!("{N} bytes"), self.left())
            })?;
        self.at += N;
        Ok(array)
    }

    fn u16(&mut self, what: &'static str) -> Result<u16> {
        self.array(what).map(u16::from_le_bytes)
    }

    fn u32(&mut self, what: &'static str) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }
}

/// Walk a RoaringBitmapArray in either layout, handing each container to `sink`.
fn walk<S: Sink>(bytes: &[u8], sink: &mut S) -> Result<()> {
    let mut r = Reader { bytes, at: 0 };
    let magic: [u8; MAGIC_LEN] = r.array("magic")?;
    if u32::from_le_bytes(magic) == PORTABLE_MAGIC {
        walk_portable(&mut r, sink)?;
    } else if u32::from_be_bytes(magic) == NATIVE_MAGIC {
        walk_native(&mut r, sink)?;
    } else {
        return Err(Error::corrupt(
            0,
            "magic",
            format!("{PORTABLE_MAGIC} (portable) or {NATIVE_MAGIC} (native)"),
            u32::from_le_bytes(magic),
        ));
    }
    if r.at != bytes.len() {
        return Err(Error::corrupt(
            r.at as u64,
            "end of bitmap",
            format!("{} bytes", r.at),
            format!(
                "{} bytes ({} trailing)",
                bytes.len(),
                bytes.len().saturating_sub(r.at)
            ),
        ));
    }
    Ok(())
}

fn walk_portable<S: Sink>(r: &mut Reader<'_>, sink: &mut S) -> Result<()> {
    let count = u64::from_le_bytes(r.array("bucket count")?);
    let room = r.bytes.len().saturating_sub(PORTABLE_HEADER_LEN) / (KEY_LEN + MIN_BITMAP_LEN);
    if count > room as u64 {
        return Err(Error::corrupt(
            MAGIC_LEN as u64,
            "bucket count",
            format!("at most {room} buckets in {} bytes", r.bytes.len()),
            count,
        ));
    }
    let mut previous = None;
    for _ in 0..count {
        let key_at = r.at;
        let key = r.u32("bucket key")?;
        check_key(key, previous, key_at)?;
        previous = Some(key);
        walk_bitmap32(r, key, sink)?;
    }
    Ok(())
}

fn walk_native<S: Sink>(r: &mut Reader<'_>, sink: &mut S) -> Result<()> {
    let count = i32::from_be_bytes(r.array("bitmap count")?);
    let room = r.bytes.len().saturating_sub(NATIVE_HEADER_LEN) / (NATIVE_SIZE_LEN + MIN_BITMAP_LEN);
    let count = u32::try_from(count)
        .ok()
        .filter(|c| *c as usize <= room)
        .ok_or_else(|| {
            Error::corrupt(
                MAGIC_LEN as u64,
                "bitmap count",
                format!("0..={room} for {} bytes", r.bytes.len()),
                count,
            )
        })?;
    for key in 0..count {
        let size_at = r.at;
        let size = i32::from_be_bytes(r.array("bitmap size")?);
        let remaining = r.bytes.len().saturating_sub(r.at);
        let size = usize::try_from(size)
            .ok()
            .filter(|s| *s <= remaining)
            .ok_or_else(|| {
                Error::corrupt(
                    size_at as u64,
                    "bitmap size",
                    format!("0..={remaining}"),
                    size,
                )
            })?;
        let end = r.at + size;
        // The bitmap must end exactly at `end`: read it from a reader cut there.
        let mut bounded = Reader {
            bytes: r.bytes.get(..end).unwrap_or_default(),
            at: r.at,
        };
        // Keys are positions below `count` <= i32::MAX = MAX_KEY: always valid.
        walk_bitmap32(&mut bounded, key, sink)?;
        if bounded.at != end {
            return Err(Error::corrupt(
                r.at as u64,
                "bitmap length",
                format!("{size} bytes"),
                format!("{} bytes", bounded.at - r.at),
            ));
        }
        r.at = end;
    }
    Ok(())
}

/// Walk one 32-bit portable RoaringBitmap at the reader's position; its rows
/// are in bucket `key`.
fn walk_bitmap32<S: Sink>(r: &mut Reader<'_>, key: u32, sink: &mut S) -> Result<()> {
    let cookie_at = r.at;
    let cookie = r.u32("cookie")?;
    let (count, run_flags, has_offsets) = if cookie == COOKIE_NO_RUNS {
        let count_at = r.at;
        let count = r.u32("container count")? as usize;
        if count > MAX_CONTAINERS {
            return Err(Error::corrupt(
                count_at as u64,
                "container count",
                format!("at most {MAX_CONTAINERS}"),
                count,
            ));
        }
        (count, None, true)
    } else if cookie & 0xFFFF == COOKIE_RUNS {
        let count = (cookie >> 16) as usize + 1;
        let flags = r.take(count.div_ceil(8), "run container flags")?;
        (count, Some(flags), count >= OFFSETS_FROM)
    } else {
        return Err(Error::corrupt(
            cookie_at as u64,
            "cookie",
            format!("{COOKIE_NO_RUNS}, or {COOKIE_RUNS} in the low 16 bits"),
            cookie,
        ));
    };
    let descriptions_at = r.at;
    let descriptions = r.take(count * DESCRIPTION_LEN, "container descriptions")?;
    if has_offsets {
        r.take(count * OFFSET_LEN, "container offsets")?;
    }
    let bucket = u64::from(key) << 32;
    let mut previous: Option<u16> = None;
    let (descriptions, _) = descriptions.as_chunks::<DESCRIPTION_LEN>();
    for (i, description) in descriptions.iter().enumerate() {
        let [k0, k1, c0, c1] = *description;
        let container_key = u16::from_le_bytes([k0, k1]);
        if let Some(prev) = previous {
            if container_key <= prev {
                return Err(Error::corrupt(
                    (descriptions_at + i * DESCRIPTION_LEN) as u64,
                    "container key",
                    format!("greater than the previous key {prev}"),
                    container_key,
                ));
            }
        }
        previous = Some(container_key);
        let high = bucket | (u64::from(container_key) << 16);
        let cardinality = u32::from(u16::from_le_bytes([c0, c1])) + 1;
        let is_run = run_flags
            .and_then(|flags| flags.get(i / 8))
            .is_some_and(|byte| byte & (1 << (i % 8)) != 0);
        if is_run {
            let runs_at = r.at;
            let n = r.u16("run count")?;
            if n == 0 {
                return Err(Error::corrupt(runs_at as u64, "run count", "at least 1", 0));
            }
            let (runs, _) = r
                .take(usize::from(n) * RUN_LEN, "runs")?
                .as_chunks::<RUN_LEN>();
            let rows = check_runs(runs, runs_at + 2)?;
            sink.runs(high, runs, rows)?;
        } else if cardinality <= ARRAY_MAX {
            let at = r.at;
            let values = r.take(cardinality as usize * 2, "array container")?;
            sink.array(high, values.as_chunks::<2>().0, at)?;
        } else {
            let at = r.at;
            let words = r.take(BITMAP_BYTES, "bitmap container")?;
            sink.bitmap(high, words.as_chunks::<8>().0, cardinality, at)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::bitmap;
    use proptest::prelude::*;
    use roaring::RoaringTreemap;

    /// A container to lay out by hand.
    #[derive(Clone, Debug)]
    enum C {
        Array(Vec<u16>),
        Bitmap(Vec<u16>),
        Runs(Vec<(u16, u16)>), // (start, last)
    }

    /// A 32-bit portable bitmap written from the spec (not by roaring), with the
    /// cookie variant chosen by the caller: `runs_cookie` forces 12347.
    fn bitmap32(containers: &[(u16, C)], runs_cookie: bool) -> Vec<u8> {
        let n = containers.len();
        let mut out = Vec::new();
        if runs_cookie {
            out.extend_from_slice(&(COOKIE_RUNS | ((n as u32 - 1) << 16)).to_le_bytes());
            let mut flags = vec![0u8; n.div_ceil(8)];
            for (i, (_, c)) in containers.iter().enumerate() {
                if matches!(c, C::Runs(_)) {
                    flags[i / 8] |= 1 << (i % 8);
                }
            }
            out.extend_from_slice(&flags);
        } else {
            out.extend_from_slice(&COOKIE_NO_RUNS.to_le_bytes());
            out.extend_from_slice(&(n as u32).to_le_bytes());
        }
        let mut payloads = Vec::new();
        for (key, c) in containers {
            let card = match c {
                C::Array(v) | C::Bitmap(v) => v.len() as u32,
                C::Runs(r) => r.iter().map(|(s, l)| u32::from(l - s) + 1).sum(),
            };
            out.extend_from_slice(&key.to_le_bytes());
            out.extend_from_slice(&((card - 1) as u16).to_le_bytes());
            let mut p = Vec::new();
            match c {
                C::Array(v) => v.iter().for_each(|x| p.extend_from_slice(&x.to_le_bytes())),
                C::Bitmap(v) => {
                    let mut words = [0u64; 1024];
                    for x in v {
                        words[usize::from(*x) / 64] |= 1 << (x % 64);
                    }
                    words
                        .iter()
                        .for_each(|w| p.extend_from_slice(&w.to_le_bytes()));
                }
                C::Runs(r) => {
                    p.extend_from_slice(&(r.len() as u16).to_le_bytes());
                    for (s, l) in r {
                        p.extend_from_slice(&s.to_le_bytes());
                        p.extend_from_slice(&(l - s).to_le_bytes());
                    }
                }
            }
            payloads.push(p);
        }
        if !runs_cookie || n >= OFFSETS_FROM {
            let mut offset = out.len() as u32 + 4 * n as u32;
            for p in &payloads {
                out.extend_from_slice(&offset.to_le_bytes());
                offset += p.len() as u32;
            }
        }
        payloads.iter().for_each(|p| out.extend_from_slice(p));
        out
    }

    fn portable(buckets: &[(u32, Vec<u8>)]) -> Vec<u8> {
        let mut out = PORTABLE_MAGIC.to_le_bytes().to_vec();
        out.extend_from_slice(&(buckets.len() as u64).to_le_bytes());
        for (key, b) in buckets {
            out.extend_from_slice(&key.to_le_bytes());
            out.extend_from_slice(b);
        }
        out
    }

    fn native(bitmaps: &[Vec<u8>]) -> Vec<u8> {
        let mut out = NATIVE_MAGIC.to_be_bytes().to_vec();
        out.extend_from_slice(&(bitmaps.len() as i32).to_be_bytes());
        for b in bitmaps {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
        out
    }

    /// The rows the roaring-based decoder lists, or its error.
    fn roaring_rows(bytes: &[u8]) -> Result<Vec<u64>> {
        bitmap::deserialize(bytes).map(|m| m.iter().collect())
    }

    /// Both decoders agree: same acceptance, same rows; `validate` agrees too.
    fn agree(bytes: &[u8]) -> Option<Vec<u64>> {
        let ours = decode(bytes);
        let theirs = roaring_rows(bytes);
        match (&ours, &theirs) {
            (Ok(a), Ok(b)) => assert_eq!(a, b),
            (Err(_), Err(_)) => {}
            _ => panic!("decoders disagree on {bytes:?}: ours {ours:?}, roaring {theirs:?}"),
        }
        match (&ours, validate(bytes)) {
            (Ok(rows), Ok(n)) => {
                assert_eq!(rows.len() as u64, n);
                let mut slice = vec![u64::MAX; rows.len()];
                decode_to_slice(bytes, &mut slice).unwrap();
                assert_eq!(&slice, rows);
            }
            (Err(_), Err(_)) => {}
            (o, v) => panic!("decode {o:?} but validate {v:?}"),
        }
        ours.ok()
    }

    fn err(bytes: &[u8]) -> String {
        let e = decode(bytes).unwrap_err().to_string();
        assert_eq!(validate(bytes).unwrap_err().to_string(), e);
        assert!(
            roaring_rows(bytes).is_err(),
            "roaring accepts what we refuse: {e}"
        );
        e
    }

    fn array() -> C {
        C::Array(vec![0, 3, 7, 4_000, 65_535])
    }
    fn dense() -> C {
        C::Bitmap((0..=u16::MAX).filter(|v| v % 3 != 1).collect())
    }
    fn runs() -> C {
        C::Runs(vec![(0, 0), (2, 9), (1_000, 65_535)])
    }

    #[test]
    fn array_bitmap_and_run_containers_both_cookies() {
        for runs_cookie in [false, true] {
            let mut cs = vec![(0u16, array()), (5, dense())];
            if runs_cookie {
                cs.push((9, runs()));
            }
            let b32 = bitmap32(&cs, runs_cookie);
            let bytes = portable(&[(0, b32.clone()), (7, b32)]);
            let rows = agree(&bytes).unwrap();
            let mut expected = Vec::new();
            for high in [0u64, 7 << 32] {
                expected.extend([0u64, 3, 7, 4_000, 65_535].map(|v| high | v));
                expected.extend(
                    (0..=65_535u64)
                        .filter(|v| v % 3 != 1)
                        .map(|v| high | 5 << 16 | v),
                );
                if runs_cookie {
                    let base = high | 9 << 16;
                    expected.push(base);
                    expected.extend((2..=9).map(|v| base | v));
                    expected.extend((1_000..=65_535).map(|v| base | v));
                }
            }
            assert_eq!(rows, expected);
        }
    }

    #[test]
    fn run_cookie_offsets_present_only_from_four_containers() {
        for n in 1..=6u16 {
            let cs: Vec<(u16, C)> = (0..n)
                .map(|k| {
                    let c = if k % 2 == 0 { runs() } else { array() };
                    (k * 3, c)
                })
                .collect();
            let bytes = portable(&[(1, bitmap32(&cs, true))]);
            let rows = agree(&bytes).unwrap();
            assert_eq!(rows.first(), Some(&(1 << 32)));
            // Without the offsets rule the payloads would be misread.
            let count: usize = cs
                .iter()
                .map(|(_, c)| match c {
                    C::Array(v) => v.len(),
                    _ => 1 + 8 + 64_536,
                })
                .sum();
            assert_eq!(rows.len(), count, "{n} containers");
        }
    }

    #[test]
    fn run_cookie_without_run_containers_and_empty_bitmaps() {
        // 12347 may flag no container as runs; 12346 may hold no container.
        let bytes = portable(&[
            (0, bitmap32(&[(2, array())], true)),
            (3, bitmap32(&[], false)),
        ]);
        assert_eq!(agree(&bytes).unwrap().len(), 5);
        let empty = portable(&[]);
        assert_eq!(agree(&empty).unwrap(), Vec::<u64>::new());
    }

    #[test]
    fn array_of_4096_and_bitmap_of_4097() {
        let a: Vec<u16> = (0..4096).map(|v| v * 16).collect();
        let b: Vec<u16> = (0..4097).map(|v| v * 15).collect();
        let bytes = portable(&[(0, bitmap32(&[(0, C::Array(a)), (1, C::Bitmap(b))], false))]);
        assert_eq!(agree(&bytes).unwrap().len(), 8193);
    }

    #[test]
    fn native_layout() {
        let one = bitmap32(&[(0, array())], false);
        let bytes = native(&[
            one.clone(),
            bitmap32(&[], false),
            bitmap32(&[(1, runs())], true),
        ]);
        let rows = agree(&bytes).unwrap();
        assert_eq!(&rows[..5], &[0, 3, 7, 4_000, 65_535]);
        assert_eq!(rows[5], (2 << 32) | (1 << 16));
        // A size that does not match the bitmap inside it.
        let mut bad = NATIVE_MAGIC.to_be_bytes().to_vec();
        bad.extend_from_slice(&1i32.to_be_bytes());
        bad.extend_from_slice(&(one.len() as i32 + 2).to_be_bytes());
        bad.extend_from_slice(&one);
        bad.extend_from_slice(&[0, 0]);
        assert!(err(&bad).contains("bitmap length"));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let b32 = bitmap32(
            &[(0, array()), (1, dense()), (2, runs()), (4, array())],
            true,
        );
        let bytes = portable(&[(0, b32.clone()), (1, bitmap32(&[(0, array())], false))]);
        agree(&bytes).unwrap();
        for len in 0..bytes.len() {
            let e = err(&bytes[..len]);
            assert!(e.contains("at byte"), "{e}");
        }
        for len in 0..bytes.len() {
            let mut longer = bytes.clone();
            longer.insert(len, 0);
            agree(&longer); // no panic; if accepted, the same rows as roaring's
        }
    }

    #[test]
    fn lying_counts_fail_before_allocating() {
        // Bucket count far beyond the bytes.
        let mut bytes = PORTABLE_MAGIC.to_le_bytes().to_vec();
        bytes.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(err(&bytes).contains("bucket count"));
        // 12346 with more than 2^16 containers.
        let mut b32 = COOKIE_NO_RUNS.to_le_bytes().to_vec();
        b32.extend_from_slice(&(MAX_CONTAINERS as u32 + 1).to_le_bytes());
        b32.resize(b32.len() + 64, 0);
        assert!(err(&portable(&[(0, b32)])).contains("container count"));
        // 2^16 containers each claiming 65,536 rows (2^32 rows, 32 GiB of
        // output), in 512 KiB of headers and no payload: truncated, no allocation.
        let mut b32 = COOKIE_NO_RUNS.to_le_bytes().to_vec();
        b32.extend_from_slice(&(MAX_CONTAINERS as u32).to_le_bytes());
        for key in 0..=u16::MAX {
            b32.extend_from_slice(&key.to_le_bytes());
            b32.extend_from_slice(&u16::MAX.to_le_bytes());
        }
        b32.resize(b32.len() + 4 * MAX_CONTAINERS, 0);
        let e = err(&portable(&[(0, b32)]));
        assert!(
            e.contains("bitmap container") && e.contains("8192 bytes"),
            "{e}"
        );
        // An array container whose cardinality outruns its values.
        let mut b32 = bitmap32(&[(0, array())], false);
        b32[10] = 200; // cardinality - 1 = 200: 201 values, only 5 present
        assert!(err(&portable(&[(0, b32)])).contains("array container"));
        // A run count beyond the bytes.
        let mut b32 = bitmap32(&[(0, runs())], true);
        let at = b32.len() - 3 * RUN_LEN - 2;
        b32[at..at + 2].copy_from_slice(&1_000u16.to_le_bytes());
        assert!(err(&portable(&[(0, b32)])).contains("runs"));
    }

    #[test]
    fn slice_of_the_wrong_length() {
        let bytes = portable(&[(
            0,
            bitmap32(&[(0, array()), (1, dense()), (2, runs())], true),
        )]);
        let n = validate(&bytes).unwrap() as usize;
        for len in [0, 3, n - 1, n + 1] {
            let mut out = vec![0; len];
            let e = decode_to_slice(&bytes, &mut out).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{len}: {e}");
        }
        // Corrupt bytes are reported as such even with a short output.
        let mut out = vec![0; 1];
        let e = decode_to_slice(&bytes[..bytes.len() - 1], &mut out).unwrap_err();
        assert!(matches!(e, Error::CorruptDeletionVector { .. }), "{e}");
    }

    #[test]
    fn huge_but_honest_output_from_few_bytes() {
        // One run container covering a whole 16-bit key: 65,536 rows from 15 bytes.
        let bytes = portable(&[(0, bitmap32(&[(0, C::Runs(vec![(0, u16::MAX)]))], true))]);
        assert_eq!(agree(&bytes).unwrap(), (0..65_536).collect::<Vec<u64>>());
    }

    #[test]
    fn bad_payloads() {
        let one = |c: C, runs_cookie| portable(&[(0, bitmap32(&[(0, c)], runs_cookie))]);
        let e = err(&one(C::Array(vec![1, 5, 5]), false));
        assert!(
            e.contains("array container value") && e.contains("at byte 36"),
            "{e}"
        );
        assert!(err(&one(C::Array(vec![9, 2]), false)).contains("previous value 9"));
        // Bitmap whose cardinality says one more than its set bits.
        let mut b32 = bitmap32(&[(0, dense())], false);
        let card = u16::from_le_bytes([b32[10], b32[11]]) + 1;
        b32[10..12].copy_from_slice(&card.to_le_bytes());
        assert!(err(&portable(&[(0, b32)])).contains("set bits"));
        for bad in [
            vec![(5, 9), (7, 12)],  // overlapping
            vec![(5, 9), (10, 12)], // touching
            vec![(5, 9), (2, 3)],   // descending
        ] {
            assert!(err(&one(C::Runs(bad), true)).contains("run"));
        }
        // A run past 65535 (start 65535, length - 1 = 1).
        let mut b32 = bitmap32(&[(0, C::Runs(vec![(65_534, 65_535)]))], true);
        let n = b32.len();
        b32[n - 4..n - 2].copy_from_slice(&65_535u16.to_le_bytes());
        assert!(err(&portable(&[(0, b32)])).contains("at most at 65535"));
        // Zero runs.
        let mut b32 = bitmap32(&[(0, C::Runs(vec![(1, 1)]))], true);
        b32.truncate(b32.len() - 6);
        b32.extend_from_slice(&0u16.to_le_bytes());
        assert!(err(&portable(&[(0, b32)])).contains("run count"));
    }

    #[test]
    fn bad_headers() {
        let ok = bitmap32(&[(0, array())], false);
        // Unknown cookie.
        let mut b32 = ok.clone();
        b32[0] ^= 0x10; // 12346 ^ 1 would be 12347, a valid cookie
        assert!(err(&portable(&[(0, b32)])).contains("cookie"));
        // Container keys not ascending.
        let b32 = bitmap32(&[(4, array()), (4, array())], false);
        assert!(err(&portable(&[(0, b32)])).contains("container key"));
        // Bucket keys not ascending, top bit set.
        assert!(err(&portable(&[(3, ok.clone()), (3, ok.clone())])).contains("bucket key"));
        assert!(err(&portable(&[(1 << 31, ok.clone())])).contains("top bit"));
        // Bad magic, trailing bytes.
        let mut bytes = portable(&[(0, ok.clone())]);
        bytes[0] ^= 1;
        assert!(err(&bytes).contains("magic"));
        let mut bytes = portable(&[(0, ok)]);
        bytes.push(0);
        assert!(err(&bytes).contains("trailing"));
    }

    /// Row sets shaped like DVs: points, runs, several buckets.
    fn row_sets() -> impl Strategy<Value = RoaringTreemap> {
        let point = prop_oneof![0u64..100_000, 0u64..(1 << 34), 0u64..=bitmap::MAX_ROW_INDEX];
        let run = (0u64..(1 << 34), 1u64..70_000);
        let dense = (0u64..(1 << 33), 1u32..8);
        (
            prop::collection::vec(point, 0..300),
            prop::collection::vec(run, 0..3),
            prop::collection::vec(dense, 0..3),
        )
            .prop_map(|(points, runs, dense)| {
                let mut map: RoaringTreemap = points.into_iter().collect();
                for (start, len) in runs {
                    map.insert_range(start..start + len);
                }
                for (start, step) in dense {
                    // 65,536 / step rows in one key: a bitmap container when step < 16.
                    map.extend((0..65_536u64).step_by(step as usize).map(|v| start + v));
                }
                map
            })
    }

    proptest! {
        #[test]
        fn same_rows_as_roaring(map in row_sets(), optimize in any::<bool>()) {
            let mut map = map;
            if optimize {
                map.optimize(); // run containers, cookie 12347
            }
            let bytes = bitmap::serialize(&map).unwrap();
            let rows = decode(&bytes).unwrap();
            prop_assert_eq!(validate(&bytes).unwrap(), map.len());
            prop_assert_eq!(rows, map.iter().collect::<Vec<_>>());
        }

        #[test]
        fn corrupt_bytes_like_roaring(
            map in row_sets(),
            optimize in any::<bool>(),
            flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
        ) {
            let mut map = map;
            if optimize {
                map.optimize();
            }
            let mut bytes = bitmap::serialize(&map).unwrap();
            for (at, xor) in flips {
                let at = at.index(bytes.len());
                bytes[at] ^= xor;
            }
            agree(&bytes);
        }
    }
}
