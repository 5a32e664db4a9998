//! From a deletion vector to a parquet row selection and a keep-mask, pure.
//!
//! ```text
//! row groups     | rg0: rows 0..100 | rg1: rows 100..250 | rg2: rows 250..300 |
//! chosen         |        yes       |        no          |        yes         |
//! DV             {3, 120, 260, 261}
//! selection      select 3, skip 1, select 96,  (rg1 not read)  select 10, skip 2, select 38
//! kept rows      0..3, 4..100, 250..260, 262..300      <- physical indexes, from row-group sizes
//! ```
//!
//! That is the exact plan (`min_skip` 1). A scan asks for a coarse one:
//! only runs of at least `min_skip` deleted rows become skips (parquet then
//! skips their pages, or their values without decoding them); shorter runs stay
//! in the selection, and each decoded batch drops them with a keep-mask built
//! straight from the bitmap ([`keep_mask`]): one mask and one filter per batch
//! for all columns, instead of a row selection with one selector per deleted
//! row (which cost parquet ~20% of a scan at 10% random deletes just to build
//! and walk).

use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use roaring::RoaringTreemap;

use crate::error::{Error, Result};

/// The selection for a file and the physical row ranges it reads, in order.
#[derive(Debug, Clone)]
pub struct SelectionPlan {
    /// The chosen row groups that keep at least one row (ascending): a row
    /// group the DV empties is neither fetched nor decoded.
    pub row_groups: Vec<usize>,
    /// The rows to read within `row_groups`.
    pub selection: RowSelection,
    /// Physical rows the selection reads as (start, len) runs, in output order.
    pub kept: Vec<(u64, u64)>,
    /// Deleted rows inside `kept` (runs shorter than `min_skip`), left for the
    /// keep-mask: 0 for an exact plan.
    pub masked: u64,
}

impl SelectionPlan {
    /// Physical index of every kept row, in output order.
    pub fn kept_rows(&self) -> impl Iterator<Item = u64> + '_ {
        self.kept
            .iter()
            .flat_map(|&(start, len)| start..start + len)
    }

    /// Number of rows the selection reads (the rows kept, for an exact plan).
    pub fn kept_count(&self) -> u64 {
        self.kept.iter().map(|(_, len)| len).sum()
    }

    /// Whether the selection reads every row of `row_groups`: then the reader
    /// needs no selection at all.
    pub fn reads_whole_row_groups(&self) -> bool {
        self.selection.iter().all(|s| !s.skip)
    }

    /// The longest run of rows the selection skips inside the row groups read.
    pub fn longest_skip(&self) -> usize {
        self.selection
            .iter()
            .filter(|s| s.skip)
            .map(|s| s.row_count)
            .max()
            .unwrap_or(0)
    }
}

impl SelectionPlan {
    /// This plan cut into consecutive pieces of `sizes[i]` of its row groups
    /// each (in order; `sizes` sums to `row_groups.len()`), so the pieces can
    /// be read apart (on several threads): each is the plan [`plan`] makes for
    /// its row groups alone. Row indexes stay physical (file-global): a
    /// piece's kept runs are cut at its row groups' bounds, found from
    /// `row_group_rows`. `deleted` is the DV the plan was made with (each
    /// piece's [`SelectionPlan::masked`] is counted from it).
    pub fn split(
        mut self,
        row_group_rows: &[u64],
        sizes: &[usize],
        deleted: Option<&RoaringTreemap>,
        file: &str,
    ) -> Result<Vec<SelectionPlan>> {
        let total: usize = sizes.iter().sum();
        if total != self.row_groups.len() {
            return Err(Error::Internal(format!(
                "{file}: a plan of {} row groups cut into pieces of {total}",
                self.row_groups.len()
            )));
        }
        let mut starts = Vec::with_capacity(row_group_rows.len());
        let mut acc = 0u64;
        for rows in row_group_rows {
            starts.push(acc);
            acc += rows;
        }
        let bounds = |rg: usize| -> Result<(u64, u64)> {
            match (starts.get(rg), row_group_rows.get(rg)) {
                (Some(&s), Some(&n)) => Ok((s, n)),
                _ => Err(Error::InvalidArgument(format!(
                    "{file}: row group {rg} does not exist (the file has {})",
                    row_group_rows.len()
                ))),
            }
        };
        let mut runs: std::collections::VecDeque<(u64, u64)> = self.kept.into();
        let mut groups = self.row_groups.into_iter();
        let mut pieces = Vec::with_capacity(sizes.len());
        for &size in sizes {
            let row_groups: Vec<usize> = groups.by_ref().take(size).collect();
            let mut rows = 0u64;
            let mut end = 0u64;
            for &rg in &row_groups {
                let (start, n) = bounds(rg)?;
                rows += n;
                end = start + n;
            }
            let selection = self
                .selection
                .split_off(usize::try_from(rows).unwrap_or(usize::MAX));
            // The kept runs below `end` (the last one cut there): runs of
            // row groups read one after another are merged in the plan.
            let mut kept = Vec::new();
            while let Some((start, len)) = runs.front_mut() {
                if *start >= end {
                    break;
                }
                if *start + *len <= end {
                    kept.push((*start, *len));
                    runs.pop_front();
                } else {
                    let head = end - *start;
                    kept.push((*start, head));
                    *start = end;
                    *len -= head;
                    break;
                }
            }
            let masked = match deleted.filter(|_| self.masked > 0) {
                Some(d) => kept
                    .iter()
                    .map(|&(s, l)| d.range_cardinality(s..s + l))
                    .sum(),
                None => 0,
            };
            pieces.push(SelectionPlan {
                row_groups,
                selection,
                kept,
                masked,
            });
        }
        Ok(pieces)
    }
}

