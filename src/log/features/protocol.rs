//! Protocols a write builds or changes: a new table's, two merged (a
//! write raising the protocol), one with deletion vectors added, and one
//! with a reader-writer feature dropped (Delta Spark's fast DROP FEATURE
//! downgrade), and the metadata a commit on a table tracking rows writes
//! (the materialized row tracking columns named). Pure: protocols and
//! metadata in, a protocol or metadata out.

use std::collections::{BTreeSet, HashMap};

use super::properties::{
    configured_true, row_tracking_properties, ENABLE_CHANGE_DATA_FEED, ENABLE_IN_COMMIT_TIMESTAMPS,
    ENABLE_ROW_TRACKING,
};
use super::{
    is_supported, reader_features, writer_features, READER_FEATURES_VERSION,
    WRITER_FEATURES_VERSION,
};
use crate::error::{Error, Result};
use crate::log::actions::{Metadata, Protocol};
use crate::log::schema::StructType;
/// Delta Spark's rule for the materialized row tracking columns
/// (`MaterializedRowId` / `MaterializedRowCommitVersion`
/// `.updateMaterializedColumnName`, run at every metadata update): once the
/// protocol supports `rowTracking`, the metadata names both columns
/// (`delta.rowTracking.materializedRowIdColumnName` = `_row-id-col-<uuid>`,
/// `...RowCommitVersionColumnName` = `_row-commit-version-col-<uuid>`),
/// assigned once and kept. `new` (the metadata being committed over `old`,
/// the table's current one) gets each name `old` has, else its own, else a
/// fresh one; Delta Spark would prefer a fresh name to `new`'s own when `old`
/// lacks it, which only matters for a `new` named by a writer that already
/// wrote rows in those columns (deltadv's DML names the columns before it
/// writes). Returns whether `new` changed; nothing happens when the
/// protocol does not support row tracking.
pub fn name_row_tracking_columns(protocol: &Protocol, old: &Metadata, new: &mut Metadata) -> bool {
    if !is_supported(protocol, "rowTracking") {
        return false;
    }
    let mut changed = false;
    for (key, fresh) in row_tracking_properties() {
        let kept = old
            .property(&key)
            .or(new.property(&key))
            .map(str::to_string);
        let name = kept.unwrap_or(fresh);
        if new.property(&key) != Some(name.as_str()) {
            new.configuration.insert(key, Some(name));
            changed = true;
        }
    }
    changed
}

/// Writer features each legacy writer version (2..=6) implies (PROTOCOL.md);
/// a version implies its own and every lower version's.
pub(super) const LEGACY_WRITER_FEATURES: &[(i32, &[&str])] = &[
    (2, &["appendOnly", "invariants"]),
    (3, &["checkConstraints"]),
    (4, &["changeDataFeed", "generatedColumns"]),
    (5, &["columnMapping"]),
    (6, &["identityColumns"]),
];

/// The protocol that reads and writes both: the higher versions, the union
/// of the features.
pub fn merge_protocols(a: &Protocol, b: &Protocol) -> Protocol {
    fn union(x: &Option<Vec<String>>, y: &Option<Vec<String>>) -> Option<Vec<String>> {
        match (x, y) {
            (None, None) => None,
            _ => {
                let mut out: Vec<String> = x.iter().flatten().cloned().collect();
                for f in y.iter().flatten() {
                    if !out.contains(f) {
                        out.push(f.clone());
                    }
                }
                Some(out)
            }
        }
    }
    let min_reader_version = a.min_reader_version.max(b.min_reader_version);
    let min_writer_version = a.min_writer_version.max(b.min_writer_version);
    Protocol {
        min_reader_version,
        min_writer_version,
        reader_features: union(&a.reader_features, &b.reader_features)
            .filter(|_| min_reader_version >= READER_FEATURES_VERSION),
        writer_features: union(&a.writer_features, &b.writer_features)
            .filter(|_| min_writer_version >= WRITER_FEATURES_VERSION),
    }
}

