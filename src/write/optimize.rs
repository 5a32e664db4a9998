//! REORG TABLE … APPLY (PURGE) and OPTIMIZE: rewrite data files without the
//! rows their deletion vectors delete, bin-packing small files, and commit
//! the swap with `dataChange=false` (no row changes: streams and the change
//! data feed skip it).
//!
//! Three steps, each usable apart so Spark can run the middle one on its
//! executors:
//!
//! 1. [`plan`] (pure over a snapshot): which files, in which bins. PURGE takes
//!    every file with a DV; OPTIMIZE every file smaller than the target size
//!    or whose deleted-row ratio exceeds `max_deleted_rows_ratio` (0.05, as
//!    Delta Spark). Files are grouped by partition, ordered by path, and cut
//!    into bins of up to the target size; an OPTIMIZE bin of one file without
//!    a DV is dropped (rewriting it changes nothing).
//! 2. [`CompactTask::rewrite`]: read a bin's files with their DVs applied and
//!    write the rows into new files (the table's layout, tight stats). A bin
//!    whose rows are all deleted writes nothing: its files are just removed.
//! 3. [`commit`]: remove every file of the bins (with the DV it had) and add
//!    the new files, as `REORG` or `OPTIMIZE` with Delta Spark's parameters
//!    and metrics. A concurrent commit that changed one of the rewritten
//!    files (a DELETE's new DV) makes the compaction fail and remove what it
//!    wrote: rows a concurrent DELETE removed never come back.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch};

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::conflict::{FileChange, ReadSet};
use super::data::{remove_files, DataWriter, TableLayout, WriterOptions};
use super::now_ms;
use super::transaction::{Changes, Transaction};
use crate::error::{Error, Result};
use crate::expr::{Binding, Predicate};
use crate::io::TableStore;
use crate::log::actions::{Action, Add, Metadata, Protocol, Remove};
use crate::log::features;
use crate::log::features::properties::TableProperties;
use crate::log::path::normalize_path;
use crate::log::schema::{DataType, StructField};
use crate::scan::{self, DeletedRows, ScanFile, ScanSpec, FILE_PATH_COLUMN, ROW_INDEX_COLUMN};
use crate::table::snapshot::{LiveFile, Snapshot};

/// Delta Spark's default target file size for OPTIMIZE
/// (`spark.databricks.delta.optimize.maxFileSize`): 1 GiB.
pub const DEFAULT_TARGET_SIZE: u64 = 1 << 30;
/// Delta Spark's default `maxDeletedRowsRatio`: a file with more of its rows
/// deleted is rewritten by OPTIMIZE whatever its size.
pub const DEFAULT_MAX_DELETED_ROWS_RATIO: f64 = 0.05;

/// Which compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactMode {
    /// `REORG TABLE … APPLY (PURGE)`: every file with a deletion vector.
    Purge,
    /// `OPTIMIZE`: small files, and files with many deleted rows.
    Optimize,
}

impl CompactMode {
    /// `commitInfo.operation`, as Delta Spark writes it.
    pub fn operation(self) -> &'static str {
        match self {
            CompactMode::Purge => "REORG",
            CompactMode::Optimize => "OPTIMIZE",
        }
    }
}

/// How a compaction is planned and committed.
#[derive(Debug, Clone)]
pub struct CompactOptions {
    /// Bin size and new file size in bytes; default: the table's
    /// `delta.targetFileSize`, else [`DEFAULT_TARGET_SIZE`].
    pub target_size: Option<u64>,
    /// OPTIMIZE also rewrites files with more than this share of rows deleted.
    pub max_deleted_rows_ratio: f64,
    /// Only files of partitions this predicate (over partition columns) matches.
    pub partition_filter: Option<String>,
    /// `OPTIMIZE … FULL`: on a clustered table, also recluster the files
    /// clustered by other columns ([`super::cluster::select_files`]); refused
    /// on other tables, as Delta Spark.
    pub full: bool,
    /// OPTIMIZE of a clustered table: bytes of decoded rows a rewrite task
    /// holds at once (None: [`super::cluster::DEFAULT_MEMORY_BUDGET`]).
    pub memory_budget: Option<u64>,
    pub max_attempts: u32,
    /// Engine name recorded in commitInfo.
    pub engine_info: String,
}

