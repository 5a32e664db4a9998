//! The data-file writer end to end on local disk: streamed batches become
//! rolled, partitioned files whose rows and stats read back; appends commit as
//! blind appends; a failing input stream leaves no file behind.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, RecordBatchIterator, StringArray};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};
use deltadv::io::{block_on, TableStore};
use deltadv::scan::{read_snapshot, ScanSpec};
use deltadv::table::snapshot::Snapshot;
use deltadv::write::data::WriterOptions;
use deltadv::write::files::{write_table, SaveMode, WriteOptions};
use serde_json::Value;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("g", DataType::Utf8, true),
    ]))
}

fn batch(ids: std::ops::Range<i64>) -> RecordBatch {
    let g: Vec<Option<String>> = ids
        .clone()
        .map(|i| (i % 3 != 2).then(|| format!("g{}", i % 3)))
        .collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(ids)) as ArrayRef,
            Arc::new(StringArray::from(g)),
        ],
    )
    .unwrap()
}

fn data_files(root: &std::path::Path) -> usize {
    fn walk(p: &std::path::Path, n: &mut usize) {
        for e in std::fs::read_dir(p).unwrap().flatten() {
            let path = e.path();
            if path.is_dir() && !path.ends_with("_delta_log") {
                walk(&path, n);
            } else if path.extension().is_some_and(|x| x == "parquet") {
                *n += 1;
            }
        }
    }
    let mut n = 0;
    walk(root, &mut n);
    n
}

fn ids(snapshot: &Snapshot) -> Vec<i64> {
    let spec = ScanSpec::for_snapshot(snapshot, Some(vec!["id".into()]));
    let batches = block_on(read_snapshot(snapshot, &spec)).unwrap().unwrap();
    let mut out: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn streamed_batches_become_rolled_partitioned_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = TableStore::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
    let batches = (0..10).map(|i| Ok::<_, ArrowError>(batch(i * 100..(i + 1) * 100)));
    let options = WriteOptions {
        partition_by: vec!["g".into()],
        writer: WriterOptions {
            max_rows_per_file: Some(150),
            ..Default::default()
        },
        ..Default::default()
    };
    let reader = RecordBatchIterator::new(batches, schema());
    assert_eq!(
        block_on(write_table(&store, reader, &options))
            .unwrap()
            .unwrap(),
        0
    );
    let snapshot = block_on(Snapshot::load(store.clone(), None))
        .unwrap()
        .unwrap();
    assert_eq!(ids(&snapshot), (0..1000).collect::<Vec<_>>());
    let files = snapshot.files().unwrap();
    // 334 + 333 + 333 rows in three partitions, at most 150 rows a file
    assert_eq!(files.len(), 3 + 3 + 3);
    let mut total = 0;
    for f in &files {
        let stats: Value = serde_json::from_str(f.add.stats.as_deref().unwrap()).unwrap();
        let n = stats["numRecords"].as_i64().unwrap();
        assert!(n <= 150, "{n}");
        total += n;
        assert!(stats["minValues"]["id"].as_i64() <= stats["maxValues"]["id"].as_i64());
        assert_eq!(stats["nullCount"]["id"], 0);
        assert!(
            stats["minValues"].get("g").is_none(),
            "partition columns have no stats"
        );
    }
    assert_eq!(total, 1000);
    assert_eq!(data_files(dir.path()), files.len());

    // append: a blind append on top
    let append = WriteOptions {
        mode: SaveMode::Append,
        ..Default::default()
    };
    let reader = RecordBatchIterator::new([Ok(batch(1000..1010))], schema());
    assert_eq!(
        block_on(write_table(&store, reader, &append))
            .unwrap()
            .unwrap(),
        1
    );
    let snapshot = block_on(Snapshot::load(store.clone(), None))
        .unwrap()
        .unwrap();
    assert_eq!(ids(&snapshot).len(), 1010);
    let history = block_on(snapshot.history(Some(1))).unwrap().unwrap();
    assert_eq!(history[0]["operation"], "WRITE");
    assert_eq!(history[0]["isBlindAppend"], true);
    assert_eq!(history[0]["operationParameters"]["mode"], "Append");
}

#[test]
fn a_failing_stream_leaves_no_file_and_no_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = TableStore::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
    let batches = (0..5)
        .map(|i| Ok(batch(i * 10..(i + 1) * 10)))
        .chain([Err(ArrowError::ComputeError("the source broke".into()))]);
    let options = WriteOptions {
        writer: WriterOptions {
            max_rows_per_file: Some(10),
            ..Default::default()
        },
        ..Default::default()
    };
    let reader = RecordBatchIterator::new(batches, schema());
    let err = block_on(write_table(&store, reader, &options))
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(err.contains("the source broke"), "{err}");
    assert_eq!(data_files(dir.path()), 0);
    assert!(!dir.path().join("_delta_log").exists());
}

