//! Planning one Iceberg snapshot from a Delta snapshot: pure, no I/O.
//!
//! Two steps, so the caller fetches DV bytes between them:
//!
//! 1. [`plan`]: the previous converted state ([`PrevState`], read back from the
//!    latest `vN.metadata.json` and its manifests) and the Delta files at
//!    version v ([`DeltaInput`]) → which entries stay, which manifests are
//!    kept as they are, rewritten or dropped, which data files are added, and
//!    which data files need a DV blob in this commit's Puffin file.
//! 2. [`build`]: the plan and those DVs' bytes → every file to write
//!    (manifests, Puffin, manifest list, `v(N+1).metadata.json`).
//!
//! Manifests are incremental: a manifest none of whose entries changed is
//! listed again as is; one that lost entries is rewritten with the rest
//! (status EXISTING, their snapshot ids and sequence numbers kept); new data
//! files go to one new data manifest, new DVs to one new delete manifest.
//!
//! The Puffin rule: readers such as pyiceberg read whole Puffin files and
//! apply every blob to the file its `referenced-data-file` names, so a live
//! Puffin file must hold no stale blob. Invariant kept here: every blob of a
//! live Puffin file is referenced by a live delete entry. When a delete entry
//! goes (its data file's DV changed, or the file was removed), the other live
//! entries of its Puffin file move to this commit's Puffin file too.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use super::manifest::{
    self, DataFile, ManifestContext, ManifestEntry, ManifestFile, Status, CONTENT_DATA,
    CONTENT_POSITION_DELETES, MANIFEST_CONTENT_DATA, MANIFEST_CONTENT_DELETES,
};
use super::metadata::{
    self, spec_fields, with_schema_id, ConvertedSchema, LeafColumn, Literal, MetadataLogEntry,
    PartitionColumn, PartitionSpec, Snapshot, SnapshotLogEntry, SnapshotRef, TableMetadata,
    DELTA_TIMESTAMP, DELTA_VERSION, NAME_MAPPING,
};
use super::puffin::PuffinWriter;
use crate::error::{Error, Result};
use crate::log::actions::Add;
use crate::log::schema::{partition_array, DataType};

/// Directory of the Iceberg metadata, relative to the table root.
pub const METADATA_DIR: &str = "metadata";
/// File of the latest metadata version number, for path-based readers.
pub const VERSION_HINT: &str = "version-hint.text";
/// Microseconds Delta's millisecond-truncated timestamp stats may be below
/// the true maximum.
const TIMESTAMP_STATS_SLACK_MICROS: i64 = 999;
/// Delta truncates string stats to this many characters (default
/// `delta.dataSkippingStringPrefixLength`); a max that long may be cut.
const STRING_STATS_PREFIX: usize = 32;

/// `metadata/v{n}.metadata.json`.
pub fn metadata_file_name(n: u64) -> String {
    format!("v{n}.metadata.json")
}

/// The number of a `v{n}.metadata.json` name.
pub fn parse_metadata_file_name(name: &str) -> Option<u64> {
    name.strip_prefix('v')?
        .strip_suffix(".metadata.json")?
        .parse()
        .ok()
}

/// What the Iceberg side needs of the Delta table's shape.
#[derive(Debug, Clone)]
pub struct TableShape {
    /// The table root as Iceberg locations start (no trailing `/`).
    pub location: String,
    pub schema: ConvertedSchema,
    pub partition: Vec<PartitionColumn>,
    /// Delta's `metaData.id` (the new table's uuid when it is one).
    pub delta_table_id: String,
}

impl TableShape {
    /// The Iceberg location of a Delta `add.path` (URL-decoded already):
    /// relative paths under the table root, absolute URIs as they are.
    pub fn file_location(&self, decoded_path: &str) -> String {
        if decoded_path.contains("://") || decoded_path.starts_with("file:") {
            decoded_path.to_string()
        } else {
            format!("{}/{}", self.location, decoded_path)
        }
    }

    /// `metadata/<name>` as an Iceberg location.
    pub fn metadata_location(&self, name: &str) -> String {
        format!("{}/{METADATA_DIR}/{name}", self.location)
    }
}

// ---------------------------------------------------------------------------
// Delta add → Iceberg data file
// ---------------------------------------------------------------------------

fn stat_at<'a>(root: Option<&'a Value>, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(root?, |v, k| v.get(k))
}

fn parse_ts(s: &str, zoned: bool) -> Option<i64> {
    if zoned {
        if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
            return Some(t.timestamp_micros());
        }
    }
    crate::log::schema::parse_timestamp_micros(s, zoned).or_else(|| {
        chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f")
            .ok()
            .map(|t| t.and_utc().timestamp_micros())
    })
}

/// A stats value of `leaf` as an Iceberg bound; `upper` widens timestamps
/// and drops string maxima that may be truncated. `None`: no safe bound.
fn stat_literal(leaf: &LeafColumn, v: &Value, upper: bool) -> Option<Literal> {
    Some(match (&leaf.delta_type, v) {
        (DataType::Long, Value::Number(n)) => Literal::Long(n.as_i64()?),
        (DataType::Integer | DataType::Short | DataType::Byte, Value::Number(n)) => {
            Literal::Int(i32::try_from(n.as_i64()?).ok()?)
        }
        (DataType::Double, Value::Number(n)) => {
            let f = n.as_f64()?;
            if !f.is_finite() {
                return None;
            }
            Literal::Double(f)
        }
        (DataType::Float, Value::Number(n)) => {
            let f = n.as_f64()? as f32;
            if !f.is_finite() {
                return None;
            }
            Literal::Float(f)
        }
        (DataType::Boolean, Value::Bool(b)) => Literal::Boolean(*b),
        (DataType::String, Value::String(s)) => {
            if upper && s.chars().count() >= STRING_STATS_PREFIX {
                return None;
            }
            Literal::String(s.clone())
        }
        (DataType::Date, Value::String(s)) => {
            let days =
                crate::log::schema::parse_date(s).and_then(crate::log::schema::epoch_days)?;
            Literal::Date(i32::try_from(days).ok()?)
        }
        (DataType::Timestamp | DataType::TimestampNtz, Value::String(s)) => {
            let micros = parse_ts(s, leaf.delta_type == DataType::Timestamp)?;
            Literal::Timestamp(if upper {
                micros.checked_add(TIMESTAMP_STATS_SLACK_MICROS)?
            } else {
                micros
            })
        }
        _ => return None,
    })
}

