//! The conflict checker: after losing the race for a commit version, decide
//! from the winning commit's actions and this transaction's reads and writes
//! whether to proceed, rebase row-level changes, or give up. Pure: no I/O.
//!
//! The rules follow Delta's isolation levels (the checks of Delta Spark's
//! `ConflictChecker` and delta-rs's `conflict_checker`); the numbers match the
//! `ruleN_*` tests below:
//!
//! 1. blind appends never conflict with each other (a blind append reads
//!    nothing, so rules 2, 4 and 5 cannot apply to it);
//! 2. a data file the winner added that this transaction would have read
//!    conflicts ([`Rule::ConcurrentAppend`]) — under `Serializable` always,
//!    under `WriteSerializable` unless the winner was a blind append and this
//!    transaction changes no metadata;
//! 3. a protocol or metadata change by the winner conflicts
//!    ([`Rule::ProtocolChanged`], [`Rule::MetadataChanged`]);
//! 4. a file this transaction read or changes that the winner removed without
//!    re-adding it (same path, new DV) conflicts
//!    ([`Rule::ConcurrentDeleteRead`], [`Rule::ConcurrentDeleteDelete`]);
//! 5. row-level concurrency, beyond OSS Delta: a file whose DV the winner
//!    replaced (remove + add of the same path) and whose rows this transaction
//!    changes too is rebased ([`Decision::Rebase`]); once the caller has loaded
//!    the winner's old and new DVs, [`check_rows_disjoint`] refuses the rebase
//!    when the row sets clash. A file this transaction only read and whose DV
//!    the winner replaced is no conflict: rows only went away (rewritten
//!    copies of them would be in a new file, caught by rule 2);
//! 6. a winner's `txn` action for an application id this transaction depends
//!    on conflicts ([`Rule::ConcurrentTransaction`]).
//!
//! Rule 2 has a row-level form too: a transaction that can tell from the
//! rows of a file whether it would have changed what it did (a MERGE that
//! inserts checks the new rows against its source's join keys) sets
//! [`TxnContext::checks_added_rows`]; the files rule 2 would refuse are then
//! returned in [`Decision::Rebase`]'s `added` for the caller to read and
//! check, and it conflicts only when one of their rows matches.
//!
//! They are checked in Delta Spark's order: protocol, metadata, added files,
//! removed files, application ids; the first conflict wins.
//!
//! Paths are compared after percent-decoding ([`normalize_path`]), as log
//! replay does.

use std::collections::{BTreeMap, BTreeSet};

use roaring::RoaringTreemap;

use crate::error::{Error, Result};
use crate::log::actions::{Action, Add, Remove};
use crate::log::path::normalize_path;

// The isolation level is a table property; its type lives with the keys.
pub use crate::log::features::properties::IsolationLevel;

/// What one winning commit did, as far as conflicts go.
#[derive(Debug, Clone, Default)]
pub struct WinningCommit {
    /// The commit's version.
    pub version: u64,
    /// `commitInfo.operation`, for messages.
    pub operation: Option<String>,
    /// `commitInfo.isBlindAppend` (false when absent).
    pub is_blind_append: bool,
    pub protocol_changed: bool,
    pub metadata_changed: bool,
    /// The metadata it committed differs from the table's before it only in
    /// identity columns' high-water marks (values handed out by an insert):
    /// a conflict only for a transaction that changes the metadata too, as
    /// in Delta Spark.
    pub identity_only_metadata: bool,
    /// Add actions by normalized path.
    pub adds: BTreeMap<String, Add>,
    /// Remove actions by normalized path.
    pub removes: BTreeMap<String, Remove>,
    /// Application ids of its `txn` actions.
    pub app_ids: BTreeSet<String>,
}

impl WinningCommit {
    /// Summarize the actions of commit `version`.
    pub fn from_actions(version: u64, actions: &[Action]) -> Self {
        let mut w = WinningCommit {
            version,
            ..Self::default()
        };
        for a in actions {
            match a {
                Action::Protocol(_) => w.protocol_changed = true,
                Action::Metadata(_) => w.metadata_changed = true,
                Action::Add(add) => {
                    w.adds.insert(normalize_path(&add.path), (**add).clone());
                }
                Action::Remove(r) => {
                    w.removes.insert(normalize_path(&r.path), (**r).clone());
                }
                Action::Txn(t) => {
                    w.app_ids.insert(t.app_id.clone());
                }
                Action::CommitInfo(info) => {
                    w.is_blind_append = info
                        .get("isBlindAppend")
                        .and_then(serde_json::Value::as_bool)
                        .unwrap_or(false);
                    w.operation = info
                        .get("operation")
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_string);
                }
                _ => {}
            }
        }
        w
    }

    /// Whether the winner removed `path` and added it back (a DV replacement).
    fn replaced_dv(&self, path: &str) -> Option<&Add> {
        if self.removes.contains_key(path) {
            self.adds.get(path)
        } else {
            None
        }
    }

    /// Whether the winner added data under a path it did not remove: new rows,
    /// possibly rewritten copies of rows it removed elsewhere (UPDATE, MERGE).
    fn added_new_data(&self) -> bool {
        self.adds
            .iter()
            .any(|(p, a)| a.data_change && !self.removes.contains_key(p))
    }

    fn describe(&self) -> String {
        match &self.operation {
            Some(op) => format!("the concurrent {op} committed as version {}", self.version),
            None => format!("the concurrent commit of version {}", self.version),
        }
    }
}

