//! DV file frames: parse untrusted bytes, and round-trip files we wrote.
//!
//! Byte 0 (`ctl`) selects the mode.
//!
//! * `ctl & 1 == 0` — parse. The next bytes give a `DvSlot`, the rest is the
//!   buffer handed to `read_dv`:
//!   - offset: 1 byte, or (`ctl & 2`) 4 bytes LE — i.e. at most a `u32`, which
//!     is all a descriptor can carry;
//!   - sizeInBytes: picked by `ctl >> 4` from special values (0, 2^31-1,
//!     2^31, u32::MAX, …), the buffer's own frame size, or 4 raw input bytes;
//!   - cardinality: 1 byte, or (`ctl & 4`) 8 bytes LE;
//!   - `buf_start`: 0, or (`ctl & 8`) the slot offset.
//!   Property: never panics; a success returns exactly `cardinality` rows.
//!   To reach the bitmap decoder often, when `ctl & 0xF0 == 0x10` the buffer's
//!   dataSize and CRC are patched to be consistent with sizeInBytes.
//!
//! * `ctl & 1 == 1` — write then read. The rest is a list of deletion vectors
//!   built from the input (single rows in a few buckets, and row ranges);
//!   each is appended with `DvFileWriter`, then `read_dv` on the whole file
//!   (buf_start 0) and on the file from the slot's offset (buf_start = offset)
//!   must return the same set.
#![no_main]

use deltadv::format::bitmap::{MAX_KEY, MAX_ROW_INDEX};
use deltadv::format::file::{read_dv, DvFileWriter, DvSlot, CHECKSUM_LEN, SIZE_LEN};
use deltadv::RoaringTreemap;
use libfuzzer_sys::fuzz_target;

struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn bytes<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, tail) = self.0.split_first_chunk::<N>()?;
        self.0 = tail;
        Some(*head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.bytes::<1>().map(|[b]| b)
    }
    fn u32(&mut self) -> Option<u32> {
        self.bytes().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.bytes().map(u64::from_le_bytes)
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let Some(ctl) = input.u8() else {
        return;
    };
    if ctl & 1 == 0 {
        parse(ctl, input);
    } else {
        write_then_read(input);
    }
});

fn parse(ctl: u8, mut input: Input<'_>) {
    let Some(offset) = (if ctl & 2 == 0 {
        input.u8().map(u64::from)
    } else {
        input.u32().map(u64::from)
    }) else {
        return;
    };
    let Some(cardinality) = (if ctl & 4 == 0 {
        input.u8().map(u64::from)
    } else {
        input.u64()
    }) else {
        return;
    };
    let size_in_bytes = match ctl >> 4 {
        0 => 0,
        1 => u32::MAX, // placeholder, replaced by the patched frame size below
        2 => i32::MAX as u32,
        3 => i32::MAX as u32 + 1,
        4 => u32::MAX,
        5 => u32::MAX - 3,
        6 => u32::MAX - 7,
        7 => 12,
        8 => {
            let Some(b) = input.u8() else { return };
            u32::from(b)
        }
        _ => {
            let Some(v) = input.u32() else { return };
            v
        }
    };
    let buf_start = if ctl & 8 == 0 { 0 } else { offset };
    let mut buf = input.0.to_vec();
    let mut slot = DvSlot {
        offset,
        size_in_bytes,
        cardinality,
    };
    if ctl >> 4 == 1 {
        // Make dataSize and CRC consistent with the buffer, so the bitmap decoder
        // and the cardinality check are exercised on arbitrary bitmap bytes.
        let Some(local) = offset.checked_sub(buf_start) else {
            return;
        };
        let Ok(local) = usize::try_from(local) else {
            return;
        };
        let frame_overhead = (SIZE_LEN + CHECKSUM_LEN) as usize;
        let Some(data_len) = buf.len().checked_sub(local + frame_overhead) else {
            return;
        };
        let Ok(size) = i32::try_from(data_len) else {
            return;
        };
        let data_start = local + SIZE_LEN as usize;
        let crc = crc32fast::hash(&buf[data_start..data_start + data_len]);
        buf[local..data_start].copy_from_slice(&size.to_be_bytes());
        buf[data_start + data_len..].copy_from_slice(&crc.to_be_bytes());
        if buf_start == 0 {
            if let Some(first) = buf.first_mut() {
                if local > 0 {
                    *first = 1;
                }
            }
        }
        slot.size_in_bytes = size as u32;
    }
    if let Ok(map) = read_dv(&buf, buf_start, &slot, "fuzz.bin") {
        assert_eq!(map.len(), slot.cardinality, "read_dv ignored the cardinality");
    }
}

