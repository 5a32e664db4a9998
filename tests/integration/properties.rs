//! Property tests: bitmap, Z85 and DV-file round trips.

use deltadv::codec::z85;
use deltadv::format::{bitmap, file};
use deltadv::{DvFileWriter, RoaringTreemap};
use proptest::prelude::*;

/// Row-index sets shaped like real DVs: sparse points, dense runs, and indexes
/// beyond 2^32 (several buckets).
fn row_sets() -> impl Strategy<Value = RoaringTreemap> {
    let point = prop_oneof![0u64..100_000, 0u64..(1 << 33), 0u64..=bitmap::MAX_ROW_INDEX,];
    let run = (0u64..(1 << 34), 1u64..5_000);
    (
        prop::collection::vec(point, 0..200),
        prop::collection::vec(run, 0..4),
    )
        .prop_map(|(points, runs)| {
            let mut map: RoaringTreemap = points.into_iter().collect();
            for (start, len) in runs {
                map.insert_range(start..start + len);
            }
            map
        })
}

/// The older native layout of `map` (keys < 2^31 and few of them), built by hand
/// from the layout in the protocol: BE magic, BE count, per key BE size + bitmap.
fn native_bytes(map: &RoaringTreemap) -> Vec<u8> {
    let buckets: Vec<(u32, roaring::RoaringBitmap)> =
        map.bitmaps().map(|(k, b)| (k, b.clone())).collect();
    let count = buckets.last().map_or(0, |(k, _)| k + 1);
    let mut out = bitmap::NATIVE_MAGIC.to_be_bytes().to_vec();
    out.extend_from_slice(&(count as i32).to_be_bytes());
    for key in 0..count {
        let bm = buckets
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, b)| b.clone())
            .unwrap_or_default();
        let mut bytes = Vec::new();
        bm.serialize_into(&mut bytes).unwrap();
        out.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
        out.extend_from_slice(&bytes);
    }
    out
}

proptest! {
    #[test]
    fn bitmap_round_trips(map in row_sets()) {
        let bytes = bitmap::serialize(&map).unwrap();
        prop_assert_eq!(bytes.len(), bitmap::serialized_size(&map));
        prop_assert_eq!(bitmap::deserialize(&bytes).unwrap(), map);
    }

    #[test]
    fn to_vec_lists_rows_in_order(map in row_sets(), optimize in any::<bool>()) {
        let mut map = map;
        if optimize {
            map.optimize(); // run containers
        }
        prop_assert_eq!(bitmap::to_vec(&map).unwrap(), map.iter().collect::<Vec<u64>>());
    }

    #[test]
    fn native_layout_decodes(points in prop::collection::vec(0u64..(3 << 32), 0..100)) {
        let map: RoaringTreemap = points.into_iter().collect();
        prop_assert_eq!(bitmap::deserialize(&native_bytes(&map)).unwrap(), map);
    }

    #[test]
    fn z85_round_trips(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let text = z85::encode(&bytes);
        prop_assert_eq!(text.len(), bytes.len().div_ceil(4) * 5);
        prop_assert_eq!(z85::decode(&text, bytes.len()).unwrap(), bytes);
    }

    #[test]
    fn dv_file_with_many_dvs_round_trips(maps in prop::collection::vec(row_sets(), 1..12)) {
        let mut writer = DvFileWriter::new(Vec::new()).unwrap();
        let slots: Vec<_> = maps.iter().map(|m| writer.append(m).unwrap()).collect();
        let bytes = writer.finish().unwrap();
        prop_assert_eq!(slots[0].offset, file::FIRST_DV_OFFSET);
        for (map, slot) in maps.iter().zip(&slots) {
            // From the whole file…
            prop_assert_eq!(&file::read_dv(&bytes, 0, slot, "f.bin").unwrap(), map);
            // …and from exactly the DV's own byte range (one ranged GET).
            let (start, end) = slot.frame_range();
            let frame = &bytes[start as usize..end as usize];
            prop_assert_eq!(&file::read_dv(frame, start, slot, "f.bin").unwrap(), map);
            // The serialized form holds the same rows, checked the same way.
            let serialized = file::read_dv_serialized(frame, start, slot, "f.bin").unwrap();
            prop_assert_eq!(serialized.cardinality, map.len());
            prop_assert_eq!(&bitmap::deserialize(&serialized.bytes).unwrap(), map);
        }
        prop_assert_eq!(slots.last().unwrap().frame_range().1, bytes.len() as u64);
    }
}

#[test]
fn to_vec_on_dense_and_mixed_containers() {
    // Bitmap containers (> 4096 rows per 64K), alternating rows, random 50%, and
    // several buckets, each compared with plain iteration.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut map: RoaringTreemap = (0..200_000u64).step_by(2).collect();
    map.extend((300_000..700_000u64).filter(|_| next() % 2 == 0));
    map.extend((1u64 << 32..(1u64 << 32) + 70_000).filter(|_| next() % 7 != 0));
    for optimize in [false, true] {
        let mut m = map.clone();
        if optimize {
            m.optimize();
        }
        assert_eq!(bitmap::to_vec(&m).unwrap(), m.iter().collect::<Vec<u64>>());
    }
}

#[test]
fn to_vec_on_run_containers() {
    let mut map = RoaringTreemap::new();
    map.insert_range(10..1_000_010);
    map.optimize();
    let rows = bitmap::to_vec(&map).unwrap();
    assert_eq!(rows.len(), 1_000_000);
    assert_eq!(rows, (10..1_000_010).collect::<Vec<u64>>());
}

#[test]
fn z85_every_length_0_to_64() {
    for len in 0..=64usize {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
        let text = z85::encode(&bytes);
        assert_eq!(z85::decode(&text, len).unwrap(), bytes, "length {len}");
    }
}

#[test]
fn protocol_md_native_example_decodes() {
    // The inline example printed in Delta's PROTOCOL.md (native layout, 40 bytes).
    let bytes = z85::decode("wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", 40).unwrap();
    let rows: Vec<u64> = bitmap::deserialize(&bytes).unwrap().iter().collect();
    assert_eq!(rows, vec![3, 4, 7, 11, 18, 29]);
}