/// The data files a transaction read.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum ReadSet {
    /// Nothing (a blind append).
    #[default]
    Nothing,
    /// These files (paths as in the log).
    Files(BTreeSet<String>),
    /// Every file of the table (a scan without file pruning).
    WholeTable,
}

/// How this transaction changes one data file.
#[derive(Debug, Clone, PartialEq)]
pub enum FileChange {
    /// Deletes these rows (DV replacement, or a copy-on-write rewrite that the
    /// caller can redo on a new base). Deleting a row that a concurrent
    /// DELETE also deleted is harmless.
    DeleteRows(RoaringTreemap),
    /// Deletes these rows and writes new copies of them elsewhere (UPDATE,
    /// MERGE): they must not have been touched by the winner.
    RewriteRows(RoaringTreemap),
    /// Removes the whole file in a way that cannot be redone on a new base
    /// (compaction, restore): any concurrent change to it conflicts.
    WholeFile,
}

/// This transaction, as the checker sees it.
#[derive(Debug, Clone, Default)]
pub struct TxnContext {
    pub isolation: IsolationLevel,
    pub read_version: u64,
    /// Only adds new files and read nothing.
    pub blind_append: bool,
    /// Changes metadata (schema, properties): then even a concurrent blind
    /// append conflicts, as in Delta.
    pub metadata_changed: bool,
    /// Files read; a file in [`TxnContext::changes`] counts as read.
    pub reads: ReadSet,
    /// Files removed or whose DV is replaced, by path as in the log.
    pub changes: BTreeMap<String, FileChange>,
    /// Application ids (`txn` actions) read or written.
    pub app_ids: BTreeSet<String>,
    /// The caller checks the rows of files a winner added (rule 2) instead
    /// of conflicting on the file: see [`Decision::Rebase`].
    pub checks_added_rows: bool,
}

/// The rule a conflict breaks; names follow Delta Spark's exceptions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    ProtocolChanged,
    MetadataChanged,
    /// The winner added a file this transaction should have read.
    ConcurrentAppend,
    /// The winner removed a file this transaction read.
    ConcurrentDeleteRead,
    /// The winner removed a file this transaction removes or changes.
    ConcurrentDeleteDelete,
    /// The winner and this transaction changed the same rows (row-level
    /// concurrency; see [`check_rows_disjoint`]).
    ConcurrentRowChange,
    /// The winner committed a `txn` action for an application id this
    /// transaction depends on.
    ConcurrentTransaction,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::ProtocolChanged => "ProtocolChanged",
            Rule::MetadataChanged => "MetadataChanged",
            Rule::ConcurrentAppend => "ConcurrentAppend",
            Rule::ConcurrentDeleteRead => "ConcurrentDeleteRead",
            Rule::ConcurrentDeleteDelete => "ConcurrentDeleteDelete",
            Rule::ConcurrentRowChange => "ConcurrentRowChange",
            Rule::ConcurrentTransaction => "ConcurrentTransaction",
        }
    }
}

/// Why a transaction cannot commit over a winner.
#[derive(Debug, Clone, PartialEq)]
pub struct ConflictReason {
    pub rule: Rule,
    /// The winning commit's version.
    pub version: u64,
    /// The data file (or application id) concerned, if any.
    pub path: Option<String>,
    pub detail: String,
}

impl ConflictReason {
    /// As the crate error ([`Error::Conflict`]).
    pub fn into_error(self) -> Error {
        let detail = match &self.path {
            Some(p) => format!("{} ({}): {}", self.rule.as_str(), p, self.detail),
            None => format!("{}: {}", self.rule.as_str(), self.detail),
        };
        Error::Conflict {
            version: self.version,
            detail,
        }
    }
}

/// A file to rebase: the winner replaced its DV while this transaction
/// changes its rows.
#[derive(Debug, Clone, PartialEq)]
pub struct RebaseFile {
    /// Normalized path.
    pub path: String,
    /// The winner's add action for it (the new base, with the winner's DV).
    pub winner_add: Add,
    /// The winner's remove action for it (its DV is the winner's old DV).
    pub winner_remove: Remove,
    /// Whether this transaction's rows may overlap the rows the winner
    /// deleted: only when both sides purely delete.
    pub overlap_allowed: bool,
}

impl RebaseFile {
    /// [`check_rows_disjoint`] for this file, once the caller has loaded the
    /// winner's old DV (of `winner_remove`) and new DV (of `winner_add`).
    pub fn check_rows(
        &self,
        version: u64,
        winner_old_dv: &RoaringTreemap,
        winner_new_dv: &RoaringTreemap,
        our_rows: &RoaringTreemap,
    ) -> Result<()> {
        check_rows_disjoint(
            version,
            &self.path,
            winner_old_dv,
            winner_new_dv,
            our_rows,
            self.overlap_allowed,
        )
        .map_err(ConflictReason::into_error)
    }
}

/// The checker's verdict on one winning commit.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// No overlap: commit again at the next version with the same actions.
    Proceed,
    /// Re-read the winner's DV of each file in `files`, check it with
    /// [`check_rows_disjoint`], union this transaction's rows onto it; read
    /// the rows of each file in `added` (new data the winner added that this
    /// transaction would have read; only with
    /// [`TxnContext::checks_added_rows`]) and conflict if one of them would
    /// have changed what it did; then commit again at the next version.
    Rebase {
        files: Vec<RebaseFile>,
        added: Vec<Add>,
    },
    /// Give up.
    Conflict(ConflictReason),
}

