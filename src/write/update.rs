//! UPDATE in this process: files ruled out by partitions and stats are not
//! read, the rest are read with the predicate applied, the `SET` values
//! computed with [`ValueExpr`], and the resulting change stream written by a
//! [`ChangeWriter`] and committed as one UPDATE (see [`super::changes`]).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, RecordBatch};
use futures::TryStreamExt;
use serde_json::{json, Value};

use super::changes::{
    assign_values, check_can_rewrite, commit_changes_since, dml_metadata, ChangeWriter, DmlMetrics,
    DmlOperation, DmlOptions,
};
use super::data::rules::{refuse_identity_update, ColumnValues};
use super::data::TableLayout;
use super::{live_files, read_concurrency};
use crate::error::{Error, Result};
use crate::expr::{Binding, Predicate, ValueExpr};
use crate::log::actions::Add;
use crate::log::schema::{ColumnMappingMode, DataType, StructField};
use crate::scan::{self, DeletedRows, ScanSpec};
use crate::table::snapshot::Snapshot;

/// UPDATE table SET column = value, … WHERE predicate, in this process.
/// `assignments` are (column, SQL value) pairs (see [`crate::expr`] for the
/// grammar); `predicate` None updates every row.
pub async fn update_where(
    snapshot: &Snapshot,
    predicate: Option<&str>,
    assignments: &[(String, String)],
    options: &DmlOptions,
) -> Result<DmlMetrics> {
    let started = Instant::now();
    let dvs = check_can_rewrite(snapshot, options.delete.allow_copy_on_write)?;
    let schema = snapshot.schema();
    let parts = &snapshot.metadata().partition_columns;
    let mode = snapshot.column_mapping();
    let zone = &options.writer.time_zone;
    let set = bind_assignments(snapshot, assignments, zone)?;
    // Generated columns the SET leaves alone are recomputed from the new row.
    let generated = ColumnValues::new(schema, zone)?;
    let pred = predicate
        .map(|text| {
            Predicate::new_in_zone(text, schema, parts, mode, Binding::Strict, zone).map(Arc::new)
        })
        .transpose()?;
    let store = snapshot.store();
    let mut spec = ScanSpec::for_snapshot(snapshot, None);
    spec.with_metadata_columns = true;
    spec.filter = pred.clone();
    spec.filter_rows = true;
    let files = scan::plan(snapshot, pred.as_deref())?;
    let live = live_files(snapshot)?;
    let targets: Vec<Add> = files
        .iter()
        .filter_map(|f| live.get(&f.path).map(|l| l.add.clone()))
        .collect();
    let read_files: BTreeSet<String> = files.iter().map(|f| f.path.clone()).collect();
    // On a table that tracks rows without naming its materialized columns,
    // the names are assigned here and committed with the rows.
    let metadata = dml_metadata(snapshot, options.new_metadata.as_ref());
    let layout = match &metadata {
        Some(m) => TableLayout::of(snapshot.protocol(), m)?,
        None => TableLayout::of_snapshot(snapshot),
    };
    let mut writer = ChangeWriter::try_new(
        store.clone(),
        layout,
        targets,
        dvs,
        options.delete.clone(),
        options.writer.clone(),
    )?;
    // Updated rows keep their ids: the materialized row-id column is read
    // with the rows (NULL where a file has none), no second read.
    if let Some(id) = writer.materialized_row_id_column() {
        spec.schema
            .fields
            .push(StructField::internal(id, DataType::Long));
    }
    // Time spent writing (the rest of the loop waits for reads).
    let mut rewrite = std::time::Duration::ZERO;
    let written = async {
        // Candidate files streamed a few ahead of the writer, batch by batch.
        let work = files.into_iter().map(|f| (f, DeletedRows::Load)).collect();
        let read = scan::ReadOptions {
            prefetch_files: read_concurrency(),
            ..scan::ReadOptions::default()
        };
        let mut reads = scan::stream_files(store.clone(), spec.clone(), work, read);
        while let Some(batch) = reads.try_next().await? {
            let t = Instant::now();
            let updated = apply_assignments(&batch, &set, &generated)?;
            writer.write(&updated).await?;
            rewrite += t.elapsed();
        }
        let t = Instant::now();
        let out = writer.finish().await;
        rewrite += t.elapsed();
        out
    }
    .await;
    let prepared = match written {
        Ok(p) => p,
        Err(e) => {
            writer.abort().await;
            return Err(e);
        }
    };
    let ms = |d: std::time::Duration| {
        Value::String(u64::try_from(d.as_millis()).unwrap_or(u64::MAX).to_string())
    };
    let mut options = options.clone();
    options.new_metadata = metadata;
    options.read_files = Some(read_files);
    options
        .extra_metrics
        .insert("rewriteTimeMs".into(), ms(rewrite));
    options.extra_metrics.insert(
        "scanTimeMs".into(),
        ms(started.elapsed().saturating_sub(rewrite)),
    );
    if !options.parameters.contains_key("predicate") {
        options.parameters.insert(
            "predicate".into(),
            Value::String(predicate.map_or_else(|| "[]".into(), |p| json!([p]).to_string())),
        );
    }
    commit_changes_since(
        snapshot,
        DmlOperation::Update,
        vec![prepared],
        &options,
        started,
        None,
    )
    .await
}

