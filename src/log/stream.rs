//! Streaming source planning, as Delta Spark's `DeltaSource`: which files a
//! micro-batch reads, where its offset ends, and which commits stop the
//! stream. Pure: takes commits' actions and a snapshot's adds, returns values.
//!
//! A stream reads, in order, the *indexed files* of the table:
//!
//! | from                                | indexed files                            |
//! |-------------------------------------|------------------------------------------|
//! | the initial snapshot (version `v`)  | every live file, ordered by              |
//! |                                     | (`modificationTime`, `path`), index 0..  |
//! | each later commit `v`               | its `add`s with `dataChange`, index 0..  |
//! |                                     | in log order                             |
//!
//! Each version's files come between two sentinels (no file): (`v`,
//! [`BASE_INDEX`]) before, (`v`, [`END_INDEX`]) after. An offset
//! `(reservoirVersion, index, isStartingVersion)` names the last entry a
//! batch read; the next batch reads the entries after it, up to the
//! admission limits ([`Admission`]: `maxFilesPerTrigger`,
//! `maxBytesPerTrigger`; sentinels are always admitted and count nothing). An
//! offset never names an end sentinel: past (`v`, [`END_INDEX`]) it is
//! (`v + 1`, [`BASE_INDEX`]).
//!
//! Each commit is checked when the scan reaches it ([`check_commit`]): a
//! `remove` with `dataChange` fails the stream (unless `ignoreDeletes` for a
//! commit with no `add`, or `skipChangeCommits`, which skips the commit whole,
//! or the deprecated `ignoreChanges`, which reads its adds); a metadata action
//! whose schema the stream's schema cannot read fails it too
//! ([`check_schema`]), and so does a column renamed or dropped under column
//! mapping ([`check_column_mapping`]). A query that starts before the version
//! its schema was read at also checks the metadata at its start against that
//! schema once ([`check_start`]), as Delta Spark does when a stream starts.

use serde::{Deserialize, Serialize};

use super::actions::{Action, Add, Metadata};
use super::schema::{column_mapping_mode, ColumnMappingMode, DataType, StructType};
use crate::error::{Error, Result};

/// The `sourceVersion` of the offsets written: Delta Spark writes `VERSION_1`
/// for every offset it can (all but its schema-tracking ones).
pub const SOURCE_VERSION: u32 = 1;
/// The highest `sourceVersion` read (Delta Spark's `VERSION_3`).
pub const MAX_SOURCE_VERSION: u32 = 3;
/// The index of a commit's sentinel: before its first file.
pub const BASE_INDEX: i64 = -1;
/// The index of a version's last sentinel: after its last file.
pub const END_INDEX: i64 = i64::MAX;
/// Files a micro-batch admits when neither limit is given.
pub const DEFAULT_MAX_FILES_PER_TRIGGER: i64 = 1000;
/// Files admitted when only `maxBytesPerTrigger` is given (Delta Spark's
/// `Int.MaxValue - 8`).
const UNLIMITED_FILES: i64 = i32::MAX as i64 - 8;
/// The `reservoirVersion` of the offset a query starts from, before it read
/// anything (not a Delta Spark offset: Spark's Python sources need one).
const NOT_STARTED: i64 = -1;

/// A streaming offset, serialized as Delta Spark's `DeltaSourceOffset`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamOffset {
    pub source_version: u32,
    /// The table's `metaData.id`.
    pub reservoir_id: String,
    pub reservoir_version: i64,
    pub index: i64,
    /// Whether the offset is inside the initial snapshot.
    pub is_starting_version: bool,
}

impl StreamOffset {
    /// The offset of a query that has read nothing yet.
    pub fn not_started(table_id: &str) -> StreamOffset {
        StreamOffset {
            source_version: SOURCE_VERSION,
            reservoir_id: table_id.to_string(),
            reservoir_version: NOT_STARTED,
            index: BASE_INDEX,
            is_starting_version: true,
        }
    }

    pub fn is_not_started(&self) -> bool {
        self.reservoir_version == NOT_STARTED
    }

    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|source| Error::Json {
            context: "stream offset".into(),
            source,
        })
    }

    /// An offset from its JSON, checked against the table it is for.
    pub fn from_json(text: &str, table_id: &str) -> Result<StreamOffset> {
        let offset: StreamOffset = serde_json::from_str(text).map_err(|source| Error::Json {
            context: format!("stream offset {text}"),
            source,
        })?;
        if offset.source_version > MAX_SOURCE_VERSION {
            return Err(Error::Unsupported(format!(
                "stream offset sourceVersion {} (this reader knows up to {MAX_SOURCE_VERSION})",
                offset.source_version
            )));
        }
        if offset.reservoir_id != table_id {
            return Err(Error::InvalidArgument(format!(
                "the stream offset is for the table with id {}, not this one ({table_id}): \
                 the table was replaced; start the query with a new checkpoint",
                offset.reservoir_id
            )));
        }
        if offset.index < BASE_INDEX || offset.reservoir_version < NOT_STARTED {
            return Err(Error::InvalidArgument(format!(
                "invalid stream offset {text}: version and index must be >= -1"
            )));
        }
        Ok(offset)
    }
}

