//! The MERGE statement as rules, without data or I/O: the clause model, its
//! validation, and what a MERGE commits besides rows (`operationParameters`,
//! the per-clause metrics, the conflict read set). The in-process MERGE
//! ([`super::merge`]) and the Spark MERGE (`deltadv.spark`, through the
//! native `MergePlan`) both take every rule from here; they only move rows
//! and count them per clause.
//!
//! ```text
//! clauses, in the order given         groups (first clause whose condition holds acts)
//! ┌───┬──────────────────────┐        MATCHED                : update | update_all | delete
//! │ 0 │ MATCHED      update  │──┐     NOT MATCHED            : insert | insert_all
//! │ 1 │ NOT MATCHED  insert  │  ├──▶  NOT MATCHED BY SOURCE  : update | delete
//! │ 2 │ MATCHED      delete  │──┘     only the last clause of a group may omit its condition
//! └───┴──────────────────────┘
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::error::{Error, Result};

/// Which rows a clause applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClauseKind {
    /// `WHEN MATCHED`: target rows the condition pairs with a source row.
    Matched,
    /// `WHEN NOT MATCHED [BY TARGET]`: source rows no target row pairs with.
    NotMatched,
    /// `WHEN NOT MATCHED BY SOURCE`: target rows no source row pairs with.
    NotMatchedBySource,
}

impl ClauseKind {
    /// Every kind, in the order Delta records their groups.
    pub const ALL: [ClauseKind; 3] = [
        ClauseKind::Matched,
        ClauseKind::NotMatched,
        ClauseKind::NotMatchedBySource,
    ];

    /// The clause's SQL head (`WHEN MATCHED`, …).
    pub fn sql(self) -> &'static str {
        match self {
            ClauseKind::Matched => "WHEN MATCHED",
            ClauseKind::NotMatched => "WHEN NOT MATCHED",
            ClauseKind::NotMatchedBySource => "WHEN NOT MATCHED BY SOURCE",
        }
    }

    /// The error class Delta raises when a clause of this kind without a
    /// condition is followed by another of the same kind.
    fn omitted_condition_error(self) -> (&'static str, &'static str) {
        match self {
            ClauseKind::Matched => ("NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION", "MATCHED"),
            ClauseKind::NotMatched => (
                "NON_LAST_NOT_MATCHED_BY_TARGET_CLAUSE_OMIT_CONDITION",
                "NOT MATCHED",
            ),
            ClauseKind::NotMatchedBySource => (
                "NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION",
                "NOT MATCHED BY SOURCE",
            ),
        }
    }

    /// Whether a clause of this kind may do `action`.
    pub fn allows(self, action: ClauseAction) -> bool {
        match self {
            ClauseKind::Matched => matches!(
                action,
                ClauseAction::Update | ClauseAction::UpdateAll | ClauseAction::Delete
            ),
            ClauseKind::NotMatched => {
                matches!(action, ClauseAction::Insert | ClauseAction::InsertAll)
            }
            ClauseKind::NotMatchedBySource => {
                matches!(action, ClauseAction::Update | ClauseAction::Delete)
            }
        }
    }

    /// The `operationParameters` key of this group.
    fn parameter_key(self) -> &'static str {
        match self {
            ClauseKind::Matched => "matchedPredicates",
            ClauseKind::NotMatched => "notMatchedPredicates",
            ClauseKind::NotMatchedBySource => "notMatchedBySourcePredicates",
        }
    }
}

/// What a clause does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClauseAction {
    /// `UPDATE SET col = value, …`
    Update,
    /// `UPDATE SET *`: every target column the source has, by name.
    UpdateAll,
    Delete,
    /// `INSERT (col, …) VALUES (value, …)`: other columns NULL.
    Insert,
    /// `INSERT *`: every target column from the source column of its name.
    InsertAll,
}

impl ClauseAction {
    /// The `_change` of the rows the clause acts on (`update`, `delete`,
    /// `insert`), which is also Delta's `actionType` of the clause.
    pub fn change(self) -> &'static str {
        match self {
            ClauseAction::Update | ClauseAction::UpdateAll => "update",
            ClauseAction::Delete => "delete",
            ClauseAction::Insert | ClauseAction::InsertAll => "insert",
        }
    }

    /// `UPDATE SET *` or `INSERT *`: values from the source columns of the
    /// target columns' names.
    pub fn is_star(self) -> bool {
        matches!(self, ClauseAction::UpdateAll | ClauseAction::InsertAll)
    }
}

