//! A MERGE bound to its two relations: the join condition split into hash
//! keys (target expression = source expression), a residual checked on each
//! candidate pair, and target-only parts that prune files; each clause's
//! condition and values bound as Arrow-evaluable expressions.

use std::collections::BTreeSet;

use arrow_array::RecordBatch;
use arrow_row::{RowConverter, SortField};
use arrow_schema::{DataType as ArrowType, Fields, SchemaRef};

use super::apply::change_schema;
use super::plan::{Assigned, ClauseAction, ClauseKind, MergePlan};
use super::{arrow_error, invalid};
use crate::error::{Error, Result};
use crate::expr::relation::{eq_ci, Relation, Side};
use crate::expr::rewrite::conjuncts;
use crate::expr::{Binding, Expr, Predicate, TimeZone, ValueExpr};
use crate::log::schema::{ColumnMappingMode, StructType};
use crate::write::data::rules::{refuse_identity_insert, refuse_identity_update, ColumnValues};

/// A compiled clause.
pub(super) struct Clause {
    /// Its index among the MERGE's clauses (what counts are kept by).
    pub(super) index: usize,
    pub(super) action: ClauseAction,
    pub(super) condition: Option<Predicate>,
    /// (table column index, value, the column's type).
    pub(super) set: Vec<(usize, ValueExpr, ArrowType)>,
}

/// Everything bound, shared by the file tasks.
pub(super) struct BoundMerge {
    pub(super) rel: Relation,
    /// The time zone instants are read in.
    zone: TimeZone,
    pub(super) keys_target: Vec<ValueExpr>,
    pub(super) keys_source: Vec<ValueExpr>,
    /// Per key, the target side as a column of the table (for pruning by
    /// the source keys' range), when it is a plain column.
    pub(super) key_columns: Vec<Option<Expr>>,
    pub(super) key_types: Vec<ArrowType>,
    pub(super) residual: Option<Predicate>,
    /// Target-only parts of the condition, bound to the table (pruning).
    pub(super) target_only: Vec<Expr>,
    pub(super) matched: Vec<Clause>,
    pub(super) not_matched: Vec<Clause>,
    pub(super) by_source: Vec<Clause>,
    /// The table's columns as the scan returns them.
    pub(super) table_fields: Fields,
    /// Table columns + `_file_path`, `_row_index`, `_change`.
    pub(super) out_schema: SchemaRef,
    /// Several source rows may match a target row (a single unconditional
    /// DELETE): the row is deleted once.
    pub(super) dedupe: bool,
    /// Defaults and generated columns of the table written: filled in for
    /// the columns a clause does not assign.
    pub(super) values: ColumnValues,
}

fn bind_predicate(rel: &Relation, e: &Expr, zone: &TimeZone) -> Result<Predicate> {
    Predicate::bind_expr_in_zone(
        e,
        e.to_string(),
        &rel.schema,
        &[],
        ColumnMappingMode::None,
        Binding::Strict,
        zone,
    )
}

fn bind_value(rel: &Relation, e: &Expr, text: String, zone: &TimeZone) -> Result<ValueExpr> {
    ValueExpr::bind_in_zone(e, text, &rel.schema, &[], ColumnMappingMode::None, zone)
}

impl BoundMerge {
    /// `table` is the schema written (the snapshot's, or evolved with new
    /// source columns); `table_fields` its Arrow fields. Instants are read
    /// in `zone` (Spark's session time zone).
    pub(super) fn new(
        plan: &MergePlan,
        target: &StructType,
        source: &StructType,
        table: &StructType,
        table_fields: Fields,
        zone: &TimeZone,
    ) -> Result<BoundMerge> {
        let mut bound = Self::condition(plan, target, source, table, table_fields, zone)?;
        for (index, c) in plan.clauses().iter().enumerate() {
            let clause = bound.compile(plan, index, table)?;
            match c.kind {
                ClauseKind::Matched => bound.matched.push(clause),
                ClauseKind::NotMatched => bound.not_matched.push(clause),
                ClauseKind::NotMatchedBySource => bound.by_source.push(clause),
            }
        }
        bound.dedupe = plan.deletes_duplicates_once();
        Ok(bound)
    }

