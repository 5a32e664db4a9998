//! The rules a table puts on the rows written to it, as Delta Spark 4.4
//! applies them on every write that adds rows (append, UPDATE, MERGE):
//!
//! | rule | where it is declared | what a write does |
//! |---|---|---|
//! | column default | field metadata `CURRENT_DEFAULT` | fills an inserted row's column the data leaves out |
//! | generated column | field metadata `delta.generationExpression` | computes the column when the data leaves it out; checks it (`col <=> expr`) when given |
//! | identity column | field metadata `delta.identity.*` | hands out values from the high-water mark in step order; `GENERATED ALWAYS` refuses given values |
//! | CHECK constraint | table property `delta.constraints.<name>` | every row must make it true |
//! | invariant | field metadata `delta.invariants` (legacy) | every row must make it true |
//! | NOT NULL | a non-nullable field | no NULL (checked where the data is converted, `input.rs`) |
//!
//! Expressions are parsed and bound when the rules are built ([`ColumnValues::new`],
//! [`RowRules::new`]), so one deltadv cannot evaluate is refused before any
//! file is written. A violation is an [`Error::ConstraintViolation`] with
//! Delta Spark's message (the rule, then the row's values of the columns it
//! reads). Pure: arrays in, arrays or an error out.

use std::sync::Arc;

use arrow_array::{new_null_array, Array, ArrayRef, Int64Array, RecordBatch};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::{DataType as ArrowType, Field, Schema};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::expr::{Binding, BoundColumn, Predicate, ValueExpr};
use crate::log::features::properties::{
    TableProperties, CURRENT_DEFAULT_KEY, GENERATION_EXPRESSION_KEY,
    IDENTITY_ALLOW_EXPLICIT_INSERT_KEY, IDENTITY_HIGH_WATER_MARK_KEY, IDENTITY_START_KEY,
    IDENTITY_STEP_KEY, INVARIANTS_KEY,
};
use crate::log::schema::{ColumnMappingMode, DataType, StructField, StructType};

/// A column whose value comes from an expression (a default or a
/// generation expression).
#[derive(Debug, Clone)]
struct ColumnValue {
    pos: usize,
    name: String,
    expr: ValueExpr,
}

fn text_of(field: &StructField, key: &str) -> Option<String> {
    match field.metadata.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

fn bind_value(
    schema: &StructType,
    field: &StructField,
    key: &str,
    what: &str,
) -> Result<ValueExpr> {
    let text = text_of(field, key).unwrap_or_default();
    ValueExpr::new(&text, schema, &[], ColumnMappingMode::None).map_err(|e| {
        Error::Unsupported(format!(
            "column '{}' is {what} ({key} = {text:?}), which deltadv cannot evaluate: {e}",
            field.name
        ))
    })
}

/// A batch of `columns` under the table's top-level names, for evaluating
/// expressions bound to the table's logical schema.
fn named_batch(names: &[String], columns: &[ArrayRef], rows: usize) -> Result<RecordBatch> {
    let fields: Vec<Field> = names
        .iter()
        .zip(columns)
        .map(|(n, c)| Field::new(n.as_str(), c.data_type().clone(), true))
        .collect();
    let columns = columns.get(..fields.len()).unwrap_or(columns).to_vec();
    RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(rows)),
    )
    .map_err(|e| Error::Internal(format!("rows to check: {e}")))
}

fn cast_to(array: ArrayRef, to: &ArrowType) -> Result<ArrayRef> {
    if array.data_type() == to {
        Ok(array)
    } else {
        crate::expr::value::ansi_cast(array.as_ref(), to)
    }
}

/// Delta Spark's message for a row that breaks `rule` (`name (expr)`),
/// with the values of `columns` in row `row`.
fn violation(rule: &str, batch: &RecordBatch, row: usize, columns: &[BoundColumn]) -> Error {
    let mut text = format!(
        "[DELTA_VIOLATE_CONSTRAINT_WITH_VALUES] CHECK constraint {rule} violated by row with \
         values:"
    );
    let options = FormatOptions::default().with_null("null");
    let mut seen: Vec<String> = Vec::new();
    for c in columns {
        let name = c.logical.join(".");
        if seen.contains(&name) {
            continue;
        }
        let value = crate::expr::eval::column_array(batch, c)
            .ok()
            .and_then(|a| {
                ArrayFormatter::try_new(a.as_ref(), &options)
                    .ok()
                    .map(|f| f.value(row).to_string())
            })
            .unwrap_or_else(|| "?".into());
        text.push_str(&format!("\n - {name} : {value}"));
        seen.push(name);
    }
    Error::ConstraintViolation(text)
}

/// The first row of `mask` that is not TRUE.
fn first_not_true(mask: &arrow_array::BooleanArray) -> Option<usize> {
    (0..mask.len()).find(|i| !mask.is_valid(*i) || !mask.value(*i))
}