impl Default for CompactOptions {
    fn default() -> Self {
        CompactOptions {
            target_size: None,
            max_deleted_rows_ratio: DEFAULT_MAX_DELETED_ROWS_RATIO,
            partition_filter: None,
            full: false,
            memory_budget: None,
            max_attempts: super::transaction::DEFAULT_MAX_ATTEMPTS,
            engine_info: super::ENGINE_INFO.to_string(),
        }
    }
}

/// Files rewritten together into new files of one partition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactBin {
    /// The files' add actions, as in the snapshot the plan was made on.
    pub files: Vec<Add>,
}

impl CompactBin {
    fn bytes(&self) -> u64 {
        self.files
            .iter()
            .map(|a| u64::try_from(a.size).unwrap_or(0))
            .sum()
    }
}

/// What a compaction will do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactPlan {
    pub mode: CompactMode,
    pub version: u64,
    pub target_size: u64,
    pub bins: Vec<CompactBin>,
    /// Files looked at (after the partition filter).
    pub considered_files: u64,
    /// OPTIMIZE of a clustered table: one bin, reclustered
    /// ([`super::cluster`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clustering: Option<super::cluster::ClusteringRun>,
    /// The metadata the compaction writes its files in and commits: on a
    /// table with row tracking enabled that does not name its materialized
    /// row tracking columns, the table's with them named (once, here), so
    /// the rewritten rows keep their ids and commit versions in them; None
    /// when the table's metadata stays as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// What one rewrite task needs, as JSON (no credentials).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompactTask {
    pub protocol: Protocol,
    pub metadata: Metadata,
    pub target_size: u64,
    pub bin: CompactBin,
    /// Recluster the bin's rows ([`super::cluster::rewrite`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clustering: Option<super::cluster::ClusteringRun>,
}

/// What a compaction did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompactMetrics {
    /// The committed version (None: nothing to rewrite).
    pub version: Option<u64>,
    /// `commitInfo.operationMetrics` as written.
    pub operation_metrics: Map<String, Value>,
    pub attempts: u32,
    pub checkpointed: bool,
    pub checkpoint_error: Option<String>,
    /// Why the commit was not mirrored as an Iceberg snapshot (UniForm).
    pub iceberg_error: Option<String>,
}

/// Rows of a file its DV deletes, over its rows (0 without stats).
pub(super) fn deleted_ratio(f: &LiveFile) -> f64 {
    let deleted = f
        .add
        .deletion_vector
        .as_ref()
        .map_or(0, |d| d.cardinality());
    match f.num_records {
        Some(n) if n > 0 => deleted as f64 / n as f64,
        _ => 0.0,
    }
}

fn target_size_of(snapshot: &Snapshot, options: &CompactOptions) -> Result<u64> {
    if let Some(size) = options.target_size {
        if size == 0 {
            return Err(Error::InvalidArgument(
                "target_size must be > 0 bytes".into(),
            ));
        }
        return Ok(size);
    }
    Ok(TableProperties::of(snapshot.metadata())
        .target_file_size()?
        .unwrap_or(DEFAULT_TARGET_SIZE))
}

/// Plan a compaction of `snapshot` (see the module docs).
pub fn plan(
    snapshot: &Snapshot,
    mode: CompactMode,
    options: &CompactOptions,
) -> Result<CompactPlan> {
    features::check_compact(snapshot.protocol(), snapshot.metadata())?;
    // Rows keep their ids in the materialized row tracking columns: named
    // in this commit when the table does not name them (as UPDATE/MERGE).
    let metadata = super::changes::dml_metadata(snapshot, None);
    let mut plan = plan_bins(snapshot, mode, options)?;
    plan.metadata = metadata;
    Ok(plan)
}

