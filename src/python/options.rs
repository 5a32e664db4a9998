//! Options from Python keyword arguments: each binding that takes more than a
//! few settings takes them as `**options`, extracted here into one struct per
//! kind of call and converted into the pure Rust options struct. Unknown keys
//! raise `TypeError` (as a Python function would), a value of the wrong type
//! raises `TypeError` naming the key.

use std::collections::HashMap;

use pyo3::conversion::FromPyObjectOwned;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::expr::TimeZone;
use crate::write::app_txn::AppCommit;
use crate::write::changes::DmlOptions;
use crate::write::create::CreateOperation;
use crate::write::data::{WriterOptions, DEFAULT_TARGET_FILE_SIZE};
use crate::write::delete::{DeleteOptions, DEFAULT_DV_FILE_TARGET_SIZE};
use crate::write::files::{SaveMode, SchemaMode, WriteOptions};

/// The keyword arguments of one call, read key by key.
pub(super) struct Kwargs<'a, 'py> {
    what: &'static str,
    dict: Option<&'a Bound<'py, PyDict>>,
}

impl<'a, 'py> Kwargs<'a, 'py> {
    /// `dict` (None: no keyword given) for the call `what`, which takes the
    /// keywords `keys`: any other raises `TypeError`, as in Python.
    pub fn new(
        what: &'static str,
        dict: Option<&'a Bound<'py, PyDict>>,
        keys: &[&str],
    ) -> PyResult<Self> {
        if let Some(d) = dict {
            for key in d.keys() {
                let key: String = key.extract()?;
                if !keys.contains(&key.as_str()) {
                    return Err(PyTypeError::new_err(format!(
                        "{what}() got an unexpected keyword argument {key:?} (takes: {})",
                        keys.join(", ")
                    )));
                }
            }
        }
        Ok(Kwargs { what, dict })
    }

    /// The value of `key` as `T`, or `default` when not given; a value of
    /// another type raises `TypeError` naming the call and the key.
    pub fn get<T: FromPyObjectOwned<'py>>(&self, key: &str, default: T) -> PyResult<T> {
        let Some(value) = self.dict.map(|d| d.get_item(key)).transpose()?.flatten() else {
            return Ok(default);
        };
        value.extract::<T>().map_err(|e| {
            let e: PyErr = e.into();
            PyTypeError::new_err(format!("{}() argument {key:?}: {e}", self.what))
        })
    }
}

/// A compaction's plan (`RawDeltaTable.compact_plan`).
pub(super) struct CompactArgs {
    pub target_size: Option<u64>,
    pub max_deleted_rows_ratio: f64,
    /// SQL text.
    pub partition_filter: Option<String>,
    /// An expression tree's JSON.
    pub partition_filter_json: Option<String>,
    pub full: bool,
    pub memory_budget: Option<u64>,
}

impl CompactArgs {
    /// From the keyword arguments of the call `what`.
    pub fn from_kwargs(what: &'static str, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let kw = Kwargs::new(
            what,
            kwargs,
            &[
                "target_size",
                "max_deleted_rows_ratio",
                "partition_filter",
                "partition_filter_json",
                "full",
                "memory_budget",
            ],
        )?;
        Ok(CompactArgs {
            target_size: kw.get("target_size", None)?,
            max_deleted_rows_ratio: kw.get(
                "max_deleted_rows_ratio",
                crate::write::optimize::DEFAULT_MAX_DELETED_ROWS_RATIO,
            )?,
            partition_filter: kw.get("partition_filter", None)?,
            partition_filter_json: kw.get("partition_filter_json", None)?,
            full: kw.get("full", false)?,
            memory_budget: kw.get("memory_budget", None)?,
        })
    }

    pub fn compact_options(self) -> crate::Result<crate::write::optimize::CompactOptions> {
        Ok(crate::write::optimize::CompactOptions {
            target_size: self.target_size,
            max_deleted_rows_ratio: self.max_deleted_rows_ratio,
            partition_filter: filter_of(self.partition_filter, self.partition_filter_json)?
                .map(|f| f.to_string()),
            full: self.full,
            memory_budget: self.memory_budget,
            ..Default::default()
        })
    }
}

