//! Iceberg compatibility (PROTOCOL.md "Iceberg Compatibility V1/V2", and
//! Delta's `protocol_rfcs/iceberg-compat-v3.md` for V3): the writer rules a
//! table with `icebergCompatV1`, `icebergCompatV2` or `icebergCompatV3`
//! active (feature supported and `delta.enableIcebergCompatV{1,2,3}=true`)
//! must keep, checked before every deltadv write, and what a new table
//! that asks for one gets. Pure: protocol and metadata in.
//!
//! | rule (spec) | V1 | V2 | V3 | what deltadv does |
//! |---|---|---|---|---|
//! | column mapping `name` or `id` | ✓ | ✓ | ✓ | a new table gets `name` when unset ([`new_table_configuration`]); refuses a table without it |
//! | row tracking enabled | – | – | ✓ | a new table gets it when unset; refuses a table without it |
//! | materialized row id / row commit version columns with field ids 2147483540 / 2147483539 | – | – | ✓ | written with them ([`reserved_field_id`]) wherever deltadv writes those columns (UPDATE, MERGE, OPTIMIZE/PURGE) |
//! | no deletion vectors | feature absent | not active | – (allowed) | V1/V2: DML goes copy-on-write (`allow_copy_on_write`), else refused; DV writes refused |
//! | no other version active | – | ✓ | ✓ | refuses two at once |
//! | partition values materialized in data files | ✓ | ✓ | ✓ | written into every data file, under their physical names and field ids ([`super::materialize_partition_columns`]) |
//! | `numRecords` in every add's stats | ✓ | ✓ | ✓ | always written |
//! | timestamps as int64 | – | ✓ | ✓ | always (microseconds) |
//! | type allow-list | no array/map | primitives, array, map, struct | V2's + variant (+ geo types, which deltadv does not read) | refused otherwise; arrays and maps need `parquet.field.nested.ids`, which deltadv does not write: refused for V2/V3 writes that add files |
//! | no Iceberg-incompatible type changes | ✓ | ✓ | ✓ | a schema with `delta.typeChanges` is refused (not checked further) |
//! | column write defaults are literals | – | – | ✓ | not checked |
//! | no partition evolution on REPLACE | ✓ | ✓ | ✓ | deltadv's schema overwrite of such a table is refused by the append rules above only where they apply (not checked apart) |
//!
//! Delta Spark also tags every data file it writes (`writeFiles`: appends,
//! rewrites of UPDATE/MERGE/DELETE, OPTIMIZE) to a table with
//! icebergCompatV2 or V3 enabled `ICEBERG_COMPAT_VERSION: "<version>"` (V1:
//! no tag); the tag is no spec rule, deltadv writes it the same
//! ([`new_file_tags`]). Like Delta Spark, the data writer decides from the
//! `delta.enableIcebergCompatV*` property alone (tags, field ids of the
//! row tracking columns, materialized partition values).
//!
//! UniForm (`delta.universalFormat.enabledFormats=iceberg`): deltadv keeps
//! Iceberg v3 metadata beside the log of an IcebergCompatV3 table after each
//! commit ([`iceberg_mirror`]; the writes are `crate::write::iceberg`'s).
//! Setting the property needs IcebergCompatV3 ([`check_universal_format`];
//! Delta Spark also takes V1/V2, whose Iceberg v1/v2 metadata deltadv does
//! not write).

use std::collections::HashMap;

use super::properties::{
    configured_true, property_is_true, TableProperties, COLUMN_MAPPING_MODE,
    ENABLE_DELETION_VECTORS, ENABLE_ICEBERG_COMPAT_V1, ENABLE_ICEBERG_COMPAT_V2,
    ENABLE_ICEBERG_COMPAT_V3, ENABLE_ROW_TRACKING, MATERIALIZED_ROW_COMMIT_VERSION,
    MATERIALIZED_ROW_ID, TYPE_CHANGES_KEY, UNIVERSAL_FORMAT_ENABLED_FORMATS,
};
use super::{is_supported, WriteOperation};
use crate::error::{Error, Result};
use crate::log::actions::{Metadata, Protocol};
use crate::log::schema::{ColumnMappingMode, DataType, StructField, StructType};