/// [`plan`]'s bins, once the table was checked.
fn plan_bins(
    snapshot: &Snapshot,
    mode: CompactMode,
    options: &CompactOptions,
) -> Result<CompactPlan> {
    if !(0.0..=1.0).contains(&options.max_deleted_rows_ratio) {
        return Err(Error::InvalidArgument(format!(
            "max_deleted_rows_ratio must be between 0 and 1, not {}",
            options.max_deleted_rows_ratio
        )));
    }
    let target_size = target_size_of(snapshot, options)?;
    if mode == CompactMode::Optimize {
        if let Some(plan) = plan_clustered(snapshot, options, target_size)? {
            return Ok(plan);
        }
    }
    if options.full {
        return Err(full_not_supported());
    }
    let filter = match &options.partition_filter {
        None => None,
        Some(text) => {
            let p = Predicate::new(
                text,
                snapshot.schema(),
                &snapshot.metadata().partition_columns,
                snapshot.column_mapping(),
                Binding::Strict,
            )?;
            if p.columns().iter().any(|c| !c.partition) {
                return Err(Error::InvalidArgument(format!(
                    "the partition filter {text:?} names a column that is not a partition column \
                     (partition columns: {:?})",
                    snapshot.metadata().partition_columns
                )));
            }
            Some(p)
        }
    };
    let mut considered = 0u64;
    // Candidates by partition (their values, sorted for a stable plan).
    let mut groups: BTreeMap<Vec<(String, Option<String>)>, Vec<LiveFile>> = BTreeMap::new();
    for f in snapshot.files()? {
        if let Some(p) = &filter {
            if !p.may_match_file(&f.add.partition_values, None) {
                continue;
            }
        }
        considered += 1;
        let has_dv = f
            .add
            .deletion_vector
            .as_ref()
            .is_some_and(|d| d.cardinality() > 0);
        let take = match mode {
            CompactMode::Purge => has_dv,
            CompactMode::Optimize => {
                u64::try_from(f.add.size).unwrap_or(0) < target_size
                    || deleted_ratio(&f) > options.max_deleted_rows_ratio
            }
        };
        if take {
            let mut key: Vec<(String, Option<String>)> = f
                .add
                .partition_values
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            key.sort();
            groups.entry(key).or_default().push(f);
        }
    }
    let mut bins = Vec::new();
    for (_, mut files) in groups {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let mut current = CompactBin { files: Vec::new() };
        for f in files {
            let size = u64::try_from(f.add.size).unwrap_or(0);
            if !current.files.is_empty() && current.bytes() + size > target_size {
                bins.push(std::mem::replace(
                    &mut current,
                    CompactBin { files: Vec::new() },
                ));
            }
            current.files.push(f.add);
        }
        if !current.files.is_empty() {
            bins.push(current);
        }
    }
    if mode == CompactMode::Optimize {
        // One file without deleted rows would be rewritten as it is.
        bins.retain(|b| {
            b.files.len() > 1
                || b.files.iter().any(|a| {
                    a.deletion_vector
                        .as_ref()
                        .is_some_and(|d| d.cardinality() > 0)
                })
        });
    }
    Ok(CompactPlan {
        mode,
        version: snapshot.version(),
        target_size,
        bins,
        considered_files: considered,
        clustering: None,
        metadata: None,
    })
}

/// OPTIMIZE of a clustered table: the files to recluster, in one bin
/// ([`super::cluster::select_files`]); `None` when the table is not clustered.
fn plan_clustered(
    snapshot: &Snapshot,
    options: &CompactOptions,
    target_size: u64,
) -> Result<Option<CompactPlan>> {
    let Some(columns) = features::clustering::clustering_columns(
        snapshot.protocol(),
        snapshot.domain_metadata(),
        snapshot.schema(),
        snapshot.column_mapping(),
    )?
    else {
        return Ok(None);
    };
    if let Some(filter) = &options.partition_filter {
        return Err(Error::InvalidArgument(format!(
            "OPTIMIZE of a clustered table takes no partition filter ({filter:?}): the table \
             has no partitions, it is clustered by {:?}",
            columns.iter().map(|c| c.name()).collect::<Vec<_>>()
        )));
    }
    if options.full && columns.is_empty() {
        return Err(full_not_supported());
    }
    let files = snapshot.files()?;
    let considered = files.len() as u64;
    let selected = super::cluster::select_files(
        files,
        &columns,
        options.max_deleted_rows_ratio,
        options.full,
    );
    Ok(Some(CompactPlan {
        mode: CompactMode::Optimize,
        version: snapshot.version(),
        target_size,
        bins: if selected.is_empty() {
            Vec::new()
        } else {
            vec![CompactBin { files: selected }]
        },
        considered_files: considered,
        clustering: Some(super::cluster::ClusteringRun::new(
            &columns,
            options.full,
            options.memory_budget,
        )),
        metadata: None,
    }))
}

