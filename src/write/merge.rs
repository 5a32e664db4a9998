//! MERGE INTO, in this process: a source stream joined with the table on a
//! condition, then clauses applied in order, as Delta's MERGE does.
//!
//! ```text
//! MERGE INTO table AS t USING source AS s ON t.id = s.id [AND …]
//!   WHEN MATCHED [AND cond] THEN UPDATE SET … | UPDATE SET * | DELETE          (any number)
//!   WHEN NOT MATCHED [AND cond] THEN INSERT (…) VALUES (…) | INSERT *         (any number)
//!   WHEN NOT MATCHED BY SOURCE [AND cond] THEN UPDATE SET … | DELETE          (any number)
//! ```
//!
//! Expressions are deltadv's SQL (see [`crate::expr`]) over two relations:
//! `t.col` is a target column, `s.col` a source column (the aliases are the
//! caller's), and an unqualified name is whichever side has it (an error
//! when both do). In each group, the first clause whose condition holds
//! acts; only the last clause of a group may omit its condition. A target
//! row matched by several source rows that a clause would change is an
//! error (`DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE`, naming
//! the key), except under a single unconditional `DELETE`.
//!
//! How it runs: the condition's equalities between a target expression and a
//! source expression are the join keys (at least one is needed); the rest is
//! checked on each candidate pair. The source is read in chunks of at most
//! [`MergeSpec::source_chunk_bytes`]; each chunk is hashed on its keys
//! (`arrow-row` encoded), and the target files that may hold its keys (by
//! the keys' range and the condition's target-only parts, against file
//! stats and partition values) are read in parallel and probed. Matched and
//! not-matched-by-source rows become a change stream (see
//! [`super::dml`]) written by one [`ChangeWriter`]: old rows into ONE DV
//! file, new and inserted rows into new data files; the commit is one MERGE
//! through the transaction. A source larger than one chunk costs a pass over
//! the candidate target files per chunk (and, with `NOT MATCHED BY SOURCE`
//! clauses, one more over all files); memory stays bounded by the chunk.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::cast::AsArray;
use arrow_array::{
    new_null_array, Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, RecordBatchReader,
    StringArray, StructArray, UInt32Array,
};
use arrow_row::{RowConverter, SortField};
use arrow_schema::{DataType as ArrowType, Field, Fields, Schema, SchemaRef};
use futures::{StreamExt, TryStreamExt};
use roaring::{RoaringBitmap, RoaringTreemap};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::data::TableLayout;
use super::delete;
use super::dml::{
    assign_values, check_can_rewrite, commit_changes_since, ChangeWriter, DmlMetrics, DmlOperation,
    DmlOptions, CHANGE_COLUMN,
};
use crate::error::{Error, Result};
use crate::expr::value::true_only;
use crate::expr::Expr;
use crate::expr::{Binding, Predicate, ValueExpr};
use crate::log::schema::{
    from_arrow_type, to_arrow_type, ColumnMappingMode, DataType, StructField, StructType,
};
use crate::scan::{self, ScanFile, ScanSpec, FILE_PATH_COLUMN, ROW_INDEX_COLUMN};
use crate::table::snapshot::Snapshot;

/// Which rows a clause applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClauseKind {
    /// `WHEN MATCHED`: target rows the condition pairs with a source row.
    Matched,
    /// `WHEN NOT MATCHED [BY TARGET]`: source rows no target row pairs with.
    NotMatched,
    /// `WHEN NOT MATCHED BY SOURCE`: target rows no source row pairs with.
    NotMatchedBySource,
}

/// What a clause does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidArgument(message.into())
}

