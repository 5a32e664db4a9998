//! One transaction for every commit deltadv makes.
//!
//! A [`Transaction`] is opened on a snapshot (or on an empty location, to
//! create a table). It records the read version and the isolation level
//! (`delta.isolationLevel`, default WriteSerializable), takes the operation's
//! changes as a [`Changes`] value, and commits them with put-if-absent:
//!
//! 1. the changes produce their actions for the current bases;
//! 2. the transaction assembles the commit: `commitInfo` first (readVersion,
//!    isolationLevel, isBlindAppend, operation, operationParameters,
//!    operationMetrics, engineInfo, txnId, and an `inCommitTimestamp` on
//!    tables with in-commit timestamps), any new protocol and metadata, then
//!    the file actions, with row ids assigned on tables with row tracking;
//! 3. put-if-absent of `<version>.json`; on success, a checkpoint when one is
//!    due (classic, or V2 on `v2Checkpoint` tables);
//! 4. on a lost race, after a backoff, every commit made since the read
//!    version goes to [`super::conflict::check`], oldest first: proceed,
//!    rebase the changes (row-level concurrency: the changes reload the
//!    winner's DVs and check their rows), or fail with a conflict; then the
//!    version after the latest is tried. Attempts are bounded, with
//!    exponential backoff.
//!
//! An application transaction ([`Transaction::with_app_transaction`], see
//! [`super::app_txn`]) is checked here too: the commit is skipped when the
//! snapshot read holds its version already, else its `txn` action leads the
//! file actions, and a winner with a `txn` of the same application id is a
//! conflict.
//!
//! Table features handled here, once for every operation:
//!
//! * **in-commit timestamps** (`delta.enableInCommitTimestamps`): the commit's
//!   `inCommitTimestamp` (and `timestamp`) is `max(now, previous + 1)`, the
//!   previous one read from the commit this transaction follows; turning the
//!   property on for an existing table records
//!   `delta.inCommitTimestampEnablementVersion`/`…Timestamp`.
//! * **row tracking** (the `rowTracking` feature): a new file gets
//!   `baseRowId` = high-water mark + 1 and `defaultRowCommitVersion` = the
//!   commit's version, and the `delta.rowTracking` domain's
//!   `rowIdHighWaterMark` advances by its row count; a file re-added with a
//!   new DV keeps its `baseRowId` and `defaultRowCommitVersion`.
//!
//! After the commit, best-effort (a failure is reported in
//! [`CommitOutcome`], never undoes the commit): the checkpoint the version
//! makes due, then, on a UniForm Iceberg table
//! (`delta.universalFormat.enabledFormats=iceberg` with IcebergCompatV3),
//! the Iceberg snapshot mirroring it ([`super::iceberg::sync_iceberg`],
//! which catches up from the last Delta version it mirrored).

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::app_txn::{AppTransaction, StreamingUpdate};
use super::commit::{conflict, read_commit, try_commit};
use super::conflict::{
    self as checker, Decision, FileChange, IsolationLevel, ReadSet, RebaseFile, TxnContext,
    WinningCommit,
};
use super::iceberg::DeltaState;
use super::{fail_point, now_ms, ENGINE_INFO};
use crate::error::{Error, Result};
use crate::io::TableStore;
use crate::log::actions::{
    in_commit_timestamp as commit_ict, Action, Add, DomainMetadata, Metadata, Protocol, RecordCount,
};
use crate::log::features::properties::{
    TableProperties, ICT_ENABLEMENT_TIMESTAMP, ICT_ENABLEMENT_VERSION, ROW_TRACKING_DOMAIN,
};
use crate::log::features::{self, iceberg::IcebergMirror};
use crate::table::snapshot::Snapshot;

/// Commit attempts before a busy table is given up on. Every lost attempt
/// means another writer committed, so the table as a whole always moves on;
/// the bound only stops a writer that keeps losing (Delta Spark's is
/// practically unbounded). With the backoff capped at 1 s, 1000 attempts are
/// at most some minutes of a busy table.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 1000;

/// What an operation changes, as the transaction asks for it.
///
/// `actions` may be called again after [`Changes::rebase`] (the changes then
/// rebuild what the winner made stale, e.g. a new DV file); without a rebase
/// it may return the same actions again.
pub trait Changes {
    /// The file-level actions (add, remove, cdc, txn, domainMetadata) for the
    /// current bases. Empty: nothing to commit.
    fn actions(&mut self, store: &TableStore) -> impl Future<Output = Result<Vec<Action>>>;

    /// `commitInfo.operationMetrics` for the last [`Changes::actions`].
    fn metrics(&self) -> Map<String, Value> {
        Map::new()
    }

    /// What this transaction read, and how it changes each file it touches,
    /// for the conflict checker.
    fn reads(&self) -> (ReadSet, BTreeMap<String, FileChange>) {
        (ReadSet::Files(Default::default()), BTreeMap::new())
    }

