//! Appending data files to an existing table: one `WRITE` commit (mode
//! Append, a blind append) of their add actions.
//!
//! A blind append reads nothing, so a commit that won the race conflicts with
//! it only when it changed the protocol or the metadata (the schema the files
//! were written for); otherwise the append retries at the next version.

use serde_json::json;

use super::commit::{conflict, read_commit, try_commit};
use super::conflict::IsolationLevel;
use super::{now_ms, ENGINE_INFO};
use crate::error::{Error, Result};
use crate::log::actions::{Action, Add, RecordCount};
use crate::log::features::{self, WriteOperation};
use crate::log::schema::{DataType, StructField};
use crate::table::snapshot::Snapshot;

/// Most commit attempts of one append (each lost race means another commit landed).
pub const MAX_COMMIT_ATTEMPTS: u64 = 1000;

/// Column metadata keys of rules every appended row must satisfy, which
/// deltadv does not evaluate (invariants, generated and identity columns,
/// defaults).
const ROW_RULE_KEYS: &[&str] = &[
    "delta.invariants",
    "delta.generationExpression",
    "delta.identity.start",
    "CURRENT_DEFAULT",
];

fn rule_column(fields: &[StructField], path: &str) -> Option<(String, &'static str)> {
    for f in fields {
        let name = if path.is_empty() {
            f.name.clone()
        } else {
            format!("{path}.{}", f.name)
        };
        if let Some(key) = ROW_RULE_KEYS.iter().find(|k| f.metadata.contains_key(**k)) {
            return Some((name, key));
        }
        if let DataType::Struct(st) = &f.data_type {
            if let Some(found) = rule_column(&st.fields, &name) {
                return Some(found);
            }
        }
    }
    None
}

/// Refuse an append to a table whose features or rules deltadv's writer
/// would break, naming the feature, property, constraint or column.
pub fn check_appendable(snapshot: &Snapshot) -> Result<()> {
    features::check_write(
        snapshot.protocol(),
        snapshot.metadata(),
        WriteOperation::Append,
    )?;
    if let Some(key) = snapshot
        .metadata()
        .configuration
        .keys()
        .find(|k| k.starts_with("delta.constraints."))
    {
        return Err(Error::Unsupported(format!(
            "appending to a table with CHECK constraints ({key}): deltadv does not evaluate them"
        )));
    }
    if let Some((column, key)) = rule_column(&snapshot.schema().fields, "") {
        return Err(Error::Unsupported(format!(
            "appending to a table whose column '{column}' has {key}: deltadv does not \
             evaluate invariants, generated, identity or default values"
        )));
    }
    Ok(())
}

/// Commit `adds` (data files already written under the table root) to the
/// table of `snapshot` as a blind append. Returns the committed version.
pub async fn append_files(snapshot: &Snapshot, adds: Vec<Add>) -> Result<u64> {
    check_appendable(snapshot)?;
    let store = snapshot.store();
    let metadata = snapshot.metadata();
    let isolation = IsolationLevel::from_configuration(&metadata.configuration)?;
    let mut rows: i64 = 0;
    let mut bytes: i64 = 0;
    for add in &adds {
        rows += RecordCount::parse(add.stats.as_deref().unwrap_or("{}"), &add.path)?
            .num_records
            .unwrap_or(0);
        bytes += add.size;
    }
    let info = json!({
        "timestamp": now_ms(),
        "operation": "WRITE",
        "operationParameters": {
            "mode": "Append",
            "partitionBy": serde_json::to_string(&metadata.partition_columns).unwrap_or_default(),
        },
        "readVersion": snapshot.version(),
        "isolationLevel": isolation.as_str(),
        "isBlindAppend": true,
        "operationMetrics": {
            "numFiles": adds.len().to_string(),
            "numOutputRows": rows.to_string(),
            "numOutputBytes": bytes.to_string(),
        },
        "engineInfo": ENGINE_INFO,
        "txnId": uuid::Uuid::new_v4().to_string(),
    });
    let mut actions = vec![Action::CommitInfo(info)];
    actions.extend(adds.into_iter().map(|a| Action::Add(Box::new(a))));
    let mut version = snapshot.version() + 1;
    for _ in 0..MAX_COMMIT_ATTEMPTS {
        if try_commit(store, version, &actions).await? {
            if super::checkpoint::due(snapshot, version) {
                // Best effort: the append is committed whatever happens here.
                let s = Snapshot::load(store.clone(), Some(version)).await;
                if let Ok(s) = s {
                    let _ = super::checkpoint::write(&s).await;
                }
            }
            return Ok(version);
        }
        let winner = read_commit(store, version).await?;
        if let Some(changed) = winner.iter().find_map(|a| match a {
            Action::Protocol(_) => Some("protocol"),
            Action::Metadata(_) => Some("metadata (schema, partitioning or properties)"),
            _ => None,
        }) {
            return Err(conflict(
                version,
                format!(
                    "a concurrent commit changed the table's {changed}; the appended files were \
                     written for version {}",
                    snapshot.version()
                ),
            ));
        }
        version += 1;
    }
    Err(conflict(
        version,
        format!("gave up after {MAX_COMMIT_ATTEMPTS} attempts (table too busy)"),
    ))
}
