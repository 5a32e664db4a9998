//! What parquet row-group statistics say about a predicate's columns, and the
//! matching of Delta columns to parquet columns (by physical name, or by field
//! id in column-mapping mode `id`). Pure: works on already-fetched metadata.
//!
//! This stays in `scan` rather than `expr`: it needs a parquet footer and the
//! Delta → parquet column resolution (shared with [`super::conform`]), both
//! the scan's business; `expr` only sees the result, as [`ColumnStats`].

use arrow_schema::Fields;
use parquet::basic::{LogicalType, TimeUnit};
use parquet::file::metadata::RowGroupMetaData;
use parquet::file::statistics::Statistics;
use parquet::schema::types::SchemaDescriptor;

use crate::expr::{BoundColumn, ColumnStats, Val};
use crate::log::schema::{ColumnMappingMode, DataType, StructField};

/// Arrow field metadata key parquet field ids are exposed under.
pub const PARQUET_FIELD_ID_KEY: &str = "PARQUET:field_id";

/// Index of the field among `fields` (a file's columns, or a struct's
/// children in a file) that holds Delta field `field`: by parquet field id
/// in mode `Id` when the file carries field ids, else by `physical` name.
pub fn resolve_field(
    fields: &Fields,
    field: &StructField,
    physical: &str,
    mode: ColumnMappingMode,
) -> Option<usize> {
    if mode == ColumnMappingMode::Id {
        if let Some(id) = field.field_id() {
            let has_ids = fields
                .iter()
                .any(|f| f.metadata().contains_key(PARQUET_FIELD_ID_KEY));
            if has_ids {
                return fields.iter().position(|f| {
                    f.metadata()
                        .get(PARQUET_FIELD_ID_KEY)
                        .and_then(|v| v.parse::<i64>().ok())
                        == Some(id)
                });
            }
        }
    }
    fields.iter().position(|f| f.name() == physical)
}

/// Where a bound column lives in one parquet file.
#[derive(Debug, Clone, PartialEq)]
pub enum Leaf {
    /// Not in the file at all: every row is null there.
    Absent,
    /// Leaf column index in the parquet schema.
    Column(usize),
    /// In the file, but no usable leaf (e.g. inside a list).
    Unknown,
}

/// Find `c`'s leaf column. `root_name` is the name of its top-level column in
/// the file (from [`resolve_field`]), `None` when the file lacks it.
pub fn find_leaf(descr: &SchemaDescriptor, c: &BoundColumn, root_name: Option<&str>) -> Leaf {
    let Some(root) = root_name else {
        return Leaf::Absent;
    };
    let rest = c.physical.get(1..).unwrap_or(&[]);
    for (i, col) in descr.columns().iter().enumerate() {
        let parts = col.path().parts();
        if parts.first().map(String::as_str) != Some(root) {
            continue;
        }
        if parts.get(1..) == Some(rest) {
            return Leaf::Column(i);
        }
    }
    // The root is there but not this nested field (added later, or named
    // differently in id mode): say nothing rather than guess.
    Leaf::Unknown
}

fn int_val(v: i64, c: &BoundColumn, unit: Option<&TimeUnit>, upper: bool) -> Option<Val> {
    let v = i128::from(v);
    Some(Val::Int(match (&c.data_type, unit) {
        (DataType::Timestamp | DataType::TimestampNtz, Some(TimeUnit::MILLIS)) => v * 1000,
        (DataType::Timestamp | DataType::TimestampNtz, Some(TimeUnit::MICROS)) => v,
        (DataType::Timestamp | DataType::TimestampNtz, Some(TimeUnit::NANOS)) => {
            if upper {
                v.div_euclid(1000) + 1
            } else {
                v.div_euclid(1000)
            }
        }
        (DataType::Timestamp | DataType::TimestampNtz, None) => return None,
        (
            DataType::Byte
            | DataType::Short
            | DataType::Integer
            | DataType::Long
            | DataType::Date
            | DataType::Decimal { .. },
            _,
        ) => v,
        _ => return None,
    }))
}