/// Where a scan starts: after (`version`, `index`); from the initial
/// snapshot of `version` when `is_starting_version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanStart {
    pub version: u64,
    pub index: i64,
    pub is_starting_version: bool,
}

fn version_of(v: i64) -> Result<u64> {
    u64::try_from(v).map_err(|_| Error::InvalidArgument(format!("invalid stream version {v}")))
}

/// A scan's inclusive bound as (version, index), from an end offset.
pub(crate) fn offset_bound(bound: Option<&StreamOffset>) -> Result<Option<(u64, i64)>> {
    bound
        .map(|b| Ok((version_of(b.reservoir_version)?, b.index)))
        .transpose()
}

/// The start of a scan from `start`. A query that has read nothing starts at
/// `starting_version` (changes only), else at the snapshot of `init_version`
/// (the table's version when the source was created) when looking for the
/// next offset; a batch up to `end` reads the snapshot `end` is in, as Delta
/// Spark's `getBatch` (so a batch replayed after a restart reads what it read).
pub fn scan_start(
    start: &StreamOffset,
    end: Option<&StreamOffset>,
    starting_version: Option<u64>,
    init_version: u64,
) -> Result<ScanStart> {
    if !start.is_not_started() {
        return Ok(ScanStart {
            version: version_of(start.reservoir_version)?,
            index: start.index,
            is_starting_version: start.is_starting_version,
        });
    }
    if let Some(v) = starting_version {
        return Ok(ScanStart {
            version: v,
            index: BASE_INDEX,
            is_starting_version: false,
        });
    }
    let version = match end {
        Some(e) if e.is_starting_version => version_of(e.reservoir_version)?,
        Some(e) => version_of(e.reservoir_version - 1)?,
        None => init_version,
    };
    Ok(ScanStart {
        version,
        index: BASE_INDEX,
        is_starting_version: true,
    })
}

/// One entry of the stream: a file, or a version's sentinel (`add` None).
#[derive(Debug, Clone, PartialEq)]
pub struct IndexedFile {
    pub version: u64,
    pub index: i64,
    pub add: Option<Add>,
}

impl IndexedFile {
    fn sentinel(version: u64, index: i64) -> IndexedFile {
        IndexedFile {
            version,
            index,
            add: None,
        }
    }
}

/// `adds` as version `version`'s indexed files, between its two sentinels.
fn with_sentinels(adds: Vec<Add>, version: u64) -> Vec<IndexedFile> {
    let mut out = Vec::with_capacity(adds.len() + 2);
    out.push(IndexedFile::sentinel(version, BASE_INDEX));
    out.extend(
        adds.into_iter()
            .zip(0i64..)
            .map(|(add, index)| IndexedFile {
                version,
                index,
                add: Some(add),
            }),
    );
    out.push(IndexedFile::sentinel(version, END_INDEX));
    out
}

/// The initial snapshot of `version` as indexed files, in Delta Spark's
/// order: by `modificationTime`, then `path`.
pub fn snapshot_files(mut adds: Vec<Add>, version: u64) -> Vec<IndexedFile> {
    adds.sort_by(|a, b| (a.modification_time, &a.path).cmp(&(b.modification_time, &b.path)));
    with_sentinels(adds, version)
}

/// How a stream treats commits that remove rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChangePolicy {
    /// `ignoreDeletes`: commits that only remove files are read (as nothing).
    pub ignore_deletes: bool,
    /// `ignoreChanges` (deprecated in Delta Spark): commits that remove
    /// files are read, their adds (rewritten rows too) emitted.
    pub ignore_changes: bool,
    /// `skipChangeCommits`: commits that remove files are skipped whole.
    pub skip_change_commits: bool,
}

/// The schema a stream reads with, to check later metadata actions against.
#[derive(Debug, Clone, Copy)]
pub struct ReadSchema<'a> {
    pub schema: &'a StructType,
    pub partition_columns: &'a [String],
    /// The column mapping mode of the table's metadata at `version`.
    pub column_mapping: ColumnMappingMode,
    /// The version the schema was read at (the table's when the query was
    /// loaded): metadata of earlier versions is older than the schema.
    pub version: u64,
    /// Whether the query gave `startingVersion`/`startingTimestamp` (the
    /// error message says so).
    pub has_starting_option: bool,
}

