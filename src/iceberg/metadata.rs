//! Iceberg v3 table metadata (`vN.metadata.json`), the Delta → Iceberg schema
//! and type mapping, identity partition specs, name mappings, and Iceberg
//! literals with their single-value binary encoding (column bounds).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::log::features::properties::NESTED_IDS_KEY;
use crate::log::schema::{ColumnMappingMode, DataType, StructField, StructType};

/// The Iceberg format version written.
pub const FORMAT_VERSION: i32 = 3;
/// Table property (and snapshot summary key): the Delta version converted,
/// as Delta UniForm records it (`IcebergConverter.DELTA_VERSION_PROPERTY`).
pub const DELTA_VERSION: &str = "delta-version";
/// Table property (and snapshot summary key): that version's commit timestamp (ms).
pub const DELTA_TIMESTAMP: &str = "delta-timestamp";
/// Table property with the name mapping (physical and logical names → ids),
/// for readers of data files without field ids.
pub const NAME_MAPPING: &str = "schema.name-mapping.default";
/// Reserved Iceberg field id of `_row_id` (row lineage).
pub const ROW_ID_FIELD_ID: i32 = 2_147_483_540;
/// Reserved Iceberg field id of `_last_updated_sequence_number`.
pub const LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID: i32 = 2_147_483_539;
/// Partition field ids start here.
pub const FIRST_PARTITION_FIELD_ID: i32 = 1000;

/// An Iceberg primitive type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrimitiveType {
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Date,
    /// Microseconds, no time zone (`timestamp`).
    Timestamp,
    /// Microseconds, UTC (`timestamptz`).
    Timestamptz,
    String,
    Binary,
    Decimal {
        precision: u8,
        scale: i8,
    },
}

impl PrimitiveType {
    /// The Iceberg type of a Delta primitive type (`None` for nested types
    /// and variant).
    pub fn of_delta(dt: &DataType) -> Option<PrimitiveType> {
        Some(match dt {
            DataType::String => PrimitiveType::String,
            DataType::Long => PrimitiveType::Long,
            DataType::Integer | DataType::Short | DataType::Byte => PrimitiveType::Int,
            DataType::Float => PrimitiveType::Float,
            DataType::Double => PrimitiveType::Double,
            DataType::Boolean => PrimitiveType::Boolean,
            DataType::Binary => PrimitiveType::Binary,
            DataType::Date => PrimitiveType::Date,
            DataType::Timestamp => PrimitiveType::Timestamptz,
            DataType::TimestampNtz => PrimitiveType::Timestamp,
            DataType::Decimal { precision, scale } => PrimitiveType::Decimal {
                precision: *precision,
                scale: *scale,
            },
            _ => return None,
        })
    }

    /// The Iceberg JSON type name.
    pub fn json_name(&self) -> String {
        match self {
            PrimitiveType::Boolean => "boolean".into(),
            PrimitiveType::Int => "int".into(),
            PrimitiveType::Long => "long".into(),
            PrimitiveType::Float => "float".into(),
            PrimitiveType::Double => "double".into(),
            PrimitiveType::Date => "date".into(),
            PrimitiveType::Timestamp => "timestamp".into(),
            PrimitiveType::Timestamptz => "timestamptz".into(),
            PrimitiveType::String => "string".into(),
            PrimitiveType::Binary => "binary".into(),
            PrimitiveType::Decimal { precision, scale } => format!("decimal({precision}, {scale})"),
        }
    }
}

/// A value of an Iceberg primitive type (partition values, column bounds).
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    Boolean(bool),
    Int(i32),
    Long(i64),
    Float(f32),
    Double(f64),
    /// Days since 1970-01-01.
    Date(i32),
    /// Microseconds since the epoch (`timestamp` and `timestamptz`).
    Timestamp(i64),
    String(String),
    Binary(Vec<u8>),
}

impl Literal {
    /// Iceberg's single-value binary serialization (Appendix D): little-endian
    /// fixed-width numbers, UTF-8 strings, raw binary.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Literal::Boolean(b) => vec![u8::from(*b)],
            Literal::Int(v) | Literal::Date(v) => v.to_le_bytes().to_vec(),
            Literal::Long(v) | Literal::Timestamp(v) => v.to_le_bytes().to_vec(),
            Literal::Float(v) => v.to_le_bytes().to_vec(),
            Literal::Double(v) => v.to_le_bytes().to_vec(),
            Literal::String(s) => s.as_bytes().to_vec(),
            Literal::Binary(b) => b.clone(),
        }
    }
}

