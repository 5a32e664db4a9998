//! Change-feed stream reads (`readChangeFeed=true`): the change files of one
//! micro-batch as change tasks (each row with `_change_type`,
//! `_commit_version`, `_commit_timestamp`), and the offset it ends at, as
//! Delta Spark's `DeltaSourceCDCSupport` plans them.
//!
//! Which entries a batch takes is [`crate::log::stream_cdf`]'s (pure)
//! decision and which rows each changed is [`crate::log::cdf`]'s; this module
//! fetches the initial snapshot and the commits after it, in order and only
//! as far as the scan goes (each commit is checked when the scan reads it:
//! protocol, schema, the feed still on), and turns a batch's entries into
//! tasks, commit by commit.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::{Schema, SchemaRef};
use futures::StreamExt;

use super::cdf::change_task;
use super::stream::{commit_versions, read_commit, ScanEnd, Setup, StreamOptions};
use super::task::{change_columns, ScanTask};
use super::ScanSpec;
use crate::error::{Error, Result};
use crate::log::actions::{self, Action, Add, Metadata};
use crate::log::cdf;
use crate::log::features::properties::ENABLE_CHANGE_DATA_FEED;
use crate::log::path::LogPath;
use crate::log::stream::{self, StreamOffset};
use crate::log::stream_cdf::{self as changes, ChangeScan, IndexedChange};
use crate::table::snapshot::{check_protocol, Snapshot};

/// Commit files fetched ahead of the scan.
const COMMIT_READ_AHEAD: usize = 8;

/// What a change-feed scan found: the offset it ends at and, for a batch,
/// the tasks reading its changes.
#[derive(Debug, Clone)]
pub struct ChangeStreamScan {
    pub end: StreamOffset,
    /// In stream order; empty unless the scan read a batch.
    pub tasks: Vec<ScanTask>,
}

/// The schema of a change-feed stream of `source`: the table's columns, then
/// `_change_type`, `_commit_version` and `_commit_timestamp`.
pub fn change_schema(source: &Snapshot) -> Result<SchemaRef> {
    let table = ScanSpec::for_snapshot(source, None).output_schema()?;
    let mut fields: Vec<_> = table.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.extend(change_columns());
    Ok(Arc::new(Schema::new(fields)))
}

fn check_enabled(metadata: &Metadata, version: u64) -> Result<()> {
    if cdf::is_enabled(metadata) {
        return Ok(());
    }
    Err(Error::Unsupported(format!(
        "the change data feed cannot be streamed from version {version}: change data was not \
         recorded there ({ENABLE_CHANGE_DATA_FEED} is not true)"
    )))
}

/// One version's entries the scan took, with its in-commit timestamp.
struct Taken {
    version: u64,
    entries: Vec<IndexedChange>,
    in_commit_timestamp: Option<i64>,
}

