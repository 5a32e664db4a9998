//! The Delta table schema (`metaData.schemaString`), column mapping, the
//! conversion to Arrow, and typed partition values. Pure logic, no I/O.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | Delta types, parsing and JSON of `schemaString`, column mapping modes, physical names and ids |
//! | `arrow.rs` | Delta types to Arrow (logical or physical names, field ids, nested slot ids, variant) |
//! | `partition.rs` | `add.partitionValues` strings to typed Arrow arrays (exact decimals, dates, timestamps) |
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
// The column mapping mode is a table property; its type lives with the keys.
pub use crate::log::features::properties::ColumnMappingMode;
use crate::log::features::properties::{
    TableProperties, COLUMN_ID_KEY, COLUMN_MAPPING_MAX_ID, NESTED_IDS_KEY, PHYSICAL_NAME_KEY,
};

/// Marks an [`StructField::internal`] column (never written to a schema in
/// the log).
const INTERNAL_COLUMN_KEY: &str = "deltadv.internal";
/// Arrow field metadata key the Parquet crate reads and writes field ids under.
pub const PARQUET_FIELD_ID_KEY: &str = "PARQUET:field_id";
/// The largest decimal precision Delta (and Arrow's `Decimal128`) allows.
pub const MAX_DECIMAL_PRECISION: u8 = 38;

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

/// The column mapping mode from a `metaData.configuration`: absent (or null) is
/// `None`; `none`, `name`, `id` (any case) map to their mode; anything else is an
/// [`Error::Unsupported`].
pub fn column_mapping_mode(
    configuration: &HashMap<String, Option<String>>,
) -> Result<ColumnMappingMode> {
    TableProperties::new(configuration).column_mapping_mode()
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
    if let Some(name) = first_duplicate(fields.iter().map(|f| f.name.as_str())) {
        return Err(schema_err(format!(
            "duplicate column '{}' (column names must be unique regardless of case)",
            child_path(path, name)
        )));
    }
    Ok(StructType { fields })
}

/// The first name that repeats an earlier one, ignoring case (Delta column
/// names are unique regardless of case).
fn first_duplicate<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut seen = HashSet::new();
    names.into_iter().find(|n| !seen.insert(n.to_lowercase()))
}

// ---------------------------------------------------------------------------
// StructType / StructField
// ---------------------------------------------------------------------------

impl StructType {
    /// The largest `delta.columnMapping.id` of any field, nested ones
    /// included (0 when none has one).
    pub fn max_field_id(&self) -> i64 {
        fn of_type(t: &DataType) -> i64 {
            match t {
                DataType::Struct(s) => s.max_field_id(),
                DataType::Array { element, .. } => of_type(element),
                DataType::Map { key, value, .. } => of_type(key).max(of_type(value)),
                _ => 0,
            }
        }
        self.fields
            .iter()
            .map(|f| f.field_id().unwrap_or(0).max(of_type(&f.data_type)))
            .max()
            .unwrap_or(0)
    }

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

    /// The `_change_type` column of a `cdc` file: a string, stored under its
    /// own name whatever the table's column mapping.
    pub fn change_type_column() -> Self {
        StructField::internal(crate::log::cdf::CHANGE_TYPE_COLUMN, DataType::String)
    }

    /// A nullable column files may hold beside the table's (a cdc file's
    /// `_change_type`, a materialized row id): stored under `name` whatever
    /// the column mapping, without a field id.
    pub fn internal(name: &str, data_type: DataType) -> Self {
        StructField::new(name, data_type, true).with_metadata([
            (PHYSICAL_NAME_KEY, Value::from(name)),
            (INTERNAL_COLUMN_KEY, Value::Bool(true)),
        ])
    }

