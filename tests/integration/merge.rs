//! MERGE from the Rust API, on local disk: an upsert lands updated rows in a
//! new file and their old copies in one DV file; NOT MATCHED BY SOURCE runs
//! once over a source read in several chunks; a bad MERGE leaves nothing; an
//! upsert that lost a race reads only the partitions of its condition.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, RecordBatchIterator, StringArray};
use deltadv::io::{block_on, TableStore};
use deltadv::write::changes::DmlOptions;
use deltadv::write::files::{write_table, WriteOptions};
use deltadv::write::merge::{merge, ClauseAction, ClauseKind, MergeClause, MergeSpec};

use super::update::{files_on_disk, rows, schema, snapshot};

fn batch(ids: &[i64], g: &str) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef,
            Arc::new(StringArray::from_iter_values(ids.iter().map(|_| g))),
        ],
    )
    .unwrap()
}

fn table(n: i64) -> (tempfile::TempDir, TableStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = TableStore::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
    let ids: Vec<i64> = (0..n).collect();
    let reader = RecordBatchIterator::new(vec![Ok(batch(&ids, "old"))], schema());
    block_on(write_table(&store, reader, &WriteOptions::default()))
        .unwrap()
        .unwrap();
    (dir, store)
}

fn clause(kind: ClauseKind, action: ClauseAction, condition: Option<&str>) -> MergeClause {
    MergeClause {
        kind,
        action,
        condition: condition.map(String::from),
        assignments: Vec::new(),
    }
}

#[test]
fn upsert_writes_one_dv_file_and_one_new_file() {
    let (dir, store) = table(10);
    let mut spec = MergeSpec::new("t.id = s.id");
    spec.target_alias = "t".into();
    spec.source_alias = "s".into();
    spec.clauses = vec![
        clause(ClauseKind::Matched, ClauseAction::UpdateAll, None),
        clause(ClauseKind::NotMatched, ClauseAction::InsertAll, None),
    ];
    let source = RecordBatchIterator::new(vec![Ok(batch(&[2, 5, 20], "new"))], schema());
    let m = block_on(merge(
        &snapshot(&store),
        source,
        &spec,
        &DmlOptions::default(),
    ))
    .unwrap()
    .unwrap();
    assert_eq!(m.version, Some(1));
    let metric = |k: &str| m.operation_metrics[k].as_str().unwrap().to_string();
    assert_eq!(metric("numTargetRowsUpdated"), "2");
    assert_eq!(metric("numTargetRowsInserted"), "1");
    assert_eq!(metric("numTargetDeletionVectorsAdded"), "1");
    assert_eq!(metric("numSourceRows"), "3");
    let mut want: Vec<(i64, String)> = (0..10)
        .map(|i| (i, if i == 2 || i == 5 { "new" } else { "old" }.to_string()))
        .collect();
    want.push((20, "new".into()));
    assert_eq!(rows(&store), want);
    let dv_files = files_on_disk(dir.path())
        .iter()
        .filter(|p| {
            p.rsplit('/')
                .next()
                .unwrap()
                .starts_with("deletion_vector_")
        })
        .count();
    assert_eq!(dv_files, 1);
}

#[test]
fn not_matched_by_source_runs_once_over_a_chunked_source() {
    let (_dir, store) = table(10);
    let mut spec = MergeSpec::new("target.id = source.id");
    spec.source_chunk_bytes = 1; // one chunk per batch
    spec.clauses = vec![
        clause(ClauseKind::Matched, ClauseAction::UpdateAll, None),
        clause(
            ClauseKind::NotMatchedBySource,
            ClauseAction::Delete,
            Some("id >= 5"),
        ),
    ];
    let batches: Vec<_> = (0..7).map(|i| Ok(batch(&[i], "new"))).collect();
    let source = RecordBatchIterator::new(batches, schema());
    block_on(merge(
        &snapshot(&store),
        source,
        &spec,
        &DmlOptions::default(),
    ))
    .unwrap()
    .unwrap();
    let want: Vec<(i64, String)> = (0..7).map(|i| (i, "new".to_string())).collect();
    assert_eq!(rows(&store), want);
}

#[test]
fn a_failed_merge_leaves_no_file() {
    let (dir, store) = table(10);
    let before = files_on_disk(dir.path());
    let mut spec = MergeSpec::new("target.id = source.id");
    spec.clauses = vec![clause(ClauseKind::Matched, ClauseAction::UpdateAll, None)];
    // Two source rows for target row 3, in one batch
    let source = RecordBatchIterator::new(vec![Ok(batch(&[1, 3, 3], "x"))], schema());
    let err = block_on(merge(
        &snapshot(&store),
        source,
        &spec,
        &DmlOptions::default(),
    ))
    .unwrap()
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"),
        "{text}"
    );
    assert!(text.contains("target.id = 3"), "{text}");
    assert_eq!(files_on_disk(dir.path()), before);
    assert_eq!(snapshot(&store).version(), 0);
}

/// Two MERGEs on version 0 of a table partitioned by `g`: the first inserts
/// id 100 into partition "new" (version 1); the second, on the stale
/// snapshot, loses the race. A condition that reads partition "old" only is
/// not stopped by the new file (another partition), though its row has one
/// of the source's keys; one that reads every partition conflicts.
#[test]
fn an_upsert_reads_only_the_partitions_of_its_condition() {
    let dir = tempfile::tempdir().unwrap();
    let store = TableStore::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
    let ids: Vec<i64> = (0..10).collect();
    let reader = RecordBatchIterator::new(vec![Ok(batch(&ids, "old"))], schema());
    let options = WriteOptions {
        partition_by: vec!["g".into()],
        ..Default::default()
    };
    block_on(write_table(&store, reader, &options))
        .unwrap()
        .unwrap();
    let stale = snapshot(&store);
    let upsert = |condition: &str| {
        let mut spec = MergeSpec::new(condition);
        spec.target_alias = "t".into();
        spec.source_alias = "s".into();
        spec.clauses = vec![
            clause(ClauseKind::Matched, ClauseAction::UpdateAll, None),
            clause(ClauseKind::NotMatched, ClauseAction::InsertAll, None),
        ];
        spec
    };
    let winner = RecordBatchIterator::new(vec![Ok(batch(&[100], "new"))], schema());
    let m = block_on(merge(
        &stale,
        winner,
        &upsert("t.id = s.id"),
        &DmlOptions::default(),
    ))
    .unwrap()
    .unwrap();
    assert_eq!(m.version, Some(1));
    let source = || RecordBatchIterator::new(vec![Ok(batch(&[1, 100], "old"))], schema());
    let err = block_on(merge(
        &stale,
        source(),
        &upsert("t.id = s.id"),
        &DmlOptions::default(),
    ))
    .unwrap()
    .unwrap_err()
    .to_string();
    assert!(err.contains("ConcurrentAppend"), "{err}");
    assert!(err.contains("would have matched"), "{err}");
    let m = block_on(merge(
        &stale,
        source(),
        &upsert("t.g = 'old' AND t.id = s.id"),
        &DmlOptions::default(),
    ))
    .unwrap()
    .unwrap();
    assert_eq!((m.version, m.attempts), (Some(2), 2));
    let mut want: Vec<(i64, String)> = (0..10).map(|i| (i, "old".to_string())).collect();
    want.push((100, "new".into()));
    want.push((100, "old".into()));
    let mut got = rows(&store);
    got.sort();
    want.sort();
    assert_eq!(got, want);
}
