//! Snapshots: compose `io` (list, fetch) with `log` (segment, replay) into the
//! state of a table at one version.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Int64Builder, StringBuilder};
use arrow_array::Array;
use arrow_array::{ArrayRef, RecordBatch, StructArray};
use arrow_schema::{Field, Fields, Schema};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use roaring::RoaringTreemap;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::io::TableStore;
use crate::log::actions::{
    self, Action, Add, DomainMetadata, Metadata, Protocol, RecordCount, Remove, Txn,
};
use crate::log::checkpoint::{self, AddColumns, CheckpointData};
use crate::log::features;
use crate::log::parallel::map_ranges;
use crate::log::path::normalize_path;
use crate::log::path::{LogPath, LOG_DIR};
use crate::log::replay::Replayer;
use crate::log::schema::{self, ColumnMappingMode, StructType};
use crate::log::segment::{build_segment, LastCheckpoint, LogFile, LogSegment};
use crate::table::dv;

/// Commit files fetched at once.
const COMMIT_READ_CONCURRENCY: usize = 16;

/// Refuse tables that need what we do not implement, naming the reader
/// version or feature (the rules live in [`crate::log::features`]).
pub fn check_protocol(protocol: &Protocol) -> Result<()> {
    features::check_read(protocol)
}

/// `numRecords` and `tightBounds` of a stats string (absent stats: both unknown).
fn record_count(stats: Option<&str>, file: &str) -> Result<RecordCount> {
    match stats {
        Some(s) if !s.is_empty() => RecordCount::parse(s, file),
        _ => Ok(RecordCount::default()),
    }
}

/// A live data file with the fields a reader needs.
#[derive(Debug, Clone)]
pub struct LiveFile {
    pub add: Add,
    /// `add.path` URL-decoded (relative to the table root, or an absolute URI).
    pub path: String,
    pub num_records: Option<i64>,
    pub tight_bounds: Option<bool>,
}

impl LiveFile {
    pub(crate) fn new(add: Add) -> Result<Self> {
        let counts = record_count(add.stats.as_deref(), &add.path)?;
        Ok(LiveFile {
            path: normalize_path(&add.path),
            num_records: counts.num_records,
            tight_bounds: counts.tight_bounds,
            add,
        })
    }

    /// Rows a reader sees: numRecords − DV cardinality.
    pub fn logical_rows(&self) -> Option<i64> {
        let deleted = self
            .add
            .deletion_vector
            .as_ref()
            .map_or(0, |d| d.cardinality() as i64);
        self.num_records.map(|n| n - deleted)
    }
}

