//! Every `delta.*` key deltadv reads or writes, in one place: table
//! properties (`metaData.configuration`), column metadata keys (a field's
//! `metadata` in `schemaString`) and the one domain it maintains.
//!
//! Each table property is a named constant plus a typed accessor on
//! [`TableProperties`], a borrowed view of a table's configuration. An
//! accessor applies the property's default and its parsing rule, and a value
//! that does not parse is an error naming the key and the value. Other
//! modules import the keys from here; no other file spells a `delta.*` key.
//!
//! | key | accessor | type |
//! |---|---|---|
//! | [`APPEND_ONLY`] | [`TableProperties::append_only`] | bool |
//! | [`ENABLE_DELETION_VECTORS`] | [`TableProperties::enable_deletion_vectors`] | bool |
//! | [`ENABLE_CHANGE_DATA_FEED`] | [`TableProperties::enable_change_data_feed`] | bool |
//! | [`ENABLE_IN_COMMIT_TIMESTAMPS`] | [`TableProperties::enable_in_commit_timestamps`] | bool |
//! | [`ICT_ENABLEMENT_VERSION`], [`ICT_ENABLEMENT_TIMESTAMP`] | [`TableProperties::in_commit_timestamp_enablement`] | version and ms |
//! | [`ENABLE_ROW_TRACKING`] | [`TableProperties::enable_row_tracking`] | bool |
//! | [`MATERIALIZED_ROW_ID`], [`MATERIALIZED_ROW_COMMIT_VERSION`] | [`TableProperties::materialized_row_tracking_columns`] | column names |
//! | [`COLUMN_MAPPING_MODE`] | [`TableProperties::column_mapping_mode`] | [`ColumnMappingMode`] |
//! | [`ISOLATION_LEVEL`] | [`TableProperties::isolation_level`] | [`IsolationLevel`] |
//! | [`CHECKPOINT_INTERVAL`] | [`TableProperties::checkpoint_interval`] | commits |
//! | [`DELETED_FILE_RETENTION_DURATION`] | [`TableProperties::deleted_file_retention_ms`] | ms |
//! | [`TARGET_FILE_SIZE`] | [`TableProperties::target_file_size`] | bytes |
//! | [`DATA_SKIPPING_NUM_INDEXED_COLS`] | [`TableProperties::data_skipping_num_indexed_cols`] | columns |
//! | [`DATA_SKIPPING_STATS_COLUMNS`] | [`TableProperties::data_skipping_stats_columns`] | column list text |
//! | [`REQUIRE_CHECKPOINT_PROTECTION_BEFORE`] | [`TableProperties::require_checkpoint_protection_before`] | version |
//! | [`UNIVERSAL_FORMAT_ENABLED_FORMATS`] | [`TableProperties::universal_formats`] | format names |
//! | [`CONSTRAINTS_PREFIX`]`<name>` | [`TableProperties::check_constraints`] | names |
//!
//! Pure, and below every other `log` module but [`crate::log::actions`] and
//! [`crate::log::interval`] (the duration syntax): nothing here imports the
//! feature table, the schema or the change feed.

use std::collections::HashMap;
use std::fmt;

use crate::error::{Error, Result};
use crate::log::actions::Metadata;
use crate::log::interval::parse_interval_ms;

// ---------------------------------------------------------------------------
// Table properties (`metaData.configuration`)
// ---------------------------------------------------------------------------

/// `delta.feature.<name> = supported`: asks a new table's protocol for a
/// table feature (kept in the protocol only, never in the configuration).
pub const FEATURE_PREFIX: &str = "delta.feature.";

