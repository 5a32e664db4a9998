//! Copy-on-write fallback for tables that do not allow deletion vectors:
//! each touched file is rewritten without its deleted rows (a new, uniquely
//! named parquet file in the same directory, same physical schema and field
//! ids), and the commit removes the old file and adds the new one.

use std::collections::HashMap;

use bytes::Bytes;
use futures::TryStreamExt;
use parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use parquet::arrow::AsyncArrowWriter;
use roaring::RoaringTreemap;
use serde_json::json;

use super::fail_point;
use super::metrics::DeleteMetrics;
use crate::error::{Error, Result};
use crate::io::TableStore;
use crate::log::actions::{Action, Add, Remove};
use crate::log::path::normalize_path;
use crate::scan::{self, parquet_error, selection};

/// One file to rewrite.
pub struct Rewrite<'a> {
    pub add: &'a Add,
    /// Every row that must be gone from the new file.
    pub deleted: RoaringTreemap,
    /// Rows the current add already hides (its DV's cardinality).
    pub already_deleted: u64,
}

/// Whether an add path is an absolute URI (`s3://…`, `file:/…`) or an
/// absolute local path rather than relative to the table root.
fn is_absolute(path: &str) -> bool {
    path.starts_with('/')
        || path.split_once(':').is_some_and(|(scheme, _)| {
            scheme.len() > 1 && scheme.chars().all(|c| c.is_ascii_alphanumeric())
        })
}

/// The materialized row tracking columns `[id, version]` of a table, and
/// the field ids they carry in data files (IcebergCompatV3's reserved ids,
/// [`crate::log::features::iceberg::row_tracking_field_ids`]).
pub type Tracking<'a> = (&'a [String; 2], Option<[i64; 2]>);

/// `batch` (rows of `add`'s file, physical schema) with the row tracking
/// columns `[id, version]` materialized: the file's values where it has
/// them, else `baseRowId` + the row's physical index (`indexes`, one per
/// row) and `defaultRowCommitVersion`, so the copied rows keep both; with
/// `field_ids`, both columns carry them.
fn materialize_row_tracking(
    batch: &arrow_array::RecordBatch,
    add: &Add,
    (columns, field_ids): Tracking<'_>,
    indexes: &[i64],
    path: &str,
) -> Result<arrow_array::RecordBatch> {
    use arrow_array::{Array, ArrayRef, Int64Array};
    use std::sync::Arc;
    let n = batch.num_rows();
    let fills: [Int64Array; 2] = [
        indexes
            .iter()
            .map(|i| add.base_row_id.map(|b| b.saturating_add(*i)))
            .collect(),
        Int64Array::from(vec![add.default_row_commit_version; n]),
    ];
    let schema = batch.schema();
    let mut fields: Vec<arrow_schema::FieldRef> = schema.fields().iter().cloned().collect();
    let mut arrays: Vec<ArrayRef> = batch.columns().to_vec();
    let ids = field_ids.map_or([None, None], |[a, b]| [Some(a), Some(b)]);
    for ((name, fill), id) in columns.iter().zip(fills).zip(ids) {
        let with_id = |field: arrow_schema::Field| match id {
            Some(id) => {
                let mut metadata = field.metadata().clone();
                metadata.insert(
                    crate::log::schema::PARQUET_FIELD_ID_KEY.to_string(),
                    id.to_string(),
                );
                field.with_metadata(metadata)
            }
            None => field,
        };
        match schema.index_of(name) {
            Ok(i) => {
                let old = arrays
                    .get(i)
                    .and_then(|a| a.as_any().downcast_ref::<Int64Array>())
                    .ok_or_else(|| parquet_error(path, format!("column {name} is not int64")))?;
                let merged: Int64Array =
                    old.iter().zip(fill.iter()).map(|(o, f)| o.or(f)).collect();
                if let Some(slot) = arrays.get_mut(i) {
                    *slot = Arc::new(merged);
                }
                if let Some(slot) = fields.get_mut(i) {
                    *slot = Arc::new(with_id(slot.as_ref().clone()));
                }
            }
            Err(_) => {
                fields.push(Arc::new(with_id(arrow_schema::Field::new(
                    name.as_str(),
                    arrow_schema::DataType::Int64,
                    true,
                ))));
                arrays.push(Arc::new(fill));
            }
        }
    }
    arrow_array::RecordBatch::try_new(Arc::new(arrow_schema::Schema::new(fields)), arrays)
        .map_err(|e| parquet_error(path, e))
}

