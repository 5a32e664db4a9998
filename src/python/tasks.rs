//! Tasks that cross to other processes (Spark executors) as JSON: typed,
//! read-only views of them (`ScanTaskInfo`, `ChangeTaskInfo`,
//! `CompactTaskInfo`, so no Python code parses task JSON), and the executor
//! side of scans and distributed DELETEs.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::stream::{ArrowSchema, BatchReader};
use super::{rows_from_object, to_py};
use crate::io::{block_on, TableStore};
use crate::log::path::normalize_path;

fn json_error(context: &str) -> impl Fn(serde_json::Error) -> crate::Error + '_ {
    move |source| crate::Error::Json {
        context: context.into(),
        source,
    }
}

/// What one scan task (`RawDeltaTable.scan_tasks`, `cdf_tasks`) reads, from
/// its JSON.
#[pyclass(module = "deltadv._core", frozen)]
pub struct ScanTaskInfo {
    task: crate::scan::task::ScanTask,
}

#[pymethods]
impl ScanTaskInfo {
    #[new]
    fn new(task: &str) -> PyResult<Self> {
        let task = crate::scan::task::ScanTask::from_json(task, HashMap::new()).map_err(to_py)?;
        Ok(ScanTaskInfo { task })
    }

    /// The data (or change) file, as in the log, URL-decoded.
    #[getter]
    fn path(&self) -> &str {
        &self.task.path
    }

    /// The file's size in bytes.
    #[getter]
    fn file_size(&self) -> u64 {
        self.task.size
    }

    /// The row groups read (None: all of them).
    #[getter]
    fn row_groups(&self) -> Option<Vec<usize>> {
        self.task.row_groups.clone()
    }

    /// The file's partition values (as in the log: text, or None for null).
    #[getter]
    fn partition_values(&self) -> HashMap<String, Option<String>> {
        self.task.partition_values.clone()
    }

    /// Rows of the file its deletion vector deletes (0: none).
    #[getter]
    fn deleted_rows(&self) -> u64 {
        self.task
            .deletion_vector
            .as_ref()
            .map_or(0, |d| d.cardinality())
    }

    /// Whether the rows come with `_row_index` and `_file_path`.
    #[getter]
    fn with_metadata(&self) -> bool {
        self.task.with_metadata
    }

    /// A change data feed task's `_change_type` (`insert`, `delete`,
    /// `update_preimage`, `update_postimage`); `"cdc"` for a change file
    /// (each row carries its own); None for a scan task.
    #[getter]
    fn change_type(&self) -> Option<&'static str> {
        use crate::log::cdf::ChangedRows;
        self.task.change.as_ref().map(|c| match &c.rows {
            ChangedRows::CdcFile => "cdc",
            ChangedRows::Live { change_type, .. }
            | ChangedRows::DvDifference { change_type, .. } => change_type.as_str(),
        })
    }

    /// A change data feed task's commit version (None for a scan task).
    #[getter]
    fn commit_version(&self) -> Option<u64> {
        self.task.change.as_ref().map(|c| c.commit_version)
    }

    /// A change data feed task's commit time, ms since the epoch.
    #[getter]
    fn commit_timestamp(&self) -> Option<i64> {
        self.task.change.as_ref().map(|c| c.commit_timestamp)
    }

    /// The Arrow schema of the task's rows.
    fn schema(&self) -> PyResult<ArrowSchema> {
        Ok(ArrowSchema::new(self.task.output_schema().map_err(to_py)?))
    }
}

/// What one UPDATE/MERGE change task (`RawDeltaTable.change_task`) may
/// change, from its JSON.
#[pyclass(module = "deltadv._core", frozen)]
pub struct ChangeTaskInfo {
    task: crate::write::changes::ChangeTask,
}

#[pymethods]
impl ChangeTaskInfo {
    #[new]
    fn new(task: &str) -> PyResult<Self> {
        let task = serde_json::from_str(task)
            .map_err(json_error("change task"))
            .map_err(to_py)?;
        Ok(ChangeTaskInfo { task })
    }

    /// The data files whose rows the task may replace (URL-decoded).
    #[getter]
    fn paths(&self) -> Vec<String> {
        self.task
            .targets
            .iter()
            .map(|a| normalize_path(&a.path))
            .collect()
    }

