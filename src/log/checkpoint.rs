//! Checkpoint rows as Arrow. `add` rows stay columnar ([`AddColumns`]): replay
//! only masks out the rows that newer commits shadow, and single rows become
//! [`Add`] values on demand. Every other action (few rows) goes through the
//! same JSON parser as commit lines. Pure: takes bytes and record batches,
//! no I/O.
//!
//! | module | what |
//! |---|---|
//! | this file | [`AddColumns`] (columnar `add` rows) and [`split_batch`] (one batch into adds and other actions) |
//! | [`read`] | whole checkpoint files as bytes: parquet or JSON parts, sidecar locations, [`CheckpointData`] |

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{
    Array, ArrayRef, BooleanArray, Int64Array, MapArray, RecordBatch, StringViewArray, StructArray,
};
use arrow_schema::DataType;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::format::descriptor::DeletionVectorDescriptor;
use crate::log::actions::{Action, Add};

pub mod read;
pub use read::{
    decode, decode_parquet, decode_parquet_on, decode_pieces, sidecar_location, CheckpointData,
    Pieces,
};

fn err(file: &str, detail: impl std::fmt::Display) -> Error {
    Error::CorruptLog {
        file: file.to_string(),
        detail: detail.to_string(),
    }
}

fn cast_to(array: &ArrayRef, to: &DataType, file: &str, name: &str) -> Result<ArrayRef> {
    if array.data_type() == to {
        return Ok(array.clone());
    }
    arrow_cast::cast(array, to).map_err(|e| err(file, format!("checkpoint column {name}: {e}")))
}

fn child(s: &StructArray, name: &str) -> Option<ArrayRef> {
    s.column_by_name(name).cloned()
}

fn strings(s: &StructArray, name: &str, file: &str) -> Result<Option<StringViewArray>> {
    child(s, name)
        .map(|a| cast_to(&a, &DataType::Utf8View, file, name).map(|a| a.as_string_view().clone()))
        .transpose()
}

fn longs(s: &StructArray, name: &str, file: &str) -> Result<Option<Int64Array>> {
    child(s, name)
        .map(|a| {
            cast_to(&a, &DataType::Int64, file, name).map(|a| a.as_primitive::<Int64Type>().clone())
        })
        .transpose()
}

fn map_at(map: &MapArray, i: usize) -> HashMap<String, Option<String>> {
    let mut out = HashMap::new();
    if map.is_null(i) {
        return out;
    }
    let entries = map.value(i);
    let keys = entries.column(0).as_string_opt::<i32>();
    let values = entries.column(1).as_string_opt::<i32>();
    if let (Some(k), Some(v)) = (keys, values) {
        for j in 0..entries.len() {
            let value = (!v.is_null(j)).then(|| v.value(j).to_string());
            out.insert(k.value(j).to_string(), value);
        }
    }
    out
}

/// Typed views of the `deletionVector` struct of add rows.
#[derive(Debug, Clone)]
pub struct DvColumns {
    valid: StructArray,
    storage_type: StringViewArray,
    path_or_inline_dv: StringViewArray,
    offset: Option<Int64Array>,
    size_in_bytes: Int64Array,
    cardinality: Int64Array,
    max_row_index: Option<Int64Array>,
}

/// The `add` rows of a checkpoint, columnar.
#[derive(Debug, Clone)]
pub struct AddColumns {
    file: String,
    /// Validity of the `add` struct itself: a row of another action has a null
    /// `add`, while a non-nullable child such as `path` may still read as set.
    rows: Option<arrow_buffer::NullBuffer>,
    path: StringViewArray,
    size: Option<Int64Array>,
    modification_time: Option<Int64Array>,
    data_change: Option<BooleanArray>,
    stats: Option<StringViewArray>,
    /// `stats_parsed.numRecords` / `.tightBounds`, when the checkpoint has them.
    parsed_num_records: Option<Int64Array>,
    parsed_tight_bounds: Option<BooleanArray>,
    partition_values: Option<MapArray>,
    tags: Option<MapArray>,
    dv: Option<DvColumns>,
    base_row_id: Option<Int64Array>,
    default_row_commit_version: Option<Int64Array>,
    clustering_provider: Option<StringViewArray>,
}

