//! Avro container files with Iceberg's schemas, through `apache-avro`.
//!
//! Iceberg readers resolve manifest fields by the `field-id` of the writer's
//! schema and read maps with non-string keys from arrays of `{key, value}`
//! records marked `"logicalType": "map"`. `apache-avro` keeps `field-id`
//! but drops unknown logical types when it serializes a parsed schema, so the
//! header (magic, metadata map with the schema JSON exactly as given, sync
//! marker) is written here, its metadata map encoded by `apache-avro`, and the
//! data blocks by `apache-avro`'s writer appending to it.
//!
//! ```text
//! ┌────────────┬──────────────────────────────────────────┬─────────────┬────────────┐
//! │ "Obj" 0x01 │ map<bytes> metadata (avro.schema, avro.  │ sync marker │ blocks …   │
//! │            │ codec, Iceberg keys: schema, partition-… │ 16 bytes    │            │
//! └────────────┴──────────────────────────────────────────┴─────────────┴────────────┘
//! ```

use std::collections::HashMap;

use apache_avro::types::Value;
use apache_avro::{Reader, Schema, Writer};

use crate::error::{Error, Result};

/// Avro object container magic.
const OBJECT_MAGIC: [u8; 4] = [b'O', b'b', b'j', 1];
/// Metadata key of the writer schema.
const SCHEMA_KEY: &str = "avro.schema";
/// Metadata key of the block codec.
const CODEC_KEY: &str = "avro.codec";

fn avro_err(file: &str, what: &str, e: impl std::fmt::Display) -> Error {
    Error::CorruptIceberg {
        file: file.to_string(),
        detail: format!("{what}: {e}"),
    }
}

/// Parse an Avro schema JSON (ours: an error here is a bug).
pub fn parse_schema(json: &str) -> Result<Schema> {
    Schema::parse_str(json).map_err(|e| Error::Internal(format!("Avro schema {json}: {e}")))
}

/// Most parsed schemas [`cached_schema`] keeps (it starts over past it).
const SCHEMA_CACHE_ENTRIES: usize = 64;

/// `parse_schema`, remembered: every conversion writes manifests and a
/// manifest list of the same few schemas, and parsing one costs more than
/// writing a small manifest.
fn cached_schema(json: &str) -> Result<std::sync::Arc<Schema>> {
    use std::sync::{Arc, Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Schema>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let lock = || match cache.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some(s) = lock().get(json) {
        return Ok(Arc::clone(s));
    }
    let schema = Arc::new(parse_schema(json)?);
    let mut map = lock();
    if map.len() >= SCHEMA_CACHE_ENTRIES {
        map.clear();
    }
    map.insert(json.to_string(), Arc::clone(&schema));
    Ok(schema)
}

/// An Avro container file of `records` written with the schema `schema_json`
/// (kept verbatim in the header) and the file metadata `metadata`
/// (Iceberg's `schema`, `partition-spec`, `format-version`, …). Blocks are
/// deflate-compressed. `file` names the file in errors.
pub fn write_file(
    schema_json: &str,
    metadata: &[(&str, String)],
    records: Vec<Value>,
    file: &str,
) -> Result<Vec<u8>> {
    let schema = cached_schema(schema_json)?;
    let codec = apache_avro::Codec::Deflate(apache_avro::DeflateSettings::default());
    let marker: [u8; 16] = *uuid::Uuid::new_v4().as_bytes();
    let mut header: Vec<(String, Value)> = vec![
        (
            SCHEMA_KEY.into(),
            Value::Bytes(schema_json.as_bytes().to_vec()),
        ),
        (CODEC_KEY.into(), Value::Bytes(b"deflate".to_vec())),
    ];
    header.extend(
        metadata
            .iter()
            .map(|(k, v)| ((*k).to_string(), Value::Bytes(v.as_bytes().to_vec()))),
    );
    let meta_schema = Schema::map(Schema::Bytes).build();
    let meta = Value::Map(header.into_iter().collect::<HashMap<_, _>>());
    let mut out = OBJECT_MAGIC.to_vec();
    out.extend(
        apache_avro::writer::datum::GenericDatumWriter::builder(&meta_schema)
            .build()
            .and_then(|w| w.write_value_to_vec(meta))
            .map_err(|e| avro_err(file, "encoding the header", e))?,
    );
    out.extend_from_slice(&marker);
    let mut writer = Writer::builder()
        .schema(&schema)
        .writer(out)
        .codec(codec)
        .marker(marker)
        .has_header(true)
        .build()
        .map_err(|e| avro_err(file, "starting the writer", e))?;
    for record in records {
        writer
            .append_value(record)
            .map_err(|e| avro_err(file, "writing a record", e))?;
    }
    writer
        .into_inner()
        .map_err(|e| avro_err(file, "finishing the file", e))
}

/// The records and the user metadata (as UTF-8 strings) of the Avro file
/// `bytes`, named `file` in errors.
pub fn read_file(bytes: &[u8], file: &str) -> Result<(HashMap<String, String>, Vec<Value>)> {
    let reader = Reader::new(bytes).map_err(|e| avro_err(file, "reading the header", e))?;
    let metadata = reader
        .user_metadata()
        .iter()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()))
        .collect();
    let records = reader
        .map(|r| r.map_err(|e| avro_err(file, "reading a record", e)))
        .collect::<Result<Vec<_>>>()?;
    Ok((metadata, records))
}

