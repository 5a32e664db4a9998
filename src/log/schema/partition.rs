//! Partition values: the strings of `add.partitionValues` parsed into typed
//! Arrow arrays (exact decimals, dates, timestamps with zones).

use super::*;

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