/// The Iceberg literal of one partition value (`None` = null).
fn partition_literal(c: &PartitionColumn, raw: Option<&str>) -> Result<Option<Literal>> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{
        Date32Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
        TimestampMicrosecondType,
    };
    use arrow_array::Array;
    let array = partition_array(&c.physical_name, &c.delta_type, &[raw])?;
    if array.is_null(0) {
        return Ok(None);
    }
    let lit = match &c.delta_type {
        DataType::String => Literal::String(array.as_string::<i32>().value(0).to_string()),
        DataType::Binary => Literal::Binary(array.as_binary::<i32>().value(0).to_vec()),
        DataType::Long => Literal::Long(array.as_primitive::<Int64Type>().value(0)),
        DataType::Integer => Literal::Int(array.as_primitive::<Int32Type>().value(0)),
        DataType::Short => Literal::Int(i32::from(array.as_primitive::<Int16Type>().value(0))),
        DataType::Byte => Literal::Int(i32::from(array.as_primitive::<Int8Type>().value(0))),
        DataType::Float => Literal::Float(array.as_primitive::<Float32Type>().value(0)),
        DataType::Double => Literal::Double(array.as_primitive::<Float64Type>().value(0)),
        DataType::Boolean => Literal::Boolean(array.as_boolean().value(0)),
        DataType::Date => Literal::Date(array.as_primitive::<Date32Type>().value(0)),
        DataType::Timestamp | DataType::TimestampNtz => {
            Literal::Timestamp(array.as_primitive::<TimestampMicrosecondType>().value(0))
        }
        other => {
            return Err(Error::Unsupported(format!(
                "partition column '{}' of type {other} in Iceberg metadata",
                c.name
            )))
        }
    };
    Ok(Some(lit))
}

/// The Iceberg data file of a live Delta file (`decoded_path`: `add.path`
/// URL-decoded). Needs `numRecords` in the stats (Iceberg's record_count is
/// required).
pub fn data_file(shape: &TableShape, add: &Add, decoded_path: &str) -> Result<DataFile> {
    let stats: Option<Value> = match add.stats.as_deref() {
        Some(s) if !s.is_empty() => Some(serde_json::from_str(s).map_err(|e| Error::Json {
            context: format!("stats of {}", add.path),
            source: e,
        })?),
        _ => None,
    };
    let record_count = stats
        .as_ref()
        .and_then(|s| s.get("numRecords"))
        .and_then(Value::as_i64)
        .ok_or_else(|| {
            Error::Unsupported(format!(
                "data file {} has no numRecords in its stats; Iceberg metadata needs the record \
                 count of every file",
                add.path
            ))
        })?;
    let mut out = data_file_without_stats(shape, add, decoded_path, record_count)?;
    let Some(stats) = stats else {
        return Ok(out);
    };
    let partition_ids: HashSet<i32> = shape.partition.iter().map(|c| c.source_id).collect();
    for leaf in &shape.schema.leaves {
        if partition_ids.contains(&leaf.field_id) {
            continue;
        }
        if let Some(n) =
            stat_at(stats.get("nullCount"), &leaf.physical_path).and_then(Value::as_i64)
        {
            out.null_value_counts.insert(leaf.field_id, n);
            out.value_counts.insert(leaf.field_id, record_count);
        }
        if let Some(l) = stat_at(stats.get("minValues"), &leaf.physical_path)
            .and_then(|v| stat_literal(leaf, v, false))
        {
            out.lower_bounds.insert(leaf.field_id, l.to_bytes());
        }
        if let Some(u) = stat_at(stats.get("maxValues"), &leaf.physical_path)
            .and_then(|v| stat_literal(leaf, v, true))
        {
            out.upper_bounds.insert(leaf.field_id, u.to_bytes());
        }
    }
    Ok(out)
}