/// `(feature, enabling property, version)`.
const VERSIONS: &[(&str, &str, u8)] = &[
    ("icebergCompatV1", ENABLE_ICEBERG_COMPAT_V1, 1),
    ("icebergCompatV2", ENABLE_ICEBERG_COMPAT_V2, 2),
    ("icebergCompatV3", ENABLE_ICEBERG_COMPAT_V3, 3),
];

/// Iceberg's reserved field id of `_row_id` (Iceberg spec, "Reserved Field
/// IDs"): IcebergCompatV3 gives it to the materialized row-id column.
pub const ROW_ID_FIELD_ID: i64 = 2_147_483_540;
/// Iceberg's reserved field id of `_last_updated_sequence_number`:
/// IcebergCompatV3 gives it to the materialized row-commit-version column.
pub const ROW_COMMIT_VERSION_FIELD_ID: i64 = 2_147_483_539;

/// Tag of new data files: the table's Iceberg compatibility version.
pub const ICEBERG_COMPAT_VERSION_TAG: &str = "ICEBERG_COMPAT_VERSION";

/// The tags of a data file written to a table with this configuration:
/// `ICEBERG_COMPAT_VERSION` = the enabled version from V2 on, as Delta
/// Spark's `TransactionalWrite.writeFiles` (which, like this, looks at the
/// `delta.enableIcebergCompatV*` property only); `None` otherwise.
pub fn new_file_tags(
    configuration: &HashMap<String, Option<String>>,
) -> Option<HashMap<String, Option<String>>> {
    let version = VERSIONS
        .iter()
        .find(|(_, key, _)| configured_true(configuration, key))
        .map(|(_, _, v)| *v)?;
    (version >= 2).then(|| {
        HashMap::from([(
            ICEBERG_COMPAT_VERSION_TAG.to_string(),
            Some(version.to_string()),
        )])
    })
}

/// The Iceberg compatibility versions a configuration turns on (the
/// property alone, as Delta Spark's data writer looks at it).
pub fn enabled_versions(configuration: &HashMap<String, Option<String>>) -> Vec<u8> {
    VERSIONS
        .iter()
        .filter(|(_, key, _)| configured_true(configuration, key))
        .map(|(_, _, v)| *v)
        .collect()
}

/// The field id IcebergCompatV3 gives the data-file column `physical` of a
/// table with this configuration: Iceberg's reserved `_row_id` id for the
/// materialized row-id column, `_last_updated_sequence_number`'s for the
/// materialized row-commit-version column (as Delta Spark's
/// `RowId`/`RowCommitVersion` `MetadataStructField` set
/// `parquet.field.id` when IcebergCompat V3 or later is enabled); `None`
/// for any other column or table.
pub fn reserved_field_id(
    configuration: &HashMap<String, Option<String>>,
    physical: &str,
) -> Option<i64> {
    let [row_id, row_commit_version] = row_tracking_field_ids(configuration)?;
    let props = TableProperties::new(configuration);
    if props.get(MATERIALIZED_ROW_ID) == Some(physical) {
        Some(row_id)
    } else if props.get(MATERIALIZED_ROW_COMMIT_VERSION) == Some(physical) {
        Some(row_commit_version)
    } else {
        None
    }
}

/// The field ids of the materialized `[row id, row commit version]` columns
/// in data files of a table with this configuration: Iceberg's reserved ids
/// from IcebergCompatV3 on ([`reserved_field_id`]), else `None` (no id).
pub fn row_tracking_field_ids(configuration: &HashMap<String, Option<String>>) -> Option<[i64; 2]> {
    enabled_versions(configuration)
        .iter()
        .any(|v| *v >= 3)
        .then_some([ROW_ID_FIELD_ID, ROW_COMMIT_VERSION_FIELD_ID])
}

fn invalid(version: u8, why: String) -> Error {
    Error::InvalidArgument(format!(
        "a table with delta.enableIcebergCompatV{version}=true {why}"
    ))
}

