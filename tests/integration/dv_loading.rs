//! Loading DVs through the table layer (`table::dv`): descriptors that
//! disagree with the file (checksum, size, offset past the end), inline and
//! on-disk DVs mixed in one call, and `u` paths with a random prefix.

use std::fs;

use deltadv::io::block_on;
use deltadv::table::dv;
use deltadv::write::dv_files;
use deltadv::{DeletionVectorDescriptor, Error, Location, RoaringTreemap};

use crate::fixture::{inline_dv, Table};

fn map(rows: &[u64]) -> RoaringTreemap {
    rows.iter().copied().collect()
}

/// Two DVs in one file under prefix `pf`.
fn two_dvs(t: &Table) -> Vec<DeletionVectorDescriptor> {
    block_on(dv_files::write_file_to(
        &t.store(),
        "pf",
        &[map(&[1, 2, 3]), map(&[10, 1 << 40])],
    ))
    .unwrap()
    .unwrap()
}

/// The parts of a corrupt-DV error.
fn corrupt(e: Error) -> (String, u64, u64, &'static str, String, String) {
    match e {
        Error::CorruptDeletionVector {
            location: Location::File { path, dv_offset },
            offset,
            what,
            expected,
            actual,
        } => (path, dv_offset, offset, what, expected, actual),
        other => panic!("expected a corrupt DV file, got {other:?}"),
    }
}

