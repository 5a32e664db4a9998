//! Partition values: the strings of `add.partitionValues` parsed into typed
//! Arrow arrays (exact decimals, dates, timestamps with zones).

use chrono::format::{self, Fixed, Item, Numeric, Pad, Parsed, StrftimeItems};
use chrono::{NaiveDateTime, Timelike};

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

// Dates and timestamps are parsed by chrono, in the formats of Delta's
// "Partition Value Serialization" (PROTOCOL.md):
//
//   date         YYYY-MM-DD
//   timestamp    YYYY-MM-DD HH:MM:SS[.f]            (UTC, or the writer's zone)
//                YYYY-MM-DDTHH:MM:SS[.f](Z|±HH:MM)  (ISO 8601, Delta Spark 3.3+)
//   timestamp_ntz YYYY-MM-DD HH:MM:SS[.f]
//
// Month, day, hour, minute and second may have one digit; the year has four
// digits, or a sign and 4-6 digits (`+10000-01-01`, `-0001-01-01`, as Java
// prints years outside 0000-9999); `T` may be `t` or a space; the fraction has
// 1-9 digits, zero below the microsecond; the zone is `Z`, `±HH`, `±HHMM` or
// `±HH:MM`, at most 18 hours (Java's `ZoneOffset` range).
//
// chrono is more lenient than that in a few places, which are refused before
// or after it runs: it skips whitespace before every number and offset, reads
// 1-3 digit years, drops fraction digits past the ninth, takes second 60 as a
// leap second, and allows repeated colons or a Unicode minus in offsets.

/// `YYYY-MM-DD`.
const DATE_ITEMS: &[Item<'static>] = &[
    Item::Numeric(Numeric::Year, Pad::Zero),
    Item::Literal("-"),
    Item::Numeric(Numeric::Month, Pad::Zero),
    Item::Literal("-"),
    Item::Numeric(Numeric::Day, Pad::Zero),
];

/// `HH:MM:SS[.fffffffff]`.
const TIME_ITEMS: &[Item<'static>] = &[
    Item::Numeric(Numeric::Hour, Pad::Zero),
    Item::Literal(":"),
    Item::Numeric(Numeric::Minute, Pad::Zero),
    Item::Literal(":"),
    Item::Numeric(Numeric::Second, Pad::Zero),
    Item::Fixed(Fixed::Nanosecond),
];

/// `Z`, `±HH`, `±HHMM` or `±HH:MM` (chrono's permissive offset, `%#z`).
const ZONE_FORMAT: &str = "%#z";

/// The largest zone offset Java (and so Delta Spark) accepts: ±18:00.
const MAX_OFFSET_SECONDS: i32 = 18 * 3600;

/// Digits of a fraction of a second chrono reads without dropping any.
const MAX_FRACTION_DIGITS: usize = 9;

const NANOS_PER_MICRO: u32 = 1_000;
const NANOS_PER_SECOND: u32 = 1_000_000_000;
const MICROS_PER_SECOND: i64 = 1_000_000;

/// ASCII without whitespace (chrono would skip whitespace before numbers).
fn plain(s: &str) -> bool {
    s.is_ascii() && !s.bytes().any(|b| b.is_ascii_whitespace())
}

/// Four year digits, or a sign and four to six.
fn year_width_ok(s: &str) -> bool {
    let signed = s.starts_with(['+', '-']);
    let digits = s
        .bytes()
        .skip(usize::from(signed))
        .take_while(u8::is_ascii_digit)
        .count();
    if signed {
        (4..=6).contains(&digits)
    } else {
        digits == 4
    }
}

/// A date (`YYYY-MM-DD`) into `parsed`.
fn parse_date_into(parsed: &mut Parsed, s: &str) -> Option<()> {
    (plain(s) && year_width_ok(s)).then_some(())?;
    format::parse(parsed, s, DATE_ITEMS.iter()).ok()
}

