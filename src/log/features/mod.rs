//! Table features (PROTOCOL.md, "Table Features"): which ones deltadv reads,
//! which ones each write operation leaves intact, and the table-property
//! rules that decide whether a supported feature is in force (deletion
//! vectors are written only when the protocol has the feature AND
//! `delta.enableDeletionVectors` is `true`, as in Delta Spark). Pure: a
//! protocol, metadata and schema in, a verdict out.
//!
//! Every feature name Delta Spark 4.4 or deltalake 1.6 can put in a protocol
//! has an entry; an entry says what deltadv does with it, and a name with no
//! entry is refused by every operation.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | the feature table (names, reader/writer kinds, per-operation verdicts), version limits, the read and write checks (`check_read`, `check_write`, `plan_delete`, `plan_rewrite`, `check_append`) |
//! | [`clustering`] | liquid clustering: the `delta.clustering` domain, `CLUSTER BY` on create, ZCube tags of clustered files |
//! | [`iceberg`] | the writer rules of active `icebergCompatV1/V2/V3` (column mapping, row tracking, no DVs before V3, ...), checked by `check_write`, and what a new table asking for one gets |
//! | [`properties`] | every `delta.*` key (table properties, column metadata, domains), with typed accessors ([`properties::TableProperties`]) |
//! | [`protocol`] | protocols built or changed by a write: a new table's, merged (raised), with deletion vectors added, a feature dropped (downgrade) |
//! | [`type_widening`] | the type changes Delta allows and the `delta.typeChanges` history they leave on columns |
//!
//! Dependencies run one way: `properties` imports no other `log` module but
//! `actions` and `interval`; `mod.rs` and the other files import `properties`
//! and `schema`; nothing below (`schema`, `cdf`) imports the feature table.

use super::actions::{Metadata, Protocol};
use super::schema::StructType;
use crate::error::{Error, Result};
use properties::{TableProperties, APPEND_ONLY, ENABLE_CHANGE_DATA_FEED};

pub mod clustering;
pub mod iceberg;
pub mod properties;
pub mod protocol;
pub mod type_widening;

// The paths these had when this module was one file.
pub use properties::{
    configured_true, property_is_true, row_tracking_properties, ENABLE_DELETION_VECTORS,
    ENABLE_IN_COMMIT_TIMESTAMPS, ENABLE_ROW_TRACKING, ICT_ENABLEMENT_TIMESTAMP,
    ICT_ENABLEMENT_VERSION, MATERIALIZED_ROW_COMMIT_VERSION, MATERIALIZED_ROW_ID,
    REQUIRE_CHECKPOINT_PROTECTION_BEFORE, TYPE_CHANGES_KEY,
};
pub use protocol::{
    drop_reader_writer_feature, merge_protocols, name_row_tracking_columns, new_table_protocol,
    with_deletion_vectors, with_feature,
};
pub use type_widening::{
    bounds_comparable, check_type_changes, type_change_supported, type_changes, TypeChange,
};

/// Highest reader version deltadv implements.
pub const MAX_READER_VERSION: i32 = 3;
/// Highest writer version deltadv implements.
pub const MAX_WRITER_VERSION: i32 = 7;
/// Reader version from which `readerFeatures` lists the reader features.
const READER_FEATURES_VERSION: i32 = 3;
/// Writer version from which `writerFeatures` lists the writer features.
const WRITER_FEATURES_VERSION: i32 = 7;

/// A write deltadv performs; features are judged per operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOperation {
    /// DELETE recording deletion vectors: no data file is rewritten.
    DeleteWithDeletionVectors,
    /// DELETE rewriting each touched data file without its deleted rows.
    DeleteCopyOnWrite,
    /// Adding new data files (an append, or the data of a new table).
    Append,
    /// UPDATE or MERGE: old copies of changed rows marked deleted (by DVs,
    /// or by rewriting their files), new versions written to new files.
    RewriteRows,
    /// REORG PURGE / OPTIMIZE: files rewritten without their deleted rows
    /// (dataChange=false); no row changes.
    Compact,
}

impl WriteOperation {
    fn describe(self) -> &'static str {
        match self {
            WriteOperation::DeleteWithDeletionVectors => "DELETE",
            WriteOperation::DeleteCopyOnWrite => "copy-on-write DELETE",
            WriteOperation::Append => "append",
            WriteOperation::RewriteRows => "UPDATE/MERGE",
            WriteOperation::Compact => "REORG/OPTIMIZE",
        }
    }
}

/// Whether deltadv can do something with a table that has a feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Yes,
    /// No, because …
    No(&'static str),
}
use Verdict::{No, Yes};