/// `protocol` without the reader-writer feature `name`, protected as Delta
/// Spark's fast DROP FEATURE leaves it: the `checkpointProtection` writer
/// feature added, and the reader version lowered to what the remaining
/// reader features need (1 without any; 2 for column mapping alone, which
/// legacy reader version 2 implies).
pub fn drop_reader_writer_feature(p: &Protocol, name: &str) -> Protocol {
    let reader: Vec<String> = reader_features(p)
        .filter(|f| *f != name)
        .map(str::to_string)
        .collect();
    let mut writer: Vec<String> = writer_features(p)
        .filter(|f| *f != name)
        .map(str::to_string)
        .collect();
    if !writer.iter().any(|f| f == "checkpointProtection") {
        writer.push("checkpointProtection".to_string());
    }
    let (min_reader_version, reader_features) = if reader.is_empty() {
        (1, None)
    } else if reader.iter().all(|f| f == "columnMapping") {
        (2, None)
    } else {
        (READER_FEATURES_VERSION, Some(reader))
    };
    Protocol {
        min_reader_version,
        min_writer_version: WRITER_FEATURES_VERSION,
        reader_features,
        writer_features: Some(writer),
    }
}

/// The protocol of a new table: reader 1 / writer 2 unless a feature needs
/// table features, then reader 3 / writer 7 with deletionVectors (when
/// `deletion_vectors`), timestampNtz (when a column needs it),
/// inCommitTimestamp, rowTracking (+ domainMetadata) and icebergCompatV1/2/3
/// when their properties are `true` in `configuration`, and the writer-2
/// features every table has
/// (NOT NULL columns need `invariants`).
pub fn new_table_protocol(
    schema: &StructType,
    deletion_vectors: bool,
    configuration: &HashMap<String, Option<String>>,
) -> Protocol {
    let mut reader = Vec::new();
    if deletion_vectors {
        reader.push("deletionVectors".to_string());
    }
    if schema.has_timestamp_ntz() {
        reader.push("timestampNtz".to_string());
    }
    // Column mapping (name or id): reader 2 / writer 5 alone, as Delta Spark
    // gives it; the columnMapping feature in both lists with other features.
    let mapped = crate::log::schema::column_mapping_mode(configuration)
        .is_ok_and(|m| m != crate::log::schema::ColumnMappingMode::None);
    if mapped {
        reader.push("columnMapping".to_string());
    }
    let mut writer_only = Vec::new();
    if configured_true(configuration, ENABLE_IN_COMMIT_TIMESTAMPS) {
        writer_only.push("inCommitTimestamp".to_string());
    }
    if configured_true(configuration, ENABLE_ROW_TRACKING) {
        writer_only.push("domainMetadata".to_string());
        writer_only.push("rowTracking".to_string());
    }
    if configured_true(configuration, ENABLE_CHANGE_DATA_FEED) {
        writer_only.push("changeDataFeed".to_string());
    }
    // icebergCompatV{1,2,3} when its property is true (the configuration
    // completed by iceberg::new_table_configuration).
    writer_only.extend(
        super::iceberg::new_table_features(configuration)
            .into_iter()
            .map(str::to_string),
    );
    if mapped && reader.len() == 1 && writer_only.is_empty() {
        return Protocol {
            min_reader_version: 2,
            min_writer_version: 5,
            reader_features: None,
            writer_features: None,
        };
    }
    if reader.is_empty() && writer_only.is_empty() {
        return Protocol {
            min_reader_version: 1,
            min_writer_version: 2,
            reader_features: None,
            writer_features: None,
        };
    }
    let mut writer = vec!["appendOnly".to_string(), "invariants".to_string()];
    writer.extend(reader.iter().cloned());
    writer.extend(writer_only);
    Protocol {
        min_reader_version: if reader.is_empty() {
            1
        } else {
            READER_FEATURES_VERSION
        },
        min_writer_version: WRITER_FEATURES_VERSION,
        reader_features: if reader.is_empty() {
            None
        } else {
            Some(reader)
        },
        writer_features: Some(writer),
    }
}

/// `protocol` upgraded to carry deletion vectors: reader 3 / writer 7 with the
/// deletionVectors feature, keeping every feature the old versions implied.
/// `None` when the protocol already has the feature.
pub fn with_deletion_vectors(protocol: &Protocol) -> Option<Protocol> {
    with_reader_writer_feature(protocol, "deletionVectors")
}

