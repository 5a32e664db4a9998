//! `io::store` at the edges: how table URIs and file locations resolve,
//! put-if-absent under a race on local disk, symlinks and other non-regular
//! files, and names with spaces and percent signs end to end.

use std::collections::HashMap;
use std::fs;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use bytes::Bytes;
use deltadv::io::store::table_url;
use deltadv::io::{block_on, TableStore};
use deltadv::scan::{self, ScanSpec};
use deltadv::Error;
use serde_json::json;

use crate::fixture::{add, Table};

fn local(root: &std::path::Path) -> TableStore {
    TableStore::open(root.to_str().unwrap(), &HashMap::new()).unwrap()
}

#[test]
fn table_urls() {
    let cwd = std::env::current_dir().unwrap();
    // Relative paths are made absolute and `.`/`..` dropped; always a directory URL.
    let url = table_url("some/./dir/../t").unwrap();
    assert_eq!(
        url,
        url::Url::from_directory_path(cwd.join("some/t")).unwrap()
    );
    assert!(url.as_str().ends_with("/some/t/"), "{url}");
    // Spaces and percent signs in a local path are encoded in the URL ...
    let url = table_url("/tmp/a b/c%d").unwrap();
    assert_eq!(url.as_str(), "file:///tmp/a%20b/c%25d/");
    // ... and decoded again into the store root.
    let store = TableStore::open("/tmp/a b/c%d", &HashMap::new()).unwrap();
    assert_eq!(store.path("x.bin").as_ref(), "tmp/a b/c%d/x.bin");
    // URIs are kept as given.
    assert_eq!(table_url("s3://b/k").unwrap().as_str(), "s3://b/k");
    assert_eq!(
        table_url("file:///t/x").unwrap().to_file_path().unwrap(),
        std::path::PathBuf::from("/t/x")
    );
    // A malformed URI is refused naming it.
    let e = table_url("s3://[bad/k").unwrap_err().to_string();
    assert!(e.contains("s3://[bad/k"), "{e}");
}

#[test]
fn store_paths_and_resolution() {
    let dir = tempfile::tempdir().unwrap();
    let store = local(dir.path());
    let root = dir.path().to_str().unwrap().trim_start_matches('/');
    // Relative locations join the root literally (already URL-decoded): a `%`
    // stays a `%`, empty segments are dropped.
    assert_eq!(
        store.path("a b//c%41.parquet").as_ref(),
        format!("{root}/a b/c%41.parquet")
    );
    assert_eq!(
        store.resolve("p%20q/x.bin").unwrap().as_ref(),
        format!("{root}/p%20q/x.bin")
    );
    // Absolute local paths are normalized, not joined to the root.
    assert_eq!(
        store.resolve("/a/./b/../c.bin").unwrap().as_ref(),
        "a/c.bin"
    );
    // A one-letter "scheme" is not a scheme (Windows drive letters): relative.
    assert_eq!(
        store.resolve("c:x.bin").unwrap().as_ref(),
        format!("{root}/c:x.bin")
    );
    // A URI scheme object_store does not know is refused, named.
    let e = store.resolve("ftp://h/x.bin").unwrap_err().to_string();
    assert!(
        e.contains("unsupported file URI") && e.contains("ftp://h/x.bin"),
        "{e}"
    );
    // Foreign stores are refused without leaking credentials in the message.
    let e = store
        .resolve("s3://user:secret@bucket/x.bin?X-Amz-Signature=abc")
        .unwrap_err()
        .to_string();
    assert!(e.contains("not in the table's store file://"), "{e}");
    assert!(!e.contains("secret") && !e.contains("abc"), "{e}");
}

#[test]
fn put_if_absent_race_on_local_disk_has_one_winner() {
    const WRITERS: usize = 16;
    let dir = tempfile::tempdir().unwrap();
    let store = local(dir.path());
    let path = store.path("_delta_log/00000000000000000001.json");
    let results: Vec<(usize, bool)> = block_on(async {
        let tasks = (0..WRITERS).map(|i| {
            let store = store.clone();
            let path = path.clone();
            deltadv::io::runtime::spawn(async move {
                let body = Bytes::from(format!("writer {i}\n").repeat(1000));
                (i, store.put_if_absent(&path, body).await.unwrap())
            })
        });
        futures::future::join_all(tasks).await
    })
    .unwrap()
    .into_iter()
    .map(Result::unwrap)
    .collect();
    let winners: Vec<usize> = results
        .iter()
        .filter(|(_, won)| *won)
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    // The file holds exactly the winner's bytes, never a mix.
    let text = fs::read_to_string(dir.path().join("_delta_log/00000000000000000001.json")).unwrap();
    assert_eq!(text, format!("writer {}\n", winners[0]).repeat(1000));
    // A later put-if-absent still loses, and leaves the file alone.
    assert!(
        !block_on(store.put_if_absent(&path, Bytes::from_static(b"late")))
            .unwrap()
            .unwrap()
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("_delta_log/00000000000000000001.json")).unwrap(),
        text
    );
}

#[cfg(unix)]
#[test]
fn symlinks_follow_to_regular_files_only() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("real.bin"), b"data").unwrap();
    fs::create_dir(dir.path().join("d")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("real.bin"), dir.path().join("link.bin")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("d"), dir.path().join("dirlink.bin")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("nowhere"), dir.path().join("dangling.bin"))
        .unwrap();
    let store = local(dir.path());
    assert_eq!(
        block_on(store.get(&store.path("link.bin")))
            .unwrap()
            .unwrap(),
        Bytes::from_static(b"data")
    );
    assert_eq!(
        block_on(store.get_range(&store.path("link.bin"), 1..3))
            .unwrap()
            .unwrap(),
        Bytes::from_static(b"at")
    );
    let e = block_on(store.get(&store.path("dirlink.bin")))
        .unwrap()
        .unwrap_err();
    match &e {
        Error::Io { path, source } => {
            assert!(path.ends_with("dirlink.bin"), "{path}");
            assert_eq!(
                source.to_string(),
                "not a regular file (a directory); refusing to read it"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        block_on(store.get(&store.path("dangling.bin")))
            .unwrap()
            .unwrap_err(),
        Error::NotFound { .. }
    ));
}