/// `SET` values bound to the table: (column position, value) per assignment.
fn bind_assignments(
    snapshot: &Snapshot,
    assignments: &[(String, String)],
    zone: &crate::expr::TimeZone,
) -> Result<Vec<(usize, ValueExpr, arrow_schema::DataType)>> {
    let schema = snapshot.schema();
    let arrow = schema.to_arrow(ColumnMappingMode::None, false)?;
    let parts = &snapshot.metadata().partition_columns;
    let mut out: Vec<(usize, ValueExpr, arrow_schema::DataType)> = Vec::new();
    if assignments.is_empty() {
        return Err(Error::InvalidArgument(
            "UPDATE needs at least one column to set".into(),
        ));
    }
    for (column, text) in assignments {
        let i = schema
            .fields
            .iter()
            .position(|f| f.name.eq_ignore_ascii_case(column))
            .ok_or_else(|| {
                let names: Vec<&str> = schema.fields.iter().map(|f| f.name.as_str()).collect();
                Error::InvalidArgument(format!(
                    "UPDATE sets column {column:?}, which is not in the table (columns: {})",
                    names.join(", ")
                ))
            })?;
        if let Some(f) = schema.fields.get(i) {
            refuse_identity_update(f)?;
        }
        if out.iter().any(|(j, _, _)| *j == i) {
            return Err(Error::InvalidArgument(format!(
                "UPDATE sets column {column:?} more than once"
            )));
        }
        let target = arrow
            .fields()
            .get(i)
            .map(|f| f.data_type().clone())
            .ok_or_else(|| Error::Internal(format!("schema field {i} missing")))?;
        let value = ValueExpr::new_in_zone(text, schema, parts, snapshot.column_mapping(), zone)?;
        value.check_assignable(column, &target)?;
        out.push((i, value, target));
    }
    Ok(out)
}

/// `batch` (table columns, then metadata columns) with the `SET` values in
/// place of their columns, cast to the columns' types.
fn apply_assignments(
    batch: &RecordBatch,
    set: &[(usize, ValueExpr, arrow_schema::DataType)],
    generated: &ColumnValues,
) -> Result<RecordBatch> {
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    assign_values(&mut columns, batch.schema().fields(), batch, set, "UPDATE")?;
    if !generated.is_empty() {
        let assigned: Vec<usize> = set.iter().map(|(i, _, _)| *i).collect();
        generated.fill(&mut columns, batch.num_rows(), &assigned, false)?;
    }
    RecordBatch::try_new(batch.schema(), columns).map_err(|e| {
        // A NULL into a NOT NULL column is the caller's mistake.
        Error::InvalidArgument(format!("UPDATE: {e}"))
    })
}