/// Defaults and generation expressions: the values a write fills in for
/// columns it does not give. Used by the data writer (columns missing from
/// the data) and by UPDATE and MERGE (columns a clause does not assign).
#[derive(Debug, Clone, Default)]
pub struct ColumnValues {
    names: Vec<String>,
    defaults: Vec<ColumnValue>,
    generated: Vec<ColumnValue>,
    /// Positions of the identity columns (their values are the writer's).
    identity: Vec<usize>,
}

impl ColumnValues {
    /// The defaults and generated columns of `schema` (top level), bound.
    pub fn new(schema: &StructType) -> Result<ColumnValues> {
        let mut out = ColumnValues {
            names: schema.fields.iter().map(|f| f.name.clone()).collect(),
            ..Default::default()
        };
        for (pos, f) in schema.fields.iter().enumerate() {
            if f.metadata.contains_key(CURRENT_DEFAULT_KEY) {
                let expr = bind_value(schema, f, CURRENT_DEFAULT_KEY, "a column with a default")?;
                out.defaults.push(ColumnValue {
                    pos,
                    name: f.name.clone(),
                    expr,
                });
            }
            if f.metadata.contains_key(IDENTITY_START_KEY) {
                out.identity.push(pos);
            }
            if f.metadata.contains_key(GENERATION_EXPRESSION_KEY) {
                let expr = bind_value(schema, f, GENERATION_EXPRESSION_KEY, "a generated column")?;
                out.generated.push(ColumnValue {
                    pos,
                    name: f.name.clone(),
                    expr,
                });
            }
        }
        refuse_nested(&schema.fields, "")?;
        Ok(out)
    }

    /// No defaults and no generated columns.
    pub fn is_empty(&self) -> bool {
        self.defaults.is_empty() && self.generated.is_empty()
    }

    /// Whether the column at `pos` gets a value when not given (on insert).
    pub fn fills(&self, pos: usize) -> bool {
        self.defaults
            .iter()
            .chain(&self.generated)
            .any(|c| c.pos == pos)
    }

    /// Whether the column at `pos` is an identity column.
    pub fn is_identity(&self, pos: usize) -> bool {
        self.identity.contains(&pos)
    }

    /// Whether the column at `pos` is generated.
    pub fn is_generated(&self, pos: usize) -> bool {
        self.generated.iter().any(|c| c.pos == pos)
    }

    /// Fill the columns (table order, `rows` rows) not in `given`: defaults
    /// when the rows are inserted, then the generated columns computed
    /// from the row. A filled column keeps its array's type.
    pub fn fill(
        &self,
        columns: &mut [ArrayRef],
        rows: usize,
        given: &[usize],
        insert: bool,
    ) -> Result<()> {
        let defaults = self.defaults.iter().filter(|_| insert);
        for c in defaults.chain(&self.generated) {
            if given.contains(&c.pos) || !(insert || self.is_generated(c.pos)) {
                continue;
            }
            let batch = named_batch(&self.names, columns, rows)?;
            let slot = columns
                .get_mut(c.pos)
                .ok_or_else(|| Error::Internal(format!("column {} missing", c.name)))?;
            let value = c.expr.evaluate(&batch)?;
            *slot = cast_to(value, slot.data_type()).map_err(|e| {
                Error::InvalidArgument(format!("column '{}' = {}: {e}", c.name, c.expr.text()))
            })?;
        }
        Ok(())
    }

    /// Check given generated columns (`given` positions) against their
    /// expressions (Delta Spark's `col <=> expr` constraint).
    pub fn check_generated(
        &self,
        columns: &[ArrayRef],
        rows: usize,
        given: &[usize],
    ) -> Result<()> {
        for c in self.generated.iter().filter(|c| given.contains(&c.pos)) {
            let batch = named_batch(&self.names, columns, rows)?;
            let actual = columns
                .get(c.pos)
                .ok_or_else(|| Error::Internal(format!("column {} missing", c.name)))?;
            let expected = cast_to(c.expr.evaluate(&batch)?, actual.data_type())?;
            let same = arrow_ord::cmp::not_distinct(actual, &expected)
                .map_err(|e| Error::Internal(format!("comparing generated column: {e}")))?;
            if let Some(row) = first_not_true(&same) {
                let mut shown = vec![BoundColumn {
                    logical: vec![c.name.clone()],
                    physical: vec![c.name.clone()],
                    data_type: DataType::String,
                    partition: false,
                    field_id: None,
                    bounds_comparable: false,
                }];
                shown.extend(c.expr.columns().iter().cloned());
                let rule = format!(
                    "Generated Column ({} <=> {})",
                    crate::expr::column_text(std::slice::from_ref(&c.name)),
                    c.expr.text()
                );
                return Err(violation(&rule, &batch, row, &shown));
            }
        }
        Ok(())
    }
}

