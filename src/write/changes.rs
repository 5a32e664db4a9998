//! The change stream of UPDATE and MERGE: row-level rewrites with deletion
//! vectors, written by a [`ChangeWriter`] and committed by [`commit_changes`].
//!
//! Both come down to one stream of changed rows. Each row carries the table's
//! columns (its new values), and the data file and physical row index of the
//! target row it replaces (`_file_path`, `_row_index`, null for an insert);
//! on a table that tracks rows, optionally that row's id (`_row_id`, as
//! the scan gives it: else the writer reads it); an optional `_change`
//! column says what happens to it:
//!
//! | `_change`           | the old row (file, index)  | the new values          |
//! |---------------------|----------------------------|-------------------------|
//! | `update` (default)  | marked deleted in its DV   | written to a new file   |
//! | `delete`            | marked deleted in its DV   | dropped                 |
//! | `insert`            | —                          | written to a new file   |
//!
//! A [`ChangeWriter`] consumes such a stream (on a Spark executor, or in
//! the calling process): new rows go straight into the data file writer
//! (laid out as the table: partitions, column mapping, stats), the old
//! rows' indexes are kept per file, and at the end ONE DV file holds the
//! new DVs (old DV | changed rows) of every file the stream touched. What it
//! wrote is a [`PreparedChanges`] (JSON-serializable, for the driver);
//! [`commit_changes`] commits any number of them as one UPDATE or MERGE,
//! through the transaction: concurrent commits that replaced the DV of a
//! file this one changes are rebased when the rows are disjoint, and
//! conflict when they meet (an updated row must not have been touched).
//!
//! [`super::update::update_where`] (UPDATE) and [`super::merge::merge`]
//! (MERGE) produce such streams in this process; on Spark, executors feed
//! [`ChangeTask`]s and the driver calls [`commit_changes`].
//!
//! On a table without deletion vectors (and `allow_copy_on_write`), the
//! touched files are rewritten without their changed rows instead.
//!
//! On a table with the change data feed on (`delta.enableChangeDataFeed`),
//! the writer also writes `cdc` files under `_change_data/`, as Delta Spark
//! does for UPDATE and MERGE: each new row as `update_postimage` or `insert`
//! as it streams by, and at [`ChangeWriter::finish`] the old rows, read back
//! from their files with a selection of just those rows, as
//! `update_preimage` or `delete`. The `cdc` actions travel in
//! [`PreparedChanges`] and are committed with the rest.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};
use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::conflict::{added_row_conflict, FileChange, ReadSet, RebaseFile};
use super::data::rules::IdentitySlot;
use super::data::{remove_files, DataWriter, TableLayout, WriterOptions};
use super::live_files;
use super::row_deletes::{self, DeleteChanges, DeleteOptions, PreparedFile};
use super::transaction::{Changes, Transaction};
use crate::error::{Error, Result};
use crate::expr::ValueExpr;
use crate::io::TableStore;
use crate::log::actions::{Action, Add, Cdc};
use crate::log::cdf::{self, ChangeType};
use crate::log::features;
use crate::log::path::normalize_path;
use crate::scan::{
    self, DeletedRows, ScanSpec, FILE_PATH_COLUMN, ROW_COMMIT_VERSION_COLUMN, ROW_ID_COLUMN,
    ROW_INDEX_COLUMN,
};
use crate::table::snapshot::Snapshot;

/// The optional column of a change stream saying what a row does.
pub const CHANGE_COLUMN: &str = "_change";

/// The operation a change stream is committed as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DmlOperation {
    Update,
    Merge,
}

impl DmlOperation {
    /// The `commitInfo.operation` Delta Spark writes.
    pub fn name(self) -> &'static str {
        match self {
            DmlOperation::Update => "UPDATE",
            DmlOperation::Merge => "MERGE",
        }
    }
}

/// What one row of a change stream does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowChange {
    Update,
    Delete,
    Insert,
}

/// What a [`ChangeWriter`] wrote, for the commit.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PreparedChanges {
    /// The touched files: the new DV of each (written in one DV file).
    pub files: Vec<PreparedFile>,
    /// The new data files.
    pub adds: Vec<Add>,
    /// Rows replaced by new versions.
    pub updated: u64,
    /// Rows deleted without a new version.
    pub deleted: u64,
    /// Rows inserted.
    pub inserted: u64,
    /// The change data files written (tables with the change data feed on).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cdc: Vec<Cdc>,
    /// Identity columns that handed out values: (column, new high-water
    /// mark), committed in the table's metadata.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub identity_high_water_marks: Vec<(String, i64)>,
    /// The materialized row tracking columns (row id, row commit version)
    /// the new rows were written with, on a table that tracks rows: the
    /// commit names them in the table's metadata when it does not yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_tracking_columns: Option<[String; 2]>,
}

/// Consumes a change stream: new rows into data files, old rows into one DV
/// file at [`ChangeWriter::finish`]. Files written are removed when a later
/// step fails ([`ChangeWriter::abort`]).
pub struct ChangeWriter {
    store: TableStore,
    /// The add actions of the files rows may come from (by decoded path).
    targets: HashMap<String, Add>,
    writer: DataWriter,
    rows: BTreeMap<String, RoaringTreemap>,
    /// Write DVs (else the driver rewrites the files: no DV file here).
    dvs: bool,
    options: DeleteOptions,
    counts: PreparedChanges,
    /// The change data feed's files, when the table records the feed.
    change_data: Option<ChangeData>,
    mode: crate::log::schema::ColumnMappingMode,
    /// Row tracking: the materialized columns new rows carry.
    tracking: Option<RowTracking>,
}

/// What a [`ChangeWriter`] needs on a table that tracks rows: updated rows
/// keep their row id (written to the materialized row-id column) and get the
/// commit's version (NULL in the materialized row-commit-version column);
/// inserted rows get NULL in both, as Delta Spark writes them.
///
/// The old row's id comes with the row when the stream carries
/// [`ROW_ID_COLUMN`] (the in-process MERGE reads it in its scan of the
/// target rows), or is the materialized value the stream carries in the
/// materialized row-id column (the in-process UPDATE reads that column with
/// the rows), else the file's `baseRowId` + the row's index; else (Spark's
/// change tasks) the materialized values are read here, once per touched
/// file.
struct RowTracking {
    id: String,
    version: String,
    /// The materialized row ids of each touched file, by physical row index
    /// (read once, only that column; `None`: the file has none).
    materialized: HashMap<String, Option<Int64Array>>,
}

