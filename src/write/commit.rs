//! Commit files: create `_delta_log/<version>.json` only if absent (atomic
//! create on local disk, conditional PUT on S3/Azure/GCS), and read a
//! winning commit back to check it for conflicts.

use bytes::Bytes;

use super::fail_point;
use crate::error::{Error, Result};
use crate::io::TableStore;
use crate::log::actions::{parse_commit, Action};
use crate::log::path::LogPath;

/// `_delta_log/<version>.json` relative to the table root.
pub fn commit_path(version: u64) -> String {
    LogPath::commit(version).relative_path()
}

/// The bytes of a commit file: one action per line.
pub fn encode(actions: &[Action]) -> Result<Bytes> {
    let mut out = String::new();
    for a in actions {
        out.push_str(&a.to_json_line()?);
        out.push('\n');
    }
    Ok(Bytes::from(out))
}

/// Try to create commit `version`. `Ok(false)`: another writer got there first.
pub async fn try_commit(store: &TableStore, version: u64, actions: &[Action]) -> Result<bool> {
    let bytes = encode(actions)?;
    fail_point("commit_put")?;
    store
        .put_if_absent(&store.path(&commit_path(version)), bytes)
        .await
}

/// The actions of commit `version`.
pub async fn read_commit(store: &TableStore, version: u64) -> Result<Vec<Action>> {
    let rel = commit_path(version);
    let bytes = store.get(&store.path(&rel)).await?;
    parse_commit(&bytes, &rel)
}

/// The error for a lost race that cannot be rebased.
pub fn conflict(version: u64, detail: impl Into<String>) -> Error {
    Error::Conflict {
        version,
        detail: detail.into(),
    }
}
