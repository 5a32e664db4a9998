//! Scans: read a snapshot's data files into Arrow batches with the rows that
//! deletion vectors mark already gone.
//!
//! Each file's DV becomes a parquet row selection before decoding (long runs
//! of deleted rows, and row groups and pages they empty, are never fetched
//! nor decoded) and a keep-mask per decoded batch for the rest
//! ([`selection`]). Row indexes are always physical: a row's index is
//! its position in the whole file, derived from row-group row counts, never
//! from its position in an output batch (see [`selection`]).
//!
//! | file | what it does |
//! |---|---|
//! | `mod.rs` | [`plan`]: the snapshot's live files, skipped by partition values and `add.stats` ([`ScanFile`]); [`split`] into row-group ranges; reading: [`read_file`], [`stream_file`], [`stream_snapshot`] / [`stream_files`] with files read ahead ([`read_ahead`], within [`READ_AHEAD_BYTES`]), DVs fetched a read-ahead window at a time, `offset` / `limit` ([`ReadOptions`], [`rows_window_files`]) |
//! | [`selection`] | a deletion vector → a parquet row selection and per-batch keep-masks, by physical row index (pure) |
//! | `late` | exact filters evaluated while decoding: the filter's columns first, the others at the rows it keeps (late materialisation) |
//! | [`pruning`] | parquet row-group statistics for a predicate's columns; Delta → parquet column matching (pure) |
//! | [`conform`] | a column as read from a file → the table's logical type (missing children, field ids, type widening, variants) |
//! | [`task`] | scan tasks as serializable data, so executors read files without replaying the log |
//! | [`cdf`] | Change Data Feed reads: a version range → scan tasks carrying each row's change type |
//!
//! Storage and the runtime are reached through [`crate::io`] only.

pub mod cdf;
pub mod conform;
mod late;
pub mod pruning;
pub mod selection;
/// Streaming source reads: a micro-batch's files as tasks, and its end offset.
pub mod stream;
/// Change-feed streams (`readChangeFeed`): a micro-batch's change tasks, and its end offset.
pub mod stream_cdf;
pub mod task;

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{new_null_array, ArrayRef, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use futures::{StreamExt, TryStreamExt};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, RowSelectionPolicy};
use parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use parquet::arrow::ProjectionMask;
use roaring::RoaringTreemap;

use crate::error::{Error, Result};
use crate::expr::{Predicate, PruningStats};
use crate::format::descriptor::DeletionVectorDescriptor;
use crate::io::TableStore;
use crate::log::schema::{self, ColumnMappingMode, StructType};
use crate::table::dv;
use crate::table::snapshot::Snapshot;

/// Name of the optional metadata column with each row's physical index (int64,
/// like Spark's `_metadata.row_index`).
pub const ROW_INDEX_COLUMN: &str = "_row_index";
/// Name of the optional metadata column with each row's data file path.
pub const FILE_PATH_COLUMN: &str = "_file_path";
/// Name of the optional row tracking column with each row's stable id (int64,
/// Delta Spark's `_metadata.row_id`).
pub const ROW_ID_COLUMN: &str = "_row_id";
/// Name of the optional row tracking column with the version that last
/// changed each row (int64, Delta Spark's `_metadata.row_commit_version`).
pub const ROW_COMMIT_VERSION_COLUMN: &str = "_row_commit_version";

/// Where a table that tracks rows keeps them: the hidden columns rewritten
/// files materialize row ids and commit versions in
/// (`delta.rowTracking.materialized…ColumnName`; None when not named).
/// Scan tasks carry them to the executors as JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RowTrackingColumns {
    pub row_id: Option<String>,
    pub row_commit_version: Option<String>,
}

impl RowTrackingColumns {
    /// Those of the table of `snapshot`; an error when its protocol does not
    /// support row tracking (its rows have no ids to read).
    pub fn of(snapshot: &Snapshot) -> Result<RowTrackingColumns> {
        if !crate::log::features::is_supported(snapshot.protocol(), "rowTracking") {
            return Err(Error::InvalidArgument(format!(
                "the table does not track rows (its protocol lacks the rowTracking feature; \
                 create it with {}=true): no {ROW_ID_COLUMN} / {ROW_COMMIT_VERSION_COLUMN} to read",
                crate::log::features::ENABLE_ROW_TRACKING
            )));
        }
        let properties = crate::log::features::properties::TableProperties::of(snapshot.metadata());
        let (row_id, row_commit_version) = match properties.materialized_row_tracking_columns() {
            Some((id, version)) => (Some(id.to_string()), Some(version.to_string())),
            None => (None, None),
        };
        Ok(RowTrackingColumns {
            row_id,
            row_commit_version,
        })
    }
}

/// One data file to read (or a row-group range of it).
#[derive(Debug, Clone)]
pub struct ScanFile {
    /// Path relative to the table root (URL-decoded) or an absolute URI.
    pub path: String,
    pub size: u64,
    pub partition_values: HashMap<String, Option<String>>,
    pub deletion_vector: Option<DeletionVectorDescriptor>,
    /// Row groups to read (all when `None`).
    pub row_groups: Option<Vec<usize>>,
    /// The file's `baseRowId` (row tracking).
    pub base_row_id: Option<i64>,
    /// The file's `defaultRowCommitVersion` (row tracking).
    pub default_row_commit_version: Option<i64>,
}

impl ScanFile {
    /// The whole of the data file of `add` (its DV applied when read with
    /// [`DeletedRows::Load`]).
    pub fn of_add(add: &crate::log::actions::Add) -> ScanFile {
        ScanFile {
            path: crate::log::path::normalize_path(&add.path),
            size: u64::try_from(add.size).unwrap_or(0),
            partition_values: add.partition_values.clone(),
            deletion_vector: add.deletion_vector.clone(),
            row_groups: None,
            base_row_id: add.base_row_id,
            default_row_commit_version: add.default_row_commit_version,
        }
    }
}

/// What a scan reads and returns.
#[derive(Debug, Clone)]
pub struct ScanSpec {
    pub schema: StructType,
    pub partition_columns: Vec<String>,
    pub column_mapping: ColumnMappingMode,
    /// Logical column names to return (all when `None`), in this order.
    pub columns: Option<Vec<String>>,
    /// Add `_row_index` (physical row index, u64) and `_file_path` columns.
    pub with_metadata_columns: bool,
    /// Prune files and row groups with this predicate.
    pub filter: Option<Arc<Predicate>>,
    /// Also drop the rows it does not match (exact filtering); otherwise the
    /// caller (Spark) applies the filter itself.
    pub filter_rows: bool,
    /// Add `_row_id` and `_row_commit_version` ([`ROW_ID_COLUMN`],
    /// [`ROW_COMMIT_VERSION_COLUMN`]): a materialized value where the file
    /// has one, else the file's `baseRowId` + the row's physical index and
    /// its `defaultRowCommitVersion`, as Delta Spark's `_metadata` shows them.
    pub row_tracking: Option<RowTrackingColumns>,
    /// Return the table's string and binary values (top-level or nested) as
    /// `Utf8View` / `BinaryView` rather than `Utf8` / `Binary`: decoded from
    /// the file without gathering the bytes of each value into one buffer,
    /// and taken without a copy by readers that keep strings as views
    /// (polars). The metadata columns keep their types.
    pub string_view: bool,
}

impl ScanSpec {
    pub fn for_snapshot(snapshot: &Snapshot, columns: Option<Vec<String>>) -> Self {
        ScanSpec {
            schema: snapshot.schema().clone(),
            partition_columns: snapshot.metadata().partition_columns.clone(),
            column_mapping: snapshot.column_mapping(),
            columns,
            with_metadata_columns: false,
            filter: None,
            filter_rows: false,
            row_tracking: None,
            string_view: false,
        }
    }

    /// Whether `name` is one of the metadata or row tracking columns this
    /// scan adds (not a table column).
    pub fn is_added_column(&self, name: &str) -> bool {
        (self.with_metadata_columns && (name == ROW_INDEX_COLUMN || name == FILE_PATH_COLUMN))
            || (self.row_tracking.is_some()
                && (name == ROW_ID_COLUMN || name == ROW_COMMIT_VERSION_COLUMN))
    }

    /// The output schema: the requested logical columns (table order when
    /// none are named), then the metadata columns if asked for.
    pub fn output_schema(&self) -> Result<SchemaRef> {
        let logical = self.schema.to_arrow(ColumnMappingMode::None, false)?;
        let logical = if self.string_view {
            Schema::new(
                logical
                    .fields()
                    .iter()
                    .map(|f| as_views(f))
                    .collect::<Vec<_>>(),
            )
        } else {
            logical
        };
        let mut fields: Vec<Field> = match &self.columns {
            None => logical
                .fields()
                .iter()
                .map(|f| f.as_ref().clone())
                .collect(),
            Some(names) => names
                .iter()
                .map(|n| {
                    logical.field_with_name(n).cloned().map_err(|_| {
                        Error::InvalidArgument(format!("no column {n:?} in the table"))
                    })
                })
                .collect::<Result<_>>()?,
        };
        if self.with_metadata_columns {
            fields.push(Field::new(ROW_INDEX_COLUMN, DataType::Int64, false));
            fields.push(Field::new(FILE_PATH_COLUMN, DataType::Utf8, false));
        }
        if self.row_tracking.is_some() {
            fields.push(Field::new(ROW_ID_COLUMN, DataType::Int64, true));
            fields.push(Field::new(ROW_COMMIT_VERSION_COLUMN, DataType::Int64, true));
        }
        Ok(Arc::new(Schema::new(fields)))
    }
}

/// `field` with its strings and binaries, at any depth, as views
/// ([`ScanSpec::string_view`]).
fn as_views(field: &Field) -> Field {
    field.clone().with_data_type(view_type(field.data_type()))
}

fn view_type(data_type: &DataType) -> DataType {
    match data_type {
        DataType::Utf8 | DataType::LargeUtf8 => DataType::Utf8View,
        DataType::Binary | DataType::LargeBinary => DataType::BinaryView,
        DataType::Struct(fields) => {
            DataType::Struct(fields.iter().map(|f| Arc::new(as_views(f))).collect())
        }
        DataType::List(item) => DataType::List(Arc::new(as_views(item))),
        DataType::LargeList(item) => DataType::LargeList(Arc::new(as_views(item))),
        DataType::Map(entries, sorted) => DataType::Map(Arc::new(as_views(entries)), *sorted),
        other => other.clone(),
    }
}

/// The files of a snapshot to read (one per file): those a `filter` cannot
/// rule out from their partition values and stats, and never files whose
/// rows are all deleted.
pub fn plan(snapshot: &Snapshot, filter: Option<&Predicate>) -> Result<Vec<ScanFile>> {
    Ok(plan_with_rows(snapshot, filter)?
        .into_iter()
        .map(|(file, _)| file)
        .collect())
}

/// [`plan`], each file with its live rows when the log says (numRecords −
/// DV cardinality; None without numRecords).
pub fn plan_with_rows(
    snapshot: &Snapshot,
    filter: Option<&Predicate>,
) -> Result<Vec<(ScanFile, Option<u64>)>> {
    Ok(snapshot
        .files()?
        .into_iter()
        .filter(|f| f.logical_rows() != Some(0))
        .filter(|f| match filter {
            None => true,
            Some(p) => {
                let stats = PruningStats::parse(f.add.stats.as_deref());
                p.may_match_file(&f.add.partition_values, Some(&stats))
            }
        })
        .map(|f| {
            let rows = f.logical_rows().and_then(|n| u64::try_from(n).ok());
            let file = ScanFile {
                size: u64::try_from(f.add.size).unwrap_or(0),
                partition_values: f.add.partition_values,
                deletion_vector: f.add.deletion_vector,
                row_groups: None,
                base_row_id: f.add.base_row_id,
                default_row_commit_version: f.add.default_row_commit_version,
                path: f.path,
            };
            (file, rows)
        })
        .collect())
}