impl RowTracking {
    /// The materialized columns of a table laid out as `layout`; an error
    /// when it tracks rows without naming them.
    fn of(layout: &TableLayout) -> Result<Option<RowTracking>> {
        let props = features::properties::TableProperties::new(&layout.configuration);
        match props.materialized_row_tracking_columns() {
            Some((id, version)) => Ok(Some(RowTracking {
                id: id.to_string(),
                version: version.to_string(),
                materialized: HashMap::new(),
            })),
            None if props.enable_row_tracking() => Err(Error::Unsupported(format!(
                "the table tracks row ids but does not name the columns to materialize them \
                 in ({} / {}): rewritten rows would change their ids",
                features::properties::MATERIALIZED_ROW_ID,
                features::properties::MATERIALIZED_ROW_COMMIT_VERSION
            ))),
            None => Ok(None),
        }
    }

    /// The ids of the old rows `(file, index)`: the file's materialized value
    /// where not null, else its `baseRowId` + the index (`None` when the
    /// file has no `baseRowId` either).
    async fn row_ids(
        &mut self,
        store: &TableStore,
        mode: crate::log::schema::ColumnMappingMode,
        targets: &HashMap<String, Add>,
        rows: &[Option<(String, u64)>],
    ) -> Result<Int64Array> {
        for (key, _) in rows.iter().flatten() {
            if self.materialized.contains_key(key) {
                continue;
            }
            let Some(add) = targets.get(key) else {
                continue;
            };
            let values = read_materialized(store, mode, add, key, &self.id).await?;
            self.materialized.insert(key.clone(), values);
        }
        Ok(self.resolve(targets, rows))
    }

    /// The ids of the old rows `rows` whose materialized values came with
    /// them (`materialized`, row for row): that value where not null, else
    /// the file's `baseRowId` + the index.
    fn resolve_carried(
        &self,
        targets: &HashMap<String, Add>,
        rows: &[Option<(String, u64)>],
        materialized: &[Option<i64>],
    ) -> Int64Array {
        rows.iter()
            .zip(materialized)
            .map(|(row, value)| {
                let (key, index) = row.as_ref()?;
                if value.is_some() {
                    return *value;
                }
                let base = targets.get(key)?.base_row_id?;
                i64::try_from(*index).ok().map(|i| base + i)
            })
            .collect()
    }

    /// [`RowTracking::row_ids`] once the touched files' materialized ids
    /// are loaded.
    fn resolve(
        &self,
        targets: &HashMap<String, Add>,
        rows: &[Option<(String, u64)>],
    ) -> Int64Array {
        rows.iter()
            .map(|row| {
                let (key, index) = row.as_ref()?;
                let materialized = self.materialized.get(key).and_then(Option::as_ref);
                let at = usize::try_from(*index).ok();
                if let (Some(m), Some(at)) = (materialized, at) {
                    if at < m.len() && m.is_valid(at) {
                        return Some(m.value(at));
                    }
                }
                let base = targets.get(key)?.base_row_id?;
                i64::try_from(*index).ok().map(|i| base + i)
            })
            .collect()
    }
}

/// The materialized row-id column `column` of the data file `add` (at
/// `key`), every physical row, its DV not applied; `None` when the file
/// does not hold the column or holds only NULLs in it.
async fn read_materialized(
    store: &TableStore,
    mode: crate::log::schema::ColumnMappingMode,
    add: &Add,
    key: &str,
    column: &str,
) -> Result<Option<Int64Array>> {
    let schema = crate::log::schema::StructType {
        fields: vec![crate::log::schema::StructField::internal(
            column,
            crate::log::schema::DataType::Long,
        )],
    };
    let spec = ScanSpec {
        schema,
        partition_columns: Vec::new(),
        column_mapping: mode,
        columns: None,
        with_metadata_columns: false,
        filter: None,
        filter_rows: false,
        row_tracking: None,
        string_view: false,
    };
    let file = scan::ScanFile {
        path: key.to_string(),
        size: u64::try_from(add.size).unwrap_or(0),
        partition_values: Default::default(),
        deletion_vector: None,
        row_groups: None,
        base_row_id: add.base_row_id,
        default_row_commit_version: add.default_row_commit_version,
    };
    let batches: Vec<RecordBatch> =
        scan::stream_file(store, &spec, &file, DeletedRows::Known(None))
            .await?
            .try_collect()
            .await?;
    let mut values: Vec<Option<i64>> = Vec::new();
    for batch in &batches {
        let column = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| {
                Error::Internal(format!("row tracking: {column} of {key} is not a long"))
            })?;
        values.extend(column.iter());
    }
    if values.iter().all(Option::is_none) {
        return Ok(None);
    }
    Ok(Some(values.into_iter().collect()))
}

/// What a [`ChangeWriter`] needs for the change data feed: the new rows go
/// to `cdc` files as they come (`update_postimage`, `insert`); at the end the
/// old rows are read back from their files (only those rows) as
/// `update_preimage` or `delete`.
struct ChangeData {
    writer: DataWriter,
    layout: TableLayout,
    /// Rows of each touched file replaced by a new version (the others of
    /// `ChangeWriter::rows` are deleted).
    updated: BTreeMap<String, RoaringTreemap>,
}

/// Whether a table with these properties records the change data feed.
fn records_change_data(layout: &TableLayout) -> bool {
    layout.configuration.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case(features::properties::ENABLE_CHANGE_DATA_FEED)
            && v.as_deref().is_some_and(|v| v.eq_ignore_ascii_case("true"))
    })
}

/// `batch` (the table's columns) with a `_change_type` column appended.
fn with_change_type(batch: &RecordBatch, types: Vec<&'static str>) -> Result<RecordBatch> {
    let mut fields: Vec<arrow_schema::FieldRef> = batch.schema().fields().iter().cloned().collect();
    fields.push(Arc::new(arrow_schema::Field::new(
        cdf::CHANGE_TYPE_COLUMN,
        arrow_schema::DataType::Utf8,
        true,
    )));
    let mut columns = batch.columns().to_vec();
    columns.push(Arc::new(StringArray::from(types)));
    RecordBatch::try_new(Arc::new(arrow_schema::Schema::new(fields)), columns)
        .map_err(|e| stream_error(e.to_string()))
}

