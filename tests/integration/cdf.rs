//! The Change Data Feed from the Rust API, on local disk: a table created
//! with `delta.enableChangeDataFeed` gets the writer feature; a DELETE with
//! DVs writes no change file and is read back from the DV difference; UPDATE
//! and MERGE write `cdc` files (pre/post images, deletes, inserts) that the
//! reader serves exactly; ranges, timestamps and a table without the feed.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, Int64Array, RecordBatch, RecordBatchIterator, StringArray,
    TimestampMicrosecondArray,
};
use deltadv::io::{block_on, TableStore};
use deltadv::log::actions::{parse_commit, Action};
use deltadv::scan::cdf::{plan_changes, ChangeOptions};
use deltadv::write::changes::DmlOptions;
use deltadv::write::delete::{delete_where, DeleteOptions};
use deltadv::write::files::{write_table, WriteOptions};
use deltadv::write::merge::{merge, ClauseAction, ClauseKind, MergeClause, MergeSpec};
use deltadv::write::update::update_where;

use super::update::{schema, snapshot};

/// (id, g, _change_type, _commit_version) of a change row.
type Change = (i64, String, String, i64);

fn table(n: i64, feed: bool) -> (tempfile::TempDir, TableStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = TableStore::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
    let batch = RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(0..n)) as ArrayRef,
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("g{}", i % 2)),
            )),
        ],
    )
    .unwrap();
    let mut options = WriteOptions {
        partition_by: vec!["g".into()],
        ..Default::default()
    };
    if feed {
        options
            .configuration
            .insert("delta.enableChangeDataFeed".into(), "true".into());
    }
    let reader = RecordBatchIterator::new(vec![Ok(batch)], schema());
    block_on(write_table(&store, reader, &options))
        .unwrap()
        .unwrap();
    (dir, store)
}

fn changes(store: &TableStore, options: &ChangeOptions) -> deltadv::Result<Vec<Change>> {
    let plan = block_on(plan_changes(store, "unused", &HashMap::new(), options)).unwrap()?;
    let mut out = Vec::new();
    for task in &plan.tasks {
        let mut task = task.clone();
        task.table_uri = store.url().to_string();
        for b in block_on(task.read()).unwrap()? {
            assert_eq!(b.schema(), plan.schema);
            let col = |n: &str| b.column_by_name(n).unwrap().clone();
            let id = col("id");
            let id = id.as_any().downcast_ref::<Int64Array>().unwrap();
            let g = col("g");
            let g = g.as_any().downcast_ref::<StringArray>().unwrap();
            let t = col("_change_type");
            let t = t.as_any().downcast_ref::<StringArray>().unwrap();
            let v = col("_commit_version");
            let v = v.as_any().downcast_ref::<Int64Array>().unwrap();
            let ts = col("_commit_timestamp");
            let ts = ts
                .as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .unwrap();
            for i in 0..b.num_rows() {
                assert!(ts.is_valid(i) && ts.value(i) > 0);
                out.push((
                    id.value(i),
                    g.value(i).to_string(),
                    t.value(i).to_string(),
                    v.value(i),
                ));
            }
        }
    }
    out.sort();
    Ok(out)
}

fn version(v: u64) -> ChangeOptions {
    ChangeOptions {
        starting_version: Some(v),
        ending_version: Some(v),
        ..Default::default()
    }
}

fn change(id: i64, g: &str, kind: &str, v: i64) -> Change {
    (id, g.to_string(), kind.to_string(), v)
}

/// The actions of commit `v`.
fn commit(dir: &std::path::Path, v: u64) -> Vec<Action> {
    let name = format!("{v:020}.json");
    let bytes = std::fs::read(dir.join("_delta_log").join(&name)).unwrap();
    parse_commit(&bytes, &name).unwrap()
}

fn cdc_files(actions: &[Action]) -> usize {
    actions
        .iter()
        .filter(|a| matches!(a, Action::Cdc(_)))
        .count()
}

