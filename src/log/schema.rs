//! The Delta table schema (`metaData.schemaString`), column mapping, the
//! conversion to Arrow, and typed partition values. Pure logic, no I/O.
//!
//! Facts from the Delta protocol (PROTOCOL.md) this module relies on:
//!
//! * Schema serialization: a struct is `{"type":"struct","fields":[…]}`, a field
//!   `{"name","type","nullable","metadata"}`, an array
//!   `{"type":"array","elementType","containsNull"}`, a map
//!   `{"type":"map","keyType","valueType","valueContainsNull"}`; primitive types
//!   are strings (`long`, `decimal(10,2)`, `timestamp_ntz`, …). Column names are
//!   unique regardless of case. Decimal precision is at most 38.
//! * Variant (table feature `variantType`): type `variant`, stored in data files
//!   as a struct of two binaries, `value` and `metadata` (Parquet Variant
//!   encoding); deltadv exposes that struct as is (an alternative the protocol
//!   allows for engines without a variant type).
//! * Column mapping: `delta.columnMapping.mode` is `none`, `name` or `id`
//!   (absent = `none`). Every column, nested or not, carries its physical name in
//!   `delta.columnMapping.physicalName` and its 32-bit id in
//!   `delta.columnMapping.id`; data files use the physical names (and the ids as
//!   Parquet `field_id`), and `add.partitionValues` are keyed by physical name.
//!   IcebergCompatV2 writers also record ids for the synthetic array `element`
//!   and map `key`/`value` slots in `delta.columnMapping.nested.ids` on the
//!   nearest enclosing struct field, keyed by `<physicalName>.element` etc.
//! * Partition values are strings; an empty string is `null` for every type.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float32Array,
    Float64Array, Int16Array, Int32Array, Int64Array, Int8Array, StringArray,
    TimestampMicrosecondArray,
};
use arrow_schema::{DataType as ArrowDataType, Field, Fields, Schema, TimeUnit};
use chrono::NaiveDate;
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// Table property selecting the column mapping mode.
pub const COLUMN_MAPPING_MODE_KEY: &str = "delta.columnMapping.mode";
/// Column metadata key holding a column's physical name.
pub const PHYSICAL_NAME_KEY: &str = "delta.columnMapping.physicalName";
/// Column metadata key holding a column's id.
pub const COLUMN_ID_KEY: &str = "delta.columnMapping.id";
/// Column metadata key holding the ids of nested array/map slots.
pub const NESTED_IDS_KEY: &str = "delta.columnMapping.nested.ids";
/// Arrow field metadata key the Parquet crate reads and writes field ids under.
pub const PARQUET_FIELD_ID_KEY: &str = "PARQUET:field_id";
/// The largest decimal precision Delta (and Arrow's `Decimal128`) allows.
pub const MAX_DECIMAL_PRECISION: u8 = 38;

/// Microseconds per day.
const MICROS_PER_DAY: i64 = 86_400_000_000;

/// A Delta data type.
#[derive(Debug, Clone, PartialEq)]
pub enum DataType {
    String,
    Long,
    Integer,
    Short,
    Byte,
    Float,
    Double,
    Boolean,
    Binary,
    Date,
    /// Microseconds since the epoch, UTC-adjusted.
    Timestamp,
    /// Microseconds since the epoch, without time zone.
    TimestampNtz,
    Decimal {
        precision: u8,
        scale: i8,
    },
    Struct(StructType),
    Array {
        element: Box<DataType>,
        contains_null: bool,
    },
    Map {
        key: Box<DataType>,
        value: Box<DataType>,
        value_contains_null: bool,
    },
    /// Semi-structured data: `struct<value: binary, metadata: binary>` in files.
    Variant,
}

impl DataType {
    /// True for every type that is not a struct, array, map or variant.
    pub fn is_primitive(&self) -> bool {
        !matches!(
            self,
            DataType::Struct(_) | DataType::Array { .. } | DataType::Map { .. } | DataType::Variant
        )
    }

    /// The Delta JSON representation of this type (a string for primitives).
    pub fn to_json(&self) -> Value {
        match self {
            DataType::Struct(st) => st.to_json(),
            DataType::Array {
                element,
                contains_null,
            } => {
                let mut o = Map::new();
                o.insert("type".into(), Value::from("array"));
                o.insert("elementType".into(), element.to_json());
                o.insert("containsNull".into(), Value::from(*contains_null));
                Value::Object(o)
            }
            DataType::Map {
                key,
                value,
                value_contains_null,
            } => {
                let mut o = Map::new();
                o.insert("type".into(), Value::from("map"));
                o.insert("keyType".into(), key.to_json());
                o.insert("valueType".into(), value.to_json());
                o.insert(
                    "valueContainsNull".into(),
                    Value::from(*value_contains_null),
                );
                Value::Object(o)
            }
            primitive => Value::String(primitive.to_string()),
        }
    }
}

impl fmt::Display for DataType {
    /// Delta type names; nested types in a short `array<…>` / `map<…,…>` form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataType::String => f.write_str("string"),
            DataType::Long => f.write_str("long"),
            DataType::Integer => f.write_str("integer"),
            DataType::Short => f.write_str("short"),
            DataType::Byte => f.write_str("byte"),
            DataType::Float => f.write_str("float"),
            DataType::Double => f.write_str("double"),
            DataType::Boolean => f.write_str("boolean"),
            DataType::Binary => f.write_str("binary"),
            DataType::Date => f.write_str("date"),
            DataType::Timestamp => f.write_str("timestamp"),
            DataType::TimestampNtz => f.write_str("timestamp_ntz"),
            DataType::Variant => f.write_str("variant"),
            DataType::Decimal { precision, scale } => write!(f, "decimal({precision},{scale})"),
            DataType::Struct(st) => {
                f.write_str("struct<")?;
                for (i, field) in st.fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{}:{}", field.name, field.data_type)?;
                }
                f.write_str(">")
            }
            DataType::Array { element, .. } => write!(f, "array<{element}>"),
            DataType::Map { key, value, .. } => write!(f, "map<{key},{value}>"),
        }
    }
}

/// A (possibly nested) column.
#[derive(Debug, Clone, PartialEq)]
pub struct StructField {
    pub name: String,
    pub data_type: DataType,
    pub nullable: bool,
    pub metadata: Map<String, Value>,
}

/// A struct: the table schema or a struct column.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StructType {
    pub fields: Vec<StructField>,
}

/// How data files name their columns (table property `delta.columnMapping.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnMappingMode {
    /// Data files use the logical (display) names.
    None,
    /// Data files use `delta.columnMapping.physicalName`.
    Name,
    /// Data files are resolved by `delta.columnMapping.id` (Parquet field ids).
    Id,
}

impl ColumnMappingMode {
    /// Parse a `delta.columnMapping.mode` value (`none`, `name`, `id`, any case).
    pub fn parse(value: &str) -> Result<Self> {
        if value.eq_ignore_ascii_case("none") {
            Ok(ColumnMappingMode::None)
        } else if value.eq_ignore_ascii_case("name") {
            Ok(ColumnMappingMode::Name)
        } else if value.eq_ignore_ascii_case("id") {
            Ok(ColumnMappingMode::Id)
        } else {
            Err(Error::Unsupported(format!(
                "table property {COLUMN_MAPPING_MODE_KEY} = {value:?} (expected none, name or id)"
            )))
        }
    }
}

impl fmt::Display for ColumnMappingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ColumnMappingMode::None => "none",
            ColumnMappingMode::Name => "name",
            ColumnMappingMode::Id => "id",
        })
    }
}

/// The column mapping mode from a `metaData.configuration`: absent (or null) is
/// `None`; `none`, `name`, `id` (any case) map to their mode; anything else is an
/// [`Error::Unsupported`].
pub fn column_mapping_mode(
    configuration: &HashMap<String, Option<String>>,
) -> Result<ColumnMappingMode> {
    match configuration
        .get(COLUMN_MAPPING_MODE_KEY)
        .and_then(|v| v.as_deref())
    {
        None => Ok(ColumnMappingMode::None),
        Some(v) => ColumnMappingMode::parse(v),
    }
}

// ---------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------

fn schema_err(msg: impl Into<String>) -> Error {
    Error::Schema(msg.into())
}

