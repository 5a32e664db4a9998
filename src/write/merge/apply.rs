//! Applying a bound MERGE to rows: which clause acts on each pair or row
//! (the first of its group whose condition holds), the duplicate-match
//! check, and the change batches (new values, the old row's file and index,
//! `_change`) that the change writer consumes. [`process_file`] runs one
//! target file through it.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{
    new_null_array, Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray,
    UInt32Array,
};
use arrow_schema::{DataType as ArrowType, Field, Fields, Schema, SchemaRef};
use futures::TryStreamExt;
use roaring::RoaringTreemap;

use super::bound::{BoundMerge, Clause};
use super::join::Chunk;
use super::plan::{duplicate_match_error, ClauseAction, ClauseCounts};
use super::{arrow_error, invalid};
use crate::error::{Error, Result};
use crate::expr::value::true_only;
use crate::scan::{self, ScanFile, ScanSpec, FILE_PATH_COLUMN, ROW_ID_COLUMN, ROW_INDEX_COLUMN};
use crate::write::changes::{assign_values, CHANGE_COLUMN};

/// The change stream's schema: the table's columns, nullable (a deleted
/// row's values are not read; NOT NULL is checked on rows written), then the
/// row's origin and its change.
pub(super) fn change_schema(table: &Fields) -> SchemaRef {
    let mut fields: Vec<Field> = table
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    fields.push(Field::new(FILE_PATH_COLUMN, ArrowType::Utf8, true));
    fields.push(Field::new(ROW_INDEX_COLUMN, ArrowType::Int64, true));
    fields.push(Field::new(CHANGE_COLUMN, ArrowType::Utf8, false));
    Arc::new(Schema::new(fields))
}

pub(super) fn take(batch: &RecordBatch, idx: &[u32]) -> Result<RecordBatch> {
    let idx = UInt32Array::from(idx.to_vec());
    arrow_select::take::take_record_batch(batch, &idx).map_err(arrow_error)
}

pub(super) fn filter(batch: &RecordBatch, mask: &BooleanArray) -> Result<RecordBatch> {
    arrow_select::filter::filter_record_batch(batch, mask).map_err(arrow_error)
}

/// What one pass over a target file found and produced.
pub(super) struct FileOutcome {
    pub(super) path: String,
    pub(super) changes: Vec<RecordBatch>,
    pub(super) matched_sources: Vec<u32>,
    /// Target rows (indexes) a source row matched.
    pub(super) matched_targets: RoaringTreemap,
    /// Target rows a matched clause changed.
    pub(super) acted: RoaringTreemap,
    pub(super) counts: ClauseCounts,
}

/// How a pass treats target rows no source row matched.
#[derive(Clone)]
pub(super) enum Pass {
    /// Join with the chunk; `by_source`: apply NOT MATCHED BY SOURCE
    /// clauses to the rows no row of the chunk matched (the whole source).
    Join { by_source: bool },
    /// After all chunks: NOT MATCHED BY SOURCE on rows outside `matched`.
    BySource {
        matched: Arc<HashMap<String, RoaringTreemap>>,
    },
}

impl BoundMerge {
    /// Carry each target row's id ([`ROW_ID_COLUMN`], read by the target
    /// scan) in the change batches, after its index: the writer keeps the
    /// ids of updated rows without reading them again.
    pub(super) fn carry_row_ids(&mut self) {
        let mut fields: Vec<Field> = self
            .out_schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        let at = fields.len().saturating_sub(1); // before `_change`
        fields.insert(at, Field::new(ROW_ID_COLUMN, ArrowType::Int64, true));
        self.out_schema = Arc::new(Schema::new(fields));
    }

    fn carries_row_ids(&self) -> bool {
        self.out_schema.index_of(ROW_ID_COLUMN).is_ok()
    }

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
    pub(super) fn apply(
        &self,
        clauses: &[Clause],
        base: Option<&RecordBatch>,
        eval: &RecordBatch,
        counts: &mut ClauseCounts,
    ) -> Result<Vec<RecordBatch>> {
        let (masks, _) = self.clause_masks(clauses, eval)?;
        self.apply_masks(clauses, &masks, base, eval, counts)
    }

    /// [`BoundMerge::apply`] with the clauses' masks known.
    fn apply_masks(
        &self,
        clauses: &[Clause],
        masks: &[BooleanArray],
        base: Option<&RecordBatch>,
        eval: &RecordBatch,
        counts: &mut ClauseCounts,
    ) -> Result<Vec<RecordBatch>> {
        let mut out = Vec::new();
        for (c, m) in clauses.iter().zip(masks) {
            let k = m.true_count();
            if k == 0 {
                continue;
            }
            let rows = filter(eval, m)?;
            let base = base.map(|b| filter(b, m)).transpose()?;
            counts.add(c.index, k as u64);
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
        let row_ids = match base.and_then(|b| b.column_by_name(ROW_ID_COLUMN)) {
            Some(ids) => ids.clone(),
            None => new_null_array(&ArrowType::Int64, n),
        };
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
        let change = c.action.change();
        if c.action != ClauseAction::Delete {
            assign_values(&mut columns, &self.table_fields, rows, &c.set, "MERGE")?;
            if !self.values.is_empty() {
                let assigned: Vec<usize> = c.set.iter().map(|(i, _, _)| *i).collect();
                let insert = c.action.change() == "insert";
                self.values.fill(&mut columns, n, &assigned, insert)?;
            }
            for (i, (f, col)) in self.table_fields.iter().zip(&columns).enumerate() {
                let nulls = col.logical_null_count();
                // Identity values of inserted rows are the writer's to fill.
                let identity = self.values.is_identity(i);
                if !f.is_nullable() && nulls > 0 && !identity {
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
        if self.carries_row_ids() {
            columns.push(row_ids);
        }
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
                return Err(duplicate_match_error(Some(&format!(
                    "{}; row {row} of {}",
                    self.key_text(j, i),
                    out.path
                ))));
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

pub(super) async fn process_file(
    plan: Arc<BoundMerge>,
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
        counts: ClauseCounts::new(plan.clause_count()),
    };
    while let Some(batch) = batches.try_next().await? {
        plan.process_batch(chunk.as_deref(), &pass, &batch, &mut out)?;
    }
    Ok(out)
}