    /// Whether replaced rows are marked in deletion vectors (else the files
    /// are rewritten).
    #[getter]
    fn deletion_vectors(&self) -> bool {
        self.task.dvs
    }

    #[getter]
    fn inline_threshold(&self) -> usize {
        self.task.inline_threshold
    }

    #[getter]
    fn dv_file_target_size(&self) -> usize {
        self.task.dv_file_target_size
    }

    #[getter]
    fn target_file_size(&self) -> usize {
        self.task.target_file_size
    }
}

/// One bin of a compaction (`RawDeltaTable.compact_plan`'s tasks), from its
/// JSON.
#[pyclass(module = "deltadv._core", frozen)]
pub struct CompactTaskInfo {
    task: crate::write::optimize::CompactTask,
}

#[pymethods]
impl CompactTaskInfo {
    #[new]
    fn new(task: &str) -> PyResult<Self> {
        let task = crate::write::optimize::CompactTask::from_json(task).map_err(to_py)?;
        Ok(CompactTaskInfo { task })
    }

    /// The files the bin rewrites (URL-decoded).
    #[getter]
    fn paths(&self) -> Vec<String> {
        self.task
            .bin
            .files
            .iter()
            .map(|a| normalize_path(&a.path))
            .collect()
    }

    /// Their size in bytes, together.
    #[getter]
    fn size(&self) -> u64 {
        self.task
            .bin
            .files
            .iter()
            .map(|a| u64::try_from(a.size).unwrap_or(0))
            .sum()
    }

    /// The partition values the bin's files share (as in the log).
    #[getter]
    fn partition_values(&self) -> HashMap<String, Option<String>> {
        self.task
            .bin
            .files
            .first()
            .map(|a| a.partition_values.clone())
            .unwrap_or_default()
    }

    /// The size (bytes) the new files are cut at.
    #[getter]
    fn target_size(&self) -> u64 {
        self.task.target_size
    }
}

/// The request counters of a table (`RawDeltaTable.request_counter`): scan
/// tasks read with it in the same process count their requests there. Not
/// picklable: a task read in another process counts in that process.
#[pyclass(module = "deltadv._core", frozen)]
pub struct RequestCounter {
    pub(crate) counts: std::sync::Arc<crate::io::store::RequestCounts>,
}

/// Stream one scan task (its JSON) as Arrow batches, DVs applied, decoded as
/// they are pulled (row groups on `num_threads()` threads; in row order, or
/// as decoded when not `ordered`). Runs on Spark executors: the process
/// runtime is created here, after any fork. With `counter`, its requests
/// are counted there (the table the task came from). `batch_size`: rows per
/// decoded batch (default [`crate::scan::BATCH_ROWS`]).
#[pyfunction]
#[pyo3(signature = (task, storage_options=None, ordered=true, counter=None, batch_size=None))]
pub fn read_scan_task(
    py: Python<'_>,
    task: &str,
    storage_options: Option<HashMap<String, String>>,
    ordered: bool,
    counter: Option<PyRef<'_, RequestCounter>>,
    batch_size: Option<usize>,
) -> PyResult<BatchReader> {
    let batch_rows = batch_rows(batch_size)?;
    let counts = counter.map(|c| c.counts.clone());
    let (schema, stream) = py
        .detach(|| -> crate::Result<_> {
            let task =
                crate::scan::task::ScanTask::from_json(task, storage_options.unwrap_or_default())?;
            let schema = task.output_schema()?;
            let read = crate::scan::ReadOptions {
                ordered,
                batch_rows,
                ..crate::scan::ReadOptions::default()
            };
            let mut store = TableStore::open(&task.table_uri, &task.storage_options)?;
            if let Some(counts) = counts {
                store = store.counting_into(counts);
            }
            let stream = block_on(task.stream_on(store, read))??;
            Ok((schema, stream))
        })
        .map_err(to_py)?;
    Ok(BatchReader::new(schema, stream))
}

