//! OPTIMIZE on a liquid-clustered table: which files to recluster
//! ([`select_files`]), and their rewrite in Hilbert-curve order over the
//! clustering columns ([`rewrite`]), as Delta Spark's clustering OPTIMIZE.
//!
//! The layout, as Delta Spark computes it (approximately; the point is
//! files whose min/max ranges on the clustering columns are tight and
//! disjoint):
//!
//! 1. each clustering column's values are cut into up to
//!    [`MAX_RANGES`] ranges of about equal row counts, from a sample
//!    ([`RangeIds`]; Delta Spark's `range_partition_id`);
//! 2. a row's range ids are the coordinates of a point on a Hilbert curve
//!    ([`hilbert_index`]; Delta Spark's `hilbert_index`), one dimension per
//!    clustering column;
//! 3. rows are written sorted by that index, files cut at the target size,
//!    so each file holds one stretch of the curve. Deleted rows (DVs) are
//!    left out: the same rewrite purges them.
//!
//! Incremental, as Delta Spark's: files an OPTIMIZE clustered by the same
//! columns form a ZCube (tags `ZCUBE_ID`, `ZCUBE_ZORDER_BY`,
//! `clusteringProvider: "liquid"`). ZCubes of at least [`MIN_CUBE_SIZE`]
//! bytes are stable and left alone; the other (partial) ZCubes are
//! reclustered together with the files no OPTIMIZE clustered yet. When
//! there is nothing but one partial ZCube without deleted rows beyond the
//! threshold, nothing is rewritten. Files clustered by other columns (the
//! clustering columns changed since) or by another provider are left alone,
//! except by `OPTIMIZE … FULL`, which reclusters them with every partial
//! ZCube (Delta Spark's `isFull`; with no such file it is a plain OPTIMIZE).
//!
//! Memory is bounded by a budget: see [`rewrite`].
//!
//! The key and curve functions are pure; [`rewrite`] reads through
//! [`crate::scan`] and writes through [`super::data`].

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch, StructArray};
use arrow_row::{OwnedRow, Row, RowConverter, Rows, SortField};
use serde::{Deserialize, Serialize};

use super::data::{DataWriter, WriterOptions};
use super::optimize::{rewritten, with_row_ids, CompactTask, Rewrite};
use crate::error::{Error, Result};
use crate::io::TableStore;
use crate::log::actions::{Add, RecordCount};
use crate::log::features::clustering::{
    file_clustering, mark_clustered, ClusteringColumn, FileClustering,
};
use crate::scan::{self, DeletedRows, ScanFile};
use crate::table::snapshot::LiveFile;

/// Ranges each clustering column is cut into at most (Delta Spark's
/// `spark.databricks.io.skipping.mdc.rangeId.max`).
pub const MAX_RANGES: usize = 1000;
/// Sampled rows the ranges are computed from, at most.
pub const SAMPLE_ROWS: usize = 100_000;
/// A ZCube at least this large is stable: OPTIMIZE leaves it alone (Delta
/// Spark's `spark.databricks.delta.optimize.clustering.minCubeSize`, 100 GiB).
pub const MIN_CUBE_SIZE: u64 = 100 << 30;
/// Bytes of decoded rows one clustering task holds at once, by default
/// (see [`rewrite`]).
pub const DEFAULT_MEMORY_BUDGET: u64 = 1 << 30;
/// Rows per batch handed to the writer.
const OUTPUT_BATCH_ROWS: usize = 64 * 1024;
/// Files read at once.
const READ_CONCURRENCY: usize = super::READ_CONCURRENCY;

/// A clustering run, as a plan and its task carry it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusteringRun {
    /// The clustering columns' logical paths.
    pub columns: Vec<Vec<String>>,
    /// The id of the ZCube the run writes (`ZCUBE_ID`).
    pub zcube_id: String,
    /// `ZCUBE_ZORDER_BY` of the new files.
    pub zorder_by: String,
    /// `OPTIMIZE … FULL` (`operationParameters.isFull`).
    #[serde(default)]
    pub full: bool,
    /// Bytes of decoded rows a task holds at once (None:
    /// [`DEFAULT_MEMORY_BUDGET`]); see [`rewrite`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_budget: Option<u64>,
}