/// Which of a scan's files (their live rows from the log, in scan order;
/// None where unknown) a read of rows `offset ..` (`limit` of them, all when
/// None) needs: `(first, end, offset_left)`, files `first .. end`, the
/// first `offset_left` rows of which are still to be skipped. Files before
/// `first` hold only skipped rows; files from `end` on only rows past the
/// limit (as Delta Spark's limit pushdown, by numRecords − DV cardinality);
/// a file of unknown rows is never skipped past. Only for scans that return
/// every live row of a file (no filter).
pub fn rows_window_files(
    rows: &[Option<u64>],
    offset: u64,
    limit: Option<u64>,
) -> (usize, usize, u64) {
    let mut first = 0;
    let mut offset_left = offset;
    while let Some(Some(n)) = rows.get(first) {
        if *n > offset_left {
            break;
        }
        offset_left -= n;
        first += 1;
    }
    let Some(limit) = limit else {
        return (first, rows.len(), offset_left);
    };
    let needed = offset_left.saturating_add(limit);
    let mut end = first;
    let mut known = 0u64;
    while known < needed {
        let Some(n) = rows.get(end) else {
            break;
        };
        known = known.saturating_add(n.unwrap_or(0));
        end += 1;
    }
    (first, end, offset_left)
}

/// How many footers [`split`] fetches at once.
const FOOTER_CONCURRENCY: usize = 16;

/// Split files larger than `split_size` bytes into several scan files by row
/// groups (consecutive row groups up to about `split_size` compressed bytes
/// each), dropping row groups the spec's filter rules out. Smaller files are
/// returned unchanged (their row groups are pruned when read).
pub async fn split(
    store: &TableStore,
    spec: &ScanSpec,
    files: Vec<ScanFile>,
    split_size: u64,
) -> Result<Vec<ScanFile>> {
    let split_size = split_size.max(1);
    let results: Vec<Result<Vec<ScanFile>>> = futures::stream::iter(files)
        .map(|file| async move {
            if file.size <= split_size || file.row_groups.is_some() {
                return Ok(vec![file]);
            }
            let meta = load_metadata(store, &file).await?;
            let chosen = prune_row_groups(spec, &meta, None)?;
            let mut out = Vec::new();
            let mut current: Vec<usize> = Vec::new();
            let mut bytes = 0u64;
            for i in chosen {
                let rg_bytes = meta
                    .metadata()
                    .row_groups()
                    .get(i)
                    .map_or(0, |rg| u64::try_from(rg.compressed_size()).unwrap_or(0));
                if !current.is_empty() && bytes + rg_bytes > split_size {
                    out.push(ScanFile {
                        row_groups: Some(std::mem::take(&mut current)),
                        ..file.clone()
                    });
                    bytes = 0;
                }
                current.push(i);
                bytes += rg_bytes;
            }
            if !current.is_empty() {
                out.push(ScanFile {
                    row_groups: Some(current),
                    ..file.clone()
                });
            }
            Ok(out)
        })
        .buffered(FOOTER_CONCURRENCY)
        .collect()
        .await;
    let mut out = Vec::new();
    for r in results {
        out.extend(r?);
    }
    Ok(out)
}

/// Number of rows of a data file, from its parquet footer.
pub async fn file_row_count(store: &TableStore, path: &str, size: u64) -> Result<u64> {
    let meta = load_metadata_for(store, path, size).await?;
    let n = meta.metadata().file_metadata().num_rows();
    u64::try_from(n).map_err(|_| parquet_error(path, format!("footer says the file has {n} rows")))
}

/// Rows of each row group of a data file. A negative count is a corrupt
/// footer: counted as 0, it would shift every row index after it.
pub(crate) fn row_group_rows(
    meta: &parquet::file::metadata::ParquetMetaData,
    path: &str,
) -> Result<Vec<u64>> {
    meta.row_groups()
        .iter()
        .enumerate()
        .map(|(i, rg)| {
            u64::try_from(rg.num_rows()).map_err(|_| {
                parquet_error(
                    path,
                    format!("footer says row group {i} has {} rows", rg.num_rows()),
                )
            })
        })
        .collect()
}

/// Footers read at once by [`count_rows`].
const COUNT_CONCURRENCY: usize = 8;

/// The table's live row count: Σ numRecords − Σ DV cardinality, from the log;
/// files whose stats lack numRecords have their parquet footer read instead
/// (only those, a few at a time).
pub async fn count_rows(snapshot: &Snapshot) -> Result<u64> {
    let store = snapshot.store();
    let mut known: u64 = 0;
    let mut unknown = Vec::new();
    for f in snapshot.files()? {
        let deleted = f
            .add
            .deletion_vector
            .as_ref()
            .map_or(0, |d| d.cardinality());
        match f.num_records {
            Some(n) => known += u64::try_from(n).unwrap_or(0).saturating_sub(deleted),
            None => unknown.push((f.path, u64::try_from(f.add.size).unwrap_or(0), deleted)),
        }
    }
    let counted: Vec<u64> = futures::stream::iter(unknown)
        .map(|(path, size, deleted)| async move {
            let rows = file_row_count(store, &path, size).await?;
            Ok::<u64, Error>(rows.saturating_sub(deleted))
        })
        .buffer_unordered(COUNT_CONCURRENCY)
        .try_collect()
        .await?;
    Ok(known + counted.iter().sum::<u64>())
}

/// Parquet metadata (footer) of the data file at `path` (table-relative,
/// URL-decoded) of `size` bytes, INT96 timestamps read as microseconds.
pub async fn load_metadata_for(
    store: &TableStore,
    path: &str,
    size: u64,
) -> Result<ArrowReaderMetadata> {
    let file = ScanFile {
        path: path.to_string(),
        size,
        partition_values: HashMap::new(),
        deletion_vector: None,
        row_groups: None,
        base_row_id: None,
        default_row_commit_version: None,
    };
    load_metadata(store, &file).await
}

async fn load_metadata(store: &TableStore, file: &ScanFile) -> Result<ArrowReaderMetadata> {
    let location = store.resolve(&file.path)?;
    let mut reader = crate::io::parquet::StoreFileReader::new(store.clone(), location, file.size);
    let meta = ArrowReaderMetadata::load_async(&mut reader, ArrowReaderOptions::new())
        .await
        .map_err(|e| data_file_error(&file.path, e))?;
    int96_as_micros(meta).map_err(|e| parquet_error(&file.path, e))
}

/// Delta Spark writes timestamps as INT96, which arrow-rs reads as
/// nanoseconds by default: years outside 1677..2262 would wrap. Delta's
/// timestamps are microseconds, so read INT96 columns as microseconds.
fn int96_as_micros(meta: ArrowReaderMetadata) -> parquet::errors::Result<ArrowReaderMetadata> {
    use parquet::basic::{LogicalType, TimeUnit, Type as PhysicalType};
    let descr = meta.metadata().file_metadata().schema_descr();
    let int96 = descr
        .columns()
        .iter()
        .any(|c| c.physical_type() == PhysicalType::INT96);
    let nanos = descr.columns().iter().any(|c| {
        matches!(c.logical_type_ref(), Some(LogicalType::Timestamp(t)) if t.unit == TimeUnit::NANOS)
    });
    if !int96 || nanos {
        return Ok(meta);
    }
    fn micros(dt: &DataType) -> DataType {
        use arrow_schema::TimeUnit as Unit;
        match dt {
            DataType::Timestamp(Unit::Nanosecond, tz) => {
                DataType::Timestamp(Unit::Microsecond, tz.clone())
            }
            DataType::Struct(fields) => DataType::Struct(
                fields
                    .iter()
                    .map(|f| Arc::new(f.as_ref().clone().with_data_type(micros(f.data_type()))))
                    .collect::<Vec<_>>()
                    .into(),
            ),
            DataType::List(f) => DataType::List(Arc::new(
                f.as_ref().clone().with_data_type(micros(f.data_type())),
            )),
            DataType::LargeList(f) => DataType::LargeList(Arc::new(
                f.as_ref().clone().with_data_type(micros(f.data_type())),
            )),
            DataType::Map(f, sorted) => DataType::Map(
                Arc::new(f.as_ref().clone().with_data_type(micros(f.data_type()))),
                *sorted,
            ),
            other => other.clone(),
        }
    }
    retyped(meta, |f| micros(f.data_type()))
}

/// `meta` with each top-level column read as `retype` of its Arrow type (a
/// type hint parquet decodes to directly).
fn retyped(
    meta: ArrowReaderMetadata,
    retype: impl Fn(&Field) -> DataType,
) -> parquet::errors::Result<ArrowReaderMetadata> {
    let hinted: Vec<Field> = meta
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_data_type(retype(f)))
        .collect();
    let schema = Arc::new(Schema::new_with_metadata(
        hinted,
        meta.schema().metadata().clone(),
    ));
    ArrowReaderMetadata::try_new(
        meta.metadata().clone(),
        ArrowReaderOptions::new().with_schema(schema),
    )
}

/// `meta` with top-level string columns read in a form the keep-mask filters
/// cheaply (the scan casts them back to the table's type after dropping the
/// deleted rows): as dictionaries where every data page of the column is
/// dictionary-encoded (the filter moves 4-byte keys, the cast gathers each
/// kept string once), else as `Utf8View` (the filter moves 16-byte views).
fn strings_for_masking(meta: ArrowReaderMetadata) -> parquet::errors::Result<ArrowReaderMetadata> {
    let has_strings = meta
        .schema()
        .fields()
        .iter()
        .any(|f| f.data_type() == &DataType::Utf8);
    if !has_strings {
        return Ok(meta);
    }
    let parquet = meta.metadata().clone();
    let dictionary_only = |name: &str| {
        let columns = parquet.file_metadata().schema_descr().columns();
        let Some(index) = columns
            .iter()
            .position(|c| c.path().parts() == [name.to_string()])
        else {
            return false;
        };
        parquet.row_groups().iter().all(|rg| {
            rg.columns().get(index).is_some_and(|c| {
                c.dictionary_page_offset().is_some()
                    && c.page_encoding_stats_mask().is_some_and(|mask| {
                        mask.is_only(parquet::basic::Encoding::RLE_DICTIONARY)
                            || mask.is_only(parquet::basic::Encoding::PLAIN_DICTIONARY)
                    })
            })
        })
    };
    retyped(meta, |f| match f.data_type() {
        DataType::Utf8 if dictionary_only(f.name()) => {
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
        }
        DataType::Utf8 => DataType::Utf8View,
        other => other.clone(),
    })
}

/// A run of deleted rows at least this long can cover a whole data page
/// (writers cut pages at 20,000 rows at most by default, often far fewer),
/// so it is worth reading the file's offset index to skip such pages.
const PAGE_SKIP_MIN_RUN: usize = 4096;

/// `meta` with the file's offset index (page locations) loaded, if the file
/// has one and it is not loaded yet; the reader then fetches only the pages
/// holding selected rows.
async fn with_offset_index(
    reader: &mut crate::io::parquet::StoreFileReader,
    meta: ArrowReaderMetadata,
) -> parquet::errors::Result<ArrowReaderMetadata> {
    use parquet::file::metadata::{PageIndexPolicy, ParquetMetaDataReader};
    if meta.metadata().page_index().is_some() {
        return Ok(meta);
    }
    let mut loader = ParquetMetaDataReader::new_with_metadata(meta.metadata().as_ref().clone())
        .with_column_index_policy(PageIndexPolicy::Skip)
        .with_offset_index_policy(PageIndexPolicy::Optional);
    loader.load_page_index(reader).await?;
    let loaded = loader.finish()?;
    ArrowReaderMetadata::try_new(
        Arc::new(loaded),
        ArrowReaderOptions::new().with_schema(meta.schema().clone()),
    )
}