/// [`data_file`] without column stats, its record count given (the log's
/// `numRecords`, parsed already): for a file whose data entry is not
/// written (a DV entry takes only its location and partition).
pub fn data_file_without_stats(
    shape: &TableShape,
    add: &Add,
    decoded_path: &str,
    record_count: i64,
) -> Result<DataFile> {
    let partition = shape
        .partition
        .iter()
        .map(|c| {
            let raw = add
                .partition_values
                .get(&c.physical_name)
                .or_else(|| add.partition_values.get(&c.name))
                .and_then(|v| v.as_deref());
            partition_literal(c, raw)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(DataFile {
        content: CONTENT_DATA,
        file_path: shape.file_location(decoded_path),
        file_format: "PARQUET".into(),
        partition,
        record_count,
        file_size_in_bytes: add.size,
        value_counts: BTreeMap::new(),
        null_value_counts: BTreeMap::new(),
        lower_bounds: BTreeMap::new(),
        upper_bounds: BTreeMap::new(),
        first_row_id: add.base_row_id,
        referenced_data_file: None,
        content_offset: None,
        content_size_in_bytes: None,
    })
}

// ---------------------------------------------------------------------------
// Plan
// ---------------------------------------------------------------------------

/// Whether `new` (from the Delta add) describes the entry `old` already
/// holds; a row id the conversion assigned (Delta had none) is kept.
fn same_file(new: &DataFile, old: &DataFile) -> bool {
    if new.first_row_id.is_none() {
        let mut new = new.clone();
        new.first_row_id = old.first_row_id;
        return &new == old;
    }
    new == old
}

/// The converted state: the latest metadata and its snapshot's manifests.
#[derive(Debug, Clone)]
pub struct PrevState {
    pub metadata: TableMetadata,
    /// N of `vN.metadata.json`.
    pub metadata_version: u64,
    /// The current snapshot's manifests with their live entries; the
    /// entries of data manifests are empty when not `data_entries_loaded`.
    pub manifests: Vec<(ManifestFile, Vec<ManifestEntry>)>,
    /// Whether the data manifests' entries were read. They need not be when
    /// no data file live at the converted version is gone
    /// ([`DeltaInput::previously_live`] says which were): every data
    /// manifest is then kept as it is, and only new files are added.
    pub data_entries_loaded: bool,
    /// Whether the delete manifests' entries were read. They need not be
    /// when no file the commits since touched had a DV at the converted
    /// version: every DV entry then targets an untouched file and stays, and
    /// the delete manifests are kept whole.
    pub delete_entries_loaded: bool,
}

/// Most previous metadata files the metadata log lists (Iceberg's default
/// `write.metadata.previous-versions-max`).
pub const MAX_PREVIOUS_METADATA_FILES: usize = 100;

/// Most delete manifests a snapshot lists: past it, they are merged into one.
pub const MAX_DELETE_MANIFESTS: usize = 8;

/// One live Delta file.
#[derive(Debug, Clone)]
pub struct DeltaFile {
    pub data_file: DataFile,
    /// Its DV's cardinality, when it has one.
    pub dv_cardinality: Option<u64>,
}

/// The Delta snapshot to convert.
#[derive(Debug, Clone)]
pub struct DeltaInput {
    pub version: u64,
    pub timestamp_ms: i64,
    pub files: Vec<DeltaFile>,
    /// Locations of files added or removed by the Delta commits since the
    /// converted version (`None`: unknown, every file counts as touched).
    pub touched: Option<HashSet<String>>,
    /// Locations of the files live at the converted version (the live files
    /// with the commits since undone), when those commits were read.
    pub previously_live: Option<HashSet<String>>,
    /// `rowIdHighWaterMark` of the row tracking domain.
    pub row_id_high_water_mark: Option<i64>,
}

/// What happens to a manifest of the previous snapshot.
#[derive(Debug, Clone, PartialEq)]
pub enum ManifestFate {
    Keep,
    /// Rewritten with the entries at these indexes.
    Rewrite(Vec<usize>),
    Drop,
}

/// The decisions of [`plan`].
#[derive(Debug, Clone)]
pub struct Plan {
    pub fates: Vec<ManifestFate>,
    /// Indexes into `DeltaInput::files` of data files to add.
    pub added_data: Vec<usize>,
    /// Indexes into `DeltaInput::files` whose DV goes into this commit's Puffin.
    pub dv_blobs: Vec<usize>,
    pub removed_data_files: usize,
    pub removed_delete_files: usize,
}

impl Plan {
    /// Nothing changes.
    pub fn is_empty(&self) -> bool {
        self.added_data.is_empty()
            && self.dv_blobs.is_empty()
            && self.removed_data_files == 0
            && self.removed_delete_files == 0
    }
}

/// Decide what the new snapshot keeps, adds and removes.
pub fn plan(prev: Option<&PrevState>, input: &DeltaInput) -> Plan {
    let live: HashMap<&str, usize> = input
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.data_file.file_path.as_str(), i))
        .collect();
    let touched = |p: &str| input.touched.as_ref().is_none_or(|t| t.contains(p));
    let manifests: &[(ManifestFile, Vec<ManifestEntry>)] =
        prev.map_or(&[], |p| p.manifests.as_slice());
    let mut keep: Vec<Vec<bool>> = manifests
        .iter()
        .map(|(_, e)| vec![false; e.len()])
        .collect();
    // Data entries. Data manifests not read are kept whole: every file live
    // at the converted version still is (see `PrevState::data_entries_loaded`).
    let mut kept_data: HashSet<&str> = HashSet::new();
    if prev.is_some_and(|p| !p.data_entries_loaded) {
        kept_data.extend(
            input
                .previously_live
                .iter()
                .flatten()
                .map(String::as_str)
                .filter(|p| live.contains_key(p)),
        );
    }
    let mut removed_data_files = 0;
    for ((mf, entries), k) in manifests.iter().zip(keep.iter_mut()) {
        if mf.content != MANIFEST_CONTENT_DATA {
            continue;
        }
        for (entry, slot) in entries.iter().zip(k.iter_mut()) {
            let path = entry.data_file.file_path.as_str();
            let same = live.get(path).is_some_and(|&i| {
                !kept_data.contains(path)
                    && (!touched(path)
                        || input
                            .files
                            .get(i)
                            .is_some_and(|f| same_file(&f.data_file, &entry.data_file)))
            });
            if same {
                kept_data.insert(path);
                *slot = true;
            } else {
                removed_data_files += 1;
            }
        }
    }
    // Delete entries: kept when the data entry stays, the file was not
    // touched, and the cardinality still matches. Delete manifests not read
    // hold the DVs of untouched files only (`PrevState::delete_entries_loaded`).
    let mut kept_dv: HashSet<&str> = HashSet::new();
    if prev.is_some_and(|p| !p.delete_entries_loaded) {
        kept_dv.extend(
            input
                .files
                .iter()
                .filter(|f| f.dv_cardinality.is_some())
                .map(|f| f.data_file.file_path.as_str())
                .filter(|p| !touched(p)),
        );
    }
    for ((mf, entries), k) in manifests.iter().zip(keep.iter_mut()) {
        if mf.content != MANIFEST_CONTENT_DELETES {
            continue;
        }
        for (entry, slot) in entries.iter().zip(k.iter_mut()) {
            let Some(target) = entry.data_file.referenced_data_file.as_deref() else {
                continue;
            };
            let ok = kept_data.contains(target)
                && !touched(target)
                && !kept_dv.contains(target)
                && live.get(target).is_some_and(|&i| {
                    input.files.get(i).and_then(|f| f.dv_cardinality)
                        == u64::try_from(entry.data_file.record_count).ok()
                });
            if ok {
                kept_dv.insert(target);
                *slot = true;
            }
        }
    }
    // The Puffin rule: a Puffin file that loses an entry loses them all.
    let mut dirty: HashSet<&str> = HashSet::new();
    for ((mf, entries), k) in manifests.iter().zip(&keep) {
        if mf.content == MANIFEST_CONTENT_DELETES {
            for (entry, kept) in entries.iter().zip(k) {
                if !kept {
                    dirty.insert(entry.data_file.file_path.as_str());
                }
            }
        }
    }
    let mut removed_delete_files = 0;
    for ((mf, entries), k) in manifests.iter().zip(keep.iter_mut()) {
        if mf.content != MANIFEST_CONTENT_DELETES {
            continue;
        }
        for (entry, slot) in entries.iter().zip(k.iter_mut()) {
            if *slot && dirty.contains(entry.data_file.file_path.as_str()) {
                *slot = false;
                if let Some(t) = entry.data_file.referenced_data_file.as_deref() {
                    kept_dv.remove(t);
                }
            }
            if !*slot {
                removed_delete_files += 1;
            }
        }
    }
    let fates = keep
        .iter()
        .map(|k| {
            if k.iter().all(|&x| x) {
                ManifestFate::Keep
            } else if k.iter().any(|&x| x) {
                ManifestFate::Rewrite(
                    k.iter()
                        .enumerate()
                        .filter_map(|(i, &x)| x.then_some(i))
                        .collect(),
                )
            } else {
                ManifestFate::Drop
            }
        })
        .collect();
    let added_data = input
        .files
        .iter()
        .enumerate()
        .filter(|(_, f)| !kept_data.contains(f.data_file.file_path.as_str()))
        .map(|(i, _)| i)
        .collect();
    let dv_blobs = input
        .files
        .iter()
        .enumerate()
        .filter(|(_, f)| {
            f.dv_cardinality.is_some() && !kept_dv.contains(f.data_file.file_path.as_str())
        })
        .map(|(i, _)| i)
        .collect();
    Plan {
        fates,
        added_data,
        dv_blobs,
        removed_data_files,
        removed_delete_files,
    }
}