    /// Rebase onto winning commit `version`, whose DV replacements of
    /// `files` overlap this transaction's changes.
    fn rebase(
        &mut self,
        store: &TableStore,
        version: u64,
        files: Vec<RebaseFile>,
    ) -> impl Future<Output = Result<()>> {
        let _ = store;
        let paths: Vec<String> = files.into_iter().map(|f| f.path).collect();
        async move {
            Err(Error::Internal(format!(
                "rebase onto version {version} asked for {paths:?}, which this operation \
                 does not change"
            )))
        }
    }

    /// Whether this operation checks the rows of data files a winner added
    /// (see [`Changes::check_added`]) instead of conflicting on any.
    fn checks_added_rows(&self) -> bool {
        false
    }

    /// Winning commit `version` added the data files `added`, which this
    /// transaction would have read: an [`Error::Conflict`] if one of their
    /// rows would have changed what it did (asked only when
    /// [`Changes::checks_added_rows`]).
    fn check_added(
        &mut self,
        store: &TableStore,
        version: u64,
        added: Vec<Add>,
    ) -> impl Future<Output = Result<()>> {
        let _ = (store, added);
        async move {
            Err(Error::Internal(format!(
                "version {version} added files this operation does not check"
            )))
        }
    }
}

/// Fixed actions (a blind append, a table creation, a property change).
pub struct FixedActions {
    pub actions: Vec<Action>,
    pub metrics: Map<String, Value>,
}

impl Changes for FixedActions {
    async fn actions(&mut self, _store: &TableStore) -> Result<Vec<Action>> {
        Ok(self.actions.clone())
    }
    fn metrics(&self) -> Map<String, Value> {
        self.metrics.clone()
    }
}

/// What a commit did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitOutcome {
    /// The version committed; `None` when there was nothing to commit.
    pub version: Option<u64>,
    /// Commit attempts made (1 when nobody raced this transaction).
    pub attempts: u32,
    /// Rebases onto concurrent commits (row-level concurrency).
    pub rebases: u32,
    /// A checkpoint was written after the commit.
    pub checkpointed: bool,
    /// Why a due checkpoint could not be written (the commit stands).
    pub checkpoint_error: Option<String>,
    /// The Iceberg snapshot that mirrors the commit (UniForm tables; see
    /// [`crate::write::iceberg`]).
    pub iceberg_snapshot_id: Option<i64>,
    /// Why the commit could not be mirrored as an Iceberg snapshot (the
    /// commit stands; the next commit, or `sync_iceberg`, catches up).
    pub iceberg_error: Option<String>,
    /// The commit's `inCommitTimestamp`, on tables with in-commit timestamps.
    pub in_commit_timestamp: Option<i64>,
    /// Nothing committed: the table holds the application transaction's
    /// version already (see [`Transaction::with_app_transaction`]).
    pub skipped: bool,
}

/// The table state a commit attempt is assembled against: the read
/// snapshot's, moved forward by the winning commits this transaction
/// proceeded past.
struct TableState {
    protocol: Protocol,
    metadata: Metadata,
    /// `inCommitTimestamp` of the latest commit (None: not an ICT commit).
    last_ict: Option<i64>,
    /// `rowIdHighWaterMark` of the latest version (-1: no row id yet).
    row_id_high_water_mark: i64,
}

/// One commit to a Delta table; see the module docs.
pub struct Transaction<'a> {
    store: TableStore,
    snapshot: Option<&'a Snapshot>,
    /// `None`: creating the table (version 0).
    read_version: Option<u64>,
    isolation: IsolationLevel,
    operation: String,
    parameters: Map<String, Value>,
    blind_append: bool,
    new_protocol: Option<Protocol>,
    new_metadata: Option<Metadata>,
    max_attempts: u32,
    engine_info: String,
    /// Commit even with no action but commitInfo (VACUUM START/END).
    empty: bool,
    /// The `txn` this commit carries (idempotent writes).
    app_transaction: Option<AppTransaction>,
}

pub(crate) fn high_water_mark(domain: Option<&DomainMetadata>) -> Result<i64> {
    let Some(d) = domain.filter(|d| !d.removed) else {
        return Ok(-1);
    };
    let config: Value = serde_json::from_str(&d.configuration).map_err(|e| Error::CorruptLog {
        file: format!("domainMetadata {ROW_TRACKING_DOMAIN}"),
        detail: format!("configuration is not JSON: {e}"),
    })?;
    config
        .get("rowIdHighWaterMark")
        .and_then(Value::as_i64)
        .ok_or_else(|| Error::CorruptLog {
            file: format!("domainMetadata {ROW_TRACKING_DOMAIN}"),
            detail: format!("expected an integer rowIdHighWaterMark, found {config}"),
        })
}

