//! Scan tasks as plain, serializable data: everything an executor needs to
//! read one file (or row-group range) without replaying the log.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow_schema::{DataType, Field, TimeUnit};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::expr::{Binding, Filter, Predicate};
use crate::format::descriptor::DeletionVectorDescriptor;
use crate::io::TableStore;
use crate::log::cdf::{self, ChangedRows};
use crate::log::schema::{ColumnMappingMode, StructField, StructType};
use crate::scan::{
    stream_files, BatchStream, DeletedRows, ReadOptions, RowTrackingColumns, ScanFile, ScanSpec,
};
use crate::table::dv;
use crate::table::snapshot::Snapshot;
use futures::{StreamExt, TryStreamExt};

/// One unit of scan work, as JSON-able data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanTask {
    pub table_uri: String,
    /// Storage credentials and settings: never serialized, so task JSON (Spark
    /// rows, plans, logs) carries no secret; the reader hands them in again.
    #[serde(skip)]
    pub storage_options: HashMap<String, String>,
    pub path: String,
    pub size: u64,
    #[serde(default)]
    pub partition_values: HashMap<String, Option<String>>,
    #[serde(default)]
    pub deletion_vector: Option<DeletionVectorDescriptor>,
    #[serde(default)]
    pub row_groups: Option<Vec<usize>>,
    pub schema_string: String,
    #[serde(default)]
    pub partition_columns: Vec<String>,
    /// "none", "name" or "id".
    pub column_mapping: String,
    #[serde(default)]
    pub columns: Option<Vec<String>>,
    /// The predicate (see [`crate::expr`]): SQL text (a JSON string) or the
    /// tree (a JSON object); prunes row groups, and filters rows with
    /// `filter_rows`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Filter>,
    /// Drop the rows `filter` does not match (else the caller filters).
    #[serde(default)]
    pub filter_rows: bool,
    /// Add the `_row_index` and `_file_path` columns.
    #[serde(default)]
    pub with_metadata: bool,
    /// A change data feed task: which rows of the file a commit changed;
    /// the rows come with `_change_type`, `_commit_version` and
    /// `_commit_timestamp` columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<TaskChange>,
    /// Add the `_row_id` and `_row_commit_version` columns (a table that
    /// tracks rows): the table's materialized column names, read where the
    /// file holds them, else computed from the two fields below as the
    /// driver-side scan does ([`ScanSpec::row_tracking`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_tracking: Option<RowTrackingColumns>,
    /// The file's `baseRowId` (row tracking).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_row_id: Option<i64>,
    /// The file's `defaultRowCommitVersion` (row tracking).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_row_commit_version: Option<i64>,
    /// The session time zone `filter` reads instants in (absent: UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}

/// What a change data feed task reads (see [`crate::log::cdf`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskChange {
    pub rows: ChangedRows,
    pub commit_version: u64,
    /// Milliseconds since the epoch.
    pub commit_timestamp: i64,
}

impl TaskChange {
    /// A task reading a `cdc` file, whose rows carry `_change_type`.
    fn reads_cdc_file(&self) -> bool {
        self.rows == ChangedRows::CdcFile
    }
}