/// The configuration of a new table that asks for Iceberg compatibility
/// (`delta.enableIcebergCompatV{1,2,3}=true`), completed as Delta Spark's
/// `IcebergCompat.enforceInvariantsAndDependencies` completes a CREATE:
/// column mapping `name` when `delta.columnMapping.mode` is unset; for V3
/// row tracking (`delta.enableRowTracking=true`) when unset. A setting the
/// version forbids is an error naming it: two versions at once, column
/// mapping `none`, V3 with row tracking off, V1/V2 with deletion vectors
/// (`deletion_vectors`: the new table gets them). The features of the
/// enabled version join the protocol in [`super::new_table_protocol`].
pub fn new_table_configuration(
    configuration: &mut HashMap<String, Option<String>>,
    deletion_vectors: bool,
) -> Result<()> {
    check_universal_format(configuration)?;
    let enabled = enabled_versions(configuration);
    let Some(&version) = enabled.last() else {
        return Ok(());
    };
    if enabled.len() > 1 {
        let keys: Vec<&str> = VERSIONS
            .iter()
            .filter(|(_, key, _)| configured_true(configuration, key))
            .map(|(_, key, _)| *key)
            .collect();
        return Err(Error::InvalidArgument(format!(
            "only one Iceberg compatibility version may be enabled, got {} all true \
             (Delta Spark: DELTA_ICEBERG_COMPAT_VIOLATION.VERSION_MUTUAL_EXCLUSIVE)",
            keys.join(" and ")
        )));
    }
    match TableProperties::new(configuration).get(COLUMN_MAPPING_MODE) {
        None => {
            configuration.insert(COLUMN_MAPPING_MODE.to_string(), Some("name".to_string()));
        }
        Some(_) => {
            let mode = TableProperties::new(configuration).column_mapping_mode()?;
            if mode == ColumnMappingMode::None {
                return Err(invalid(
                    version,
                    format!(
                        "needs column mapping ({COLUMN_MAPPING_MODE} name or id; leave it \
                         unset for name), got {COLUMN_MAPPING_MODE}=none"
                    ),
                ));
            }
        }
    }
    if version >= 3 {
        match TableProperties::new(configuration).get(ENABLE_ROW_TRACKING) {
            None => {
                configuration.insert(ENABLE_ROW_TRACKING.to_string(), Some("true".to_string()));
            }
            Some(v) if !configured_true(configuration, ENABLE_ROW_TRACKING) => {
                return Err(invalid(
                    version,
                    format!(
                        "needs row tracking ({ENABLE_ROW_TRACKING}=true; leave it unset for \
                         true), got {ENABLE_ROW_TRACKING}={v}"
                    ),
                ));
            }
            Some(_) => {}
        }
    } else if deletion_vectors || configured_true(configuration, ENABLE_DELETION_VECTORS) {
        return Err(invalid(
            version,
            format!(
                "cannot have deletion vectors: create it without them \
                 (enable_deletion_vectors=False, {ENABLE_DELETION_VECTORS} unset), or use \
                 delta.enableIcebergCompatV3, which allows them"
            ),
        ));
    }
    Ok(())
}

/// What deltadv does for UniForm after a commit to a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IcebergMirror {
    /// `delta.universalFormat.enabledFormats` does not list `iceberg`.
    Off,
    /// Iceberg v3 metadata follows each commit (IcebergCompatV3 active).
    On,
    /// UniForm Iceberg is on, but deltadv cannot keep its metadata: why.
    Unsupported(String),
}

/// Whether the table at this protocol and metadata has its commits mirrored
/// as Iceberg snapshots ([`IcebergMirror`]).
pub fn iceberg_mirror(p: &Protocol, metadata: &Metadata) -> IcebergMirror {
    let formats = TableProperties::of(metadata).universal_formats();
    if !formats.iter().any(|f| f == "iceberg") {
        return IcebergMirror::Off;
    }
    let active = active_versions(p, metadata);
    if active.contains(&3) {
        return IcebergMirror::On;
    }
    IcebergMirror::Unsupported(match active.last() {
        Some(v) => format!(
            "the table has UniForm Iceberg with icebergCompatV{v}: deltadv writes Iceberg v3 \
             metadata, for icebergCompatV3 tables only (Delta Spark's UniForm converts this one)"
        ),
        None => format!(
            "{UNIVERSAL_FORMAT_ENABLED_FORMATS} lists iceberg, but no Iceberg compatibility \
             version is active (delta.enableIcebergCompatV3=true is needed)"
        ),
    })
}

