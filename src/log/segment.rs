//! Which log files make up a snapshot: the newest usable checkpoint at or
//! below the wanted version, then every commit after it, gap-free.
//!
//! ```text
//! _delta_log/
//!   00000000000000000000.json                          commit (version 0)
//!   00000000000000000010.checkpoint.parquet            classic checkpoint
//!   00000000000000000010.checkpoint.0000000001.0000000002.parquet   multi-part (part 1 of 2)
//!   00000000000000000010.checkpoint.<uuid>.json|parquet  V2 checkpoint (top file)
//!   00000000000000000011.00000000000000000014.compacted.json  log compaction (11..=14)
//!   _last_checkpoint                                   hint: {"version":10,"size":…,"parts":…}
//!   _sidecars/<uuid>.parquet                           V2 checkpoint sidecars
//! ```

use serde::Deserialize;

use crate::error::{Error, Result};

/// Width of the zero-padded version in log file names.
pub const VERSION_DIGITS: usize = 20;
/// Width of the zero-padded part numbers of multi-part checkpoints.
const PART_DIGITS: usize = 10;

/// What a file in `_delta_log` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogFileKind {
    Commit,
    /// Classic checkpoint: single file (`part == None`) or part `part.0` of `part.1`.
    Checkpoint {
        part: Option<(u32, u32)>,
    },
    /// V2 checkpoint top file; `parquet` tells the format.
    V2Checkpoint {
        parquet: bool,
    },
    /// Log compaction file covering `version..=end`.
    Compaction {
        end: u64,
    },
}

/// One file in `_delta_log`, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    pub version: u64,
    pub kind: LogFileKind,
    /// File name within `_delta_log` (no directory).
    pub name: String,
    pub size: u64,
    /// Milliseconds since the epoch.
    pub last_modified: i64,
}