    /// Whether this is an [`StructField::internal`] column.
    pub fn is_internal(&self) -> bool {
        self.metadata.get(INTERNAL_COLUMN_KEY) == Some(&Value::Bool(true))
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
}

/// An integer JSON value, or a string holding one.
fn json_int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

mod arrow;
mod partition;

/// Column mapping as Delta Spark assigns it: every struct field (nested ones,
/// and those of structs inside arrays and maps, in pre-order: a parent
/// before its children) lacking a `delta.columnMapping.id` gets the next id
/// after `max_column_id`, and one lacking a
/// `delta.columnMapping.physicalName` gets `col-<uuid>`. Returns the schema
/// and the new largest id (`delta.columnMapping.maxColumnId`). A new table
/// starts at 0; schema evolution continues from the table's maxColumnId.
pub fn assign_column_mapping(schema: &StructType, max_column_id: i64) -> (StructType, i64) {
    fn walk_type(t: &DataType, next: &mut i64) -> DataType {
        match t {
            DataType::Struct(s) => DataType::Struct(walk_struct(s, next)),
            DataType::Array {
                element,
                contains_null,
            } => DataType::Array {
                element: Box::new(walk_type(element, next)),
                contains_null: *contains_null,
            },
            DataType::Map {
                key,
                value,
                value_contains_null,
            } => DataType::Map {
                key: Box::new(walk_type(key, next)),
                value: Box::new(walk_type(value, next)),
                value_contains_null: *value_contains_null,
            },
            other => other.clone(),
        }
    }
    fn walk_struct(s: &StructType, next: &mut i64) -> StructType {
        let mut out = StructType::default();
        for f in &s.fields {
            let mut field = f.clone();
            if field.field_id().is_none() {
                *next += 1;
                field
                    .metadata
                    .insert(COLUMN_ID_KEY.into(), Value::from(*next));
            }
            if !matches!(field.metadata.get(PHYSICAL_NAME_KEY), Some(Value::String(p)) if !p.is_empty())
            {
                field.metadata.insert(
                    PHYSICAL_NAME_KEY.into(),
                    Value::from(format!("col-{}", uuid::Uuid::new_v4())),
                );
            }
            field.data_type = walk_type(&f.data_type, next);
            out.fields.push(field);
        }
        out
    }
    let mut next = max_column_id;
    let mapped = walk_struct(schema, &mut next);
    (mapped, next)
}

/// Whether every struct field of `schema`, at any depth, has a column
/// mapping id and physical name ([`assign_column_mapping`] would assign
/// nothing): a schema prepared once for data files written apart.
pub fn is_column_mapped(schema: &StructType) -> bool {
    assign_column_mapping(schema, schema.max_field_id()).0 == *schema
}

/// Refuse a column-mapped `schema` whose ids are not unique, or whose
/// physical names repeat among a struct's fields (as Delta Spark's
/// `checkColumnIdAndPhysicalNameAssignments`: ids over the whole schema,
/// physical names by physical path).
pub fn check_column_mapping_unique(schema: &StructType) -> Result<()> {
    fn walk_type<'a>(t: &'a DataType, ids: &mut HashMap<i64, &'a str>) -> Result<()> {
        match t {
            DataType::Struct(s) => walk_struct(s, ids),
            DataType::Array { element, .. } => walk_type(element, ids),
            DataType::Map { key, value, .. } => {
                walk_type(key, ids)?;
                walk_type(value, ids)
            }
            _ => Ok(()),
        }
    }
    fn walk_struct<'a>(s: &'a StructType, ids: &mut HashMap<i64, &'a str>) -> Result<()> {
        let mut names: HashMap<&str, &str> = HashMap::new();
        for f in &s.fields {
            if let Some(id) = f.field_id() {
                if let Some(other) = ids.insert(id, f.name.as_str()) {
                    return Err(schema_err(format!(
                        "columns '{other}' and '{}' have the same {COLUMN_ID_KEY} {id}",
                        f.name
                    )));
                }
            }
            if let Some(Value::String(p)) = f.metadata.get(PHYSICAL_NAME_KEY) {
                if let Some(other) = names.insert(p.as_str(), f.name.as_str()) {
                    return Err(schema_err(format!(
                        "columns '{other}' and '{}' have the same {PHYSICAL_NAME_KEY} {p:?}",
                        f.name
                    )));
                }
            }
            walk_type(&f.data_type, ids)?;
        }
        Ok(())
    }
    walk_struct(schema, &mut HashMap::new())
}

/// Schema evolution of a column-mapped table whose schema is `table` and
/// properties `configuration`: the fields of `evolved` without an id or
/// physical name get fresh ones after the table's
/// `delta.columnMapping.maxColumnId` (or its largest field id, if larger).
/// Returns the schema and the new maxColumnId to record.
pub fn assign_new_column_mapping(
    table: &StructType,
    configuration: &HashMap<String, Option<String>>,
    evolved: &StructType,
) -> (StructType, i64) {
    let max = TableProperties::new(configuration)
        .get(COLUMN_MAPPING_MAX_ID)
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(0)
        .max(table.max_field_id());
    assign_column_mapping(evolved, max)
}