/// Check `delta.universalFormat.enabledFormats` in a configuration being
/// set (a new table, or properties set on an existing one): only `iceberg`
/// (and `hudi`, whose metadata deltadv does not write: refused) are formats;
/// `iceberg` needs `delta.enableIcebergCompatV3=true` in the same
/// configuration (Delta Spark: DELTA_UNIVERSAL_FORMAT_VIOLATION, which also
/// takes V1/V2, whose Iceberg metadata deltadv does not write).
pub fn check_universal_format(configuration: &HashMap<String, Option<String>>) -> Result<()> {
    for format in TableProperties::new(configuration).universal_formats() {
        match format.as_str() {
            "iceberg" => {
                if !enabled_versions(configuration).contains(&3) {
                    return Err(Error::InvalidArgument(format!(
                        "{UNIVERSAL_FORMAT_ENABLED_FORMATS}=iceberg needs \
                         {ENABLE_ICEBERG_COMPAT_V3}=true: deltadv writes Iceberg v3 metadata \
                         (Delta Spark: DELTA_UNIVERSAL_FORMAT_VIOLATION)"
                    )));
                }
            }
            "hudi" => {
                return Err(Error::Unsupported(format!(
                    "{UNIVERSAL_FORMAT_ENABLED_FORMATS}=hudi: deltadv does not write Hudi metadata"
                )))
            }
            other => {
                return Err(Error::InvalidArgument(format!(
                    "{UNIVERSAL_FORMAT_ENABLED_FORMATS} lists {other:?}: the formats are \
                     iceberg and hudi"
                )))
            }
        }
    }
    Ok(())
}

/// The writer features a new table with this configuration needs for its
/// Iceberg compatibility: the enabled version's (its column mapping and
/// row tracking come from their own properties).
pub fn new_table_features(configuration: &HashMap<String, Option<String>>) -> Vec<&'static str> {
    VERSIONS
        .iter()
        .filter(|(_, key, _)| configured_true(configuration, key))
        .map(|(feature, _, _)| *feature)
        .collect()
}

/// The active Iceberg compatibility version that forbids deletion vectors
/// on the table (V1, V2), if any.
pub fn forbids_deletion_vectors(p: &Protocol, metadata: &Metadata) -> Option<u8> {
    active_versions(p, metadata).into_iter().find(|v| *v < 3)
}

/// Refuse a write that changes the partition columns of a partitioned
/// table with Iceberg compatibility active (Delta Spark's
/// `CheckNoPartitionEvolution`: Iceberg cannot replace a partition spec by
/// a differently named one).
pub fn check_partition_change(
    p: &Protocol,
    old: &Metadata,
    new_partitions: &[String],
) -> Result<()> {
    let Some(&version) = active_versions(p, old).last() else {
        return Ok(());
    };
    if !old.partition_columns.is_empty() && old.partition_columns != new_partitions {
        return Err(Error::Unsupported(format!(
            "the table has icebergCompatV{version} active (delta.enableIcebergCompatV{version}=true) \
             and is partitioned by {:?}: it cannot be re-partitioned by {new_partitions:?} \
             (Delta Spark: DELTA_ICEBERG_COMPAT_VIOLATION.REPLACE_TABLE_CHANGE_PARTITION_NAMES)",
            old.partition_columns
        )));
    }
    Ok(())
}

/// The Iceberg compatibility versions active on the table.
pub fn active_versions(p: &Protocol, metadata: &Metadata) -> Vec<u8> {
    VERSIONS
        .iter()
        .filter(|(feature, key, _)| is_supported(p, feature) && property_is_true(metadata, key))
        .map(|(_, _, v)| *v)
        .collect()
}

fn adds_files(op: WriteOperation) -> bool {
    !matches!(op, WriteOperation::DeleteWithDeletionVectors)
}

