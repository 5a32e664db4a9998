//! Incoming Arrow data checked against the table schema and brought to the
//! data files' physical layout.
//!
//! Columns are matched by name, case-insensitively as Delta does, at every
//! depth; a table column the data lacks is written as nulls when nullable (an
//! error otherwise); a data column the table lacks is an error (no schema
//! evolution). Types must be the table's, up to Arrow encodings of the same
//! Delta type (`Utf8View`/`LargeUtf8` for strings, `LargeList`, second or
//! millisecond timestamps) and the widenings Spark applies when writing
//! (byte/short/int to a wider integer, float to double). Nulls in a column
//! the table declares non-nullable are refused. The output carries the
//! physical names and parquet field ids of column mapping.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{new_null_array, Array, ArrayRef, ListArray, MapArray, StructArray};
use arrow_buffer::NullBuffer;
use arrow_schema::DataType as ArrowType;

use crate::error::{Error, Result};
use crate::log::schema::{DataType, StructField};

fn mismatch(path: &str, what: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!(
        "the data does not match the table schema: column '{path}' {what}"
    ))
}

fn child(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

/// Index of the field named `name` among `fields`: exact match first, then
/// case-insensitive.
pub fn find_field<'a>(names: impl Iterator<Item = &'a str> + Clone, name: &str) -> Option<usize> {
    let lower = name.to_lowercase();
    names
        .clone()
        .position(|n| n == name)
        .or_else(|| names.clone().position(|n| n.to_lowercase() == lower))
}

/// The incoming field names that no table field (of `table`) claims.
pub fn check_no_extra<'a>(
    incoming: impl Iterator<Item = &'a str>,
    table: &[StructField],
    path: &str,
) -> Result<()> {
    for name in incoming {
        if find_field(table.iter().map(|f| f.name.as_str()), name).is_none() {
            return Err(mismatch(
                &child(path, name),
                "is in the data but not in the table (schema evolution is not supported)",
            ));
        }
    }
    Ok(())
}

/// Whether data of Delta type `got` may be written to a column of type `want`.
fn writable(got: &DataType, want: &DataType) -> bool {
    use DataType::*;
    got == want
        || matches!(
            (got, want),
            (Byte, Short | Integer | Long)
                | (Short, Integer | Long)
                | (Integer, Long)
                | (Float, Double)
        )
}

/// Rows where `child` is null but `parent` is not.
pub fn unmasked_nulls(child: &dyn Array, parent: Option<&NullBuffer>) -> usize {
    let Some(nulls) = child.logical_nulls() else {
        return 0;
    };
    match parent {
        None => nulls.null_count(),
        Some(p) => {
            let both = NullBuffer::union(Some(&nulls), Some(p));
            both.map_or(0, |b| b.null_count())
                .saturating_sub(p.null_count())
        }
    }
}

fn check_nullable(
    array: &dyn Array,
    nullable: bool,
    parent: Option<&NullBuffer>,
    path: &str,
) -> Result<()> {
    if nullable {
        return Ok(());
    }
    if unmasked_nulls(array, parent) > 0 {
        return Err(super::rules::not_null_violation(path));
    }
    Ok(())
}