// ---------------------------------------------------------------------------
// Value helpers (building and reading records)
// ---------------------------------------------------------------------------

/// An optional field's value: branch 0 is `null`, branch 1 the type.
pub fn optional(v: Option<Value>) -> Value {
    match v {
        None => Value::Union(0, Box::new(Value::Null)),
        Some(v) => Value::Union(1, Box::new(v)),
    }
}

/// A record value with these fields, in schema order.
pub fn record(fields: Vec<(&str, Value)>) -> Value {
    Value::Record(
        fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

/// The fields of a record, by name (unions unwrapped, nulls dropped).
pub fn fields_of(v: &Value, file: &str, what: &str) -> Result<HashMap<String, Value>> {
    match unwrap(v) {
        Some(Value::Record(fields)) => Ok(fields
            .iter()
            .filter_map(|(k, v)| unwrap(v).map(|v| (k.clone(), v.clone())))
            .collect()),
        other => Err(Error::CorruptIceberg {
            file: file.to_string(),
            detail: format!("{what}: expected a record, found {other:?}"),
        }),
    }
}

/// `v` without its union wrapper; `None` for null.
pub fn unwrap(v: &Value) -> Option<&Value> {
    match v {
        Value::Union(_, inner) => unwrap(inner),
        Value::Null => None,
        other => Some(other),
    }
}

/// A required long (or int) field.
pub fn get_long(fields: &HashMap<String, Value>, name: &str, file: &str) -> Result<i64> {
    opt_long(fields, name).ok_or_else(|| Error::CorruptIceberg {
        file: file.to_string(),
        detail: format!(
            "field {name}: expected a long, found {:?}",
            fields.get(name)
        ),
    })
}

/// An optional long (or int) field.
pub fn opt_long(fields: &HashMap<String, Value>, name: &str) -> Option<i64> {
    match fields.get(name) {
        Some(Value::Long(v)) => Some(*v),
        Some(Value::Int(v)) => Some(i64::from(*v)),
        _ => None,
    }
}

/// A required string field.
pub fn get_string(fields: &HashMap<String, Value>, name: &str, file: &str) -> Result<String> {
    match fields.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        other => Err(Error::CorruptIceberg {
            file: file.to_string(),
            detail: format!("field {name}: expected a string, found {other:?}"),
        }),
    }
}

/// Schema JSON of an Iceberg map with int keys stored as an array of records.
pub fn int_map_schema(key_id: i32, value_id: i32, value_type: &str) -> serde_json::Value {
    serde_json::json!({
        "type": "array",
        "logicalType": "map",
        "items": {
            "type": "record",
            "name": format!("k{key_id}_v{value_id}"),
            "fields": [
                {"name": "key", "type": "int", "field-id": key_id},
                {"name": "value", "type": value_type, "field-id": value_id},
            ],
        },
    })
}

/// An optional field's schema JSON.
pub fn optional_field(name: &str, id: i32, ty: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"name": name, "type": ["null", ty], "default": null, "field-id": id})
}

/// A required field's schema JSON.
pub fn required_field(name: &str, id: i32, ty: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"name": name, "type": ty, "field-id": id})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_keeps_schema_verbatim_and_metadata() {
        let schema = serde_json::json!({
            "type": "record", "name": "r", "fields": [
                required_field("a", 1, "long".into()),
                optional_field("m", 2, int_map_schema(3, 4, "long")),
            ]
        })
        .to_string();
        let rec = record(vec![
            ("a", Value::Long(7)),
            (
                "m",
                optional(Some(Value::Array(vec![record(vec![
                    ("key", Value::Int(1)),
                    ("value", Value::Long(2)),
                ])]))),
            ),
        ]);
        let bytes = write_file(&schema, &[("format-version", "3".into())], vec![rec], "t").unwrap();
        let (meta, records) = read_file(&bytes, "t").unwrap();
        assert_eq!(meta["format-version"], "3");
        assert_eq!(records.len(), 1);
        let f = fields_of(&records[0], "t", "r").unwrap();
        assert_eq!(get_long(&f, "a", "t").unwrap(), 7);
        // The header holds our JSON, logicalType map included.
        let reader = Reader::new(&bytes[..]).unwrap();
        let _ = reader.writer_schema();
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("\"logicalType\":\"map\""));
        assert!(text.contains("\"field-id\":3"));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(read_file(b"Obj\x01garbage", "t").is_err());
        assert!(read_file(b"", "t").is_err());
    }
}