/// Stream scan tasks (their JSON; a change data feed's, in commit order) as
/// one stream of Arrow batches with the first task's schema: up to
/// `num_threads()` tasks read at once, in task order, or as decoded when not
/// `ordered` (see `scan::cdf::stream_tasks`). At least one task. `batch_size`
/// as for [`read_scan_task`].
#[pyfunction]
#[pyo3(signature = (tasks, storage_options=None, ordered=true, counter=None, batch_size=None))]
pub fn read_scan_tasks(
    py: Python<'_>,
    tasks: Vec<String>,
    storage_options: Option<HashMap<String, String>>,
    ordered: bool,
    counter: Option<PyRef<'_, RequestCounter>>,
    batch_size: Option<usize>,
) -> PyResult<BatchReader> {
    let batch_rows = batch_rows(batch_size)?;
    let counts = counter.map(|c| c.counts.clone());
    let (schema, stream) = py
        .detach(|| -> crate::Result<_> {
            let options = storage_options.unwrap_or_default();
            let tasks = tasks
                .iter()
                .map(|t| crate::scan::task::ScanTask::from_json(t, options.clone()))
                .collect::<crate::Result<Vec<_>>>()?;
            let first = tasks.first().ok_or_else(|| {
                crate::Error::InvalidArgument(
                    "read_scan_tasks: no tasks (at least one is needed for the schema)".into(),
                )
            })?;
            if let Some(other) = tasks.iter().find(|t| t.table_uri != first.table_uri) {
                return Err(crate::Error::InvalidArgument(format!(
                    "read_scan_tasks: the tasks are of one table, not of {} and {}",
                    first.table_uri, other.table_uri
                )));
            }
            let schema = first.output_schema()?;
            // one store (one client) for every task
            let mut store = TableStore::open(&first.table_uri, &first.storage_options)?;
            if let Some(counts) = counts {
                store = store.counting_into(counts);
            }
            let read = crate::scan::ReadOptions {
                ordered,
                batch_rows,
                ..crate::scan::ReadOptions::default()
            };
            let stream =
                block_on(async move { crate::scan::cdf::stream_tasks(store, tasks, read) })?;
            Ok((schema, stream))
        })
        .map_err(to_py)?;
    Ok(BatchReader::new(schema, stream))
}

/// Rows per decoded batch of a task read: `batch_size` (at least 1), else
/// [`crate::scan::BATCH_ROWS`].
fn batch_rows(batch_size: Option<usize>) -> PyResult<usize> {
    match batch_size {
        Some(0) => Err(PyValueError::new_err(
            "batch_size must be at least 1, not 0",
        )),
        Some(n) => Ok(n),
        None => Ok(crate::scan::BATCH_ROWS),
    }
}

/// The Arrow schema a scan task returns.
#[pyfunction]
pub fn scan_task_schema(task: &str) -> PyResult<ArrowSchema> {
    let task = crate::scan::task::ScanTask::from_json(task, HashMap::new()).map_err(to_py)?;
    Ok(ArrowSchema::new(task.output_schema().map_err(to_py)?))
}

/// Executor side of a Spark DELETE: `items` are (add action JSON, rows to
/// delete); writes one DV file for them and returns one JSON per changed file
/// for `RawDeltaTable.commit_prepared` on the driver.
#[pyfunction]
#[pyo3(signature = (table_uri, storage_options, items, inline_threshold=0, dv_file_target_size=crate::write::delete::DEFAULT_DV_FILE_TARGET_SIZE))]
pub fn prepare_delete(
    py: Python<'_>,
    table_uri: &str,
    storage_options: HashMap<String, String>,
    items: Vec<(String, Bound<'_, PyAny>)>,
    inline_threshold: usize,
    dv_file_target_size: usize,
) -> PyResult<Vec<String>> {
    let mut parsed = Vec::with_capacity(items.len());
    for (add, rows) in &items {
        let add: crate::log::actions::Add = serde_json::from_str(add)
            .map_err(|e| PyValueError::new_err(format!("invalid add action JSON: {e}")))?;
        parsed.push((add, rows_from_object(rows)?));
    }
    let options = crate::write::delete::DeleteOptions {
        inline_threshold,
        dv_file_target_size,
        ..Default::default()
    };
    py.detach(|| -> crate::Result<Vec<String>> {
        let store = TableStore::open(table_uri, &storage_options)?;
        let prepared = block_on(crate::write::delete::prepare_files(
            &store, parsed, &options,
        ))??;
        prepared
            .iter()
            .map(|p| serde_json::to_string(p).map_err(json_error("prepared delete")))
            .collect()
    })
    .map_err(to_py)
}