#[test]
fn ranged_reads_past_the_end_are_clipped() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("f.bin"), b"0123456789").unwrap();
    let store = local(dir.path());
    let p = store.path("f.bin");
    let get = |r: std::ops::Range<u64>| block_on(store.get_range(&p, r)).unwrap().unwrap();
    assert_eq!(get(8..20), Bytes::from_static(b"89"));
    assert_eq!(get(10..20), Bytes::new());
    assert_eq!(get(50..60), Bytes::new());
}

/// Whether `ptr` lies in a mapping of a file whose name ends in `name`
/// (`/proc/self/maps`: `start-end perms offset dev inode path`).
#[cfg(target_os = "linux")]
fn mapped_from(ptr: *const u8, name: &str) -> bool {
    let addr = ptr as usize;
    fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .any(|line| {
            let mut fields = line.split_whitespace();
            let (start, end) = fields.next().unwrap().split_once('-').unwrap();
            let start = usize::from_str_radix(start, 16).unwrap();
            let end = usize::from_str_radix(end, 16).unwrap();
            (start..end).contains(&addr) && line.trim_end().ends_with(name)
        })
}

#[test]
fn large_local_reads_are_mapped_clipped_and_outlive_the_file() {
    use deltadv::io::store::MAP_AT_LEAST;
    let dir = tempfile::tempdir().unwrap();
    let n = usize::try_from(3 * MAP_AT_LEAST).unwrap() + 12_345;
    let content: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
    fs::write(dir.path().join("big.bin"), &content).unwrap();
    let store = local(dir.path());
    let p = store.path("big.bin");
    let get = |r: std::ops::Range<u64>| block_on(store.get_range(&p, r)).unwrap().unwrap();
    let n64 = u64::try_from(n).unwrap();
    // A whole read, one at an offset that is not page-aligned, one past the end.
    let whole = get(0..n64);
    assert_eq!(&whole[..], &content[..]);
    let m = usize::try_from(MAP_AT_LEAST).unwrap();
    let middle = get(4097..4097 + 2 * MAP_AT_LEAST);
    assert_eq!(&middle[..], &content[4097..4097 + 2 * m]);
    assert_eq!(&get(MAP_AT_LEAST + 3..10 * n64)[..], &content[m + 3..]);
    assert_eq!(get(n64..n64 + MAP_AT_LEAST), Bytes::new());
    assert_eq!(get(10 * n64..11 * n64), Bytes::new());
    // Several ranges at once: each its own bytes, in order.
    let ranges = [0..MAP_AT_LEAST, 2 * MAP_AT_LEAST + 1..n64, 5..9];
    let got = block_on(store.get_ranges(&p, &ranges)).unwrap().unwrap();
    for (r, bytes) in ranges.iter().zip(&got) {
        let r = usize::try_from(r.start).unwrap()..usize::try_from(r.end).unwrap();
        assert_eq!(&bytes[..], &content[r]);
    }
    // Large reads point into a map of the file, small ones do not (copied).
    #[cfg(target_os = "linux")]
    {
        assert!(mapped_from(whole.as_ptr(), "big.bin"));
        assert!(mapped_from(middle.as_ptr(), "big.bin"));
        let small = get(0..MAP_AT_LEAST - 1);
        assert_eq!(&small[..], &content[..small.len()]);
        assert!(!mapped_from(small.as_ptr(), "big.bin"));
    }
    // Deleting (as VACUUM does) or replacing the file leaves mapped bytes whole.
    fs::remove_file(dir.path().join("big.bin")).unwrap();
    assert_eq!(&whole[..], &content[..]);
    let gone = block_on(store.get_range(&p, 0..n64)).unwrap().unwrap_err();
    assert!(matches!(gone, Error::NotFound { .. }), "{gone:?}");
    assert!(gone.to_string().contains("big.bin"), "{gone}");
}

#[test]
fn spaces_and_percent_signs_end_to_end() {
    // The table root itself has a space and a percent sign; the data file's
    // name too. The log holds the path URL-encoded; the file on disk does not.
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("my table %1");
    fs::create_dir(&root).unwrap();
    let t = Table { dir: outer };
    let sub = "my table %1";
    let size = t.data_file(&format!("{sub}/p=a b/x%41 y.parquet"), 4, 100);
    let store = local(&root);
    let encoded = "p=a%20b/x%2541%20y.parquet";
    let log = root.join("_delta_log");
    fs::create_dir(&log).unwrap();
    let lines = [
        crate::fixture::protocol(),
        crate::fixture::metadata(json!({})),
        add(encoded, size, 4, None),
    ];
    fs::write(
        log.join("00000000000000000000.json"),
        lines
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    let s = block_on(deltadv::table::snapshot::Snapshot::load(store, None))
        .unwrap()
        .unwrap();
    let files = s.files().unwrap();
    assert_eq!(files[0].path, "p=a b/x%41 y.parquet");
    let spec = ScanSpec::for_snapshot(&s, Some(vec!["id".to_string()]));
    let batches = block_on(scan::read_snapshot(&s, &spec)).unwrap().unwrap();
    let ids: Vec<i64> = batches
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    assert_eq!(ids, [0, 1, 2, 3]);
}