/// Generated columns, defaults and identity columns inside structs are
/// refused (Delta Spark allows them at the top level only).
fn refuse_nested(fields: &[StructField], prefix: &str) -> Result<()> {
    for f in fields {
        if let DataType::Struct(inner) = &f.data_type {
            let path = format!("{prefix}{}.", f.name);
            for g in &inner.fields {
                for key in [
                    CURRENT_DEFAULT_KEY,
                    GENERATION_EXPRESSION_KEY,
                    IDENTITY_START_KEY,
                ] {
                    if g.metadata.contains_key(key) {
                        return Err(Error::Unsupported(format!(
                            "nested column '{path}{}' has {key}, which deltadv computes for \
                             top-level columns only",
                            g.name
                        )));
                    }
                }
            }
            refuse_nested(&inner.fields, &path)?;
        }
    }
    Ok(())
}

/// An identity column (`delta.identity.*`).
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    pub pos: usize,
    pub name: String,
    pub start: i64,
    pub step: i64,
    /// The last value handed out before this write.
    pub high_water_mark: Option<i64>,
    /// `GENERATED BY DEFAULT`: values may be given.
    pub allow_explicit_insert: bool,
    /// The last value this write handed out.
    issued: Option<i64>,
    /// A distributed writer's slot and the values it has handed out in it
    /// (see [`IdentitySlot`]).
    slot: Option<(IdentitySlot, u64)>,
}

/// Bits of an identity value's offset a distributed writer numbers its own
/// rows in: writer `index` hands out `base + step * ((index << 33) + k)` for
/// its k-th row (k < 2^33), so writers of one commit never collide without
/// coordinating. This is the layout of Spark's `monotonically_increasing_id`
/// (a PySpark task knows its partition index, not the partition count Delta
/// Spark's `GenerateIdentityValues` interleaves by); writer 0 hands out what
/// a single writer does (`base`, `base + step`, ...).
pub const IDENTITY_SLOT_BITS: u32 = 33;

/// Which of several writers for one commit (Spark tasks, `write_files`
/// calls) this one is: its partition index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdentitySlot(u64);

impl IdentitySlot {
    /// The largest index: `index << 33` must stay below 2^63.
    pub const MAX_INDEX: u64 = (1 << (63 - IDENTITY_SLOT_BITS)) - 1;

    /// Writer `index`'s slot (at most [`IdentitySlot::MAX_INDEX`]).
    pub fn try_new(index: u64) -> Result<IdentitySlot> {
        if index > Self::MAX_INDEX {
            return Err(Error::InvalidArgument(format!(
                "identity slot {index} is too large (at most {})",
                Self::MAX_INDEX
            )));
        }
        Ok(IdentitySlot(index))
    }
}

fn json_i64(field: &StructField, key: &str) -> Result<Option<i64>> {
    match field.metadata.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.as_i64().is_some() => Ok(n.as_i64()),
        Some(Value::String(s)) if s.trim().parse::<i64>().is_ok() => Ok(s.trim().parse().ok()),
        Some(other) => Err(Error::Schema(format!(
            "column '{}': {key} must be an integer, found {other}",
            field.name
        ))),
    }
}

impl Identity {
    /// The identity column `field` at `pos`, if it is one.
    pub fn of(pos: usize, field: &StructField) -> Result<Option<Identity>> {
        let Some(start) = json_i64(field, IDENTITY_START_KEY)? else {
            return Ok(None);
        };
        let step = json_i64(field, IDENTITY_STEP_KEY)?.unwrap_or(1);
        if step == 0 {
            return Err(Error::Schema(format!(
                "identity column '{}' has {IDENTITY_STEP_KEY} 0",
                field.name
            )));
        }
        let allow_explicit_insert = match field.metadata.get(IDENTITY_ALLOW_EXPLICIT_INSERT_KEY) {
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
            _ => false,
        };
        Ok(Some(Identity {
            pos,
            name: field.name.clone(),
            start,
            step,
            high_water_mark: json_i64(field, IDENTITY_HIGH_WATER_MARK_KEY)?,
            allow_explicit_insert,
            issued: None,
            slot: None,
        }))
    }

    /// The next `n` values: from the high-water mark (or the start) on, in
    /// step order.
    pub fn next_values(&mut self, n: usize) -> Result<Vec<i64>> {
        let overflow = || {
            Error::InvalidArgument(format!(
                "identity column '{}' overflows a long (start {}, step {})",
                self.name, self.start, self.step
            ))
        };
        if let Some((slot, used)) = self.slot {
            return self.next_values_in_slot(slot, used, n);
        }
        let mut out = Vec::with_capacity(n);
        let mut last = self.issued.or(self.high_water_mark);
        for _ in 0..n {
            let v = match last {
                None => self.start,
                Some(l) => l.checked_add(self.step).ok_or_else(overflow)?,
            };
            out.push(v);
            last = Some(v);
        }
        if n > 0 {
            self.issued = last;
        }
        Ok(out)
    }

