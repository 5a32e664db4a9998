//! Change Data Feed reads: the rows each commit of a version range changed,
//! as scan tasks ([`ScanTask`] with a [`TaskChange`]), so the same tasks run
//! in this process (`DeltaTable.load_cdf`) or on Spark executors.
//!
//! Which rows a commit changed is [`crate::log::cdf`]'s (pure) decision; this
//! module resolves the range, fetches the commits, checks that the feed was
//! on throughout, and turns each changed file into a task. Rows a new DV
//! deletes are read from the data file with a row selection of just those
//! rows: the rows the commit left alone are never decoded.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::{Schema, SchemaRef};
use futures::{FutureExt, StreamExt, TryStreamExt};

use super::task::{change_columns, ScanTask, TaskChange};
use super::{BatchStream, ReadOptions, ScanFile, ScanSpec};
use crate::error::{Error, Result};
use crate::expr::{Binding, Filter, Predicate};
use crate::io::TableStore;
use crate::log::actions::{self, Action};
use crate::log::cdf;
use crate::log::features::properties::ENABLE_CHANGE_DATA_FEED;
use crate::log::path::LogPath;
use crate::table::snapshot::Snapshot;

/// Commit files fetched at once.
const COMMIT_READ_CONCURRENCY: usize = 16;

/// Which versions to read changes of, and what of them.
#[derive(Debug, Clone, Default)]
pub struct ChangeOptions {
    /// First version (default 0); or `starting_timestamp`.
    pub starting_version: Option<u64>,
    /// Last version (default and upper limit: the latest); or `ending_timestamp`.
    pub ending_version: Option<u64>,
    /// The first commit at or after this time (ms since the epoch).
    pub starting_timestamp: Option<i64>,
    /// The last commit at or before this time (ms since the epoch).
    pub ending_timestamp: Option<i64>,
    /// Table columns to return (all when `None`), before the change columns.
    pub columns: Option<Vec<String>>,
    /// Only rows this predicate matches (over the table's columns).
    pub filter: Option<Filter>,
}

/// The tasks of a change data feed read.
#[derive(Debug, Clone)]
pub struct ChangePlan {
    pub starting_version: u64,
    pub ending_version: u64,
    /// The table's columns (as asked for) then `_change_type`,
    /// `_commit_version` and `_commit_timestamp`.
    pub schema: SchemaRef,
    /// In commit order; within a commit, as [`cdf::changed_files`] lists them.
    pub tasks: Vec<ScanTask>,
}

fn not_recorded(version: u64, start: u64, end: u64) -> Error {
    Error::Unsupported(format!(
        "the change data feed of versions {start} to {end} cannot be read: change data was \
         not recorded for version {version} ({ENABLE_CHANGE_DATA_FEED} is not true there)"
    ))
}

/// Resolve the version range of `options` against the table's commits.
async fn resolve_range(store: &TableStore, options: &ChangeOptions) -> Result<(u64, u64)> {
    if options.starting_version.is_some() && options.starting_timestamp.is_some() {
        return Err(Error::InvalidArgument(
            "give a starting version or a starting timestamp, not both".into(),
        ));
    }
    if options.ending_version.is_some() && options.ending_timestamp.is_some() {
        return Err(Error::InvalidArgument(
            "give an ending version or an ending timestamp, not both".into(),
        ));
    }
    let times = Snapshot::commit_timestamps(store).await?;
    let latest = times
        .last()
        .map(|(v, _)| *v)
        .ok_or_else(|| Error::NotATable(format!("{}: no commits in _delta_log", store.url())))?;
    let start = match options.starting_timestamp {
        Some(ts) => times
            .iter()
            .find(|(_, t)| *t >= ts)
            .map(|(v, _)| *v)
            .ok_or_else(|| {
                Error::VersionNotFound(format!(
                    "the starting timestamp {ts} ms is after the latest commit (version \
                     {latest}, at {} ms)",
                    times.last().map_or(0, |(_, t)| *t)
                ))
            })?,
        None => options.starting_version.unwrap_or(0),
    };
    let end = match options.ending_timestamp {
        Some(ts) => times
            .iter()
            .filter(|(_, t)| *t <= ts)
            .map(|(v, _)| *v)
            .max()
            .ok_or_else(|| {
                Error::VersionNotFound(format!(
                    "the ending timestamp {ts} ms is before the first commit"
                ))
            })?,
        None => options.ending_version.unwrap_or(latest).min(latest),
    };
    if start > latest {
        return Err(Error::VersionNotFound(format!(
            "the starting version {start} is after the latest version {latest}"
        )));
    }
    if start > end {
        return Err(Error::VersionNotFound(format!(
            "the change data feed range ends (version {end}) before it starts (version {start})"
        )));
    }
    Ok((start, end))
}

/// The task reading the rows `file` changed in commit `version` (at
/// `timestamp`, ms since the epoch), with `snapshot`'s schema: `columns`
/// (all when `None`) and, with `filter`, only the rows it matches.
#[allow(clippy::too_many_arguments)]
pub(crate) fn change_task(
    snapshot: &Snapshot,
    file: cdf::ChangedFile,
    version: u64,
    timestamp: i64,
    table_uri: &str,
    storage_options: &HashMap<String, String>,
    columns: Option<Vec<String>>,
    filter: Option<Filter>,
) -> ScanTask {
    let whole = ScanFile {
        path: file.path,
        size: file.size,
        partition_values: file.partition_values,
        deletion_vector: None,
        row_groups: None,
        base_row_id: None,
        default_row_commit_version: None,
    };
    let mut task = ScanTask::of_file(snapshot, whole, table_uri, storage_options);
    task.columns = columns;
    task.filter_rows = filter.is_some();
    task.filter = filter;
    task.change = Some(TaskChange {
        rows: file.rows,
        commit_version: version,
        commit_timestamp: timestamp,
    });
    task
}