#[test]
fn an_existing_table_is_not_overwritten_and_append_needs_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = TableStore::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
    let append = WriteOptions {
        mode: SaveMode::Append,
        ..Default::default()
    };
    let reader = RecordBatchIterator::new([Ok(batch(0..5))], schema());
    let err = block_on(write_table(&store, reader, &append))
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, deltadv::Error::NotATable(_)), "{err}");
    let reader = RecordBatchIterator::new([Ok(batch(0..5))], schema());
    block_on(write_table(&store, reader, &WriteOptions::default()))
        .unwrap()
        .unwrap();
    let reader = RecordBatchIterator::new([Ok(batch(0..5))], schema());
    let err = block_on(write_table(&store, reader, &WriteOptions::default()))
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, deltadv::Error::TableExists(_)), "{err}");
    assert_eq!(data_files(dir.path()), 1);
}

#[test]
fn a_column_mapped_table_is_created_with_ids_and_physical_names() {
    for mode in ["name", "id"] {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
        let options = WriteOptions {
            configuration: [("delta.columnMapping.mode".to_string(), mode.to_string())].into(),
            partition_by: vec!["g".into()],
            ..Default::default()
        };
        let reader = RecordBatchIterator::new([Ok(batch(0..5))], schema());
        block_on(write_table(&store, reader, &options))
            .unwrap()
            .unwrap();
        let snapshot = block_on(Snapshot::load(store.clone(), None))
            .unwrap()
            .unwrap();
        let fields = &snapshot.schema().fields;
        assert_eq!(fields[0].field_id(), Some(1));
        assert_eq!(fields[1].field_id(), Some(2));
        let g = fields[1]
            .physical_name(snapshot.column_mapping())
            .unwrap()
            .to_string();
        assert!(g.starts_with("col-"), "{g}");
        let config = &snapshot.metadata().configuration;
        assert_eq!(
            config["delta.columnMapping.maxColumnId"].as_deref(),
            Some("2")
        );
        let p = snapshot.protocol();
        assert_eq!((p.min_reader_version, p.min_writer_version), (3, 7));
        assert!(p
            .reader_features
            .as_ref()
            .unwrap()
            .contains(&"columnMapping".into()));
        assert!(p
            .writer_features
            .as_ref()
            .unwrap()
            .contains(&"columnMapping".into()));
        // Partition values are keyed by the physical name; the rows read back.
        let files = snapshot.files().unwrap();
        assert!(files
            .iter()
            .all(|f| f.add.partition_values.contains_key(&g)));
        assert_eq!(ids(&snapshot), vec![0, 1, 2, 3, 4]);
    }
}

/// An overwrite reads the whole table: a concurrent DELETE that changed a
/// file it removes is a conflict (nothing committed); a concurrent blind
/// append is not (WriteSerializable, as Delta Spark), and its rows stay; a
/// predicate overwrite cutting a file with DVs rebases over a concurrent
/// DELETE of other rows of that file.
#[test]
fn overwrite_conflicts_as_delta_spark_does() {
    use deltadv::write::delete::{delete_where, DeleteOptions};
    use deltadv::write::files::write_files;
    use deltadv::write::overwrite::{overwrite_files, OverwriteOptions};

    let dir = tempfile::tempdir().unwrap();
    let store = TableStore::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
    let reader = RecordBatchIterator::new([Ok(batch(0..20))], schema());
    block_on(write_table(&store, reader, &WriteOptions::default()))
        .unwrap()
        .unwrap();
    let overwrite = WriteOptions {
        mode: SaveMode::Overwrite,
        ..Default::default()
    };
    let load = || {
        block_on(Snapshot::load(store.clone(), None))
            .unwrap()
            .unwrap()
    };
    let new_files = || {
        let reader = RecordBatchIterator::new([Ok(batch(100..105))], schema());
        block_on(write_files(&store, reader, None, &overwrite))
            .unwrap()
            .unwrap()
    };

    // A concurrent DELETE of a file the overwrite removes: conflict.
    let read = load();
    let adds = new_files();
    block_on(delete_where(
        &load(),
        Some("id < 3"),
        &DeleteOptions::default(),
    ))
    .unwrap()
    .unwrap();
    let err = block_on(overwrite_files(&read, adds, &OverwriteOptions::default()))
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, deltadv::Error::Conflict { .. }), "{err}");
    assert_eq!(load().version(), 1);

    // A concurrent blind append: the overwrite proceeds, the appended rows stay.
    let read = load();
    let adds = new_files();
    let append = WriteOptions {
        mode: SaveMode::Append,
        ..Default::default()
    };
    let reader = RecordBatchIterator::new([Ok(batch(50..52))], schema());
    block_on(write_table(&store, reader, &append))
        .unwrap()
        .unwrap();
    let v = block_on(overwrite_files(&read, adds, &OverwriteOptions::default()))
        .unwrap()
        .unwrap();
    assert_eq!(v, 3);
    assert_eq!(ids(&load()), vec![50, 51, 100, 101, 102, 103, 104]);

    // replaceWhere cutting a file with a DV, racing a DELETE of other rows.
    let read = load();
    let reader = RecordBatchIterator::new([Ok(batch(100..101))], schema());
    let adds = block_on(write_files(&store, reader, None, &overwrite))
        .unwrap()
        .unwrap();
    block_on(delete_where(
        &load(),
        Some("id = 104"),
        &DeleteOptions::default(),
    ))
    .unwrap()
    .unwrap();
    let options = OverwriteOptions {
        predicate: Some("id <= 101".into()),
        ..Default::default()
    };
    block_on(overwrite_files(&read, adds, &options))
        .unwrap()
        .unwrap();
    assert_eq!(ids(&load()), vec![100, 102, 103]);
}

