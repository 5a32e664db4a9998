//! Delta types to Arrow: field names (logical or physical), field ids, nested
//! array/map slot ids, and the variant column's physical struct.

use super::*;

impl StructType {
    /// Arrow schema. With mode `None` (or `physical = false`): logical names and
    /// no field metadata. With `physical = true` and mode `Name`/`Id`: physical
    /// names at every depth, plus the column id as `PARQUET:field_id` in each
    /// field's metadata (required in `Id` mode, added when present in `Name`
    /// mode), including the ids of array elements and map keys/values recorded in
    /// `delta.columnMapping.nested.ids`.
    pub fn to_arrow(&self, mode: ColumnMappingMode, physical: bool) -> Result<Schema> {
        Ok(Schema::new(self.to_arrow_fields(mode, physical)?))
    }

    fn to_arrow_fields(&self, mode: ColumnMappingMode, physical: bool) -> Result<Vec<Field>> {
        self.fields
            .iter()
            .map(|f| f.to_arrow_field(mode, physical))
            .collect()
    }
}

impl StructField {
    /// This field as an Arrow field (see [`StructType::to_arrow`]).
    pub fn to_arrow_field(&self, mode: ColumnMappingMode, physical: bool) -> Result<Field> {
        let mapped = physical && mode != ColumnMappingMode::None;
        if !mapped {
            let dt = convert_type(&self.data_type, mode, physical, None)?;
            return Ok(Field::new(self.name.as_str(), dt, self.nullable));
        }
        let name = self.physical_name(mode)?;
        let nested_ids = match self.metadata.get(NESTED_IDS_KEY) {
            None | Some(Value::Null) => None,
            Some(Value::Object(ids)) => Some(ids),
            Some(other) => {
                return Err(schema_err(format!(
                    "column '{}': {NESTED_IDS_KEY} must be an object, found {other}",
                    self.name
                )))
            }
        };
        let ctx = nested_ids.map(|ids| NestedIds {
            ids,
            path: name.to_string(),
        });
        let dt = convert_type(&self.data_type, mode, physical, ctx.as_ref())?;
        let field = Field::new(name, dt, self.nullable);
        match (self.field_id(), mode) {
            (Some(id), _) => Ok(with_field_id(field, id)),
            // Not a table column (a cdc file's `_change_type`, a materialized
            // row id): no id.
            (None, ColumnMappingMode::Id) if self.is_internal() => Ok(field),
            (None, ColumnMappingMode::Id) => Err(schema_err(format!(
                "column '{}' has no integer {COLUMN_ID_KEY} although column mapping mode is id",
                self.name
            ))),
            (None, _) => Ok(field),
        }
    }
}

fn with_field_id(field: Field, id: i64) -> Field {
    field.with_metadata(HashMap::from([(
        PARQUET_FIELD_ID_KEY.to_string(),
        id.to_string(),
    )]))
}

// ---------------------------------------------------------------------------
// Arrow conversion
// ---------------------------------------------------------------------------

/// Ids of the nested array/map slots below one struct field, and the path (rooted
/// at that field's physical name) of the type being converted.
struct NestedIds<'a> {
    ids: &'a Map<String, Value>,
    path: String,
}

impl NestedIds<'_> {
    fn child(&self, slot: &str) -> Self {
        NestedIds {
            ids: self.ids,
            path: format!("{}.{slot}", self.path),
        }
    }

    fn id(&self) -> Option<i64> {
        self.ids.get(&self.path).and_then(json_int)
    }
}

/// An array element / map key / map value slot, with its nested id if known.
fn slot_field(
    name: &str,
    dt: &DataType,
    nullable: bool,
    mode: ColumnMappingMode,
    physical: bool,
    nested: Option<&NestedIds<'_>>,
) -> Result<Field> {
    let ctx = nested.map(|n| n.child(name));
    let field = Field::new(
        name,
        convert_type(dt, mode, physical, ctx.as_ref())?,
        nullable,
    );
    Ok(match ctx.as_ref().and_then(NestedIds::id) {
        Some(id) => with_field_id(field, id),
        None => field,
    })
}