/// `YYYY-MM-DD` as a date.
pub(crate) fn parse_date(s: &str) -> Option<NaiveDate> {
    let mut parsed = Parsed::new();
    parse_date_into(&mut parsed, s)?;
    parsed.to_naive_date().ok()
}

pub(crate) fn epoch_days(date: NaiveDate) -> Option<i64> {
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?;
    Some(date.signed_duration_since(epoch).num_days())
}

/// A zone suffix (`Z`, `±HH`, `±HHMM`, `±HH:MM`) as seconds east of UTC.
fn parse_zone_seconds(zone: &str) -> Option<i32> {
    let well_formed =
        plain(zone) && zone.bytes().filter(|b| *b == b':').count() <= 1 && !zone.ends_with(':');
    if !well_formed {
        return None;
    }
    let mut parsed = Parsed::new();
    format::parse(&mut parsed, zone, StrftimeItems::new(ZONE_FORMAT)).ok()?;
    parsed
        .offset()
        .filter(|o| o.unsigned_abs() <= MAX_OFFSET_SECONDS.unsigned_abs())
}

/// A partition timestamp as microseconds since the epoch (formats above).
/// With `zoned`, an optional zone suffix is applied and a value without one is
/// taken as UTC; without `zoned` (timestamp_ntz) a zone suffix is refused.
pub(crate) fn parse_timestamp_micros(s: &str, zoned: bool) -> Option<i64> {
    let sep = s.find([' ', 'T', 't'])?;
    let (date, rest) = s.split_at(sep);
    let rest = rest.get(1..)?;
    let fraction_digits = rest
        .split_once('.')
        .map_or(0, |(_, f)| f.bytes().take_while(u8::is_ascii_digit).count());
    if !plain(rest) || fraction_digits > MAX_FRACTION_DIGITS {
        return None;
    }
    let mut parsed = Parsed::new();
    parse_date_into(&mut parsed, date)?;
    let zone = format::parse_and_remainder(&mut parsed, rest, TIME_ITEMS.iter()).ok()?;
    let offset = match zone {
        "" => 0,
        zone if zoned => parse_zone_seconds(zone)?,
        _ => return None,
    };
    let time = parsed.to_naive_time().ok()?;
    let nanos = time.nanosecond();
    // A leap second (nanos past one second), or precision below the microsecond.
    if nanos >= NANOS_PER_SECOND || nanos % NANOS_PER_MICRO != 0 {
        return None;
    }
    let local = NaiveDateTime::new(parsed.to_naive_date().ok()?, time);
    local
        .and_utc()
        .timestamp_micros()
        .checked_sub(i64::from(offset).checked_mul(MICROS_PER_SECOND)?)
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
            assert_eq!(parse_zone_seconds(zone), None, "{zone:?}");
            let ts = format!("2024-02-02 03:04:05{zone}");
            assert_eq!(parse_timestamp_micros(&ts, true), None, "{ts:?}");
        }
        assert_eq!(parse_zone_seconds("+0130"), Some(5400));
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

    /// Delta's date formats (PROTOCOL.md, "Partition Value Serialization"),
    /// and what chrono alone would take but Delta's format does not.
    #[test]
    fn date_formats() {
        let days = |s: &str| parse_date(s).and_then(epoch_days);
        assert_eq!(days("2024-01-05"), Some(19727));
        assert_eq!(days("2024-1-5"), Some(19727), "one-digit month and day");
        // Years outside 0000-9999 as Java prints them: a sign and more digits.
        assert_eq!(days("+10000-01-01"), Some(2_932_897));
        assert_eq!(days("-0001-01-01"), Some(-719_893));
        for bad in [
            "24-01-05",       // chrono alone reads a 2-digit year
            "024-01-05",      // and a 3-digit one
            "12345-01-05",    // unsigned 5 digits: Java writes "+12345"
            "+1234567-01-01", // past chrono's and Java's year range
            " 2024-01-05",    // chrono skips whitespace before numbers
            "2024- 1-05",
            "2024-01-05 ",
            "2024-01-05\t",
            "2024-01-05T00:00:00",
            "2024-01-32",
            "2024-00-05",
            "\u{ff12}024-01-05", // a full-width digit
            "",
        ] {
            assert_eq!(parse_date(bad), None, "{bad:?}");
        }
    }

    /// Delta's timestamp formats: Spark's `yyyy-MM-dd HH:mm:ss[.SSSSSS]` and
    /// ISO 8601 adjusted to UTC (`...T...Z`), plus offsets.
    #[test]
    fn timestamp_formats() {
        const LEAP_DAY_NOON: i64 = 1_709_208_000_000_000; // 2024-02-29 12:00:00 UTC
        let zoned = |s: &str| parse_timestamp_micros(s, true);
        let ntz = |s: &str| parse_timestamp_micros(s, false);
        for (text, micros) in [
            ("2024-02-29 12:00:00", LEAP_DAY_NOON),
            ("2024-02-29T12:00:00", LEAP_DAY_NOON),
            ("2024-02-29t12:00:00", LEAP_DAY_NOON),
            ("2024-02-29T12:00:00Z", LEAP_DAY_NOON),
            ("2024-02-29T12:00:00z", LEAP_DAY_NOON),
            ("2024-02-29 12:00:00.123", LEAP_DAY_NOON + 123_000),
            ("2024-02-29T12:00:00.123000Z", LEAP_DAY_NOON + 123_000),
            ("2024-02-29T12:00:00.123000000Z", LEAP_DAY_NOON + 123_000),
            ("2024-02-29 2:0:0", LEAP_DAY_NOON - 10 * 3_600_000_000),
            ("2024-02-29T13:00:00+01:00", LEAP_DAY_NOON),
            ("2024-02-29T13:00:00+01", LEAP_DAY_NOON),
            ("2024-02-29T17:30:00+0530", LEAP_DAY_NOON),
            ("2024-02-29T06:30:00-05:30", LEAP_DAY_NOON),
            ("2024-03-01T06:00:00+18:00", LEAP_DAY_NOON),
            ("2024-02-28T18:00:00-18:00", LEAP_DAY_NOON),
            ("+10000-01-01 00:00:00", 253_402_300_800_000_000),
        ] {
            assert_eq!(zoned(text), Some(micros), "{text:?}");
        }
        assert_eq!(ntz("2024-02-29T12:00:00.5"), Some(LEAP_DAY_NOON + 500_000));
        assert_eq!(ntz("2024-02-29 12:00:00"), Some(LEAP_DAY_NOON));
        for bad in [
            "2024-02-29T12:00:00+18:01", // past Java's ZoneOffset range
            "2024-02-29T12:00:00+19:00",
            "2024-02-29T23:59:60Z", // chrono alone reads a leap second
            "2024-02-29T12:00:00.1234560001Z", // chrono alone drops the tenth digit
            "2024-02-29T12:00:00.123456789Z", // below the microsecond
            "2024-02-29T12:00:00 +01:00", // chrono alone skips the space
            "2024-02-29  12:00:00",
            "2024-02-29 12: 00:00",
            "2024-02-29T12:00:00+01::00", // chrono alone takes repeated colons
            "2024-02-29T12:00:00+01:",
            "2024-02-29T12:00:00\u{2212}01:00", // a Unicode minus
            "2024-02-29T12:00:00+1",
            "2024-02-29T12:00:00UTC",
            "2024-02-29T12:00",
            "2024-02-29X12:00:00",
            "2024-02-30T12:00:00",
            "24-02-29T12:00:00",
        ] {
            assert_eq!(zoned(bad), None, "{bad:?}");
        }
        for zoned_only in ["2024-02-29T12:00:00Z", "2024-02-29 12:00:00+00:00"] {
            assert_eq!(ntz(zoned_only), None, "{zoned_only:?}");
        }
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
