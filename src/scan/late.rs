//! Late materialisation of an exact filter: the parquet reader decodes the
//! filter's columns first, the filter (and the keep-mask of the deletion
//! vector's short runs) picks the rows, and the output columns are decoded
//! at those rows only: skipped values are not materialised, copied and
//! filtered again, and pages without a kept row are not decompressed where
//! the offset index is loaded. The filter sees its columns as the scan
//! returns them (logical names and types, partition values filled in).
//!
//! It applies when the output needs no physical row index (`_row_index`,
//! computed `_row_id`) and both the filter and the output read at least one
//! column of the file; otherwise the scan decodes everything and filters
//! the decoded batches.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use arrow_array::BooleanArray;
use arrow_schema::{ArrowError, SchemaRef};
use parquet::arrow::arrow_reader::{ArrowPredicateFn, ArrowReaderMetadata, RowFilter};
use parquet::arrow::ProjectionMask;
use roaring::RoaringTreemap;

use super::selection::{self, KeptRows};
use super::{sources_for, BatchShape, ScanFile, ScanSpec, Source};
use crate::error::{Error, Result};
use crate::expr::Predicate;

/// Decoded filter columns the reader keeps, per row group, for the output
/// where it returns them too (beyond it, they are decoded again at the kept
/// rows): a bound on a piece's memory, whatever the row group's size (the
/// reader's default is 100 MB).
pub(super) const PREDICATE_CACHE_BYTES: usize = 4 << 20;

/// An exact filter evaluated while a file is decoded.
pub(super) struct LateFilter {
    predicate: Arc<Predicate>,
    /// The file's root columns the filter reads.
    mask: ProjectionMask,
    /// Its columns as the filter sees them: logical names and types.
    schema: SchemaRef,
    sources: Vec<Source>,
    spec: Arc<ScanSpec>,
}

/// The error the filter met while the reader decoded, kept whole: the reader
/// hands on only its own error type.
#[derive(Clone, Default)]
pub(super) struct Failure(Arc<Mutex<Option<Error>>>);

impl Failure {
    fn set(&self, e: Error) {
        if let Ok(mut slot) = self.0.lock() {
            slot.get_or_insert(e);
        }
    }

    /// The filter's error, if it failed.
    pub(super) fn take(&self) -> Option<Error> {
        self.0.lock().ok().and_then(|mut slot| slot.take())
    }
}

impl LateFilter {
    /// The late filter of `predicate` for a scan of `spec` returning columns
    /// from `sources` (the file's `roots`), over a file of `meta`; None
    /// where it does not apply (see the module docs).
    pub(super) fn of(
        predicate: &Arc<Predicate>,
        spec: &ScanSpec,
        sources: &[Source],
        roots: &[usize],
        meta: &ArrowReaderMetadata,
    ) -> Result<Option<LateFilter>> {
        let needs_index = sources
            .iter()
            .any(|s| matches!(s, Source::RowIndex | Source::RowId(_)));
        if needs_index || roots.is_empty() {
            return Ok(None);
        }
        let mut columns: Vec<String> = Vec::new();
        for c in predicate.columns() {
            let Some(root) = c.logical.first() else {
                return Ok(None);
            };
            if spec.schema.field(root).is_none() {
                return Ok(None);
            }
            if !columns.contains(root) {
                columns.push(root.clone());
            }
        }
        let filter_spec = ScanSpec {
            columns: Some(columns),
            with_metadata_columns: false,
            filter: None,
            filter_rows: false,
            row_tracking: None,
            ..spec.clone()
        };
        let schema = filter_spec.output_schema()?;
        let (sources, filter_roots) = sources_for(&filter_spec, &schema, meta.schema())?;
        if filter_roots.is_empty() {
            // only partition values or columns the file lacks: nothing to
            // decode first
            return Ok(None);
        }
        Ok(Some(LateFilter {
            predicate: predicate.clone(),
            mask: ProjectionMask::roots(meta.parquet_schema(), filter_roots),
            schema,
            sources,
            spec: Arc::new(filter_spec),
        }))
    }

    /// The reader's row filter for a read of `file` whose rows are `kept`
    /// (physical runs, in order) of which `deleted` holds those to drop;
    /// an error of the filter's own lands in `failure`.
    pub(super) fn row_filter(
        &self,
        file: Arc<ScanFile>,
        mut kept: KeptRows,
        deleted: Option<Arc<RoaringTreemap>>,
        failure: Failure,
    ) -> RowFilter {
        let predicate = self.predicate.clone();
        let mut shape = BatchShape {
            out_schema: self.schema.clone(),
            sources: self.sources.clone(),
            spec: self.spec.clone(),
            file,
            kept: KeptRows::new(Vec::new()),
            deleted: None,
            path_column: None,
        };
        let evaluate = ArrowPredicateFn::new(self.mask.clone(), move |batch| {
            let runs = kept.take_runs(batch.num_rows());
            let matched = shape
                .apply(batch)
                .and_then(|b| predicate.evaluate(&b))
                .and_then(|m| match &deleted {
                    Some(deleted) => keep_only(m, &runs, deleted),
                    None => Ok(m),
                });
            matched.map_err(|e| {
                let text = e.to_string();
                failure.set(e);
                ArrowError::ExternalError(text.into())
            })
        });
        RowFilter::new(vec![Box::new(evaluate)])
    }

    /// Per row group of `meta` (empty for those not in `row_groups`), the
    /// byte ranges of the column chunks the filter and the output (`output`)
    /// read.
    pub(super) fn chunk_ranges(
        &self,
        meta: &ArrowReaderMetadata,
        output: &ProjectionMask,
        row_groups: &[usize],
    ) -> Vec<Vec<Range<u64>>> {
        let mut wanted = output.clone();
        wanted.union(&self.mask);
        let groups = meta.metadata().row_groups();
        let mut out = vec![Vec::new(); groups.len()];
        for &g in row_groups {
            let (Some(group), Some(slot)) = (groups.get(g), out.get_mut(g)) else {
                continue;
            };
            *slot = (0..group.num_columns())
                .filter(|&leaf| wanted.leaf_included(leaf))
                .map(|leaf| {
                    let (start, len) = group.column(leaf).byte_range();
                    start..start.saturating_add(len)
                })
                .collect();
        }
        out
    }
}

/// `matched`, false also at the rows of `runs` that `deleted` holds.
fn keep_only(
    matched: BooleanArray,
    runs: &[(u64, u64)],
    deleted: &RoaringTreemap,
) -> Result<BooleanArray> {
    let (keep, dropped) = selection::keep_mask(runs, deleted);
    if dropped == 0 {
        return Ok(matched);
    }
    arrow_arith::boolean::and(&matched, &BooleanArray::new(keep, None))
        .map_err(|e| Error::Internal(format!("masking deleted rows: {e}")))
}