    /// The next `n` values of a distributed writer: `base + step * ((slot
    /// << 33) + k)` for its k-th value, `base` the value after the
    /// high-water mark (or the start).
    fn next_values_in_slot(&mut self, slot: IdentitySlot, used: u64, n: usize) -> Result<Vec<i64>> {
        let overflow = || {
            Error::InvalidArgument(format!(
                "identity column '{}' overflows a long (start {}, step {}, slot {})",
                self.name, self.start, self.step, slot.0
            ))
        };
        let count = u64::try_from(n).map_err(|_| overflow())?;
        let end = used.checked_add(count).ok_or_else(overflow)?;
        if end > 1 << IDENTITY_SLOT_BITS {
            return Err(Error::InvalidArgument(format!(
                "identity column '{}': one writer hands out at most 2^{IDENTITY_SLOT_BITS} \
                 values, this one needs {end}",
                self.name
            )));
        }
        let base = match self.high_water_mark {
            None => self.start,
            Some(mark) => mark.checked_add(self.step).ok_or_else(overflow)?,
        };
        // Offsets of the slot: slot << 33 plus k <= 2^33 stays below 2^63.
        let offset = |k: u64| i64::try_from((slot.0 << IDENTITY_SLOT_BITS) + k);
        let (first, last) = (
            offset(used).map_err(|_| overflow())?,
            offset(end).map_err(|_| overflow())?,
        );
        let out: Vec<i64> = (first..last)
            .map(|o| {
                self.step
                    .checked_mul(o)
                    .and_then(|d| base.checked_add(d))
                    .ok_or_else(overflow)
            })
            .collect::<Result<_>>()?;
        if let Some(last) = out.last() {
            self.issued = Some(*last);
        }
        self.slot = Some((slot, end));
        Ok(out)
    }

    /// The high-water mark after this write, when it handed out values.
    pub fn new_high_water_mark(&self) -> Option<i64> {
        self.issued
    }
}

/// A CHECK constraint or an invariant, bound.
#[derive(Debug, Clone)]
struct Check {
    /// `name (expr)` as Delta Spark prints it.
    rule: String,
    predicate: Predicate,
}

/// Every rule on the rows a data writer writes.
#[derive(Debug, Clone, Default)]
pub struct RowRules {
    pub values: ColumnValues,
    pub identity: Vec<Identity>,
    checks: Vec<Check>,
    names: Vec<String>,
    /// Non-nullable top-level columns (checked after filling).
    not_null: Vec<usize>,
    /// Non-nullable fields inside structs: (top-level position, child
    /// indexes, dotted path). As in Delta Spark, a NULL parent struct makes
    /// the field NULL, which violates it.
    nested_not_null: Vec<(usize, Vec<usize>, String)>,
    /// The rows are an UPDATE's or MERGE's change rows: every column is
    /// given (identity values of existing rows included); NULL identity
    /// values are those of inserted rows, filled here.
    pub change_rows: bool,
    /// The writer is one of several writing for one commit (Spark tasks):
    /// identity values are handed out only in an [`IdentitySlot`] given
    /// with [`RowRules::set_identity_slot`] (else they would collide).
    pub distributed: bool,
}

impl RowRules {
    /// The rules of a table with this logical `schema` and configuration.
    pub fn new(
        schema: &StructType,
        configuration: &std::collections::HashMap<String, Option<String>>,
    ) -> Result<RowRules> {
        let values = ColumnValues::new(schema)?;
        let mut identity = Vec::new();
        let mut not_null = Vec::new();
        for (pos, f) in schema.fields.iter().enumerate() {
            if let Some(id) = Identity::of(pos, f)? {
                identity.push(id);
            }
            if !f.nullable && !f.is_internal() {
                not_null.push(pos);
            }
        }
        let mut nested_not_null = Vec::new();
        for (pos, f) in schema.fields.iter().enumerate() {
            if let DataType::Struct(inner) = &f.data_type {
                nested_non_nullable(
                    pos,
                    &inner.fields,
                    &mut Vec::new(),
                    &f.name,
                    &mut nested_not_null,
                );
            }
        }
        let bind = |rule: String, text: &str| -> Result<Check> {
            let predicate =
                Predicate::new(text, schema, &[], ColumnMappingMode::None, Binding::Strict)
                    .map_err(|e| {
                        Error::Unsupported(format!(
                            "CHECK constraint {rule}: deltadv cannot evaluate it: {e}"
                        ))
                    })?;
            Ok(Check { rule, predicate })
        };
        let mut checks = Vec::new();
        for (name, text) in TableProperties::new(configuration).check_constraint_expressions() {
            checks.push(bind(format!("{name} ({text})"), text)?);
        }
        let mut invariants = Vec::new();
        collect_invariants(&schema.fields, &mut invariants)?;
        for text in invariants {
            checks.push(bind(format!("EXPRESSION({text}) ({text})"), &text)?);
        }
        Ok(RowRules {
            values,
            identity,
            checks,
            names: schema.fields.iter().map(|f| f.name.clone()).collect(),
            not_null,
            nested_not_null,
            change_rows: false,
            distributed: false,
        })
    }

