//! Appending data files to an existing table: one `WRITE` commit (mode
//! Append) of their add actions through a [`Transaction`] marked as a blind
//! append. A blind append reads nothing, so the conflict checker lets it
//! proceed past concurrent commits unless one changed the protocol or the
//! metadata; row ids (row tracking) and in-commit timestamps are the
//! transaction's.

use serde_json::{json, Map, Value};

use super::app_txn::AppCommit;
use super::transaction::{FixedActions, Transaction};
use crate::error::Result;
use crate::log::actions::{Action, Add, Metadata, RecordCount};
use crate::log::features;
use crate::table::snapshot::Snapshot;

/// Refuse an append to a table whose features or rules deltadv's writer
/// would break (see [`features::check_append`]).
pub fn check_appendable(snapshot: &Snapshot) -> Result<()> {
    features::check_append(snapshot.protocol(), snapshot.metadata(), snapshot.schema())
}

/// Commit `adds` (data files already written under the table root) to the
/// table of `snapshot` as a blind append. Returns the committed version (the
/// snapshot's when `adds` is empty: nothing to commit).
pub async fn append_files(snapshot: &Snapshot, adds: Vec<Add>) -> Result<u64> {
    append_files_with(snapshot, adds, None, Map::new()).await
}

/// [`append_files`] with new `metadata` (schema evolution by merge) in the
/// same commit and more `operationParameters` (`canMergeSchema`). The append
/// still reads nothing: Delta Spark records it as a blind append, and a
/// concurrent metadata change conflicts with it.
pub async fn append_files_with(
    snapshot: &Snapshot,
    adds: Vec<Add>,
    metadata: Option<Metadata>,
    extra_parameters: Map<String, Value>,
) -> Result<u64> {
    append_files_as(
        snapshot,
        adds,
        metadata,
        extra_parameters,
        &AppCommit::default(),
    )
    .await
}

/// [`append_files_with`] carrying `app`'s `txn` (skipped, returning the
/// snapshot's version, when the table holds it already) and recorded as its
/// operation (`STREAMING UPDATE` for a streaming batch).
pub async fn append_files_as(
    snapshot: &Snapshot,
    adds: Vec<Add>,
    metadata: Option<Metadata>,
    extra_parameters: Map<String, Value>,
    app: &AppCommit,
) -> Result<u64> {
    match &metadata {
        Some(m) => {
            let schema = crate::log::schema::StructType::parse(&m.schema_string)?;
            features::check_append(snapshot.protocol(), m, &schema)?;
        }
        None => check_appendable(snapshot)?,
    }
    let mut rows: i64 = 0;
    let mut bytes: i64 = 0;
    for add in &adds {
        rows += RecordCount::parse(add.stats.as_deref().unwrap_or("{}"), &add.path)?
            .num_records
            .unwrap_or(0);
        bytes += add.size;
    }
    let mut metrics = Map::new();
    metrics.insert("numFiles".into(), json!(adds.len().to_string()));
    metrics.insert("numOutputRows".into(), json!(rows.to_string()));
    metrics.insert("numOutputBytes".into(), json!(bytes.to_string()));
    let mut parameters = Map::new();
    parameters.insert("mode".into(), Value::from("Append"));
    let partition_by = &snapshot.metadata().partition_columns;
    parameters.insert(
        "partitionBy".into(),
        Value::from(serde_json::to_string(partition_by).unwrap_or_default()),
    );
    parameters.extend(extra_parameters);
    let mut txn = app.apply(
        Transaction::new(snapshot, "WRITE")?
            .with_parameters(parameters)
            .blind_append(),
    );
    if let Some(m) = metadata {
        txn = txn.with_metadata(m);
    }
    let mut changes = FixedActions {
        actions: adds.into_iter().map(|a| Action::Add(Box::new(a))).collect(),
        metrics,
    };
    let outcome = txn.commit(&mut changes).await?;
    Ok(outcome.version.unwrap_or(snapshot.version()))
}