/// Physical indexes of a plan's kept rows, handed out batch by batch.
#[derive(Debug, Clone, Default)]
pub struct KeptRows {
    runs: std::collections::VecDeque<(u64, u64)>,
}

impl KeptRows {
    pub fn new(runs: Vec<(u64, u64)>) -> Self {
        KeptRows { runs: runs.into() }
    }

    /// The next `n` kept rows as (start, len) runs of physical indexes.
    pub fn take_runs(&mut self, n: usize) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut left = n as u64;
        while left > 0 {
            let Some((start, len)) = self.runs.front_mut() else {
                break;
            };
            let step = (*len).min(left);
            out.push((*start, step));
            *start += step;
            *len -= step;
            left -= step;
            if *len == 0 {
                self.runs.pop_front();
            }
        }
        out
    }
}

/// The keep-mask of a batch whose rows are the physical `runs` (in order):
/// false at each row `deleted` holds, true elsewhere; and how many are false.
/// Costs one seek into the bitmap per run plus one step per deleted row.
pub fn keep_mask(
    runs: &[(u64, u64)],
    deleted: &RoaringTreemap,
) -> (arrow_buffer::BooleanBuffer, usize) {
    let n: u64 = runs.iter().map(|(_, len)| len).sum();
    let mut mask = arrow_buffer::BooleanBufferBuilder::new(n as usize);
    mask.append_n(n as usize, true);
    let mut dropped = 0;
    let mut offset = 0u64;
    for &(start, len) in runs {
        let end = start + len;
        let mut rows = deleted.iter();
        rows.advance_to(start);
        for row in rows.take_while(|r| *r < end) {
            mask.set_bit((offset + row - start) as usize, false);
            dropped += 1;
        }
        offset += len;
    }
    (mask.finish(), dropped)
}