/// Check this transaction against one winning commit.
pub fn check(txn: &TxnContext, winner: &WinningCommit) -> Decision {
    match check_inner(txn, winner) {
        Ok((files, added)) if files.is_empty() && added.is_empty() => Decision::Proceed,
        Ok((files, added)) => Decision::Rebase { files, added },
        Err(reason) => Decision::Conflict(reason),
    }
}

/// The files to rebase and the added files whose rows to check.
type Rebases = (Vec<RebaseFile>, Vec<Add>);

fn check_inner(
    txn: &TxnContext,
    winner: &WinningCommit,
) -> std::result::Result<Rebases, ConflictReason> {
    let fail = |rule: Rule, path: Option<&str>, detail: String| ConflictReason {
        rule,
        version: winner.version,
        path: path.map(str::to_string),
        detail,
    };
    let who = winner.describe();
    if winner.protocol_changed {
        return Err(fail(
            Rule::ProtocolChanged,
            None,
            format!("{who} changed the protocol"),
        ));
    }
    let identity_only = winner.identity_only_metadata && !txn.metadata_changed;
    if winner.metadata_changed && !identity_only {
        return Err(fail(
            Rule::MetadataChanged,
            None,
            format!("{who} changed the table metadata (schema or properties)"),
        ));
    }

    let changes: BTreeMap<String, &FileChange> = txn
        .changes
        .iter()
        .map(|(p, c)| (normalize_path(p), c))
        .collect();
    let reads: Option<BTreeSet<String>> = match (&txn.reads, txn.blind_append) {
        (_, true) | (ReadSet::Nothing, _) => Some(BTreeSet::new()),
        (ReadSet::Files(files), false) => Some(files.iter().map(|p| normalize_path(p)).collect()),
        (ReadSet::WholeTable, false) => None,
    };
    let was_read = |path: &str| match &reads {
        Some(set) => set.contains(path) || changes.contains_key(path),
        None => true,
    };

    // Rule 2: files the winner added that this transaction would have read.
    let mut added = Vec::new();
    let blind_appends_count = txn.isolation == IsolationLevel::Serializable || txn.metadata_changed;
    if !txn.blind_append && (!winner.is_blind_append || blind_appends_count) {
        for (path, add) in &winner.adds {
            if winner.removes.contains_key(path) {
                continue; // a DV replacement: rules 4 and 5
            }
            if !winner.is_blind_append && !add.data_change {
                continue;
            }
            if was_read(path) && txn.checks_added_rows {
                added.push(add.clone());
            } else if was_read(path) {
                return Err(fail(
                    Rule::ConcurrentAppend,
                    Some(path),
                    format!(
                        "{who} added a data file this transaction should have read \
                         (isolation level {}{})",
                        txn.isolation,
                        if winner.is_blind_append {
                            ", the winner was a blind append"
                        } else {
                            ""
                        }
                    ),
                ));
            }
        }
    }

    // Rules 4 and 5: files the winner removed.
    let mut rebase = Vec::new();
    for (path, remove) in &winner.removes {
        let change = changes.get(path);
        let readd = winner.replaced_dv(path);
        match (change, readd) {
            (None, None) if was_read(path) => {
                return Err(fail(
                    Rule::ConcurrentDeleteRead,
                    Some(path),
                    format!("{who} removed a data file this transaction read"),
                ))
            }
            (None, _) => {}
            (Some(_), None) => {
                return Err(fail(
                    Rule::ConcurrentDeleteDelete,
                    Some(path),
                    format!("data file {path} was removed by a concurrent commit ({who})"),
                ))
            }
            (Some(FileChange::WholeFile), Some(_)) => {
                return Err(fail(
                    Rule::ConcurrentDeleteDelete,
                    Some(path),
                    format!(
                        "{who} replaced the deletion vector of a data file this transaction \
                         removes as a whole"
                    ),
                ))
            }
            (Some(c), Some(add)) => rebase.push(RebaseFile {
                path: path.clone(),
                winner_add: add.clone(),
                winner_remove: remove.clone(),
                overlap_allowed: matches!(c, FileChange::DeleteRows(_)) && !winner.added_new_data(),
            }),
        }
    }

    // Rule 6: application transactions.
    if let Some(app) = winner.app_ids.iter().find(|a| txn.app_ids.contains(*a)) {
        return Err(fail(
            Rule::ConcurrentTransaction,
            Some(app),
            format!("{who} committed a transaction of the same application id"),
        ));
    }
    Ok((rebase, added))
}

/// The conflict of a transaction that found, in file `path` the winner of
/// `version` added, a row it would have changed (`detail` says which).
pub fn added_row_conflict(version: u64, path: &str, detail: String) -> Error {
    ConflictReason {
        rule: Rule::ConcurrentAppend,
        version,
        path: Some(path.to_string()),
        detail,
    }
    .into_error()
}

