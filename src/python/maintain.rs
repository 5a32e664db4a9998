//! Bindings of the maintenance commands (REORG PURGE, OPTIMIZE): conversion
//! and GIL release only; the work is in `crate::write::optimize`.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::to_py;
use crate::io::{block_on, TableStore};
use crate::write::optimize::{self, CompactMetrics, CompactMode, CompactPlan};

/// `"purge"` or `"optimize"`.
pub(super) fn mode_of(mode: &str) -> PyResult<CompactMode> {
    match mode {
        "purge" => Ok(CompactMode::Purge),
        "optimize" => Ok(CompactMode::Optimize),
        other => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "compaction mode must be \"purge\" or \"optimize\", not {other:?}"
        ))),
    }
}

/// A compaction's partition filter from SQL text or an expression tree's
/// JSON (not both), as the text the plan binds and the commit records.
pub(super) fn partition_filter(
    sql: Option<String>,
    json: Option<String>,
) -> PyResult<Option<String>> {
    Ok(super::options::filter_of(sql, json)
        .map_err(super::to_py)?
        .map(|f| f.to_string()))
}

pub(super) fn plan_from_json(text: &str) -> crate::Result<CompactPlan> {
    serde_json::from_str(text).map_err(|source| crate::Error::Json {
        context: "compaction plan".into(),
        source,
    })
}

pub(super) fn plan_to_json(plan: &CompactPlan) -> crate::Result<String> {
    serde_json::to_string(plan).map_err(|source| crate::Error::Json {
        context: "compaction plan".into(),
        source,
    })
}

/// A compaction's metrics as a dict: version, Delta's operationMetrics in
/// snake_case (integers), attempts and checkpoint outcome.
pub(super) fn metrics_dict<'py>(
    py: Python<'py>,
    m: &CompactMetrics,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", m.version)?;
    super::convert::set_metrics(&d, &m.operation_metrics)?;
    super::convert::set_outcome(
        &d,
        m.attempts,
        0,
        m.checkpointed,
        m.checkpoint_error.as_deref(),
        m.iceberg_error.as_deref(),
    )?;
    Ok(d)
}

/// Executor side of a compaction: rewrite one bin (`task`, from
/// `RawDeltaTable.compact_plan`) into new files; their add actions as JSON
/// for `RawDeltaTable.commit_compaction`. On a failure the files written are
/// removed.
#[pyfunction]
pub fn rewrite_compact_task(
    py: Python<'_>,
    table_uri: &str,
    storage_options: HashMap<String, String>,
    task: &str,
) -> PyResult<String> {
    py.detach(|| -> crate::Result<String> {
        let task = optimize::CompactTask::from_json(task)?;
        let store = TableStore::open(table_uri, &storage_options)?;
        let adds = block_on(task.rewrite(&store))??;
        serde_json::to_string(&adds).map_err(|source| crate::Error::Json {
            context: "compaction result".into(),
            source,
        })
    })
    .map_err(to_py)
}