/// A scan's tasks (`RawDeltaTable.scan_tasks`).
pub(super) struct ScanArgs {
    pub columns: Option<Vec<String>>,
    /// SQL text.
    pub filter: Option<String>,
    /// An expression tree's JSON.
    pub filter_json: Option<String>,
    pub filter_rows: bool,
    pub split_size: Option<u64>,
    pub with_metadata: bool,
    pub with_row_tracking: bool,
    /// The session time zone the filter reads instants in (`time_zone`).
    pub time_zone: TimeZone,
}

impl Default for ScanArgs {
    fn default() -> Self {
        ScanArgs {
            columns: None,
            filter: None,
            filter_json: None,
            filter_rows: true,
            split_size: None,
            with_metadata: false,
            with_row_tracking: false,
            time_zone: TimeZone::utc(),
        }
    }
}

impl ScanArgs {
    /// From the keyword arguments of the call `what`.
    pub fn from_kwargs(what: &'static str, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let kw = Kwargs::new(
            what,
            kwargs,
            &[
                "columns",
                "filter",
                "filter_json",
                "filter_rows",
                "split_size",
                "with_metadata",
                "with_row_tracking",
                "time_zone",
            ],
        )?;
        let d = Self::default();
        Ok(ScanArgs {
            time_zone: time_zone_of(kw.get("time_zone", None)?)?,
            columns: kw.get("columns", d.columns)?,
            filter: kw.get("filter", d.filter)?,
            filter_json: kw.get("filter_json", d.filter_json)?,
            filter_rows: kw.get("filter_rows", d.filter_rows)?,
            split_size: kw.get("split_size", d.split_size)?,
            with_metadata: kw.get("with_metadata", d.with_metadata)?,
            with_row_tracking: kw.get("with_row_tracking", d.with_row_tracking)?,
        })
    }
}

impl ScanArgs {
    pub fn task_options(self) -> crate::Result<crate::scan::task::TaskOptions> {
        Ok(crate::scan::task::TaskOptions {
            columns: self.columns,
            filter: filter_of(self.filter, self.filter_json)?,
            filter_rows: self.filter_rows,
            split_size: self.split_size,
            with_metadata: self.with_metadata,
            with_row_tracking: self.with_row_tracking,
            time_zone: self.time_zone,
        })
    }
}

/// A change data feed's range (`RawDeltaTable.cdf_tasks`); timestamps in ms.
#[derive(Default)]
pub(super) struct CdfArgs {
    pub starting_version: Option<u64>,
    pub ending_version: Option<u64>,
    pub starting_timestamp: Option<i64>,
    pub ending_timestamp: Option<i64>,
    pub columns: Option<Vec<String>>,
    pub filter: Option<String>,
}

impl CdfArgs {
    /// From the keyword arguments of the call `what`.
    pub fn from_kwargs(what: &'static str, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let kw = Kwargs::new(
            what,
            kwargs,
            &[
                "starting_version",
                "ending_version",
                "starting_timestamp",
                "ending_timestamp",
                "columns",
                "filter",
            ],
        )?;
        let d = Self::default();
        Ok(CdfArgs {
            starting_version: kw.get("starting_version", d.starting_version)?,
            ending_version: kw.get("ending_version", d.ending_version)?,
            starting_timestamp: kw.get("starting_timestamp", d.starting_timestamp)?,
            ending_timestamp: kw.get("ending_timestamp", d.ending_timestamp)?,
            columns: kw.get("columns", d.columns)?,
            filter: kw.get("filter", d.filter)?,
        })
    }
}

impl CdfArgs {
    pub fn change_options(self) -> crate::scan::cdf::ChangeOptions {
        crate::scan::cdf::ChangeOptions {
            starting_version: self.starting_version,
            ending_version: self.ending_version,
            starting_timestamp: self.starting_timestamp,
            ending_timestamp: self.ending_timestamp,
            columns: self.columns,
            filter: self.filter.map(crate::expr::Filter::Sql),
        }
    }
}