fn stream_error(what: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("change stream: {what}"))
}

impl ChangeWriter {
    /// A writer for the table laid out as `layout`; rows may replace rows of
    /// the files in `targets` (their current add actions).
    pub fn try_new(
        store: TableStore,
        layout: TableLayout,
        targets: Vec<Add>,
        dvs: bool,
        options: DeleteOptions,
        writer_options: WriterOptions,
    ) -> Result<ChangeWriter> {
        let change_data = if records_change_data(&layout) {
            Some(ChangeData {
                writer: DataWriter::for_change_data(
                    store.clone(),
                    layout.clone(),
                    writer_options.clone(),
                )?,
                layout: layout.clone(),
                updated: BTreeMap::new(),
            })
        } else {
            None
        };
        let tracking = RowTracking::of(&layout)?;
        let mut layout = layout;
        if let Some(t) = &tracking {
            for c in [&t.id, &t.version] {
                layout
                    .schema
                    .fields
                    .push(crate::log::schema::StructField::internal(
                        c,
                        crate::log::schema::DataType::Long,
                    ));
            }
        }
        let mode = layout.mode;
        let mut writer = DataWriter::try_new(store.clone(), layout, writer_options)?;
        writer.rules.change_rows = true;
        Ok(ChangeWriter {
            mode,
            tracking,
            store,
            targets: targets
                .into_iter()
                .map(|a| (normalize_path(&a.path), a))
                .collect(),
            writer,
            rows: BTreeMap::new(),
            dvs,
            options,
            counts: PreparedChanges::default(),
            change_data,
        })
    }

    /// Whether the new rows carry row ids (the table tracks rows): a stream
    /// may then bring each old row's id in [`ROW_ID_COLUMN`].
    pub fn tracks_rows(&self) -> bool {
        self.tracking.is_some()
    }

    /// The materialized row-id column the new rows' ids go to (the table
    /// tracks rows): a stream may bring the old rows' values of it, under
    /// that name, instead of their ids.
    pub fn materialized_row_id_column(&self) -> Option<&str> {
        self.tracking.as_ref().map(|t| t.id.as_str())
    }