/// Delta Spark's table properties (`DeltaConfigs`) a user may set, in their
/// canonical spelling: Spark hands a Python data source its options in lower
/// case, and Delta keeps a property under this spelling.
pub const USER_TABLE_PROPERTIES: &[&str] = &[
    APPEND_ONLY,
    "delta.autoOptimize.autoCompact",
    "delta.autoOptimize.optimizeWrite",
    "delta.checkpoint.writeStatsAsJson",
    "delta.checkpoint.writeStatsAsStruct",
    CHECKPOINT_INTERVAL,
    "delta.checkpointPolicy",
    COLUMN_MAPPING_MODE,
    "delta.compatibility.symlinkFormatManifest.enabled",
    DATA_SKIPPING_NUM_INDEXED_COLS,
    DATA_SKIPPING_STATS_COLUMNS,
    DELETED_FILE_RETENTION_DURATION,
    ENABLE_CHANGE_DATA_FEED,
    ENABLE_DELETION_VECTORS,
    "delta.enableExpiredLogCleanup",
    ENABLE_ICEBERG_COMPAT_V1,
    ENABLE_ICEBERG_COMPAT_V2,
    ENABLE_ICEBERG_COMPAT_V3,
    ENABLE_IN_COMMIT_TIMESTAMPS,
    ENABLE_ROW_TRACKING,
    "delta.enableTypeWidening",
    ISOLATION_LEVEL,
    "delta.logRetentionDuration",
    "delta.minReaderVersion",
    "delta.minWriterVersion",
    "delta.randomizeFilePrefixes",
    "delta.randomPrefixLength",
    "delta.setTransactionRetentionDuration",
    TARGET_FILE_SIZE,
    "delta.tuneFileSizesForRewrites",
    UNIVERSAL_FORMAT_ENABLED_FORMATS,
];

/// The prefix of Delta's own table properties.
pub const DELTA_PREFIX: &str = "delta.";

/// The properties of [`USER_TABLE_PROPERTIES`] deltadv sets only when it
/// creates a table (`crate::write::properties` refuses them on an existing
/// one): they change the protocol, and some need a backfill or a rewrite.
/// The others change nothing in the protocol and ask nothing of the files
/// already written, but turning deletion vectors on (which adds the
/// feature) and UniForm (checked there).
pub const CREATION_ONLY_PROPERTIES: &[&str] = &[
    APPEND_ONLY,
    "delta.checkpointPolicy",
    COLUMN_MAPPING_MODE,
    "delta.compatibility.symlinkFormatManifest.enabled",
    ENABLE_CHANGE_DATA_FEED,
    ENABLE_ICEBERG_COMPAT_V1,
    ENABLE_ICEBERG_COMPAT_V2,
    ENABLE_ICEBERG_COMPAT_V3,
    ENABLE_IN_COMMIT_TIMESTAMPS,
    ENABLE_ROW_TRACKING,
    "delta.enableTypeWidening",
    "delta.minReaderVersion",
    "delta.minWriterVersion",
];

/// The table accepts appends only: DELETE, UPDATE and MERGE are refused.
pub const APPEND_ONLY: &str = "delta.appendOnly";
/// The table property that turns deletion vectors on.
pub const ENABLE_DELETION_VECTORS: &str = "delta.enableDeletionVectors";
/// The table property that turns the change data feed on.
pub const ENABLE_CHANGE_DATA_FEED: &str = "delta.enableChangeDataFeed";
/// The table property that turns in-commit timestamps on.
pub const ENABLE_IN_COMMIT_TIMESTAMPS: &str = "delta.enableInCommitTimestamps";
/// Version at which in-commit timestamps were turned on for an existing
/// table (absent when they were on from version 0).
pub const ICT_ENABLEMENT_VERSION: &str = "delta.inCommitTimestampEnablementVersion";
/// In-commit timestamp of the commit at [`ICT_ENABLEMENT_VERSION`].
pub const ICT_ENABLEMENT_TIMESTAMP: &str = "delta.inCommitTimestampEnablementTimestamp";
/// The table property that turns row tracking on.
pub const ENABLE_ROW_TRACKING: &str = "delta.enableRowTracking";
/// The table properties that turn Iceberg compatibility V1 / V2 / V3 on.
pub const ENABLE_ICEBERG_COMPAT_V1: &str = "delta.enableIcebergCompatV1";
pub const ENABLE_ICEBERG_COMPAT_V2: &str = "delta.enableIcebergCompatV2";
pub const ENABLE_ICEBERG_COMPAT_V3: &str = "delta.enableIcebergCompatV3";
/// UniForm: the formats whose metadata is kept beside the Delta log
/// (comma separated; `iceberg`, `hudi`).
pub const UNIVERSAL_FORMAT_ENABLED_FORMATS: &str = "delta.universalFormat.enabledFormats";
/// The domain (`domainMetadata`) holding a clustered table's clustering columns.
pub const CLUSTERING_DOMAIN: &str = "delta.clustering";
/// The hidden column a rewrite would materialize row ids into; Delta Spark
/// requires it on tables that support row tracking.
pub const MATERIALIZED_ROW_ID: &str = "delta.rowTracking.materializedRowIdColumnName";
/// The hidden column a rewrite would materialize row commit versions into.
pub const MATERIALIZED_ROW_COMMIT_VERSION: &str =
    "delta.rowTracking.materializedRowCommitVersionColumnName";
