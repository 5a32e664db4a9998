//! DELETE with deletion vectors: the rows to delete found (by index, or by a
//! predicate read from the files), then committed as [`super::row_deletes`]
//! prepares them: for each touched file, new DV = old DV ∪ newly deleted
//! rows, all new DVs packed into one DV file, then one commit of
//! `remove(path, old DV)` + `add(path, new DV)` pairs (a file whose rows are
//! all gone is only removed).
//!
//! Concurrency goes beyond OSS Delta's file-level rules: when a concurrent
//! commit replaced the DV of a file this delete touches (remove + add of the
//! same path), the delete is rebased — its rows are unioned onto the winner's
//! DV — so two deletes of different rows of one file both succeed. A file the
//! winner removed outright, or a metadata/protocol change, is a conflict.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use roaring::RoaringTreemap;
use serde_json::{json, Map, Value};

pub use super::dv_files::DEFAULT_DV_FILE_TARGET_SIZE;
pub use super::metrics::DeleteMetrics;
use super::row_deletes::{
    add_target, load_base_dvs, num_records, prepared_targets, DeleteChanges, Target,
};
pub use super::row_deletes::{prepare_files, DeleteOptions, PreparedFile};
use super::transaction::Transaction;
use super::{live_files, read_concurrency};
use crate::error::{Error, Result};
use crate::log::actions::Metadata;
use crate::log::features;
use crate::log::path::normalize_path;
use crate::table::snapshot::Snapshot;

/// Check that deltadv may DELETE from this table; errors say why not.
/// Returns whether DVs may be written (else, with `copy_on_write`, files
/// are rewritten without the deleted rows). The rules (which writer features
/// each kind of DELETE keeps intact, and Delta Spark's: DVs only when the
/// protocol has the feature and `delta.enableDeletionVectors` is true) live
/// in [`crate::log::features`].
pub fn check_can_delete(snapshot: &Snapshot, copy_on_write: bool) -> Result<bool> {
    features::plan_delete(snapshot.protocol(), snapshot.metadata(), copy_on_write)
}

/// How a DELETE on `snapshot` is written: whether with DVs (else, with
/// `copy_on_write`, by rewriting files), and the metadata it commits. A
/// copy-on-write DELETE on a table with row tracking enabled that does not
/// name its materialized row tracking columns names them in its commit, as
/// UPDATE and MERGE do ([`super::changes::dml_metadata`]): the copied rows
/// keep their row ids and commit versions in them.
fn delete_plan(snapshot: &Snapshot, copy_on_write: bool) -> Result<(bool, Option<Metadata>)> {
    let named = super::changes::dml_metadata(snapshot, None);
    let metadata = named.as_ref().unwrap_or(snapshot.metadata());
    let dvs = features::plan_delete(snapshot.protocol(), metadata, copy_on_write)?;
    Ok((dvs, if dvs { None } else { named }))
}

/// Delete rows by physical row index: `rows` maps a data file's path (as in
/// `add.path`, URL-decoded or not) to the row indexes to delete. Returns what
/// was done; commits nothing if every row was already deleted.
pub async fn delete_rows(
    snapshot: &Snapshot,
    rows: HashMap<String, RoaringTreemap>,
    options: &DeleteOptions,
) -> Result<DeleteMetrics> {
    let started = Instant::now();
    let plan = delete_plan(snapshot, options.allow_copy_on_write)?;
    let live = live_files(snapshot)?;
    delete_rows_of(snapshot, &live, rows, options, plan, started).await
}

/// [`delete_rows`] once the table was checked (`plan`: DVs allowed, the
/// metadata to commit; see [`delete_plan`]) and its live files listed.
async fn delete_rows_of(
    snapshot: &Snapshot,
    live: &HashMap<String, crate::table::snapshot::LiveFile>,
    rows: HashMap<String, RoaringTreemap>,
    options: &DeleteOptions,
    plan: (bool, Option<Metadata>),
    started: Instant,
) -> Result<DeleteMetrics> {
    let targets = targets_of(snapshot, live, rows).await?;
    commit_targets(snapshot, targets, options, plan, started).await
}

