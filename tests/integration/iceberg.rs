//! The Iceberg mirror (UniForm) against hand-built logs.

use deltadv::io::block_on;
use deltadv::write::iceberg::sync_iceberg;
use serde_json::json;

use crate::fixture::{add, protocol, Table};

/// Column-mapped `id long`.
const MAPPED: &str = r#"{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-1"}}]}"#;

fn mapped_table() -> Table {
    let t = Table::new();
    let metadata = json!({"metaData": {"id": "00000000-0000-0000-0000-000000000002",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": MAPPED, "partitionColumns": [],
        "configuration": {"delta.columnMapping.mode": "name",
                          "delta.columnMapping.maxColumnId": "1"},
        "createdTime": 1}});
    t.commit(0, &[protocol(), metadata, add("a.parquet", 10, 5, None)]);
    t.commit(1, &[add("b.parquet", 10, 7, None)]);
    t
}

#[test]
fn an_older_version_never_replaces_a_newer_mirror() {
    // Two writers: the mirror of version 2 ran before that of version 1.
    let t = mapped_table();
    t.commit(2, &[add("c.parquet", 10, 1, None)]);
    let newer = block_on(sync_iceberg(&t.load(Some(2)).unwrap()))
        .unwrap()
        .unwrap();
    assert_eq!((newer.delta_version, newer.metadata_version), (2, 1));
    let older = block_on(sync_iceberg(&t.load(Some(1)).unwrap()))
        .unwrap()
        .unwrap();
    assert_eq!(older.snapshot_id, None);
    assert_eq!((older.delta_version, older.metadata_version), (2, 1));
    assert!(older.files_written.is_empty());
    assert!(!t.dir.path().join("metadata/v2.metadata.json").exists());
    let latest = block_on(sync_iceberg(&t.load(None).unwrap()))
        .unwrap()
        .unwrap();
    assert_eq!(latest.snapshot_id, None);
}

#[test]
fn each_version_is_mirrored_once_in_order() {
    let t = mapped_table();
    let first = block_on(sync_iceberg(&t.load(Some(0)).unwrap()))
        .unwrap()
        .unwrap();
    assert_eq!((first.added_data_files, first.metadata_version), (1, 1));
    let second = block_on(sync_iceberg(&t.load(Some(1)).unwrap()))
        .unwrap()
        .unwrap();
    assert_eq!(second.previous_delta_version, Some(0));
    assert_eq!((second.added_data_files, second.manifests_reused), (1, 1));
}