/// What deltadv does with one table feature.
struct Feature {
    name: &'static str,
    /// Listed in `readerFeatures` as well as `writerFeatures`.
    reader_writer: bool,
    /// Reading (meaningful for reader-writer features only).
    read: Verdict,
    /// DELETE with deletion vectors.
    delete_dvs: Verdict,
    /// DELETE by copy-on-write.
    delete_cow: Verdict,
    /// Appending new files.
    append: Verdict,
}

/// Appends leave a feature intact exactly when a DELETE with DVs does; the
/// schema-level rules of appends (constraints, generated and identity
/// columns) are in [`check_append`].
const fn writer(name: &'static str, delete_dvs: Verdict, delete_cow: Verdict) -> Feature {
    Feature {
        name,
        reader_writer: false,
        read: Yes,
        delete_dvs,
        delete_cow,
        append: delete_dvs,
    }
}

const fn reader_writer(
    name: &'static str,
    read: Verdict,
    delete_dvs: Verdict,
    delete_cow: Verdict,
) -> Feature {
    Feature {
        name,
        reader_writer: true,
        read,
        delete_dvs,
        delete_cow,
        append: delete_dvs,
    }
}

const NO_COORDINATOR: Verdict =
    No("the table's commits go through a commit coordinator, which deltadv does not implement");
const NO_CATALOG: Verdict =
    No("the table's commits are owned by a catalog, which deltadv does not talk to");
const NO_GEO: Verdict = No("deltadv does not read geometry/geography columns");
const NO_REDIRECT: Verdict =
    No("table redirection is a Delta Spark preview deltadv does not follow");
const NO_ADAPTIVE: Verdict = No("adaptive metadata is a Delta Spark preview deltadv does not read");
const NO_NANOS: Verdict = No("deltadv does not read nanosecond timestamps");
const NO_SHREDDED_REWRITE: Verdict = No(
    "rewriting files would have to carry shredded variants over, which deltadv does not do \
     (DELETE with deletion vectors does not rewrite files)",
);

/// Every feature deltadv knows, in PROTOCOL.md's order, then the newer and
/// the implementation-specific ones.
static FEATURES: &[Feature] = &[
    // Writer-only features. Enabling properties that DELETE cannot honour
    // (delta.appendOnly, delta.enableChangeDataFeed …) are checked apart, in
    // PROPERTY_RULES: a feature merely supported changes nothing.
    writer("appendOnly", Yes, Yes),
    // Rows are removed, never changed or added: constraints, generated and
    // identity values, defaults still hold for what is left.
    writer("invariants", Yes, Yes),
    writer("checkConstraints", Yes, Yes),
    writer("generatedColumns", Yes, Yes),
    writer("allowColumnDefaults", Yes, Yes),
    writer("changeDataFeed", Yes, Yes),
    writer("identityColumns", Yes, Yes),
    // The transaction assigns row ids to new files and keeps those of files
    // re-added with a new DV (write::transaction); UPDATE/MERGE write the
    // materialized row-id column of updated rows (write::changes), naming
    // the materialized columns in the same commit when the table does not
    // (protocol::name_row_tracking_columns). A copy-on-write DELETE keeps
    // ids in those columns: refused while delta.enableRowTracking is true
    // and they are not named (check_write), allowed when the feature is
    // merely supported; DELETE and OPTIMIZE/PURGE name them in their commit
    // first, as UPDATE/MERGE (write::delete, write::optimize).
    writer("rowTracking", Yes, Yes),
    // Domains are left as they are.
    writer("domainMetadata", Yes, Yes),
    // Their writer rules (column mapping, no DVs, ...) are checked apart,
    // in iceberg::check.
    writer("icebergCompatV1", Yes, Yes),
    writer("icebergCompatV2", Yes, Yes),
    writer("icebergCompatV3", Yes, Yes),
    // Liquid clustering: plain writes leave the `delta.clustering` domain as
    // it is and add unmarked files, as Delta Spark's; OPTIMIZE clusters
    // (clustering, write::cluster).
    writer("clustering", Yes, Yes),
    // The transaction writes commitInfo first with a monotonic inCommitTimestamp.
    writer("inCommitTimestamp", Yes, Yes),
    // deltadv never removes checkpoints or log files.
    writer("checkpointProtection", Yes, Yes),
    // The data writer writes partition values into every new file
    // (materialize_partition_columns); copy-on-write keeps every column of
    // the file it copies.
    writer("materializePartitionColumns", Yes, Yes),
    writer("coordinatedCommits-preview", NO_COORDINATOR, NO_COORDINATOR),
    writer("redirectWriterOnly-preview", NO_REDIRECT, NO_REDIRECT),
    // Reader-writer features.
    reader_writer("deletionVectors", Yes, Yes, Yes),
    // Copy-on-write keeps the file's physical names and field ids.
    reader_writer("columnMapping", Yes, Yes, Yes),
    reader_writer("timestampNtz", Yes, Yes, Yes),
    // A name some older writers used for timestampNtz (kernel-rs accepts it).
    reader_writer("timestampWithoutTimezone", Yes, Yes, Yes),
    // deltadv writes classic checkpoints only, and none on v2 tables.
    reader_writer("v2Checkpoint", Yes, Yes, Yes),
    reader_writer("vacuumProtocolCheck", Yes, Yes, Yes),
    // Variants are read as their physical struct<value, metadata>; copy-on-write
    // copies those binaries as they are.
    reader_writer("variantType", Yes, Yes, Yes),
    reader_writer("variantType-preview", Yes, Yes, Yes),
    // Files with unshredded variants are read; a shredded one is refused when
    // its variant column is read (see scan::conform).
    reader_writer("variantShredding", Yes, Yes, NO_SHREDDED_REWRITE),
    reader_writer("variantShredding-preview", Yes, Yes, NO_SHREDDED_REWRITE),
    // Files written before a type change are cast to the table's type on read;
    // copy-on-write writes the file back with the type it was written with,
    // which the column's delta.typeChanges already covers.
    reader_writer("typeWidening", Yes, Yes, Yes),
    reader_writer("typeWidening-preview", Yes, Yes, Yes),
    reader_writer("catalogManaged", NO_CATALOG, NO_CATALOG, NO_CATALOG),
    reader_writer("catalogOwned-preview", NO_CATALOG, NO_CATALOG, NO_CATALOG),
    reader_writer("geospatial", NO_GEO, NO_GEO, NO_GEO),
    reader_writer("geospatial-dev", NO_GEO, NO_GEO, NO_GEO),
    reader_writer(
        "adaptiveMetadata-preview",
        NO_ADAPTIVE,
        NO_ADAPTIVE,
        NO_ADAPTIVE,
    ),
    reader_writer(
        "redirectReaderWriter-preview",
        NO_REDIRECT,
        NO_REDIRECT,
        NO_REDIRECT,
    ),
    // deltalake's (with nanosecond timestamps built in).
    reader_writer("timestampNanos", NO_NANOS, NO_NANOS, NO_NANOS),
];