/// The delete targets for `rows` (data file path → row indexes), with the
/// files' current DVs loaded: what [`DeleteChanges`] commits.
pub(super) async fn targets_of(
    snapshot: &Snapshot,
    live: &HashMap<String, crate::table::snapshot::LiveFile>,
    rows: HashMap<String, RoaringTreemap>,
) -> Result<BTreeMap<String, Target>> {
    let store = snapshot.store();
    let mut targets: BTreeMap<String, Target> = BTreeMap::new();
    for (path, r) in rows {
        if r.is_empty() {
            continue;
        }
        // As in `files()` (decoded), else as in the log (encoded).
        let key = if live.contains_key(&path) {
            path.clone()
        } else {
            normalize_path(&path)
        };
        let f = live.get(&key).ok_or_else(|| Error::NotFound {
            path: format!(
                "{path} (not a live data file of {} at version {})",
                store.url(),
                snapshot.version()
            ),
        })?;
        let n = num_records(store, &f.add, f.num_records).await?;
        add_target(&mut targets, key, &f.add, n, r)?;
    }
    load_base_dvs(store, &mut targets).await?;
    Ok(targets)
}

/// Commit the targets (`plan`: write DVs, else rewrite files; the metadata
/// to commit) in one transaction, which retries and rebases over
/// concurrent commits.
async fn commit_targets(
    snapshot: &Snapshot,
    targets: BTreeMap<String, Target>,
    options: &DeleteOptions,
    (dvs, metadata): (bool, Option<Metadata>),
    started: Instant,
) -> Result<DeleteMetrics> {
    let predicate = options
        .predicate
        .clone()
        .map_or_else(|| "[]".to_string(), |p| json!([p]).to_string());
    let mut parameters = Map::new();
    parameters.insert("predicate".into(), Value::String(predicate));
    let mut txn = Transaction::new(snapshot, "DELETE")?
        .with_parameters(parameters)
        .with_max_attempts(options.max_attempts)
        .with_engine_info(options.engine_info.clone());
    let mut changes = DeleteChanges::new(snapshot, targets, options, dvs, started);
    if let Some(m) = metadata {
        // Copied rows keep their ids in the columns this commit names.
        changes = changes.with_row_tracking(super::optimize::row_tracking_columns(
            snapshot.protocol(),
            &m,
        ));
        txn = txn.with_metadata(m);
    }
    let outcome = txn.commit(&mut changes).await?;
    let mut m = changes.delete_metrics();
    m.version = outcome.version;
    m.attempts = outcome.attempts;
    m.rebases = outcome.rebases;
    m.checkpointed = outcome.checkpointed;
    m.checkpoint_error = outcome.checkpoint_error;
    m.iceberg_error = outcome.iceberg_error;
    Ok(m)
}

/// DELETE FROM table WHERE `predicate` (deltadv's predicate subset; `None`
/// deletes every row). Files the predicate rules out by partition values or
/// stats are not read; files it matches entirely by partition values are
/// removed without being read; the rest are read (with physical row
/// indexes) and the matching rows get deletion vectors.
pub async fn delete_where(
    snapshot: &Snapshot,
    predicate: Option<&str>,
    options: &DeleteOptions,
) -> Result<DeleteMetrics> {
    use crate::expr::{Binding, Predicate};

    let started = Instant::now();
    let plan = delete_plan(snapshot, options.allow_copy_on_write)?;
    let pred = match predicate {
        Some(text) => Some(Arc::new(Predicate::new_in_zone(
            text,
            snapshot.schema(),
            &snapshot.metadata().partition_columns,
            snapshot.column_mapping(),
            Binding::Strict,
            &options.time_zone,
        )?)),
        None => None,
    };
    let live = live_files(snapshot)?;
    let rows = matching_rows(snapshot, &live, pred).await?;
    let mut options = options.clone();
    if options.predicate.is_none() {
        options.predicate = predicate.map(str::to_string);
    }
    let mut m = delete_rows_of(snapshot, &live, rows, &options, plan, started).await?;
    m.execution_time_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(m)
}