/// Delta Spark's refusal of `OPTIMIZE … FULL` on a table that is not
/// clustered.
fn full_not_supported() -> Error {
    Error::InvalidArgument(
        "[DELTA_OPTIMIZE_FULL_NOT_SUPPORTED] OPTIMIZE FULL is only supported for clustered \
         tables with non-empty clustering columns"
            .into(),
    )
}

impl CompactPlan {
    /// One rewrite task per bin, for `snapshot` (the plan's version).
    pub fn tasks(&self, snapshot: &Snapshot) -> Vec<CompactTask> {
        self.bins
            .iter()
            .map(|bin| CompactTask {
                protocol: snapshot.protocol().clone(),
                metadata: self
                    .metadata
                    .clone()
                    .unwrap_or_else(|| snapshot.metadata().clone()),
                target_size: self.target_size,
                bin: bin.clone(),
                clustering: self.clustering.clone(),
            })
            .collect()
    }
}

impl CompactTask {
    /// Rewrite the bin's rows (DVs applied) into new files at `store`; their
    /// add actions (`dataChange=false`). On a failure the files written so
    /// far are removed.
    pub async fn rewrite(&self, store: &TableStore) -> Result<Vec<Add>> {
        use futures::{StreamExt, TryStreamExt};

        if let Some(run) = &self.clustering {
            return super::cluster::rewrite(self, run, store).await;
        }
        let Rewrite {
            layout,
            spec,
            tracking,
        } = self.rewrite_plan()?;
        let options = WriterOptions {
            target_file_size: usize::try_from(self.target_size).unwrap_or(usize::MAX),
            ..Default::default()
        };
        let mut writer = DataWriter::try_new(store.clone(), layout, options)?;
        let written = async {
            // Files are read (decoded on the runtime's workers) a few ahead of
            // the writer, which encodes in this task.
            let mut reads = futures::stream::iter(self.bin.files.clone())
                .map(|add| {
                    let file = ScanFile::of_add(&add);
                    let batches =
                        scan::read_ahead(store.clone(), spec.clone(), file, DeletedRows::Load);
                    futures::future::ready((add, batches))
                })
                .buffered(READ_AHEAD);
            while let Some((add, mut batches)) = reads.next().await {
                while let Some(batch) = batches.try_next().await? {
                    writer.write(&with_row_ids(batch, &add, &tracking)?).await?;
                }
            }
            writer.finish().await
        }
        .await;
        rewritten(store, writer.started_files(), written, |_| {}).await
    }

    /// How the bin's files are read and rewritten ([`Rewrite`]).
    pub(super) fn rewrite_plan(&self) -> Result<Rewrite> {
        let mut layout = TableLayout::of(&self.protocol, &self.metadata)?;
        let tracking = row_tracking_columns(&self.protocol, &self.metadata);
        if let Some(columns) = &tracking {
            // Rows keep their ids: read (and write) the materialized columns.
            for c in columns {
                layout
                    .schema
                    .fields
                    .push(StructField::internal(c, DataType::Long));
            }
        }
        let spec = Arc::new(ScanSpec {
            schema: layout.schema.clone(),
            partition_columns: layout.partition_columns.clone(),
            column_mapping: layout.mode,
            columns: None,
            with_metadata_columns: tracking.is_some(),
            filter: None,
            filter_rows: false,
            row_tracking: None,
            string_view: false,
        });
        Ok(Rewrite {
            layout,
            spec,
            tracking,
        })
    }

    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|source| Error::Json {
            context: "compaction task".into(),
            source,
        })
    }

    pub fn from_json(text: &str) -> Result<CompactTask> {
        serde_json::from_str(text).map_err(|source| Error::Json {
            context: "compaction task".into(),
            source,
        })
    }
}