/// How UPDATE and MERGE write (`update`, `merge`, `change_task`,
/// `commit_changes`): the fields of [`DmlOptions`] Python sets.
pub(super) struct DmlArgs {
    pub allow_copy_on_write: bool,
    pub inline_threshold: usize,
    pub dv_file_target_size: usize,
    pub target_file_size: usize,
    /// MERGE only: source bytes joined at once.
    pub source_chunk_bytes: usize,
    /// MERGE only: add the source's new columns.
    pub merge_schema: bool,
    /// MERGE only: the names the source's and the target's columns are
    /// qualified with.
    pub source_alias: String,
    pub target_alias: String,
    /// `change_task`/`commit_changes`: an Arrow schema (IPC bytes) whose
    /// columns the table lacks are added (MERGE schema evolution).
    pub new_columns: Option<Vec<u8>>,
    /// `commit_changes`: operationParameters (a JSON object).
    pub parameters: Option<String>,
    /// `commit_changes`: operationMetrics added (a JSON object).
    pub extra_metrics: Option<String>,
    /// `commit_changes`: the files the operation read (None: all).
    pub read_files: Option<Vec<String>>,
    /// The session time zone (`time_zone`, an IANA name or an offset).
    pub time_zone: TimeZone,
    /// `txn_app_id`/`txn_version`: the commit's application transaction.
    pub app: AppCommit,
}

impl Default for DmlArgs {
    fn default() -> Self {
        DmlArgs {
            allow_copy_on_write: false,
            inline_threshold: 0,
            dv_file_target_size: DEFAULT_DV_FILE_TARGET_SIZE,
            target_file_size: DEFAULT_TARGET_FILE_SIZE,
            source_chunk_bytes: crate::write::merge::DEFAULT_SOURCE_CHUNK_BYTES,
            merge_schema: false,
            source_alias: "source".into(),
            target_alias: "target".into(),
            new_columns: None,
            parameters: None,
            extra_metrics: None,
            read_files: None,
            time_zone: TimeZone::utc(),
            app: AppCommit::default(),
        }
    }
}

impl DmlArgs {
    /// From the keyword arguments of the call `what`.
    pub fn from_kwargs(what: &'static str, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let kw = Kwargs::new(
            what,
            kwargs,
            &[
                "allow_copy_on_write",
                "inline_threshold",
                "dv_file_target_size",
                "target_file_size",
                "source_chunk_bytes",
                "merge_schema",
                "source_alias",
                "target_alias",
                "new_columns",
                "parameters",
                "extra_metrics",
                "read_files",
                "time_zone",
                "txn_app_id",
                "txn_version",
            ],
        )?;
        let d = Self::default();
        Ok(DmlArgs {
            app: AppCommit::from_options(
                kw.get("txn_app_id", None)?,
                kw.get("txn_version", None)?,
                None,
            )
            .map_err(super::to_py)?,
            allow_copy_on_write: kw.get("allow_copy_on_write", d.allow_copy_on_write)?,
            inline_threshold: kw.get("inline_threshold", d.inline_threshold)?,
            dv_file_target_size: kw.get("dv_file_target_size", d.dv_file_target_size)?,
            target_file_size: kw.get("target_file_size", d.target_file_size)?,
            source_chunk_bytes: kw.get("source_chunk_bytes", d.source_chunk_bytes)?,
            merge_schema: kw.get("merge_schema", d.merge_schema)?,
            source_alias: kw.get("source_alias", d.source_alias)?,
            target_alias: kw.get("target_alias", d.target_alias)?,
            new_columns: kw.get("new_columns", d.new_columns)?,
            parameters: kw.get("parameters", d.parameters)?,
            extra_metrics: kw.get("extra_metrics", d.extra_metrics)?,
            read_files: kw.get("read_files", d.read_files)?,
            time_zone: time_zone_of(kw.get("time_zone", None)?)?,
        })
    }
}