/// `parent.child`, or `child` at the top level.
fn child_path(parent: &str, child: &str) -> String {
    if parent.is_empty() {
        child.to_string()
    } else {
        format!("{parent}.{child}")
    }
}

fn get_bool(obj: &Map<String, Value>, key: &str, default: bool, path: &str) -> Result<bool> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(schema_err(format!(
            "column '{path}': \"{key}\" must be a boolean, found {other}"
        ))),
    }
}

fn parse_decimal_type(name: &str, path: &str) -> Result<DataType> {
    let bad = || {
        schema_err(format!(
            "column '{path}': malformed decimal type '{name}' (expected decimal(precision,scale))"
        ))
    };
    let inner = name
        .strip_prefix("decimal")
        .map(str::trim_start)
        .and_then(|s| s.strip_prefix('('))
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(bad)?;
    let (p, s) = inner.split_once(',').ok_or_else(bad)?;
    let (p, s) = (p.trim(), s.trim());
    let precision: u32 = if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) {
        p.parse().map_err(|_| bad())?
    } else {
        return Err(bad());
    };
    let scale: i64 = s.parse().map_err(|_| bad())?;
    let dt_precision = u8::try_from(precision).unwrap_or(u8::MAX);
    let dt_scale = i8::try_from(scale).unwrap_or(i8::MIN);
    let dt = DataType::Decimal {
        precision: dt_precision,
        scale: dt_scale,
    };
    if precision > u32::from(MAX_DECIMAL_PRECISION) || i64::from(dt_scale) != scale {
        return Err(schema_err(format!(
            "column '{path}': decimal({precision},{scale}) is out of range \
             (precision 1..=38, scale at most the precision)"
        )));
    }
    validate_decimal(dt_precision, dt_scale, &format!("column '{path}'"))?;
    Ok(dt)
}

/// Check a decimal's precision (1..=38) and scale (at most the precision, at
/// least -38); `what` names the column or type in the error.
fn validate_decimal(precision: u8, scale: i8, what: &str) -> Result<()> {
    let ok = (1..=MAX_DECIMAL_PRECISION).contains(&precision)
        && i16::from(scale) <= i16::from(precision)
        && i16::from(scale) >= -i16::from(MAX_DECIMAL_PRECISION);
    if ok {
        Ok(())
    } else {
        Err(schema_err(format!(
            "{what}: decimal({precision},{scale}) is out of range \
             (precision 1..=38, scale at most the precision)"
        )))
    }
}

fn parse_primitive(name: &str, path: &str) -> Result<DataType> {
    Ok(match name {
        "string" => DataType::String,
        "long" => DataType::Long,
        "integer" => DataType::Integer,
        "short" => DataType::Short,
        "byte" => DataType::Byte,
        "float" => DataType::Float,
        "double" => DataType::Double,
        "boolean" => DataType::Boolean,
        "binary" => DataType::Binary,
        "date" => DataType::Date,
        "timestamp" => DataType::Timestamp,
        "timestamp_ntz" => DataType::TimestampNtz,
        "variant" => DataType::Variant,
        // Spark's JSON reader treats a bare "decimal" as its default decimal(10,0).
        "decimal" => DataType::Decimal {
            precision: 10,
            scale: 0,
        },
        other if other.starts_with("decimal") => parse_decimal_type(other, path)?,
        other => {
            return Err(Error::Unsupported(format!(
                "data type '{other}' of column '{path}'"
            )))
        }
    })
}

/// Deepest nesting of struct/array/map types a schema may have. serde_json
/// already stops at 128 levels of JSON; this keeps every recursive walk of a
/// parsed schema (Arrow conversion, JSON, reading nested columns) bounded
/// whatever produced the JSON.
pub const MAX_TYPE_DEPTH: usize = 100;

fn parse_type(value: &Value, path: &str, depth: usize) -> Result<DataType> {
    if depth > MAX_TYPE_DEPTH {
        return Err(schema_err(format!(
            "column '{path}': types nested deeper than {MAX_TYPE_DEPTH} levels"
        )));
    }
    match value {
        Value::String(name) => parse_primitive(name, path),
        Value::Object(obj) => {
            let kind = match obj.get("type") {
                Some(Value::String(kind)) => kind.as_str(),
                _ => {
                    return Err(schema_err(format!(
                        "column '{path}': type object without a string \"type\""
                    )))
                }
            };
            match kind {
                "struct" => Ok(DataType::Struct(parse_struct(obj, path, depth)?)),
                "array" => {
                    let element = obj.get("elementType").ok_or_else(|| {
                        schema_err(format!("column '{path}': array without \"elementType\""))
                    })?;
                    let element = parse_type(element, &child_path(path, "element"), depth + 1)?;
                    Ok(DataType::Array {
                        element: Box::new(element),
                        contains_null: get_bool(obj, "containsNull", true, path)?,
                    })
                }
                "map" => {
                    let key = obj.get("keyType").ok_or_else(|| {
                        schema_err(format!("column '{path}': map without \"keyType\""))
                    })?;
                    let value = obj.get("valueType").ok_or_else(|| {
                        schema_err(format!("column '{path}': map without \"valueType\""))
                    })?;
                    Ok(DataType::Map {
                        key: Box::new(parse_type(key, &child_path(path, "key"), depth + 1)?),
                        value: Box::new(parse_type(value, &child_path(path, "value"), depth + 1)?),
                        value_contains_null: get_bool(obj, "valueContainsNull", true, path)?,
                    })
                }
                other => parse_primitive(other, path),
            }
        }
        other => Err(schema_err(format!(
            "column '{path}': a type must be a string or an object, found {other}"
        ))),
    }
}

/// Parse one Delta type (a type name, or a struct/array/map object); `path`
/// names the column in errors.
pub fn parse_data_type(value: &Value, path: &str) -> Result<DataType> {
    parse_type(value, path, 0)
}

fn parse_field(value: &Value, parent: &str, depth: usize) -> Result<StructField> {
    let obj = value.as_object().ok_or_else(|| {
        schema_err(format!(
            "struct '{parent}': a field must be an object, found {value}"
        ))
    })?;
    let name = match obj.get("name") {
        Some(Value::String(name)) => name.clone(),
        _ => {
            return Err(schema_err(format!(
                "struct '{parent}': field without a string \"name\""
            )))
        }
    };
    let path = child_path(parent, &name);
    let type_value = obj
        .get("type")
        .ok_or_else(|| schema_err(format!("column '{path}': field without \"type\"")))?;
    let data_type = parse_type(type_value, &path, depth + 1)?;
    let nullable = get_bool(obj, "nullable", true, &path)?;
    let metadata = match obj.get("metadata") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Err(schema_err(format!(
                "column '{path}': \"metadata\" must be an object, found {other}"
            )))
        }
    };
    Ok(StructField {
        name,
        data_type,
        nullable,
        metadata,
    })
}

fn parse_struct(obj: &Map<String, Value>, path: &str, depth: usize) -> Result<StructType> {
    let fields = match obj.get("fields") {
        Some(Value::Array(fields)) => fields,
        _ => {
            return Err(schema_err(format!(
                "struct '{path}': missing \"fields\" array"
            )))
        }
    };
    let fields = fields
        .iter()
        .map(|f| parse_field(f, path, depth))
        .collect::<Result<Vec<_>>>()?;
    let mut seen = HashSet::with_capacity(fields.len());
    for f in &fields {
        if !seen.insert(f.name.to_lowercase()) {
            return Err(schema_err(format!(
                "duplicate column '{}' (column names must be unique regardless of case)",
                child_path(path, &f.name)
            )));
        }
    }
    Ok(StructType { fields })
}

// ---------------------------------------------------------------------------
// StructType / StructField
// ---------------------------------------------------------------------------

impl StructType {
    /// A struct with these fields.
    pub fn new(fields: Vec<StructField>) -> Self {
        StructType { fields }
    }

    /// Parse `metaData.schemaString`. The top level must be a struct.
    pub fn parse(schema_string: &str) -> Result<StructType> {
        let value: Value = serde_json::from_str(schema_string)
            .map_err(|e| schema_err(format!("schemaString is not valid JSON: {e}")))?;
        let obj = value
            .as_object()
            .ok_or_else(|| schema_err("schemaString must be a JSON object"))?;
        match obj.get("type") {
            Some(Value::String(t)) if t == "struct" => parse_struct(obj, "", 0),
            _ => Err(schema_err(
                "schemaString must be a struct type ({\"type\":\"struct\",…})",
            )),
        }
    }

