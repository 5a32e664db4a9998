//! `RawDeltaTable`, the native half of `deltadv.DeltaTable`: one method per
//! table operation, each converting its arguments (long option lists come as
//! `**options`, see [`super::options`]), releasing the GIL around the work in
//! the pure modules and converting the result.

use std::collections::HashMap;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::convert::{delete_metrics, json_to_py, set_outcome};
use super::options::{CdfArgs, DmlArgs, ScanArgs};
use super::stream::{ArrowSchema, ArrowStream, BatchReader};
use super::{rows_from_object, to_py, DeletionVector};
use crate::io::{block_on, TableStore};
use crate::table::snapshot::Snapshot;

/// A task's JSON and about how many bytes it reads.
type TaskJson = (String, u64);

/// A table at one version (the native half of `deltadv.DeltaTable`).
#[pyclass(module = "deltadv._core")]
pub struct RawDeltaTable {
    uri: String,
    options: HashMap<String, String>,
    store: TableStore,
    snapshot: Arc<Snapshot>,
}

#[pymethods]
impl RawDeltaTable {
    #[new]
    #[pyo3(signature = (table_uri, version=None, storage_options=None))]
    fn new(
        py: Python<'_>,
        table_uri: String,
        version: Option<u64>,
        storage_options: Option<HashMap<String, String>>,
    ) -> PyResult<Self> {
        let options = storage_options.unwrap_or_default();
        let (store, snapshot) = py
            .detach(|| -> crate::Result<_> {
                let store = TableStore::open(&table_uri, &options)?;
                let snapshot = block_on(Snapshot::load(store.clone(), version))??;
                Ok((store, snapshot))
            })
            .map_err(to_py)?;
        Ok(RawDeltaTable {
            uri: table_uri,
            options,
            store,
            snapshot: Arc::new(snapshot),
        })
    }

    #[getter]
    fn table_uri(&self) -> &str {
        &self.uri
    }

    fn version(&self) -> u64 {
        self.snapshot.version()
    }

    /// Commit timestamp of the loaded version, ms since the epoch.
    fn timestamp(&self) -> Option<i64> {
        self.snapshot.timestamp()
    }

    fn arrow_schema(&self) -> PyResult<ArrowSchema> {
        let schema = self.snapshot.arrow_schema().map_err(to_py)?;
        Ok(ArrowSchema::new(Arc::new(schema)))
    }