/// One `WHEN` clause.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergeClause {
    pub kind: ClauseKind,
    pub action: ClauseAction,
    /// The clause's own condition (`WHEN MATCHED AND …`), SQL.
    #[serde(default)]
    pub condition: Option<String>,
    /// (target column, SQL value) for `Update` and `Insert`.
    #[serde(default)]
    pub assignments: Vec<(String, String)>,
}

impl MergeClause {
    /// A clause from the names callers use (`matched`, `not_matched`,
    /// `not_matched_by_source`; `update`, `update_all`, `delete`, `insert`,
    /// `insert_all`).
    pub fn from_names(
        kind: &str,
        action: &str,
        condition: Option<String>,
        assignments: Vec<(String, String)>,
    ) -> Result<MergeClause> {
        let value = json!({
            "kind": kind,
            "action": action,
            "condition": condition,
            "assignments": assignments,
        });
        serde_json::from_value(value)
            .map_err(|e| invalid(format!("MERGE clause ({kind}, {action}): {e}")))
    }

    /// The clause's kind and action by those names.
    pub fn names(&self) -> (&'static str, &'static str) {
        let kind = match self.kind {
            ClauseKind::Matched => "matched",
            ClauseKind::NotMatched => "not_matched",
            ClauseKind::NotMatchedBySource => "not_matched_by_source",
        };
        let action = match self.action {
            ClauseAction::Update => "update",
            ClauseAction::UpdateAll => "update_all",
            ClauseAction::Delete => "delete",
            ClauseAction::Insert => "insert",
            ClauseAction::InsertAll => "insert_all",
        };
        (kind, action)
    }
}

/// A MERGE statement.
#[derive(Debug, Clone)]
pub struct MergeSpec {
    /// The join condition, SQL (`t.id = s.id AND …`).
    pub predicate: String,
    pub target_alias: String,
    pub source_alias: String,
    pub clauses: Vec<MergeClause>,
    /// Source bytes held at once (Arrow memory); a larger source is joined
    /// chunk by chunk.
    pub source_chunk_bytes: usize,
    /// Schema evolution: source columns the table lacks are added to it (as
    /// nullable columns, in the MERGE's commit) when an `UPDATE SET *` or
    /// `INSERT *` clause would write them; otherwise they are ignored.
    pub schema_evolution: bool,
}

/// Default [`MergeSpec::source_chunk_bytes`]: 512 MiB.
pub const DEFAULT_SOURCE_CHUNK_BYTES: usize = 512 << 20;

impl MergeSpec {
    /// A MERGE on `predicate` with the default aliases (`target`, `source`).
    pub fn new(predicate: impl Into<String>) -> MergeSpec {
        MergeSpec {
            predicate: predicate.into(),
            target_alias: "target".into(),
            source_alias: "source".into(),
            clauses: Vec::new(),
            source_chunk_bytes: DEFAULT_SOURCE_CHUNK_BYTES,
            schema_evolution: false,
        }
    }
}

/// Delta's error class for a target row that several source rows would change.
pub const DUPLICATE_MATCH_ERROR: &str = "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE";

/// The error for a target row several source rows would change; `detail`
/// names the row where it is known (its key or values, file and index).
pub fn duplicate_match_error(detail: Option<&str>) -> Error {
    let row = match detail {
        Some(d) => format!("target row ({d})"),
        None => "target row".to_string(),
    };
    invalid(format!(
        "[{DUPLICATE_MATCH_ERROR}] Cannot perform MERGE as multiple source rows matched and \
         attempted to modify the same {row} in possibly conflicting ways. Make the source \
         unique on the join key, e.g. by deduplicating it first"
    ))
}

fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidArgument(message.into())
}

