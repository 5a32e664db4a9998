//! Overwrite (`mode="overwrite"`): the table's rows replaced by new data
//! files in ONE `WRITE` commit (mode Overwrite), as Delta Spark's
//! `df.write.mode("overwrite")`.
//!
//! * Without a predicate every live file is removed; each remove carries the
//!   file's deletion vector descriptor, so its DV file becomes a tombstone
//!   VACUUM deletes once out of retention.
//! * With a predicate (Delta Spark's `replaceWhere`) only the matching rows
//!   go, through the DELETE machinery of [`super::row_deletes`]: new DVs
//!   where the predicate cuts a file, whole-file removes where every row
//!   matches. The new data must satisfy the predicate (checked by the data
//!   writer's caller, [`super::files`], before the commit).
//!
//! An overwrite reads the whole table: a concurrent commit that added data
//! (other than a blind append under WriteSerializable) or changed a file it
//! removes is a conflict, as in Delta Spark; DV changes of files it only cuts
//! with DVs are rebased like a DELETE's.
//!
//! A replaceWhere's read set is its predicate (`PredicateRows`): a file a
//! concurrent commit added conflicts (`ConcurrentAppend`) only when one of
//! its live rows matches it; files its partition values or stats rule out
//! are not read. Delta Spark 4.4 prunes such files by the predicate's
//! partition part only (any new file of an unpartitioned table conflicts);
//! deltadv reads the rows, so a concurrent append of rows outside the
//! predicate never stops it: it commits on top, rebased.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use arrow_cast::display::{ArrayFormatter, FormatOptions};
use futures::future::BoxFuture;
use futures::TryStreamExt;
use serde_json::{json, Map, Value};

use super::changes::{check_added_rows, AddedRowsCheck};
use super::conflict::{FileChange, ReadSet, RebaseFile};
use super::delete::{check_can_delete, matching_rows, targets_of};
use super::row_deletes::{remove_of, DeleteChanges, DeleteOptions};
use super::transaction::{Changes, Transaction};
use super::{live_files, now_ms};
use crate::error::{Error, Result};
use crate::expr::{Predicate, PruningStats};
use crate::io::TableStore;
use crate::log::actions::{Action, Add, Metadata, RecordCount};
use crate::log::features;
use crate::scan::{self, DeletedRows, ScanFile, ScanSpec};
use crate::table::snapshot::Snapshot;

/// The read set of a replaceWhere: the rows its predicate matches. Tells
/// whether a data file a concurrent commit added holds one.
struct PredicateRows {
    predicate: Arc<Predicate>,
    /// The predicate's top-level columns, the matching rows only.
    spec: ScanSpec,
}

impl PredicateRows {
    fn new(snapshot: &Snapshot, predicate: Arc<Predicate>) -> PredicateRows {
        let mut columns: Vec<String> = Vec::new();
        for c in predicate.columns() {
            if let Some(top) = c.logical.first() {
                if !columns.contains(top) {
                    columns.push(top.clone());
                }
            }
        }
        let mut spec = ScanSpec::for_snapshot(snapshot, Some(columns));
        spec.filter = Some(predicate.clone());
        spec.filter_rows = true;
        PredicateRows { predicate, spec }
    }

    /// The first live row of `add` the predicate matches, described by its
    /// columns' values; None when there is none (the file's partition
    /// values and stats may rule it out unread).
    async fn first_row(&self, store: &TableStore, add: &Add) -> Result<Option<String>> {
        let stats = PruningStats::parse(add.stats.as_deref());
        if !self
            .predicate
            .may_match_file(&add.partition_values, Some(&stats))
        {
            return Ok(None);
        }
        let file = ScanFile::of_add(add);
        let mut batches = scan::stream_file(store, &self.spec, &file, DeletedRows::Load).await?;
        while let Some(batch) = batches.try_next().await? {
            if batch.num_rows() == 0 {
                continue;
            }
            let options = FormatOptions::default().with_null("null");
            let mut shown = Vec::new();
            for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
                let value = ArrayFormatter::try_new(column.as_ref(), &options)
                    .map(|f| f.value(0).to_string())
                    .unwrap_or_else(|_| "?".into());
                shown.push(format!("{} = {value}", field.name()));
            }
            return Ok(Some(shown.join(", ")));
        }
        Ok(None)
    }
}