    /// Hand out identity values in `slot`: unique across the writers of
    /// one commit, each given its own slot.
    pub fn set_identity_slot(&mut self, slot: IdentitySlot) {
        for id in &mut self.identity {
            id.slot = Some((slot, 0));
        }
    }

    /// Whether the column at `pos` gets values when the data leaves it out.
    pub fn fills(&self, pos: usize) -> bool {
        self.values.fills(pos) || self.identity.iter().any(|i| i.pos == pos)
    }

    /// Refuse data that gives a `GENERATED ALWAYS` identity column (an
    /// append or insert; change rows carry existing values).
    pub fn check_given(&self, given: &[usize]) -> Result<()> {
        if self.change_rows {
            return Ok(());
        }
        for id in &self.identity {
            if given.contains(&id.pos) && !id.allow_explicit_insert {
                return Err(explicit_insert(&id.name));
            }
        }
        Ok(())
    }

    /// Complete `columns` (table order, `rows` rows; those not in `given`
    /// hold NULL placeholders of their type) and check every rule.
    pub fn apply(&mut self, columns: &mut [ArrayRef], rows: usize, given: &[usize]) -> Result<()> {
        self.check_given(given)?;
        self.values.fill(columns, rows, given, !self.change_rows)?;
        self.fill_identity(columns, rows, given)?;
        for pos in &self.not_null {
            if let Some(c) = columns.get(*pos) {
                if c.logical_null_count() > 0 {
                    return Err(not_null_violation(
                        self.names.get(*pos).map_or("?", String::as_str),
                    ));
                }
            }
        }
        for (pos, path, name) in &self.nested_not_null {
            if let Some(c) = columns.get(*pos) {
                if struct_path_has_null(c, path) {
                    return Err(not_null_violation(name));
                }
            }
        }
        self.values.check_generated(columns, rows, given)?;
        if self.checks.is_empty() {
            return Ok(());
        }
        let batch = named_batch(&self.names, columns, rows)?;
        for c in &self.checks {
            let mask = c.predicate.evaluate(&batch)?;
            if let Some(row) = first_not_true(&mask) {
                return Err(violation(&c.rule, &batch, row, c.predicate.columns()));
            }
        }
        Ok(())
    }

    /// Hand out identity values: for the whole column when the data leaves
    /// it out, for its NULLs in change rows (inserted rows).
    pub fn fill_identity(
        &mut self,
        columns: &mut [ArrayRef],
        rows: usize,
        given: &[usize],
    ) -> Result<()> {
        for id in &mut self.identity {
            let slot = columns
                .get_mut(id.pos)
                .ok_or_else(|| Error::Internal(format!("column {} missing", id.name)))?;
            let missing = !given.contains(&id.pos);
            let nulls = slot.logical_null_count();
            let fill = missing || (self.change_rows && nulls > 0);
            if !fill {
                continue;
            }
            if self.distributed && id.slot.is_none() {
                return Err(Error::Unsupported(format!(
                    "identity column '{}' needs new values, which one of several writers \
                     hands out only in its own slot (write_files(identity_slot=...), the \
                     task's partition index), else they would collide",
                    id.name
                )));
            }
            let n = if missing { rows } else { nulls };
            let mut values = id.next_values(n)?.into_iter();
            let filled: Int64Array = if missing {
                values.map(Some).collect()
            } else {
                let old = cast_to(slot.clone(), &ArrowType::Int64)?;
                let old = old
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .ok_or_else(|| Error::Internal("identity column not a long".into()))?;
                old.iter().map(|v| v.or_else(|| values.next())).collect()
            };
            *slot = cast_to(Arc::new(filled), slot.data_type())?;
        }
        Ok(())
    }

    /// The identity columns' high-water marks after this write: (column,
    /// mark) of those that handed out values.
    pub fn high_water_marks(&self) -> Vec<(String, i64)> {
        self.identity
            .iter()
            .filter_map(|i| i.new_high_water_mark().map(|m| (i.name.clone(), m)))
            .collect()
    }
}

/// Refuse an UPDATE (or MERGE update) that sets an identity column, as
/// Delta Spark does.
pub fn refuse_identity_update(field: &StructField) -> Result<()> {
    if field.metadata.contains_key(IDENTITY_START_KEY) {
        return Err(Error::InvalidArgument(format!(
            "[DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED] IDENTITY column {} cannot be updated.",
            field.name
        )));
    }
    Ok(())
}

/// Refuse an insert that gives a `GENERATED ALWAYS` identity column a value.
pub fn refuse_identity_insert(field: &StructField) -> Result<()> {
    match Identity::of(0, field)? {
        Some(id) if !id.allow_explicit_insert => Err(explicit_insert(&id.name)),
        _ => Ok(()),
    }
}

fn explicit_insert(column: &str) -> Error {
    Error::InvalidArgument(format!(
        "[DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED] Providing values for GENERATED \
         ALWAYS AS IDENTITY column {column} is not supported."
    ))
}