fn refuse(version: u8, op: WriteOperation, why: String) -> Error {
    Error::Unsupported(format!(
        "{} is not allowed: the table has icebergCompatV{version} active \
         (delta.enableIcebergCompatV{version}=true) and {why}",
        op.describe()
    ))
}

/// The first field (path) of a type outside `allowed`.
fn find_type(
    fields: &[StructField],
    prefix: &str,
    bad: &dyn Fn(&DataType) -> bool,
) -> Option<(String, String)> {
    fn walk(t: &DataType, path: &str, bad: &dyn Fn(&DataType) -> bool) -> Option<(String, String)> {
        if bad(t) {
            return Some((path.to_string(), t.to_string()));
        }
        match t {
            DataType::Struct(s) => find_type(&s.fields, &format!("{path}."), bad),
            DataType::Array { element, .. } => walk(element, &format!("{path}.element"), bad),
            DataType::Map { key, value, .. } => walk(key, &format!("{path}.key"), bad)
                .or_else(|| walk(value, &format!("{path}.value"), bad)),
            _ => None,
        }
    }
    fields
        .iter()
        .find_map(|f| walk(&f.data_type, &format!("{prefix}{}", f.name), bad))
}

fn has_type_changes(fields: &[StructField]) -> Option<String> {
    fields.iter().find_map(|f| {
        if f.metadata.contains_key(TYPE_CHANGES_KEY) {
            return Some(f.name.clone());
        }
        match &f.data_type {
            DataType::Struct(s) => has_type_changes(&s.fields).map(|n| format!("{}.{n}", f.name)),
            _ => None,
        }
    })
}

