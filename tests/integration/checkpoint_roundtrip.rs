//! Checkpoints we write, read back: every live file with its DV, stats, tags,
//! partition values and row-tracking fields; tombstones within retention;
//! `txn` and `domainMetadata`; and `_last_checkpoint`'s counts.

use std::collections::HashMap;
use std::fs;

use bytes::Bytes;
use deltadv::io::block_on;
use deltadv::log::actions::{Action, Add, DomainMetadata, Txn};
use deltadv::log::checkpoint::{decode_parquet, CheckpointData};
use deltadv::log::path::LogPath;
use deltadv::write::checkpoint;
use deltadv::RoaringTreemap;
use serde_json::json;

use crate::fixture::{add, inline_dv, now_ms, remove, Table};

const DAY_MS: i64 = 86_400_000;

/// Live adds by path (dataChange aside: checkpoints hold it false).
fn adds_by_path(s: &deltadv::table::snapshot::Snapshot) -> HashMap<String, Add> {
    s.files()
        .unwrap()
        .into_iter()
        .map(|f| {
            let mut a = f.add;
            a.data_change = false;
            (f.path, a)
        })
        .collect()
}

/// A table exercising every field a checkpoint carries.
fn rich_table() -> Table {
    let t = Table::new();
    let store = t.store();
    let on_disk: RoaringTreemap = [1u64, 5, 1 << 33].into_iter().collect();
    let file_dv = block_on(deltadv::write::dv_files::write_file_to(
        &store,
        "ab",
        &[on_disk],
    ))
    .unwrap()
    .unwrap()
    .remove(0);
    let inline = inline_dv(&[0, 2]);
    let mut tagged = add("dir with space/p%20q.parquet", 11, 4, None);
    tagged["add"]["tags"] = json!({"k": "v", "empty": null});
    tagged["add"]["baseRowId"] = json!(100);
    tagged["add"]["defaultRowCommitVersion"] = json!(1);
    tagged["add"]["stats"] =
        json!(json!({"numRecords": 4, "tightBounds": false, "minValues": {"id": 1}}).to_string());
    let mut partitioned = add("x=1/f.parquet", 12, 6, Some(&file_dv));
    partitioned["add"]["partitionValues"] = json!({"x": "1", "y": null});
    t.create(
        json!({"delta.checkpointInterval": "100"}),
        &[
            add("a.parquet", 10, 3, Some(&inline)),
            tagged,
            partitioned,
            add("gone-old.parquet", 1, 1, None),
            add("gone-new.parquet", 1, 1, None),
        ],
    );
    let now = now_ms();
    t.commit(
        1,
        &[
            remove("gone-old.parquet", now - 8 * DAY_MS, None),
            remove("gone-new.parquet", now - DAY_MS, None),
            json!({"txn": {"appId": "stream-1", "version": 42, "lastUpdated": 7}}),
            json!({"domainMetadata": {"domain": "delta.rowTracking",
                "configuration": "{\"rowIdHighWaterMark\":109}", "removed": false}}),
            json!({"domainMetadata": {"domain": "app.gone", "configuration": "{}",
                "removed": true}}),
        ],
    );
    t
}

#[test]
fn read_back_what_we_write() {
    let t = rich_table();
    let before = t.load(None).unwrap();
    block_on(checkpoint::write(&before)).unwrap().unwrap();
    for v in 0..=1 {
        fs::remove_file(t.log_file(&LogPath::commit(v))).unwrap();
    }
    let after = t.load(None).unwrap();
    assert_eq!(after.segment().checkpoint_version, Some(1));
    assert!(after.segment().commits.is_empty());
    assert_eq!(after.protocol(), before.protocol());
    assert_eq!(after.metadata(), before.metadata());
    let (b, a) = (adds_by_path(&before), adds_by_path(&after));
    assert_eq!(a.len(), 3);
    assert_eq!(a, b, "every add field survives the checkpoint");
    assert_eq!(
        a["dir with space/p q.parquet"].tags.as_ref().unwrap()["empty"],
        None
    );
    assert_eq!(after.logical_rows(), Some((3 - 2) + 4 + (6 - 3)));
    assert_eq!(after.logical_rows(), before.logical_rows());
    // The DVs load the same from the checkpoint's descriptors.
    let dvs = |s: &deltadv::table::snapshot::Snapshot| {
        let files = s.files().unwrap();
        let mut out: Vec<(String, Vec<u64>)> = block_on(s.deletion_vectors())
            .unwrap()
            .unwrap()
            .into_iter()
            .map(|(i, m)| (files[i].path.clone(), m.into_iter().collect()))
            .collect();
        out.sort();
        out
    };
    assert_eq!(
        dvs(&after),
        [
            ("a.parquet".to_string(), vec![0, 2]),
            ("x=1/f.parquet".to_string(), vec![1, 5, 1 << 33])
        ]
    );
    // txn and live domainMetadata are carried; a removed domain is not.
    assert_eq!(
        after.txns().get("stream-1"),
        Some(&Txn {
            app_id: "stream-1".into(),
            version: 42,
            last_updated: Some(7)
        })
    );
    let domains: Vec<&DomainMetadata> = after.domain_metadata().values().collect();
    assert_eq!(
        domains,
        [&DomainMetadata {
            domain: "delta.rowTracking".into(),
            configuration: "{\"rowIdHighWaterMark\":109}".into(),
            removed: false
        }]
    );
    // Only the tombstone within the one-week retention is kept.
    let tombstones: Vec<&str> = after.tombstones().iter().map(|r| r.path.as_str()).collect();
    assert_eq!(tombstones, ["gone-new.parquet"]);
    assert!(!after.tombstones()[0].data_change);
}

