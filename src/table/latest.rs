//! Freshness: whether a loaded snapshot is still the table's latest version.

use std::sync::Arc;

use crate::error::Result;
use crate::log::path::LogPath;
use crate::table::snapshot::{list_log, Snapshot};

/// Whether a commit after `version` is among `listed` (commit versions of a
/// log listing): the decision, apart from the listing.
pub fn is_stale(version: u64, listed: impl IntoIterator<Item = u64>) -> bool {
    listed.into_iter().any(|v| v > version)
}

/// The table's latest snapshot: `loaded` itself when no commit came after it
/// (one LIST of the log, from its version on), else a fresh load.
pub async fn latest_snapshot(loaded: &Arc<Snapshot>) -> Result<Arc<Snapshot>> {
    let version = loaded.version();
    let after = LogPath::Commit(version).file_name();
    let files = list_log(loaded.store(), Some(&after)).await?;
    let commits = files.iter().filter(|f| f.is_commit()).map(|f| f.version);
    if is_stale(version, commits) {
        return Ok(Arc::new(
            Snapshot::load(loaded.store().clone(), None).await?,
        ));
    }
    Ok(loaded.clone())
}

#[cfg(test)]
mod tests {
    use super::is_stale;

    #[test]
    fn stale_only_when_a_later_commit_is_listed() {
        assert!(!is_stale(3, []));
        assert!(!is_stale(3, [2, 3]));
        assert!(is_stale(3, [3, 4]));
    }
}
