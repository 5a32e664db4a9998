//! Partition values as Delta Spark writes them: the `add.partitionValues`
//! strings, the Hive-style directory names (`col=value/`, odd characters as
//! `%XX`, nulls as `__HIVE_DEFAULT_PARTITION__`), the percent-encoded
//! `add.path`, and the split of a batch into one batch per partition.
//!
//! | type | `partitionValues` | directory value |
//! |---|---|---|
//! | string | as is (`""` is null) | as is |
//! | byte … long | decimal digits | same |
//! | boolean | `true` / `false` | same |
//! | decimal(p,s) | plain, `s` fraction digits (`1.50`) | same |
//! | date | `YYYY-MM-DD` | same |
//! | timestamp | UTC ISO-8601, 6 fraction digits (`2024-01-02T03:04:05.678999Z`) | `2024-01-02 03:04:05.678999` (UTC; fraction without trailing zeros, dropped when zero) |
//! | timestamp_ntz | `2024-01-02 03:04:05.1` (as the directory) | same |
//!
//! Floats, doubles, binaries and nested types are refused as partition
//! columns (deltadv does not write them).

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Int16Type, Int32Type, Int64Type, Int8Type, TimestampMicrosecondType,
};
use arrow_array::{Array, ArrayRef, RecordBatch, UInt32Array};
use chrono::{DateTime, NaiveDate};

use crate::error::{Error, Result};
use crate::log::schema::DataType;

/// The directory value of a null (or empty string) partition value.
pub const HIVE_DEFAULT_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// Whether Hive escapes this character in a partition directory name
/// (control characters and `"#%'*/:=?\{[]^`, DEL).
fn hive_escapes(c: char) -> bool {
    matches!(
        c,
        '\u{01}'
            ..='\u{1F}'
                | '"'
                | '#'
                | '%'
                | '\''
                | '*'
                | '/'
                | ':'
                | '='
                | '?'
                | '\\'
                | '\u{7F}'
                | '{'
                | '['
                | ']'
                | '^'
    )
}