/// Check commit `version` (its `actions`) as the stream reaches it; Ok(true)
/// when the commit is to be skipped whole (`skipChangeCommits`).
/// `table_path` is named in the errors, as Delta Spark names it.
pub fn check_commit(
    actions: &[Action],
    version: u64,
    policy: ChangePolicy,
    read: ReadSchema<'_>,
    table_path: &str,
) -> Result<bool> {
    let allow_changes = policy.ignore_changes || policy.skip_change_commits;
    let allow_deletes = allow_changes || policy.ignore_deletes;
    let mut seen_add = false;
    let mut removed: Option<&str> = None;
    for action in actions {
        match action {
            Action::Add(a) if a.data_change => seen_add = true,
            Action::Remove(r) if r.data_change => {
                removed.get_or_insert(r.path.as_str());
            }
            Action::Metadata(m) => {
                let schema = StructType::parse(&m.schema_string)?;
                check_column_mapping(m, &schema, read, version)?;
                check_schema(&schema, &m.partition_columns, read, version)?;
            }
            _ => {}
        }
    }
    let Some(path) = removed else {
        return Ok(false);
    };
    if seen_add && !allow_changes {
        return Err(Error::StreamSourceChanged {
            version,
            detail: format!(
                "Detected a data update (for example {path}) in the source table at version \
                 {version}. This is currently not supported. If this is going to happen \
                 regularly and you are okay to skip changes, set the option \
                 'skipChangeCommits' to 'true'. If you would like the data update to be \
                 reflected, please restart this query with a fresh checkpoint directory. \
                 The source table can be found at path {table_path}."
            ),
        });
    }
    if !seen_add && !allow_deletes {
        return Err(Error::StreamSourceChanged {
            version,
            detail: format!(
                "Detected deleted data (for example {path}) from streaming source at version \
                 {version}. This is currently not supported. If you'd like to ignore deletes, \
                 set the option 'ignoreDeletes' to 'true'. The source table can be found at \
                 path {table_path}."
            ),
        });
    }
    Ok(policy.skip_change_commits)
}

/// Commit `version` as indexed files: (unless `skip`) its `add`s with
/// `dataChange`, in log order, between its sentinels.
pub fn commit_files(actions: &[Action], version: u64, skip: bool) -> Vec<IndexedFile> {
    let adds: Vec<Add> = if skip {
        Vec::new()
    } else {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Add(add) if add.data_change => Some(add.as_ref().clone()),
                _ => None,
            })
            .collect()
    };
    with_sentinels(adds, version)
}

/// Whether data of `schema` (a metadata action's, at `version`) can be read
/// with the stream's schema: Delta Spark's `SchemaUtils.isReadCompatible` with
/// tightened nullability forbidden: every column of `schema` in the stream's
/// (so a column added after the stream's schema was read fails, one added
/// before it does not), names compared case-insensitively and spelled the
/// same, no type changed, no column the stream reads as NOT NULL nullable in
/// `schema`, the same partition columns. Field metadata (comments) may change.
pub fn check_schema(
    schema: &StructType,
    partition_columns: &[String],
    read: ReadSchema<'_>,
    version: u64,
) -> Result<()> {
    if struct_compatible(schema, read.schema) && partition_columns == read.partition_columns {
        return Ok(());
    }
    let hint = if read.has_starting_option {
        " If you started the query with startingVersion or startingTimestamp, start it at a \
         version after the schema change."
    } else {
        ""
    };
    Err(Error::StreamSourceChanged {
        version,
        detail: format!(
            "Detected schema change in version {version}: streaming source schema: {} \
             (partitioned by {:?}); data file schema: {} (partitioned by {:?}). Please try \
             restarting the query. If this issue repeats across query restarts without \
             making progress, you have made an incompatible schema change and need to start \
             your query from scratch using a new checkpoint directory.{hint}",
            DataType::Struct(read.schema.clone()),
            read.partition_columns,
            DataType::Struct(schema.clone()),
            partition_columns,
        ),
    })
}

