//! Typed names of the files in `_delta_log`: one parser and one formatter for
//! commits, checkpoints of every kind, log compactions, version checksums,
//! `_last_checkpoint` and V2 checkpoint sidecars. Pure: no I/O.
//!
//! ```text
//! _delta_log/
//!   00000000000000000000.json                                      commit
//!   00000000000000000010.checkpoint.parquet                        classic checkpoint
//!   00000000000000000010.checkpoint.0000000001.0000000002.parquet  multi-part (1 of 2)
//!   00000000000000000010.checkpoint.<uuid>.json|parquet            V2 checkpoint (top file)
//!   00000000000000000011.00000000000000000014.compacted.json       log compaction (11..=14)
//!   00000000000000000010.crc                                       version checksum
//!   _last_checkpoint                                               checkpoint hint
//!   _sidecars/<name>                                               V2 checkpoint sidecar
//! ```
//!
//! Parsing is strict (exact digit widths, ASCII digits only, numbers that fit,
//! part `1..=parts`, compaction `start <= end`, hyphenated UUIDs), so every
//! parsed name formats back to itself.
//!
//! Paths of data files as actions record them are compared through
//! [`normalize_path`](crate::log::path::normalize_path), the one place that decodes them.

/// The log folder, relative to the table root.
pub const LOG_DIR: &str = "_delta_log";
/// The sidecar folder, relative to [`LOG_DIR`].
pub const SIDECAR_DIR: &str = "_sidecars";
/// File name of the checkpoint hint.
pub const LAST_CHECKPOINT: &str = "_last_checkpoint";
/// Width of the zero-padded versions in log file names.
pub const VERSION_DIGITS: usize = 20;
/// Width of the zero-padded part numbers of multi-part checkpoints.
pub const PART_DIGITS: usize = 10;
/// Length of a hyphenated UUID (V2 checkpoint names).
const UUID_LEN: usize = 36;

/// File format of a V2 checkpoint's top file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CheckpointFormat {
    Json,
    Parquet,
}

impl CheckpointFormat {
    fn extension(self) -> &'static str {
        match self {
            CheckpointFormat::Json => "json",
            CheckpointFormat::Parquet => "parquet",
        }
    }
}

/// One file of the log, by name. Build values with [`LogPath::parse`] or the
/// constructors (which check the same rules); a value built directly from the
/// variants is formatted as given. Within one variant, values order as their
/// file names do.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogPath {
    /// `<v>.json`
    Commit(u64),
    /// `<v>.checkpoint.parquet`
    Checkpoint(u64),
    /// `<v>.checkpoint.<part>.<parts>.parquet`, `1 <= part <= parts`.
    MultiPartCheckpoint { version: u64, part: u32, parts: u32 },
    /// `<v>.checkpoint.<uuid>.json|parquet`; `id` is the UUID as written.
    V2Checkpoint {
        version: u64,
        id: String,
        format: CheckpointFormat,
    },
    /// `<start>.<end>.compacted.json`: commits `start..=end` in one file.
    Compaction { start: u64, end: u64 },
    /// `<v>.crc`
    Crc(u64),
    /// `_last_checkpoint`
    LastCheckpoint,
    /// `_sidecars/<name>`; `name` is a single path segment.
    Sidecar(String),
}

/// A version written in exactly [`VERSION_DIGITS`] ASCII digits that fits a u64.
fn version_of(s: &str) -> Option<u64> {
    digits(s, VERSION_DIGITS)
}

