//! Bring a column read from a data file to the table's logical type, field by
//! field: struct children are matched by parquet field id (column mapping
//! mode `id`, when the file has ids) or by physical name — never by position —
//! children the file lacks (added later) become nulls, lists and maps are
//! conformed element-wise, and leaves are cast to the logical type (which
//! also widens values written before a type change, e.g. int to long).
//! Variant columns are taken as their unshredded `value`/`metadata` binaries;
//! a shredded variant (a `typed_value` child) is refused.

use std::sync::Arc;

use arrow_array::{new_null_array, Array, ArrayRef, ListArray, MapArray, StructArray};
use arrow_schema::DataType as ArrowType;

use super::pruning::resolve_field;
use crate::error::{Error, Result};
use crate::log::schema::{ColumnMappingMode, DataType, VARIANT_METADATA, VARIANT_VALUE};

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
        (DataType::Variant, ArrowType::Struct(target_fields), ArrowType::Struct(_)) => {
            let s = array
                .as_any()
                .downcast_ref::<StructArray>()
                .ok_or_else(|| conform_error(file, "variant column is not a StructArray"))?;
            if s.column_by_name("typed_value").is_some() {
                return Err(Error::Unsupported(format!(
                    "{file}: a variant column is shredded (it has a typed_value field); \
                     deltadv reads unshredded variants only (table feature variantShredding)"
                )));
            }
            let children = target_fields
                .iter()
                .map(|tf| {
                    let c = s.column_by_name(tf.name()).ok_or_else(|| {
                        conform_error(
                            file,
                            format!(
                                "a variant column lacks its {:?} field (expected {VARIANT_VALUE:?} \
                                 and {VARIANT_METADATA:?})",
                                tf.name()
                            ),
                        )
                    })?;
                    cast_to(c.clone(), tf.data_type(), file)
                })
                .collect::<Result<Vec<_>>>()?;
            let out = StructArray::try_new(target_fields.clone(), children, s.nulls().cloned())
                .map_err(|e| conform_error(file, e))?;
            Ok(Arc::new(out))
        }
        (DataType::Variant, _, other) => Err(conform_error(
            file,
            format!("a variant column is stored as {other}, not as a struct of value and metadata"),
        )),
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

#[cfg(test)]
mod tests {
    use arrow_array::BinaryArray;
    use arrow_schema::Field;

    use super::*;
    use crate::log::schema::variant_arrow_type;

    fn binary(values: &[&[u8]]) -> ArrayRef {
        Arc::new(BinaryArray::from(values.to_vec()))
    }

    #[test]
    fn variant_children_are_matched_by_name() {
        // files store metadata before value (the Parquet spec's order) or after
        let file = StructArray::from(vec![
            (
                Arc::new(Field::new("metadata", ArrowType::Binary, false)),
                binary(&[b"m0", b"m1"]),
            ),
            (
                Arc::new(Field::new("value", ArrowType::Binary, false)),
                binary(&[b"v0", b"v1"]),
            ),
        ]);
        let array: ArrayRef = Arc::new(file);
        let target = variant_arrow_type();
        let out = conform(
            &array,
            &DataType::Variant,
            &target,
            ColumnMappingMode::None,
            "f",
        )
        .unwrap();
        assert_eq!(out.data_type(), &target);
        let s = out.as_any().downcast_ref::<StructArray>().unwrap();
        assert_eq!(s.column(0).as_ref(), binary(&[b"v0", b"v1"]).as_ref());
        assert_eq!(s.column(1).as_ref(), binary(&[b"m0", b"m1"]).as_ref());
    }

    #[test]
    fn shredded_and_malformed_variants_are_refused() {
        let shredded: ArrayRef = Arc::new(StructArray::from(vec![
            (
                Arc::new(Field::new("metadata", ArrowType::Binary, false)),
                binary(&[b"m"]),
            ),
            (
                Arc::new(Field::new("value", ArrowType::Binary, true)),
                binary(&[b"v"]),
            ),
            (
                Arc::new(Field::new("typed_value", ArrowType::Binary, true)),
                binary(&[b"t"]),
            ),
        ]));
        let target = variant_arrow_type();
        let mode = ColumnMappingMode::None;
        let e = conform(
            &shredded,
            &DataType::Variant,
            &target,
            mode,
            "part-1.parquet",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("part-1.parquet") && e.contains("shredded"),
            "{e}"
        );
        assert!(e.contains("variantShredding"), "{e}");
        let no_metadata: ArrayRef = Arc::new(StructArray::from(vec![(
            Arc::new(Field::new("value", ArrowType::Binary, false)),
            binary(&[b"v"]),
        )]));
        let e = conform(&no_metadata, &DataType::Variant, &target, mode, "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("lacks its \"metadata\" field"), "{e}");
        let e = conform(&binary(&[b"x"]), &DataType::Variant, &target, mode, "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not as a struct"), "{e}");
    }
}