/// The non-nullable fields under struct `fields` (of the top-level column at
/// `pos`, reached through `path`), struct chains only (Delta Spark does not
/// check inside arrays and maps).
fn nested_non_nullable(
    pos: usize,
    fields: &[StructField],
    path: &mut Vec<usize>,
    prefix: &str,
    out: &mut Vec<(usize, Vec<usize>, String)>,
) {
    for (i, f) in fields.iter().enumerate() {
        path.push(i);
        let name = format!("{prefix}.{}", f.name);
        if !f.nullable {
            out.push((pos, path.clone(), name.clone()));
        }
        if let DataType::Struct(inner) = &f.data_type {
            nested_non_nullable(pos, &inner.fields, path, &name, out);
        }
        path.pop();
    }
}

/// Whether the field at `path` (child indexes) under struct column `column`
/// is NULL in some row, a NULL parent counting as NULL.
fn struct_path_has_null(column: &ArrayRef, path: &[usize]) -> bool {
    let mut array = column.clone();
    let mut nulls = array.logical_nulls();
    for i in path {
        let Some(child) = array
            .as_any()
            .downcast_ref::<arrow_array::StructArray>()
            .and_then(|s| s.columns().get(*i).cloned())
        else {
            return false;
        };
        nulls = arrow_buffer::NullBuffer::union(nulls.as_ref(), child.logical_nulls().as_ref());
        array = child;
    }
    nulls.is_some_and(|n| n.null_count() > 0)
}

/// Delta Spark's message for a NULL in a NOT NULL column.
pub fn not_null_violation(column: &str) -> Error {
    Error::ConstraintViolation(format!(
        "[DELTA_NOT_NULL_CONSTRAINT_VIOLATED] NOT NULL constraint violated for column: {column}."
    ))
}

/// The expressions of the legacy `delta.invariants` of `fields` (at any
/// depth): `{"expression": {"expression": "<sql>"}}`.
fn collect_invariants(fields: &[StructField], out: &mut Vec<String>) -> Result<()> {
    for f in fields {
        if let Some(v) = f.metadata.get(INVARIANTS_KEY) {
            let parsed: Value = match v {
                Value::String(s) => serde_json::from_str(s).map_err(|e| {
                    Error::Schema(format!(
                        "column '{}': {INVARIANTS_KEY} is not JSON: {e}",
                        f.name
                    ))
                })?,
                other => other.clone(),
            };
            let text = parsed
                .pointer("/expression/expression")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    Error::Schema(format!(
                        "column '{}': {INVARIANTS_KEY} has no expression.expression: {parsed}",
                        f.name
                    ))
                })?;
            out.push(text.to_string());
        }
        if let DataType::Struct(inner) = &f.data_type {
            collect_invariants(&inner.fields, out)?;
        }
    }
    Ok(())
}

/// `metadata` with the identity columns' high-water marks raised to
/// `marks` (several marks of one column, from several writers: the one
/// furthest in step order; a mark never goes back, as in Delta Spark).
pub fn with_high_water_marks(
    metadata: &crate::log::actions::Metadata,
    marks: &[(String, i64)],
) -> Result<crate::log::actions::Metadata> {
    let mut schema = StructType::parse(&metadata.schema_string)?;
    for (name, mark) in marks {
        let field = schema
            .fields
            .iter_mut()
            .find(|f| f.name == *name)
            .ok_or_else(|| Error::Internal(format!("identity column {name} not in the schema")))?;
        let step = json_i64(field, IDENTITY_STEP_KEY)?.unwrap_or(1);
        let beyond = |old: i64| if step > 0 { *mark > old } else { *mark < old };
        if json_i64(field, IDENTITY_HIGH_WATER_MARK_KEY)?.is_some_and(|old| !beyond(old)) {
            continue;
        }
        field
            .metadata
            .insert(IDENTITY_HIGH_WATER_MARK_KEY.to_string(), Value::from(*mark));
    }
    let mut out = metadata.clone();
    out.schema_string = schema.to_schema_string();
    Ok(out)
}

/// Whether `after` differs from `before` only in identity columns'
/// high-water marks (the metadata update of an insert that handed out
/// identity values).
pub fn only_identity_marks_differ(
    before: &crate::log::actions::Metadata,
    after: &crate::log::actions::Metadata,
) -> bool {
    let strip =
        |m: &crate::log::actions::Metadata| -> Option<(crate::log::actions::Metadata, StructType)> {
            let mut schema = StructType::parse(&m.schema_string).ok()?;
            for f in &mut schema.fields {
                f.metadata.remove(IDENTITY_HIGH_WATER_MARK_KEY);
            }
            let mut rest = m.clone();
            rest.schema_string = String::new();
            Some((rest, schema))
        };
    match (strip(before), strip(after)) {
        (Some(b), Some(a)) => before != after && a == b,
        _ => false,
    }
}

