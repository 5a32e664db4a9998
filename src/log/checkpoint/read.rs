//! Decoding checkpoint files handed over as bytes: classic single- and
//! multi-part parquet, V2 top-level files (parquet or JSON) and their parquet
//! sidecars. The table layer fetches the files; this module only decodes them,
//! so it runs on a blocking thread or in a test without any store.
//!
//! ```text
//! classic:  <v>.checkpoint.parquet            ─┐
//! multi:    <v>.checkpoint.<i>.<n>.parquet    ─┼─> decode() ─> CheckpointData
//! V2:       <v>.checkpoint.<uuid>.{json,parquet}┘        │
//!              └─ sidecar actions ─> sidecar_location() ─> fetched by the
//!                 table layer ─> decode() ─> absorbed into the same data
//! ```

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

use super::{split_batch, AddColumns};
use crate::error::{Error, Result};
use crate::log::actions::{self, Action};
use crate::log::path::{LogPath, LOG_DIR, SIDECAR_DIR};
use crate::log::replay::normalize_path;
use crate::log::segment::LastCheckpoint;

/// Rows per decoded checkpoint batch.
const CHECKPOINT_BATCH_ROWS: usize = 65_536;

/// Top-level checkpoint columns replay needs.
const CHECKPOINT_COLUMNS: &[&str] = &[
    "add",
    "remove",
    "metaData",
    "protocol",
    "txn",
    "domainMetadata",
    "checkpointMetadata",
    "sidecar",
];

fn parquet_error(file: &str, e: impl std::fmt::Display) -> Error {
    Error::Parquet {
        file: file.to_string(),
        detail: e.to_string(),
    }
}

/// Which checkpoint leaf columns replay needs: the action columns, without
/// `*_parsed` (except `add.stats_parsed.numRecords` / `.tightBounds`).
fn wanted_leaf(parts: &[String]) -> bool {
    let top = parts.first().map(String::as_str).unwrap_or("");
    let second = parts.get(1).map(String::as_str).unwrap_or("");
    let third = parts.get(2).map(String::as_str).unwrap_or("");
    CHECKPOINT_COLUMNS.contains(&top)
        && (!second.ends_with("_parsed")
            || (top == "add"
                && second == "stats_parsed"
                && parts.len() == 3
                && matches!(third, "numRecords" | "tightBounds")))
}

/// Decode the checkpoint's leaves in `leaves` into record batches.
fn read_leaves(bytes: Bytes, leaves: Vec<usize>, file: &str) -> Result<Vec<RecordBatch>> {
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| parquet_error(file, e))?;
    let mask = ProjectionMask::leaves(builder.parquet_schema(), leaves);
    builder
        .with_projection(mask)
        .with_batch_size(CHECKPOINT_BATCH_ROWS)
        .build()
        .map_err(|e| parquet_error(file, e))?
        .map(|b| b.map_err(|e| parquet_error(file, e)))
        .collect()
}