impl ClusteringRun {
    pub fn new(
        columns: &[ClusteringColumn],
        full: bool,
        memory_budget: Option<u64>,
    ) -> ClusteringRun {
        ClusteringRun {
            memory_budget,
            columns: columns.iter().map(|c| c.logical.clone()).collect(),
            zcube_id: uuid::Uuid::new_v4().to_string(),
            zorder_by: crate::log::features::clustering::zorder_by_tag(columns),
            full,
        }
    }

    /// The columns' dot-joined names (`operationParameters.clusterBy`).
    pub fn names(&self) -> Vec<String> {
        self.columns.iter().map(|c| c.join(".")).collect()
    }
}

/// The files an OPTIMIZE reclusters (see the module docs), by path. With
/// `full` (`OPTIMIZE … FULL`), files clustered by other columns or by
/// another provider are reclustered too, together with every partial
/// ZCube; without, they are left alone (Delta Spark's `applyMinZCube`).
pub fn select_files(
    files: Vec<LiveFile>,
    columns: &[ClusteringColumn],
    max_deleted_rows_ratio: f64,
    full: bool,
) -> Vec<Add> {
    let mut unclustered = Vec::new();
    let mut other_layout = Vec::new();
    let mut cubes: BTreeMap<String, Vec<LiveFile>> = BTreeMap::new();
    for f in files {
        match file_clustering(&f.add, columns) {
            FileClustering::InZCube(id) => cubes.entry(id.to_string()).or_default().push(f),
            FileClustering::Unclustered => unclustered.push(f),
            FileClustering::OtherLayout => other_layout.push(f),
        }
    }
    let size = |fs: &[LiveFile]| -> u64 {
        fs.iter()
            .map(|f| u64::try_from(f.add.size).unwrap_or(0))
            .sum()
    };
    let partial: Vec<Vec<LiveFile>> = cubes
        .into_values()
        .filter(|fs| size(fs) < MIN_CUBE_SIZE)
        .collect();
    let relayout = full && !other_layout.is_empty();
    let settled = !relayout
        && unclustered.is_empty()
        && partial.len() <= 1
        && partial
            .iter()
            .flatten()
            .all(|f| super::optimize::deleted_ratio(f) <= max_deleted_rows_ratio);
    if settled {
        return Vec::new();
    }
    if !relayout {
        other_layout.clear();
    }
    let mut out: Vec<Add> = unclustered
        .into_iter()
        .chain(partial.into_iter().flatten())
        .chain(other_layout)
        .map(|f| f.add)
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The Hilbert index of a point with `coords.len()` dimensions of `bits`
/// bits each (John Skilling, "Programming the Hilbert curve", 2004:
/// coordinates → transposed index, then its bits interleaved). Consecutive
/// indices are neighbouring cells. `coords.len() * bits` must be ≤ 64.
pub fn hilbert_index(coords: &[u32], bits: u32) -> u64 {
    let mut x: Vec<u32> = coords.to_vec();
    if x.is_empty() || bits == 0 {
        return 0;
    }
    if let [only] = x.as_slice() {
        return u64::from(*only);
    }
    let m: u32 = 1 << (bits - 1);
    // Inverse undo of the excess work.
    let mut q = m;
    while q > 1 {
        let p = q - 1;
        if let Some((x0, rest)) = x.split_first_mut() {
            // i = 0: x0 ^ x0 is 0, so only the first branch changes anything
            if *x0 & q != 0 {
                *x0 ^= p;
            }
            for xi in rest {
                if *xi & q != 0 {
                    *x0 ^= p;
                } else {
                    let t = (*x0 ^ *xi) & p;
                    *x0 ^= t;
                    *xi ^= t;
                }
            }
        }
        q >>= 1;
    }
    // Gray encode.
    let mut prev = 0;
    for v in &mut x {
        *v ^= prev;
        prev = *v;
    }
    let last = x.last().copied().unwrap_or(0);
    let mut t = 0;
    let mut q = m;
    while q > 1 {
        if last & q != 0 {
            t ^= q - 1;
        }
        q >>= 1;
    }
    for v in &mut x {
        *v ^= t;
    }
    // Interleave: the top bit of every coordinate first.
    let mut h: u64 = 0;
    for b in (0..bits).rev() {
        for v in &x {
            h = (h << 1) | u64::from((v >> b) & 1);
        }
    }
    h
}

/// Bits that hold range ids below `ranges`.
pub fn bits_for(ranges: usize) -> u32 {
    let mut bits = 1;
    while (1usize << bits) < ranges {
        bits += 1;
    }
    bits
}

/// Range boundaries of one column: a value's range id is the number of
/// boundaries ≤ it, so ids run from 0 to `boundaries.len()`, each range
/// holding about as many sampled rows.
#[derive(Debug)]
pub struct RangeIds {
    boundaries: Vec<OwnedRow>,
}

impl RangeIds {
    /// Boundaries cutting `sample` (row-encoded values of one column) into
    /// up to `max_ranges` ranges of about equal counts.
    pub fn from_sample(mut sample: Vec<OwnedRow>, max_ranges: usize) -> RangeIds {
        sample.sort_unstable();
        sample.dedup();
        let ranges = max_ranges.min(sample.len()).max(1);
        let mut boundaries: Vec<OwnedRow> = (1..ranges)
            .filter_map(|r| sample.get(r * sample.len() / ranges).cloned())
            .collect();
        boundaries.dedup();
        RangeIds { boundaries }
    }

    /// How many ids there are.
    pub fn ranges(&self) -> usize {
        self.boundaries.len() + 1
    }

    pub fn id(&self, value: Row<'_>) -> u32 {
        let id = self.boundaries.partition_point(|b| b.row() <= value);
        u32::try_from(id).unwrap_or(u32::MAX)
    }
}

/// The Hilbert index of every row of one batch, from its clustering
/// columns' row-encoded values.
pub fn hilbert_indices(keys: &[Rows], ranges: &[RangeIds], bits: u32) -> Vec<u64> {
    let rows = keys.first().map_or(0, |k| k.num_rows());
    let mut coords = vec![0u32; keys.len()];
    (0..rows)
        .map(|i| {
            for ((c, k), r) in coords.iter_mut().zip(keys).zip(ranges) {
                *c = r.id(k.row(i));
            }
            hilbert_index(&coords, bits)
        })
        .collect()
}

/// The column at a logical path of `batch` (nested fields through structs).
fn column_at(batch: &RecordBatch, path: &[String]) -> Result<ArrayRef> {
    let missing = || {
        Error::Internal(format!(
            "clustering column {:?} is not in the rows read",
            path.join(".")
        ))
    };
    let (first, rest) = path.split_first().ok_or_else(missing)?;
    let mut column = batch.column_by_name(first).cloned().ok_or_else(missing)?;
    for part in rest {
        let inner = column
            .as_any()
            .downcast_ref::<StructArray>()
            .and_then(|s| s.column_by_name(part))
            .cloned()
            .ok_or_else(missing)?;
        column = inner;
    }
    Ok(column)
}

/// The clustering columns of `batch`, row-encoded (one `Rows` per column).
fn encode_keys(
    batch: &RecordBatch,
    columns: &[Vec<String>],
    converters: &[RowConverter],
) -> Result<Vec<Rows>> {
    columns
        .iter()
        .zip(converters)
        .map(|(path, conv)| {
            let array = column_at(batch, path)?;
            conv.convert_columns(&[array]).map_err(|e| {
                Error::Internal(format!(
                    "clustering column {:?}: encoding its values failed: {e}",
                    path.join(".")
                ))
            })
        })
        .collect()
}

/// Rewrite the task's files (DVs applied) sorted by the Hilbert index of
/// their clustering columns into new files of the task's target size,
/// marked as ZCube `run.zcube_id`; their add actions (`dataChange=false`).
/// On a failure the files written so far are removed.
///
/// Memory is bounded: rows are read (a few files at once) into a group until
/// the group's decoded batches reach the run's memory budget
/// ([`ClusteringRun::memory_budget`], default [`DEFAULT_MEMORY_BUDGET`]);
/// the group is then clustered and written (`write_group`) and dropped
/// before more is read. What one task holds at once is the group (at most
/// the budget plus one batch), the clustering keys, 24 bytes a row for
/// Hilbert indices and order, `READ_CONCURRENCY` files' read-ahead
/// ([`crate::scan::READ_AHEAD_BYTES`] each) and the writer's open row group.
/// Each group is clustered over its own ranges, as Delta Spark clusters each
/// bin apart; all groups of a run form one ZCube.
pub async fn rewrite(
    task: &CompactTask,
    run: &ClusteringRun,
    store: &TableStore,
) -> Result<Vec<Add>> {
    use futures::{StreamExt, TryStreamExt};

    let Rewrite {
        layout,
        spec,
        tracking,
    } = task.rewrite_plan()?;
    let budget = usize::try_from(run.memory_budget.unwrap_or(DEFAULT_MEMORY_BUDGET))
        .unwrap_or(usize::MAX)
        .max(1);
    let options = WriterOptions {
        target_file_size: usize::try_from(task.target_size).unwrap_or(usize::MAX),
        max_rows_per_file: rows_per_file(task),
        ..Default::default()
    };
    let mut writer = DataWriter::try_new(store.clone(), layout, options)?;
    let written = async {
        // Every file's live rows, batches of a few files at once in the order
        // they come (a group is sorted before it is written).
        let mut batches = futures::stream::iter(task.bin.files.clone())
            .map(|add| {
                let file = ScanFile::of_add(&add);
                let add = Arc::new(add);
                scan::read_ahead(store.clone(), spec.clone(), file, DeletedRows::Load)
                    .map_ok(move |b| (add.clone(), b))
            })
            .flatten_unordered(READ_CONCURRENCY);
        let mut adds = Vec::new();
        let mut group: Vec<RecordBatch> = Vec::new();
        let mut held = 0usize;
        while let Some((add, batch)) = batches.try_next().await? {
            if batch.num_rows() == 0 {
                continue;
            }
            let batch = with_row_ids(batch, &add, &tracking)?;
            held += batch.get_array_memory_size();
            group.push(batch);
            if held >= budget {
                adds.extend(write_group(std::mem::take(&mut group), run, &mut writer).await?);
                held = 0;
            }
        }
        adds.extend(write_group(group, run, &mut writer).await?);
        Ok::<_, Error>(adds)
    }
    .await;
    rewritten(store, writer.started_files(), written, |a| {
        mark_clustered(a, &run.zcube_id, &run.zorder_by)
    })
    .await
}

/// Rows per new file: as Delta Spark, the number of files from the input's
/// bytes (the encoded size is only known at row-group ends), the rows from
/// the files' stats (`numRecords` less deleted rows); `None` (cut by size
/// only) when a file has no stats.
fn rows_per_file(task: &CompactTask) -> Option<usize> {
    let mut bytes = 0u64;
    let mut rows = 0u64;
    for add in &task.bin.files {
        bytes += u64::try_from(add.size).unwrap_or(0);
        let records = RecordCount::parse(add.stats.as_deref()?, &add.path)
            .ok()?
            .num_records?;
        let deleted = add.deletion_vector.as_ref().map_or(0, |d| d.cardinality());
        rows += u64::try_from(records).unwrap_or(0).saturating_sub(deleted);
    }
    let files = bytes.div_ceil(task.target_size.max(1)).max(1);
    usize::try_from(rows.div_ceil(files).max(1)).ok()
}

/// Cluster one group of rows: sort them by the Hilbert index of their
/// clustering columns (ranges from the group's own sample) and write them,
/// closing the writer's files at the end; their add actions.
async fn write_group(
    batches: Vec<RecordBatch>,
    run: &ClusteringRun,
    writer: &mut DataWriter,
) -> Result<Vec<Add>> {
    let Some(first) = batches.first() else {
        return Ok(Vec::new());
    };
    // 1. Row-encoded clustering keys, per batch in parallel.
    let fields: Vec<SortField> = run
        .columns
        .iter()
        .map(|path| column_at(first, path).map(|c| SortField::new(c.data_type().clone())))
        .collect::<Result<_>>()?;
    let converters = Arc::new(
        fields
            .iter()
            .map(|f| RowConverter::new(vec![f.clone()]))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| {
                Error::Unsupported(format!(
                    "clustering by {:?}: the columns' values cannot be ordered: {e}",
                    run.names()
                ))
            })?,
    );
    let columns = Arc::new(run.columns.clone());
    let keys: Vec<Vec<Rows>> = futures::future::try_join_all(batches.iter().cloned().map(|b| {
        let converters = converters.clone();
        let columns = columns.clone();
        crate::io::spawn_blocking(move || encode_keys(&b, &columns, &converters))
    }))
    .await?
    .into_iter()
    .collect::<Result<_>>()?;
    // 2. Ranges from a sample of every column.
    let total: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let stride = (total / SAMPLE_ROWS).max(1);
    let ranges: Vec<RangeIds> = (0..run.columns.len())
        .map(|c| {
            let sample: Vec<OwnedRow> = keys
                .iter()
                .filter_map(|k| k.get(c))
                .flat_map(|rows| {
                    (0..rows.num_rows())
                        .step_by(stride)
                        .map(move |i| rows.row(i).owned())
                })
                .collect();
            RangeIds::from_sample(sample, MAX_RANGES)
        })
        .collect();
    let bits = ranges
        .iter()
        .map(|r| bits_for(r.ranges()))
        .max()
        .unwrap_or(1);
    if bits as usize * ranges.len() > 64 {
        return Err(Error::Internal(format!(
            "{} clustering columns of {bits} bits do not fit a 64-bit Hilbert index",
            ranges.len()
        )));
    }
    // 3. Hilbert indices, per batch in parallel; then the rows' order.
    let ranges = Arc::new(ranges);
    let indices: Vec<Vec<u64>> = futures::future::try_join_all(keys.into_iter().map(|k| {
        let ranges = ranges.clone();
        crate::io::spawn_blocking(move || hilbert_indices(&k, &ranges, bits))
    }))
    .await?;
    let order: Vec<(usize, usize)> = crate::io::spawn_blocking(move || {
        let mut all: Vec<(u64, u32, u32)> = Vec::with_capacity(total);
        for (b, hs) in indices.iter().enumerate() {
            let b = u32::try_from(b).unwrap_or(u32::MAX);
            for (r, h) in hs.iter().enumerate() {
                all.push((*h, b, u32::try_from(r).unwrap_or(u32::MAX)));
            }
        }
        all.sort_unstable();
        all.into_iter()
            .map(|(_, b, r)| (b as usize, r as usize))
            .collect()
    })
    .await?;
    // 4. The rows in that order, cut into files by the writer.
    let schema = first.schema();
    for chunk in order.chunks(OUTPUT_BATCH_ROWS) {
        let columns: Vec<ArrayRef> = (0..schema.fields().len())
            .map(|c| {
                let arrays: Vec<&dyn Array> =
                    batches.iter().map(|b| b.column(c).as_ref()).collect();
                arrow_select::interleave::interleave(&arrays, chunk)
            })
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| Error::Internal(format!("clustering: reordering rows: {e}")))?;
        let batch = RecordBatch::try_new(schema.clone(), columns)
            .map_err(|e| Error::Internal(format!("clustering: reordering rows: {e}")))?;
        writer.write(&batch).await?;
    }
    writer.finish().await
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use arrow_array::Int64Array;

    use super::*;

    #[test]
    fn hilbert_is_a_bijection_of_neighbouring_steps() {
        for (dims, bits) in [(2usize, 3u32), (3, 2), (2, 5), (4, 2)] {
            let side = 1u32 << bits;
            let cells = (side as usize).pow(dims as u32);
            let mut by_index = vec![None; cells];
            let mut point = vec![0u32; dims];
            for cell in 0..cells {
                let mut c = cell;
                for p in point.iter_mut() {
                    *p = (c % side as usize) as u32;
                    c /= side as usize;
                }
                let h = hilbert_index(&point, bits) as usize;
                assert!(h < cells, "index {h} out of range for {point:?}");
                assert!(by_index[h].is_none(), "index {h} given twice");
                by_index[h] = Some(point.clone());
            }
            // consecutive indices: cells one step apart on one axis
            for w in by_index.windows(2) {
                let (a, b) = (w[0].as_ref().unwrap(), w[1].as_ref().unwrap());
                let dist: u32 = a.iter().zip(b).map(|(x, y)| x.abs_diff(*y)).sum();
                assert_eq!(dist, 1, "{a:?} -> {b:?} ({dims}d, {bits} bits)");
            }
        }
        assert_eq!(hilbert_index(&[5], 3), 5);
        assert_eq!(hilbert_index(&[0, 0], 4), 0);
    }

    fn live(path: &str, cube: Option<(&str, &str)>, provider: Option<&str>) -> LiveFile {
        let mut add: Add =
            serde_json::from_value(serde_json::json!({"path": path, "size": 10})).unwrap();
        if let Some((id, by)) = cube {
            mark_clustered(&mut add, id, by);
        }
        add.clustering_provider = provider.map(str::to_string);
        LiveFile {
            path: path.to_string(),
            add,
            num_records: Some(10),
            tight_bounds: None,
        }
    }

    #[test]
    fn full_also_reclusters_files_of_other_layouts() {
        let columns = vec![ClusteringColumn {
            logical: vec!["g".into()],
            physical: vec!["g".into()],
        }];
        let paths = |files: Vec<Add>| files.into_iter().map(|a| a.path).collect::<Vec<_>>();
        let by_g = Some(("z2", r#"["g"]"#));
        let table = vec![
            live("a", Some(("z1", r#"["k"]"#)), Some("liquid")), // clustered by k before
            live("b", by_g, Some("liquid")),
            live("c", by_g, Some("liquid")),
            live("d", None, Some("other")), // another provider
        ];
        // plain: one partial ZCube by g, the rest left alone: nothing to do
        assert!(select_files(table.clone(), &columns, 0.05, false).is_empty());
        // FULL: the other layouts and the partial ZCube
        assert_eq!(
            paths(select_files(table.clone(), &columns, 0.05, true)),
            ["a", "b", "c", "d"]
        );
        // an unclustered file: plain takes it with the partial ZCube, not "a"/"d"
        let mut more = table.clone();
        more.push(live("e", None, None));
        assert_eq!(
            paths(select_files(more.clone(), &columns, 0.05, false)),
            ["b", "c", "e"]
        );
        // FULL once every file is clustered by g: a plain OPTIMIZE
        let settled = vec![table[1].clone(), table[2].clone()];
        assert!(select_files(settled, &columns, 0.05, true).is_empty());
    }

    fn encode(values: &[i64]) -> Rows {
        let conv = RowConverter::new(vec![SortField::new(arrow_schema::DataType::Int64)]).unwrap();
        let array: ArrayRef = Arc::new(Int64Array::from(values.to_vec()));
        conv.convert_columns(&[array]).unwrap()
    }

    #[test]
    fn ranges_cut_a_sample_into_equal_counts() {
        let values: Vec<i64> = (0..1000).rev().collect();
        let rows = encode(&values);
        let sample: Vec<OwnedRow> = (0..rows.num_rows()).map(|i| rows.row(i).owned()).collect();
        let ranges = RangeIds::from_sample(sample, 10);
        assert_eq!(ranges.ranges(), 10);
        let probe = encode(&[-5, 0, 99, 100, 555, 999, 5000]);
        let ids: Vec<u32> = (0..probe.num_rows())
            .map(|i| ranges.id(probe.row(i)))
            .collect();
        assert_eq!(ids, vec![0, 0, 0, 1, 5, 9, 9]);
        // few distinct values: one range each
        let rows = encode(&[7, 7, 7, 3, 3]);
        let sample = (0..rows.num_rows()).map(|i| rows.row(i).owned()).collect();
        let ranges = RangeIds::from_sample(sample, 1000);
        assert_eq!(ranges.ranges(), 2);
        let probe = encode(&[3, 7]);
        assert_eq!((ranges.id(probe.row(0)), ranges.id(probe.row(1))), (0, 1));
        assert_eq!(RangeIds::from_sample(Vec::new(), 1000).ranges(), 1);
        assert_eq!((bits_for(1), bits_for(2), bits_for(1000)), (1, 1, 10));
    }

    #[test]
    fn hilbert_order_makes_tight_disjoint_chunks() {
        // 64x64 grid of (x, y) rows in row-major order: sorted by the
        // Hilbert index and cut into 16 chunks, each chunk spans a small box
        let xs: Vec<i64> = (0..4096).map(|i| i % 64).collect();
        let ys: Vec<i64> = (0..4096).map(|i| i / 64).collect();
        let keys = vec![encode(&xs), encode(&ys)];
        let sample = |k: &Rows| (0..k.num_rows()).map(|i| k.row(i).owned()).collect();
        let ranges = vec![
            RangeIds::from_sample(sample(&keys[0]), 1000),
            RangeIds::from_sample(sample(&keys[1]), 1000),
        ];
        let bits = bits_for(ranges[0].ranges());
        let h = hilbert_indices(&keys, &ranges, bits);
        assert_eq!(h.iter().collect::<HashSet<_>>().len(), 4096);
        let mut order: Vec<usize> = (0..4096).collect();
        order.sort_by_key(|i| h[*i]);
        for chunk in order.chunks(256) {
            let span = |v: &[i64]| {
                let vals: Vec<i64> = chunk.iter().map(|i| v[*i]).collect();
                vals.iter().max().unwrap() - vals.iter().min().unwrap()
            };
            // a 16x16 box, where row-major chunks would span 64 x 4
            assert!(
                span(&xs) < 16 && span(&ys) < 16,
                "{} {}",
                span(&xs),
                span(&ys)
            );
        }
    }
}