/// Row-level concurrency, once the DVs are loaded: the winner replaced the DV
/// of `path` (`winner_old_dv` -> `winner_new_dv`) and this transaction changes
/// `our_rows` of it. Conflict when the winner brought rows back
/// (`winner_old_dv` not within `winner_new_dv`: this transaction never saw
/// them), or when `our_rows` meet the rows the winner deleted
/// (`winner_new_dv - winner_old_dv`) unless `overlap_allowed` (both sides
/// only delete, so deleting a row twice is harmless). Otherwise the caller's
/// new DV is `winner_new_dv | our_rows`.
pub fn check_rows_disjoint(
    version: u64,
    path: &str,
    winner_old_dv: &RoaringTreemap,
    winner_new_dv: &RoaringTreemap,
    our_rows: &RoaringTreemap,
    overlap_allowed: bool,
) -> std::result::Result<(), ConflictReason> {
    let fail = |detail: String| ConflictReason {
        rule: Rule::ConcurrentRowChange,
        version,
        path: Some(path.to_string()),
        detail,
    };
    let restored = winner_old_dv - winner_new_dv;
    if let Some(first) = restored.min() {
        return Err(fail(format!(
            "the concurrent commit brought back {} deleted row(s) (first: row {first}) \
             this transaction did not see",
            restored.len()
        )));
    }
    if overlap_allowed {
        return Ok(());
    }
    let clash = &(winner_new_dv - winner_old_dv) & our_rows;
    match clash.min() {
        Some(first) => Err(fail(format!(
            "the concurrent commit deleted {} row(s) this transaction changes (first: row {first})",
            clash.len()
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::features::properties::ISOLATION_LEVEL;
    use serde_json::{json, Value};
    use std::collections::HashMap;

    fn action(v: Value) -> Action {
        match Action::from_value(v, "test", 1) {
            Ok(Some(a)) => a,
            other => panic!("bad test action: {other:?}"),
        }
    }
    fn add(path: &str) -> Action {
        action(
            json!({"add": {"path": path, "partitionValues": {}, "size": 1,
            "modificationTime": 0, "dataChange": true}}),
        )
    }
    fn compaction_add(path: &str) -> Action {
        action(
            json!({"add": {"path": path, "partitionValues": {}, "size": 1,
            "modificationTime": 0, "dataChange": false}}),
        )
    }
    fn remove(path: &str) -> Action {
        action(json!({"remove": {"path": path, "deletionTimestamp": 0, "dataChange": true}}))
    }
    fn info(op: &str, blind: bool) -> Action {
        action(json!({"commitInfo": {"operation": op, "isBlindAppend": blind}}))
    }
    fn winner(actions: Vec<Action>) -> WinningCommit {
        WinningCommit::from_actions(5, &actions)
    }
    fn blind_append_winner() -> WinningCommit {
        winner(vec![info("WRITE", true), add("new.parquet")])
    }
    fn rows(r: &[u64]) -> RoaringTreemap {
        r.iter().copied().collect()
    }
    fn files(p: &[&str]) -> ReadSet {
        ReadSet::Files(p.iter().map(|s| s.to_string()).collect())
    }
    fn blind_append_txn(isolation: IsolationLevel) -> TxnContext {
        TxnContext {
            isolation,
            blind_append: true,
            ..TxnContext::default()
        }
    }
    fn delete_txn(
        isolation: IsolationLevel,
        reads: ReadSet,
        changes: &[(&str, FileChange)],
    ) -> TxnContext {
        TxnContext {
            isolation,
            reads,
            changes: changes
                .iter()
                .map(|(p, c)| (p.to_string(), c.clone()))
                .collect(),
            ..TxnContext::default()
        }
    }
    fn rule_of(d: &Decision) -> Option<(Rule, Option<&str>)> {
        match d {
            Decision::Conflict(r) => Some((r.rule, r.path.as_deref())),
            _ => None,
        }
    }
    const BOTH: [IsolationLevel; 2] = [
        IsolationLevel::Serializable,
        IsolationLevel::WriteSerializable,
    ];

    #[test]
    fn isolation_level_is_parsed_from_the_table_property() {
        let mut conf = HashMap::new();
        assert_eq!(
            IsolationLevel::from_configuration(&conf).ok(),
            Some(IsolationLevel::WriteSerializable)
        );
        conf.insert(
            ISOLATION_LEVEL.to_string(),
            Some("Serializable".to_string()),
        );
        assert_eq!(
            IsolationLevel::from_configuration(&conf).ok(),
            Some(IsolationLevel::Serializable)
        );
        conf.insert(
            ISOLATION_LEVEL.to_string(),
            Some("SnapshotIsolation".to_string()),
        );
        let err = IsolationLevel::from_configuration(&conf)
            .err()
            .map(|e| e.to_string());
        assert!(
            err.is_some_and(|e| e.contains("SnapshotIsolation") && e.contains("WriteSerializable"))
        );
    }

    #[test]
    fn winning_commit_summary() {
        let w = WinningCommit::from_actions(
            7,
            &[
                info("DELETE", false),
                remove("a%20b.parquet"),
                add("a b.parquet"),
                add("c.parquet"),
                action(json!({"txn": {"appId": "app", "version": 3}})),
            ],
        );
        assert_eq!(w.version, 7);
        assert_eq!(w.operation.as_deref(), Some("DELETE"));
        assert!(!w.is_blind_append && !w.metadata_changed && !w.protocol_changed);
        assert!(w.replaced_dv("a b.parquet").is_some());
        assert!(w.replaced_dv("c.parquet").is_none());
        assert!(w.added_new_data());
        assert!(w.app_ids.contains("app"));
        // No commitInfo: not a blind append.
        assert!(!WinningCommit::from_actions(1, &[add("x")]).is_blind_append);
    }

    #[test]
    fn rule1_blind_appends_never_conflict() {
        for iso in BOTH {
            assert_eq!(
                check(&blind_append_txn(iso), &blind_append_winner()),
                Decision::Proceed
            );
            // Even a non-blind winner that adds and removes files.
            let w = winner(vec![
                info("DELETE", false),
                remove("old.parquet"),
                add("new.parquet"),
            ]);
            assert_eq!(check(&blind_append_txn(iso), &w), Decision::Proceed);
        }
    }

    #[test]
    fn rule2_added_files_that_should_have_been_read() {
        let whole = |iso| {
            delete_txn(
                iso,
                ReadSet::WholeTable,
                &[("a", FileChange::DeleteRows(rows(&[1])))],
            )
        };
        // Blind-append winner: conflict under Serializable only.
        let d = check(&whole(IsolationLevel::Serializable), &blind_append_winner());
        assert_eq!(
            rule_of(&d),
            Some((Rule::ConcurrentAppend, Some("new.parquet")))
        );
        assert_eq!(
            check(
                &whole(IsolationLevel::WriteSerializable),
                &blind_append_winner()
            ),
            Decision::Proceed
        );
        // ... and under WriteSerializable when this transaction changes metadata.
        let mut t = whole(IsolationLevel::WriteSerializable);
        t.metadata_changed = true;
        assert_eq!(
            rule_of(&check(&t, &blind_append_winner())).map(|r| r.0),
            Some(Rule::ConcurrentAppend)
        );
        // A winner that is not a blind append (UPDATE writing new files): both levels.
        let update = winner(vec![info("UPDATE", false), add("rewritten.parquet")]);
        for iso in BOTH {
            assert_eq!(
                rule_of(&check(&whole(iso), &update)),
                Some((Rule::ConcurrentAppend, Some("rewritten.parquet")))
            );
            // Not read (file read set without it): no conflict.
            let t = delete_txn(iso, files(&["a"]), &[]);
            assert_eq!(check(&t, &update), Decision::Proceed);
            // Added files with dataChange=false (compaction output) are no new data.
            let w = winner(vec![
                info("OPTIMIZE", false),
                compaction_add("compacted.parquet"),
            ]);
            assert_eq!(check(&whole(iso), &w), Decision::Proceed);
        }
    }

    #[test]
    fn rule2_row_level_form_hands_added_files_to_the_caller() {
        // An upserting MERGE (whole-table read) that checks added rows: the
        // UPDATE's new file comes back to be checked, the DV replacement of
        // a file it changes to be rebased; nothing is a conflict yet.
        let mut t = delete_txn(
            IsolationLevel::WriteSerializable,
            ReadSet::WholeTable,
            &[("a", FileChange::RewriteRows(rows(&[1])))],
        );
        t.checks_added_rows = true;
        let w = winner(vec![
            info("UPDATE", false),
            remove("a"),
            add("a"),
            add("rewritten.parquet"),
            compaction_add("compacted.parquet"),
        ]);
        let Decision::Rebase { files, added } = check(&t, &w) else {
            panic!("expected a rebase, got {:?}", check(&t, &w));
        };
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].path, "a");
        let added: Vec<&str> = added.iter().map(|a| a.path.as_str()).collect();
        assert_eq!(added, ["rewritten.parquet"]);
        // Only new files: checked, no rebase.
        let insert = winner(vec![info("MERGE", false), add("inserted.parquet")]);
        assert!(matches!(
            check(&t, &insert),
            Decision::Rebase { files, added } if files.is_empty() && added.len() == 1
        ));
        // Rules 3, 4 and 6 still conflict outright.
        let gone = winner(vec![info("DELETE", false), remove("b")]);
        assert_eq!(
            rule_of(&check(&t, &gone)),
            Some((Rule::ConcurrentDeleteRead, Some("b")))
        );
        // Without the flag, the same winner is rule 2's conflict.
        t.checks_added_rows = false;
        assert_eq!(
            rule_of(&check(&t, &insert)),
            Some((Rule::ConcurrentAppend, Some("inserted.parquet")))
        );
        let e = added_row_conflict(5, "inserted.parquet", "row with id = 3".into()).to_string();
        assert!(
            e.contains("ConcurrentAppend") && e.contains("id = 3"),
            "{e}"
        );
    }

    #[test]
    fn rule3_metadata_and_protocol_changes_conflict() {
        let meta = action(
            json!({"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}},
            "schemaString": "{}", "partitionColumns": [], "configuration": {}}}),
        );
        let proto = action(json!({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7}}));
        for iso in BOTH {
            let t = blind_append_txn(iso);
            assert_eq!(
                rule_of(&check(&t, &winner(vec![meta.clone()]))),
                Some((Rule::MetadataChanged, None))
            );
            assert_eq!(
                rule_of(&check(&t, &winner(vec![proto.clone()]))),
                Some((Rule::ProtocolChanged, None))
            );
            // Identity high-water marks only (an insert that handed out
            // identity values): no conflict for a transaction that leaves
            // the metadata alone, a conflict for one that changes it (it
            // would hand out the same values), as in Delta Spark.
            let mut ids = winner(vec![meta.clone()]);
            ids.identity_only_metadata = true;
            assert_eq!(check(&t, &ids), Decision::Proceed);
            let mut t = t.clone();
            t.metadata_changed = true;
            assert_eq!(
                rule_of(&check(&t, &ids)),
                Some((Rule::MetadataChanged, None))
            );
        }
    }

    #[test]
    fn rule4_removed_files_that_were_read_or_changed_conflict() {
        let w = winner(vec![info("DELETE", false), remove("a")]);
        for iso in BOTH {
            // Read only.
            let t = delete_txn(
                iso,
                files(&["a", "b"]),
                &[("b", FileChange::DeleteRows(rows(&[1])))],
            );
            assert_eq!(
                rule_of(&check(&t, &w)),
                Some((Rule::ConcurrentDeleteRead, Some("a")))
            );
            let t = delete_txn(iso, ReadSet::WholeTable, &[]);
            assert_eq!(
                rule_of(&check(&t, &w)),
                Some((Rule::ConcurrentDeleteRead, Some("a")))
            );
            // Changed (deleted rows, rewritten, removed whole).
            for c in [
                FileChange::DeleteRows(rows(&[1])),
                FileChange::RewriteRows(rows(&[1])),
                FileChange::WholeFile,
            ] {
                let t = delete_txn(iso, ReadSet::Nothing, &[("a", c)]);
                let d = check(&t, &w);
                assert_eq!(rule_of(&d), Some((Rule::ConcurrentDeleteDelete, Some("a"))));
                if let Decision::Conflict(r) = d {
                    assert!(r
                        .into_error()
                        .to_string()
                        .contains("removed by a concurrent commit"));
                }
            }
            // Neither read nor changed: no conflict.
            let t = delete_txn(
                iso,
                files(&["b"]),
                &[("b", FileChange::DeleteRows(rows(&[1])))],
            );
            assert_eq!(check(&t, &w), Decision::Proceed);
            // Paths compare percent-decoded.
            let w2 = winner(vec![info("DELETE", false), remove("x%20y")]);
            let t = delete_txn(iso, files(&["x y"]), &[]);
            assert_eq!(
                rule_of(&check(&t, &w2)),
                Some((Rule::ConcurrentDeleteRead, Some("x y")))
            );
        }
    }

    #[test]
    fn rule5_dv_replaced_by_both_is_rebased() {
        let w = winner(vec![info("DELETE", false), remove("a"), add("a")]);
        for iso in BOTH {
            let t = delete_txn(
                iso,
                ReadSet::WholeTable,
                &[("a", FileChange::DeleteRows(rows(&[1])))],
            );
            match check(&t, &w) {
                Decision::Rebase { files, .. } => {
                    assert_eq!(files.len(), 1);
                    assert_eq!(files[0].path, "a");
                    assert_eq!(files[0].winner_add.path, "a");
                    assert!(files[0].overlap_allowed);
                }
                d => panic!("expected a rebase, got {d:?}"),
            }
            // Only read, not changed: rows only went away, no conflict.
            let t = delete_txn(iso, ReadSet::WholeTable, &[]);
            assert_eq!(check(&t, &w), Decision::Proceed);
            // Removing the file as a whole cannot be rebased.
            let t = delete_txn(iso, ReadSet::Nothing, &[("a", FileChange::WholeFile)]);
            assert_eq!(
                rule_of(&check(&t, &w)),
                Some((Rule::ConcurrentDeleteDelete, Some("a")))
            );
            // Rewriting rows, or a winner that rewrote rows: overlap not allowed.
            let t = delete_txn(
                iso,
                ReadSet::Nothing,
                &[("a", FileChange::RewriteRows(rows(&[1])))],
            );
            assert!(
                matches!(check(&t, &w), Decision::Rebase { files, .. } if !files[0].overlap_allowed)
            );
            let upd = winner(vec![
                info("UPDATE", false),
                remove("a"),
                add("a"),
                add("copies"),
            ]);
            let t = delete_txn(
                iso,
                files(&["a"]),
                &[("a", FileChange::DeleteRows(rows(&[1])))],
            );
            assert!(
                matches!(check(&t, &upd), Decision::Rebase { files, .. } if !files[0].overlap_allowed)
            );
        }
    }

    #[test]
    fn rule5_rows_must_be_disjoint_from_the_winners_changes() {
        let old = rows(&[1, 2]);
        let new = rows(&[1, 2, 3, 4]);
        // Disjoint: fine, whether or not overlap is allowed.
        for allowed in [false, true] {
            assert!(check_rows_disjoint(5, "a", &old, &new, &rows(&[5, 6]), allowed).is_ok());
            // Rows the winner had already deleted before are not its change.
            assert!(check_rows_disjoint(5, "a", &old, &new, &rows(&[1]), allowed).is_ok());
        }
        // Our rows meet a row the winner deleted: conflict unless both only delete.
        let err = check_rows_disjoint(5, "a", &old, &new, &rows(&[4, 9]), false).err();
        assert_eq!(
            err.as_ref().map(|r| (r.rule, r.path.as_deref())),
            Some((Rule::ConcurrentRowChange, Some("a")))
        );
        assert!(err.is_some_and(|r| r.detail.contains("row 4")));
        assert!(check_rows_disjoint(5, "a", &old, &new, &rows(&[4, 9]), true).is_ok());
        // The winner brought rows back: never rebased.
        for allowed in [false, true] {
            let err = check_rows_disjoint(5, "a", &old, &rows(&[1]), &rows(&[7]), allowed).err();
            assert!(
                err.is_some_and(
                    |r| r.rule == Rule::ConcurrentRowChange && r.detail.contains("row 2")
                )
            );
        }
        // Through RebaseFile, as the crate error.
        let w = winner(vec![info("MERGE", false), remove("a"), add("a")]);
        let t = delete_txn(
            IsolationLevel::WriteSerializable,
            ReadSet::Nothing,
            &[("a", FileChange::RewriteRows(rows(&[3])))],
        );
        let Decision::Rebase { files, .. } = check(&t, &w) else {
            panic!("expected a rebase")
        };
        let e = files[0]
            .check_rows(5, &old, &new, &rows(&[3]))
            .err()
            .map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("version 5") && e.contains("ConcurrentRowChange (a)")));
    }

    #[test]
    fn rule6_same_app_id_conflicts() {
        let w = winner(vec![
            info("WRITE", true),
            add("n"),
            action(json!({"txn": {"appId": "etl", "version": 4}})),
        ]);
        for iso in BOTH {
            let mut t = blind_append_txn(iso);
            assert_eq!(check(&t, &w), Decision::Proceed);
            t.app_ids.insert("other".to_string());
            assert_eq!(check(&t, &w), Decision::Proceed);
            t.app_ids.insert("etl".to_string());
            assert_eq!(
                rule_of(&check(&t, &w)),
                Some((Rule::ConcurrentTransaction, Some("etl")))
            );
        }
    }
}