/// Refuse `op` on a table whose active Iceberg compatibility it would break
/// (or that already breaks it), naming the rule.
pub fn check(p: &Protocol, metadata: &Metadata, op: WriteOperation) -> Result<()> {
    let versions = active_versions(p, metadata);
    let Some(&version) = versions.last() else {
        return Ok(());
    };
    if let Some(other) = versions.first().filter(|_| versions.len() > 1) {
        return Err(refuse(
            version,
            op,
            format!("icebergCompatV{other} is active too, which IcebergCompatV{version} forbids"),
        ));
    }
    let props = TableProperties::of(metadata);
    if props.column_mapping_mode()? == ColumnMappingMode::None {
        return Err(refuse(
            version,
            op,
            "column mapping is not enabled, which it requires (delta.columnMapping.mode \
             name or id)"
                .into(),
        ));
    }
    if version >= 3 && !(is_supported(p, "rowTracking") && props.enable_row_tracking()) {
        return Err(refuse(
            version,
            op,
            format!(
                "row tracking is not enabled, which it requires (the rowTracking feature and \
                 {ENABLE_ROW_TRACKING}=true)"
            ),
        ));
    }
    let dvs = match version {
        1 => is_supported(p, "deletionVectors"),
        2 => is_supported(p, "deletionVectors") && props.enable_deletion_vectors(),
        _ => false, // V3 allows deletion vectors
    };
    if dvs || (version < 3 && op == WriteOperation::DeleteWithDeletionVectors) {
        return Err(refuse(
            version,
            op,
            "it forbids deletion vectors: delete and update by rewriting files \
             (allow_copy_on_write=True)"
                .into(),
        ));
    }
    let schema = StructType::parse(&metadata.schema_string)?;
    if let Some(column) = has_type_changes(&schema.fields) {
        return Err(refuse(
            version,
            op,
            format!(
                "column {column:?} had its type changed ({TYPE_CHANGES_KEY}), which deltadv \
                 does not check against Iceberg's allowed type changes"
            ),
        ));
    }
    let not_allowed: &dyn Fn(&DataType) -> bool = match version {
        1 => &|t| {
            matches!(
                t,
                DataType::Array { .. } | DataType::Map { .. } | DataType::Variant
            )
        },
        2 => &|t| matches!(t, DataType::Variant),
        _ => &|_| false,
    };
    if let Some((column, t)) = find_type(&schema.fields, "", not_allowed) {
        return Err(refuse(
            version,
            op,
            format!("column {column:?} has type {t}, which it does not allow"),
        ));
    }
    if !adds_files(op) {
        return Ok(());
    }
    // Partition values: the data writer materializes them in every file
    // (super::materialize_partition_columns).
    if version >= 2 {
        let nested = |t: &DataType| matches!(t, DataType::Array { .. } | DataType::Map { .. });
        if let Some((column, t)) = find_type(&schema.fields, "", &nested) {
            return Err(refuse(
                version,
                op,
                format!(
                    "column {column:?} ({t}) needs parquet field ids for its elements \
                     (parquet.field.nested.ids), which deltadv does not write"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{metadata, protocol};
    use super::*;

    fn table(props: &[(&str, &str)], schema: &str, partitions: &[&str]) -> Metadata {
        let mut m = metadata(props);
        m.schema_string = schema.to_string();
        m.partition_columns = partitions.iter().map(|s| s.to_string()).collect();
        m
    }

    const PLAIN: &str = r#"{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-1"}}]}"#;
    const WITH_ARRAY: &str = r#"{"type":"struct","fields":[{"name":"a","type":{"type":"array","elementType":"integer","containsNull":true},"nullable":true,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-1"}}]}"#;

    fn v2() -> Protocol {
        protocol(2, 7, &[], &["columnMapping", "icebergCompatV2"])
    }

    const ON: (&str, &str) = ("delta.enableIcebergCompatV2", "true");
    const MAPPED: (&str, &str) = ("delta.columnMapping.mode", "name");

    #[test]
    fn new_files_are_tagged_from_v2_on() {
        let tags = |props: &[(&str, &str)]| new_file_tags(&metadata(props).configuration);
        let v2 = tags(&[ON, MAPPED]).unwrap();
        assert_eq!(
            v2.get("ICEBERG_COMPAT_VERSION"),
            Some(&Some("2".to_string()))
        );
        assert_eq!(v2.len(), 1);
        assert_eq!(
            tags(&[("delta.enableIcebergCompatV1", "true"), MAPPED]),
            None
        );
        assert_eq!(tags(&[("delta.enableIcebergCompatV2", "false")]), None);
        assert_eq!(tags(&[MAPPED]), None);
    }

    #[test]
    fn v2_tables_take_appends_and_copy_on_write() {
        let m = table(&[ON, MAPPED], PLAIN, &[]);
        for op in [
            WriteOperation::Append,
            WriteOperation::DeleteCopyOnWrite,
            WriteOperation::RewriteRows,
            WriteOperation::Compact,
        ] {
            check(&v2(), &m, op).unwrap();
        }
        let e = check(&v2(), &m, WriteOperation::DeleteWithDeletionVectors).unwrap_err();
        assert!(e.to_string().contains("forbids deletion vectors"), "{e}");
        // supported but not enabled: no rules
        let off = table(&[], PLAIN, &["a"]);
        check(&v2(), &off, WriteOperation::Append).unwrap();
    }

    #[test]
    fn each_rule_is_enforced() {
        let err = |p: &Protocol, m: &Metadata, op| check(p, m, op).unwrap_err().to_string();
        let e = err(&v2(), &table(&[ON], PLAIN, &[]), WriteOperation::Append);
        assert!(e.contains("column mapping"), "{e}");
        let dv = protocol(
            3,
            7,
            &["columnMapping", "deletionVectors"],
            &["columnMapping", "icebergCompatV2", "deletionVectors"],
        );
        let m = table(
            &[ON, MAPPED, ("delta.enableDeletionVectors", "true")],
            PLAIN,
            &[],
        );
        let e = err(&dv, &m, WriteOperation::Append);
        assert!(e.contains("deletion vectors"), "{e}");
        // V1: the feature alone is too much
        let v1 = protocol(
            3,
            7,
            &["columnMapping", "deletionVectors"],
            &["columnMapping", "icebergCompatV1", "deletionVectors"],
        );
        let m1 = table(
            &[("delta.enableIcebergCompatV1", "true"), MAPPED],
            PLAIN,
            &[],
        );
        let e = err(&v1, &m1, WriteOperation::DeleteCopyOnWrite);
        assert!(e.contains("icebergCompatV1 active"), "{e}");
        // partitioned tables take new files: the writer materializes the values
        check(
            &v2(),
            &table(&[ON, MAPPED], PLAIN, &["a"]),
            WriteOperation::Append,
        )
        .unwrap();
        let e = err(
            &v2(),
            &table(&[ON, MAPPED], WITH_ARRAY, &[]),
            WriteOperation::Append,
        );
        assert!(e.contains("parquet.field.nested.ids"), "{e}");
        let both = protocol(
            2,
            7,
            &[],
            &["columnMapping", "icebergCompatV1", "icebergCompatV2"],
        );
        let m = table(
            &[ON, MAPPED, ("delta.enableIcebergCompatV1", "true")],
            PLAIN,
            &[],
        );
        let e = err(&both, &m, WriteOperation::Append);
        assert!(e.contains("V1 is active too"), "{e}");
        let v1 = protocol(2, 7, &[], &["columnMapping", "icebergCompatV1"]);
        let m1 = table(
            &[("delta.enableIcebergCompatV1", "true"), MAPPED],
            WITH_ARRAY,
            &[],
        );
        let e = err(&v1, &m1, WriteOperation::Append);
        assert!(e.contains("does not allow"), "{e}");
    }

    const V3_ON: (&str, &str) = ("delta.enableIcebergCompatV3", "true");
    const TRACKED: (&str, &str) = ("delta.enableRowTracking", "true");

    fn v3() -> Protocol {
        protocol(
            3,
            7,
            &["columnMapping", "deletionVectors"],
            &[
                "columnMapping",
                "deletionVectors",
                "domainMetadata",
                "rowTracking",
                "icebergCompatV3",
            ],
        )
    }

    fn conf(props: &[(&str, &str)]) -> HashMap<String, Option<String>> {
        metadata(props).configuration
    }

    #[test]
    fn v3_tables_take_every_write_with_deletion_vectors() {
        let m = table(
            &[
                V3_ON,
                MAPPED,
                TRACKED,
                ("delta.enableDeletionVectors", "true"),
            ],
            PLAIN,
            &["a"],
        );
        for op in [
            WriteOperation::Append,
            WriteOperation::DeleteWithDeletionVectors,
            WriteOperation::DeleteCopyOnWrite,
            WriteOperation::RewriteRows,
            WriteOperation::Compact,
        ] {
            check(&v3(), &m, op).unwrap();
        }
        assert_eq!(forbids_deletion_vectors(&v3(), &m), None);
        let variant = r#"{"type":"struct","fields":[{"name":"v","type":"variant","nullable":true,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-1"}}]}"#;
        check(
            &v3(),
            &table(&[V3_ON, MAPPED, TRACKED], variant, &[]),
            WriteOperation::Append,
        )
        .unwrap();
        // the tag says 3
        let tags = new_file_tags(&m.configuration).unwrap();
        assert_eq!(tags.get("ICEBERG_COMPAT_VERSION"), Some(&Some("3".into())));
    }

    #[test]
    fn v3_rules_are_enforced() {
        let err = |p: &Protocol, m: &Metadata| {
            check(p, m, WriteOperation::Append).unwrap_err().to_string()
        };
        let e = err(&v3(), &table(&[V3_ON, MAPPED], PLAIN, &[]));
        assert!(
            e.contains("row tracking") && e.contains("icebergCompatV3"),
            "{e}"
        );
        let untracked = protocol(
            3,
            7,
            &["columnMapping"],
            &["columnMapping", "icebergCompatV3"],
        );
        let e = err(&untracked, &table(&[V3_ON, MAPPED, TRACKED], PLAIN, &[]));
        assert!(e.contains("row tracking"), "{e}");
        let e = err(&v3(), &table(&[V3_ON, TRACKED], PLAIN, &[]));
        assert!(e.contains("column mapping"), "{e}");
        let e = err(&v3(), &table(&[V3_ON, MAPPED, TRACKED], WITH_ARRAY, &[]));
        assert!(e.contains("parquet.field.nested.ids"), "{e}");
        let mut both = v3();
        if let Some(w) = both.writer_features.as_mut() {
            w.push("icebergCompatV2".into());
        }
        let e = err(&both, &table(&[V3_ON, ON, MAPPED, TRACKED], PLAIN, &[]));
        assert!(e.contains("icebergCompatV2 is active too"), "{e}");
        // the property without the feature: no rules (as Delta)
        let plain = protocol(1, 2, &[], &[]);
        check(
            &plain,
            &table(&[V3_ON], PLAIN, &["a"]),
            WriteOperation::Append,
        )
        .unwrap();
    }

    #[test]
    fn a_new_v3_table_gets_column_mapping_and_row_tracking() {
        let mut c = conf(&[V3_ON]);
        new_table_configuration(&mut c, true).unwrap();
        let p = TableProperties::new(&c);
        assert_eq!(p.get("delta.columnMapping.mode"), Some("name"));
        assert_eq!(p.get("delta.enableRowTracking"), Some("true"));
        assert_eq!(new_table_features(&c), vec!["icebergCompatV3"]);
        // explicit compatible settings are kept
        let mut c = conf(&[V3_ON, ("delta.columnMapping.mode", "id"), TRACKED]);
        new_table_configuration(&mut c, false).unwrap();
        assert_eq!(
            TableProperties::new(&c).get("delta.columnMapping.mode"),
            Some("id")
        );
        // nothing asked, nothing added
        let mut c = conf(&[("delta.enableIcebergCompatV3", "false")]);
        new_table_configuration(&mut c, true).unwrap();
        assert_eq!(c.len(), 1);
        assert!(new_table_features(&c).is_empty());
        // V2: column mapping added, deletion vectors refused
        let mut c = conf(&[ON]);
        new_table_configuration(&mut c, false).unwrap();
        assert_eq!(
            TableProperties::new(&c).get("delta.columnMapping.mode"),
            Some("name")
        );
        assert_eq!(
            TableProperties::new(&c).get("delta.enableRowTracking"),
            None
        );
        for (props, dvs, says) in [
            (
                vec![V3_ON, ("delta.columnMapping.mode", "none")],
                false,
                "columnMapping.mode=none",
            ),
            (
                vec![V3_ON, ("delta.enableRowTracking", "false")],
                false,
                "enableRowTracking=false",
            ),
            (
                vec![V3_ON, ON],
                false,
                "only one Iceberg compatibility version",
            ),
            (vec![ON], true, "cannot have deletion vectors"),
            (
                vec![ON, ("delta.enableDeletionVectors", "true")],
                false,
                "cannot have deletion vectors",
            ),
        ] {
            let mut c = conf(&props);
            let e = new_table_configuration(&mut c, dvs)
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{props:?}: {e}");
        }
    }

    #[test]
    fn row_tracking_columns_get_iceberg_reserved_ids_from_v3() {
        let names = [
            (
                "delta.rowTracking.materializedRowIdColumnName",
                "_row-id-col-x",
            ),
            (
                "delta.rowTracking.materializedRowCommitVersionColumnName",
                "_row-commit-version-col-y",
            ),
        ];
        let mut props = names.to_vec();
        props.push(V3_ON);
        let c = conf(&props);
        assert_eq!(reserved_field_id(&c, "_row-id-col-x"), Some(2147483540));
        assert_eq!(
            reserved_field_id(&c, "_row-commit-version-col-y"),
            Some(2147483539)
        );
        assert_eq!(reserved_field_id(&c, "col-1"), None);
        let mut v2_props = names.to_vec();
        v2_props.push(ON);
        assert_eq!(reserved_field_id(&conf(&v2_props), "_row-id-col-x"), None);
        assert_eq!(reserved_field_id(&conf(&names), "_row-id-col-x"), None);
    }

    #[test]
    fn partitions_of_iceberg_tables_do_not_change() {
        let m = table(&[V3_ON, MAPPED, TRACKED], PLAIN, &["a"]);
        check_partition_change(&v3(), &m, &["a".to_string()]).unwrap();
        let e = check_partition_change(&v3(), &m, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("re-partitioned"), "{e}");
        let unpartitioned = table(&[V3_ON, MAPPED, TRACKED], PLAIN, &[]);
        check_partition_change(&v3(), &unpartitioned, &["a".to_string()]).unwrap();
    }
}
