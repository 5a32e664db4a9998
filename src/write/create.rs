//! Creating a table (version 0 from data files already written) and enabling
//! deletion vectors on an existing table. The protocol comes from
//! [`crate::log::features`]; the commit is a [`Transaction`], created with
//! put-if-absent, so a concurrent creator or writer makes this a
//! [`Error::Conflict`] with nothing committed.

use std::collections::HashMap;

use serde_json::{json, Map};

use super::now_ms;
use super::transaction::{FixedActions, Transaction};
use crate::error::{Error, Result};
use crate::io::TableStore;
use crate::log::actions::{Action, Add, Format, Metadata, RecordCount};
use crate::log::features::{self, ENABLE_DELETION_VECTORS, ENABLE_ROW_TRACKING};
use crate::log::schema::{ColumnMappingMode, StructType};
use crate::table::snapshot::Snapshot;

/// How the commit that creates a table is recorded (`commitInfo.operation`
/// and its `operationParameters`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CreateOperation {
    /// `CREATE TABLE AS SELECT` with `partitionBy` (Delta Spark's CTAS;
    /// deltadv's `write_table`).
    #[default]
    CreateTableAsSelect,
    /// `WRITE` with `mode` (the DataFrameWriter's save mode, as Spark names
    /// it: `Append`, `Overwrite`, `ErrorIfExists`, `Ignore`) and
    /// `partitionBy`: what Delta Spark's `df.write.format("delta").save(path)`
    /// records when it creates the table.
    Write { mode: &'static str },
}

impl CreateOperation {
    /// The `commitInfo.operation` name.
    pub fn name(self) -> &'static str {
        match self {
            CreateOperation::CreateTableAsSelect => "CREATE TABLE AS SELECT",
            CreateOperation::Write { .. } => "WRITE",
        }
    }
}

/// How a table is created.
#[derive(Debug, Clone, Default)]
pub struct CreateOptions {
    pub partition_by: Vec<String>,
    /// Table properties (`metaData.configuration`).
    pub configuration: HashMap<String, String>,
    /// Turn deletion vectors on (the feature and `delta.enableDeletionVectors=true`).
    pub enable_deletion_vectors: bool,
    /// Liquid clustering columns (`CLUSTER BY`; nested fields dot-separated).
    pub cluster_by: Vec<String>,
    /// How the commit is recorded.
    pub operation: CreateOperation,
    /// The `txn` the commit carries, and its operation (`STREAMING UPDATE`
    /// for a streaming batch).
    pub app: super::app_txn::AppCommit,
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
    // Iceberg compatibility: column mapping and (V3) row tracking when
    // unset; conflicting settings refused.
    features::iceberg::new_table_configuration(
        &mut configuration,
        options.enable_deletion_vectors,
    )?;
    let mode = crate::log::schema::column_mapping_mode(&configuration)?;
    if mode != ColumnMappingMode::None && !crate::log::schema::is_column_mapped(schema) {
        return Err(Error::InvalidArgument(format!(
            "creating a table with column mapping ({mode}) needs a schema with field ids and \
             physical names (write::files assigns them)"
        )));
    }
    if features::configured_true(&configuration, ENABLE_ROW_TRACKING) {
        for (k, v) in features::row_tracking_properties() {
            configuration.entry(k).or_insert(Some(v));
        }
    }
    let requested = features::take_feature_requests(&mut configuration)?;
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
    let mut protocol = features::new_table_protocol(
        schema,
        options.enable_deletion_vectors,
        &metadata.configuration,
    );
    for (name, reader_writer) in requested {
        protocol = features::with_feature(&protocol, name, reader_writer);
    }
    let clustering = features::clustering::resolve_cluster_by(
        schema,
        &options.partition_by,
        &options.cluster_by,
        crate::log::schema::column_mapping_mode(&metadata.configuration)?,
    )?;
    let mut domains = Vec::new();
    if !clustering.is_empty() {
        protocol = features::clustering::with_clustering(&protocol);
        domains.push(Action::DomainMetadata(
            features::clustering::clustering_domain(&clustering)?,
        ));
    }
    features::check_append(&protocol, &metadata, schema)?;
    let mut parameters = Map::new();
    if let CreateOperation::Write { mode } = options.operation {
        parameters.insert("mode".into(), json!(mode));
    }
    parameters.insert(
        "partitionBy".into(),
        json!(serde_json::to_string(&options.partition_by).unwrap_or_default()),
    );
    if !clustering.is_empty() {
        let names: Vec<String> = clustering.iter().map(|c| c.name()).collect();
        parameters.insert("clusterBy".into(), json!(json!(names).to_string()));
    }
    let mut metrics = Map::new();
    metrics.insert("numFiles".into(), json!(adds.len().to_string()));
    metrics.insert("numOutputRows".into(), json!(rows.to_string()));
    let mut changes = FixedActions {
        actions: domains
            .into_iter()
            .chain(adds.into_iter().map(|a| Action::Add(Box::new(a))))
            .collect(),
        metrics,
    };
    let outcome = options
        .app
        .apply(
            Transaction::create(store.clone(), protocol, metadata, options.operation.name())
                .with_parameters(parameters)
                .blind_append(),
        )
        .commit(&mut changes)
        .await?;
    outcome
        .version
        .ok_or_else(|| Error::Internal("table creation committed nothing".into()))
}

/// Turn deletion vectors on: the protocol gains the deletionVectors feature
/// (reader 3 / writer 7, keeping what the old versions implied) and
/// `delta.enableDeletionVectors` becomes `true`, in one `SET TBLPROPERTIES`
/// commit ([`super::properties::set_table_properties`]). Returns the new
/// version, or the current one when DVs are already on.
pub async fn enable_deletion_vectors(snapshot: &Snapshot) -> Result<u64> {
    let properties =
        std::collections::BTreeMap::from([(ENABLE_DELETION_VECTORS.to_string(), "true".into())]);
    let outcome = super::properties::set_table_properties(snapshot, &properties).await?;
    Ok(outcome.version.unwrap_or(snapshot.version()))
}