/// Property test: concurrent transactions over an in-memory table model,
/// committed through the checker, leave the rows of some serial order.
#[cfg(test)]
mod interleavings {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    type Row = (u64, i64); // (row id, value)

    #[derive(Debug, Clone)]
    enum Op {
        /// Blind append of a new file with these values.
        Append(Vec<i64>),
        /// DELETE WHERE value BETWEEN lo AND hi.
        Delete { lo: i64, hi: i64 },
        /// UPDATE SET value = value + 100 WHERE value BETWEEN lo AND hi: the
        /// rows are deleted (DV) and rewritten into a new file.
        Update { lo: i64, hi: i64 },
    }

    #[derive(Debug, Clone)]
    struct File {
        rows: Vec<Row>,
        dv: RoaringTreemap,
    }
    type State = BTreeMap<String, File>;

    fn live(state: &State) -> BTreeSet<Row> {
        let mut out = BTreeSet::new();
        for f in state.values() {
            for (pos, row) in (0u64..).zip(&f.rows) {
                if !f.dv.contains(pos) {
                    out.insert(*row);
                }
            }
        }
        out
    }

    fn append_rows(txn: usize, vals: &[i64]) -> Vec<Row> {
        (0u64..)
            .zip(vals)
            .map(|(k, v)| (1000 * (txn as u64 + 1) + k, *v))
            .collect()
    }

