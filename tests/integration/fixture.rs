//! Small hand-built tables in temp dirs: commit files written line by line,
//! parquet data files written with arrow, so each test states exactly what its
//! log holds.

use std::collections::HashMap;
use std::fs;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use deltadv::io::{block_on, TableStore};
use deltadv::log::path::LogPath;
use deltadv::table::snapshot::Snapshot;
use deltadv::{DeletionVectorDescriptor, Error, RoaringTreemap};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use serde_json::{json, Value};

/// A table root in a temp dir.
pub struct Table {
    pub dir: tempfile::TempDir,
}

/// `{"type":"struct","fields":[id long, name string]}`
pub const SCHEMA: &str = r#"{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"name","type":"string","nullable":true,"metadata":{}}]}"#;

pub fn protocol() -> Value {
    json!({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["deletionVectors", "domainMetadata"]}})
}

pub fn metadata(configuration: Value) -> Value {
    json!({"metaData": {"id": "00000000-0000-0000-0000-000000000001",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": SCHEMA, "partitionColumns": [],
        "configuration": configuration, "createdTime": 1}})
}

pub fn add(path: &str, size: u64, rows: i64, dv: Option<&DeletionVectorDescriptor>) -> Value {
    let mut a = json!({"add": {"path": path, "partitionValues": {}, "size": size,
        "modificationTime": 1_700_000_000_000_i64, "dataChange": true,
        "stats": json!({"numRecords": rows}).to_string()}});
    if let Some(d) = dv {
        a["add"]["deletionVector"] = serde_json::to_value(d).unwrap();
    }
    a
}

pub fn remove(path: &str, deleted_at: i64, dv: Option<&DeletionVectorDescriptor>) -> Value {
    let mut r = json!({"remove": {"path": path, "deletionTimestamp": deleted_at,
        "dataChange": true}});
    if let Some(d) = dv {
        r["remove"]["deletionVector"] = serde_json::to_value(d).unwrap();
    }
    r
}

/// Milliseconds since the epoch, now (recent tombstones are not expired).
pub fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

/// An inline DV of `rows`.
pub fn inline_dv(rows: &[u64]) -> DeletionVectorDescriptor {
    let map: RoaringTreemap = rows.iter().copied().collect();
    DeletionVectorDescriptor::inline(&map).unwrap()
}

impl Table {
    pub fn new() -> Self {
        Table {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn root(&self) -> &str {
        self.dir.path().to_str().unwrap()
    }

    pub fn log_file(&self, path: &LogPath) -> std::path::PathBuf {
        self.dir.path().join(path.relative_path())
    }

    /// Write commit `version` with `actions`, one JSON line each.
    pub fn commit(&self, version: u64, actions: &[Value]) {
        let path = self.log_file(&LogPath::commit(version));
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let lines: Vec<String> = actions.iter().map(Value::to_string).collect();
        fs::write(path, lines.join("\n")).unwrap();
    }

    /// Version 0: protocol, metadata (with `configuration`) and `adds`.
    pub fn create(&self, configuration: Value, adds: &[Value]) {
        let mut actions = vec![protocol(), metadata(configuration)];
        actions.extend_from_slice(adds);
        self.commit(0, &actions);
    }

    /// A data file with `id` 0..rows and `name` "n{id}", in row groups of
    /// `group` rows; returns its size.
    pub fn data_file(&self, name: &str, rows: i64, group: usize) -> u64 {
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..rows));
        let names: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..rows).map(|i| format!("n{i}")),
        ));
        let batch = RecordBatch::try_from_iter([("id", ids), ("name", names)]).unwrap();
        self.parquet_file(name, &batch, group)
    }

    pub fn parquet_file(&self, name: &str, batch: &RecordBatch, group: usize) -> u64 {
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(group))
            .build();
        let mut buf = Vec::new();
        let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), Some(props)).unwrap();
        w.write(batch).unwrap();
        w.close().unwrap();
        let path = self.dir.path().join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, &buf).unwrap();
        buf.len() as u64
    }

    pub fn store(&self) -> TableStore {
        TableStore::open(self.root(), &HashMap::new()).unwrap()
    }

    pub fn load(&self, version: Option<u64>) -> Result<Snapshot, Error> {
        block_on(Snapshot::load(self.store(), version)).unwrap()
    }
}

/// Live file paths of a snapshot, sorted.
pub fn paths(s: &Snapshot) -> Vec<String> {
    let mut p: Vec<String> = s.files().unwrap().into_iter().map(|f| f.path).collect();
    p.sort();
    p
}
