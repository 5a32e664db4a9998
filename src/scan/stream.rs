//! Streaming source reads: the files of one micro-batch as scan tasks, and
//! the offset it ends at, as Delta Spark's `DeltaSource` plans them.
//!
//! What a stream reads, in which order, and which commits stop it is
//! [`crate::log::stream`]'s (pure) decision; this module fetches the initial
//! snapshot and the commits after it, in order and only as far as the scan
//! goes (a commit is checked when the scan reaches it, as Delta Spark's lazy
//! iterator does), and turns each file into a task reading its rows with its
//! deletion vector applied.

use std::collections::HashMap;

use futures::StreamExt;

use super::task::ScanTask;
use super::ScanFile;
use crate::error::{Error, Result};
use crate::io::TableStore;
use crate::log::actions::{self, Action, Add};
use crate::log::path::LogPath;
use crate::log::stream::{
    self, Admission, ChangePolicy, IndexedFile, OffsetScan, ReadSchema, ScanStart, Step,
    StreamOffset,
};
use crate::table::snapshot::{check_protocol, list_log, Snapshot};

/// Commit files fetched ahead of the scan.
const COMMIT_READ_AHEAD: usize = 8;

/// How a stream reads (the source's options).
#[derive(Debug, Clone, Default)]
pub struct StreamOptions {
    /// `startingVersion` (already resolved from `startingTimestamp`): read the
    /// changes from this version on, no initial snapshot.
    pub starting_version: Option<u64>,
    pub policy: ChangePolicy,
    /// Check the metadata at the scan's start against the stream's schema
    /// when it starts before the stream's version ([`stream::check_start`]):
    /// once per query, as Delta Spark; the caller says when.
    pub check_start: bool,
}

/// What a scan found: the offset it ends at and the files it took.
#[derive(Debug, Clone)]
pub struct StreamScan {
    pub end: StreamOffset,
    /// The files read (sentinels left out), in stream order.
    pub files: Vec<IndexedFile>,
}

/// How far a scan goes.
#[derive(Debug, Clone, Copy)]
pub enum ScanEnd<'a> {
    /// Looking for the next offset: up to `bound` (inclusive; the end of an
    /// AvailableNow run) when given, within `admission` when given.
    Next {
        bound: Option<&'a StreamOffset>,
        admission: Option<Admission>,
    },
    /// The files of the micro-batch that ends at this offset.
    Batch(&'a StreamOffset),
}

/// What a scan from `start` to `end` starts with, for both kinds of stream
/// (plain and change feed): the batch's end (for a batch), the bound, the
/// admission limits, where the scan begins, and the schema it reads with.
pub(crate) struct Setup<'a> {
    pub batch_end: Option<&'a StreamOffset>,
    pub bound: Option<&'a StreamOffset>,
    pub admission: Option<Admission>,
    pub begin: ScanStart,
    pub read: ReadSchema<'a>,
}

impl<'a> Setup<'a> {
    pub(crate) fn new(
        source: &'a Snapshot,
        start: &StreamOffset,
        end: ScanEnd<'a>,
        options: &StreamOptions,
    ) -> Result<Setup<'a>> {
        let (batch_end, bound, admission) = match end {
            ScanEnd::Next { bound, admission } => (None, bound, admission),
            ScanEnd::Batch(e) => (Some(e), Some(e), None),
        };
        let begin =
            stream::scan_start(start, batch_end, options.starting_version, source.version())?;
        let read = ReadSchema {
            schema: source.schema(),
            partition_columns: &source.metadata().partition_columns,
            column_mapping: source.column_mapping(),
            version: source.version(),
            has_starting_option: options.starting_version.is_some(),
        };
        Ok(Setup {
            batch_end,
            bound,
            admission,
            begin,
            read,
        })
    }
}