fn eq_ci(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// Rows a MERGE acted on, per clause (indexes as in [`MergePlan::clauses`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClauseCounts(Vec<u64>);

impl ClauseCounts {
    /// Zero rows for each of `clauses` clauses.
    pub fn new(clauses: usize) -> ClauseCounts {
        ClauseCounts(vec![0; clauses])
    }

    /// Counts given per clause (e.g. gathered by Spark tasks).
    pub fn from_vec(counts: Vec<u64>) -> ClauseCounts {
        ClauseCounts(counts)
    }

    /// `n` more rows acted on by clause `clause`.
    pub fn add(&mut self, clause: usize, n: u64) {
        if let Some(c) = self.0.get_mut(clause) {
            *c += n;
        }
    }

    /// Add another task's counts.
    pub fn merge(&mut self, other: &ClauseCounts) {
        for (i, n) in other.0.iter().enumerate() {
            self.add(i, *n);
        }
    }

    /// Rows acted on by clause `clause`.
    pub fn get(&self, clause: usize) -> u64 {
        self.0.get(clause).copied().unwrap_or(0)
    }
}

/// Phase times of a MERGE, reported as Delta Spark's `*TimeMs` metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MergeTimes {
    pub materialize_source_ms: u64,
    pub scan_ms: u64,
    pub rewrite_ms: u64,
}

/// A validated MERGE: the join condition, the aliases and the clauses, each
/// clause of a kind that allows its action, with the assignments its action
/// needs, and only the last clause of a group without a condition.
#[derive(Debug, Clone, PartialEq)]
pub struct MergePlan {
    predicate: String,
    target_alias: String,
    source_alias: String,
    clauses: Vec<MergeClause>,
}

impl MergePlan {
    /// Validate `spec`'s clauses (not its expressions: those are bound where
    /// the rows are, see [`super::merge`]).
    pub fn new(spec: &MergeSpec) -> Result<MergePlan> {
        Self::try_new(
            &spec.predicate,
            &spec.target_alias,
            &spec.source_alias,
            spec.clauses.clone(),
        )
    }

    /// Validate a MERGE given by its parts.
    pub fn try_new(
        predicate: &str,
        target_alias: &str,
        source_alias: &str,
        clauses: Vec<MergeClause>,
    ) -> Result<MergePlan> {
        if clauses.is_empty() {
            return Err(invalid(
                "MERGE needs at least one WHEN clause (when_matched_update, \
                 when_not_matched_insert, …)",
            ));
        }
        for (i, c) in clauses.iter().enumerate() {
            check_clause(c)?;
            let earlier = clauses.get(..i).unwrap_or_default();
            let open = earlier
                .iter()
                .rev()
                .find(|p| p.kind == c.kind)
                .is_some_and(|p| p.condition.is_none());
            if open {
                let (code, what) = c.kind.omitted_condition_error();
                return Err(invalid(format!(
                    "[{code}] when there is more than one {what} clause, only the last may omit \
                     its condition (clause {} follows one without a condition)",
                    i + 1
                )));
            }
        }
        Ok(MergePlan {
            predicate: predicate.to_string(),
            target_alias: target_alias.to_string(),
            source_alias: source_alias.to_string(),
            clauses,
        })
    }

    /// The join condition, as given.
    pub fn predicate(&self) -> &str {
        &self.predicate
    }

    pub fn target_alias(&self) -> &str {
        &self.target_alias
    }

    pub fn source_alias(&self) -> &str {
        &self.source_alias
    }

    /// The clauses in the order given (their indexes are the ones
    /// [`ClauseCounts`] counts by).
    pub fn clauses(&self) -> &[MergeClause] {
        &self.clauses
    }

    /// The clauses of one kind with their indexes, in order.
    pub fn group(&self, kind: ClauseKind) -> impl Iterator<Item = (usize, &MergeClause)> {
        self.clauses
            .iter()
            .enumerate()
            .filter(move |(_, c)| c.kind == kind)
    }

    /// Whether some clause is of `kind`.
    pub fn has(&self, kind: ClauseKind) -> bool {
        self.group(kind).next().is_some()
    }

    /// A single unconditional `WHEN MATCHED THEN DELETE`: several source
    /// rows may match one target row, which is deleted once (Delta's one
    /// exception to the duplicate-match error).
    pub fn deletes_duplicates_once(&self) -> bool {
        let mut matched = self.group(ClauseKind::Matched);
        matches!(
            (matched.next(), matched.next()),
            (
                Some((
                    _,
                    MergeClause {
                        action: ClauseAction::Delete,
                        condition: None,
                        ..
                    }
                )),
                None
            )
        )
    }

