//! Log actions, parsed from newline-delimited JSON (commits, compacted logs, V2
//! checkpoint manifests) or from checkpoint rows rendered as JSON objects.
//! Unknown fields and unknown action types are ignored, as the protocol asks.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::format::descriptor::DeletionVectorDescriptor;

/// `protocol`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Protocol {
    pub min_reader_version: i32,
    pub min_writer_version: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reader_features: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer_features: Option<Vec<String>>,
}

/// `metaData.format`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Format {
    #[serde(default)]
    pub provider: String,
    #[serde(default)]
    pub options: HashMap<String, String>,
}

/// `metaData`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub format: Format,
    pub schema_string: String,
    #[serde(default)]
    pub partition_columns: Vec<String>,
    #[serde(default)]
    pub configuration: HashMap<String, Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_time: Option<i64>,
}

impl Metadata {
    /// A table property (`configuration`), if set.
    pub fn property(&self, key: &str) -> Option<&str> {
        self.configuration.get(key).and_then(|v| v.as_deref())
    }
}

/// `add`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Add {
    pub path: String,
    #[serde(default)]
    pub partition_values: HashMap<String, Option<String>>,
    #[serde(default)]
    pub size: i64,
    #[serde(default)]
    pub modification_time: i64,
    #[serde(default = "default_true")]
    pub data_change: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<HashMap<String, Option<String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_vector: Option<DeletionVectorDescriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_row_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_row_commit_version: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clustering_provider: Option<String>,
}

fn default_true() -> bool {
    true
}

/// `remove`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Remove {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<i64>,
    #[serde(default = "default_true")]
    pub data_change: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_file_metadata: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_values: Option<HashMap<String, Option<String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<HashMap<String, Option<String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_vector: Option<DeletionVectorDescriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_row_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_row_commit_version: Option<i64>,
}

impl Remove {
    /// The `remove` of a live file `add` at `timestamp` (ms): its partition
    /// values, size, stats, tags, DV and row ids carried over, as Delta Spark
    /// writes them (`extendedFileMetadata`).
    pub fn of_add(add: &Add, timestamp: i64, data_change: bool) -> Remove {
        Remove {
            path: add.path.clone(),
            deletion_timestamp: Some(timestamp),
            data_change,
            extended_file_metadata: Some(true),
            partition_values: Some(add.partition_values.clone()),
            size: Some(add.size),
            stats: add.stats.clone(),
            tags: add.tags.clone(),
            deletion_vector: add.deletion_vector.clone(),
            base_row_id: add.base_row_id,
            default_row_commit_version: add.default_row_commit_version,
        }
    }
}

/// `txn` (application transaction id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Txn {
    pub app_id: String,
    pub version: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<i64>,
}

/// `cdc` (change data file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cdc {
    pub path: String,
    #[serde(default)]
    pub partition_values: HashMap<String, Option<String>>,
    #[serde(default)]
    pub size: i64,
    #[serde(default)]
    pub data_change: bool,
}

/// `domainMetadata`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DomainMetadata {
    pub domain: String,
    #[serde(default)]
    pub configuration: String,
    #[serde(default)]
    pub removed: bool,
}

/// `checkpointMetadata` (V2 checkpoints).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointMetadata {
    pub version: i64,
}

/// `sidecar` (V2 checkpoints).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sidecar {
    pub path: String,
    #[serde(default)]
    pub size_in_bytes: i64,
    #[serde(default)]
    pub modification_time: i64,
}

/// One log action.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Protocol(Protocol),
    Metadata(Metadata),
    Add(Box<Add>),
    Remove(Box<Remove>),
    Txn(Txn),
    /// Kept as raw JSON: its fields are free-form.
    CommitInfo(Value),
    Cdc(Cdc),
    DomainMetadata(DomainMetadata),
    CheckpointMetadata(CheckpointMetadata),
    Sidecar(Sidecar),
}

fn parse<T: serde::de::DeserializeOwned>(
    value: Value,
    kind: &str,
    file: &str,
    line: usize,
) -> Result<T> {
    serde_json::from_value(value).map_err(|source| Error::CorruptLog {
        file: file.to_string(),
        detail: format!("line {line}: invalid {kind} action: {source}"),
    })
}

/// `commitInfo.inCommitTimestamp` of a commit's actions, if it has one.
pub fn in_commit_timestamp(actions: &[Action]) -> Option<i64> {
    actions.iter().find_map(|a| match a {
        Action::CommitInfo(v) => v.get("inCommitTimestamp").and_then(Value::as_i64),
        _ => None,
    })
}

