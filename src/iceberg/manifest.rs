//! Iceberg v3 manifests (data and delete entries) and manifest lists, with the
//! spec's Avro schemas and field ids, written and read through [`super::avro`].

use std::collections::{BTreeMap, HashMap};

use apache_avro::types::Value as Avro;
use serde_json::{json, Value};

use super::avro::{
    self, fields_of, get_long, get_string, int_map_schema, opt_long, optional, optional_field,
    record, required_field, unwrap,
};
use super::metadata::{Literal, PartitionColumn, PrimitiveType};
use crate::error::{Error, Result};

/// `content` of a data file entry.
pub const CONTENT_DATA: i32 = 0;
/// `content` of a position delete (a deletion vector) entry.
pub const CONTENT_POSITION_DELETES: i32 = 1;
/// `content` of a data manifest (manifest list).
pub const MANIFEST_CONTENT_DATA: i32 = 0;
/// `content` of a delete manifest (manifest list).
pub const MANIFEST_CONTENT_DELETES: i32 = 1;

/// Manifest entry status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Existing = 0,
    Added = 1,
    Deleted = 2,
}

/// A data file or a deletion vector, as a manifest entry's `data_file`.
#[derive(Debug, Clone, PartialEq)]
pub struct DataFile {
    pub content: i32,
    pub file_path: String,
    /// `PARQUET` or `PUFFIN`.
    pub file_format: String,
    /// One value per partition field (`None` = null).
    pub partition: Vec<Option<Literal>>,
    pub record_count: i64,
    pub file_size_in_bytes: i64,
    pub value_counts: BTreeMap<i32, i64>,
    pub null_value_counts: BTreeMap<i32, i64>,
    pub lower_bounds: BTreeMap<i32, Vec<u8>>,
    pub upper_bounds: BTreeMap<i32, Vec<u8>>,
    pub first_row_id: Option<i64>,
    pub referenced_data_file: Option<String>,
    pub content_offset: Option<i64>,
    pub content_size_in_bytes: Option<i64>,
}

/// One manifest entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestEntry {
    pub status: Status,
    pub snapshot_id: i64,
    /// Data sequence number.
    pub sequence_number: i64,
    pub file_sequence_number: i64,
    pub data_file: DataFile,
}

/// Summary of one partition field over a manifest's files.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldSummary {
    pub contains_null: bool,
    pub contains_nan: Option<bool>,
    pub lower_bound: Option<Vec<u8>>,
    pub upper_bound: Option<Vec<u8>>,
}

/// One manifest list entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestFile {
    pub manifest_path: String,
    pub manifest_length: i64,
    pub partition_spec_id: i32,
    pub content: i32,
    pub sequence_number: i64,
    pub min_sequence_number: i64,
    pub added_snapshot_id: i64,
    pub added_files_count: i32,
    pub existing_files_count: i32,
    pub deleted_files_count: i32,
    pub added_rows_count: i64,
    pub existing_rows_count: i64,
    pub deleted_rows_count: i64,
    pub partitions: Vec<FieldSummary>,
    pub first_row_id: Option<i64>,
}

// ---------------------------------------------------------------------------
// Schemas
// ---------------------------------------------------------------------------

/// An Avro-compatible name for a partition field (Iceberg's
/// `makeCompatibleName`: invalid characters become `_x<HEX>`).
pub fn avro_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, c) in name.chars().enumerate() {
        let ok = c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit());
        if ok {
            out.push(c);
        } else if i == 0 && c.is_ascii_digit() {
            out.push('_');
            out.push(c);
        } else {
            out.push_str(&format!("_x{:X}", c as u32));
        }
    }
    if out.is_empty() {
        out.push('_');
    }
    out
}

fn partition_avro_type(ty: PrimitiveType) -> Result<Value> {
    Ok(match ty {
        PrimitiveType::Boolean => json!("boolean"),
        PrimitiveType::Int => json!("int"),
        PrimitiveType::Long => json!("long"),
        PrimitiveType::Float => json!("float"),
        PrimitiveType::Double => json!("double"),
        PrimitiveType::Date => json!({"type": "int", "logicalType": "date"}),
        PrimitiveType::Timestamp => {
            json!({"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": false})
        }
        PrimitiveType::Timestamptz => {
            json!({"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": true})
        }
        PrimitiveType::String => json!("string"),
        PrimitiveType::Binary => json!("bytes"),
        PrimitiveType::Decimal { .. } => {
            return Err(Error::Unsupported(
                "decimal partition values in Iceberg manifests".into(),
            ))
        }
    })
}

