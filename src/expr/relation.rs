//! Two relations bound as one: the target and the source of a MERGE, each a
//! struct column named by its alias, plus the top-level names only one side
//! has. Expressions over both bind to [`Relation::schema`]; a batch of the
//! relation may hold one side only (for expressions that read one side).
//!
//! ```text
//! target t(id, v)  source s(id, w)   →   relation schema
//!                                         t: struct<id, v>   s: struct<id, w>
//!                                         v  (target only)   w  (source only)
//! ```
//! `id` is in both, so only `t.id` / `s.id` name it; an unqualified `id` is
//! an `AMBIGUOUS_REFERENCE` error.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StructArray};
use arrow_schema::{Field, Fields, Schema};

use super::rewrite::{column_paths, map_columns};
use super::Expr;
use crate::error::{Error, Result};
use crate::log::schema::{DataType, StructField, StructType};

fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidArgument(message.into())
}

fn arrow_error(e: arrow_schema::ArrowError) -> Error {
    Error::InvalidArgument(format!("MERGE: {e}"))
}

/// One of the two relations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Target,
    Source,
}

/// The two relations as one: a struct column per alias, plus the names only
/// one side has at the top level. Expressions bind to its schema; a batch
/// of it may hold only one side (expressions that refer to one side only).
pub struct Relation {
    pub target_alias: String,
    pub source_alias: String,
    pub target_names: Vec<String>,
    pub source_names: Vec<String>,
    /// Top-level names that belong to one side only.
    pub unqualified: Vec<(String, Side)>,
    /// The schema expressions over both sides bind to.
    pub schema: StructType,
}

pub(crate) fn eq_ci(a: &str, b: &str) -> bool {
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
    /// The relation of `target` and `source` under their aliases (non-empty,
    /// without dots, different).
    pub fn new(
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
    pub fn side_of(&self, path: &[String]) -> Result<Side> {
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
    pub fn sides(&self, e: &Expr) -> Result<(bool, bool)> {
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
    pub fn batch(
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
    pub fn qualify(&self, e: &Expr, side: Side) -> Expr {
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
    pub fn strip_target(&self, e: &Expr) -> Expr {
        map_columns(e, &|path: &[String]| match path.split_first() {
            Some((first, rest)) if !rest.is_empty() && eq_ci(first, &self.target_alias) => {
                rest.to_vec()
            }
            _ => path.to_vec(),
        })
    }
}
