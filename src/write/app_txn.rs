//! Application transactions: Delta's `txn` action (`SetTransaction`), which
//! makes a writer's commits idempotent.
//!
//! A writer that may replay work (a streaming micro-batch re-run after a
//! crash, a `foreachBatch` upsert retried) names itself with an application
//! id and numbers its writes; each commit carries
//! `{"txn": {"appId", "version", "lastUpdated"}}`, and log replay keeps the
//! latest version per application id
//! ([`Snapshot::transaction_version`](crate::table::snapshot::Snapshot::transaction_version)).
//! The rules, as Delta Spark's (`DeltaSink.addBatch`, and `WriteIntoDelta`'s
//! `txnAppId`/`txnVersion` options):
//!
//! * a write whose version is at or below the table's version for its
//!   application id has been applied already: it is skipped, nothing is
//!   committed ([`AppTransaction::applied_in`]; the transaction checks it
//!   against the snapshot it reads);
//! * otherwise the commit carries the `txn` action, first among its file
//!   actions;
//! * a concurrent commit carrying a `txn` of the same application id is a
//!   conflict ([`super::conflict::Rule::ConcurrentTransaction`]), so two
//!   runs of one batch never both commit.
//!
//! A streaming sink's commit is recorded as Delta Spark's `STREAMING UPDATE`
//! ([`StreamingUpdate`]): its application id is the query's id (stable
//! across restarts from the same checkpoint), its version the batch id.

use serde_json::{json, Map, Value};

use crate::error::{Error, Result};
use crate::log::actions::{Action, RecordCount, Txn};
use crate::table::snapshot::Snapshot;

/// One idempotent write: application id and the write's version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppTransaction {
    app_id: String,
    version: i64,
}

impl AppTransaction {
    /// Refuses an empty application id and a negative version (Delta Spark
    /// refuses both for `txnAppId`/`txnVersion`).
    pub fn try_new(app_id: impl Into<String>, version: i64) -> Result<Self> {
        let app_id = app_id.into();
        if app_id.trim().is_empty() {
            return Err(Error::InvalidArgument(
                "the application id of a txn (txnAppId, the streaming query id) is empty".into(),
            ));
        }
        if version < 0 {
            return Err(Error::InvalidArgument(format!(
                "the version of a txn (txnVersion, the batch id) must be >= 0, not {version} \
                 (application id {app_id:?})"
            )));
        }
        Ok(AppTransaction { app_id, version })
    }

    pub fn app_id(&self) -> &str {
        &self.app_id
    }

    pub fn version(&self) -> i64 {
        self.version
    }

    /// Whether `snapshot` already holds this write: its latest version for
    /// the application id is this one or a later one.
    pub fn applied_in(&self, snapshot: &Snapshot) -> bool {
        snapshot
            .transaction_version(&self.app_id)
            .is_some_and(|v| v >= self.version)
    }

    /// The `txn` action committed at `now_ms`.
    pub fn action(&self, now_ms: i64) -> Action {
        Action::Txn(Txn {
            app_id: self.app_id.clone(),
            version: self.version,
            last_updated: Some(now_ms),
        })
    }
}

/// A streaming query's output mode, as Spark names it in
/// `operationParameters.outputMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
    /// New rows are appended.
    Append,
    /// The table's rows are replaced by the batch's (one commit).
    Complete,
}

impl OutputMode {
    pub fn parse(text: &str) -> Result<OutputMode> {
        match text.trim().to_ascii_lowercase().as_str() {
            "append" => Ok(OutputMode::Append),
            "complete" => Ok(OutputMode::Complete),
            other => Err(Error::InvalidArgument(format!(
                "output mode {other:?} is not supported by the deltadv sink (expected \
                 \"append\" or \"complete\", as Delta Spark's sink)"
            ))),
        }
    }

    pub fn spark_name(self) -> &'static str {
        match self {
            OutputMode::Append => "Append",
            OutputMode::Complete => "Complete",
        }
    }
}