/// The columns a change data feed adds to the table's.
pub fn change_columns() -> [Field; 3] {
    [
        Field::new(cdf::CHANGE_TYPE_COLUMN, DataType::Utf8, true),
        Field::new(cdf::COMMIT_VERSION_COLUMN, DataType::Int64, true),
        Field::new(
            cdf::COMMIT_TIMESTAMP_COLUMN,
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
    ]
}

impl ScanTask {
    /// A task reading every column of `file` (its deletion vector applied,
    /// its row groups if split), with `snapshot`'s schema, partition columns
    /// and column mapping; no filter, metadata, row tracking or time zone.
    pub fn of_file(
        snapshot: &Snapshot,
        file: ScanFile,
        table_uri: &str,
        storage_options: &HashMap<String, String>,
    ) -> ScanTask {
        ScanTask {
            table_uri: table_uri.to_string(),
            storage_options: storage_options.clone(),
            path: file.path,
            size: file.size,
            partition_values: file.partition_values,
            deletion_vector: file.deletion_vector,
            row_groups: file.row_groups,
            schema_string: snapshot.metadata().schema_string.clone(),
            partition_columns: snapshot.metadata().partition_columns.clone(),
            column_mapping: snapshot.column_mapping().to_string(),
            columns: None,
            filter: None,
            filter_rows: false,
            with_metadata: false,
            change: None,
            row_tracking: None,
            base_row_id: file.base_row_id,
            default_row_commit_version: file.default_row_commit_version,
            time_zone: None,
        }
    }

    /// About how many bytes of the file this task reads: the whole file, or
    /// for one split of a file (some row groups), at most `split_size`. For
    /// packing tasks into Spark partitions.
    pub fn estimated_bytes(&self, split_size: Option<u64>) -> u64 {
        match (&self.row_groups, split_size) {
            (Some(_), Some(split)) => self.size.min(split),
            _ => self.size,
        }
    }

    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|source| Error::Json {
            context: "scan task".to_string(),
            source,
        })
    }

    /// A task from its JSON, with the table's `storage_options` (not part of
    /// the JSON).
    pub fn from_json(text: &str, storage_options: HashMap<String, String>) -> Result<ScanTask> {
        let mut task: ScanTask = serde_json::from_str(text).map_err(|source| Error::Json {
            context: "scan task".to_string(),
            source,
        })?;
        task.storage_options = storage_options;
        Ok(task)
    }

    fn spec(&self) -> Result<ScanSpec> {
        let mut schema = StructType::parse(&self.schema_string)?;
        let column_mapping = ColumnMappingMode::parse(&self.column_mapping)?;
        let mut columns = self.columns.clone();
        if self.change.as_ref().is_some_and(TaskChange::reads_cdc_file) {
            // A cdc file stores `_change_type` beside the table's columns
            // (never mapped to a physical name).
            schema.fields.push(StructField::change_type_column());
            if let Some(c) = columns.as_mut() {
                c.push(cdf::CHANGE_TYPE_COLUMN.to_string());
            }
        }
        let filter = match &self.filter {
            None => None,
            Some(filter) => Some(Arc::new(Predicate::bind_in_zone(
                filter,
                &schema,
                &self.partition_columns,
                column_mapping,
                if self.filter_rows {
                    Binding::Strict
                } else {
                    Binding::Lenient
                },
                &match &self.time_zone {
                    Some(name) => crate::expr::TimeZone::parse(name)?,
                    None => crate::expr::TimeZone::utc(),
                },
            )?)),
        };
        Ok(ScanSpec {
            schema,
            partition_columns: self.partition_columns.clone(),
            column_mapping,
            columns,
            with_metadata_columns: self.with_metadata,
            filter,
            filter_rows: self.filter_rows,
            row_tracking: self.row_tracking.clone(),
            string_view: false,
        })
    }

    /// Read this task's rows into memory (see [`ScanTask::stream`], which
    /// this collects).
    pub async fn read(&self) -> Result<Vec<RecordBatch>> {
        self.stream().await?.try_collect().await
    }

    /// Stream this task's rows (DVs applied; for a change data feed task, the
    /// rows the commit changed, with the change columns), decoded as pulled
    /// with the default [`ReadOptions`] (row groups in parallel, in order).
    pub async fn stream(&self) -> Result<BatchStream> {
        self.stream_with(ReadOptions::default()).await
    }

    /// [`ScanTask::stream`] with `options`: `threads` pieces of the file
    /// (runs of row groups) decoded at once, batches in row order or, when
    /// not `ordered`, as decoded. Must be called within the runtime.
    pub async fn stream_with(&self, options: ReadOptions) -> Result<BatchStream> {
        let store = TableStore::open(&self.table_uri, &self.storage_options)?;
        self.stream_on(store, options).await
    }

    /// [`ScanTask::stream_with`] through `store` (the task's table, opened
    /// with its storage options; e.g. one counting its requests into the
    /// table's counters, [`TableStore::counting_into`]).
    pub async fn stream_on(&self, store: TableStore, options: ReadOptions) -> Result<BatchStream> {
        let mut file = ScanFile {
            path: self.path.clone(),
            size: self.size,
            partition_values: self.partition_values.clone(),
            deletion_vector: self.deletion_vector.clone(),
            row_groups: self.row_groups.clone(),
            base_row_id: self.base_row_id,
            default_row_commit_version: self.default_row_commit_version,
        };
        let spec = self.spec()?;
        let Some(change) = &self.change else {
            return Ok(stream_files(
                store,
                spec,
                vec![(file, DeletedRows::Load)],
                options,
            ));
        };
        let deleted = match &change.rows {
            ChangedRows::CdcFile => {
                file.deletion_vector = None;
                DeletedRows::Load
            }
            ChangedRows::Live {
                deletion_vector, ..
            } => {
                file.deletion_vector = deletion_vector.clone();
                DeletedRows::Load
            }
            ChangedRows::DvDifference { rows, except, .. } => {
                let mut keep = dv::load_one(&store, rows).await?;
                if let Some(except) = except {
                    keep -= dv::load_one(&store, except).await?;
                }
                if keep.is_empty() {
                    return Ok(futures::stream::empty().boxed());
                }
                DeletedRows::KeepOnly(keep)
            }
        };
        let schema = self.output_schema()?;
        let change = change.clone();
        Ok(stream_files(store, spec, vec![(file, deleted)], options)
            .map(move |b| b.and_then(|b| with_change_columns(b, &change, &schema)))
            .boxed())
    }

    /// The Arrow schema of what [`ScanTask::read`] returns.
    pub fn output_schema(&self) -> Result<arrow_schema::SchemaRef> {
        // The table's columns as asked for (without a cdc file's stored
        // `_change_type`, which is one of the change columns).
        let table = ScanSpec {
            schema: StructType::parse(&self.schema_string)?,
            columns: self.columns.clone(),
            ..self.spec()?
        };
        let out = table.output_schema()?;
        if self.change.is_none() {
            return Ok(out);
        }
        let mut fields: Vec<Field> = out.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.extend(change_columns());
        Ok(Arc::new(arrow_schema::Schema::new(fields)))
    }
}