#[test]
fn replace_where_conflicts_only_with_appended_rows_it_matches() {
    use deltadv::write::files::write_files;
    use deltadv::write::overwrite::{overwrite_files, OverwriteOptions};

    let dir = tempfile::tempdir().unwrap();
    let store = TableStore::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
    // Serializable: a concurrent blind append is in every reader's way.
    let create = WriteOptions {
        configuration: [(
            "delta.isolationLevel".to_string(),
            "Serializable".to_string(),
        )]
        .into(),
        ..Default::default()
    };
    let reader = RecordBatchIterator::new([Ok(batch(0..20))], schema());
    block_on(write_table(&store, reader, &create))
        .unwrap()
        .unwrap();
    let load = || {
        block_on(Snapshot::load(store.clone(), None))
            .unwrap()
            .unwrap()
    };
    let replace = |predicate: Option<&str>| {
        let options = WriteOptions {
            mode: SaveMode::Overwrite,
            predicate: predicate.map(str::to_string),
            ..Default::default()
        };
        let reader = RecordBatchIterator::new([Ok(batch(0..3))], schema());
        let adds = block_on(write_files(&store, reader, None, &options))
            .unwrap()
            .unwrap();
        let options = OverwriteOptions {
            predicate: predicate.map(str::to_string),
            ..Default::default()
        };
        (adds, options)
    };
    let append = |ids: std::ops::Range<i64>| {
        let options = WriteOptions {
            mode: SaveMode::Append,
            ..Default::default()
        };
        let reader = RecordBatchIterator::new([Ok(batch(ids))], schema());
        block_on(write_table(&store, reader, &options))
            .unwrap()
            .unwrap();
    };

    // A concurrent append of rows outside the predicate: rebased, commits.
    let read = load();
    let (adds, options) = replace(Some("id < 10"));
    append(50..52);
    let v = block_on(overwrite_files(&read, adds, &options))
        .unwrap()
        .unwrap();
    assert_eq!(v, 2);
    let mut expected: Vec<i64> = (0..3).chain(10..20).chain(50..52).collect();
    assert_eq!(ids(&load()), expected);

    // One of whose rows the predicate matches: ConcurrentAppend, nothing committed.
    let read = load();
    let (adds, options) = replace(Some("id < 10"));
    append(5..6);
    let err = block_on(overwrite_files(&read, adds, &options))
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(&err, deltadv::Error::Conflict { version: 3, detail }
            if detail.contains("ConcurrentAppend") && detail.contains("id = 5")),
        "{err}"
    );
    assert_eq!(load().version(), 3);
    expected.insert(3, 5);
    assert_eq!(ids(&load()), expected);

    // An overwrite of the whole table reads every row: any append conflicts.
    let read = load();
    let (adds, options) = replace(None);
    append(60..61);
    let err = block_on(overwrite_files(&read, adds, &options))
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(&err, deltadv::Error::Conflict { detail, .. } if detail.contains("ConcurrentAppend")),
        "{err}"
    );
}