/// Delta Spark's check for changes a stream cannot read across without
/// tracking its schema (`DeltaColumnMapping.hasNoColumnMappingSchemaChanges`):
/// between the stream's schema and `metadata`'s (`schema`, at `version`;
/// older or newer than the stream's), a column dropped or renamed under
/// column mapping (a physical name gone, or the same physical name under
/// another name), other partition columns, or column mapping turned off.
pub fn check_column_mapping(
    metadata: &Metadata,
    schema: &StructType,
    read: ReadSchema<'_>,
    version: u64,
) -> Result<()> {
    let mode = column_mapping_mode(&metadata.configuration)?;
    let theirs = (schema, metadata.partition_columns.as_slice(), mode);
    let ours = (read.schema, read.partition_columns, read.column_mapping);
    let (old, new) = if version < read.version {
        (theirs, ours)
    } else {
        (ours, theirs)
    };
    let changed = match (old.2, new.2) {
        (_, ColumnMappingMode::None) => old.2 != ColumnMappingMode::None, // a downgrade
        (old_mode, new_mode) => {
            old.1 != new.1 || {
                let old_names = physical_names(old.0, old_mode)?;
                let new_names = physical_names(new.0, new_mode)?;
                old_names.iter().any(|(physical, name)| {
                    new_names
                        .iter()
                        .find(|(p, _)| p == physical)
                        .is_none_or(|(_, n)| n != name)
                })
            }
        }
    };
    if !changed {
        return Ok(());
    }
    Err(Error::StreamSourceChanged {
        version,
        detail: format!(
            "Streaming read is not supported on tables with read-incompatible schema changes \
             (e.g. rename or drop or datatype changes): the table at version {version} has \
             a column renamed or dropped (column mapping) or other partition columns. \
             deltadv does not track a stream's schema (Delta Spark's \
             'schemaTrackingLocation'): start the query at a version after the change with a \
             new checkpoint. Read schema: {}. Incompatible data schema: {}.",
            DataType::Struct(read.schema.clone()),
            DataType::Struct(schema.clone()),
        ),
    })
}

/// (physical path, name) of every column of `schema`, nested struct fields
/// included; physical names are the logical ones without column mapping (how
/// Delta Spark compares a table upgraded to column mapping).
fn physical_names(schema: &StructType, mode: ColumnMappingMode) -> Result<Vec<(String, String)>> {
    fn walk(
        s: &StructType,
        mode: ColumnMappingMode,
        prefix: &str,
        out: &mut Vec<(String, String)>,
    ) -> Result<()> {
        for f in &s.fields {
            let physical = format!("{prefix}{}", f.physical_name(mode)?);
            let mut inner = &f.data_type;
            while let DataType::Array { element, .. } = inner {
                inner = element;
            }
            if let DataType::Struct(child) = inner {
                walk(child, mode, &format!("{physical}."), out)?;
            }
            out.push((physical, f.name.clone()));
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(schema, mode, "", &mut out)?;
    Ok(out)
}

/// The check a stream makes once when it starts at `start`, a version before
/// the one its schema was read at (Delta Spark's
/// `checkReadIncompatibleSchemaChangeOnStreamStartOnce`): the table's
/// `metadata` at `start` against the stream's schema, as a metadata action
/// of that version is checked.
pub fn check_start(metadata: &Metadata, start: u64, read: ReadSchema<'_>) -> Result<()> {
    if start >= read.version {
        return Ok(());
    }
    let schema = StructType::parse(&metadata.schema_string)?;
    check_column_mapping(metadata, &schema, read, start)?;
    check_schema(&schema, &metadata.partition_columns, read, start)
}

fn nullability_compatible(existing: bool, read: bool) -> bool {
    read || !existing
}

/// Delta Spark's `isReadCompatible` with tightened nullability forbidden: every
/// column of `existing` (the data's schema) is in `read` (names compared
/// case-insensitively; `read` may have more: they read as null), each spelled
/// the same, of a compatible type, not NOT NULL in `read` where nullable in
/// `existing`.
fn struct_compatible(existing: &StructType, read: &StructType) -> bool {
    let lower = |s: &StructType| -> Vec<String> {
        s.fields.iter().map(|f| f.name.to_lowercase()).collect()
    };
    let read_names = lower(read);
    if !lower(existing).iter().all(|n| read_names.contains(n)) {
        return false;
    }
    read.fields.iter().all(|r| {
        existing
            .fields
            .iter()
            .find(|e| e.name.to_lowercase() == r.name.to_lowercase())
            .is_none_or(|e| {
                e.name == r.name
                    && nullability_compatible(e.nullable, r.nullable)
                    && type_compatible(&e.data_type, &r.data_type)
            })
    })
}

fn type_compatible(existing: &DataType, read: &DataType) -> bool {
    match (existing, read) {
        (DataType::Struct(e), DataType::Struct(r)) => struct_compatible(e, r),
        (
            DataType::Array {
                element: e,
                contains_null: en,
            },
            DataType::Array {
                element: r,
                contains_null: rn,
            },
        ) => nullability_compatible(*en, *rn) && type_compatible(e, r),
        (
            DataType::Map {
                key: ek,
                value: ev,
                value_contains_null: en,
            },
            DataType::Map {
                key: rk,
                value: rv,
                value_contains_null: rn,
            },
        ) => nullability_compatible(*en, *rn) && type_compatible(ek, rk) && type_compatible(ev, rv),
        (e, r) => e == r,
    }
}

/// How much a micro-batch may still admit (Delta Spark's `AdmissionLimits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    files_to_take: i64,
    bytes_to_take: i64,
    /// Whether an entry was offered yet (Delta Spark's
    /// `commitProcessedInBatch`): a batch's first commit is admitted whole.
    commit_processed: bool,
}

impl Admission {
    /// Limits from `maxFilesPerTrigger` and `maxBytesPerTrigger`: 1000 files
    /// when neither is given; no file limit when only bytes are.
    pub fn new(max_files: Option<i64>, max_bytes: Option<i64>) -> Admission {
        let files_to_take = match (max_files, max_bytes) {
            (Some(f), _) => f,
            (None, None) => DEFAULT_MAX_FILES_PER_TRIGGER,
            (None, Some(_)) => UNLIMITED_FILES,
        };
        Admission {
            files_to_take,
            bytes_to_take: max_bytes.unwrap_or(i64::MAX),
            commit_processed: false,
        }
    }

    /// Whether the batch has room left (Delta Spark's `hasCapacity`).
    pub fn has_capacity(&self) -> bool {
        self.files_to_take > 0 && self.bytes_to_take > 0
    }

    fn take(&mut self, files: i64, bytes: i64) {
        self.files_to_take = self.files_to_take.saturating_sub(files);
        self.bytes_to_take = self.bytes_to_take.saturating_sub(bytes);
    }

    /// Whether `entries` entries of one commit, `bytes` bytes in all, are
    /// admitted together (Delta Spark's `admit(Seq)`, for a change-feed commit
    /// that may not be split): when they are the batch's first, or when they
    /// all fit. Sentinels among them count as entries, as in Delta Spark.
    pub fn admit_commit(&mut self, entries: usize, bytes: i64) -> bool {
        if entries == 0 {
            return true;
        }
        let files = i64::try_from(entries).unwrap_or(i64::MAX);
        let admit = !self.commit_processed
            || (self.files_to_take.saturating_sub(files) >= 0
                && self.bytes_to_take.saturating_sub(bytes) >= 0);
        self.commit_processed = true;
        self.take(files, bytes);
        admit
    }

    /// Whether the next entry is admitted. A micro-batch admits files while
    /// it has room, so the file that fills it is admitted whole (and the
    /// first file always is); a sentinel is always admitted, taking no room.
    pub fn admit(&mut self, add: Option<&Add>) -> bool {
        self.admit_size(add.map(|a| a.size))
    }

    /// [`Admission::admit`] for an entry of `size` bytes (`None`: a sentinel).
    pub fn admit_size(&mut self, size: Option<i64>) -> bool {
        self.commit_processed = true;
        let Some(size) = size else {
            return true; // a sentinel
        };
        let admit = self.has_capacity();
        self.take(1, size);
        admit
    }
}

/// What a scan does with the next indexed file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Before the start: not part of the scan.
    Skip,
    /// Part of the scan.
    Take,
    /// Past the end or the limits: the scan ends before it.
    Stop,
}