fn digits<T: std::str::FromStr>(s: &str, width: usize) -> Option<T> {
    (s.len() == width && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

fn is_uuid(s: &str) -> bool {
    s.len() == UUID_LEN && uuid::Uuid::try_parse(s).is_ok()
}

fn is_segment(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains('/') && !s.contains('\\')
}

impl LogPath {
    /// Classify a path relative to `_delta_log` (a file name, or
    /// `_sidecars/<name>`). `None` for anything else (temp files, unknown
    /// suffixes, wrong widths, numbers that overflow).
    pub fn parse(name: &str) -> Option<LogPath> {
        if name == LAST_CHECKPOINT {
            return Some(LogPath::LastCheckpoint);
        }
        if let Some(side) = name
            .strip_prefix(SIDECAR_DIR)
            .and_then(|r| r.strip_prefix('/'))
        {
            return LogPath::sidecar(side);
        }
        let (head, rest) = name.split_at_checked(VERSION_DIGITS)?;
        let version = version_of(head)?;
        match rest {
            ".json" => return Some(LogPath::Commit(version)),
            ".crc" => return Some(LogPath::Crc(version)),
            ".checkpoint.parquet" => return Some(LogPath::Checkpoint(version)),
            _ => {}
        }
        if let Some(body) = rest.strip_prefix(".checkpoint.") {
            let mut fields = body.split('.');
            let parsed = match (fields.next(), fields.next(), fields.next(), fields.next()) {
                (Some(part), Some(parts), Some("parquet"), None) => LogPath::checkpoint_part(
                    version,
                    digits(part, PART_DIGITS)?,
                    digits(parts, PART_DIGITS)?,
                )?,
                (Some(id), Some(ext), None, None) => {
                    let format = match ext {
                        "json" => CheckpointFormat::Json,
                        "parquet" => CheckpointFormat::Parquet,
                        _ => return None,
                    };
                    LogPath::v2_checkpoint(version, id, format)?
                }
                _ => return None,
            };
            return Some(parsed);
        }
        let end = rest
            .strip_prefix('.')?
            .strip_suffix(".compacted.json")
            .and_then(version_of)?;
        LogPath::compaction(version, end)
    }

    /// The commit of `version`.
    pub fn commit(version: u64) -> LogPath {
        LogPath::Commit(version)
    }

    /// The classic single-file checkpoint of `version`.
    pub fn checkpoint(version: u64) -> LogPath {
        LogPath::Checkpoint(version)
    }

    /// Part `part` of `parts` of a multi-part checkpoint; `None` unless
    /// `1 <= part <= parts`.
    pub fn checkpoint_part(version: u64, part: u32, parts: u32) -> Option<LogPath> {
        (part >= 1 && part <= parts).then_some(LogPath::MultiPartCheckpoint {
            version,
            part,
            parts,
        })
    }

    /// The top file of a V2 checkpoint; `None` unless `id` is a hyphenated UUID.
    pub fn v2_checkpoint(version: u64, id: &str, format: CheckpointFormat) -> Option<LogPath> {
        is_uuid(id).then(|| LogPath::V2Checkpoint {
            version,
            id: id.to_string(),
            format,
        })
    }

    /// A compaction of commits `start..=end`; `None` if `start > end`.
    pub fn compaction(start: u64, end: u64) -> Option<LogPath> {
        (start <= end).then_some(LogPath::Compaction { start, end })
    }

    /// The checksum file of `version`.
    pub fn crc(version: u64) -> LogPath {
        LogPath::Crc(version)
    }

    /// A V2 checkpoint sidecar; `None` unless `name` is one non-empty path
    /// segment (no `/`, `\`, `.` or `..`).
    pub fn sidecar(name: &str) -> Option<LogPath> {
        is_segment(name).then(|| LogPath::Sidecar(name.to_string()))
    }

    /// The version the file belongs to (the first one for a compaction);
    /// `None` for `_last_checkpoint` and sidecars.
    pub fn version(&self) -> Option<u64> {
        match self {
            LogPath::Commit(v) | LogPath::Checkpoint(v) | LogPath::Crc(v) => Some(*v),
            LogPath::MultiPartCheckpoint { version, .. }
            | LogPath::V2Checkpoint { version, .. } => Some(*version),
            LogPath::Compaction { start, .. } => Some(*start),
            LogPath::LastCheckpoint | LogPath::Sidecar(_) => None,
        }
    }

    /// Whether this is a commit file.
    pub fn is_commit(&self) -> bool {
        matches!(self, LogPath::Commit(_))
    }

    /// Whether this is a checkpoint file of any kind (not a sidecar).
    pub fn is_checkpoint(&self) -> bool {
        matches!(
            self,
            LogPath::Checkpoint(_)
                | LogPath::MultiPartCheckpoint { .. }
                | LogPath::V2Checkpoint { .. }
        )
    }

    /// The last path segment (`00000000000000000003.json`, `<name>` of a sidecar).
    pub fn file_name(&self) -> String {
        match self {
            LogPath::Commit(v) => format!("{v:020}.json"),
            LogPath::Checkpoint(v) => format!("{v:020}.checkpoint.parquet"),
            LogPath::MultiPartCheckpoint {
                version,
                part,
                parts,
            } => format!("{version:020}.checkpoint.{part:010}.{parts:010}.parquet"),
            LogPath::V2Checkpoint {
                version,
                id,
                format,
            } => format!("{version:020}.checkpoint.{id}.{}", format.extension()),
            LogPath::Compaction { start, end } => format!("{start:020}.{end:020}.compacted.json"),
            LogPath::Crc(v) => format!("{v:020}.crc"),
            LogPath::LastCheckpoint => LAST_CHECKPOINT.to_string(),
            LogPath::Sidecar(name) => name.clone(),
        }
    }

    /// The path relative to `_delta_log`: what [`LogPath::parse`] takes.
    pub fn path_in_log(&self) -> String {
        match self {
            LogPath::Sidecar(name) => format!("{SIDECAR_DIR}/{name}"),
            other => other.file_name(),
        }
    }

    /// The path relative to the table root (`_delta_log/…`).
    pub fn relative_path(&self) -> String {
        format!("{LOG_DIR}/{}", self.path_in_log())
    }

    /// A listing offset just below every file of `version`: all their names
    /// sort after it, and every name of an older version sorts at or before it.
    pub fn version_prefix(version: u64) -> String {
        format!("{version:020}")
    }
}

/// Normalise a file path from an action (`add`, `remove`, `cdc`): URL-decoded,
/// as the log stores it percent-encoded. Two actions name the same file exactly
/// when their normalised paths are equal.
pub fn normalize_path(path: &str) -> String {
    percent_encoding::percent_decode_str(path)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn action_paths_are_url_decoded() {
        assert_eq!(
            normalize_path("a%20b/c%3D1/part-0.parquet"),
            "a b/c=1/part-0.parquet"
        );
        assert_eq!(normalize_path("plain.parquet"), "plain.parquet");
        // invalid UTF-8 after decoding is replaced, not an error
        assert_eq!(normalize_path("x%FF"), "x\u{FFFD}");
    }

    fn any_path() -> impl Strategy<Value = LogPath> {
        prop_oneof![
            any::<u64>().prop_map(LogPath::commit),
            any::<u64>().prop_map(LogPath::checkpoint),
            any::<u64>().prop_map(LogPath::crc),
            (any::<u64>(), 1..=u32::MAX)
                .prop_flat_map(|(v, parts)| (Just(v), 1..=parts, Just(parts)))
                .prop_filter_map("part", |(v, part, parts)| LogPath::checkpoint_part(
                    v, part, parts
                )),
            (any::<u64>(), any::<u128>(), any::<bool>()).prop_filter_map(
                "uuid",
                |(v, id, json)| {
                    let id = uuid::Uuid::from_u128(id).hyphenated().to_string();
                    let format = if json {
                        CheckpointFormat::Json
                    } else {
                        CheckpointFormat::Parquet
                    };
                    LogPath::v2_checkpoint(v, &id, format)
                }
            ),
            (any::<u64>(), any::<u64>())
                .prop_filter_map("order", |(a, b)| LogPath::compaction(a.min(b), a.max(b))),
            Just(LogPath::LastCheckpoint),
            "[A-Za-z0-9._-]{1,40}".prop_filter_map("segment", |n| LogPath::sidecar(&n)),
        ]
    }

    proptest! {
        #[test]
        fn generated_paths_round_trip(p in any_path()) {
            prop_assert_eq!(LogPath::parse(&p.path_in_log()), Some(p.clone()));
            prop_assert_eq!(p.relative_path(), format!("_delta_log/{}", p.path_in_log()));
        }

        /// Whatever is accepted is the canonical spelling of what it parses to.
        #[test]
        fn accepted_names_are_canonical(name in "[0-9.a-z_/é-]{0,90}") {
            if let Some(p) = LogPath::parse(&name) {
                prop_assert_eq!(p.path_in_log(), name);
            }
        }

        /// Near-miss names: valid names with one character replaced.
        #[test]
        fn edited_names_are_canonical_or_refused(
            p in any_path(),
            at in any::<prop::sample::Index>(),
            c in prop::char::any(),
        ) {
            let name = p.path_in_log();
            let i = at.index(name.chars().count());
            let edited: String = name
                .chars()
                .enumerate()
                .map(|(j, x)| if j == i { c } else { x })
                .collect();
            if let Some(q) = LogPath::parse(&edited) {
                prop_assert_eq!(q.path_in_log(), edited);
            }
        }
    }

    const UUID: &str = "80a083e8-7026-4e79-81be-64bd76c43a11";

    fn every_kind() -> Vec<LogPath> {
        vec![
            LogPath::commit(0),
            LogPath::commit(u64::MAX),
            LogPath::checkpoint(10),
            LogPath::checkpoint_part(10, 1, 2).unwrap(),
            LogPath::checkpoint_part(10, u32::MAX, u32::MAX).unwrap(),
            LogPath::v2_checkpoint(10, UUID, CheckpointFormat::Json).unwrap(),
            LogPath::v2_checkpoint(10, UUID, CheckpointFormat::Parquet).unwrap(),
            LogPath::compaction(11, 14).unwrap(),
            LogPath::compaction(5, 5).unwrap(),
            LogPath::crc(7),
            LogPath::LastCheckpoint,
            LogPath::sidecar("3a0d65cd-4056-49b8-937b-95f9e3ee90e5.parquet").unwrap(),
        ]
    }

    #[test]
    fn every_kind_round_trips() {
        for p in every_kind() {
            let name = p.path_in_log();
            assert_eq!(LogPath::parse(&name), Some(p.clone()), "{name}");
            assert_eq!(p.relative_path(), format!("_delta_log/{name}"));
        }
    }

    #[test]
    fn names_are_the_protocol_names() {
        let names: Vec<String> = every_kind().iter().map(LogPath::relative_path).collect();
        assert_eq!(
            names,
            [
                "_delta_log/00000000000000000000.json",
                "_delta_log/18446744073709551615.json",
                "_delta_log/00000000000000000010.checkpoint.parquet",
                "_delta_log/00000000000000000010.checkpoint.0000000001.0000000002.parquet",
                "_delta_log/00000000000000000010.checkpoint.4294967295.4294967295.parquet",
                "_delta_log/00000000000000000010.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json",
                "_delta_log/00000000000000000010.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.parquet",
                "_delta_log/00000000000000000011.00000000000000000014.compacted.json",
                "_delta_log/00000000000000000005.00000000000000000005.compacted.json",
                "_delta_log/00000000000000000007.crc",
                "_delta_log/_last_checkpoint",
                "_delta_log/_sidecars/3a0d65cd-4056-49b8-937b-95f9e3ee90e5.parquet",
            ]
        );
        let sidecar = LogPath::sidecar("a.parquet").unwrap();
        assert_eq!(sidecar.file_name(), "a.parquet");
        assert_eq!(sidecar.version(), None);
        assert_eq!(LogPath::compaction(11, 14).unwrap().version(), Some(11));
    }

    #[test]
    fn upper_case_uuid_keeps_its_spelling() {
        let name = "00000000000000000010.checkpoint.80A083E8-7026-4E79-81BE-64BD76C43A11.json";
        let p = LogPath::parse(name).unwrap();
        assert_eq!(p.file_name(), name);
    }

    #[test]
    fn kinds() {
        assert!(LogPath::commit(1).is_commit());
        assert!(!LogPath::crc(1).is_commit());
        for p in every_kind() {
            let checkpoint = matches!(
                p,
                LogPath::Checkpoint(_)
                    | LogPath::MultiPartCheckpoint { .. }
                    | LogPath::V2Checkpoint { .. }
            );
            assert_eq!(p.is_checkpoint(), checkpoint, "{p:?}");
        }
    }

    #[test]
    fn bad_names_are_none() {
        for bad in [
            "",
            "3.json",
            "0000000000000000003.json",   // 19 digits
            "000000000000000000003.json", // 21 digits
            "0000000000000000000x.json",
            "+0000000000000000003.json",
            "-0000000000000000003.json",
            " 0000000000000000003.json",
            "99999999999999999999.json", // > u64::MAX
            "18446744073709551616.json", // u64::MAX + 1
            "00000000000000000003.json.tmp",
            ".00000000000000000003.json.tmp",
            "00000000000000000003.JSON",
            "00000000000000000003.",
            "00000000000000000003",
            "00000000000000000003.checkpoint",
            "00000000000000000003.checkpoint.json",
            "00000000000000000003.checkpoint.parquet.crc",
            "00000000000000000003.checkpoint.000000001.0000000002.parquet",
            "00000000000000000003.checkpoint.0000000001.00000000002.parquet",
            "00000000000000000003.checkpoint.0000000000.0000000002.parquet", // part 0
            "00000000000000000003.checkpoint.0000000003.0000000002.parquet", // part > parts
            "00000000000000000003.checkpoint.9999999999.9999999999.parquet", // > u32::MAX
            "00000000000000000003.checkpoint.0000000001.0000000002.json",
            "00000000000000000003.checkpoint.0000000001.0000000002.parquet.x",
            "00000000000000000003.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.avro",
            "00000000000000000003.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a1.json",
            "00000000000000000003.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a1g.json",
            "00000000000000000003.checkpoint.80a083e87026-4e79-81be-64bd76c43a11a.json",
            "00000000000000000003.checkpoint.{80a083e8-7026-4e79-81be-64bd76c43a1}.json",
            "00000000000000000003.checkpoint.80a083e870264e7981be64bd76c43a11.json",
            "00000000000000000004.00000000000000000003.compacted.json", // start > end
            "00000000000000000004.0000000000000000006.compacted.json",
            "00000000000000000004.99999999999999999999.compacted.json",
            "00000000000000000004.00000000000000000006.compacted.parquet",
            "00000000000000000004.00000000000000000006.json",
            "00000000000000000003.crc.tmp",
            "_last_checkpoint.tmp",
            "_delta_log/00000000000000000003.json",
            "_sidecars/",
            "_sidecars/a/b.parquet",
            "_sidecars/..",
            "_sidecarsx.parquet",
            // Multibyte characters: never split inside one, never accepted.
            "０００００００００００００００００００３.json",
            "0000000000000000000é.json",
            "000000000000000000003é.json",
            "00000000000000000003.jsoné",
            "00000000000000000003.checkpoint.é.parquet",
            "00000000000000000003.checkpoint.000000000é.0000000002.parquet",
            "00000000000000000004.0000000000000000000é.compacted.json",
            "é",
        ] {
            assert_eq!(LogPath::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn constructors_check_their_rules() {
        assert_eq!(LogPath::checkpoint_part(1, 0, 2), None);
        assert_eq!(LogPath::checkpoint_part(1, 3, 2), None);
        assert_eq!(LogPath::compaction(4, 3), None);
        assert_eq!(
            LogPath::v2_checkpoint(1, "not-a-uuid", CheckpointFormat::Json),
            None
        );
        assert_eq!(LogPath::sidecar(""), None);
        assert_eq!(LogPath::sidecar("a/b"), None);
    }

    #[test]
    fn version_prefix_sorts_below_the_version() {
        let prefix = LogPath::version_prefix(9);
        for p in [
            LogPath::commit(9),
            LogPath::checkpoint(9),
            LogPath::crc(9),
            LogPath::commit(10),
        ] {
            assert!(p.file_name() > prefix, "{p:?}");
        }
        assert!(LogPath::commit(8).file_name() < prefix);
    }

    #[test]
    fn arbitrary_strings_never_panic() {
        // Every prefix and suffix of some valid names, cut at every char boundary.
        for p in every_kind() {
            let name = p.path_in_log();
            let mut cuts: Vec<usize> = name.char_indices().map(|(i, _)| i).collect();
            cuts.push(name.len());
            for &i in &cuts {
                let _ = LogPath::parse(name.get(..i).unwrap_or_default());
                let _ = LogPath::parse(name.get(i..).unwrap_or_default());
                let (a, b) = name.split_at(i);
                let spliced = format!("{a}é{b}");
                if !matches!(p, LogPath::Sidecar(_)) {
                    assert_eq!(LogPath::parse(&spliced), None, "{spliced:?}");
                }
            }
        }
    }
}
