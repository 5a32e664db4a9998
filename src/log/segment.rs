//! Which log files make up a snapshot: the newest usable checkpoint at or
//! below the wanted version, then every commit after it, gap-free. File names
//! are parsed by [`crate::log::path`].

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::log::path::{CheckpointFormat, LogPath};

/// One file in `_delta_log`, as listed: a commit, checkpoint (any kind) or
/// compaction file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    /// `path.version()`: the version of the file (the first one of a compaction).
    pub version: u64,
    pub path: LogPath,
    pub size: u64,
    /// Milliseconds since the epoch.
    pub last_modified: i64,
}

impl LogFile {
    /// Classify a `_delta_log` file name; `None` for anything that is not a
    /// commit, checkpoint or compaction file (`.crc`, `_last_checkpoint`, temp files…).
    pub fn parse(name: &str, size: u64, last_modified: i64) -> Option<LogFile> {
        let path = LogPath::parse(name)?;
        let replayed =
            path.is_commit() || path.is_checkpoint() || matches!(path, LogPath::Compaction { .. });
        Some(LogFile {
            version: path.version().filter(|_| replayed)?,
            path,
            size,
            last_modified,
        })
    }

    /// Whether this is a commit file.
    pub fn is_commit(&self) -> bool {
        self.path.is_commit()
    }

    /// Whether this is a V2 checkpoint top file in JSON.
    pub fn is_json_checkpoint(&self) -> bool {
        matches!(
            self.path,
            LogPath::V2Checkpoint {
                format: CheckpointFormat::Json,
                ..
            }
        )
    }

    /// File name within `_delta_log`.
    pub fn name(&self) -> String {
        self.path.file_name()
    }

    /// Path relative to the table root (`_delta_log/…`).
    pub fn relative_path(&self) -> String {
        self.path.relative_path()
    }
}

/// The `_last_checkpoint` hint.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LastCheckpoint {
    pub version: u64,
    /// Number of actions in the checkpoint.
    #[serde(default)]
    pub size: Option<u64>,
    /// Number of parts of a multi-part checkpoint.
    #[serde(default)]
    pub parts: Option<u32>,
}

impl LastCheckpoint {
    pub fn parse(bytes: &[u8]) -> Result<LastCheckpoint> {
        serde_json::from_slice(bytes).map_err(|e| Error::CorruptLog {
            file: LogPath::LastCheckpoint.relative_path(),
            detail: format!("not valid JSON: {e}"),
        })
    }
}

/// The files to replay for one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSegment {
    pub version: u64,
    /// Checkpoint files (all parts, or the V2 top file), possibly empty.
    pub checkpoint: Vec<LogFile>,
    pub checkpoint_version: Option<u64>,
    /// Files to read after the checkpoint, oldest first: commits, with runs of
    /// them replaced by a compaction file where one covers the run exactly.
    pub commits: Vec<LogFile>,
    /// The commit file of `version` itself (for its timestamp).
    pub last_commit: Option<LogFile>,
}