/// How a compaction (OPTIMIZE, PURGE, clustering) reads its files and what it
/// writes: the table's layout, with the materialized row-tracking columns
/// where the table tracks rows (rows keep their ids: the columns are read,
/// filled in by [`with_row_ids`] and written); the scan of every column of
/// that layout, DVs applied; the tracking columns' names.
pub(super) struct Rewrite {
    pub layout: TableLayout,
    pub spec: Arc<ScanSpec>,
    pub tracking: Option<[String; 2]>,
}

/// A batch of `add`'s rows read with [`Rewrite::spec`], as it is written:
/// with every row's id and commit version where the table tracks rows
/// ([`materialize_row_ids`]), else as read.
pub(super) fn with_row_ids(
    batch: RecordBatch,
    add: &Add,
    tracking: &Option<[String; 2]>,
) -> Result<RecordBatch> {
    match tracking {
        Some([id, version]) => materialize_row_ids(&batch, add, id, version),
        None => Ok(batch),
    }
}

/// The end of a rewrite: its new files' adds, `dataChange=false` and then
/// `mark`ed, where it was `written`; else the files it `started` (its
/// writer's [`DataWriter::started_files`]) are removed (best effort) and the
/// error returned.
pub(super) async fn rewritten(
    store: &TableStore,
    started: &[String],
    written: Result<Vec<Add>>,
    mark: impl Fn(&mut Add),
) -> Result<Vec<Add>> {
    match written {
        Ok(adds) => Ok(adds
            .into_iter()
            .map(|mut a| {
                a.data_change = false;
                mark(&mut a);
                a
            })
            .collect()),
        Err(e) => {
            let _ = remove_files(store, started).await;
            Err(e)
        }
    }
}

/// The hidden columns a table that tracks rows materializes row ids and
/// row commit versions into (`delta.rowTracking.materialized…ColumnName`),
/// when the protocol supports row tracking and both are named.
pub(super) fn row_tracking_columns(
    protocol: &Protocol,
    metadata: &Metadata,
) -> Option<[String; 2]> {
    if !features::is_supported(protocol, "rowTracking") {
        return None;
    }
    let (id, version) = TableProperties::of(metadata).materialized_row_tracking_columns()?;
    Some([id.to_string(), version.to_string()])
}

/// `batch` (table columns, the materialized columns `id` and `version`, then
/// `_row_index` and `_file_path`) with every row's id and commit version
/// filled in (a materialized value, else the file's `baseRowId` + the row's
/// index and its `defaultRowCommitVersion`), without the metadata columns.
fn materialize_row_ids(
    batch: &RecordBatch,
    add: &Add,
    id: &str,
    version: &str,
) -> Result<RecordBatch> {
    let long = |name: &str| -> Result<&Int64Array> {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
            .ok_or_else(|| Error::Internal(format!("row tracking: column {name} missing")))
    };
    let index = long(ROW_INDEX_COLUMN)?;
    let fill = |old: &Int64Array, base: Option<i64>, add_index: bool| -> Int64Array {
        (0..old.len())
            .map(|i| {
                if old.is_valid(i) {
                    Some(old.value(i))
                } else {
                    base.map(|b| if add_index { b + index.value(i) } else { b })
                }
            })
            .collect()
    };
    let new_ids: ArrayRef = Arc::new(fill(long(id)?, add.base_row_id, true));
    let new_versions: ArrayRef =
        Arc::new(fill(long(version)?, add.default_row_commit_version, false));
    let schema = batch.schema();
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        let name = field.name();
        if name == ROW_INDEX_COLUMN || name == FILE_PATH_COLUMN {
            continue;
        }
        fields.push(field.clone());
        columns.push(if name == id {
            new_ids.clone()
        } else if name == version {
            new_versions.clone()
        } else {
            column.clone()
        });
    }
    RecordBatch::try_new(Arc::new(arrow_schema::Schema::new(fields)), columns)
        .map_err(|e| Error::Internal(format!("row tracking: {e}")))
}

