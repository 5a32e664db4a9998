//! UPDATE and change streams from the Rust API, on local disk: values land
//! in new files and old rows in DVs; malformed change streams are refused
//! with errors naming the row, and leave no file behind.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, RecordBatchIterator, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use deltadv::io::{block_on, TableStore};
use deltadv::scan::{read_snapshot, ScanSpec};
use deltadv::table::snapshot::Snapshot;
use deltadv::write::changes::{commit_changes, ChangeTask, DmlOperation, DmlOptions};
use deltadv::write::files::{write_table, WriteOptions};
use deltadv::write::update::update_where;

pub(super) fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("g", DataType::Utf8, true),
    ]))
}

/// A table of ids 0..n with g = "g{id % 3}", partitioned by g.
fn table(n: i64) -> (tempfile::TempDir, TableStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = TableStore::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
    let batch = RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(0..n)) as ArrayRef,
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("g{}", i % 3)),
            )),
        ],
    )
    .unwrap();
    let options = WriteOptions {
        partition_by: vec!["g".into()],
        ..Default::default()
    };
    let reader = RecordBatchIterator::new(vec![Ok(batch)], schema());
    block_on(write_table(&store, reader, &options))
        .unwrap()
        .unwrap();
    (dir, store)
}

pub(super) fn snapshot(store: &TableStore) -> Snapshot {
    block_on(Snapshot::load(store.clone(), None))
        .unwrap()
        .unwrap()
}

/// (id, g) of every live row, sorted.
pub(super) fn rows(store: &TableStore) -> Vec<(i64, String)> {
    let s = snapshot(store);
    let spec = ScanSpec::for_snapshot(&s, None);
    let mut out = Vec::new();
    for b in block_on(read_snapshot(&s, &spec)).unwrap().unwrap() {
        let id = b.column_by_name("id").unwrap();
        let id = id.as_any().downcast_ref::<Int64Array>().unwrap();
        let g = b.column_by_name("g").unwrap();
        let g = g.as_any().downcast_ref::<StringArray>().unwrap();
        for i in 0..b.num_rows() {
            out.push((id.value(i), g.value(i).to_string()));
        }
    }
    out.sort();
    out
}