impl AddedRowsCheck for PredicateRows {
    fn first_match<'a>(
        &'a self,
        store: &'a TableStore,
        file: &'a Add,
    ) -> BoxFuture<'a, Result<Option<String>>> {
        Box::pin(self.first_row(store, file))
    }
}

/// What an overwrite removes.
enum Removed<'o> {
    /// Every live file, whole.
    All(Vec<Add>),
    /// The rows a predicate matches (DVs or whole-file removes).
    Rows(Box<DeleteChanges<'o>>),
}

/// The changes of an overwrite: what goes, then the new data files.
struct OverwriteChanges<'o> {
    removed: Removed<'o>,
    adds: Vec<Add>,
    /// Rows and bytes of `adds`.
    output_rows: i64,
    output_bytes: i64,
    /// Metrics of the last `actions`.
    metrics: Map<String, Value>,
    /// A replaceWhere's predicate, to check the rows of files a concurrent
    /// commit added.
    added_check: Option<PredicateRows>,
}

impl Changes for OverwriteChanges<'_> {
    async fn actions(&mut self, store: &TableStore) -> Result<Vec<Action>> {
        let mut m = Map::new();
        m.insert("numFiles".into(), json!(self.adds.len().to_string()));
        m.insert("numOutputRows".into(), json!(self.output_rows.to_string()));
        m.insert(
            "numOutputBytes".into(),
            json!(self.output_bytes.to_string()),
        );
        let mut actions = match &mut self.removed {
            Removed::All(files) => {
                let now = now_ms();
                let bytes: i64 = files.iter().map(|a| a.size).sum();
                m.insert("numRemovedFiles".into(), json!(files.len().to_string()));
                m.insert("numRemovedBytes".into(), json!(bytes.to_string()));
                files
                    .iter()
                    .map(|a| Action::Remove(Box::new(remove_of(a, now))))
                    .collect()
            }
            Removed::Rows(delete) => {
                // The keys Delta Spark 4.4 records for a replaceWhere overwrite.
                let actions = delete.actions(store).await?;
                let d = delete.delete_metrics();
                m.insert(
                    "numRemovedFiles".into(),
                    json!(d.num_removed_files.to_string()),
                );
                m.insert(
                    "numRemovedBytes".into(),
                    json!(delete.removed_bytes().to_string()),
                );
                m.insert(
                    "numDeletedRows".into(),
                    json!(d.num_deleted_rows.to_string()),
                );
                m.insert("numCopiedRows".into(), json!(d.num_copied_rows.to_string()));
                m.insert("numAddedChangeFiles".into(), json!("0"));
                actions
            }
        };
        self.metrics = m;
        actions.extend(self.adds.iter().map(|a| Action::Add(Box::new(a.clone()))));
        Ok(actions)
    }

    fn metrics(&self) -> Map<String, Value> {
        self.metrics.clone()
    }

    fn reads(&self) -> (ReadSet, BTreeMap<String, FileChange>) {
        let changes = match &self.removed {
            Removed::All(files) => files
                .iter()
                .map(|a| (a.path.clone(), FileChange::WholeFile))
                .collect(),
            Removed::Rows(delete) => delete.reads().1,
        };
        (ReadSet::WholeTable, changes)
    }

    async fn rebase(
        &mut self,
        store: &TableStore,
        version: u64,
        files: Vec<RebaseFile>,
    ) -> Result<()> {
        match &mut self.removed {
            Removed::Rows(delete) => delete.rebase(store, version, files).await,
            Removed::All(_) => Err(Error::Internal(format!(
                "rebase onto version {version} of an overwrite that removes whole files"
            ))),
        }
    }

    fn checks_added_rows(&self) -> bool {
        self.added_check.is_some()
    }

    async fn check_added(
        &mut self,
        store: &TableStore,
        version: u64,
        added: Vec<Add>,
    ) -> Result<()> {
        let Some(check) = &self.added_check else {
            return Err(Error::Internal(format!(
                "version {version} added files an overwrite of the whole table does not check"
            )));
        };
        check_added_rows(check, store, version, &added, |row| {
            format!(
                "the concurrent commit of version {version} added a row the replaceWhere \
                 predicate {} matches ({row})",
                check.predicate.text()
            )
        })
        .await
    }
}