impl AddColumns {
    /// Typed views over an `add` struct array whose rows are all non-null.
    pub fn try_new(adds: &StructArray, file: &str) -> Result<Self> {
        let path = strings(adds, "path", file)?
            .ok_or_else(|| err(file, "checkpoint add has no path column"))?;
        let dv = match child(adds, "deletionVector") {
            Some(a) => {
                let s = a
                    .as_struct_opt()
                    .ok_or_else(|| err(file, "add.deletionVector is not a struct"))?
                    .clone();
                let need = |name: &str| -> Result<StringViewArray> {
                    strings(&s, name, file)?
                        .ok_or_else(|| err(file, format!("add.deletionVector has no {name}")))
                };
                let need_long = |name: &str| -> Result<Int64Array> {
                    longs(&s, name, file)?
                        .ok_or_else(|| err(file, format!("add.deletionVector has no {name}")))
                };
                Some(DvColumns {
                    storage_type: need("storageType")?,
                    path_or_inline_dv: need("pathOrInlineDv")?,
                    offset: longs(&s, "offset", file)?,
                    size_in_bytes: need_long("sizeInBytes")?,
                    cardinality: need_long("cardinality")?,
                    max_row_index: longs(&s, "maxRowIndex", file)?,
                    valid: s,
                })
            }
            None => None,
        };
        let map = |name: &str| child(adds, name).and_then(|a| a.as_map_opt().cloned());
        let parsed = child(adds, "stats_parsed").and_then(|a| a.as_struct_opt().cloned());
        let (parsed_num_records, parsed_tight_bounds) = match &parsed {
            Some(p) => (
                longs(p, "numRecords", file)?,
                child(p, "tightBounds").and_then(|a| a.as_boolean_opt().cloned()),
            ),
            None => (None, None),
        };
        Ok(AddColumns {
            rows: adds.nulls().cloned(),
            parsed_num_records,
            parsed_tight_bounds,
            file: file.to_string(),
            path,
            size: longs(adds, "size", file)?,
            modification_time: longs(adds, "modificationTime", file)?,
            data_change: child(adds, "dataChange").and_then(|a| a.as_boolean_opt().cloned()),
            stats: strings(adds, "stats", file)?,
            partition_values: match child(adds, "partitionValues") {
                None => None,
                Some(a) => Some(a.as_map_opt().cloned().ok_or_else(|| {
                    err(
                        file,
                        format!("add.partitionValues is {}, not a map", a.data_type()),
                    )
                })?),
            },
            tags: map("tags"),
            dv,
            base_row_id: longs(adds, "baseRowId", file)?,
            default_row_commit_version: longs(adds, "defaultRowCommitVersion", file)?,
            clustering_provider: strings(adds, "clusteringProvider", file)?,
        })
    }

    pub fn len(&self) -> usize {
        self.path.len()
    }

    pub fn is_empty(&self) -> bool {
        self.path.is_empty()
    }

    /// `add.path` as written (URL-encoded).
    pub fn raw_path(&self, i: usize) -> &str {
        self.path.value(i)
    }

    pub fn size(&self, i: usize) -> i64 {
        self.size.as_ref().map_or(0, |a| a.value(i))
    }

    pub fn modification_time(&self, i: usize) -> i64 {
        self.modification_time.as_ref().map_or(0, |a| a.value(i))
    }

    pub fn data_change(&self, i: usize) -> bool {
        self.data_change
            .as_ref()
            .is_none_or(|a| a.is_null(i) || a.value(i))
    }

    pub fn stats(&self, i: usize) -> Option<&str> {
        self.stats
            .as_ref()
            .filter(|a| !a.is_null(i))
            .map(|a| a.value(i))
    }

    /// `(numRecords, tightBounds)` from `stats_parsed` when present, else from
    /// the stats JSON.
    pub fn record_count(&self, i: usize) -> Result<(Option<i64>, Option<bool>)> {
        if let Some(n) = self.parsed_num_records.as_ref().filter(|n| n.is_valid(i)) {
            let tight = self
                .parsed_tight_bounds
                .as_ref()
                .filter(|t| t.is_valid(i))
                .map(|t| t.value(i));
            // Without a parsed tightBounds, only the JSON can say (absent = true).
            if tight.is_some() || self.stats(i).is_none() {
                return Ok((Some(n.value(i)), tight));
            }
        }
        match self.stats(i) {
            Some(s) if !s.is_empty() => {
                let c = crate::log::actions::RecordCount::parse(s, self.raw_path(i))?;
                Ok((c.num_records, c.tight_bounds))
            }
            _ => Ok((None, None)),
        }
    }

    /// Number of rows that hold an add.
    pub fn num_adds(&self) -> usize {
        (0..self.len()).filter(|&i| self.is_add(i)).count()
    }

    /// Whether row `i` holds an add (checkpoint rows of other actions do not).
    pub fn is_add(&self, i: usize) -> bool {
        self.rows.as_ref().is_none_or(|n| n.is_valid(i)) && self.path.is_valid(i)
    }

    pub fn partition_values(&self, i: usize) -> HashMap<String, Option<String>> {
        self.partition_values
            .as_ref()
            .map(|m| map_at(m, i))
            .unwrap_or_default()
    }

    pub fn has_dv(&self, i: usize) -> bool {
        self.dv
            .as_ref()
            .is_some_and(|d| d.valid.is_valid(i) && d.storage_type.is_valid(i))
    }