/// Delta Spark's check of an existing table's new schema (schema
/// evolution): a column that needs a feature the protocol lacks (a
/// timestamp_ntz column needs timestampNtz, which Delta Spark 4.4 does not
/// enable by itself on an existing table) is refused with
/// `DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT`.
pub fn check_schema_features(protocol: &Protocol, schema: &StructType) -> Result<()> {
    if !schema.has_timestamp_ntz() || is_supported(protocol, "timestampNtz") {
        return Ok(());
    }
    let mut supported: BTreeSet<String> = reader_features(protocol)
        .chain(writer_features(protocol))
        .map(str::to_string)
        .collect();
    for (version, features) in LEGACY_WRITER_FEATURES {
        if *version <= protocol.min_writer_version {
            supported.extend(features.iter().map(|f| f.to_string()));
        }
    }
    Err(Error::Unsupported(format!(
        "[DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT] Your table schema requires manually \
         enablement of the following table feature(s): timestampNtz. To do this, run \
         ALTER TABLE table_name SET TBLPROPERTIES ('delta.feature.timestampNtz' = \
         'supported') (in Delta Spark). Current supported feature(s): {}.",
        supported.into_iter().collect::<Vec<_>>().join(", ")
    )))
}

/// `protocol` with the writer features `names`, at writer version 7 (the
/// features the legacy versions implied kept); the reader side unchanged.
pub fn with_writer_features(protocol: &Protocol, names: &[&str]) -> Protocol {
    let mut writers: Vec<String> = writer_features(protocol).map(str::to_string).collect();
    if protocol.min_writer_version < WRITER_FEATURES_VERSION {
        for (version, features) in LEGACY_WRITER_FEATURES {
            if *version <= protocol.min_writer_version {
                for f in *features {
                    if !writers.iter().any(|w| w == f) {
                        writers.push(f.to_string());
                    }
                }
            }
        }
    }
    for &f in names {
        if !writers.iter().any(|w| w == f) {
            writers.push(f.to_string());
        }
    }
    let readers: Vec<String> = reader_features(protocol).map(str::to_string).collect();
    Protocol {
        min_reader_version: protocol.min_reader_version,
        min_writer_version: WRITER_FEATURES_VERSION,
        reader_features: if protocol.min_reader_version >= READER_FEATURES_VERSION {
            Some(readers)
        } else {
            None
        },
        writer_features: Some(writers),
    }
}

/// `protocol` with the table feature `name` (`reader_writer`: listed among
/// the reader features too, at reader version 3), as a
/// `delta.feature.<name> = supported` table property asks.
pub fn with_feature(protocol: &Protocol, name: &str, reader_writer: bool) -> Protocol {
    if reader_writer {
        with_reader_writer_feature(protocol, name).unwrap_or_else(|| protocol.clone())
    } else {
        with_writer_features(protocol, &[name])
    }
}