    /// Only the join condition of `plan` bound (no clause): its keys,
    /// residual and target-only parts, e.g. to check rows against the source
    /// keys where the MERGE itself ran elsewhere (Spark). `source` may hold
    /// just the source columns the condition names.
    pub(super) fn condition(
        plan: &MergePlan,
        target: &StructType,
        source: &StructType,
        table: &StructType,
        table_fields: Fields,
        zone: &TimeZone,
    ) -> Result<BoundMerge> {
        let rel = Relation::new(target, source, plan.target_alias(), plan.source_alias())?;
        let condition = crate::expr::parse::parse(plan.predicate())?;
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
                    keys_target.push(bind_value(&rel, t, t.to_string(), zone)?);
                    keys_source.push(bind_value(&rel, s, s.to_string(), zone)?);
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
                plan.target_alias(),
                plan.source_alias(),
                plan.predicate()
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
                .map(|e| bind_predicate(&rel, &e, zone))
                .transpose()?,
            _ => Some(bind_predicate(&rel, &Expr::And(residual), zone)?),
        };
        Ok(BoundMerge {
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
            values: ColumnValues::new(table, zone)?,
            zone: zone.clone(),
        })
    }

    /// Bind clause `index` of `plan`: its condition and its values over
    /// the relation, each value checked assignable to its column of `table`.
    fn compile(&self, plan: &MergePlan, index: usize, table: &StructType) -> Result<Clause> {
        let rel = &self.rel;
        let c = plan
            .clauses()
            .get(index)
            .ok_or_else(|| Error::Internal(format!("MERGE clause {index} missing")))?;
        let kind_text = c.kind.sql();
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
                Some(Predicate::bind_expr_in_zone(
                    &e,
                    text.clone(),
                    &rel.schema,
                    &[],
                    ColumnMappingMode::None,
                    Binding::Strict,
                    &self.zone,
                )?)
            }
        };
        let table_names: Vec<&str> = table.fields.iter().map(|f| f.name.as_str()).collect();
        let source_names: Vec<&str> = rel.source_names.iter().map(String::as_str).collect();
        let assigned = plan.assignments(index, &table_names, &source_names)?;
        let mut set: Vec<(usize, ValueExpr, ArrowType)> = Vec::with_capacity(assigned.len());
        for (k, (i, value)) in assigned.into_iter().enumerate() {
            let name = table_names.get(i).copied().unwrap_or_default();
            let (e, text) = match value {
                Assigned::SourceColumn(s) => {
                    let path = vec![rel.source_alias.clone(), s];
                    let text = crate::expr::column_text(&path);
                    (Expr::Column(path), text)
                }
                Assigned::Value(text) => {
                    let column = c.assignments.get(k).map_or(name, |(col, _)| col.as_str());
                    let e = scope(crate::expr::parse::parse_value(&text)?);
                    check_side(&e, &format!("value for {column}"))?;
                    (e, text)
                }
            };
            let target = self
                .table_fields
                .get(i)
                .map(|f| f.data_type().clone())
                .ok_or_else(|| Error::Internal(format!("table field {i} missing")))?;
            if let Some(field) = table.fields.get(i) {
                match c.action {
                    ClauseAction::Update | ClauseAction::UpdateAll => {
                        refuse_identity_update(field)?
                    }
                    _ => refuse_identity_insert(field)?,
                }
            }
            let value = bind_value(rel, &e, text, &self.zone)?;
            value.check_assignable(name, &target)?;
            set.push((i, value, target));
        }
        Ok(Clause {
            index,
            action: c.action,
            condition,
            set,
        })
    }

    /// How many clauses the MERGE has.
    pub(super) fn clause_count(&self) -> usize {
        self.matched.len() + self.not_matched.len() + self.by_source.len()
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
    pub(super) fn target_columns(&self) -> BTreeSet<String> {
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
    pub(super) fn key_rows(
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

    pub(super) fn converter(&self) -> Result<RowConverter> {
        RowConverter::new(self.key_types.iter().cloned().map(SortField::new).collect())
            .map_err(arrow_error)
    }

    /// The key values of row `i` of a relation batch holding the target, for
    /// an error message.
    pub(super) fn key_text(&self, batch: &RecordBatch, i: usize) -> String {
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

/// The type both sides of a join key are compared as.
pub(super) fn key_type(target: &ArrowType, source: &ArrowType) -> ArrowType {
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