/// The row groups of a file (all, or `candidates`) that the spec's filter
/// cannot rule out from their parquet statistics.
fn prune_row_groups(
    spec: &ScanSpec,
    meta: &ArrowReaderMetadata,
    candidates: Option<&[usize]>,
) -> Result<Vec<usize>> {
    let row_groups = meta.metadata().row_groups();
    let all: Vec<usize> = match candidates {
        Some(c) => c.to_vec(),
        None => (0..row_groups.len()).collect(),
    };
    let Some(filter) = spec.filter.as_deref() else {
        return Ok(all);
    };
    let file_schema = meta.schema();
    let descr = meta.metadata().file_metadata().schema_descr();
    let mut leaves = Vec::with_capacity(filter.columns().len());
    for c in filter.columns() {
        if c.partition {
            leaves.push(None);
            continue;
        }
        let root = c.logical.first().and_then(|n| spec.schema.field(n));
        let leaf = match (root, c.physical.first()) {
            (Some(field), Some(physical)) => {
                let idx = pruning::resolve_field(
                    file_schema.fields(),
                    field,
                    physical,
                    spec.column_mapping,
                );
                let name = idx
                    .and_then(|i| file_schema.fields().get(i))
                    .map(|f| f.name().clone());
                pruning::find_leaf(descr, c, name.as_deref())
            }
            _ => pruning::Leaf::Unknown,
        };
        leaves.push(Some(leaf));
    }
    Ok(all
        .into_iter()
        .filter(|&i| {
            let Some(rg) = row_groups.get(i) else {
                return true;
            };
            filter.may_match(&|ci| {
                let c = filter.columns().get(ci)?;
                let leaf = leaves.get(ci)?.as_ref()?;
                pruning::row_group_stats(rg, c, leaf)
            })
        })
        .collect())
}

/// A failure reading data file `file`: one that is gone from storage is
/// [`Error::MissingDataFile`], anything else [`Error::Parquet`].
pub(crate) fn data_file_error(file: &str, e: parquet::errors::ParquetError) -> Error {
    if let parquet::errors::ParquetError::External(inner) = &e {
        if let Some(Error::NotFound { .. }) = inner.downcast_ref::<Error>() {
            return Error::MissingDataFile {
                path: file.to_string(),
            };
        }
    }
    parquet_error(file, e)
}

pub(crate) fn parquet_error(file: &str, e: impl std::fmt::Display) -> Error {
    Error::Parquet {
        file: file.to_string(),
        detail: e.to_string(),
    }
}

/// A stream of record batches: pulled one at a time, never collected.
pub type BatchStream = futures::stream::BoxStream<'static, Result<RecordBatch>>;

/// Read one scan file into memory (see [`stream_file`], which this collects:
/// for tests and callers that need a whole file, e.g. a copy-on-write rewrite).
pub async fn read_file(
    store: &TableStore,
    spec: &ScanSpec,
    file: &ScanFile,
) -> Result<Vec<RecordBatch>> {
    stream_file(store, spec, file, DeletedRows::Load)
        .await?
        .try_collect()
        .await
}

/// Where a file's deleted rows come from.
pub enum DeletedRows {
    /// Fetch the file's DV: by [`stream_file`], one ranged GET if any row
    /// group is read; by [`stream_files`], together with those of the files
    /// of its read-ahead window (one coalesced GET per DV file).
    Load,
    /// Already loaded, e.g. several files' DVs in one coalesced fetch.
    Known(Option<RoaringTreemap>),
    /// Read only these rows, whatever the file's DV says (the change data
    /// feed reads the rows a new DV deletes this way).
    KeepOnly(RoaringTreemap),
}

/// Stream one scan file: DV applied as a row selection, row groups the filter
/// rules out (or the DV empties) skipped, columns projected by physical name
/// (or field id), renamed to logical names and cast to the table's types,
/// partition columns filled in, columns missing from the file as nulls; with
/// `filter_rows`, only the rows the filter matches. The footer and the DV are
/// read before this returns; batches are decoded as they are pulled, in the
/// caller's task, one row group after another (see [`stream_files`] for a
/// file's row groups decoded in parallel).
pub async fn stream_file(
    store: &TableStore,
    spec: &ScanSpec,
    file: &ScanFile,
    deleted: DeletedRows,
) -> Result<BatchStream> {
    match open_file(store, spec, file, deleted).await? {
        Some(open) => open.whole().stream(),
        None => Ok(futures::stream::empty().boxed()),
    }
}

/// A data file opened for reading: its footer (with the offset index where
/// long deleted runs make it worth one more GET), its deleted rows, the
/// selection of rows to read, and how the reader's batches become the scan's.
/// Its row groups are read as one stream ([`OpenFile::whole`]) or as pieces
/// read apart ([`OpenFile::pieces`]).
struct OpenFile {
    /// The scan's spec, with the exact filter's columns added when `filter`
    /// is applied to decoded batches.
    spec: Arc<ScanSpec>,
    file: Arc<ScanFile>,
    meta: ArrowReaderMetadata,
    reader: crate::io::parquet::StoreFileReader,
    /// What `spec` returns, and where each of its columns comes from.
    out_schema: SchemaRef,
    sources: Vec<Source>,
    mask: ProjectionMask,
    row_group_rows: Vec<u64>,
    /// The rows to read (at least one row group).
    plan: selection::SelectionPlan,
    /// Deleted rows the plan reads (short runs), dropped by a keep-mask per
    /// batch; None when the plan is exact.
    deleted: Option<Arc<RoaringTreemap>>,
    /// With exact filtering (`filter_rows`) applied to decoded batches: the
    /// predicate, and where the scan's output columns are among `spec`'s.
    filter: Option<(Arc<Predicate>, Vec<usize>)>,
    /// With exact filtering applied while decoding (late materialisation):
    /// the predicate, evaluated on its own columns first (`filter` is None).
    late: Option<late::LateFilter>,
}

/// Some row groups of an [`OpenFile`] (consecutive among those it reads),
/// read as one stream: its plan is the file's cut at its row groups, so its
/// row indexes stay physical (file-global).
struct FilePiece {
    file: Arc<OpenFile>,
    plan: selection::SelectionPlan,
    /// Rows per decoded batch.
    batch_rows: usize,
}

/// Compressed bytes below which a file's next row group joins the same
/// [`FilePiece`]: small row groups are not worth a reader of their own.
const PIECE_MIN_BYTES: u64 = 1 << 20;

impl OpenFile {
    /// All its row groups, as one piece.
    fn whole(self: Arc<Self>) -> FilePiece {
        let plan = self.plan.clone();
        FilePiece {
            file: self,
            plan,
            batch_rows: BATCH_ROWS,
        }
    }

    /// Its row groups cut into pieces of consecutive row groups of at least
    /// `min_bytes` compressed each (the last one may be smaller), to be
    /// decoded in parallel into batches of `batch_rows` rows.
    fn pieces(self: Arc<Self>, min_bytes: u64, batch_rows: usize) -> Result<Vec<FilePiece>> {
        let row_groups = self.meta.metadata().row_groups();
        let bytes: Vec<u64> = self
            .plan
            .row_groups
            .iter()
            .map(|&i| {
                row_groups
                    .get(i)
                    .map_or(0, |rg| u64::try_from(rg.compressed_size()).unwrap_or(0))
            })
            .collect();
        let sizes = piece_sizes(&bytes, min_bytes);
        let plans = self.plan.clone().split(
            &self.row_group_rows,
            &sizes,
            self.deleted.as_deref(),
            &self.file.path,
        )?;
        Ok(plans
            .into_iter()
            .map(|plan| FilePiece {
                file: self.clone(),
                plan,
                batch_rows,
            })
            .collect())
    }
}

/// Cut items of `bytes` each into consecutive runs of at least `min` bytes
/// (the last run may be smaller): the length of each run.
fn piece_sizes(bytes: &[u64], min: u64) -> Vec<usize> {
    let mut sizes = Vec::new();
    let (mut count, mut acc) = (0usize, 0u64);
    for b in bytes {
        count += 1;
        acc = acc.saturating_add(*b);
        if acc >= min {
            sizes.push(count);
            (count, acc) = (0, 0);
        }
    }
    if count > 0 {
        sizes.push(count);
    }
    sizes
}

impl FilePiece {
    /// Its batches, decoded as they are pulled.
    fn stream(self) -> Result<BatchStream> {
        let open = &self.file;
        let path = open.file.path.clone();
        let mut builder = ParquetRecordBatchStreamBuilder::new_with_metadata(
            open.reader.clone(),
            open.meta.clone(),
        )
        .with_projection(open.mask.clone())
        .with_row_groups(self.plan.row_groups.clone())
        .with_batch_size(self.batch_rows.max(1));
        if !self.plan.reads_whole_row_groups() {
            // Every skip is a run of at least SKIP_MIN_RUN rows: skipped as
            // runs (whole pages with the offset index), never via a mask.
            builder = builder
                .with_row_selection(self.plan.selection.clone())
                .with_row_selection_policy(RowSelectionPolicy::Selectors);
        }
        // Only the shorter runs the selection keeps are masked per batch.
        let deleted = open.deleted.clone().filter(|_| self.plan.masked > 0);
        let kept = selection::KeptRows::new(self.plan.kept);
        let failure = late::Failure::default();
        let (kept, deleted) = match &open.late {
            // The predicate masks the deleted rows too: the reader returns
            // only rows to keep (and no output needs their indexes).
            Some(late) => {
                builder = builder
                    .with_row_filter(late.row_filter(
                        open.file.clone(),
                        kept,
                        deleted,
                        failure.clone(),
                    ))
                    .with_max_predicate_cache_size(late::PREDICATE_CACHE_BYTES);
                (selection::KeptRows::new(Vec::new()), None)
            }
            None => (kept, deleted),
        };
        let stream = builder.build().map_err(|e| parquet_error(&path, e))?;
        let mut shape = BatchShape {
            out_schema: open.out_schema.clone(),
            sources: open.sources.clone(),
            spec: open.spec.clone(),
            file: open.file.clone(),
            kept,
            deleted,
            path_column: None,
        };
        let shaped = {
            let path = path.clone();
            stream.map(move |batch| {
                batch
                    .map_err(|e| failure.take().unwrap_or_else(|| data_file_error(&path, e)))
                    .and_then(|b| shape.apply(b))
            })
        };
        let Some((filter, indexes)) = open.filter.clone() else {
            // a batch the DV empties is not handed on
            return Ok(shaped
                .try_filter(|b| futures::future::ready(b.num_rows() > 0))
                .boxed());
        };
        Ok(shaped
            .try_filter_map(move |batch| {
                let out = filter.filter(&batch).and_then(|kept| {
                    if kept.num_rows() == 0 {
                        return Ok(None);
                    }
                    kept.project(&indexes)
                        .map(Some)
                        .map_err(|e| parquet_error(&path, e))
                });
                futures::future::ready(out)
            })
            .boxed())
    }
}

/// Open `file` for reading (see [`OpenFile`]); None when it has no row to
/// read (the filter or the DV rules out every row group).
async fn open_file(
    store: &TableStore,
    spec: &ScanSpec,
    file: &ScanFile,
    deleted: DeletedRows,
) -> Result<Option<Arc<OpenFile>>> {
    open_file_with(store, spec, file, futures::future::ready(Ok(deleted))).await
}