/// `array` (a column of the incoming data) as a column of Delta type `dt`
/// with the physical Arrow type `target`. `path` names the column in errors.
pub fn convert(
    array: &ArrayRef,
    dt: &DataType,
    target: &ArrowType,
    path: &str,
) -> Result<ArrayRef> {
    if array.data_type() == &ArrowType::Null {
        // An all-null column of unknown type (e.g. pandas `None`s).
        return Ok(new_null_array(target, array.len()));
    }
    match (dt, target) {
        (DataType::Struct(st), ArrowType::Struct(target_fields)) => {
            let s = array.as_struct_opt().ok_or_else(|| {
                mismatch(
                    path,
                    format!(
                        "is a struct in the table, {} in the data",
                        array.data_type()
                    ),
                )
            })?;
            let names = || s.fields().iter().map(|f| f.name().as_str());
            check_no_extra(names(), &st.fields, path)?;
            let mut children = Vec::with_capacity(st.fields.len());
            for (f, tf) in st.fields.iter().zip(target_fields.iter()) {
                let p = child(path, &f.name);
                let c = match find_field(names(), &f.name).and_then(|i| s.columns().get(i)) {
                    Some(c) => convert(c, &f.data_type, tf.data_type(), &p)?,
                    None if f.nullable => new_null_array(tf.data_type(), s.len()),
                    None => {
                        return Err(mismatch(
                            &p,
                            "is not nullable in the table and missing from the data",
                        ))
                    }
                };
                check_nullable(c.as_ref(), f.nullable, s.nulls(), &p)?;
                children.push(c);
            }
            let out = StructArray::try_new(target_fields.clone(), children, s.nulls().cloned())
                .map_err(|e| mismatch(path, e))?;
            Ok(Arc::new(out))
        }
        (
            DataType::Array {
                element,
                contains_null,
            },
            ArrowType::List(target_item),
        ) => {
            let list = match array.data_type() {
                ArrowType::LargeList(item) => {
                    arrow_cast::cast(array, &ArrowType::List(item.clone()))
                        .map_err(|e| mismatch(path, e))?
                }
                _ => array.clone(),
            };
            let l = list.as_list_opt::<i32>().ok_or_else(|| {
                mismatch(
                    path,
                    format!(
                        "is an array in the table, {} in the data",
                        array.data_type()
                    ),
                )
            })?;
            let p = child(path, "element");
            let values = convert(l.values(), element, target_item.data_type(), &p)?;
            check_nullable(values.as_ref(), *contains_null, None, &p)?;
            let out = ListArray::try_new(
                target_item.clone(),
                l.offsets().clone(),
                values,
                l.nulls().cloned(),
            )
            .map_err(|e| mismatch(path, e))?;
            Ok(Arc::new(out))
        }
        (
            DataType::Map {
                key,
                value,
                value_contains_null,
            },
            ArrowType::Map(target_entries, sorted),
        ) => {
            let m = array.as_map_opt().ok_or_else(|| {
                mismatch(
                    path,
                    format!("is a map in the table, {} in the data", array.data_type()),
                )
            })?;
            let ArrowType::Struct(entry_fields) = target_entries.data_type() else {
                return Err(Error::Internal(format!(
                    "map column '{path}': entries are not a struct"
                )));
            };
            let (Some(kf), Some(vf)) = (entry_fields.first(), entry_fields.get(1)) else {
                return Err(Error::Internal(format!(
                    "map column '{path}': entries need a key and a value"
                )));
            };
            let keys = convert(m.keys(), key, kf.data_type(), &child(path, "key"))?;
            check_nullable(keys.as_ref(), false, None, &child(path, "key"))?;
            let values = convert(m.values(), value, vf.data_type(), &child(path, "value"))?;
            check_nullable(
                values.as_ref(),
                *value_contains_null,
                None,
                &child(path, "value"),
            )?;
            let entries = StructArray::try_new(entry_fields.clone(), vec![keys, values], None)
                .map_err(|e| mismatch(path, e))?;
            let out = MapArray::try_new(
                target_entries.clone(),
                m.offsets().clone(),
                entries,
                m.nulls().cloned(),
                *sorted,
            )
            .map_err(|e| mismatch(path, e))?;
            Ok(Arc::new(out))
        }
        (DataType::Variant, _) => Err(Error::Unsupported(format!(
            "writing variant column '{path}' (deltadv does not write variants)"
        ))),
        (leaf, _) if leaf.is_primitive() => {
            let got =
                crate::log::schema::from_arrow_type(array.data_type(), path, 0).map_err(|_| {
                    mismatch(
                        path,
                        format!(
                            "is {leaf} in the table, Arrow {} in the data",
                            array.data_type()
                        ),
                    )
                })?;
            if !writable(&got, leaf) {
                return Err(mismatch(
                    path,
                    format!("is {leaf} in the table, {got} in the data"),
                ));
            }
            if array.data_type() == target {
                return Ok(array.clone());
            }
            let options = arrow_cast::CastOptions {
                safe: false,
                ..Default::default()
            };
            arrow_cast::cast_with_options(array, target, &options).map_err(|e| {
                mismatch(
                    path,
                    format!(
                        "cannot be converted from {} to {target}: {e}",
                        array.data_type()
                    ),
                )
            })
        }
        (other, _) => Err(Error::Internal(format!(
            "column '{path}': Delta type {other} and Arrow type {target} disagree"
        ))),
    }
}