impl DmlArgs {
    pub fn dml_options(&self) -> DmlOptions {
        DmlOptions {
            delete: DeleteOptions {
                inline_threshold: self.inline_threshold,
                allow_copy_on_write: self.allow_copy_on_write,
                dv_file_target_size: self.dv_file_target_size,
                time_zone: self.time_zone.clone(),
                ..Default::default()
            },
            writer: WriterOptions {
                target_file_size: self.target_file_size,
                time_zone: self.time_zone.clone(),
                ..Default::default()
            },
            app: self.app.clone(),
            ..Default::default()
        }
    }
}

/// How a write lays out and commits files (`write_table`, `write_files`,
/// `commit_files`).
pub(super) struct WriteArgs {
    pub mode: String,
    /// The table's Arrow schema (IPC bytes), for a table about to be created.
    pub schema_ipc: Option<Vec<u8>>,
    pub partition_by: Vec<String>,
    pub configuration: HashMap<String, String>,
    pub enable_deletion_vectors: bool,
    pub target_file_size: usize,
    pub rows_per_file: Option<usize>,
    pub row_group_rows: Option<usize>,
    pub cluster_by: Vec<String>,
    /// Overwrite only the rows this predicate matches (replaceWhere).
    pub predicate: Option<String>,
    /// Schema evolution: "merge" or "overwrite".
    pub schema_mode: Option<String>,
    /// `write_files`: the writer's slot for identity values.
    pub identity_slot: Option<u64>,
    /// `write_files`/`commit_files`: the Delta schema (JSON) of
    /// `prepare_create`, in place of `schema_ipc`.
    pub table_schema: Option<String>,
    /// `write_files`: how many writers share the commit (their values
    /// interleave as Delta Spark's), when known.
    pub identity_slots: Option<u64>,
    /// The session time zone (`time_zone`, an IANA name or an offset).
    pub time_zone: TimeZone,
    /// How a commit that creates the table is recorded: `"CREATE TABLE AS
    /// SELECT"` (None) or `"WRITE"`, with `operation_mode` (default: `mode`)
    /// as its `mode` parameter.
    pub operation: Option<String>,
    pub operation_mode: Option<String>,
    /// An application transaction (`txn`): Delta Spark's `txnAppId` /
    /// `txnVersion`; a streaming batch's query id and batch id.
    pub txn_app_id: Option<String>,
    pub txn_version: Option<i64>,
    /// A streaming batch (`STREAMING UPDATE`): `"append"` or `"complete"`.
    pub output_mode: Option<String>,
}

impl Default for WriteArgs {
    fn default() -> Self {
        WriteArgs {
            mode: "error".into(),
            schema_ipc: None,
            partition_by: Vec::new(),
            configuration: HashMap::new(),
            enable_deletion_vectors: true,
            target_file_size: DEFAULT_TARGET_FILE_SIZE,
            rows_per_file: None,
            row_group_rows: None,
            cluster_by: Vec::new(),
            predicate: None,
            schema_mode: None,
            identity_slot: None,
            table_schema: None,
            identity_slots: None,
            time_zone: TimeZone::utc(),
            operation: None,
            operation_mode: None,
            txn_app_id: None,
            txn_version: None,
            output_mode: None,
        }
    }
}

impl WriteArgs {
    /// From the keyword arguments of the call `what`.
    pub fn from_kwargs(what: &'static str, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let kw = Kwargs::new(
            what,
            kwargs,
            &[
                "mode",
                "schema_ipc",
                "partition_by",
                "configuration",
                "enable_deletion_vectors",
                "target_file_size",
                "rows_per_file",
                "row_group_rows",
                "cluster_by",
                "predicate",
                "schema_mode",
                "identity_slot",
                "table_schema",
                "identity_slots",
                "time_zone",
                "operation",
                "operation_mode",
                "txn_app_id",
                "txn_version",
                "output_mode",
            ],
        )?;
        let d = Self::default();
        Ok(WriteArgs {
            txn_app_id: kw.get("txn_app_id", d.txn_app_id)?,
            txn_version: kw.get("txn_version", d.txn_version)?,
            output_mode: kw.get("output_mode", d.output_mode)?,
            operation: kw.get("operation", d.operation)?,
            operation_mode: kw.get("operation_mode", d.operation_mode)?,
            cluster_by: kw.get("cluster_by", d.cluster_by.clone())?,
            predicate: kw.get("predicate", d.predicate)?,
            schema_mode: kw.get("schema_mode", d.schema_mode)?,
            mode: kw.get("mode", d.mode)?,
            schema_ipc: kw.get("schema_ipc", d.schema_ipc)?,
            partition_by: kw.get("partition_by", d.partition_by)?,
            configuration: kw.get("configuration", d.configuration)?,
            enable_deletion_vectors: kw
                .get("enable_deletion_vectors", d.enable_deletion_vectors)?,
            target_file_size: kw.get("target_file_size", d.target_file_size)?,
            rows_per_file: kw.get("rows_per_file", d.rows_per_file)?,
            row_group_rows: kw.get("row_group_rows", d.row_group_rows)?,
            identity_slot: kw.get("identity_slot", d.identity_slot)?,
            table_schema: kw.get("table_schema", d.table_schema)?,
            identity_slots: kw.get("identity_slots", d.identity_slots)?,
            time_zone: time_zone_of(kw.get("time_zone", None)?)?,
        })
    }
}

