//! The predicate parser on arbitrary text, then binding, pruning and exact
//! evaluation of whatever parses.
//!
//! Input: the bytes as (lossy) UTF-8 predicate text. Properties:
//! * `Expr::parse` never panics or overflows the stack (nesting is limited);
//! * a parsed predicate prints as text that parses back to the same tree
//!   (or, since printing adds parentheses, hits the nesting limit), and its
//!   JSON form reads back to the same tree (unless nested past serde_json's
//!   limit) and binds to the same columns;
//! * binding to a fixed schema (strict and lenient) never panics;
//! * evaluation over a 3-row batch returns one result per row, and pruning
//!   is sound: for every row the predicate keeps, `may_match` with that row's
//!   exact values (and with nothing known) says the row might match.
#![no_main]

use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int64Array,
    RecordBatch, StringArray, TimestampMicrosecondArray,
};
use deltadv::log::schema::{ColumnMappingMode, StructType};
use deltadv::expr::{Binding, ColumnStats, Expr, Filter, Predicate, Val};
use libfuzzer_sys::fuzz_target;

const SCHEMA: &str = r#"{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":true,"metadata":{}},
 {"name":"x","type":"double","nullable":true,"metadata":{}},
 {"name":"s","type":"string","nullable":true,"metadata":{}},
 {"name":"d","type":"date","nullable":true,"metadata":{}},
 {"name":"b","type":"boolean","nullable":true,"metadata":{}},
 {"name":"amount","type":"decimal(10,2)","nullable":true,"metadata":{}},
 {"name":"ts","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"part","type":"string","nullable":true,"metadata":{}}]}"#;

/// The rows, column by column (None: null), as comparison values.
fn rows() -> Vec<(&'static str, [Option<Val>; 3])> {
    vec![
        ("id", [Some(Val::Int(1)), Some(Val::Int(-5)), None]),
        ("x", [Some(Val::Float(1.5)), Some(Val::Float(-0.25)), None]),
        (
            "s",
            [
                Some(Val::Str("a".into())),
                Some(Val::Str("zz'".into())),
                None,
            ],
        ),
        ("d", [Some(Val::Int(19_000)), Some(Val::Int(0)), None]),
        ("b", [Some(Val::Bool(true)), Some(Val::Bool(false)), None]),
        ("amount", [Some(Val::Int(12_345)), Some(Val::Int(-1)), None]),
        (
            "ts",
            [
                Some(Val::Int(1_700_000_000_000_000)),
                Some(Val::Int(0)),
                None,
            ],
        ),
        (
            "part",
            [Some(Val::Str("p1".into())), None, Some(Val::Str("".into()))],
        ),
    ]
}

fn batch(schema: &StructType) -> Option<RecordBatch> {
    let arrow = Arc::new(schema.to_arrow(ColumnMappingMode::None, false).ok()?);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![Some(1), Some(-5), None])),
        Arc::new(Float64Array::from(vec![Some(1.5), Some(-0.25), None])),
        Arc::new(StringArray::from(vec![Some("a"), Some("zz'"), None])),
        Arc::new(Date32Array::from(vec![Some(19_000), Some(0), None])),
        Arc::new(BooleanArray::from(vec![Some(true), Some(false), None])),
        Arc::new(
            Decimal128Array::from(vec![Some(12_345), Some(-1), None])
                .with_precision_and_scale(10, 2)
                .ok()?,
        ),
        Arc::new(
            TimestampMicrosecondArray::from(vec![Some(1_700_000_000_000_000), Some(0), None])
                .with_timezone("UTC"),
        ),
        Arc::new(StringArray::from(vec![Some("p1"), None, Some("")])),
    ];
    RecordBatch::try_new(arrow, columns).ok()
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(expr) = Expr::parse(&text) else {
        return;
    };
    let printed = expr.to_string();
    match Expr::parse(&printed) {
        Ok(again) => assert_eq!(again, expr, "{text:?} printed as {printed:?}"),
        Err(e) => assert!(
            e.to_string().contains("nested deeper than"),
            "{text:?} printed as {printed:?}, which does not parse: {e}"
        ),
    }

    let json = expr.to_json().expect("a tree always serializes");
    match Expr::from_json(&json) {
        Ok(again) => assert_eq!(again, expr, "{text:?} as JSON {json}"),
        // serde_json reads at most 128 nested JSON values; deeper trees exist
        // only near MAX_PREDICATE_DEPTH.
        Err(e) => assert!(e.to_string().contains("recursion limit"), "{text:?}: {e}"),
    }

    let Ok(schema) = StructType::parse(SCHEMA) else {
        return;
    };
    let partitions = vec!["part".to_string()];
    let Some(batch) = batch(&schema) else {
        return;
    };
    let rows = rows();
    for binding in [Binding::Strict, Binding::Lenient] {
        let Ok(p) = Predicate::new(
            &text,
            &schema,
            &partitions,
            ColumnMappingMode::None,
            binding,
        ) else {
            continue;
        };
        let _ = p.partition_only();
        // The tree binds as its text does.
        let tree = Predicate::bind(
            &Filter::Expr(expr.clone()),
            &schema,
            &partitions,
            ColumnMappingMode::None,
            binding,
        )
        .expect("the tree of a predicate that binds also binds");
        assert_eq!(tree.columns(), p.columns(), "{text:?}");
        let unknown = p.may_match(&|_| None);
        let Ok(result) = p.evaluate(&batch) else {
            continue;
        };
        assert_eq!(result.len(), batch.num_rows());
        for row in 0..batch.num_rows() {
            if !(result.is_valid(row) && result.value(row)) {
                continue;
            }
            assert!(unknown, "{text:?} keeps row {row} but nothing-known prunes");
            let exact = |i: usize| -> Option<ColumnStats> {
                let c = p.columns().get(i)?;
                let (_, values) = rows
                    .iter()
                    .find(|(n, _)| Some(*n) == c.logical.first().map(String::as_str))?;
                Some(ColumnStats::exact(values.get(row)?.clone()))
            };
            assert!(
                p.may_match(&exact),
                "{text:?} keeps row {row}, but pruning with its exact values rules it out"
            );
        }
    }
});