/// Rewrite `r`'s file without its deleted rows; the new add action, or None
/// when no row is left. With `tracking` (the table's materialized row
/// tracking columns), the copied rows keep their row ids and commit versions.
async fn rewrite(
    store: &TableStore,
    r: &Rewrite<'_>,
    now: i64,
    tracking: Option<Tracking<'_>>,
    tags: Option<&HashMap<String, Option<String>>>,
) -> Result<Option<(Add, u64)>> {
    let path = normalize_path(&r.add.path);
    let size = u64::try_from(r.add.size).unwrap_or(0);
    let meta = scan::load_metadata_for(store, &path, size).await?;
    let rows = scan::row_group_rows(meta.metadata(), &path)?;
    let all: Vec<usize> = (0..rows.len()).collect();
    let plan = selection::plan(&rows, &all, Some(&r.deleted), 1, &path)?;
    let kept = plan.kept_count();
    if kept == 0 {
        return Ok(None);
    }
    let schema = meta.schema().clone();
    let location = store.resolve(&path)?;
    let reader = crate::io::parquet::StoreFileReader::new(store.clone(), location, size);
    let stream = ParquetRecordBatchStreamBuilder::new_with_metadata(reader, meta)
        .with_row_selection(plan.selection.clone())
        .build()
        .map_err(|e| parquet_error(&path, e))?;
    let mut batches: Vec<arrow_array::RecordBatch> = stream
        .try_collect()
        .await
        .map_err(|e| parquet_error(&path, e))?;
    let mut schema = schema;
    if let Some(tracking) = tracking {
        // The physical indexes of the rows kept, in order.
        let total: u64 = rows.iter().sum();
        let mut kept_rows = (0..total)
            .filter(|i| !r.deleted.contains(*i))
            .map(|i| i64::try_from(i).unwrap_or(i64::MAX));
        for b in batches.iter_mut() {
            let indexes: Vec<i64> = kept_rows.by_ref().take(b.num_rows()).collect();
            *b = materialize_row_tracking(b, r.add, tracking, &indexes, &path)?;
        }
        if let Some(b) = batches.first() {
            schema = b.schema();
        }
    }
    let mut buf: Vec<u8> = Vec::new();
    {
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::SNAPPY)
            .build();
        let mut writer = AsyncArrowWriter::try_new(&mut buf, schema, Some(props))
            .map_err(|e| parquet_error(&path, e))?;
        for b in &batches {
            writer.write(b).await.map_err(|e| parquet_error(&path, e))?;
        }
        writer.close().await.map_err(|e| parquet_error(&path, e))?;
    }
    // Same directory (as written in the log, so its encoding is kept) for a
    // relative path; the table root for an absolute one (a file elsewhere, e.g.
    // a shallow clone's source): new files are always written under the root.
    let name = format!("part-{}-c000.snappy.parquet", uuid::Uuid::new_v4());
    let raw_dir = if is_absolute(&r.add.path) {
        ""
    } else {
        r.add.path.rfind('/').map_or("", |i| &r.add.path[..=i])
    };
    let new_raw = format!("{raw_dir}{name}");
    let new_size = buf.len();
    if !store
        .put_if_absent(&store.path(&normalize_path(&new_raw)), Bytes::from(buf))
        .await?
    {
        return Err(Error::InvalidArgument(format!("{new_raw} already exists")));
    }
    let add = Add {
        path: new_raw,
        partition_values: r.add.partition_values.clone(),
        size: i64::try_from(new_size).unwrap_or(i64::MAX),
        modification_time: now,
        data_change: true,
        stats: Some(json!({ "numRecords": kept }).to_string()),
        tags: tags.cloned(),
        deletion_vector: None,
        base_row_id: None,
        default_row_commit_version: None,
        // a plain write, as Delta Spark's: not part of a clustering ZCube
        clustering_provider: None,
    };
    Ok(Some((add, kept)))
}

/// The remove/add actions rewriting every file of `rewrites`, and metrics;
/// `tracking`: the table's materialized row tracking columns (copied rows keep
/// their ids and commit versions); `tags`: the new files' tags
/// ([`crate::log::features::iceberg::new_file_tags`]).
pub async fn prepare(
    store: &TableStore,
    rewrites: &[Rewrite<'_>],
    tracking: Option<Tracking<'_>>,
    tags: Option<&HashMap<String, Option<String>>>,
) -> Result<(Vec<Action>, DeleteMetrics)> {
    let now = super::now_ms();
    let mut m = DeleteMetrics::default();
    let mut actions = Vec::new();
    for r in rewrites {
        let newly = r.deleted.len().saturating_sub(r.already_deleted);
        if newly == 0 {
            continue;
        }
        fail_point("dv_write")?;
        let new = rewrite(store, r, now, tracking, tags).await?;
        m.num_deleted_rows += newly;
        m.num_removed_files += 1;
        actions.push(Action::Remove(Box::new(Remove {
            path: r.add.path.clone(),
            deletion_timestamp: Some(now),
            data_change: true,
            extended_file_metadata: Some(true),
            partition_values: Some(r.add.partition_values.clone()),
            size: Some(r.add.size),
            stats: None,
            tags: r.add.tags.clone(),
            deletion_vector: r.add.deletion_vector.clone(),
            base_row_id: r.add.base_row_id,
            default_row_commit_version: r.add.default_row_commit_version,
        })));
        if let Some((add, kept)) = new {
            m.num_added_files += 1;
            m.num_copied_rows += kept;
            actions.push(Action::Add(Box::new(add)));
        }
    }
    Ok((actions, m))
}
