//! Results into Python objects: metrics dicts (Delta's operationMetrics in
//! snake_case), a commit's outcome, JSON values as Python values.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A serializable value as the Python value its JSON reads as.
pub(super) fn json_to_py<'py>(
    py: Python<'py>,
    value: &impl serde::Serialize,
) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value).map_err(|e| PyValueError::new_err(e.to_string()))?;
    py.import("json")?.call_method1("loads", (text,))
}

/// How a commit went, in a write's metrics dict.
pub(super) fn set_outcome(
    d: &Bound<'_, PyDict>,
    attempts: u32,
    rebases: u32,
    checkpointed: bool,
    checkpoint_error: Option<&str>,
    iceberg_error: Option<&str>,
) -> PyResult<()> {
    d.set_item("attempts", attempts)?;
    d.set_item("rebases", rebases)?;
    d.set_item("checkpointed", checkpointed)?;
    d.set_item("checkpoint_error", checkpoint_error)?;
    d.set_item("iceberg_error", iceberg_error)
}

/// `numUpdatedRows` → `num_updated_rows`.
pub(super) fn snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Delta's operationMetrics (string values) into `d`, in snake_case, as integers.
pub(super) fn set_metrics(
    d: &Bound<'_, PyDict>,
    metrics: &serde_json::Map<String, serde_json::Value>,
) -> PyResult<()> {
    for (k, v) in metrics {
        let value: Option<i64> = v.as_str().and_then(|s| s.parse().ok());
        d.set_item(snake(k), value)?;
    }
    Ok(())
}

/// A DELETE's metrics as a dict.
pub(super) fn delete_metrics<'py>(
    py: Python<'py>,
    m: &crate::write::delete::DeleteMetrics,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", m.version)?;
    d.set_item("num_deleted_rows", m.num_deleted_rows)?;
    d.set_item("num_deletion_vectors_added", m.num_deletion_vectors_added)?;
    d.set_item(
        "num_deletion_vectors_removed",
        m.num_deletion_vectors_removed,
    )?;
    d.set_item(
        "num_deletion_vectors_updated",
        m.num_deletion_vectors_updated,
    )?;
    d.set_item("num_removed_files", m.num_removed_files)?;
    d.set_item("num_added_files", m.num_added_files)?;
    d.set_item("num_dv_files_written", m.num_dv_files_written)?;
    d.set_item("num_copied_rows", m.num_copied_rows)?;
    d.set_item("execution_time_ms", m.execution_time_ms)?;
    set_outcome(
        &d,
        m.attempts,
        m.rebases,
        m.checkpointed,
        m.checkpoint_error.as_deref(),
        m.iceberg_error.as_deref(),
    )?;
    Ok(d)
}