impl Action {
    /// Parse one JSON object of the log. `None` for unknown action types or
    /// null placeholders (checkpoint rows carry one non-null action each).
    pub fn from_value(value: Value, file: &str, line: usize) -> Result<Option<Action>> {
        let Value::Object(map) = value else {
            return Err(Error::CorruptLog {
                file: file.to_string(),
                detail: format!("line {line} is not a JSON object"),
            });
        };
        for (kind, body) in map {
            if body.is_null() {
                continue;
            }
            let action = match kind.as_str() {
                "protocol" => Action::Protocol(parse(body, &kind, file, line)?),
                "metaData" => Action::Metadata(parse(body, &kind, file, line)?),
                "add" => Action::Add(Box::new(parse(body, &kind, file, line)?)),
                "remove" => Action::Remove(Box::new(parse(body, &kind, file, line)?)),
                "txn" => Action::Txn(parse(body, &kind, file, line)?),
                "commitInfo" => Action::CommitInfo(body),
                "cdc" => Action::Cdc(parse(body, &kind, file, line)?),
                "domainMetadata" => Action::DomainMetadata(parse(body, &kind, file, line)?),
                "checkpointMetadata" => Action::CheckpointMetadata(parse(body, &kind, file, line)?),
                "sidecar" => Action::Sidecar(parse(body, &kind, file, line)?),
                _ => continue,
            };
            return Ok(Some(action));
        }
        Ok(None)
    }

    /// Render as one log line (`{"add": {...}}`).
    pub fn to_json_line(&self) -> Result<String> {
        let (kind, body) = match self {
            Action::Protocol(a) => ("protocol", serde_json::to_value(a)),
            Action::Metadata(a) => ("metaData", serde_json::to_value(a)),
            Action::Add(a) => ("add", serde_json::to_value(a)),
            Action::Remove(a) => ("remove", serde_json::to_value(a)),
            Action::Txn(a) => ("txn", serde_json::to_value(a)),
            Action::CommitInfo(v) => ("commitInfo", Ok(v.clone())),
            Action::Cdc(a) => ("cdc", serde_json::to_value(a)),
            Action::DomainMetadata(a) => ("domainMetadata", serde_json::to_value(a)),
            Action::CheckpointMetadata(a) => ("checkpointMetadata", serde_json::to_value(a)),
            Action::Sidecar(a) => ("sidecar", serde_json::to_value(a)),
        };
        let body = body.map_err(|source| Error::Json {
            context: format!("{kind} action"),
            source,
        })?;
        let mut map = serde_json::Map::new();
        map.insert(kind.to_string(), body);
        Ok(Value::Object(map).to_string())
    }
}

/// Parse newline-delimited JSON (a commit file). Blank lines are skipped; a
/// malformed line is an error naming the file and line.
pub fn parse_commit(bytes: &[u8], file: &str) -> Result<Vec<Action>> {
    let mut actions = Vec::new();
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let value: Value = serde_json::from_slice(line).map_err(|source| Error::CorruptLog {
            file: file.to_string(),
            detail: format!("line {} is not valid JSON: {source}", i + 1),
        })?;
        if let Some(action) = Action::from_value(value, file, i + 1)? {
            actions.push(action);
        }
    }
    Ok(actions)
}

/// Stats JSON of the add action of `file` that does not parse.
fn stats_error(file: &str, source: &serde_json::Error) -> Error {
    Error::CorruptLog {
        file: format!("the add action of {file}"),
        detail: format!("invalid stats JSON: {source}"),
    }
}

/// Statistics of a data file (`add.stats`), the fields deltadv uses.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    pub num_records: Option<i64>,
    #[serde(default)]
    pub min_values: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    pub max_values: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    pub null_count: Option<serde_json::Map<String, Value>>,
    /// Absent means true.
    pub tight_bounds: Option<bool>,
}

impl Stats {
    /// Parse a stats JSON string; `file` names the data file for errors.
    pub fn parse(json: &str, file: &str) -> Result<Stats> {
        serde_json::from_str(json).map_err(|source| stats_error(file, &source))
    }

    /// Whether min/max are exact (absent `tightBounds` means true).
    pub fn tight_bounds(&self) -> bool {
        self.tight_bounds.unwrap_or(true)
    }
}

/// Only `numRecords` and `tightBounds`, for fast listing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordCount {
    pub num_records: Option<i64>,
    pub tight_bounds: Option<bool>,
}

impl RecordCount {
    /// Parse `numRecords` and `tightBounds` from a stats string. A byte-level
    /// scan of the top-level object does the common case without allocating;
    /// anything it does not recognise falls back to serde (and its errors).
    pub fn parse(stats: &str, file: &str) -> Result<RecordCount> {
        if let Some(c) = scan_record_count(stats.as_bytes()) {
            return Ok(c);
        }
        serde_json::from_str(stats).map_err(|source| stats_error(file, &source))
    }
}