    /// Take one batch of the stream.
    pub async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let n = batch.num_rows();
        if n == 0 {
            return Ok(());
        }
        let changes = change_kinds(batch)?;
        let carried_ids = optional_column::<Int64Array>(batch, ROW_ID_COLUMN)?;
        // The materialized row-id column, when the stream carries the
        // target rows' values of it (the in-process UPDATE reads it).
        let carried_materialized = match &self.tracking {
            Some(t) => optional_column::<Int64Array>(batch, &t.id)?,
            None => None,
        };
        let mut materialized: Vec<Option<i64>> = Vec::new();
        let paths = optional_column::<StringArray>(batch, FILE_PATH_COLUMN)?;
        let indexes = optional_column::<Int64Array>(batch, ROW_INDEX_COLUMN)?;
        let mut keep = Vec::with_capacity(n);
        // The old row each new row replaces (row tracking keeps its id).
        let mut old_rows: Vec<Option<(String, u64)>> = Vec::new();
        for (i, change) in changes.iter().enumerate() {
            keep.push(*change != RowChange::Delete);
            match change {
                RowChange::Insert => {
                    self.counts.inserted += 1;
                    if self.tracking.is_some() {
                        old_rows.push(None);
                        materialized.push(None);
                    }
                    continue;
                }
                RowChange::Update => self.counts.updated += 1,
                RowChange::Delete => self.counts.deleted += 1,
            }
            let path = paths
                .filter(|p| p.is_valid(i))
                .map(|p| p.value(i))
                .ok_or_else(|| {
                    stream_error(format!(
                        "row {i} changes a row but has no {FILE_PATH_COLUMN}"
                    ))
                })?;
            let index = indexes
                .filter(|x| x.is_valid(i))
                .map(|x| x.value(i))
                .and_then(|v| u64::try_from(v).ok())
                .ok_or_else(|| {
                    stream_error(format!(
                        "row {i} changes a row but has no valid {ROW_INDEX_COLUMN}"
                    ))
                })?;
            let key = normalize_path(path);
            if !self.targets.contains_key(&key) {
                return Err(stream_error(format!(
                    "{path} is not one of the files this change may touch"
                )));
            }
            if !self.rows.entry(key.clone()).or_default().insert(index) {
                return Err(Error::InvalidArgument(format!(
                    "[DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE] the target row \
                     {index} of {key} is changed by more than one source row: a MERGE may \
                     change each target row once (make the source unique on the join key)"
                )));
            }
            if self.tracking.is_some() && *change == RowChange::Update {
                old_rows.push(Some((key.clone(), index)));
                materialized
                    .push(carried_materialized.and_then(|m| m.is_valid(i).then(|| m.value(i))));
            }
            if let (RowChange::Update, Some(cd)) = (change, self.change_data.as_mut()) {
                cd.updated.entry(key).or_default().insert(index);
            }
        }
        let new_rows = keep.iter().filter(|k| **k).count();
        if new_rows == 0 {
            return Ok(());
        }
        let data = self.table_part(batch)?;
        let data = if new_rows == n {
            data
        } else {
            arrow_select::filter::filter_record_batch(&data, &BooleanArray::from(keep))
                .map_err(|e| stream_error(e.to_string()))?
        };
        let data = self.writer.fill_identity(&data)?;
        match self.tracking.as_mut() {
            Some(t) => {
                let ids = match carried_ids {
                    // The old rows' ids came with them (updates only: an
                    // insert gets a fresh id).
                    Some(carried) => changes
                        .iter()
                        .enumerate()
                        .filter(|(_, c)| **c != RowChange::Delete)
                        .map(|(i, c)| {
                            (*c == RowChange::Update && carried.is_valid(i))
                                .then(|| carried.value(i))
                        })
                        .collect(),
                    None if carried_materialized.is_some() => {
                        t.resolve_carried(&self.targets, &old_rows, &materialized)
                    }
                    None => {
                        t.row_ids(&self.store, self.mode, &self.targets, &old_rows)
                            .await?
                    }
                };
                let versions =
                    arrow_array::new_null_array(&arrow_schema::DataType::Int64, ids.len());
                let mut fields: Vec<arrow_schema::FieldRef> =
                    data.schema().fields().iter().cloned().collect();
                let mut columns = data.columns().to_vec();
                for (name, column) in [(&t.id, Arc::new(ids) as ArrayRef), (&t.version, versions)] {
                    fields.push(Arc::new(arrow_schema::Field::new(
                        name.as_str(),
                        arrow_schema::DataType::Int64,
                        true,
                    )));
                    columns.push(column);
                }
                let tracked =
                    RecordBatch::try_new(Arc::new(arrow_schema::Schema::new(fields)), columns)
                        .map_err(|e| stream_error(e.to_string()))?;
                self.writer.write(&tracked).await?;
            }
            None => self.writer.write(&data).await?,
        }
        if let Some(cd) = self.change_data.as_mut() {
            let types: Vec<&'static str> = changes
                .iter()
                .filter_map(|c| match c {
                    RowChange::Update => Some(ChangeType::UpdatePostimage.as_str()),
                    RowChange::Insert => Some(ChangeType::Insert.as_str()),
                    RowChange::Delete => None,
                })
                .collect();
            cd.writer.write(&with_change_type(&data, types)?).await?;
        }
        Ok(())
    }

    /// Write the old versions of the changed rows to the change data files:
    /// each touched file read for just those rows.
    async fn write_old_rows(&mut self) -> Result<()> {
        let Some(cd) = self.change_data.as_mut() else {
            return Ok(());
        };
        let spec = ScanSpec {
            schema: cd.layout.schema.clone(),
            partition_columns: cd.layout.partition_columns.clone(),
            column_mapping: cd.layout.mode,
            columns: None,
            with_metadata_columns: true,
            filter: None,
            filter_rows: false,
            row_tracking: None,
            string_view: false,
        };
        let table_columns: Vec<usize> = (0..cd.layout.schema.fields.len()).collect();
        for (key, rows) in &self.rows {
            let Some(add) = self.targets.get(key) else {
                continue;
            };
            let file = scan::ScanFile {
                path: key.clone(),
                size: u64::try_from(add.size).unwrap_or(0),
                partition_values: add.partition_values.clone(),
                deletion_vector: None,
                row_groups: None,
                base_row_id: add.base_row_id,
                default_row_commit_version: add.default_row_commit_version,
            };
            let mut batches = scan::stream_file(
                &self.store,
                &spec,
                &file,
                DeletedRows::KeepOnly(rows.clone()),
            )
            .await?;
            let updated = cd.updated.get(key);
            while let Some(batch) = batches.try_next().await? {
                let indexes = optional_column::<Int64Array>(&batch, ROW_INDEX_COLUMN)?
                    .ok_or_else(|| Error::Internal("old rows read without their index".into()))?;
                let types: Vec<&'static str> = indexes
                    .values()
                    .iter()
                    .map(|i| {
                        let was_updated = u64::try_from(*i)
                            .ok()
                            .is_some_and(|i| updated.is_some_and(|u| u.contains(i)));
                        if was_updated {
                            ChangeType::UpdatePreimage.as_str()
                        } else {
                            ChangeType::Delete.as_str()
                        }
                    })
                    .collect();
                let old = batch
                    .project(&table_columns)
                    .map_err(|e| stream_error(e.to_string()))?;
                cd.writer.write(&with_change_type(&old, types)?).await?;
            }
        }
        Ok(())
    }

    /// The table's columns of `batch` (metadata and change columns, and
    /// materialized row tracking columns carried in, dropped).
    fn table_part(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let schema = batch.schema();
        let keep: Vec<usize> = (0..schema.fields().len())
            .filter(|i| {
                schema.fields().get(*i).is_some_and(|f| {
                    let name = f.name();
                    let materialized = self
                        .tracking
                        .as_ref()
                        .is_some_and(|t| *name == t.id || *name == t.version);
                    !materialized
                        && name != FILE_PATH_COLUMN
                        && name != ROW_INDEX_COLUMN
                        && name != CHANGE_COLUMN
                        && name != ROW_ID_COLUMN
                        && name != ROW_COMMIT_VERSION_COLUMN
                })
            })
            .collect();
        batch
            .project(&keep)
            .map_err(|e| stream_error(e.to_string()))
    }

    /// Close the data files and write the DV file; what was written.
    pub async fn finish(&mut self) -> Result<PreparedChanges> {
        let mut out = self.counts.clone();
        out.adds = self.writer.finish().await?;
        out.identity_high_water_marks = self.writer.identity_high_water_marks();
        out.row_tracking_columns = self
            .tracking
            .as_ref()
            .map(|t| [t.id.clone(), t.version.clone()]);
        self.write_old_rows().await?;
        if let Some(cd) = self.change_data.as_mut() {
            out.cdc = cd.writer.finish_change_data().await?;
        }
        let items: Vec<(Add, RoaringTreemap)> = std::mem::take(&mut self.rows)
            .into_iter()
            .filter_map(|(k, rows)| self.targets.get(&k).map(|a| (a.clone(), rows)))
            .collect();
        out.files = if self.dvs {
            row_deletes::prepare_files(&self.store, items, &self.options).await?
        } else {
            // Rewritten by the driver (which loads the current DVs and
            // counts rows itself): only the rows travel.
            items
                .into_iter()
                .map(|(add, rows)| {
                    Ok(PreparedFile {
                        num_records: 0,
                        deletion_vector: None,
                        deleted: rows.len(),
                        rows: crate::format::descriptor::DeletionVectorDescriptor::inline(&rows)?,
                        add,
                    })
                })
                .collect::<Result<_>>()?
        };
        Ok(out)
    }

    /// Remove every data file this writer started (after a failure).
    pub async fn abort(&self) {
        let _ = remove_files(&self.store, self.writer.started_files()).await;
        if let Some(cd) = &self.change_data {
            let _ = remove_files(&self.store, cd.writer.started_files()).await;
        }
    }
}

/// What an executor needs to write part of an UPDATE or MERGE, as JSON:
/// the table's protocol and metadata (its layout), the add actions of the
/// files rows may come from, and how to write. No credentials: those travel
/// apart.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChangeTask {
    pub protocol: crate::log::actions::Protocol,
    pub metadata: crate::log::actions::Metadata,
    pub targets: Vec<Add>,
    /// Write DVs (false: the driver rewrites the touched files).
    pub dvs: bool,
    pub inline_threshold: usize,
    pub dv_file_target_size: usize,
    pub target_file_size: usize,
    /// The session time zone generated columns and CHECK constraints read
    /// instants in (absent: UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}