/// Table property selecting the column mapping mode.
pub const COLUMN_MAPPING_MODE: &str = "delta.columnMapping.mode";
/// Table property naming the isolation level of writes.
pub const ISOLATION_LEVEL: &str = "delta.isolationLevel";
/// A checkpoint is written after every this many commits.
pub const CHECKPOINT_INTERVAL: &str = "delta.checkpointInterval";
/// Default of [`CHECKPOINT_INTERVAL`].
pub const DEFAULT_CHECKPOINT_INTERVAL: u64 = 10;
/// How long a `remove` stays a tombstone (in checkpoints, and for VACUUM).
pub const DELETED_FILE_RETENTION_DURATION: &str = "delta.deletedFileRetentionDuration";
/// Default of [`DELETED_FILE_RETENTION_DURATION`], as in Delta Spark.
pub const DEFAULT_DELETED_FILE_RETENTION: &str = "interval 1 week";
/// Size OPTIMIZE aims its files at, in bytes.
pub const TARGET_FILE_SIZE: &str = "delta.targetFileSize";
/// Statistics are collected for the first this many leaf columns (-1: all).
pub const DATA_SKIPPING_NUM_INDEXED_COLS: &str = "delta.dataSkippingNumIndexedCols";
/// Default of [`DATA_SKIPPING_NUM_INDEXED_COLS`].
pub const DEFAULT_NUM_INDEXED_COLS: i64 = 32;
/// Statistics are collected for exactly these columns (comma-separated,
/// backquoted where needed); takes precedence over
/// [`DATA_SKIPPING_NUM_INDEXED_COLS`].
pub const DATA_SKIPPING_STATS_COLUMNS: &str = "delta.dataSkippingStatsColumns";
/// The table property Delta Spark sets when it drops a feature with
/// checkpoint protection: checkpoints before this version must not be
/// removed or rewritten (the `checkpointProtection` feature).
pub const REQUIRE_CHECKPOINT_PROTECTION_BEFORE: &str =
    "delta.requireCheckpointProtectionBeforeVersion";
/// Prefix of the CHECK constraint properties (`delta.constraints.<name>` =
/// the SQL expression).
pub const CONSTRAINTS_PREFIX: &str = "delta.constraints.";

// ---------------------------------------------------------------------------
// Column metadata keys (a field's `metadata` in `schemaString`)
// ---------------------------------------------------------------------------