    /// One op applied serially to a set of live rows.
    fn apply_serially(rows: &mut BTreeSet<Row>, txn: usize, op: &Op) {
        match op {
            Op::Append(vals) => rows.extend(append_rows(txn, vals)),
            Op::Delete { lo, hi } => rows.retain(|(_, v)| !(lo..=hi).contains(&v)),
            Op::Update { lo, hi } => {
                *rows = rows
                    .iter()
                    .map(|&(id, v)| {
                        if (lo..=hi).contains(&&v) {
                            (id, v + 100)
                        } else {
                            (id, v)
                        }
                    })
                    .collect();
            }
        }
    }

    fn action(v: Value) -> Action {
        match Action::from_value(v, "model", 1) {
            Ok(Some(a)) => a,
            other => panic!("bad model action: {other:?}"),
        }
    }
    fn add(path: &str) -> Action {
        action(
            json!({"add": {"path": path, "partitionValues": {}, "size": 1,
            "modificationTime": 0, "dataChange": true}}),
        )
    }
    fn remove(path: &str) -> Action {
        action(json!({"remove": {"path": path, "deletionTimestamp": 0, "dataChange": true}}))
    }

    /// A transaction planned against the snapshot it read.
    struct Plan {
        ctx: TxnContext,
        /// path -> (rows changed, base DV)
        changes: BTreeMap<String, (RoaringTreemap, RoaringTreemap)>,
        new_files: Vec<(String, Vec<Row>)>,
        operation: &'static str,
    }