/// Read `tasks` (a [`ChangePlan`]'s, in commit order; all of the table at
/// `store`, whose client and request counters they share) as one stream, in task
/// order and in row order within a task when `options.ordered` (else as
/// decoded): up to `options.threads` tasks are read at once (each started,
/// its DV loaded and its footer fetched, as it enters the window), each task
/// decoding its file's pieces on its share of the threads, so a feed of many
/// small change files keeps every thread busy and one large file still
/// decodes in parallel. At most threads + 1 tasks are live when ordered
/// (the one being consumed and those read ahead), each holding at most its
/// share + 1 pieces of [`ReadOptions::read_ahead_bytes`].
///
/// Must be called within the runtime.
pub fn stream_tasks(store: TableStore, tasks: Vec<ScanTask>, options: ReadOptions) -> BatchStream {
    let threads = options.threads.max(1);
    let at_once = threads.min(tasks.len()).max(1);
    let per_task = ReadOptions {
        threads: threads.div_ceil(at_once),
        ..options
    };
    let start = move |task: ScanTask| -> BatchStream {
        let store = store.clone();
        crate::io::spawn_now(async move { task.stream_on(store, per_task).await })
            .map(|started| started.and_then(|stream| stream))
            .into_stream()
            .try_flatten()
            .boxed()
    };
    let failed = |why| {
        Err(Error::Internal(format!(
            "scheduling the change data feed's reads failed: {why}"
        )))
    };
    let tasks = futures::stream::iter(tasks);
    if options.ordered {
        crate::io::spawn_window(tasks, at_once + 1, start, failed)
            .flatten()
            .boxed()
    } else {
        crate::io::spawn_window(tasks, at_once, start, failed)
            .flatten_unordered(None)
            .boxed()
    }
}

/// Plan a change data feed read of the table at `store` (`table_uri` and
/// `storage_options` go into the tasks, the options never into their JSON).
pub async fn plan_changes(
    store: &TableStore,
    table_uri: &str,
    storage_options: &HashMap<String, String>,
    options: &ChangeOptions,
) -> Result<ChangePlan> {
    let (start, end) = resolve_range(store, options).await?;
    // The read schema is the range's last version's; the feed must be on at
    // its first version and stay on.
    let last = Snapshot::load(store.clone(), Some(end)).await?;
    let first_metadata = if start == end {
        last.metadata().clone()
    } else {
        Snapshot::load(store.clone(), Some(start))
            .await?
            .metadata()
            .clone()
    };
    if !cdf::is_enabled(&first_metadata) {
        return Err(not_recorded(start, start, end));
    }
    let mut spec = ScanSpec::for_snapshot(&last, options.columns.clone());
    let table_schema = spec.output_schema()?;
    let filter = match &options.filter {
        None => None,
        Some(f) => {
            // Bound here to fail early on a bad predicate, and to prune files
            // by partition values.
            let p = Predicate::bind(
                f,
                last.schema(),
                &last.metadata().partition_columns,
                last.column_mapping(),
                Binding::Strict,
            )?;
            spec.filter = Some(Arc::new(p));
            Some(f.clone())
        }
    };
    let times: HashMap<u64, i64> = Snapshot::commit_timestamps(store)
        .await?
        .into_iter()
        .collect();
    let commits: Vec<(u64, Vec<Action>)> = futures::stream::iter(start..=end)
        .map(|version| async move {
            let name = LogPath::Commit(version).relative_path();
            let bytes = match store.get(&store.path(&name)).await {
                Err(Error::NotFound { .. }) => {
                    return Err(Error::VersionNotFound(format!(
                        "the commit of version {version} ({name}) is gone from the log \
                         (cleaned up), so its changes cannot be read"
                    )))
                }
                other => other?,
            };
            let parsed =
                crate::io::spawn_blocking(move || actions::parse_commit(&bytes, &name)).await??;
            Ok::<_, Error>((version, parsed))
        })
        .buffered(COMMIT_READ_CONCURRENCY)
        .try_collect()
        .await?;
    let mut tasks = Vec::new();
    for (version, actions) in commits {
        let name = LogPath::Commit(version).relative_path();
        for a in &actions {
            if let Action::Metadata(m) = a {
                if !cdf::is_enabled(m) {
                    return Err(not_recorded(version, start, end));
                }
            }
        }
        let timestamp = actions::in_commit_timestamp(&actions)
            .or_else(|| times.get(&version).copied())
            .unwrap_or_default();
        for file in cdf::changed_files(&actions, &name)? {
            if let Some(p) = spec.filter.as_deref() {
                if !p.may_match_file(&file.partition_values, None) {
                    continue;
                }
            }
            tasks.push(change_task(
                &last,
                file,
                version,
                timestamp,
                table_uri,
                storage_options,
                options.columns.clone(),
                filter.clone(),
            ));
        }
    }
    let mut fields: Vec<_> = table_schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.extend(change_columns());
    Ok(ChangePlan {
        starting_version: start,
        ending_version: end,
        schema: Arc::new(Schema::new(fields)),
        tasks,
    })
}