/// Table properties that switch on behaviour a deltadv write does not
/// implement: the write is refused while the property is `true`, whatever
/// the protocol. (property, why, operations it blocks)
const PROPERTY_RULES: &[(&str, &str, &[WriteOperation])] = &[
    (
        APPEND_ONLY,
        "the table is append-only",
        &[
            WriteOperation::DeleteWithDeletionVectors,
            WriteOperation::DeleteCopyOnWrite,
            WriteOperation::RewriteRows,
        ],
    ),
    // With deletion vectors the feed needs no extra file for a DELETE (readers
    // derive it from the DV difference) and UPDATE/MERGE write `cdc` files;
    // a copy-on-write rewrite would need `cdc` files for its deleted rows,
    // which deltadv does not write.
    (
        ENABLE_CHANGE_DATA_FEED,
        "the table has the change data feed enabled, and deltadv writes its change files \
         only with deletion vectors (enable them: delta.enableDeletionVectors=true)",
        &[WriteOperation::DeleteCopyOnWrite],
    ),
];

fn feature(name: &str) -> Option<&'static Feature> {
    FEATURES.iter().find(|f| f.name == name)
}

/// The canonical spelling of the table property `key`, matched without
/// regard to case (Spark lower-cases a Python data source's option keys):
/// one of Delta Spark's user-settable properties
/// ([`properties::USER_TABLE_PROPERTIES`]) or `delta.feature.<name>` of a
/// known feature. `None` for a key Delta does not know.
pub fn canonical_table_property(key: &str) -> Option<String> {
    if let Some(p) = properties::USER_TABLE_PROPERTIES
        .iter()
        .find(|p| p.eq_ignore_ascii_case(key))
    {
        return Some(p.to_string());
    }
    let prefix = properties::FEATURE_PREFIX;
    let name = key
        .get(..prefix.len())
        .filter(|p| p.eq_ignore_ascii_case(prefix))
        .and_then(|_| key.get(prefix.len()..))?;
    FEATURES
        .iter()
        .find(|f| f.name.eq_ignore_ascii_case(name))
        .map(|f| format!("{prefix}{}", f.name))
}

/// The features a new table's `delta.feature.<name> = supported` properties
/// ask for, taken out of `configuration` (Delta keeps them in the protocol
/// only), each with whether it is a reader-writer feature. An unknown
/// feature, or a value other than `supported`, is an error naming the key.
pub fn take_feature_requests(
    configuration: &mut std::collections::HashMap<String, Option<String>>,
) -> Result<Vec<(&'static str, bool)>> {
    let prefix = properties::FEATURE_PREFIX;
    let keys: Vec<String> = configuration
        .keys()
        .filter(|k| k.starts_with(prefix))
        .cloned()
        .collect();
    let mut requested = Vec::new();
    for key in keys {
        let value = configuration.remove(&key).flatten().unwrap_or_default();
        let name = &key[prefix.len()..];
        let f = feature(name).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "table property {key}: unknown table feature {name:?}"
            ))
        })?;
        if !value.eq_ignore_ascii_case("supported") {
            return Err(Error::InvalidArgument(format!(
                "table property {key}: expected \"supported\", got {value:?}"
            )));
        }
        requested.push((f.name, f.reader_writer));
    }
    requested.sort_unstable();
    Ok(requested)
}

