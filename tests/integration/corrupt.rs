//! Corrupt input: each defect is its own clear error, never a panic.

use std::fs;

use deltadv::codec::z85;
use deltadv::format::{bitmap, file};
use deltadv::table::dv;
use deltadv::write::dv_files;
use deltadv::{DeletionVectorDescriptor, DvFileWriter, Error, RoaringTreemap};

fn sample() -> RoaringTreemap {
    [3u64, 4, 7, 11, 18, 29, 1 << 32].into_iter().collect()
}

/// A DV file with one DV, written into a temp table root; returns (root, descriptor, bytes).
fn one_dv_table() -> (tempfile::TempDir, DeletionVectorDescriptor, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let d = dv_files::write_file(root, "", &[sample()])
        .unwrap()
        .remove(0);
    let path = d.absolute_path(root).unwrap();
    let bytes = fs::read(&path).unwrap();
    (dir, d, bytes)
}

/// Write `bytes` over the table's DV file and load it through the descriptor.
fn load_with(dir: &tempfile::TempDir, d: &DeletionVectorDescriptor, bytes: &[u8]) -> Error {
    let root = dir.path().to_str().unwrap();
    fs::write(d.absolute_path(root).unwrap(), bytes).unwrap();
    both_fail(d, root)
}

/// Loading as a bitmap and as checked serialized bytes fail alike: the same
/// error, word for word (the bytes path skips no check).
fn both_fail(d: &DeletionVectorDescriptor, root: &str) -> Error {
    let as_bitmap = dv::load(d, root).unwrap_err();
    let as_bytes = dv::load_serialized(d, root, &Default::default()).unwrap_err();
    assert_eq!(as_bitmap.to_string(), as_bytes.to_string());
    as_bitmap
}

fn message(e: &Error) -> String {
    let m = e.to_string();
    assert!(
        matches!(e, Error::CorruptDeletionVector { .. }),
        "not a corruption error: {m}"
    );
    m
}

#[test]
fn intact_file_loads() {
    let (dir, d, _) = one_dv_table();
    let root = dir.path().to_str().unwrap();
    assert_eq!(dv::load(&d, root).unwrap(), sample());
    let serialized = dv::load_serialized(&d, root, &Default::default()).unwrap();
    assert_eq!(serialized.cardinality, 7);
    assert_eq!(bitmap::deserialize(&serialized.bytes).unwrap(), sample());
    let inline = DeletionVectorDescriptor::inline(&sample()).unwrap();
    let serialized = inline.inline_serialized().unwrap();
    assert_eq!(serialized.bytes, bitmap::serialize(&sample()).unwrap());
    assert_eq!(serialized.cardinality, 7);
}

#[test]
fn wrong_version() {
    let (dir, d, mut bytes) = one_dv_table();
    bytes[0] = 2;
    let m = message(&load_with(&dir, &d, &bytes));
    assert!(
        m.contains("format version") && m.contains("expected 1, found 2"),
        "{m}"
    );
    assert!(m.contains(".bin"), "names the file: {m}");
}

#[test]
fn size_mismatch() {
    let (dir, d, mut bytes) = one_dv_table();
    bytes[4] ^= 1; // low byte of the big-endian dataSize
    let m = message(&load_with(&dir, &d, &bytes));
    assert!(m.contains("dataSize") && m.contains("at byte 1"), "{m}");
}

#[test]
fn bad_magic_with_valid_crc() {
    let (dir, d, mut bytes) = one_dv_table();
    let size = d.size_in_bytes() as usize;
    bytes[5] ^= 0xFF; // first magic byte
    let crc = crc32fast::hash(&bytes[5..5 + size]);
    bytes[5 + size..9 + size].copy_from_slice(&crc.to_be_bytes());
    let m = message(&load_with(&dir, &d, &bytes));
    assert!(m.contains("magic") && m.contains("1681511377"), "{m}");
}

#[test]
fn crc_mismatch() {
    let (dir, d, mut bytes) = one_dv_table();
    let last = bytes.len() - 6; // inside the bitmap
    bytes[last] ^= 0x40;
    let m = message(&load_with(&dir, &d, &bytes));
    assert!(
        m.contains("CRC-32") && m.contains("stored") && m.contains("computed"),
        "{m}"
    );
}