/// Column metadata key holding a column's physical name.
pub const PHYSICAL_NAME_KEY: &str = "delta.columnMapping.physicalName";
/// Column metadata key holding a column's id.
pub const COLUMN_ID_KEY: &str = "delta.columnMapping.id";
/// Table property: the largest `delta.columnMapping.id` ever assigned.
pub const COLUMN_MAPPING_MAX_ID: &str = "delta.columnMapping.maxColumnId";
/// Column metadata key holding the ids of nested array/map slots.
pub const NESTED_IDS_KEY: &str = "delta.columnMapping.nested.ids";
/// Column metadata key holding a column's type change history.
pub const TYPE_CHANGES_KEY: &str = "delta.typeChanges";
/// Column metadata key of a column invariant.
pub const INVARIANTS_KEY: &str = "delta.invariants";
/// Column metadata key of a generated column's expression.
pub const GENERATION_EXPRESSION_KEY: &str = "delta.generationExpression";
/// Column metadata key of an identity column's start value.
pub const IDENTITY_START_KEY: &str = "delta.identity.start";
/// Column metadata key of an identity column's step (increment).
pub const IDENTITY_STEP_KEY: &str = "delta.identity.step";
/// Column metadata key of the highest (lowest, for a negative step) identity
/// value handed out so far.
pub const IDENTITY_HIGH_WATER_MARK_KEY: &str = "delta.identity.highWaterMark";
/// Column metadata key: the identity column is `GENERATED BY DEFAULT` (values
/// may be given explicitly) when true, `GENERATED ALWAYS` otherwise.
pub const IDENTITY_ALLOW_EXPLICIT_INSERT_KEY: &str = "delta.identity.allowExplicitInsert";
/// Column metadata key of a column's default value (SQL text; the
/// `allowColumnDefaults` feature).
pub const CURRENT_DEFAULT_KEY: &str = "CURRENT_DEFAULT";

// ---------------------------------------------------------------------------
// Domains (`domainMetadata`)
// ---------------------------------------------------------------------------

/// The domain holding the row id high-water mark.
pub const ROW_TRACKING_DOMAIN: &str = "delta.rowTracking";

// ---------------------------------------------------------------------------
// Value types
// ---------------------------------------------------------------------------

/// How data files name their columns (table property `delta.columnMapping.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnMappingMode {
    /// Data files use the logical (display) names.
    None,
    /// Data files use `delta.columnMapping.physicalName`.
    Name,
    /// Data files are resolved by `delta.columnMapping.id` (Parquet field ids).
    Id,
}

impl ColumnMappingMode {
    /// Parse a `delta.columnMapping.mode` value (`none`, `name`, `id`, any case).
    pub fn parse(value: &str) -> Result<Self> {
        if value.eq_ignore_ascii_case("none") {
            Ok(ColumnMappingMode::None)
        } else if value.eq_ignore_ascii_case("name") {
            Ok(ColumnMappingMode::Name)
        } else if value.eq_ignore_ascii_case("id") {
            Ok(ColumnMappingMode::Id)
        } else {
            Err(Error::Unsupported(format!(
                "table property {COLUMN_MAPPING_MODE} = {value:?} (expected none, name or id)"
            )))
        }
    }
}

impl fmt::Display for ColumnMappingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ColumnMappingMode::None => "none",
            ColumnMappingMode::Name => "name",
            ColumnMappingMode::Id => "id",
        })
    }
}

/// Delta's isolation levels for writes (`delta.isolationLevel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    /// Reads and writes are serializable: a concurrent append of a file this
    /// transaction would have read is a conflict.
    Serializable,
    /// Writes are serializable; a concurrent blind append may be ordered after
    /// this transaction. Delta's default.
    #[default]
    WriteSerializable,
}

impl IsolationLevel {
    /// The name written to the table property and `commitInfo.isolationLevel`.
    pub fn as_str(self) -> &'static str {
        match self {
            IsolationLevel::Serializable => "Serializable",
            IsolationLevel::WriteSerializable => "WriteSerializable",
        }
    }

    /// Parse a `delta.isolationLevel` value (case as Delta writes it).
    pub fn parse(value: &str) -> Result<Self> {
        match value {
            "Serializable" => Ok(IsolationLevel::Serializable),
            "WriteSerializable" => Ok(IsolationLevel::WriteSerializable),
            other => Err(Error::Unsupported(format!(
                "{ISOLATION_LEVEL} = {other:?}: expected \"Serializable\" or \
                 \"WriteSerializable\""
            ))),
        }
    }

    /// The level configured in table properties (`metaData.configuration`);
    /// WriteSerializable when unset.
    pub fn from_configuration(configuration: &HashMap<String, Option<String>>) -> Result<Self> {
        TableProperties::new(configuration).isolation_level()
    }
}