    /// The field with exactly this (logical) name.
    pub fn field(&self, name: &str) -> Option<&StructField> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The field with this (logical) name, compared case-insensitively when no
    /// exact match exists (Delta column names are unique regardless of case).
    pub fn field_ignore_case(&self, name: &str) -> Option<&StructField> {
        self.field(name).or_else(|| {
            let lower = name.to_lowercase();
            self.fields.iter().find(|f| f.name.to_lowercase() == lower)
        })
    }

    /// Position of the field with exactly this (logical) name.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }

    /// The Delta JSON representation (`{"type":"struct","fields":[…]}`).
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("type".into(), Value::from("struct"));
        o.insert(
            "fields".into(),
            Value::Array(self.fields.iter().map(StructField::to_json).collect()),
        );
        Value::Object(o)
    }

    /// The Delta schema string (the inverse of [`StructType::parse`]).
    pub fn to_schema_string(&self) -> String {
        self.to_json().to_string()
    }

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
    /// A field without metadata.
    pub fn new(name: impl Into<String>, data_type: DataType, nullable: bool) -> Self {
        StructField {
            name: name.into(),
            data_type,
            nullable,
            metadata: Map::new(),
        }
    }

    /// The same field with these metadata entries added.
    pub fn with_metadata<K: Into<String>, V: Into<Value>>(
        mut self,
        entries: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        for (k, v) in entries {
            self.metadata.insert(k.into(), v.into());
        }
        self
    }

    /// The name this column has in data files and in `add.partitionValues`: the
    /// logical name with mode `None`, `delta.columnMapping.physicalName` otherwise
    /// (an [`Error::Schema`] if it is missing or not a non-empty string).
    pub fn physical_name(&self, mode: ColumnMappingMode) -> Result<&str> {
        if mode == ColumnMappingMode::None {
            return Ok(&self.name);
        }
        match self.metadata.get(PHYSICAL_NAME_KEY) {
            Some(Value::String(p)) if !p.is_empty() => Ok(p),
            _ => Err(schema_err(format!(
                "column '{}' has no {PHYSICAL_NAME_KEY} although column mapping mode is {mode}",
                self.name
            ))),
        }
    }

    /// `delta.columnMapping.id`, if present and an integer.
    pub fn field_id(&self) -> Option<i64> {
        self.metadata.get(COLUMN_ID_KEY).and_then(json_int)
    }

    /// The Delta JSON representation of this field.
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("name".into(), Value::from(self.name.as_str()));
        o.insert("type".into(), self.data_type.to_json());
        o.insert("nullable".into(), Value::from(self.nullable));
        o.insert("metadata".into(), Value::Object(self.metadata.clone()));
        Value::Object(o)
    }

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

/// An integer JSON value, or a string holding one.
fn json_int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
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

// ---------------------------------------------------------------------------
// Partition values
// ---------------------------------------------------------------------------

/// Parse one partition value's text as an exact decimal of `precision`/`scale`,
/// returning the unscaled integer. Accepts `[+-]digits[.digits][(e|E)[+-]digits]`
/// (Java's `BigDecimal.toString` may use an exponent). Values that would need
/// rounding or exceed the precision are rejected.
pub(crate) fn parse_decimal_value(s: &str, precision: u8, scale: i8) -> Option<i128> {
    let (negative, body) = if let Some(rest) = s.strip_prefix('-') {
        (true, rest)
    } else if let Some(rest) = s.strip_prefix('+') {
        (false, rest)
    } else {
        (false, s)
    };
    let (mantissa, exponent) = match body.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().ok()?),
        None => (body, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if (int_part.is_empty() && frac_part.is_empty())
        || !all_digits(int_part)
        || !all_digits(frac_part)
    {
        return None;
    }
    let digits = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Some(0);
    }
    let significant = digits.trim_end_matches('0');
    let trailing_zeros = i64::try_from(digits.len() - significant.len()).ok()?;
    let frac_len = i64::try_from(frac_part.len()).ok()?;
    // value = significant * 10^shift at the target scale
    let shift = i64::from(exponent) - frac_len + i64::from(scale) + trailing_zeros;
    if shift < 0 {
        return None; // would need rounding
    }
    let total_digits = i64::try_from(significant.len()).ok()? + shift;
    if total_digits > i64::from(precision) {
        return None;
    }
    let mut unscaled: i128 = significant.parse().ok()?;
    for _ in 0..shift {
        unscaled = unscaled.checked_mul(10)?;
    }
    Some(if negative { -unscaled } else { unscaled })
}

/// `YYYY-MM-DD` (month and day may have one digit) as a date.
pub(crate) fn parse_date(s: &str) -> Option<NaiveDate> {
    let mut parts = s.splitn(3, '-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    let digits = |p: &str, min: usize, max: usize| {
        (min..=max).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit())
    };
    if !digits(y, 4, 6) || !digits(m, 1, 2) || !digits(d, 1, 2) {
        return None;
    }
    NaiveDate::from_ymd_opt(y.parse().ok()?, m.parse().ok()?, d.parse().ok()?)
}

pub(crate) fn epoch_days(date: NaiveDate) -> Option<i64> {
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?;
    Some(date.signed_duration_since(epoch).num_days())
}

/// `H:M:S[.f]` as microseconds since midnight. Up to 9 fraction digits are
/// accepted, but digits below the microsecond must be zero.
fn parse_time_micros(s: &str) -> Option<i64> {
    let (hms, frac) = s.split_once('.').unwrap_or((s, ""));
    let mut parts = hms.splitn(3, ':');
    let (h, m, sec) = (parts.next()?, parts.next()?, parts.next()?);
    let two = |p: &str| (1..=2).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit());
    if !two(h) || !two(m) || !two(sec) {
        return None;
    }
    let (h, m, sec): (i64, i64, i64) = (h.parse().ok()?, m.parse().ok()?, sec.parse().ok()?);
    if h > 23 || m > 59 || sec > 59 {
        return None;
    }
    let micros = if frac.is_empty() && !s.contains('.') {
        0
    } else {
        if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let (micro_digits, rest) = frac.split_at(frac.len().min(6));
        if rest.bytes().any(|b| b != b'0') {
            return None; // sub-microsecond precision cannot be represented
        }
        let scale = 10_i64.pow(u32::try_from(6 - micro_digits.len()).ok()?);
        micro_digits.parse::<i64>().ok()? * scale
    };
    Some(((h * 60 + m) * 60 + sec) * 1_000_000 + micros)
}

/// A zone suffix (`Z`, `+HH:MM`, `+HHMM`, `+HH`, or the same with `-`) as
/// seconds east of UTC.
fn parse_offset_seconds(zone: &str) -> Option<i64> {
    if zone.eq_ignore_ascii_case("z") {
        return Some(0);
    }
    let (sign, rest) = if let Some(r) = zone.strip_prefix('+') {
        (1, r)
    } else if let Some(r) = zone.strip_prefix('-') {
        (-1, r)
    } else {
        return None;
    };
    let (h, m) = match (rest.len(), rest.split_once(':')) {
        (_, Some((h, m))) => (h, m),
        // Four bytes are not necessarily four characters: split on a boundary.
        (4, None) => rest.split_at_checked(2)?,
        (2, None) => (rest, "00"),
        _ => return None,
    };
    if h.len() != 2 || m.len() != 2 || !h.bytes().chain(m.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
    if h > 18 || m > 59 {
        return None;
    }
    Some(sign * (h * 3600 + m * 60))
}

/// A partition timestamp as microseconds since the epoch. Accepts
/// `YYYY-MM-DD HH:MM:SS[.ffffff]` and the same with `T` as separator; with
/// `zoned`, an optional zone suffix (`Z` or an offset) is applied, and a value
/// without zone is taken as UTC. Without `zoned` (timestamp_ntz) a zone suffix is
/// rejected.
pub(crate) fn parse_timestamp_micros(s: &str, zoned: bool) -> Option<i64> {
    let sep = s.find([' ', 'T', 't'])?;
    let (date, rest) = s.split_at(sep);
    let rest = rest.get(1..)?;
    let days = epoch_days(parse_date(date)?)?;
    // The time part never contains '+', '-' or 'Z', so the first such char starts the zone.
    let (time, offset) = match rest.find(['+', '-', 'Z', 'z']) {
        Some(i) if zoned => {
            let (time, zone) = rest.split_at(i);
            (time, parse_offset_seconds(zone)?)
        }
        Some(_) => return None,
        None => (rest, 0),
    };
    let micros = days
        .checked_mul(MICROS_PER_DAY)?
        .checked_add(parse_time_micros(time)?)?;
    micros.checked_sub(offset.checked_mul(1_000_000)?)
}

/// Parse every non-null text with `parse`, naming column, value and type in the
/// error for the first value that does not parse.
fn parse_each<T>(
    column: &str,
    dt: &DataType,
    values: &[Option<&str>],
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Vec<Option<T>>> {
    values
        .iter()
        .map(|v| match v {
            None => Ok(None),
            Some(s) => parse(s).map(Some).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "partition value {s:?} of column '{column}' is not a valid {dt}"
                ))
            }),
        })
        .collect()
}