// ---------------------------------------------------------------------------
// Schema conversion
// ---------------------------------------------------------------------------

/// A primitive column reachable through structs only (no list or map above
/// it): the columns Delta keeps stats for, with their Iceberg field id and the
/// path of physical names Delta's stats use.
#[derive(Debug, Clone, PartialEq)]
pub struct LeafColumn {
    pub field_id: i32,
    pub physical_path: Vec<String>,
    pub delta_type: DataType,
    pub ty: PrimitiveType,
}

/// The Iceberg view of a Delta schema with column mapping.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvertedSchema {
    /// `{"type":"struct","fields":[…]}` without a schema id.
    pub schema: Value,
    /// The name mapping (`schema.name-mapping.default`).
    pub name_mapping: Value,
    /// The largest field id used.
    pub last_column_id: i32,
    pub leaves: Vec<LeafColumn>,
}

fn unsupported(msg: String) -> Error {
    Error::Unsupported(msg)
}

fn field_id_of(f: &StructField, path: &str) -> Result<i32> {
    let id = f.field_id().ok_or_else(|| {
        unsupported(format!(
            "Iceberg metadata needs column mapping: column '{path}' has no \
             delta.columnMapping.id (create the table with delta.columnMapping.mode=name)"
        ))
    })?;
    i32::try_from(id)
        .map_err(|_| unsupported(format!("column '{path}' has field id {id}, out of range")))
}

/// A name-mapping entry: `{"field-id", "names", "fields"?}`.
fn mapping_entry(id: i32, names: Vec<Value>, children: Vec<Value>) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("field-id".into(), Value::from(id));
    m.insert("names".into(), Value::Array(names));
    if !children.is_empty() {
        m.insert("fields".into(), Value::Array(children));
    }
    Value::Object(m)
}

struct Converter {
    last_id: i32,
    leaves: Vec<LeafColumn>,
}

impl Converter {
    fn struct_fields(
        &mut self,
        st: &StructType,
        parent: &str,
        physical_parent: Option<&[String]>,
    ) -> Result<(Vec<Value>, Vec<Value>)> {
        let mut fields = Vec::with_capacity(st.fields.len());
        let mut mapping = Vec::with_capacity(st.fields.len());
        for f in &st.fields {
            let path = if parent.is_empty() {
                f.name.clone()
            } else {
                format!("{parent}.{}", f.name)
            };
            let id = field_id_of(f, &path)?;
            self.last_id = self.last_id.max(id);
            let physical = f.physical_name(ColumnMappingMode::Name)?.to_string();
            let phys_path = physical_parent.map(|p| {
                let mut v = p.to_vec();
                v.push(physical.clone());
                v
            });
            let nested_ids = f.metadata.get(NESTED_IDS_KEY).and_then(Value::as_object);
            let (ty, children) = self.convert_type(
                &f.data_type,
                &path,
                phys_path.as_deref(),
                nested_ids,
                &physical,
            )?;
            if let (Some(prim), Some(pp)) = (PrimitiveType::of_delta(&f.data_type), phys_path) {
                self.leaves.push(LeafColumn {
                    field_id: id,
                    physical_path: pp,
                    delta_type: f.data_type.clone(),
                    ty: prim,
                });
            }
            fields.push(json!({
                "id": id,
                "name": f.name,
                "required": !f.nullable,
                "type": ty,
            }));
            let mut names = vec![Value::from(f.name.clone())];
            if physical != f.name {
                names.push(Value::from(physical));
            }
            mapping.push(mapping_entry(id, names, children));
        }
        Ok((fields, mapping))
    }