/// A partition column name or value escaped for a directory name, Hive style.
pub fn escape_path_name(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if hive_escapes(c) {
            out.push_str(&format!("%{:02X}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether an ASCII byte may stay as is in a URI path (RFC 2396, as
/// `java.net.URI` decides: unreserved, punctuation and `/`).
fn uri_path_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"_-!.~'()*,;:$&+=/@".contains(&b)
}

/// A relative file path as `add.path` holds it: a URI path, where `%`,
/// spaces and other ASCII characters a URI path cannot hold are
/// percent-encoded, and non-ASCII characters are kept (as Delta Spark does).
pub fn encode_add_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if c.is_ascii() && !uri_path_safe(c as u8) {
            out.push_str(&format!("%{:02X}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// One row's value of one partition column: the `partitionValues` string and
/// the directory value (both `None` for null).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionValue {
    pub value: Option<String>,
    pub directory: Option<String>,
}

impl PartitionValue {
    fn same(s: String) -> Self {
        PartitionValue {
            value: Some(s.clone()),
            directory: Some(s),
        }
    }

    const NULL: PartitionValue = PartitionValue {
        value: None,
        directory: None,
    };
}

/// Refuse a partition column of a type deltadv does not write partition
/// values for.
pub fn check_partition_type(column: &str, dt: &DataType) -> Result<()> {
    match dt {
        DataType::String
        | DataType::Byte
        | DataType::Short
        | DataType::Integer
        | DataType::Long
        | DataType::Boolean
        | DataType::Decimal { .. }
        | DataType::Date
        | DataType::Timestamp
        | DataType::TimestampNtz => Ok(()),
        other => Err(Error::Unsupported(format!(
            "partition column '{column}' has type {other}; deltadv writes partition values of \
             strings, integers, booleans, decimals, dates and timestamps only"
        ))),
    }
}

/// A decimal's unscaled value as plain text with `scale` fraction digits.
pub fn decimal_text(unscaled: i128, scale: i8) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    if scale <= 0 {
        let zeros = "0".repeat(usize::from(scale.unsigned_abs()));
        return if unscaled == 0 {
            "0".to_string()
        } else {
            format!("{sign}{digits}{zeros}")
        };
    }
    let scale = usize::from(scale.unsigned_abs());
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int_part, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int_part}.{frac}")
}

/// `YYYY-MM-DD` of days since the epoch.
pub fn date_text(days: i32) -> Option<String> {
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?;
    let date = epoch.checked_add_signed(chrono::TimeDelta::try_days(i64::from(days))?)?;
    Some(date.format("%Y-%m-%d").to_string())
}

/// `YYYY-MM-DD HH:MM:SS[.f]` of microseconds since the epoch (UTC), the
/// fraction without trailing zeros (Spark's timestamp-to-string cast).
pub fn timestamp_text(micros: i64) -> Option<String> {
    let dt = DateTime::from_timestamp_micros(micros)?.naive_utc();
    let base = dt.format("%Y-%m-%d %H:%M:%S").to_string();
    let fraction = micros.rem_euclid(1_000_000);
    if fraction == 0 {
        return Some(base);
    }
    let text = format!("{fraction:06}");
    Some(format!("{base}.{}", text.trim_end_matches('0')))
}

/// UTC ISO-8601 with 6 fraction digits (`2024-01-02T03:04:05.678999Z`).
pub fn timestamp_iso(micros: i64) -> Option<String> {
    let dt = DateTime::from_timestamp_micros(micros)?;
    Some(dt.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
}

/// The partition value of every row of `array` (a column of Delta type `dt`).
pub fn partition_values(
    column: &str,
    dt: &DataType,
    array: &ArrayRef,
) -> Result<Vec<PartitionValue>> {
    let bad = |what: &str| {
        Error::Internal(format!(
            "partition column '{column}' ({dt}) holds {what} (Arrow type {})",
            array.data_type()
        ))
    };
    let n = array.len();
    let mut out = Vec::with_capacity(n);
    macro_rules! each {
        ($arr:expr, $f:expr) => {{
            let arr = $arr;
            for i in 0..n {
                out.push(if arr.is_null(i) {
                    PartitionValue::NULL
                } else {
                    $f(arr.value(i))?
                });
            }
        }};
    }
    let int = |v: i64| -> Result<PartitionValue> { Ok(PartitionValue::same(v.to_string())) };
    match dt {
        DataType::String => {
            let arr = array
                .as_string_opt::<i32>()
                .ok_or_else(|| bad("no strings"))?;
            each!(arr, |s: &str| -> Result<PartitionValue> {
                Ok(if s.is_empty() {
                    PartitionValue::NULL
                } else {
                    PartitionValue::same(s.to_string())
                })
            })
        }
        DataType::Byte => each!(
            array
                .as_primitive_opt::<Int8Type>()
                .ok_or_else(|| bad("no bytes"))?,
            |v: i8| int(i64::from(v))
        ),
        DataType::Short => each!(
            array
                .as_primitive_opt::<Int16Type>()
                .ok_or_else(|| bad("no shorts"))?,
            |v: i16| int(i64::from(v))
        ),
        DataType::Integer => each!(
            array
                .as_primitive_opt::<Int32Type>()
                .ok_or_else(|| bad("no integers"))?,
            |v: i32| int(i64::from(v))
        ),
        DataType::Long => each!(
            array
                .as_primitive_opt::<Int64Type>()
                .ok_or_else(|| bad("no longs"))?,
            int
        ),
        DataType::Boolean => each!(
            array.as_boolean_opt().ok_or_else(|| bad("no booleans"))?,
            |v: bool| -> Result<PartitionValue> { Ok(PartitionValue::same(v.to_string())) }
        ),
        DataType::Decimal { scale, .. } => each!(
            array
                .as_primitive_opt::<Decimal128Type>()
                .ok_or_else(|| bad("no decimals"))?,
            |v: i128| -> Result<PartitionValue> {
                Ok(PartitionValue::same(decimal_text(v, *scale)))
            }
        ),
        DataType::Date => each!(
            array
                .as_primitive_opt::<Date32Type>()
                .ok_or_else(|| bad("no dates"))?,
            |v: i32| -> Result<PartitionValue> {
                date_text(v)
                    .map(PartitionValue::same)
                    .ok_or_else(|| out_of_range(column, v))
            }
        ),
        DataType::Timestamp => each!(
            array
                .as_primitive_opt::<TimestampMicrosecondType>()
                .ok_or_else(|| bad("no microsecond timestamps"))?,
            |v: i64| -> Result<PartitionValue> {
                match (timestamp_iso(v), timestamp_text(v)) {
                    (Some(value), Some(directory)) => Ok(PartitionValue {
                        value: Some(value),
                        directory: Some(directory),
                    }),
                    _ => Err(out_of_range(column, v)),
                }
            }
        ),
        DataType::TimestampNtz => each!(
            array
                .as_primitive_opt::<TimestampMicrosecondType>()
                .ok_or_else(|| bad("no microsecond timestamps"))?,
            |v: i64| -> Result<PartitionValue> {
                timestamp_text(v)
                    .map(PartitionValue::same)
                    .ok_or_else(|| out_of_range(column, v))
            }
        ),
        other => check_partition_type(column, other)?,
    }
    Ok(out)
}

fn out_of_range(column: &str, v: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!(
        "partition column '{column}': value {v} is outside the dates deltadv can write"
    ))
}

/// The directory of one partition: `col=value/` for each partition column
/// (names and values Hive-escaped), relative to the table root.
pub fn directory(names: &[String], key: &[PartitionValue]) -> String {
    let mut dir = String::new();
    for (name, v) in names.iter().zip(key) {
        dir.push_str(&escape_path_name(name));
        dir.push('=');
        match &v.directory {
            Some(d) => dir.push_str(&escape_path_name(d)),
            None => dir.push_str(HIVE_DEFAULT_PARTITION),
        }
        dir.push('/');
    }
    dir
}

/// `batch` split by the partition key of each row: one (key, rows) pair per
/// distinct key, in order of first appearance. `keys` holds each row's key.
pub fn split(
    batch: &RecordBatch,
    keys: Vec<Vec<PartitionValue>>,
) -> Result<Vec<(Vec<PartitionValue>, RecordBatch)>> {
    let Some(first) = keys.first() else {
        return Ok(Vec::new());
    };
    if keys.iter().all(|k| k == first) {
        return Ok(vec![(first.clone(), batch.clone())]);
    }
    let mut order: Vec<Vec<PartitionValue>> = Vec::new();
    let mut rows: HashMap<Vec<PartitionValue>, Vec<u32>> = HashMap::new();
    for (i, key) in keys.into_iter().enumerate() {
        let i = u32::try_from(i)
            .map_err(|_| Error::InvalidArgument("a record batch of more than 2^32 rows".into()))?;
        match rows.get_mut(&key) {
            Some(list) => list.push(i),
            None => {
                order.push(key.clone());
                rows.insert(key, vec![i]);
            }
        }
    }
    let mut out = Vec::with_capacity(order.len());
    for key in order {
        let indices = UInt32Array::from(rows.remove(&key).unwrap_or_default());
        let part = arrow_select::take::take_record_batch(batch, &indices)
            .map_err(|e| Error::Internal(format!("splitting a batch by partition: {e}")))?;
        out.push((key, part));
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn directories_escape_as_hive_and_paths_as_uris() {
        // Delta Spark 4.4 wrote this value as `s=a%2Fb c%3Dd%25e%3Af%23g%3Fhé`
        // on disk and `s=a%252Fb%20c%253Dd%2525e%253Af%2523g%253Fhé` in add.path.
        let v = "a/b c=d%e:f#g?hé";
        let dir = directory(&["s".into()], &[PartitionValue::same(v.into())]);
        assert_eq!(dir, "s=a%2Fb c%3Dd%25e%3Af%23g%3Fhé/");
        assert_eq!(
            encode_add_path(&dir),
            "s=a%252Fb%20c%253Dd%2525e%253Af%2523g%253Fhé/"
        );
        let null = directory(&["s".into()], &[PartitionValue::NULL]);
        assert_eq!(null, "s=__HIVE_DEFAULT_PARTITION__/");
    }

    #[test]
    fn values_are_written_as_delta_spark_writes_them() {
        assert_eq!(decimal_text(150, 2), "1.50");
        assert_eq!(decimal_text(-1, 2), "-0.01");
        assert_eq!(decimal_text(0, 3), "0.000");
        assert_eq!(decimal_text(12, 0), "12");
        assert_eq!(decimal_text(12, -2), "1200");
        assert_eq!(date_text(0).unwrap(), "1970-01-01");
        assert_eq!(date_text(-25567).unwrap(), "1900-01-01");
        // 2024-01-02 03:04:05.678999 UTC
        let t = 1_704_164_645_678_999;
        assert_eq!(timestamp_iso(t).unwrap(), "2024-01-02T03:04:05.678999Z");
        assert_eq!(timestamp_text(t).unwrap(), "2024-01-02 03:04:05.678999");
        // 1960-01-01 00:00:00 and .1: no fraction / trailing zeros trimmed
        let t = -315_619_200_000_000;
        assert_eq!(timestamp_iso(t).unwrap(), "1960-01-01T00:00:00.000000Z");
        assert_eq!(timestamp_text(t).unwrap(), "1960-01-01 00:00:00");
        assert_eq!(
            timestamp_text(t + 100_000).unwrap(),
            "1960-01-01 00:00:00.1"
        );
    }
}
