//! Log replay with DV-aware reconciliation.
//!
//! A file's identity is the pair (path, `deletionVector.uniqueId`). Replay
//! runs newest to oldest: the first action seen for a pair wins; a remove
//! cancels only the add of the same pair. Paths are compared URL-decoded, so
//! `a%20b.parquet` and `a b.parquet` are one file.
//!
//! Within one commit, adding (or removing) the same path twice with different
//! DVs is illegal and reported as a corrupt log.

use std::collections::{HashMap, HashSet};

use crate::error::{Error, Result};
use crate::log::actions::{Action, Add, DomainMetadata, Metadata, Protocol, Remove, Txn};
use crate::log::parallel::map_ranges;
use crate::log::path::normalize_path;

/// The reconciliation key of a file action.
pub type FileKey = (String, Option<String>);

fn key_of(path: &str, dv: Option<&crate::format::descriptor::DeletionVectorDescriptor>) -> FileKey {
    (normalize_path(path), dv.map(|d| d.unique_id()))
}

/// What replay produces.
#[derive(Debug, Default, Clone)]
pub struct ReplayResult {
    pub protocol: Option<Protocol>,
    pub metadata: Option<Metadata>,
    /// Live files, newest first.
    pub files: Vec<Add>,
    /// Removes that are still tombstones (kept with their deletion timestamps).
    pub tombstones: Vec<Remove>,
    pub txns: HashMap<String, Txn>,
    pub domains: HashMap<String, DomainMetadata>,
    /// Number of add/remove actions read (for diagnostics and `_last_checkpoint.size` checks).
    pub file_actions_read: u64,
}

/// Newest-to-oldest replay. Feed commit files newest first, then the checkpoint.
#[derive(Debug, Default)]
pub struct Replayer {
    seen: HashSet<FileKey>,
    out: ReplayResult,
}

impl Replayer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Apply one commit's actions (in file order). `file` names it for errors.
    /// `single_commit` enables the illegal-duplicate check; compaction files,
    /// which merge many commits newest first, pass `false`.
    pub fn apply_commit(
        &mut self,
        actions: Vec<Action>,
        file: &str,
        single_commit: bool,
    ) -> Result<()> {
        if single_commit {
            check_duplicates(&actions, file)?;
        }
        for action in actions {
            self.apply(action);
        }
        Ok(())
    }

    /// Apply checkpoint actions (already reconciled among themselves).
    pub fn apply_checkpoint(&mut self, actions: Vec<Action>) {
        for action in actions {
            self.apply(action);
        }
    }

    fn apply(&mut self, action: Action) {
        match action {
            Action::Add(add) => {
                self.out.file_actions_read += 1;
                let key = key_of(&add.path, add.deletion_vector.as_ref());
                if self.seen.insert(key) {
                    self.out.files.push(*add);
                }
            }
            Action::Remove(remove) => {
                self.out.file_actions_read += 1;
                let key = key_of(&remove.path, remove.deletion_vector.as_ref());
                if self.seen.insert(key) {
                    self.out.tombstones.push(*remove);
                }
            }
            Action::Protocol(p) => {
                self.out.protocol.get_or_insert(p);
            }
            Action::Metadata(m) => {
                self.out.metadata.get_or_insert(m);
            }
            Action::Txn(t) => {
                self.out.txns.entry(t.app_id.clone()).or_insert(t);
            }
            Action::DomainMetadata(d) => {
                self.out.domains.entry(d.domain.clone()).or_insert(d);
            }
            Action::CommitInfo(_)
            | Action::Cdc(_)
            | Action::CheckpointMetadata(_)
            | Action::Sidecar(_) => {}
        }
    }

    /// Indexes of the checkpoint `add` rows that are still live: rows holding
    /// an add whose (path, DV id) no newer commit has touched. Only rows whose
    /// path a commit touched need their key built. Ranges of rows are checked
    /// on up to `threads` threads ([`map_ranges`]); the result is the same.
    pub fn checkpoint_live_rows(
        &self,
        adds: &crate::log::checkpoint::AddColumns,
        threads: usize,
    ) -> Result<Vec<usize>> {
        let touched: HashSet<&str> = self.seen.iter().map(|(p, _)| p.as_str()).collect();
        let live = |i: usize| {
            if !adds.is_add(i) {
                return false;
            }
            if touched.is_empty() {
                return true;
            }
            let raw = adds.raw_path(i);
            let decoded: std::borrow::Cow<'_, str> = if raw.contains('%') {
                std::borrow::Cow::Owned(normalize_path(raw))
            } else {
                std::borrow::Cow::Borrowed(raw)
            };
            if !touched.contains(decoded.as_ref()) {
                return true;
            }
            let key = (decoded.into_owned(), adds.dv_unique_id(i));
            !self.seen.contains(&key)
        };
        let parts = map_ranges(adds.len(), threads, |rows| {
            rows.filter(|&i| live(i)).collect::<Vec<usize>>()
        })?;
        Ok(parts.concat())
    }

    /// Whether protocol and metadata are both known (older files can't change them).
    pub fn has_protocol_and_metadata(&self) -> bool {
        self.out.protocol.is_some() && self.out.metadata.is_some()
    }

    pub fn finish(mut self) -> ReplayResult {
        self.out.domains.retain(|_, d| !d.removed);
        self.out
    }
}