/// The reader features deltadv reads tables with, in a stable order.
pub fn supported_reader_features() -> Vec<&'static str> {
    FEATURES
        .iter()
        .filter(|f| f.reader_writer && f.read == Yes)
        .map(|f| f.name)
        .collect()
}

/// The writer features `op` leaves intact.
pub fn supported_writer_features(op: WriteOperation) -> Vec<&'static str> {
    FEATURES
        .iter()
        .filter(|f| verdict(f, op) == Yes)
        .map(|f| f.name)
        .collect()
}

fn verdict(f: &Feature, op: WriteOperation) -> Verdict {
    match op {
        WriteOperation::DeleteWithDeletionVectors => f.delete_dvs,
        WriteOperation::DeleteCopyOnWrite => f.delete_cow,
        WriteOperation::Append => f.append,
        // New files as an append writes them, old rows as a DELETE removes
        // them (a copy-on-write rewrite is judged apart).
        WriteOperation::RewriteRows => match (f.append, f.delete_dvs) {
            (Yes, Yes) => Yes,
            (No(why), _) | (_, No(why)) => No(why),
        },
        // Rows are copied into new files as they are, as a copy-on-write
        // rewrite copies them.
        WriteOperation::Compact => f.delete_cow,
    }
}

fn reader_features(p: &Protocol) -> impl Iterator<Item = &str> {
    let listed = p.min_reader_version >= READER_FEATURES_VERSION;
    p.reader_features
        .iter()
        .flatten()
        .filter(move |_| listed)
        .map(String::as_str)
}

fn writer_features(p: &Protocol) -> impl Iterator<Item = &str> {
    let listed = p.min_writer_version >= WRITER_FEATURES_VERSION;
    p.writer_features
        .iter()
        .flatten()
        .filter(move |_| listed)
        .map(String::as_str)
}

/// Whether the protocol supports `name` (in `writerFeatures`, and for a
/// reader-writer feature in `readerFeatures` too).
pub fn is_supported(p: &Protocol, name: &str) -> bool {
    let reader_writer = feature(name).is_none_or(|f| f.reader_writer);
    writer_features(p).any(|f| f == name)
        && (!reader_writer || reader_features(p).any(|f| f == name))
}

/// Refuse a table deltadv cannot read, naming the reader version or feature.
pub fn check_read(p: &Protocol) -> Result<()> {
    if p.min_reader_version > MAX_READER_VERSION || p.min_reader_version < 1 {
        return Err(Error::Unsupported(format!(
            "table requires reader version {}; deltadv reads versions 1 to {MAX_READER_VERSION}",
            p.min_reader_version
        )));
    }
    for name in reader_features(p) {
        let why = match feature(name) {
            Some(f) if f.reader_writer && f.read == Yes => continue,
            Some(Feature { read: No(why), .. }) => *why,
            _ => "it is unknown to deltadv",
        };
        return Err(Error::Unsupported(format!(
            "table requires reader feature {name:?}, which deltadv does not support: {why} \
             (supported: {})",
            supported_reader_features().join(", ")
        )));
    }
    Ok(())
}

/// Refuse a write `op` could not do without breaking a feature or property
/// of the table, naming it. Reading must already have been checked.
pub fn check_write(p: &Protocol, metadata: &Metadata, op: WriteOperation) -> Result<()> {
    if p.min_writer_version > MAX_WRITER_VERSION || p.min_writer_version < 1 {
        return Err(Error::Unsupported(format!(
            "table requires writer version {}; deltadv writes versions 1 to {MAX_WRITER_VERSION}",
            p.min_writer_version
        )));
    }
    for name in writer_features(p) {
        let why = match feature(name).map(|f| verdict(f, op)) {
            Some(Yes) => continue,
            Some(No(why)) => why,
            None => "it is unknown to deltadv",
        };
        return Err(Error::Unsupported(format!(
            "table requires writer feature {name:?}, which deltadv's {} does not maintain: {why}",
            op.describe()
        )));
    }
    for (key, why, blocked) in PROPERTY_RULES {
        if blocked.contains(&op) && property_is_true(metadata, key) {
            return Err(Error::Unsupported(format!(
                "{} is not allowed: {why} ({key}=true)",
                op.describe()
            )));
        }
    }
    // A copy-on-write rewrite keeps the copied rows' ids and commit versions
    // in the materialized row tracking columns; without their names it
    // would give them new ones.
    let props = TableProperties::of(metadata);
    if op == WriteOperation::DeleteCopyOnWrite
        && props.enable_row_tracking()
        && props.materialized_row_tracking_columns().is_none()
    {
        return Err(Error::Unsupported(format!(
            "{} is not allowed: the table has row tracking enabled ({ENABLE_ROW_TRACKING}=true) \
             but does not name the columns ({MATERIALIZED_ROW_ID} / \
             {MATERIALIZED_ROW_COMMIT_VERSION}) a rewrite keeps row ids in, so the rows it \
             copies would get new row ids",
            op.describe()
        )));
    }
    iceberg::check(p, metadata, op)
}

