//! Deleting rows of data files with deletion vectors: the half that DELETE,
//! UPDATE and MERGE share. For each touched file, new DV = old DV ∪ the rows
//! deleted now; the new DVs are written through [`super::dv_files`] (inline,
//! or packed into one DV file of about the target size); the commit holds
//! `remove(path, old DV)` + `add(path, new DV)` pairs, and a file whose rows
//! are all gone is only removed.
//!
//! ```text
//! targets (file → rows) ──load old DVs──▶ new DV = old ∪ rows ──▶ dv_files::write_dvs
//!        ▲                                                              │
//!        │ rebase: rows ∪ the winner's DV                               ▼
//! DeleteChanges (transaction::Changes) ◀──── remove/add actions ◀── descriptors
//! ```
//!
//! On Spark, executors run [`prepare_files`] (DVs written where the rows were
//! found) and the driver turns the [`PreparedFile`]s back into targets with
//! `prepared_targets`, reusing a prepared DV when the file's DV is still the
//! one it was prepared against.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use roaring::RoaringTreemap;
use serde_json::{json, Map, Value};

use super::commit::conflict;
use super::conflict::{self, FileChange, ReadSet};
use super::dv_files::{self, DEFAULT_DV_FILE_TARGET_SIZE};
use super::metrics::DeleteMetrics;
use super::{live_files, now_ms};
use crate::error::{Error, Result};
use crate::format::descriptor::{DeletionVectorDescriptor, StorageType};
use crate::io::TableStore;
use crate::log::actions::{Action, Add, Remove};
use crate::log::path::normalize_path;
use crate::table::dv;
use crate::table::snapshot::Snapshot;

/// How deletes are written.
#[derive(Debug, Clone)]
pub struct DeleteOptions {
    /// DVs whose serialized bitmap is at most this many bytes go inline in the
    /// log instead of into a DV file (0: never).
    pub inline_threshold: usize,
    /// Commit attempts before giving up on a busy table.
    pub max_attempts: u32,
    /// The predicate to record in commitInfo.operationParameters.
    pub predicate: Option<String>,
    /// Engine name recorded in commitInfo.
    pub engine_info: String,
    /// A new DV file is started when the current one would grow past this
    /// many bytes (one DV is never split).
    pub dv_file_target_size: usize,
    /// On a table that does not allow DVs, rewrite the touched files without
    /// the deleted rows (copy-on-write) instead of failing.
    pub allow_copy_on_write: bool,
    /// The session time zone DELETE's predicate reads instants in (Spark's
    /// `spark.sql.session.timeZone`; UTC by default).
    pub time_zone: crate::expr::TimeZone,
}

impl Default for DeleteOptions {
    fn default() -> Self {
        DeleteOptions {
            inline_threshold: 0,
            max_attempts: super::transaction::DEFAULT_MAX_ATTEMPTS,
            predicate: None,
            engine_info: super::ENGINE_INFO.to_string(),
            dv_file_target_size: DEFAULT_DV_FILE_TARGET_SIZE,
            allow_copy_on_write: false,
            time_zone: crate::expr::TimeZone::utc(),
        }
    }
}

/// One file's state during a delete: its current add action and DV, and the
/// rows this delete removes from it.
pub(super) struct Target {
    add: Add,
    key: String,
    num_records: u64,
    base_dv: RoaringTreemap,
    rows: RoaringTreemap,
    /// Prepared elsewhere (an executor) against `add`: used as is unless a
    /// concurrent commit forces a rebase.
    ready: Option<Ready>,
}

/// A change already written: the new DV (None: remove the file) and the
/// number of rows it newly deletes.
#[derive(Debug, Clone)]
pub(super) struct Ready {
    descriptor: Option<DeletionVectorDescriptor>,
    deleted: u64,
}

/// What to commit for one file.
pub(super) enum Change {
    /// Nothing new to delete (rows already deleted).
    None,
    /// All rows gone: remove the file.
    RemoveFile { deleted: u64 },
    /// New DV (`Some` map: written to a DV file or inline).
    NewDv { map: RoaringTreemap, deleted: u64 },
    /// Prepared elsewhere.
    Ready(Ready),
}

pub(super) fn plan_change(t: &Target) -> Change {
    let union = &t.base_dv | &t.rows;
    let deleted = union.len() - t.base_dv.len();
    if deleted == 0 {
        Change::None
    } else if union.len() >= t.num_records {
        Change::RemoveFile { deleted }
    } else {
        Change::NewDv {
            map: union,
            deleted,
        }
    }
}