/// A live file of a snapshot where the snapshot keeps it: parsed from a
/// commit, or a row of a checkpoint's columnar adds.
enum FileRef<'a> {
    Commit(&'a LiveFile),
    Checkpoint(&'a AddColumns, usize),
}

/// The adds of commits as [`LiveFile`]s, their paths decoded and stats
/// parsed in ranges on up to `threads` threads; the first error in order.
fn live_files(adds: Vec<Add>, threads: usize) -> Result<Vec<LiveFile>> {
    let parsed = map_ranges(adds.len(), threads, |range| {
        adds.get(range)
            .unwrap_or_default()
            .iter()
            .map(|a| {
                Ok((
                    normalize_path(&a.path),
                    record_count(a.stats.as_deref(), &a.path)?,
                ))
            })
            .collect::<Result<Vec<(String, RecordCount)>>>()
    })?;
    let mut out = Vec::with_capacity(adds.len());
    let mut adds = adds.into_iter();
    for part in parsed {
        for ((path, counts), add) in part?.into_iter().zip(adds.by_ref()) {
            out.push(LiveFile {
                path,
                num_records: counts.num_records,
                tight_bounds: counts.tight_bounds,
                add,
            });
        }
    }
    Ok(out)
}

/// The state of a table at one version.
#[derive(Debug, Clone)]
pub struct Snapshot {
    store: TableStore,
    segment: LogSegment,
    version: u64,
    protocol: Protocol,
    metadata: Metadata,
    schema: StructType,
    column_mapping: ColumnMappingMode,
    /// Live files added by commits after the checkpoint (newest first).
    commit_files: Vec<LiveFile>,
    /// The checkpoint's `add` rows, columnar, with the indexes of the live ones.
    checkpoint_adds: Vec<(AddColumns, Vec<usize>)>,
    tombstones: Vec<Remove>,
    txns: HashMap<String, Txn>,
    /// Live (not removed) domain metadata, by domain.
    domains: HashMap<String, DomainMetadata>,
    /// Timestamp (ms) of this version's commit.
    timestamp: Option<i64>,
    /// `inCommitTimestamp` of this version's commit, when the commit was read
    /// (not when the snapshot starts at a checkpoint of this version).
    in_commit_timestamp: Option<i64>,
}

async fn read_last_checkpoint(store: &TableStore) -> Result<Option<LastCheckpoint>> {
    match store
        .get(&store.path(&LogPath::LastCheckpoint.relative_path()))
        .await
    {
        Ok(bytes) => LastCheckpoint::parse(&bytes).map(Some),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// List `_delta_log` as log files.
pub async fn list_log(store: &TableStore, offset: Option<&str>) -> Result<Vec<LogFile>> {
    let metas = store.list_log(offset).await?;
    Ok(metas
        .into_iter()
        .filter_map(|m| {
            let f = LogFile::parse(
                m.location.filename()?,
                m.size,
                m.last_modified.timestamp_millis(),
            )?;
            // Only files directly in _delta_log (not _sidecars/…).
            m.location
                .as_ref()
                .ends_with(&f.relative_path())
                .then_some(f)
        })
        .collect())
}

impl Snapshot {
    /// Load the snapshot at `version` (latest when `None`).
    pub async fn load(store: TableStore, version: Option<u64>) -> Result<Snapshot> {
        let hint = read_last_checkpoint(&store).await?;
        let mut files = Vec::new();
        if let (Some(h), None) = (&hint, version) {
            // Start listing just before the hinted checkpoint.
            let offset = LogPath::version_prefix(h.version.saturating_sub(1));
            files = list_log(&store, Some(&offset)).await?;
            if !files
                .iter()
                .any(|f| f.version == h.version && f.path.is_checkpoint())
            {
                files.clear();
            }
        }
        if files.is_empty() {
            files = list_log(&store, None).await?;
        }
        if files.is_empty() {
            let url = store.url();
            return Err(Error::NotATable(if store.root_exists().await? {
                format!("{url} is not a Delta table: it has no _delta_log with commits in it")
            } else {
                format!("no Delta table at {url}: the path does not exist")
            }));
        }
        let segment = build_segment(files, hint.as_ref(), version)?;
        Self::from_segment(store, segment, hint).await
    }

    async fn from_segment(
        store: TableStore,
        segment: LogSegment,
        hint: Option<LastCheckpoint>,
    ) -> Result<Snapshot> {
        // Commits newest first, fetched concurrently (order kept).
        let commit_logs: Vec<LogFile> = segment.commits.iter().rev().cloned().collect();
        let store_ref = &store;
        let commits = futures::stream::iter(commit_logs.into_iter().map(|f| async move {
            let name = f.relative_path();
            let bytes = store_ref.get(&store_ref.path(&name)).await?;
            let actions = actions::parse_commit(&bytes, &name)?;
            Ok::<_, Error>((f, name, actions))
        }))
        .buffered(COMMIT_READ_CONCURRENCY)
        .try_collect::<Vec<_>>();
        // The checkpoint is fetched and decoded (on the blocking pool) while the
        // commits are fetched and parsed.
        let checkpoint = async {
            if segment.checkpoint.is_empty() {
                Ok(None)
            } else {
                read_checkpoint(store_ref, &segment.checkpoint)
                    .await
                    .map(Some)
            }
        };
        let (commits, checkpoint) = futures::join!(commits, checkpoint);
        let mut replayer = Replayer::new();
        let mut timestamp = None;
        let mut ict = None;
        for (file, name, actions) in commits? {
            if file.version == segment.version && file.is_commit() {
                ict = actions::in_commit_timestamp(&actions);
                timestamp = Some(ict.unwrap_or(file.last_modified));
            }
            let single = file.is_commit();
            replayer.apply_commit(actions, &name, single)?;
        }

        let mut checkpoint_adds = Vec::new();
        if let Some(data) = checkpoint? {
            if let (Some(h), Some(cv)) = (&hint, segment.checkpoint_version) {
                let name = segment
                    .checkpoint
                    .first()
                    .map(LogFile::relative_path)
                    .unwrap_or_else(|| LOG_DIR.to_string());
                data.check_hint(h, cv, &name)?;
            }
            for adds in data.adds {
                let live = replayer.checkpoint_live_rows(&adds, crate::io::num_threads())?;
                checkpoint_adds.push((adds, live));
            }
            replayer.apply_checkpoint(data.others);
        }
        if timestamp.is_none() {
            timestamp = segment.last_commit.as_ref().map(|f| f.last_modified);
        }

        let result = replayer.finish();
        let protocol = result.protocol.ok_or_else(|| Error::CorruptLog {
            file: format!("{LOG_DIR} (version {})", segment.version),
            detail: "no protocol action".to_string(),
        })?;
        check_protocol(&protocol)?;
        let metadata = result.metadata.ok_or_else(|| Error::CorruptLog {
            file: format!("{LOG_DIR} (version {})", segment.version),
            detail: "no metaData action".to_string(),
        })?;
        let schema = StructType::parse(&metadata.schema_string)?;
        features::check_type_changes(&protocol, &schema)?;
        let column_mapping = schema::column_mapping_mode(&metadata.configuration)?;
        let commit_files = live_files(result.files, crate::io::num_threads())?;
        Ok(Snapshot {
            version: segment.version,
            segment,
            store,
            protocol,
            metadata,
            schema,
            column_mapping,
            commit_files,
            checkpoint_adds,
            tombstones: result.tombstones,
            txns: result.txns,
            domains: result.domains,
            timestamp,
            in_commit_timestamp: ict,
        })
    }

    pub fn store(&self) -> &TableStore {
        &self.store
    }
    pub fn version(&self) -> u64 {
        self.version
    }
    pub fn protocol(&self) -> &Protocol {
        &self.protocol
    }
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    pub fn schema(&self) -> &StructType {
        &self.schema
    }
    pub fn column_mapping(&self) -> ColumnMappingMode {
        self.column_mapping
    }
    /// Number of live files.
    pub fn num_files(&self) -> usize {
        self.commit_files.len()
            + self
                .checkpoint_adds
                .iter()
                .map(|(_, live)| live.len())
                .sum::<usize>()
    }

    /// All live files, materialized (commit files first, then checkpoint
    /// rows); ranges of checkpoint rows (their stats parsed) on up to
    /// [`crate::io::num_threads`] threads, the first error in file order.
    pub fn files(&self) -> Result<Vec<LiveFile>> {
        let parts = map_ranges(self.num_files(), crate::io::num_threads(), |range| {
            let mut out = Vec::with_capacity(range.len());
            self.each_file_in(range, |file| {
                out.push(match file {
                    FileRef::Commit(f) => f.clone(),
                    FileRef::Checkpoint(adds, i) => LiveFile::new(adds.add(i)?)?,
                });
                Ok(())
            })?;
            Ok::<_, Error>(out)
        })?;
        let mut out = Vec::with_capacity(self.num_files());
        for part in parts {
            out.extend(part?);
        }
        Ok(out)
    }

    /// Paths (URL-decoded) of the live files, in [`Snapshot::files`] order,
    /// without materializing the files.
    pub fn live_paths(&self) -> Vec<String> {
        let mut out = Vec::with_capacity(self.num_files());
        out.extend(self.commit_files.iter().map(|f| f.path.clone()));
        for (adds, live) in &self.checkpoint_adds {
            out.extend(live.iter().map(|&row| normalize_path(adds.raw_path(row))));
        }
        out
    }

    /// Path (URL-decoded) of live file `index` in [`Snapshot::files`] order.
    pub fn file_path(&self, index: usize) -> Option<String> {
        if let Some(f) = self.commit_files.get(index) {
            return Some(f.path.clone());
        }
        let mut i = index - self.commit_files.len();
        for (adds, live) in &self.checkpoint_adds {
            if let Some(&row) = live.get(i) {
                return Some(normalize_path(adds.raw_path(row)));
            }
            i -= live.len();
        }
        None
    }

    /// DV descriptors of live files, with their index in [`Snapshot::files`] order.
    pub fn dv_descriptors(&self) -> Result<Vec<(usize, crate::DeletionVectorDescriptor)>> {
        let mut out: Vec<(usize, crate::DeletionVectorDescriptor)> = self
            .commit_files
            .iter()
            .enumerate()
            .filter_map(|(i, f)| f.add.deletion_vector.clone().map(|d| (i, d)))
            .collect();
        let mut base = self.commit_files.len();
        for (adds, live) in &self.checkpoint_adds {
            for (k, &i) in live.iter().enumerate() {
                if let Some(d) = adds.descriptor(i)? {
                    out.push((base + k, d));
                }
            }
            base += live.len();
        }
        Ok(out)
    }

    pub fn tombstones(&self) -> &[Remove] {
        &self.tombstones
    }
    pub fn txns(&self) -> &HashMap<String, Txn> {
        &self.txns
    }
    /// The latest version of application `app_id`'s transactions (`txn`
    /// actions) in this snapshot; None when it committed none (Delta Spark's
    /// `txnVersion`, deltalake's `transaction_version`).
    pub fn transaction_version(&self, app_id: &str) -> Option<i64> {
        self.txns.get(app_id).map(|t| t.version)
    }
    /// Live `domainMetadata` by domain (removed domains are gone).
    pub fn domain_metadata(&self) -> &HashMap<String, DomainMetadata> {
        &self.domains
    }
    pub fn segment(&self) -> &LogSegment {
        &self.segment
    }
    /// Commit timestamp of this version (in-commit timestamp when the table
    /// has them, else the commit file's modification time), ms since epoch.
    pub fn timestamp(&self) -> Option<i64> {
        self.timestamp
    }
    /// `inCommitTimestamp` of this version's commit; `None` when it has none
    /// or the snapshot did not read it (it starts at a checkpoint of this
    /// version).
    pub fn in_commit_timestamp(&self) -> Option<i64> {
        self.in_commit_timestamp
    }

    /// Logical rows (Σ numRecords − Σ cardinality), if every file has stats.
    pub fn logical_rows(&self) -> Option<i64> {
        let mut total = 0i64;
        for f in &self.commit_files {
            total += f.logical_rows()?;
        }
        for (adds, live) in &self.checkpoint_adds {
            for &i in live {
                let (num_records, _) = adds.record_count(i).ok()?;
                let deleted = adds
                    .descriptor(i)
                    .ok()?
                    .map_or(0, |d| d.cardinality() as i64);
                total += num_records? - deleted;
            }
        }
        Some(total)
    }

    /// The table's Arrow schema (logical names).
    pub fn arrow_schema(&self) -> Result<Schema> {
        self.schema.to_arrow(ColumnMappingMode::None, false)
    }

    /// Load the DVs of all live files that have one, keyed by position in
    /// [`Snapshot::files`]. One GET per DV file (ranges coalesced).
    pub async fn deletion_vectors(&self) -> Result<Vec<(usize, RoaringTreemap)>> {
        let with_dv = self.dv_descriptors()?;
        let descriptors: Vec<&crate::DeletionVectorDescriptor> =
            with_dv.iter().map(|(_, d)| d).collect();
        let maps = dv::load_many(&self.store, &descriptors).await?;
        Ok(with_dv.iter().map(|(i, _)| *i).zip(maps).collect())
    }

    /// [`Snapshot::deletion_vectors`], each DV kept as its checked serialized
    /// bytes instead of a bitmap.
    pub async fn deletion_vectors_serialized(
        &self,
    ) -> Result<Vec<(usize, crate::format::file::SerializedDv)>> {
        let with_dv = self.dv_descriptors()?;
        let descriptors: Vec<&crate::DeletionVectorDescriptor> =
            with_dv.iter().map(|(_, d)| d).collect();
        let loaded = dv::load_many_serialized(&self.store, &descriptors).await?;
        Ok(with_dv.iter().map(|(i, _)| *i).zip(loaded).collect())
    }

    /// The live files in `range` of [`Snapshot::files`] order, each as a
    /// [`FileRef`] (nothing materialized), in order.
    fn each_file_in(
        &self,
        range: std::ops::Range<usize>,
        mut f: impl FnMut(FileRef<'_>) -> Result<()>,
    ) -> Result<()> {
        let mut base = 0;
        let commits = self.commit_files.len();
        for file in self
            .commit_files
            .iter()
            .take(range.end.min(commits))
            .skip(range.start)
        {
            f(FileRef::Commit(file))?;
        }
        base += commits;
        for (adds, live) in &self.checkpoint_adds {
            let (from, to) = (range.start.max(base), range.end.min(base + live.len()));
            if from < to {
                for &i in live.iter().take(to - base).skip(from - base) {
                    f(FileRef::Checkpoint(adds, i))?;
                }
            }
            base += live.len();
        }
        Ok(())
    }

    /// The columns of [`Snapshot::files_batch`] but `partition` for the live
    /// files in `range`, and their partition values when `partitioned`.
    #[allow(clippy::type_complexity)]
    fn files_columns(
        &self,
        range: std::ops::Range<usize>,
        partitioned: bool,
    ) -> Result<(Vec<ArrayRef>, Vec<HashMap<String, Option<String>>>)> {
        let n = range.len();
        let mut path = StringBuilder::with_capacity(n, n * 64);
        let mut size = Int64Builder::with_capacity(n);
        let mut mtime = Int64Builder::with_capacity(n);
        let mut data_change = BooleanBuilder::with_capacity(n);
        let mut num_records = Int64Builder::with_capacity(n);
        let mut logical = Int64Builder::with_capacity(n);
        let mut tight = BooleanBuilder::with_capacity(n);
        let mut dv_type = StringBuilder::new();
        let mut dv_path = StringBuilder::new();
        let mut dv_offset = Int64Builder::with_capacity(n);
        let mut dv_size = Int64Builder::with_capacity(n);
        let mut dv_card = Int64Builder::with_capacity(n);
        let mut dv_id = StringBuilder::new();
        let mut partition_maps: Vec<HashMap<String, Option<String>>> = Vec::new();
        let mut push_dv = |d: Option<&crate::DeletionVectorDescriptor>| match d {
            Some(d) => {
                dv_type.append_value(d.storage_type().code());
                dv_path.append_value(d.path_or_inline_dv());
                dv_offset.append_option(d.offset().map(i64::from));
                dv_size.append_value(i64::from(d.size_in_bytes()));
                dv_card.append_value(d.cardinality() as i64);
                dv_id.append_value(d.unique_id());
            }
            None => {
                dv_type.append_null();
                dv_path.append_null();
                dv_offset.append_null();
                dv_size.append_null();
                dv_card.append_null();
                dv_id.append_null();
            }
        };
        self.each_file_in(range, |file| {
            match file {
                FileRef::Commit(f) => {
                    path.append_value(&f.path);
                    size.append_value(f.add.size);
                    mtime.append_value(f.add.modification_time);
                    data_change.append_value(f.add.data_change);
                    num_records.append_option(f.num_records);
                    logical.append_option(f.logical_rows());
                    tight.append_value(f.tight_bounds.unwrap_or(true));
                    push_dv(f.add.deletion_vector.as_ref());
                    if partitioned {
                        partition_maps.push(f.add.partition_values.clone());
                    }
                }
                FileRef::Checkpoint(adds, i) => {
                    let raw = adds.raw_path(i);
                    if raw.contains('%') {
                        path.append_value(normalize_path(raw));
                    } else {
                        path.append_value(raw);
                    }
                    size.append_value(adds.size(i));
                    mtime.append_value(adds.modification_time(i));
                    data_change.append_value(adds.data_change(i));
                    let (records, tight_bounds) = adds.record_count(i)?;
                    let descriptor = adds.descriptor(i)?;
                    let deleted = descriptor.as_ref().map_or(0, |d| d.cardinality() as i64);
                    num_records.append_option(records);
                    logical.append_option(records.map(|r| r - deleted));
                    tight.append_value(tight_bounds.unwrap_or(true));
                    push_dv(descriptor.as_ref());
                    if partitioned {
                        partition_maps.push(adds.partition_values(i));
                    }
                }
            }
            Ok(())
        })?;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(path.finish()),
            Arc::new(size.finish()),
            Arc::new(mtime.finish()),
            Arc::new(data_change.finish()),
            Arc::new(num_records.finish()),
            Arc::new(logical.finish()),
            Arc::new(tight.finish()),
            Arc::new(dv_type.finish()),
            Arc::new(dv_path.finish()),
            Arc::new(dv_offset.finish()),
            Arc::new(dv_size.finish()),
            Arc::new(dv_card.finish()),
            Arc::new(dv_id.finish()),
        ];
        Ok((columns, partition_maps))
    }

    /// The live files as one Arrow batch (column names as deltalake's
    /// `get_add_actions`): path, size_bytes, modification_time, data_change,
    /// num_records, logical_rows, tight_bounds, the DV descriptor fields, and
    /// `partition` (a struct of typed columns, logical names). The stats
    /// (numRecords, tightBounds) and DV descriptors of ranges of files are
    /// parsed on up to [`crate::io::num_threads`] threads.
    pub fn files_batch(&self) -> Result<RecordBatch> {
        self.files_batch_on(crate::io::num_threads())
    }

    /// [`Snapshot::files_batch`] on up to `threads` threads (the same batch
    /// whatever the number).
    pub fn files_batch_on(&self, threads: usize) -> Result<RecordBatch> {
        let batches = self.files_batches_on(threads)?;
        match batches.as_slice() {
            [one] => Ok(one.clone()),
            _ => {
                let schema = batches
                    .first()
                    .map(RecordBatch::schema)
                    .ok_or_else(|| Error::Internal("no files batch".into()))?;
                arrow_select::concat::concat_batches(&schema, &batches)
                    .map_err(|e| Error::Schema(e.to_string()))
            }
        }
    }

    /// [`Snapshot::files_batch`] as consecutive batches, one per range of
    /// files parsed on a thread of its own (up to `threads`; one batch when
    /// 1): nothing is copied to join them.
    pub fn files_batches_on(&self, threads: usize) -> Result<Vec<RecordBatch>> {
        let partitioned = !self.metadata.partition_columns.is_empty();
        map_ranges(self.num_files(), threads, |range| {
            let (columns, maps) = self.files_columns(range.clone(), partitioned)?;
            self.files_batch_of(range.len(), columns, &maps, partitioned)
        })?
        .into_iter()
        .collect()
    }

    /// One batch of [`Snapshot::files_batch`] from the columns
    /// [`Snapshot::files_columns`] built for `n` files.
    fn files_batch_of(
        &self,
        n: usize,
        columns: Vec<ArrayRef>,
        partition_maps: &[HashMap<String, Option<String>>],
        partitioned: bool,
    ) -> Result<RecordBatch> {
        let mut joined = columns.into_iter();
        let mut next = || {
            joined
                .next()
                .ok_or_else(|| Error::Internal("a files_batch column is missing".into()))
        };
        let values: Vec<&HashMap<String, Option<String>>> = partition_maps.iter().collect();
        let partitions = if partitioned {
            schema::partition_arrays(
                &self.schema,
                &self.metadata.partition_columns,
                self.column_mapping,
                &values,
            )?
        } else {
            Vec::new()
        };
        let (pfields, parrays): (Vec<Field>, Vec<ArrayRef>) = partitions.into_iter().unzip();
        let partition_struct: ArrayRef = if pfields.is_empty() {
            Arc::new(StructArray::new_empty_fields(n, None))
        } else {
            Arc::new(
                StructArray::try_new(Fields::from(pfields), parrays, None)
                    .map_err(|e| Error::Schema(e.to_string()))?,
            )
        };
        let columns: Vec<(&str, ArrayRef, bool)> = vec![
            ("path", next()?, false),
            ("size_bytes", next()?, false),
            ("modification_time", next()?, false),
            ("data_change", next()?, false),
            ("num_records", next()?, true),
            ("logical_rows", next()?, true),
            ("tight_bounds", next()?, false),
            ("dv_storage_type", next()?, true),
            ("dv_path_or_inline_dv", next()?, true),
            ("dv_offset", next()?, true),
            ("dv_size_in_bytes", next()?, true),
            ("dv_cardinality", next()?, true),
            ("dv_unique_id", next()?, true),
            ("partition", partition_struct, false),
        ];
        let fields: Vec<Field> = columns
            .iter()
            .map(|(name, array, nullable)| Field::new(*name, array.data_type().clone(), *nullable))
            .collect();
        RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            columns.into_iter().map(|(_, a, _)| a).collect(),
        )
        .map_err(|e| Error::Schema(e.to_string()))
    }

    /// The table's history: commitInfo of each commit (newest first), with
    /// `version` and `timestamp` filled in, `commitFileModificationTime`, and
    /// `commitTimestamp`: Delta Spark's commit time (the in-commit timestamp,
    /// else the file time made [`monotonic`] over the whole log). Reads every
    /// listed commit file.
    pub async fn history(&self, limit: Option<usize>) -> Result<Vec<Value>> {
        let files = list_log(&self.store, None).await?;
        let mut commits: Vec<LogFile> = files
            .into_iter()
            .filter(|f| f.is_commit() && f.version <= self.version)
            .collect();
        commits.sort_by_key(|f| f.version);
        // Delta Spark's commit time of each commit, oldest first (see
        // `commit_timestamps`): the file times made monotonic over the log.
        let times = monotonic(commits.iter().map(|f| f.last_modified));
        let mut commits: Vec<(LogFile, i64)> = commits.into_iter().zip(times).collect();
        commits.reverse();
        if let Some(l) = limit {
            commits.truncate(l);
        }
        let store = &self.store;
        futures::stream::iter(commits.into_iter().map(|(f, file_time)| async move {
            let name = f.relative_path();
            let bytes = store.get(&store.path(&name)).await?;
            let actions = actions::parse_commit(&bytes, &name)?;
            let mut info = actions
                .into_iter()
                .find_map(|a| match a {
                    Action::CommitInfo(v) => Some(v),
                    _ => None,
                })
                .unwrap_or_else(|| Value::Object(Default::default()));
            if let Value::Object(map) = &mut info {
                map.insert("version".to_string(), Value::from(f.version));
                map.entry("timestamp")
                    .or_insert(Value::from(f.last_modified));
                // What Delta Spark's history shows as the commit time (without
                // in-commit timestamps): the commit file's modification time.
                map.insert(
                    "commitFileModificationTime".to_string(),
                    Value::from(f.last_modified),
                );
                // Delta Spark's commit time: the in-commit timestamp, else the
                // file time made monotonic (as `commit_timestamps`).
                let commit_time = map
                    .get("inCommitTimestamp")
                    .and_then(Value::as_i64)
                    .unwrap_or(file_time);
                map.insert("commitTimestamp".to_string(), Value::from(commit_time));
            }
            Ok::<_, Error>(info)
        }))
        .buffered(COMMIT_READ_CONCURRENCY)
        .try_collect()
        .await
    }

    /// The latest version whose commit timestamp is at or before `timestamp_ms`.
    /// Uses in-commit timestamps where the table has them, else file
    /// modification times made monotonic (as Delta does).
    pub async fn version_at(store: &TableStore, timestamp_ms: i64) -> Result<u64> {
        let times = Self::commit_timestamps(store).await?;
        let found = times
            .iter()
            .filter(|(_, t)| *t <= timestamp_ms)
            .map(|(v, _)| *v)
            .max();
        found.ok_or_else(|| {
            Error::VersionNotFound(format!(
                "no commit at or before timestamp {timestamp_ms} ms (the earliest is {} ms)",
                times.first().map_or(0, |(_, t)| *t)
            ))
        })
    }

    /// Every listed commit's (version, timestamp in ms), oldest first: the
    /// in-commit timestamp where the commit has one, else the commit file's
    /// modification time made monotonic (each at least 1 ms after the one
    /// before), as Delta Spark's history and time travel use them.
    pub async fn commit_timestamps(store: &TableStore) -> Result<Vec<(u64, i64)>> {
        let mut commits: Vec<LogFile> = list_log(store, None)
            .await?
            .into_iter()
            .filter(LogFile::is_commit)
            .collect();
        commits.sort_by_key(|f| f.version);
        let mut times = monotonic(commits.iter().map(|f| f.last_modified));
        // In-commit timestamps replace the file times. Once a table enables
        // them every later commit has one, so read newest first, in batches,
        // and stop at the first commit without one: a table without them costs
        // one GET here, not one per commit.
        let newest_first: Vec<usize> = (0..commits.len()).rev().collect();
        let (probe, rest) = newest_first.split_at(newest_first.len().min(1));
        'ict: for chunk in std::iter::once(probe).chain(rest.chunks(COMMIT_READ_CONCURRENCY)) {
            let fetched: Vec<Option<i64>> =
                futures::future::try_join_all(chunk.iter().filter_map(|&i| commits.get(i)).map(
                    |f| async move {
                        let name = f.relative_path();
                        let bytes = store.get(&store.path(&name)).await?;
                        Ok::<_, Error>(in_commit_timestamp(&bytes))
                    },
                ))
                .await?;
            for (&i, ict) in chunk.iter().zip(fetched) {
                match (ict, times.get_mut(i)) {
                    (Some(ict), Some(t)) => *t = ict,
                    _ => break 'ict,
                }
            }
        }
        Ok(commits.iter().map(|f| f.version).zip(times).collect())
    }
}

/// Commit file times (oldest commit first) made monotonic as Delta does: each
/// at least 1 ms after the one before.
pub fn monotonic(file_times: impl IntoIterator<Item = i64>) -> Vec<i64> {
    let mut previous = i64::MIN;
    file_times
        .into_iter()
        .map(|t| {
            let ts = t.max(previous.saturating_add(1));
            previous = ts;
            ts
        })
        .collect()
}

/// In-commit timestamp of a commit file: `commitInfo.inCommitTimestamp` of its
/// first action.
fn in_commit_timestamp(bytes: &[u8]) -> Option<i64> {
    let first = bytes.split(|b| *b == b'\n').find(|l| !l.is_empty())?;
    let v: Value = serde_json::from_slice(first).ok()?;
    v.get("commitInfo")?.get("inCommitTimestamp")?.as_i64()
}

/// Fetch a checkpoint (classic single/multi-part, or V2 with sidecars) and
/// decode it on the blocking pool ([`checkpoint::read`] does the decoding).
/// Checkpoint parquet parts at least this big are fetched as `num_threads()`
/// ranges at once (their allocation, page faults and copies spread over the
/// threads) and decoded from the pieces.
const RANGED_CHECKPOINT_BYTES: u64 = 8 << 20;

/// The checkpoint part `f` (listed with its size): one GET, or with several
/// threads and a big parquet part, `threads` ranged GETs at once.
async fn fetch_part(store: &TableStore, f: &LogFile, threads: usize) -> Result<Vec<Bytes>> {
    let path = store.path(&f.relative_path());
    if threads <= 1 || f.size < RANGED_CHECKPOINT_BYTES || f.is_json_checkpoint() {
        return Ok(vec![store.get(&path).await?]);
    }
    let step = f.size.div_ceil(threads as u64);
    let ranges = (0..threads as u64)
        .map(|k| (k * step).min(f.size)..((k + 1) * step).min(f.size))
        .filter(|r| !r.is_empty());
    futures::future::try_join_all(ranges.map(|r| store.get_range(&path, r))).await
}

async fn read_checkpoint(store: &TableStore, files: &[LogFile]) -> Result<CheckpointData> {
    let threads = crate::io::num_threads();
    let fetched: Vec<(String, Vec<Bytes>)> =
        futures::future::try_join_all(files.iter().map(|f| async move {
            Ok::<_, Error>((f.relative_path(), fetch_part(store, f, threads).await?))
        }))
        .await?;
    // The parts (and below, the sidecars) decoded at once on the blocking
    // pool, up to the threads deltadv works with; absorbed in order.
    let parsed: Vec<(Vec<AddColumns>, Vec<Action>)> =
        futures::stream::iter(fetched.into_iter().zip(files).map(|((name, pieces), f)| {
            decode_pieces_blocking(pieces, name, f.is_json_checkpoint())
        }))
        .buffered(threads)
        .try_collect()
        .await?;
    let mut data = CheckpointData::default();
    for (adds, others) in parsed {
        data.absorb(adds, others);
    }
    let sidecars = data.sidecars();
    let fetched: Vec<(String, Bytes)> =
        futures::future::try_join_all(sidecars.iter().map(|p| async move {
            let name = checkpoint::sidecar_location(p)?;
            let bytes = store.get(&store.resolve(&name)?).await?;
            Ok::<_, Error>((name, bytes))
        }))
        .await?;
    let parsed: Vec<(Vec<AddColumns>, Vec<Action>)> = futures::stream::iter(
        fetched
            .into_iter()
            .map(|(name, bytes)| decode_blocking(bytes, name, false)),
    )
    .buffered(threads)
    .try_collect()
    .await?;
    for (adds, others) in parsed {
        data.absorb(adds, others);
    }
    Ok(data)
}

async fn decode_blocking(
    bytes: Bytes,
    name: String,
    json: bool,
) -> Result<(Vec<AddColumns>, Vec<Action>)> {
    let threads = crate::io::num_threads();
    crate::io::spawn_blocking(move || checkpoint::decode(bytes, &name, json, threads)).await?
}

/// [`decode_blocking`] of a part fetched as consecutive pieces.
async fn decode_pieces_blocking(
    mut pieces: Vec<Bytes>,
    name: String,
    json: bool,
) -> Result<(Vec<AddColumns>, Vec<Action>)> {
    if pieces.len() == 1 {
        if let Some(bytes) = pieces.pop() {
            return decode_blocking(bytes, name, json).await;
        }
    }
    let threads = crate::io::num_threads();
    crate::io::spawn_blocking(move || checkpoint::decode_pieces(pieces, &name, threads)).await?
}

#[cfg(test)]
mod monotonic_tests {
    use super::monotonic;

    #[test]
    fn a_later_commit_is_never_earlier() {
        assert_eq!(monotonic([5, 3, 3, 10, 9]), vec![5, 6, 7, 10, 11]);
        assert_eq!(monotonic([]), Vec::<i64>::new());
    }
}