/// Big-endian two's complement bytes (a parquet decimal) as an integer.
fn be_signed(bytes: &[u8]) -> Option<i128> {
    if bytes.is_empty() || bytes.len() > 16 {
        return None;
    }
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut buf = if negative { [0xffu8; 16] } else { [0u8; 16] };
    let start = 16 - bytes.len();
    buf.get_mut(start..)?.copy_from_slice(bytes);
    Some(i128::from_be_bytes(buf))
}

fn bytes_val(b: &[u8], c: &BoundColumn) -> Option<Val> {
    match c.data_type {
        DataType::String => std::str::from_utf8(b).ok().map(|s| Val::Str(s.to_string())),
        DataType::Decimal { .. } => be_signed(b).map(Val::Int),
        _ => None,
    }
}

/// What row group `rg`'s statistics say about `c` (None: nothing known).
pub fn row_group_stats(rg: &RowGroupMetaData, c: &BoundColumn, leaf: &Leaf) -> Option<ColumnStats> {
    let index = match leaf {
        Leaf::Absent => {
            return Some(ColumnStats {
                all_null: true,
                ..Default::default()
            })
        }
        Leaf::Unknown => return None,
        Leaf::Column(i) => *i,
    };
    let chunk = rg.columns().get(index)?;
    let stats = chunk.statistics()?;
    let rows = u64::try_from(rg.num_rows()).ok()?;
    let nulls = stats.null_count_opt();
    let (all_null, none_null) = match nulls {
        Some(n) => (n == rows, n == 0),
        None => (false, false),
    };
    let unit = match chunk.column_descr().logical_type_ref() {
        Some(LogicalType::Timestamp(t)) => Some(t.unit),
        _ => None,
    };
    let (min, max) = match stats {
        // After a type change, old files' bounds are in the old type.
        _ if !c.bounds_comparable => (None, None),
        Statistics::Boolean(s) => (
            s.min_opt().map(|v| Val::Bool(*v)),
            s.max_opt().map(|v| Val::Bool(*v)),
        ),
        Statistics::Int32(s) => (
            s.min_opt()
                .and_then(|v| int_val(i64::from(*v), c, unit.as_ref(), false)),
            s.max_opt()
                .and_then(|v| int_val(i64::from(*v), c, unit.as_ref(), true)),
        ),
        Statistics::Int64(s) => (
            s.min_opt()
                .and_then(|v| int_val(*v, c, unit.as_ref(), false)),
            s.max_opt()
                .and_then(|v| int_val(*v, c, unit.as_ref(), true)),
        ),
        Statistics::Float(s) => (
            s.min_opt().map(|v| Val::Float(f64::from(*v))),
            s.max_opt().map(|v| Val::Float(f64::from(*v))),
        ),
        Statistics::Double(s) => (
            s.min_opt().map(|v| Val::Float(*v)),
            s.max_opt().map(|v| Val::Float(*v)),
        ),
        // Deprecated min/max of byte arrays used signed byte order: unusable.
        Statistics::ByteArray(s) if !stats.is_min_max_deprecated() => (
            s.min_opt().and_then(|v| bytes_val(v.data(), c)),
            s.max_opt().and_then(|v| bytes_val(v.data(), c)),
        ),
        Statistics::FixedLenByteArray(s) if !stats.is_min_max_deprecated() => (
            s.min_opt().and_then(|v| bytes_val(v.data(), c)),
            s.max_opt().and_then(|v| bytes_val(v.data(), c)),
        ),
        _ => (None, None),
    };
    // Float stats: -0.0/+0.0 and NaN handling differ between writers; only
    // keep them when they are ordinary numbers.
    let finite = |v: &Option<Val>| match v {
        Some(Val::Float(f)) if f.is_nan() => None,
        other => other.clone(),
    };
    Some(ColumnStats {
        min: finite(&min),
        max: finite(&max),
        all_null,
        none_null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_bytes_are_signed_big_endian() {
        assert_eq!(be_signed(&[0x01, 0x00]), Some(256));
        assert_eq!(be_signed(&[0xff]), Some(-1));
        assert_eq!(be_signed(&[0xff, 0x00]), Some(-256));
        assert_eq!(be_signed(&[]), None);
        assert_eq!(be_signed(&[0; 17]), None);
    }
}
