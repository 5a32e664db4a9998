//! Change-feed streams (`readChangeFeed=true`), as Delta Spark's
//! `DeltaSourceCDCSupport`: which change files a micro-batch reads and where
//! its offset ends. Pure: takes commits' actions and a snapshot's adds,
//! returns values. The offsets, sentinels and the initial snapshot are the
//! plain stream's ([`crate::log::stream`]); what differs:
//!
//! | from                   | indexed entries (between the version's sentinels)   |
//! |------------------------|------------------------------------------------------|
//! | the initial snapshot   | every live file, as the plain stream: all `insert`s  |
//! | a commit with `cdc`    | its `cdc` files, index 0.. in log order              |
//! | any other commit       | its `add`s and `remove`s with `dataChange`, index    |
//! |                        | 0.. in log order (a MERGE that changed no row: none  |
//! |                        | of them is read)                                     |
//!
//! No commit stops a change-feed stream for removing rows (that is what the
//! feed reports); a later schema change does ([`crate::log::stream::check_schema`]).
//!
//! Admission ([`ChangeScan::take`], Delta Spark's `filterFiles`): the
//! snapshot's files one by one as the plain stream; a commit's `cdc` files,
//! or its adds and removes when one of them has a deletion vector, all or
//! none (so an update's pre- and post-images, or a DV's old and new rows,
//! never land in two batches); other commits' adds and removes one by one.
//! A commit taken whole is admitted when it is the batch's first, else only
//! if it fits. Which rows each taken file changed is [`crate::log::cdf`]'s.

use super::actions::{Action, Add};
use super::cdf;
use super::stream::{self, Admission, ScanStart, StreamOffset, BASE_INDEX, END_INDEX};
use crate::error::Result;

/// One entry of a change-feed stream: a file action (`add`, `remove` or
/// `cdc`), or a version's sentinel (`action` None).
#[derive(Debug, Clone, PartialEq)]
pub struct IndexedChange {
    pub version: u64,
    pub index: i64,
    pub action: Option<Action>,
    /// Part of a MERGE that changed no row: never read (Delta Spark's
    /// `shouldSkip`), though it keeps its index.
    pub skip: bool,
}

impl IndexedChange {
    fn sentinel(version: u64, index: i64) -> IndexedChange {
        IndexedChange {
            version,
            index,
            action: None,
            skip: false,
        }
    }

    /// The bytes of its file (0 for a sentinel or a `remove` without a size).
    pub fn size(&self) -> i64 {
        match &self.action {
            Some(Action::Add(a)) => a.size,
            Some(Action::Remove(r)) => r.size.unwrap_or(0),
            Some(Action::Cdc(c)) => c.size,
            _ => 0,
        }
    }

    fn has_deletion_vector(&self) -> bool {
        match &self.action {
            Some(Action::Add(a)) => a.deletion_vector.is_some(),
            Some(Action::Remove(r)) => r.deletion_vector.is_some(),
            _ => false,
        }
    }
}

fn with_sentinels(actions: Vec<Action>, version: u64, skip: bool) -> Vec<IndexedChange> {
    let mut out = Vec::with_capacity(actions.len() + 2);
    out.push(IndexedChange::sentinel(version, BASE_INDEX));
    out.extend(
        actions
            .into_iter()
            .zip(0i64..)
            .map(|(action, index)| IndexedChange {
                version,
                index,
                action: Some(action),
                skip,
            }),
    );
    out.push(IndexedChange::sentinel(version, END_INDEX));
    out
}

/// The initial snapshot of `version` as change entries: its live files in
/// the plain stream's order, each read as inserted.
pub fn snapshot_changes(adds: Vec<Add>, version: u64) -> Vec<IndexedChange> {
    let files = stream::snapshot_files(adds, version);
    files
        .into_iter()
        .map(|f| IndexedChange {
            version: f.version,
            index: f.index,
            action: f.add.map(|mut add| {
                add.data_change = true;
                Action::Add(Box::new(add))
            }),
            skip: false,
        })
        .collect()
}

/// Commit `version` (its `actions`) as change entries: its `cdc` files when
/// it has any, else its `add`s and `remove`s with `dataChange`, in log order.
pub fn commit_changes(actions: &[Action], version: u64) -> Vec<IndexedChange> {
    let cdc: Vec<Action> = actions
        .iter()
        .filter(|a| matches!(a, Action::Cdc(_)))
        .cloned()
        .collect();
    if !cdc.is_empty() {
        return with_sentinels(cdc, version, false);
    }
    let commit_info = actions.iter().find_map(|a| match a {
        Action::CommitInfo(v) => Some(v),
        _ => None,
    });
    let files: Vec<Action> = actions
        .iter()
        .filter(|a| match a {
            Action::Add(add) => add.data_change,
            Action::Remove(r) => r.data_change,
            _ => false,
        })
        .cloned()
        .collect();
    with_sentinels(files, version, cdf::is_noop_merge(commit_info))
}

