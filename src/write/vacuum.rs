//! VACUUM: delete the files under the table root that no version still
//! inside the retention period can read, as Delta Spark's (full) VACUUM does.
//!
//! A file is kept when it is
//!
//! * a live data file, or the DV file (`u` descriptor) of a live file;
//! * a removed file, or its DV file, whose `remove` is newer than the cutoff
//!   (`now − retention`): readers of versions still in retention need it;
//! * newer than the cutoff itself (a writer may be about to commit it);
//! * in a hidden directory (a name starting with `_` or `.`: `_delta_log`,
//!   …), except `_change_data` and partition directories (`col=value`),
//!   which VACUUM cleans like the rest.
//!
//! Everything else under the root goes: data files of expired removes, DV
//! files nothing references (including those of files rewritten by PURGE),
//! change data files of expired commits, orphans of failed writes. An absolute
//! (`p`) DV is never touched: it lives outside the table. The retention is the
//! table's `delta.deletedFileRetentionDuration` (default one week); a shorter
//! one is refused unless `enforce_retention_duration` is off. A real run is
//! recorded as Delta Spark records it, by a `VACUUM START` commit before the
//! deletes and a `VACUUM END` commit after them; a dry run only lists.
//!
//! FULL mode (the default, Delta Spark's) lists the whole tree once (a local
//! table with parallel directory walks, hidden directories not descended);
//! Iceberg metadata beside the log (UniForm, `metadata/`): its snapshots
//! older than the cutoff but the current one are expired first (a real run
//! writes the next `vN.metadata.json` without them), as the data files they
//! read may go; the files the remaining snapshots read (metadata files of
//! the log, `version-hint.text`, manifest lists, manifests, Puffin files)
//! are kept, and other `metadata/` files older than the cutoff go. When the
//! Iceberg metadata cannot be read, `metadata/` is left alone.
//!
//! LITE mode (deltalake's default, Delta Spark's `VACUUM LITE`) lists
//! nothing and takes only the files and DV files of expired tombstones the
//! log still holds, so it misses orphans of failed writes.

use std::collections::HashSet;

use serde_json::{json, Map, Value};

use super::now_ms;
use super::transaction::{FixedActions, Transaction};
use crate::error::{Error, Result};
use crate::log::features::properties::deleted_file_retention_ms;
use crate::log::path::normalize_path;
use crate::table::snapshot::Snapshot;

/// The directory of change data files: not hidden from VACUUM.
const CHANGE_DATA_DIR: &str = crate::log::cdf::CHANGE_DATA_DIR;

/// How VACUUM runs.
#[derive(Debug, Clone)]
pub struct VacuumOptions {
    /// Keep files removed less than this many hours ago (default: the table's
    /// `delta.deletedFileRetentionDuration`).
    pub retention_hours: Option<f64>,
    /// Only list what would be deleted.
    pub dry_run: bool,
    /// Refuse a retention shorter than the table's.
    pub enforce_retention_duration: bool,
    /// The time VACUUM runs at (ms since the epoch); `None`: now.
    pub now_ms: Option<i64>,
    /// LITE (deltalake's default, Delta Spark's `VACUUM LITE`): only the
    /// files of expired tombstones in the log, without listing storage
    /// (orphans of failed writes are not found). FULL (the default, Delta
    /// Spark's): everything under the root no version in retention reads.
    pub lite: bool,
    pub engine_info: String,
}

impl Default for VacuumOptions {
    fn default() -> Self {
        VacuumOptions {
            retention_hours: None,
            dry_run: true,
            enforce_retention_duration: true,
            now_ms: None,
            lite: false,
            engine_info: super::ENGINE_INFO.to_string(),
        }
    }
}

/// What VACUUM found, and did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VacuumResult {
    /// Files deleted (or, in a dry run, to delete), relative to the root, sorted.
    pub files: Vec<String>,
    /// Their total size in bytes.
    pub bytes: u64,
    pub dry_run: bool,
    /// The versions of the VACUUM START and END commits (real runs).
    pub start_version: Option<u64>,
    pub end_version: Option<u64>,
    /// Iceberg snapshots (UniForm metadata) expired, or that would be.
    pub iceberg_snapshots_expired: usize,
}

/// Whether a directory name is hidden from VACUUM (see the module docs).
fn is_hidden_dir(name: &str, partition_dirs: &[String]) -> bool {
    (name.starts_with('_') || name.starts_with('.'))
        && name != CHANGE_DATA_DIR
        && !partition_dirs
            .iter()
            .any(|p| name.starts_with(&format!("{p}=")))
}

