//! Snapshot loading at the edges: empty or missing logs, gaps, checkpoints
//! with later commits, a `_last_checkpoint` that lies, time travel out of
//! range, and the same (path, DV id) added and removed again.

use std::fs;

use deltadv::io::block_on;
use deltadv::log::path::LogPath;
use deltadv::table::snapshot::Snapshot;
use deltadv::write::checkpoint;
use deltadv::Error;
use serde_json::json;

use crate::fixture::{add, inline_dv, now_ms, paths, remove, Table};

fn corrupt(e: Error) -> (String, String) {
    match e {
        Error::CorruptLog { file, detail } => (file, detail),
        other => panic!("expected CorruptLog, got {other:?}"),
    }
}

/// A table with commits 0..=3: f0 at v0, f1 at v1, f0 removed at v2, f2 at v3.
fn four_commits() -> Table {
    let t = Table::new();
    t.create(json!({}), &[add("f0.parquet", 10, 5, None)]);
    t.commit(1, &[add("f1.parquet", 10, 5, None)]);
    t.commit(2, &[remove("f0.parquet", now_ms(), None)]);
    t.commit(3, &[add("f2.parquet", 10, 5, None)]);
    t
}

#[test]
fn empty_log_dir_is_not_a_table() {
    let t = Table::new();
    fs::create_dir(t.dir.path().join("_delta_log")).unwrap();
    match t.load(None).unwrap_err() {
        Error::NotATable(m) => {
            assert!(m.contains("has no _delta_log with commits"), "{m}");
            assert!(m.contains(t.root()), "names the table: {m}");
        }
        other => panic!("{other:?}"),
    }
    // Only files that are not log files (a stray temp file, a CRC without its
    // commit does count as a log file, so use something else).
    fs::write(t.dir.path().join("_delta_log/.tmp-upload"), b"x").unwrap();
    assert!(matches!(t.load(None).unwrap_err(), Error::NotATable(_)));
}