/// Whether new data files of a table hold its partition columns too (as
/// Delta Spark's `writeFiles` decides it, `writePartitionColumns`): when an
/// Iceberg compatibility version is enabled or the protocol supports
/// `materializePartitionColumns`. For a table about to be created
/// (`protocol` None), the feature counts when its configuration asks for
/// it (`delta.feature.materializePartitionColumns`).
pub fn materialize_partition_columns(
    protocol: Option<&Protocol>,
    configuration: &std::collections::HashMap<String, Option<String>>,
) -> bool {
    const FEATURE: &str = "materializePartitionColumns";
    let feature = match protocol {
        Some(p) => is_supported(p, FEATURE),
        None => configuration.contains_key(&format!("{}{FEATURE}", properties::FEATURE_PREFIX)),
    };
    feature || !iceberg::enabled_versions(configuration).is_empty()
}

/// Refuse a compaction (REORG PURGE, OPTIMIZE) deltadv could not do without
/// breaking the table's features or properties, naming what stands in the way.
pub fn check_compact(p: &Protocol, metadata: &Metadata) -> Result<()> {
    check_write(p, metadata, WriteOperation::Compact)
}

/// Refuse an append deltadv could not do without breaking the table's
/// features or properties, naming what stands in the way. The rules on the
/// rows themselves (CHECK constraints, invariants, NOT NULL, generated,
/// default and identity columns) are the data writer's
/// (`write::data::rules`): checked and computed on every row written.
pub fn check_append(p: &Protocol, metadata: &Metadata, _schema: &StructType) -> Result<()> {
    check_write(p, metadata, WriteOperation::Append)
}

/// How an UPDATE or MERGE on this table is to be written: `Ok(true)` with
/// deletion vectors, `Ok(false)` by rewriting the touched files (only when
/// `allow_copy_on_write`). DELETE's rules, judged on the metadata the
/// UPDATE or MERGE commits: on a table tracking rows, the materialized row
/// tracking columns named ([`name_row_tracking_columns`]), so a rewrite
/// keeps row ids; the new rows follow the table's row rules as appended
/// rows do (see [`check_append`]).
pub fn plan_rewrite(
    p: &Protocol,
    metadata: &Metadata,
    _schema: &StructType,
    allow_copy_on_write: bool,
) -> Result<bool> {
    let mut named = metadata.clone();
    name_row_tracking_columns(p, metadata, &mut named);
    check_write(p, &named, WriteOperation::RewriteRows)?;
    plan_delete(p, &named, allow_copy_on_write)
}

/// Delta Spark's rule: deletion vectors may be written when the protocol
/// supports the `deletionVectors` feature AND `delta.enableDeletionVectors`
/// is `true`. (Either alone is not enough: Delta Spark rewrites files then.)
pub fn deletion_vectors_writable(p: &Protocol, metadata: &Metadata) -> bool {
    is_supported(p, "deletionVectors") && TableProperties::of(metadata).enable_deletion_vectors()
}

