//! `MergePlan`: the MERGE rules of [`crate::write::merge::plan`] for the
//! Spark MERGE, which moves the rows itself but takes every rule (clause
//! order, assignments, `operationParameters`, metrics, read set, the
//! duplicate-match error) from here.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::to_py;
use crate::write::merge::{
    duplicate_match_error, Assigned, ClauseCounts, MergeClause, MergePlan as RsMergePlan,
    MergeTimes, DUPLICATE_MATCH_ERROR,
};

use super::dml::ClauseTuple;

/// An assigned column from Python's view: (target column, source column for
/// `UPDATE SET *` / `INSERT *`, value text).
type AssignedTuple = (String, Option<String>, Option<String>);

/// A validated MERGE: its clauses and the rules that follow from them.
#[pyclass(name = "MergePlan", module = "deltadv._core", frozen)]
pub struct MergePlan {
    inner: RsMergePlan,
}

impl MergePlan {
    /// The plan, for the commit of a Spark MERGE.
    pub(super) fn plan(&self) -> &RsMergePlan {
        &self.inner
    }
}

#[pymethods]
impl MergePlan {
    /// Delta's error class for a target row several source rows would change.
    #[classattr]
    const DUPLICATE_MATCH_ERROR: &'static str = DUPLICATE_MATCH_ERROR;

    /// Most bytes of source join keys a MERGE that inserts keeps to check
    /// rows a concurrent commit added (about 25 a row for an integer key).
    #[classattr]
    const SOURCE_KEYS_LIMIT: usize = crate::write::merge::SOURCE_KEYS_LIMIT;

    #[new]
    #[pyo3(signature = (predicate, clauses, *, target_alias="target", source_alias="source"))]
    fn new(
        predicate: &str,
        clauses: Vec<ClauseTuple>,
        target_alias: &str,
        source_alias: &str,
    ) -> PyResult<MergePlan> {
        let clauses = clauses
            .into_iter()
            .map(|(kind, action, condition, assignments)| {
                MergeClause::from_names(&kind, &action, condition, assignments)
            })
            .collect::<crate::Result<Vec<_>>>()
            .map_err(to_py)?;
        let inner =
            RsMergePlan::try_new(predicate, target_alias, source_alias, clauses).map_err(to_py)?;
        Ok(MergePlan { inner })
    }

    /// The clauses, in order: (kind, action, condition, assignments).
    #[getter]
    fn clauses(&self) -> Vec<ClauseTuple> {
        self.inner
            .clauses()
            .iter()
            .map(|c| {
                let (kind, action) = c.names();
                (
                    kind.to_string(),
                    action.to_string(),
                    c.condition.clone(),
                    c.assignments.clone(),
                )
            })
            .collect()
    }

    /// The `_change` of rows clause `clause` acts on: update, delete or insert.
    fn change(&self, clause: usize) -> PyResult<&'static str> {
        self.inner
            .clauses()
            .get(clause)
            .map(|c| c.action.change())
            .ok_or_else(|| {
                pyo3::exceptions::PyIndexError::new_err(format!("MERGE has no clause {clause}"))
            })
    }

    /// A single unconditional MATCHED DELETE: a target row several source
    /// rows match is deleted once instead of failing.
    #[getter]
    fn deletes_duplicates_once(&self) -> bool {
        self.inner.deletes_duplicates_once()
    }

    /// Whether the conflict read set is the whole table (inserts or NOT
    /// MATCHED BY SOURCE clauses), else the files read.
    #[getter]
    fn reads_whole_table(&self) -> bool {
        self.inner.reads_whole_table()
    }

    /// Whether the commit checks a file a concurrent commit added (its
    /// partition, its rows against the source keys) before calling it a
    /// conflict: give it the source keys (`commit_changes(merge_keys=...)`).
    #[getter]
    fn checks_added_rows(&self) -> bool {
        self.inner.checks_added_rows()
    }

    /// Whether some clause writes source columns by name (UPDATE SET * /
    /// INSERT *): schema evolution then adds the ones the table lacks.
    #[getter]
    fn writes_source_columns(&self) -> bool {
        self.inner.writes_source_columns()
    }

    /// The table columns clause `clause` assigns, in order: (target column,
    /// source column for UPDATE SET * / INSERT * or None, value text or None).
    fn assignments(
        &self,
        clause: usize,
        table: Vec<String>,
        source: Vec<String>,
    ) -> PyResult<Vec<AssignedTuple>> {
        let t: Vec<&str> = table.iter().map(String::as_str).collect();
        let s: Vec<&str> = source.iter().map(String::as_str).collect();
        let out = self.inner.assignments(clause, &t, &s).map_err(to_py)?;
        Ok(out
            .into_iter()
            .map(|(i, a)| {
                let column = t.get(i).copied().unwrap_or_default().to_string();
                match a {
                    Assigned::SourceColumn(c) => (column, Some(c), None),
                    Assigned::Value(v) => (column, None, Some(v)),
                }
            })
            .collect())
    }

    /// Delta Spark's MERGE `operationParameters` (JSON text values).
    fn operation_parameters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.inner.operation_parameters() {
            d.set_item(k, v.as_str().map_or_else(|| v.to_string(), str::to_string))?;
        }
        Ok(d)
    }

    /// Delta Spark's MERGE metrics from rows acted on per clause, the
    /// source's rows and the phase times.
    #[pyo3(signature = (counts, source_rows, *, materialize_source_ms=0, scan_ms=0, rewrite_ms=0))]
    fn metrics<'py>(
        &self,
        py: Python<'py>,
        counts: Vec<u64>,
        source_rows: u64,
        materialize_source_ms: u64,
        scan_ms: u64,
        rewrite_ms: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let times = MergeTimes {
            materialize_source_ms,
            scan_ms,
            rewrite_ms,
        };
        let d = PyDict::new(py);
        for (k, v) in self
            .inner
            .metrics(&ClauseCounts::from_vec(counts), source_rows, &times)
        {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// The duplicate-match error (a ValueError to raise), naming the target
    /// row where `detail` is given.
    #[pyo3(signature = (detail=None))]
    fn duplicate_error(&self, detail: Option<&str>) -> PyErr {
        to_py(duplicate_match_error(detail))
    }

    fn __repr__(&self) -> String {
        format!(
            "MergePlan(predicate={:?}, clauses={})",
            self.inner.predicate(),
            self.inner.clauses().len()
        )
    }
}