impl ChangeTask {
    /// A task for `snapshot`'s files at `paths` (decoded or as in the log).
    pub fn new(snapshot: &Snapshot, paths: &[String], options: &DmlOptions) -> Result<ChangeTask> {
        let dvs = check_can_rewrite(snapshot, options.delete.allow_copy_on_write)?;
        let live = live_files(snapshot)?;
        let targets = paths
            .iter()
            .map(|p| {
                let key = normalize_path(p);
                live.get(p)
                    .or_else(|| live.get(&key))
                    .map(|f| f.add.clone())
                    .ok_or_else(|| Error::NotFound {
                        path: format!(
                            "{p} (not a live data file of {} at version {})",
                            snapshot.store().url(),
                            snapshot.version()
                        ),
                    })
            })
            .collect::<Result<_>>()?;
        Ok(ChangeTask {
            protocol: snapshot.protocol().clone(),
            metadata: dml_metadata(snapshot, options.new_metadata.as_ref())
                .unwrap_or_else(|| snapshot.metadata().clone()),
            targets,
            dvs,
            inline_threshold: options.delete.inline_threshold,
            dv_file_target_size: options.delete.dv_file_target_size,
            target_file_size: options.writer.target_file_size,
            time_zone: Some(options.writer.time_zone.name().to_string()),
        })
    }

    /// A change writer for this task at `store`; identity values of
    /// inserted rows are handed out in `identity_slot` (none: refused, as
    /// they could collide with another task's).
    pub fn writer(
        &self,
        store: TableStore,
        identity_slot: Option<IdentitySlot>,
    ) -> Result<ChangeWriter> {
        let mut writer = ChangeWriter::try_new(
            store,
            TableLayout::of(&self.protocol, &self.metadata)?,
            self.targets.clone(),
            self.dvs,
            DeleteOptions {
                inline_threshold: self.inline_threshold,
                dv_file_target_size: self.dv_file_target_size,
                ..Default::default()
            },
            WriterOptions {
                target_file_size: self.target_file_size,
                time_zone: match &self.time_zone {
                    Some(name) => crate::expr::TimeZone::parse(name)?,
                    None => crate::expr::TimeZone::utc(),
                },
                ..Default::default()
            },
        )?;
        // One of many tasks: identity values only in the task's own slot.
        writer.writer.rules.distributed = true;
        if let Some(slot) = identity_slot {
            writer.writer.rules.set_identity_slot(slot);
        }
        Ok(writer)
    }

    /// Write a whole change stream (identity values in `identity_slot`,
    /// see [`ChangeTask::writer`]); on a failure, the files written so far
    /// are removed.
    pub async fn write_stream<R: arrow_array::RecordBatchReader>(
        &self,
        store: TableStore,
        reader: R,
        identity_slot: Option<IdentitySlot>,
    ) -> Result<PreparedChanges> {
        let mut writer = self.writer(store, identity_slot)?;
        let written = async {
            for batch in reader {
                let batch = batch.map_err(|e| stream_error(e.to_string()))?;
                writer.write(&batch).await?;
            }
            writer.finish().await
        }
        .await;
        if written.is_err() {
            writer.abort().await;
        }
        written
    }
}

/// The `_change` of each row (all `update` when the column is absent).
fn change_kinds(batch: &RecordBatch) -> Result<Vec<RowChange>> {
    let Some(col) = optional_column::<StringArray>(batch, CHANGE_COLUMN)? else {
        return Ok(vec![RowChange::Update; batch.num_rows()]);
    };
    (0..col.len())
        .map(|i| match col.is_valid(i).then(|| col.value(i)) {
            Some("update") => Ok(RowChange::Update),
            Some("delete") => Ok(RowChange::Delete),
            Some("insert") => Ok(RowChange::Insert),
            other => Err(stream_error(format!(
                "{CHANGE_COLUMN} of row {i} is {other:?}; expected \"update\", \"delete\" or \
                 \"insert\""
            ))),
        })
        .collect()
}

/// A column of `batch` as `T`, if present (an error if of another type).
fn optional_column<'b, T: 'static>(batch: &'b RecordBatch, name: &str) -> Result<Option<&'b T>> {
    match batch.column_by_name(name) {
        None => Ok(None),
        Some(c) => c
            .as_any()
            .downcast_ref::<T>()
            .map(Some)
            .ok_or_else(|| stream_error(format!("column {name} has type {}", c.data_type()))),
    }
}

/// How an UPDATE or MERGE is written and committed.
#[derive(Debug, Clone, Default)]
pub struct DmlOptions {
    /// DV writing and commit settings (as DELETE's).
    pub delete: DeleteOptions,
    pub writer: WriterOptions,
    /// `commitInfo.operationParameters` (Delta Spark's: `predicate`, and
    /// MERGE's clause lists).
    pub parameters: Map<String, Value>,
    /// Metrics the caller counted (MERGE's `numSourceRows`, per-clause counts).
    pub extra_metrics: Map<String, Value>,
    /// Files the operation read besides those it changes (for the conflict
    /// checker); `None`: the whole table.
    pub read_files: Option<BTreeSet<String>>,
    /// New table metadata committed with the changes (MERGE's schema
    /// evolution: the new files are written in its schema).
    pub new_metadata: Option<crate::log::actions::Metadata>,
    /// The commit's application transaction (Delta Spark's `txnAppId` /
    /// `txnVersion`): skipped when the table holds it already.
    pub app: super::app_txn::AppCommit,
}

/// What an UPDATE or MERGE did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DmlMetrics {
    pub version: Option<u64>,
    pub operation: Option<DmlOperation>,
    /// The operationMetrics written to the log.
    pub operation_metrics: Map<String, Value>,
    pub attempts: u32,
    pub rebases: u32,
    pub checkpointed: bool,
    pub checkpoint_error: Option<String>,
    /// Why the commit was not mirrored as an Iceberg snapshot (UniForm).
    pub iceberg_error: Option<String>,
}