// ---------------------------------------------------------------------------
// Build
// ---------------------------------------------------------------------------

/// Ids and clocks the caller picks (random ids, the current time).
#[derive(Debug, Clone)]
pub struct Ids {
    pub snapshot_id: i64,
    /// Unique token for this commit's file names.
    pub token: String,
    pub now_ms: i64,
    /// The table uuid when there is no previous metadata and Delta's table
    /// id is not a uuid.
    pub fallback_table_uuid: String,
}

/// One file to write under the table root.
#[derive(Debug, Clone)]
pub struct OutFile {
    /// Relative to the table root (`metadata/…`).
    pub path: String,
    pub bytes: Vec<u8>,
}

/// Everything one conversion writes, in write order: manifests, Puffin and
/// manifest list first, then the metadata file (put-if-absent), then the hint.
#[derive(Debug, Clone)]
pub struct Output {
    pub files: Vec<OutFile>,
    pub metadata_file: OutFile,
    pub metadata_version: u64,
    pub version_hint: OutFile,
    pub snapshot_id: i64,
    pub sequence_number: i64,
    pub added_data_files: usize,
    pub removed_data_files: usize,
    pub added_delete_files: usize,
    pub removed_delete_files: usize,
    pub manifests_reused: usize,
    pub manifests_written: usize,
}

/// A DV's bytes for the Puffin file: the Delta bitmap (magic + portable
/// roaring) and its cardinality, by index into `DeltaInput::files`.
pub type DvBytes = HashMap<usize, (Vec<u8>, u64)>;

/// The snapshot a manifest is written for.
struct Writing<'a> {
    spec_id: i32,
    snapshot_id: i64,
    sequence_number: i64,
    partition: &'a [PartitionColumn],
}

fn manifest_file(
    w: &Writing<'_>,
    path: String,
    length: usize,
    content: i32,
    entries: &[ManifestEntry],
) -> ManifestFile {
    let Writing {
        spec_id,
        snapshot_id,
        sequence_number,
        partition,
    } = *w;
    let count = |s: Status| entries.iter().filter(|e| e.status == s).count() as i32;
    let rows = |s: Status| {
        entries
            .iter()
            .filter(|e| e.status == s)
            .map(|e| e.data_file.record_count)
            .sum::<i64>()
    };
    let files: Vec<&DataFile> = entries.iter().map(|e| &e.data_file).collect();
    ManifestFile {
        manifest_path: path,
        manifest_length: length as i64,
        partition_spec_id: spec_id,
        content,
        sequence_number,
        min_sequence_number: entries
            .iter()
            .map(|e| e.sequence_number)
            .min()
            .unwrap_or(sequence_number),
        added_snapshot_id: snapshot_id,
        added_files_count: count(Status::Added),
        existing_files_count: count(Status::Existing),
        deleted_files_count: 0,
        added_rows_count: rows(Status::Added),
        existing_rows_count: rows(Status::Existing),
        deleted_rows_count: 0,
        partitions: manifest::summarize_partitions(partition, &files),
        first_row_id: None,
    }
}