#[test]
fn uuid_relative_path_with_prefix() {
    let t = Table::new();
    let ds = two_dvs(&t);
    let rel = ds[0].relative_path().unwrap();
    assert!(
        rel.starts_with("pf/deletion_vector_") && rel.ends_with(".bin"),
        "{rel}"
    );
    // The prefix is the first characters of pathOrInlineDv, the rest the Z85 uuid.
    assert!(ds[0].path_or_inline_dv().starts_with("pf"));
    assert_eq!(ds[0].path_or_inline_dv().len(), 2 + 20);
    assert!(t.dir.path().join(&rel).is_file());
    assert_eq!(ds[1].relative_path(), Some(rel.clone()));
    assert_eq!(ds[0].offset(), Some(1));
    let got = block_on(dv::load_many(&t.store(), &[&ds[1], &ds[0]]))
        .unwrap()
        .unwrap();
    assert_eq!(got, [map(&[10, 1 << 40]), map(&[1, 2, 3])]);
    // Moved out of its prefix directory, the file is not found, by its path.
    let name = rel.strip_prefix("pf/").unwrap();
    fs::rename(t.dir.path().join(&rel), t.dir.path().join(name)).unwrap();
    match block_on(dv::load_one(&t.store(), &ds[0]))
        .unwrap()
        .unwrap_err()
    {
        Error::NotFound { path } => assert!(path.ends_with(&rel), "{path}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn inline_and_on_disk_in_one_call_keep_their_order() {
    let t = Table::new();
    let ds = two_dvs(&t);
    let inline = inline_dv(&[7, 8]);
    let store = t.store();
    let before = store.counts().gets;
    let got = block_on(dv::load_many(&store, &[&inline, &ds[1], &inline, &ds[0]]))
        .unwrap()
        .unwrap();
    assert_eq!(
        got,
        [
            map(&[7, 8]),
            map(&[10, 1 << 40]),
            map(&[7, 8]),
            map(&[1, 2, 3])
        ]
    );
    // Inline DVs need no request; the two DVs of one file, one ranged GET.
    assert_eq!(store.counts().gets - before, 1);
    // An inline DV through the URI-taking entry point needs no table at all.
    assert_eq!(
        dv::load(&inline, "/nonexistent/table").unwrap(),
        map(&[7, 8])
    );
}

#[test]
fn wrong_checksum_names_file_offset_and_both_values() {
    let t = Table::new();
    let ds = two_dvs(&t);
    let rel = ds[1].relative_path().unwrap();
    let path = t.dir.path().join(&rel);
    let mut bytes = fs::read(&path).unwrap();
    // The second DV's stored CRC: after its 4-byte size and its bitmap.
    let offset = ds[1].offset().unwrap() as usize;
    let size = ds[1].size_in_bytes() as usize;
    let crc_at = offset + 4 + size;
    let stored = u32::from_be_bytes(bytes[crc_at..crc_at + 4].try_into().unwrap());
    let computed = crc32fast::hash(&bytes[offset + 4..offset + 4 + size]);
    assert_eq!(stored, computed);
    let wrong = stored ^ 0xDEAD_BEEF;
    bytes[crc_at..crc_at + 4].copy_from_slice(&wrong.to_be_bytes());
    fs::write(&path, &bytes).unwrap();
    let e = block_on(dv::load_one(&t.store(), &ds[1]))
        .unwrap()
        .unwrap_err();
    let text = e.to_string();
    let (file, dv_offset, at, what, expected, actual) = corrupt(e);
    assert!(file.ends_with(&rel), "{file}");
    assert_eq!(dv_offset, offset as u64);
    assert_eq!(at, crc_at as u64);
    assert!(what.contains("CRC-32"), "{what}");
    assert!(
        expected.contains(&format!("{wrong:#010x}")) || expected.contains(&wrong.to_string()),
        "{text}"
    );
    assert!(
        actual.contains(&format!("{computed:#010x}")) || actual.contains(&computed.to_string()),
        "{text}"
    );
    // The first DV of the same file is intact and still loads.
    assert_eq!(
        block_on(dv::load_one(&t.store(), &ds[0])).unwrap().unwrap(),
        map(&[1, 2, 3])
    );
}

#[test]
fn descriptor_size_disagreeing_with_the_file() {
    let t = Table::new();
    let ds = two_dvs(&t);
    let real = ds[0].size_in_bytes();
    let lying = DeletionVectorDescriptor::try_new(
        "u",
        ds[0].path_or_inline_dv(),
        ds[0].offset().map(i64::from),
        i64::from(real) + 3,
        3,
    )
    .unwrap();
    let (file, _, at, what, expected, actual) = corrupt(
        block_on(dv::load_one(&t.store(), &lying))
            .unwrap()
            .unwrap_err(),
    );
    assert!(file.ends_with(&ds[0].relative_path().unwrap()), "{file}");
    assert_eq!(at, 1, "the dataSize field of the DV at offset 1");
    assert_eq!(what, "dataSize");
    assert_eq!(expected, format!("{} (descriptor sizeInBytes)", real + 3));
    assert!(actual.starts_with(&real.to_string()), "{actual}");
}

#[test]
fn offset_beyond_the_end_of_the_file() {
    let t = Table::new();
    let ds = two_dvs(&t);
    let rel = ds[0].relative_path().unwrap();
    let len = fs::metadata(t.dir.path().join(&rel)).unwrap().len();
    for offset in [len, len + 1000] {
        let far = DeletionVectorDescriptor::try_new(
            "u",
            ds[0].path_or_inline_dv(),
            Some(offset as i64),
            i64::from(ds[0].size_in_bytes()),
            3,
        )
        .unwrap();
        let (file, dv_offset, at, what, expected, actual) = corrupt(
            block_on(dv::load_one(&t.store(), &far))
                .unwrap()
                .unwrap_err(),
        );
        assert!(file.ends_with(&rel), "{file}");
        assert_eq!((dv_offset, at), (offset, offset));
        assert_eq!(what, "DV frame");
        let end = offset + 4 + u64::from(ds[0].size_in_bytes()) + 4;
        assert_eq!(expected, format!("bytes {offset}..{end}"));
        assert!(actual.contains("truncated file?"), "{actual}");
    }
}

#[test]
fn offset_zero_is_refused_at_construction() {
    let t = Table::new();
    let ds = two_dvs(&t);
    // Offset 0 would read the file's version byte as a DV's size.
    match DeletionVectorDescriptor::try_new(
        "u",
        ds[0].path_or_inline_dv(),
        Some(0),
        i64::from(ds[0].size_in_bytes()),
        3,
    ) {
        Err(Error::InvalidDescriptor(m)) => {
            assert_eq!(m, "offset must be >= 1 (after the version byte), found 0")
        }
        other => panic!("{other:?}"),
    }
}