/// [`open_file`], its deleted rows from `deleted`, awaited together with
/// the file's footer (e.g. the DVs of its window being fetched).
async fn open_file_with(
    store: &TableStore,
    spec: &ScanSpec,
    file: &ScanFile,
    deleted: impl std::future::Future<Output = Result<DeletedRows>>,
) -> Result<Option<Arc<OpenFile>>> {
    let (meta, deleted) = futures::try_join!(load_metadata(store, file), deleted)?;
    let chosen = prune_row_groups(spec, &meta, file.row_groups.as_deref())?;
    if chosen.is_empty() {
        return Ok(None);
    }
    let location = store.resolve(&file.path)?;
    let mut reader = crate::io::parquet::StoreFileReader::new(store.clone(), location, file.size);
    let row_group_rows = row_group_rows(meta.metadata(), &file.path)?;
    let deleted: Option<RoaringTreemap> = match (deleted, &file.deletion_vector) {
        (DeletedRows::Known(map), _) => map,
        (DeletedRows::KeepOnly(keep), _) => {
            let total: u64 = row_group_rows.iter().sum();
            if let Some(max) = keep.max().filter(|m| *m >= total) {
                return Err(Error::CorruptLog {
                    file: file.path.clone(),
                    detail: format!(
                        "a deletion vector names row {max}, but the file has only {total} rows"
                    ),
                });
            }
            let mut others = RoaringTreemap::new();
            others.insert_range(0..total);
            others -= keep;
            Some(others)
        }
        (DeletedRows::Load, Some(d)) => Some(dv::load_one(store, d).await?),
        (DeletedRows::Load, None) => None,
    };
    let plan = selection::plan(
        &row_group_rows,
        &chosen,
        deleted.as_ref(),
        SKIP_MIN_RUN,
        &file.path,
    )?;
    // Only the shorter runs the selection keeps are masked per batch.
    let deleted = deleted.filter(|_| plan.masked > 0).map(Arc::new);
    if plan.row_groups.is_empty() {
        // Every row the scan would read is deleted: nothing is fetched.
        return Ok(None);
    }
    // Deleted runs long enough to empty whole data pages: with the file's
    // offset index (one more ranged GET), those pages are not fetched at all.
    let meta = if plan.longest_skip() >= PAGE_SKIP_MIN_RUN {
        with_offset_index(&mut reader, meta)
            .await
            .map_err(|e| data_file_error(&file.path, e))?
    } else {
        meta
    };
    // With exact filtering, the filter's columns are decoded first and the
    // others only at the rows it keeps (late materialisation) where it can;
    // otherwise they are all decoded, then filtered.
    let exact = spec.filter.clone().filter(|_| spec.filter_rows);
    let out_schema = spec.output_schema()?;
    let (sources, wanted_roots) = sources_for(spec, &out_schema, meta.schema())?;
    let late = match &exact {
        Some(filter) => late::LateFilter::of(filter, spec, &sources, &wanted_roots, &meta)?,
        None => None,
    };
    let (spec, out_schema, sources, wanted_roots, filter) = match exact {
        Some(filter) if late.is_none() => {
            // Read the filter's columns too, filter, then project to what
            // was asked.
            let mut columns: Vec<String> = out_schema
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .filter(|n| !spec.is_added_column(n))
                .collect();
            for c in filter.columns() {
                if let Some(root) = c.logical.first() {
                    if !columns.contains(root) {
                        columns.push(root.clone());
                    }
                }
            }
            let inner = ScanSpec {
                columns: Some(columns),
                ..spec.clone()
            };
            let inner_schema = inner.output_schema()?;
            let indexes: Vec<usize> = out_schema
                .fields()
                .iter()
                .map(|f| {
                    inner_schema
                        .index_of(f.name())
                        .map_err(|e| Error::Schema(e.to_string()))
                })
                .collect::<Result<_>>()?;
            let (sources, roots) = sources_for(&inner, &inner_schema, meta.schema())?;
            (inner, inner_schema, sources, roots, Some((filter, indexes)))
        }
        _ => (spec.clone(), out_schema, sources, wanted_roots, None),
    };
    // Rows the keep-mask drops are decoded, then filtered out of every column:
    // strings read as dictionary keys or views make that filter move 4- or
    // 16-byte items instead of the string bytes, which the cast to the
    // table's type then copies once (with a late filter, the keep-mask is
    // part of it and the other columns are decoded at the kept rows only).
    // Strings returned as views are decoded as views (the reader makes a
    // dictionary page's views once).
    let meta = if spec.string_view {
        retyped(meta, |f| view_type(f.data_type())).map_err(|e| parquet_error(&file.path, e))?
    } else if plan.masked > 0 && late.is_none() {
        strings_for_masking(meta).map_err(|e| parquet_error(&file.path, e))?
    } else {
        meta
    };
    let mask = ProjectionMask::roots(meta.parquet_schema(), wanted_roots);
    // A late filter's reader asks for a row group's filter columns, then for
    // the others: without the offset index (whole chunks either way), they
    // are fetched together, in the GETs of an eager read.
    if let Some(late) = &late {
        if meta.metadata().page_index().is_none() {
            reader =
                reader.with_row_group_chunks(late.chunk_ranges(&meta, &mask, &plan.row_groups));
        }
    }
    Ok(Some(Arc::new(OpenFile {
        spec: Arc::new(spec),
        file: Arc::new(file.clone()),
        meta,
        reader,
        out_schema,
        sources,
        mask,
        row_group_rows,
        plan,
        deleted,
        filter,
        late,
    })))
}

/// Where each column of `out_schema` (what `spec` returns) comes from in a
/// file of `file_schema`, and the file's root columns to read for them.
fn sources_for(
    spec: &ScanSpec,
    out_schema: &SchemaRef,
    file_schema: &Schema,
) -> Result<(Vec<Source>, Vec<usize>)> {
    let mut wanted_roots = Vec::new();
    let mut sources: Vec<Source> = Vec::new();
    for field in out_schema.fields() {
        let name = field.name();
        if spec.is_added_column(name) {
            let tracking = spec.row_tracking.clone().unwrap_or_default();
            // A materialized column the file holds: read it too.
            let mut materialized = |column: Option<String>| {
                let i = column.and_then(|c| file_schema.index_of(&c).ok())?;
                wanted_roots.push(i);
                file_schema.fields().get(i).map(|f| f.name().clone())
            };
            sources.push(match name.as_str() {
                ROW_INDEX_COLUMN => Source::RowIndex,
                FILE_PATH_COLUMN => Source::FilePath,
                ROW_ID_COLUMN => Source::RowId(materialized(tracking.row_id)),
                _ => Source::RowCommitVersion(materialized(tracking.row_commit_version)),
            });
            continue;
        }
        if spec.partition_columns.iter().any(|p| p == name) {
            sources.push(Source::Partition(name.clone()));
            continue;
        }
        let delta_field = spec
            .schema
            .field(name)
            .ok_or_else(|| Error::InvalidArgument(format!("no column {name:?} in the table")))?;
        let physical = delta_field.physical_name(spec.column_mapping)?.to_string();
        match pruning::resolve_field(
            file_schema.fields(),
            delta_field,
            &physical,
            spec.column_mapping,
        ) {
            Some(i) => {
                wanted_roots.push(i);
                let name = file_schema
                    .fields()
                    .get(i)
                    .map_or(physical, |f| f.name().clone());
                sources.push(Source::File(name));
            }
            None => sources.push(Source::Missing),
        }
    }
    Ok((sources, wanted_roots))
}

/// Turns the parquet reader's batches of one file into the scan's output
/// batches (logical names and types, partition and metadata columns).
struct BatchShape {
    out_schema: SchemaRef,
    sources: Vec<Source>,
    spec: Arc<ScanSpec>,
    file: Arc<ScanFile>,
    /// Physical indexes of the rows the reader has still to return, in order.
    kept: selection::KeptRows,
    /// Deleted rows the selection reads (short runs), dropped by a keep-mask
    /// per batch; None when the selection is exact.
    deleted: Option<Arc<RoaringTreemap>>,
    /// One file-path column for the largest batch, sliced (zero-copy) per batch.
    path_column: Option<ArrayRef>,
}

impl BatchShape {
    fn apply(&mut self, batch: RecordBatch) -> Result<RecordBatch> {
        let runs = self.kept.take_runs(batch.num_rows());
        // Drop the deleted rows the selection kept: one keep-mask from the
        // bitmap, one prepared filter for all columns.
        let (batch, keep) = match &self.deleted {
            Some(deleted) => {
                let (keep, dropped) = selection::keep_mask(&runs, deleted);
                if dropped == 0 {
                    (batch, None)
                } else {
                    let keep = arrow_array::BooleanArray::new(keep, None);
                    let kept = arrow_select::filter::filter_record_batch(&batch, &keep)
                        .map_err(|e| parquet_error(&self.file.path, e))?;
                    (kept, Some(keep))
                }
            }
            None => (batch, None),
        };
        let n = batch.num_rows();
        let spec = &self.spec;
        let file = &self.file;
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.out_schema.fields().len());
        for (field, source) in self.out_schema.fields().iter().zip(&self.sources) {
            let column: ArrayRef = match source {
                Source::File(physical) => {
                    let c = batch.column_by_name(physical).cloned().ok_or_else(|| {
                        parquet_error(&file.path, format!("column {physical} vanished"))
                    })?;
                    let logical = spec.schema.field(field.name()).ok_or_else(|| {
                        Error::Schema(format!("column {} not in schema", field.name()))
                    })?;
                    conform::conform(
                        &c,
                        &logical.data_type,
                        field.data_type(),
                        spec.column_mapping,
                        &file.path,
                    )?
                }
                Source::Missing => new_null_array(field.data_type(), n),
                Source::Partition(name) => {
                    let delta = spec.schema.field(name).ok_or_else(|| {
                        Error::Schema(format!("partition column {name} not in schema"))
                    })?;
                    let key = delta.physical_name(spec.column_mapping)?;
                    let raw = file.partition_values.get(key).cloned().flatten();
                    let values = vec![raw.as_deref(); n];
                    let array = schema::partition_array(name, &delta.data_type, &values)?;
                    if array.data_type() == field.data_type() {
                        array
                    } else {
                        // strings as views (ScanSpec::string_view)
                        arrow_cast::cast(&array, field.data_type())
                            .map_err(|e| parquet_error(&file.path, e))?
                    }
                }
                Source::RowIndex => Arc::new(row_indexes(&runs, keep.as_ref())),
                Source::RowId(materialized) => {
                    let base = file.base_row_id;
                    let fill = row_indexes(&runs, keep.as_ref())
                        .values()
                        .iter()
                        .map(|i| base.map(|b| b.saturating_add(*i)))
                        .collect::<Int64Array>();
                    materialized_or(&batch, materialized.as_deref(), fill, &file.path)?
                }
                Source::RowCommitVersion(materialized) => {
                    let fill = Int64Array::from(vec![file.default_row_commit_version; n]);
                    materialized_or(&batch, materialized.as_deref(), fill, &file.path)?
                }
                Source::FilePath => match &self.path_column {
                    Some(a) if a.len() >= n => a.slice(0, n),
                    _ => {
                        let a: ArrayRef = Arc::new(arrow_array::StringArray::from_iter_values(
                            std::iter::repeat_n(file.path.as_str(), n),
                        ));
                        self.path_column = Some(a.clone());
                        a
                    }
                },
            };
            columns.push(column);
        }
        RecordBatch::try_new_with_options(
            self.out_schema.clone(),
            columns,
            &arrow_array::RecordBatchOptions::new().with_row_count(Some(n)),
        )
        .map_err(|e| parquet_error(&file.path, e))
    }
}