impl fmt::Display for IsolationLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// ---------------------------------------------------------------------------
// The typed view
// ---------------------------------------------------------------------------

/// A table's properties, read through typed accessors (borrowed; cheap to
/// make for each question).
#[derive(Debug, Clone, Copy)]
pub struct TableProperties<'a> {
    configuration: &'a HashMap<String, Option<String>>,
}

impl<'a> TableProperties<'a> {
    /// A view of a `metaData.configuration` map.
    pub fn new(configuration: &'a HashMap<String, Option<String>>) -> Self {
        TableProperties { configuration }
    }

    /// A view of `metadata`'s configuration.
    pub fn of(metadata: &'a Metadata) -> Self {
        Self::new(&metadata.configuration)
    }

    /// The raw value of `key` (absent or null: `None`).
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.configuration.get(key).and_then(Option::as_deref)
    }

    /// A boolean property, read as Delta Spark does: `true` in any case
    /// (surrounding blanks ignored); anything else, or absence, is false.
    pub fn is_true(&self, key: &str) -> bool {
        self.get(key)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    }

    /// [`APPEND_ONLY`].
    pub fn append_only(&self) -> bool {
        self.is_true(APPEND_ONLY)
    }

    /// [`ENABLE_DELETION_VECTORS`].
    pub fn enable_deletion_vectors(&self) -> bool {
        self.is_true(ENABLE_DELETION_VECTORS)
    }

    /// [`ENABLE_CHANGE_DATA_FEED`].
    pub fn enable_change_data_feed(&self) -> bool {
        self.is_true(ENABLE_CHANGE_DATA_FEED)
    }

    /// [`ENABLE_IN_COMMIT_TIMESTAMPS`].
    pub fn enable_in_commit_timestamps(&self) -> bool {
        self.is_true(ENABLE_IN_COMMIT_TIMESTAMPS)
    }

    /// [`ICT_ENABLEMENT_VERSION`] and [`ICT_ENABLEMENT_TIMESTAMP`]: the
    /// version and in-commit timestamp (ms) from which commits carry
    /// in-commit timestamps; `None` when unset (on from version 0).
    pub fn in_commit_timestamp_enablement(&self) -> Result<Option<(u64, i64)>> {
        let version = self.parsed::<u64>(ICT_ENABLEMENT_VERSION, "a version")?;
        let timestamp = self.parsed::<i64>(ICT_ENABLEMENT_TIMESTAMP, "a timestamp")?;
        Ok(version.zip(timestamp))
    }

    /// [`ENABLE_ROW_TRACKING`].
    pub fn enable_row_tracking(&self) -> bool {
        self.is_true(ENABLE_ROW_TRACKING)
    }

    /// [`MATERIALIZED_ROW_ID`] and [`MATERIALIZED_ROW_COMMIT_VERSION`], when
    /// both are set.
    pub fn materialized_row_tracking_columns(&self) -> Option<(&'a str, &'a str)> {
        self.get(MATERIALIZED_ROW_ID)
            .zip(self.get(MATERIALIZED_ROW_COMMIT_VERSION))
    }

    /// [`COLUMN_MAPPING_MODE`]: absent (or null) is `None`; `none`, `name`,
    /// `id` (any case) map to their mode; anything else is an
    /// [`Error::Unsupported`].
    pub fn column_mapping_mode(&self) -> Result<ColumnMappingMode> {
        match self.get(COLUMN_MAPPING_MODE) {
            None => Ok(ColumnMappingMode::None),
            Some(v) => ColumnMappingMode::parse(v),
        }
    }

    /// [`ISOLATION_LEVEL`]; WriteSerializable when unset.
    pub fn isolation_level(&self) -> Result<IsolationLevel> {
        match self.get(ISOLATION_LEVEL) {
            Some(v) => IsolationLevel::parse(v),
            None => Ok(IsolationLevel::default()),
        }
    }

    /// [`CHECKPOINT_INTERVAL`]: [`DEFAULT_CHECKPOINT_INTERVAL`] when unset,
    /// and (as Delta Spark's writers tolerate it) when not a positive integer.
    pub fn checkpoint_interval(&self) -> u64 {
        self.get(CHECKPOINT_INTERVAL)
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|v| *v > 0)
            .unwrap_or(DEFAULT_CHECKPOINT_INTERVAL)
    }

    /// [`DELETED_FILE_RETENTION_DURATION`] in milliseconds (default
    /// [`DEFAULT_DELETED_FILE_RETENTION`]).
    pub fn deleted_file_retention_ms(&self) -> Result<i64> {
        let text = self
            .get(DELETED_FILE_RETENTION_DURATION)
            .unwrap_or(DEFAULT_DELETED_FILE_RETENTION);
        parse_interval_ms(text, DELETED_FILE_RETENTION_DURATION)
    }

    /// [`TARGET_FILE_SIZE`] in bytes; `None` when unset, an error when not a
    /// positive integer.
    pub fn target_file_size(&self) -> Result<Option<u64>> {
        let Some(text) = self.get(TARGET_FILE_SIZE) else {
            return Ok(None);
        };
        text.trim()
            .parse::<u64>()
            .ok()
            .filter(|s| *s > 0)
            .map(Some)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "the table property {TARGET_FILE_SIZE} is {text:?}, not a number of bytes"
                ))
            })
    }

    /// [`DATA_SKIPPING_NUM_INDEXED_COLS`] ([`DEFAULT_NUM_INDEXED_COLS`] when
    /// unset; negative: all columns).
    pub fn data_skipping_num_indexed_cols(&self) -> Result<i64> {
        match self.get(DATA_SKIPPING_NUM_INDEXED_COLS) {
            None => Ok(DEFAULT_NUM_INDEXED_COLS),
            Some(text) => text.trim().parse::<i64>().map_err(|_| {
                Error::InvalidArgument(format!(
                    "table property {DATA_SKIPPING_NUM_INDEXED_COLS} = {text:?} is not an integer"
                ))
            }),
        }
    }

    /// [`DATA_SKIPPING_STATS_COLUMNS`] as written: a column list whose syntax
    /// (backquotes, nesting) the stats writer parses against the schema.
    pub fn data_skipping_stats_columns(&self) -> Option<&'a str> {
        self.get(DATA_SKIPPING_STATS_COLUMNS)
    }

    /// [`UNIVERSAL_FORMAT_ENABLED_FORMATS`]: the formats listed, trimmed and
    /// lower-cased, empty entries dropped (empty when unset).
    pub fn universal_formats(&self) -> Vec<String> {
        self.get(UNIVERSAL_FORMAT_ENABLED_FORMATS)
            .map(|text| {
                text.split(',')
                    .map(|f| f.trim().to_ascii_lowercase())
                    .filter(|f| !f.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// [`REQUIRE_CHECKPOINT_PROTECTION_BEFORE`]: the version before which
    /// checkpoints are protected, when set.
    pub fn require_checkpoint_protection_before(&self) -> Result<Option<u64>> {
        self.parsed::<u64>(REQUIRE_CHECKPOINT_PROTECTION_BEFORE, "a version")
    }

    /// The names of the table's CHECK constraints
    /// (`delta.constraints.<name>`), sorted.
    pub fn check_constraints(&self) -> Vec<&'a str> {
        let mut names: Vec<&'a str> = self
            .configuration
            .keys()
            .filter_map(|k| k.strip_prefix(CONSTRAINTS_PREFIX))
            .collect();
        names.sort_unstable();
        names
    }

    /// The table's CHECK constraints: (name, SQL expression), sorted by name.
    pub fn check_constraint_expressions(&self) -> Vec<(&'a str, &'a str)> {
        let mut out: Vec<(&'a str, &'a str)> = self
            .configuration
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(CONSTRAINTS_PREFIX)?, v.as_deref()?)))
            .collect();
        out.sort_unstable();
        out
    }

    /// An integer property; an error names the key and the value.
    fn parsed<T: std::str::FromStr>(&self, key: &str, what: &str) -> Result<Option<T>> {
        self.get(key)
            .map(|text| {
                text.trim().parse::<T>().map_err(|_| {
                    Error::InvalidArgument(format!("table property {key} = {text:?} is not {what}"))
                })
            })
            .transpose()
    }
}