/// A scan over the indexed files, from a start, up to an optional bound
/// (inclusive) and within optional admission limits.
#[derive(Debug, Clone)]
pub struct OffsetScan {
    start: ScanStart,
    bound: Option<(u64, i64)>,
    admission: Option<Admission>,
}

impl OffsetScan {
    pub fn new(
        start: ScanStart,
        bound: Option<&StreamOffset>,
        admission: Option<Admission>,
    ) -> Result<Self> {
        let bound = offset_bound(bound)?;
        Ok(OffsetScan {
            start,
            bound,
            admission,
        })
    }

    pub fn start(&self) -> ScanStart {
        self.start
    }

    /// Offer the next indexed file, in stream order.
    pub fn offer(&mut self, file: &IndexedFile) -> Step {
        if !(file.version > self.start.version || file.index > self.start.index) {
            return Step::Skip;
        }
        if let Some((v, i)) = self.bound {
            if !(file.version < v || (file.version == v && file.index <= i)) {
                return Step::Stop;
            }
        }
        if let Some(admission) = &mut self.admission {
            if !admission.admit(file.add.as_ref()) {
                return Step::Stop;
            }
        }
        Step::Take
    }

    /// The offset after `last`, the last entry the scan took (Delta Spark's
    /// `buildOffsetFromIndexedFile`): past a version's end sentinel, the next
    /// version's base.
    pub fn offset_after(&self, last: &IndexedFile, table_id: &str) -> Result<StreamOffset> {
        offset_after(self.start, last.version, last.index, table_id)
    }
}