/// Skip whitespace from `i`.
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// End (exclusive) of the JSON string starting at `i` (a `"`).
fn skip_string(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        match b.get(i)? {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
}

/// End (exclusive) of the JSON value starting at `i`.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match b.get(j)? {
                    b'"' => {
                        j = skip_string(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while !matches!(
                b.get(j),
                None | Some(b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t')
            ) {
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

/// Writers put `numRecords` first and `tightBounds` last: read both without
/// scanning the middle. A member right before the final `}` and after a `,`
/// or `{` belongs to the top-level object, as does the first member.
fn edges_record_count(b: &[u8]) -> Option<RecordCount> {
    const HEAD: &[u8] = b"{\"numRecords\":";
    let digits = b.strip_prefix(HEAD)?;
    let len = digits.iter().take_while(|c| c.is_ascii_digit()).count();
    if len == 0 || !matches!(digits.get(len), Some(b',' | b'}')) {
        return None;
    }
    let num_records: i64 = std::str::from_utf8(digits.get(..len)?).ok()?.parse().ok()?;
    let tight_bounds = if b.ends_with(b",\"tightBounds\":false}") {
        Some(false)
    } else if b.ends_with(b",\"tightBounds\":true}") {
        Some(true)
    } else {
        return None;
    };
    Some(RecordCount {
        num_records: Some(num_records),
        tight_bounds,
    })
}

/// Fast path of [`RecordCount::parse`]: `None` when unsure.
fn scan_record_count(b: &[u8]) -> Option<RecordCount> {
    if let Some(c) = edges_record_count(b) {
        return Some(c);
    }
    let mut out = RecordCount::default();
    let mut i = skip_ws(b, 0);
    if b.get(i)? != &b'{' {
        return None;
    }
    i = skip_ws(b, i + 1);
    if b.get(i)? == &b'}' {
        return Some(out);
    }
    loop {
        let key_end = skip_string(b, i)?;
        let key = b.get(i + 1..key_end - 1)?;
        i = skip_ws(b, key_end);
        if b.get(i)? != &b':' {
            return None;
        }
        i = skip_ws(b, i + 1);
        let end = skip_value(b, i)?;
        let value = b.get(i..end)?;
        match key {
            b"numRecords" => out.num_records = Some(std::str::from_utf8(value).ok()?.parse().ok()?),
            b"tightBounds" => {
                out.tight_bounds = Some(match value {
                    b"true" => true,
                    b"false" => false,
                    _ => return None,
                })
            }
            k if k.contains(&b'\\') => return None,
            _ => {}
        }
        i = skip_ws(b, end);
        match b.get(i)? {
            b',' => i = skip_ws(b, i + 1),
            b'}' => return skip_ws(b, i + 1).eq(&b.len()).then_some(out),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_survive_a_parse_and_render_round_trip() {
        // Found by fuzz target log_line: without serde_json's float_roundtrip this
        // came back as 1.6971733333333337e+62 (one ulp off).
        let line =
            r#"{"commitInfo":{"t":1.6971733333333335e+62,"u":0.1,"v":-2.2250738585072014e-308}}"#;
        let actions = parse_commit(line.as_bytes(), "x.json").unwrap();
        let rendered = actions[0].to_json_line().unwrap();
        assert_eq!(rendered, line);
        assert_eq!(
            parse_commit(rendered.as_bytes(), "y.json").unwrap(),
            actions
        );
    }

    #[test]
    fn record_count_scan_agrees_with_serde() {
        let cases = [
            r#"{"numRecords":10,"minValues":{"a":1,"numRecords":99},"maxValues":{"s":"x}\"{"},"nullCount":{"a":0},"tightBounds":false}"#,
            r#"{ "numRecords" : 7 , "tightBounds" : true }"#,
            r#"{"minValues":{"arr":[1,[2,{"numRecords":5}]]},"numRecords":3}"#,
            r#"{}"#,
            r#"{"numRecords":-1}"#,
            r#"{"nu\u006dRecords":4}"#,
            r#"{"numRecords":1.5}"#,
            r#"{"numRecords":12} trailing"#,
            r#"{"numRecords":"12"}"#,
            r#"{"numRecords":3,"maxValues":{"tightBounds":true}}"#,
            r#"{"numRecords":3,"maxValues":{"a":1},"tightBounds":true}"#,
            r#"{"numRecords":30x,"tightBounds":true}"#,
        ];
        for case in cases {
            let serde: std::result::Result<RecordCount, _> = serde_json::from_str(case);
            match (scan_record_count(case.as_bytes()), serde) {
                (Some(fast), Ok(slow)) => assert_eq!(fast, slow, "{case}"),
                (Some(fast), Err(_)) => {
                    panic!("scan accepted what serde refuses: {case} -> {fast:?}")
                }
                (None, _) => {} // falls back to serde
            }
            // The public entry point always agrees with serde.
            match (
                RecordCount::parse(case, "f"),
                serde_json::from_str::<RecordCount>(case),
            ) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{case}"),
                (Err(_), Err(_)) => {}
                (a, b) => panic!("{case}: {a:?} vs {b:?}"),
            }
        }
        assert_eq!(
            edges_record_count(cases[10].as_bytes()),
            Some(RecordCount {
                num_records: Some(3),
                tight_bounds: Some(true)
            })
        );
        assert_eq!(edges_record_count(cases[9].as_bytes()), None);
        assert_eq!(
            scan_record_count(cases[0].as_bytes()),
            Some(RecordCount {
                num_records: Some(10),
                tight_bounds: Some(false)
            })
        );
    }
}