/// The live rows of the table that `pred` matches (all rows when `None`), by
/// data file: files the predicate rules out by partition values or stats are
/// not read; files it matches entirely by partition values are not read
/// either; the rest are scanned for the matching rows' physical indexes.
pub(super) async fn matching_rows(
    snapshot: &Snapshot,
    live: &HashMap<String, crate::table::snapshot::LiveFile>,
    pred: Option<Arc<crate::expr::Predicate>>,
) -> Result<HashMap<String, RoaringTreemap>> {
    use futures::{StreamExt, TryStreamExt};

    use crate::scan::{self, DeletedRows, ScanSpec};

    let store = snapshot.store();
    let mut spec = ScanSpec::for_snapshot(snapshot, Some(Vec::new()));
    spec.with_metadata_columns = true;
    spec.filter = pred.clone();
    spec.filter_rows = true;
    let files = scan::plan(snapshot, pred.as_deref())?;
    let found: Vec<Result<(String, RoaringTreemap)>> = futures::stream::iter(files)
        .map(|file| {
            let spec = &spec;
            let pred = pred.as_deref();
            async move {
                let whole = match pred {
                    None => true,
                    Some(p) => p.matches_whole_partition(&file.partition_values),
                };
                let mut rows = RoaringTreemap::new();
                if whole {
                    let f = live.get(&file.path).ok_or_else(|| Error::NotFound {
                        path: file.path.clone(),
                    })?;
                    let n = num_records(store, &f.add, f.num_records).await?;
                    rows.insert_range(0..n);
                } else {
                    // Decoded on a runtime worker: several files in parallel.
                    let (task_store, task_spec, task_file) =
                        (store.clone(), spec.clone(), file.clone());
                    // Streamed: only the matching rows' indexes are kept.
                    rows = crate::io::runtime::spawn(async move {
                        let mut batches = scan::stream_file(
                            &task_store,
                            &task_spec,
                            &task_file,
                            DeletedRows::Load,
                        )
                        .await?;
                        let mut rows = RoaringTreemap::new();
                        while let Some(batch) = batches.try_next().await? {
                            let col = batch
                                .column_by_name(scan::ROW_INDEX_COLUMN)
                                .and_then(|c| c.as_any().downcast_ref::<arrow_array::Int64Array>())
                                .ok_or_else(|| Error::Schema("row index column missing".into()))?;
                            rows.extend(col.values().iter().filter_map(|v| u64::try_from(*v).ok()));
                        }
                        Ok::<_, Error>(rows)
                    })
                    .await??;
                }
                Ok((file.path, rows))
            }
        })
        .buffer_unordered(read_concurrency())
        .collect()
        .await;
    let mut rows = HashMap::new();
    for r in found {
        let (path, map) = r?;
        if !map.is_empty() {
            rows.insert(path, map);
        }
    }
    Ok(rows)
}

/// Driver side: commit files prepared by [`prepare_files`] (possibly on many
/// executors) as one DELETE, with the same conflict handling as
/// [`delete_rows`]: a file whose DV changed since it was prepared is rebased
/// here (a new DV file written by the driver).
pub async fn commit_prepared(
    snapshot: &Snapshot,
    prepared: Vec<PreparedFile>,
    options: &DeleteOptions,
) -> Result<DeleteMetrics> {
    let started = Instant::now();
    let plan = delete_plan(snapshot, options.allow_copy_on_write)?;
    let targets = prepared_targets(snapshot, prepared, plan.0).await?;
    let mut m = commit_targets(snapshot, targets, options, plan, started).await?;
    m.execution_time_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(m)
}