/// Backoff before attempt `attempt + 1`: 5 ms doubling to a 1 s cap, with
/// jitter so racing writers spread out.
fn backoff(attempt: u32) -> Duration {
    let base = 5u64.saturating_mul(1u64 << attempt.min(8)).min(1000);
    let jitter = u64::from(uuid::Uuid::new_v4().as_u128() as u16) % base.max(1);
    Duration::from_millis(base / 2 + jitter / 2)
}

impl<'a> Transaction<'a> {
    /// A transaction on `snapshot` performing `operation` (Delta Spark's
    /// operation name, e.g. `DELETE`, `WRITE`, `SET TBLPROPERTIES`).
    pub fn new(snapshot: &'a Snapshot, operation: impl Into<String>) -> Result<Self> {
        let isolation = IsolationLevel::from_configuration(&snapshot.metadata().configuration)?;
        Ok(Transaction {
            store: snapshot.store().clone(),
            snapshot: Some(snapshot),
            read_version: Some(snapshot.version()),
            isolation,
            operation: operation.into(),
            parameters: Map::new(),
            blind_append: false,
            new_protocol: None,
            new_metadata: None,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            engine_info: ENGINE_INFO.to_string(),
            empty: false,
            app_transaction: None,
        })
    }

    /// A transaction creating a table at `store` (version 0) with `protocol`
    /// and `metadata`; another creator winning the race is a conflict.
    pub fn create(
        store: TableStore,
        protocol: Protocol,
        metadata: Metadata,
        operation: impl Into<String>,
    ) -> Self {
        Transaction {
            store,
            snapshot: None,
            read_version: None,
            // Delta Spark records table creation as Serializable.
            isolation: IsolationLevel::Serializable,
            operation: operation.into(),
            parameters: Map::new(),
            blind_append: false,
            new_protocol: Some(protocol),
            new_metadata: Some(metadata),
            max_attempts: 1,
            engine_info: ENGINE_INFO.to_string(),
            empty: false,
            app_transaction: None,
        }
    }

    /// `commitInfo.operationParameters` (values as Delta Spark writes them:
    /// mostly strings holding JSON).
    pub fn with_parameters(mut self, parameters: Map<String, Value>) -> Self {
        self.parameters = parameters;
        self
    }

    /// Record the commit as `operation` instead of the one given to
    /// [`Transaction::new`] (a streaming batch's `STREAMING UPDATE`).
    pub fn with_operation(mut self, operation: impl Into<String>) -> Self {
        self.operation = operation.into();
        self
    }

    /// Carry `txn`'s `txn` action: the commit is skipped (nothing written,
    /// [`CommitOutcome::skipped`]) when the snapshot read holds its version
    /// or a later one; a concurrent commit with a `txn` of the same
    /// application id is a conflict. A commit with only the `txn` (no data)
    /// is made, as Delta Spark's sink commits an empty batch.
    pub fn with_app_transaction(mut self, txn: AppTransaction) -> Self {
        self.app_transaction = Some(txn);
        self
    }

    /// Commit even when the changes have no action: a commit of only
    /// `commitInfo` that records an event (Delta Spark's VACUUM START/END).
    pub fn allow_empty(mut self) -> Self {
        self.empty = true;
        self
    }

    /// Mark this transaction a blind append (it read nothing).
    pub fn blind_append(mut self) -> Self {
        self.blind_append = true;
        self
    }

    /// Commit a new protocol with the changes.
    pub fn with_protocol(mut self, protocol: Protocol) -> Self {
        self.new_protocol = Some(protocol);
        self
    }

    /// Commit new metadata with the changes.
    pub fn with_metadata(mut self, metadata: Metadata) -> Self {
        self.new_metadata = Some(metadata);
        self
    }

    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    pub fn with_engine_info(mut self, engine_info: impl Into<String>) -> Self {
        self.engine_info = engine_info.into();
        self
    }

    /// The version this transaction read (`None` when creating a table).
    pub fn read_version(&self) -> Option<u64> {
        self.read_version
    }

    pub fn isolation_level(&self) -> IsolationLevel {
        self.isolation
    }

    async fn initial_state(&self) -> Result<TableState> {
        let (protocol, metadata, domains) = match (self.snapshot, &self.new_protocol) {
            (Some(s), _) => (
                s.protocol().clone(),
                s.metadata().clone(),
                Some(s.domain_metadata()),
            ),
            (None, Some(p)) => match &self.new_metadata {
                Some(m) => (p.clone(), m.clone(), None),
                None => return Err(Error::Internal("table creation without metadata".into())),
            },
            (None, None) => return Err(Error::Internal("table creation without protocol".into())),
        };
        let row_id_high_water_mark =
            high_water_mark(domains.and_then(|d| d.get(ROW_TRACKING_DOMAIN)))?;
        let mut state = TableState {
            protocol,
            metadata,
            last_ict: None,
            row_id_high_water_mark,
        };
        if let (Some(v), Some(s)) = (self.read_version, self.snapshot) {
            if TableProperties::of(&state.metadata).enable_in_commit_timestamps() {
                // The snapshot read its version's commit unless it starts at a
                // checkpoint of that version: fetch it only then.
                state.last_ict = match s.in_commit_timestamp() {
                    Some(t) => Some(t),
                    None => commit_ict(&read_commit(&self.store, v).await?),
                };
            }
        }
        Ok(state)
    }

