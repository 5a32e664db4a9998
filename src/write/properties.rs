//! `SET TBLPROPERTIES` on an existing table: the properties that change
//! nothing in the protocol and ask nothing of the files already written
//! (retention, checkpoint interval, statistics columns, isolation level,
//! file sizes, user keys), plus turning deletion vectors on and UniForm
//! Iceberg (`delta.universalFormat.enabledFormats=iceberg`, on a table with
//! IcebergCompatV3): the commit after it converts the whole snapshot into
//! Iceberg metadata once, then every commit is mirrored
//! ([`super::transaction`]).
//!
//! Properties a table only gets at creation in deltadv (column mapping, row
//! tracking, change data feed, Iceberg compatibility, in-commit timestamps,
//! append-only, protocol versions and features) are refused by name: on an
//! existing table they need a protocol upgrade, and some a backfill or a
//! rewrite, which Delta Spark's `ALTER TABLE` does.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Map};

use super::transaction::{CommitOutcome, FixedActions, Transaction};
use crate::error::{Error, Result};
use crate::log::features;
use crate::log::features::iceberg::{check_universal_format, iceberg_mirror, IcebergMirror};
use crate::log::features::properties::{
    TableProperties, CHECKPOINT_INTERVAL, CREATION_ONLY_PROPERTIES, DELTA_PREFIX,
    UNIVERSAL_FORMAT_ENABLED_FORMATS, USER_TABLE_PROPERTIES,
};
use crate::table::snapshot::Snapshot;

/// The key as the table keeps it: a Delta property in its canonical
/// spelling (matched without case), any other key as given.
fn canonical_key(key: &str) -> Result<String> {
    if key.trim().is_empty() {
        return Err(Error::InvalidArgument(
            "a table property name must not be empty".into(),
        ));
    }
    if !key.to_ascii_lowercase().starts_with(DELTA_PREFIX) {
        return Ok(key.to_string());
    }
    let known = USER_TABLE_PROPERTIES
        .iter()
        .find(|k| k.eq_ignore_ascii_case(key))
        .ok_or_else(|| Error::InvalidArgument(format!("{key:?} is not a Delta table property")))?;
    if CREATION_ONLY_PROPERTIES.contains(known) {
        return Err(Error::Unsupported(format!(
            "deltadv sets {known} only when it creates a table: on an existing table it needs \
             a protocol upgrade (and some a backfill or a rewrite); use Delta Spark's \
             ALTER TABLE ... SET TBLPROPERTIES"
        )));
    }
    Ok((*known).to_string())
}

/// Every value of the new configuration that deltadv reads parses.
fn check_values(configuration: &HashMap<String, Option<String>>) -> Result<()> {
    let props = TableProperties::new(configuration);
    props.deleted_file_retention_ms()?;
    props.target_file_size()?;
    props.data_skipping_num_indexed_cols()?;
    props.isolation_level()?;
    if let Some(text) = props.get(CHECKPOINT_INTERVAL) {
        match text.trim().parse::<u64>() {
            Ok(n) if n > 0 => {}
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "table property {CHECKPOINT_INTERVAL} = {text:?} is not a number of \
                     commits > 0"
                )))
            }
        }
    }
    Ok(())
}

/// Set `properties` on the latest table state `snapshot` in one
/// `SET TBLPROPERTIES` commit (see the module docs). Nothing is committed
/// when every value is already set (`version` None).
pub async fn set_table_properties(
    snapshot: &Snapshot,
    properties: &BTreeMap<String, String>,
) -> Result<CommitOutcome> {
    if properties.is_empty() {
        return Err(Error::InvalidArgument(
            "no table property to set".to_string(),
        ));
    }
    let metadata = snapshot.metadata();
    let mut set: BTreeMap<String, String> = BTreeMap::new();
    for (key, value) in properties {
        let key = canonical_key(key)?;
        if set.insert(key.clone(), value.clone()).is_some() {
            return Err(Error::InvalidArgument(format!(
                "table property {key} is given twice (names are matched without case)"
            )));
        }
    }
    let mut new_metadata = metadata.clone();
    for (k, v) in &set {
        new_metadata
            .configuration
            .insert(k.clone(), Some(v.clone()));
    }
    check_values(&new_metadata.configuration)?;
    // Deletion vectors on: the protocol gains the feature (reader 3 / writer
    // 7, keeping what the old versions implied) if it lacks it.
    let mut protocol = None;
    if TableProperties::of(&new_metadata).enable_deletion_vectors() {
        protocol = features::with_deletion_vectors(snapshot.protocol());
        if protocol.is_some() || !TableProperties::of(metadata).enable_deletion_vectors() {
            if let Some(v) =
                features::iceberg::forbids_deletion_vectors(snapshot.protocol(), metadata)
            {
                // Delta Spark: DELTA_ICEBERG_COMPAT_VIOLATION.DELETION_VECTORS_SHOULD_BE_DISABLED
                return Err(Error::Unsupported(format!(
                    "deletion vectors cannot be enabled: the table has icebergCompatV{v} \
                     active (delta.enableIcebergCompatV{v}=true), which requires them disabled"
                )));
            }
        }
    }
    if new_metadata.configuration == metadata.configuration && protocol.is_none() {
        return Ok(CommitOutcome::default());
    }
    if set.contains_key(UNIVERSAL_FORMAT_ENABLED_FORMATS) {
        check_universal_format(&new_metadata.configuration)?;
        let p = protocol.as_ref().unwrap_or(snapshot.protocol());
        if let IcebergMirror::Unsupported(why) = iceberg_mirror(p, &new_metadata) {
            return Err(Error::InvalidArgument(why));
        }
    }
    let mut parameters = Map::new();
    parameters.insert("properties".into(), json!(json!(set).to_string()));
    let mut txn = Transaction::new(snapshot, "SET TBLPROPERTIES")?
        .with_parameters(parameters)
        .with_metadata(new_metadata)
        // A metadata change conflicts with any concurrent commit: the
        // caller reloads and sets again.
        .with_max_attempts(1);
    if let Some(p) = protocol {
        txn = txn.with_protocol(p);
    }
    txn.commit(&mut FixedActions {
        actions: Vec::new(),
        metrics: Map::new(),
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::features::properties::{
        DELETED_FILE_RETENTION_DURATION, ISOLATION_LEVEL, TARGET_FILE_SIZE,
    };

    #[test]
    fn keys_are_canonical_and_creation_only_ones_refused() {
        assert_eq!(
            canonical_key("DELTA.checkpointinterval").unwrap(),
            CHECKPOINT_INTERVAL
        );
        assert_eq!(canonical_key("owner").unwrap(), "owner");
        assert!(matches!(
            canonical_key("delta.columnMapping.mode"),
            Err(Error::Unsupported(_))
        ));
        assert!(matches!(
            canonical_key("delta.enableIcebergCompatV3"),
            Err(Error::Unsupported(_))
        ));
        assert!(matches!(
            canonical_key("delta.noSuchThing"),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(canonical_key(" "), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn values_are_checked() {
        let conf = |k: &str, v: &str| HashMap::from([(k.to_string(), Some(v.to_string()))]);
        assert!(check_values(&conf(CHECKPOINT_INTERVAL, "5")).is_ok());
        assert!(check_values(&conf(CHECKPOINT_INTERVAL, "0")).is_err());
        assert!(check_values(&conf(DELETED_FILE_RETENTION_DURATION, "forever")).is_err());
        assert!(check_values(&conf(ISOLATION_LEVEL, "Chaos")).is_err());
        assert!(check_values(&conf(TARGET_FILE_SIZE, "big")).is_err());
    }
}