/// `protocol` with the reader-writer feature `name`: reader 3 / writer 7,
/// keeping every feature the old versions implied. `None` when the protocol
/// already has it.
fn with_reader_writer_feature(protocol: &Protocol, name: &str) -> Option<Protocol> {
    if is_supported(protocol, name) {
        return None;
    }
    let mut readers: BTreeSet<String> = reader_features(protocol).map(str::to_string).collect();
    let mut writers: BTreeSet<String> = writer_features(protocol).map(str::to_string).collect();
    if protocol.min_writer_version < WRITER_FEATURES_VERSION {
        for (version, features) in LEGACY_WRITER_FEATURES {
            if *version <= protocol.min_writer_version {
                writers.extend(features.iter().map(|f| f.to_string()));
            }
        }
    }
    if protocol.min_reader_version == 2 {
        readers.insert("columnMapping".to_string());
    }
    readers.insert(name.to_string());
    writers.insert(name.to_string());
    Some(Protocol {
        min_reader_version: READER_FEATURES_VERSION,
        min_writer_version: WRITER_FEATURES_VERSION,
        reader_features: Some(readers.into_iter().collect()),
        writer_features: Some(writers.into_iter().collect()),
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn row_tracking_columns_are_named_once_the_feature_is_supported() {
        use super::super::properties::{MATERIALIZED_ROW_COMMIT_VERSION, MATERIALIZED_ROW_ID};
        let meta = |pairs: &[(&str, &str)]| crate::log::actions::Metadata {
            configuration: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), Some(v.to_string())))
                .collect(),
            ..serde_json::from_value(serde_json::json!({
                "id": "t", "format": {"provider": "parquet", "options": {}},
                "schemaString": "{\"type\":\"struct\",\"fields\":[]}",
                "partitionColumns": [], "configuration": {}
            }))
            .unwrap()
        };
        let supported = Protocol {
            min_reader_version: 1,
            min_writer_version: 7,
            reader_features: None,
            writer_features: Some(vec!["domainMetadata".into(), "rowTracking".into()]),
        };
        // Missing: fresh names, Delta Spark's prefixes and a UUID.
        let old = meta(&[(ENABLE_ROW_TRACKING, "true")]);
        let mut new = old.clone();
        assert!(name_row_tracking_columns(&supported, &old, &mut new));
        let id = new.property(MATERIALIZED_ROW_ID).unwrap();
        let version = new.property(MATERIALIZED_ROW_COMMIT_VERSION).unwrap();
        let uuid =
            |s: &str, prefix: &str| uuid::Uuid::parse_str(s.strip_prefix(prefix).unwrap()).is_ok();
        assert!(uuid(id, "_row-id-col-"), "{id}");
        assert!(uuid(version, "_row-commit-version-col-"), "{version}");
        // Named: kept (the table's names win over the new metadata's).
        let named = meta(&[
            (MATERIALIZED_ROW_ID, "a"),
            (MATERIALIZED_ROW_COMMIT_VERSION, "b"),
        ]);
        let mut again = named.clone();
        assert!(!name_row_tracking_columns(&supported, &named, &mut again));
        let mut other = meta(&[(MATERIALIZED_ROW_ID, "x")]);
        assert!(name_row_tracking_columns(&supported, &named, &mut other));
        assert_eq!(other.property(MATERIALIZED_ROW_ID), Some("a"));
        assert_eq!(other.property(MATERIALIZED_ROW_COMMIT_VERSION), Some("b"));
        // The new metadata's own names when the table has none.
        let mut own = named.clone();
        assert!(!name_row_tracking_columns(&supported, &old, &mut own));
        assert_eq!(own.property(MATERIALIZED_ROW_ID), Some("a"));
        // Without the feature: nothing.
        let plain = Protocol {
            min_reader_version: 1,
            min_writer_version: 2,
            reader_features: None,
            writer_features: None,
        };
        let mut untouched = old.clone();
        assert!(!name_row_tracking_columns(&plain, &old, &mut untouched));
        assert_eq!(untouched, old);
    }

    use std::collections::HashMap;

    use super::super::tests::protocol;
    use super::*;
    use crate::log::schema::{DataType, StructField};

    #[test]
    fn a_new_iceberg_compat_v3_table_lists_its_features() {
        let plain = StructType::new(vec![StructField::new("id", DataType::Long, true)]);
        let mut conf: HashMap<String, Option<String>> = [("delta.enableIcebergCompatV3", "true")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect();
        super::super::iceberg::new_table_configuration(&mut conf, true).unwrap();
        let p = new_table_protocol(&plain, true, &conf);
        assert_eq!((p.min_reader_version, p.min_writer_version), (3, 7));
        for f in [
            "columnMapping",
            "deletionVectors",
            "rowTracking",
            "domainMetadata",
            "icebergCompatV3",
        ] {
            assert!(is_supported(&p, f), "{f} in {p:?}");
        }
        assert!(!is_supported(&p, "icebergCompatV2"));
    }

    #[test]
    fn new_table_protocols() {
        let plain = StructType::new(vec![StructField::new("id", DataType::Long, true)]);
        let none = HashMap::new();
        assert_eq!(
            new_table_protocol(&plain, false, &none),
            protocol(1, 2, &[], &[])
        );
        let p = new_table_protocol(&plain, true, &none);
        assert_eq!(
            p,
            protocol(
                3,
                7,
                &["deletionVectors"],
                &["appendOnly", "invariants", "deletionVectors"]
            )
        );
        assert!(is_supported(&p, "deletionVectors"));
        // a nested timestamp_ntz needs the feature too
        let nested = StructType::new(vec![StructField::new(
            "s",
            DataType::Array {
                element: Box::new(DataType::TimestampNtz),
                contains_null: true,
            },
            true,
        )]);
        let p = new_table_protocol(&nested, false, &none);
        assert!(is_supported(&p, "timestampNtz") && !is_supported(&p, "deletionVectors"));
        // in-commit timestamps and row tracking are writer features (reader 1)
        let conf: HashMap<String, Option<String>> = [
            (ENABLE_IN_COMMIT_TIMESTAMPS, "TRUE"),
            (ENABLE_ROW_TRACKING, "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), Some(v.to_string())))
        .collect();
        let p = new_table_protocol(&plain, false, &conf);
        assert_eq!(
            p,
            protocol(
                1,
                7,
                &[],
                &[
                    "appendOnly",
                    "invariants",
                    "inCommitTimestamp",
                    "domainMetadata",
                    "rowTracking"
                ]
            )
        );
        let off: HashMap<String, Option<String>> =
            [(ENABLE_ROW_TRACKING.to_string(), Some("false".to_string()))].into();
        assert_eq!(
            new_table_protocol(&plain, false, &off),
            protocol(1, 2, &[], &[])
        );
    }

    #[test]
    fn enabling_deletion_vectors_keeps_what_old_versions_implied() {
        let p = with_deletion_vectors(&protocol(2, 5, &[], &[])).unwrap();
        assert_eq!((p.min_reader_version, p.min_writer_version), (3, 7));
        for f in [
            "appendOnly",
            "invariants",
            "checkConstraints",
            "changeDataFeed",
            "generatedColumns",
            "columnMapping",
            "deletionVectors",
        ] {
            assert!(p.writer_features.iter().flatten().any(|w| w == f), "{f}");
        }
        assert!(!p
            .writer_features
            .iter()
            .flatten()
            .any(|w| w == "identityColumns"));
        assert!(is_supported(&p, "columnMapping") && is_supported(&p, "deletionVectors"));
        let q =
            with_deletion_vectors(&protocol(3, 7, &["timestampNtz"], &["timestampNtz"])).unwrap();
        assert!(is_supported(&q, "timestampNtz") && is_supported(&q, "deletionVectors"));
        assert_eq!(with_deletion_vectors(&q), None);
    }

    #[test]
    fn a_timestamp_ntz_column_needs_its_feature_enabled_first() {
        let plain = StructType::new(vec![StructField::new("id", DataType::Long, true)]);
        let ntz = StructType::new(vec![
            StructField::new("id", DataType::Long, true),
            StructField::new("ts", DataType::TimestampNtz, true),
        ]);
        let legacy = protocol(1, 2, &[], &[]);
        check_schema_features(&legacy, &plain).unwrap();
        let e = check_schema_features(&legacy, &ntz)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT"),
            "{e}"
        );
        assert!(e.contains("feature(s): appendOnly, invariants."), "{e}");
        let dv = protocol(3, 7, &["deletionVectors"], &["deletionVectors"]);
        assert!(check_schema_features(&dv, &ntz).is_err());
        let with = protocol(3, 7, &["timestampNtz"], &["timestampNtz"]);
        check_schema_features(&with, &ntz).unwrap();
    }

    #[test]
    fn merged_protocols_only_grow() {
        let old = protocol(1, 2, &[], &[]);
        let new = protocol(
            3,
            7,
            &["deletionVectors"],
            &["deletionVectors", "appendOnly"],
        );
        let m = merge_protocols(&old, &new);
        assert_eq!((m.min_reader_version, m.min_writer_version), (3, 7));
        assert!(is_supported(&m, "deletionVectors"));
        let both = merge_protocols(
            &new,
            &protocol(3, 7, &["columnMapping"], &["columnMapping"]),
        );
        assert!(is_supported(&both, "deletionVectors") && is_supported(&both, "columnMapping"));
        // legacy versions without feature lists stay without them
        let legacy = merge_protocols(&old, &protocol(1, 4, &[], &[]));
        assert_eq!(
            (legacy.min_reader_version, legacy.min_writer_version),
            (1, 4)
        );
        assert!(legacy.writer_features.is_none());
    }

    #[test]
    fn dropping_a_reader_writer_feature_lowers_the_reader_version() {
        let p = protocol(
            3,
            7,
            &["deletionVectors"],
            &["deletionVectors", "appendOnly"],
        );
        let d = drop_reader_writer_feature(&p, "deletionVectors");
        assert_eq!(d.min_reader_version, 1);
        assert!(d.reader_features.is_none());
        let w = d.writer_features.unwrap();
        assert!(w.contains(&"checkpointProtection".to_string()));
        assert!(!w.contains(&"deletionVectors".to_string()));
        let p = protocol(
            3,
            7,
            &["deletionVectors", "columnMapping"],
            &["deletionVectors", "columnMapping"],
        );
        assert_eq!(
            drop_reader_writer_feature(&p, "deletionVectors").min_reader_version,
            2
        );
        let p = protocol(
            3,
            7,
            &["deletionVectors", "v2Checkpoint"],
            &["deletionVectors", "v2Checkpoint"],
        );
        let d = drop_reader_writer_feature(&p, "deletionVectors");
        assert_eq!(d.reader_features, Some(vec!["v2Checkpoint".to_string()]));
    }
}