fn arrow_error(e: arrow_schema::ArrowError) -> Error {
    Error::InvalidArgument(format!("MERGE: {e}"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Target,
    Source,
}

/// The two relations as one: a struct column per alias, plus the names only
/// one side has at the top level. Expressions bind to its schema; a batch
/// of it may hold only one side (expressions that refer to one side only).
struct Relation {
    target_alias: String,
    source_alias: String,
    target_names: Vec<String>,
    source_names: Vec<String>,
    /// Top-level names that belong to one side only.
    unqualified: Vec<(String, Side)>,
    schema: StructType,
}

fn eq_ci(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

fn nullable(st: &StructType) -> StructType {
    StructType::new(
        st.fields
            .iter()
            .map(|f| StructField {
                nullable: true,
                ..f.clone()
            })
            .collect(),
    )
}

impl Relation {
    fn new(
        target: &StructType,
        source: &StructType,
        target_alias: &str,
        source_alias: &str,
    ) -> Result<Relation> {
        for (what, alias) in [("target", target_alias), ("source", source_alias)] {
            if alias.is_empty() || alias.contains('.') {
                return Err(invalid(format!(
                    "MERGE {what} alias {alias:?} must be a non-empty name without dots"
                )));
            }
        }
        if eq_ci(target_alias, source_alias) {
            return Err(invalid(format!(
                "MERGE target and source aliases must differ (both are {target_alias:?})"
            )));
        }
        let target_names: Vec<String> = target.fields.iter().map(|f| f.name.clone()).collect();
        let source_names: Vec<String> = source.fields.iter().map(|f| f.name.clone()).collect();
        let mut fields = vec![
            StructField::new(target_alias, DataType::Struct(nullable(target)), true),
            StructField::new(source_alias, DataType::Struct(nullable(source)), true),
        ];
        let mut unqualified = Vec::new();
        for (side, own, other, st) in [
            (Side::Target, &target_names, &source_names, target),
            (Side::Source, &source_names, &target_names, source),
        ] {
            for (name, f) in own.iter().zip(&st.fields) {
                let clash = other.iter().any(|o| eq_ci(o, name))
                    || eq_ci(name, target_alias)
                    || eq_ci(name, source_alias);
                if !clash {
                    unqualified.push((name.clone(), side));
                    fields.push(StructField {
                        nullable: true,
                        ..f.clone()
                    });
                }
            }
        }
        Ok(Relation {
            target_alias: target_alias.to_string(),
            source_alias: source_alias.to_string(),
            target_names,
            source_names,
            unqualified,
            schema: StructType::new(fields),
        })
    }

    /// The side a column path refers to.
    fn side_of(&self, path: &[String]) -> Result<Side> {
        let (first, rest) = path
            .split_first()
            .ok_or_else(|| invalid("empty column name"))?;
        for (side, alias, names, what) in [
            (
                Side::Target,
                &self.target_alias,
                &self.target_names,
                "target",
            ),
            (
                Side::Source,
                &self.source_alias,
                &self.source_names,
                "source",
            ),
        ] {
            if let (Some(column), true) = (rest.first(), eq_ci(first, alias)) {
                if !names.iter().any(|n| eq_ci(n, column)) {
                    return Err(invalid(format!(
                        "MERGE refers to {}, which is not a {what} column ({alias}: {})",
                        crate::expr::column_text(path),
                        names.join(", ")
                    )));
                }
                return Ok(side);
            }
        }
        let in_target = self.target_names.iter().any(|n| eq_ci(n, first));
        let in_source = self.source_names.iter().any(|n| eq_ci(n, first));
        match (in_target, in_source) {
            (true, false) => Ok(Side::Target),
            (false, true) => Ok(Side::Source),
            (true, true) => Err(invalid(format!(
                "[AMBIGUOUS_REFERENCE] column {first} is in both the target and the source: \
                 write {}.{first} or {}.{first}",
                self.target_alias, self.source_alias
            ))),
            (false, false) => Err(invalid(format!(
                "MERGE refers to column {}, which is neither a target column ({}: {}) nor a \
                 source column ({}: {})",
                crate::expr::column_text(path),
                self.target_alias,
                self.target_names.join(", "),
                self.source_alias,
                self.source_names.join(", ")
            ))),
        }
    }

    /// Whether `e` refers to the target, and to the source.
    fn sides(&self, e: &Expr) -> Result<(bool, bool)> {
        let mut paths = Vec::new();
        column_paths(e, &mut paths);
        let mut out = (false, false);
        for p in paths {
            match self.side_of(p)? {
                Side::Target => out.0 = true,
                Side::Source => out.1 = true,
            }
        }
        Ok(out)
    }

    fn side_struct(batch: &RecordBatch, names: &[String]) -> Result<ArrayRef> {
        let mut fields = Vec::with_capacity(names.len());
        let mut arrays = Vec::with_capacity(names.len());
        for name in names {
            // A target read without columns no expression needs.
            let Some(c) = batch.column_by_name(name) else {
                continue;
            };
            fields.push(Field::new(name, c.data_type().clone(), true));
            arrays.push(c.clone());
        }
        let array =
            StructArray::try_new_with_length(Fields::from(fields), arrays, None, batch.num_rows())
                .map_err(arrow_error)?;
        Ok(Arc::new(array))
    }

    /// A batch of the relation from the target rows and/or the source rows
    /// (same length when both).
    fn batch(
        &self,
        target: Option<&RecordBatch>,
        source: Option<&RecordBatch>,
    ) -> Result<RecordBatch> {
        let mut fields = Vec::new();
        let mut arrays = Vec::new();
        let mut rows = 0;
        for (alias, names, batch) in [
            (&self.target_alias, &self.target_names, target),
            (&self.source_alias, &self.source_names, source),
        ] {
            if let Some(b) = batch {
                let s = Self::side_struct(b, names)?;
                rows = b.num_rows();
                fields.push(Field::new(alias, s.data_type().clone(), true));
                arrays.push(s);
            }
        }
        for (name, side) in &self.unqualified {
            let batch = match side {
                Side::Target => target,
                Side::Source => source,
            };
            if let Some(c) = batch.and_then(|b| b.column_by_name(name)) {
                fields.push(Field::new(name, c.data_type().clone(), true));
                arrays.push(c.clone());
            }
        }
        RecordBatch::try_new_with_options(
            Arc::new(Schema::new(fields)),
            arrays,
            &arrow_array::RecordBatchOptions::new().with_row_count(Some(rows)),
        )
        .map_err(arrow_error)
    }

    /// `e` with unqualified names read as columns of `side` (a NOT MATCHED
    /// clause sees only the source, NOT MATCHED BY SOURCE only the target).
    fn qualify(&self, e: &Expr, side: Side) -> Expr {
        let alias = match side {
            Side::Target => &self.target_alias,
            Side::Source => &self.source_alias,
        };
        map_columns(e, &|path: &[String]| match path.split_first() {
            Some((first, rest))
                if !rest.is_empty()
                    && (eq_ci(first, &self.target_alias) || eq_ci(first, &self.source_alias)) =>
            {
                path.to_vec()
            }
            _ => std::iter::once(alias.clone())
                .chain(path.iter().cloned())
                .collect(),
        })
    }

    /// `e` with target columns written without the target alias (to bind
    /// it to the table itself).
    fn strip_target(&self, e: &Expr) -> Expr {
        map_columns(e, &|path: &[String]| match path.split_first() {
            Some((first, rest)) if !rest.is_empty() && eq_ci(first, &self.target_alias) => {
                rest.to_vec()
            }
            _ => path.to_vec(),
        })
    }
}

fn column_paths<'e>(e: &'e Expr, out: &mut Vec<&'e [String]>) {
    match e {
        Expr::Column(p) => out.push(p),
        Expr::Literal(_) => {}
        Expr::And(v) | Expr::Or(v) | Expr::Concat(v) => v.iter().for_each(|x| column_paths(x, out)),
        Expr::Not(x) | Expr::IsNull(x) | Expr::Neg(x) => column_paths(x, out),
        Expr::Cast { expr, .. } => column_paths(expr, out),
        Expr::Cmp { left, right, .. } | Expr::Arith { left, right, .. } => {
            column_paths(left, out);
            column_paths(right, out);
        }
        Expr::In { value, list } => {
            column_paths(value, out);
            list.iter().for_each(|x| column_paths(x, out));
        }
        Expr::Case { when, otherwise } => {
            for (c, v) in when {
                column_paths(c, out);
                column_paths(v, out);
            }
            if let Some(o) = otherwise {
                column_paths(o, out);
            }
        }
    }
}

fn map_columns(e: &Expr, f: &dyn Fn(&[String]) -> Vec<String>) -> Expr {
    let m = |x: &Expr| Box::new(map_columns(x, f));
    match e {
        Expr::Column(p) => Expr::Column(f(p)),
        Expr::Literal(l) => Expr::Literal(l.clone()),
        Expr::And(v) => Expr::And(v.iter().map(|x| map_columns(x, f)).collect()),
        Expr::Or(v) => Expr::Or(v.iter().map(|x| map_columns(x, f)).collect()),
        Expr::Concat(v) => Expr::Concat(v.iter().map(|x| map_columns(x, f)).collect()),
        Expr::Not(x) => Expr::Not(m(x)),
        Expr::IsNull(x) => Expr::IsNull(m(x)),
        Expr::Neg(x) => Expr::Neg(m(x)),
        Expr::Cast { expr, to } => Expr::Cast {
            expr: m(expr),
            to: to.clone(),
        },
        Expr::Cmp { op, left, right } => Expr::Cmp {
            op: *op,
            left: m(left),
            right: m(right),
        },
        Expr::Arith { op, left, right } => Expr::Arith {
            op: *op,
            left: m(left),
            right: m(right),
        },
        Expr::In { value, list } => Expr::In {
            value: m(value),
            list: list.iter().map(|x| map_columns(x, f)).collect(),
        },
        Expr::Case { when, otherwise } => Expr::Case {
            when: when
                .iter()
                .map(|(c, v)| (map_columns(c, f), map_columns(v, f)))
                .collect(),
            otherwise: otherwise.as_ref().map(|o| m(o)),
        },
    }
}

fn conjuncts(e: &Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::And(v) => v.iter().for_each(|x| conjuncts(x, out)),
        other => out.push(other.clone()),
    }
}

/// The type both sides of a join key are compared as.
fn key_type(target: &ArrowType, source: &ArrowType) -> ArrowType {
    use ArrowType::*;
    let int = |t: &ArrowType| matches!(t, Int8 | Int16 | Int32 | Int64);
    let float = |t: &ArrowType| matches!(t, Float32 | Float64);
    if target == source {
        target.clone()
    } else if int(target) && int(source) {
        Int64
    } else if (int(target) || float(target)) && (int(source) || float(source)) {
        Float64
    } else if matches!(target, Decimal128(..)) && (int(source) || matches!(source, Decimal128(..)))
    {
        target.clone()
    } else if matches!(source, Decimal128(..)) && int(target) {
        source.clone()
    } else {
        Utf8
    }
}

/// A compiled clause.
struct Clause {
    kind: ClauseKind,
    action: ClauseAction,
    condition: Option<Predicate>,
    set: Vec<(usize, ValueExpr, ArrowType)>,
}

impl Clause {
    /// How Delta Spark records the clause in `operationParameters`.
    fn parameter(&self) -> Value {
        let action = match self.action {
            ClauseAction::Update | ClauseAction::UpdateAll => "update",
            ClauseAction::Delete => "delete",
            ClauseAction::Insert | ClauseAction::InsertAll => "insert",
        };
        let mut m = Map::new();
        if let Some(c) = &self.condition {
            m.insert("predicate".into(), Value::String(c.text().to_string()));
        }
        m.insert("actionType".into(), Value::String(action.into()));
        Value::Object(m)
    }
}

/// Per-clause row counts.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    matched_updated: u64,
    matched_deleted: u64,
    by_source_updated: u64,
    by_source_deleted: u64,
    inserted: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.matched_updated += o.matched_updated;
        self.matched_deleted += o.matched_deleted;
        self.by_source_updated += o.by_source_updated;
        self.by_source_deleted += o.by_source_deleted;
        self.inserted += o.inserted;
    }
}

