//! The same golden checks on every store we can run here: local disk and the
//! in-memory store (S3 runs in the Python suite against a real server). Plus
//! URI and storage-option handling for the cloud schemes.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use bytes::Bytes;
use deltadv::io::{block_on, TableStore};
use deltadv::table::snapshot::Snapshot;
use serde_json::Value;

use crate::common::golden_dir;

async fn upload(store: &TableStore, local: &Path, prefix: &str) {
    for entry in fs::read_dir(local).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        if entry.file_type().unwrap().is_dir() {
            Box::pin(upload(store, &entry.path(), &rel)).await;
        } else {
            let bytes = Bytes::from(fs::read(entry.path()).unwrap());
            store.put(&store.path(&rel), bytes).await.unwrap();
        }
    }
}

#[test]
fn golden_tables_on_local_and_memory_stores_agree() {
    let Some(golden) = golden_dir() else { return };
    let expected: Value =
        serde_json::from_str(&fs::read_to_string(golden.join("expected.json")).unwrap()).unwrap();
    for (i, (table, exp)) in expected.as_object().unwrap().iter().enumerate() {
        if table.starts_with('_') || table.contains("special-char") {
            continue;
        }
        let local =
            TableStore::open(golden.join(table).to_str().unwrap(), &HashMap::new()).unwrap();
        let memory = TableStore::open(&format!("memory://golden{i}/t"), &HashMap::new()).unwrap();
        block_on(upload(&memory, &golden.join(table), "")).unwrap();
        for store in [local, memory] {
            let snap = block_on(Snapshot::load(store.clone(), None))
                .unwrap()
                .unwrap();
            assert_eq!(
                snap.logical_rows(),
                exp["rows"].as_i64(),
                "{table} on {}",
                store.url()
            );
            assert_eq!(
                snap.num_files() as u64,
                exp["log_stats"]["live_files"].as_u64().unwrap(),
                "{table} on {}",
                store.url()
            );
            if !table.starts_with("delta/spark/") {
                let before = store.counts().gets;
                let dvs = block_on(snap.deletion_vectors()).unwrap().unwrap();
                let dv_files: std::collections::HashSet<String> = snap
                    .dv_descriptors()
                    .unwrap()
                    .iter()
                    .filter_map(|(_, d)| d.absolute_path(""))
                    .collect();
                assert_eq!(
                    store.counts().gets - before,
                    dv_files.len() as u64,
                    "{table}"
                );
                let total: u64 = dvs.iter().map(|(_, m)| m.len()).sum();
                assert_eq!(
                    total,
                    exp["log_stats"]["sum_dv_cardinality_live"]
                        .as_u64()
                        .unwrap()
                );
            }
        }
    }
}

#[test]
fn cloud_uris_and_options() {
    let opts = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    // deltalake's keys are accepted (upper case, deltalake-only passthrough keys too).
    let s3 = TableStore::open(
        "s3a://bucket/path/to/table",
        &opts(&[
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "k"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_ALLOW_HTTP", "true"),
            ("AWS_S3_ALLOW_UNSAFE_RENAME", "true"),
        ]),
    )
    .unwrap();
    assert_eq!(
        s3.path("_delta_log/x.json").as_ref(),
        "path/to/table/_delta_log/x.json"
    );
    let az = TableStore::open(
        "abfss://container@account.dfs.core.windows.net/t",
        &opts(&[
            ("AZURE_STORAGE_ACCOUNT_KEY", "a2V5"),
            ("AZURE_STORAGE_ACCOUNT_NAME", "account"),
        ]),
    )
    .unwrap();
    assert_eq!(az.path("a").as_ref(), "t/a");
    let gs = TableStore::open(
        "gs://bucket/t",
        &opts(&[("GOOGLE_SERVICE_ACCOUNT_KEY", "{}")]),
    );
    // A bogus key JSON is refused by the GCS builder, with the URI in the message.
    if let Err(e) = gs {
        assert!(e.to_string().contains("gs://bucket/t"), "{e}");
    }
    // Unknown keys are refused, naming the key.
    let e = TableStore::open("s3://bucket/t", &opts(&[("AWS_NOT_A_THING", "1")])).unwrap_err();
    assert!(e.to_string().contains("AWS_NOT_A_THING"), "{e}");
    // Unsupported schemes are clear errors.
    let e = TableStore::open("ftp://host/t", &HashMap::new()).unwrap_err();
    assert!(e.to_string().contains("ftp://host/t"), "{e}");
}

