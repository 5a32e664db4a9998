//! Decode arbitrary bytes as a RoaringBitmapArray (portable or native layout).
//!
//! Property: decoding never panics, and whatever decodes re-serializes (always
//! in the portable layout) to bytes that decode to an equal treemap. The
//! direct row decoder (`format::rows`) accepts exactly the same bytes and lists
//! the treemap's rows.
#![no_main]

use deltadv::format::{bitmap, rows};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let direct = rows::decode(data);
    let Ok(map) = bitmap::deserialize(data) else {
        assert!(direct.is_err(), "rows::decode accepts bytes bitmap::deserialize refuses");
        return;
    };
    match direct {
        Ok(list) => assert!(list.iter().copied().eq(map.iter()), "rows::decode lists other rows"),
        Err(e) => panic!("rows::decode refuses bytes bitmap::deserialize accepts: {e}"),
    }
    // Decoding rejects keys with the top bit set, so the result is writable.
    let bytes = match bitmap::serialize(&map) {
        Ok(bytes) => bytes,
        Err(e) => panic!("decoded treemap does not re-serialize: {e}"),
    };
    assert_eq!(bytes.len(), bitmap::serialized_size(&map), "serialized_size mismatch");
    match bitmap::deserialize(&bytes) {
        Ok(again) => assert_eq!(again, map, "round trip changed the treemap"),
        Err(e) => panic!("re-serialized bitmap does not decode: {e}"),
    }
});