/// Whether a file name is hidden (Hadoop's checksum and temporary files are
/// left alone, as Delta Spark leaves them).
fn is_hidden_file(name: &str) -> bool {
    name.starts_with('_') || name.starts_with('.')
}

/// The files VACUUM must keep: live files and unexpired tombstones, and
/// their relative DV files (paths decoded, relative to the root).
fn valid_files(snapshot: &Snapshot, cutoff: i64) -> Result<HashSet<String>> {
    let mut keep: HashSet<String> = snapshot.live_paths().into_iter().collect();
    for (_, d) in snapshot.dv_descriptors()? {
        if let Some(p) = d.relative_path() {
            keep.insert(p);
        }
    }
    for r in snapshot.tombstones() {
        if r.deletion_timestamp.unwrap_or(0) < cutoff {
            continue;
        }
        if let Some(p) = r.deletion_vector.as_ref().and_then(|d| d.relative_path()) {
            keep.insert(p);
        }
        keep.insert(normalize_path(&r.path));
    }
    Ok(keep)
}

/// LITE mode's candidates: the files (and DV files) of expired tombstones
/// the log still holds, without listing storage.
fn expired_tombstone_files(snapshot: &Snapshot, cutoff: i64) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for r in snapshot.tombstones() {
        if r.deletion_timestamp.unwrap_or(0) >= cutoff {
            continue;
        }
        let path = normalize_path(&r.path);
        if path.contains("://") || path.starts_with('/') {
            continue; // outside the table (absolute): never VACUUM's
        }
        out.push((
            path,
            r.size.and_then(|s| u64::try_from(s).ok()).unwrap_or(0),
        ));
        if let Some(dv) = r.deletion_vector.as_ref() {
            if let Some(p) = dv.relative_path() {
                out.push((p, u64::from(dv.size_in_bytes())));
            }
        }
    }
    out
}

/// The retention in ms, checked against the table's.
fn retention_ms(snapshot: &Snapshot, options: &VacuumOptions) -> Result<(Option<i64>, i64)> {
    let table = deleted_file_retention_ms(snapshot.metadata())?;
    let Some(hours) = options.retention_hours else {
        return Ok((None, table));
    };
    if !hours.is_finite() || hours < 0.0 {
        return Err(Error::InvalidArgument(format!(
            "retention_hours must be a number of hours >= 0, not {hours}"
        )));
    }
    // Delta Spark rounds the hours to a whole number.
    let ms = (hours.round() as i64).saturating_mul(3_600_000);
    if options.enforce_retention_duration && ms < table {
        return Err(Error::InvalidArgument(format!(
            "VACUUM with a retention of {hours} hours is refused: it is shorter than the \
             table's delta.deletedFileRetentionDuration ({} hours), so readers of recent \
             versions, and writers about to commit, could lose files. If you are sure, pass \
             enforce_retention_duration=False",
            table / 3_600_000
        )));
    }
    Ok((Some(ms), table))
}