    /// Whether the result depends on every file of the table, not only on
    /// those read: rows a MERGE inserts, or changes because no source row
    /// matched them, would differ had a concurrent writer added a file. The
    /// conflict read set is then the whole table, else the files read.
    pub fn reads_whole_table(&self) -> bool {
        self.has(ClauseKind::NotMatched) || self.has(ClauseKind::NotMatchedBySource)
    }

    /// Whether a file a concurrent commit added is checked before it is
    /// called a conflict (a MERGE that inserts, without `NOT MATCHED BY
    /// SOURCE` clauses: only a new row in a partition its condition reads,
    /// matching one of its source keys, would have changed what it did).
    pub fn checks_added_rows(&self) -> bool {
        self.has(ClauseKind::NotMatched) && !self.has(ClauseKind::NotMatchedBySource)
    }

    /// Whether some clause writes source columns by name (`UPDATE SET *`,
    /// `INSERT *`): with schema evolution on, the source columns the table
    /// lacks are then added to it.
    pub fn writes_source_columns(&self) -> bool {
        self.clauses.iter().any(|c| c.action.is_star())
    }

    /// The target column (index in `table`) an assignment's column names:
    /// case-insensitive, optionally qualified with the target alias; an
    /// error for an unknown column.
    pub fn assigned_column(&self, kind: ClauseKind, column: &str, table: &[&str]) -> Result<usize> {
        let name = match column.split_once('.') {
            Some((a, rest)) if eq_ci(a, &self.target_alias) => rest,
            _ => column,
        };
        table.iter().position(|f| eq_ci(f, name)).ok_or_else(|| {
            invalid(format!(
                "{} sets column {column:?}, which is not in the target table (columns: {})",
                kind.sql(),
                table.join(", ")
            ))
        })
    }

    /// The target columns (indexes in `table`) clause `clause` assigns, in
    /// its order, with the value's source: for `UPDATE SET *` / `INSERT *`
    /// the source column of the same name (case-insensitive; target columns
    /// the source lacks are not assigned), else the assignment's SQL text.
    /// An error for an unknown column or one set twice.
    pub fn assignments(
        &self,
        clause: usize,
        table: &[&str],
        source: &[&str],
    ) -> Result<Vec<(usize, Assigned)>> {
        let c = self
            .clauses
            .get(clause)
            .ok_or_else(|| invalid(format!("MERGE has no clause {clause}")))?;
        if c.action.is_star() {
            return Ok(table
                .iter()
                .enumerate()
                .filter_map(|(i, t)| {
                    let s = source.iter().find(|s| eq_ci(s, t))?;
                    Some((i, Assigned::SourceColumn(s.to_string())))
                })
                .collect());
        }
        let mut out: Vec<(usize, Assigned)> = Vec::with_capacity(c.assignments.len());
        for (column, value) in &c.assignments {
            let i = self.assigned_column(c.kind, column, table)?;
            if out.iter().any(|(j, _)| *j == i) {
                let name = table.get(i).copied().unwrap_or(column);
                return Err(invalid(format!(
                    "{} sets column {name:?} more than once",
                    c.kind.sql()
                )));
            }
            out.push((i, Assigned::Value(value.clone())));
        }
        Ok(out)
    }

