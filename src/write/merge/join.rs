//! The hash join of a MERGE: a source chunk hashed on its join keys
//! (`arrow-row` encoded, equal keys chained in source order), probed with
//! target batches; and the key-range predicate that prunes the target files
//! a chunk can match.

use std::collections::{HashMap, HashSet};

use arrow_array::{Array, RecordBatch};
use arrow_row::RowConverter;
use arrow_schema::DataType as ArrowType;

use super::bound::BoundMerge;
use super::{arrow_error, invalid};
use crate::error::Result;
use crate::expr::Expr;

/// A source chunk hashed on its keys.
pub(super) struct Chunk {
    pub(super) source: RecordBatch,
    converter: RowConverter,
    first: HashMap<Box<[u8]>, u32>,
    /// Next source row with the same key (`u32::MAX`: none).
    next: Vec<u32>,
}

impl Chunk {
    pub(super) fn build(plan: &BoundMerge, source: RecordBatch) -> Result<Chunk> {
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
    pub(super) fn probe(
        &self,
        plan: &BoundMerge,
        target: &RecordBatch,
    ) -> Result<(Vec<u32>, Vec<u32>)> {
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

/// The join keys of every source row, kept (while they fit in a byte
/// budget) to check rows a concurrent commit added: a MERGE that inserts
/// conflicts with such a row only when its key is one of the source's.
pub(super) struct SourceKeys {
    converter: RowConverter,
    keys: HashSet<Box<[u8]>>,
    bytes: usize,
    limit: usize,
    complete: bool,
}

impl SourceKeys {
    /// Keep at most `limit` bytes of encoded keys.
    pub(super) fn new(plan: &BoundMerge, limit: usize) -> Result<SourceKeys> {
        Ok(SourceKeys {
            converter: plan.converter()?,
            keys: HashSet::new(),
            bytes: 0,
            limit,
            complete: true,
        })
    }

    /// Add the keys of a source chunk; past the budget the set is dropped
    /// and [`SourceKeys::complete`] turns false.
    pub(super) fn add(&mut self, plan: &BoundMerge, source: &RecordBatch) -> Result<()> {
        if !self.complete {
            return Ok(());
        }
        let rel = plan.rel.batch(None, Some(source))?;
        let (rows, valid) = plan.key_rows(&self.converter, &plan.keys_source, &rel)?;
        for (i, ok) in valid.iter().enumerate() {
            if !ok {
                continue; // a NULL key matches nothing
            }
            let key = rows.row(i);
            if self.keys.insert(key.as_ref().into()) {
                self.bytes += key.as_ref().len() + 16;
            }
            if self.bytes > self.limit {
                self.complete = false;
                self.keys = HashSet::new();
                return Ok(());
            }
        }
        Ok(())
    }

    /// Whether every source key was kept.
    pub(super) fn complete(&self) -> bool {
        self.complete
    }

    /// The first row of `target` (a target batch as the MERGE scans it)
    /// whose key is a source key, described.
    pub(super) fn first_match(
        &self,
        plan: &BoundMerge,
        target: &RecordBatch,
    ) -> Result<Option<String>> {
        let rel = plan.rel.batch(Some(target), None)?;
        let (rows, valid) = plan.key_rows(&self.converter, &plan.keys_target, &rel)?;
        Ok(valid
            .iter()
            .enumerate()
            .find(|(i, ok)| **ok && self.keys.contains(rows.row(*i).as_ref()))
            .map(|(i, _)| plan.key_text(&rel, i)))
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
pub(super) fn key_ranges(plan: &BoundMerge, chunk: &Chunk) -> Result<Vec<Expr>> {
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