#[test]
fn last_checkpoint_counts_what_the_checkpoint_holds() {
    let t = rich_table();
    let s = t.load(None).unwrap();
    block_on(checkpoint::write(&s)).unwrap().unwrap();
    let hint: serde_json::Value =
        serde_json::from_slice(&fs::read(t.log_file(&LogPath::LastCheckpoint)).unwrap()).unwrap();
    let parquet = fs::read(t.log_file(&LogPath::checkpoint(1))).unwrap();
    // protocol, metaData, 1 txn, 1 domain, 3 adds, 1 unexpired tombstone
    assert_eq!(
        hint,
        json!({"version": 1, "size": 8, "sizeInBytes": parquet.len(), "numOfAddFiles": 3})
    );
    // Decoding the bytes directly agrees.
    let (adds, others) = decode_parquet(
        Bytes::from(parquet),
        "_delta_log/00000000000000000001.checkpoint.parquet",
    )
    .unwrap();
    let mut data = CheckpointData::default();
    data.absorb(adds, others);
    assert_eq!(data.count, 8);
    assert_eq!(data.adds.iter().map(|a| a.num_adds()).sum::<usize>(), 3);
    let kinds: Vec<&str> = data
        .others
        .iter()
        .map(|a| match a {
            Action::Protocol(_) => "protocol",
            Action::Metadata(_) => "metaData",
            Action::Txn(_) => "txn",
            Action::DomainMetadata(_) => "domainMetadata",
            Action::Remove(_) => "remove",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        ["protocol", "metaData", "txn", "domainMetadata", "remove"]
    );
}

#[test]
fn tombstone_retention_follows_the_table_property() {
    let t = Table::new();
    t.create(
        json!({"delta.deletedFileRetentionDuration": "interval 2 hours"}),
        &[
            add("a.parquet", 1, 1, None),
            add("b.parquet", 1, 1, None),
            add("c.parquet", 1, 1, None),
        ],
    );
    let now = 1_800_000_000_000_i64;
    let hour = 3_600_000;
    let mut no_timestamp = remove("c.parquet", 0, None);
    no_timestamp["remove"]
        .as_object_mut()
        .unwrap()
        .remove("deletionTimestamp");
    t.commit(
        1,
        &[
            remove("a.parquet", now - 2 * hour, None), // exactly at the limit: expired
            remove("b.parquet", now - 2 * hour + 1, None),
            no_timestamp, // counts as deleted at 0
        ],
    );
    let s = t.load(None).unwrap();
    assert_eq!(s.tombstones().len(), 3);
    let (bytes, size, adds) = checkpoint::encode_at(&s, now).unwrap();
    assert_eq!((size, adds), (3, 0), "protocol, metaData, one tombstone");
    let (_, others) = decode_parquet(bytes, "ckpt").unwrap();
    let kept: Vec<&str> = others
        .iter()
        .filter_map(|a| match a {
            Action::Remove(r) => Some(r.path.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(kept, ["b.parquet"]);

    // A property that is not an interval is an error naming it, not a guess.
    let bad = Table::new();
    bad.create(
        json!({"delta.deletedFileRetentionDuration": "interval 1 month"}),
        &[],
    );
    let e = checkpoint::encode_at(&bad.load(None).unwrap(), now)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("delta.deletedFileRetentionDuration") && e.contains("\"interval 1 month\""),
        "{e}"
    );
}