/// Parse the serialized partition values of one column (`None` = null; an empty
/// string is also null) into an Arrow array of `to_arrow_type(dt)`.
pub fn partition_array(column: &str, dt: &DataType, values: &[Option<&str>]) -> Result<ArrayRef> {
    let values: Vec<Option<&str>> = values.iter().map(|v| v.filter(|s| !s.is_empty())).collect();
    let values = values.as_slice();
    Ok(match dt {
        DataType::String => Arc::new(StringArray::from(values.to_vec())),
        DataType::Binary => Arc::new(BinaryArray::from(
            values
                .iter()
                .map(|v| v.map(str::as_bytes))
                .collect::<Vec<_>>(),
        )),
        DataType::Long => Arc::new(Int64Array::from(parse_each(column, dt, values, |s| {
            s.parse().ok()
        })?)),
        DataType::Integer => Arc::new(Int32Array::from(parse_each(column, dt, values, |s| {
            s.parse().ok()
        })?)),
        DataType::Short => Arc::new(Int16Array::from(parse_each(column, dt, values, |s| {
            s.parse().ok()
        })?)),
        DataType::Byte => Arc::new(Int8Array::from(parse_each(column, dt, values, |s| {
            s.parse().ok()
        })?)),
        DataType::Float => Arc::new(Float32Array::from(parse_each(column, dt, values, |s| {
            s.parse().ok()
        })?)),
        DataType::Double => Arc::new(Float64Array::from(parse_each(column, dt, values, |s| {
            s.parse().ok()
        })?)),
        DataType::Boolean => Arc::new(BooleanArray::from(parse_each(column, dt, values, |s| {
            if s.eq_ignore_ascii_case("true") {
                Some(true)
            } else if s.eq_ignore_ascii_case("false") {
                Some(false)
            } else {
                None
            }
        })?)),
        DataType::Date => Arc::new(Date32Array::from(parse_each(column, dt, values, |s| {
            parse_date(s)
                .and_then(epoch_days)
                .and_then(|d| i32::try_from(d).ok())
        })?)),
        DataType::Timestamp => Arc::new(
            TimestampMicrosecondArray::from(parse_each(column, dt, values, |s| {
                parse_timestamp_micros(s, true)
            })?)
            .with_timezone("UTC"),
        ),
        DataType::TimestampNtz => Arc::new(TimestampMicrosecondArray::from(parse_each(
            column,
            dt,
            values,
            |s| parse_timestamp_micros(s, false),
        )?)),
        DataType::Decimal { precision, scale } => {
            validate_decimal(*precision, *scale, &format!("partition column '{column}'"))?;
            let parsed = parse_each(column, dt, values, |s| {
                parse_decimal_value(s, *precision, *scale)
            })?;
            Arc::new(
                Decimal128Array::from(parsed)
                    .with_precision_and_scale(*precision, *scale)
                    .map_err(|e| schema_err(format!("column '{column}': {e}")))?,
            )
        }
        DataType::Struct(_) | DataType::Array { .. } | DataType::Map { .. } | DataType::Variant => {
            return Err(Error::Unsupported(format!(
                "partition column '{column}' of non-primitive type {dt}"
            )))
        }
    })
}

