//! Delta log lines, `add.stats` JSON and schema JSON from arbitrary bytes.
//!
//! Input layout: byte 0 (`ctl`) selects the mode, the rest is the payload.
//! * `ctl % 3 == 0`: the payload is a commit file for `actions::parse_commit`.
//!   Every parsed action renders as a line (`to_json_line`) that parses back
//!   to an equal action. Each add's stats and each metaData's schema go
//!   through the two modes below.
//! * `ctl % 3 == 1`: the payload is `add.stats`. `RecordCount::parse` (a
//!   byte-level fast path with a serde fallback) agrees with serde wherever
//!   serde accepts the text; `Stats::parse` and the pruning decoder
//!   (`FileStats`, read for every column type of a fixed schema) never panic.
//! * `ctl % 3 == 2`: the payload is a `schemaString`. A parsed schema converts
//!   to Arrow (logical and physical names) without panicking, and its JSON
//!   (`to_schema_string`) parses back to an equal schema.
#![no_main]

use deltadv::log::actions::{self, Action, RecordCount, Stats};
use deltadv::log::schema::{ColumnMappingMode, StructType};
use deltadv::expr::{Binding, FileStats, Predicate};
use libfuzzer_sys::fuzz_target;

const SCHEMA: &str = r#"{"type":"struct","fields":[
 {"name":"id","type":"long","nullable":true,"metadata":{}},
 {"name":"i","type":"integer","nullable":true,"metadata":{}},
 {"name":"x","type":"double","nullable":true,"metadata":{}},
 {"name":"f","type":"float","nullable":true,"metadata":{}},
 {"name":"s","type":"string","nullable":true,"metadata":{}},
 {"name":"d","type":"date","nullable":true,"metadata":{}},
 {"name":"b","type":"boolean","nullable":true,"metadata":{}},
 {"name":"amount","type":"decimal(38,6)","nullable":true,"metadata":{}},
 {"name":"ts","type":"timestamp","nullable":true,"metadata":{}},
 {"name":"ntz","type":"timestamp_ntz","nullable":true,"metadata":{}},
 {"name":"st","type":{"type":"struct","fields":[
   {"name":"a","type":"long","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}"#;

const EVERY_COLUMN: &str = "id = 1 AND i = 1 AND x = 1 AND f = 1 AND s = 'a' AND \
     d = DATE '2024-01-01' AND b = TRUE AND amount = 1 AND \
     ts = TIMESTAMP '2024-01-01 00:00:00' AND ntz = TIMESTAMP_NTZ '2024-01-01 00:00:00' AND st.a = 1";

fn stats(text: &str) {
    let fast = RecordCount::parse(text, "fuzz");
    if let Ok(slow) = serde_json::from_str::<RecordCount>(text) {
        match fast {
            Ok(fast) => assert_eq!(fast, slow, "fast path disagrees with serde on {text:?}"),
            Err(e) => panic!("RecordCount::parse fails on {text:?}, which serde reads: {e}"),
        }
    }
    let _ = Stats::parse(text, "fuzz").map(|s| s.tight_bounds());
    let file_stats = FileStats::parse(Some(text));
    let _ = file_stats.num_records();
    if let Ok(schema) = StructType::parse(SCHEMA) {
        if let Ok(p) = Predicate::new(
            EVERY_COLUMN,
            &schema,
            &[],
            ColumnMappingMode::None,
            Binding::Strict,
        ) {
            for c in p.columns() {
                let _ = file_stats.column(c);
            }
            let _ = p.may_match_file(&Default::default(), Some(&file_stats));
        }
    }
}

fn schema(text: &str) {
    let Ok(st) = StructType::parse(text) else {
        return;
    };
    for (mode, physical) in [
        (ColumnMappingMode::None, false),
        (ColumnMappingMode::Name, true),
        (ColumnMappingMode::Id, true),
    ] {
        let _ = st.to_arrow(mode, physical);
    }
    let json = st.to_schema_string();
    match StructType::parse(&json) {
        Ok(again) => assert_eq!(again, st, "{text:?} re-serialized as {json:?}"),
        Err(e) => panic!("{text:?} re-serialized as {json:?}, which does not parse: {e}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, payload)) = data.split_first() else {
        return;
    };
    match ctl % 3 {
        0 => {
            let Ok(parsed) = actions::parse_commit(payload, "fuzz.json") else {
                return;
            };
            for action in parsed {
                let line = match action.to_json_line() {
                    Ok(line) => line,
                    Err(e) => panic!("{action:?} does not render: {e}"),
                };
                match actions::parse_commit(line.as_bytes(), "rendered.json") {
                    Ok(again) => assert_eq!(again, vec![action.clone()], "{line}"),
                    Err(e) => panic!("rendered line {line} does not parse: {e}"),
                }
                match &action {
                    Action::Add(add) => {
                        if let Some(s) = &add.stats {
                            stats(s);
                        }
                    }
                    Action::Metadata(m) => schema(&m.schema_string),
                    _ => {}
                }
            }
        }
        1 => stats(&String::from_utf8_lossy(payload)),
        _ => schema(&String::from_utf8_lossy(payload)),
    }
});