#[test]
fn missing_root_is_not_a_table_and_says_so() {
    let t = Table::new();
    let gone = t.dir.path().join("nope");
    let store = deltadv::io::TableStore::open(gone.to_str().unwrap(), &Default::default()).unwrap();
    match block_on(Snapshot::load(store, None)).unwrap().unwrap_err() {
        Error::NotATable(m) => assert!(m.contains("the path does not exist"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn version_gap_names_the_missing_commit() {
    let t = four_commits();
    fs::remove_file(t.log_file(&LogPath::commit(2))).unwrap();
    let (file, detail) = corrupt(t.load(None).unwrap_err());
    assert_eq!(file, "00000000000000000002.json");
    assert_eq!(detail, "missing: the log jumps from version 1 to 3");
    // Versions before the gap still load.
    let s = t.load(Some(1)).unwrap();
    assert_eq!(s.version(), 1);
    assert_eq!(paths(&s), ["f0.parquet", "f1.parquet"]);
}

#[test]
fn missing_first_commit_without_checkpoint_is_corrupt() {
    let t = four_commits();
    fs::remove_file(t.log_file(&LogPath::commit(0))).unwrap();
    let (file, detail) = corrupt(t.load(None).unwrap_err());
    assert_eq!(file, "00000000000000000000.json");
    assert_eq!(detail, "missing: the log jumps from version 0 to 1");
}

/// Checkpoint at 2 written by us, commits 0-1 cleaned up, one commit after.
fn checkpointed() -> Table {
    let t = four_commits();
    let at2 = t.load(Some(2)).unwrap();
    block_on(checkpoint::write(&at2)).unwrap().unwrap();
    for v in 0..2 {
        fs::remove_file(t.log_file(&LogPath::commit(v))).unwrap();
    }
    t
}

#[test]
fn checkpoint_plus_later_commits() {
    let t = checkpointed();
    let s = t.load(None).unwrap();
    assert_eq!(s.version(), 3);
    assert_eq!(s.segment().checkpoint_version, Some(2));
    let commits: Vec<u64> = s.segment().commits.iter().map(|f| f.version).collect();
    assert_eq!(commits, [3]);
    assert_eq!(paths(&s), ["f1.parquet", "f2.parquet"]);
    // The tombstone of f0 came through the checkpoint.
    let tombstones: Vec<&str> = s.tombstones().iter().map(|r| r.path.as_str()).collect();
    assert_eq!(tombstones, ["f0.parquet"]);
    // A later commit removing a checkpoint file shadows its row.
    t.commit(4, &[remove("f1.parquet", 4_000, None)]);
    let s = t.load(None).unwrap();
    assert_eq!(paths(&s), ["f2.parquet"]);
    assert_eq!(s.num_files(), 1);
    assert_eq!(s.logical_rows(), Some(5));
}

#[test]
fn time_travel_before_the_oldest_checkpoint_is_version_not_found() {
    let t = checkpointed();
    for v in [0, 1] {
        match t.load(Some(v)).unwrap_err() {
            Error::VersionNotFound(m) => {
                assert!(
                    m.contains(&format!("version {v}")) && m.contains("earliest available is 2"),
                    "{m}"
                )
            }
            other => panic!("version {v}: {other:?}"),
        }
    }
    // The checkpoint's own version loads from the checkpoint alone.
    let s = t.load(Some(2)).unwrap();
    assert_eq!(s.segment().commits.len(), 0);
    assert_eq!(paths(&s), ["f1.parquet"]);
}

#[test]
fn time_travel_after_latest_is_version_not_found() {
    let t = four_commits();
    match t.load(Some(4)).unwrap_err() {
        Error::VersionNotFound(m) => {
            assert_eq!(m, "version 4 requested, the latest is 3")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(t.load(Some(3)).unwrap().version(), 3);
}

#[test]
fn last_checkpoint_pointing_at_a_missing_checkpoint_is_ignored() {
    let t = four_commits();
    let hint = t.log_file(&LogPath::LastCheckpoint);
    // Ahead of the log, and behind it: neither checkpoint exists.
    for version in [9, 1] {
        fs::write(&hint, json!({"version": version, "size": 3}).to_string()).unwrap();
        let s = t.load(None).unwrap();
        assert_eq!(s.version(), 3, "hint at {version}");
        assert_eq!(s.segment().checkpoint_version, None);
        assert_eq!(paths(&s), ["f1.parquet", "f2.parquet"]);
    }
}

#[test]
fn last_checkpoint_with_wrong_size_or_parts_is_corrupt() {
    let t = checkpointed();
    let hint = t.log_file(&LogPath::LastCheckpoint);
    let real: serde_json::Value = serde_json::from_slice(&fs::read(&hint).unwrap()).unwrap();
    let real_size = real["size"].as_u64().unwrap();
    // protocol, metaData, add f1, remove f0
    assert_eq!(real_size, 4);
    fs::write(&hint, json!({"version": 2, "size": 99}).to_string()).unwrap();
    let (file, detail) = corrupt(t.load(None).unwrap_err());
    assert_eq!(file, "_delta_log/00000000000000000002.checkpoint.parquet");
    assert_eq!(
        detail,
        "_last_checkpoint says the checkpoint holds 99 actions, it holds 4"
    );
    fs::write(&hint, json!({"version": 2, "parts": 3}).to_string()).unwrap();
    let (file, detail) = corrupt(t.load(None).unwrap_err());
    assert_eq!(file, "00000000000000000002.checkpoint.parquet");
    assert_eq!(
        detail,
        "_last_checkpoint says version 2 has 3 parts, the listed checkpoint has 1"
    );
    fs::write(&hint, b"{not json").unwrap();
    let (file, detail) = corrupt(t.load(None).unwrap_err());
    assert_eq!(file, "_delta_log/_last_checkpoint");
    assert!(detail.starts_with("not valid JSON"), "{detail}");
}

#[test]
fn truncated_checkpoint_is_a_parquet_error_naming_it() {
    let t = checkpointed();
    let path = t.log_file(&LogPath::checkpoint(2));
    let bytes = fs::read(&path).unwrap();
    fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    match t.load(None).unwrap_err() {
        Error::Parquet { file, .. } => {
            assert_eq!(file, "_delta_log/00000000000000000002.checkpoint.parquet")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn same_path_and_dv_added_removed_and_added_again() {
    let t = Table::new();
    let d1 = inline_dv(&[0]);
    let d2 = inline_dv(&[0, 1]);
    t.create(json!({}), &[add("f.parquet", 10, 5, None)]);
    // v1: a DV replaces the plain file.
    t.commit(
        1,
        &[
            remove("f.parquet", 1, None),
            add("f.parquet", 10, 5, Some(&d1)),
        ],
    );
    // v2: the DV grows.
    t.commit(
        2,
        &[
            remove("f.parquet", 2, Some(&d1)),
            add("f.parquet", 10, 5, Some(&d2)),
        ],
    );
    let s = t.load(None).unwrap();
    let files = s.files().unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(
        files[0].add.deletion_vector.as_ref().map(|d| d.unique_id()),
        Some(d2.unique_id())
    );
    assert_eq!(s.logical_rows(), Some(3));
    let mut tombstones: Vec<(String, Option<String>)> = s
        .tombstones()
        .iter()
        .map(|r| {
            (
                r.path.clone(),
                r.deletion_vector.as_ref().map(|d| d.unique_id()),
            )
        })
        .collect();
    tombstones.sort();
    assert_eq!(
        tombstones,
        [
            ("f.parquet".to_string(), None),
            ("f.parquet".to_string(), Some(d1.unique_id()))
        ]
    );
    // v3: committing an existing (path, DV) again (a metadata update) is legal
    // and keeps one live file, with the newer action's fields.
    let mut again = add("f.parquet", 10, 5, Some(&d2));
    again["add"]["tags"] = json!({"note": "restated"});
    t.commit(3, &[again]);
    let s = t.load(None).unwrap();
    assert_eq!(s.num_files(), 1);
    assert_eq!(s.logical_rows(), Some(3));
    let tags = s.files().unwrap()[0].add.tags.clone().unwrap();
    assert_eq!(tags.get("note"), Some(&Some("restated".to_string())));
    // v4: the same add twice in one commit is harmless (one live file) ...
    t.commit(
        4,
        &[add("g.parquet", 10, 5, None), add("g.parquet", 10, 5, None)],
    );
    assert_eq!(paths(&t.load(None).unwrap()), ["f.parquet", "g.parquet"]);
    // ... but with two different DVs it is a corrupt commit, named.
    t.commit(
        5,
        &[
            add("h.parquet", 10, 5, Some(&d1)),
            add("h.parquet", 10, 5, Some(&d2)),
        ],
    );
    let (file, detail) = corrupt(t.load(None).unwrap_err());
    assert_eq!(file, "_delta_log/00000000000000000005.json");
    assert!(
        detail.contains("h.parquet is added twice in one commit")
            && detail.contains(&d1.unique_id())
            && detail.contains(&d2.unique_id()),
        "{detail}"
    );
}

#[test]
fn snapshot_through_a_checkpoint_keeps_dv_identity() {
    // A checkpoint row (f, d1) shadowed by a later (remove d1, add d2).
    let t = Table::new();
    let d1 = inline_dv(&[1]);
    let d2 = inline_dv(&[1, 2, 3]);
    t.create(json!({}), &[add("f.parquet", 10, 5, Some(&d1))]);
    t.commit(1, &[add("g.parquet", 10, 7, None)]);
    block_on(checkpoint::write(&t.load(None).unwrap()))
        .unwrap()
        .unwrap();
    t.commit(
        2,
        &[
            remove("f.parquet", 5, Some(&d1)),
            add("f.parquet", 10, 5, Some(&d2)),
        ],
    );
    let s = t.load(None).unwrap();
    assert_eq!(s.segment().checkpoint_version, Some(1));
    let mut ids: Vec<(String, Option<String>)> = s
        .files()
        .unwrap()
        .into_iter()
        .map(|f| (f.path, f.add.deletion_vector.map(|d| d.unique_id())))
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        [
            ("f.parquet".to_string(), Some(d2.unique_id())),
            ("g.parquet".to_string(), None)
        ]
    );
    assert_eq!(s.logical_rows(), Some(2 + 7));
}

#[test]
fn many_files_are_listed_alike_on_any_number_of_threads() {
    use arrow_array::{Array, Int64Array, StringArray};
    use std::collections::BTreeMap;

    // 12,000 files in a checkpoint (its rows checked and listed in ranges on
    // several threads), every 10th with a DV, every 13th path URL-encoded;
    // then a commit removing some, rewriting the DV of others and adding new.
    let t = Table::new();
    let name = |k: u64| {
        if k.is_multiple_of(13) {
            format!("dir%20{k}.parquet")
        } else {
            format!("f{k}.parquet")
        }
    };
    let dv = |k: u64| {
        k.is_multiple_of(10)
            .then(|| inline_dv(&[k % 7, 100 + k % 5]))
    };
    let rows = |k: u64| 1_000 + k as i64;
    let adds: Vec<_> = (0..12_000)
        .map(|k| add(&name(k), 100 + k, rows(k), dv(k).as_ref()))
        .collect();
    t.create(json!({}), &adds);
    block_on(checkpoint::write(&t.load(None).unwrap()))
        .unwrap()
        .unwrap();
    // path (decoded) -> (numRecords, rows the DV deletes)
    let mut expected: BTreeMap<String, (i64, u64)> = (0..12_000)
        .map(|k| {
            let deleted = dv(k).map_or(0, |d| d.cardinality());
            (name(k).replace("%20", " "), (rows(k), deleted))
        })
        .collect();
    let mut v1 = Vec::new();
    for k in (5..12_000).step_by(97) {
        v1.push(remove(&name(k), now_ms(), dv(k).as_ref()));
        expected.remove(&name(k).replace("%20", " "));
    }
    for k in (3..12_000).step_by(101) {
        let new = inline_dv(&[1, 2, 3, 4, 500 + k]);
        v1.push(remove(&name(k), now_ms(), dv(k).as_ref()));
        v1.push(add(&name(k), 100 + k, rows(k), Some(&new)));
        expected.insert(name(k).replace("%20", " "), (rows(k), 5));
    }
    for k in 0..50 {
        v1.push(add(&format!("new{k}.parquet"), 10, 7, None));
        expected.insert(format!("new{k}.parquet"), (7, 0));
    }
    t.commit(1, &v1);

    let s = t.load(None).unwrap();
    assert_eq!(s.segment().checkpoint_version, Some(0));
    let one = s.files_batch_on(1).unwrap();
    for threads in [2, 3, 5] {
        assert_eq!(s.files_batch_on(threads).unwrap(), one, "{threads} threads");
        // One batch per range (of at least 4,096 files), in file order.
        let batches = s.files_batches_on(threads).unwrap();
        assert_eq!(
            batches.len(),
            threads.min(s.num_files() / 4_096),
            "{threads} threads"
        );
        let joined = arrow::compute::concat_batches(&one.schema(), &batches).unwrap();
        assert_eq!(joined, one, "{threads} threads");
    }
    let col = |n: &str| one.column_by_name(n).unwrap().clone();
    let (path, records, card) = (col("path"), col("num_records"), col("dv_cardinality"));
    let path = path.as_any().downcast_ref::<StringArray>().unwrap();
    let records = records.as_any().downcast_ref::<Int64Array>().unwrap();
    let card = card.as_any().downcast_ref::<Int64Array>().unwrap();
    let listed: BTreeMap<String, (i64, u64)> = (0..one.num_rows())
        .map(|i| {
            let deleted = if card.is_null(i) {
                0
            } else {
                card.value(i) as u64
            };
            (path.value(i).to_string(), (records.value(i), deleted))
        })
        .collect();
    assert_eq!(listed.len(), one.num_rows(), "no path twice");
    assert_eq!(listed, expected);
    // The materialized files (ranges of them on this machine's threads) in
    // the same order.
    let files = s.files().unwrap();
    let in_order: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        in_order,
        (0..path.len()).map(|i| path.value(i)).collect::<Vec<_>>()
    );
    assert!(files
        .iter()
        .all(|f| f.num_records == Some(expected[&f.path].0)));
}

#[test]
fn a_big_checkpoint_is_fetched_in_ranges_and_read_as_a_whole() {
    use deltadv::io::TableStore;

    // 4,000 adds whose stats carry ~2.6 kB of incompressible text: a
    // checkpoint over 8 MiB, fetched as one range per thread and decoded from
    // the pieces (pages straddle the cuts).
    let t = Table::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut noise = |n: usize| -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        (0..n)
            .map(|_| {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                char::from(ALPHABET[(seed >> 58) as usize])
            })
            .collect()
    };
    let adds: Vec<_> = (0..4_000_i64)
        .map(|k| {
            let mut a = add(&format!("f{k}.parquet"), 10, k, None);
            a["add"]["stats"] =
                json!(json!({"numRecords": k, "minValues": {"s": noise(2_600)}}).to_string());
            a
        })
        .collect();
    t.create(json!({}), &adds);
    block_on(checkpoint::write(&t.load(None).unwrap()))
        .unwrap()
        .unwrap();
    let size = fs::metadata(t.log_file(&LogPath::checkpoint(0)))
        .unwrap()
        .len();
    assert!(size > 8 << 20, "checkpoint of {size} bytes");
    t.commit(1, &[remove("f7.parquet", now_ms(), None)]);

    let store = TableStore::open(t.root(), &Default::default()).unwrap();
    let s = block_on(Snapshot::load(store.clone(), None))
        .unwrap()
        .unwrap();
    let files = s.files().unwrap();
    assert_eq!(files.len(), 3_999);
    let records: Vec<(String, Option<i64>)> = files
        .iter()
        .map(|f| (f.path.clone(), f.num_records))
        .collect();
    let expected: Vec<(String, Option<i64>)> = (0..4_000_i64)
        .filter(|&k| k != 7)
        .map(|k| (format!("f{k}.parquet"), Some(k)))
        .collect();
    assert_eq!(records, expected);
    // _last_checkpoint, the checkpoint (one GET per thread), commit 1.
    let threads = deltadv::io::num_threads() as u64;
    let gets = store.counts().gets;
    assert_eq!(gets, 2 + threads, "{gets} GETs at {threads} threads");
}

#[test]
fn many_commit_adds_parse_their_stats_in_ranges() {
    use std::collections::BTreeMap;

    // 10,000 adds in one commit (no checkpoint): paths decoded and stats
    // parsed in ranges on this machine's threads.
    let adds: Vec<_> = (0..10_000)
        .map(|k| add(&format!("c%20{k}.parquet"), 1, k, None))
        .collect();
    let t = Table::new();
    t.create(json!({}), &adds);
    let s = t.load(None).unwrap();
    let listed: BTreeMap<String, Option<i64>> = s
        .files()
        .unwrap()
        .into_iter()
        .map(|f| (f.path, f.num_records))
        .collect();
    let expected: BTreeMap<String, Option<i64>> = (0..10_000)
        .map(|k| (format!("c {k}.parquet"), Some(k)))
        .collect();
    assert_eq!(listed, expected);
    assert_eq!(s.logical_rows(), Some((0..10_000).sum()));

    // Stats that do not parse, far into the list: the error names that file.
    let mut bad = adds;
    bad[7_777]["add"]["stats"] = json!("{\"numRecords\": 3, oops}");
    let t = Table::new();
    t.create(json!({}), &bad);
    let (file, detail) = corrupt(t.load(None).unwrap_err());
    assert!(file.contains("c%207777.parquet"), "{file}");
    assert!(detail.contains("invalid stats JSON"), "{detail}");
}