/// `add.stats` with `tightBounds` false (min/max/nullCount stay valid bounds).
pub(super) fn wide_stats(stats: Option<&str>, num_records: u64) -> String {
    let mut v: Map<String, Value> = stats
        .and_then(|s| serde_json::from_str::<Value>(s).ok())
        .and_then(|v| match v {
            Value::Object(o) => Some(o),
            _ => None,
        })
        .unwrap_or_default();
    v.insert("numRecords".into(), json!(num_records));
    v.insert("tightBounds".into(), json!(false));
    Value::Object(v).to_string()
}

pub(super) fn remove_of(add: &Add, now: i64) -> Remove {
    Remove::of_add(add, now, true)
}

/// Number of physical rows of a data file (from stats, else its footer).
pub(super) async fn num_records(
    store: &TableStore,
    add: &Add,
    stats_rows: Option<i64>,
) -> Result<u64> {
    if let Some(n) = stats_rows.and_then(|n| u64::try_from(n).ok()) {
        return Ok(n);
    }
    crate::scan::file_row_count(
        store,
        &normalize_path(&add.path),
        u64::try_from(add.size).unwrap_or(0),
    )
    .await
}

/// Add `rows` of the file `add` (with `n` physical rows) to `targets`,
/// checking the row indexes against `n`.
pub(super) fn add_target(
    targets: &mut BTreeMap<String, Target>,
    key: String,
    add: &Add,
    n: u64,
    rows: RoaringTreemap,
) -> Result<()> {
    if let Some(max) = rows.max() {
        if max >= n {
            return Err(Error::InvalidArgument(format!(
                "row index {max} is out of range for {key}, which has {n} rows"
            )));
        }
    }
    match targets.get_mut(&key) {
        Some(t) => t.rows |= rows,
        None => {
            targets.insert(
                key.clone(),
                Target {
                    add: add.clone(),
                    key,
                    num_records: n,
                    base_dv: RoaringTreemap::new(),
                    rows,
                    ready: None,
                },
            );
        }
    }
    Ok(())
}

/// Fetch the current DVs of the targets, all together (coalesced GETs).
pub(super) async fn load_base_dvs(
    store: &TableStore,
    targets: &mut BTreeMap<String, Target>,
) -> Result<()> {
    let with_dv: Vec<(String, DeletionVectorDescriptor)> = targets
        .iter()
        .filter_map(|(k, t)| t.add.deletion_vector.clone().map(|d| (k.clone(), d)))
        .collect();
    let refs: Vec<&DeletionVectorDescriptor> = with_dv.iter().map(|(_, d)| d).collect();
    for ((k, _), map) in with_dv.iter().zip(dv::load_many(store, &refs).await?) {
        if let Some(t) = targets.get_mut(k) {
            t.base_dv = map;
        }
    }
    Ok(())
}

/// A DELETE's changes, as the transaction sees them: the targets, and their
/// remove/add actions prepared for the current bases (rebuilt, with a new DV
/// file, only after a rebase).
pub(super) struct DeleteChanges<'o> {
    targets: BTreeMap<String, Target>,
    options: &'o DeleteOptions,
    /// Write DVs (else rewrite files: copy-on-write).
    dvs: bool,
    prepared: Option<(Vec<Action>, DeleteMetrics)>,
    started: Instant,
    /// The table's materialized row tracking columns: a copy-on-write
    /// rewrite keeps the copied rows' ids and commit versions in them.
    row_tracking: Option<[String; 2]>,
    /// Tags of rewritten files (icebergCompat).
    file_tags: Option<HashMap<String, Option<String>>>,
    /// Field ids of the materialized row tracking columns (IcebergCompatV3).
    row_tracking_ids: Option<[i64; 2]>,
}

impl<'o> DeleteChanges<'o> {
    /// The changes to `targets` (files of the table of `snapshot`).
    pub(super) fn new(
        snapshot: &Snapshot,
        targets: BTreeMap<String, Target>,
        options: &'o DeleteOptions,
        dvs: bool,
        started: Instant,
    ) -> Self {
        DeleteChanges {
            targets,
            options,
            dvs,
            prepared: None,
            started,
            row_tracking: super::optimize::row_tracking_columns(
                snapshot.protocol(),
                snapshot.metadata(),
            ),
            file_tags: crate::log::features::iceberg::new_file_tags(
                &snapshot.metadata().configuration,
            ),
            row_tracking_ids: crate::log::features::iceberg::row_tracking_field_ids(
                &snapshot.metadata().configuration,
            ),
        }
    }