/// A streaming sink's micro-batch commit: Delta Spark's `STREAMING UPDATE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamingUpdate {
    pub output_mode: OutputMode,
    /// The query's id (the application id of the batch's `txn`).
    pub query_id: String,
    /// The batch id (the version of the batch's `txn`).
    pub epoch_id: i64,
}

impl StreamingUpdate {
    pub const OPERATION: &'static str = "STREAMING UPDATE";

    /// `operationParameters` as Delta Spark records them (strings).
    pub fn parameters(&self) -> Map<String, Value> {
        let mut p = Map::new();
        p.insert("outputMode".into(), json!(self.output_mode.spark_name()));
        p.insert("queryId".into(), json!(self.query_id));
        p.insert("epochId".into(), json!(self.epoch_id.to_string()));
        p
    }

    /// `operationMetrics` as Delta Spark's sink records them
    /// (`numAddedFiles`, `numRemovedFiles`, `numOutputRows`,
    /// `numOutputBytes`; strings), from the commit's file actions.
    pub fn metrics(actions: &[Action]) -> Result<Map<String, Value>> {
        let (mut added, mut removed, mut rows, mut bytes) = (0u64, 0u64, 0i64, 0i64);
        for action in actions {
            match action {
                Action::Add(a) => {
                    added += 1;
                    bytes += a.size;
                    rows += RecordCount::parse(a.stats.as_deref().unwrap_or("{}"), &a.path)?
                        .num_records
                        .unwrap_or(0);
                }
                Action::Remove(_) => removed += 1,
                _ => {}
            }
        }
        let mut m = Map::new();
        m.insert("numAddedFiles".into(), json!(added.to_string()));
        m.insert("numRemovedFiles".into(), json!(removed.to_string()));
        m.insert("numOutputRows".into(), json!(rows.to_string()));
        m.insert("numOutputBytes".into(), json!(bytes.to_string()));
        Ok(m)
    }

    /// The batch's `txn`: the query id and the batch id.
    pub fn app_transaction(&self) -> Result<AppTransaction> {
        AppTransaction::try_new(self.query_id.clone(), self.epoch_id)
    }
}

/// What a write records besides its data: a `txn` (idempotence) and how the
/// commit is named (a streaming batch's `STREAMING UPDATE`, else the write's
/// own operation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppCommit {
    pub app_transaction: Option<AppTransaction>,
    pub streaming_update: Option<StreamingUpdate>,
}

impl AppCommit {
    /// A streaming micro-batch: `STREAMING UPDATE` with its `txn`.
    pub fn streaming(update: StreamingUpdate) -> Result<Self> {
        Ok(AppCommit {
            app_transaction: Some(update.app_transaction()?),
            streaming_update: Some(update),
        })
    }

    /// From a writer's options: `txnAppId`/`txnVersion` (both or neither,
    /// as Delta Spark requires), and for a streaming batch the output mode
    /// (then both are required: the query id and the batch id).
    pub fn from_options(
        app_id: Option<String>,
        version: Option<i64>,
        streaming_output_mode: Option<&str>,
    ) -> Result<Self> {
        let txn = match (app_id, version) {
            (Some(a), Some(v)) => Some((a, v)),
            (None, None) => None,
            (a, v) => {
                return Err(Error::InvalidArgument(format!(
                    "txnAppId and txnVersion go together (Delta Spark's idempotent writes); \
                     given txnAppId={a:?}, txnVersion={v:?}"
                )))
            }
        };
        match (streaming_output_mode, txn) {
            (Some(mode), Some((query_id, epoch_id))) => AppCommit::streaming(StreamingUpdate {
                output_mode: OutputMode::parse(mode)?,
                query_id,
                epoch_id,
            }),
            (Some(mode), None) => Err(Error::InvalidArgument(format!(
                "a streaming batch (output mode {mode:?}) needs its query id and batch id \
                 (txn_app_id, txn_version)"
            ))),
            (None, txn) => Ok(AppCommit {
                app_transaction: txn
                    .map(|(a, v)| AppTransaction::try_new(a, v))
                    .transpose()?,
                streaming_update: None,
            }),
        }
    }

