//! Physical row indexes survive row-group subsets and DVs: a file whose `id`
//! column equals the row index, read in pieces, must return `_row_index == id`
//! for every row, and never a deleted one.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Int64Array, RecordBatch};
use bytes::Bytes;
use deltadv::io::{block_on, TableStore};
use deltadv::log::schema::{ColumnMappingMode, StructType};
use deltadv::scan::{self, ScanFile, ScanSpec};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use proptest::prelude::*;
use roaring::RoaringTreemap;

const ROWS: i64 = 10_000;
const GROUP: usize = 700; // 15 row groups, the last one short

fn write_file(store: &TableStore) -> u64 {
    let ids = Int64Array::from_iter_values(0..ROWS);
    let batch = RecordBatch::try_from_iter([("id", Arc::new(ids) as _)]).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(GROUP))
        .build();
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let size = buf.len() as u64;
    let meta = parquet::file::metadata::ParquetMetaDataReader::new()
        .parse_and_finish(&Bytes::from(buf.clone()))
        .unwrap();
    assert_eq!(meta.num_row_groups(), 15, "the test needs many row groups");
    block_on(store.put(&store.path("part-0.parquet"), Bytes::from(buf)))
        .unwrap()
        .unwrap();
    size
}

/// The test file as a scan task, with `dv` written to a DV file in the store.
fn scan_file(
    store: &TableStore,
    size: u64,
    dv: Option<&RoaringTreemap>,
    row_groups: Option<Vec<usize>>,
) -> ScanFile {
    let deletion_vector = dv.map(|m| {
        let (bytes, mut d) = deltadv::write::dv_files::encode_file(
            uuid::Uuid::new_v4(),
            "",
            std::slice::from_ref(m),
        )
        .unwrap();
        let d = d.remove(0);
        block_on(store.put(&store.path(&d.relative_path().unwrap()), bytes))
            .unwrap()
            .unwrap();
        d
    });
    ScanFile {
        path: "part-0.parquet".into(),
        size,
        partition_values: HashMap::new(),
        deletion_vector,
        row_groups,
        base_row_id: Some(BASE_ROW_ID),
        default_row_commit_version: Some(7),
    }
}

/// The test file's `baseRowId`: `_row_id` is this plus the physical index.
const BASE_ROW_ID: i64 = 1_000_000;

fn spec() -> ScanSpec {
    let schema = StructType::parse(
        r#"{"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":{}}]}"#,
    )
    .unwrap();
    ScanSpec {
        schema,
        partition_columns: vec![],
        column_mapping: ColumnMappingMode::None,
        columns: None,
        with_metadata_columns: true,
        filter: None,
        filter_rows: false,
        // no materialized columns in the file: ids from baseRowId + index
        row_tracking: Some(Default::default()),
        string_view: false,
    }
}

fn read(
    store: &TableStore,
    size: u64,
    dv: Option<&RoaringTreemap>,
    groups: Option<Vec<usize>>,
) -> Vec<(i64, u64)> {
    let file = scan_file(store, size, dv, groups);
    let batches = block_on(scan::read_file(store, &spec(), &file))
        .unwrap()
        .unwrap();
    batches
        .iter()
        .flat_map(|b| {
            let ids = b.column(0).as_primitive::<Int64Type>().clone();
            let idx = b.column(1).as_primitive::<Int64Type>().clone();
            // row tracking follows the physical index, DVs and selections included
            let row_ids = b.column(3).as_primitive::<Int64Type>().clone();
            let versions = b.column(4).as_primitive::<Int64Type>().clone();
            for i in 0..b.num_rows() {
                assert_eq!(row_ids.value(i), BASE_ROW_ID + idx.value(i));
                assert_eq!(versions.value(i), 7);
            }
            (0..b.num_rows()).map(move |i| (ids.value(i), idx.value(i) as u64))
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn row_index_is_physical(
        deleted in prop::collection::vec(0u64..ROWS as u64, 0..400),
        groups in prop::collection::btree_set(0usize..15, 1..15),
        runs in prop::collection::vec((0u64..ROWS as u64, 1u64..1500), 0..3),
    ) {
        let store = TableStore::open(&format!("memory://rowidx{}/t", rand_name()), &HashMap::new()).unwrap();
        let size = write_file(&store);
        let mut dv: RoaringTreemap = deleted.into_iter().collect();
        for (s, l) in runs {
            dv.insert_range(s..(s + l).min(ROWS as u64));
        }
        let groups: Vec<usize> = groups.into_iter().collect();
        let rows = read(&store, size, Some(&dv), Some(groups.clone()));
        let mut expected = Vec::new();
        for g in &groups {
            let start = (*g * GROUP) as i64;
            let end = (start + GROUP as i64).min(ROWS);
            expected.extend((start..end).filter(|r| !dv.contains(*r as u64)));
        }
        for (id, idx) in &rows {
            prop_assert_eq!(*id as u64, *idx, "row index must be physical");
            prop_assert!(!dv.contains(*idx), "deleted row {} returned", idx);
        }
        prop_assert_eq!(rows.iter().map(|(id, _)| *id).collect::<Vec<_>>(), expected);
    }
}

fn rand_name() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[test]
fn whole_file_without_dv_and_dv_past_the_end() {
    let store = TableStore::open("memory://rowidx-plain/t", &HashMap::new()).unwrap();
    let size = write_file(&store);
    let rows = read(&store, size, None, None);
    assert_eq!(rows.len() as i64, ROWS);
    assert!(rows.iter().all(|(id, idx)| *id as u64 == *idx));
    // A DV naming a row past the end of the file is a corrupt table.
    let dv: RoaringTreemap = [ROWS as u64 + 5].into_iter().collect();
    let file = scan_file(&store, size, Some(&dv), None);
    let e = block_on(scan::read_file(&store, &spec(), &file))
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("part-0.parquet") && e.contains("only 10000 rows"),
        "{e}"
    );
}