    fn plan(txn: usize, op: &Op, read_version: u64, state: &State, iso: IsolationLevel) -> Plan {
        let mut p = Plan {
            ctx: TxnContext {
                isolation: iso,
                read_version,
                ..TxnContext::default()
            },
            changes: BTreeMap::new(),
            new_files: Vec::new(),
            operation: "WRITE",
        };
        let (lo, hi, rewrite) = match op {
            Op::Append(vals) => {
                p.ctx.blind_append = true;
                p.new_files
                    .push((format!("append-{txn}.parquet"), append_rows(txn, vals)));
                return p;
            }
            Op::Delete { lo, hi } => (*lo, *hi, false),
            Op::Update { lo, hi } => (*lo, *hi, true),
        };
        p.operation = if rewrite { "UPDATE" } else { "DELETE" };
        p.ctx.reads = ReadSet::WholeTable;
        let mut copies = Vec::new();
        for (path, f) in state {
            let mut rows = RoaringTreemap::new();
            for (pos, &(id, v)) in (0u64..).zip(&f.rows) {
                if !f.dv.contains(pos) && (lo..=hi).contains(&v) {
                    rows.insert(pos);
                    copies.push((id, v + 100));
                }
            }
            if rows.is_empty() {
                continue;
            }
            let change = if rewrite {
                FileChange::RewriteRows(rows.clone())
            } else {
                FileChange::DeleteRows(rows.clone())
            };
            p.ctx.changes.insert(path.clone(), change);
            p.changes.insert(path.clone(), (rows, f.dv.clone()));
        }
        if rewrite && !copies.is_empty() {
            p.new_files.push((format!("update-{txn}.parquet"), copies));
        }
        p
    }

    struct Table {
        states: Vec<State>,
        log: Vec<Vec<Action>>,
    }