/// Delta Spark's OPTIMIZE metrics over the added and removed files.
fn compact_metrics(removed: &[Add], added: &[Add]) -> Map<String, Value> {
    let mut sizes: Vec<u64> = added
        .iter()
        .map(|a| u64::try_from(a.size).unwrap_or(0))
        .collect();
    sizes.sort_unstable();
    let at = |q: usize| -> u64 {
        if sizes.is_empty() {
            return 0;
        }
        let i = ((sizes.len() - 1) * q) / 100;
        sizes.get(i).copied().unwrap_or(0)
    };
    let s = |v: u64| Value::String(v.to_string());
    let bytes = |files: &[Add]| -> u64 {
        files
            .iter()
            .map(|a| u64::try_from(a.size).unwrap_or(0))
            .sum()
    };
    let dvs = removed
        .iter()
        .filter(|a| a.deletion_vector.is_some())
        .count() as u64;
    let mut m = Map::new();
    m.insert("numAddedFiles".into(), s(added.len() as u64));
    m.insert("numRemovedFiles".into(), s(removed.len() as u64));
    m.insert("numAddedBytes".into(), s(bytes(added)));
    m.insert("numRemovedBytes".into(), s(bytes(removed)));
    m.insert("minFileSize".into(), s(at(0)));
    m.insert("p25FileSize".into(), s(at(25)));
    m.insert("p50FileSize".into(), s(at(50)));
    m.insert("p75FileSize".into(), s(at(75)));
    m.insert("maxFileSize".into(), s(at(100)));
    m.insert("numDeletionVectorsRemoved".into(), s(dvs));
    m
}

/// The swap, as the transaction sees it.
struct CompactChanges {
    removed: Vec<Add>,
    added: Vec<Add>,
    now: i64,
}

impl Changes for CompactChanges {
    async fn actions(&mut self, _store: &TableStore) -> Result<Vec<Action>> {
        let mut actions: Vec<Action> = self
            .removed
            .iter()
            .map(|a| Action::Remove(Box::new(Remove::of_add(a, self.now, false))))
            .collect();
        actions.extend(self.added.iter().cloned().map(|a| Action::Add(Box::new(a))));
        Ok(actions)
    }

    fn metrics(&self) -> Map<String, Value> {
        compact_metrics(&self.removed, &self.added)
    }

    fn reads(&self) -> (ReadSet, BTreeMap<String, FileChange>) {
        let paths: BTreeSet<String> = self.removed.iter().map(|a| a.path.clone()).collect();
        (
            ReadSet::Files(paths.clone()),
            paths
                .into_iter()
                .map(|p| (p, FileChange::WholeFile))
                .collect(),
        )
    }
}

