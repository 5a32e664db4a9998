//! Maintenance from the Rust API, on local disk: PURGE leaves no DV and the
//! same rows; OPTIMIZE bin-packs; VACUUM keeps what versions in retention
//! read (DV files included) and deletes the rest; RESTORE brings a version's
//! files and DVs back; dropping the feature downgrades the protocol;
//! manifests are refused while DVs are live.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, RecordBatchIterator, StringArray};
use deltadv::io::{block_on, TableStore};
use deltadv::write::delete::{delete_where, DeleteOptions};
use deltadv::write::files::{write_table, SaveMode, WriteOptions};
use deltadv::write::optimize::{compact, plan, CompactMode, CompactOptions};
use deltadv::write::restore::{restore, RestoreTarget};
use deltadv::write::vacuum::{vacuum, VacuumOptions};

use super::update::{rows, schema, snapshot};

fn batch(ids: std::ops::Range<i64>) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(ids.clone())) as ArrayRef,
            Arc::new(StringArray::from_iter_values(
                ids.map(|i| format!("g{}", i % 2)),
            )),
        ],
    )
    .unwrap()
}

/// 3 appends of 10 rows each, partitioned by g: 6 small files.
fn table() -> (tempfile::TempDir, TableStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = TableStore::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
    for i in 0..3 {
        let options = WriteOptions {
            mode: if i == 0 {
                SaveMode::ErrorIfExists
            } else {
                SaveMode::Append
            },
            partition_by: vec!["g".into()],
            ..Default::default()
        };
        let reader = RecordBatchIterator::new(vec![Ok(batch(i * 10..i * 10 + 10))], schema());
        block_on(write_table(&store, reader, &options))
            .unwrap()
            .unwrap();
    }
    (dir, store)
}

fn delete(store: &TableStore, predicate: &str) {
    block_on(delete_where(
        &snapshot(store),
        Some(predicate),
        &DeleteOptions::default(),
    ))
    .unwrap()
    .unwrap();
}

fn metric(m: &serde_json::Map<String, serde_json::Value>, k: &str) -> u64 {
    m[k].as_str().unwrap().parse().unwrap()
}

#[test]
fn purge_then_optimize() {
    let (_dir, store) = table();
    delete(&store, "id < 3 OR id = 25");
    let before = rows(&store);
    let with_dvs = snapshot(&store)
        .files()
        .unwrap()
        .iter()
        .filter(|f| f.add.deletion_vector.is_some())
        .count() as u64;
    assert_eq!(with_dvs, 3); // ids 0, 2 (g0) and 1 (g1) of append 0, 25 (g1) of append 2
    let m = block_on(compact(
        &snapshot(&store),
        CompactMode::Purge,
        &CompactOptions::default(),
        &|_, _| {},
    ))
    .unwrap()
    .unwrap();
    assert_eq!(metric(&m.operation_metrics, "numRemovedFiles"), with_dvs);
    assert_eq!(
        metric(&m.operation_metrics, "numDeletionVectorsRemoved"),
        with_dvs
    );
    let s = snapshot(&store);
    assert!(s
        .files()
        .unwrap()
        .iter()
        .all(|f| f.add.deletion_vector.is_none()));
    assert_eq!(rows(&store), before);
    // Nothing left to purge: no commit.
    let again = block_on(compact(
        &s,
        CompactMode::Purge,
        &CompactOptions::default(),
        &|_, _| {},
    ))
    .unwrap()
    .unwrap();
    assert_eq!(again.version, None);
    // OPTIMIZE: one file per partition.
    let m = block_on(compact(
        &s,
        CompactMode::Optimize,
        &CompactOptions::default(),
        &|_, _| {},
    ))
    .unwrap()
    .unwrap();
    assert_eq!(metric(&m.operation_metrics, "numAddedFiles"), 2);
    assert_eq!(snapshot(&store).files().unwrap().len(), 2);
    assert_eq!(rows(&store), before);
}