/// The metadata an UPDATE or MERGE on `snapshot` writes its rows in and
/// commits: `new_metadata` (a MERGE's evolved schema) or the table's, with
/// the materialized row tracking columns named when the table tracks rows
/// (`delta.enableRowTracking`) without naming them, as Delta Spark names
/// them ([`features::name_row_tracking_columns`]): updated rows keep their
/// ids in those columns, and the names are committed with them. None when
/// the table's metadata stays as it is.
pub(crate) fn dml_metadata(
    snapshot: &Snapshot,
    new_metadata: Option<&crate::log::actions::Metadata>,
) -> Option<crate::log::actions::Metadata> {
    let mut metadata = new_metadata
        .cloned()
        .unwrap_or_else(|| snapshot.metadata().clone());
    let props = features::properties::TableProperties::of(&metadata);
    let needs_names =
        props.enable_row_tracking() && props.materialized_row_tracking_columns().is_none();
    let named = needs_names
        && features::name_row_tracking_columns(
            snapshot.protocol(),
            snapshot.metadata(),
            &mut metadata,
        );
    (named || new_metadata.is_some()).then_some(metadata)
}

/// The scan columns an UPDATE or MERGE reads the target rows with when its
/// writer keeps row ids (`tracks`): [`ROW_ID_COLUMN`] comes with each row,
/// from the materialized column the table names or `baseRowId` + index.
pub(crate) fn row_ids_in_scan(
    snapshot: &Snapshot,
    tracks: bool,
) -> Result<Option<scan::RowTrackingColumns>> {
    if !tracks || !features::is_supported(snapshot.protocol(), "rowTracking") {
        return Ok(None);
    }
    scan::RowTrackingColumns::of(snapshot).map(Some)
}

/// Check that deltadv may UPDATE or MERGE this table; whether with DVs.
pub fn check_can_rewrite(snapshot: &Snapshot, allow_copy_on_write: bool) -> Result<bool> {
    features::plan_rewrite(
        snapshot.protocol(),
        snapshot.metadata(),
        snapshot.schema(),
        allow_copy_on_write,
    )
}

/// How an operation that read the whole table tells whether rows a
/// concurrent commit added would have changed what it did (for a MERGE that
/// inserts: a row matching one of its source keys). With one, the
/// transaction checks a winner's new files row by row instead of
/// conflicting on any (see [`Changes::check_added`]).
pub(crate) trait AddedRowsCheck: Send + Sync {
    /// The first row of `file` (added by a concurrent commit) this operation
    /// would have acted on, described for the conflict message; None when
    /// there is none.
    fn first_match<'a>(
        &'a self,
        store: &'a TableStore,
        file: &'a Add,
    ) -> BoxFuture<'a, Result<Option<String>>>;
}

/// The changes of an UPDATE or MERGE as the transaction sees them: the DV
/// part is a DELETE's (rebased the same way), plus the new files.
struct DmlChanges<'o> {
    rows: DeleteChanges<'o>,
    adds: Vec<Add>,
    cdc: Vec<Cdc>,
    counts: PreparedChanges,
    operation: DmlOperation,
    read_files: Option<BTreeSet<String>>,
    extra: Map<String, Value>,
    started: Instant,
    added_check: Option<&'o dyn AddedRowsCheck>,
}

impl Changes for DmlChanges<'_> {
    async fn actions(&mut self, store: &TableStore) -> Result<Vec<Action>> {
        let mut actions = self.rows.actions(store).await?;
        actions.extend(self.adds.iter().cloned().map(|a| Action::Add(Box::new(a))));
        actions.extend(self.cdc.iter().cloned().map(Action::Cdc));
        Ok(actions)
    }

    fn metrics(&self) -> Map<String, Value> {
        let d = self.rows.delete_metrics();
        let c = &self.counts;
        let added_files = self.adds.len() as u64 + d.num_added_files;
        let added_bytes: u64 = self
            .adds
            .iter()
            .filter_map(|a| u64::try_from(a.size).ok())
            .sum();
        let removed_bytes = self.rows.removed_bytes();
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let s = |v: u64| Value::String(v.to_string());
        let mut m = Map::new();
        match self.operation {
            DmlOperation::Update => {
                // Delta Spark counts a file whose DV changed as removed (and
                // its bytes not), MERGE only files removed for good.
                let touched = d.num_removed_files
                    + if self.rows.writes_dvs() {
                        d.num_deletion_vectors_added
                    } else {
                        0
                    };
                m.insert("numUpdatedRows".into(), s(c.updated));
                m.insert("numCopiedRows".into(), s(d.num_copied_rows));
                m.insert("numAddedFiles".into(), s(added_files));
                m.insert("numRemovedFiles".into(), s(touched));
                m.insert("numAddedChangeFiles".into(), s(self.cdc.len() as u64));
                m.insert(
                    "numDeletionVectorsAdded".into(),
                    s(d.num_deletion_vectors_added),
                );
                m.insert(
                    "numDeletionVectorsRemoved".into(),
                    s(d.num_deletion_vectors_removed),
                );
                m.insert(
                    "numDeletionVectorsUpdated".into(),
                    s(d.num_deletion_vectors_updated),
                );
                m.insert("numAddedBytes".into(), s(added_bytes));
                m.insert("numRemovedBytes".into(), s(removed_bytes));
                m.insert("executionTimeMs".into(), s(ms));
            }
            DmlOperation::Merge => {
                m.insert("numTargetRowsUpdated".into(), s(c.updated));
                m.insert("numTargetRowsDeleted".into(), s(c.deleted));
                m.insert("numTargetRowsInserted".into(), s(c.inserted));
                m.insert("numTargetRowsCopied".into(), s(d.num_copied_rows));
                m.insert(
                    "numOutputRows".into(),
                    s(c.updated + c.inserted + d.num_copied_rows),
                );
                m.insert("numTargetFilesAdded".into(), s(added_files));
                m.insert("numTargetFilesRemoved".into(), s(d.num_removed_files));
                m.insert("numTargetChangeFilesAdded".into(), s(self.cdc.len() as u64));
                m.insert(
                    "numTargetDeletionVectorsAdded".into(),
                    s(d.num_deletion_vectors_added),
                );
                m.insert(
                    "numTargetDeletionVectorsRemoved".into(),
                    s(d.num_deletion_vectors_removed),
                );
                m.insert(
                    "numTargetDeletionVectorsUpdated".into(),
                    s(d.num_deletion_vectors_updated),
                );
                m.insert("numTargetBytesAdded".into(), s(added_bytes));
                m.insert("numTargetBytesRemoved".into(), s(removed_bytes));
                m.insert("executionTimeMs".into(), s(ms));
            }
        }
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        m
    }

    fn reads(&self) -> (ReadSet, BTreeMap<String, FileChange>) {
        let changes: BTreeMap<String, FileChange> = self
            .rows
            .rows()
            .map(|(k, r)| (k.clone(), FileChange::RewriteRows(r.clone())))
            .collect();
        let reads = match &self.read_files {
            None => ReadSet::WholeTable,
            Some(files) => ReadSet::Files(files.iter().chain(changes.keys()).cloned().collect()),
        };
        (reads, changes)
    }

    async fn rebase(
        &mut self,
        store: &TableStore,
        version: u64,
        files: Vec<RebaseFile>,
    ) -> Result<()> {
        self.rows.rebase(store, version, files).await
    }

    fn checks_added_rows(&self) -> bool {
        self.added_check.is_some()
    }

    async fn check_added(
        &mut self,
        store: &TableStore,
        version: u64,
        added: Vec<Add>,
    ) -> Result<()> {
        let Some(check) = self.added_check else {
            return Err(Error::Internal(format!(
                "version {version} added files this operation does not check"
            )));
        };
        let operation = self.operation.name();
        check_added_rows(check, store, version, &added, |row| {
            format!(
                "the concurrent commit of version {version} added a row this {operation} \
                 would have matched ({row})"
            )
        })
        .await
    }
}