/// A change-feed scan over the entries, from a start, up to an optional
/// bound (inclusive) and within optional admission limits.
#[derive(Debug, Clone)]
pub struct ChangeScan {
    start: ScanStart,
    bound: Option<(u64, i64)>,
    admission: Option<Admission>,
}

impl ChangeScan {
    pub fn new(
        start: ScanStart,
        bound: Option<&StreamOffset>,
        admission: Option<Admission>,
    ) -> Result<Self> {
        let bound = stream::offset_bound(bound)?;
        Ok(ChangeScan {
            start,
            bound,
            admission,
        })
    }

    pub fn start(&self) -> ScanStart {
        self.start
    }

    /// Whether the scan goes on to `version` (checked after the commit was
    /// read, as Delta Spark's iterator reads it before asking): the batch has
    /// room, and `version` is not past the bound.
    pub fn reaches(&self, version: u64) -> bool {
        self.admission.as_ref().is_none_or(Admission::has_capacity)
            && self.bound.is_none_or(|(v, _)| version <= v)
    }

    fn valid(&self, e: &IndexedChange) -> bool {
        let after_start = e.version > self.start.version || e.index > self.start.index;
        let before_end = self
            .bound
            .is_none_or(|(v, i)| e.version < v || (e.version == v && e.index <= i));
        !e.skip && after_start && before_end
    }

    /// The entries of one version (all of them, in order) this scan takes.
    pub fn take(&mut self, entries: Vec<IndexedChange>, is_snapshot: bool) -> Vec<IndexedChange> {
        let has_cdc = entries
            .iter()
            .any(|e| matches!(e.action, Some(Action::Cdc(_))));
        let has_dv = entries.iter().any(IndexedChange::has_deletion_vector);
        let valid: Vec<IndexedChange> = entries.into_iter().filter(|e| self.valid(e)).collect();
        let Some(admission) = &mut self.admission else {
            return valid;
        };
        let one_by_one = |admission: &mut Admission, valid: Vec<IndexedChange>| {
            valid
                .into_iter()
                .take_while(|e| admission.admit_size(e.action.as_ref().map(|_| e.size())))
                .collect()
        };
        if is_snapshot {
            return one_by_one(admission, valid);
        }
        // Delta Spark admits a commit's `cdc` files without its sentinels.
        let whole: Vec<IndexedChange> = if has_cdc {
            valid.into_iter().filter(|e| e.action.is_some()).collect()
        } else if has_dv {
            valid
        } else {
            return one_by_one(admission, valid);
        };
        let bytes = whole.iter().map(IndexedChange::size).sum();
        if admission.admit_commit(whole.len(), bytes) {
            whole
        } else {
            Vec::new()
        }
    }

