//! Creating a table (version 0 from data files already written) and enabling
//! deletion vectors on an existing table. The protocol comes from
//! [`crate::log::features`]; the commit is created with put-if-absent, so a
//! concurrent creator or writer makes this a [`Error::Conflict`] with nothing
//! committed.

use std::collections::HashMap;

use serde_json::json;

use super::commit::{conflict, try_commit};
use super::{now_ms, ENGINE_INFO};
use crate::error::{Error, Result};
use crate::io::TableStore;
use crate::log::actions::{Action, Add, Format, Metadata, RecordCount};
use crate::log::features::{self, ENABLE_DELETION_VECTORS};
use crate::log::schema::StructType;
use crate::table::snapshot::Snapshot;

/// How a table is created.
#[derive(Debug, Clone, Default)]
pub struct CreateOptions {
    pub partition_by: Vec<String>,
    /// Table properties (`metaData.configuration`).
    pub configuration: HashMap<String, String>,
    /// Turn deletion vectors on (the feature and `delta.enableDeletionVectors=true`).
    pub enable_deletion_vectors: bool,
}

/// Commit version 0 of a new table at `store` with `schema` and the data files
/// `adds` (already written under the table root). Returns the version (0).
pub async fn create_table(
    store: &TableStore,
    schema: &StructType,
    adds: Vec<Add>,
    options: &CreateOptions,
) -> Result<u64> {
    for column in &options.partition_by {
        if schema.field(column).is_none() {
            return Err(Error::InvalidArgument(format!(
                "partition column {column:?} is not in the schema"
            )));
        }
    }
    let mut configuration: HashMap<String, Option<String>> = options
        .configuration
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    if options.enable_deletion_vectors {
        configuration
            .entry(ENABLE_DELETION_VECTORS.to_string())
            .or_insert_with(|| Some("true".to_string()));
    }
    let now = now_ms();
    let mut rows: i64 = 0;
    for add in &adds {
        let stats = add.stats.as_deref().unwrap_or("{}");
        rows += RecordCount::parse(stats, &add.path)?
            .num_records
            .unwrap_or(0);
    }
    let metadata = Metadata {
        id: uuid::Uuid::new_v4().to_string(),
        name: None,
        description: None,
        format: Format {
            provider: "parquet".to_string(),
            options: HashMap::new(),
        },
        schema_string: schema.to_schema_string(),
        partition_columns: options.partition_by.clone(),
        configuration,
        created_time: Some(now),
    };
    let protocol = features::new_table_protocol(schema, options.enable_deletion_vectors);
    let info = json!({
        "timestamp": now,
        "operation": "CREATE TABLE AS SELECT",
        "operationParameters": {
            "partitionBy": serde_json::to_string(&options.partition_by).unwrap_or_default(),
        },
        "isolationLevel": "Serializable",
        "isBlindAppend": true,
        "operationMetrics": {
            "numFiles": adds.len().to_string(),
            "numOutputRows": rows.to_string(),
        },
        "engineInfo": ENGINE_INFO,
        "txnId": uuid::Uuid::new_v4().to_string(),
    });
    let mut actions = vec![
        Action::CommitInfo(info),
        Action::Protocol(protocol),
        Action::Metadata(metadata),
    ];
    actions.extend(adds.into_iter().map(|a| Action::Add(Box::new(a))));
    if !try_commit(store, 0, &actions).await? {
        return Err(conflict(
            0,
            format!("a Delta table was created at {} meanwhile", store.url()),
        ));
    }
    Ok(0)
}

/// Turn deletion vectors on: the protocol gains the deletionVectors feature
/// (reader 3 / writer 7, keeping what the old versions implied) and
/// `delta.enableDeletionVectors` becomes `true`, in one commit. Returns the
/// new version, or the current one when DVs are already on.
pub async fn enable_deletion_vectors(snapshot: &Snapshot) -> Result<u64> {
    let protocol = snapshot.protocol();
    let metadata = snapshot.metadata();
    let upgraded = features::with_deletion_vectors(protocol);
    let property_on = features::property_is_true(metadata, ENABLE_DELETION_VECTORS);
    if upgraded.is_none() && property_on {
        return Ok(snapshot.version());
    }
    let mut new_metadata = metadata.clone();
    new_metadata.configuration.insert(
        ENABLE_DELETION_VECTORS.to_string(),
        Some("true".to_string()),
    );
    let version = snapshot.version() + 1;
    let info = json!({
        "timestamp": now_ms(),
        "operation": "SET TBLPROPERTIES",
        "operationParameters": {
            "properties": json!({ENABLE_DELETION_VECTORS: "true"}).to_string(),
        },
        "readVersion": snapshot.version(),
        "isolationLevel": "Serializable",
        "isBlindAppend": false,
        "engineInfo": ENGINE_INFO,
        "txnId": uuid::Uuid::new_v4().to_string(),
    });
    let mut actions = vec![Action::CommitInfo(info)];
    if let Some(p) = upgraded {
        actions.push(Action::Protocol(p));
    }
    actions.push(Action::Metadata(new_metadata));
    if !try_commit(snapshot.store(), version, &actions).await? {
        return Err(conflict(
            version,
            "a concurrent commit took this version; reload and enable again",
        ));
    }
    Ok(version)
}