    /// Commit `changes`; see the module docs.
    pub async fn commit<C: Changes>(self, changes: &mut C) -> Result<CommitOutcome> {
        let mut state = self.initial_state().await?;
        let mut outcome = CommitOutcome::default();
        if let (Some(t), Some(s)) = (&self.app_transaction, self.snapshot) {
            if t.applied_in(s) {
                outcome.skipped = true;
                return Ok(outcome);
            }
        }
        let mut read_version = self.read_version;
        loop {
            outcome.attempts += 1;
            let mut file_actions = changes.actions(&self.store).await?;
            if let Some(t) = &self.app_transaction {
                file_actions.insert(0, t.action(now_ms()));
            }
            if file_actions.is_empty()
                && self.new_protocol.is_none()
                && self.new_metadata.is_none()
                && !self.empty
            {
                return Ok(outcome);
            }
            let version = read_version.map_or(0, |v| v + 1);
            // A streaming batch records Delta Spark's sink metrics.
            let metrics = if self.operation == StreamingUpdate::OPERATION {
                StreamingUpdate::metrics(&file_actions)?
            } else {
                changes.metrics()
            };
            // commitInfo.readVersion stays the version this transaction read,
            // however many commits it was rebased past (as Delta Spark).
            let (actions, ict) =
                self.assemble(version, self.read_version, &state, file_actions, metrics)?;
            if try_commit(&self.store, version, &actions).await? {
                fail_point("after_commit")?;
                outcome.version = Some(version);
                outcome.in_commit_timestamp = ict;
                self.after_commit(version, &state, &actions, &mut outcome)
                    .await;
                return Ok(outcome);
            }
            if read_version.is_none() {
                return Err(conflict(
                    0,
                    format!(
                        "a Delta table was created at {} meanwhile",
                        self.store.url()
                    ),
                ));
            }
            if outcome.attempts >= self.max_attempts {
                return Err(conflict(
                    version,
                    format!(
                        "gave up after {} attempts (table too busy)",
                        outcome.attempts
                    ),
                ));
            }
            crate::io::sleep(backoff(outcome.attempts)).await;
            // Lost the race for `version`: check every commit made since this
            // transaction's read version (the one that won `version` and any
            // made while backing off), then try the version after the latest.
            let mut winning = version;
            loop {
                let winner = match read_commit(&self.store, winning).await {
                    Ok(actions) => actions,
                    Err(Error::NotFound { .. }) if winning > version => break,
                    Err(e) => return Err(e),
                };
                let read = winning - 1;
                let (reads, file_changes) = changes.reads();
                let txn = TxnContext {
                    isolation: self.isolation,
                    read_version: read,
                    blind_append: self.blind_append,
                    metadata_changed: self.new_metadata.is_some() || self.new_protocol.is_some(),
                    reads,
                    changes: file_changes,
                    checks_added_rows: changes.checks_added_rows(),
                    app_ids: self
                        .app_transaction
                        .iter()
                        .map(|t| t.app_id().to_string())
                        .collect(),
                };
                let mut summary = WinningCommit::from_actions(winning, &winner);
                summary.identity_only_metadata = winner.iter().any(|a| {
                    matches!(a, Action::Metadata(m)
                        if crate::write::data::rules::only_identity_marks_differ(&state.metadata, m))
                });
                match checker::check(&txn, &summary) {
                    Decision::Proceed => {}
                    Decision::Conflict(reason) => return Err(reason.into_error()),
                    Decision::Rebase { files, added } => {
                        if !added.is_empty() {
                            changes.check_added(&self.store, winning, added).await?;
                        }
                        if !files.is_empty() {
                            changes.rebase(&self.store, winning, files).await?;
                        }
                        outcome.rebases += 1;
                    }
                }
                state.advance(&winner)?;
                read_version = Some(winning);
                winning += 1;
            }
        }
    }

