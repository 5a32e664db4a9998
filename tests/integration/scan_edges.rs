//! Scans at the edges: an empty table, a file whose rows are all deleted, a
//! DV covering a whole row group, projections with columns the file or the
//! table does not have.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use deltadv::io::block_on;
use deltadv::scan::{self, ScanSpec};
use deltadv::write::dv_files;
use deltadv::{Error, RoaringTreemap};
use serde_json::json;

use crate::fixture::{add, inline_dv, metadata, protocol, Table};

fn ids(batches: &[RecordBatch]) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|b| {
            b.column_by_name("id")
                .unwrap()
                .as_primitive::<Int64Type>()
                .values()
                .to_vec()
        })
        .collect()
}

fn read(t: &Table, columns: Option<Vec<&str>>) -> deltadv::Result<Vec<RecordBatch>> {
    let s = t.load(None).unwrap();
    let spec = ScanSpec::for_snapshot(
        &s,
        columns.map(|c| c.into_iter().map(str::to_string).collect()),
    );
    block_on(scan::read_snapshot(&s, &spec)).unwrap()
}

#[test]
fn empty_table_reads_no_rows_with_the_schema() {
    let t = Table::new();
    t.create(json!({}), &[]);
    let s = t.load(None).unwrap();
    assert_eq!(s.num_files(), 0);
    assert_eq!(block_on(scan::count_rows(&s)).unwrap().unwrap(), 0);
    let spec = ScanSpec::for_snapshot(&s, None);
    let names: Vec<String> = spec
        .output_schema()
        .unwrap()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["id", "name"]);
    assert!(read(&t, None).unwrap().is_empty());
    assert!(scan::plan(&s, None).unwrap().is_empty());
}

#[test]
fn all_rows_deleted_file_is_not_read() {
    let t = Table::new();
    let size = t.data_file("a.parquet", 5, 100);
    let other = t.data_file("b.parquet", 3, 100);
    let all = inline_dv(&[0, 1, 2, 3, 4]);
    t.create(
        json!({}),
        &[
            add("a.parquet", size, 5, Some(&all)),
            add("b.parquet", other, 3, None),
        ],
    );
    let s = t.load(None).unwrap();
    assert_eq!(s.logical_rows(), Some(3));
    let planned: Vec<String> = scan::plan(&s, None)
        .unwrap()
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert_eq!(planned, ["b.parquet"]);
    assert_eq!(ids(&read(&t, None).unwrap()), [0, 1, 2]);
    assert_eq!(block_on(scan::count_rows(&s)).unwrap().unwrap(), 3);
    // Read directly, the fully deleted file yields no rows (not an error).
    let spec = ScanSpec::for_snapshot(&s, None);
    let file = scan::ScanFile {
        path: "a.parquet".into(),
        size,
        partition_values: Default::default(),
        deletion_vector: Some(all),
        row_groups: None,
        base_row_id: None,
        default_row_commit_version: None,
    };
    let batches = block_on(scan::read_file(&t.store(), &spec, &file))
        .unwrap()
        .unwrap();
    assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 0);
}

#[test]
fn dv_covering_a_whole_row_group() {
    let t = Table::new();
    // Row groups [0..4), [4..8), [8..10).
    let size = t.data_file("a.parquet", 10, 4);
    let store = t.store();
    let middle: RoaringTreemap = (4u64..8).collect();
    let d = block_on(dv_files::write_file_to(&store, "", &[middle]))
        .unwrap()
        .unwrap()
        .remove(0);
    t.create(json!({}), &[add("a.parquet", size, 10, Some(&d))]);
    assert_eq!(ids(&read(&t, None).unwrap()), [0, 1, 2, 3, 8, 9]);
    // With metadata columns, the row indexes are the physical ones.
    let s = t.load(None).unwrap();
    let mut spec = ScanSpec::for_snapshot(&s, Some(vec!["id".into()]));
    spec.with_metadata_columns = true;
    let batches = block_on(scan::read_snapshot(&s, &spec)).unwrap().unwrap();
    let index: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            b.column_by_name(scan::ROW_INDEX_COLUMN)
                .unwrap()
                .as_primitive::<Int64Type>()
                .values()
                .to_vec()
        })
        .collect();
    assert_eq!(index, [0, 1, 2, 3, 8, 9]);
    // The first and last groups deleted too: nothing left but no error.
    let all_but_one: RoaringTreemap = (0u64..10).filter(|i| *i != 9).collect();
    let d2 = block_on(dv_files::write_file_to(&store, "", &[all_but_one]))
        .unwrap()
        .unwrap()
        .remove(0);
    t.commit(
        1,
        &[
            crate::fixture::remove("a.parquet", 1, Some(&d)),
            add("a.parquet", size, 10, Some(&d2)),
        ],
    );
    assert_eq!(ids(&read(&t, None).unwrap()), [9]);
}

#[test]
fn projection_with_missing_columns() {
    let t = Table::new();
    // The file has `id` only; the table (after schema evolution) has `id`,
    // `name` and `extra`.
    let ids_col: ArrayRef = Arc::new(Int64Array::from(vec![7, 8]));
    let batch = RecordBatch::try_from_iter([("id", ids_col)]).unwrap();
    let size = t.parquet_file("old.parquet", &batch, 100);
    let schema = r#"{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"name","type":"string","nullable":true,"metadata":{}},{"name":"extra","type":"integer","nullable":true,"metadata":{}}]}"#;
    let mut meta = metadata(json!({}));
    meta["metaData"]["schemaString"] = json!(schema);
    t.commit(0, &[protocol(), meta, add("old.parquet", size, 2, None)]);

    // Columns the file lacks come back as typed nulls, in the order asked.
    let batches = read(&t, Some(vec!["extra", "id", "name"])).unwrap();
    let b = &batches[0];
    let names: Vec<&str> = b
        .schema_ref()
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(names, ["extra", "id", "name"]);
    assert_eq!(b.num_rows(), 2);
    assert_eq!(b.column(0).data_type(), &arrow_schema::DataType::Int32);
    assert_eq!(b.column(0).null_count(), 2);
    assert_eq!(b.column(2).null_count(), 2);
    assert_eq!(ids(&batches), [7, 8]);

    // Only a column the file lacks: still one row per file row.
    let batches = read(&t, Some(vec!["name"])).unwrap();
    assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 2);
    assert_eq!(batches[0].num_columns(), 1);

    // A column the table does not have is an error naming it.
    match read(&t, Some(vec!["id", "nope"])).unwrap_err() {
        Error::InvalidArgument(m) => assert_eq!(m, "no column \"nope\" in the table"),
        other => panic!("{other:?}"),
    }
}