/// Schema evolution by merge (`schema_mode="merge"`, Delta Spark's
/// `mergeSchema`): the table's schema with the columns of `data` it lacks
/// appended, as nullable, at every struct level (names compared
/// case-insensitively, as Delta does). Existing columns keep their name,
/// type and metadata; a column whose type differs (other than by a nested
/// struct gaining fields) is refused: Delta changes types only with type
/// widening, which this merge does not do. `None` when nothing is added.
pub fn merge_schemas(table: &StructType, data: &StructType) -> Result<Option<StructType>> {
    let merged = merge_struct(table, data, "")?;
    Ok((merged != *table).then_some(merged))
}

fn merge_struct(table: &StructType, data: &StructType, prefix: &str) -> Result<StructType> {
    let mut out = table.clone();
    for incoming in &data.fields {
        let path = format!("{prefix}{}", incoming.name);
        match out
            .fields
            .iter_mut()
            .find(|f| f.name.eq_ignore_ascii_case(&incoming.name))
        {
            Some(existing) => {
                existing.data_type = merge_type(&existing.data_type, &incoming.data_type, &path)?;
            }
            None => out.fields.push(StructField {
                name: incoming.name.clone(),
                data_type: incoming.data_type.clone(),
                nullable: true,
                metadata: Map::new(),
            }),
        }
    }
    Ok(out)
}

fn merge_type(table: &DataType, data: &DataType, path: &str) -> Result<DataType> {
    match (table, data) {
        (DataType::Struct(t), DataType::Struct(d)) => {
            Ok(DataType::Struct(merge_struct(t, d, &format!("{path}."))?))
        }
        (
            DataType::Array {
                element: t,
                contains_null,
            },
            DataType::Array { element: d, .. },
        ) => Ok(DataType::Array {
            element: Box::new(merge_type(t, d, &format!("{path}.element"))?),
            contains_null: *contains_null,
        }),
        (
            DataType::Map {
                key: tk,
                value: tv,
                value_contains_null,
            },
            DataType::Map {
                key: dk, value: dv, ..
            },
        ) => Ok(DataType::Map {
            key: Box::new(merge_type(tk, dk, &format!("{path}.key"))?),
            value: Box::new(merge_type(tv, dv, &format!("{path}.value"))?),
            value_contains_null: *value_contains_null,
        }),
        (t, d) if t == d => Ok(t.clone()),
        (t, d) => Err(Error::InvalidArgument(format!(
            "schema merge: column '{path}' is {t} in the table and {d} in the data \
             (merging adds columns; it does not change a column's type)"
        ))),
    }
}