/// Everything bound, shared by the file tasks.
struct Plan {
    rel: Relation,
    keys_target: Vec<ValueExpr>,
    keys_source: Vec<ValueExpr>,
    /// Per key, the target side as a column of the table (for pruning by
    /// the source keys' range), when it is a plain column.
    key_columns: Vec<Option<Expr>>,
    key_types: Vec<ArrowType>,
    residual: Option<Predicate>,
    /// Target-only parts of the condition, bound to the table (pruning).
    target_only: Vec<Expr>,
    matched: Vec<Clause>,
    not_matched: Vec<Clause>,
    by_source: Vec<Clause>,
    /// The table's columns as the scan returns them.
    table_fields: Fields,
    /// Table columns + `_file_path`, `_row_index`, `_change`.
    out_schema: SchemaRef,
    /// Several source rows may match a target row (a single unconditional
    /// DELETE): the row is deleted once.
    dedupe: bool,
}

fn bind_predicate(rel: &Relation, e: &Expr) -> Result<Predicate> {
    Predicate::bind_expr(
        e,
        e.to_string(),
        &rel.schema,
        &[],
        ColumnMappingMode::None,
        Binding::Strict,
    )
}

fn bind_value(rel: &Relation, e: &Expr, text: String) -> Result<ValueExpr> {
    ValueExpr::bind(e, text, &rel.schema, &[], ColumnMappingMode::None)
}

impl Plan {
    /// `table` is the schema written (the snapshot's, or evolved with new
    /// source columns); `table_fields` its Arrow fields.
    fn new(
        snapshot: &Snapshot,
        spec: &MergeSpec,
        source: &StructType,
        table: &StructType,
        table_fields: Fields,
    ) -> Result<Plan> {
        let schema = snapshot.schema();
        let rel = Relation::new(schema, source, &spec.target_alias, &spec.source_alias)?;
        let condition = crate::expr::parse::parse(&spec.predicate)?;
        let mut parts = Vec::new();
        conjuncts(&condition, &mut parts);
        let (mut keys_target, mut keys_source, mut residual, mut target_only) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut key_columns = Vec::new();
        for part in parts {
            if let Expr::Cmp {
                op: crate::expr::Op::Eq,
                left,
                right,
            } = &part
            {
                let (l, r) = (rel.sides(left)?, rel.sides(right)?);
                let pair = match (l, r) {
                    ((true, false), (false, true)) => Some((left, right)),
                    ((false, true), (true, false)) => Some((right, left)),
                    _ => None,
                };
                if let Some((t, s)) = pair {
                    key_columns
                        .push(Some(rel.strip_target(t)).filter(|e| matches!(e, Expr::Column(_))));
                    keys_target.push(bind_value(&rel, t, t.to_string())?);
                    keys_source.push(bind_value(&rel, s, s.to_string())?);
                    continue;
                }
            }
            if rel.sides(&part)? == (true, false) {
                target_only.push(rel.strip_target(&part));
            }
            residual.push(part);
        }
        if keys_target.is_empty() {
            return Err(invalid(format!(
                "MERGE needs its condition to equate a target expression with a source \
                 expression (e.g. {}.id = {}.id); got {}",
                spec.target_alias, spec.source_alias, spec.predicate
            )));
        }
        let key_types = keys_target
            .iter()
            .zip(&keys_source)
            .map(|(t, s)| key_type(t.data_type(), s.data_type()))
            .collect();
        let residual = match residual.len() {
            0 => None,
            1 => residual
                .pop()
                .map(|e| bind_predicate(&rel, &e))
                .transpose()?,
            _ => Some(bind_predicate(&rel, &Expr::And(residual))?),
        };
        let mut plan = Plan {
            rel,
            keys_target,
            keys_source,
            key_columns,
            key_types,
            residual,
            target_only,
            matched: Vec::new(),
            not_matched: Vec::new(),
            by_source: Vec::new(),
            out_schema: change_schema(&table_fields),
            table_fields,
            dedupe: false,
        };
        plan.compile_clauses(spec, table)?;
        Ok(plan)
    }

    fn compile_clauses(&mut self, spec: &MergeSpec, table: &StructType) -> Result<()> {
        if spec.clauses.is_empty() {
            return Err(invalid(
                "MERGE needs at least one WHEN clause (when_matched_update, \
                 when_not_matched_insert, …)",
            ));
        }
        for (i, c) in spec.clauses.iter().enumerate() {
            let clause = self.compile(c, table)?;
            let group = match c.kind {
                ClauseKind::Matched => &mut self.matched,
                ClauseKind::NotMatched => &mut self.not_matched,
                ClauseKind::NotMatchedBySource => &mut self.by_source,
            };
            if group.last().is_some_and(|prev| prev.condition.is_none()) {
                let (code, what) = match c.kind {
                    ClauseKind::Matched => ("NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION", "MATCHED"),
                    ClauseKind::NotMatched => (
                        "NON_LAST_NOT_MATCHED_BY_TARGET_CLAUSE_OMIT_CONDITION",
                        "NOT MATCHED",
                    ),
                    ClauseKind::NotMatchedBySource => (
                        "NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION",
                        "NOT MATCHED BY SOURCE",
                    ),
                };
                return Err(invalid(format!(
                    "[{code}] when there is more than one {what} clause, only the last may omit \
                     its condition (clause {} follows one without a condition)",
                    i + 1
                )));
            }
            group.push(clause);
        }
        self.dedupe = matches!(
            self.matched.as_slice(),
            [Clause {
                action: ClauseAction::Delete,
                condition: None,
                ..
            }]
        );
        Ok(())
    }