/// Commit a plan whose bins were rewritten into `added` (all bins' new
/// files). Nothing is committed for an empty plan. When the commit fails
/// (a concurrent commit changed a rewritten file), the new files are removed.
pub async fn commit(
    snapshot: &Snapshot,
    plan: &CompactPlan,
    added: Vec<Add>,
    options: &CompactOptions,
) -> Result<CompactMetrics> {
    let store = snapshot.store();
    let new_paths: Vec<String> = added.iter().map(|a| normalize_path(&a.path)).collect();
    if plan.version != snapshot.version() {
        let _ = remove_files(store, &new_paths).await;
        return Err(Error::InvalidArgument(format!(
            "the compaction was planned on version {} but is committed on version {}",
            plan.version,
            snapshot.version()
        )));
    }
    let removed: Vec<Add> = plan.bins.iter().flat_map(|b| b.files.clone()).collect();
    if removed.is_empty() {
        return Ok(CompactMetrics::default());
    }
    let mut changes = CompactChanges {
        removed,
        added,
        now: now_ms(),
    };
    let mut parameters = Map::new();
    parameters.insert("predicate".into(), json!(predicate_text(options)));
    match plan.mode {
        CompactMode::Purge => {
            parameters.insert("applyPurge".into(), json!(true));
        }
        CompactMode::Optimize => {
            parameters.insert("zOrderBy".into(), json!("[]"));
            let cluster_by = plan
                .clustering
                .as_ref()
                .map_or_else(Vec::new, |c| c.names());
            parameters.insert("clusterBy".into(), json!(json!(cluster_by).to_string()));
            parameters.insert("auto".into(), json!(false));
            // Delta Spark records `isFull` only with clustering columns.
            if let Some(run) = plan.clustering.as_ref().filter(|r| !r.columns.is_empty()) {
                parameters.insert("isFull".into(), json!(run.full));
            }
        }
    }
    let committed = async {
        let mut txn = Transaction::new(snapshot, plan.mode.operation())?
            .with_parameters(parameters)
            .with_max_attempts(options.max_attempts)
            .with_engine_info(options.engine_info.clone());
        if let Some(m) = &plan.metadata {
            txn = txn.with_metadata(m.clone());
        }
        txn.commit(&mut changes).await
    }
    .await;
    match committed {
        Ok(outcome) if outcome.version.is_some() => Ok(CompactMetrics {
            version: outcome.version,
            operation_metrics: changes.metrics(),
            attempts: outcome.attempts,
            checkpointed: outcome.checkpointed,
            checkpoint_error: outcome.checkpoint_error,
            iceberg_error: outcome.iceberg_error,
        }),
        other => {
            let _ = super::files::remove_uncommitted(store, &new_paths).await;
            match other {
                Ok(_) => Err(Error::Internal("the compaction committed nothing".into())),
                Err(e) => Err(e),
            }
        }
    }
}

/// `operationParameters.predicate`: the partition filter as a JSON list.
fn predicate_text(options: &CompactOptions) -> String {
    match &options.partition_filter {
        None => "[]".into(),
        Some(p) => json!([p]).to_string(),
    }
}

/// Files of a bin read ahead of the writer.
const READ_AHEAD: usize = 2;

/// Plan, rewrite and commit, in this process: up to
/// [`crate::io::num_threads`] bins rewritten at once (each reads its files a
/// few ahead and encodes its own files, one row group buffered apiece), their
/// files committed in the order of the bins. `progress(bins done, bins)` is
/// called as bins finish. If a bin fails, no bin starts after it, those
/// already running finish, and every file written is removed.
pub async fn compact(
    snapshot: &Snapshot,
    mode: CompactMode,
    options: &CompactOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<CompactMetrics> {
    let plan = plan(snapshot, mode, options)?;
    let tasks = plan.tasks(snapshot);
    let total = tasks.len();
    let store = snapshot.store();
    let failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    use futures::StreamExt;
    let mut rewrites = futures::stream::iter(tasks)
        .map(|task| {
            let (store, failed) = (store.clone(), failed.clone());
            // Started when `buffered` takes it (so bins run at once); one
            // taken after a failure writes nothing.
            crate::io::spawn_now(async move {
                if failed.load(std::sync::atomic::Ordering::SeqCst) {
                    return Ok(None);
                }
                task.rewrite(&store).await.map(Some)
            })
        })
        .buffered(crate::io::num_threads());
    let mut added = Vec::new();
    let mut failure = None;
    let mut done = 0;
    while let Some(rewritten) = rewrites.next().await {
        match rewritten.and_then(|r| r) {
            Ok(Some(adds)) => {
                added.extend(adds);
                done += 1;
                progress(done, total);
            }
            Ok(None) => {}
            Err(e) => {
                failed.store(true, std::sync::atomic::Ordering::SeqCst);
                failure.get_or_insert(e);
            }
        }
    }
    if let Some(e) = failure {
        let paths: Vec<String> = added.iter().map(|a| normalize_path(&a.path)).collect();
        let _ = remove_files(store, &paths).await;
        return Err(e);
    }
    commit(snapshot, &plan, added, options).await
}