/// The rows of `added` (files the concurrent commit of `version` added)
/// checked with `check`, the files read concurrently: the first match is a
/// `ConcurrentAppend` conflict naming its file, worded by `describe` from
/// the row's description.
pub(crate) async fn check_added_rows(
    check: &dyn AddedRowsCheck,
    store: &TableStore,
    version: u64,
    added: &[Add],
    describe: impl Fn(&str) -> String,
) -> Result<()> {
    let mut found = futures::stream::iter(added.iter())
        .map(|add| async move { Ok::<_, Error>((add, check.first_match(store, add).await?)) })
        .buffer_unordered(super::read_concurrency());
    while let Some((add, first)) = found.try_next().await? {
        if let Some(row) = first {
            return Err(added_row_conflict(
                version,
                &normalize_path(&add.path),
                describe(&row),
            ));
        }
    }
    Ok(())
}

/// Commit what change writers prepared (on one or many executors) as one
/// UPDATE or MERGE on `snapshot`. Nothing is committed when nothing changed.
/// When the commit fails, the new data files are removed.
pub async fn commit_changes(
    snapshot: &Snapshot,
    operation: DmlOperation,
    prepared: Vec<PreparedChanges>,
    options: &DmlOptions,
) -> Result<DmlMetrics> {
    commit_changes_since(snapshot, operation, prepared, options, Instant::now(), None).await
}

/// [`commit_changes`] of an operation that started at `started`; with
/// `added_check`, a concurrent commit's new files conflict only when one of
/// their rows would have changed what the operation did.
pub(super) async fn commit_changes_since(
    snapshot: &Snapshot,
    operation: DmlOperation,
    prepared: Vec<PreparedChanges>,
    options: &DmlOptions,
    started: Instant,
    added_check: Option<&dyn AddedRowsCheck>,
) -> Result<DmlMetrics> {
    let store = snapshot.store();
    let mut counts = PreparedChanges::default();
    let mut files = Vec::new();
    let mut adds = Vec::new();
    let mut cdc = Vec::new();
    let mut marks: Vec<(String, i64)> = Vec::new();
    let mut names: Option<[String; 2]> = None;
    for p in prepared {
        if let Some(n) = p.row_tracking_columns {
            if names.as_ref().is_some_and(|m| *m != n) {
                return Err(Error::InvalidArgument(format!(
                    "the change tasks of one {} wrote different materialized row tracking \
                     columns ({names:?} and {n:?}): they must come from one change task",
                    operation.name()
                )));
            }
            names = Some(n);
        }
        marks.extend(p.identity_high_water_marks);
        counts.updated += p.updated;
        counts.deleted += p.deleted;
        counts.inserted += p.inserted;
        files.extend(p.files);
        adds.extend(p.adds);
        cdc.extend(p.cdc);
    }
    let new_paths: Vec<String> = adds
        .iter()
        .map(|a| normalize_path(&a.path))
        .chain(cdc.iter().map(|c| normalize_path(&c.path)))
        .collect();
    // DV files the tasks wrote: referenced only if this commit lands.
    let dv_paths: BTreeSet<String> = files
        .iter()
        .filter_map(|f| f.deletion_vector.as_ref().and_then(|d| d.relative_path()))
        .collect();
    let committed = async {
        let dvs = check_can_rewrite(snapshot, options.delete.allow_copy_on_write)?;
        let metadata = committed_metadata(snapshot, options.new_metadata.as_ref(), names)?;
        let targets = row_deletes::prepared_targets(snapshot, files, dvs).await?;
        let rows = DeleteChanges::new(snapshot, targets, &options.delete, dvs, started);
        // A copy-on-write rewrite keeps ids in the columns this commit names.
        let rows = match &metadata {
            Some(m) => rows.with_row_tracking(super::optimize::row_tracking_columns(
                snapshot.protocol(),
                m,
            )),
            None => rows,
        };
        let mut changes = DmlChanges {
            rows,
            adds,
            cdc,
            counts,
            operation,
            read_files: options.read_files.clone(),
            extra: options.extra_metrics.clone(),
            started,
            added_check,
        };
        let mut txn = Transaction::new(snapshot, operation.name())?;
        if let Some(m) = &metadata {
            txn = txn.with_metadata(m.clone());
        }
        if !marks.is_empty() {
            // The identity values handed out: the new high-water marks in
            // the same commit (a concurrent one that changed the metadata
            // is then a conflict, as in Delta Spark).
            let base = metadata.as_ref().unwrap_or(snapshot.metadata());
            txn = txn.with_metadata(super::data::rules::with_high_water_marks(base, &marks)?);
        }
        let txn = options.app.apply(
            txn.with_parameters(options.parameters.clone())
                .with_max_attempts(options.delete.max_attempts)
                .with_engine_info(options.delete.engine_info.clone()),
        );
        let outcome = txn.commit(&mut changes).await?;
        Ok::<_, Error>(DmlMetrics {
            version: outcome.version,
            operation: Some(operation),
            operation_metrics: changes.metrics(),
            attempts: outcome.attempts,
            rebases: outcome.rebases,
            checkpointed: outcome.checkpointed,
            checkpoint_error: outcome.checkpoint_error,
            iceberg_error: outcome.iceberg_error,
        })
    }
    .await;
    match committed {
        Ok(m) if m.version.is_some() => Ok(m),
        other => {
            // Not committed (failed, or nothing to commit): the new files go.
            let _ = super::files::remove_uncommitted(store, &new_paths).await;
            let dvs: Vec<String> = dv_paths.into_iter().collect();
            let _ = remove_files(store, &dvs).await;
            other
        }
    }
}