#[test]
fn delete_update_merge_are_read_back_from_the_feed() {
    let (dir, store) = table(10, true);
    let protocol = snapshot(&store).protocol().clone();
    assert!(protocol
        .writer_features
        .unwrap()
        .contains(&"changeDataFeed".to_string()));
    // v0: every row inserted.
    let v0 = changes(&store, &version(0)).unwrap();
    assert_eq!(v0.len(), 10);
    assert!(v0.iter().all(|c| c.2 == "insert" && c.3 == 0));

    // v1: DELETE with a DV: no cdc file, the deletes come from the DV.
    block_on(delete_where(
        &snapshot(&store),
        Some("id IN (3, 4)"),
        &DeleteOptions::default(),
    ))
    .unwrap()
    .unwrap();
    assert_eq!(cdc_files(&commit(dir.path(), 1)), 0);
    assert_eq!(
        changes(&store, &version(1)).unwrap(),
        vec![change(3, "g1", "delete", 1), change(4, "g0", "delete", 1)]
    );

    // v2: UPDATE moving id 5 to g0 and renaming g of id 1 (same file as 3).
    let m = block_on(update_where(
        &snapshot(&store),
        Some("id = 5 OR id = 1"),
        &[("g".into(), "'g0'".into())],
        &DmlOptions::default(),
    ))
    .unwrap()
    .unwrap();
    let files = cdc_files(&commit(dir.path(), 2));
    assert!(files > 0);
    assert_eq!(
        m.operation_metrics["numAddedChangeFiles"],
        files.to_string().as_str()
    );
    assert_eq!(
        changes(&store, &version(2)).unwrap(),
        vec![
            change(1, "g0", "update_postimage", 2),
            change(1, "g1", "update_preimage", 2),
            change(5, "g0", "update_postimage", 2),
            change(5, "g1", "update_preimage", 2),
        ]
    );

    // v3: MERGE: update 0, delete 2, insert 42.
    let mut spec = MergeSpec::new("t.id = s.id");
    spec.target_alias = "t".into();
    spec.source_alias = "s".into();
    spec.clauses = vec![
        MergeClause {
            kind: ClauseKind::Matched,
            action: ClauseAction::Delete,
            condition: Some("s.id = 2".into()),
            assignments: Vec::new(),
        },
        MergeClause {
            kind: ClauseKind::Matched,
            action: ClauseAction::UpdateAll,
            condition: None,
            assignments: Vec::new(),
        },
        MergeClause {
            kind: ClauseKind::NotMatched,
            action: ClauseAction::InsertAll,
            condition: None,
            assignments: Vec::new(),
        },
    ];
    let source = RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(vec![0, 2, 42])) as ArrayRef,
            Arc::new(StringArray::from(vec!["g0", "g0", "g1"])),
        ],
    )
    .unwrap();
    let m = block_on(merge(
        &snapshot(&store),
        RecordBatchIterator::new(vec![Ok(source)], schema()),
        &spec,
        &DmlOptions::default(),
    ))
    .unwrap()
    .unwrap();
    assert_ne!(m.operation_metrics["numTargetChangeFilesAdded"], "0");
    assert_eq!(
        changes(&store, &version(3)).unwrap(),
        vec![
            change(0, "g0", "update_postimage", 3),
            change(0, "g0", "update_preimage", 3),
            change(2, "g0", "delete", 3),
            change(42, "g1", "insert", 3),
        ]
    );

    // The whole range is the union, and the feed agrees with the table: the
    // net of the changes is what a scan reads.
    let all = changes(&store, &ChangeOptions::default()).unwrap();
    assert_eq!(all.len(), 10 + 2 + 4 + 4);
    let mut net: std::collections::BTreeMap<i64, String> = Default::default();
    for v in 0..=3 {
        let of_version = || all.iter().filter(move |c| c.3 == v);
        for (id, _, kind, _) in of_version() {
            if kind == "delete" || kind == "update_preimage" {
                net.remove(id);
            }
        }
        for (id, g, kind, _) in of_version() {
            if kind == "insert" || kind == "update_postimage" {
                net.insert(*id, g.clone());
            }
        }
    }
    let net: Vec<(i64, String)> = net.into_iter().collect();
    assert_eq!(net, super::update::rows(&store));
}

#[test]
fn ranges_and_refusals() {
    let (_dir, store) = table(4, true);
    block_on(delete_where(
        &snapshot(&store),
        Some("id = 1"),
        &DeleteOptions::default(),
    ))
    .unwrap()
    .unwrap();
    // An ending version past the latest is clipped.
    let clipped = ChangeOptions {
        starting_version: Some(1),
        ending_version: Some(99),
        ..Default::default()
    };
    assert_eq!(
        changes(&store, &clipped).unwrap(),
        vec![change(1, "g1", "delete", 1)]
    );
    // Start after the latest, or after the end: version not found.
    for (start, end) in [(5, None), (1, Some(0))] {
        let o = ChangeOptions {
            starting_version: Some(start),
            ending_version: end,
            ..Default::default()
        };
        let e = changes(&store, &o).unwrap_err();
        assert!(matches!(e, deltadv::Error::VersionNotFound(_)), "{e}");
    }
    // Timestamps: from the first commit's time on, everything.
    let from_start = ChangeOptions {
        starting_timestamp: Some(0),
        ..Default::default()
    };
    assert_eq!(changes(&store, &from_start).unwrap().len(), 5);
    let past = ChangeOptions {
        starting_timestamp: Some(i64::MAX / 2),
        ..Default::default()
    };
    assert!(matches!(
        changes(&store, &past).unwrap_err(),
        deltadv::Error::VersionNotFound(_)
    ));
    // A table without the feed.
    let (_dir, plain) = table(4, false);
    let e = changes(&plain, &ChangeOptions::default()).unwrap_err();
    assert!(e.to_string().contains("delta.enableChangeDataFeed"), "{e}");
}