/// Decode checkpoint parquet (a classic part, a V2 top-level file or a
/// sidecar): `add` rows stay columnar, other actions are parsed. `add.stats`
/// (most of a checkpoint's bytes) is decoded on a second thread, in parallel
/// with the other columns. `file` names the file in errors.
pub fn decode_parquet(bytes: Bytes, file: &str) -> Result<(Vec<AddColumns>, Vec<Action>)> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes.clone())
        .map_err(|e| parquet_error(file, e))?;
    let (mut main, mut stats) = (Vec::new(), Vec::new());
    for (i, c) in builder.parquet_schema().columns().iter().enumerate() {
        let parts = c.path().parts();
        if !wanted_leaf(parts) {
            continue;
        }
        if parts.len() == 2
            && parts.first().is_some_and(|p| p == "add")
            && parts.get(1).is_some_and(|p| p == "stats")
        {
            stats.push(i);
        } else {
            main.push(i);
        }
    }
    drop(builder);
    let (main_batches, stats_batches) = std::thread::scope(|scope| {
        let stats_bytes = bytes.clone();
        let stats_job =
            (!stats.is_empty()).then(|| scope.spawn(move || read_leaves(stats_bytes, stats, file)));
        let main_batches = read_leaves(bytes, main, file);
        let stats_batches = match stats_job {
            Some(job) => job
                .join()
                .unwrap_or_else(|_| Err(parquet_error(file, "stats decoder thread panicked"))),
            None => Ok(Vec::new()),
        };
        (main_batches, stats_batches)
    });
    let (main_batches, stats_batches) = (main_batches?, stats_batches?);
    let mut adds = Vec::new();
    let mut others = Vec::new();
    for (k, batch) in main_batches.iter().enumerate() {
        let split = split_batch(batch, file)?;
        if let Some(mut a) = split.adds {
            let column = stats_batches
                .get(k)
                .and_then(|b| b.column_by_name("add"))
                .and_then(|a| a.as_struct_opt())
                .and_then(|s| s.column_by_name("stats"))
                .and_then(|c| arrow_cast::cast(c, &arrow_schema::DataType::Utf8).ok())
                .map(|c| c.as_string::<i32>().clone());
            if let Some(c) = &column {
                if c.len() != a.len() {
                    return Err(parquet_error(
                        file,
                        "stats column does not line up with add rows",
                    ));
                }
            }
            a.set_stats(column);
            adds.push(a);
        }
        others.extend(split.others);
    }
    Ok((adds, others))
}

/// Decode one checkpoint file: a JSON V2 top-level checkpoint (`json`) goes
/// through the commit-line parser, anything else is parquet.
pub fn decode(bytes: Bytes, file: &str, json: bool) -> Result<(Vec<AddColumns>, Vec<Action>)> {
    if json {
        Ok((Vec::new(), actions::parse_commit(&bytes, file)?))
    } else {
        decode_parquet(bytes, file)
    }
}

/// Where a `sidecar` action's file lives, relative to the table root: a bare
/// file name is under `_delta_log/_sidecars/`; a path with a `/` (relative to
/// the table root) or a URI is kept as written (URL-decoded).
pub fn sidecar_location(path: &str) -> Result<String> {
    let rel = normalize_path(path);
    if rel.contains('/') || rel.contains(':') {
        return Ok(rel);
    }
    LogPath::sidecar(&rel)
        .map(|p| p.relative_path())
        .ok_or_else(|| Error::CorruptLog {
            file: format!("{LOG_DIR}/{SIDECAR_DIR}"),
            detail: format!("a checkpoint names the sidecar {rel:?}, which is not a file name"),
        })
}

/// A checkpoint, decoded: its live-candidate `add` rows (columnar), its other
/// actions, and how many actions it holds in all.
#[derive(Debug, Default)]
pub struct CheckpointData {
    pub adds: Vec<AddColumns>,
    pub others: Vec<Action>,
    pub count: u64,
}

impl CheckpointData {
    /// Add the decoded contents of one checkpoint file (part, top-level file
    /// or sidecar).
    pub fn absorb(&mut self, adds: Vec<AddColumns>, others: Vec<Action>) {
        self.count += others.len() as u64 + adds.iter().map(|a| a.num_adds() as u64).sum::<u64>();
        self.adds.extend(adds);
        self.others.extend(others);
    }

    /// The sidecar files named so far (as written in their actions).
    pub fn sidecars(&self) -> Vec<String> {
        self.others
            .iter()
            .filter_map(|a| match a {
                Action::Sidecar(s) => Some(s.path.clone()),
                _ => None,
            })
            .collect()
    }

    /// Check the action count against `_last_checkpoint`'s `size` when the
    /// hint describes this checkpoint (`version`); `file` names the checkpoint.
    pub fn check_hint(&self, hint: &LastCheckpoint, version: u64, file: &str) -> Result<()> {
        match hint.size {
            Some(size) if hint.version == version && size != self.count => Err(Error::CorruptLog {
                file: file.to_string(),
                detail: format!(
                    "_last_checkpoint says the checkpoint holds {size} actions, it holds {}",
                    self.count
                ),
            }),
            _ => Ok(()),
        }
    }
}
