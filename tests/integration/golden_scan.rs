//! Every golden table read through the DV-aware scan: the row count, and where
//! expected.json lists them, the values, equal the expected ones.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use deltadv::io::{block_on, TableStore};
use deltadv::scan::{self, ScanSpec};
use deltadv::table::snapshot::Snapshot;
use serde_json::Value;

use crate::common::golden_dir;
use crate::golden_snapshots::{copy_dir, materialize_template};

/// A copy of a table whose DV files carry Delta Spark's test-build prefix,
/// renamed to the names the protocol gives them.
fn renamed_copy(src: &Path, dst: &Path) -> String {
    copy_dir(src, dst);
    for entry in fs::read_dir(dst).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if let Some(spec) = name.strip_prefix("test%dv%prefix-") {
            fs::rename(&p, dst.join(spec)).unwrap();
        }
    }
    dst.to_str().unwrap().to_string()
}

fn rows_as_json(batches: &[arrow_array::RecordBatch], columns: &[String]) -> Vec<String> {
    let mut buf = Vec::new();
    {
        let mut w = arrow_json::LineDelimitedWriter::new(&mut buf);
        for b in batches {
            w.write(b).unwrap();
        }
        w.finish().unwrap();
    }
    let mut rows: Vec<String> = buf
        .split(|c| *c == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let obj: Value = serde_json::from_slice(l).unwrap();
            let row: Vec<Value> = columns
                .iter()
                .map(|c| normalize(obj.get(c).cloned().unwrap_or(Value::Null)))
                .collect();
            Value::Array(row).to_string()
        })
        .collect();
    rows.sort();
    rows
}

/// Timestamps as arrow-json writes them ("…+00:00" or "…Z") compare equal.
fn normalize(v: Value) -> Value {
    match v {
        Value::String(s) if s.ends_with("+00:00") => {
            Value::String(format!("{}Z", s.trim_end_matches("+00:00")))
        }
        Value::Number(n) if n.as_f64().is_some() && !n.is_i64() && !n.is_u64() => Value::Number(n),
        other => other,
    }
}

#[test]
fn golden_tables_scan_to_the_expected_rows() {
    let Some(golden) = golden_dir() else { return };
    let expected: Value =
        serde_json::from_str(&fs::read_to_string(golden.join("expected.json")).unwrap()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut with_values = 0;
    for (i, (table, exp)) in expected.as_object().unwrap().iter().enumerate() {
        if table.starts_with('_') {
            continue;
        }
        let root = if table.contains("special-char") {
            materialize_template(&golden, &tmp.path().join(format!("t{i}")))
        } else if table.starts_with("delta/spark/") {
            renamed_copy(&golden.join(table), &tmp.path().join(format!("t{i}")))
        } else {
            golden.join(table).to_str().unwrap().to_string()
        };
        let store = TableStore::open(&root, &HashMap::new()).unwrap();
        let snap = block_on(Snapshot::load(store, None)).unwrap().unwrap();
        let columns: Vec<String> = exp["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        let spec = ScanSpec::for_snapshot(&snap, Some(columns.clone()));
        let batches = block_on(scan::read_snapshot(&snap, &spec))
            .unwrap()
            .unwrap_or_else(|e| panic!("{table}: {e}"));
        let n: usize = batches.iter().map(|b| b.num_rows()).sum();
        assert_eq!(
            n as i64,
            exp["rows"].as_i64().unwrap(),
            "{table}: row count"
        );
        if let Some(values) = exp.get("values").and_then(Value::as_array) {
            let mut want: Vec<String> = values
                .iter()
                .map(|r| {
                    Value::Array(
                        r.as_array()
                            .unwrap()
                            .iter()
                            .cloned()
                            .map(normalize)
                            .collect(),
                    )
                    .to_string()
                })
                .collect();
            want.sort();
            assert_eq!(rows_as_json(&batches, &columns), want, "{table}: values");
            with_values += 1;
        }
    }
    assert!(with_values >= 11, "{with_values} tables compared by value");
}