    /// The Iceberg type JSON of `dt` and its name-mapping children.
    /// `slot` is the nested-ids key of this type (`<physical>.element` …).
    fn convert_type(
        &mut self,
        dt: &DataType,
        path: &str,
        physical_path: Option<&[String]>,
        nested_ids: Option<&serde_json::Map<String, Value>>,
        slot: &str,
    ) -> Result<(Value, Vec<Value>)> {
        if let Some(p) = PrimitiveType::of_delta(dt) {
            return Ok((Value::from(p.json_name()), Vec::new()));
        }
        let slot_id = |this: &mut Self, name: &str| -> Result<i32> {
            let key = format!("{slot}.{name}");
            let id = nested_ids
                .and_then(|ids| ids.get(&key))
                .and_then(Value::as_i64)
                .and_then(|v| i32::try_from(v).ok())
                .ok_or_else(|| {
                    unsupported(format!(
                        "column '{path}': Iceberg needs a field id for the {name} of this \
                         {dt}, but delta.columnMapping.nested.ids has no '{key}' \
                         (written by IcebergCompatV2/V3 tables)"
                    ))
                })?;
            this.last_id = this.last_id.max(id);
            Ok(id)
        };
        match dt {
            DataType::Struct(st) => {
                let (fields, mapping) = self.struct_fields(st, path, physical_path)?;
                Ok((json!({"type": "struct", "fields": fields}), mapping))
            }
            DataType::Array {
                element,
                contains_null,
            } => {
                let id = slot_id(self, "element")?;
                let (ty, children) = self.convert_type(
                    element,
                    &format!("{path}.element"),
                    None,
                    nested_ids,
                    &format!("{slot}.element"),
                )?;
                let m = mapping_entry(id, vec![Value::from("element")], children);
                Ok((
                    json!({"type": "list", "element-id": id, "element": ty,
                           "element-required": !contains_null}),
                    vec![m],
                ))
            }
            DataType::Map {
                key,
                value,
                value_contains_null,
            } => {
                let kid = slot_id(self, "key")?;
                let vid = slot_id(self, "value")?;
                let (kt, kc) = self.convert_type(
                    key,
                    &format!("{path}.key"),
                    None,
                    nested_ids,
                    &format!("{slot}.key"),
                )?;
                let (vt, vc) = self.convert_type(
                    value,
                    &format!("{path}.value"),
                    None,
                    nested_ids,
                    &format!("{slot}.value"),
                )?;
                let km = mapping_entry(kid, vec![Value::from("key")], kc);
                let vm = mapping_entry(vid, vec![Value::from("value")], vc);
                Ok((
                    json!({"type": "map", "key-id": kid, "key": kt, "value-id": vid,
                           "value": vt, "value-required": !value_contains_null}),
                    vec![km, vm],
                ))
            }
            _ => Err(unsupported(format!(
                "column '{path}' of type {dt} has no Iceberg mapping in deltadv yet"
            ))),
        }
    }
}

/// Convert a Delta schema (column mapping ids required) to Iceberg.
pub fn convert_schema(schema: &StructType) -> Result<ConvertedSchema> {
    let mut c = Converter {
        last_id: 0,
        leaves: Vec::new(),
    };
    let (fields, mapping) = c.struct_fields(schema, "", Some(&[]))?;
    Ok(ConvertedSchema {
        schema: json!({"type": "struct", "fields": fields}),
        name_mapping: Value::Array(mapping),
        last_column_id: c.last_id,
        leaves: c.leaves,
    })
}

impl ConvertedSchema {
    /// Map the columns of Delta's materialized row ids and row commit versions
    /// (their names in data files) to Iceberg's reserved row lineage ids, so
    /// readers of files without field ids match them (and skip them in scans).
    pub fn map_row_tracking_columns(&mut self, row_id: &str, row_commit_version: &str) {
        if let Value::Array(m) = &mut self.name_mapping {
            m.push(json!({"field-id": ROW_ID_FIELD_ID, "names": [row_id]}));
            m.push(json!({"field-id": LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID,
                          "names": [row_commit_version]}));
        }
    }
}

/// One identity partition field of the spec built from Delta's partition columns.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionColumn {
    /// Logical column name (the partition field's name).
    pub name: String,
    /// Key of `add.partitionValues` (the physical name).
    pub physical_name: String,
    pub source_id: i32,
    pub field_id: i32,
    pub delta_type: DataType,
    pub ty: PrimitiveType,
}