/// The physical indexes of the rows `runs` read, less those `keep` drops.
fn row_indexes(runs: &[(u64, u64)], keep: Option<&arrow_array::BooleanArray>) -> Int64Array {
    let index = |i: u64| i64::try_from(i).unwrap_or(i64::MAX);
    let mut out = Vec::new();
    match keep {
        Some(keep) => {
            out.reserve(keep.true_count());
            // positions of kept rows, in order, walked against the runs
            let mut runs = runs.iter();
            let (mut first, mut run_start, mut run_end) = (0u64, 0u64, 0u64);
            for position in keep.values().set_indices() {
                let position = position as u64;
                while position >= run_end {
                    let Some(&(start, len)) = runs.next() else {
                        return Int64Array::from(out);
                    };
                    (first, run_start, run_end) = (start, run_end, run_end + len);
                }
                out.push(index(first + (position - run_start)));
            }
        }
        None => {
            for &(start, len) in runs {
                out.extend((start..start.saturating_add(len)).map(index));
            }
        }
    }
    Int64Array::from(out)
}

/// A row tracking column: the file's materialized values (column
/// `materialized` of `batch`, when the file has it) where not null, else
/// `fill`.
fn materialized_or(
    batch: &RecordBatch,
    materialized: Option<&str>,
    fill: Int64Array,
    path: &str,
) -> Result<ArrayRef> {
    let Some(name) = materialized else {
        return Ok(Arc::new(fill));
    };
    let column = batch
        .column_by_name(name)
        .ok_or_else(|| parquet_error(path, format!("column {name} vanished")))?;
    let column = arrow_cast::cast(column, &DataType::Int64).map_err(|e| parquet_error(path, e))?;
    let values = column
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| parquet_error(path, format!("column {name} is not int64")))?;
    let merged: Int64Array = values
        .iter()
        .zip(fill.iter())
        .map(|(m, f)| m.or(f))
        .collect();
    Ok(Arc::new(merged))
}

#[derive(Clone)]
enum Source {
    File(String),
    Missing,
    Partition(String),
    RowIndex,
    FilePath,
    /// The row id, from this materialized column of the file if any.
    RowId(Option<String>),
    /// The row commit version, from this materialized column if any.
    RowCommitVersion(Option<String>),
}

/// Deleted runs at least this long are skipped by the parquet reader (as
/// row-selection runs: it skips their values, or whole pages with the
/// offset index, without decoding them); shorter ones are decoded and dropped
/// by the batch's keep-mask. Measured on benches/bench_scan.py's random
/// deletes, a selector per deleted row cost 1.3-2.2x the mask; a skip of 1,024
/// rows costs about what decoding them does.
const SKIP_MIN_RUN: u64 = 1024;

/// Rows per decoded batch (arrow-rs defaults to 1,024; 8,192 decodes about
/// 25% faster in benches/bench_scan.py).
pub const BATCH_ROWS: usize = 8192;

/// Rows per decoded batch when the caller keeps every batch anyway
/// (`to_pyarrow_table`): 8x fewer batches to decode, filter by their DVs,
/// cast and hand over. On a 16-core machine (issue 28, session 18) a table
/// of 16 x 1M rows materialised in 110 ms instead of 162-189 (CPU/wall 10
/// instead of 7.5), and in 447-503 ms instead of 563-604 on 2 cores.
pub const MATERIALIZE_BATCH_ROWS: usize = 65_536;

/// Files whose footers (and DVs, when not loaded already) a scan fetches
/// ahead at once by default.
pub const DEFAULT_PREFETCH_FILES: usize = 4;

/// Decoded bytes a piece of a file being read ahead (see [`stream_files`])
/// may hold before the consumer takes them. A piece is a run of row groups
/// of about [`PIECE_MIN_BYTES`] compressed or more (bench_scan.py's row
/// groups of 131,072 rows decode to ~5.5 MB each).
///
/// Memory: a scan with `threads` threads has at most `threads + 1` pieces
/// live, so its peak RSS, beyond the process's baseline, is bounded by about
/// `48 MB + (threads + 1) × 4 × (READ_AHEAD_BYTES + C)`, where `C` is the
/// compressed bytes of the largest row group's projected columns (fetched
/// whole before decoding): linear in the threads. A live piece holds its
/// budget, a batch beyond it waiting for its permit, the consumer's batch,
/// the compressed row group and decode buffers; the allocator keeps some of
/// what each thread freed (the Python extension's runtime threads share
/// jemalloc arenas four to one, see `python::alloc`). Fitted by
/// benches/bench_stream_memory.py (baseline ~72 MB, C = 3.7 MiB), 1 / 2 / 4
/// / 8 / 16 / 32 threads: 125 / 149 / 165 / 252 / 399-438 / 764 MB, i.e.
/// about baseline + 15 MB + 21 MB a thread (an arena per thread, as before:
/// 616 MB at 16).
pub const READ_AHEAD_BYTES: usize = 4 << 20;

/// Decoded bytes a piece may hold ahead of the consumer when the caller
/// keeps every batch anyway (`to_pyarrow_table`): enough for a piece of
/// usual row groups to decode whole ahead, so no piece waits for the one
/// before it to be consumed (with [`READ_AHEAD_BYTES`], the part of each
/// piece beyond the budget is decoded only once it is the consumer's turn,
/// one piece at a time).
pub const MATERIALIZE_READ_AHEAD_BYTES: usize = 256 << 20;

/// How a scan of several files runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// Pieces of files (runs of row groups) decoded at once, each in a task
    /// of its own on the runtime's workers (at least 1).
    pub threads: usize,
    /// Files whose footers (and DVs) are fetched ahead at once.
    pub prefetch_files: usize,
    /// Batches in file order, and in row order within a file (true); or as
    /// their pieces are decoded (false: faster where order does not matter,
    /// e.g. a Spark task, since no piece waits for the one before it).
    pub ordered: bool,
    /// Compressed bytes below which a file's next row group joins the same
    /// piece ([`PIECE_MIN_BYTES`]).
    pub piece_bytes: u64,
    /// Decoded bytes each piece may hold ahead of the consumer
    /// ([`READ_AHEAD_BYTES`]; [`MATERIALIZE_READ_AHEAD_BYTES`] for a caller
    /// that keeps every batch).
    pub read_ahead_bytes: usize,
    /// Rows (after the filter) skipped before the first one returned.
    pub offset: u64,
    /// Rows returned at most (all when None): the scan stops pulling files
    /// once it has them, and cuts the last batch.
    pub limit: Option<u64>,
    /// Rows per decoded batch ([`BATCH_ROWS`]; [`MATERIALIZE_BATCH_ROWS`]
    /// for a caller that keeps every batch).
    pub batch_rows: usize,
}

impl Default for ReadOptions {
    /// [`crate::io::num_threads`] threads, [`DEFAULT_PREFETCH_FILES`],
    /// ordered, pieces of [`PIECE_MIN_BYTES`], every row.
    fn default() -> Self {
        ReadOptions {
            threads: crate::io::num_threads(),
            prefetch_files: DEFAULT_PREFETCH_FILES,
            ordered: true,
            piece_bytes: PIECE_MIN_BYTES,
            read_ahead_bytes: READ_AHEAD_BYTES,
            offset: 0,
            limit: None,
            batch_rows: BATCH_ROWS,
        }
    }
}

/// Read a whole snapshot into memory (see [`stream_snapshot`], which this
/// collects: for tests and small tables).
pub async fn read_snapshot(snapshot: &Snapshot, spec: &ScanSpec) -> Result<Vec<RecordBatch>> {
    stream_snapshot(snapshot, spec, ReadOptions::default())
        .await?
        .try_collect()
        .await
}

/// Stream a whole snapshot (see [`stream_files`], which fetches each file's
/// DV as the file comes into the read-ahead window). With a limit (or an
/// offset) and no filter, files whose live rows the log gives are not read
/// past what the limit needs, nor before what the offset skips (see
/// [`rows_window_files`]).
pub async fn stream_snapshot(
    snapshot: &Snapshot,
    spec: &ScanSpec,
    options: ReadOptions,
) -> Result<BatchStream> {
    let store = snapshot.store().clone();
    let mut files = plan_with_rows(snapshot, spec.filter.as_deref())?;
    let mut options = options;
    if spec.filter.is_none() && (options.offset > 0 || options.limit.is_some()) {
        let rows: Vec<Option<u64>> = files.iter().map(|(_, n)| *n).collect();
        let (first, end, offset_left) = rows_window_files(&rows, options.offset, options.limit);
        files.truncate(end);
        files.drain(..first.min(files.len()));
        options.offset = offset_left;
    }
    let work = files
        .into_iter()
        .map(|(file, _)| (file, DeletedRows::Load))
        .collect();
    Ok(stream_files(store, spec.clone(), work, options))
}

/// Stream `files` (see [`stream_file`] for what is read): up to
/// `prefetch_files` files are opened ahead (footer, DV; each in a task of its
/// own), each file's row groups are cut into pieces (`piece_bytes` or more
/// each), and up to `threads` pieces, of one file or several, are
/// decoded at once on the runtime's workers, each at most
/// [`READ_AHEAD_BYTES`] of batches ahead of the consumer. With `ordered`,
/// the batches come in file order and row order within each file (a piece
/// decoded early waits, within its budget, for those before it); else as
/// they are decoded. Memory stays bounded by `threads` (see
/// [`READ_AHEAD_BYTES`]), whatever the table's size. Must be called within
/// the runtime.
///
/// DVs to [`DeletedRows::Load`] are fetched a window at a time: the files
/// are taken in windows of `prefetch_files`, and when a window's first file
/// comes into the read-ahead, the DVs of the window's files are fetched
/// together (one coalesced GET per DV file they share, see
/// [`dv::load_many`]); a scan stopped early has fetched no DV of a file
/// beyond the window of the last file it opened. With `offset` / `limit`,
/// the first `offset` rows are dropped and the stream ends after `limit`
/// rows, opening no more files.
pub fn stream_files(
    store: TableStore,
    spec: ScanSpec,
    files: Vec<(ScanFile, DeletedRows)>,
    options: ReadOptions,
) -> BatchStream {
    if options.limit == Some(0) {
        return futures::stream::empty().boxed();
    }
    let spec = Arc::new(spec);
    let threads = options.threads.max(1);
    let window = options.prefetch_files.max(1);
    // A footer is fetched when `buffered` takes its file into its window
    // (spawned in the closure), not when its future is first polled:
    // `buffered` polls only until the next future in order is ready, so a
    // lazy start would leave the files ahead unstarted. The pieces are
    // started by a task of their own (`spawn_window`), as soon as fewer than
    // the window are live, whatever the consumer is doing.
    let opened = futures::stream::iter(by_window(&store, files, window))
        .map(move |(file, deleted)| {
            let (store, spec) = (store.clone(), spec.clone());
            crate::io::spawn_now(async move {
                open_file_with(&store, &spec, &file, deleted.resolve()).await
            })
        })
        .buffered(window);
    let (piece_bytes, batch_rows) = (options.piece_bytes, options.batch_rows);
    let pieces = opened
        .map(move |opened| {
            let pieces = |f: Arc<OpenFile>| f.pieces(piece_bytes, batch_rows);
            match opened.and_then(|open| open?.map_or(Ok(Vec::new()), pieces)) {
                Ok(pieces) => futures::stream::iter(pieces.into_iter().map(Ok)).left_stream(),
                Err(e) => futures::stream::once(futures::future::ready(Err(e))).right_stream(),
            }
        })
        .flatten();
    let budget = options.read_ahead_bytes;
    let read = move |piece: Result<FilePiece>| match piece {
        Ok(piece) => read_piece_ahead(piece, budget),
        Err(e) => futures::stream::once(futures::future::ready(Err(e))).boxed(),
    };
    let failed = |why| {
        Err(Error::Internal(format!(
            "scheduling the scan's reads failed: {why}"
        )))
    };
    let batches = if options.ordered {
        // `threads` pieces read ahead, plus the one being consumed.
        crate::io::spawn_window(pieces, threads + 1, read, failed)
            .flatten()
            .boxed()
    } else {
        crate::io::spawn_window(pieces, threads, read, failed)
            .flatten_unordered(None)
            .boxed()
    };
    rows_window(batches, options.offset, options.limit)
}