#[test]
fn special_characters_in_local_paths() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("a b%20c&d");
    fs::create_dir_all(&root).unwrap();
    let store = TableStore::open(root.to_str().unwrap(), &HashMap::new()).unwrap();
    block_on(store.put(&store.path("x%y z.bin"), Bytes::from_static(b"hi")))
        .unwrap()
        .unwrap();
    assert_eq!(fs::read(root.join("x%y z.bin")).unwrap(), b"hi");
}

#[test]
fn file_uris_outside_the_table_store_are_refused() {
    let s3_opts: HashMap<String, String> = [
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "k"),
        ("AWS_SECRET_ACCESS_KEY", "s"),
        ("AWS_ALLOW_HTTP", "true"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let s3 = TableStore::open("s3://mine/t", &s3_opts).unwrap();
    // Same bucket, any S3 scheme spelling: the key inside the bucket.
    for same in ["s3://mine/t/x.bin", "s3a://mine/t/x.bin"] {
        assert_eq!(s3.resolve(same).unwrap().as_ref(), "t/x.bin", "{same}");
    }
    assert_eq!(
        s3.resolve("s3://mine/elsewhere/x.bin").unwrap().as_ref(),
        "elsewhere/x.bin"
    );
    // Another bucket, another scheme or a local file: refused, never read as
    // `mine/x.bin` (which is what happened before).
    for foreign in [
        "s3://other/x.bin",
        "s3://other/t/x.bin",
        "gs://mine/t/x.bin",
        "file:///t/x.bin",
        "memory://mine/t/x.bin",
        "https://s3.amazonaws.com/other/t/x.bin",
    ] {
        let e = s3.resolve(foreign).unwrap_err().to_string();
        assert!(
            e.contains("not in the table's store s3://mine") || e.contains("unsupported file URI"),
            "{foreign}: {e}"
        );
        assert!(
            e.contains(foreign) || e.contains("unsupported"),
            "{foreign}: {e}"
        );
    }
    // Azure: the container is the URL's user part.
    let az = TableStore::open(
        "abfss://c1@account.dfs.core.windows.net/t",
        &[
            ("AZURE_STORAGE_ACCOUNT_KEY", "a2V5"),
            ("AZURE_STORAGE_ACCOUNT_NAME", "account"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    )
    .unwrap();
    assert!(az
        .resolve("abfss://c1@account.dfs.core.windows.net/t/x")
        .is_ok());
    assert!(az
        .resolve("abfss://c2@account.dfs.core.windows.net/t/x")
        .is_err());
    assert!(az
        .resolve("abfss://c1@other.dfs.core.windows.net/t/x")
        .is_err());
    // Local tables: any local path (the file system is one store), nothing else.
    let dir = tempfile::tempdir().unwrap();
    let local = TableStore::open(dir.path().to_str().unwrap(), &HashMap::new()).unwrap();
    assert_eq!(
        local.resolve("file:///a/b.bin").unwrap().as_ref(),
        "a/b.bin"
    );
    assert_eq!(
        local.resolve("file://localhost/a/b.bin").unwrap().as_ref(),
        "a/b.bin"
    );
    assert!(local.resolve("file://otherhost/a/b.bin").is_err());
    assert!(local.resolve("s3://mine/t/x.bin").is_err());
    // Named in-memory stores are separate stores.
    let mem = TableStore::open("memory://one/t", &HashMap::new()).unwrap();
    assert_eq!(mem.resolve("memory://one/t/x").unwrap().as_ref(), "t/x");
    assert!(mem.resolve("memory://two/t/x").is_err());
}

#[cfg(unix)]
#[test]
fn non_regular_files_are_refused_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("deletion_vector_fifo.bin");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    fs::create_dir(dir.path().join("sub")).unwrap();
    let store = TableStore::open(dir.path().to_str().unwrap(), &HashMap::new()).unwrap();
    // Reading a FIFO with no writer would block forever; it is refused at once.
    let path = store.path("deletion_vector_fifo.bin");
    for result in [
        block_on(store.get_range(&path, 1..10)).unwrap(),
        block_on(store.get(&path)).unwrap().map(|_| Bytes::new()),
    ] {
        let e = result.unwrap_err().to_string();
        assert!(e.contains("not a regular file (a FIFO)"), "{e}");
        assert!(e.contains(fifo.to_str().unwrap()), "{e}");
    }
    let e = block_on(store.get(&store.path("sub")))
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(e.contains("a directory"), "{e}");
    // A missing file is still "not found".
    let e = block_on(store.get(&store.path("missing.bin")))
        .unwrap()
        .unwrap_err();
    assert!(matches!(e, deltadv::Error::NotFound { .. }), "{e}");
}