/// Write the new snapshot: manifests, Puffin file, manifest list, metadata.
pub fn build(
    prev: Option<&PrevState>,
    shape: &TableShape,
    input: &DeltaInput,
    plan: &Plan,
    dvs: &DvBytes,
    ids: &Ids,
) -> Result<Output> {
    let prev_meta = prev.map(|p| &p.metadata);
    let sequence_number = prev_meta.map_or(0, |m| m.last_sequence_number) + 1;
    let snapshot_id = ids.snapshot_id;
    let token = &ids.token;

    // Schema and spec: reuse the current ones when unchanged.
    let mut schemas = prev_meta.map(|m| m.schemas.clone()).unwrap_or_default();
    let schema_id = match prev_meta {
        Some(m) if m.current_schema().as_ref() == Some(&shape.schema.schema) => m.current_schema_id,
        _ => {
            let id = schemas
                .iter()
                .filter_map(|s| s.get("schema-id").and_then(Value::as_i64))
                .max()
                .map_or(0, |m| m as i32 + 1);
            schemas.push(with_schema_id(&shape.schema.schema, id));
            id
        }
    };
    let schema_json = with_schema_id(&shape.schema.schema, schema_id);
    let mut specs = prev_meta
        .map(|m| m.partition_specs.clone())
        .unwrap_or_default();
    let fields = spec_fields(&shape.partition);
    let spec_id = match specs.iter().find(|s| s.fields == fields) {
        Some(s) => s.spec_id,
        None => {
            let id = specs.iter().map(|s| s.spec_id).max().map_or(0, |m| m + 1);
            specs.push(PartitionSpec {
                spec_id: id,
                fields: fields.clone(),
            });
            id
        }
    };
    let writing = Writing {
        spec_id,
        snapshot_id,
        sequence_number,
        partition: &shape.partition,
    };
    let ctx = ManifestContext {
        schema: &schema_json,
        schema_id,
        spec_id,
        partition: &shape.partition,
    };

    let mut next_row_id = prev_meta.map_or(0, |m| m.next_row_id);
    if let Some(hwm) = input.row_id_high_water_mark {
        next_row_id = next_row_id.max(hwm + 1);
    }
    let first_row_id = next_row_id;

    let mut files = Vec::new();
    let mut list: Vec<ManifestFile> = Vec::new();
    let mut manifests_reused = 0;
    let mut manifests_written = 0;
    let mut counter = 0usize;
    let mut next_name = |kind: &str| {
        counter += 1;
        format!("{token}-{kind}{counter}.avro")
    };

    // Delete manifests are merged into one when there would be too many
    // (each DELETE adds one): readers and the next conversion read them all.
    let kept_delete_manifests = prev.map_or(0, |p| {
        p.manifests
            .iter()
            .zip(&plan.fates)
            .filter(|((mf, _), fate)| {
                mf.content == MANIFEST_CONTENT_DELETES && **fate != ManifestFate::Drop
            })
            .count()
    });
    // (Their entries are needed: not read, they are kept as they are.)
    let merge_deletes = prev.is_none_or(|p| p.delete_entries_loaded)
        && kept_delete_manifests + usize::from(!plan.dv_blobs.is_empty()) > MAX_DELETE_MANIFESTS;
    let mut carried_deletes: Vec<ManifestEntry> = Vec::new();

    // Previous manifests: keep, rewrite or drop.
    if let Some(p) = prev {
        for ((mf, entries), fate) in p.manifests.iter().zip(&plan.fates) {
            if merge_deletes && mf.content == MANIFEST_CONTENT_DELETES {
                let kept: Box<dyn Iterator<Item = &ManifestEntry>> = match fate {
                    ManifestFate::Keep => Box::new(entries.iter()),
                    ManifestFate::Rewrite(keep) => {
                        Box::new(keep.iter().filter_map(|&i| entries.get(i)))
                    }
                    ManifestFate::Drop => Box::new(std::iter::empty()),
                };
                carried_deletes.extend(kept.map(|e| ManifestEntry {
                    status: Status::Existing,
                    ..e.clone()
                }));
                continue;
            }
            match fate {
                ManifestFate::Keep => {
                    list.push(mf.clone());
                    manifests_reused += 1;
                }
                ManifestFate::Drop => {}
                ManifestFate::Rewrite(keep) => {
                    let kept: Vec<ManifestEntry> = keep
                        .iter()
                        .filter_map(|&i| entries.get(i))
                        .map(|e| ManifestEntry {
                            status: Status::Existing,
                            ..e.clone()
                        })
                        .collect();
                    let spec_ok = mf.partition_spec_id == spec_id;
                    if !spec_ok {
                        return Err(Error::Unsupported(format!(
                            "Iceberg manifest {} has partition spec {} but the table's is {spec_id}: \
                             changed partitioning is not converted incrementally",
                            mf.manifest_path, mf.partition_spec_id
                        )));
                    }
                    let name = next_name("m");
                    let rel = format!("{METADATA_DIR}/{name}");
                    let bytes = manifest::write_manifest(&ctx, mf.content, &kept, &rel)?;
                    let mut m = manifest_file(
                        &writing,
                        shape.metadata_location(&name),
                        bytes.len(),
                        mf.content,
                        &kept,
                    );
                    if mf.content == MANIFEST_CONTENT_DATA {
                        m.first_row_id = Some(next_row_id);
                    }
                    list.push(m);
                    files.push(OutFile { path: rel, bytes });
                    manifests_written += 1;
                }
            }
        }
    }

    // New data files.
    let added: Vec<ManifestEntry> = plan
        .added_data
        .iter()
        .filter_map(|&i| input.files.get(i))
        .map(|f| {
            let mut df = f.data_file.clone();
            if df.first_row_id.is_none() {
                df.first_row_id = Some(next_row_id);
                next_row_id += df.record_count;
            }
            ManifestEntry {
                status: Status::Added,
                snapshot_id,
                sequence_number,
                file_sequence_number: sequence_number,
                data_file: df,
            }
        })
        .collect();
    if let Some(max_end) = added
        .iter()
        .filter_map(|e| {
            e.data_file
                .first_row_id
                .map(|r| r + e.data_file.record_count)
        })
        .max()
    {
        next_row_id = next_row_id.max(max_end);
    }
    if !added.is_empty() {
        let name = next_name("m");
        let rel = format!("{METADATA_DIR}/{name}");
        let bytes = manifest::write_manifest(&ctx, MANIFEST_CONTENT_DATA, &added, &rel)?;
        let mut m = manifest_file(
            &writing,
            shape.metadata_location(&name),
            bytes.len(),
            MANIFEST_CONTENT_DATA,
            &added,
        );
        m.first_row_id = Some(first_row_id);
        list.push(m);
        files.push(OutFile { path: rel, bytes });
        manifests_written += 1;
    }

    // New DVs: one Puffin file, one delete manifest (with the merged ones).
    let mut delete_entries = carried_deletes;
    if !plan.dv_blobs.is_empty() {
        let puffin_name = format!("{token}-dv.puffin");
        let puffin_rel = format!("{METADATA_DIR}/{puffin_name}");
        let puffin_location = shape.metadata_location(&puffin_name);
        let mut writer = PuffinWriter::new();
        let mut slots = Vec::with_capacity(plan.dv_blobs.len());
        for &i in &plan.dv_blobs {
            let f = input.files.get(i).ok_or_else(|| {
                Error::Internal(format!("DV blob for file index {i} out of range"))
            })?;
            let (bytes, card) = dvs.get(&i).ok_or_else(|| {
                Error::Internal(format!(
                    "the DV of {} was not loaded",
                    f.data_file.file_path
                ))
            })?;
            slots.push((
                f,
                writer.add_dv(&f.data_file.file_path, bytes, *card)?,
                *card,
            ));
        }
        let puffin = writer.finish()?;
        let size = puffin.len() as i64;
        delete_entries.extend(slots.into_iter().map(|(f, slot, card)| ManifestEntry {
            status: Status::Added,
            snapshot_id,
            sequence_number,
            file_sequence_number: sequence_number,
            data_file: DataFile {
                content: CONTENT_POSITION_DELETES,
                file_path: puffin_location.clone(),
                file_format: "PUFFIN".into(),
                partition: f.data_file.partition.clone(),
                record_count: card as i64,
                file_size_in_bytes: size,
                value_counts: BTreeMap::new(),
                null_value_counts: BTreeMap::new(),
                lower_bounds: BTreeMap::new(),
                upper_bounds: BTreeMap::new(),
                first_row_id: None,
                referenced_data_file: Some(f.data_file.file_path.clone()),
                content_offset: Some(slot.offset as i64),
                content_size_in_bytes: Some(slot.length as i64),
            },
        }));
        files.push(OutFile {
            path: puffin_rel,
            bytes: puffin,
        });
    }
    if !delete_entries.is_empty() {
        let name = next_name("d");
        let rel = format!("{METADATA_DIR}/{name}");
        let bytes =
            manifest::write_manifest(&ctx, MANIFEST_CONTENT_DELETES, &delete_entries, &rel)?;
        list.push(manifest_file(
            &writing,
            shape.metadata_location(&name),
            bytes.len(),
            MANIFEST_CONTENT_DELETES,
            &delete_entries,
        ));
        files.push(OutFile { path: rel, bytes });
        manifests_written += 1;
    }

    // Manifest list.
    let parent = prev_meta.and_then(|m| m.current_snapshot_id);
    let list_name = format!("snap-{snapshot_id}-1-{token}.avro");
    let list_rel = format!("{METADATA_DIR}/{list_name}");
    let list_bytes = manifest::write_manifest_list(
        &list,
        snapshot_id,
        parent,
        sequence_number,
        first_row_id,
        &list_rel,
    )?;
    files.push(OutFile {
        path: list_rel,
        bytes: list_bytes,
    });

    // Summary and metadata.
    let live_data: i64 = input.files.len() as i64;
    let total_records: i64 = input.files.iter().map(|f| f.data_file.record_count).sum();
    let total_deletes: u64 = input.files.iter().filter_map(|f| f.dv_cardinality).sum();
    let total_delete_files = input
        .files
        .iter()
        .filter(|f| f.dv_cardinality.is_some())
        .count();
    let added_delete_files = plan.dv_blobs.len();
    let operation = if plan.removed_data_files == 0 && plan.removed_delete_files == 0 {
        if added_delete_files == 0 {
            "append"
        } else {
            "delete"
        }
    } else if plan.added_data.is_empty() && added_delete_files == 0 {
        "delete"
    } else {
        "overwrite"
    };
    let mut summary = BTreeMap::from([
        ("operation".to_string(), operation.to_string()),
        (DELTA_VERSION.to_string(), input.version.to_string()),
        (DELTA_TIMESTAMP.to_string(), input.timestamp_ms.to_string()),
        ("added-data-files".into(), plan.added_data.len().to_string()),
        (
            "deleted-data-files".into(),
            plan.removed_data_files.to_string(),
        ),
        ("added-delete-files".into(), added_delete_files.to_string()),
        (
            "removed-delete-files".into(),
            plan.removed_delete_files.to_string(),
        ),
        ("total-data-files".into(), live_data.to_string()),
        ("total-delete-files".into(), total_delete_files.to_string()),
        ("total-records".into(), total_records.to_string()),
        ("total-position-deletes".into(), total_deletes.to_string()),
        ("total-equality-deletes".into(), "0".into()),
    ]);
    summary.insert("added-dvs".into(), added_delete_files.to_string());

    let timestamp_ms = input.timestamp_ms.max(
        prev_meta
            .and_then(|m| m.current_snapshot())
            .map_or(0, |s| s.timestamp_ms),
    );
    let added_rows = next_row_id - first_row_id;
    let mut snapshots = prev_meta.map(|m| m.snapshots.clone()).unwrap_or_default();
    snapshots.push(Snapshot {
        snapshot_id,
        parent_snapshot_id: parent,
        sequence_number,
        timestamp_ms,
        manifest_list: shape.metadata_location(&list_name),
        summary,
        schema_id: Some(schema_id),
        first_row_id: Some(first_row_id),
        added_rows: Some(added_rows),
    });
    let mut snapshot_log = prev_meta
        .map(|m| m.snapshot_log.clone())
        .unwrap_or_default();
    snapshot_log.push(SnapshotLogEntry {
        timestamp_ms,
        snapshot_id,
    });
    let mut metadata_log = prev_meta
        .map(|m| m.metadata_log.clone())
        .unwrap_or_default();
    if let Some(p) = prev {
        metadata_log.push(MetadataLogEntry {
            timestamp_ms: p.metadata.last_updated_ms,
            metadata_file: shape.metadata_location(&metadata_file_name(p.metadata_version)),
        });
    }
    // As Iceberg's `write.metadata.previous-versions-max` (default 100): the
    // files dropped from the log are VACUUM's once past the retention.
    let excess = metadata_log
        .len()
        .saturating_sub(MAX_PREVIOUS_METADATA_FILES);
    metadata_log.drain(..excess);
    let mut properties = prev_meta.map(|m| m.properties.clone()).unwrap_or_default();
    properties.insert(DELTA_VERSION.into(), input.version.to_string());
    properties.insert(DELTA_TIMESTAMP.into(), input.timestamp_ms.to_string());
    properties.insert(NAME_MAPPING.into(), shape.schema.name_mapping.to_string());
    let table_uuid = match prev_meta {
        Some(m) => m.table_uuid.clone(),
        None => uuid::Uuid::parse_str(&shape.delta_table_id)
            .map(|u| u.to_string())
            .unwrap_or_else(|_| ids.fallback_table_uuid.clone()),
    };
    let last_column_id = prev_meta
        .map_or(0, |m| m.last_column_id)
        .max(shape.schema.last_column_id);
    let last_partition_id = specs
        .iter()
        .flat_map(|s| s.fields.iter().map(|f| f.field_id))
        .max()
        .unwrap_or(metadata::FIRST_PARTITION_FIELD_ID - 1)
        .max(prev_meta.map_or(0, |m| m.last_partition_id));
    let meta = TableMetadata {
        format_version: metadata::FORMAT_VERSION,
        table_uuid,
        location: shape.location.clone(),
        last_sequence_number: sequence_number,
        last_updated_ms: ids.now_ms.max(timestamp_ms),
        last_column_id,
        current_schema_id: schema_id,
        schemas,
        default_spec_id: spec_id,
        partition_specs: specs,
        last_partition_id,
        default_sort_order_id: 0,
        sort_orders: vec![serde_json::json!({"order-id": 0, "fields": []})],
        properties,
        current_snapshot_id: Some(snapshot_id),
        refs: BTreeMap::from([(
            "main".to_string(),
            SnapshotRef {
                snapshot_id,
                kind: "branch".into(),
            },
        )]),
        snapshots,
        snapshot_log,
        metadata_log,
        next_row_id,
        statistics: Vec::new(),
        partition_statistics: Vec::new(),
    };
    let metadata_version = prev.map_or(1, |p| p.metadata_version + 1);
    Ok(Output {
        files,
        metadata_file: OutFile {
            path: format!("{METADATA_DIR}/{}", metadata_file_name(metadata_version)),
            bytes: meta.to_json()?,
        },
        metadata_version,
        version_hint: OutFile {
            path: format!("{METADATA_DIR}/{VERSION_HINT}"),
            bytes: metadata_version.to_string().into_bytes(),
        },
        snapshot_id,
        sequence_number,
        added_data_files: plan.added_data.len(),
        removed_data_files: plan.removed_data_files,
        added_delete_files,
        removed_delete_files: plan.removed_delete_files,
        manifests_reused,
        manifests_written,
    })
}