/// Plan reading row groups `chosen` (ascending; sorted here) of a file whose
/// row groups hold `row_group_rows` rows, skipping each run of at least
/// `min_skip` consecutive rows in `deleted` (`min_skip` 1: every deleted row,
/// an exact plan; shorter runs are counted in [`SelectionPlan::masked`]).
/// A DV naming a row past the end of the file is a corrupt table.
pub fn plan(
    row_group_rows: &[u64],
    chosen: &[usize],
    deleted: Option<&RoaringTreemap>,
    min_skip: u64,
    file: &str,
) -> Result<SelectionPlan> {
    let min_skip = min_skip.max(1);
    let total: u64 = row_group_rows.iter().sum();
    if let Some(max) = deleted.and_then(RoaringTreemap::max) {
        if max >= total {
            return Err(Error::CorruptLog {
                file: file.to_string(),
                detail: format!(
                    "its deletion vector deletes row {max}, but the file has only {total} rows"
                ),
            });
        }
    }
    let mut starts = Vec::with_capacity(row_group_rows.len());
    let mut acc = 0u64;
    for rows in row_group_rows {
        starts.push(acc);
        acc += rows;
    }
    let mut chosen: Vec<usize> = chosen.to_vec();
    chosen.sort_unstable();
    chosen.dedup();

    let mut selectors: Vec<RowSelector> = Vec::new();
    let mut kept: Vec<(u64, u64)> = Vec::new();
    let mut push = |select: bool, start: u64, len: u64, kept: &mut Vec<(u64, u64)>| {
        if len == 0 {
            return;
        }
        selectors.push(if select {
            RowSelector::select(len as usize)
        } else {
            RowSelector::skip(len as usize)
        });
        if select {
            match kept.last_mut() {
                Some((s, l)) if *s + *l == start => *l += len,
                _ => kept.push((start, len)),
            }
        }
    };
    // One pass over the deleted rows for the whole file (row groups ascending).
    let mut deleted_rows = deleted.map(|d| d.iter().peekable());
    let mut read_groups = Vec::with_capacity(chosen.len());
    let mut masked = 0u64;
    for rg in chosen {
        let (Some(&start), Some(&rows)) = (starts.get(rg), row_group_rows.get(rg)) else {
            return Err(Error::InvalidArgument(format!(
                "{file}: row group {rg} does not exist (the file has {})",
                row_group_rows.len()
            )));
        };
        let end = start + rows;
        if rows == 0 {
            continue;
        }
        let in_group = deleted.map_or(0, |d| d.range_cardinality(start..end));
        if in_group == rows {
            // The DV deletes the whole row group: skip it entirely.
            if let Some(it) = deleted_rows.as_mut() {
                while it.next_if(|r| *r < end).is_some() {}
            }
            continue;
        }
        read_groups.push(rg);
        let mut cursor = start;
        if in_group > 0 {
            if in_group < min_skip {
                // No run can be long enough: all left to the mask.
                masked += in_group;
            } else if let Some(it) = deleted_rows.as_mut() {
                // Deleted rows of row groups not read.
                while it.next_if(|r| *r < start).is_some() {}
                while let Some(first) = it.next_if(|r| *r < end) {
                    let mut last = first;
                    while let Some(row) = it.next_if(|r| *r == last + 1 && *r < end) {
                        last = row;
                    }
                    let run = last - first + 1;
                    if run >= min_skip {
                        push(true, cursor, first - cursor, &mut kept);
                        push(false, first, run, &mut kept);
                        cursor = last + 1;
                    } else {
                        masked += run;
                    }
                }
            }
        }
        push(true, cursor, end - cursor, &mut kept);
    }
    Ok(SelectionPlan {
        row_groups: read_groups,
        selection: RowSelection::from(selectors),
        kept,
        masked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagram_example() {
        let dv: RoaringTreemap = [3u64, 120, 260, 261].into_iter().collect();
        let p = plan(&[100, 150, 50], &[2, 0], Some(&dv), 1, "f").unwrap();
        assert_eq!(p.kept, vec![(0, 3), (4, 96), (250, 10), (262, 38)]);
        assert_eq!(p.kept_count(), 3 + 96 + 10 + 38);
        let rows: Vec<u64> = p.kept_rows().collect();
        assert_eq!(rows.len() as u64, p.kept_count());
        assert!(!rows.contains(&3) && !rows.contains(&260) && !rows.contains(&120));
        assert_eq!(p.selection.row_count(), rows.len());
    }

    /// Each piece of a split plan is the plan of its row groups alone (so
    /// pieces read apart return the rows, and row indexes, of the whole plan),
    /// with DVs spanning row-group bounds, row groups the DV empties or the
    /// scan skips, and masked and skipped runs.
    #[test]
    fn split_plans_equal_the_plans_of_their_row_groups() {
        let rows = [100u64, 150, 50, 80, 120];
        let mut dv: RoaringTreemap = [3u64, 99, 100, 101, 120, 260, 261].into_iter().collect();
        dv.insert_range(280..300); // rg 2's tail and...
        dv.insert_range(300..380); // ...all of rg 3: emptied
        dv.insert_range(395..405); // a run across rg 4's inside
        for min_skip in [1, 2, 8, 1000] {
            for chosen in [vec![0, 1, 2, 3, 4], vec![0, 2, 4], vec![1, 3, 4], vec![3]] {
                let whole = plan(&rows, &chosen, Some(&dv), min_skip, "f").unwrap();
                let n = whole.row_groups.len();
                let cuts: Vec<Vec<usize>> = match n {
                    0 => vec![vec![]],
                    1 => vec![vec![1]],
                    2 => vec![vec![2], vec![1, 1]],
                    _ => vec![vec![n], vec![1; n], vec![1, n - 1], vec![n - 1, 1]],
                };
                for sizes in cuts {
                    let pieces = whole.clone().split(&rows, &sizes, Some(&dv), "f").unwrap();
                    assert_eq!(pieces.len(), sizes.len());
                    let mut all = Vec::new();
                    let mut masked = 0;
                    for piece in &pieces {
                        let alone =
                            plan(&rows, &piece.row_groups, Some(&dv), min_skip, "f").unwrap();
                        assert_eq!(piece.row_groups, alone.row_groups);
                        assert_eq!(piece.kept, alone.kept, "{min_skip} {chosen:?} {sizes:?}");
                        assert_eq!(piece.masked, alone.masked);
                        let got: Vec<RowSelector> = piece.selection.iter().copied().collect();
                        let want: Vec<RowSelector> = alone.selection.iter().copied().collect();
                        assert_eq!(got, want, "{min_skip} {chosen:?} {sizes:?}");
                        all.extend(piece.kept_rows());
                        masked += piece.masked;
                    }
                    assert_eq!(all, whole.kept_rows().collect::<Vec<_>>());
                    assert_eq!(masked, whole.masked);
                }
            }
        }
        let e = plan(&rows, &[0, 1], None, 1, "f")
            .unwrap()
            .split(&rows, &[1], None, "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("2 row groups cut into pieces of 1"), "{e}");
    }

    #[test]
    fn dv_beyond_the_file_is_corrupt() {
        let dv: RoaringTreemap = [10u64].into_iter().collect();
        let e = plan(&[5, 5], &[0, 1], Some(&dv), 1, "part-0.parquet")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("part-0.parquet") && e.contains("row 10") && e.contains("only 10 rows"),
            "{e}"
        );
    }

    #[test]
    fn longest_skip_is_the_longest_deleted_run_read() {
        let mut dv = RoaringTreemap::new();
        dv.insert_range(1000..6000); // in row group 0
        dv.insert(7000);
        dv.insert_range(10_000..20_000); // all of row group 1: not read
        let p = plan(&[10_000, 10_000, 10_000], &[0, 1, 2], Some(&dv), 1, "f").unwrap();
        assert_eq!(p.row_groups, vec![0, 2]);
        assert_eq!(p.longest_skip(), 5000);
        assert_eq!(plan(&[10], &[0], None, 1, "f").unwrap().longest_skip(), 0);
    }

    #[test]
    fn no_dv_selects_everything() {
        let p = plan(&[4, 4], &[0, 1], None, 1, "f").unwrap();
        assert_eq!(p.kept, vec![(0, 8)]);
        assert_eq!(p.row_groups, vec![0, 1]);
    }

    #[test]
    fn row_groups_the_dv_empties_are_not_read() {
        let mut dv: RoaringTreemap = (100u64..250).collect();
        dv.insert(5);
        let p = plan(&[100, 150, 50], &[0, 1, 2], Some(&dv), 1, "f").unwrap();
        assert_eq!(p.row_groups, vec![0, 2]);
        assert_eq!(p.kept, vec![(0, 5), (6, 94), (250, 50)]);
        assert_eq!(p.selection.row_count(), 149);
        let mut kept = KeptRows::new(p.kept.clone());
        assert_eq!(kept.take_runs(7), vec![(0, 5), (6, 2)]);
        let rest = kept.take_runs(1000);
        assert_eq!(rest.iter().map(|(_, len)| len).sum::<u64>(), 149 - 7);
        assert!(kept.take_runs(3).is_empty());
    }

    #[test]
    fn coarse_plan_skips_long_runs_and_masks_the_rest() {
        let mut dv = RoaringTreemap::new();
        dv.insert_range(10..14); // 4 rows: masked
        dv.insert_range(20..30); // 10 rows: skipped
        dv.insert(45); // masked
        dv.insert_range(95..105); // 10 rows across the row-group boundary at 100
        let p = plan(&[100, 100], &[0, 1], Some(&dv), 10, "f").unwrap();
        // 95..100 and 100..105 are runs of 5 inside each row group: masked.
        assert_eq!(p.masked, 4 + 1 + 5 + 5);
        assert_eq!(p.kept, vec![(0, 20), (30, 170)]);
        assert!(!p.reads_whole_row_groups());
        assert_eq!(p.selection.row_count(), 190);
        // The mask of the first 25 rows read (physical 0..20 and 30..35).
        let mut kept = KeptRows::new(p.kept.clone());
        let runs = kept.take_runs(25);
        assert_eq!(runs, vec![(0, 20), (30, 5)]);
        let (mask, dropped) = keep_mask(&runs, &dv);
        assert_eq!(dropped, 4);
        let expect: Vec<bool> = (0..25).map(|i| !(10..14).contains(&i)).collect();
        assert_eq!(mask.iter().collect::<Vec<_>>(), expect);
        // The rest: 45 and 95..105 dropped.
        let runs = kept.take_runs(1000);
        assert_eq!(runs, vec![(35, 165)]);
        let (mask, dropped) = keep_mask(&runs, &dv);
        assert_eq!(dropped, 11);
        assert_eq!(mask.len(), 165);
        assert!(!mask.value(45 - 35) && !mask.value(95 - 35) && mask.value(94 - 35));
        // Exact plans mask nothing; so does a DV of only short runs' group count.
        assert_eq!(
            plan(&[100, 100], &[0, 1], Some(&dv), 1, "f")
                .unwrap()
                .masked,
            0
        );
        let few: RoaringTreemap = [1u64, 2].into_iter().collect();
        let p = plan(&[100], &[0], Some(&few), 10, "f").unwrap();
        assert_eq!((p.masked, p.reads_whole_row_groups()), (2, true));
    }
}