/// The same path added twice (or removed twice) in one commit with different
/// DVs — or once with and once without — is illegal.
fn check_duplicates(actions: &[Action], file: &str) -> Result<()> {
    let mut adds: HashMap<String, Option<String>> = HashMap::new();
    let mut removes: HashMap<String, Option<String>> = HashMap::new();
    for action in actions {
        let (kind, map, path, dv) = match action {
            Action::Add(a) => ("added", &mut adds, &a.path, a.deletion_vector.as_ref()),
            Action::Remove(r) => ("removed", &mut removes, &r.path, r.deletion_vector.as_ref()),
            _ => continue,
        };
        let (path, dv_id) = key_of(path, dv);
        if let Some(previous) = map.get(&path) {
            if *previous != dv_id {
                return Err(Error::CorruptLog {
                    file: file.to_string(),
                    detail: format!(
                        "{path} is {kind} twice in one commit with different deletion vectors ({} and {})",
                        previous.as_deref().unwrap_or("none"),
                        dv_id.as_deref().unwrap_or("none")
                    ),
                });
            }
        } else {
            map.insert(path, dv_id);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::actions::parse_commit;

    fn commit(lines: &[&str]) -> Vec<Action> {
        parse_commit(lines.join("\n").as_bytes(), "test.json").unwrap()
    }

    const DV1: &str = r#"{"storageType":"i","pathOrInlineDv":"^Bg9^0rr910000000000iXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L","sizeInBytes":44,"cardinality":6}"#;

    #[test]
    fn remove_cancels_only_its_own_dv() {
        let mut r = Replayer::new();
        // v1 (newest): remove(f, none) + add(f, DV1)
        r.apply_commit(
            commit(&[
                r#"{"remove":{"path":"f.parquet","deletionTimestamp":5,"dataChange":true}}"#,
                &format!(r#"{{"add":{{"path":"f.parquet","size":1,"modificationTime":1,"dataChange":true,"deletionVector":{DV1}}}}}"#),
            ]),
            "1.json",
            true,
        )
        .unwrap();
        // v0: add(f, none)
        r.apply_commit(
            commit(&[
                r#"{"add":{"path":"f.parquet","size":1,"modificationTime":1,"dataChange":true}}"#,
            ]),
            "0.json",
            true,
        )
        .unwrap();
        let out = r.finish();
        assert_eq!(out.files.len(), 1);
        assert!(out.files[0].deletion_vector.is_some());
        assert_eq!(out.tombstones.len(), 1);
    }

    #[test]
    fn encoded_and_raw_paths_are_one_file() {
        let mut r = Replayer::new();
        r.apply_commit(
            commit(&[r#"{"remove":{"path":"a%20b.parquet","dataChange":true}}"#]),
            "1.json",
            true,
        )
        .unwrap();
        r.apply_commit(
            commit(&[
                r#"{"add":{"path":"a b.parquet","size":1,"modificationTime":1,"dataChange":true}}"#,
            ]),
            "0.json",
            true,
        )
        .unwrap();
        assert!(r.finish().files.is_empty());
    }

    #[test]
    fn illegal_duplicate_add_in_one_commit() {
        let mut r = Replayer::new();
        let e = r
            .apply_commit(
                commit(&[
                    r#"{"add":{"path":"f.parquet","size":1,"modificationTime":1,"dataChange":true}}"#,
                    &format!(r#"{{"add":{{"path":"f.parquet","size":1,"modificationTime":1,"dataChange":true,"deletionVector":{DV1}}}}}"#),
                ]),
                "00000000000000000007.json",
                true,
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("00000000000000000007.json") && e.contains("added twice"),
            "{e}"
        );
    }
}