#[test]
fn cardinality_mismatch() {
    let (dir, d, _) = one_dv_table();
    let root = dir.path().to_str().unwrap();
    let lying = DeletionVectorDescriptor::try_new(
        "u",
        d.path_or_inline_dv(),
        Some(1),
        i64::from(d.size_in_bytes()),
        99,
    )
    .unwrap();
    let m = message(&both_fail(&lying, root));
    assert!(
        m.contains("cardinality") && m.contains("expected 99") && m.contains("found 7"),
        "{m}"
    );
    let inline = DeletionVectorDescriptor::inline(&sample()).unwrap();
    let lying_inline = DeletionVectorDescriptor::try_new(
        "i",
        inline.path_or_inline_dv(),
        None,
        i64::from(inline.size_in_bytes()),
        8,
    )
    .unwrap();
    let m = message(&both_fail(&lying_inline, root));
    assert!(m.contains("expected 8") && m.contains("found 7"), "{m}");
}

#[test]
fn truncated_file() {
    let (dir, d, bytes) = one_dv_table();
    let m = message(&load_with(&dir, &d, &bytes[..bytes.len() - 3]));
    assert!(m.contains("truncated"), "{m}");
}

#[test]
fn two_gigabyte_size_on_a_hundred_byte_file_fails_fast() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let d = DeletionVectorDescriptor::try_new(
        "u",
        "ab^-aqEH.-t@S}K{vb[*k^",
        Some(1),
        i32::MAX as i64,
        5,
    )
    .unwrap();
    let path = d.absolute_path(root).unwrap();
    fs::create_dir_all(dir.path().join("ab")).unwrap();
    fs::write(&path, vec![1u8; 100]).unwrap();
    let started = std::time::Instant::now();
    let m = message(&dv::load(&d, root).unwrap_err());
    assert!(started.elapsed().as_secs() < 2);
    assert!(
        m.contains("truncated") && m.contains("only bytes 0..100"),
        "{m}"
    );
}

#[test]
fn missing_file_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let d =
        DeletionVectorDescriptor::try_new("u", "ab^-aqEH.-t@S}K{vb[*k^", Some(1), 36, 2).unwrap();
    let e = dv::load(&d, dir.path().to_str().unwrap()).unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");
}

#[test]
fn invalid_z85_characters() {
    // Rejected at construction (not in the alphabet)…
    let e = DeletionVectorDescriptor::try_new("i", "^Bg9^0rr9\"", None, 8, 1).unwrap_err();
    assert!(
        e.to_string()
            .contains("non-Z85 character '\"' at position 9"),
        "{e}"
    );
    // …and a group worth more than 2^32-1 is a corrupt inline DV at read time.
    let d = DeletionVectorDescriptor::try_new("i", "%%%%%", None, 4, 1).unwrap();
    let m = message(&d.inline_bitmap().unwrap_err());
    assert!(
        m.contains("inline deletion vector") && m.contains("exceeds 2^32-1"),
        "{m}"
    );
    assert!(z85::decode("ab\u{e9}cd", 4).is_err());
}

#[test]
fn arbitrary_garbage_never_panics() {
    // A deterministic sweep of short mutations of a valid bitmap (the fuzzer does more).
    let good = bitmap::serialize(&sample()).unwrap();
    for i in 0..good.len() {
        for flip in [0x01u8, 0x80, 0xFF] {
            let mut b = good.clone();
            b[i] ^= flip;
            let _ = bitmap::deserialize(&b);
        }
        let _ = bitmap::deserialize(&good[..i]);
    }
    let mut w = DvFileWriter::new(Vec::new()).unwrap();
    let slot = w.append(&sample()).unwrap();
    let bytes = w.finish().unwrap();
    for cut in 0..bytes.len() {
        assert!(file::read_dv(&bytes[..cut], 0, &slot, "x.bin").is_err());
    }
}

#[test]
fn offsets_near_u64_max_are_errors_not_overflows() {
    let slot = deltadv::DvSlot {
        offset: u64::MAX - 3,
        size_in_bytes: 40,
        cardinality: 1,
    };
    let e = file::read_dv(&[1u8; 64], u64::MAX - 10, &slot, "x.bin").unwrap_err();
    assert!(e.to_string().contains("DV frame"), "{e}");
}