/// The offset after the entry (`version`, `index`), the last a scan from
/// `start` took (Delta Spark's `buildOffsetFromIndexedFile`): past a version's
/// end sentinel, the next version's base.
pub fn offset_after(
    start: ScanStart,
    version: u64,
    index: i64,
    table_id: &str,
) -> Result<StreamOffset> {
    let reservoir_version = i64::try_from(version)
        .map_err(|_| Error::InvalidArgument(format!("version {version} too large")))?;
    Ok(if index == END_INDEX {
        StreamOffset {
            source_version: SOURCE_VERSION,
            reservoir_id: table_id.to_string(),
            reservoir_version: reservoir_version + 1,
            index: BASE_INDEX,
            is_starting_version: false,
        }
    } else {
        StreamOffset {
            source_version: SOURCE_VERSION,
            reservoir_id: table_id.to_string(),
            reservoir_version,
            index,
            is_starting_version: version == start.version && start.is_starting_version,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::actions::{Metadata, Remove};
    use std::collections::HashMap;

    fn add(path: &str, size: i64, mtime: i64, data_change: bool) -> Add {
        Add {
            path: path.into(),
            partition_values: HashMap::new(),
            size,
            modification_time: mtime,
            data_change,
            stats: None,
            tags: None,
            deletion_vector: None,
            base_row_id: None,
            default_row_commit_version: None,
            clustering_provider: None,
        }
    }

    fn remove(path: &str, data_change: bool) -> Action {
        Action::Remove(Box::new(Remove::of_add(
            &add(path, 1, 0, true),
            0,
            data_change,
        )))
    }

    fn schema(json: &str) -> StructType {
        StructType::parse(json).unwrap()
    }

    const AB: &str = r#"{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}},{"name":"b","type":"string","nullable":true,"metadata":{}}]}"#;

    fn read(s: &StructType) -> ReadSchema<'_> {
        ReadSchema {
            schema: s,
            partition_columns: &[],
            column_mapping: ColumnMappingMode::None,
            version: 1,
            has_starting_option: false,
        }
    }

    #[test]
    fn snapshot_is_ordered_by_modification_time_then_path() {
        let files = snapshot_files(
            vec![
                add("b", 1, 2, true),
                add("c", 1, 1, true),
                add("a", 1, 2, true),
            ],
            7,
        );
        let order: Vec<_> = files
            .iter()
            .map(|f| (f.add.as_ref().map(|a| a.path.as_str()), f.index, f.version))
            .collect();
        assert_eq!(
            order,
            vec![
                (None, BASE_INDEX, 7),
                (Some("c"), 0, 7),
                (Some("a"), 1, 7),
                (Some("b"), 2, 7),
                (None, END_INDEX, 7)
            ]
        );
    }

    #[test]
    fn commit_files_have_sentinels_and_only_data_change_adds() {
        let actions = vec![
            Action::Add(Box::new(add("x", 1, 0, true))),
            Action::Add(Box::new(add("y", 1, 0, false))),
            Action::Add(Box::new(add("z", 1, 0, true))),
        ];
        let files = commit_files(&actions, 3, false);
        let got: Vec<_> = files.iter().map(|f| (f.index, f.add.is_some())).collect();
        assert_eq!(
            got,
            vec![
                (BASE_INDEX, false),
                (0, true),
                (1, true),
                (END_INDEX, false)
            ]
        );
        assert_eq!(commit_files(&actions, 3, true).len(), 2);
    }

    #[test]
    fn removes_fail_the_stream_unless_an_option_allows_them() {
        let s = schema(AB);
        let delete_only = vec![remove("f", true)];
        let rewrite = vec![
            remove("f", true),
            Action::Add(Box::new(add("f", 1, 0, true))),
        ];
        let maintenance = vec![
            remove("f", false),
            Action::Add(Box::new(add("g", 1, 0, false))),
        ];
        let default = ChangePolicy::default();
        let err = check_commit(&delete_only, 4, default, read(&s), "/t").unwrap_err();
        assert!(err.to_string().contains("version 4") && err.to_string().contains("ignoreDeletes"));
        let err = check_commit(&rewrite, 5, default, read(&s), "/t").unwrap_err();
        assert!(
            err.to_string().contains("version 5") && err.to_string().contains("skipChangeCommits")
        );
        assert!(!check_commit(&maintenance, 6, default, read(&s), "/t").unwrap());
        let deletes = ChangePolicy {
            ignore_deletes: true,
            ..default
        };
        assert!(!check_commit(&delete_only, 4, deletes, read(&s), "/t").unwrap());
        assert!(check_commit(&rewrite, 5, deletes, read(&s), "/t").is_err());
        let skip = ChangePolicy {
            skip_change_commits: true,
            ..default
        };
        assert!(check_commit(&rewrite, 5, skip, read(&s), "/t").unwrap());
        assert!(check_commit(&delete_only, 4, skip, read(&s), "/t").unwrap());
        assert!(!check_commit(&maintenance, 6, skip, read(&s), "/t").unwrap());
    }

    #[test]
    fn schema_changes_other_than_metadata_fail() {
        let s = schema(AB);
        let commented = AB.replace(
            r#""b","type":"string","nullable":true,"metadata":{}"#,
            r#""b","type":"string","nullable":true,"metadata":{"comment":"x"}"#,
        );
        assert!(check_schema(&schema(&commented), &[], read(&s), 2).is_ok());
        let added = AB.replace(
            "]}",
            r#",{"name":"c","type":"long","nullable":true,"metadata":{}}]}"#,
        );
        let err = check_schema(&schema(&added), &[], read(&s), 2).unwrap_err();
        assert!(
            err.to_string().contains("schema change in version 2"),
            "{err}"
        );
        let retyped = AB.replace(r#""a","type":"long""#, r#""a","type":"integer""#);
        assert!(check_schema(&schema(&retyped), &[], read(&s), 2).is_err());
        let renamed = AB.replace(r#""name":"b""#, r#""name":"B""#);
        assert!(check_schema(&schema(&renamed), &[], read(&s), 2).is_err());
        assert!(check_schema(&s, &["a".to_string()], read(&s), 2).is_err());
        let meta: Metadata = serde_json::from_value(serde_json::json!({
            "id": "t", "format": {"provider": "parquet", "options": {}},
            "schemaString": added, "partitionColumns": [], "configuration": {}
        }))
        .unwrap();
        let actions = vec![Action::Metadata(meta)];
        assert!(check_commit(&actions, 9, ChangePolicy::default(), read(&s), "/t").is_err());
    }

    fn metadata(schema_string: &str, mapped: bool) -> Metadata {
        let configuration = if mapped {
            serde_json::json!({"delta.columnMapping.mode": "name"})
        } else {
            serde_json::json!({})
        };
        serde_json::from_value(serde_json::json!({
            "id": "t", "format": {"provider": "parquet", "options": {}},
            "schemaString": schema_string, "partitionColumns": [],
            "configuration": configuration
        }))
        .unwrap()
    }

    #[test]
    fn data_of_an_older_schema_with_fewer_columns_is_read() {
        // Delta Spark's isReadCompatible: the data's columns must be in the
        // stream's schema; the stream's may have more (read as null).
        let added = AB.replace(
            "]}",
            r#",{"name":"c","type":"long","nullable":true,"metadata":{}}]}"#,
        );
        let wide = schema(&added);
        assert!(check_schema(&schema(AB), &[], read(&wide), 0).is_ok());
        assert!(check_schema(&wide, &[], read(&schema(AB)), 2).is_err());
        // the stream started before its schema's version: the start's metadata
        assert!(check_start(&metadata(AB, false), 0, read(&wide)).is_ok());
        let retyped = AB.replace(r#""a","type":"long""#, r#""a","type":"integer""#);
        let err = check_start(&metadata(&retyped, false), 0, read(&wide)).unwrap_err();
        assert!(
            err.to_string().contains("schema change in version 0"),
            "{err}"
        );
        // a start at or after the schema's version is checked commit by commit
        assert!(check_start(&metadata(&retyped, false), 1, read(&wide)).is_ok());
    }

    #[test]
    fn column_mapping_renames_and_drops_fail_across_the_stream_schema() {
        let field = |name: &str, physical: &str| {
            format!(
                r#"{{"name":"{name}","type":"long","nullable":true,"metadata":{{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"{physical}"}}}}"#
            )
        };
        let table =
            |fields: &[String]| format!(r#"{{"type":"struct","fields":[{}]}}"#, fields.join(","));
        let both = table(&[field("a", "col-1"), field("b", "col-2")]);
        let renamed = table(&[field("a", "col-1"), field("c", "col-2")]);
        let dropped = table(&[field("a", "col-1")]);
        let added = table(&[
            field("a", "col-1"),
            field("b", "col-2"),
            field("d", "col-3"),
        ]);
        fn mapped(s: &StructType) -> ReadSchema<'_> {
            ReadSchema {
                column_mapping: ColumnMappingMode::Name,
                ..read(s)
            }
        }
        // the stream reads the latest schema (version 1); the start is older
        for later in [&renamed, &dropped] {
            let s = schema(later);
            let err = check_start(&metadata(&both, true), 0, mapped(&s)).unwrap_err();
            assert!(err.to_string().contains("renamed or dropped"), "{err}");
            // and a later metadata action doing the same to the stream's schema
            let s = schema(&both);
            let m = metadata(later, true);
            let actions = vec![Action::Metadata(m)];
            let err =
                check_commit(&actions, 3, ChangePolicy::default(), mapped(&s), "/t").unwrap_err();
            assert!(err.to_string().contains("at version 3"), "{err}");
        }
        // an added column before the stream's version is no such change
        let s = schema(&added);
        assert!(check_start(&metadata(&both, true), 0, mapped(&s)).is_ok());
        // without column mapping, physical names are the names
        let s = schema(AB);
        assert!(check_column_mapping(&metadata(AB, false), &s, read(&s), 3).is_ok());
        // turning column mapping off under a stream
        let err = check_column_mapping(&metadata(AB, false), &s, mapped(&s), 3).unwrap_err();
        assert!(err.to_string().contains("column mapping"), "{err}");
    }

    fn files(entries: &[(u64, i64, Option<i64>)]) -> Vec<IndexedFile> {
        entries
            .iter()
            .map(|&(version, index, size)| IndexedFile {
                version,
                index,
                add: size.map(|s| add("p", s, 0, true)),
            })
            .collect()
    }

    fn run(scan: &mut OffsetScan, all: &[IndexedFile]) -> Vec<(u64, i64)> {
        let mut out = Vec::new();
        for f in all {
            match scan.offer(f) {
                Step::Skip => {}
                Step::Take => out.push((f.version, f.index)),
                Step::Stop => break,
            }
        }
        out
    }

    #[test]
    fn admission_takes_files_until_full_and_sentinels_free() {
        const E: i64 = END_INDEX;
        // snapshot v2 (2 files), then v3 (2 files), v4 (no file)
        let all = files(&[
            (2, -1, None),
            (2, 0, Some(10)),
            (2, 1, Some(10)),
            (2, E, None),
            (3, -1, None),
            (3, 0, Some(10)),
            (3, 1, Some(10)),
            (3, E, None),
            (4, -1, None),
            (4, E, None),
        ]);
        let start = ScanStart {
            version: 2,
            index: -1,
            is_starting_version: true,
        };
        let mut one = OffsetScan::new(start, None, Some(Admission::new(Some(1), None))).unwrap();
        assert_eq!(run(&mut one, &all), vec![(2, 0)]);
        let off = one.offset_after(&all[1], "id").unwrap();
        assert_eq!(
            (off.reservoir_version, off.index, off.is_starting_version),
            (2, 0, true)
        );
        // two files: then the sentinels up to the next file ride along
        let mut two = OffsetScan::new(start, None, Some(Admission::new(Some(2), None))).unwrap();
        assert_eq!(run(&mut two, &all), vec![(2, 0), (2, 1), (2, E), (3, -1)]);
        let off = two.offset_after(&all[4], "id").unwrap();
        assert_eq!(
            (off.reservoir_version, off.index, off.is_starting_version),
            (3, -1, false)
        );
        // bytes: the file that crosses the limit is admitted
        let mut bytes = OffsetScan::new(start, None, Some(Admission::new(None, Some(15)))).unwrap();
        assert_eq!(run(&mut bytes, &all), vec![(2, 0), (2, 1), (2, E), (3, -1)]);
        // all: the offset moves past the last end sentinel
        let mut all_scan = OffsetScan::new(start, None, None).unwrap();
        assert_eq!(run(&mut all_scan, &all).len(), 9);
        let off = all_scan.offset_after(&all[9], "id").unwrap();
        assert_eq!(
            (off.reservoir_version, off.index, off.is_starting_version),
            (5, -1, false)
        );
        // resuming after (2, 1) up to a bound
        let after = ScanStart {
            version: 2,
            index: 1,
            is_starting_version: true,
        };
        let bound = StreamOffset {
            index: 0,
            reservoir_version: 3,
            ..StreamOffset::not_started("id")
        };
        let mut bounded = OffsetScan::new(after, Some(&bound), None).unwrap();
        assert_eq!(run(&mut bounded, &all), vec![(2, E), (3, -1), (3, 0)]);
    }

    #[test]
    fn offsets_round_trip_as_delta_spark_json() {
        let o = StreamOffset {
            source_version: 1,
            reservoir_id: "abc".into(),
            reservoir_version: 5,
            index: -1,
            is_starting_version: false,
        };
        let json = o.to_json().unwrap();
        assert_eq!(
            json,
            r#"{"sourceVersion":1,"reservoirId":"abc","reservoirVersion":5,"index":-1,"isStartingVersion":false}"#
        );
        assert_eq!(StreamOffset::from_json(&json, "abc").unwrap(), o);
        assert!(StreamOffset::from_json(&json, "other").is_err());
        assert!(StreamOffset::from_json("{}", "abc").is_err());
    }

    #[test]
    fn a_query_that_read_nothing_starts_where_delta_spark_does() {
        let ns = StreamOffset::not_started("id");
        let s = scan_start(&ns, None, None, 8).unwrap();
        assert_eq!((s.version, s.index, s.is_starting_version), (8, -1, true));
        let s = scan_start(&ns, None, Some(3), 8).unwrap();
        assert_eq!((s.version, s.is_starting_version), (3, false));
        let in_snapshot = StreamOffset {
            reservoir_version: 6,
            index: 2,
            ..ns.clone()
        };
        assert_eq!(
            scan_start(&ns, Some(&in_snapshot), None, 8)
                .unwrap()
                .version,
            6
        );
        let past = StreamOffset {
            reservoir_version: 7,
            is_starting_version: false,
            ..ns.clone()
        };
        assert_eq!(scan_start(&ns, Some(&past), None, 8).unwrap().version, 6);
    }
}