/// A file's deleted rows as [`stream_files`] opens it: as given, or its DV
/// taken from those of its window.
enum WindowDeletedRows {
    Given(DeletedRows),
    Window(Arc<WindowDvs>, usize),
}

impl WindowDeletedRows {
    async fn resolve(self) -> Result<DeletedRows> {
        match self {
            WindowDeletedRows::Given(deleted) => Ok(deleted),
            WindowDeletedRows::Window(window, i) => Ok(DeletedRows::Known(window.take(i).await?)),
        }
    }
}

/// What a window's DV fetch left: each file's DV until taken; or the fetch's
/// error, for the window's first file with a DV (the one an ordered scan
/// reports first), and its text for the others.
type WindowFetch = std::result::Result<Vec<Option<RoaringTreemap>>, (Option<Error>, String)>;

/// The DVs of a window of files, fetched together ([`dv::load_many`]: one
/// coalesced GET per DV file) by whichever of its files asks first (each
/// file is opened in a task of its own, so the fetch runs whatever the
/// consumer does), then taken by each file.
struct WindowDvs {
    store: TableStore,
    descriptors: Vec<DeletionVectorDescriptor>,
    /// None until fetched.
    loaded: futures::lock::Mutex<Option<WindowFetch>>,
}

impl WindowDvs {
    /// The DV of the window's `i`-th descriptor (fetched with the others on
    /// the first call).
    async fn take(&self, i: usize) -> Result<Option<RoaringTreemap>> {
        let mut loaded = self.loaded.lock().await;
        if loaded.is_none() {
            let refs: Vec<&DeletionVectorDescriptor> = self.descriptors.iter().collect();
            *loaded = Some(match dv::load_many(&self.store, &refs).await {
                Ok(maps) => Ok(maps.into_iter().map(Some).collect()),
                Err(e) => {
                    let text = e.to_string();
                    Err((Some(e), text))
                }
            });
        }
        match loaded.as_mut() {
            Some(Ok(maps)) => Ok(maps.get_mut(i).and_then(Option::take)),
            Some(Err((first, text))) => {
                let first = if i == 0 { first.take() } else { None };
                Err(first.unwrap_or_else(|| {
                    Error::Internal(format!(
                        "the deletion vectors of this file's read-ahead window could not be \
                         fetched: {text}"
                    ))
                }))
            }
            None => Err(Error::Internal(
                "a window's deletion vectors were neither fetched nor failed".to_string(),
            )),
        }
    }
}

/// `files` taken in windows of `window`: those whose DV is to
/// [`DeletedRows::Load`] take it from their window's [`WindowDvs`] (see
/// [`stream_files`]); the others keep theirs.
fn by_window(
    store: &TableStore,
    files: Vec<(ScanFile, DeletedRows)>,
    window: usize,
) -> Vec<(ScanFile, WindowDeletedRows)> {
    let mut out = Vec::with_capacity(files.len());
    let mut files = files.into_iter().peekable();
    while files.peek().is_some() {
        let chunk: Vec<(ScanFile, DeletedRows)> = files.by_ref().take(window.max(1)).collect();
        let descriptors: Vec<DeletionVectorDescriptor> = chunk
            .iter()
            .filter(|(_, deleted)| matches!(deleted, DeletedRows::Load))
            .filter_map(|(file, _)| file.deletion_vector.clone())
            .collect();
        let dvs = Arc::new(WindowDvs {
            store: store.clone(),
            descriptors,
            loaded: futures::lock::Mutex::new(None),
        });
        let mut next = 0;
        for (file, deleted) in chunk {
            let deleted = match (deleted, &file.deletion_vector) {
                (DeletedRows::Load, Some(_)) => {
                    next += 1;
                    WindowDeletedRows::Window(dvs.clone(), next - 1)
                }
                (DeletedRows::Load, None) => WindowDeletedRows::Given(DeletedRows::Known(None)),
                (other, _) => WindowDeletedRows::Given(other),
            };
            out.push((file, deleted));
        }
    }
    out
}

/// `batches` less their first `offset` rows, cut after `limit` rows (all
/// when None): the last batch is sliced, and `batches` is dropped as soon as
/// the limit's last row is out (no more files are opened). A stream error
/// ends it.
fn rows_window(batches: BatchStream, offset: u64, limit: Option<u64>) -> BatchStream {
    if offset == 0 && limit.is_none() {
        return batches;
    }
    futures::stream::unfold(
        (Some(batches), offset, limit),
        |(batches, mut skip, left)| async move {
            let mut batches = batches?;
            if left == Some(0) {
                return None;
            }
            loop {
                let batch = match batches.next().await? {
                    Ok(batch) => batch,
                    Err(e) => return Some((Err(e), (None, skip, left))),
                };
                let rows = u64::try_from(batch.num_rows()).unwrap_or(u64::MAX);
                if skip >= rows {
                    skip -= rows;
                    continue;
                }
                let start = skip;
                let take = (rows - start).min(left.unwrap_or(u64::MAX));
                let left = left.map(|l| l - take);
                let batch = if start == 0 && take == rows {
                    batch
                } else {
                    let index = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
                    batch.slice(index(start), index(take))
                };
                // The limit's last row: drop the reads now.
                let rest = if left == Some(0) { None } else { Some(batches) };
                return Some((Ok(batch), (rest, 0, left)));
            }
        },
    )
    .boxed()
}

/// Start reading `piece` in a runtime task (see [`read_batches_ahead`]).
fn read_piece_ahead(piece: FilePiece, budget: usize) -> BatchStream {
    let path = piece.file.file.path.clone();
    let batches = futures::stream::once(async move {
        match piece.stream() {
            Ok(batches) => batches,
            Err(e) => futures::stream::once(futures::future::ready(Err(e))).boxed(),
        }
    })
    .flatten();
    read_batches_ahead(path, batches, budget)
}

/// `batches` of the file at `path`, produced in a runtime task of their own
/// at most [`READ_AHEAD_BYTES`] ahead of the consumer (the task waits while
/// the consumer is that far behind, and stops if it goes away; the file stops
/// at its first error). Must be called within the runtime.
fn read_batches_ahead(
    path: String,
    batches: impl futures::Stream<Item = Result<RecordBatch>> + Send + 'static,
    budget: usize,
) -> BatchStream {
    // Each batch is read ahead holding its bytes of the budget (an error: one
    // unit).
    crate::io::spawn_read_ahead(
        batches,
        budget,
        |item: &Result<RecordBatch>| item.as_ref().map_or(1, |b| b.get_array_memory_size()),
        Result::is_err,
        move |why| Err(Error::Internal(format!("reading {path} failed: {why}"))),
    )
}