    /// With the materialized row tracking columns `columns` (those the
    /// commit names, when it names them: an UPDATE or MERGE on a table that
    /// did not) in place of the table's.
    pub(super) fn with_row_tracking(mut self, columns: Option<[String; 2]>) -> Self {
        if columns.is_some() {
            self.row_tracking = columns;
        }
        self
    }

    /// Whether it writes DVs (else it rewrites files).
    pub(super) fn writes_dvs(&self) -> bool {
        self.dvs
    }

    /// The paths of the files it changes, and the rows it removes from each.
    pub(super) fn rows(&self) -> impl Iterator<Item = (&String, &RoaringTreemap)> {
        self.targets.iter().map(|(k, t)| (k, &t.rows))
    }

    /// Bytes of the files it removes for good (not those re-added with a
    /// new DV), as Delta Spark counts them.
    pub(super) fn removed_bytes(&self) -> u64 {
        let Some((actions, _)) = self.prepared.as_ref() else {
            return 0;
        };
        let readded: std::collections::HashSet<&str> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Add(add) => Some(add.path.as_str()),
                _ => None,
            })
            .collect();
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Remove(r) if !readded.contains(r.path.as_str()) => {
                    r.size.and_then(|s| u64::try_from(s).ok())
                }
                _ => None,
            })
            .sum()
    }

    pub(super) fn delete_metrics(&self) -> DeleteMetrics {
        let mut m = self
            .prepared
            .as_ref()
            .map(|(_, m)| m.clone())
            .unwrap_or_default();
        m.execution_time_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        m
    }
}

impl super::transaction::Changes for DeleteChanges<'_> {
    async fn actions(&mut self, store: &TableStore) -> Result<Vec<Action>> {
        if self.prepared.is_none() {
            self.prepared = Some(if self.dvs {
                prepare(store, &self.targets, self.options).await?
            } else {
                super::cow::prepare(
                    store,
                    &targets_view(&self.targets),
                    self.row_tracking
                        .as_ref()
                        .map(|columns| (columns, self.row_tracking_ids)),
                    self.file_tags.as_ref(),
                )
                .await?
            });
        }
        Ok(self
            .prepared
            .as_ref()
            .map(|(a, _)| a.clone())
            .unwrap_or_default())
    }

    fn metrics(&self) -> Map<String, Value> {
        match self.delete_metrics().to_json() {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    fn reads(&self) -> (ReadSet, BTreeMap<String, FileChange>) {
        // The files this DELETE read are the ones it changes (files ruled out
        // by partitions or stats hold no matching row).
        (
            ReadSet::Files(self.targets.keys().cloned().collect()),
            self.targets
                .iter()
                .map(|(k, t)| (k.clone(), FileChange::DeleteRows(t.rows.clone())))
                .collect(),
        )
    }

    /// Rebase targets whose DV the winner replaced: their rows are checked
    /// against the winner's DVs and unioned onto the winner's new one.
    async fn rebase(
        &mut self,
        store: &TableStore,
        version: u64,
        files: Vec<conflict::RebaseFile>,
    ) -> Result<()> {
        for f in files {
            let Some(t) = self.targets.get_mut(&f.path) else {
                return Err(Error::Internal(format!(
                    "conflict checker rebased {}, which this DELETE does not change",
                    f.path
                )));
            };
            // The winner's old DV is normally our base: reuse it.
            let ours = t.add.deletion_vector.as_ref().map(|d| d.unique_id());
            let old = match &f.winner_remove.deletion_vector {
                Some(d) if Some(d.unique_id()) == ours => t.base_dv.clone(),
                Some(d) => dv::load_one(store, d).await?,
                None => RoaringTreemap::new(),
            };
            let new = match &f.winner_add.deletion_vector {
                Some(d) => dv::load_one(store, d).await?,
                None => RoaringTreemap::new(),
            };
            f.check_rows(version, &old, &new, &t.rows)?;
            t.base_dv = new;
            t.add = f.winner_add;
            t.ready = None;
        }
        self.prepared = None;
        Ok(())
    }
}

/// Each target's change, with the new DVs written: descriptors of `NewDv`
/// changes resolved (inline, or in the DV files written here, about
/// `dv_file_target_size` each).
pub(super) async fn write_changes<'a>(
    store: &TableStore,
    targets: &'a BTreeMap<String, Target>,
    options: &DeleteOptions,
) -> Result<Vec<(&'a Target, Change, Option<DeletionVectorDescriptor>)>> {
    let mut plans: Vec<(&Target, Change)> = Vec::new();
    for t in targets.values() {
        let change = match &t.ready {
            Some(r) => Change::Ready(r.clone()),
            None => plan_change(t),
        };
        plans.push((t, change));
    }
    let maps: Vec<&RoaringTreemap> = plans
        .iter()
        .filter_map(|(_, c)| match c {
            Change::NewDv { map, .. } => Some(map),
            _ => None,
        })
        .collect();
    let mut written = dv_files::write_dvs(
        store,
        &maps,
        options.inline_threshold,
        options.dv_file_target_size,
    )
    .await?
    .into_iter();
    let mut out = Vec::with_capacity(plans.len());
    for (t, change) in plans {
        let descriptor = match &change {
            Change::NewDv { .. } => Some(
                written
                    .next()
                    .ok_or_else(|| Error::Internal(format!("no DV written for {}", t.key)))?,
            ),
            _ => None,
        };
        out.push((t, change, descriptor));
    }
    Ok(out)
}

