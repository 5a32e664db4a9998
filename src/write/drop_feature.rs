//! Dropping the `deletionVectors` feature, as Delta Spark 4.4's
//! `ALTER TABLE … DROP FEATURE deletionVectors` does (its fast path, with
//! checkpoint protection instead of waiting out the log retention):
//!
//! 1. stop writing DVs: `delta.enableDeletionVectors` is unset
//!    (`UNSET TBLPROPERTIES`), so no writer adds new ones;
//! 2. PURGE: every file with a DV is rewritten without its deleted rows
//!    (`REORG`);
//! 3. DV tombstones: a `remove` (dataChange=false) for every DV file that an
//!    unexpired tombstone still references, so a client that does not know
//!    DVs and vacuums the table keeps those files while old versions may be
//!    read (`Deletion Vector Tombstones`);
//! 4. three barrier checkpoints, each after an empty commit (`Empty Commit`):
//!    a reader never replays the history before them;
//! 5. the downgrade: in one commit (`DROP FEATURE`), the protocol without
//!    `deletionVectors` and with `checkpointProtection`, and
//!    `delta.requireCheckpointProtectionBeforeVersion` = this version, so
//!    the barrier checkpoints are kept; refused if a live file still has a DV
//!    (a concurrent writer added one: run it again);
//! 6. a checkpoint of the downgraded version.
//!
//! Afterwards a reader without DV support reads the latest version; the
//! history before the barrier still holds DVs for time travel by DV-aware
//! readers.

use serde_json::{json, Map, Value};

use super::optimize::{self, CompactMode, CompactOptions};
use super::transaction::{FixedActions, Transaction};
use super::{checkpoint, now_ms};
use crate::error::{Error, Result};
use crate::log::actions::{Action, Remove};
use crate::log::features::{self, ENABLE_DELETION_VECTORS, REQUIRE_CHECKPOINT_PROTECTION_BEFORE};
use crate::table::snapshot::Snapshot;

/// The feature this drops.
const FEATURE: &str = "deletionVectors";
/// Barrier checkpoints written before the downgrade (Delta Spark writes 3).
const BARRIER_CHECKPOINTS: usize = 3;

/// What dropping the feature did: the version of each step's commit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DropReport {
    pub unset_property_version: Option<u64>,
    pub purge_version: Option<u64>,
    pub purged_files: u64,
    pub tombstones_version: Option<u64>,
    pub dv_tombstones: u64,
    pub barrier_versions: Vec<u64>,
    pub downgrade_version: u64,
}

async fn latest(snapshot: &Snapshot) -> Result<Snapshot> {
    Snapshot::load(snapshot.store().clone(), None).await
}

/// Commit `actions` (maybe none) as `operation`; the new version.
async fn commit(
    snapshot: &Snapshot,
    operation: &str,
    actions: Vec<Action>,
    parameters: Map<String, Value>,
    metrics: Map<String, Value>,
    metadata: Option<crate::log::actions::Metadata>,
    protocol: Option<crate::log::actions::Protocol>,
) -> Result<u64> {
    let mut changes = FixedActions { actions, metrics };
    let mut txn = Transaction::new(snapshot, operation)?
        .with_parameters(parameters)
        .allow_empty();
    if let Some(m) = metadata {
        txn = txn.with_metadata(m);
    }
    if let Some(p) = protocol {
        txn = txn.with_protocol(p);
    }
    txn.commit(&mut changes)
        .await?
        .version
        .ok_or_else(|| Error::Internal(format!("{operation} committed nothing")))
}