/// Scan the stream of the table `source` (the snapshot the stream reads with:
/// its schema, its id; the table when the query was loaded) from `start` to
/// `end`. `table_path` is named in errors.
pub async fn scan(
    source: &Snapshot,
    start: &StreamOffset,
    end: ScanEnd<'_>,
    options: &StreamOptions,
    table_path: &str,
) -> Result<StreamScan> {
    let table_id = source.metadata().id.clone();
    let Setup {
        batch_end,
        bound,
        admission,
        begin,
        read,
    } = Setup::new(source, start, end, options)?;
    let mut offsets = OffsetScan::new(begin, bound, admission)?;
    let mut taken: Vec<IndexedFile> = Vec::new();
    let mut last: Option<IndexedFile> = None;
    let mut take = |f: IndexedFile, offsets: &mut OffsetScan| -> bool {
        match offsets.offer(&f) {
            Step::Skip => true,
            Step::Stop => false,
            Step::Take => {
                if f.add.is_some() {
                    taken.push(f.clone());
                }
                last = Some(f);
                true
            }
        }
    };
    let mut going = true;
    let mut first_commit = begin.version;
    // The metadata at the start, when the start check needs it.
    let mut start_metadata = None;
    if begin.is_starting_version {
        let snapshot;
        let at = if begin.version == source.version() {
            source
        } else {
            snapshot = Snapshot::load(source.store().clone(), Some(begin.version)).await?;
            start_metadata = Some(snapshot.metadata().clone());
            &snapshot
        };
        let adds: Vec<Add> = at.files()?.into_iter().map(|f| f.add).collect();
        for f in stream::snapshot_files(adds, begin.version) {
            if !take(f, &mut offsets) {
                going = false;
                break;
            }
        }
        first_commit = begin.version + 1;
    }
    if going {
        let store = source.store();
        let versions = commit_versions(store, first_commit).await?;
        let mut commits =
            futures::stream::iter(versions)
                .map(|version| async move {
                    Ok::<_, Error>((version, read_commit(store, version).await?))
                })
                .buffered(COMMIT_READ_AHEAD);
        'commits: while let Some(next) = commits.next().await {
            let (version, actions) = next?;
            for a in &actions {
                if let Action::Protocol(p) = a {
                    check_protocol(p)?;
                }
            }
            // A batch that ends at this commit's base reads none of it: Delta
            // Spark does not check it then.
            let ends_before = batch_end.is_some_and(|e| {
                e.index == stream::BASE_INDEX && u64::try_from(e.reservoir_version) == Ok(version)
            });
            let skip = !ends_before
                && stream::check_commit(&actions, version, options.policy, read, table_path)?;
            for f in stream::commit_files(&actions, version, skip) {
                if !take(f, &mut offsets) {
                    break 'commits;
                }
            }
        }
    }
    // Like Delta Spark, once the scan found something to read (per-commit
    // failures come first).
    if options.check_start && last.is_some() && begin.version < source.version() {
        let metadata = match start_metadata {
            Some(m) => m,
            None => Snapshot::load(source.store().clone(), Some(begin.version))
                .await?
                .metadata()
                .clone(),
        };
        stream::check_start(&metadata, begin.version, read)?;
    }
    let end = match &last {
        Some(f) => offsets.offset_after(f, &table_id)?,
        None => start.clone(),
    };
    Ok(StreamScan { end, files: taken })
}

/// The commit versions from `first` on, consecutive; an error if `first`
/// is gone from the log while later ones exist.
pub(crate) async fn commit_versions(store: &TableStore, first: u64) -> Result<Vec<u64>> {
    let listed = list_log(store, Some(&format!("{first:020}"))).await?;
    let mut commits: Vec<u64> = listed
        .iter()
        .filter_map(|f| match f.path {
            LogPath::Commit(v) if v >= first => Some(v),
            _ => None,
        })
        .collect();
    commits.sort_unstable();
    let mut out = Vec::new();
    for v in commits {
        if v != first + out.len() as u64 {
            if out.is_empty() {
                return Err(Error::VersionNotFound(format!(
                    "the stream needs the commit of version {first}, which is gone from the log \
                     of {} (the first one left is {v}): the table's log was cleaned up past the \
                     stream's offset",
                    store.url()
                )));
            }
            break;
        }
        out.push(v);
    }
    Ok(out)
}

pub(crate) async fn read_commit(store: &TableStore, version: u64) -> Result<Vec<Action>> {
    let name = LogPath::Commit(version).relative_path();
    let bytes = store.get(&store.path(&name)).await?;
    crate::io::spawn_blocking(move || actions::parse_commit(&bytes, &name)).await?
}

/// A task reading the rows of `add` (its deletion vector applied), with the
/// schema of `source`.
pub fn task_of(
    source: &Snapshot,
    add: &Add,
    table_uri: &str,
    storage_options: &HashMap<String, String>,
) -> ScanTask {
    ScanTask::of_file(source, ScanFile::of_add(add), table_uri, storage_options)
}

/// The version a stream with `startingTimestamp` starts at (ms since the
/// epoch): the first commit at or after it (Delta Spark's
/// `getStartingVersionFromTimestamp`); an error when it is after the latest.
pub async fn starting_version_at(store: &TableStore, timestamp_ms: i64) -> Result<u64> {
    let times = Snapshot::commit_timestamps(store).await?;
    if let Some((v, _)) = times.iter().find(|(_, t)| *t >= timestamp_ms) {
        return Ok(*v);
    }
    let (latest, at) = times
        .last()
        .copied()
        .ok_or_else(|| Error::NotATable(format!("{}: no commits in _delta_log", store.url())))?;
    Err(Error::VersionNotFound(format!(
        "the provided timestamp ({timestamp_ms} ms) is after the latest commit (version \
         {latest}, at {at} ms): no commit to start the stream at"
    )))
}