    fn compile(&self, c: &MergeClause, table: &StructType) -> Result<Clause> {
        let rel = &self.rel;
        let allowed = match c.kind {
            ClauseKind::Matched => matches!(
                c.action,
                ClauseAction::Update | ClauseAction::UpdateAll | ClauseAction::Delete
            ),
            ClauseKind::NotMatched => {
                matches!(c.action, ClauseAction::Insert | ClauseAction::InsertAll)
            }
            ClauseKind::NotMatchedBySource => {
                matches!(c.action, ClauseAction::Update | ClauseAction::Delete)
            }
        };
        let kind_text = match c.kind {
            ClauseKind::Matched => "WHEN MATCHED",
            ClauseKind::NotMatched => "WHEN NOT MATCHED",
            ClauseKind::NotMatchedBySource => "WHEN NOT MATCHED BY SOURCE",
        };
        if !allowed {
            return Err(invalid(format!(
                "a {kind_text} clause cannot {:?}",
                c.action
            )));
        }
        // Which side each kind may refer to (and reads bare names from).
        let scope = |e: Expr| match c.kind {
            ClauseKind::Matched => e,
            ClauseKind::NotMatched => rel.qualify(&e, Side::Source),
            ClauseKind::NotMatchedBySource => rel.qualify(&e, Side::Target),
        };
        let check_side = |e: &Expr, what: &str| -> Result<()> {
            let (t, s) = rel.sides(e)?;
            let bad = match c.kind {
                ClauseKind::Matched => None,
                ClauseKind::NotMatched => t.then_some("target"),
                ClauseKind::NotMatchedBySource => s.then_some("source"),
            };
            match bad {
                Some(side) => Err(invalid(format!(
                    "the {what} of a {kind_text} clause refers to a {side} column, which such \
                     rows do not have: {e}"
                ))),
                None => Ok(()),
            }
        };
        let condition = match &c.condition {
            None => None,
            Some(text) => {
                let e = scope(crate::expr::parse::parse(text)?);
                check_side(&e, "condition")?;
                Some(Predicate::bind_expr(
                    &e,
                    text.clone(),
                    &rel.schema,
                    &[],
                    ColumnMappingMode::None,
                    Binding::Strict,
                )?)
            }
        };
        let assignments: Vec<(String, Expr, String)> = match c.action {
            ClauseAction::Delete => {
                if !c.assignments.is_empty() {
                    return Err(invalid("a DELETE clause takes no assignments"));
                }
                Vec::new()
            }
            ClauseAction::UpdateAll | ClauseAction::InsertAll => {
                if !c.assignments.is_empty() {
                    return Err(invalid(
                        "UPDATE SET * / INSERT * take no assignments (use update/insert)",
                    ));
                }
                table
                    .fields
                    .iter()
                    .map(|f| &f.name)
                    .filter_map(|t| {
                        rel.source_names.iter().find(|s| eq_ci(s, t)).map(|s| {
                            let path = vec![rel.source_alias.clone(), s.clone()];
                            let text = crate::expr::column_text(&path);
                            (t.clone(), Expr::Column(path), text)
                        })
                    })
                    .collect()
            }
            ClauseAction::Update | ClauseAction::Insert => {
                if c.assignments.is_empty() {
                    return Err(invalid(format!(
                        "a {kind_text} {} clause needs at least one column to set",
                        if c.action == ClauseAction::Insert {
                            "INSERT"
                        } else {
                            "UPDATE"
                        }
                    )));
                }
                c.assignments
                    .iter()
                    .map(|(col, text)| {
                        let e = scope(crate::expr::parse::parse_value(text)?);
                        check_side(&e, &format!("value for {col}"))?;
                        Ok((col.clone(), e, text.clone()))
                    })
                    .collect::<Result<_>>()?
            }
        };
        let mut set: Vec<(usize, ValueExpr, ArrowType)> = Vec::new();
        for (column, e, text) in assignments {
            let name = match column.split_once('.') {
                Some((a, rest)) if eq_ci(a, &rel.target_alias) => rest,
                _ => column.as_str(),
            };
            let i = table
                .fields
                .iter()
                .position(|f| eq_ci(&f.name, name))
                .ok_or_else(|| {
                    invalid(format!(
                        "{kind_text} sets column {column:?}, which is not in the target table \
                         (columns: {})",
                        rel.target_names.join(", ")
                    ))
                })?;
            if set.iter().any(|(j, _, _)| *j == i) {
                return Err(invalid(format!(
                    "{kind_text} sets column {name:?} more than once"
                )));
            }
            let target = self
                .table_fields
                .get(i)
                .map(|f| f.data_type().clone())
                .ok_or_else(|| Error::Internal(format!("table field {i} missing")))?;
            let value = bind_value(rel, &e, text)?;
            value.check_assignable(name, &target)?;
            set.push((i, value, target));
        }
        Ok(Clause {
            kind: c.kind,
            action: c.action,
            condition,
            set,
        })
    }

    /// The target column (top-level name) a bound column of the relation is.
    fn target_column(&self, c: &crate::expr::BoundColumn) -> Option<String> {
        let (first, rest) = c.logical.split_first()?;
        if eq_ci(first, &self.rel.target_alias) {
            return rest.first().cloned();
        }
        self.rel
            .unqualified
            .iter()
            .any(|(n, side)| *side == Side::Target && n == first)
            .then(|| first.clone())
    }

    /// The table columns the MERGE reads: those its expressions refer to,
    /// and those an UPDATE clause keeps (does not assign).
    fn target_columns(&self) -> BTreeSet<String> {
        let mut bound: Vec<&crate::expr::BoundColumn> = Vec::new();
        for k in &self.keys_target {
            bound.extend(k.columns());
        }
        if let Some(r) = &self.residual {
            bound.extend(r.columns());
        }
        let mut out = BTreeSet::new();
        for c in self.matched.iter().chain(&self.by_source) {
            if let Some(p) = &c.condition {
                bound.extend(p.columns());
            }
            for (_, v, _) in &c.set {
                bound.extend(v.columns());
            }
            if matches!(c.action, ClauseAction::Update | ClauseAction::UpdateAll) {
                for (i, f) in self.table_fields.iter().enumerate() {
                    if !c.set.iter().any(|(j, _, _)| *j == i) {
                        out.insert(f.name().clone());
                    }
                }
            }
        }
        out.extend(bound.into_iter().filter_map(|c| self.target_column(c)));
        out
    }

    /// The rows of `batch` whose keys are all non-null, encoded.
    fn key_rows(
        &self,
        converter: &RowConverter,
        exprs: &[ValueExpr],
        batch: &RecordBatch,
    ) -> Result<(arrow_row::Rows, Vec<bool>)> {
        let mut arrays = Vec::with_capacity(exprs.len());
        let mut valid = vec![true; batch.num_rows()];
        for (e, t) in exprs.iter().zip(&self.key_types) {
            let a = e.evaluate(batch)?;
            let a = if a.data_type() == t {
                a
            } else {
                arrow_cast::cast(&a, t).map_err(arrow_error)?
            };
            if a.null_count() > 0 {
                for (i, v) in valid.iter_mut().enumerate() {
                    *v &= a.is_valid(i);
                }
            }
            arrays.push(a);
        }
        let rows = converter.convert_columns(&arrays).map_err(arrow_error)?;
        Ok((rows, valid))
    }

    fn converter(&self) -> Result<RowConverter> {
        RowConverter::new(self.key_types.iter().cloned().map(SortField::new).collect())
            .map_err(arrow_error)
    }