/// Drop the `deletionVectors` feature of the table at `snapshot` (its latest
/// version is used); see the module docs.
pub async fn disable_deletion_vectors(snapshot: &Snapshot) -> Result<DropReport> {
    let mut report = DropReport::default();
    let mut current = latest(snapshot).await?;
    if !features::is_supported(current.protocol(), FEATURE) {
        return Err(Error::InvalidArgument(format!(
            "[DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT] the table's protocol does not support \
             {FEATURE}: there is nothing to drop"
        )));
    }
    // 1. No new DVs from now on.
    if current
        .metadata()
        .property(ENABLE_DELETION_VECTORS)
        .is_some()
    {
        let mut metadata = current.metadata().clone();
        metadata.configuration.remove(ENABLE_DELETION_VECTORS);
        let mut parameters = Map::new();
        parameters.insert(
            "properties".into(),
            json!(json!([ENABLE_DELETION_VECTORS]).to_string()),
        );
        parameters.insert("ifExists".into(), json!(true));
        report.unset_property_version = Some(
            commit(
                &current,
                "UNSET TBLPROPERTIES",
                Vec::new(),
                parameters,
                Map::new(),
                Some(metadata),
                None,
            )
            .await?,
        );
        current = latest(&current).await?;
    }
    // 2. PURGE the DVs of the latest version.
    let purged = optimize::compact(
        &current,
        CompactMode::Purge,
        &CompactOptions::default(),
        &|_, _| {},
    )
    .await?;
    if purged.version.is_some() {
        report.purge_version = purged.version;
        report.purged_files = purged
            .operation_metrics
            .get("numRemovedFiles")
            .and_then(|v| v.as_str())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        current = latest(&current).await?;
    }
    // 3. Tombstones for DV files unexpired removes still reference.
    let tombstone_paths: std::collections::HashSet<String> = current
        .tombstones()
        .iter()
        .map(|r| crate::log::path::normalize_path(&r.path))
        .collect();
    let mut dv_files: Vec<String> = current
        .tombstones()
        .iter()
        .filter_map(|r| r.deletion_vector.as_ref().and_then(|d| d.relative_path()))
        .filter(|p| !tombstone_paths.contains(p))
        .collect();
    dv_files.sort();
    dv_files.dedup();
    if !dv_files.is_empty() {
        let now = now_ms();
        report.dv_tombstones = dv_files.len() as u64;
        let actions = dv_files
            .iter()
            .map(|p| {
                Action::Remove(Box::new(Remove {
                    path: crate::write::data::partition::encode_add_path(p),
                    deletion_timestamp: Some(now),
                    data_change: false,
                    extended_file_metadata: None,
                    partition_values: None,
                    size: None,
                    stats: None,
                    tags: None,
                    deletion_vector: None,
                    base_row_id: None,
                    default_row_commit_version: None,
                }))
            })
            .collect();
        let mut metrics = Map::new();
        metrics.insert(
            "dvTombstonesWithinRetentionPeriod".into(),
            json!(dv_files.len().to_string()),
        );
        report.tombstones_version = Some(
            commit(
                &current,
                "Deletion Vector Tombstones",
                actions,
                Map::new(),
                metrics,
                None,
                None,
            )
            .await?,
        );
        current = latest(&current).await?;
    }
    // 4. Barrier checkpoints.
    for _ in 0..BARRIER_CHECKPOINTS {
        let v = commit(
            &current,
            "Empty Commit",
            Vec::new(),
            Map::new(),
            Map::new(),
            None,
            None,
        )
        .await?;
        current = latest(&current).await?;
        if current.version() == v {
            checkpoint::write(&current).await?;
        }
        report.barrier_versions.push(v);
    }
    // 5. The downgrade, if nothing references a DV any more.
    if let Some(f) = current
        .files()?
        .into_iter()
        .find(|f| f.add.deletion_vector.is_some())
    {
        return Err(Error::Conflict {
            version: current.version(),
            detail: format!(
                "{} got a deletion vector while the feature was being dropped (a concurrent \
                 writer): run disable_deletion_vectors again",
                f.path
            ),
        });
    }
    let protocol = features::drop_reader_writer_feature(current.protocol(), FEATURE);
    let mut metadata = current.metadata().clone();
    metadata.configuration.remove(ENABLE_DELETION_VECTORS);
    metadata.configuration.insert(
        REQUIRE_CHECKPOINT_PROTECTION_BEFORE.into(),
        Some((current.version() + 1).to_string()),
    );
    let mut parameters = Map::new();
    parameters.insert("featureName".into(), json!(FEATURE));
    parameters.insert("truncateHistory".into(), json!(false));
    report.downgrade_version = commit(
        &current,
        "DROP FEATURE",
        Vec::new(),
        parameters,
        Map::new(),
        Some(metadata),
        Some(protocol),
    )
    .await?;
    // 6. A checkpoint of the downgraded version.
    let downgraded = latest(&current).await?;
    if downgraded.version() == report.downgrade_version {
        checkpoint::write(&downgraded).await?;
    }
    Ok(report)
}