/// Typed partition values for a batch of files.
///
/// `values` holds one `add.partitionValues` map per file, keyed by the physical
/// column name when column mapping is on and by the logical name otherwise; a
/// missing key, a null and an empty string all mean null. Returns one
/// `(field, array)` per entry of `partition_columns` (logical names, in that
/// order), each array of length `values.len()`, the field named by the logical
/// name and typed with `to_arrow_type(logical type)`.
///
/// Errors: a partition column missing from the schema ([`Error::Schema`]), a
/// non-primitive partition column ([`Error::Unsupported`]), a value that does
/// not parse as its type or a null in a non-nullable column
/// ([`Error::InvalidArgument`]).
pub fn partition_arrays(
    schema: &StructType,
    partition_columns: &[String],
    mode: ColumnMappingMode,
    values: &[&HashMap<String, Option<String>>],
) -> Result<Vec<(Field, ArrayRef)>> {
    partition_columns
        .iter()
        .map(|column| {
            let field = schema.field_ignore_case(column).ok_or_else(|| {
                schema_err(format!(
                    "partition column '{column}' is not in the table schema"
                ))
            })?;
            let key = field.physical_name(mode)?;
            let raw: Vec<Option<&str>> = values
                .iter()
                .map(|m| m.get(key).and_then(|v| v.as_deref()))
                .collect();
            let array = partition_array(&field.name, &field.data_type, &raw)?;
            if !field.nullable && array.null_count() > 0 {
                return Err(Error::InvalidArgument(format!(
                    "partition column '{}' is not nullable but a file has a null value for it",
                    field.name
                )));
            }
            let arrow_type = to_arrow_type(&field.data_type, ColumnMappingMode::None, false)?;
            Ok((
                Field::new(field.name.as_str(), arrow_type, field.nullable),
                array,
            ))
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{
        Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type,
        Int8Type, TimestampMicrosecondType,
    };

    fn prim_field(name: &str, ty: &str) -> String {
        format!(r#"{{"name":"{name}","type":"{ty}","nullable":true,"metadata":{{}}}}"#)
    }

    fn schema_of(fields: &[String]) -> String {
        format!(r#"{{"type":"struct","fields":[{}]}}"#, fields.join(","))
    }

    #[test]
    fn parses_and_converts_every_primitive() {
        let cases: &[(&str, DataType, ArrowDataType)] = &[
            ("string", DataType::String, ArrowDataType::Utf8),
            ("long", DataType::Long, ArrowDataType::Int64),
            ("integer", DataType::Integer, ArrowDataType::Int32),
            ("short", DataType::Short, ArrowDataType::Int16),
            ("byte", DataType::Byte, ArrowDataType::Int8),
            ("float", DataType::Float, ArrowDataType::Float32),
            ("double", DataType::Double, ArrowDataType::Float64),
            ("boolean", DataType::Boolean, ArrowDataType::Boolean),
            ("binary", DataType::Binary, ArrowDataType::Binary),
            ("date", DataType::Date, ArrowDataType::Date32),
            (
                "timestamp",
                DataType::Timestamp,
                ArrowDataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            ),
            (
                "timestamp_ntz",
                DataType::TimestampNtz,
                ArrowDataType::Timestamp(TimeUnit::Microsecond, None),
            ),
            (
                "decimal(10,2)",
                DataType::Decimal {
                    precision: 10,
                    scale: 2,
                },
                ArrowDataType::Decimal128(10, 2),
            ),
            (
                "decimal(38, 18)",
                DataType::Decimal {
                    precision: 38,
                    scale: 18,
                },
                ArrowDataType::Decimal128(38, 18),
            ),
            (
                "decimal",
                DataType::Decimal {
                    precision: 10,
                    scale: 0,
                },
                ArrowDataType::Decimal128(10, 0),
            ),
        ];
        let fields: Vec<String> = cases
            .iter()
            .enumerate()
            .map(|(i, (ty, _, _))| prim_field(&format!("c{i}"), ty))
            .collect();
        let schema = StructType::parse(&schema_of(&fields)).unwrap();
        let arrow = schema.to_arrow(ColumnMappingMode::None, false).unwrap();
        assert_eq!(schema.fields.len(), cases.len());
        for (i, (ty, delta, arrow_ty)) in cases.iter().enumerate() {
            let f = &schema.fields[i];
            assert_eq!(f.name, format!("c{i}"));
            assert_eq!(&f.data_type, delta, "{ty}");
            assert!(f.nullable);
            let af = arrow.field(i);
            assert_eq!(af.name(), &format!("c{i}"));
            assert_eq!(af.data_type(), arrow_ty, "{ty}");
            assert!(af.is_nullable());
            assert!(af.metadata().is_empty());
            assert_eq!(
                &to_arrow_type(delta, ColumnMappingMode::None, false).unwrap(),
                arrow_ty
            );
        }
    }

    #[test]
    fn nullability_and_field_lookup() {
        let s = StructType::parse(
            r#"{"type":"struct","fields":[{"name":"a","type":"long","nullable":false,"metadata":{}},{"name":"B","type":"string","nullable":true,"metadata":{"comment":"x"}}]}"#,
        )
        .unwrap();
        assert!(!s.field("a").unwrap().nullable);
        assert_eq!(s.field("B").unwrap().metadata.get("comment").unwrap(), "x");
        assert!(s.field("b").is_none());
        assert_eq!(s.field_ignore_case("b").unwrap().name, "B");
        assert_eq!(s.index_of("B"), Some(1));
        let arrow = s.to_arrow(ColumnMappingMode::None, false).unwrap();
        assert!(!arrow.field(0).is_nullable());
        // Column metadata other than field ids is not carried into Arrow.
        assert!(arrow.field(1).metadata().is_empty());
    }

    const NESTED: &str = r#"{
      "type" : "struct",
      "fields" : [ {"name" : "a", "type" : "integer", "nullable" : false, "metadata" : { }},
        {"name" : "b", "type" : {"type" : "struct", "fields" : [
            {"name" : "d", "type" : "integer", "nullable" : false, "metadata" : { }} ]},
         "nullable" : true, "metadata" : { }},
        {"name" : "c", "type" : {"type" : "array", "elementType" : "integer", "containsNull" : false},
         "nullable" : true, "metadata" : { }},
        {"name" : "e", "type" : {"type" : "array", "elementType" : {"type" : "struct", "fields" : [
            {"name" : "d", "type" : "integer", "nullable" : false, "metadata" : { }} ]},
          "containsNull" : true},
         "nullable" : true, "metadata" : { }},
        {"name" : "f", "type" : {"type" : "map", "keyType" : "string", "valueType" : "string",
          "valueContainsNull" : true},
         "nullable" : true, "metadata" : { }} ]
    }"#;

    #[test]
    fn nested_struct_array_map() {
        let s = StructType::parse(NESTED).unwrap();
        let inner = StructType::new(vec![StructField::new("d", DataType::Integer, false)]);
        assert_eq!(
            s.field("b").unwrap().data_type,
            DataType::Struct(inner.clone())
        );
        assert_eq!(
            s.field("c").unwrap().data_type,
            DataType::Array {
                element: Box::new(DataType::Integer),
                contains_null: false
            }
        );
        assert_eq!(
            s.field("e").unwrap().data_type,
            DataType::Array {
                element: Box::new(DataType::Struct(inner)),
                contains_null: true
            }
        );
        assert_eq!(
            s.field("f").unwrap().data_type,
            DataType::Map {
                key: Box::new(DataType::String),
                value: Box::new(DataType::String),
                value_contains_null: true
            }
        );

        let arrow = s.to_arrow(ColumnMappingMode::None, false).unwrap();
        let d = Field::new("d", ArrowDataType::Int32, false);
        assert_eq!(
            arrow.field(1).data_type(),
            &ArrowDataType::Struct(Fields::from(vec![d.clone()]))
        );
        assert_eq!(
            arrow.field(2).data_type(),
            &ArrowDataType::List(Arc::new(Field::new("element", ArrowDataType::Int32, false)))
        );
        assert_eq!(
            arrow.field(3).data_type(),
            &ArrowDataType::List(Arc::new(Field::new(
                "element",
                ArrowDataType::Struct(Fields::from(vec![d])),
                true
            )))
        );
        let entries = Field::new(
            "key_value",
            ArrowDataType::Struct(Fields::from(vec![
                Field::new("key", ArrowDataType::Utf8, false),
                Field::new("value", ArrowDataType::Utf8, true),
            ])),
            false,
        );
        assert_eq!(
            arrow.field(4).data_type(),
            &ArrowDataType::Map(Arc::new(entries), false)
        );
    }

    #[test]
    fn variant_columns() {
        // PROTOCOL.md's example: a top-level variant and an array of them
        // (the element type in object form).
        let st = StructType::parse(
            r#"{"type":"struct","fields":[
                {"name":"raw","type":"variant","nullable":true,"metadata":{}},
                {"name":"arr","type":{"type":"array","elementType":{"type":"variant"},
                 "containsNull":false},"nullable":false,"metadata":{}}]}"#,
        )
        .unwrap();
        assert_eq!(st.fields[0].data_type, DataType::Variant);
        assert!(!DataType::Variant.is_primitive());
        assert_eq!(DataType::Variant.to_string(), "variant");
        assert_eq!(DataType::Variant.to_json(), Value::from("variant"));
        let arrow = st.to_arrow(ColumnMappingMode::None, false).unwrap();
        let physical = ArrowDataType::Struct(Fields::from(vec![
            Field::new("value", ArrowDataType::Binary, false),
            Field::new("metadata", ArrowDataType::Binary, false),
        ]));
        assert_eq!(arrow.field(0).data_type(), &physical);
        assert_eq!(
            arrow.field(1).data_type(),
            &ArrowDataType::List(Arc::new(Field::new("element", physical, false)))
        );
        let err = partition_array("raw", &DataType::Variant, &[Some("x")]).unwrap_err();
        assert!(
            err.to_string().contains("non-primitive type variant"),
            "{err}"
        );
    }

    #[test]
    fn json_round_trip() {
        let s = StructType::parse(NESTED).unwrap();
        let again = StructType::parse(&s.to_schema_string()).unwrap();
        assert_eq!(s, again);
        let d = StructType::parse(&schema_of(&[prim_field("x", "decimal(5, 2)")])).unwrap();
        assert!(d.to_schema_string().contains(r#""type":"decimal(5,2)""#));
        assert_eq!(StructType::parse(&d.to_schema_string()).unwrap(), d);
    }

    #[test]
    fn decimal_types() {
        for bad in [
            "decimal(39,2)",
            "decimal(0,0)",
            "decimal(5,6)",
            "decimal(300,1)",
            "decimal(10)",
            "decimal(a,b)",
            "decimal(10,2",
            "decimal(-1,0)",
        ] {
            let err = StructType::parse(&schema_of(&[prim_field("x", bad)])).unwrap_err();
            assert!(matches!(err, Error::Schema(_)), "{bad}: {err}");
        }
        let dt = DataType::Decimal {
            precision: 40,
            scale: 0,
        };
        assert!(matches!(
            to_arrow_type(&dt, ColumnMappingMode::None, false),
            Err(Error::Schema(_))
        ));
    }

    /// A schema with one column `c` whose type is `levels` arrays (or structs) deep
    /// around a long.
    fn nested_schema(levels: usize, kind: &str) -> String {
        let (open, close) = match kind {
            "array" => (
                r#"{"type":"array","elementType":"#,
                r#","containsNull":true}"#,
            ),
            _ => (
                r#"{"type":"struct","fields":[{"name":"s","type":"#,
                r#","nullable":true,"metadata":{}}]}"#,
            ),
        };
        format!(
            r#"{{"type":"struct","fields":[{{"name":"c","type":{}"long"{},"nullable":true,"metadata":{{}}}}]}}"#,
            open.repeat(levels),
            close.repeat(levels)
        )
    }

    #[test]
    fn deeply_nested_types_are_refused_not_a_stack_overflow() {
        // Far past any limit: serde_json's recursion limit refuses the JSON.
        for kind in ["array", "struct"] {
            for levels in [1_000, 100_000] {
                let err = StructType::parse(&nested_schema(levels, kind)).unwrap_err();
                assert!(
                    matches!(&err, Error::Schema(m) if m.contains("recursion limit exceeded")),
                    "{kind} x{levels}: {err}"
                );
            }
        }
        // JSON that serde accepts but that nests more types than MAX_TYPE_DEPTH.
        let err = StructType::parse(&nested_schema(MAX_TYPE_DEPTH, "array")).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("nested deeper than {MAX_TYPE_DEPTH} levels")),
            "{err}"
        );
        // The deepest schema accepted is parsed, converted, printed and
        // re-serialized on a 1 MiB stack (half a tokio worker's, a quarter of
        // the default in a debug build): the recursive walks have room to spare.
        let deepest = [
            nested_schema(MAX_TYPE_DEPTH - 1, "array"),
            // Each struct level is three JSON levels: serde's 128 caps these first.
            nested_schema(41, "struct"),
        ];
        std::thread::Builder::new()
            .stack_size(1024 * 1024)
            .spawn(move || {
                for text in deepest {
                    let st = StructType::parse(&text).unwrap();
                    let arrow = st.to_arrow(ColumnMappingMode::None, false).unwrap();
                    assert_eq!(arrow.fields().len(), 1);
                    assert_eq!(StructType::parse(&st.to_schema_string()).unwrap(), st);
                    assert!(!format!("{st:?}").is_empty());
                }
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(StructType::parse(&nested_schema(42, "struct")).is_err());
    }

    #[test]
    fn bad_type_names_and_shapes() {
        for ty in [
            "varchar(3)",
            "geometry(OGC:CRS84)",
            "void",
            "interval day to second",
            "Long",
        ] {
            let err = StructType::parse(&schema_of(&[prim_field("col_x", ty)])).unwrap_err();
            match err {
                Error::Unsupported(msg) => {
                    assert!(msg.contains(ty) && msg.contains("col_x"), "{msg}")
                }
                other => panic!("{ty}: {other}"),
            }
        }
        // Nested unknown type names the nested column path.
        let err = StructType::parse(
            r#"{"type":"struct","fields":[{"name":"s","type":{"type":"struct","fields":[{"name":"t","type":{"type":"array","elementType":"uuid","containsNull":true},"nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}"#,
        )
        .unwrap_err();
        assert!(
            matches!(&err, Error::Unsupported(m) if m.contains("uuid") && m.contains("s.t.element")),
            "{err}"
        );
        // An unknown type given in object form is also unsupported.
        let err = StructType::parse(
            r#"{"type":"struct","fields":[{"name":"v","type":{"type":"geography"},"nullable":true,"metadata":{}}]}"#,
        )
        .unwrap_err();
        assert!(matches!(err, Error::Unsupported(_)));

        for bad in [
            "not json",
            "[]",
            r#"{"type":"array","elementType":"long","containsNull":true}"#,
            r#"{"type":"struct"}"#,
            r#"{"type":"struct","fields":[{"type":"long"}]}"#,
            r#"{"type":"struct","fields":[{"name":"a"}]}"#,
            r#"{"type":"struct","fields":[{"name":"a","type":1}]}"#,
            r#"{"type":"struct","fields":[{"name":"a","type":"long","nullable":"yes"}]}"#,
            r#"{"type":"struct","fields":[{"name":"a","type":{"type":"array"}}]}"#,
            r#"{"type":"struct","fields":[{"name":"a","type":{"type":"map","keyType":"string"}}]}"#,
            r#"{"type":"struct","fields":[{"name":"a","type":"long"},{"name":"A","type":"long"}]}"#,
        ] {
            let err = StructType::parse(bad).unwrap_err();
            assert!(matches!(err, Error::Schema(_)), "{bad}: {err}");
        }
    }

    const MAPPED: &str = r#"{"type":"struct","fields":[
      {"name":"id","type":"long","nullable":false,
       "metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-id"}},
      {"name":"s","type":{"type":"struct","fields":[
          {"name":"x","type":"integer","nullable":true,
           "metadata":{"delta.columnMapping.id":3,"delta.columnMapping.physicalName":"col-x"}}]},
       "nullable":true,
       "metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"col-s"}},
      {"name":"arr","type":{"type":"array","elementType":{"type":"struct","fields":[
          {"name":"y","type":"string","nullable":true,
           "metadata":{"delta.columnMapping.id":5,"delta.columnMapping.physicalName":"col-y"}}]},
          "containsNull":true},
       "nullable":true,
       "metadata":{"delta.columnMapping.id":4,"delta.columnMapping.physicalName":"col-arr",
                   "delta.columnMapping.nested.ids":{"col-arr.element":6}}},
      {"name":"m","type":{"type":"map","keyType":"string","valueType":{"type":"struct","fields":[
          {"name":"z","type":"double","nullable":false,
           "metadata":{"delta.columnMapping.id":8,"delta.columnMapping.physicalName":"col-z"}}]},
          "valueContainsNull":true},
       "nullable":true,
       "metadata":{"delta.columnMapping.id":7,"delta.columnMapping.physicalName":"col-m"}}
    ]}"#;

    fn fid(f: &Field) -> Option<&str> {
        f.metadata().get(PARQUET_FIELD_ID_KEY).map(String::as_str)
    }

    fn struct_fields(dt: &ArrowDataType) -> &Fields {
        match dt {
            ArrowDataType::Struct(fields) => fields,
            other => panic!("not a struct: {other}"),
        }
    }

    #[test]
    fn column_mapping_physical_names_and_ids() {
        let s = StructType::parse(MAPPED).unwrap();
        let id = s.field("id").unwrap();
        assert_eq!(id.physical_name(ColumnMappingMode::None).unwrap(), "id");
        assert_eq!(id.physical_name(ColumnMappingMode::Name).unwrap(), "col-id");
        assert_eq!(id.physical_name(ColumnMappingMode::Id).unwrap(), "col-id");
        assert_eq!(id.field_id(), Some(1));

        // Logical view: no metadata at all.
        for (mode, physical) in [
            (ColumnMappingMode::None, false),
            (ColumnMappingMode::None, true),
            (ColumnMappingMode::Name, false),
        ] {
            let logical = s.to_arrow(mode, physical).unwrap();
            let names: Vec<_> = logical.fields().iter().map(|f| f.name().as_str()).collect();
            assert_eq!(names, ["id", "s", "arr", "m"]);
            assert!(logical.fields().iter().all(|f| f.metadata().is_empty()));
            let inner = struct_fields(logical.field(1).data_type());
            assert_eq!(inner[0].name(), "x");
        }

        for mode in [ColumnMappingMode::Name, ColumnMappingMode::Id] {
            let phys = s.to_arrow(mode, true).unwrap();
            let names: Vec<_> = phys.fields().iter().map(|f| f.name().as_str()).collect();
            assert_eq!(names, ["col-id", "col-s", "col-arr", "col-m"]);
            let ids: Vec<_> = phys.fields().iter().map(|f| fid(f)).collect();
            assert_eq!(ids, [Some("1"), Some("2"), Some("4"), Some("7")]);
            assert!(!phys.field(0).is_nullable());

            let x = &struct_fields(phys.field(1).data_type())[0];
            assert_eq!((x.name().as_str(), fid(x)), ("col-x", Some("3")));

            let ArrowDataType::List(element) = phys.field(2).data_type() else {
                panic!("not a list")
            };
            assert_eq!(
                (element.name().as_str(), fid(element)),
                ("element", Some("6"))
            );
            let y = &struct_fields(element.data_type())[0];
            assert_eq!((y.name().as_str(), fid(y)), ("col-y", Some("5")));

            let ArrowDataType::Map(entries, false) = phys.field(3).data_type() else {
                panic!("not a map")
            };
            assert_eq!(entries.name(), "key_value");
            let kv = struct_fields(entries.data_type());
            assert_eq!(fid(&kv[0]), None);
            let z = &struct_fields(kv[1].data_type())[0];
            assert_eq!((z.name().as_str(), fid(z)), ("col-z", Some("8")));
            assert!(!z.is_nullable());
        }
    }

    #[test]
    fn column_mapping_missing_metadata() {
        let no_phys = StructType::parse(
            r#"{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":1}}]}"#,
        )
        .unwrap();
        assert!(matches!(
            no_phys.fields[0].physical_name(ColumnMappingMode::Name),
            Err(Error::Schema(_))
        ));
        assert!(no_phys.to_arrow(ColumnMappingMode::Name, true).is_err());
        assert!(no_phys.to_arrow(ColumnMappingMode::None, true).is_ok());

        // Id mode needs the id; name mode does not.
        let no_id = StructType::parse(
            r#"{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{"delta.columnMapping.physicalName":"p"}}]}"#,
        )
        .unwrap();
        assert_eq!(no_id.fields[0].field_id(), None);
        let name = no_id.to_arrow(ColumnMappingMode::Name, true).unwrap();
        assert_eq!(name.field(0).name(), "p");
        assert!(name.field(0).metadata().is_empty());
        assert!(matches!(
            no_id.to_arrow(ColumnMappingMode::Id, true),
            Err(Error::Schema(_))
        ));

        // A nested field missing its physical name fails too.
        let nested = StructType::parse(
            r#"{"type":"struct","fields":[{"name":"s","type":{"type":"struct","fields":[{"name":"x","type":"long","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"p"}}]}"#,
        )
        .unwrap();
        assert!(nested.to_arrow(ColumnMappingMode::Name, true).is_err());
    }

    #[test]
    fn column_mapping_mode_from_configuration() {
        let conf = |v: Option<Option<&str>>| {
            let mut m = HashMap::new();
            m.insert("other".to_string(), Some("x".to_string()));
            if let Some(v) = v {
                m.insert(COLUMN_MAPPING_MODE_KEY.to_string(), v.map(str::to_string));
            }
            m
        };
        assert_eq!(
            column_mapping_mode(&conf(None)).unwrap(),
            ColumnMappingMode::None
        );
        assert_eq!(
            column_mapping_mode(&conf(Some(None))).unwrap(),
            ColumnMappingMode::None
        );
        assert_eq!(
            column_mapping_mode(&conf(Some(Some("none")))).unwrap(),
            ColumnMappingMode::None
        );
        assert_eq!(
            column_mapping_mode(&conf(Some(Some("name")))).unwrap(),
            ColumnMappingMode::Name
        );
        assert_eq!(
            column_mapping_mode(&conf(Some(Some("ID")))).unwrap(),
            ColumnMappingMode::Id
        );
        for bad in ["", "names", "position"] {
            assert!(matches!(
                column_mapping_mode(&conf(Some(Some(bad)))),
                Err(Error::Unsupported(_))
            ));
        }
    }

    // ---- partition values ----

    fn pv(pairs: &[(&str, Option<&str>)]) -> HashMap<String, Option<String>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect()
    }

    fn one(dt: DataType, values: &[Option<&str>]) -> Result<ArrayRef> {
        partition_array("p", &dt, values)
    }

    fn assert_invalid(dt: DataType, value: &str) {
        match one(dt.clone(), &[Some(value)]) {
            Err(Error::InvalidArgument(msg)) => {
                assert!(
                    msg.contains("'p'") && msg.contains(&dt.to_string()),
                    "{msg}"
                )
            }
            other => panic!("{dt} {value:?}: expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn partition_integers_floats_booleans() {
        let a = one(
            DataType::Long,
            &[Some("-9223372036854775808"), Some(""), None, Some("42")],
        )
        .unwrap();
        let a = a.as_primitive::<Int64Type>();
        assert_eq!(a.len(), 4);
        assert_eq!(a.value(0), i64::MIN);
        assert!(a.is_null(1) && a.is_null(2));
        assert_eq!(a.value(3), 42);

        let a = one(DataType::Integer, &[Some("2147483647")]).unwrap();
        assert_eq!(a.as_primitive::<Int32Type>().value(0), i32::MAX);
        let a = one(DataType::Short, &[Some("-32768")]).unwrap();
        assert_eq!(a.as_primitive::<Int16Type>().value(0), i16::MIN);
        let a = one(DataType::Byte, &[Some("127")]).unwrap();
        assert_eq!(a.as_primitive::<Int8Type>().value(0), 127);

        let a = one(
            DataType::Float,
            &[Some("1.5"), Some("NaN"), Some("-Infinity")],
        )
        .unwrap();
        let a = a.as_primitive::<Float32Type>();
        assert_eq!(a.value(0), 1.5);
        assert!(a.value(1).is_nan());
        assert_eq!(a.value(2), f32::NEG_INFINITY);
        let a = one(DataType::Double, &[Some("1.0E10"), Some("-0.25")]).unwrap();
        let a = a.as_primitive::<Float64Type>();
        assert_eq!((a.value(0), a.value(1)), (1.0e10, -0.25));

        let a = one(
            DataType::Boolean,
            &[Some("true"), Some("false"), Some(""), None],
        )
        .unwrap();
        let a = a.as_boolean();
        assert!(a.value(0) && !a.value(1) && a.is_null(2) && a.is_null(3));

        assert_invalid(DataType::Integer, "2147483648");
        assert_invalid(DataType::Byte, "128");
        assert_invalid(DataType::Long, "1.0");
        assert_invalid(DataType::Long, " 1");
        assert_invalid(DataType::Long, "abc");
        assert_invalid(DataType::Double, "1,5");
        assert_invalid(DataType::Boolean, "1");
        assert_invalid(DataType::Boolean, "yes");
    }

    #[test]
    fn partition_strings_and_binary() {
        let a = one(
            DataType::String,
            &[Some("a b/c=d"), Some(""), None, Some("ü")],
        )
        .unwrap();
        let a = a.as_string::<i32>();
        assert_eq!(a.value(0), "a b/c=d");
        assert!(a.is_null(1) && a.is_null(2));
        assert_eq!(a.value(3), "ü");

        let a = one(DataType::Binary, &[Some("\u{1}\u{2}\u{3}"), Some("")]).unwrap();
        let a = a.as_binary::<i32>();
        assert_eq!(a.value(0), &[1, 2, 3]);
        assert!(a.is_null(1));
    }

    #[test]
    fn partition_dates() {
        let a = one(
            DataType::Date,
            &[
                Some("1970-01-01"),
                Some("2024-02-29"),
                Some("1969-12-31"),
                Some(""),
            ],
        )
        .unwrap();
        let a = a.as_primitive::<Date32Type>();
        assert_eq!(a.value(0), 0);
        assert_eq!(a.value(1), 19782);
        assert_eq!(a.value(2), -1);
        assert!(a.is_null(3));
        for bad in [
            "2023-02-29",
            "2024-13-01",
            "2024/01/01",
            "20240101",
            "2024-01-01 00:00:00",
            "x",
        ] {
            assert_invalid(DataType::Date, bad);
        }
    }

    #[test]
    fn timestamp_zone_with_multibyte_characters_is_invalid_not_a_panic() {
        // Found by fuzz target predicate_parse: a 4-byte zone "+\u{1}\u{0}\u{c8}"
        // split at byte 2, inside a character.
        for zone in ["+0\u{e9}0", "-\u{20ac}0", "+\u{1f600}", "+\u{e9}\u{e9}"] {
            assert_eq!(zone.len(), 5, "{zone:?}: a sign and 4 bytes");
            assert_eq!(parse_offset_seconds(zone), None, "{zone:?}");
            let ts = format!("2024-02-02 03:04:05{zone}");
            assert_eq!(parse_timestamp_micros(&ts, true), None, "{ts:?}");
        }
        assert_eq!(parse_offset_seconds("+0130"), Some(5400));
        assert_invalid(DataType::Timestamp, "2024-02-02 03:04:05+0\u{e9}0");
    }

    #[test]
    fn partition_timestamps() {
        let a = one(
            DataType::Timestamp,
            &[
                Some("1970-01-01 00:00:00"),
                Some("1970-01-01 00:00:01.5"),
                Some("2021-07-01 12:34:56.123456"),
                Some("1970-01-01T00:00:00.000001Z"),
                Some("1970-01-01T01:00:00+01:00"),
                Some("1969-12-31 23:59:59.999999"),
                Some("1970-01-01T00:00:00.123456000Z"),
                Some(""),
                None,
            ],
        )
        .unwrap();
        assert_eq!(
            a.data_type(),
            &ArrowDataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        );
        let t = a.as_primitive::<TimestampMicrosecondType>();
        assert_eq!(t.value(0), 0);
        assert_eq!(t.value(1), 1_500_000);
        assert_eq!(t.value(2), 1_625_142_896_123_456);
        assert_eq!(t.value(3), 1);
        assert_eq!(t.value(4), 0);
        assert_eq!(t.value(5), -1);
        assert_eq!(t.value(6), 123_456);
        assert!(t.is_null(7) && t.is_null(8));
        let a = one(DataType::Timestamp, &[Some("2000-01-01 00:00:00-0530")]).unwrap();
        assert_eq!(
            a.as_primitive::<TimestampMicrosecondType>().value(0),
            946_684_800_000_000 + 5 * 3_600_000_000 + 30 * 60_000_000
        );

        let a = one(
            DataType::TimestampNtz,
            &[
                Some("2021-07-01 12:34:56.123456"),
                Some("2021-07-01T00:00:00"),
                Some(""),
            ],
        )
        .unwrap();
        assert_eq!(
            a.data_type(),
            &ArrowDataType::Timestamp(TimeUnit::Microsecond, None)
        );
        let t = a.as_primitive::<TimestampMicrosecondType>();
        assert_eq!(t.value(0), 1_625_142_896_123_456);
        assert_eq!(t.value(1), 1_625_097_600_000_000);
        assert!(t.is_null(2));

        for bad in [
            "1970-01-01",
            "1970-01-01 24:00:00",
            "1970-01-01 00:60:00",
            "1970-01-01 00:00",
            "1970-01-01 00:00:00.",
            "1970-01-01 00:00:00.0000001",
            "1970-01-01 00:00:00.1234567891",
            "1970-01-01 00:00:00+25:00",
            "1970-01-01 00:00:00 UTC",
            "1970-13-01 00:00:00",
            "yesterday",
        ] {
            assert_invalid(DataType::Timestamp, bad);
        }
        assert_invalid(DataType::TimestampNtz, "1970-01-01T00:00:00Z");
        assert_invalid(DataType::TimestampNtz, "1970-01-01 00:00:00+01:00");
    }

    #[test]
    fn partition_decimals() {
        let dt = DataType::Decimal {
            precision: 5,
            scale: 2,
        };
        let a = one(
            dt.clone(),
            &[
                Some("123.45"),
                Some("-0.5"),
                Some("7"),
                Some("+1.10"),
                Some("999.99"),
                Some("1.2E+2"),
                Some("5E-2"),
                Some("0.000"),
                Some(".5"),
                Some(""),
            ],
        )
        .unwrap();
        assert_eq!(a.data_type(), &ArrowDataType::Decimal128(5, 2));
        let d = a.as_primitive::<Decimal128Type>();
        let got: Vec<Option<i128>> = d.iter().collect();
        assert_eq!(
            got,
            [
                Some(12345),
                Some(-50),
                Some(700),
                Some(110),
                Some(99999),
                Some(12000),
                Some(5),
                Some(0),
                Some(50),
                None
            ]
        );
        for bad in [
            "1000.00", "1.234", "1e3", "abc", "1.2.3", "-", ".", "1e", "12 3", "0x10",
        ] {
            assert_invalid(dt.clone(), bad);
        }
        // Full precision, no float round trip.
        let dt = DataType::Decimal {
            precision: 38,
            scale: 10,
        };
        let v = "1234567890123456789012345678.0123456789";
        let a = one(
            dt,
            &[Some(v), Some("-1234567890123456789012345678.0123456789")],
        )
        .unwrap();
        let d = a.as_primitive::<Decimal128Type>();
        assert_eq!(
            d.value(0),
            12_345_678_901_234_567_890_123_456_780_123_456_789_i128
        );
        assert_eq!(d.value_as_string(0), v);
        assert_eq!(d.value(1), -d.value(0));
        // Negative scale.
        let a = one(
            DataType::Decimal {
                precision: 3,
                scale: -2,
            },
            &[Some("12300"), Some("1.5E+4")],
        )
        .unwrap();
        let d = a.as_primitive::<Decimal128Type>();
        assert_eq!((d.value(0), d.value(1)), (123, 150));
    }

    #[test]
    fn partition_nested_type_is_unsupported() {
        let dt = DataType::Array {
            element: Box::new(DataType::Long),
            contains_null: true,
        };
        assert!(matches!(one(dt, &[None]), Err(Error::Unsupported(_))));
    }

    #[test]
    fn partition_arrays_logical_and_physical() {
        let schema = StructType::new(vec![
            StructField::new("value", DataType::Long, true),
            StructField::new("day", DataType::Date, true),
            StructField::new("region", DataType::String, true),
        ]);
        let cols = vec!["region".to_string(), "day".to_string()];
        let f1 = pv(&[("day", Some("2024-01-02")), ("region", Some("eu"))]);
        let f2 = pv(&[("day", None), ("region", Some(""))]);
        let f3 = pv(&[]);
        let out =
            partition_arrays(&schema, &cols, ColumnMappingMode::None, &[&f1, &f2, &f3]).unwrap();
        assert_eq!(out.len(), 2);
        let (field, region) = &out[0];
        assert_eq!(field, &Field::new("region", ArrowDataType::Utf8, true));
        let region = region.as_string::<i32>();
        assert_eq!(region.len(), 3);
        assert_eq!(region.value(0), "eu");
        assert!(region.is_null(1) && region.is_null(2));
        let (field, day) = &out[1];
        assert_eq!(field, &Field::new("day", ArrowDataType::Date32, true));
        let day = day.as_primitive::<Date32Type>();
        assert_eq!(day.value(0), 19724);
        assert!(day.is_null(1) && day.is_null(2));

        // No files: empty arrays.
        let out = partition_arrays(&schema, &cols, ColumnMappingMode::None, &[]).unwrap();
        assert!(out.iter().all(|(_, a)| a.is_empty()));

        // Column mapping: keyed by physical name; the logical key is ignored.
        let mapped = StructType::new(vec![StructField::new("part", DataType::Integer, true)
            .with_metadata([
                (COLUMN_ID_KEY, Value::from(1)),
                (PHYSICAL_NAME_KEY, Value::from("col-abc")),
            ])]);
        let cols = vec!["part".to_string()];
        let f1 = pv(&[("col-abc", Some("7"))]);
        let f2 = pv(&[("part", Some("8"))]);
        let out = partition_arrays(&mapped, &cols, ColumnMappingMode::Name, &[&f1, &f2]).unwrap();
        let (field, a) = &out[0];
        assert_eq!(field, &Field::new("part", ArrowDataType::Int32, true));
        let a = a.as_primitive::<Int32Type>();
        assert_eq!(a.value(0), 7);
        assert!(a.is_null(1));

        // Errors: unknown column, malformed value (names column, value, type), null in
        // a non-nullable column.
        assert!(matches!(
            partition_arrays(&schema, &["nope".to_string()], ColumnMappingMode::None, &[]),
            Err(Error::Schema(_))
        ));
        let bad = pv(&[("day", Some("2024-99-01"))]);
        match partition_arrays(
            &schema,
            &["day".to_string()],
            ColumnMappingMode::None,
            &[&bad],
        ) {
            Err(Error::InvalidArgument(msg)) => {
                assert!(
                    msg.contains("day") && msg.contains("2024-99-01") && msg.contains("date"),
                    "{msg}"
                )
            }
            other => panic!("{other:?}"),
        }
        let strict = StructType::new(vec![StructField::new("k", DataType::Long, false)]);
        let empty = pv(&[("k", Some(""))]);
        assert!(matches!(
            partition_arrays(
                &strict,
                &["k".to_string()],
                ColumnMappingMode::None,
                &[&empty]
            ),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            partition_arrays(&mapped, &cols, ColumnMappingMode::None, &[&f1])
                .map(|o| o[0].1.null_count()),
            Ok(1)
        ));
        // Mapping on but no physical name in the schema.
        assert!(matches!(
            partition_arrays(&schema, &["day".to_string()], ColumnMappingMode::Id, &[]),
            Err(Error::Schema(_))
        ));
    }
}