/// How a DELETE on this table is to be written: `Ok(true)` with deletion
/// vectors, `Ok(false)` by copy-on-write (only when `allow_copy_on_write`).
/// Errors say which feature, property or rule stands in the way.
pub fn plan_delete(p: &Protocol, metadata: &Metadata, allow_copy_on_write: bool) -> Result<bool> {
    if deletion_vectors_writable(p, metadata) {
        check_write(p, metadata, WriteOperation::DeleteWithDeletionVectors)?;
        return Ok(true);
    }
    if allow_copy_on_write {
        check_write(p, metadata, WriteOperation::DeleteCopyOnWrite)?;
        return Ok(false);
    }
    // Report what the table would need, and a blocking feature first, so the
    // caller is not sent to enable DVs on a table DELETE refuses anyway.
    check_write(p, metadata, WriteOperation::DeleteWithDeletionVectors)?;
    let why = if is_supported(p, "deletionVectors") {
        let value = match metadata.property(ENABLE_DELETION_VECTORS) {
            Some(v) => format!("is {v:?}"),
            None => "is not set".to_string(),
        };
        format!(
            "the protocol supports the deletionVectors feature but {ENABLE_DELETION_VECTORS} \
             {value}; like Delta Spark, deltadv writes deletion vectors only when it is true"
        )
    } else {
        "the protocol lacks the deletionVectors feature (reader 3 / writer 7 with \
         deletionVectors in both feature lists)"
            .to_string()
    };
    Err(Error::Unsupported(format!(
        "table does not allow deletion vectors: {why}. Enable them first \
         ({ENABLE_DELETION_VECTORS}=true, e.g. deltadv.write.enable_deletion_vectors) or allow \
         copy-on-write rewrites (allow_copy_on_write=True)"
    )))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::log::schema::{DataType, StructField};

    #[test]
    fn partition_columns_are_materialized_for_iceberg_and_the_feature() {
        let conf = |props: &[(&str, &str)]| metadata(props).configuration;
        let plain = protocol(1, 2, &[], &[]);
        assert!(!materialize_partition_columns(Some(&plain), &conf(&[])));
        for v in ["1", "2", "3"] {
            let key = format!("delta.enableIcebergCompatV{v}");
            assert!(materialize_partition_columns(
                Some(&plain),
                &conf(&[(&key, "true")])
            ));
            assert!(materialize_partition_columns(
                None,
                &conf(&[(&key, "true")])
            ));
        }
        let feature = protocol(1, 7, &[], &["materializePartitionColumns"]);
        assert!(materialize_partition_columns(Some(&feature), &conf(&[])));
        assert!(materialize_partition_columns(
            None,
            &conf(&[("delta.feature.materializePartitionColumns", "supported")])
        ));
    }

    #[test]
    fn table_properties_are_named_as_delta_spells_them() {
        assert_eq!(
            canonical_table_property("delta.enabledeletionvectors").as_deref(),
            Some("delta.enableDeletionVectors")
        );
        assert_eq!(
            canonical_table_property("DELTA.FEATURE.ALLOWCOLUMNDEFAULTS").as_deref(),
            Some("delta.feature.allowColumnDefaults")
        );
        assert_eq!(canonical_table_property("delta.nosuchthing"), None);
        assert_eq!(canonical_table_property("delta.feature.nosuch"), None);
        assert_eq!(canonical_table_property("delta.feature."), None);
    }

    #[test]
    fn feature_requests_leave_the_configuration_for_the_protocol() {
        let mut conf: HashMap<String, Option<String>> = [
            ("delta.feature.allowColumnDefaults", "supported"),
            ("delta.feature.timestampNtz", "Supported"),
            ("delta.appendOnly", "false"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), Some(v.to_string())))
        .collect();
        let requested = take_feature_requests(&mut conf).unwrap();
        assert_eq!(
            requested,
            vec![("allowColumnDefaults", false), ("timestampNtz", true)]
        );
        assert_eq!(conf.keys().collect::<Vec<_>>(), vec!["delta.appendOnly"]);
        let mut p = protocol(1, 2, &[], &[]);
        for (name, rw) in requested {
            p = with_feature(&p, name, rw);
        }
        assert_eq!((p.min_reader_version, p.min_writer_version), (3, 7));
        assert_eq!(p.reader_features, Some(vec!["timestampNtz".to_string()]));
        let writers = p.writer_features.unwrap_or_default();
        for f in [
            "appendOnly",
            "invariants",
            "allowColumnDefaults",
            "timestampNtz",
        ] {
            assert!(writers.iter().any(|w| w == f), "{f} in {writers:?}");
        }

        for (key, value, says) in [
            ("delta.feature.nosuch", "supported", "unknown table feature"),
            (
                "delta.feature.timestampNtz",
                "enabled",
                "expected \"supported\"",
            ),
        ] {
            let mut conf = HashMap::from([(key.to_string(), Some(value.to_string()))]);
            let err = take_feature_requests(&mut conf).unwrap_err().to_string();
            assert!(err.contains(key) && err.contains(says), "{err}");
        }
    }

    #[test]
    fn appends_leave_row_rules_to_the_writer() {
        let p = protocol(
            1,
            7,
            &[],
            &[
                "appendOnly",
                "invariants",
                "checkConstraints",
                "generatedColumns",
                "identityColumns",
                "allowColumnDefaults",
            ],
        );
        let plain = StructType::new(vec![StructField::new("id", DataType::Long, true)]);
        // append-only and CDF tables take appends; constraints are the
        // writer's to check
        check_append(
            &p,
            &metadata(&[
                ("delta.appendOnly", "true"),
                ("delta.enableChangeDataFeed", "true"),
                ("delta.constraints.positive", "id > 0"),
            ]),
            &plain,
        )
        .unwrap();
        // clustered tables take appends (the domain is left as it is)
        check_append(
            &protocol(1, 7, &[], &["domainMetadata", "clustering"]),
            &metadata(&[]),
            &plain,
        )
        .unwrap();
    }

    pub(super) fn protocol(r: i32, w: i32, readers: &[&str], writers: &[&str]) -> Protocol {
        let list = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect());
        Protocol {
            min_reader_version: r,
            min_writer_version: w,
            reader_features: if r >= 3 { list(readers) } else { None },
            writer_features: if w >= 7 { list(writers) } else { None },
        }
    }

    pub(super) fn metadata(props: &[(&str, &str)]) -> Metadata {
        Metadata {
            id: "t".into(),
            name: None,
            description: None,
            format: Default::default(),
            schema_string: r#"{"type":"struct","fields":[]}"#.into(),
            partition_columns: vec![],
            configuration: props
                .iter()
                .map(|(k, v)| (k.to_string(), Some(v.to_string())))
                .collect::<HashMap<_, _>>(),
            created_time: None,
        }
    }

    pub(super) fn err(r: Result<impl std::fmt::Debug>) -> String {
        match r {
            Err(e) => e.to_string(),
            Ok(v) => panic!("expected an error, got {v:?}"),
        }
    }

    /// What deltalake 1.6.6's write_deltalake(configuration=
    /// {"delta.enableDeletionVectors": "true"}) records.
    pub(super) fn deltalake_dv_table() -> Protocol {
        protocol(
            3,
            7,
            &["variantType", "deletionVectors"],
            &["variantType", "appendOnly", "invariants", "deletionVectors"],
        )
    }

    #[test]
    fn reads_the_features_delta_spark_and_deltalake_write() {
        check_read(&deltalake_dv_table()).unwrap();
        for f in [
            "deletionVectors",
            "columnMapping",
            "timestampNtz",
            "timestampWithoutTimezone",
            "v2Checkpoint",
            "vacuumProtocolCheck",
            "variantType",
            "variantType-preview",
            "variantShredding",
            "variantShredding-preview",
            "typeWidening",
            "typeWidening-preview",
        ] {
            check_read(&protocol(3, 7, &[f], &[f])).unwrap();
            assert!(supported_reader_features().contains(&f), "{f}");
        }
        // legacy protocols: reader 2 means column mapping
        check_read(&protocol(2, 5, &[], &[])).unwrap();
        check_read(&protocol(1, 2, &[], &[])).unwrap();
    }

    #[test]
    fn refuses_reader_features_naming_them_and_why() {
        for (f, why) in [
            ("catalogManaged", "catalog"),
            ("catalogOwned-preview", "catalog"),
            ("geospatial", "geometry"),
            ("timestampNanos", "nanosecond"),
            ("adaptiveMetadata-preview", "adaptive"),
            ("redirectReaderWriter-preview", "redirection"),
            ("someFutureFeature", "unknown to deltadv"),
        ] {
            let e = err(check_read(&protocol(3, 7, &["deletionVectors", f], &[f])));
            assert!(e.contains(&format!("reader feature \"{f}\"")), "{e}");
            assert!(e.contains(why), "{e}");
            assert!(e.contains("supported: deletionVectors"), "{e}");
        }
        let e = err(check_read(&protocol(4, 7, &[], &[])));
        assert!(e.contains("reader version 4"), "{e}");
        // writer-only features do not matter to readers
        check_read(&protocol(
            3,
            7,
            &[],
            &["rowTracking", "someFutureWriterFeature"],
        ))
        .unwrap();
    }

    #[test]
    fn delete_accepts_variant_and_type_widening() {
        let on = metadata(&[(ENABLE_DELETION_VECTORS, "true")]);
        assert!(plan_delete(&deltalake_dv_table(), &on, false).unwrap());
        for f in [
            "typeWidening",
            "typeWidening-preview",
            "variantType-preview",
        ] {
            let p = protocol(3, 7, &["deletionVectors", f], &["deletionVectors", f]);
            assert!(plan_delete(&p, &on, false).unwrap(), "{f}");
            check_write(&p, &on, WriteOperation::DeleteCopyOnWrite).unwrap();
        }
        // shredded variants: DVs fine, copy-on-write refused
        let p = protocol(
            3,
            7,
            &["deletionVectors", "variantType", "variantShredding"],
            &["deletionVectors", "variantType", "variantShredding"],
        );
        assert!(plan_delete(&p, &on, true).unwrap());
        let e = err(check_write(&p, &on, WriteOperation::DeleteCopyOnWrite));
        assert!(
            e.contains("\"variantShredding\"") && e.contains("copy-on-write"),
            "{e}"
        );
        let off = metadata(&[]);
        let e = err(plan_delete(&p, &off, true));
        assert!(e.contains("shredded"), "{e}");
    }

    #[test]
    fn delete_refuses_writer_features_it_cannot_keep() {
        let on = metadata(&[(ENABLE_DELETION_VECTORS, "true")]);
        for f in ["coordinatedCommits-preview", "someFutureWriterFeature"] {
            let p = protocol(3, 7, &["deletionVectors"], &["deletionVectors", f]);
            let e = err(plan_delete(&p, &on, true));
            assert!(e.contains(&format!("writer feature \"{f}\"")), "{e}");
        }
        let e = err(plan_delete(&protocol(3, 8, &[], &[]), &on, true));
        assert!(e.contains("writer version 8"), "{e}");
    }

    #[test]
    fn property_rules_refuse_whatever_the_protocol() {
        for key in ["delta.appendOnly", "delta.enableChangeDataFeed"] {
            let m = metadata(&[(ENABLE_DELETION_VECTORS, "true"), (key, "TRUE")]);
            let e = err(plan_delete(&protocol(1, 4, &[], &[]), &m, true));
            assert!(e.contains(key), "{e}");
            // false: no objection
            let m = metadata(&[(ENABLE_DELETION_VECTORS, "true"), (key, "false")]);
            plan_delete(&deltalake_dv_table(), &m, false).unwrap();
        }
        // Append-only refuses every delete; the change data feed only a
        // copy-on-write one (with DVs the feed is derived or written).
        let m = metadata(&[
            (ENABLE_DELETION_VECTORS, "true"),
            ("delta.appendOnly", "TRUE"),
        ]);
        let e = err(plan_delete(&deltalake_dv_table(), &m, false));
        assert!(e.contains("delta.appendOnly"), "{e}");
        let m = metadata(&[
            (ENABLE_DELETION_VECTORS, "true"),
            ("delta.enableChangeDataFeed", "TRUE"),
        ]);
        assert!(plan_delete(&deltalake_dv_table(), &m, false).unwrap());
        let e = err(plan_delete(&protocol(1, 4, &[], &[]), &m, true));
        assert!(e.contains("only with deletion vectors"), "{e}");
        // Row tracking: DVs keep row ids, a rewrite would not.
        let p = protocol(
            3,
            7,
            &["deletionVectors"],
            &[
                "deletionVectors",
                "domainMetadata",
                "rowTracking",
                "inCommitTimestamp",
            ],
        );
        let m = metadata(&[
            (ENABLE_DELETION_VECTORS, "true"),
            (ENABLE_ROW_TRACKING, "true"),
            (ENABLE_IN_COMMIT_TIMESTAMPS, "true"),
        ]);
        assert!(plan_delete(&p, &m, false).unwrap());
        let p_cow = protocol(1, 7, &[], &["domainMetadata", "rowTracking"]);
        let e = err(plan_delete(
            &p_cow,
            &metadata(&[(ENABLE_ROW_TRACKING, "true")]),
            true,
        ));
        assert!(
            e.contains(ENABLE_ROW_TRACKING) && e.contains("row ids"),
            "{e}"
        );
        // supported but not enabled: a rewrite may assign new ids
        assert!(!plan_delete(&p_cow, &metadata(&[]), true).unwrap());
        // UPDATE/MERGE name the columns in their commit: copy-on-write then
        // keeps the ids.
        let enabled = metadata(&[(ENABLE_ROW_TRACKING, "true")]);
        assert!(!plan_rewrite(&p_cow, &enabled, &StructType::default(), true).unwrap());
    }

    #[test]
    fn dvs_need_the_feature_and_the_property() {
        let p = deltalake_dv_table();
        assert!(deletion_vectors_writable(
            &p,
            &metadata(&[(ENABLE_DELETION_VECTORS, "True")])
        ));
        for props in [
            vec![],
            vec![(ENABLE_DELETION_VECTORS, "false")],
            vec![(ENABLE_DELETION_VECTORS, "yes")],
        ] {
            let m = metadata(&props);
            assert!(!deletion_vectors_writable(&p, &m));
            let e = err(plan_delete(&p, &m, false));
            assert!(e.contains("does not allow deletion vectors"), "{e}");
            assert!(e.contains("supports the deletionVectors feature"), "{e}");
            assert!(e.contains("delta.enableDeletionVectors"), "{e}");
            assert!(e.contains("allow_copy_on_write=True"), "{e}");
            // copy-on-write when allowed, as Delta Spark does
            assert!(!plan_delete(&p, &m, true).unwrap());
        }
        // the property without the feature
        let m = metadata(&[(ENABLE_DELETION_VECTORS, "true")]);
        for p in [
            protocol(1, 2, &[], &[]),
            protocol(3, 7, &[], &["deletionVectors"]), // writer list only
            protocol(3, 7, &["deletionVectors"], &[]),
        ] {
            assert!(!deletion_vectors_writable(&p, &m));
            let e = err(plan_delete(&p, &m, false));
            assert!(e.contains("lacks the deletionVectors feature"), "{e}");
            assert!(!plan_delete(&p, &m, true).unwrap());
        }
    }
}