/// The identity partition fields of Delta's partition columns.
pub fn partition_columns(
    schema: &StructType,
    partition_columns: &[String],
) -> Result<Vec<PartitionColumn>> {
    partition_columns
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let f = schema.field_ignore_case(name).ok_or_else(|| {
                Error::Schema(format!("partition column '{name}' is not in the schema"))
            })?;
            let ty = PrimitiveType::of_delta(&f.data_type).ok_or_else(|| {
                unsupported(format!("partition column '{name}' of type {}", f.data_type))
            })?;
            if matches!(ty, PrimitiveType::Decimal { .. }) {
                return Err(unsupported(format!(
                    "Iceberg metadata for decimal partition column '{name}'"
                )));
            }
            Ok(PartitionColumn {
                name: f.name.clone(),
                physical_name: f.physical_name(ColumnMappingMode::Name)?.to_string(),
                source_id: field_id_of(f, name)?,
                field_id: FIRST_PARTITION_FIELD_ID + i as i32,
                delta_type: f.data_type.clone(),
                ty,
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Table metadata
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PartitionField {
    pub name: String,
    pub transform: String,
    pub source_id: i32,
    pub field_id: i32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PartitionSpec {
    pub spec_id: i32,
    pub fields: Vec<PartitionField>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Snapshot {
    pub snapshot_id: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_snapshot_id: Option<i64>,
    pub sequence_number: i64,
    pub timestamp_ms: i64,
    pub manifest_list: String,
    pub summary: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_id: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_row_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_rows: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct SnapshotLogEntry {
    pub timestamp_ms: i64,
    pub snapshot_id: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct MetadataLogEntry {
    pub timestamp_ms: i64,
    pub metadata_file: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct SnapshotRef {
    pub snapshot_id: i64,
    #[serde(rename = "type")]
    pub kind: String,
}

/// `vN.metadata.json` of format version 3 (the fields deltadv writes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct TableMetadata {
    pub format_version: i32,
    pub table_uuid: String,
    pub location: String,
    pub last_sequence_number: i64,
    pub last_updated_ms: i64,
    pub last_column_id: i32,
    pub current_schema_id: i32,
    /// Iceberg schemas (`{"type":"struct","schema-id":…,"fields":[…]}`).
    pub schemas: Vec<Value>,
    pub default_spec_id: i32,
    pub partition_specs: Vec<PartitionSpec>,
    pub last_partition_id: i32,
    pub default_sort_order_id: i32,
    pub sort_orders: Vec<Value>,
    pub properties: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_snapshot_id: Option<i64>,
    #[serde(default)]
    pub refs: BTreeMap<String, SnapshotRef>,
    #[serde(default)]
    pub snapshots: Vec<Snapshot>,
    #[serde(default)]
    pub snapshot_log: Vec<SnapshotLogEntry>,
    #[serde(default)]
    pub metadata_log: Vec<MetadataLogEntry>,
    pub next_row_id: i64,
    #[serde(default)]
    pub statistics: Vec<Value>,
    #[serde(default)]
    pub partition_statistics: Vec<Value>,
}

impl TableMetadata {
    /// Parse a metadata JSON file named `file`.
    pub fn parse(bytes: &[u8], file: &str) -> Result<TableMetadata> {
        let m: TableMetadata =
            serde_json::from_slice(bytes).map_err(|e| Error::CorruptIceberg {
                file: file.to_string(),
                detail: format!("table metadata: {e}"),
            })?;
        if m.format_version != FORMAT_VERSION {
            return Err(Error::CorruptIceberg {
                file: file.to_string(),
                detail: format!(
                    "format-version: expected {FORMAT_VERSION}, found {}",
                    m.format_version
                ),
            });
        }
        Ok(m)
    }

    /// The JSON text.
    pub fn to_json(&self) -> Result<Vec<u8>> {
        serde_json::to_vec(self).map_err(|e| Error::Json {
            context: "Iceberg table metadata".to_string(),
            source: e,
        })
    }

    pub fn current_snapshot(&self) -> Option<&Snapshot> {
        let id = self.current_snapshot_id?;
        self.snapshots.iter().find(|s| s.snapshot_id == id)
    }

    /// The Delta version the current snapshot mirrors (`delta-version`).
    pub fn delta_version(&self) -> Option<i64> {
        self.properties.get(DELTA_VERSION)?.parse().ok()
    }

    /// The current schema, without its id.
    pub fn current_schema(&self) -> Option<Value> {
        let s = self.schemas.iter().find(|s| {
            s.get("schema-id").and_then(Value::as_i64) == Some(i64::from(self.current_schema_id))
        })?;
        let mut s = s.clone();
        if let Some(o) = s.as_object_mut() {
            o.remove("schema-id");
        }
        Some(s)
    }

    /// The next metadata after this one (at `location`) with the snapshots
    /// older than `cutoff_ms` expired, the current one always kept, and the
    /// metadata log trimmed to files newer than the cutoff; `None` when no
    /// snapshot expires.
    pub fn expire_snapshots(
        &self,
        cutoff_ms: i64,
        now_ms: i64,
        location: &str,
    ) -> Option<TableMetadata> {
        let keeps = |s: &Snapshot| {
            s.timestamp_ms >= cutoff_ms || Some(s.snapshot_id) == self.current_snapshot_id
        };
        if self.snapshots.iter().all(keeps) {
            return None;
        }
        let mut next = self.clone();
        next.snapshots.retain(keeps);
        let kept: std::collections::HashSet<i64> =
            next.snapshots.iter().map(|s| s.snapshot_id).collect();
        next.snapshot_log.retain(|e| kept.contains(&e.snapshot_id));
        next.metadata_log.push(MetadataLogEntry {
            timestamp_ms: self.last_updated_ms,
            metadata_file: location.to_string(),
        });
        next.metadata_log.retain(|e| e.timestamp_ms >= cutoff_ms);
        next.last_updated_ms = now_ms.max(self.last_updated_ms);
        Some(next)
    }

    pub fn default_spec(&self) -> Option<&PartitionSpec> {
        self.partition_specs
            .iter()
            .find(|s| s.spec_id == self.default_spec_id)
    }
}

/// `schema` with `schema-id` set.
pub fn with_schema_id(schema: &Value, id: i32) -> Value {
    let mut s = schema.clone();
    if let Some(o) = s.as_object_mut() {
        o.insert("schema-id".into(), Value::from(id));
    }
    s
}

/// The partition fields of a spec over `columns`.
pub fn spec_fields(columns: &[PartitionColumn]) -> Vec<PartitionField> {
    columns
        .iter()
        .map(|c| PartitionField {
            name: c.name.clone(),
            transform: "identity".into(),
            source_id: c.source_id,
            field_id: c.field_id,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: &str = r#"{"type":"struct","fields":[
      {"name":"id","type":"long","nullable":false,
       "metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-a"}},
      {"name":"ts","type":"timestamp","nullable":true,
       "metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"col-b"}},
      {"name":"s","type":{"type":"struct","fields":[
          {"name":"x","type":"integer","nullable":true,
           "metadata":{"delta.columnMapping.id":4,"delta.columnMapping.physicalName":"col-x"}}]},
       "nullable":true,
       "metadata":{"delta.columnMapping.id":3,"delta.columnMapping.physicalName":"col-s"}},
      {"name":"tags","type":{"type":"array","elementType":"string","containsNull":true},
       "nullable":true,
       "metadata":{"delta.columnMapping.id":5,"delta.columnMapping.physicalName":"col-t",
                   "delta.columnMapping.nested.ids":{"col-t.element":6}}}
    ]}"#;

    #[test]
    fn schema_uses_column_mapping_ids() {
        let st = StructType::parse(SCHEMA).unwrap();
        let c = convert_schema(&st).unwrap();
        assert_eq!(c.last_column_id, 6);
        let f = &c.schema["fields"];
        assert_eq!(f[0]["id"], 1);
        assert_eq!(f[0]["required"], true);
        assert_eq!(f[1]["type"], "timestamptz");
        assert_eq!(f[2]["type"]["fields"][0]["id"], 4);
        assert_eq!(f[3]["type"]["element-id"], 6);
        assert_eq!(c.name_mapping[0]["names"], json!(["id", "col-a"]));
        let leaves: Vec<_> = c.leaves.iter().map(|l| l.field_id).collect();
        assert_eq!(leaves, vec![1, 2, 4]);
        assert_eq!(c.leaves[2].physical_path, vec!["col-s", "col-x"]);
    }

    #[test]
    fn missing_ids_are_refused() {
        let st = StructType::parse(
            r#"{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]}"#,
        )
        .unwrap();
        let e = convert_schema(&st).unwrap_err().to_string();
        assert!(e.contains("column mapping"), "{e}");
    }

    #[test]
    fn literal_bytes() {
        assert_eq!(Literal::Long(1).to_bytes(), vec![1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Literal::Int(-1).to_bytes(), vec![255; 4]);
        assert_eq!(Literal::Boolean(true).to_bytes(), vec![1]);
        assert_eq!(Literal::String("é".into()).to_bytes(), "é".as_bytes());
        assert_eq!(
            Literal::Double(1.0).to_bytes(),
            1.0f64.to_le_bytes().to_vec()
        );
    }
}