    /// The key values of row `i` of a relation batch holding the target, for
    /// an error message.
    fn key_text(&self, batch: &RecordBatch, i: usize) -> String {
        let options = arrow_cast::display::FormatOptions::default().with_null("NULL");
        self.keys_target
            .iter()
            .map(|e| {
                let v = e
                    .evaluate(batch)
                    .ok()
                    .and_then(|a| {
                        arrow_cast::display::ArrayFormatter::try_new(a.as_ref(), &options)
                            .ok()
                            .map(|f| f.value(i).to_string())
                    })
                    .unwrap_or_else(|| "?".into());
                format!("{} = {v}", e.text())
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The change stream's schema: the table's columns, nullable (a deleted
/// row's values are not read; NOT NULL is checked on rows written), then the
/// row's origin and its change.
fn change_schema(table: &Fields) -> SchemaRef {
    let mut fields: Vec<Field> = table
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    fields.push(Field::new(FILE_PATH_COLUMN, ArrowType::Utf8, true));
    fields.push(Field::new(ROW_INDEX_COLUMN, ArrowType::Int64, true));
    fields.push(Field::new(CHANGE_COLUMN, ArrowType::Utf8, false));
    Arc::new(Schema::new(fields))
}

/// A source chunk hashed on its keys.
struct Chunk {
    source: RecordBatch,
    converter: RowConverter,
    first: HashMap<Box<[u8]>, u32>,
    /// Next source row with the same key (`u32::MAX`: none).
    next: Vec<u32>,
}

impl Chunk {
    fn build(plan: &Plan, source: RecordBatch) -> Result<Chunk> {
        let n = source.num_rows();
        if u32::try_from(n).is_err() {
            return Err(invalid(format!(
                "MERGE source chunk of {n} rows: lower source_chunk_bytes"
            )));
        }
        let converter = plan.converter()?;
        let rel = plan.rel.batch(None, Some(&source))?;
        let (rows, valid) = plan.key_rows(&converter, &plan.keys_source, &rel)?;
        let mut first: HashMap<Box<[u8]>, u32> = HashMap::with_capacity(n);
        let mut next = vec![u32::MAX; n];
        // Inserted back to front so chains run in source order.
        for i in (0..n).rev() {
            if !valid.get(i).copied().unwrap_or(false) {
                continue;
            }
            let key: Box<[u8]> = rows.row(i).as_ref().into();
            let i32_ = i as u32;
            if let Some(prev) = first.insert(key, i32_) {
                if let Some(slot) = next.get_mut(i) {
                    *slot = prev;
                }
            }
        }
        Ok(Chunk {
            source,
            converter,
            first,
            next,
        })
    }

    /// (target row, source row) pairs of equal keys.
    fn probe(&self, plan: &Plan, target: &RecordBatch) -> Result<(Vec<u32>, Vec<u32>)> {
        let rel = plan.rel.batch(Some(target), None)?;
        let (rows, valid) = plan.key_rows(&self.converter, &plan.keys_target, &rel)?;
        let (mut t, mut s) = (Vec::new(), Vec::new());
        for (i, ok) in valid.iter().enumerate() {
            if !ok {
                continue;
            }
            let mut at = self.first.get(rows.row(i).as_ref()).copied();
            while let Some(j) = at.filter(|j| *j != u32::MAX) {
                t.push(i as u32);
                s.push(j);
                at = self.next.get(j as usize).copied();
            }
        }
        Ok((t, s))
    }
}

fn take(batch: &RecordBatch, idx: &[u32]) -> Result<RecordBatch> {
    let idx = UInt32Array::from(idx.to_vec());
    arrow_select::take::take_record_batch(batch, &idx).map_err(arrow_error)
}

fn filter(batch: &RecordBatch, mask: &BooleanArray) -> Result<RecordBatch> {
    arrow_select::filter::filter_record_batch(batch, mask).map_err(arrow_error)
}

/// What one pass over a target file found and produced.
struct FileOutcome {
    path: String,
    changes: Vec<RecordBatch>,
    matched_sources: Vec<u32>,
    /// Target rows (indexes) a source row matched.
    matched_targets: RoaringTreemap,
    /// Target rows a matched clause changed.
    acted: RoaringTreemap,
    counts: Counts,
}

/// How a pass treats target rows no source row matched.
#[derive(Clone)]
enum Pass {
    /// Join with the chunk; `by_source`: apply NOT MATCHED BY SOURCE
    /// clauses to the rows no row of the chunk matched (the whole source).
    Join { by_source: bool },
    /// After all chunks: NOT MATCHED BY SOURCE on rows outside `matched`.
    BySource {
        matched: Arc<HashMap<String, RoaringTreemap>>,
    },
}

impl Plan {
    /// Which clause of a group acts on each row of `eval` (a relation
    /// batch): one mask per clause (disjoint; the first whose condition
    /// holds), and the rows none acts on.
    fn clause_masks(
        &self,
        clauses: &[Clause],
        eval: &RecordBatch,
    ) -> Result<(Vec<BooleanArray>, BooleanArray)> {
        let mut remaining = BooleanArray::from(vec![true; eval.num_rows()]);
        let mut masks = Vec::with_capacity(clauses.len());
        for c in clauses {
            if remaining.true_count() == 0 {
                break;
            }
            let m = match &c.condition {
                None => remaining.clone(),
                Some(p) => {
                    let hit = true_only(p.evaluate(eval)?);
                    arrow_arith::boolean::and(&remaining, &hit).map_err(arrow_error)?
                }
            };
            remaining = arrow_arith::boolean::and_not(&remaining, &m).map_err(arrow_error)?;
            masks.push(m);
        }
        Ok((masks, remaining))
    }

    /// Apply a group of clauses to the rows of `eval` (a relation batch);
    /// `base` holds the same target rows with their metadata columns (None
    /// for inserts). Returns the change batches.
    fn apply(
        &self,
        clauses: &[Clause],
        base: Option<&RecordBatch>,
        eval: &RecordBatch,
        counts: &mut Counts,
    ) -> Result<Vec<RecordBatch>> {
        let (masks, _) = self.clause_masks(clauses, eval)?;
        self.apply_masks(clauses, &masks, base, eval, counts)
    }

    /// [`Plan::apply`] with the clauses' masks known.
    fn apply_masks(
        &self,
        clauses: &[Clause],
        masks: &[BooleanArray],
        base: Option<&RecordBatch>,
        eval: &RecordBatch,
        counts: &mut Counts,
    ) -> Result<Vec<RecordBatch>> {
        let mut out = Vec::new();
        for (c, m) in clauses.iter().zip(masks) {
            let k = m.true_count();
            if k == 0 {
                continue;
            }
            let rows = filter(eval, m)?;
            let base = base.map(|b| filter(b, m)).transpose()?;
            let k64 = k as u64;
            match (c.kind, c.action) {
                (ClauseKind::Matched, ClauseAction::Delete) => counts.matched_deleted += k64,
                (ClauseKind::Matched, _) => counts.matched_updated += k64,
                (ClauseKind::NotMatchedBySource, ClauseAction::Delete) => {
                    counts.by_source_deleted += k64
                }
                (ClauseKind::NotMatchedBySource, _) => counts.by_source_updated += k64,
                (ClauseKind::NotMatched, _) => counts.inserted += k64,
            }
            out.push(self.changed(c, base.as_ref(), &rows)?);
        }
        Ok(out)
    }

    /// The change batch of one clause for its rows.
    fn changed(
        &self,
        c: &Clause,
        base: Option<&RecordBatch>,
        rows: &RecordBatch,
    ) -> Result<RecordBatch> {
        let n = rows.num_rows();
        let (mut columns, path, index): (Vec<ArrayRef>, ArrayRef, ArrayRef) = match base {
            Some(b) => {
                let mut cols = Vec::with_capacity(self.table_fields.len());
                for f in self.table_fields.iter() {
                    // Columns not read are ones no value needs (deleted rows,
                    // or columns every acting clause assigns).
                    cols.push(
                        b.column_by_name(f.name())
                            .cloned()
                            .unwrap_or_else(|| new_null_array(f.data_type(), n)),
                    );
                }
                let meta = |name: &str| {
                    b.column_by_name(name)
                        .cloned()
                        .ok_or_else(|| Error::Internal(format!("MERGE: {name} missing")))
                };
                (cols, meta(FILE_PATH_COLUMN)?, meta(ROW_INDEX_COLUMN)?)
            }
            None => (
                self.table_fields
                    .iter()
                    .map(|f| new_null_array(f.data_type(), n))
                    .collect(),
                new_null_array(&ArrowType::Utf8, n),
                new_null_array(&ArrowType::Int64, n),
            ),
        };
        let change = match c.action {
            ClauseAction::Delete => "delete",
            ClauseAction::Insert | ClauseAction::InsertAll => "insert",
            ClauseAction::Update | ClauseAction::UpdateAll => "update",
        };
        if c.action != ClauseAction::Delete {
            assign_values(&mut columns, &self.table_fields, rows, &c.set, "MERGE")?;
            for (f, col) in self.table_fields.iter().zip(&columns) {
                let nulls = col.logical_null_count();
                if !f.is_nullable() && nulls > 0 {
                    return Err(invalid(format!(
                        "[DELTA_NOT_NULL_CONSTRAINT_VIOLATED] NOT NULL constraint violated for \
                         column: {} (a MERGE {change} leaves it NULL in {nulls} row(s))",
                        f.name()
                    )));
                }
            }
        }
        columns.push(path);
        columns.push(index);
        columns.push(Arc::new(StringArray::from_iter_values(
            std::iter::repeat_n(change, n),
        )));
        RecordBatch::try_new(self.out_schema.clone(), columns).map_err(arrow_error)
    }

    /// One target file: probe, apply the clauses, collect what changed.
    fn process_batch(
        &self,
        chunk: Option<&Chunk>,
        pass: &Pass,
        batch: &RecordBatch,
        out: &mut FileOutcome,
    ) -> Result<()> {
        let indexes = batch
            .column_by_name(ROW_INDEX_COLUMN)
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
            .ok_or_else(|| Error::Internal("MERGE: scan without _row_index".into()))?
            .clone();
        let n = batch.num_rows();
        let mut matched_here = vec![false; n];
        if let (Pass::Join { .. }, Some(chunk)) = (pass, chunk) {
            let (mut ti, mut si) = chunk.probe(self, batch)?;
            if !ti.is_empty() {
                let mut t = take(batch, &ti)?;
                let s = take(&chunk.source, &si)?;
                let mut j = self.rel.batch(Some(&t), Some(&s))?;
                if let Some(r) = &self.residual {
                    let keep = true_only(r.evaluate(&j)?);
                    if keep.true_count() < keep.len() {
                        let (a, b) = (ti, si);
                        ti = a
                            .iter()
                            .zip(keep.iter())
                            .filter(|(_, k)| *k == Some(true))
                            .map(|(x, _)| *x)
                            .collect();
                        si = b
                            .iter()
                            .zip(keep.iter())
                            .filter(|(_, k)| *k == Some(true))
                            .map(|(x, _)| *x)
                            .collect();
                        t = filter(&t, &keep)?;
                        j = filter(&j, &keep)?;
                    }
                }
                for &i in &ti {
                    if let Some(m) = matched_here.get_mut(i as usize) {
                        *m = true;
                    }
                    if let Some(v) = indexes.values().get(i as usize) {
                        out.matched_targets.insert(u64::try_from(*v).unwrap_or(0));
                    }
                }
                out.matched_sources.extend_from_slice(&si);
                if !self.matched.is_empty() && !ti.is_empty() {
                    self.apply_matched(&t, &j, out)?;
                }
            }
        }
        let by_source = match pass {
            Pass::Join { by_source } => *by_source,
            Pass::BySource { matched } => {
                if let Some(m) = matched.get(&out.path) {
                    for (i, v) in indexes.values().iter().enumerate() {
                        if m.contains(u64::try_from(*v).unwrap_or(0)) {
                            if let Some(x) = matched_here.get_mut(i) {
                                *x = true;
                            }
                        }
                    }
                }
                true
            }
        };
        if by_source && !self.by_source.is_empty() {
            let unmatched = BooleanArray::from(matched_here.iter().map(|m| !m).collect::<Vec<_>>());
            if unmatched.true_count() > 0 {
                let u = filter(batch, &unmatched)?;
                let j = self.rel.batch(Some(&u), None)?;
                let changes = self.apply(&self.by_source, Some(&u), &j, &mut out.counts)?;
                out.changes.extend(changes);
            }
        }
        Ok(())
    }

    /// Matched pairs (`t` the target rows with metadata, `j` the relation):
    /// the duplicate-match check, then the clauses.
    fn apply_matched(&self, t: &RecordBatch, j: &RecordBatch, out: &mut FileOutcome) -> Result<()> {
        let idx = t
            .column_by_name(ROW_INDEX_COLUMN)
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
            .ok_or_else(|| Error::Internal("MERGE: scan without _row_index".into()))?
            .clone();
        // Which clause acts on each pair, before any output.
        let (masks, remaining) = self.clause_masks(&self.matched, j)?;
        let mut keep = vec![true; j.num_rows()];
        for (i, slot) in keep.iter_mut().enumerate() {
            if remaining.value(i) {
                continue; // no clause acts: the row stays as it is
            }
            let row = u64::try_from(idx.value(i)).unwrap_or(0);
            if !out.acted.insert(row) {
                if self.dedupe {
                    *slot = false;
                    continue;
                }
                return Err(invalid(format!(
                    "[DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE] Cannot perform \
                     MERGE as multiple source rows matched and attempted to modify the same \
                     target row ({}; row {row} of {}) in possibly conflicting ways. Make the \
                     source unique on the join key, e.g. by deduplicating it first",
                    self.key_text(j, i),
                    out.path
                )));
            }
        }
        let changes = if keep.iter().all(|k| *k) {
            self.apply_masks(&self.matched, &masks, Some(t), j, &mut out.counts)?
        } else {
            // Several source rows deleting one target row: it is deleted once.
            let keep = BooleanArray::from(keep);
            let masks = masks
                .iter()
                .map(|m| arrow_select::filter::filter(m, &keep).map(|a| a.as_boolean().clone()))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(arrow_error)?;
            let (t, j) = (filter(t, &keep)?, filter(j, &keep)?);
            self.apply_masks(&self.matched, &masks, Some(&t), &j, &mut out.counts)?
        };
        out.changes.extend(changes);
        Ok(())
    }
}

async fn process_file(
    plan: Arc<Plan>,
    chunk: Option<Arc<Chunk>>,
    pass: Pass,
    store: crate::io::TableStore,
    spec: ScanSpec,
    file: ScanFile,
) -> Result<FileOutcome> {
    let mut batches = scan::stream_file(&store, &spec, &file, scan::DeletedRows::Load).await?;
    let mut out = FileOutcome {
        path: file.path.clone(),
        changes: Vec::new(),
        matched_sources: Vec::new(),
        matched_targets: RoaringTreemap::new(),
        acted: RoaringTreemap::new(),
        counts: Counts::default(),
    };
    while let Some(batch) = batches.try_next().await? {
        plan.process_batch(chunk.as_deref(), &pass, &batch, &mut out)?;
    }
    Ok(out)
}

/// Source batches with the column types Delta stores (large and view
/// strings as strings, nanosecond timestamps as microseconds, …).
struct SourceShape {
    schema: SchemaRef,
    delta: StructType,
}

impl SourceShape {
    fn of(schema: &Schema) -> Result<SourceShape> {
        let mut fields = Vec::with_capacity(schema.fields().len());
        for f in schema.fields() {
            let dt = match f.data_type() {
                ArrowType::Timestamp(arrow_schema::TimeUnit::Nanosecond, tz) => {
                    ArrowType::Timestamp(arrow_schema::TimeUnit::Microsecond, tz.clone())
                }
                other => other.clone(),
            };
            let delta = from_arrow_type(&dt, f.name(), 0)?;
            let arrow = to_arrow_type(&delta, ColumnMappingMode::None, false)?;
            fields.push(Field::new(f.name(), arrow, true));
        }
        let schema = Arc::new(Schema::new(fields));
        let delta = StructType::from_arrow(&schema)?;
        Ok(SourceShape { schema, delta })
    }

    fn conform(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let columns = batch
            .columns()
            .iter()
            .zip(self.schema.fields())
            .map(|(c, f)| {
                if c.data_type() == f.data_type() {
                    Ok(c.clone())
                } else {
                    arrow_cast::cast(c, f.data_type()).map_err(arrow_error)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &arrow_array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
        )
        .map_err(arrow_error)
    }
}

/// Reads the source chunk by chunk.
struct SourceChunks<R> {
    reader: R,
    shape: SourceShape,
    pending: Option<RecordBatch>,
    done: bool,
    limit: usize,
    rows: u64,
}

impl<R: RecordBatchReader> SourceChunks<R> {
    fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        if let Some(b) = self.pending.take() {
            return Ok(Some(b));
        }
        if self.done {
            return Ok(None);
        }
        match self.reader.next() {
            None => {
                self.done = true;
                Ok(None)
            }
            Some(b) => {
                let b = b.map_err(|e| invalid(format!("MERGE source: {e}")))?;
                if b.schema().fields().len() != self.shape.schema.fields().len() {
                    return Err(invalid("MERGE source: a batch changed the schema"));
                }
                self.rows += b.num_rows() as u64;
                Ok(Some(self.shape.conform(&b)?))
            }
        }
    }

    /// The next chunk (None at the end), and whether more follow.
    fn next_chunk(&mut self) -> Result<Option<(RecordBatch, bool)>> {
        let mut parts = Vec::new();
        let mut bytes = 0usize;
        while bytes < self.limit {
            match self.next_batch()? {
                Some(b) => {
                    bytes += b.get_array_memory_size();
                    parts.push(b);
                }
                None => break,
            }
        }
        if parts.is_empty() {
            return Ok(None);
        }
        // Peek, so the caller knows whether this is the whole source.
        let more = match self.next_batch()? {
            Some(b) => {
                self.pending = Some(b);
                true
            }
            None => false,
        };
        let chunk = arrow_select::concat::concat_batches(&self.shape.schema, &parts)
            .map_err(arrow_error)?;
        Ok(Some((chunk, more)))
    }
}

/// A literal of the value at `i` (for the key-range pruning predicate).
fn literal_of(array: &dyn Array, i: usize) -> Option<crate::expr::Literal> {
    use crate::expr::Literal;
    if array.is_null(i) {
        return None;
    }
    let text = || {
        arrow_cast::display::ArrayFormatter::try_new(array, &Default::default())
            .ok()
            .map(|f| f.value(i).to_string())
    };
    match array.data_type() {
        ArrowType::Int8 | ArrowType::Int16 | ArrowType::Int32 | ArrowType::Int64 => {
            text().map(Literal::Number)
        }
        ArrowType::Utf8 => text().map(Literal::Str),
        ArrowType::Date32 => text().map(Literal::Date),
        _ => None,
    }
}

/// `target_key BETWEEN min AND max` for keys that are plain target columns,
/// over one source chunk.
fn key_ranges(plan: &Plan, chunk: &Chunk) -> Result<Vec<Expr>> {
    use crate::expr::Op;
    let rel = plan.rel.batch(None, Some(&chunk.source))?;
    let mut out = Vec::new();
    for ((column, s), ty) in plan
        .key_columns
        .iter()
        .zip(&plan.keys_source)
        .zip(&plan.key_types)
    {
        let Some(column) = column.clone() else {
            continue;
        };
        let values = s.evaluate(&rel)?;
        let values = if values.data_type() == ty {
            values
        } else {
            arrow_cast::cast(&values, ty).map_err(arrow_error)?
        };
        if values.null_count() == values.len() {
            // No source key at all: nothing can match.
            out.push(Expr::Literal(crate::expr::Literal::Bool(false)));
            continue;
        }
        let sort = arrow_ord::sort::sort_to_indices(&values, None, None).map_err(arrow_error)?;
        let valid: Vec<usize> = sort
            .values()
            .iter()
            .map(|i| *i as usize)
            .filter(|i| values.is_valid(*i))
            .collect();
        let (Some(lo), Some(hi)) = (valid.first(), valid.last()) else {
            continue;
        };
        if let (Some(lo), Some(hi)) = (literal_of(&values, *lo), literal_of(&values, *hi)) {
            out.push(Expr::Cmp {
                op: Op::Ge,
                left: Box::new(column.clone()),
                right: Box::new(Expr::Literal(lo)),
            });
            out.push(Expr::Cmp {
                op: Op::Le,
                left: Box::new(column),
                right: Box::new(Expr::Literal(hi)),
            });
        }
    }
    Ok(out)
}

/// MERGE `source` into the table at `snapshot` (see the module docs); one
/// commit, nothing committed when nothing changes. On a failure, every
/// file written is removed.
pub async fn merge<R: RecordBatchReader>(
    snapshot: &Snapshot,
    source: R,
    spec: &MergeSpec,
    options: &DmlOptions,
) -> Result<DmlMetrics> {
    let started = Instant::now();
    let dvs = check_can_rewrite(snapshot, options.delete.allow_copy_on_write)?;
    let shape = SourceShape::of(&source.schema())?;
    let mut scan_spec = ScanSpec::for_snapshot(snapshot, None);
    scan_spec.with_metadata_columns = true;
    let scan_schema = scan_spec.output_schema()?;
    let table_fields: Fields = scan_schema
        .fields()
        .iter()
        .filter(|f| f.name() != FILE_PATH_COLUMN && f.name() != ROW_INDEX_COLUMN)
        .cloned()
        .collect();
    let evolved = evolve(snapshot, spec, &shape.delta)?;
    let (table, table_fields) = match &evolved {
        None => (snapshot.schema().clone(), table_fields),
        Some((schema, _)) => {
            let mut fields: Vec<Field> = table_fields.iter().map(|f| f.as_ref().clone()).collect();
            for f in schema.fields.iter().skip(fields.len()) {
                let dt = to_arrow_type(&f.data_type, ColumnMappingMode::None, false)?;
                fields.push(Field::new(&f.name, dt, true));
            }
            (schema.clone(), Fields::from(fields))
        }
    };
    let plan = Arc::new(Plan::new(
        snapshot,
        spec,
        &shape.delta,
        &table,
        table_fields,
    )?);
    // Read only the columns the MERGE needs (e.g. just the key for an upsert
    // whose UPDATE SET * assigns every column).
    let needed = plan.target_columns();
    scan_spec.columns = Some(
        snapshot
            .schema()
            .fields
            .iter()
            .map(|f| f.name.clone())
            .filter(|n| needed.contains(n))
            .collect(),
    );
    let store = snapshot.store().clone();
    let live = delete::live_files(snapshot)?;
    let targets: Vec<crate::log::actions::Add> = live.values().map(|f| f.add.clone()).collect();
    let layout = match &evolved {
        None => TableLayout::of_snapshot(snapshot),
        Some((_, metadata)) => TableLayout::of(snapshot.protocol(), metadata)?,
    };
    let mut writer = ChangeWriter::try_new(
        store.clone(),
        layout,
        targets,
        dvs,
        options.delete.clone(),
        options.writer.clone(),
    )?;
    let mut chunks = SourceChunks {
        reader: source,
        shape,
        pending: None,
        done: false,
        limit: spec.source_chunk_bytes.max(1),
        rows: 0,
    };
    let mut stats = RunStats::default();
    let run = run_merge(
        snapshot,
        &plan,
        &mut chunks,
        &scan_spec,
        &mut writer,
        &mut stats,
    )
    .await;
    let prepared = match run {
        Ok(()) => writer.finish().await,
        Err(e) => Err(e),
    };
    let prepared = match prepared {
        Ok(p) => p,
        Err(e) => {
            writer.abort().await;
            return Err(e);
        }
    };
    let ms =
        |d: Duration| Value::String(u64::try_from(d.as_millis()).unwrap_or(u64::MAX).to_string());
    let s = |v: u64| Value::String(v.to_string());
    let mut options = options.clone();
    options.new_metadata = evolved.map(|(_, m)| m);
    let c = stats.counts;
    let extra = [
        ("numSourceRows", s(chunks.rows)),
        ("numTargetRowsMatchedUpdated", s(c.matched_updated)),
        ("numTargetRowsMatchedDeleted", s(c.matched_deleted)),
        (
            "numTargetRowsNotMatchedBySourceUpdated",
            s(c.by_source_updated),
        ),
        (
            "numTargetRowsNotMatchedBySourceDeleted",
            s(c.by_source_deleted),
        ),
        ("materializeSourceTimeMs", ms(stats.source_time)),
        ("scanTimeMs", ms(stats.scan_time)),
        ("rewriteTimeMs", ms(stats.write_time)),
    ];
    for (k, v) in extra {
        options.extra_metrics.entry(k.to_string()).or_insert(v);
    }
    let clauses = |g: &[Clause]| {
        Value::String(Value::Array(g.iter().map(Clause::parameter).collect()).to_string())
    };
    let params = [
        (
            "predicate",
            Value::String(json!([spec.predicate]).to_string()),
        ),
        ("matchedPredicates", clauses(&plan.matched)),
        ("notMatchedPredicates", clauses(&plan.not_matched)),
        ("notMatchedBySourcePredicates", clauses(&plan.by_source)),
    ];
    for (k, v) in params {
        options.parameters.entry(k.to_string()).or_insert(v);
    }
    // Rows a MERGE inserts (or leaves to NOT MATCHED BY SOURCE) depend on
    // every file, not only those read: a concurrent writer's new file
    // conflicts then. Otherwise only the files scanned were read.
    options.read_files = if plan.not_matched.is_empty() && plan.by_source.is_empty() {
        Some(stats.scanned)
    } else {
        None
    };
    commit_changes_since(
        snapshot,
        DmlOperation::Merge,
        vec![prepared],
        &options,
        started,
    )
    .await
}

/// With schema evolution, the table's schema and metadata with the source
/// columns it lacks appended (nullable), when an `UPDATE SET *` or
/// `INSERT *` clause writes them; None when nothing changes.
fn evolve(
    snapshot: &Snapshot,
    spec: &MergeSpec,
    source: &StructType,
) -> Result<Option<(StructType, crate::log::actions::Metadata)>> {
    let star = spec
        .clauses
        .iter()
        .any(|c| matches!(c.action, ClauseAction::UpdateAll | ClauseAction::InsertAll));
    if !spec.schema_evolution || !star {
        return Ok(None);
    }
    evolved_metadata(snapshot, source)
}

/// The table's schema and metadata with the columns of `source` it lacks
/// appended (nullable); None when it has them all. Refused on column-mapped
/// tables and for a new `timestamp_ntz` column (both need more than a schema
/// change).
pub fn evolved_metadata(
    snapshot: &Snapshot,
    source: &StructType,
) -> Result<Option<(StructType, crate::log::actions::Metadata)>> {
    let table = snapshot.schema();
    let new: Vec<StructField> = source
        .fields
        .iter()
        .filter(|f| table.field_ignore_case(&f.name).is_none())
        .map(|f| StructField {
            nullable: true,
            ..f.clone()
        })
        .collect();
    if new.is_empty() {
        return Ok(None);
    }
    let names: Vec<String> = new.iter().map(|f| f.name.clone()).collect();
    if snapshot.column_mapping() != ColumnMappingMode::None {
        return Err(Error::Unsupported(format!(
            "MERGE schema evolution on a column-mapped table (new columns {}): not supported \
             yet; add the columns with Delta Spark (ALTER TABLE ADD COLUMNS) first",
            names.join(", ")
        )));
    }
    let evolved = StructType::new(table.fields.iter().cloned().chain(new).collect());
    if evolved.has_timestamp_ntz() && !table.has_timestamp_ntz() {
        return Err(Error::Unsupported(format!(
            "MERGE schema evolution would add a timestamp_ntz column ({}), which needs the \
             timestampNtz table feature: add the column with Delta Spark first",
            names.join(", ")
        )));
    }
    let mut metadata = snapshot.metadata().clone();
    metadata.schema_string = evolved.to_schema_string();
    Ok(Some((evolved, metadata)))
}

#[derive(Default)]
struct RunStats {
    counts: Counts,
    scanned: BTreeSet<String>,
    source_time: Duration,
    scan_time: Duration,
    write_time: Duration,
}

async fn run_merge<R: RecordBatchReader>(
    snapshot: &Snapshot,
    plan: &Arc<Plan>,
    chunks: &mut SourceChunks<R>,
    scan_spec: &ScanSpec,
    writer: &mut ChangeWriter,
    stats: &mut RunStats,
) -> Result<()> {
    let store = snapshot.store().clone();
    let by_source = !plan.by_source.is_empty();
    let mut acted: HashMap<String, RoaringTreemap> = HashMap::new();
    let mut matched: HashMap<String, RoaringTreemap> = HashMap::new();
    let mut first = true;
    let mut multi = false;
    loop {
        let t = Instant::now();
        let next = chunks.next_chunk()?;
        stats.source_time += t.elapsed();
        let Some((source, more)) = next else { break };
        if first && more {
            multi = true;
        }
        first = false;
        let t = Instant::now();
        let chunk = Arc::new(Chunk::build(plan, source)?);
        stats.source_time += t.elapsed();
        let inline_by_source = by_source && !multi;
        // Files that may hold the chunk's keys (all of them when unmatched
        // target rows matter).
        let mut spec = scan_spec.clone();
        let files = if inline_by_source {
            scan::plan(snapshot, None)?
        } else {
            let mut parts = key_ranges(plan, &chunk)?;
            parts.extend(plan.target_only.iter().cloned());
            let table = snapshot.schema();
            let pruning = Predicate::bind_expr(
                &Expr::And(parts),
                String::new(),
                table,
                &snapshot.metadata().partition_columns,
                snapshot.column_mapping(),
                Binding::Lenient,
            )?;
            let files = scan::plan(snapshot, Some(&pruning))?;
            spec.filter = Some(Arc::new(pruning));
            spec.filter_rows = false;
            files
        };
        let pass = Pass::Join {
            by_source: inline_by_source,
        };
        let mut matched_sources = RoaringBitmap::new();
        run_files(
            plan,
            Some(&chunk),
            &pass,
            &store,
            &spec,
            files,
            writer,
            stats,
            |o| {
                matched_sources.extend(o.matched_sources.iter().copied());
                if by_source && multi {
                    matched
                        .entry(o.path.clone())
                        .or_default()
                        .extend(o.matched_targets.iter());
                }
                let seen = acted.entry(o.path.clone()).or_default();
                if !plan.dedupe && !seen.is_disjoint(&o.acted) {
                    return Err(invalid(format!(
                        "[DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE] Cannot perform \
                     MERGE as multiple source rows matched and attempted to modify the same \
                     target row (in {}) in possibly conflicting ways. Make the source unique \
                     on the join key, e.g. by deduplicating it first",
                        o.path
                    )));
                }
                seen.extend(o.acted.iter());
                Ok(())
            },
        )
        .await?;
        // Source rows no target row matched.
        if !plan.not_matched.is_empty() {
            let n = chunk.source.num_rows() as u32;
            let unmatched: Vec<u32> = (0..n).filter(|i| !matched_sources.contains(*i)).collect();
            if !unmatched.is_empty() {
                let t = Instant::now();
                let rows = take(&chunk.source, &unmatched)?;
                let j = plan.rel.batch(None, Some(&rows))?;
                let changes = plan.apply(&plan.not_matched, None, &j, &mut stats.counts)?;
                for c in &changes {
                    writer.write(c).await?;
                }
                stats.write_time += t.elapsed();
            }
        }
    }
    if by_source && multi {
        let pass = Pass::BySource {
            matched: Arc::new(matched),
        };
        let files = scan::plan(snapshot, None)?;
        run_files(
            plan,
            None,
            &pass,
            &store,
            scan_spec,
            files,
            writer,
            stats,
            |_| Ok(()),
        )
        .await?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn run_files(
    plan: &Arc<Plan>,
    chunk: Option<&Arc<Chunk>>,
    pass: &Pass,
    store: &crate::io::TableStore,
    spec: &ScanSpec,
    files: Vec<ScanFile>,
    writer: &mut ChangeWriter,
    stats: &mut RunStats,
    mut each: impl FnMut(&FileOutcome) -> Result<()>,
) -> Result<()> {
    let t = Instant::now();
    let mut write_time = Duration::ZERO;
    for f in &files {
        stats.scanned.insert(f.path.clone());
    }
    let mut outcomes = futures::stream::iter(files)
        .map(|file| {
            let (plan, chunk, pass) = (plan.clone(), chunk.cloned(), pass.clone());
            let (store, spec) = (store.clone(), spec.clone());
            crate::io::runtime::spawn(process_file(plan, chunk, pass, store, spec, file))
        })
        .buffered(delete::READ_CONCURRENCY);
    while let Some(outcome) = outcomes.next().await {
        let o = outcome??;
        each(&o)?;
        stats.counts.add(&o.counts);
        let w = Instant::now();
        for c in &o.changes {
            writer.write(c).await?;
        }
        write_time += w.elapsed();
    }
    stats.write_time += write_time;
    stats.scan_time += t.elapsed().saturating_sub(write_time);
    Ok(())
}