    fn schema_json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("json")?
            .call_method1("loads", (&self.snapshot.metadata().schema_string,))
    }

    /// The latest `txn` version of application `app_id`, None when none.
    fn transaction_version(&self, app_id: &str) -> Option<i64> {
        self.snapshot.transaction_version(app_id)
    }

    /// Whether this version holds application `app_id`'s write `version`
    /// already (a write carrying that `txn` would be skipped).
    fn transaction_applied(&self, app_id: &str, version: i64) -> PyResult<bool> {
        crate::write::app_txn::AppTransaction::try_new(app_id, version)
            .map(|t| t.applied_in(&self.snapshot))
            .map_err(to_py)
    }

    fn protocol<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, self.snapshot.protocol())
    }

    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, self.snapshot.metadata())
    }

    fn add_actions_table(&self, py: Python<'_>) -> PyResult<ArrowStream> {
        let batches = py
            .detach(|| self.snapshot.files_batches_on(crate::io::num_threads()))
            .map_err(to_py)?;
        let schema = batches
            .first()
            .map(|b| b.schema())
            .ok_or_else(|| to_py(crate::Error::Internal("no files batch".into())))?;
        Ok(ArrowStream::new(schema, batches))
    }

    /// Live rows: from the log's stats, reading footers of files without them.
    fn count(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| block_on(crate::scan::count_rows(&self.snapshot)))
            .map_err(to_py)?
            .map_err(to_py)
    }

    /// `[(path, DeletionVector)]` for every live file with a DV (one GET per DV file).
    fn deletion_vectors(&self, py: Python<'_>) -> PyResult<Vec<(String, DeletionVector)>> {
        let loaded = py
            .detach(|| block_on(self.snapshot.deletion_vectors_serialized()))
            .map_err(to_py)?
            .map_err(to_py)?;
        Ok(loaded
            .into_iter()
            .filter_map(|(i, dv)| {
                self.snapshot
                    .file_path(i)
                    .map(|p| (p, DeletionVector::from_serialized(dv)))
            })
            .collect())
    }

    #[pyo3(signature = (limit=None))]
    fn history<'py>(&self, py: Python<'py>, limit: Option<usize>) -> PyResult<Bound<'py, PyAny>> {
        let entries = py
            .detach(|| block_on(self.snapshot.history(limit)))
            .map_err(to_py)?
            .map_err(to_py)?;
        json_to_py(py, &entries)
    }

    /// Reload at `version` (None = latest).
    #[pyo3(signature = (version=None))]
    fn load_version(&mut self, py: Python<'_>, version: Option<u64>) -> PyResult<()> {
        let store = self.store.clone();
        let snapshot = py
            .detach(|| block_on(Snapshot::load(store, version)))
            .map_err(to_py)?
            .map_err(to_py)?;
        self.snapshot = Arc::new(snapshot);
        Ok(())
    }

    /// Reload at the latest version committed at or before `timestamp_ms`.
    fn load_timestamp(&mut self, py: Python<'_>, timestamp_ms: i64) -> PyResult<()> {
        let store = self.store.clone();
        let snapshot = py
            .detach(|| {
                block_on(async {
                    let v = Snapshot::version_at(&store, timestamp_ms).await?;
                    Snapshot::load(store.clone(), Some(v)).await
                })
            })
            .map_err(to_py)?
            .map_err(to_py)?;
        self.snapshot = Arc::new(snapshot);
        Ok(())
    }

    /// Scan tasks (JSON strings) and the bytes each reads: one per live
    /// file the filter cannot rule out, or several per file larger than
    /// `split_size` bytes. Options (keywords): `columns`, `filter` (SQL
    /// text) or `filter_json` (an expression tree's JSON), `filter_rows`,
    /// `split_size`, `with_metadata`, `with_row_tracking`.
    #[pyo3(signature = (**options))]
    fn scan_tasks(
        &self,
        py: Python<'_>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Vec<(String, u64)>> {
        let options = ScanArgs::from_kwargs("scan_tasks", options)?
            .task_options()
            .map_err(to_py)?;
        let split_size = options.split_size;
        py.detach(|| {
            block_on(crate::scan::task::plan_tasks(
                &self.snapshot,
                &self.uri,
                &self.options,
                &options,
            ))??
            .iter()
            .map(|t| Ok((t.to_json()?, t.estimated_bytes(split_size))))
            .collect::<crate::Result<Vec<_>>>()
        })
        .map_err(to_py)
    }

    /// The Arrow schema a scan (or its tasks) of `columns` (all when None)
    /// returns; with `row_tracking`, `_row_id` and `_row_commit_version`
    /// after them (an error for a table that does not track rows).
    #[pyo3(signature = (columns=None, row_tracking=false))]
    fn scan_schema(
        &self,
        columns: Option<Vec<String>>,
        row_tracking: bool,
    ) -> PyResult<ArrowSchema> {
        let mut spec = crate::scan::ScanSpec::for_snapshot(&self.snapshot, columns);
        if row_tracking {
            spec.row_tracking =
                Some(crate::scan::RowTrackingColumns::of(&self.snapshot).map_err(to_py)?);
        }
        Ok(ArrowSchema::new(spec.output_schema().map_err(to_py)?))
    }

    /// Change data feed tasks (JSON strings) of a version range, and the
    /// schema their rows have: the table's columns, then `_change_type`,
    /// `_commit_version`, `_commit_timestamp`. Timestamps in ms.
    /// Options (keywords): `starting_version`, `ending_version`,
    /// `starting_timestamp`, `ending_timestamp`, `columns`, `filter`.
    #[pyo3(signature = (**options))]
    fn cdf_tasks(
        &self,
        py: Python<'_>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<(ArrowSchema, Vec<String>)> {
        let options = CdfArgs::from_kwargs("cdf_tasks", options)?.change_options();
        py.detach(|| -> crate::Result<_> {
            let plan = block_on(crate::scan::cdf::plan_changes(
                &self.store,
                &self.uri,
                &self.options,
                &options,
            ))??;
            let tasks = plan
                .tasks
                .iter()
                .map(crate::scan::task::ScanTask::to_json)
                .collect::<crate::Result<Vec<_>>>()?;
            Ok((ArrowSchema::new(plan.schema), tasks))
        })
        .map_err(to_py)
    }

    /// The offset (a dict) of a stream of this table that has read nothing.
    fn stream_initial_offset<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(
            py,
            &crate::log::stream::StreamOffset::not_started(&self.snapshot.metadata().id),
        )
    }

    /// The schema of a change data feed stream of this table: its columns,
    /// then `_change_type`, `_commit_version` and `_commit_timestamp`.
    fn stream_change_schema(&self) -> PyResult<ArrowSchema> {
        crate::scan::stream_cdf::change_schema(&self.snapshot)
            .map(ArrowSchema::new)
            .map_err(to_py)
    }

    /// The version a stream with `startingTimestamp` (ms) starts at.
    fn stream_starting_version(&self, py: Python<'_>, timestamp_ms: i64) -> PyResult<u64> {
        py.detach(|| {
            block_on(crate::scan::stream::starting_version_at(
                &self.store,
                timestamp_ms,
            ))?
        })
        .map_err(to_py)
    }

    /// One scan of the streaming source over this table (the snapshot the
    /// stream reads with) from the offset `start` (JSON), up to `bound`
    /// (inclusive) when given, within `maxFilesPerTrigger`/`maxBytesPerTrigger`
    /// when `limited`: the offset it ends at (a dict) and the tasks (JSON) and
    /// sizes of the files it reads.
    /// With `batch`, `bound` is the end of a micro-batch to read (a batch
    /// replayed after a restart reads what it read).
    /// With `read_change_feed`, the stream of the change data feed: the tasks
    /// (of a batch only) read each file's changed rows with the change columns.
    #[pyo3(signature = (start, bound=None, limited=false, max_files=None, max_bytes=None, starting_version=None, ignore_deletes=false, ignore_changes=false, skip_change_commits=false, batch=false, read_change_feed=false, check_start=true))]
    #[allow(clippy::too_many_arguments)]
    fn stream_scan<'py>(
        &self,
        py: Python<'py>,
        start: &str,
        bound: Option<&str>,
        limited: bool,
        max_files: Option<i64>,
        max_bytes: Option<i64>,
        starting_version: Option<u64>,
        ignore_deletes: bool,
        ignore_changes: bool,
        skip_change_commits: bool,
        batch: bool,
        read_change_feed: bool,
        check_start: bool,
    ) -> PyResult<(Bound<'py, PyAny>, Vec<TaskJson>)> {
        use crate::log::stream::{Admission, ChangePolicy, StreamOffset};
        let id = &self.snapshot.metadata().id;
        let start = StreamOffset::from_json(start, id).map_err(to_py)?;
        let bound = bound
            .map(|b| StreamOffset::from_json(b, id))
            .transpose()
            .map_err(to_py)?;
        let options = crate::scan::stream::StreamOptions {
            starting_version,
            policy: ChangePolicy {
                ignore_deletes,
                ignore_changes,
                skip_change_commits,
            },
            check_start,
        };
        let admission = limited.then(|| Admission::new(max_files, max_bytes));
        let end = match (&bound, batch) {
            (Some(b), true) => crate::scan::stream::ScanEnd::Batch(b),
            (None, true) => {
                return Err(to_py(crate::Error::InvalidArgument(
                    "stream_scan: a batch needs its end offset (bound)".into(),
                )))
            }
            (b, false) => crate::scan::stream::ScanEnd::Next {
                bound: b.as_ref(),
                admission,
            },
        };
        if read_change_feed {
            let (end, tasks) = py
                .detach(|| -> crate::Result<_> {
                    let scan = block_on(crate::scan::stream_cdf::scan_changes(
                        &self.snapshot,
                        &start,
                        end,
                        &options,
                        &self.uri,
                        &self.options,
                    ))??;
                    let tasks = scan
                        .tasks
                        .iter()
                        .map(|task| Ok((task.to_json()?, task.size)))
                        .collect::<crate::Result<Vec<_>>>()?;
                    Ok((scan.end, tasks))
                })
                .map_err(to_py)?;
            return Ok((json_to_py(py, &end)?, tasks));
        }
        let (end, tasks) = py
            .detach(|| -> crate::Result<_> {
                let scan = block_on(crate::scan::stream::scan(
                    &self.snapshot,
                    &start,
                    end,
                    &options,
                    &self.uri,
                ))??;
                let tasks = scan
                    .files
                    .iter()
                    .filter_map(|f| f.add.as_ref())
                    .map(|add| {
                        let task = crate::scan::stream::task_of(
                            &self.snapshot,
                            add,
                            &self.uri,
                            &self.options,
                        );
                        Ok((task.to_json()?, task.size))
                    })
                    .collect::<crate::Result<Vec<_>>>()?;
                Ok((scan.end, tasks))
            })
            .map_err(to_py)?;
        Ok((json_to_py(py, &end)?, tasks))
    }

    /// Stream every live file (DVs applied) as Arrow batches, decoded as
    /// they are pulled, row groups decoded in parallel on `num_threads()`
    /// threads, up to `prefetch_files` footers fetched ahead; batches in
    /// order (file, then row), or as decoded when not `ordered`
    /// (`materialize`: the caller keeps every batch, so pieces may decode
    /// whole ahead of it); with a
    /// `filter`, only the rows it matches (files and row groups it rules out
    /// are not read).
    /// With `row_tracking`, each row's `_row_id` and `_row_commit_version`
    /// too (tables that track rows).
    /// `offset` rows (after the filter) are skipped, and at most `limit`
    /// returned: no file is opened past those the limit needs (read-ahead
    /// aside), and without a filter, files the log's row counts place
    /// wholly before the offset or past the limit are not read at all.
    /// `batch_size`: rows per decoded batch (default [`crate::scan::BATCH_ROWS`];
    /// [`crate::scan::MATERIALIZE_BATCH_ROWS`] when materializing every row).
    /// `string_view`: strings and binaries as views ([`crate::scan::ScanSpec::string_view`]).
    /// `read_ahead_bytes`: decoded bytes each piece may hold ahead of the
    /// reader (default [`crate::scan::READ_AHEAD_BYTES`], or
    /// [`crate::scan::MATERIALIZE_READ_AHEAD_BYTES`] when materializing).
    #[pyo3(signature = (columns=None, filter=None, with_metadata=false, filter_json=None, prefetch_files=crate::scan::DEFAULT_PREFETCH_FILES, row_tracking=false, ordered=true, materialize=false, limit=None, offset=0, batch_size=None, string_view=false, read_ahead_bytes=None))]
    #[allow(clippy::too_many_arguments)]
    fn scan(
        &self,
        py: Python<'_>,
        columns: Option<Vec<String>>,
        filter: Option<String>,
        with_metadata: bool,
        filter_json: Option<String>,
        prefetch_files: usize,
        row_tracking: bool,
        ordered: bool,
        materialize: bool,
        limit: Option<u64>,
        offset: u64,
        batch_size: Option<usize>,
        string_view: bool,
        read_ahead_bytes: Option<usize>,
    ) -> PyResult<BatchReader> {
        let filter = super::options::filter_of(filter, filter_json).map_err(to_py)?;
        if batch_size == Some(0) {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "batch_size must be at least 1, not 0",
            ));
        }
        let (schema, stream) = py
            .detach(|| -> crate::Result<_> {
                let mut spec = crate::scan::ScanSpec::for_snapshot(&self.snapshot, columns);
                spec.with_metadata_columns = with_metadata;
                spec.string_view = string_view;
                if row_tracking {
                    spec.row_tracking = Some(crate::scan::RowTrackingColumns::of(&self.snapshot)?);
                }
                let schema = spec.output_schema()?;
                if let Some(filter) = filter {
                    spec.filter = Some(Arc::new(crate::expr::Predicate::bind(
                        &filter,
                        self.snapshot.schema(),
                        &self.snapshot.metadata().partition_columns,
                        self.snapshot.column_mapping(),
                        crate::expr::Binding::Strict,
                    )?));
                    spec.filter_rows = true;
                }
                let read = crate::scan::ReadOptions {
                    prefetch_files,
                    ordered,
                    read_ahead_bytes: read_ahead_bytes.unwrap_or(if materialize {
                        crate::scan::MATERIALIZE_READ_AHEAD_BYTES
                    } else {
                        crate::scan::READ_AHEAD_BYTES
                    }),
                    offset,
                    limit,
                    // a few rows asked for: no larger batches than a scan's
                    batch_rows: batch_size.unwrap_or(if materialize && limit.is_none() {
                        crate::scan::MATERIALIZE_BATCH_ROWS
                    } else {
                        crate::scan::BATCH_ROWS
                    }),
                    ..crate::scan::ReadOptions::default()
                };
                let stream = block_on(crate::scan::stream_snapshot(&self.snapshot, &spec, read))??;
                Ok((schema, stream))
            })
            .map_err(to_py)?;
        Ok(BatchReader::new(schema, stream))
    }

    /// Plan a REORG PURGE (`mode="purge"`) or OPTIMIZE (`"optimize"`) of
    /// the loaded version: the plan's JSON, and one rewrite task (JSON) per
    /// bin for `rewrite_compact_task`. Options: `target_size`,
    /// `max_deleted_rows_ratio`, the partition filter as SQL text
    /// (`partition_filter`) or an expression tree's JSON
    /// (`partition_filter_json`), `full` (OPTIMIZE FULL).
    #[pyo3(signature = (mode, **options))]
    fn compact_plan(
        &self,
        py: Python<'_>,
        mode: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<(String, Vec<String>)> {
        let mode = super::maintain::mode_of(mode)?;
        let options = super::options::CompactArgs::from_kwargs("compact_plan", options)?
            .compact_options()
            .map_err(to_py)?;
        py.detach(|| -> crate::Result<_> {
            let plan = crate::write::optimize::plan(&self.snapshot, mode, &options)?;
            let tasks = plan
                .tasks(&self.snapshot)
                .iter()
                .map(crate::write::optimize::CompactTask::to_json)
                .collect::<crate::Result<Vec<_>>>()?;
            Ok((super::maintain::plan_to_json(&plan)?, tasks))
        })
        .map_err(to_py)
    }

    /// Commit a compaction planned on the loaded version, whose tasks
    /// returned `results` (JSON lists of add actions); its metrics; reloads.
    #[pyo3(signature = (plan, results, partition_filter=None, partition_filter_json=None))]
    fn commit_compaction<'py>(
        &mut self,
        py: Python<'py>,
        plan: &str,
        results: Vec<String>,
        partition_filter: Option<String>,
        partition_filter_json: Option<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let partition_filter =
            super::maintain::partition_filter(partition_filter, partition_filter_json)?;
        let snapshot = self.snapshot.clone();
        let metrics = py
            .detach(|| -> crate::Result<_> {
                let plan = super::maintain::plan_from_json(plan)?;
                let mut added = Vec::new();
                for r in &results {
                    let adds: Vec<crate::log::actions::Add> =
                        serde_json::from_str(r).map_err(|source| crate::Error::Json {
                            context: "compaction result".into(),
                            source,
                        })?;
                    added.extend(adds);
                }
                let options = crate::write::optimize::CompactOptions {
                    partition_filter,
                    ..Default::default()
                };
                block_on(crate::write::optimize::commit(
                    &snapshot, &plan, added, &options,
                ))?
            })
            .map_err(to_py)?;
        self.reload(py, metrics.version)?;
        super::maintain::metrics_dict(py, &metrics)
    }

    /// VACUUM (see `crate::write::vacuum`): files deleted (or, in a dry run,
    /// to delete) and what was recorded; reloads at the new version.
    /// `progress(deleted, total)` is called as files are deleted.
    #[pyo3(signature = (retention_hours=None, dry_run=true, enforce_retention_duration=true, progress=None, full=true))]
    fn vacuum<'py>(
        &mut self,
        py: Python<'py>,
        retention_hours: Option<f64>,
        dry_run: bool,
        enforce_retention_duration: bool,
        progress: Option<Py<PyAny>>,
        full: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let options = crate::write::vacuum::VacuumOptions {
            retention_hours,
            dry_run,
            enforce_retention_duration,
            lite: !full,
            ..Default::default()
        };
        let result = py
            .detach(|| -> crate::Result<_> {
                let latest = self.latest_snapshot()?;
                let report = |n: usize, total: usize| {
                    if let Some(cb) = &progress {
                        Python::attach(|py| {
                            let _ = cb.call1(py, (n, total));
                        });
                    }
                };
                block_on(crate::write::vacuum::vacuum(&latest, &options, &report))?
            })
            .map_err(to_py)?;
        if !dry_run {
            self.load_version(py, None)?;
        }
        let d = PyDict::new(py);
        d.set_item("files", result.files)?;
        d.set_item("bytes", result.bytes)?;
        d.set_item("dry_run", result.dry_run)?;
        d.set_item("start_version", result.start_version)?;
        d.set_item("end_version", result.end_version)?;
        d.set_item(
            "iceberg_snapshots_expired",
            result.iceberg_snapshots_expired,
        )?;
        Ok(d)
    }

    /// Mirror the latest version as an Iceberg v3 snapshot under `metadata/`
    /// (see `crate::write::iceberg`); what was converted and written.
    fn sync_iceberg<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = py
            .detach(|| -> crate::Result<_> {
                let latest = self.latest_snapshot()?;
                block_on(crate::write::iceberg::sync_iceberg(&latest))?
            })
            .map_err(to_py)?;
        let d = PyDict::new(py);
        d.set_item("delta_version", r.delta_version)?;
        d.set_item("previous_delta_version", r.previous_delta_version)?;
        d.set_item("snapshot_id", r.snapshot_id)?;
        d.set_item("metadata_version", r.metadata_version)?;
        d.set_item("metadata_location", r.metadata_location)?;
        d.set_item("files_written", r.files_written)?;
        d.set_item("added_data_files", r.added_data_files)?;
        d.set_item("removed_data_files", r.removed_data_files)?;
        d.set_item("added_dvs", r.added_dvs)?;
        d.set_item("removed_dvs", r.removed_dvs)?;
        d.set_item("manifests_reused", r.manifests_reused)?;
        d.set_item("manifests_written", r.manifests_written)?;
        Ok(d)
    }

    /// SET TBLPROPERTIES on the latest version (see
    /// `crate::write::properties`); the commit's outcome; reloads at it.
    fn set_table_properties<'py>(
        &mut self,
        py: Python<'py>,
        properties: std::collections::BTreeMap<String, String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let outcome = py
            .detach(|| -> crate::Result<_> {
                let latest = self.latest_snapshot()?;
                block_on(crate::write::properties::set_table_properties(
                    &latest,
                    &properties,
                ))?
            })
            .map_err(to_py)?;
        self.reload(py, outcome.version)?;
        let d = PyDict::new(py);
        d.set_item("version", outcome.version)?;
        d.set_item("iceberg_snapshot_id", outcome.iceberg_snapshot_id)?;
        set_outcome(
            &d,
            outcome.attempts,
            outcome.rebases,
            outcome.checkpointed,
            outcome.checkpoint_error.as_deref(),
            outcome.iceberg_error.as_deref(),
        )?;
        Ok(d)
    }

    /// RESTORE the latest version of the table to `version` (or the version
    /// at `timestamp_ms`); its metrics; reloads at the new version.
    #[pyo3(signature = (version=None, timestamp_ms=None))]
    fn restore<'py>(
        &mut self,
        py: Python<'py>,
        version: Option<u64>,
        timestamp_ms: Option<i64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        use crate::write::restore::RestoreTarget;
        let target = match (version, timestamp_ms) {
            (Some(v), None) => RestoreTarget::Version(v),
            (None, Some(ts)) => RestoreTarget::Timestamp(ts),
            _ => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "restore takes a version or a timestamp (one of them)",
                ))
            }
        };
        let store = self.store.clone();
        let m = py
            .detach(|| -> crate::Result<_> {
                let latest = block_on(Snapshot::load(store, None))??;
                block_on(crate::write::restore::restore(
                    &latest,
                    target,
                    crate::write::transaction::DEFAULT_MAX_ATTEMPTS,
                    crate::write::ENGINE_INFO,
                ))?
            })
            .map_err(to_py)?;
        self.reload(py, m.version)?;
        let d = PyDict::new(py);
        d.set_item("version", m.version)?;
        d.set_item("restored_version", m.restored_version)?;
        super::convert::set_metrics(&d, &m.operation_metrics)?;
        set_outcome(
            &d,
            m.attempts,
            0,
            m.checkpointed,
            m.checkpoint_error.as_deref(),
            m.iceberg_error.as_deref(),
        )?;
        Ok(d)
    }

    /// Drop the `deletionVectors` feature (see
    /// `crate::write::drop_feature`); the version of each step; reloads.
    fn disable_deletion_vectors<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let snapshot = self.snapshot.clone();
        let r = py
            .detach(|| {
                block_on(crate::write::drop_feature::disable_deletion_vectors(
                    &snapshot,
                ))
            })
            .map_err(to_py)?
            .map_err(to_py)?;
        self.load_version(py, None)?;
        let d = PyDict::new(py);
        d.set_item("version", r.downgrade_version)?;
        d.set_item("unset_property_version", r.unset_property_version)?;
        d.set_item("purge_version", r.purge_version)?;
        d.set_item("purged_files", r.purged_files)?;
        d.set_item("tombstones_version", r.tombstones_version)?;
        d.set_item("dv_tombstones", r.dv_tombstones)?;
        d.set_item("barrier_versions", r.barrier_versions)?;
        Ok(d)
    }

    /// Write the symlink manifests of the loaded version (see
    /// `crate::write::manifest`).
    fn generate_symlink_manifest<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let snapshot = self.snapshot.clone();
        let r = py
            .detach(|| block_on(crate::write::manifest::generate_symlink_manifest(&snapshot)))
            .map_err(to_py)?
            .map_err(to_py)?;
        let d = PyDict::new(py);
        d.set_item("manifests", r.manifests)?;
        d.set_item("data_files", r.data_files)?;
        d.set_item("removed", r.removed)?;
        Ok(d)
    }

    /// Remove the files compaction tasks wrote (`results`, as for
    /// `commit_compaction`) when the compaction is given up.
    fn abort_compaction(&self, py: Python<'_>, results: Vec<String>) -> PyResult<()> {
        let store = self.store.clone();
        py.detach(|| -> crate::Result<()> {
            let mut paths = Vec::new();
            for r in &results {
                let adds: Vec<crate::log::actions::Add> =
                    serde_json::from_str(r).map_err(|source| crate::Error::Json {
                        context: "compaction result".into(),
                        source,
                    })?;
                paths.extend(
                    adds.iter()
                        .map(|a| crate::log::path::normalize_path(&a.path)),
                );
            }
            block_on(crate::write::files::remove_uncommitted(&store, &paths))?
        })
        .map_err(to_py)
    }

    /// Delete rows by physical row index (`{path: rows}`); returns the
    /// operation metrics and reloads the table at the new version.
    #[pyo3(signature = (rows, inline_threshold=0, predicate=None, allow_copy_on_write=false, dv_file_target_size=crate::write::delete::DEFAULT_DV_FILE_TARGET_SIZE))]
    fn delete_rows<'py>(
        &mut self,
        py: Python<'py>,
        rows: &Bound<'py, PyDict>,
        inline_threshold: usize,
        predicate: Option<String>,
        allow_copy_on_write: bool,
        dv_file_target_size: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut map = HashMap::new();
        for (k, v) in rows.iter() {
            let path: String = k.extract()?;
            let r = rows_from_object(&v)?;
            match map.get_mut(&path) {
                Some(existing) => *existing |= r,
                None => {
                    map.insert(path, r);
                }
            }
        }
        let options = crate::write::delete::DeleteOptions {
            inline_threshold,
            predicate,
            allow_copy_on_write,
            dv_file_target_size,
            ..Default::default()
        };
        let snapshot = self.snapshot.clone();
        let metrics = py
            .detach(|| block_on(crate::write::delete::delete_rows(&snapshot, map, &options)))
            .map_err(to_py)?
            .map_err(to_py)?;
        self.after_write(py, &metrics)
    }

    /// DELETE WHERE `predicate` (deltadv's predicate subset; None: all rows).
    #[pyo3(signature = (predicate=None, inline_threshold=0, allow_copy_on_write=false, dv_file_target_size=crate::write::delete::DEFAULT_DV_FILE_TARGET_SIZE, time_zone=None))]
    fn delete<'py>(
        &mut self,
        py: Python<'py>,
        predicate: Option<String>,
        inline_threshold: usize,
        allow_copy_on_write: bool,
        dv_file_target_size: usize,
        time_zone: Option<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let options = crate::write::delete::DeleteOptions {
            inline_threshold,
            allow_copy_on_write,
            dv_file_target_size,
            time_zone: super::options::time_zone_of(time_zone)?,
            ..Default::default()
        };
        let snapshot = self.snapshot.clone();
        let metrics = py
            .detach(|| {
                block_on(crate::write::delete::delete_where(
                    &snapshot,
                    predicate.as_deref(),
                    &options,
                ))
            })
            .map_err(to_py)?
            .map_err(to_py)?;
        self.after_write(py, &metrics)
    }

    /// Commit deletes prepared on executors (`prepare_delete` JSON results).
    #[pyo3(signature = (prepared, predicate=None, inline_threshold=0))]
    fn commit_prepared<'py>(
        &mut self,
        py: Python<'py>,
        prepared: Vec<String>,
        predicate: Option<String>,
        inline_threshold: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        let options = crate::write::delete::DeleteOptions {
            inline_threshold,
            predicate,
            ..Default::default()
        };
        let snapshot = self.snapshot.clone();
        let metrics = py
            .detach(|| -> crate::Result<_> {
                let files = prepared
                    .iter()
                    .map(|p| {
                        serde_json::from_str(p).map_err(|source| crate::Error::Json {
                            context: "prepared delete".into(),
                            source,
                        })
                    })
                    .collect::<crate::Result<Vec<_>>>()?;
                block_on(crate::write::delete::commit_prepared(
                    &snapshot, files, &options,
                ))?
            })
            .map_err(to_py)?;
        self.after_write(py, &metrics)
    }

    /// UPDATE … SET column = value (SQL values) WHERE predicate, in this
    /// process; the metrics (snake_case), and the table reloaded.
    /// Options (keywords): `allow_copy_on_write`, `inline_threshold`,
    /// `dv_file_target_size`, `target_file_size`.
    #[pyo3(signature = (updates, predicate=None, **options))]
    fn update<'py>(
        &mut self,
        py: Python<'py>,
        updates: Vec<(String, String)>,
        predicate: Option<String>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let options = DmlArgs::from_kwargs("update", options)?.dml_options();
        let snapshot = self.snapshot.clone();
        let metrics = py
            .detach(|| {
                block_on(crate::write::update::update_where(
                    &snapshot,
                    predicate.as_deref(),
                    &updates,
                    &options,
                ))
            })
            .map_err(to_py)?
            .map_err(to_py)?;
        self.after_dml(py, &metrics)
    }

    /// MERGE `source` (Arrow data with `__arrow_c_stream__`, streamed) into
    /// the table: `clauses` are (kind, action, condition, assignments) as
    /// in `deltadv.write.merge.MergeClause`'s serde names.
    /// Options (keywords): those of `update`, `source_alias`,
    /// `target_alias`, `source_chunk_bytes`, `merge_schema`.
    #[pyo3(signature = (source, predicate, clauses, **options))]
    fn merge<'py>(
        &mut self,
        py: Python<'py>,
        source: &Bound<'py, PyAny>,
        predicate: String,
        clauses: Vec<super::dml::ClauseTuple>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let args = DmlArgs::from_kwargs("merge", options)?;
        let options = args.dml_options();
        let spec = super::dml::merge_spec(
            predicate,
            clauses,
            args.source_alias,
            args.target_alias,
            args.source_chunk_bytes,
            args.merge_schema,
        )
        .map_err(to_py)?;
        let reader = super::write::stream_reader(source)?;
        let snapshot = self.snapshot.clone();
        let metrics = py
            .detach(|| {
                block_on(crate::write::merge::merge(
                    &snapshot, reader, &spec, &options,
                ))
            })
            .map_err(to_py)?
            .map_err(to_py)?;
        self.after_dml(py, &metrics)
    }

    /// The JSON task with which executors write part of an UPDATE or MERGE
    /// touching rows of the files at `paths`.
    /// `new_columns`: an Arrow schema (IPC bytes) whose columns the table
    /// lacks are added (MERGE schema evolution): the task writes them.
    /// Options (keywords): those of `update`, `new_columns`.
    #[pyo3(signature = (paths, **options))]
    fn change_task(
        &self,
        paths: Vec<String>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<String> {
        let args = DmlArgs::from_kwargs("change_task", options)?;
        let options = super::dml::with_new_columns(
            &self.snapshot,
            args.dml_options(),
            args.new_columns.as_deref(),
        )
        .map_err(to_py)?;
        super::dml::change_task(&self.snapshot, &paths, &options).map_err(to_py)
    }

    /// Commit what `prepare_changes` calls wrote (their JSON results) as one
    /// UPDATE or MERGE (`operation`); the metrics, and the table reloaded.
    /// Options (keywords): `parameters` and `extra_metrics` (JSON objects),
    /// `read_files`, `allow_copy_on_write`, `inline_threshold`, `new_columns`.
    /// A MERGE gives its `merge_plan` and `merge_keys` (an Arrow stream of
    /// the source columns its condition names; every row when
    /// `merge_keys_complete`) for the check of files a concurrent commit added.
    #[pyo3(signature = (
        operation, prepared, *, merge_plan=None, merge_keys=None, merge_keys_complete=true,
        **options
    ))]
    #[allow(clippy::too_many_arguments)]
    fn commit_changes<'py>(
        &mut self,
        py: Python<'py>,
        operation: &str,
        prepared: Vec<String>,
        merge_plan: Option<PyRef<'py, super::merge_plan::MergePlan>>,
        merge_keys: Option<&Bound<'py, PyAny>>,
        merge_keys_complete: bool,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let args = DmlArgs::from_kwargs("commit_changes", options)?;
        // The task wrote the files: sizes are the defaults' here.
        let dml = DmlArgs {
            allow_copy_on_write: args.allow_copy_on_write,
            inline_threshold: args.inline_threshold,
            time_zone: args.time_zone.clone(),
            app: args.app.clone(),
            ..Default::default()
        };
        let mut options = super::dml::with_new_columns(
            &self.snapshot,
            dml.dml_options(),
            args.new_columns.as_deref(),
        )
        .map_err(to_py)?;
        options.read_files = args.read_files.map(|f| f.into_iter().collect());
        let merge = match (merge_plan, merge_keys) {
            (Some(plan), Some(keys)) => Some((
                plan.plan().clone(),
                super::write::stream_reader(keys)?,
                merge_keys_complete,
            )),
            (None, None) => None,
            _ => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "commit_changes: merge_plan and merge_keys go together",
                ))
            }
        };
        let snapshot = self.snapshot.clone();
        let metrics = py
            .detach(|| {
                super::dml::commit(
                    &snapshot,
                    operation,
                    &prepared,
                    args.parameters.as_deref(),
                    args.extra_metrics.as_deref(),
                    options,
                    merge,
                )
            })
            .map_err(to_py)?;
        self.after_dml(py, &metrics)
    }

    /// Turn deletion vectors on (protocol feature + `delta.enableDeletionVectors`),
    /// one commit; reloads at the new version and returns it.
    fn enable_deletion_vectors(&mut self, py: Python<'_>) -> PyResult<u64> {
        let snapshot = self.snapshot.clone();
        let version = py
            .detach(|| block_on(crate::write::create::enable_deletion_vectors(&snapshot)))
            .map_err(to_py)?
            .map_err(to_py)?;
        self.load_version(py, Some(version))?;
        Ok(version)
    }

    /// Whether `predicate` (deltadv's subset) names only partition columns;
    /// ValueError if it does not parse or bind.
    fn predicate_is_partition_only(&self, predicate: &str) -> PyResult<bool> {
        let p = crate::expr::Predicate::new(
            predicate,
            self.snapshot.schema(),
            &self.snapshot.metadata().partition_columns,
            self.snapshot.column_mapping(),
            crate::expr::Binding::Strict,
        )
        .map_err(to_py)?;
        Ok(p.partition_only())
    }

    /// The add action (JSON) of each live file, by path (URL-decoded).
    fn add_actions(&self, py: Python<'_>) -> PyResult<HashMap<String, String>> {
        py.detach(|| -> crate::Result<_> {
            self.snapshot
                .files()?
                .into_iter()
                .map(|f| {
                    let json =
                        serde_json::to_string(&f.add).map_err(|source| crate::Error::Json {
                            context: "add action".into(),
                            source,
                        })?;
                    Ok((f.path, json))
                })
                .collect()
        })
        .map_err(to_py)
    }

    /// Requests made by this table so far: gets (of which dv_gets fetched
    /// deletion vector files), puts, lists, deletes, heads; bytes_read.
    fn request_counts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.store.counts();
        let d = PyDict::new(py);
        d.set_item("gets", c.gets)?;
        d.set_item("dv_gets", c.dv_gets)?;
        d.set_item("puts", c.puts)?;
        d.set_item("lists", c.lists)?;
        d.set_item("deletes", c.deletes)?;
        d.set_item("heads", c.heads)?;
        d.set_item("bytes_read", c.bytes_read)?;
        Ok(d)
    }

    /// The table's request counters, for the scan tasks it makes
    /// (`read_scan_task(counter=)`).
    fn request_counter(&self) -> super::tasks::RequestCounter {
        super::tasks::RequestCounter {
            counts: self.store.counter(),
        }
    }

    #[getter]
    fn storage_options(&self) -> HashMap<String, String> {
        self.options.clone()
    }
}

