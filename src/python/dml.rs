//! Bindings for UPDATE and MERGE: option and result conversion for the
//! `RawDeltaTable` methods, and the executor side (`prepare_changes`).

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::{Map, Value};

use super::to_py;
use crate::io::{block_on, TableStore};
use crate::table::snapshot::Snapshot;
use crate::write::changes::{
    self as dml, ChangeTask, DmlMetrics, DmlOperation, DmlOptions, PreparedChanges,
};
use crate::write::merge::{MergeClause, MergePlan, MergeSpec};
use arrow::ffi_stream::RecordBatchStreamReader;

fn json_error(context: &str) -> impl Fn(serde_json::Error) -> crate::Error + '_ {
    move |source| crate::Error::Json {
        context: context.into(),
        source,
    }
}

/// A MERGE clause from Python: (kind, action, condition, assignments).
pub(super) type ClauseTuple = (String, String, Option<String>, Vec<(String, String)>);

pub(super) fn merge_spec(
    predicate: String,
    clauses: Vec<ClauseTuple>,
    source_alias: String,
    target_alias: String,
    source_chunk_bytes: usize,
    schema_evolution: bool,
) -> crate::Result<MergeSpec> {
    let clauses = clauses
        .into_iter()
        .map(|(kind, action, condition, assignments)| {
            MergeClause::from_names(&kind, &action, condition, assignments)
        })
        .collect::<crate::Result<Vec<_>>>()?;
    Ok(MergeSpec {
        predicate,
        target_alias,
        source_alias,
        clauses,
        source_chunk_bytes,
        schema_evolution,
    })
}

/// `options` with the table's metadata evolved to hold the columns of the
/// Arrow schema `source` (IPC bytes) it lacks (MERGE's schema evolution).
pub(super) fn with_new_columns(
    snapshot: &Snapshot,
    mut options: DmlOptions,
    source: Option<&[u8]>,
) -> crate::Result<DmlOptions> {
    if let Some(schema) = super::write::schema_from_ipc(source)? {
        options.new_metadata =
            crate::write::merge::evolved_metadata(snapshot, &schema)?.map(|(_, m)| m);
    }
    Ok(options)
}

pub(super) fn change_task(
    snapshot: &Snapshot,
    paths: &[String],
    options: &DmlOptions,
) -> crate::Result<String> {
    let task = ChangeTask::new(snapshot, paths, options)?;
    serde_json::to_string(&task).map_err(json_error("change task"))
}

fn object(text: Option<&str>, what: &str) -> crate::Result<Map<String, Value>> {
    match text {
        None => Ok(Map::new()),
        Some(t) => match serde_json::from_str(t).map_err(json_error(what))? {
            Value::Object(m) => Ok(m),
            _ => Err(crate::Error::InvalidArgument(format!(
                "{what} must be a JSON object"
            ))),
        },
    }
}

pub(super) fn commit(
    snapshot: &Snapshot,
    operation: &str,
    prepared: &[String],
    parameters: Option<&str>,
    extra_metrics: Option<&str>,
    mut options: DmlOptions,
    merge: Option<(MergePlan, RecordBatchStreamReader, bool)>,
) -> crate::Result<DmlMetrics> {
    let operation = match operation {
        "UPDATE" => DmlOperation::Update,
        "MERGE" => DmlOperation::Merge,
        other => {
            return Err(crate::Error::InvalidArgument(format!(
                "operation {other:?}: expected \"UPDATE\" or \"MERGE\""
            )))
        }
    };
    options.parameters = object(parameters, "operation parameters")?;
    options.extra_metrics = object(extra_metrics, "operation metrics")?;
    let prepared = prepared
        .iter()
        .map(|p| serde_json::from_str::<PreparedChanges>(p).map_err(json_error("prepared changes")))
        .collect::<crate::Result<Vec<_>>>()?;
    match merge {
        Some((plan, keys, complete)) if operation == DmlOperation::Merge => {
            block_on(crate::write::merge::commit_merge_changes(
                snapshot, prepared, &options, &plan, keys, complete,
            ))?
        }
        Some(_) => Err(crate::Error::InvalidArgument(
            "merge_plan and merge_keys are for a MERGE commit".into(),
        )),
        None => block_on(dml::commit_changes(snapshot, operation, prepared, &options))?,
    }
}

pub(super) fn metrics_dict<'py>(py: Python<'py>, m: &DmlMetrics) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", m.version)?;
    d.set_item("operation", m.operation.map(DmlOperation::name))?;
    for (k, v) in &m.operation_metrics {
        let value: Option<u64> = match v {
            Value::String(s) => s.parse().ok(),
            Value::Number(n) => n.as_u64(),
            _ => None,
        };
        match value {
            Some(n) => d.set_item(super::convert::snake(k), n)?,
            None => d.set_item(super::convert::snake(k), v.to_string())?,
        }
    }
    super::convert::set_outcome(
        &d,
        m.attempts,
        m.rebases,
        m.checkpointed,
        m.checkpoint_error.as_deref(),
        m.iceberg_error.as_deref(),
    )?;
    Ok(d)
}

/// Executor side of an UPDATE or MERGE: write the change stream `data`
/// (table columns + `_file_path`, `_row_index`, optional `_change`) for the
/// task (`RawDeltaTable.change_task`): new data files and one DV file.
/// Returns the JSON for `RawDeltaTable.commit_changes`; on a failure the
/// files written are removed. Identity values of inserted rows are handed
/// out in `identity_slot` (the Spark task's partition index; None: refused),
/// interleaved with the other writers' as Delta Spark's when
/// `identity_slots` (their number) is given.
#[pyfunction]
#[pyo3(signature = (task, storage_options, table_uri, data, identity_slot=None, identity_slots=None))]
pub fn prepare_changes(
    py: Python<'_>,
    task: &str,
    storage_options: HashMap<String, String>,
    table_uri: &str,
    data: &Bound<'_, PyAny>,
    identity_slot: Option<u64>,
    identity_slots: Option<u64>,
) -> PyResult<String> {
    let reader = super::write::stream_reader(data)?;
    py.detach(|| -> crate::Result<String> {
        let task: ChangeTask = serde_json::from_str(task).map_err(json_error("change task"))?;
        let slot = identity_slot
            .map(|i| crate::write::data::rules::IdentitySlot::of(i, identity_slots))
            .transpose()?;
        let store = TableStore::open(table_uri, &storage_options)?;
        let prepared = block_on(task.write_stream(store, reader, slot))??;
        serde_json::to_string(&prepared).map_err(json_error("prepared changes"))
    })
    .map_err(to_py)
}
