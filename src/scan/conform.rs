//! Bring a column read from a data file to the table's logical type, field by
//! field: struct children are matched by parquet field id (column mapping
//! mode `id`, when the file has ids) or by physical name — never by position —
//! children the file lacks (added later) become nulls, lists and maps are
//! conformed element-wise, and leaves are cast to the logical type.

use std::sync::Arc;

use arrow_array::{new_null_array, Array, ArrayRef, ListArray, MapArray, StructArray};
use arrow_schema::DataType as ArrowType;

use super::pruning::resolve_field;
use crate::error::{Error, Result};
use crate::log::schema::{ColumnMappingMode, DataType};

fn conform_error(file: &str, what: impl std::fmt::Display) -> Error {
    Error::Parquet {
        file: file.to_string(),
        detail: what.to_string(),
    }
}

/// Conform `array` (as read from `file`) to Delta type `dt`, whose logical
/// Arrow type is `target`.
pub fn conform(
    array: &ArrayRef,
    dt: &DataType,
    target: &ArrowType,
    mode: ColumnMappingMode,
    file: &str,
) -> Result<ArrayRef> {
    match (dt, target, array.data_type()) {
        (DataType::Struct(st), ArrowType::Struct(target_fields), ArrowType::Struct(_)) => {
            let s = array
                .as_any()
                .downcast_ref::<StructArray>()
                .ok_or_else(|| conform_error(file, "struct column is not a StructArray"))?;
            let file_fields = s.fields().clone();
            let mut children = Vec::with_capacity(st.fields.len());
            for (f, tf) in st.fields.iter().zip(target_fields.iter()) {
                let physical = f.physical_name(mode)?;
                let child = match resolve_field(&file_fields, f, physical, mode) {
                    Some(i) => {
                        let c = s.columns().get(i).cloned().ok_or_else(|| {
                            conform_error(file, format!("struct child {i} missing"))
                        })?;
                        conform(&c, &f.data_type, tf.data_type(), mode, file)?
                    }
                    None => new_null_array(tf.data_type(), s.len()),
                };
                children.push(child);
            }
            let out = StructArray::try_new(target_fields.clone(), children, s.nulls().cloned())
                .map_err(|e| conform_error(file, e))?;
            cast_to(Arc::new(out), target, file)
        }
        (DataType::Array { element, .. }, ArrowType::List(target_item), ArrowType::List(_)) => {
            let l = array
                .as_any()
                .downcast_ref::<ListArray>()
                .ok_or_else(|| conform_error(file, "list column is not a ListArray"))?;
            let values = conform(l.values(), element, target_item.data_type(), mode, file)?;
            let out = ListArray::try_new(
                target_item.clone(),
                l.offsets().clone(),
                values,
                l.nulls().cloned(),
            )
            .map_err(|e| conform_error(file, e))?;
            cast_to(Arc::new(out), target, file)
        }
        (
            DataType::Map { key, value, .. },
            ArrowType::Map(target_entries, sorted),
            ArrowType::Map(_, _),
        ) => {
            let m = array
                .as_any()
                .downcast_ref::<MapArray>()
                .ok_or_else(|| conform_error(file, "map column is not a MapArray"))?;
            let ArrowType::Struct(entry_fields) = target_entries.data_type() else {
                return Err(conform_error(file, "map entries are not a struct"));
            };
            let (kf, vf) = match (entry_fields.first(), entry_fields.get(1)) {
                (Some(k), Some(v)) => (k, v),
                _ => return Err(conform_error(file, "map entries need a key and a value")),
            };
            let keys = conform(m.keys(), key, kf.data_type(), mode, file)?;
            let values = conform(m.values(), value, vf.data_type(), mode, file)?;
            let entries = StructArray::try_new(entry_fields.clone(), vec![keys, values], None)
                .map_err(|e| conform_error(file, e))?;
            let out = MapArray::try_new(
                target_entries.clone(),
                m.offsets().clone(),
                entries,
                m.nulls().cloned(),
                *sorted,
            )
            .map_err(|e| conform_error(file, e))?;
            Ok(Arc::new(out))
        }
        _ => cast_to(array.clone(), target, file),
    }
}

fn cast_to(array: ArrayRef, target: &ArrowType, file: &str) -> Result<ArrayRef> {
    if array.data_type() == target {
        return Ok(array);
    }
    // Safe casts only: a value that does not fit is an error, not a null.
    let options = arrow_cast::CastOptions {
        safe: false,
        ..Default::default()
    };
    arrow_cast::cast_with_options(&array, target, &options).map_err(|e| {
        conform_error(
            file,
            format!("cannot convert {} to {target}: {e}", array.data_type()),
        )
    })
}