/// The remove/add actions for the current targets (one DV file for all new
/// file-backed DVs) and the metrics they amount to.
pub(super) async fn prepare(
    store: &TableStore,
    targets: &BTreeMap<String, Target>,
    options: &DeleteOptions,
) -> Result<(Vec<Action>, DeleteMetrics)> {
    let now = now_ms();
    let mut m = DeleteMetrics::default();
    let plans = write_changes(store, targets, options).await?;
    // DV files this commit references: written here, or on the executors
    // that prepared the changes (a Spark DELETE).
    let mut dv_files = std::collections::HashSet::new();
    let mut actions = Vec::new();
    for (t, change, new_dv) in plans {
        let had_dv = t.add.deletion_vector.is_some();
        // (rows newly deleted, the new DV; None: the file goes)
        let (deleted, descriptor) = match change {
            Change::None => continue,
            Change::Ready(r) => (r.deleted, r.descriptor),
            Change::RemoveFile { deleted } => (deleted, None),
            Change::NewDv { deleted, .. } => (
                deleted,
                Some(
                    new_dv
                        .ok_or_else(|| Error::Internal(format!("no DV written for {}", t.key)))?,
                ),
            ),
        };
        m.num_deleted_rows += deleted;
        if had_dv {
            m.num_deletion_vectors_removed += 1;
        }
        actions.push(Action::Remove(Box::new(remove_of(&t.add, now))));
        match descriptor {
            None => m.num_removed_files += 1,
            Some(d) => {
                if d.storage_type() != StorageType::Inline {
                    dv_files.insert(d.path_or_inline_dv().to_string());
                }
                if had_dv {
                    m.num_deletion_vectors_updated += 1;
                }
                m.num_deletion_vectors_added += 1;
                actions.push(Action::Add(Box::new(new_add(t, d, now))));
            }
        }
    }
    m.num_dv_files_written = dv_files.len() as u64;
    Ok((actions, m))
}

/// The targets as the copy-on-write path sees them.
pub(super) fn targets_view(targets: &BTreeMap<String, Target>) -> Vec<super::cow::Rewrite<'_>> {
    targets
        .values()
        .map(|t| super::cow::Rewrite {
            add: &t.add,
            deleted: &t.base_dv | &t.rows,
            already_deleted: t.base_dv.len(),
        })
        .collect()
}

pub(super) fn new_add(t: &Target, descriptor: DeletionVectorDescriptor, now: i64) -> Add {
    let mut add = t.add.clone();
    add.modification_time = now;
    add.data_change = true;
    add.stats = Some(wide_stats(t.add.stats.as_deref(), t.num_records));
    add.deletion_vector = Some(descriptor);
    add
}

/// One file's delete, prepared (DV written) on a Spark executor, to be
/// committed by the driver with [`super::delete::commit_prepared`].
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PreparedFile {
    /// The add action the change was computed against.
    pub add: Add,
    pub num_records: u64,
    /// The new DV; `None`: every row is gone, remove the file.
    pub deletion_vector: Option<DeletionVectorDescriptor>,
    /// Rows this delete newly deletes.
    pub deleted: u64,
    /// The rows this delete targets (inline descriptor), for rebasing.
    pub rows: DeletionVectorDescriptor,
}