fn version_of(s: &str) -> Option<u64> {
    (s.len() == VERSION_DIGITS && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

impl LogFile {
    /// Classify a `_delta_log` file name; `None` for anything that is not a
    /// commit, checkpoint or compaction file (`.crc`, `_last_checkpoint`, temp files…).
    pub fn parse(name: &str, size: u64, last_modified: i64) -> Option<LogFile> {
        let (head, rest) = name.split_at_checked(VERSION_DIGITS)?;
        let version = version_of(head)?;
        let kind = match rest {
            ".json" => LogFileKind::Commit,
            ".checkpoint.parquet" => LogFileKind::Checkpoint { part: None },
            _ => {
                if let Some(body) = rest.strip_prefix(".checkpoint.") {
                    let parts: Vec<&str> = body.split('.').collect();
                    match parts.as_slice() {
                        [part, of, "parquet"]
                            if part.len() == PART_DIGITS && of.len() == PART_DIGITS =>
                        {
                            let part: u32 = part.parse().ok()?;
                            let of: u32 = of.parse().ok()?;
                            (part >= 1 && part <= of).then_some(())?;
                            LogFileKind::Checkpoint {
                                part: Some((part, of)),
                            }
                        }
                        [uuid, ext @ ("json" | "parquet")] if uuid.len() == 36 => {
                            LogFileKind::V2Checkpoint {
                                parquet: *ext == "parquet",
                            }
                        }
                        _ => return None,
                    }
                } else if let Some(body) = rest.strip_prefix('.') {
                    let end = body.strip_suffix(".compacted.json")?;
                    let end = version_of(end)?;
                    (end >= version).then_some(())?;
                    LogFileKind::Compaction { end }
                } else {
                    return None;
                }
            }
        };
        Some(LogFile {
            version,
            kind,
            name: name.to_string(),
            size,
            last_modified,
        })
    }

    /// Name of the commit file of `version`.
    pub fn commit_name(version: u64) -> String {
        format!("{version:020}.json")
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
            file: "_delta_log/_last_checkpoint".to_string(),
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
    files.sort_by(|a, b| a.version.cmp(&b.version).then(a.name.cmp(&b.name)));
    let latest_commit = files
        .iter()
        .filter(|f| f.kind == LogFileKind::Commit)
        .map(|f| f.version)
        .max();
    let latest_checkpoint = files
        .iter()
        .filter(|f| {
            matches!(
                f.kind,
                LogFileKind::Checkpoint { .. } | LogFileKind::V2Checkpoint { .. }
            )
        })
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
                f.version == hint.version && matches!(f.kind, LogFileKind::Checkpoint { .. })
            })
            .collect();
        if let (Some(parts), Some(first)) = (hint.parts, listed.first()) {
            let found = match first.kind {
                LogFileKind::Checkpoint {
                    part: Some((_, of)),
                } => of,
                _ => 1,
            };
            if found != parts {
                return Err(Error::CorruptLog {
                    file: first.name.clone(),
                    detail: format!(
                        "_last_checkpoint says version {} has {parts} parts, the listed checkpoint has {found}",
                        hint.version
                    ),
                });
            }
        }
    }

    let (checkpoint_version, checkpoint) = choose_checkpoint(&files, version);
    let first_commit = checkpoint_version.map_or(0, |v| v + 1);
    let mut commits: Vec<LogFile> = Vec::new();
    let mut expected = first_commit;
    let mut last_commit = None;
    for f in files.iter().filter(|f| f.kind == LogFileKind::Commit) {
        if f.version == version {
            last_commit = Some(f.clone());
        }
        if f.version < first_commit || f.version > version {
            continue;
        }
        if f.version != expected {
            return Err(Error::CorruptLog {
                file: LogFile::commit_name(expected),
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
            file: LogFile::commit_name(expected),
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
        .filter(|f| {
            matches!(
                f.kind,
                LogFileKind::Checkpoint { .. } | LogFileKind::V2Checkpoint { .. }
            )
        })
        .map(|f| f.version)
        .collect();
    candidates.dedup();
    for v in candidates.into_iter().rev() {
        let at: Vec<&LogFile> = files.iter().filter(|f| f.version == v).collect();
        // Prefer a V2 top file, then a single-file classic, then a complete multi-part set.
        if let Some(f) = at
            .iter()
            .find(|f| matches!(f.kind, LogFileKind::V2Checkpoint { .. }))
        {
            return (Some(v), vec![(*f).clone()]);
        }
        if let Some(f) = at
            .iter()
            .find(|f| f.kind == LogFileKind::Checkpoint { part: None })
        {
            return (Some(v), vec![(*f).clone()]);
        }
        let mut by_count: std::collections::BTreeMap<u32, Vec<&LogFile>> = Default::default();
        for f in &at {
            if let LogFileKind::Checkpoint {
                part: Some((_, of)),
            } = f.kind
            {
                by_count.entry(of).or_default().push(f);
            }
        }
        for (of, parts) in by_count.into_iter().rev() {
            let mut seen: Vec<u32> = parts
                .iter()
                .filter_map(|f| match f.kind {
                    LogFileKind::Checkpoint { part: Some((p, _)) } => Some(p),
                    _ => None,
                })
                .collect();
            seen.sort_unstable();
            seen.dedup();
            if seen.len() == of as usize {
                let mut chosen: Vec<LogFile> = parts.into_iter().cloned().collect();
                chosen.sort_by(|a, b| a.name.cmp(&b.name));
                chosen.dedup_by(|a, b| a.kind == b.kind);
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
        .filter(|f| matches!(f.kind, LogFileKind::Compaction { end } if f.version >= first && end <= last))
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
            .filter_map(|c| match c.kind {
                LogFileKind::Compaction { end } => Some((end, *c)),
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
    fn classifies_names() {
        let f = |n: &str| LogFile::parse(n, 0, 0).map(|f| (f.version, f.kind));
        assert_eq!(
            f("00000000000000000003.json"),
            Some((3, LogFileKind::Commit))
        );
        assert_eq!(
            f("00000000000000000010.checkpoint.parquet"),
            Some((10, LogFileKind::Checkpoint { part: None }))
        );
        assert_eq!(
            f("00000000000000000010.checkpoint.0000000002.0000000003.parquet"),
            Some((10, LogFileKind::Checkpoint { part: Some((2, 3)) }))
        );
        assert_eq!(
            f("00000000000000000010.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json"),
            Some((10, LogFileKind::V2Checkpoint { parquet: false }))
        );
        assert_eq!(
            f("00000000000000000004.00000000000000000006.compacted.json"),
            Some((4, LogFileKind::Compaction { end: 6 }))
        );
        for bad in [
            "00000000000000000003.crc",
            "_last_checkpoint",
            "3.json",
            ".00000000000000000003.json.tmp",
        ] {
            assert_eq!(f(bad), None, "{bad}");
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
        let names: Vec<_> = s.commits.iter().map(|c| c.name.as_str()).collect();
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