/// Choose the files for `target` (latest when `None`) from a listing of `_delta_log`.
///
/// * The newest complete checkpoint at or below the target is used (a classic
///   multi-part checkpoint is complete when all its parts are listed).
/// * If `hint` names a checkpoint that is listed, its part count must match.
/// * Commits must run gap-free from the checkpoint (or version 0) to the target;
///   a gap is an error naming the missing file.
pub fn build_segment(
    mut files: Vec<LogFile>,
    hint: Option<&LastCheckpoint>,
    target: Option<u64>,
) -> Result<LogSegment> {
    files.sort_by(|a, b| a.version.cmp(&b.version).then(a.path.cmp(&b.path)));
    let latest_commit = files
        .iter()
        .filter(|f| f.is_commit())
        .map(|f| f.version)
        .max();
    let latest_checkpoint = files
        .iter()
        .filter(|f| f.path.is_checkpoint())
        .map(|f| f.version)
        .max();
    let Some(latest) = latest_commit.max(latest_checkpoint) else {
        return Err(Error::NotATable(
            "not a Delta table: its _delta_log has no commit or checkpoint files".to_string(),
        ));
    };
    let version = target.unwrap_or(latest);
    if version > latest {
        return Err(Error::VersionNotFound(format!(
            "version {version} requested, the latest is {latest}"
        )));
    }

    if let Some(hint) = hint {
        let listed: Vec<&LogFile> = files
            .iter()
            .filter(|f| {
                f.version == hint.version
                    && matches!(
                        f.path,
                        LogPath::Checkpoint(_) | LogPath::MultiPartCheckpoint { .. }
                    )
            })
            .collect();
        if let (Some(parts), Some(first)) = (hint.parts, listed.first()) {
            let found = match first.path {
                LogPath::MultiPartCheckpoint { parts, .. } => parts,
                _ => 1,
            };
            if found != parts {
                return Err(Error::CorruptLog {
                    file: first.name(),
                    detail: format!(
                        "_last_checkpoint says version {} has {parts} parts, the listed checkpoint has {found}",
                        hint.version
                    ),
                });
            }
        }
    }

    let (checkpoint_version, checkpoint) = choose_checkpoint(&files, version);
    if checkpoint_version.is_none() && !files.iter().any(|f| f.is_commit() && f.version == 0) {
        // Metadata cleanup removed the commits before the oldest checkpoint:
        // versions before it cannot be rebuilt (as Delta Spark says it).
        let earliest = files
            .iter()
            .filter(|f| f.path.is_checkpoint())
            .map(|f| f.version)
            .min();
        if let Some(earliest) = earliest.filter(|e| *e > version) {
            return Err(Error::VersionNotFound(format!(
                "version {version} requested, the earliest available is {earliest} \
                 (older commits were cleaned up)"
            )));
        }
    }
    let first_commit = checkpoint_version.map_or(0, |v| v + 1);
    let mut commits: Vec<LogFile> = Vec::new();
    let mut expected = first_commit;
    let mut last_commit = None;
    for f in files.iter().filter(|f| f.is_commit()) {
        if f.version == version {
            last_commit = Some(f.clone());
        }
        if f.version < first_commit || f.version > version {
            continue;
        }
        if f.version != expected {
            return Err(Error::CorruptLog {
                file: LogPath::commit(expected).file_name(),
                detail: format!(
                    "missing: the log jumps from version {} to {}",
                    expected.saturating_sub(1),
                    f.version
                ),
            });
        }
        commits.push(f.clone());
        expected += 1;
    }
    if expected <= version {
        return Err(Error::CorruptLog {
            file: LogPath::commit(expected).file_name(),
            detail: format!("missing: needed to reach version {version}"),
        });
    }
    let commits = use_compactions(&files, commits, first_commit, version);
    Ok(LogSegment {
        version,
        checkpoint,
        checkpoint_version,
        commits,
        last_commit,
    })
}

/// The newest complete checkpoint at or below `version`.
fn choose_checkpoint(files: &[LogFile], version: u64) -> (Option<u64>, Vec<LogFile>) {
    let mut candidates: Vec<u64> = files
        .iter()
        .filter(|f| f.version <= version)
        .filter(|f| f.path.is_checkpoint())
        .map(|f| f.version)
        .collect();
    candidates.dedup();
    for v in candidates.into_iter().rev() {
        let at: Vec<&LogFile> = files.iter().filter(|f| f.version == v).collect();
        // Prefer a V2 top file, then a single-file classic, then a complete multi-part set.
        if let Some(f) = at
            .iter()
            .find(|f| matches!(f.path, LogPath::V2Checkpoint { .. }))
        {
            return (Some(v), vec![(*f).clone()]);
        }
        if let Some(f) = at.iter().find(|f| matches!(f.path, LogPath::Checkpoint(_))) {
            return (Some(v), vec![(*f).clone()]);
        }
        let mut by_count: std::collections::BTreeMap<u32, Vec<&LogFile>> = Default::default();
        for f in &at {
            if let LogPath::MultiPartCheckpoint { parts, .. } = f.path {
                by_count.entry(parts).or_default().push(f);
            }
        }
        for (of, parts) in by_count.into_iter().rev() {
            let mut seen: Vec<u32> = parts
                .iter()
                .filter_map(|f| match f.path {
                    LogPath::MultiPartCheckpoint { part, .. } => Some(part),
                    _ => None,
                })
                .collect();
            seen.sort_unstable();
            seen.dedup();
            if seen.len() == of as usize {
                let mut chosen: Vec<LogFile> = parts.into_iter().cloned().collect();
                chosen.sort_by(|a, b| a.path.cmp(&b.path));
                chosen.dedup_by(|a, b| a.path == b.path);
                return (Some(v), chosen);
            }
        }
    }
    (None, Vec::new())
}