    /// The offset after `last`, the last entry the scan took.
    pub fn offset_after(&self, last: &IndexedChange, table_id: &str) -> Result<StreamOffset> {
        stream::offset_after(self.start, last.version, last.index, table_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::actions::{Cdc, Remove};
    use std::collections::HashMap;

    fn add(path: &str, size: i64, dv: bool) -> Add {
        let dv = dv.then(|| {
            serde_json::from_value(serde_json::json!({
                "storageType": "u", "pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA",
                "offset": 1, "sizeInBytes": 36, "cardinality": 1
            }))
            .unwrap()
        });
        Add {
            path: path.into(),
            partition_values: HashMap::new(),
            size,
            modification_time: 0,
            data_change: true,
            stats: None,
            tags: None,
            deletion_vector: dv,
            base_row_id: None,
            default_row_commit_version: None,
            clustering_provider: None,
        }
    }

    fn a(path: &str, dv: bool) -> Action {
        Action::Add(Box::new(add(path, 10, dv)))
    }

    fn r(path: &str) -> Action {
        Action::Remove(Box::new(Remove::of_add(&add(path, 10, false), 0, true)))
    }

    fn cdc(path: &str) -> Action {
        Action::Cdc(Cdc {
            path: path.into(),
            partition_values: HashMap::new(),
            size: 5,
            data_change: false,
        })
    }

    fn start(version: u64, index: i64, snapshot: bool) -> ScanStart {
        ScanStart {
            version,
            index,
            is_starting_version: snapshot,
        }
    }

    fn indices(taken: &[IndexedChange]) -> Vec<(u64, i64)> {
        taken.iter().map(|e| (e.version, e.index)).collect()
    }

    #[test]
    fn entries_are_cdc_files_else_adds_and_removes() {
        let with_cdc = commit_changes(&[a("x", false), cdc("c1"), r("y"), cdc("c2")], 4);
        let got: Vec<_> = with_cdc.iter().map(|e| (e.index, e.size())).collect();
        assert_eq!(got, vec![(BASE_INDEX, 0), (0, 5), (1, 5), (END_INDEX, 0)]);
        let mut maintenance = add("m", 1, false);
        maintenance.data_change = false;
        let plain = commit_changes(
            &[r("y"), Action::Add(Box::new(maintenance)), a("x", false)],
            5,
        );
        assert_eq!(plain.len(), 4); // remove, add: the dataChange=false add is left out
        let noop = serde_json::json!({"operation": "MERGE", "operationMetrics": {
            "numTargetRowsInserted": "0", "numTargetRowsUpdated": "0", "numTargetRowsDeleted": "0"}});
        let skipped = commit_changes(&[Action::CommitInfo(noop), r("y"), a("y", true)], 6);
        let mut scan = ChangeScan::new(start(5, END_INDEX, false), None, None).unwrap();
        assert_eq!(
            indices(&scan.take(skipped, false)),
            vec![(6, BASE_INDEX), (6, END_INDEX)]
        );
        let snap = snapshot_changes(vec![add("s", 1, false)], 3);
        assert!(matches!(&snap[1].action, Some(Action::Add(a)) if a.data_change));
    }

    #[test]
    fn commits_with_cdc_files_or_dvs_are_admitted_whole() {
        let limit = || Some(Admission::new(Some(1), None));
        let base = start(3, END_INDEX, false);
        // the batch's first commit is admitted whole, beyond the limit;
        // cdc files come without their sentinels
        let mut scan = ChangeScan::new(base, None, limit()).unwrap();
        let taken = scan.take(commit_changes(&[cdc("c1"), cdc("c2")], 4), false);
        assert_eq!(indices(&taken), vec![(4, 0), (4, 1)]);
        assert!(!scan.reaches(5));
        let end = scan.offset_after(&taken[1], "id").unwrap();
        assert_eq!((end.reservoir_version, end.index), (4, 1));
        // a DV commit after another entry is not admitted when it does not fit
        let mut scan = ChangeScan::new(base, None, Some(Admission::new(Some(3), None))).unwrap();
        let first = scan.take(commit_changes(&[a("n", false)], 4), false);
        assert_eq!(first.len(), 3);
        assert!(scan.reaches(5));
        let dv = commit_changes(&[r("n"), a("n", true)], 5);
        assert!(scan.take(dv.clone(), false).is_empty());
        // it is, with its sentinels, when first
        let mut scan = ChangeScan::new(start(4, END_INDEX, false), None, limit()).unwrap();
        let taken = scan.take(dv, false);
        assert_eq!(
            indices(&taken),
            vec![(5, BASE_INDEX), (5, 0), (5, 1), (5, END_INDEX)]
        );
        let end = scan.offset_after(&taken[3], "id").unwrap();
        assert_eq!((end.reservoir_version, end.index), (6, BASE_INDEX));
        // adds and removes without DVs one by one
        let mut scan = ChangeScan::new(start(4, END_INDEX, false), None, limit()).unwrap();
        let taken = scan.take(commit_changes(&[r("p"), a("q", false)], 5), false);
        assert_eq!(indices(&taken), vec![(5, BASE_INDEX), (5, 0)]);
    }

    #[test]
    fn resuming_and_bounds_filter_entries() {
        let entries = commit_changes(&[cdc("c1"), cdc("c2"), cdc("c3")], 7);
        let bound = StreamOffset {
            reservoir_version: 7,
            index: 1,
            ..StreamOffset::not_started("id")
        };
        let mut scan = ChangeScan::new(start(7, 0, false), Some(&bound), None).unwrap();
        assert_eq!(indices(&scan.take(entries, false)), vec![(7, 1)]);
        assert!(scan.reaches(7) && !scan.reaches(8));
        // the snapshot one file at a time
        let snap = snapshot_changes(vec![add("s1", 1, false), add("s2", 1, false)], 2);
        let mut scan = ChangeScan::new(
            start(2, BASE_INDEX, true),
            None,
            Some(Admission::new(Some(1), None)),
        )
        .unwrap();
        let taken = scan.take(snap, true);
        assert_eq!(indices(&taken), vec![(2, 0)]);
        let end = scan.offset_after(&taken[0], "id").unwrap();
        assert_eq!((end.index, end.is_starting_version), (0, true));
    }
}