/// An empty placeholder for a column the data leaves out and a rule fills.
pub fn placeholder(target: &ArrowType, rows: usize) -> ArrayRef {
    new_null_array(target, rows)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use arrow_array::{Int32Array, Int64Array};
    use serde_json::json;

    use super::*;

    fn schema() -> StructType {
        StructType::new(vec![
            StructField::new("x", DataType::Integer, true),
            StructField::new("g", DataType::Long, true)
                .with_metadata([(GENERATION_EXPRESSION_KEY, json!("x * 2"))]),
            StructField::new("d", DataType::Integer, true)
                .with_metadata([(CURRENT_DEFAULT_KEY, json!("7"))]),
            StructField::new("id", DataType::Long, true).with_metadata([
                (IDENTITY_START_KEY, json!(10)),
                (IDENTITY_STEP_KEY, json!(5)),
                (IDENTITY_ALLOW_EXPLICIT_INSERT_KEY, json!(false)),
            ]),
        ])
    }

    fn config(pairs: &[(&str, &str)]) -> HashMap<String, Option<String>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect()
    }

    fn columns(x: Vec<Option<i32>>) -> Vec<ArrayRef> {
        let n = x.len();
        vec![
            Arc::new(Int32Array::from(x)),
            new_null_array(&ArrowType::Int64, n),
            new_null_array(&ArrowType::Int32, n),
            new_null_array(&ArrowType::Int64, n),
        ]
    }

    #[test]
    fn fills_defaults_generated_and_identity() {
        let mut rules = RowRules::new(&schema(), &HashMap::new()).unwrap();
        let mut cols = columns(vec![Some(1), Some(2)]);
        rules.apply(&mut cols, 2, &[0]).unwrap();
        let long = |a: &ArrayRef| a.as_any().downcast_ref::<Int64Array>().unwrap().clone();
        assert_eq!(long(&cols[1]), Int64Array::from(vec![2, 4]));
        assert_eq!(
            cols[2].as_any().downcast_ref::<Int32Array>().unwrap(),
            &Int32Array::from(vec![7, 7])
        );
        assert_eq!(long(&cols[3]), Int64Array::from(vec![10, 15]));
        let mut more = columns(vec![Some(3)]);
        rules.apply(&mut more, 1, &[0]).unwrap();
        assert_eq!(long(&more[3]), Int64Array::from(vec![20]));
        assert_eq!(rules.high_water_marks(), vec![("id".to_string(), 20)]);
    }

    #[test]
    fn checks_given_generated_values_and_identity() {
        let mut rules = RowRules::new(&schema(), &HashMap::new()).unwrap();
        let mut cols = columns(vec![Some(1), Some(2)]);
        cols[1] = Arc::new(Int64Array::from(vec![2, 5]));
        let e = rules.apply(&mut cols, 2, &[0, 1]).unwrap_err().to_string();
        assert!(
            e.contains("CHECK constraint Generated Column (g <=> x * 2)")
                && e.contains(" - g : 5")
                && e.contains(" - x : 2"),
            "{e}"
        );
        let e = rules
            .apply(&mut columns(vec![Some(1)]), 1, &[0, 3])
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("GENERATED ALWAYS AS IDENTITY column id"),
            "{e}"
        );
    }

    #[test]
    fn check_constraints_fail_on_false_and_null() {
        let conf = config(&[("delta.constraints.positive", "x > 0")]);
        let mut rules = RowRules::new(&schema(), &conf).unwrap();
        rules.apply(&mut columns(vec![Some(1)]), 1, &[0]).unwrap();
        let e = rules
            .apply(&mut columns(vec![Some(1), Some(-4)]), 2, &[0])
            .unwrap_err();
        assert!(matches!(e, Error::ConstraintViolation(_)));
        let e = e.to_string();
        assert!(
            e.contains("CHECK constraint positive (x > 0) violated by row with values:\n - x : -4"),
            "{e}"
        );
        let e = rules.apply(&mut columns(vec![None]), 1, &[0]).unwrap_err();
        assert!(e.to_string().contains(" - x : null"), "{e}");
    }

    #[test]
    fn refuses_what_it_cannot_evaluate_when_built() {
        let s = StructType::new(vec![
            StructField::new("t", DataType::Timestamp, true),
            StructField::new("y", DataType::Integer, true)
                .with_metadata([(GENERATION_EXPRESSION_KEY, json!("some_udf(t)"))]),
        ]);
        let e = RowRules::new(&s, &HashMap::new()).unwrap_err().to_string();
        assert!(
            e.contains("column 'y' is a generated column") && e.contains("some_udf"),
            "{e}"
        );
        let conf = config(&[("delta.constraints.c", "x LIKE 'a%'")]);
        let e = RowRules::new(&schema(), &conf).unwrap_err().to_string();
        assert!(e.contains("CHECK constraint c (x LIKE 'a%')"), "{e}");
    }

    #[test]
    fn invariants_and_high_water_marks() {
        let s = StructType::new(vec![StructField::new("x", DataType::Integer, true)
            .with_metadata([(
                INVARIANTS_KEY,
                json!(r#"{"expression":{"expression":"x < 3"}}"#),
            )])]);
        let mut rules = RowRules::new(&s, &HashMap::new()).unwrap();
        let mut cols: Vec<ArrayRef> = vec![Arc::new(Int32Array::from(vec![5]))];
        let e = rules.apply(&mut cols, 1, &[0]).unwrap_err().to_string();
        assert!(
            e.contains("EXPRESSION(x < 3) (x < 3)") && e.contains(" - x : 5"),
            "{e}"
        );
        let m = crate::log::actions::Metadata {
            id: "t".into(),
            name: None,
            description: None,
            format: Default::default(),
            schema_string: schema().to_schema_string(),
            partition_columns: vec![],
            configuration: HashMap::new(),
            created_time: None,
        };
        let m = with_high_water_marks(&m, &[("id".into(), 25)]).unwrap();
        let id = StructType::parse(&m.schema_string).unwrap().fields[3].clone();
        assert_eq!(
            Identity::of(3, &id).unwrap().unwrap().high_water_mark,
            Some(25)
        );
    }

    #[test]
    fn distributed_writers_hand_out_values_in_their_slots() {
        let field = |step: i64, mark: Option<i64>| {
            let mut f = StructField::new("id", DataType::Long, true).with_metadata([
                (IDENTITY_START_KEY, json!(10)),
                (IDENTITY_STEP_KEY, json!(step)),
            ]);
            if let Some(m) = mark {
                f.metadata
                    .insert(IDENTITY_HIGH_WATER_MARK_KEY.into(), json!(m));
            }
            f
        };
        let slot = |i| IdentitySlot::try_new(i).unwrap();
        // writer 0 hands out what one writer does, from the mark on
        let mut a = Identity::of(0, &field(5, Some(20))).unwrap().unwrap();
        a.slot = Some((slot(0), 0));
        assert_eq!(a.next_values(2).unwrap(), vec![25, 30]);
        assert_eq!(a.next_values(1).unwrap(), vec![35]);
        assert_eq!(a.new_high_water_mark(), Some(35));
        // writer 3: 2^33 * 3 steps further, on the start/step grid
        let mut b = Identity::of(0, &field(5, Some(20))).unwrap().unwrap();
        b.slot = Some((slot(3), 0));
        let far = 25 + 5 * (3i64 << 33);
        assert_eq!(b.next_values(2).unwrap(), vec![far, far + 5]);
        // a negative step goes down; the mark is the smallest value
        let mut c = Identity::of(0, &field(-2, None)).unwrap().unwrap();
        c.slot = Some((slot(1), 0));
        assert_eq!(
            c.next_values(2).unwrap(),
            vec![10 - 2 * (1 << 33), 8 - 2 * (1 << 33)]
        );
        // the commit keeps the mark furthest in step order, never going back
        let meta = |f: StructField| crate::log::actions::Metadata {
            id: "t".into(),
            name: None,
            description: None,
            format: Default::default(),
            schema_string: StructType::new(vec![f]).to_schema_string(),
            partition_columns: vec![],
            configuration: HashMap::new(),
            created_time: None,
        };
        let mark_of = |m: &crate::log::actions::Metadata| {
            let f = StructType::parse(&m.schema_string).unwrap().fields[0].clone();
            Identity::of(0, &f).unwrap().unwrap().high_water_mark
        };
        let up = meta(field(5, Some(20)));
        let marks = [
            ("id".to_string(), 35),
            ("id".into(), far + 5),
            ("id".into(), 15),
        ];
        assert_eq!(
            mark_of(&with_high_water_marks(&up, &marks).unwrap()),
            Some(far + 5)
        );
        let down = meta(field(-2, Some(0)));
        let marks = [("id".to_string(), -4), ("id".into(), 2), ("id".into(), -10)];
        assert_eq!(
            mark_of(&with_high_water_marks(&down, &marks).unwrap()),
            Some(-10)
        );
        // the slot index and the values per writer are bounded
        assert!(IdentitySlot::try_new(IdentitySlot::MAX_INDEX + 1).is_err());
        let mut full = Identity::of(0, &field(1, None)).unwrap().unwrap();
        full.slot = Some((slot(0), (1 << IDENTITY_SLOT_BITS) - 1));
        assert!(full.next_values(1).is_ok());
        assert!(full.next_values(1).is_err());
        // a distributed writer without a slot refuses to hand out values
        let mut rules = RowRules::new(&schema(), &HashMap::new()).unwrap();
        rules.distributed = true;
        let mut cols = columns(vec![Some(1)]);
        let e = rules.apply(&mut cols, 1, &[0]).unwrap_err().to_string();
        assert!(e.contains("identity_slot"), "{e}");
        rules.set_identity_slot(slot(2));
        let mut cols = columns(vec![Some(1)]);
        rules.apply(&mut cols, 1, &[0]).unwrap();
        let id = cols[3].as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(id.value(0), 10 + 5 * (2i64 << 33));
    }
}