    /// Whether `snapshot` holds this write already (see the module docs).
    pub fn applied_in(&self, snapshot: &Snapshot) -> bool {
        self.app_transaction
            .as_ref()
            .is_some_and(|t| t.applied_in(snapshot))
    }

    /// `txn` with the `txn` to commit and, for a streaming batch, the
    /// operation and parameters of `STREAMING UPDATE`.
    pub fn apply<'a>(
        &self,
        txn: super::transaction::Transaction<'a>,
    ) -> super::transaction::Transaction<'a> {
        let txn = match &self.app_transaction {
            Some(t) => txn.with_app_transaction(t.clone()),
            None => txn,
        };
        match &self.streaming_update {
            Some(s) => txn
                .with_operation(StreamingUpdate::OPERATION)
                .with_parameters(s.parameters()),
            None => txn,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_empty_ids_and_negative_versions() {
        assert!(AppTransaction::try_new("", 0).is_err());
        assert!(AppTransaction::try_new("  ", 0).is_err());
        let err = AppTransaction::try_new("q", -1).unwrap_err().to_string();
        assert!(err.contains("-1") && err.contains("\"q\""), "{err}");
        assert_eq!(AppTransaction::try_new("q", 0).unwrap().version(), 0);
    }

    #[test]
    fn options_go_together() {
        assert_eq!(
            AppCommit::from_options(None, None, None).unwrap(),
            AppCommit::default()
        );
        assert!(AppCommit::from_options(Some("a".into()), None, None).is_err());
        assert!(AppCommit::from_options(None, Some(1), None).is_err());
        assert!(AppCommit::from_options(None, None, Some("append")).is_err());
        let plain = AppCommit::from_options(Some("a".into()), Some(3), None).unwrap();
        assert!(plain.streaming_update.is_none());
        assert_eq!(plain.app_transaction.unwrap().version(), 3);
        let s = AppCommit::from_options(Some("q".into()), Some(2), Some("append")).unwrap();
        assert_eq!(s.streaming_update.unwrap().output_mode, OutputMode::Append);
        assert_eq!(s.app_transaction.unwrap().app_id(), "q");
    }

    #[test]
    fn streaming_parameters_as_delta_spark() {
        let s = StreamingUpdate {
            output_mode: OutputMode::parse("complete").unwrap(),
            query_id: "q-1".into(),
            epoch_id: 7,
        };
        let p = s.parameters();
        assert_eq!(p["outputMode"], json!("Complete"));
        assert_eq!(p["queryId"], json!("q-1"));
        assert_eq!(p["epochId"], json!("7"));
        let t = s.app_transaction().unwrap();
        assert_eq!((t.app_id(), t.version()), ("q-1", 7));
        assert!(OutputMode::parse("update").is_err());
        let add = |path: &str, rows: i64| {
            Action::Add(Box::new(crate::log::actions::Add {
                path: path.into(),
                partition_values: Default::default(),
                size: 10,
                modification_time: 0,
                data_change: true,
                stats: Some(json!({ "numRecords": rows }).to_string()),
                tags: None,
                deletion_vector: None,
                base_row_id: None,
                default_row_commit_version: None,
                clustering_provider: None,
            }))
        };
        let m = StreamingUpdate::metrics(&[t.action(1), add("a", 3), add("b", 4)]).unwrap();
        let strings = |k: &str| m[k].as_str().map(str::to_string);
        assert_eq!(strings("numAddedFiles").as_deref(), Some("2"));
        assert_eq!(strings("numRemovedFiles").as_deref(), Some("0"));
        assert_eq!(strings("numOutputRows").as_deref(), Some("7"));
        assert_eq!(strings("numOutputBytes").as_deref(), Some("20"));
        match t.action(5) {
            Action::Txn(x) => assert_eq!(
                (x.app_id.as_str(), x.version, x.last_updated),
                ("q-1", 7, Some(5))
            ),
            other => panic!("expected a txn action, got {other:?}"),
        }
    }
}
