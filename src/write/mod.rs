//! Writes. Every commit goes through one [`transaction::Transaction`]: an
//! operation (create, append, DELETE, copy-on-write, enabling DVs, and every
//! later one) only says what it changes ([`transaction::Changes`]); the
//! transaction assembles `commitInfo`, in-commit timestamps and row ids,
//! commits with put-if-absent, retries and rebases over concurrent commits,
//! and writes the checkpoint that falls due.
//!
//! Order of effects, for crash safety: DV files are written first (new,
//! uniquely named objects that nothing references yet), then the commit file
//! `_delta_log/<version>.json` is created with put-if-absent. A failure before
//! the commit leaves the table as it was, with at most an orphan DV file for
//! VACUUM; a failure after it leaves the committed version, complete.
//!
//! [`conflict`] decides, without I/O, whether a transaction that lost the race
//! for a version may proceed, must rebase row-level changes, or conflicts.
//!
//! Maintenance: [`optimize`] (REORG PURGE, OPTIMIZE), [`vacuum`], [`restore`],
//! [`drop_feature`] (dropping `deletionVectors`) and [`manifest`] (symlink
//! manifests) commit through the same transaction.
//!
//! | module            | what it holds                                                        |
//! |-------------------|----------------------------------------------------------------------|
//! | [`transaction`]   | the one commit path: actions, `commitInfo`, ICT, row ids, retries, rebases, checkpoints |
//! | [`conflict`]      | the pure conflict checker (winning commit + reads/changes → decision) |
//! | [`app_txn`]       | application transactions (`txn`): idempotent writes, streaming batches (`STREAMING UPDATE`) |
//! | [`commit`]        | commit files: put-if-absent, reading a winning commit back           |
//! | [`data`]          | Arrow batches → parquet data files + add actions with Delta stats     |
//! | [`files`], [`create`], [`append`] | writing data files then committing them: new tables, appends, schema evolution |
//! | [`overwrite`]     | overwrite commits: every file removed, or the rows of a predicate (replaceWhere) |
//! | [`dv_files`]      | new DVs: inline or packed into DV files (DELETE, UPDATE, MERGE)       |
//! | [`row_deletes`]   | rows deleted from files: new DV = old ∪ rows, remove/add pairs, rebases (DELETE, UPDATE, MERGE) |
//! | [`delete`]        | DELETE: rows found by index or predicate; executor-prepared deletes committed |
//! | [`cow`]           | copy-on-write rewrites (tables without DVs)                           |
//! | [`changes`]       | the change stream of UPDATE/MERGE: `ChangeWriter`, `ChangeTask`, `commit_changes` |
//! | [`update`]        | UPDATE in this process                                                |
//! | [`merge`]         | MERGE: the rules ([`merge::plan`], shared with Spark) and the join    |
//! | [`metrics`]       | operation metrics as Delta Spark names them                           |
//! | [`cluster`]       | OPTIMIZE of a clustered table: files to recluster, Hilbert order over range ids |
//! | [`optimize`], [`vacuum`], [`restore`], [`drop_feature`], [`manifest`] | maintenance |
//! | [`checkpoint`]    | checkpoint files written after a commit                               |
//! | [`iceberg`]       | Iceberg v3 metadata beside the log (UniForm with DVs): `sync_iceberg` |
//!
//! Data files, like DV files, are new uniquely named objects until a commit
//! references them; [`files`] removes the files of a commit that failed.

pub mod app_txn;
pub mod append;
pub mod changes;
pub mod checkpoint;
pub mod cluster;
pub mod commit;
pub mod conflict;
pub mod cow;
pub mod create;
pub mod data;
pub mod delete;
pub mod drop_feature;
pub mod dv_files;
pub mod files;
pub mod iceberg;
pub mod manifest;
pub mod merge;
pub mod metrics;
pub mod optimize;
pub mod overwrite;
pub mod properties;
pub mod restore;
pub mod row_deletes;
pub mod transaction;
pub mod update;
pub mod vacuum;

use crate::error::{Error, Result};

/// Files read at once when DELETE, UPDATE or MERGE look for matching rows,
/// at the least (object stores want a few requests in flight even on one
/// core); see [`read_concurrency`].
pub(crate) const READ_CONCURRENCY: usize = 4;

/// Files read at once when DELETE, UPDATE or MERGE look for matching rows
/// (each decoded on a runtime worker): the threads deltadv works with
/// ([`crate::io::num_threads`]), at least [`READ_CONCURRENCY`].
pub(crate) fn read_concurrency() -> usize {
    crate::io::num_threads().max(READ_CONCURRENCY)
}

/// The live files of `snapshot` by (URL-decoded) path.
pub(crate) fn live_files(
    snapshot: &crate::table::snapshot::Snapshot,
) -> Result<std::collections::HashMap<String, crate::table::snapshot::LiveFile>> {
    Ok(snapshot
        .files()?
        .into_iter()
        .map(|f| (f.path.clone(), f))
        .collect())
}

/// Milliseconds since the epoch (commit and action timestamps).
pub(crate) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// `commitInfo.engineInfo` of every commit deltadv writes.
pub const ENGINE_INFO: &str = concat!("deltadv/", env!("CARGO_PKG_VERSION"));

/// Environment variable naming fault-injection points (comma separated), for
/// tests: `dv_write`, `data_write`, `commit_put`, `after_commit`,
/// `vacuum_delete`. Read once per process, at
/// the first write; [`set_fault_points`] replaces the set afterwards.
pub const FAIL_AT_ENV: &str = "DELTADV_FAIL_AT";

/// The armed fault points: from [`FAIL_AT_ENV`] once, then [`set_fault_points`].
fn fault_points() -> &'static std::sync::Mutex<Vec<String>> {
    static POINTS: std::sync::OnceLock<std::sync::Mutex<Vec<String>>> = std::sync::OnceLock::new();
    POINTS.get_or_init(|| {
        std::sync::Mutex::new(parse_points(
            &std::env::var(FAIL_AT_ENV).unwrap_or_default(),
        ))
    })
}

fn parse_points(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// Arm fault-injection points for tests (comma separated; "" disarms all).
pub fn set_fault_points(points: &str) {
    let mut armed = match fault_points().lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    *armed = parse_points(points);
}

/// Fail here if this fault point is armed.
pub(crate) fn fail_point(name: &str) -> Result<()> {
    let armed = match fault_points().lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    if armed.iter().any(|p| p == name) {
        return Err(Error::Io {
            path: format!("<fault injected at {name}>"),
            source: std::io::Error::other(format!("fault point {name} armed")),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_points_arm_and_disarm() {
        set_fault_points(" commit_put , dv_write");
        assert!(fail_point("commit_put").is_err());
        assert!(fail_point("dv_write").is_err());
        assert!(fail_point("after_commit").is_ok());
        set_fault_points("");
        assert!(fail_point("commit_put").is_ok());
    }
}