/// The Avro schema JSON of a v3 manifest entry over these partition columns.
pub fn manifest_entry_schema(partition: &[PartitionColumn]) -> Result<String> {
    let partition_fields = partition
        .iter()
        .map(|c| {
            Ok(optional_field(
                &avro_name(&c.name),
                c.field_id,
                partition_avro_type(c.ty)?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let data_file = json!({
        "type": "record",
        "name": "r2",
        "fields": [
            required_field("content", 134, json!("int")),
            required_field("file_path", 100, json!("string")),
            required_field("file_format", 101, json!("string")),
            required_field("partition", 102,
                json!({"type": "record", "name": "r102", "fields": partition_fields})),
            required_field("record_count", 103, json!("long")),
            required_field("file_size_in_bytes", 104, json!("long")),
            optional_field("column_sizes", 108, int_map_schema(117, 118, "long")),
            optional_field("value_counts", 109, int_map_schema(119, 120, "long")),
            optional_field("null_value_counts", 110, int_map_schema(121, 122, "long")),
            optional_field("nan_value_counts", 137, int_map_schema(138, 139, "long")),
            optional_field("lower_bounds", 125, int_map_schema(126, 127, "bytes")),
            optional_field("upper_bounds", 128, int_map_schema(129, 130, "bytes")),
            optional_field("key_metadata", 131, json!("bytes")),
            optional_field("split_offsets", 132,
                json!({"type": "array", "items": "long", "element-id": 133})),
            optional_field("equality_ids", 135,
                json!({"type": "array", "items": "int", "element-id": 136})),
            optional_field("sort_order_id", 140, json!("int")),
            optional_field("first_row_id", 142, json!("long")),
            optional_field("referenced_data_file", 143, json!("string")),
            optional_field("content_offset", 144, json!("long")),
            optional_field("content_size_in_bytes", 145, json!("long")),
        ],
    });
    Ok(json!({
        "type": "record",
        "name": "manifest_entry",
        "fields": [
            required_field("status", 0, json!("int")),
            optional_field("snapshot_id", 1, json!("long")),
            optional_field("sequence_number", 3, json!("long")),
            optional_field("file_sequence_number", 4, json!("long")),
            required_field("data_file", 2, data_file),
        ],
    })
    .to_string())
}

/// The Avro schema JSON of a v3 manifest list.
pub fn manifest_list_schema() -> String {
    let summary = json!({
        "type": "record",
        "name": "r508",
        "fields": [
            required_field("contains_null", 509, json!("boolean")),
            optional_field("contains_nan", 518, json!("boolean")),
            optional_field("lower_bound", 510, json!("bytes")),
            optional_field("upper_bound", 511, json!("bytes")),
        ],
    });
    json!({
        "type": "record",
        "name": "manifest_file",
        "fields": [
            required_field("manifest_path", 500, json!("string")),
            required_field("manifest_length", 501, json!("long")),
            required_field("partition_spec_id", 502, json!("int")),
            required_field("content", 517, json!("int")),
            required_field("sequence_number", 515, json!("long")),
            required_field("min_sequence_number", 516, json!("long")),
            required_field("added_snapshot_id", 503, json!("long")),
            required_field("added_files_count", 504, json!("int")),
            required_field("existing_files_count", 505, json!("int")),
            required_field("deleted_files_count", 506, json!("int")),
            required_field("added_rows_count", 512, json!("long")),
            required_field("existing_rows_count", 513, json!("long")),
            required_field("deleted_rows_count", 514, json!("long")),
            optional_field("partitions", 507,
                json!({"type": "array", "items": summary, "element-id": 508})),
            optional_field("key_metadata", 519, json!("bytes")),
            optional_field("first_row_id", 520, json!("long")),
        ],
    })
    .to_string()
}

// ---------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------

fn literal_to_avro(l: &Literal) -> Avro {
    match l {
        Literal::Boolean(b) => Avro::Boolean(*b),
        Literal::Int(v) => Avro::Int(*v),
        Literal::Long(v) => Avro::Long(*v),
        Literal::Float(v) => Avro::Float(*v),
        Literal::Double(v) => Avro::Double(*v),
        Literal::Date(v) => Avro::Date(*v),
        Literal::Timestamp(v) => Avro::TimestampMicros(*v),
        Literal::String(s) => Avro::String(s.clone()),
        Literal::Binary(b) => Avro::Bytes(b.clone()),
    }
}

fn literal_from_avro(v: &Avro, ty: PrimitiveType) -> Option<Literal> {
    Some(match (v, ty) {
        (Avro::Boolean(b), _) => Literal::Boolean(*b),
        (Avro::Int(v) | Avro::Date(v), PrimitiveType::Date) => Literal::Date(*v),
        (Avro::Int(v), _) => Literal::Int(*v),
        (
            Avro::Long(v) | Avro::TimestampMicros(v),
            PrimitiveType::Timestamp | PrimitiveType::Timestamptz,
        ) => Literal::Timestamp(*v),
        (Avro::TimestampMicros(v) | Avro::LocalTimestampMicros(v), _) => Literal::Timestamp(*v),
        (Avro::Long(v), _) => Literal::Long(*v),
        (Avro::Date(v), _) => Literal::Date(*v),
        (Avro::Float(v), _) => Literal::Float(*v),
        (Avro::Double(v), _) => Literal::Double(*v),
        (Avro::String(s), _) => Literal::String(s.clone()),
        (Avro::Bytes(b), _) => Literal::Binary(b.clone()),
        _ => return None,
    })
}

fn int_map<T: Clone>(m: &BTreeMap<i32, T>, to: impl Fn(T) -> Avro) -> Avro {
    if m.is_empty() {
        return optional(None);
    }
    optional(Some(Avro::Array(
        m.iter()
            .map(|(k, v)| record(vec![("key", Avro::Int(*k)), ("value", to(v.clone()))]))
            .collect(),
    )))
}

fn read_int_map<T>(
    fields: &HashMap<String, Avro>,
    name: &str,
    file: &str,
    from: impl Fn(&Avro) -> Option<T>,
) -> Result<BTreeMap<i32, T>> {
    let mut out = BTreeMap::new();
    let Some(v) = fields.get(name) else {
        return Ok(out);
    };
    let Avro::Array(items) = v else {
        return Err(Error::CorruptIceberg {
            file: file.into(),
            detail: format!("{name}: expected an array, found {v:?}"),
        });
    };
    for item in items {
        let kv = fields_of(item, file, name)?;
        let key = match kv.get("key") {
            Some(Avro::Int(k)) => *k,
            other => {
                return Err(Error::CorruptIceberg {
                    file: file.into(),
                    detail: format!("{name}: key expected an int, found {other:?}"),
                })
            }
        };
        let value = kv
            .get("value")
            .and_then(&from)
            .ok_or_else(|| Error::CorruptIceberg {
                file: file.into(),
                detail: format!("{name}: bad value for key {key}"),
            })?;
        out.insert(key, value);
    }
    Ok(out)
}

fn opt_long_value(v: Option<i64>) -> Avro {
    optional(v.map(Avro::Long))
}

impl DataFile {
    fn to_avro(&self, partition: &[PartitionColumn]) -> Result<Avro> {
        if self.partition.len() != partition.len() {
            return Err(Error::Internal(format!(
                "{}: {} partition values for {} partition fields",
                self.file_path,
                self.partition.len(),
                partition.len()
            )));
        }
        let part = Avro::Record(
            partition
                .iter()
                .zip(&self.partition)
                .map(|(c, v)| {
                    (
                        avro_name(&c.name),
                        optional(v.as_ref().map(literal_to_avro)),
                    )
                })
                .collect(),
        );
        Ok(record(vec![
            ("content", Avro::Int(self.content)),
            ("file_path", Avro::String(self.file_path.clone())),
            ("file_format", Avro::String(self.file_format.clone())),
            ("partition", part),
            ("record_count", Avro::Long(self.record_count)),
            ("file_size_in_bytes", Avro::Long(self.file_size_in_bytes)),
            ("column_sizes", optional(None)),
            ("value_counts", int_map(&self.value_counts, Avro::Long)),
            (
                "null_value_counts",
                int_map(&self.null_value_counts, Avro::Long),
            ),
            ("nan_value_counts", optional(None)),
            ("lower_bounds", int_map(&self.lower_bounds, Avro::Bytes)),
            ("upper_bounds", int_map(&self.upper_bounds, Avro::Bytes)),
            ("key_metadata", optional(None)),
            ("split_offsets", optional(None)),
            ("equality_ids", optional(None)),
            ("sort_order_id", optional(None)),
            ("first_row_id", opt_long_value(self.first_row_id)),
            (
                "referenced_data_file",
                optional(self.referenced_data_file.clone().map(Avro::String)),
            ),
            ("content_offset", opt_long_value(self.content_offset)),
            (
                "content_size_in_bytes",
                opt_long_value(self.content_size_in_bytes),
            ),
        ]))
    }

    fn from_avro(v: &Avro, partition: &[PartitionColumn], file: &str) -> Result<DataFile> {
        let f = fields_of(v, file, "data_file")?;
        let part = match f.get("partition") {
            Some(p) => fields_of(p, file, "partition")?,
            None => HashMap::new(),
        };
        let partition_values = partition
            .iter()
            .map(|c| {
                part.get(&avro_name(&c.name))
                    .and_then(|v| literal_from_avro(v, c.ty))
            })
            .collect();
        let long = |v: &Avro| match v {
            Avro::Long(x) => Some(*x),
            Avro::Int(x) => Some(i64::from(*x)),
            _ => None,
        };
        let bytes = |v: &Avro| match v {
            Avro::Bytes(b) => Some(b.clone()),
            _ => None,
        };
        Ok(DataFile {
            content: get_long(&f, "content", file)? as i32,
            file_path: get_string(&f, "file_path", file)?,
            file_format: get_string(&f, "file_format", file)?,
            partition: partition_values,
            record_count: get_long(&f, "record_count", file)?,
            file_size_in_bytes: get_long(&f, "file_size_in_bytes", file)?,
            value_counts: read_int_map(&f, "value_counts", file, long)?,
            null_value_counts: read_int_map(&f, "null_value_counts", file, long)?,
            lower_bounds: read_int_map(&f, "lower_bounds", file, bytes)?,
            upper_bounds: read_int_map(&f, "upper_bounds", file, bytes)?,
            first_row_id: opt_long(&f, "first_row_id"),
            referenced_data_file: get_string(&f, "referenced_data_file", file).ok(),
            content_offset: opt_long(&f, "content_offset"),
            content_size_in_bytes: opt_long(&f, "content_size_in_bytes"),
        })
    }
}

/// The Iceberg file metadata of a manifest.
pub struct ManifestContext<'a> {
    /// Iceberg schema JSON (with its id).
    pub schema: &'a Value,
    pub schema_id: i32,
    pub spec_id: i32,
    pub partition: &'a [PartitionColumn],
}

/// Write a manifest of `entries` (all data or all deletes: `content`).
pub fn write_manifest(
    ctx: &ManifestContext<'_>,
    content: i32,
    entries: &[ManifestEntry],
    file: &str,
) -> Result<Vec<u8>> {
    let schema = manifest_entry_schema(ctx.partition)?;
    let spec_fields: Vec<Value> = ctx
        .partition
        .iter()
        .map(|c| {
            json!({"name": c.name, "transform": "identity", "source-id": c.source_id,
                   "field-id": c.field_id})
        })
        .collect();
    let records = entries
        .iter()
        .map(|e| {
            Ok(record(vec![
                ("status", Avro::Int(e.status as i32)),
                ("snapshot_id", optional(Some(Avro::Long(e.snapshot_id)))),
                (
                    "sequence_number",
                    optional(Some(Avro::Long(e.sequence_number))),
                ),
                (
                    "file_sequence_number",
                    optional(Some(Avro::Long(e.file_sequence_number))),
                ),
                ("data_file", e.data_file.to_avro(ctx.partition)?),
            ]))
        })
        .collect::<Result<Vec<_>>>()?;
    let content_name = if content == MANIFEST_CONTENT_DELETES {
        "deletes"
    } else {
        "data"
    };
    avro::write_file(
        &schema,
        &[
            ("schema", ctx.schema.to_string()),
            ("schema-id", ctx.schema_id.to_string()),
            ("partition-spec", Value::Array(spec_fields).to_string()),
            ("partition-spec-id", ctx.spec_id.to_string()),
            ("format-version", "3".to_string()),
            ("content", content_name.to_string()),
        ],
        records,
        file,
    )
}

/// Read a manifest's live (not deleted) entries. `partition` gives the
/// partition fields (their names and types).
pub fn read_manifest(
    bytes: &[u8],
    partition: &[PartitionColumn],
    file: &str,
) -> Result<Vec<ManifestEntry>> {
    let (_, records) = avro::read_file(bytes, file)?;
    let mut out = Vec::with_capacity(records.len());
    for r in &records {
        let f = fields_of(r, file, "manifest_entry")?;
        let status = match get_long(&f, "status", file)? {
            0 => Status::Existing,
            1 => Status::Added,
            2 => continue,
            s => {
                return Err(Error::CorruptIceberg {
                    file: file.into(),
                    detail: format!("status: expected 0, 1 or 2, found {s}"),
                })
            }
        };
        let data_file = f.get("data_file").ok_or_else(|| Error::CorruptIceberg {
            file: file.into(),
            detail: "entry without data_file".into(),
        })?;
        let sequence_number = get_long(&f, "sequence_number", file)?;
        out.push(ManifestEntry {
            status,
            snapshot_id: get_long(&f, "snapshot_id", file)?,
            sequence_number,
            file_sequence_number: opt_long(&f, "file_sequence_number").unwrap_or(sequence_number),
            data_file: DataFile::from_avro(data_file, partition, file)?,
        });
    }
    Ok(out)
}

fn summary_to_avro(s: &FieldSummary) -> Avro {
    record(vec![
        ("contains_null", Avro::Boolean(s.contains_null)),
        ("contains_nan", optional(s.contains_nan.map(Avro::Boolean))),
        (
            "lower_bound",
            optional(s.lower_bound.clone().map(Avro::Bytes)),
        ),
        (
            "upper_bound",
            optional(s.upper_bound.clone().map(Avro::Bytes)),
        ),
    ])
}

/// Write a manifest list.
pub fn write_manifest_list(
    manifests: &[ManifestFile],
    snapshot_id: i64,
    parent_snapshot_id: Option<i64>,
    sequence_number: i64,
    first_row_id: i64,
    file: &str,
) -> Result<Vec<u8>> {
    let records = manifests
        .iter()
        .map(|m| {
            record(vec![
                ("manifest_path", Avro::String(m.manifest_path.clone())),
                ("manifest_length", Avro::Long(m.manifest_length)),
                ("partition_spec_id", Avro::Int(m.partition_spec_id)),
                ("content", Avro::Int(m.content)),
                ("sequence_number", Avro::Long(m.sequence_number)),
                ("min_sequence_number", Avro::Long(m.min_sequence_number)),
                ("added_snapshot_id", Avro::Long(m.added_snapshot_id)),
                ("added_files_count", Avro::Int(m.added_files_count)),
                ("existing_files_count", Avro::Int(m.existing_files_count)),
                ("deleted_files_count", Avro::Int(m.deleted_files_count)),
                ("added_rows_count", Avro::Long(m.added_rows_count)),
                ("existing_rows_count", Avro::Long(m.existing_rows_count)),
                ("deleted_rows_count", Avro::Long(m.deleted_rows_count)),
                (
                    "partitions",
                    optional(Some(Avro::Array(
                        m.partitions.iter().map(summary_to_avro).collect(),
                    ))),
                ),
                ("key_metadata", optional(None)),
                ("first_row_id", opt_long_value(m.first_row_id)),
            ])
        })
        .collect();
    let parent = parent_snapshot_id.map_or_else(|| "null".to_string(), |p| p.to_string());
    avro::write_file(
        &manifest_list_schema(),
        &[
            ("snapshot-id", snapshot_id.to_string()),
            ("parent-snapshot-id", parent),
            ("sequence-number", sequence_number.to_string()),
            ("first-row-id", first_row_id.to_string()),
            ("format-version", "3".to_string()),
        ],
        records,
        file,
    )
}

/// Read a manifest list.
pub fn read_manifest_list(bytes: &[u8], file: &str) -> Result<Vec<ManifestFile>> {
    let (_, records) = avro::read_file(bytes, file)?;
    records
        .iter()
        .map(|r| {
            let f = fields_of(r, file, "manifest_file")?;
            let int = |name: &str| get_long(&f, name, file).map(|v| v as i32);
            let partitions = match f.get("partitions") {
                Some(Avro::Array(items)) => items
                    .iter()
                    .map(|i| {
                        let s = fields_of(i, file, "partitions")?;
                        let b = |n: &str| match s.get(n) {
                            Some(Avro::Bytes(b)) => Some(b.clone()),
                            _ => None,
                        };
                        Ok(FieldSummary {
                            contains_null: matches!(
                                s.get("contains_null"),
                                Some(Avro::Boolean(true))
                            ),
                            contains_nan: match s.get("contains_nan") {
                                Some(Avro::Boolean(v)) => Some(*v),
                                _ => None,
                            },
                            lower_bound: b("lower_bound"),
                            upper_bound: b("upper_bound"),
                        })
                    })
                    .collect::<Result<Vec<_>>>()?,
                _ => Vec::new(),
            };
            Ok(ManifestFile {
                manifest_path: get_string(&f, "manifest_path", file)?,
                manifest_length: get_long(&f, "manifest_length", file)?,
                partition_spec_id: int("partition_spec_id")?,
                content: int("content")?,
                sequence_number: get_long(&f, "sequence_number", file)?,
                min_sequence_number: get_long(&f, "min_sequence_number", file)?,
                added_snapshot_id: get_long(&f, "added_snapshot_id", file)?,
                added_files_count: int("added_files_count")?,
                existing_files_count: int("existing_files_count")?,
                deleted_files_count: int("deleted_files_count")?,
                added_rows_count: get_long(&f, "added_rows_count", file)?,
                existing_rows_count: get_long(&f, "existing_rows_count", file)?,
                deleted_rows_count: get_long(&f, "deleted_rows_count", file)?,
                partitions,
                first_row_id: opt_long(&f, "first_row_id"),
            })
        })
        .collect()
}

/// Partition field summaries of `files` (bounds over non-null values, in
/// each type's order).
pub fn summarize_partitions(
    partition: &[PartitionColumn],
    files: &[&DataFile],
) -> Vec<FieldSummary> {
    partition
        .iter()
        .enumerate()
        .map(|(i, _)| {
            let mut contains_null = false;
            let mut contains_nan = false;
            let mut lo: Option<&Literal> = None;
            let mut hi: Option<&Literal> = None;
            for f in files {
                match f.partition.get(i).and_then(Option::as_ref) {
                    None => contains_null = true,
                    Some(Literal::Float(v)) if v.is_nan() => contains_nan = true,
                    Some(Literal::Double(v)) if v.is_nan() => contains_nan = true,
                    Some(v) => {
                        if lo.is_none_or(|l| less(v, l)) {
                            lo = Some(v);
                        }
                        if hi.is_none_or(|h| less(h, v)) {
                            hi = Some(v);
                        }
                    }
                }
            }
            FieldSummary {
                contains_null,
                contains_nan: Some(contains_nan),
                lower_bound: lo.map(Literal::to_bytes),
                upper_bound: hi.map(Literal::to_bytes),
            }
        })
        .collect()
}

/// `a < b` for two literals of one type (strings and binary compare as bytes).
fn less(a: &Literal, b: &Literal) -> bool {
    match (a, b) {
        (Literal::Boolean(a), Literal::Boolean(b)) => a < b,
        (Literal::Int(a), Literal::Int(b)) | (Literal::Date(a), Literal::Date(b)) => a < b,
        (Literal::Long(a), Literal::Long(b)) | (Literal::Timestamp(a), Literal::Timestamp(b)) => {
            a < b
        }
        (Literal::Float(a), Literal::Float(b)) => a < b,
        (Literal::Double(a), Literal::Double(b)) => a < b,
        (Literal::String(a), Literal::String(b)) => a.as_bytes() < b.as_bytes(),
        (Literal::Binary(a), Literal::Binary(b)) => a < b,
        _ => false,
    }
}

/// `v` unwrapped of its union, for callers reading raw records.
pub fn unwrap_value(v: &Avro) -> Option<&Avro> {
    unwrap(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::schema::DataType;

    fn part() -> Vec<PartitionColumn> {
        vec![PartitionColumn {
            name: "p-1".into(),
            physical_name: "col-p".into(),
            source_id: 2,
            field_id: 1000,
            delta_type: DataType::Date,
            ty: PrimitiveType::Date,
        }]
    }

    fn data_file(path: &str, p: Option<Literal>) -> DataFile {
        DataFile {
            content: CONTENT_DATA,
            file_path: path.into(),
            file_format: "PARQUET".into(),
            partition: vec![p],
            record_count: 10,
            file_size_in_bytes: 100,
            value_counts: BTreeMap::from([(1, 10)]),
            null_value_counts: BTreeMap::from([(1, 0)]),
            lower_bounds: BTreeMap::from([(1, Literal::Long(1).to_bytes())]),
            upper_bounds: BTreeMap::from([(1, Literal::Long(9).to_bytes())]),
            first_row_id: Some(5),
            referenced_data_file: None,
            content_offset: None,
            content_size_in_bytes: None,
        }
    }

    #[test]
    fn manifest_round_trip_with_spec_field_ids() {
        let schema = json!({"type":"struct","schema-id":0,"fields":[]});
        let ctx = ManifestContext {
            schema: &schema,
            schema_id: 0,
            spec_id: 0,
            partition: &part(),
        };
        let mut dv = data_file("file:///t/x.puffin", Some(Literal::Date(3)));
        dv.content = CONTENT_POSITION_DELETES;
        dv.file_format = "PUFFIN".into();
        dv.referenced_data_file = Some("file:///t/a.parquet".into());
        dv.content_offset = Some(4);
        dv.content_size_in_bytes = Some(30);
        dv.first_row_id = None;
        let entries = vec![
            ManifestEntry {
                status: Status::Added,
                snapshot_id: 7,
                sequence_number: 2,
                file_sequence_number: 2,
                data_file: data_file("file:///t/a.parquet", Some(Literal::Date(3))),
            },
            ManifestEntry {
                status: Status::Existing,
                snapshot_id: 6,
                sequence_number: 1,
                file_sequence_number: 1,
                data_file: dv,
            },
        ];
        let bytes = write_manifest(&ctx, 0, &entries, "m.avro").unwrap();
        let back = read_manifest(&bytes, &part(), "m.avro").unwrap();
        assert_eq!(back, entries);
        // The writer schema carries the spec's field ids, as readers resolve by them.
        let reader = apache_avro::Reader::new(&bytes[..]).unwrap();
        let schema_json = serde_json::to_string(reader.writer_schema()).unwrap();
        for id in [
            "\"field-id\":143",
            "\"field-id\":144",
            "\"field-id\":145",
            "\"field-id\":1000",
        ] {
            assert!(schema_json.contains(id), "{id} missing");
        }
        let (meta, _) = avro::read_file(&bytes, "m").unwrap();
        assert_eq!(meta["format-version"], "3");
        assert_eq!(meta["content"], "data");
        assert!(meta["partition-spec"].contains("\"source-id\":2"));
    }

    #[test]
    fn manifest_list_round_trip() {
        let files = [data_file("a", Some(Literal::Date(3))), data_file("b", None)];
        let m = ManifestFile {
            manifest_path: "file:///t/metadata/m.avro".into(),
            manifest_length: 123,
            partition_spec_id: 0,
            content: MANIFEST_CONTENT_DATA,
            sequence_number: 3,
            min_sequence_number: 1,
            added_snapshot_id: 9,
            added_files_count: 1,
            existing_files_count: 1,
            deleted_files_count: 0,
            added_rows_count: 10,
            existing_rows_count: 10,
            deleted_rows_count: 0,
            partitions: summarize_partitions(&part(), &files.iter().collect::<Vec<_>>()),
            first_row_id: Some(20),
        };
        assert!(m.partitions[0].contains_null);
        assert_eq!(
            m.partitions[0].lower_bound,
            Some(3i32.to_le_bytes().to_vec())
        );
        let bytes =
            write_manifest_list(std::slice::from_ref(&m), 9, Some(8), 3, 20, "l.avro").unwrap();
        assert_eq!(read_manifest_list(&bytes, "l.avro").unwrap(), vec![m]);
    }

    #[test]
    fn avro_names() {
        assert_eq!(avro_name("abc_1"), "abc_1");
        assert_eq!(avro_name("p-1"), "p_x2D1");
        assert_eq!(avro_name("1a"), "_1a");
    }
}