/// Every file under `dir` outside `_delta_log`, relative.
fn data_files(dir: &std::path::Path) -> std::collections::BTreeSet<String> {
    fn walk(
        root: &std::path::Path,
        at: &std::path::Path,
        out: &mut std::collections::BTreeSet<String>,
    ) {
        for e in std::fs::read_dir(at).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                if !path.ends_with("_delta_log") {
                    walk(root, &path, out);
                }
            } else {
                out.insert(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let mut out = std::collections::BTreeSet::new();
    walk(dir, dir, &mut out);
    out
}

#[test]
fn a_rewrite_that_fails_leaves_no_file() {
    let (dir, store) = table();
    let s = snapshot(&store);
    let tasks = plan(&s, CompactMode::Optimize, &CompactOptions::default())
        .unwrap()
        .tasks(&s);
    let mut task = tasks[0].clone();
    assert_eq!(task.bin.files.len(), 3, "one bin of a partition's 3 files");
    // New files of a byte: each is closed (on disk) after a batch. The bin's
    // last file is gone: the rewrite has written files of the first ones'
    // rows when the read of that one fails.
    task.target_size = 1;
    let gone = &task.bin.files[2].path;
    std::fs::remove_file(dir.path().join(gone)).unwrap();
    let before = data_files(dir.path());
    let err = block_on(task.rewrite(&store)).unwrap().unwrap_err();
    assert!(err.to_string().contains(gone.as_str()), "{err}");
    assert_eq!(data_files(dir.path()), before, "the new file is removed");
}

#[test]
fn vacuum_keeps_referenced_dv_files_and_restore_brings_dvs_back() {
    let (dir, store) = table();
    delete(&store, "id < 3");
    let dv_version = snapshot(&store).version();
    let at_dv_version = rows(&store);
    delete(&store, "id = 4");
    let dv_files = || -> Vec<String> {
        std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with("deletion_vector_"))
            .collect()
    };
    assert_eq!(dv_files().len(), 2);
    // Every file is referenced, live or by a fresh tombstone: nothing to vacuum.
    let later = chrono::Utc::now().timestamp_millis() + 60_000;
    let dry = VacuumOptions {
        retention_hours: Some(0.0),
        enforce_retention_duration: false,
        now_ms: Some(later),
        ..Default::default()
    };
    let first_dv = snapshot(&store)
        .files()
        .unwrap()
        .iter()
        .filter_map(|f| f.add.deletion_vector.as_ref()?.relative_path())
        .collect::<Vec<_>>();
    let r = block_on(vacuum(&snapshot(&store), &dry, &|_, _| {}))
        .unwrap()
        .unwrap();
    // The first DELETE's DV file is now only in an (expired) tombstone: listed;
    // the live one never.
    for live in &first_dv {
        assert!(!r.files.contains(live), "{live} is live: {:?}", r.files);
    }
    assert!(r.files.iter().all(|f| f.starts_with("deletion_vector_")));
    // A retention shorter than the table's is refused when enforced.
    let refused = VacuumOptions {
        retention_hours: Some(1.0),
        ..Default::default()
    };
    assert!(block_on(vacuum(&snapshot(&store), &refused, &|_, _| {}))
        .unwrap()
        .is_err());
    // RESTORE the first DELETE: its DVs come back, the rows are those of then.
    let m = block_on(restore(
        &snapshot(&store),
        RestoreTarget::Version(dv_version),
        10,
        "test",
    ))
    .unwrap()
    .unwrap();
    assert_eq!(m.restored_version, dv_version);
    assert_eq!(rows(&store), at_dv_version);
    // Restoring the latest version (or a later one) is refused.
    let latest = snapshot(&store);
    assert!(block_on(restore(
        &latest,
        RestoreTarget::Version(latest.version()),
        1,
        "test"
    ))
    .unwrap()
    .is_err());
}

#[test]
fn dropping_the_feature_and_manifests() {
    let (dir, store) = table();
    delete(&store, "id < 3");
    let e = block_on(deltadv::write::manifest::generate_symlink_manifest(
        &snapshot(&store),
    ))
    .unwrap()
    .unwrap_err()
    .to_string();
    assert!(e.contains("deletion vectors"), "{e}");
    let before = rows(&store);
    let r = block_on(deltadv::write::drop_feature::disable_deletion_vectors(
        &snapshot(&store),
    ))
    .unwrap()
    .unwrap();
    assert_eq!(r.barrier_versions.len(), 3);
    let s = snapshot(&store);
    let p = s.protocol();
    assert_eq!(p.min_reader_version, 1);
    assert!(p.reader_features.is_none());
    let writer = p.writer_features.clone().unwrap();
    assert!(!writer.contains(&"deletionVectors".to_string()));
    assert!(writer.contains(&"checkpointProtection".to_string()));
    assert!(s
        .files()
        .unwrap()
        .iter()
        .all(|f| f.add.deletion_vector.is_none()));
    assert_eq!(rows(&store), before);
    // Now the manifests can be written: one per partition, every live file once.
    let m = block_on(deltadv::write::manifest::generate_symlink_manifest(&s))
        .unwrap()
        .unwrap();
    assert_eq!(m.manifests.len(), 2);
    assert_eq!(m.data_files as usize, s.files().unwrap().len());
    let text = std::fs::read_to_string(
        dir.path()
            .join("_symlink_format_manifest")
            .join("g=g0")
            .join("manifest"),
    )
    .unwrap();
    assert!(text
        .lines()
        .all(|l| l.starts_with("file:/") && l.contains("g=g0/")));
}