    /// Delta Spark's MERGE `operationParameters`: the condition and, per
    /// group, each clause's predicate and action type (JSON text values).
    pub fn operation_parameters(&self) -> Map<String, Value> {
        let mut out = Map::new();
        out.insert(
            "predicate".into(),
            Value::String(json!([self.predicate]).to_string()),
        );
        for kind in ClauseKind::ALL {
            // Written by hand: Delta Spark puts `predicate` before
            // `actionType`, and a JSON map would sort the keys.
            let group: Vec<String> = self
                .group(kind)
                .map(|(_, c)| {
                    let action = Value::String(c.action.change().into());
                    match &c.condition {
                        Some(p) => format!(
                            r#"{{"predicate":{},"actionType":{action}}}"#,
                            Value::String(p.clone())
                        ),
                        None => format!(r#"{{"actionType":{action}}}"#),
                    }
                })
                .collect();
            out.insert(
                kind.parameter_key().into(),
                Value::String(format!("[{}]", group.join(","))),
            );
        }
        out
    }

    /// The MERGE-specific metrics Delta Spark reports (the rest, rows and
    /// files written, come from the change writers): rows per group and
    /// action from `counts`, the source's rows and the phase times.
    pub fn metrics(
        &self,
        counts: &ClauseCounts,
        source_rows: u64,
        times: &MergeTimes,
    ) -> Vec<(&'static str, u64)> {
        let sum = |kind: ClauseKind, deleted: bool| -> u64 {
            self.group(kind)
                .filter(|(_, c)| (c.action == ClauseAction::Delete) == deleted)
                .map(|(i, _)| counts.get(i))
                .sum()
        };
        vec![
            ("numSourceRows", source_rows),
            (
                "numTargetRowsMatchedUpdated",
                sum(ClauseKind::Matched, false),
            ),
            (
                "numTargetRowsMatchedDeleted",
                sum(ClauseKind::Matched, true),
            ),
            (
                "numTargetRowsNotMatchedBySourceUpdated",
                sum(ClauseKind::NotMatchedBySource, false),
            ),
            (
                "numTargetRowsNotMatchedBySourceDeleted",
                sum(ClauseKind::NotMatchedBySource, true),
            ),
            ("materializeSourceTimeMs", times.materialize_source_ms),
            ("scanTimeMs", times.scan_ms),
            ("rewriteTimeMs", times.rewrite_ms),
        ]
    }
}

/// Where an assigned column's new value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assigned {
    /// The source column of this name (`UPDATE SET *`, `INSERT *`).
    SourceColumn(String),
    /// A SQL value expression (or, from Spark, a column's text).
    Value(String),
}