pub(super) fn files_on_disk(root: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        for e in std::fs::read_dir(&p).unwrap().flatten() {
            let path = e.path();
            if path.is_dir() {
                if !path.ends_with("_delta_log") {
                    stack.push(path);
                }
            } else {
                out.push(path.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn update_moves_rows_between_partitions_with_dvs() {
    let (_dir, store) = table(30);
    let s = snapshot(&store);
    let m = block_on(update_where(
        &s,
        Some("id >= 20 AND g = 'g0'"),
        &[
            ("g".to_string(), "'moved'".to_string()),
            ("id".to_string(), "id * 10".to_string()),
        ],
        &DmlOptions::default(),
    ))
    .unwrap()
    .unwrap();
    assert_eq!(m.version, Some(1));
    assert_eq!(m.operation_metrics["numUpdatedRows"], "3"); // 21, 24, 27
    assert_eq!(m.operation_metrics["numDeletionVectorsAdded"], "1");
    assert_eq!(m.operation_metrics["numAddedFiles"], "1");
    let mut want: Vec<(i64, String)> = (0..30)
        .map(|i| {
            if i >= 20 && i % 3 == 0 {
                (i * 10, "moved".to_string())
            } else {
                (i, format!("g{}", i % 3))
            }
        })
        .collect();
    want.sort();
    assert_eq!(rows(&store), want);
    // the g0 partition's file got a DV; the new rows are in g=moved
    let s = snapshot(&store);
    let files = s.files().unwrap();
    assert!(files
        .iter()
        .any(|f| f.path.starts_with("g=g0/") && f.add.deletion_vector.is_some()));
    assert!(files.iter().any(|f| f.path.starts_with("g=moved/")));
}

/// The path of the data file of partition g0 (ids 0, 3, 6, … in order).
fn g0_file(s: &Snapshot) -> String {
    s.files()
        .unwrap()
        .into_iter()
        .find(|f| f.path.starts_with("g=g0/"))
        .unwrap()
        .path
}

/// A change stream batch: ids (new values), g, and the replaced rows.
fn change_batch(
    ids: Vec<i64>,
    paths: Vec<Option<&str>>,
    indexes: Vec<Option<i64>>,
    changes: Option<Vec<&str>>,
) -> RecordBatch {
    let n = ids.len();
    let mut fields = vec![
        Field::new("id", DataType::Int64, false),
        Field::new("g", DataType::Utf8, true),
        Field::new("_file_path", DataType::Utf8, true),
        Field::new("_row_index", DataType::Int64, true),
    ];
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids)),
        Arc::new(StringArray::from(vec!["g0"; n])),
        Arc::new(StringArray::from(paths)),
        Arc::new(Int64Array::from(indexes)),
    ];
    if let Some(c) = changes {
        fields.push(Field::new("_change", DataType::Utf8, true));
        columns.push(Arc::new(StringArray::from(c)));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

#[test]
fn change_streams_update_delete_and_insert_in_one_commit() {
    let (dir, store) = table(9);
    let s = snapshot(&store);
    let g0 = g0_file(&s);
    // g0 holds ids 0, 3, 6 at row indexes 0, 1, 2
    let task = ChangeTask::new(&s, std::slice::from_ref(&g0), &DmlOptions::default()).unwrap();
    let batch = change_batch(
        vec![100, 0, 42],
        vec![Some(&g0), Some(&g0), None],
        vec![Some(0), Some(2), None],
        Some(vec!["update", "delete", "insert"]),
    );
    let reader = RecordBatchIterator::new(vec![Ok(batch.clone())], batch.schema());
    let prepared = block_on(task.write_stream(store.clone(), reader, None))
        .unwrap()
        .unwrap();
    assert_eq!(
        (prepared.updated, prepared.deleted, prepared.inserted),
        (1, 1, 1)
    );
    let m = block_on(commit_changes(
        &s,
        DmlOperation::Merge,
        vec![prepared],
        &DmlOptions::default(),
    ))
    .unwrap()
    .unwrap();
    assert_eq!(m.version, Some(1));
    assert_eq!(m.operation_metrics["numTargetRowsUpdated"], "1");
    assert_eq!(m.operation_metrics["numTargetRowsDeleted"], "1");
    assert_eq!(m.operation_metrics["numTargetRowsInserted"], "1");
    let got: Vec<i64> = rows(&store).into_iter().map(|(id, _)| id).collect();
    assert_eq!(got, vec![1, 2, 3, 4, 5, 7, 8, 42, 100]);
    drop(dir);
}

#[test]
fn malformed_change_streams_are_refused_and_leave_nothing() {
    let (dir, store) = table(9);
    let s = snapshot(&store);
    let g0 = g0_file(&s);
    let before = files_on_disk(dir.path());
    let task = ChangeTask::new(&s, std::slice::from_ref(&g0), &DmlOptions::default()).unwrap();
    let cases = [
        (
            change_batch(
                vec![1, 2],
                vec![Some(&g0), Some(&g0)],
                vec![Some(0), Some(0)],
                None,
            ),
            "target row 0 of g=g0/",
        ),
        (
            change_batch(vec![1], vec![None], vec![Some(0)], None),
            "row 0 changes a row but has no _file_path",
        ),
        (
            change_batch(vec![1], vec![Some(&g0)], vec![Some(-1)], None),
            "has no valid _row_index",
        ),
        (
            change_batch(
                vec![1],
                vec![Some("g=g1/other.parquet")],
                vec![Some(0)],
                None,
            ),
            "is not one of the files this change may touch",
        ),
        (
            change_batch(
                vec![1],
                vec![Some(&g0)],
                vec![Some(0)],
                Some(vec!["upsert"]),
            ),
            "_change of row 0 is Some(\"upsert\")",
        ),
        (
            change_batch(vec![1], vec![Some(&g0)], vec![Some(7)], None),
            "row index 7 is out of range",
        ),
    ];
    for (batch, want) in cases {
        // a first good batch writes a data file, which the failure removes
        let good = change_batch(vec![50], vec![None], vec![None], Some(vec!["insert"]));
        let good = good.project(&[0, 1, 2, 3, 4]).unwrap();
        let batch = if batch.num_columns() == 5 {
            batch
        } else {
            let n = batch.num_rows();
            let mut cols = batch.columns().to_vec();
            cols.push(Arc::new(StringArray::from(vec!["update"; n])));
            RecordBatch::try_new(good.schema(), cols).unwrap()
        };
        let reader = RecordBatchIterator::new(vec![Ok(good), Ok(batch)], task_schema());
        let err = block_on(task.write_stream(store.clone(), reader, None))
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{want}: {err}");
        assert_eq!(files_on_disk(dir.path()), before, "{want}");
    }
    assert_eq!(snapshot(&store).version(), 0);
}

fn task_schema() -> SchemaRef {
    change_batch(vec![], vec![], vec![], Some(vec![])).schema()
}