/// Scan the change feed of `source` (the snapshot the stream reads with) from
/// `start` to `end`; for a batch ([`ScanEnd::Batch`]), its tasks, reading
/// with `table_uri` and `storage_options`.
pub async fn scan_changes(
    source: &Snapshot,
    start: &StreamOffset,
    end: ScanEnd<'_>,
    options: &StreamOptions,
    table_uri: &str,
    storage_options: &HashMap<String, String>,
) -> Result<ChangeStreamScan> {
    let table_id = source.metadata().id.clone();
    let Setup {
        batch_end,
        bound,
        admission,
        begin,
        read,
    } = Setup::new(source, start, end, options)?;
    let mut scan = ChangeScan::new(begin, bound, admission)?;
    let mut taken: Vec<Taken> = Vec::new();
    let mut last: Option<IndexedChange> = None;
    let mut record = |version: u64, got: Vec<IndexedChange>, ict: Option<i64>| {
        if let Some(e) = got.last() {
            last = Some(e.clone());
        }
        let entries: Vec<IndexedChange> = got.into_iter().filter(|e| e.action.is_some()).collect();
        if !entries.is_empty() {
            taken.push(Taken {
                version,
                entries,
                in_commit_timestamp: ict,
            });
        }
    };
    let mut first_commit = begin.version;
    if begin.is_starting_version {
        let loaded;
        let at = if begin.version == source.version() {
            source
        } else {
            loaded = Snapshot::load(source.store().clone(), Some(begin.version)).await?;
            &loaded
        };
        check_enabled(at.metadata(), begin.version)?;
        let adds: Vec<Add> = at.files()?.into_iter().map(|f| f.add).collect();
        let got = scan.take(changes::snapshot_changes(adds, begin.version), true);
        record(begin.version, got, at.in_commit_timestamp());
        first_commit = begin.version + 1;
    } else if start.is_not_started() {
        // A fresh query from `startingVersion`: the feed must be on there
        // (past the source's version, as at the source's: later metadata
        // actions are checked as the scan reads them).
        if begin.version >= source.version() {
            check_enabled(source.metadata(), begin.version)?;
        } else {
            let at = Snapshot::load(source.store().clone(), Some(begin.version)).await?;
            check_enabled(at.metadata(), begin.version)?;
        }
    }
    let store = source.store();
    let versions = commit_versions(store, first_commit).await?;
    let mut commits = futures::stream::iter(versions)
        .map(|version| async move { Ok::<_, Error>((version, read_commit(store, version).await?)) })
        .buffered(COMMIT_READ_AHEAD);
    while let Some(next) = commits.next().await {
        let (version, actions) = next?;
        // Checked when read, before the scan decides whether it goes on to
        // this commit: Delta Spark's iterator reads it to ask.
        for a in &actions {
            match a {
                Action::Protocol(p) => check_protocol(p)?,
                Action::Metadata(m) => {
                    let schema = crate::log::schema::StructType::parse(&m.schema_string)?;
                    stream::check_schema(&schema, &m.partition_columns, read, version)?;
                    check_enabled(m, version)?;
                }
                _ => {}
            }
        }
        if !scan.reaches(version) {
            break;
        }
        let got = scan.take(changes::commit_changes(&actions, version), false);
        record(version, got, actions::in_commit_timestamp(&actions));
    }
    // As the plain stream: a query starting before the stream's schema was
    // read checks the metadata where it starts, once, when it reads anything.
    if options.check_start && last.is_some() && begin.version < source.version() {
        let at = Snapshot::load(source.store().clone(), Some(begin.version)).await?;
        stream::check_start(at.metadata(), begin.version, read)?;
    }
    let end = match &last {
        Some(e) => scan.offset_after(e, &table_id)?,
        None => start.clone(),
    };
    let tasks = if batch_end.is_some() {
        batch_tasks(source, taken, table_uri, storage_options).await?
    } else {
        Vec::new()
    };
    Ok(ChangeStreamScan { end, tasks })
}

/// The tasks reading the changes of the entries a batch took, version by
/// version, with the stream's schema.
async fn batch_tasks(
    source: &Snapshot,
    taken: Vec<Taken>,
    table_uri: &str,
    storage_options: &HashMap<String, String>,
) -> Result<Vec<ScanTask>> {
    let times: HashMap<u64, i64> = if taken.iter().any(|t| t.in_commit_timestamp.is_none()) {
        Snapshot::commit_timestamps(source.store())
            .await?
            .into_iter()
            .collect()
    } else {
        HashMap::new()
    };
    let mut tasks = Vec::new();
    for t in taken {
        let name = LogPath::Commit(t.version).relative_path();
        let timestamp = match t
            .in_commit_timestamp
            .or_else(|| times.get(&t.version).copied())
        {
            Some(ts) => ts,
            None => {
                return Err(Error::VersionNotFound(format!(
                    "the commit of version {} ({name}) is gone from the log: its timestamp \
                     for the change data feed is unknown",
                    t.version
                )))
            }
        };
        let actions: Vec<Action> = t.entries.into_iter().filter_map(|e| e.action).collect();
        for file in cdf::changed_files(&actions, &name)? {
            tasks.push(change_task(
                source,
                file,
                t.version,
                timestamp,
                table_uri,
                storage_options,
                None,
                None,
            ));
        }
    }
    Ok(tasks)
}