    /// The commit's actions for `version`, and its in-commit timestamp;
    /// `read_version` is the commitInfo's `readVersion`.
    fn assemble(
        &self,
        version: u64,
        read_version: Option<u64>,
        state: &TableState,
        mut file_actions: Vec<Action>,
        metrics: Map<String, Value>,
    ) -> Result<(Vec<Action>, Option<i64>)> {
        let protocol = self.new_protocol.as_ref().unwrap_or(&state.protocol);
        let mut metadata = self.new_metadata.clone();
        if let Some(m) = metadata.as_mut() {
            // As Delta Spark at every metadata update: a table that supports
            // row tracking names its materialized columns.
            features::name_row_tracking_columns(protocol, &state.metadata, m);
        }
        let now = now_ms();
        let ict = in_commit_timestamp(state, metadata.as_mut(), version, now);
        if features::is_supported(protocol, "rowTracking") {
            assign_row_ids(version, state.row_id_high_water_mark, &mut file_actions)?;
        }
        let mut info = Map::new();
        info.insert("timestamp".into(), json!(ict.unwrap_or(now)));
        if let Some(ict) = ict {
            info.insert("inCommitTimestamp".into(), json!(ict));
        }
        info.insert("operation".into(), json!(self.operation));
        info.insert(
            "operationParameters".into(),
            Value::Object(self.parameters.clone()),
        );
        if let Some(v) = read_version {
            info.insert("readVersion".into(), json!(v));
        }
        info.insert("isolationLevel".into(), json!(self.isolation.as_str()));
        info.insert("isBlindAppend".into(), json!(self.blind_append));
        if !metrics.is_empty() {
            info.insert("operationMetrics".into(), Value::Object(metrics));
        }
        info.insert("engineInfo".into(), json!(self.engine_info));
        info.insert("txnId".into(), json!(uuid::Uuid::new_v4().to_string()));
        let mut actions = vec![Action::CommitInfo(Value::Object(info))];
        if let Some(p) = &self.new_protocol {
            actions.push(Action::Protocol(p.clone()));
        }
        if let Some(m) = metadata {
            actions.push(Action::Metadata(m));
        }
        actions.extend(file_actions);
        Ok((actions, ict))
    }

    /// Best-effort work after committing `version` (of `actions`): the
    /// checkpoint it makes due (none after a table creation), then, on a
    /// UniForm table, its Iceberg snapshot. Failures land in `outcome`; the
    /// commit stands.
    async fn after_commit(
        &self,
        version: u64,
        state: &TableState,
        actions: &[Action],
        outcome: &mut CommitOutcome,
    ) {
        let due = self
            .snapshot
            .is_some_and(|s| super::checkpoint::due(s, version));
        let protocol = self.new_protocol.as_ref().unwrap_or(&state.protocol);
        let metadata = self.new_metadata.as_ref().unwrap_or(&state.metadata);
        let mirror = match features::iceberg::iceberg_mirror(protocol, metadata) {
            IcebergMirror::Off => false,
            IcebergMirror::On => true,
            IcebergMirror::Unsupported(why) => {
                outcome.iceberg_error = Some(why);
                false
            }
        };
        // A commit made directly on the read snapshot is mirrored from it
        // and the commit's actions; otherwise the new version is loaded.
        let direct = self
            .snapshot
            .filter(|s| outcome.attempts == 1 && s.version() + 1 == version);
        let loaded = if due || (mirror && direct.is_none()) {
            match Snapshot::load(self.store.clone(), Some(version)).await {
                Ok(s) => Some(s),
                Err(e) => {
                    let text = e.to_string();
                    if due {
                        outcome.checkpoint_error = Some(text.clone());
                    }
                    if mirror {
                        outcome.iceberg_error = Some(text);
                    }
                    return;
                }
            }
        } else {
            None
        };
        if let (true, Some(s)) = (due, &loaded) {
            match super::checkpoint::write(s).await {
                Ok(()) => outcome.checkpointed = true,
                Err(e) => outcome.checkpoint_error = Some(e.to_string()),
            }
        }
        if mirror {
            let synced = async {
                fail_point("iceberg_sync")?;
                let view = match (&loaded, direct) {
                    (Some(s), _) => DeltaState::of(s)?,
                    (None, Some(s)) => DeltaState::after_commit(s, version, actions)?,
                    (None, None) => return Err(Error::Internal("no table state to mirror".into())),
                };
                super::iceberg::sync_state(&view).await
            };
            match synced.await {
                Ok(report) => outcome.iceberg_snapshot_id = report.snapshot_id,
                Err(e) => outcome.iceberg_error = Some(e.to_string()),
            }
        }
    }
}

impl TableState {
    /// Move past a winning commit this transaction may follow.
    fn advance(&mut self, winner: &[Action]) -> Result<()> {
        if let Some(t) = commit_ict(winner) {
            self.last_ict = Some(t);
        }
        for a in winner {
            match a {
                Action::DomainMetadata(d) if d.domain == ROW_TRACKING_DOMAIN => {
                    self.row_id_high_water_mark = high_water_mark(Some(d))?;
                }
                // A winner that changed these made this transaction conflict.
                Action::Protocol(p) => self.protocol = p.clone(),
                Action::Metadata(m) => self.metadata = m.clone(),
                _ => {}
            }
        }
        Ok(())
    }
}