/// A clause's action is one its kind allows, with the assignments it needs.
fn check_clause(c: &MergeClause) -> Result<()> {
    let kind_text = c.kind.sql();
    if !c.kind.allows(c.action) {
        return Err(invalid(format!(
            "a {kind_text} clause cannot {:?}",
            c.action
        )));
    }
    match c.action {
        ClauseAction::Delete if !c.assignments.is_empty() => {
            Err(invalid("a DELETE clause takes no assignments"))
        }
        ClauseAction::UpdateAll | ClauseAction::InsertAll if !c.assignments.is_empty() => Err(
            invalid("UPDATE SET * / INSERT * take no assignments (use update/insert)"),
        ),
        ClauseAction::Update | ClauseAction::Insert if c.assignments.is_empty() => {
            Err(invalid(format!(
                "a {kind_text} {} clause needs at least one column to set",
                if c.action == ClauseAction::Insert {
                    "INSERT"
                } else {
                    "UPDATE"
                }
            )))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clause(kind: ClauseKind, action: ClauseAction, condition: Option<&str>) -> MergeClause {
        let assignments = match action {
            ClauseAction::Update | ClauseAction::Insert => vec![("v".into(), "s.v".into())],
            _ => Vec::new(),
        };
        MergeClause {
            kind,
            action,
            condition: condition.map(str::to_string),
            assignments,
        }
    }

    fn plan(clauses: Vec<MergeClause>) -> Result<MergePlan> {
        MergePlan::try_new("t.id = s.id", "t", "s", clauses)
    }

    fn message(r: Result<MergePlan>) -> String {
        match r {
            Ok(p) => panic!("expected an error, got {p:?}"),
            Err(e) => e.to_string(),
        }
    }

    use ClauseAction as A;
    use ClauseKind as K;

    #[test]
    fn needs_a_clause() {
        assert!(message(plan(vec![])).contains("at least one WHEN clause"));
    }

    #[test]
    fn only_the_last_clause_of_a_group_may_omit_its_condition() {
        // Groups are independent: an unconditional MATCHED clause may come
        // before NOT MATCHED ones.
        plan(vec![
            clause(K::Matched, A::Delete, Some("s.d")),
            clause(K::Matched, A::Update, None),
            clause(K::NotMatched, A::InsertAll, None),
        ])
        .unwrap();
        let cases = [
            (
                K::Matched,
                A::Delete,
                "NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION",
            ),
            (
                K::NotMatched,
                A::InsertAll,
                "NON_LAST_NOT_MATCHED_BY_TARGET_CLAUSE_OMIT_CONDITION",
            ),
            (
                K::NotMatchedBySource,
                A::Delete,
                "NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION",
            ),
        ];
        for (kind, action, code) in cases {
            let m = message(plan(vec![
                clause(kind, action, None),
                clause(K::Matched, A::UpdateAll, Some("s.x > 1")),
                clause(kind, action, Some("s.y")),
            ]));
            if kind == K::Matched {
                // The MATCHED clause in the middle already follows one without a condition.
                assert!(m.contains(code) && m.contains("clause 2"), "{m}");
            } else {
                assert!(m.contains(code) && m.contains("clause 3"), "{m}");
            }
        }
    }

    #[test]
    fn actions_a_kind_allows() {
        for kind in ClauseKind::ALL {
            for action in [A::Update, A::UpdateAll, A::Delete, A::Insert, A::InsertAll] {
                let r = plan(vec![clause(kind, action, None)]);
                assert_eq!(r.is_ok(), kind.allows(action), "{kind:?} {action:?}");
            }
        }
        assert!(!K::NotMatchedBySource.allows(A::UpdateAll));
        assert!(message(plan(vec![clause(K::NotMatched, A::Delete, None)]))
            .contains("WHEN NOT MATCHED clause cannot Delete"));
    }

    #[test]
    fn assignments_the_action_needs() {
        let mut c = clause(K::Matched, A::Update, None);
        c.assignments.clear();
        assert!(message(plan(vec![c])).contains("needs at least one column to set"));
        let mut c = clause(K::Matched, A::Delete, None);
        c.assignments.push(("v".into(), "1".into()));
        assert!(message(plan(vec![c])).contains("DELETE clause takes no assignments"));
        let mut c = clause(K::NotMatched, A::InsertAll, None);
        c.assignments.push(("v".into(), "1".into()));
        assert!(message(plan(vec![c])).contains("take no assignments"));
    }

    #[test]
    fn assignments_resolve_to_table_columns() {
        let mut c = clause(K::Matched, A::Update, None);
        c.assignments = vec![
            ("T.V".into(), "s.v + 1".into()),
            ("id".into(), "s.id".into()),
        ];
        let p = plan(vec![c, clause(K::NotMatched, A::InsertAll, None)]).unwrap();
        let table = ["id", "v", "extra"];
        assert_eq!(
            p.assignments(0, &table, &["ID", "v"]).unwrap(),
            vec![
                (1, Assigned::Value("s.v + 1".into())),
                (0, Assigned::Value("s.id".into()))
            ]
        );
        // INSERT *: target columns the source has, by name, any case.
        assert_eq!(
            p.assignments(1, &table, &["ID", "v"]).unwrap(),
            vec![
                (0, Assigned::SourceColumn("ID".into())),
                (1, Assigned::SourceColumn("v".into()))
            ]
        );
        let mut c = clause(K::Matched, A::Update, None);
        c.assignments = vec![("nope".into(), "1".into())];
        let p = plan(vec![c]).unwrap();
        let e = p.assignments(0, &table, &[]).unwrap_err().to_string();
        assert!(e.contains("\"nope\", which is not in the target table (columns: id, v, extra)"));
        let mut c = clause(K::Matched, A::Update, None);
        c.assignments = vec![("v".into(), "1".into()), ("t.V".into(), "2".into())];
        let p = plan(vec![c]).unwrap();
        let e = p.assignments(0, &table, &[]).unwrap_err().to_string();
        assert!(e.contains("sets column \"v\" more than once"), "{e}");
    }

    #[test]
    fn duplicates_deleted_once_only_under_one_unconditional_delete() {
        let delete = clause(K::Matched, A::Delete, None);
        assert!(plan(vec![delete.clone()])
            .unwrap()
            .deletes_duplicates_once());
        assert!(plan(vec![
            delete.clone(),
            clause(K::NotMatched, A::InsertAll, None)
        ])
        .unwrap()
        .deletes_duplicates_once());
        assert!(!plan(vec![clause(K::Matched, A::Delete, Some("s.x"))])
            .unwrap()
            .deletes_duplicates_once());
        assert!(!plan(vec![
            clause(K::Matched, A::Delete, Some("s.x")),
            clause(K::Matched, A::Delete, None)
        ])
        .unwrap()
        .deletes_duplicates_once());
        assert!(!plan(vec![clause(K::Matched, A::UpdateAll, None)])
            .unwrap()
            .deletes_duplicates_once());
    }

    #[test]
    fn read_set_is_the_whole_table_with_inserts_or_by_source_clauses() {
        let upd = clause(K::Matched, A::UpdateAll, None);
        assert!(!plan(vec![upd.clone()]).unwrap().reads_whole_table());
        assert!(
            plan(vec![upd.clone(), clause(K::NotMatched, A::InsertAll, None)])
                .unwrap()
                .reads_whole_table()
        );
        assert!(
            plan(vec![upd, clause(K::NotMatchedBySource, A::Delete, None)])
                .unwrap()
                .reads_whole_table()
        );
    }

    #[test]
    fn operation_parameters_as_delta_spark_writes_them() {
        let p = plan(vec![
            clause(K::Matched, A::Delete, Some("s.deleted")),
            clause(K::Matched, A::UpdateAll, None),
            clause(K::NotMatched, A::InsertAll, None),
        ])
        .unwrap();
        let params = p.operation_parameters();
        let text = |k: &str| params.get(k).and_then(Value::as_str).unwrap().to_string();
        assert_eq!(text("predicate"), r#"["t.id = s.id"]"#);
        assert_eq!(
            text("matchedPredicates"),
            r#"[{"predicate":"s.deleted","actionType":"delete"},{"actionType":"update"}]"#
        );
        assert_eq!(text("notMatchedPredicates"), r#"[{"actionType":"insert"}]"#);
        assert_eq!(text("notMatchedBySourcePredicates"), "[]");
    }

    #[test]
    fn metrics_sum_clauses_by_group_and_action() {
        let p = plan(vec![
            clause(K::Matched, A::Delete, Some("s.d")),
            clause(K::Matched, A::Update, Some("s.u")),
            clause(K::Matched, A::UpdateAll, None),
            clause(K::NotMatched, A::InsertAll, None),
            clause(K::NotMatchedBySource, A::Update, Some("t.x")),
            clause(K::NotMatchedBySource, A::Delete, None),
        ])
        .unwrap();
        let mut counts = ClauseCounts::new(6);
        for (i, n) in [1, 2, 4, 8, 16, 32].into_iter().enumerate() {
            counts.add(i, n);
        }
        let mut twice = counts.clone();
        twice.merge(&counts);
        let times = MergeTimes {
            materialize_source_ms: 5,
            scan_ms: 6,
            rewrite_ms: 7,
        };
        assert_eq!(
            p.metrics(&twice, 100, &times),
            vec![
                ("numSourceRows", 100),
                ("numTargetRowsMatchedUpdated", 12),
                ("numTargetRowsMatchedDeleted", 2),
                ("numTargetRowsNotMatchedBySourceUpdated", 32),
                ("numTargetRowsNotMatchedBySourceDeleted", 64),
                ("materializeSourceTimeMs", 5),
                ("scanTimeMs", 6),
                ("rewriteTimeMs", 7),
            ]
        );
    }

    #[test]
    fn clauses_by_name_round_trip() {
        for kind in ["matched", "not_matched", "not_matched_by_source"] {
            for action in ["update", "update_all", "delete", "insert", "insert_all"] {
                let c = MergeClause::from_names(kind, action, None, Vec::new()).unwrap();
                assert_eq!(c.names(), (kind, action));
            }
        }
        let e = MergeClause::from_names("matched", "upsert", None, Vec::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains("MERGE clause (matched, upsert)"), "{e}");
    }

    #[test]
    fn duplicate_match_error_names_delta_class_and_row() {
        let e = duplicate_match_error(Some("t.id = 3; row 0 of a.parquet")).to_string();
        assert!(e.contains(
            "[DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE] Cannot perform MERGE"
        ));
        assert!(e.contains("same target row (t.id = 3; row 0 of a.parquet) in possibly"));
        let e = duplicate_match_error(None).to_string();
        assert!(e.contains("same target row in possibly"), "{e}");
    }
}