fn convert_type(
    dt: &DataType,
    mode: ColumnMappingMode,
    physical: bool,
    nested: Option<&NestedIds<'_>>,
) -> Result<ArrowDataType> {
    Ok(match dt {
        DataType::String => ArrowDataType::Utf8,
        DataType::Long => ArrowDataType::Int64,
        DataType::Integer => ArrowDataType::Int32,
        DataType::Short => ArrowDataType::Int16,
        DataType::Byte => ArrowDataType::Int8,
        DataType::Float => ArrowDataType::Float32,
        DataType::Double => ArrowDataType::Float64,
        DataType::Boolean => ArrowDataType::Boolean,
        DataType::Binary => ArrowDataType::Binary,
        DataType::Date => ArrowDataType::Date32,
        DataType::Timestamp => ArrowDataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        DataType::TimestampNtz => ArrowDataType::Timestamp(TimeUnit::Microsecond, None),
        DataType::Decimal { precision, scale } => {
            validate_decimal(*precision, *scale, "data type")?;
            ArrowDataType::Decimal128(*precision, *scale)
        }
        DataType::Struct(st) => {
            ArrowDataType::Struct(Fields::from(st.to_arrow_fields(mode, physical)?))
        }
        DataType::Variant => variant_arrow_type(),
        DataType::Array {
            element,
            contains_null,
        } => ArrowDataType::List(Arc::new(slot_field(
            "element",
            element,
            *contains_null,
            mode,
            physical,
            nested,
        )?)),
        DataType::Map {
            key,
            value,
            value_contains_null,
        } => {
            let key = slot_field("key", key, false, mode, physical, nested)?;
            let value = slot_field("value", value, *value_contains_null, mode, physical, nested)?;
            let entries = Field::new(
                "key_value",
                ArrowDataType::Struct(Fields::from(vec![key, value])),
                false,
            );
            ArrowDataType::Map(Arc::new(entries), false)
        }
    })
}

/// Names of the two binary children of a variant column in data files.
pub const VARIANT_VALUE: &str = "value";
pub const VARIANT_METADATA: &str = "metadata";

/// The Arrow type deltadv reads a variant column as: the unshredded physical
/// form, `struct<value: binary, metadata: binary>` (both always set in a
/// non-null variant).
pub fn variant_arrow_type() -> ArrowDataType {
    ArrowDataType::Struct(Fields::from(vec![
        Field::new(VARIANT_VALUE, ArrowDataType::Binary, false),
        Field::new(VARIANT_METADATA, ArrowDataType::Binary, false),
    ]))
}

/// The Arrow type of a Delta type. Nested struct fields are named and annotated as
/// in [`StructType::to_arrow`].
pub fn to_arrow_type(
    dt: &DataType,
    mode: ColumnMappingMode,
    physical: bool,
) -> Result<ArrowDataType> {
    convert_type(dt, mode, physical, None)
}

/// The Delta type of an Arrow type, for tables created from Arrow data:
/// integers, floats, booleans, strings, binaries, dates, microsecond-or-coarser
/// timestamps (with a zone: `timestamp`; without: `timestamp_ntz`), decimals
/// up to 38 digits, and structs, lists and maps of those. Anything else
/// (unsigned integers, nanosecond timestamps, unions, ...) is refused, naming
/// the column. `depth` bounds the recursion as [`MAX_TYPE_DEPTH`] does for JSON.
pub fn from_arrow_type(dt: &ArrowDataType, column: &str, depth: usize) -> Result<DataType> {
    if depth > MAX_TYPE_DEPTH {
        return Err(schema_err(format!(
            "column '{column}': types nested deeper than {MAX_TYPE_DEPTH} levels"
        )));
    }
    let unsupported = || {
        Error::InvalidArgument(format!(
            "column '{column}' has Arrow type {dt}, which has no Delta type"
        ))
    };
    Ok(match dt {
        ArrowDataType::Int8 => DataType::Byte,
        ArrowDataType::Int16 => DataType::Short,
        ArrowDataType::Int32 => DataType::Integer,
        ArrowDataType::Int64 => DataType::Long,
        ArrowDataType::Float32 => DataType::Float,
        ArrowDataType::Float64 => DataType::Double,
        ArrowDataType::Boolean => DataType::Boolean,
        ArrowDataType::Utf8 | ArrowDataType::LargeUtf8 | ArrowDataType::Utf8View => {
            DataType::String
        }
        ArrowDataType::Binary | ArrowDataType::LargeBinary | ArrowDataType::BinaryView => {
            DataType::Binary
        }
        ArrowDataType::Date32 => DataType::Date,
        ArrowDataType::Timestamp(unit, zone) => {
            if *unit == TimeUnit::Nanosecond {
                return Err(unsupported());
            }
            if zone.is_some() {
                DataType::Timestamp
            } else {
                DataType::TimestampNtz
            }
        }
        ArrowDataType::Decimal128(precision, scale) => {
            validate_decimal(*precision, *scale, column)?;
            DataType::Decimal {
                precision: *precision,
                scale: *scale,
            }
        }
        ArrowDataType::Struct(fields) => {
            DataType::Struct(struct_from_arrow(fields, column, depth + 1)?)
        }
        ArrowDataType::List(item) | ArrowDataType::LargeList(item) => DataType::Array {
            element: Box::new(from_arrow_type(
                item.data_type(),
                &child_path(column, "element"),
                depth + 1,
            )?),
            contains_null: item.is_nullable(),
        },
        ArrowDataType::Map(entries, _) => {
            let ArrowDataType::Struct(kv) = entries.data_type() else {
                return Err(unsupported());
            };
            let (Some(k), Some(v)) = (kv.first(), kv.get(1)) else {
                return Err(unsupported());
            };
            DataType::Map {
                key: Box::new(from_arrow_type(
                    k.data_type(),
                    &child_path(column, "key"),
                    depth + 1,
                )?),
                value: Box::new(from_arrow_type(
                    v.data_type(),
                    &child_path(column, "value"),
                    depth + 1,
                )?),
                value_contains_null: v.is_nullable(),
            }
        }
        _ => return Err(unsupported()),
    })
}

