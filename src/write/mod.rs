//! Writes: commits with put-if-absent and conflict checks, and deletes that
//! produce deletion vectors (merge-on-read).
//!
//! Order of effects, for crash safety: DV files are written first (new,
//! uniquely named objects that nothing references yet), then the commit file
//! `_delta_log/<version>.json` is created with put-if-absent. A failure before
//! the commit leaves the table as it was, with at most an orphan DV file for
//! VACUUM; a failure after it leaves the committed version, complete.
//!
//! [`conflict`] decides, without I/O, whether a transaction that lost the race
//! for a version may proceed, must rebase row-level changes, or conflicts.

pub mod checkpoint;
pub mod commit;
pub mod conflict;
pub mod cow;
pub mod delete;

use crate::error::{Error, Result};

/// `commitInfo.engineInfo` of every commit deltadv writes.
pub const ENGINE_INFO: &str = concat!("deltadv/", env!("CARGO_PKG_VERSION"));

/// Environment variable naming fault-injection points (comma separated), for
/// tests: `dv_write`, `commit_put`, `after_commit`.
pub const FAIL_AT_ENV: &str = "DELTADV_FAIL_AT";

/// Fail here if the fault-injection variable names this point.
pub(crate) fn fail_point(name: &str) -> Result<()> {
    match std::env::var(FAIL_AT_ENV) {
        Ok(v) if v.split(',').any(|p| p.trim() == name) => Err(Error::Io {
            path: format!("<fault injected at {name}>"),
            source: std::io::Error::other(format!("{FAIL_AT_ENV}={v}")),
        }),
        _ => Ok(()),
    }
}