/// A top-level column of the incoming data as table column `field` (see
/// [`convert`]), its nullability checked.
pub fn convert_field(
    array: &ArrayRef,
    field: &StructField,
    target: &ArrowType,
) -> Result<ArrayRef> {
    let out = convert(array, &field.data_type, target, &field.name)?;
    check_nullable(out.as_ref(), field.nullable, None, &field.name)?;
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use arrow_array::{Int32Array, Int64Array, RecordBatch, StringViewArray};
    use arrow_schema::{Field, Schema};

    use super::*;
    use crate::log::schema::{ColumnMappingMode, StructType};

    fn table() -> StructType {
        StructType::new(vec![
            StructField::new("id", DataType::Long, false),
            StructField::new(
                "s",
                DataType::Struct(StructType::new(vec![
                    StructField::new("x", DataType::Integer, true),
                    StructField::new("name", DataType::String, true),
                ])),
                true,
            ),
        ])
    }

    fn convert_all(batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
        let t = table();
        let target = t.to_arrow(ColumnMappingMode::None, true).unwrap();
        check_no_extra(
            batch.schema().fields().iter().map(|f| f.name().as_str()),
            &t.fields,
            "",
        )?;
        t.fields
            .iter()
            .zip(target.fields())
            .map(|(f, tf)| {
                let names = batch
                    .schema()
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .collect::<Vec<_>>();
                let i = find_field(names.iter().map(String::as_str), &f.name);
                match i {
                    Some(i) => convert_field(batch.column(i), f, tf.data_type()),
                    None => Ok(new_null_array(tf.data_type(), batch.num_rows())),
                }
            })
            .collect()
    }

    #[test]
    fn names_match_case_insensitively_and_types_widen() {
        let s = StructArray::from(vec![(
            Arc::new(Field::new("NAME", ArrowType::Utf8View, true)),
            Arc::new(StringViewArray::from(vec!["a", "b"])) as ArrayRef,
        )]);
        let batch = RecordBatch::try_from_iter(vec![
            ("ID", Arc::new(Int32Array::from(vec![1, 2])) as ArrayRef),
            ("s", Arc::new(s) as ArrayRef),
        ])
        .unwrap();
        let out = convert_all(&batch).unwrap();
        assert_eq!(out[0].as_ref(), &Int64Array::from(vec![1, 2]) as &dyn Array);
        let s = out[1].as_struct();
        assert_eq!(s.column(0).null_count(), 2, "x is missing: nulls");
        assert_eq!(s.column(1).data_type(), &ArrowType::Utf8);
    }

    #[test]
    fn mismatches_are_named() {
        let extra = RecordBatch::try_from_iter(vec![
            ("id", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
            ("other", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
        ])
        .unwrap();
        let e = convert_all(&extra).unwrap_err().to_string();
        assert!(
            e.contains("'other'") && e.contains("not in the table"),
            "{e}"
        );
        let narrowing = RecordBatch::try_from_iter(vec![(
            "s",
            Arc::new(StructArray::from(vec![(
                Arc::new(Field::new("x", ArrowType::Int64, true)),
                Arc::new(Int64Array::from(vec![1])) as ArrayRef,
            )])) as ArrayRef,
        )])
        .unwrap();
        let e = convert_all(&narrowing).unwrap_err().to_string();
        assert!(
            e.contains("'s.x'") && e.contains("integer in the table, long"),
            "{e}"
        );
        let nulls = Schema::new(vec![Field::new("id", ArrowType::Int64, true)]);
        let batch = RecordBatch::try_new(
            Arc::new(nulls),
            vec![Arc::new(Int64Array::from(vec![Some(1), None]))],
        )
        .unwrap();
        let e = convert_all(&batch).unwrap_err().to_string();
        assert!(
            e.contains("NOT NULL constraint violated for column: id."),
            "{e}"
        );
    }
}