/// (id, g, _change_type, _commit_version) of `batches`' rows, in order.
fn rows_of(batches: &[RecordBatch]) -> Vec<Change> {
    let mut out = Vec::new();
    for b in batches {
        let col = |n: &str| b.column_by_name(n).unwrap().clone();
        let (id, g, t, v) = (
            col("id"),
            col("g"),
            col("_change_type"),
            col("_commit_version"),
        );
        let id = id.as_any().downcast_ref::<Int64Array>().unwrap();
        let g = g.as_any().downcast_ref::<StringArray>().unwrap();
        let t = t.as_any().downcast_ref::<StringArray>().unwrap();
        let v = v.as_any().downcast_ref::<Int64Array>().unwrap();
        for i in 0..b.num_rows() {
            out.push(change(id.value(i), g.value(i), t.value(i), v.value(i)));
        }
    }
    out
}

#[test]
fn tasks_read_at_once_keep_commit_and_row_order() {
    use deltadv::scan::cdf::stream_tasks;
    use deltadv::scan::ReadOptions;
    use deltadv::write::data::WriterOptions;
    use deltadv::write::files::SaveMode;
    use futures::TryStreamExt;

    // Many files of several row groups over three appends, then a DELETE
    // with DVs (rows read back by DV difference) and an UPDATE (cdc files).
    let dir = tempfile::tempdir().unwrap();
    let store = TableStore::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
    for (v, (from, n)) in [(0i64, 600i64), (600, 300), (900, 900)]
        .into_iter()
        .enumerate()
    {
        let batch = RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from_iter_values(from..from + n)) as ArrayRef,
                Arc::new(StringArray::from_iter_values(
                    (from..from + n).map(|i| format!("g{}", i % 3)),
                )),
            ],
        )
        .unwrap();
        let mut options = WriteOptions {
            mode: if v == 0 {
                SaveMode::ErrorIfExists
            } else {
                SaveMode::Append
            },
            partition_by: vec!["g".into()],
            writer: WriterOptions {
                max_rows_per_file: Some(70),
                row_group_rows: Some(16),
                ..Default::default()
            },
            ..Default::default()
        };
        options
            .configuration
            .insert("delta.enableChangeDataFeed".into(), "true".into());
        let reader = RecordBatchIterator::new(vec![Ok(batch)], schema());
        block_on(write_table(&store, reader, &options))
            .unwrap()
            .unwrap();
    }
    let listed = |ids: Vec<i64>| {
        let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
        format!("id IN ({})", ids.join(", "))
    };
    let deleted: Vec<i64> = (0..1800).filter(|i| i % 7 == 3).collect();
    let updated: Vec<i64> = (0..1800).filter(|i| i % 11 == 5 && i % 7 != 3).collect();
    block_on(delete_where(
        &snapshot(&store),
        Some(&listed(deleted.clone())),
        &DeleteOptions::default(),
    ))
    .unwrap()
    .unwrap();
    block_on(update_where(
        &snapshot(&store),
        Some(&listed(updated.clone())),
        &[("g".into(), "'g9'".into())],
        &DmlOptions::default(),
    ))
    .unwrap()
    .unwrap();

    let plan = block_on(plan_changes(
        &store,
        store.url().as_ref(),
        &HashMap::new(),
        &ChangeOptions::default(),
    ))
    .unwrap()
    .unwrap();
    assert!(plan.tasks.len() > 40, "{} tasks", plan.tasks.len());
    // One task after the other, each read on its own: the order to keep.
    let mut one_by_one = Vec::new();
    for task in &plan.tasks {
        one_by_one.extend(block_on(task.read()).unwrap().unwrap());
    }
    let expected = rows_of(&one_by_one);
    assert_eq!(expected.len(), 1800 + deleted.len() + 2 * updated.len());
    let versions: Vec<i64> = expected.iter().map(|c| c.3).collect();
    assert!(versions.is_sorted(), "commit order");
    let read = |threads: usize, ordered: bool| {
        let options = ReadOptions {
            threads,
            ordered,
            ..ReadOptions::default()
        };
        let (store, tasks) = (store.clone(), plan.tasks.clone());
        let batches: Vec<RecordBatch> =
            block_on(async move { stream_tasks(store, tasks, options).try_collect().await })
                .unwrap()
                .unwrap();
        assert!(batches.iter().all(|b| b.schema() == plan.schema));
        rows_of(&batches)
    };
    for threads in [1, 2, 3, 8] {
        assert_eq!(read(threads, true), expected, "{threads} threads");
    }
    let mut unordered = read(4, false);
    unordered.sort();
    let mut sorted = expected.clone();
    sorted.sort();
    assert_eq!(unordered, sorted);
}