    /// The DV's unique id without building a descriptor.
    pub fn dv_unique_id(&self, i: usize) -> Option<String> {
        let d = self.dv.as_ref().filter(|_| self.has_dv(i))?;
        let offset = d
            .offset
            .as_ref()
            .filter(|o| o.is_valid(i))
            .map(|o| o.value(i));
        Some(match offset {
            Some(o) => format!(
                "{}{}@{o}",
                d.storage_type.value(i),
                d.path_or_inline_dv.value(i)
            ),
            None => format!(
                "{}{}",
                d.storage_type.value(i),
                d.path_or_inline_dv.value(i)
            ),
        })
    }

    /// The validated DV descriptor of row `i`, if it has one.
    pub fn descriptor(&self, i: usize) -> Result<Option<DeletionVectorDescriptor>> {
        let Some(d) = self.dv.as_ref().filter(|_| self.has_dv(i)) else {
            return Ok(None);
        };
        let offset = d
            .offset
            .as_ref()
            .filter(|o| o.is_valid(i))
            .map(|o| o.value(i));
        let max = d
            .max_row_index
            .as_ref()
            .filter(|m| m.is_valid(i))
            .map(|m| m.value(i));
        let desc = DeletionVectorDescriptor::try_new(
            d.storage_type.value(i),
            d.path_or_inline_dv.value(i),
            offset,
            d.size_in_bytes.value(i),
            d.cardinality.value(i),
        )
        .map_err(|e| err(&self.file, format!("add {}: {e}", self.raw_path(i))))?;
        Ok(Some(desc.with_max_row_index(
            max.and_then(|m| u64::try_from(m).ok()),
        )))
    }

    /// Row `i` as an [`Add`].
    pub fn add(&self, i: usize) -> Result<Add> {
        let opt_long =
            |a: &Option<Int64Array>| a.as_ref().filter(|a| a.is_valid(i)).map(|a| a.value(i));
        Ok(Add {
            path: self.raw_path(i).to_string(),
            partition_values: self.partition_values(i),
            size: self.size(i),
            modification_time: self.modification_time(i),
            data_change: self.data_change(i),
            stats: self.stats(i).map(str::to_string),
            tags: self
                .tags
                .as_ref()
                .filter(|t| t.is_valid(i))
                .map(|t| map_at(t, i)),
            deletion_vector: self.descriptor(i)?,
            base_row_id: opt_long(&self.base_row_id),
            default_row_commit_version: opt_long(&self.default_row_commit_version),
            clustering_provider: self
                .clustering_provider
                .as_ref()
                .filter(|a| a.is_valid(i))
                .map(|a| a.value(i).to_string()),
        })
    }
}

/// One checkpoint batch split into its `add` rows (columnar) and every other
/// action (parsed).
pub struct SplitBatch {
    pub adds: Option<AddColumns>,
    pub others: Vec<Action>,
}

/// Split a checkpoint record batch. Rows whose `add` is set go to `adds`;
/// rows with any other action are rendered as JSON and parsed.
pub fn split_batch(batch: &RecordBatch, file: &str) -> Result<SplitBatch> {
    let schema = batch.schema();
    let mut adds = None;
    let mut other_columns: Vec<(Arc<arrow_schema::Field>, ArrayRef)> = Vec::new();
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        if field.name() == "add" {
            if let Some(s) = column.as_struct_opt() {
                if s.null_count() < s.len() {
                    // Unfiltered: rows of other actions have a null path (see `is_add`).
                    adds = Some(AddColumns::try_new(s, file)?);
                }
            }
        } else if column.null_count() < column.len() {
            other_columns.push((field.clone(), column.clone()));
        }
    }
    let mut others = Vec::new();
    if !other_columns.is_empty() {
        let len = batch.num_rows();
        let keep = BooleanArray::from_iter(
            (0..len).map(|i| Some(other_columns.iter().any(|(_, c)| c.is_valid(i)))),
        );
        let (fields, columns): (Vec<_>, Vec<_>) = other_columns
            .into_iter()
            .map(|(f, c)| arrow_select::filter::filter(&c, &keep).map(|c| (f, c)))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| err(file, e))?
            .into_iter()
            .unzip();
        let sub = RecordBatch::try_new(Arc::new(arrow_schema::Schema::new(fields)), columns)
            .map_err(|e| err(file, e))?;
        let mut buf = Vec::new();
        {
            let mut writer = arrow_json::LineDelimitedWriter::new(&mut buf);
            writer.write(&sub).map_err(|e| err(file, e))?;
            writer.finish().map_err(|e| err(file, e))?;
        }
        for (i, line) in buf.split(|b| *b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let value: Value = serde_json::from_slice(line).map_err(|e| err(file, e))?;
            if let Some(action) = Action::from_value(value, file, i + 1)? {
                others.push(action);
            }
        }
    }
    Ok(SplitBatch { adds, others })
}