/// Executor side: for each (add action, rows to delete), new DV = old DV ∪
/// rows, all new DVs written into ONE DV file. Files with nothing new to
/// delete are left out. No log replay: the add actions come with the work.
pub async fn prepare_files(
    store: &TableStore,
    items: Vec<(Add, RoaringTreemap)>,
    options: &DeleteOptions,
) -> Result<Vec<PreparedFile>> {
    let mut targets: BTreeMap<String, Target> = BTreeMap::new();
    for (add, rows) in items {
        let key = normalize_path(&add.path);
        let stats_rows = crate::log::actions::RecordCount::parse(
            add.stats.as_deref().unwrap_or("{}"),
            &add.path,
        )
        .ok()
        .and_then(|c| c.num_records);
        let n = num_records(store, &add, stats_rows).await?;
        add_target(&mut targets, key, &add, n, rows)?;
    }
    load_base_dvs(store, &mut targets).await?;
    let changes = write_changes(store, &targets, options).await?;
    let mut out = Vec::new();
    for (t, change, new_dv) in changes {
        let (descriptor, deleted) = match change {
            Change::None | Change::Ready(_) => continue,
            Change::RemoveFile { deleted } => (None, deleted),
            Change::NewDv { deleted, .. } => (new_dv, deleted),
        };
        out.push(PreparedFile {
            add: t.add.clone(),
            num_records: t.num_records,
            deletion_vector: descriptor,
            deleted,
            rows: DeletionVectorDescriptor::inline(&t.rows)?,
        });
    }
    Ok(out)
}

/// The targets of files prepared elsewhere, against `snapshot`: with `dvs`,
/// a change is used as prepared when the file's DV is still the one it was
/// prepared against; otherwise (several tasks prepared the same file, the DV
/// changed, or the files are rewritten: `dvs` false) its rows are applied
/// here to the file's current DV, which is loaded.
pub(super) async fn prepared_targets(
    snapshot: &Snapshot,
    prepared: Vec<PreparedFile>,
    dvs: bool,
) -> Result<BTreeMap<String, Target>> {
    let store = snapshot.store();
    let live = live_files(snapshot)?;
    let mut targets: BTreeMap<String, Target> = BTreeMap::new();
    for p in prepared {
        let key = normalize_path(&p.add.path);
        let rows = p.rows.inline_bitmap()?;
        if let Some(t) = targets.get_mut(&key) {
            // Prepared by two tasks: one change over both sets of rows.
            t.rows |= rows;
            t.ready = None;
            continue;
        }
        let current = live.get(&key).ok_or_else(|| {
            conflict(
                snapshot.version(),
                format!("data file {key} is no longer in the table"),
            )
        })?;
        let same = current.add.deletion_vector.as_ref().map(|d| d.unique_id())
            == p.add.deletion_vector.as_ref().map(|d| d.unique_id());
        let t = Target {
            add: current.add.clone(),
            key: key.clone(),
            num_records: p.num_records,
            base_dv: RoaringTreemap::new(),
            rows,
            ready: (same && dvs).then_some(Ready {
                descriptor: p.deletion_vector,
                deleted: p.deleted,
            }),
        };
        targets.insert(key, t);
    }
    // The current DVs of files whose change is redone here.
    let redo: Vec<(String, DeletionVectorDescriptor)> = targets
        .iter()
        .filter(|(_, t)| t.ready.is_none())
        .filter_map(|(k, t)| t.add.deletion_vector.clone().map(|d| (k.clone(), d)))
        .collect();
    let refs: Vec<&DeletionVectorDescriptor> = redo.iter().map(|(_, d)| d).collect();
    for ((k, _), map) in redo.iter().zip(dv::load_many(store, &refs).await?) {
        if let Some(t) = targets.get_mut(k) {
            t.base_dv = map;
        }
    }
    Ok(targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widened_stats_keep_float_bounds_exactly() {
        let stats = r#"{"numRecords":3,"minValues":{"x":1.6971733333333335e+62},"maxValues":{"x":0.30000000000000004}}"#;
        let wide: Value = serde_json::from_str(&wide_stats(Some(stats), 3)).unwrap();
        assert_eq!(wide["minValues"]["x"].to_string(), "1.6971733333333335e+62");
        assert_eq!(wide["maxValues"]["x"].to_string(), "0.30000000000000004");
        assert_eq!(wide["tightBounds"], json!(false));
    }
}
