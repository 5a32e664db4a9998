//! Checkpoints written every `delta.checkpointInterval` commits, plus
//! `_last_checkpoint`: classic single-file ones
//! (`<version>.checkpoint.parquet`, in the column layout Delta Spark reads),
//! or on tables with the `v2Checkpoint` feature a V2 checkpoint as one JSON
//! file (`<version>.checkpoint.<uuid>.json`, `checkpointMetadata` first, no
//! sidecars). Both hold the protocol, metadata, app txns, live domain
//! metadata, every live file with its DV descriptor and stats, and, like
//! Delta Spark, the `remove` tombstones younger than
//! `delta.deletedFileRetentionDuration` (default one week).

use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use serde_json::json;

use crate::error::{Error, Result};
use crate::log::actions::{Action, CheckpointMetadata};
use crate::log::features;
use crate::log::features::properties::{self, TableProperties};
use crate::log::path::{CheckpointFormat, LogPath};
use crate::table::snapshot::Snapshot;

fn string() -> DataType {
    DataType::Utf8
}

fn nullable(name: &str, dt: DataType) -> Field {
    Field::new(name, dt, true)
}

fn string_map() -> DataType {
    let entries = Field::new(
        "key_value",
        DataType::Struct(Fields::from(vec![
            Field::new("key", string(), false),
            Field::new("value", string(), true),
        ])),
        false,
    );
    DataType::Map(Arc::new(entries), false)
}

fn string_list() -> DataType {
    DataType::List(Arc::new(Field::new("element", string(), true)))
}

fn dv_struct() -> DataType {
    DataType::Struct(Fields::from(vec![
        nullable("storageType", string()),
        nullable("pathOrInlineDv", string()),
        nullable("offset", DataType::Int32),
        nullable("sizeInBytes", DataType::Int32),
        nullable("cardinality", DataType::Int64),
        nullable("maxRowIndex", DataType::Int64),
    ]))
}

/// The checkpoint schema: one nullable struct column per action type.
pub fn checkpoint_schema() -> SchemaRef {
    let txn = DataType::Struct(Fields::from(vec![
        nullable("appId", string()),
        nullable("version", DataType::Int64),
        nullable("lastUpdated", DataType::Int64),
    ]));
    let add = DataType::Struct(Fields::from(vec![
        nullable("path", string()),
        nullable("partitionValues", string_map()),
        nullable("size", DataType::Int64),
        nullable("modificationTime", DataType::Int64),
        nullable("dataChange", DataType::Boolean),
        nullable("stats", string()),
        nullable("tags", string_map()),
        nullable("deletionVector", dv_struct()),
        nullable("baseRowId", DataType::Int64),
        nullable("defaultRowCommitVersion", DataType::Int64),
        nullable("clusteringProvider", string()),
    ]));
    let remove = DataType::Struct(Fields::from(vec![
        nullable("path", string()),
        nullable("deletionTimestamp", DataType::Int64),
        nullable("dataChange", DataType::Boolean),
        nullable("extendedFileMetadata", DataType::Boolean),
        nullable("partitionValues", string_map()),
        nullable("size", DataType::Int64),
        nullable("deletionVector", dv_struct()),
        nullable("baseRowId", DataType::Int64),
        nullable("defaultRowCommitVersion", DataType::Int64),
    ]));
    let metadata = DataType::Struct(Fields::from(vec![
        nullable("id", string()),
        nullable("name", string()),
        nullable("description", string()),
        nullable(
            "format",
            DataType::Struct(Fields::from(vec![
                nullable("provider", string()),
                nullable("options", string_map()),
            ])),
        ),
        nullable("schemaString", string()),
        nullable("partitionColumns", string_list()),
        nullable("configuration", string_map()),
        nullable("createdTime", DataType::Int64),
    ]));
    let protocol = DataType::Struct(Fields::from(vec![
        nullable("minReaderVersion", DataType::Int32),
        nullable("minWriterVersion", DataType::Int32),
        nullable("readerFeatures", string_list()),
        nullable("writerFeatures", string_list()),
    ]));
    let domain_metadata = DataType::Struct(Fields::from(vec![
        nullable("domain", string()),
        nullable("configuration", string()),
        nullable("removed", DataType::Boolean),
    ]));
    Arc::new(Schema::new(vec![
        nullable("txn", txn),
        nullable("add", add),
        nullable("remove", remove),
        nullable("metaData", metadata),
        nullable("protocol", protocol),
        nullable("domainMetadata", domain_metadata),
    ]))
}

fn ckpt_error(version: u64, e: impl std::fmt::Display) -> Error {
    Error::Parquet {
        file: LogPath::checkpoint(version).relative_path(),
        detail: e.to_string(),
    }
}

