//! RESTORE: make an earlier version the table's current state, as Delta
//! Spark's `RESTORE TABLE … TO VERSION AS OF` does.
//!
//! Files are compared by (path, DV unique id): a file live at the target
//! version but not now is added back with the DV it had then; a file live now
//! but not at the target is removed (with its current DV). A file whose DV
//! differs is both: removed with today's DV and re-added with the old one, so
//! rows deleted since then come back, exactly as the target version read them.
//! The target's metadata (schema, properties) comes back too; the protocol
//! only grows (the union of both), never downgrades, so time travel to newer
//! versions keeps working. Every file to add back must still exist (VACUUM may
//! have removed it): a missing one is an error naming it, and nothing is
//! committed. The commit is a `RESTORE` with Delta Spark's parameters and
//! metrics; a concurrent commit that changed any file makes it fail.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

use super::conflict::{FileChange, ReadSet};
use super::now_ms;
use super::transaction::{Changes, Transaction};
use crate::error::{Error, Result};
use crate::io::TableStore;
use crate::log::actions::{Action, Add, Remove};
use crate::log::features;
use crate::table::snapshot::Snapshot;

/// Which version to restore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreTarget {
    Version(u64),
    /// The latest version committed at or before this time (ms since the epoch).
    Timestamp(i64),
}

/// What a RESTORE did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RestoreMetrics {
    pub version: Option<u64>,
    pub restored_version: u64,
    /// `commitInfo.operationMetrics` as written.
    pub operation_metrics: Map<String, Value>,
    pub attempts: u32,
    pub checkpointed: bool,
    pub checkpoint_error: Option<String>,
    /// Why the commit was not mirrored as an Iceberg snapshot (UniForm).
    pub iceberg_error: Option<String>,
}

/// (path as in the log, DV unique id) of an add: its identity for RESTORE.
fn identity(a: &Add) -> (String, Option<String>) {
    (
        a.path.clone(),
        a.deletion_vector.as_ref().map(|d| d.unique_id()),
    )
}

struct RestoreChanges {
    add: Vec<Add>,
    remove: Vec<Add>,
    now: i64,
    metrics: Map<String, Value>,
}

impl Changes for RestoreChanges {
    async fn actions(&mut self, _store: &TableStore) -> Result<Vec<Action>> {
        let mut actions: Vec<Action> = self
            .add
            .iter()
            .cloned()
            .map(|mut a| {
                a.data_change = true;
                Action::Add(Box::new(a))
            })
            .collect();
        actions.extend(
            self.remove
                .iter()
                .map(|a| Action::Remove(Box::new(Remove::of_add(a, self.now, true)))),
        );
        Ok(actions)
    }

    fn metrics(&self) -> Map<String, Value> {
        self.metrics.clone()
    }

    fn reads(&self) -> (ReadSet, BTreeMap<String, FileChange>) {
        // The whole table's state was read; every file it removes must be
        // unchanged since.
        let removed: BTreeSet<String> = self.remove.iter().map(|a| a.path.clone()).collect();
        (
            ReadSet::WholeTable,
            removed
                .into_iter()
                .map(|p| (p, FileChange::WholeFile))
                .collect(),
        )
    }
}

/// RESTORE the table of `latest` (its current snapshot) to `target`.
pub async fn restore(
    latest: &Snapshot,
    target: RestoreTarget,
    max_attempts: u32,
    engine_info: &str,
) -> Result<RestoreMetrics> {
    let store = latest.store();
    let version = match target {
        RestoreTarget::Version(v) => v,
        RestoreTarget::Timestamp(ts) => Snapshot::version_at(store, ts).await?,
    };
    if version >= latest.version() {
        return Err(Error::InvalidArgument(format!(
            "the version to restore ({version}) must be older than the table's latest version \
             ({})",
            latest.version()
        )));
    }
    let old = Snapshot::load(store.clone(), Some(version)).await?;
    features::check_write(
        latest.protocol(),
        latest.metadata(),
        features::WriteOperation::Append,
    )?;
    let now_files: Vec<Add> = latest.files()?.into_iter().map(|f| f.add).collect();
    let then_files: Vec<Add> = old.files()?.into_iter().map(|f| f.add).collect();
    let now_ids: BTreeSet<(String, Option<String>)> = now_files.iter().map(identity).collect();
    let then_ids: BTreeSet<(String, Option<String>)> = then_files.iter().map(identity).collect();
    let add: Vec<Add> = then_files
        .iter()
        .filter(|a| !now_ids.contains(&identity(a)))
        .cloned()
        .collect();
    let remove: Vec<Add> = now_files
        .iter()
        .filter(|a| !then_ids.contains(&identity(a)))
        .cloned()
        .collect();
    // Every file to add back (and its DV file) must still be there.
    for a in &add {
        let path = crate::log::path::normalize_path(&a.path);
        let location = store.resolve(&path)?;
        if !store.exists(&location).await? {
            return Err(Error::MissingDataFile {
                path: format!(
                    "{path} (live at version {version}; removed since, probably by VACUUM: \
                     version {version} can no longer be restored)"
                ),
            });
        }
        if let Some(dv) = a.deletion_vector.as_ref().and_then(|d| d.relative_path()) {
            if !store.exists(&store.path(&dv)).await? {
                return Err(Error::MissingDataFile {
                    path: format!("{dv} (deletion vector of {path} at version {version})"),
                });
            }
        }
    }
    let size = |files: &[Add]| -> i64 { files.iter().map(|a| a.size).sum() };
    let s = |v: i64| Value::String(v.to_string());
    let mut metrics = Map::new();
    metrics.insert("tableSizeAfterRestore".into(), s(size(&then_files)));
    metrics.insert("numOfFilesAfterRestore".into(), s(then_files.len() as i64));
    metrics.insert("numRemovedFiles".into(), s(remove.len() as i64));
    metrics.insert("numRestoredFiles".into(), s(add.len() as i64));
    metrics.insert("removedFilesSize".into(), s(size(&remove)));
    metrics.insert("restoredFilesSize".into(), s(size(&add)));
    let mut parameters = Map::new();
    match target {
        RestoreTarget::Version(v) => {
            parameters.insert("version".into(), json!(v));
            parameters.insert("timestamp".into(), Value::Null);
        }
        RestoreTarget::Timestamp(ts) => {
            parameters.insert("version".into(), Value::Null);
            parameters.insert(
                "timestamp".into(),
                json!(chrono::DateTime::from_timestamp_millis(ts)
                    .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
                    .unwrap_or_default()),
            );
        }
    }
    let mut changes = RestoreChanges {
        add,
        remove,
        now: now_ms(),
        metrics,
    };
    let protocol = features::merge_protocols(old.protocol(), latest.protocol());
    let mut txn = Transaction::new(latest, "RESTORE")?
        .with_parameters(parameters)
        .with_max_attempts(max_attempts)
        .with_engine_info(engine_info.to_string())
        .with_metadata(old.metadata().clone())
        .allow_empty();
    if &protocol != latest.protocol() {
        txn = txn.with_protocol(protocol);
    }
    let outcome = txn.commit(&mut changes).await?;
    Ok(RestoreMetrics {
        version: outcome.version,
        restored_version: version,
        operation_metrics: changes.metrics(),
        attempts: outcome.attempts,
        checkpointed: outcome.checkpointed,
        checkpoint_error: outcome.checkpoint_error,
        iceberg_error: outcome.iceberg_error,
    })
}