impl WriteArgs {
    /// The write options, and the schema bytes apart (read later, with the
    /// GIL released).
    pub fn write_options(self) -> crate::Result<(WriteOptions, Option<Vec<u8>>)> {
        let mode = SaveMode::parse(&self.mode)?;
        let create_operation = match self.operation.as_deref() {
            None | Some("CREATE TABLE AS SELECT") => CreateOperation::CreateTableAsSelect,
            Some("WRITE") => CreateOperation::Write {
                mode: match self.operation_mode.as_deref() {
                    Some(m) => SaveMode::parse(m)?,
                    None => mode,
                }
                .spark_name(),
            },
            Some(other) => {
                return Err(crate::Error::InvalidArgument(format!(
                    "operation {other:?} is not supported (expected \"CREATE TABLE AS \
                     SELECT\" or \"WRITE\")"
                )))
            }
        };
        if self.operation_mode.is_some() && self.operation.as_deref() != Some("WRITE") {
            return Err(crate::Error::InvalidArgument(
                "operation_mode is only allowed with operation=\"WRITE\"".into(),
            ));
        }
        let options = WriteOptions {
            create_operation,
            app: AppCommit::from_options(
                self.txn_app_id,
                self.txn_version,
                self.output_mode.as_deref(),
            )?,
            mode,
            predicate: self.predicate,
            schema_mode: SchemaMode::parse(self.schema_mode.as_deref())?,
            partition_by: self.partition_by,
            configuration: self.configuration,
            enable_deletion_vectors: self.enable_deletion_vectors,
            writer: WriterOptions {
                target_file_size: self.target_file_size,
                max_rows_per_file: self.rows_per_file,
                row_group_rows: self.row_group_rows,
                time_zone: self.time_zone,
            },
            cluster_by: self.cluster_by,
            identity_slot: self
                .identity_slot
                .map(|i| crate::write::data::rules::IdentitySlot::of(i, self.identity_slots))
                .transpose()?,
        };
        Ok((options, self.schema_ipc))
    }
}

/// The `time_zone` keyword: UTC when None, else the zone it names (an
/// unknown name is a `ValueError` before anything is written).
pub(super) fn time_zone_of(name: Option<String>) -> PyResult<TimeZone> {
    name.map_or_else(
        || Ok(TimeZone::utc()),
        |n| TimeZone::parse(&n).map_err(super::to_py),
    )
}

/// A scan filter from SQL text or an expression tree's JSON (not both).
pub(super) fn filter_of(
    sql: Option<String>,
    json: Option<String>,
) -> crate::Result<Option<crate::expr::Filter>> {
    match (sql, json) {
        (None, None) => Ok(None),
        (Some(text), None) => Ok(Some(crate::expr::Filter::Sql(text))),
        (None, Some(json)) => Ok(Some(crate::expr::Filter::Expr(
            crate::expr::Expr::from_json(&json)?,
        ))),
        (Some(_), Some(_)) => Err(crate::Error::InvalidArgument(
            "give filter (SQL text) or filter_json (an expression tree), not both".into(),
        )),
    }
}
