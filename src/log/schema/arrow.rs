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
