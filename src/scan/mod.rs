//! Scans: read a snapshot's data files into Arrow batches with the rows that
//! deletion vectors mark already gone.
//!
//! Each file's DV becomes a parquet row selection before decoding, so deleted
//! rows are never decoded. Row indexes are always physical: a row's index is
//! its position in the whole file, derived from row-group row counts, never
//! from its position in an output batch (see [`selection`]).

pub mod selection;
pub mod task;

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{new_null_array, ArrayRef, RecordBatch, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use futures::TryStreamExt;
use parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use parquet::arrow::ProjectionMask;
use roaring::RoaringTreemap;

use crate::dv;
use crate::error::{Error, Result};
use crate::format::descriptor::DeletionVectorDescriptor;
use crate::io::TableStore;
use crate::log::schema::{self, ColumnMappingMode, StructType};
use crate::snapshot::Snapshot;

/// Name of the optional metadata column with each row's physical index.
pub const ROW_INDEX_COLUMN: &str = "_row_index";
/// Name of the optional metadata column with each row's data file path.
pub const FILE_PATH_COLUMN: &str = "_file_path";

/// One data file to read (or a row-group range of it).
#[derive(Debug, Clone)]
pub struct ScanFile {
    /// Path relative to the table root (URL-decoded) or an absolute URI.
    pub path: String,
    pub size: u64,
    pub partition_values: HashMap<String, Option<String>>,
    pub deletion_vector: Option<DeletionVectorDescriptor>,
    /// Row groups to read (all when `None`).
    pub row_groups: Option<Vec<usize>>,
}

/// What a scan reads and returns.
#[derive(Debug, Clone)]
pub struct ScanSpec {
    pub schema: StructType,
    pub partition_columns: Vec<String>,
    pub column_mapping: ColumnMappingMode,
    /// Logical column names to return (all when `None`), in this order.
    pub columns: Option<Vec<String>>,
    /// Add `_row_index` (physical row index, u64) and `_file_path` columns.
    pub with_metadata_columns: bool,
}

impl ScanSpec {
    pub fn for_snapshot(snapshot: &Snapshot, columns: Option<Vec<String>>) -> Self {
        ScanSpec {
            schema: snapshot.schema().clone(),
            partition_columns: snapshot.metadata().partition_columns.clone(),
            column_mapping: snapshot.column_mapping(),
            columns,
            with_metadata_columns: false,
        }
    }

    /// The output schema: the requested logical columns (table order when
    /// none are named), then the metadata columns if asked for.
    pub fn output_schema(&self) -> Result<SchemaRef> {
        let logical = self.schema.to_arrow(ColumnMappingMode::None, false)?;
        let mut fields: Vec<Field> = match &self.columns {
            None => logical
                .fields()
                .iter()
                .map(|f| f.as_ref().clone())
                .collect(),
            Some(names) => names
                .iter()
                .map(|n| {
                    logical.field_with_name(n).cloned().map_err(|_| {
                        Error::InvalidArgument(format!("no column {n:?} in the table"))
                    })
                })
                .collect::<Result<_>>()?,
        };
        if self.with_metadata_columns {
            fields.push(Field::new(ROW_INDEX_COLUMN, DataType::UInt64, false));
            fields.push(Field::new(FILE_PATH_COLUMN, DataType::Utf8, false));
        }
        Ok(Arc::new(Schema::new(fields)))
    }
}

/// The files of a snapshot as scan tasks (one per file).
pub fn plan(snapshot: &Snapshot) -> Result<Vec<ScanFile>> {
    Ok(snapshot
        .files()?
        .into_iter()
        .map(|f| ScanFile {
            size: u64::try_from(f.add.size).unwrap_or(0),
            partition_values: f.add.partition_values,
            deletion_vector: f.add.deletion_vector,
            row_groups: None,
            path: f.path,
        })
        .collect())
}

fn parquet_error(file: &str, e: impl std::fmt::Display) -> Error {
    Error::Parquet {
        file: file.to_string(),
        detail: e.to_string(),
    }
}

/// Read one scan file: DV applied as a row selection, columns projected by
/// physical name, renamed to logical names and cast to the table's types,
/// partition columns filled in, columns missing from the file as nulls.
pub async fn read_file(
    store: &TableStore,
    spec: &ScanSpec,
    file: &ScanFile,
) -> Result<Vec<RecordBatch>> {
    let out_schema = spec.output_schema()?;
    let deleted: Option<RoaringTreemap> = match &file.deletion_vector {
        Some(d) => dv::load_many(store, &[d]).await?.pop(),
        None => None,
    };
    let location = store.resolve(&file.path)?;
    let reader = crate::io::parquet::StoreFileReader::new(store.clone(), location, file.size);
    let builder = ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .map_err(|e| parquet_error(&file.path, e))?;
    let row_group_rows: Vec<u64> = builder
        .metadata()
        .row_groups()
        .iter()
        .map(|rg| u64::try_from(rg.num_rows()).unwrap_or(0))
        .collect();
    let chosen: Vec<usize> = file
        .row_groups
        .clone()
        .unwrap_or_else(|| (0..row_group_rows.len()).collect());
    let plan = selection::plan(&row_group_rows, &chosen, deleted.as_ref(), &file.path)?;

    // Physical names of the requested data columns, and where each comes from.
    let file_schema = builder.schema().clone();
    let mut wanted_roots = Vec::new();
    let mut sources: Vec<Source> = Vec::new();
    for field in out_schema.fields() {
        let name = field.name();
        if spec.with_metadata_columns && (name == ROW_INDEX_COLUMN || name == FILE_PATH_COLUMN) {
            sources.push(if name == ROW_INDEX_COLUMN {
                Source::RowIndex
            } else {
                Source::FilePath
            });
            continue;
        }
        if spec.partition_columns.iter().any(|p| p == name) {
            sources.push(Source::Partition(name.clone()));
            continue;
        }
        let delta_field = spec
            .schema
            .field(name)
            .ok_or_else(|| Error::InvalidArgument(format!("no column {name:?} in the table")))?;
        let physical = delta_field.physical_name(spec.column_mapping)?.to_string();
        match file_schema.index_of(&physical) {
            Ok(i) => {
                wanted_roots.push(i);
                sources.push(Source::File(physical));
            }
            Err(_) => sources.push(Source::Missing),
        }
    }
    let mask = ProjectionMask::roots(builder.parquet_schema(), wanted_roots);
    let stream = builder
        .with_projection(mask)
        .with_row_groups(chosen)
        .with_row_selection(plan.selection.clone())
        .build()
        .map_err(|e| parquet_error(&file.path, e))?;
    let batches: Vec<RecordBatch> = stream
        .try_collect()
        .await
        .map_err(|e| parquet_error(&file.path, e))?;

    let mut kept = plan.kept_rows();
    let mut out = Vec::with_capacity(batches.len());
    for batch in batches {
        let n = batch.num_rows();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(out_schema.fields().len());
        for (field, source) in out_schema.fields().iter().zip(&sources) {
            let column: ArrayRef = match source {
                Source::File(physical) => {
                    let c = batch.column_by_name(physical).cloned().ok_or_else(|| {
                        parquet_error(&file.path, format!("column {physical} vanished"))
                    })?;
                    if c.data_type() == field.data_type() {
                        c
                    } else {
                        arrow_cast::cast(&c, field.data_type())
                            .map_err(|e| parquet_error(&file.path, e))?
                    }
                }
                Source::Missing => new_null_array(field.data_type(), n),
                Source::Partition(name) => {
                    let delta = spec.schema.field(name).ok_or_else(|| {
                        Error::Schema(format!("partition column {name} not in schema"))
                    })?;
                    let key = delta.physical_name(spec.column_mapping)?;
                    let raw = file.partition_values.get(key).cloned().flatten();
                    let values = vec![raw.as_deref(); n];
                    schema::partition_array(name, &delta.data_type, &values)?
                }
                Source::RowIndex => Arc::new(UInt64Array::from_iter_values(kept.by_ref().take(n))),
                Source::FilePath => {
                    Arc::new(arrow_array::StringArray::from(vec![file.path.as_str(); n]))
                }
            };
            columns.push(column);
        }
        out.push(
            RecordBatch::try_new_with_options(
                out_schema.clone(),
                columns,
                &arrow_array::RecordBatchOptions::new().with_row_count(Some(n)),
            )
            .map_err(|e| parquet_error(&file.path, e))?,
        );
    }
    Ok(out)
}

enum Source {
    File(String),
    Missing,
    Partition(String),
    RowIndex,
    FilePath,
}

/// Read a whole snapshot (files one after another).
pub async fn read_snapshot(snapshot: &Snapshot, spec: &ScanSpec) -> Result<Vec<RecordBatch>> {
    let mut out = Vec::new();
    for file in plan(snapshot)? {
        out.extend(read_file(snapshot.store(), spec, &file).await?);
    }
    Ok(out)
}