/// A boolean table property of `metadata`, read as Delta Spark does
/// (case-insensitive); see [`TableProperties::is_true`].
pub fn property_is_true(metadata: &Metadata, key: &str) -> bool {
    TableProperties::of(metadata).is_true(key)
}

/// Whether `key` is `true` in a table configuration (case-insensitive).
pub fn configured_true(configuration: &HashMap<String, Option<String>>, key: &str) -> bool {
    TableProperties::new(configuration).is_true(key)
}

/// The table's tombstone retention in milliseconds
/// ([`TableProperties::deleted_file_retention_ms`]).
pub fn deleted_file_retention_ms(metadata: &Metadata) -> Result<i64> {
    TableProperties::of(metadata).deleted_file_retention_ms()
}

/// Properties a new table with row tracking needs besides
/// [`ENABLE_ROW_TRACKING`] (the materialized column names, fresh).
pub fn row_tracking_properties() -> Vec<(String, String)> {
    let id = uuid::Uuid::new_v4();
    vec![
        (MATERIALIZED_ROW_ID.to_string(), format!("_row-id-col-{id}")),
        (
            MATERIALIZED_ROW_COMMIT_VERSION.to_string(),
            format!("_row-commit-version-col-{}", uuid::Uuid::new_v4()),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(pairs: &[(&str, &str)]) -> HashMap<String, Option<String>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect()
    }

    #[test]
    fn booleans_are_read_as_delta_spark_reads_them() {
        let c = conf(&[
            (ENABLE_DELETION_VECTORS, " TRUE "),
            (APPEND_ONLY, "yes"),
            (ENABLE_ROW_TRACKING, "false"),
        ]);
        let p = TableProperties::new(&c);
        assert!(p.enable_deletion_vectors());
        assert!(!p.append_only() && !p.enable_row_tracking());
        assert!(!p.enable_change_data_feed() && !p.enable_in_commit_timestamps());
        let null: HashMap<String, Option<String>> = [(ENABLE_CHANGE_DATA_FEED.into(), None)].into();
        assert!(!TableProperties::new(&null).enable_change_data_feed());
    }

    #[test]
    fn defaults_apply_when_unset() {
        let c = conf(&[]);
        let p = TableProperties::new(&c);
        assert_eq!(p.checkpoint_interval(), DEFAULT_CHECKPOINT_INTERVAL);
        assert_eq!(p.deleted_file_retention_ms().unwrap(), 604_800_000);
        assert_eq!(p.target_file_size().unwrap(), None);
        assert_eq!(
            p.data_skipping_num_indexed_cols().unwrap(),
            DEFAULT_NUM_INDEXED_COLS
        );
        assert_eq!(p.data_skipping_stats_columns(), None);
        assert_eq!(p.column_mapping_mode().unwrap(), ColumnMappingMode::None);
        assert_eq!(
            p.isolation_level().unwrap(),
            IsolationLevel::WriteSerializable
        );
        assert_eq!(p.in_commit_timestamp_enablement().unwrap(), None);
        assert_eq!(p.require_checkpoint_protection_before().unwrap(), None);
        assert_eq!(p.materialized_row_tracking_columns(), None);
        assert!(p.check_constraints().is_empty());
    }

    #[test]
    fn values_are_parsed() {
        let c = conf(&[
            (CHECKPOINT_INTERVAL, "3"),
            (DELETED_FILE_RETENTION_DURATION, "interval 2 days"),
            (TARGET_FILE_SIZE, " 1024 "),
            (DATA_SKIPPING_NUM_INDEXED_COLS, "-1"),
            (DATA_SKIPPING_STATS_COLUMNS, "a, `b`.c"),
            (COLUMN_MAPPING_MODE, "Name"),
            (ISOLATION_LEVEL, "Serializable"),
            (ICT_ENABLEMENT_VERSION, "4"),
            (ICT_ENABLEMENT_TIMESTAMP, "70"),
            (REQUIRE_CHECKPOINT_PROTECTION_BEFORE, "9"),
            (MATERIALIZED_ROW_ID, "rid"),
            (MATERIALIZED_ROW_COMMIT_VERSION, "rcv"),
            ("delta.constraints.z", "id > 0"),
            ("delta.constraints.a", "id < 9"),
        ]);
        let p = TableProperties::new(&c);
        assert_eq!(p.checkpoint_interval(), 3);
        assert_eq!(p.deleted_file_retention_ms().unwrap(), 172_800_000);
        assert_eq!(p.target_file_size().unwrap(), Some(1024));
        assert_eq!(p.data_skipping_num_indexed_cols().unwrap(), -1);
        assert_eq!(p.data_skipping_stats_columns(), Some("a, `b`.c"));
        assert_eq!(p.column_mapping_mode().unwrap(), ColumnMappingMode::Name);
        assert_eq!(p.isolation_level().unwrap(), IsolationLevel::Serializable);
        assert_eq!(p.in_commit_timestamp_enablement().unwrap(), Some((4, 70)));
        assert_eq!(p.require_checkpoint_protection_before().unwrap(), Some(9));
        assert_eq!(p.materialized_row_tracking_columns(), Some(("rid", "rcv")));
        assert_eq!(p.check_constraints(), vec!["a", "z"]);
    }

    #[test]
    fn bad_values_name_the_key_and_the_value() {
        // an unusable checkpoint interval falls back to the default
        for bad in ["0", "-3", "ten"] {
            let c = conf(&[(CHECKPOINT_INTERVAL, bad)]);
            assert_eq!(
                TableProperties::new(&c).checkpoint_interval(),
                DEFAULT_CHECKPOINT_INTERVAL
            );
        }
        let c = conf(&[
            (DELETED_FILE_RETENTION_DURATION, "interval 1 month"),
            (TARGET_FILE_SIZE, "0"),
            (DATA_SKIPPING_NUM_INDEXED_COLS, "many"),
            (COLUMN_MAPPING_MODE, "fancy"),
            (ISOLATION_LEVEL, "SnapshotIsolation"),
            (ICT_ENABLEMENT_VERSION, "v4"),
            (ICT_ENABLEMENT_TIMESTAMP, "70"),
            (REQUIRE_CHECKPOINT_PROTECTION_BEFORE, "soon"),
        ]);
        let p = TableProperties::new(&c);
        let cases: [(Result<()>, &str, &str); 7] = [
            (
                p.deleted_file_retention_ms().map(drop),
                DELETED_FILE_RETENTION_DURATION,
                "interval 1 month",
            ),
            (p.target_file_size().map(drop), TARGET_FILE_SIZE, "0"),
            (
                p.data_skipping_num_indexed_cols().map(drop),
                DATA_SKIPPING_NUM_INDEXED_COLS,
                "many",
            ),
            (
                p.column_mapping_mode().map(drop),
                COLUMN_MAPPING_MODE,
                "fancy",
            ),
            (
                p.isolation_level().map(drop),
                ISOLATION_LEVEL,
                "SnapshotIsolation",
            ),
            (
                p.in_commit_timestamp_enablement().map(drop),
                ICT_ENABLEMENT_VERSION,
                "v4",
            ),
            (
                p.require_checkpoint_protection_before().map(drop),
                REQUIRE_CHECKPOINT_PROTECTION_BEFORE,
                "soon",
            ),
        ];
        for (result, key, value) in cases {
            let e = result.unwrap_err().to_string();
            assert!(e.contains(key) && e.contains(&format!("{value:?}")), "{e}");
        }
    }

    #[test]
    fn row_tracking_column_names_are_fresh() {
        let a = row_tracking_properties();
        let b = row_tracking_properties();
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].0, MATERIALIZED_ROW_ID);
        assert_eq!(a[1].0, MATERIALIZED_ROW_COMMIT_VERSION);
        assert_ne!(a[0].1, b[0].1);
    }
}