/// Replace runs of commits by compaction files that cover them exactly and lie
/// wholly inside `first..=last`. Greedy: at each position take the longest.
fn use_compactions(
    files: &[LogFile],
    commits: Vec<LogFile>,
    first: u64,
    last: u64,
) -> Vec<LogFile> {
    let compactions: Vec<&LogFile> = files
        .iter()
        .filter(|f| matches!(f.path, LogPath::Compaction { start, end } if start >= first && end <= last))
        .collect();
    if compactions.is_empty() {
        return commits;
    }
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(commit) = commits.get(i) {
        let best = compactions
            .iter()
            .filter(|c| c.version == commit.version)
            .filter_map(|c| match c.path {
                LogPath::Compaction { end, .. } => Some((end, *c)),
                _ => None,
            })
            .max_by_key(|(end, _)| *end);
        match best {
            Some((end, c)) if end > commit.version => {
                out.push(c.clone());
                i += (end - commit.version + 1) as usize;
            }
            _ => {
                out.push(commit.clone());
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(names: &[&str]) -> Vec<LogFile> {
        names
            .iter()
            .filter_map(|n| LogFile::parse(n, 1, 0))
            .collect()
    }

    #[test]
    fn keeps_only_replayed_files() {
        let f = |n: &str| LogFile::parse(n, 0, 0).map(|f| (f.version, f.path));
        assert_eq!(
            f("00000000000000000003.json"),
            Some((3, LogPath::commit(3)))
        );
        assert_eq!(
            f("00000000000000000010.checkpoint.0000000002.0000000003.parquet"),
            Some((10, LogPath::checkpoint_part(10, 2, 3).unwrap()))
        );
        assert_eq!(
            f("00000000000000000004.00000000000000000006.compacted.json"),
            Some((4, LogPath::compaction(4, 6).unwrap()))
        );
        let v2 = LogFile::parse(
            "00000000000000000010.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json",
            0,
            0,
        )
        .unwrap();
        assert!(v2.is_json_checkpoint() && v2.version == 10);
        for other in [
            "00000000000000000003.crc",
            "_last_checkpoint",
            "_sidecars/a.parquet",
            "3.json",
            ".00000000000000000003.json.tmp",
        ] {
            assert_eq!(f(other), None, "{other}");
        }
    }

    #[test]
    fn checkpoint_then_commits() {
        let files = listing(&[
            "00000000000000000000.json",
            "00000000000000000001.json",
            "00000000000000000002.json",
            "00000000000000000002.checkpoint.parquet",
            "00000000000000000003.json",
        ]);
        let s = build_segment(files.clone(), None, None).unwrap();
        assert_eq!(s.version, 3);
        assert_eq!(s.checkpoint_version, Some(2));
        assert_eq!(
            s.commits.iter().map(|c| c.version).collect::<Vec<_>>(),
            vec![3]
        );
        let s = build_segment(files, None, Some(1)).unwrap();
        assert_eq!(s.checkpoint_version, None);
        assert_eq!(s.commits.len(), 2);
    }

    #[test]
    fn incomplete_multipart_is_skipped() {
        let files = listing(&[
            "00000000000000000000.json",
            "00000000000000000001.json",
            "00000000000000000001.checkpoint.0000000001.0000000002.parquet",
            "00000000000000000002.json",
        ]);
        let s = build_segment(files, None, None).unwrap();
        assert_eq!(s.checkpoint_version, None);
    }

    #[test]
    fn gap_names_the_missing_file() {
        let files = listing(&["00000000000000000000.json", "00000000000000000002.json"]);
        let e = build_segment(files, None, None).unwrap_err().to_string();
        assert!(
            e.contains("00000000000000000001.json") && e.contains("missing"),
            "{e}"
        );
    }

    #[test]
    fn versions_before_a_cleaned_up_checkpoint_are_not_found() {
        let files = listing(&[
            "00000000000000000005.checkpoint.parquet",
            "00000000000000000006.json",
        ]);
        for v in [0, 4] {
            match build_segment(files.clone(), None, Some(v)) {
                Err(Error::VersionNotFound(m)) => assert_eq!(
                    m,
                    format!(
                        "version {v} requested, the earliest available is 5 \
                         (older commits were cleaned up)"
                    )
                ),
                other => panic!("{v}: {other:?}"),
            }
        }
        assert_eq!(
            build_segment(files.clone(), None, Some(5)).unwrap().version,
            5
        );
        // Without any checkpoint, a missing commit 0 is still a corrupt log.
        let no_checkpoint = listing(&["00000000000000000006.json"]);
        assert!(matches!(
            build_segment(no_checkpoint, None, Some(6)),
            Err(Error::CorruptLog { .. })
        ));
    }

    #[test]
    fn last_checkpoint_part_mismatch() {
        let files = listing(&[
            "00000000000000000000.json",
            "00000000000000000000.checkpoint.parquet",
        ]);
        let hint = LastCheckpoint {
            version: 0,
            size: None,
            parts: Some(3),
        };
        let e = build_segment(files, Some(&hint), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("checkpoint.parquet") && e.contains("3 parts"),
            "{e}"
        );
    }

    #[test]
    fn compaction_replaces_an_exact_run() {
        let files = listing(&[
            "00000000000000000000.json",
            "00000000000000000001.json",
            "00000000000000000002.json",
            "00000000000000000003.json",
            "00000000000000000001.00000000000000000002.compacted.json",
            "00000000000000000002.00000000000000000009.compacted.json",
        ]);
        let s = build_segment(files, None, None).unwrap();
        let names: Vec<_> = s.commits.iter().map(LogFile::name).collect();
        assert_eq!(
            names,
            vec![
                "00000000000000000000.json",
                "00000000000000000001.00000000000000000002.compacted.json",
                "00000000000000000003.json"
            ]
        );
    }
}