fn row(input: &mut Input<'_>) -> Option<u64> {
    let sel = input.u8()?;
    let low = u64::from(input.u32()?);
    let key = u64::from(sel >> 2);
    let high = match sel & 3 {
        0 => 0,
        1 => key,
        2 => u64::from(MAX_KEY) - key,
        // Mostly past the storable range: append must refuse it, not panic.
        _ => u64::from(MAX_KEY) + 1 + key * 0x0100_0000,
    };
    Some((high << 32) | low)
}

fn write_then_read(mut input: Input<'_>) {
    let mut maps: Vec<RoaringTreemap> = Vec::new();
    // Each DV: a count byte, then that many items; an item is a single row, or
    // (tag bit 7) a range of up to 2^17 rows to get run and bitmap containers.
    while let Some(count) = input.u8() {
        let mut map = RoaringTreemap::new();
        for _ in 0..(count & 0x1F) {
            let Some(tag) = input.u8() else { break };
            let Some(start) = row(&mut input) else { break };
            if tag & 0x80 != 0 {
                let len = u64::from(tag & 0x7F) << 10 | u64::from(tag & 0x0F);
                map.insert_range(start..start.saturating_add(len));
            } else {
                map.insert(start);
            }
        }
        maps.push(map);
        if maps.len() >= 16 {
            break;
        }
    }

    let Ok(mut writer) = DvFileWriter::new(Vec::new()) else {
        panic!("DvFileWriter::new on a Vec failed");
    };
    let mut written: Vec<(DvSlot, RoaringTreemap)> = Vec::new();
    for map in maps {
        let before = writer.position();
        match writer.append(&map) {
            Ok(slot) => {
                assert_eq!(slot.offset, before);
                assert_eq!(slot.cardinality, map.len());
                written.push((slot, map));
            }
            Err(_) => {
                assert!(
                    map.max().is_some_and(|m| m > MAX_ROW_INDEX),
                    "append refused a storable DV"
                );
                assert_eq!(writer.position(), before, "failed append moved the writer");
            }
        }
    }
    let file = match writer.finish() {
        Ok(file) => file,
        Err(e) => panic!("finish failed: {e}"),
    };
    assert_eq!(
        written.last().map_or(1, |(s, _)| s.frame_range().1),
        file.len() as u64
    );
    for (slot, map) in &written {
        match read_dv(&file, 0, slot, "fuzz.bin") {
            Ok(got) => assert_eq!(&got, map, "whole-file read differs"),
            Err(e) => panic!("whole-file read failed: {e}"),
        }
        let (start, end) = slot.frame_range();
        let frame = &file[start as usize..end as usize];
        match read_dv(frame, start, slot, "fuzz.bin") {
            Ok(got) => assert_eq!(&got, map, "single-frame read differs"),
            Err(e) => panic!("single-frame read failed: {e}"),
        }
        let tail = &file[start as usize..];
        match read_dv(tail, start, slot, "fuzz.bin") {
            Ok(got) => assert_eq!(&got, map, "coalesced-range read differs"),
            Err(e) => panic!("coalesced-range read failed: {e}"),
        }
    }
}