/// Start reading one file in a runtime task, its row groups one after
/// another (see [`stream_file`]), at most [`READ_AHEAD_BYTES`] of batches
/// ahead of the consumer. Must be called within the runtime.
pub fn read_ahead(
    store: TableStore,
    spec: Arc<ScanSpec>,
    file: ScanFile,
    deleted: DeletedRows,
) -> BatchStream {
    let path = file.path.clone();
    let batches = futures::stream::once(async move {
        match stream_file(&store, &spec, &file, deleted).await {
            Ok(batches) => batches,
            Err(e) => futures::stream::once(futures::future::ready(Err(e))).boxed(),
        }
    })
    .flatten();
    read_batches_ahead(path, batches, READ_AHEAD_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::StringArray;
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    #[test]
    fn pieces_of_at_least_min_bytes() {
        assert_eq!(piece_sizes(&[], 10), Vec::<usize>::new());
        assert_eq!(piece_sizes(&[10, 10, 10], 10), vec![1, 1, 1]);
        assert_eq!(piece_sizes(&[10, 10, 10], 1), vec![1, 1, 1]);
        assert_eq!(piece_sizes(&[4, 4, 4, 20, 1], 10), vec![3, 1, 1]);
        assert_eq!(piece_sizes(&[4, 4], 100), vec![2]);
    }

    #[test]
    fn row_indexes_are_the_kept_positions_of_the_runs() {
        // the definition: runs flattened, then the kept positions taken
        let plain = |runs: &[(u64, u64)], keep: Option<&[bool]>| -> Vec<i64> {
            let all = runs.iter().flat_map(|&(s, n)| s..s + n);
            match keep {
                None => all.map(|i| i as i64).collect(),
                Some(k) => all
                    .zip(k)
                    .filter(|(_, k)| **k)
                    .map(|(i, _)| i as i64)
                    .collect(),
            }
        };
        let cases: [&[(u64, u64)]; 4] = [
            &[],
            &[(0, 5)],
            &[(3, 2), (10, 0), (20, 4), (100, 1)],
            &[(7, 1), (8, 3), (1 << 40, 2)],
        ];
        for runs in cases {
            let n: u64 = runs.iter().map(|r| r.1).sum();
            assert_eq!(row_indexes(runs, None).values().to_vec(), plain(runs, None));
            for seed in 0..16u64 {
                // a mask of every shape: shorter, as long as and longer than the runs
                let len = (n + seed % 3).saturating_sub(1) as usize;
                let mask: Vec<bool> = (0..len as u64).map(|i| (i * 7 + seed) % 5 < 2).collect();
                let got = row_indexes(runs, Some(&arrow_array::BooleanArray::from(mask.clone())));
                assert_eq!(
                    got.values().to_vec(),
                    plain(runs, Some(&mask)),
                    "{runs:?} {mask:?}"
                );
            }
        }
    }

    /// Files of `rows` rows each (`id` = a table-wide running number, `s` a
    /// string), row groups of `group` rows, in a temporary folder.
    fn files(rows: &[(u64, usize)]) -> (tempfile::TempDir, TableStore, Vec<ScanFile>) {
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap(), &HashMap::new()).unwrap();
        let mut out = Vec::new();
        let mut first = 0i64;
        for (i, &(n, group)) in rows.iter().enumerate() {
            let n = i64::try_from(n).unwrap();
            let ids = Int64Array::from_iter_values(first..first + n);
            let s: StringArray = (first..first + n).map(|v| Some(format!("s{v}"))).collect();
            first += n;
            let batch = RecordBatch::try_from_iter([
                ("id", Arc::new(ids) as ArrayRef),
                ("s", Arc::new(s) as ArrayRef),
            ])
            .unwrap();
            let props = WriterProperties::builder()
                .set_max_row_group_row_count(Some(group))
                .build();
            let name = format!("part-{i}.parquet");
            let f = std::fs::File::create(dir.path().join(&name)).unwrap();
            let mut writer = ArrowWriter::try_new(f, batch.schema(), Some(props)).unwrap();
            writer.write(&batch).unwrap();
            writer.close().unwrap();
            let size = std::fs::metadata(dir.path().join(&name)).unwrap().len();
            out.push(ScanFile {
                path: name,
                size,
                partition_values: HashMap::new(),
                deletion_vector: None,
                row_groups: None,
                base_row_id: None,
                default_row_commit_version: None,
            });
        }
        (dir, store, out)
    }

    /// Each of `files` with its deleted rows, as already loaded.
    fn known(files: &[ScanFile], dvs: &[Option<RoaringTreemap>]) -> Vec<(ScanFile, DeletedRows)> {
        files
            .iter()
            .cloned()
            .zip(dvs.iter().cloned())
            .map(|(f, d)| (f, DeletedRows::Known(d)))
            .collect()
    }

    fn spec() -> ScanSpec {
        let schema = StructType::parse(
            r#"{"type":"struct","fields":[
                {"name":"id","type":"long","nullable":true,"metadata":{}},
                {"name":"s","type":"string","nullable":true,"metadata":{}}]}"#,
        )
        .unwrap();
        ScanSpec {
            schema,
            partition_columns: Vec::new(),
            column_mapping: ColumnMappingMode::None,
            columns: None,
            with_metadata_columns: true,
            filter: None,
            filter_rows: false,
            row_tracking: None,
            string_view: false,
        }
    }

    /// (file path, row index, id, s) of every row, in order.
    fn rows(batches: &[RecordBatch]) -> Vec<(String, i64, i64, String)> {
        let mut out = Vec::new();
        for b in batches {
            let col = |name: &str| b.column_by_name(name).unwrap().clone();
            let (id, index, s, path) = (
                col("id"),
                col(ROW_INDEX_COLUMN),
                col("s"),
                col(FILE_PATH_COLUMN),
            );
            let id = id.as_any().downcast_ref::<Int64Array>().unwrap();
            let index = index.as_any().downcast_ref::<Int64Array>().unwrap();
            let s = s.as_any().downcast_ref::<StringArray>().unwrap();
            let path = path.as_any().downcast_ref::<StringArray>().unwrap();
            for i in 0..b.num_rows() {
                out.push((
                    path.value(i).to_string(),
                    index.value(i),
                    id.value(i),
                    s.value(i).to_string(),
                ));
            }
        }
        out
    }

    /// Row groups decoded in parallel (pieces of one row group, or of
    /// several; on 1, 2 or 4 threads) return, in order, exactly the rows of
    /// the sequential read, which are the rows the DVs leave (checked
    /// against the DVs themselves): DVs spanning row-group bounds, a row
    /// group the DV empties, a file all of whose rows are deleted, a file
    /// of one row group; unordered, the same rows in some order.
    #[test]
    fn parallel_pieces_return_the_rows_of_the_sequential_read() {
        let layout = [
            (1_000u64, 100usize),
            (300, 100),
            (500, 50),
            (70, 100),
            (400, 64),
        ];
        let (_dir, store, scan_files) = files(&layout);
        let mut dvs: Vec<Option<RoaringTreemap>> = vec![None; layout.len()];
        let mut d0 = RoaringTreemap::new();
        d0.insert_range(95..105); // across rg 0 / rg 1
        d0.insert_range(250..450); // rg 3 emptied, rg 2 and rg 4 in part
        d0.extend((600..700).step_by(7)); // short runs: masked
        d0.insert(999);
        dvs[0] = Some(d0);
        let mut d1 = RoaringTreemap::new();
        d1.insert_range(0..300); // every row: 0 live rows
        dvs[1] = Some(d1);
        dvs[4] = Some((0..400).filter(|i| i % 3 == 0).collect()); // masked everywhere
        let expected: Vec<(String, i64, i64, String)> = {
            let mut out = Vec::new();
            let mut first = 0i64;
            for (i, &(n, _)) in layout.iter().enumerate() {
                for r in 0..n {
                    if dvs[i].as_ref().is_some_and(|d| d.contains(r)) {
                        continue;
                    }
                    let id = first + i64::try_from(r).unwrap();
                    out.push((
                        format!("part-{i}.parquet"),
                        id - first,
                        id,
                        format!("s{id}"),
                    ));
                }
                first += i64::try_from(n).unwrap();
            }
            out
        };
        let work = || known(&scan_files, &dvs);
        let spec = spec();
        let sequential: Vec<RecordBatch> = crate::io::block_on(async {
            let mut all = Vec::new();
            for (file, deleted) in work() {
                let batches: Vec<RecordBatch> = stream_file(&store, &spec, &file, deleted)
                    .await?
                    .try_collect()
                    .await?;
                all.extend(batches);
            }
            Ok::<_, Error>(all)
        })
        .unwrap()
        .unwrap();
        assert_eq!(rows(&sequential), expected);
        for threads in [1, 2, 4] {
            for piece_bytes in [1, 1_500, PIECE_MIN_BYTES] {
                for ordered in [true, false] {
                    let options = ReadOptions {
                        threads,
                        prefetch_files: 2,
                        ordered,
                        piece_bytes,
                        read_ahead_bytes: if threads == 2 { 1 } else { READ_AHEAD_BYTES },
                        ..ReadOptions::default()
                    };
                    let (store, spec, work) = (store.clone(), spec.clone(), work());
                    let got: Vec<RecordBatch> = crate::io::block_on(async move {
                        stream_files(store, spec, work, options).try_collect().await
                    })
                    .unwrap()
                    .unwrap();
                    let mut got = rows(&got);
                    let case = format!("{threads} threads, pieces of {piece_bytes} B, {ordered}");
                    if ordered {
                        assert_eq!(got, expected, "{case}");
                    } else {
                        got.sort();
                        let mut want = expected.clone();
                        want.sort();
                        assert_eq!(got, want, "{case}");
                    }
                }
            }
        }
    }

    /// An error in one file (here: a DV naming rows past its end) ends a
    /// parallel scan with that error, naming the file.
    /// Exact filtering decodes the filter's columns first and the others at
    /// the rows it keeps (late materialisation, with the DV's short runs
    /// masked in the same pass): the rows equal those of the filter applied
    /// to the decoded rows (with `_row_index` asked for, which decodes
    /// everything) and those the test derives itself, sequentially and in
    /// parallel pieces; a partition column in the filter is seen with its
    /// value; a filter column not in the output is not returned; the GETs
    /// are those of the decoded read (a row group's columns fetched at once).
    #[test]
    fn late_filter_returns_the_rows_of_the_filtered_decode() {
        let layout = [(3_000u64, 1_000usize), (2_500, 700), (800, 800)];
        let (_dir, store, mut scan_files) = files(&layout);
        for (f, p) in scan_files.iter_mut().zip(["a", "a", "b"]) {
            f.partition_values.insert("p".into(), Some(p.into()));
        }
        let mut d0 = RoaringTreemap::new();
        d0.insert_range(100..1_300); // skipped by the selection
        d0.extend([5u64, 7, 1_500, 1_501, 2_999]); // masked
        let d1: RoaringTreemap = (0..2_500).filter(|i| i % 5 == 0).collect();
        let dvs = [Some(d0), Some(d1), None];
        let schema = StructType::parse(
            r#"{"type":"struct","fields":[
                {"name":"id","type":"long","nullable":true,"metadata":{}},
                {"name":"s","type":"string","nullable":true,"metadata":{}},
                {"name":"p","type":"string","nullable":true,"metadata":{}}]}"#,
        )
        .unwrap();
        let partition_columns = vec!["p".to_string()];
        let text = "p = 'a' AND (id < 10 OR (id > 1290 AND id < 1310) OR (id >= 4000 AND id < 4600) OR id = 6000)";
        let keep = |id: i64, p: &str| {
            p == "a"
                && (id < 10 || (id > 1290 && id < 1310) || (4000..4600).contains(&id) || id == 6000)
        };
        let predicate = Predicate::new(
            text,
            &schema,
            &partition_columns,
            ColumnMappingMode::None,
            crate::expr::Binding::Strict,
        )
        .unwrap();
        let mut expected = Vec::new();
        let mut first = 0i64;
        for (i, &(n, _)) in layout.iter().enumerate() {
            let p = scan_files[i].partition_values["p"].clone().unwrap();
            for r in 0..n {
                let id = first + i64::try_from(r).unwrap();
                let s = format!("s{id}");
                if !dvs[i].as_ref().is_some_and(|d| d.contains(r)) && keep(id, &p) {
                    expected.push((s, p.clone()));
                }
            }
            first += i64::try_from(n).unwrap();
        }
        assert!(expected.len() > 400 && expected.iter().any(|(s, _)| s == "s1305"));
        let work = || known(&scan_files, &dvs);
        let scan = |columns: &[&str], metadata: bool, threads, piece_bytes| -> Vec<RecordBatch> {
            let spec = ScanSpec {
                schema: schema.clone(),
                partition_columns: partition_columns.clone(),
                column_mapping: ColumnMappingMode::None,
                columns: Some(columns.iter().map(|c| c.to_string()).collect()),
                with_metadata_columns: metadata,
                filter: Some(Arc::new(predicate.clone())),
                filter_rows: true,
                row_tracking: None,
                string_view: false,
            };
            let options = ReadOptions {
                threads,
                piece_bytes,
                ..ReadOptions::default()
            };
            let (s, w) = (store.clone(), work());
            crate::io::block_on(
                async move { stream_files(s, spec, w, options).try_collect().await },
            )
            .unwrap()
            .unwrap()
        };
        let pairs = |batches: &[RecordBatch]| -> Vec<(String, String)> {
            let mut out = Vec::new();
            for b in batches {
                let text = |name: &str| {
                    b.column_by_name(name)
                        .unwrap()
                        .as_any()
                        .downcast_ref::<StringArray>()
                        .unwrap()
                        .clone()
                };
                let (s, p) = (text("s"), text("p"));
                out.extend((0..b.num_rows()).map(|i| (s.value(i).into(), p.value(i).into())));
            }
            out
        };
        let gets = || store.counts().gets;
        for (threads, piece_bytes) in [(1, PIECE_MIN_BYTES), (2, 1), (4, PIECE_MIN_BYTES)] {
            let before = gets();
            let late = scan(&["s", "p"], false, threads, piece_bytes);
            let late_gets = gets() - before;
            assert!(late.iter().all(|b| b.schema().fields().len() == 2));
            assert_eq!(pairs(&late), expected, "threads {threads}");
            let before = gets();
            let decoded = scan(&["s", "p"], true, threads, piece_bytes);
            let context = format!("threads {threads}, with _row_index");
            assert_eq!(pairs(&decoded), expected, "{context}");
            // a row group's filter column and the others: fetched together
            assert_eq!(late_gets, gets() - before, "{context}");
        }
    }

    /// A filter that fails while the reader decodes (its column cannot take
    /// the table's type) fails the scan with the error the decode-then-filter
    /// read gives, naming the file.
    #[test]
    fn a_late_filter_error_keeps_its_kind_and_file() {
        let (_dir, store, scan_files) = files(&[(100, 100)]);
        // the table says `s` is a long; the file holds strings
        let schema = StructType::parse(
            r#"{"type":"struct","fields":[
                {"name":"id","type":"long","nullable":true,"metadata":{}},
                {"name":"s","type":"long","nullable":true,"metadata":{}}]}"#,
        )
        .unwrap();
        let predicate = Predicate::new(
            "s > 5",
            &schema,
            &[],
            ColumnMappingMode::None,
            crate::expr::Binding::Strict,
        )
        .unwrap();
        let read = |metadata: bool| -> Error {
            let spec = ScanSpec {
                schema: schema.clone(),
                partition_columns: Vec::new(),
                column_mapping: ColumnMappingMode::None,
                columns: Some(vec!["id".into()]),
                with_metadata_columns: metadata,
                filter: Some(Arc::new(predicate.clone())),
                filter_rows: true,
                row_tracking: None,
                string_view: false,
            };
            let file = scan_files[0].clone();
            crate::io::block_on(async {
                let batches = stream_file(&store, &spec, &file, DeletedRows::Known(None)).await?;
                batches.try_collect::<Vec<RecordBatch>>().await
            })
            .unwrap()
            .unwrap_err()
        };
        let (late, decoded) = (read(false), read(true));
        assert_eq!(late.to_string(), decoded.to_string());
        assert_eq!(
            std::mem::discriminant(&late),
            std::mem::discriminant(&decoded)
        );
        assert!(late.to_string().contains("part-0.parquet"), "{late}");
    }

    #[test]
    fn a_failing_file_fails_the_parallel_scan() {
        let (_dir, store, scan_files) = files(&[(200, 50), (200, 50)]);
        let bad: RoaringTreemap = [5u64, 500].into_iter().collect();
        for ordered in [true, false] {
            let work = vec![
                (scan_files[0].clone(), DeletedRows::Known(None)),
                (scan_files[1].clone(), DeletedRows::Known(Some(bad.clone()))),
            ];
            let options = ReadOptions {
                threads: 2,
                ordered,
                ..ReadOptions::default()
            };
            let store = store.clone();
            let e = crate::io::block_on(async move {
                stream_files(store, spec(), work, options)
                    .try_collect::<Vec<_>>()
                    .await
            })
            .unwrap()
            .unwrap_err()
            .to_string();
            assert!(e.contains("part-1.parquet") && e.contains("row 500"), "{e}");
        }
    }

    /// Files of `rows` rows each (one row group), each with a DV deleting
    /// its rows 0 and 7, the DVs of `per_dv_file` consecutive files in one
    /// DV file: the files (DVs set) and the ids of the rows they leave.
    fn files_with_dvs(
        count: usize,
        rows: u64,
        per_dv_file: usize,
    ) -> (tempfile::TempDir, TableStore, Vec<ScanFile>, Vec<i64>) {
        let layout = vec![(rows, 1_000usize); count];
        let (dir, store, mut scan_files) = files(&layout);
        let deleted: RoaringTreemap = [0u64, 7].into_iter().collect();
        for group in scan_files.chunks_mut(per_dv_file) {
            let maps = vec![deleted.clone(); group.len()];
            let descriptors =
                crate::io::block_on(crate::write::dv_files::write_file_to(&store, "", &maps))
                    .unwrap()
                    .unwrap();
            for (file, d) in group.iter_mut().zip(descriptors) {
                file.deletion_vector = Some(d);
            }
        }
        let rows = i64::try_from(rows).unwrap();
        let live = (0..i64::try_from(count).unwrap() * rows)
            .filter(|id| id % rows != 0 && id % rows != 7)
            .collect();
        (dir, store, scan_files, live)
    }

    fn ids(batches: &[RecordBatch]) -> Vec<i64> {
        rows(batches).into_iter().map(|(_, _, id, _)| id).collect()
    }

    fn load_all(files: &[ScanFile]) -> Vec<(ScanFile, DeletedRows)> {
        files
            .iter()
            .map(|f| (f.clone(), DeletedRows::Load))
            .collect()
    }

    /// A full scan fetches the DVs of each window of `prefetch_files` files
    /// together: one GET per DV file the window touches (12 files, DV files
    /// of 4 consecutive files), never one per data file.
    #[test]
    fn dvs_are_fetched_a_window_at_a_time() {
        let (_dir, store, scan_files, live) = files_with_dvs(12, 50, 4);
        // (prefetch_files, DV files each window of that many files touches)
        for (prefetch, expected) in [(4, 3), (2, 6), (3, 6), (12, 3), (1, 12)] {
            let before = store.counts();
            let options = ReadOptions {
                threads: 2,
                prefetch_files: prefetch,
                ..ReadOptions::default()
            };
            let (s, work) = (store.clone(), load_all(&scan_files));
            let got: Vec<RecordBatch> = crate::io::block_on(async move {
                stream_files(s, spec(), work, options).try_collect().await
            })
            .unwrap()
            .unwrap();
            assert_eq!(ids(&got), live, "prefetch {prefetch}");
            let dv_gets = store.counts().dv_gets - before.dv_gets;
            assert_eq!(dv_gets, expected, "prefetch {prefetch}");
        }
    }

    /// A scan dropped after its first batch has fetched the DVs of the
    /// windows it opened files of, not the table's: 40 files, a DV file per
    /// 2 files (20 DV files), windows of 2 files.
    #[test]
    fn a_scan_stopped_early_fetched_only_its_windows_dvs() {
        let (_dir, store, scan_files, live) = files_with_dvs(40, 50, 2);
        let options = ReadOptions {
            threads: 1,
            prefetch_files: 2,
            ..ReadOptions::default()
        };
        let (s, work) = (store.clone(), load_all(&scan_files));
        let first = crate::io::block_on(async move {
            let mut stream = stream_files(s, spec(), work, options);
            let first = stream.next().await;
            drop(stream);
            // Whatever was started gets every chance to finish.
            crate::io::sleep(std::time::Duration::from_millis(200)).await;
            first
        })
        .unwrap()
        .unwrap()
        .unwrap();
        assert_eq!(ids(&[first]), live.get(..48).unwrap());
        let counts = store.counts();
        // Opened: the piece being read and the one read ahead (threads + 1),
        // and a window of files opening: 4 files, 2 windows, 2 DV files (a
        // window more if the next one came in as the batch went out).
        assert!(counts.dv_gets <= 3, "{counts:?}");
        // A footer and a row group per file opened.
        assert!(counts.gets - counts.dv_gets <= 2 * 6, "{counts:?}");
    }

    /// A window's DV file gone: the ordered scan fails with the store's
    /// NotFound for it, whichever of the window's files fetched first.
    #[test]
    fn a_missing_dv_file_fails_the_scan_as_not_found() {
        let (dir, store, scan_files, _) = files_with_dvs(8, 50, 8);
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "bin") {
                std::fs::remove_file(path).unwrap();
            }
        }
        for _ in 0..20 {
            let options = ReadOptions {
                threads: 4,
                prefetch_files: 4,
                ..ReadOptions::default()
            };
            let (s, work) = (store.clone(), load_all(&scan_files));
            let e = crate::io::block_on(async move {
                stream_files(s, spec(), work, options)
                    .try_collect::<Vec<_>>()
                    .await
            })
            .unwrap()
            .unwrap_err();
            assert!(matches!(e, Error::NotFound { .. }), "{e}");
        }
    }

    /// `offset` and `limit` return exactly those rows of the whole ordered
    /// scan (inside a batch, across files, past the end; DVs applied), and
    /// a scan with a limit stops opening files once it has its rows.
    #[test]
    fn offset_and_limit_cut_the_ordered_scan() {
        let (_dir, store, scan_files, live) = files_with_dvs(10, 100, 3);
        let total = u64::try_from(live.len()).unwrap();
        let cases = [
            (0, Some(0)),
            (0, Some(1)),
            (0, Some(5)),
            (0, Some(98)),
            (0, Some(150)),
            (3, Some(5)),
            (97, Some(10)),
            (98, Some(98)),
            (500, None),
            (0, Some(total + 10)),
            (total - 1, Some(10)),
            (total, Some(3)),
            (total + 5, None),
        ];
        for (offset, limit) in cases {
            let options = ReadOptions {
                threads: 2,
                prefetch_files: 2,
                offset,
                limit,
                ..ReadOptions::default()
            };
            let (s, work) = (store.clone(), load_all(&scan_files));
            let got: Vec<RecordBatch> = crate::io::block_on(async move {
                stream_files(s, spec(), work, options).try_collect().await
            })
            .unwrap()
            .unwrap();
            let start = usize::try_from(offset).unwrap().min(live.len());
            let end = limit.map_or(live.len(), |l| {
                (start + usize::try_from(l).unwrap()).min(live.len())
            });
            assert_eq!(
                ids(&got),
                live.get(start..end).unwrap(),
                "{offset} {limit:?}"
            );
        }
        // limit 0 opens nothing; limit 5 stops after the first file's batch
        // (what the read-ahead window opened meanwhile, no more).
        for (limit, most_gets) in [(0, 0), (5, 2 * (2 + 1 + 2) + 3)] {
            let before = store.counts().gets;
            let options = ReadOptions {
                threads: 2,
                prefetch_files: 2,
                limit: Some(limit),
                ..ReadOptions::default()
            };
            let (s, work) = (store.clone(), load_all(&scan_files));
            crate::io::block_on(async move {
                let got: Vec<RecordBatch> =
                    stream_files(s, spec(), work, options).try_collect().await?;
                crate::io::sleep(std::time::Duration::from_millis(200)).await;
                Ok::<_, Error>(got)
            })
            .unwrap()
            .unwrap();
            let gets = store.counts().gets - before;
            assert!(gets <= most_gets, "limit {limit}: {gets} GETs");
        }
    }

    /// The files a limit and an offset need, from the live rows the log gives.
    #[test]
    fn rows_window_files_skips_and_stops_by_known_rows() {
        let rows = [Some(10), Some(5), None, Some(20)];
        assert_eq!(rows_window_files(&rows, 0, None), (0, 4, 0));
        assert_eq!(rows_window_files(&rows, 0, Some(0)), (0, 0, 0));
        assert_eq!(rows_window_files(&rows, 0, Some(10)), (0, 1, 0));
        assert_eq!(rows_window_files(&rows, 0, Some(11)), (0, 2, 0));
        // Past a file of unknown rows: every file until known rows suffice.
        assert_eq!(rows_window_files(&rows, 0, Some(16)), (0, 4, 0));
        assert_eq!(rows_window_files(&rows, 0, Some(100)), (0, 4, 0));
        assert_eq!(rows_window_files(&rows, 10, Some(1)), (1, 2, 0));
        assert_eq!(rows_window_files(&rows, 12, Some(3)), (1, 2, 2));
        assert_eq!(rows_window_files(&rows, 12, Some(4)), (1, 4, 2));
        // Never skipped past a file of unknown rows.
        assert_eq!(rows_window_files(&rows, 15, None), (2, 4, 0));
        assert_eq!(rows_window_files(&rows, 40, Some(1)), (2, 4, 25));
        assert_eq!(rows_window_files(&[Some(3)], 5, Some(1)), (1, 1, 2));
        assert_eq!(rows_window_files(&[], 5, Some(1)), (0, 0, 5));
    }

    /// Where the mask drops rows, a string column whose data pages are all
    /// dictionary-encoded is read as dictionary keys; one with plain pages
    /// (never dictionary-encoded, or after a dictionary overflowed) as views.
    #[test]
    fn masked_strings_read_as_keys_or_views_by_encoding() -> Result<()> {
        let n = 5_000;
        let few: StringArray = (0..n).map(|i| Some(format!("v{}", i % 7))).collect();
        let distinct: StringArray = (0..n).map(|i| Some(format!("distinct-{i:08}"))).collect();
        let batch = RecordBatch::try_from_iter([
            ("few", Arc::new(few) as ArrayRef),
            ("plain", Arc::new(distinct.clone()) as ArrayRef),
            ("overflow", Arc::new(distinct) as ArrayRef),
            (
                "id",
                Arc::new(Int64Array::from_iter_values(0..n)) as ArrayRef,
            ),
        ])
        .map_err(|e| Error::Schema(e.to_string()))?;
        let props = WriterProperties::builder()
            .set_column_dictionary_enabled("plain".into(), false)
            .set_dictionary_page_size_limit(1024)
            .set_data_page_size_limit(1024)
            .set_write_batch_size(256)
            .build();
        let mut file = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut file, batch.schema(), Some(props))
            .map_err(|e| Error::Schema(e.to_string()))?;
        writer
            .write(&batch)
            .map_err(|e| Error::Schema(e.to_string()))?;
        writer.close().map_err(|e| Error::Schema(e.to_string()))?;
        let meta = ArrowReaderMetadata::load(&bytes::Bytes::from(file), Default::default())
            .map_err(|e| Error::Schema(e.to_string()))?;
        let hinted = strings_for_masking(meta).map_err(|e| Error::Schema(e.to_string()))?;
        let types: Vec<&DataType> = hinted
            .schema()
            .fields()
            .iter()
            .map(|f| f.data_type())
            .collect();
        let keys = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        assert_eq!(
            types,
            [
                &keys,
                &DataType::Utf8View,
                &DataType::Utf8View,
                &DataType::Int64
            ]
        );
        Ok(())
    }
}