/// VACUUM `snapshot`'s table (see the module docs). `progress(deleted,
/// total)` is called as files are deleted.
pub async fn vacuum(
    snapshot: &Snapshot,
    options: &VacuumOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<VacuumResult> {
    features_check(snapshot)?;
    let (specified, table_retention) = retention_ms(snapshot, options)?;
    let now = options.now_ms.unwrap_or_else(now_ms);
    let cutoff = now.saturating_sub(specified.unwrap_or(table_retention));
    let mut keep = valid_files(snapshot, cutoff)?;
    let store = snapshot.store();
    // Iceberg metadata (UniForm): snapshots older than the cutoff expire with
    // the data files they read; the files of the others stay. When it cannot
    // be read, nothing under metadata/ is touched.
    let iceberg = super::iceberg::vacuum_iceberg(snapshot, cutoff, options.dry_run).await;
    let mut iceberg_snapshots_expired = 0;
    let protect_iceberg = match iceberg {
        Ok(Some(v)) => {
            keep.extend(v.keep);
            iceberg_snapshots_expired = v.expired_snapshots;
            false
        }
        Ok(None) => false,
        Err(_) => true,
    };
    let iceberg_dir = format!("{}/", crate::iceberg::convert::METADATA_DIR);
    let mut partition_dirs: Vec<String> = Vec::new();
    for c in &snapshot.metadata().partition_columns {
        if let Some(f) = snapshot.schema().field(c) {
            partition_dirs.push(f.physical_name(snapshot.column_mapping())?.to_string());
        }
    }
    // (relative path, size): their store paths are made only for a real run.
    let mut doomed: Vec<(String, u64)> = Vec::new();
    if options.lite {
        let mut seen = HashSet::new();
        for (path, size) in expired_tombstone_files(snapshot, cutoff) {
            if !keep.contains(&path) && seen.insert(path.clone()) {
                doomed.push((path, size));
            }
        }
    } else {
        let listed = store
            .list_files(
                |name, partition_dirs| !is_hidden_dir(name, partition_dirs),
                partition_dirs,
            )
            .await?;
        for f in listed {
            let name = f.relative.rsplit('/').next().unwrap_or(&f.relative);
            if is_hidden_file(name) {
                continue;
            }
            if keep.contains(&f.relative) || f.last_modified_ms >= cutoff {
                continue;
            }
            if protect_iceberg && f.relative.starts_with(&iceberg_dir) {
                continue;
            }
            doomed.push((f.relative, f.size));
        }
    }
    doomed.sort_by(|a, b| a.0.cmp(&b.0));
    let bytes: u64 = doomed.iter().map(|d| d.1).sum();
    let mut result = VacuumResult {
        files: doomed.iter().map(|d| d.0.clone()).collect(),
        bytes,
        dry_run: options.dry_run,
        iceberg_snapshots_expired,
        ..Default::default()
    };
    if options.dry_run {
        return Ok(result);
    }
    let mut start_parameters = Map::new();
    start_parameters.insert(
        "retentionCheckEnabled".into(),
        json!(options.enforce_retention_duration),
    );
    if let Some(ms) = specified {
        start_parameters.insert("specifiedRetentionMillis".into(), json!(ms));
    }
    start_parameters.insert("defaultRetentionMillis".into(), json!(table_retention));
    let mut start_metrics = Map::new();
    start_metrics.insert("numFilesToDelete".into(), json!(doomed.len().to_string()));
    start_metrics.insert("sizeOfDataToDelete".into(), json!(bytes.to_string()));
    result.start_version = record(
        snapshot,
        "VACUUM START",
        start_parameters,
        start_metrics,
        options,
    )
    .await?;
    let total = doomed.len();
    let dirs: HashSet<&str> = result
        .files
        .iter()
        .filter_map(|f| f.rsplit_once('/').map(|(d, _)| d))
        .collect();
    let num_dirs = dirs.len() + 1;
    let deleted = match super::fail_point("vacuum_delete") {
        Err(e) => Err(e),
        Ok(()) => {
            store
                .delete_many(doomed.iter().map(|d| store.path(&d.0)).collect(), &|n| {
                    progress(n, total)
                })
                .await
        }
    };
    let latest = Snapshot::load(store.clone(), None).await?;
    let (status, metrics) = match &deleted {
        Ok(n) => {
            let mut m = Map::new();
            m.insert("numDeletedFiles".into(), json!(n.to_string()));
            m.insert("numVacuumedDirectories".into(), json!(num_dirs.to_string()));
            ("COMPLETED", m)
        }
        Err(_) => ("FAILED", Map::new()),
    };
    let mut end_parameters = Map::new();
    end_parameters.insert("status".into(), json!(status));
    result.end_version = record(&latest, "VACUUM END", end_parameters, metrics, options).await?;
    deleted?;
    Ok(result)
}

/// VACUUM commits (only `commitInfo`): the table's writer features must let
/// deltadv write commits at all, as an append would.
fn features_check(snapshot: &Snapshot) -> Result<()> {
    crate::log::features::check_write(
        snapshot.protocol(),
        snapshot.metadata(),
        crate::log::features::WriteOperation::Append,
    )
}

/// Commit an event (only `commitInfo`) on the table.
async fn record(
    snapshot: &Snapshot,
    operation: &str,
    parameters: Map<String, Value>,
    metrics: Map<String, Value>,
    options: &VacuumOptions,
) -> Result<Option<u64>> {
    let mut changes = FixedActions {
        actions: Vec::new(),
        metrics,
    };
    let outcome = Transaction::new(snapshot, operation)?
        .with_parameters(parameters)
        .with_engine_info(options.engine_info.clone())
        .allow_empty()
        .blind_append()
        .commit(&mut changes)
        .await?;
    Ok(outcome.version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_directories_as_delta_spark_sees_them() {
        let parts = vec!["_p".to_string()];
        assert!(is_hidden_dir("_delta_log", &parts));
        assert!(is_hidden_dir(".hidden", &parts));
        assert!(!is_hidden_dir("_change_data", &parts));
        assert!(!is_hidden_dir("_p=1", &parts));
        assert!(!is_hidden_dir("part=1", &parts));
        assert!(is_hidden_file(".part-0.parquet.crc"));
        assert!(!is_hidden_file("deletion_vector_1.bin"));
    }
}