/// The actions of `snapshot`'s checkpoint as of `now_ms` as JSON lines
/// (protocol, metadata, txns, domain metadata, adds, tombstones), and the
/// number of adds. Tombstones deleted at or before
/// `now_ms - delta.deletedFileRetentionDuration` are expired and left out (a
/// `remove` without `deletionTimestamp` counts as deleted at 0).
fn checkpoint_lines(snapshot: &Snapshot, now_ms: i64) -> Result<(Vec<String>, u64)> {
    let retention = properties::deleted_file_retention_ms(snapshot.metadata())?;
    let min_retained = now_ms.saturating_sub(retention);
    let mut lines: Vec<String> = vec![
        Action::Protocol(snapshot.protocol().clone()).to_json_line()?,
        Action::Metadata(snapshot.metadata().clone()).to_json_line()?,
    ];
    for txn in snapshot.txns().values() {
        lines.push(Action::Txn(txn.clone()).to_json_line()?);
    }
    let mut domains: Vec<_> = snapshot.domain_metadata().values().collect();
    domains.sort_by(|a, b| a.domain.cmp(&b.domain));
    for d in domains {
        lines.push(Action::DomainMetadata(d.clone()).to_json_line()?);
    }
    let files = snapshot.files()?;
    let num_adds = files.len() as u64;
    for f in files {
        let mut add = f.add;
        // Checkpoints hold the current state: dataChange is false there.
        add.data_change = false;
        lines.push(Action::Add(Box::new(add)).to_json_line()?);
    }
    for r in snapshot
        .tombstones()
        .iter()
        .filter(|r| r.deletion_timestamp.unwrap_or(0) > min_retained)
    {
        let mut r = r.clone();
        r.data_change = false;
        r.stats = None;
        r.tags = None;
        lines.push(Action::Remove(Box::new(r)).to_json_line()?);
    }
    Ok((lines, num_adds))
}

/// The checkpoint of `snapshot` as parquet bytes, and its number of actions
/// and of add actions.
pub fn encode(snapshot: &Snapshot) -> Result<(Bytes, u64, u64)> {
    encode_at(snapshot, super::now_ms())
}

/// [`encode`] as of `now_ms` (which tombstones are expired).
pub fn encode_at(snapshot: &Snapshot, now_ms: i64) -> Result<(Bytes, u64, u64)> {
    let version = snapshot.version();
    let (lines, num_adds) = checkpoint_lines(snapshot, now_ms)?;
    let schema = checkpoint_schema();
    let mut decoder = arrow_json::ReaderBuilder::new(schema.clone())
        .with_batch_size(8192)
        .build_decoder()
        .map_err(|e| ckpt_error(version, e))?;
    let mut out = Vec::new();
    let mut writer =
        ArrowWriter::try_new(&mut out, schema, None).map_err(|e| ckpt_error(version, e))?;
    for chunk in lines.chunks(8192) {
        let text = chunk.join("\n");
        let mut bytes = text.as_bytes();
        while !bytes.is_empty() {
            let n = decoder.decode(bytes).map_err(|e| ckpt_error(version, e))?;
            if n == 0 {
                break;
            }
            bytes = bytes.get(n..).unwrap_or_default();
        }
        if let Some(batch) = decoder.flush().map_err(|e| ckpt_error(version, e))? {
            writer.write(&batch).map_err(|e| ckpt_error(version, e))?;
        }
    }
    writer.close().map_err(|e| ckpt_error(version, e))?;
    Ok((Bytes::from(out), lines.len() as u64, num_adds))
}

/// The V2 checkpoint of `snapshot` as one JSON top file (no sidecars):
/// `checkpointMetadata` first, then the actions of a classic checkpoint.
/// Returns the bytes and the number of actions (checkpointMetadata included)
/// and of add actions.
pub fn encode_v2_json(snapshot: &Snapshot) -> Result<(Bytes, u64, u64)> {
    let version = i64::try_from(snapshot.version())
        .map_err(|_| Error::Internal(format!("version {} too large", snapshot.version())))?;
    let (lines, num_adds) = checkpoint_lines(snapshot, super::now_ms())?;
    let mut text = Action::CheckpointMetadata(CheckpointMetadata { version }).to_json_line()?;
    text.push('\n');
    for line in &lines {
        text.push_str(line);
        text.push('\n');
    }
    Ok((Bytes::from(text), lines.len() as u64 + 1, num_adds))
}

/// Whether checkpoints of this table must follow the V2 spec (the
/// `v2Checkpoint` feature is supported).
pub fn needs_v2(snapshot: &Snapshot) -> bool {
    features::is_supported(snapshot.protocol(), "v2Checkpoint")
}

/// Write the checkpoint of `snapshot` and point `_last_checkpoint` at it: a
/// classic parquet checkpoint, or on a `v2Checkpoint` table a V2 checkpoint
/// (`<version>.checkpoint.<uuid>.json`).
pub async fn write(snapshot: &Snapshot) -> Result<()> {
    let store = snapshot.store();
    let version = snapshot.version();
    let (path, (bytes, size, num_adds)) = if needs_v2(snapshot) {
        let id = uuid::Uuid::new_v4().hyphenated().to_string();
        let path = LogPath::v2_checkpoint(version, &id, CheckpointFormat::Json)
            .ok_or_else(|| Error::Internal(format!("bad checkpoint id {id}")))?;
        (path, encode_v2_json(snapshot)?)
    } else {
        (LogPath::checkpoint(version), encode(snapshot)?)
    };
    let size_in_bytes = bytes.len();
    // A checkpoint name is new for a V2 checkpoint (uuid) and deterministic
    // for a classic one (rewriting it with the same content is harmless).
    store.put(&store.path(&path.relative_path()), bytes).await?;
    let last = json!({
        "version": version,
        "size": size,
        "sizeInBytes": size_in_bytes,
        "numOfAddFiles": num_adds,
    });
    store
        .put(
            &store.path(&LogPath::LastCheckpoint.relative_path()),
            Bytes::from(last.to_string()),
        )
        .await
}

/// Whether a commit of `version` on a table like `snapshot` should be
/// followed by a checkpoint (`delta.checkpointInterval`, default 10).
pub fn due(snapshot: &Snapshot, version: u64) -> bool {
    let interval = TableProperties::of(snapshot.metadata()).checkpoint_interval();
    version > 0 && version.is_multiple_of(interval)
}