    /// Commit `p` after whatever won meanwhile: `Ok(true)` committed,
    /// `Ok(false)` conflict; `Err` is a checker failure the test reports.
    fn commit(table: &mut Table, p: &mut Plan) -> std::result::Result<bool, String> {
        let current = table.states.len() as u64 - 1;
        for v in p.ctx.read_version + 1..=current {
            let w = WinningCommit::from_actions(v, &table.log[v as usize]);
            match check(&p.ctx, &w) {
                Decision::Proceed => {}
                Decision::Conflict(_) => return Ok(false),
                Decision::Rebase { files, .. } => {
                    for f in files {
                        let old = &table.states[v as usize - 1][&f.path].dv;
                        let new = &table.states[v as usize][&f.path].dv;
                        let Some((ours, base)) = p.changes.get_mut(&f.path) else {
                            return Err(format!("rebase of {} that we do not change", f.path));
                        };
                        if f.check_rows(v, old, new, ours).is_err() {
                            return Ok(false);
                        }
                        *base = new.clone();
                    }
                }
            }
        }
        let mut state = table.states[current as usize].clone();
        let mut actions = vec![action(json!({"commitInfo": {
            "operation": p.operation, "isBlindAppend": p.ctx.blind_append}}))];
        for (path, (rows, base)) in &p.changes {
            let Some(f) = state.get_mut(path) else {
                return Err(format!(
                    "{path} is gone but the checker let the commit through"
                ));
            };
            if &f.dv != base {
                return Err(format!("{path}: DV changed but the checker did not rebase"));
            }
            f.dv = base | rows;
            actions.push(remove(path));
            actions.push(add(path));
        }
        for (path, rows) in &p.new_files {
            state.insert(
                path.clone(),
                File {
                    rows: rows.clone(),
                    dv: RoaringTreemap::new(),
                },
            );
            actions.push(add(path));
        }
        table.states.push(state);
        table.log.push(actions);
        Ok(true)
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            prop::collection::vec(0i64..12, 1..4).prop_map(Op::Append),
            (0i64..12, 0i64..4).prop_map(|(lo, n)| Op::Delete { lo, hi: lo + n }),
            (0i64..12, 0i64..3).prop_map(|(lo, n)| Op::Update { lo, hi: lo + n }),
        ]
    }

    fn scenario() -> impl Strategy<Value = (Vec<Op>, Vec<usize>, bool)> {
        prop::collection::vec(op(), 2..=4).prop_flat_map(|ops| {
            let events: Vec<usize> = (0..ops.len()).flat_map(|i| [i, i]).collect();
            (Just(ops), Just(events).prop_shuffle(), any::<bool>())
        })
    }

    fn permutations(items: &[usize]) -> Vec<Vec<usize>> {
        if items.len() <= 1 {
            return vec![items.to_vec()];
        }
        let mut out = Vec::new();
        for i in 0..items.len() {
            let mut rest = items.to_vec();
            let first = rest.remove(i);
            for mut p in permutations(&rest) {
                p.insert(0, first);
                out.push(p);
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn concurrent_commits_match_a_serial_order((ops, events, serializable) in scenario()) {
            let iso = if serializable { IsolationLevel::Serializable } else { IsolationLevel::WriteSerializable };
            let initial: State = [("f0", 0u64..6), ("f1", 6..12)]
                .into_iter()
                .map(|(p, ids)| (p.to_string(), File {
                    rows: ids.map(|id| (id, (id % 10) as i64)).collect(),
                    dv: RoaringTreemap::new(),
                }))
                .collect();
            let mut table = Table {
                states: vec![initial.clone()],
                log: vec![initial.keys().map(|p| add(p)).collect()],
            };
            let mut plans: Vec<Option<Plan>> = (0..ops.len()).map(|_| None).collect();
            let mut committed = Vec::new();
            for txn in events {
                match plans[txn].take() {
                    None => {
                        let v = table.states.len() as u64 - 1;
                        plans[txn] = Some(plan(txn, &ops[txn], v, &table.states[v as usize], iso));
                    }
                    Some(mut p) => {
                        if commit(&mut table, &mut p).map_err(TestCaseError::fail)? {
                            committed.push((txn, p));
                        }
                    }
                }
            }
            let Some(last) = table.states.last() else { return Err(TestCaseError::fail("no state")) };
            let result = live(last);
            // A row a committed DELETE deleted never comes back.
            for (_, p) in committed.iter().filter(|(t, _)| matches!(ops[*t], Op::Delete { .. })) {
                for (path, (rows, _)) in &p.changes {
                    for pos in rows {
                        let row = last.get(path).and_then(|f| f.rows.get(pos as usize));
                        prop_assert!(row.is_some_and(|r| !result.contains(r)), "deleted row {row:?} is back");
                    }
                }
            }
            // Some serial order of the committed transactions gives the same rows;
            // under Serializable, the commit order itself.
            let order: Vec<usize> = committed.iter().map(|(t, _)| *t).collect();
            let serial = |order: &[usize]| {
                let mut rows = live(&initial);
                for &t in order {
                    apply_serially(&mut rows, t, &ops[t]);
                }
                rows
            };
            if serializable {
                prop_assert_eq!(serial(&order), result.clone(), "commit order {:?}", order);
            }
            prop_assert!(
                permutations(&order).iter().any(|o| serial(o) == result),
                "no serial order of {:?} gives {:?}", order, result
            );
        }
    }
}