/// The metadata an UPDATE or MERGE commits: `new_metadata` (or the
/// table's) with the materialized row tracking columns its writers wrote
/// (`names`) named, when it does not name them yet; None when the table's
/// metadata stays. Writers that used other names than the table's are an
/// error (their rows would not be found under the table's names).
fn committed_metadata(
    snapshot: &Snapshot,
    new_metadata: Option<&crate::log::actions::Metadata>,
    names: Option<[String; 2]>,
) -> Result<Option<crate::log::actions::Metadata>> {
    let Some([id, version]) = names else {
        return Ok(new_metadata.cloned());
    };
    let mut metadata = new_metadata
        .cloned()
        .unwrap_or_else(|| snapshot.metadata().clone());
    match features::properties::TableProperties::of(&metadata).materialized_row_tracking_columns() {
        Some((a, b)) if a == id && b == version => return Ok(new_metadata.cloned()),
        Some((a, b)) => {
            return Err(Error::InvalidArgument(format!(
                "the changes were written with the materialized row tracking columns \
                 {id} / {version}, but the table names {a} / {b}"
            )))
        }
        None => {}
    }
    metadata.configuration.insert(
        features::properties::MATERIALIZED_ROW_ID.to_string(),
        Some(id),
    );
    metadata.configuration.insert(
        features::properties::MATERIALIZED_ROW_COMMIT_VERSION.to_string(),
        Some(version),
    );
    Ok(Some(metadata))
}

/// Put the values of `set` (evaluated over `source`, row for row with
/// `columns`) in place of their columns, cast to the types of `fields` (the
/// table's), refusing NULL in a NOT NULL column. `what` names the statement
/// in errors.
pub(crate) fn assign_values(
    columns: &mut [ArrayRef],
    fields: &arrow_schema::Fields,
    source: &RecordBatch,
    set: &[(usize, ValueExpr, arrow_schema::DataType)],
    what: &str,
) -> Result<()> {
    for (i, value, target) in set {
        let v = value.evaluate(source)?;
        let v = if v.data_type() == target {
            v
        } else {
            crate::expr::value::ansi_cast(v.as_ref(), target)?
        };
        if let Some(field) = fields.get(*i) {
            let nulls = v.logical_null_count();
            if !field.is_nullable() && nulls > 0 {
                return Err(Error::InvalidArgument(format!(
                    "[DELTA_NOT_NULL_CONSTRAINT_VIOLATED] NOT NULL constraint violated for \
                     column: {} ({what} sets it to {}, NULL in {nulls} row(s))",
                    field.name(),
                    value.text(),
                )));
            }
        }
        let slot = columns
            .get_mut(*i)
            .ok_or_else(|| Error::Internal(format!("batch column {i} missing")))?;
        *slot = v;
    }
    Ok(())
}

#[cfg(test)]
mod row_tracking_tests {
    use super::*;

    fn layout(config: &[(&str, &str)]) -> TableLayout {
        TableLayout::new_table(
            crate::log::schema::StructType::default(),
            Vec::new(),
            &config
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            true,
        )
    }

    #[test]
    fn materialized_columns_come_from_the_table_properties() {
        use features::properties::{
            ENABLE_ROW_TRACKING, MATERIALIZED_ROW_COMMIT_VERSION, MATERIALIZED_ROW_ID,
        };
        let t = RowTracking::of(&layout(&[
            (ENABLE_ROW_TRACKING, "true"),
            (MATERIALIZED_ROW_ID, "rid"),
            (MATERIALIZED_ROW_COMMIT_VERSION, "rcv"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((t.id.as_str(), t.version.as_str()), ("rid", "rcv"));
        assert!(RowTracking::of(&layout(&[])).unwrap().is_none());
        let e = RowTracking::of(&layout(&[(ENABLE_ROW_TRACKING, "true")]))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(MATERIALIZED_ROW_ID), "{e}");
    }

    #[test]
    fn row_ids_are_materialized_values_else_base_plus_index() {
        let add = |path: &str, base: Option<i64>| -> Add {
            serde_json::from_value(serde_json::json!({
                "path": path, "partitionValues": {}, "size": 1,
                "modificationTime": 0, "dataChange": true, "baseRowId": base,
            }))
            .unwrap()
        };
        let targets: HashMap<String, Add> = [
            ("a".to_string(), add("a", Some(100))),
            ("b".to_string(), add("b", Some(200))),
            ("c".to_string(), add("c", None)),
        ]
        .into();
        let mut t = RowTracking {
            id: "rid".into(),
            version: "rcv".into(),
            materialized: HashMap::new(),
        };
        t.materialized.insert("a".into(), None);
        t.materialized.insert(
            "b".into(),
            Some(Int64Array::from(vec![Some(7), None, Some(9)])),
        );
        t.materialized.insert("c".into(), None);
        let rows = [
            Some(("a".to_string(), 3)),
            None, // an insert
            Some(("b".to_string(), 0)),
            Some(("b".to_string(), 1)),
            Some(("b".to_string(), 2)),
            Some(("c".to_string(), 1)),
        ];
        let ids = t.resolve(&targets, &rows);
        let got: Vec<Option<i64>> = ids.iter().collect();
        assert_eq!(got, [Some(103), None, Some(7), Some(201), Some(9), None]);
        // The same values carried with the rows (as the UPDATE scan reads
        // them): nothing loaded, same ids.
        t.materialized.clear();
        let carried = [None, None, Some(7), None, Some(9), None];
        let ids = t.resolve_carried(&targets, &rows, &carried);
        let got: Vec<Option<i64>> = ids.iter().collect();
        assert_eq!(got, [Some(103), None, Some(7), Some(201), Some(9), None]);
    }
}