fn struct_from_arrow(fields: &Fields, parent: &str, depth: usize) -> Result<StructType> {
    if let Some(name) = first_duplicate(fields.iter().map(|f| f.name().as_str())) {
        return Err(Error::InvalidArgument(format!(
            "column '{}' appears twice (Delta column names are case-insensitive)",
            child_path(parent, name)
        )));
    }
    let mut out = Vec::with_capacity(fields.len());
    for f in fields {
        let path = child_path(parent, f.name());
        let dt = from_arrow_type(f.data_type(), &path, depth)?;
        out.push(StructField::new(f.name().as_str(), dt, f.is_nullable()));
    }
    Ok(StructType::new(out))
}

impl StructType {
    /// The Delta schema of an Arrow schema (see [`from_arrow_type`]).
    pub fn from_arrow(schema: &Schema) -> Result<StructType> {
        struct_from_arrow(schema.fields(), "", 0)
    }

    /// Whether any column, at any depth, is a `timestamp_ntz` (the table then
    /// needs the `timestampNtz` feature).
    pub fn has_timestamp_ntz(&self) -> bool {
        fn has(dt: &DataType) -> bool {
            match dt {
                DataType::TimestampNtz => true,
                DataType::Struct(s) => s.has_timestamp_ntz(),
                DataType::Array { element, .. } => has(element),
                DataType::Map { key, value, .. } => has(key) || has(value),
                _ => false,
            }
        }
        self.fields.iter().any(|f| has(&f.data_type))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn arrow_schemas_become_delta_schemas() {
        let kv = Field::new(
            "entries",
            ArrowDataType::Struct(Fields::from(vec![
                Field::new("key", ArrowDataType::Utf8, false),
                Field::new("value", ArrowDataType::Int32, true),
            ])),
            false,
        );
        let schema = Schema::new(vec![
            Field::new("id", ArrowDataType::Int64, false),
            Field::new(
                "ts",
                ArrowDataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
            Field::new(
                "ntz",
                ArrowDataType::Timestamp(TimeUnit::Microsecond, None),
                true,
            ),
            Field::new("d", ArrowDataType::Decimal128(38, 18), true),
            Field::new_list("l", Field::new("item", ArrowDataType::Utf8View, true), true),
            Field::new(
                "m",
                ArrowDataType::Map(std::sync::Arc::new(kv), false),
                true,
            ),
        ]);
        let st = StructType::from_arrow(&schema).unwrap();
        let text = st.to_schema_string();
        assert_eq!(StructType::parse(&text).unwrap(), st);
        assert!(st.has_timestamp_ntz());
        assert!(!st.field("id").unwrap().nullable);
        assert_eq!(st.field("ts").unwrap().data_type, DataType::Timestamp);
        // and back: the logical Arrow schema has the same names
        let back = st.to_arrow(ColumnMappingMode::None, false).unwrap();
        let names: Vec<_> = back.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["id", "ts", "ntz", "d", "l", "m"]);
    }

    #[test]
    fn arrow_types_without_a_delta_type_are_refused() {
        for dt in [
            ArrowDataType::UInt32,
            ArrowDataType::Timestamp(TimeUnit::Nanosecond, None),
            ArrowDataType::Float16,
        ] {
            let schema = Schema::new(vec![Field::new("c", dt, true)]);
            let err = StructType::from_arrow(&schema).unwrap_err().to_string();
            assert!(err.contains("column 'c'"), "{err}");
        }
        let twice = Schema::new(vec![
            Field::new("A", ArrowDataType::Int32, true),
            Field::new("a", ArrowDataType::Int32, true),
        ]);
        assert!(StructType::from_arrow(&twice).is_err());
    }
}