/// `batch` (the table's columns, then `_change_type` for a cdc file) with the
/// change columns of `change` appended, as `schema`.
fn with_change_columns(
    batch: RecordBatch,
    change: &TaskChange,
    schema: &arrow_schema::SchemaRef,
) -> Result<RecordBatch> {
    let n = batch.num_rows();
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    let change_type: ArrayRef =
        match &change.rows {
            ChangedRows::CdcFile => columns
                .pop()
                .ok_or_else(|| Error::Internal("cdc file batch without _change_type".into()))?,
            ChangedRows::Live { change_type, .. }
            | ChangedRows::DvDifference { change_type, .. } => Arc::new(
                StringArray::from_iter_values(std::iter::repeat_n(change_type.as_str(), n)),
            ),
        };
    let version = i64::try_from(change.commit_version).unwrap_or(i64::MAX);
    columns.push(change_type);
    columns.push(Arc::new(Int64Array::from_value(version, n)));
    columns.push(Arc::new(
        TimestampMicrosecondArray::from_value(change.commit_timestamp.saturating_mul(1000), n)
            .with_timezone("UTC"),
    ));
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| {
        Error::Internal(format!(
            "change data feed batch does not fit its schema: {e}"
        ))
    })
}

/// How a scan is planned into tasks.
#[derive(Debug, Clone, Default)]
pub struct TaskOptions {
    /// Logical columns to return (all when `None`).
    pub columns: Option<Vec<String>>,
    /// The predicate (SQL text or a tree): files, and row groups of split
    /// files, it rules out are not planned; each task carries it to prune row
    /// groups when read.
    pub filter: Option<Filter>,
    /// Tasks drop the rows the filter does not match (exact filtering). When
    /// false the filter only prunes and the caller applies it (Spark).
    pub filter_rows: bool,
    /// Files larger than this many bytes become several tasks by row groups.
    pub split_size: Option<u64>,
    /// Tasks return the `_row_index` and `_file_path` columns too.
    pub with_metadata: bool,
    /// Tasks return the `_row_id` and `_row_commit_version` columns too
    /// (an error for a table that does not track rows).
    pub with_row_tracking: bool,
    /// The session time zone the filter reads instants in (Spark's
    /// `spark.sql.session.timeZone`; UTC by default).
    pub time_zone: crate::expr::TimeZone,
}

/// Tasks for the live files of `snapshot`: one per file, or several per file
/// larger than `split_size`.
pub async fn plan_tasks(
    snapshot: &Snapshot,
    table_uri: &str,
    storage_options: &HashMap<String, String>,
    options: &TaskOptions,
) -> Result<Vec<ScanTask>> {
    let mut spec = ScanSpec::for_snapshot(snapshot, options.columns.clone());
    if options.with_row_tracking {
        spec.row_tracking = Some(RowTrackingColumns::of(snapshot)?);
    }
    spec.output_schema()?; // unknown columns fail here, on the driver
    if let Some(filter) = &options.filter {
        spec.filter = Some(Arc::new(Predicate::bind_in_zone(
            filter,
            snapshot.schema(),
            &snapshot.metadata().partition_columns,
            snapshot.column_mapping(),
            if options.filter_rows {
                Binding::Strict
            } else {
                Binding::Lenient
            },
            &options.time_zone,
        )?));
    }
    let mut files = super::plan(snapshot, spec.filter.as_deref())?;
    if let Some(size) = options.split_size {
        files = super::split(snapshot.store(), &spec, files, size).await?;
    }
    Ok(files
        .into_iter()
        .map(|f| ScanTask {
            columns: options.columns.clone(),
            filter: options.filter.clone(),
            filter_rows: options.filter_rows,
            with_metadata: options.with_metadata,
            row_tracking: spec.row_tracking.clone(),
            time_zone: Some(options.time_zone.name().to_string()),
            ..ScanTask::of_file(snapshot, f, table_uri, storage_options)
        })
        .collect())
}