/// The partition fields of the previous metadata's default spec, typed from
/// the current shape (manifests are read with them).
pub fn same_partitioning(meta: &TableMetadata, shape: &TableShape) -> bool {
    meta.default_spec()
        .is_some_and(|s| s.fields == spec_fields(&shape.partition))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iceberg::metadata::convert_schema;
    use crate::iceberg::puffin;
    use crate::log::schema::StructType;
    use roaring::RoaringTreemap;

    const SCHEMA: &str = r#"{"type":"struct","fields":[
      {"name":"id","type":"long","nullable":true,
       "metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-a"}},
      {"name":"ts","type":"timestamp","nullable":true,
       "metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"col-b"}}]}"#;

    fn shape() -> TableShape {
        TableShape {
            location: "file:///t".into(),
            schema: convert_schema(&StructType::parse(SCHEMA).unwrap()).unwrap(),
            partition: Vec::new(),
            delta_table_id: "5e4c7b2a-0000-4000-8000-000000000001".into(),
        }
    }

    fn add(path: &str, n: i64) -> Add {
        serde_json::from_value(serde_json::json!({
            "path": path, "partitionValues": {}, "size": 100, "modificationTime": 0,
            "dataChange": true,
            "stats": format!(r#"{{"numRecords":{n},"minValues":{{"col-a":1,"col-b":"2024-01-01T00:00:00.123Z"}},"maxValues":{{"col-a":9,"col-b":"2024-01-01T00:00:01.456Z"}},"nullCount":{{"col-a":0,"col-b":1}}}}"#),
        }))
        .unwrap()
    }

    fn input(version: u64, files: &[(&str, Option<u64>)], touched: Option<&[&str]>) -> DeltaInput {
        let s = shape();
        DeltaInput {
            version,
            timestamp_ms: 1000 + version as i64,
            files: files
                .iter()
                .map(|(p, dv)| DeltaFile {
                    data_file: data_file(&s, &add(p, 10), p).unwrap(),
                    dv_cardinality: *dv,
                })
                .collect(),
            touched: touched.map(|t| t.iter().map(|p| s.file_location(p)).collect()),
            previously_live: None,
            row_id_high_water_mark: None,
        }
    }

    fn dv_bytes(input: &DeltaInput, plan: &Plan) -> DvBytes {
        plan.dv_blobs
            .iter()
            .map(|&i| {
                let card = input.files[i].dv_cardinality.unwrap();
                let map: RoaringTreemap = (0..card).collect();
                let mut b = Vec::new();
                crate::format::bitmap::serialize_into(&map, &mut b).unwrap();
                (i, (b, card))
            })
            .collect()
    }

    fn ids(n: i64) -> Ids {
        Ids {
            snapshot_id: n,
            token: format!("tok{n}"),
            now_ms: 5000,
            fallback_table_uuid: "x".into(),
        }
    }

    /// Run one conversion and read the result back as the next state.
    fn step(prev: Option<&PrevState>, input: &DeltaInput, n: i64) -> (PrevState, Output) {
        let s = shape();
        let plan = plan(prev, input);
        let out = build(prev, &s, input, &plan, &dv_bytes(input, &plan), &ids(n)).unwrap();
        let files: HashMap<String, Vec<u8>> = out
            .files
            .iter()
            .map(|f| {
                (
                    s.metadata_location(f.path.trim_start_matches("metadata/")),
                    f.bytes.clone(),
                )
            })
            .collect();
        let metadata = TableMetadata::parse(&out.metadata_file.bytes, "m").unwrap();
        let cur = metadata.current_snapshot().unwrap().clone();
        let list = manifest::read_manifest_list(&files[&cur.manifest_list], "l").unwrap();
        let mut manifests = Vec::new();
        for mf in list {
            let bytes = files.get(&mf.manifest_path).cloned().or_else(|| {
                prev.and_then(|p| {
                    p.manifests
                        .iter()
                        .find(|(m, _)| m.manifest_path == mf.manifest_path)
                        .map(|_| Vec::new())
                })
            });
            let entries = match bytes {
                Some(b) if !b.is_empty() => manifest::read_manifest(&b, &s.partition, "m").unwrap(),
                _ => prev
                    .unwrap()
                    .manifests
                    .iter()
                    .find(|(m, _)| m.manifest_path == mf.manifest_path)
                    .unwrap()
                    .1
                    .clone(),
            };
            manifests.push((mf, entries));
        }
        // Every live Puffin file's blobs are all referenced by live entries.
        let live: HashSet<(String, i64)> = manifests
            .iter()
            .flat_map(|(_, e)| e.iter())
            .filter(|e| e.data_file.content == CONTENT_POSITION_DELETES)
            .map(|e| {
                (
                    e.data_file.file_path.clone(),
                    e.data_file.content_offset.unwrap(),
                )
            })
            .collect();
        for (path, bytes) in &files {
            if path.ends_with(".puffin") {
                for b in puffin::read_footer(bytes, path).unwrap() {
                    assert!(live.contains(&(path.clone(), b.offset as i64)));
                }
            }
        }
        (
            PrevState {
                metadata,
                metadata_version: out.metadata_version,
                data_entries_loaded: true,
                delete_entries_loaded: true,
                manifests,
            },
            out,
        )
    }

    #[test]
    fn data_file_from_stats_widens_timestamp_upper_bound() {
        let s = shape();
        let df = data_file(&s, &add("a.parquet", 10), "a.parquet").unwrap();
        assert_eq!(df.file_path, "file:///t/a.parquet");
        assert_eq!(df.record_count, 10);
        assert_eq!(df.null_value_counts[&2], 1);
        assert_eq!(df.value_counts[&1], 10);
        let lo = i64::from_le_bytes(df.lower_bounds[&2].clone().try_into().unwrap());
        let hi = i64::from_le_bytes(df.upper_bounds[&2].clone().try_into().unwrap());
        assert_eq!(lo, 1_704_067_200_123_000);
        assert_eq!(hi, 1_704_067_201_456_000 + 999);
        assert_eq!(df.lower_bounds[&1], 1i64.to_le_bytes().to_vec());
    }

    #[test]
    fn incremental_snapshots_reuse_manifests_and_move_puffin_mates() {
        // v0: two files.
        let i0 = input(0, &[("a", None), ("b", None)], None);
        let (s0, o0) = step(None, &i0, 1);
        assert_eq!(o0.added_data_files, 2);
        assert_eq!(s0.metadata.properties[DELTA_VERSION], "0");
        // v1: DVs on both, in one Puffin file.
        let i1 = input(1, &[("a", Some(1)), ("b", Some(2))], Some(&["a", "b"]));
        let (s1, o1) = step(Some(&s0), &i1, 2);
        assert_eq!((o1.added_delete_files, o1.manifests_reused), (2, 1));
        // v2: append only: every manifest reused.
        let i2 = input(
            2,
            &[("a", Some(1)), ("b", Some(2)), ("c", None)],
            Some(&["c"]),
        );
        let (s2, o2) = step(Some(&s1), &i2, 3);
        assert_eq!((o2.manifests_reused, o2.manifests_written), (2, 1));
        assert_eq!(o2.added_delete_files, 0);
        // v3: a's DV grows: b's blob shares the Puffin file, so it moves too.
        let i3 = input(
            3,
            &[("a", Some(3)), ("b", Some(2)), ("c", None)],
            Some(&["a"]),
        );
        let (s3, o3) = step(Some(&s2), &i3, 4);
        assert_eq!((o3.added_delete_files, o3.removed_delete_files), (2, 2));
        assert_eq!(o3.removed_data_files, 0);
        // v4: b removed: its DV goes, a's moves out of the shared Puffin file.
        let i4 = input(4, &[("a", Some(3)), ("c", None)], Some(&["b"]));
        let (s4, o4) = step(Some(&s3), &i4, 5);
        assert_eq!(o4.removed_data_files, 1);
        assert_eq!((o4.added_delete_files, o4.removed_delete_files), (1, 2));
        assert_eq!(s4.metadata.snapshots.len(), 5);
        assert_eq!(s4.metadata.metadata_log.len(), 4);
        assert_eq!(s4.metadata.last_sequence_number, 5);
        let snap = s4.metadata.current_snapshot().unwrap();
        assert_eq!(snap.parent_snapshot_id, Some(4));
        assert_eq!(snap.summary[DELTA_VERSION], "4");
        // Row lineage: ids assigned once per file, next-row-id past them all.
        assert_eq!(s4.metadata.next_row_id, 30);
        let json: Value = serde_json::from_slice(&o4.metadata_file.bytes).unwrap();
        for key in [
            "next-row-id",
            "snapshot-log",
            "metadata-log",
            "refs",
            "last-column-id",
        ] {
            assert!(json.get(key).is_some(), "{key}");
        }
        assert_eq!(json["snapshots"][0]["first-row-id"], 0);
        assert_eq!(json["snapshots"][0]["added-rows"], 20);
        assert_eq!(json["format-version"], 3);
    }

    #[test]
    fn unknown_touched_set_compares_everything() {
        let i0 = input(0, &[("a", Some(1))], None);
        let (s0, _) = step(None, &i0, 1);
        let i1 = input(5, &[("a", Some(1))], None);
        let p = plan(Some(&s0), &i1);
        // The data entry is equal and kept; the DV is rewritten (its identity is unknown).
        assert!(p.added_data.is_empty());
        assert_eq!(p.dv_blobs, vec![0]);
    }

    #[test]
    fn manifests_not_read_are_kept_whole() {
        let i0 = input(0, &[("a", None), ("b", None)], None);
        let (s0, _) = step(None, &i0, 1);
        let i1 = input(1, &[("a", Some(1)), ("b", None)], Some(&["a"]));
        let (mut s1, _) = step(Some(&s0), &i1, 2);
        // As sync_iceberg reads them when nothing live at v1 is gone and no
        // file touched since had a DV at v1 (b gets its first).
        s1.data_entries_loaded = false;
        s1.delete_entries_loaded = false;
        for (_, entries) in &mut s1.manifests {
            entries.clear();
        }
        let sh = shape();
        let mut i2 = input(
            2,
            &[("a", Some(1)), ("b", Some(4)), ("c", None)],
            Some(&["b", "c"]),
        );
        i2.previously_live = Some(["a", "b"].iter().map(|p| sh.file_location(p)).collect());
        let p = plan(Some(&s1), &i2);
        assert_eq!(p.added_data, vec![2]); // only c
        assert_eq!(p.dv_blobs, vec![1]); // only b's new DV: a's stays
        assert_eq!((p.removed_data_files, p.removed_delete_files), (0, 0));
        assert!(p.fates.iter().all(|f| *f == ManifestFate::Keep));
        let (s2, o2) = step(Some(&s1), &i2, 3);
        assert_eq!(o2.manifests_written, 2); // c's data manifest, b's delete manifest
        let snap = s2.metadata.current_snapshot().unwrap();
        assert_eq!(snap.summary["total-data-files"], "3");
        assert_eq!(snap.summary["total-delete-files"], "2");
    }

    #[test]
    fn delete_manifests_are_merged_past_the_limit() {
        let names: Vec<String> = (0..12).map(|i| format!("f{i}")).collect();
        let mut dvs: Vec<Option<u64>> = vec![None; names.len()];
        let files = |dvs: &[Option<u64>]| -> Vec<(&str, Option<u64>)> {
            names
                .iter()
                .map(String::as_str)
                .zip(dvs.iter().copied())
                .collect()
        };
        let (mut state, _) = step(None, &input(0, &files(&dvs), None), 1);
        for i in 0..names.len() {
            dvs[i] = Some(1);
            let touched = [names[i].as_str()];
            let (next, out) = step(
                Some(&state),
                &input(i as u64 + 1, &files(&dvs), Some(&touched)),
                i as i64 + 2,
            );
            assert_eq!(out.added_delete_files, 1);
            let deletes: Vec<_> = next
                .manifests
                .iter()
                .filter(|(mf, _)| mf.content == MANIFEST_CONTENT_DELETES)
                .collect();
            assert!(deletes.len() <= MAX_DELETE_MANIFESTS, "{}", deletes.len());
            let live: usize = deletes.iter().map(|(_, e)| e.len()).sum();
            assert_eq!(live, i + 1);
            state = next;
        }
    }

    #[test]
    fn metadata_log_keeps_the_last_files() {
        let files = [("a", None)];
        let (mut state, _) = step(None, &input(0, &files, None), 1);
        let steps = MAX_PREVIOUS_METADATA_FILES + 3;
        for v in 1..=steps {
            let (next, _) = step(
                Some(&state),
                &input(v as u64, &files, Some(&[])),
                v as i64 + 1,
            );
            state = next;
        }
        let log = &state.metadata.metadata_log;
        assert_eq!(log.len(), MAX_PREVIOUS_METADATA_FILES);
        let last = log.last().unwrap();
        assert!(last
            .metadata_file
            .ends_with(&metadata_file_name(steps as u64)));
        assert_eq!(state.metadata.snapshots.len(), steps + 1);
    }

    #[test]
    fn metadata_file_names() {
        assert_eq!(metadata_file_name(3), "v3.metadata.json");
        assert_eq!(parse_metadata_file_name("v12.metadata.json"), Some(12));
        assert_eq!(parse_metadata_file_name("12.metadata.json"), None);
    }
}