impl RawDeltaTable {
    /// Reload at `version` (a version a write committed).
    fn reload(&mut self, py: Python<'_>, version: Option<u64>) -> PyResult<()> {
        if let Some(v) = version {
            let store = self.store.clone();
            let snapshot = py
                .detach(|| block_on(Snapshot::load(store, Some(v))))
                .map_err(to_py)?
                .map_err(to_py)?;
            self.snapshot = Arc::new(snapshot);
        }
        Ok(())
    }

    /// The latest snapshot (see `crate::table::latest`).
    fn latest_snapshot(&self) -> crate::Result<Arc<Snapshot>> {
        block_on(crate::table::latest::latest_snapshot(&self.snapshot))?
    }

    /// Reload after an UPDATE or MERGE; its metrics as a dict (Delta's
    /// operationMetrics in snake_case, as integers).
    fn after_dml<'py>(
        &mut self,
        py: Python<'py>,
        m: &crate::write::changes::DmlMetrics,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.reload(py, m.version)?;
        super::dml::metrics_dict(py, m)
    }

    /// Reload at the version a write committed; metrics as a dict.
    fn after_write<'py>(
        &mut self,
        py: Python<'py>,
        m: &crate::write::delete::DeleteMetrics,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.reload(py, m.version)?;
        delete_metrics(py, m)
    }
}
