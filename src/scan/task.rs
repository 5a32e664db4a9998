//! Scan tasks as plain, serializable data: everything an executor needs to
//! read one file (or row-group range) without replaying the log.

use std::collections::HashMap;

use arrow_array::RecordBatch;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::format::descriptor::DeletionVectorDescriptor;
use crate::io::TableStore;
use crate::log::schema::{ColumnMappingMode, StructType};
use crate::scan::{read_file, ScanFile, ScanSpec};
use crate::snapshot::Snapshot;

/// One unit of scan work, as JSON-able data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanTask {
    pub table_uri: String,
    #[serde(default)]
    pub storage_options: HashMap<String, String>,
    pub path: String,
    pub size: u64,
    #[serde(default)]
    pub partition_values: HashMap<String, Option<String>>,
    #[serde(default)]
    pub deletion_vector: Option<DeletionVectorDescriptor>,
    #[serde(default)]
    pub row_groups: Option<Vec<usize>>,
    pub schema_string: String,
    #[serde(default)]
    pub partition_columns: Vec<String>,
    /// "none", "name" or "id".
    pub column_mapping: String,
    #[serde(default)]
    pub columns: Option<Vec<String>>,
}

impl ScanTask {
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|source| Error::Json {
            context: "scan task".to_string(),
            source,
        })
    }

    pub fn from_json(text: &str) -> Result<ScanTask> {
        serde_json::from_str(text).map_err(|source| Error::Json {
            context: "scan task".to_string(),
            source,
        })
    }

    fn spec(&self) -> Result<ScanSpec> {
        Ok(ScanSpec {
            schema: StructType::parse(&self.schema_string)?,
            partition_columns: self.partition_columns.clone(),
            column_mapping: ColumnMappingMode::parse(&self.column_mapping)?,
            columns: self.columns.clone(),
            with_metadata_columns: false,
        })
    }

    /// Read this task's rows (DVs applied).
    pub async fn read(&self) -> Result<Vec<RecordBatch>> {
        let store = TableStore::open(&self.table_uri, &self.storage_options)?;
        let file = ScanFile {
            path: self.path.clone(),
            size: self.size,
            partition_values: self.partition_values.clone(),
            deletion_vector: self.deletion_vector.clone(),
            row_groups: self.row_groups.clone(),
        };
        read_file(&store, &self.spec()?, &file).await
    }

    /// The Arrow schema of what [`ScanTask::read`] returns.
    pub fn output_schema(&self) -> Result<arrow_schema::SchemaRef> {
        self.spec()?.output_schema()
    }
}

/// One task per live file of `snapshot`.
pub fn plan_tasks(
    snapshot: &Snapshot,
    table_uri: &str,
    storage_options: &HashMap<String, String>,
    columns: Option<Vec<String>>,
) -> Result<Vec<ScanTask>> {
    let spec = ScanSpec::for_snapshot(snapshot, columns.clone());
    spec.output_schema()?; // unknown columns fail here, on the driver
    Ok(super::plan(snapshot)?
        .into_iter()
        .map(|f| ScanTask {
            table_uri: table_uri.to_string(),
            storage_options: storage_options.clone(),
            path: f.path,
            size: f.size,
            partition_values: f.partition_values,
            deletion_vector: f.deletion_vector,
            row_groups: f.row_groups,
            schema_string: snapshot.metadata().schema_string.clone(),
            partition_columns: snapshot.metadata().partition_columns.clone(),
            column_mapping: snapshot.column_mapping().to_string(),
            columns: columns.clone(),
        })
        .collect())
}