pub use self::arrow::{
    from_arrow_type, to_arrow_type, variant_arrow_type, VARIANT_METADATA, VARIANT_VALUE,
};
pub(crate) use self::partition::{
    epoch_days, parse_date, parse_decimal_value, parse_timestamp_micros,
};
pub use self::partition::{partition_array, partition_arrays};

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::log::features::properties::COLUMN_MAPPING_MODE;

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
                m.insert(COLUMN_MAPPING_MODE.to_string(), v.map(str::to_string));
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

    fn field(name: &str, data_type: DataType, nullable: bool) -> StructField {
        StructField {
            name: name.into(),
            data_type,
            nullable,
            metadata: Map::new(),
        }
    }

    #[test]
    fn merge_adds_new_columns_nullable_at_every_level() {
        let mut meta = Map::new();
        meta.insert("comment".into(), Value::from("kept"));
        let table = StructType {
            fields: vec![
                StructField {
                    metadata: meta,
                    ..field("id", DataType::Long, false)
                },
                field(
                    "s",
                    DataType::Struct(StructType {
                        fields: vec![field("a", DataType::Integer, true)],
                    }),
                    true,
                ),
            ],
        };
        let data = StructType {
            fields: vec![
                field("ID", DataType::Long, true),
                field(
                    "s",
                    DataType::Struct(StructType {
                        fields: vec![
                            field("b", DataType::String, false),
                            field("a", DataType::Integer, true),
                        ],
                    }),
                    true,
                ),
                field("new", DataType::Double, false),
            ],
        };
        let merged = merge_schemas(&table, &data).unwrap().unwrap();
        let names: Vec<&str> = merged.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["id", "s", "new"]);
        // Existing columns keep their name, nullability and metadata.
        assert_eq!(merged.fields[0], table.fields[0]);
        assert!(merged.fields[2].nullable);
        let DataType::Struct(inner) = &merged.fields[1].data_type else {
            panic!("s is not a struct")
        };
        assert_eq!(
            inner.fields,
            vec![
                field("a", DataType::Integer, true),
                field("b", DataType::String, true)
            ]
        );
        // Nothing new: no change.
        assert_eq!(merge_schemas(&merged, &data).unwrap(), None);
        assert_eq!(merge_schemas(&table, &StructType::default()).unwrap(), None);
    }

    #[test]
    fn merge_refuses_type_changes_naming_the_column() {
        let table = StructType {
            fields: vec![field(
                "s",
                DataType::Struct(StructType {
                    fields: vec![field("a", DataType::Integer, true)],
                }),
                true,
            )],
        };
        let data = StructType {
            fields: vec![field(
                "s",
                DataType::Struct(StructType {
                    fields: vec![field("a", DataType::Long, true)],
                }),
                true,
            )],
        };
        let err = merge_schemas(&table, &data).unwrap_err().to_string();
        assert!(
            err.contains("'s.a' is integer in the table and long"),
            "{err}"
        );
    }

    #[test]
    fn column_mapping_is_assigned_in_pre_order_as_delta_spark() {
        // a, s<x, y<q>>, arr<struct<z>>, m<string, struct<w>>, b: Delta Spark 4.4
        // gives a=1 s=2 x=3 y=4 q=5 arr=6 z=7 m=8 w=9 b=10, maxColumnId 10.
        let st = |fields: Vec<StructField>| DataType::Struct(StructType { fields });
        let schema = StructType {
            fields: vec![
                field("a", DataType::Long, true),
                field(
                    "s",
                    st(vec![
                        field("x", DataType::Integer, true),
                        field("y", st(vec![field("q", DataType::String, true)]), true),
                    ]),
                    true,
                ),
                field(
                    "arr",
                    DataType::Array {
                        element: Box::new(st(vec![field("z", DataType::Integer, true)])),
                        contains_null: true,
                    },
                    true,
                ),
                field(
                    "m",
                    DataType::Map {
                        key: Box::new(DataType::String),
                        value: Box::new(st(vec![field("w", DataType::Integer, true)])),
                        value_contains_null: true,
                    },
                    true,
                ),
                field("b", DataType::String, true),
            ],
        };
        let (mapped, max) = assign_column_mapping(&schema, 0);
        assert_eq!(max, 10);
        let mut seen = Vec::new();
        fn collect(t: &DataType, seen: &mut Vec<(String, i64, String)>) {
            match t {
                DataType::Struct(s) => {
                    for f in &s.fields {
                        let p = f
                            .physical_name(ColumnMappingMode::Name)
                            .unwrap()
                            .to_string();
                        seen.push((f.name.clone(), f.field_id().unwrap(), p));
                        collect(&f.data_type, seen);
                    }
                }
                DataType::Array { element, .. } => collect(element, seen),
                DataType::Map { key, value, .. } => {
                    collect(key, seen);
                    collect(value, seen);
                }
                _ => {}
            }
        }
        collect(&DataType::Struct(mapped.clone()), &mut seen);
        let order: Vec<(&str, i64)> = seen.iter().map(|(n, i, _)| (n.as_str(), *i)).collect();
        assert_eq!(
            order,
            [
                ("a", 1),
                ("s", 2),
                ("x", 3),
                ("y", 4),
                ("q", 5),
                ("arr", 6),
                ("z", 7),
                ("m", 8),
                ("w", 9),
                ("b", 10)
            ]
        );
        let names: HashSet<&str> = seen.iter().map(|(_, _, p)| p.as_str()).collect();
        assert_eq!(names.len(), 10);
        assert!(seen
            .iter()
            .all(|(_, _, p)| p.starts_with("col-") && p.len() == 40));
        // Evolution: only a new field gets an id, after the table's max.
        let mut evolved = mapped.clone();
        evolved.fields.push(field("c", DataType::Long, true));
        let (evolved, max) = assign_column_mapping(&evolved, 10);
        assert_eq!(max, 11);
        assert_eq!(evolved.fields[..5], mapped.fields[..]);
        assert_eq!(evolved.fields[5].field_id(), Some(11));
    }
}