/// The in-commit timestamp of commit `version` made at `now` (None: the table
/// does not have them on, after `new_metadata` if the commit changes it):
/// `max(now, previous + 1)`. A commit that turns them on for an existing table
/// records the enablement version and timestamp in `new_metadata`.
fn in_commit_timestamp(
    state: &TableState,
    new_metadata: Option<&mut Metadata>,
    version: u64,
    now: i64,
) -> Option<i64> {
    let on = |m: &Metadata| TableProperties::of(m).enable_in_commit_timestamps();
    let was_on = on(&state.metadata);
    let is_on = new_metadata.as_deref().map_or(was_on, on);
    if !is_on {
        return None;
    }
    let ict = state.last_ict.map_or(now, |last| now.max(last + 1));
    if let Some(m) = new_metadata {
        if version > 0 && !was_on {
            m.configuration.insert(
                ICT_ENABLEMENT_VERSION.to_string(),
                Some(version.to_string()),
            );
            m.configuration
                .insert(ICT_ENABLEMENT_TIMESTAMP.to_string(), Some(ict.to_string()));
        }
    }
    Some(ict)
}

/// Row tracking: give each new file (no `baseRowId` yet) fresh row ids after
/// `high_water_mark` and this commit's version as its default row commit
/// version; files that keep their ids (re-added with a new DV) are left as
/// they are. Adds the domain action when the mark moves.
fn assign_row_ids(version: u64, high_water_mark: i64, actions: &mut Vec<Action>) -> Result<()> {
    let version = i64::try_from(version)
        .map_err(|_| Error::Internal(format!("version {version} too large")))?;
    let mut mark = high_water_mark;
    for a in actions.iter_mut() {
        let Action::Add(add) = a else { continue };
        if add.base_row_id.is_some() {
            if add.default_row_commit_version.is_none() {
                add.default_row_commit_version = Some(version);
            }
            continue;
        }
        let stats = add.stats.as_deref().unwrap_or("{}");
        let rows = RecordCount::parse(stats, &add.path)?
            .num_records
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "{}: the table has row tracking, which needs numRecords in the file's stats",
                    add.path
                ))
            })?;
        add.base_row_id = Some(mark + 1);
        add.default_row_commit_version = Some(version);
        mark += rows;
    }
    if mark != high_water_mark {
        actions
            .retain(|a| !matches!(a, Action::DomainMetadata(d) if d.domain == ROW_TRACKING_DOMAIN));
        actions.push(Action::DomainMetadata(DomainMetadata {
            domain: ROW_TRACKING_DOMAIN.to_string(),
            configuration: json!({ "rowIdHighWaterMark": mark }).to_string(),
            removed: false,
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::actions::Add;
    use crate::log::features::properties::ENABLE_IN_COMMIT_TIMESTAMPS;

    fn add(path: &str, rows: Option<i64>, base: Option<i64>) -> Action {
        Action::Add(Box::new(Add {
            path: path.into(),
            partition_values: Default::default(),
            size: 1,
            modification_time: 0,
            data_change: true,
            stats: rows.map(|n| json!({ "numRecords": n }).to_string()),
            tags: None,
            deletion_vector: None,
            base_row_id: base,
            default_row_commit_version: base.map(|_| 1),
            clustering_provider: None,
        }))
    }

    fn ids(actions: &[Action]) -> Vec<(String, Option<i64>, Option<i64>)> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Add(a) => {
                    Some((a.path.clone(), a.base_row_id, a.default_row_commit_version))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn new_files_get_row_ids_after_the_mark_and_kept_ones_keep_theirs() {
        let mut actions = vec![
            add("a", Some(10), None),
            add("kept", Some(5), Some(3)),
            add("b", Some(0), None),
            add("c", Some(7), None),
        ];
        assign_row_ids(4, 99, &mut actions).unwrap();
        assert_eq!(
            ids(&actions),
            vec![
                ("a".into(), Some(100), Some(4)),
                ("kept".into(), Some(3), Some(1)),
                ("b".into(), Some(110), Some(4)),
                ("c".into(), Some(110), Some(4)),
            ]
        );
        let Some(Action::DomainMetadata(d)) = actions.last() else {
            panic!("no domain action: {actions:?}")
        };
        assert_eq!(d.domain, ROW_TRACKING_DOMAIN);
        assert_eq!(high_water_mark(Some(d)).unwrap(), 116);
    }

    #[test]
    fn row_ids_start_at_zero_and_need_record_counts() {
        let mut actions = vec![add("a", Some(3), None)];
        assign_row_ids(0, -1, &mut actions).unwrap();
        assert_eq!(ids(&actions), vec![("a".into(), Some(0), Some(0))]);
        // a re-added file alone moves nothing: no domain action
        let mut kept = vec![add("k", Some(3), Some(0))];
        assign_row_ids(5, 2, &mut kept).unwrap();
        assert_eq!(kept.len(), 1);
        let e = assign_row_ids(1, 2, &mut vec![add("nostats", None, None)]).unwrap_err();
        assert!(e.to_string().contains("nostats") && e.to_string().contains("numRecords"));
    }

    #[test]
    fn high_water_marks_are_read_strictly() {
        let d = |c: &str, removed| DomainMetadata {
            domain: ROW_TRACKING_DOMAIN.into(),
            configuration: c.into(),
            removed,
        };
        assert_eq!(high_water_mark(None).unwrap(), -1);
        assert_eq!(
            high_water_mark(Some(&d(r#"{"rowIdHighWaterMark":41}"#, false))).unwrap(),
            41
        );
        assert_eq!(
            high_water_mark(Some(&d(r#"{"rowIdHighWaterMark":41}"#, true))).unwrap(),
            -1
        );
        let e = high_water_mark(Some(&d(r#"{"x":1}"#, false))).unwrap_err();
        assert!(e.to_string().contains("rowIdHighWaterMark"), "{e}");
    }

    fn state(properties: &[(&str, &str)], last_ict: Option<i64>) -> TableState {
        TableState {
            protocol: Protocol {
                min_reader_version: 1,
                min_writer_version: 7,
                reader_features: None,
                writer_features: Some(vec!["inCommitTimestamp".into()]),
            },
            metadata: Metadata {
                id: "t".into(),
                name: None,
                description: None,
                format: Default::default(),
                schema_string: "{}".into(),
                partition_columns: vec![],
                configuration: properties
                    .iter()
                    .map(|(k, v)| (k.to_string(), Some(v.to_string())))
                    .collect(),
                created_time: None,
            },
            last_ict,
            row_id_high_water_mark: -1,
        }
    }

    #[test]
    fn in_commit_timestamps_are_monotonic_and_enablement_is_recorded() {
        let on = [(ENABLE_IN_COMMIT_TIMESTAMPS, "true")];
        // off: none
        assert_eq!(in_commit_timestamp(&state(&[], None), None, 3, 100), None);
        // on: now, or one past the previous commit's when the clock is behind
        assert_eq!(
            in_commit_timestamp(&state(&on, Some(50)), None, 3, 100),
            Some(100)
        );
        assert_eq!(
            in_commit_timestamp(&state(&on, Some(500)), None, 3, 100),
            Some(501)
        );
        // turned on by this commit of version 4: enablement recorded
        let before = state(&[], None);
        let mut m = state(&on, None).metadata;
        assert_eq!(in_commit_timestamp(&before, Some(&mut m), 4, 70), Some(70));
        assert_eq!(m.property(ICT_ENABLEMENT_VERSION), Some("4"));
        assert_eq!(m.property(ICT_ENABLEMENT_TIMESTAMP), Some("70"));
        // on from version 0, or already on: nothing recorded
        let mut m0 = state(&on, None).metadata;
        in_commit_timestamp(&before, Some(&mut m0), 0, 70);
        let mut again = state(&on, None).metadata;
        in_commit_timestamp(&state(&on, Some(60)), Some(&mut again), 5, 70);
        assert!(m0.property(ICT_ENABLEMENT_VERSION).is_none());
        assert!(again.property(ICT_ENABLEMENT_VERSION).is_none());
        // turned off by this commit: none
        let mut off = state(&[(ENABLE_IN_COMMIT_TIMESTAMPS, "false")], None).metadata;
        assert_eq!(
            in_commit_timestamp(&state(&on, Some(60)), Some(&mut off), 5, 70),
            None
        );
    }

    #[test]
    fn winners_move_the_state_forward() {
        let mut s = state(&[], Some(10));
        s.row_id_high_water_mark = 5;
        s.advance(&[
            Action::CommitInfo(json!({"inCommitTimestamp": 20})),
            Action::DomainMetadata(DomainMetadata {
                domain: ROW_TRACKING_DOMAIN.into(),
                configuration: r#"{"rowIdHighWaterMark":9}"#.into(),
                removed: false,
            }),
        ])
        .unwrap();
        assert_eq!((s.last_ict, s.row_id_high_water_mark), (Some(20), 9));
    }

    /// A new table (one `id` long column, no files) in a temporary folder,
    /// kept while the returned guard lives.
    fn empty_table() -> (tempfile::TempDir, TableStore) {
        use crate::io::block_on;
        let dir = tempfile::tempdir().unwrap();
        let store = TableStore::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
        let schema = crate::log::schema::StructType::parse(
            r#"{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}"#,
        )
        .unwrap();
        let options = crate::write::create::CreateOptions::default();
        block_on(crate::write::create::create_table(
            &store,
            &schema,
            Vec::new(),
            &options,
        ))
        .unwrap()
        .unwrap();
        (dir, store)
    }

    /// A commit that lost a race and went past the winner records the
    /// version it read as `readVersion`, not the winner's: Delta Spark's
    /// DescribeDeltaHistorySuite "read version" (a transaction on version 1
    /// committing 4 after concurrent 2 and 3 records readVersion 1).
    #[test]
    fn read_version_is_the_one_read_after_a_lost_race() {
        use crate::io::block_on;
        let (_dir, store) = empty_table();
        let read = block_on(Snapshot::load(store.clone(), None))
            .unwrap()
            .unwrap();
        let append = |path: &str| FixedActions {
            actions: vec![add(path, Some(1), None)],
            metrics: Map::new(),
        };
        for path in ["winner1", "winner2"] {
            let s = block_on(Snapshot::load(store.clone(), None))
                .unwrap()
                .unwrap();
            let txn = Transaction::new(&s, "WRITE").unwrap().blind_append();
            block_on(txn.commit(&mut append(path))).unwrap().unwrap();
        }
        let txn = Transaction::new(&read, "WRITE").unwrap().blind_append();
        let outcome = block_on(txn.commit(&mut append("late"))).unwrap().unwrap();
        assert_eq!(outcome.version, Some(3));
        assert!(outcome.attempts >= 2, "{outcome:?}");
        let info = |v: u64| {
            block_on(read_commit(&store, v))
                .unwrap()
                .unwrap()
                .into_iter()
                .find_map(|a| match a {
                    Action::CommitInfo(i) => Some(i),
                    _ => None,
                })
                .unwrap()
        };
        assert_eq!(info(3)["readVersion"], json!(0));
        assert_eq!(info(2)["readVersion"], json!(1));
    }

    /// Application transactions: the `txn` is written first, a version the
    /// table holds is skipped, and a concurrent commit of the same
    /// application id conflicts while another id's does not.
    #[test]
    fn app_transactions_skip_applied_versions_and_conflict_on_the_same_app() {
        use crate::io::block_on;
        let (_dir, store) = empty_table();
        let load = || {
            block_on(Snapshot::load(store.clone(), None))
                .unwrap()
                .unwrap()
        };
        let append = |path: &str| FixedActions {
            actions: vec![add(path, Some(1), None)],
            metrics: Map::new(),
        };
        let app = |id: &str, v: i64| AppTransaction::try_new(id, v).unwrap();
        let commit = |s: &Snapshot, t: AppTransaction, path: &str| {
            let txn = Transaction::new(s, "WRITE")
                .unwrap()
                .blind_append()
                .with_app_transaction(t);
            block_on(txn.commit(&mut append(path))).unwrap()
        };
        // Batch 0 of query q: committed with its txn first among the files.
        let outcome = commit(&load(), app("q", 0), "b0").unwrap();
        assert_eq!((outcome.version, outcome.skipped), (Some(1), false));
        let actions = block_on(read_commit(&store, 1)).unwrap().unwrap();
        match &actions[1] {
            Action::Txn(t) => {
                assert_eq!((t.app_id.as_str(), t.version), ("q", 0));
                assert!(t.last_updated.is_some_and(|ms| ms > 0));
            }
            other => panic!("expected the txn after commitInfo, got {other:?}"),
        }
        assert_eq!(load().transaction_version("q"), Some(0));
        assert_eq!(load().transaction_version("other"), None);
        // Replayed batch 0: skipped, nothing committed.
        let outcome = commit(&load(), app("q", 0), "again").unwrap();
        assert!(outcome.skipped && outcome.version.is_none(), "{outcome:?}");
        assert_eq!(load().version(), 1);
        // Two runs of batch 1 read version 1; the first wins, the second
        // loses the race and conflicts on the application id.
        let read = load();
        commit(&load(), app("q", 1), "b1").unwrap();
        let err = commit(&read, app("q", 1), "b1-again").unwrap_err();
        assert!(
            matches!(&err, Error::Conflict { .. }) && err.to_string().contains("q"),
            "{err}"
        );
        // Another application's txn in the winner: no conflict (blind appends).
        let read = load();
        commit(&load(), app("other", 0), "o0").unwrap();
        let outcome = commit(&read, app("q", 2), "b2").unwrap();
        assert_eq!(outcome.version, Some(4));
        let s = load();
        assert_eq!(s.transaction_version("q"), Some(2));
        assert_eq!(s.transaction_version("other"), Some(0));
        // An empty batch still commits its txn (as Delta Spark's sink).
        let txn = Transaction::new(&s, "WRITE")
            .unwrap()
            .with_app_transaction(app("q", 3));
        let mut none = FixedActions {
            actions: Vec::new(),
            metrics: Map::new(),
        };
        let outcome = block_on(txn.commit(&mut none)).unwrap().unwrap();
        assert_eq!(outcome.version, Some(5));
        assert_eq!(load().transaction_version("q"), Some(3));
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        assert!(backoff(1) <= Duration::from_millis(10));
        assert!(backoff(30) <= Duration::from_millis(1000));
        assert!(backoff(30) >= Duration::from_millis(500));
    }
}