/// What [`overwrite_files`] commits besides the data files.
#[derive(Debug, Clone, Default)]
pub struct OverwriteOptions {
    /// Replace only the rows this predicate (deltadv's SQL subset) matches.
    pub predicate: Option<String>,
    /// New metadata (schema evolution) committed with the data.
    pub metadata: Option<Metadata>,
    /// `operationParameters.partitionBy`: the partition columns the writer
    /// named (Delta Spark records the DataFrameWriter's `partitionBy`).
    pub partition_by: Vec<String>,
    /// More `operationParameters` (`canMergeSchema`, `canOverwriteSchema`).
    pub parameters: Map<String, Value>,
    /// The session time zone `predicate` reads instants in (UTC by default).
    pub time_zone: crate::expr::TimeZone,
    /// The `txn` the commit carries, and its operation (`STREAMING UPDATE`
    /// for a streaming batch in complete mode).
    pub app: super::app_txn::AppCommit,
}

/// Commit an overwrite of `snapshot`'s table by `adds` (data files already
/// written under the table root, matching `options.predicate` when given).
/// Returns the committed version.
pub async fn overwrite_files(
    snapshot: &Snapshot,
    adds: Vec<Add>,
    options: &OverwriteOptions,
) -> Result<u64> {
    let started = Instant::now();
    match &options.metadata {
        Some(m) => {
            let schema = crate::log::schema::StructType::parse(&m.schema_string)?;
            features::check_append(snapshot.protocol(), m, &schema)?;
        }
        None => {
            features::check_append(snapshot.protocol(), snapshot.metadata(), snapshot.schema())?
        }
    }
    let mut output_rows: i64 = 0;
    let mut output_bytes: i64 = 0;
    for add in &adds {
        output_rows += RecordCount::parse(add.stats.as_deref().unwrap_or("{}"), &add.path)?
            .num_records
            .unwrap_or(0);
        output_bytes += add.size;
    }
    let delete_options = DeleteOptions::default();
    let live = live_files(snapshot)?;
    let mut added_check = None;
    let removed = match &options.predicate {
        None => Removed::All(live.into_values().map(|f| f.add).collect()),
        Some(text) => {
            let dvs = check_can_delete(snapshot, true)?;
            let pred = Arc::new(Predicate::new_in_zone(
                text,
                snapshot.schema(),
                &snapshot.metadata().partition_columns,
                snapshot.column_mapping(),
                crate::expr::Binding::Strict,
                &options.time_zone,
            )?);
            added_check = Some(PredicateRows::new(snapshot, pred.clone()));
            let rows = matching_rows(snapshot, &live, Some(pred)).await?;
            let targets = targets_of(snapshot, &live, rows).await?;
            Removed::Rows(Box::new(DeleteChanges::new(
                snapshot,
                targets,
                &delete_options,
                dvs,
                started,
            )))
        }
    };
    // As Delta Spark 4.4 records them: the predicate as the text given.
    let mut parameters = Map::new();
    parameters.insert("mode".into(), Value::from("Overwrite"));
    parameters.insert(
        "partitionBy".into(),
        Value::from(serde_json::to_string(&options.partition_by).unwrap_or_default()),
    );
    if let Some(p) = &options.predicate {
        parameters.insert("predicate".into(), Value::from(p.as_str()));
    }
    parameters.extend(options.parameters.clone());
    let mut txn = options
        .app
        .apply(Transaction::new(snapshot, "WRITE")?.with_parameters(parameters));
    if let Some(m) = &options.metadata {
        txn = txn.with_metadata(m.clone());
    }
    let mut changes = OverwriteChanges {
        removed,
        adds,
        output_rows,
        output_bytes,
        metrics: Map::new(),
        added_check,
    };
    let outcome = txn.commit(&mut changes).await?;
    Ok(outcome.version.unwrap_or(snapshot.version()))
}
