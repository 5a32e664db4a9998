//! The session time zone expressions read instants in, as Spark's
//! `spark.sql.session.timeZone`: date parts (`YEAR(ts)`, `HOUR(ts)`),
//! `CAST(ts AS DATE|STRING|TIMESTAMP_NTZ)` of a TIMESTAMP, and the reverse
//! casts (a string or date without an offset to a TIMESTAMP, a TIMESTAMP
//! literal without one) are taken in it. TIMESTAMP values themselves are
//! instants (microseconds since the epoch, UTC) whatever the zone.
//!
//! | given | meaning |
//! |---|---|
//! | `UTC` (default) | Coordinated Universal Time |
//! | an IANA name (`America/Los_Angeles`) | that region's offsets, DST included |
//! | a fixed offset (`+05:30`, `-08:00`, `+0530`) | that offset all year |

use std::str::FromStr;
use std::sync::Arc;

use arrow_array::temporal_conversions::as_datetime_with_timezone;
use arrow_array::timezone::Tz;
use arrow_array::types::TimestampMicrosecondType;
use arrow_array::{Array, ArrayRef, StringArray, TimestampMicrosecondArray};
use arrow_schema::{DataType as ArrowType, TimeUnit};
use chrono::{LocalResult, Offset, TimeZone as _};

use crate::error::{Error, Result};
use crate::log::schema::{epoch_days, parse_date, parse_timestamp_micros};

/// A validated time zone (see the module doc for the names it takes).
#[derive(Debug, Clone)]
pub struct TimeZone {
    name: Arc<str>,
    /// None: UTC.
    tz: Option<Tz>,
}

impl PartialEq for TimeZone {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for TimeZone {}

impl Default for TimeZone {
    fn default() -> Self {
        TimeZone::utc()
    }
}

impl std::fmt::Display for TimeZone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

impl TimeZone {
    /// UTC.
    pub fn utc() -> TimeZone {
        TimeZone {
            name: "UTC".into(),
            tz: None,
        }
    }

    /// The zone `name` names: an IANA name or a fixed offset; an unknown
    /// name is an [`Error::InvalidArgument`].
    pub fn parse(name: &str) -> Result<TimeZone> {
        let trimmed = name.trim();
        let tz = Tz::from_str(trimmed).map_err(|e| {
            Error::InvalidArgument(format!(
                "unknown time zone {name:?}: expected an IANA name (\"America/Los_Angeles\") \
                 or an offset (\"+05:30\") ({e})"
            ))
        })?;
        Ok(TimeZone {
            name: trimmed.into(),
            tz: Some(tz),
        })
    }

    /// The name as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Instants of `array` (a TIMESTAMP with a zone) tagged with this zone,
    /// so arrow's kernels read their local time in it; other arrays as
    /// they are.
    pub(crate) fn tag(&self, array: ArrayRef) -> ArrayRef {
        match array.data_type() {
            ArrowType::Timestamp(TimeUnit::Microsecond, Some(_)) => {
                match array.as_any().downcast_ref::<TimestampMicrosecondArray>() {
                    Some(ts) => Arc::new(ts.clone().with_timezone(self.name.clone())),
                    None => array,
                }
            }
            _ => array,
        }
    }

    /// Microseconds since the epoch (UTC) of a wall clock reading `local`
    /// (microseconds since 1970-01-01 00:00 local time) in this zone, as
    /// Java's `LocalDateTime.atZone` (Spark) resolves it: a reading that
    /// occurs twice (clocks going back) is the earlier instant; one that
    /// never occurs (clocks going forward) is shifted forward by the gap.
    pub(crate) fn local_to_utc(&self, local: i64) -> Result<i64> {
        let Some(tz) = self.tz else {
            return Ok(local);
        };
        let none =
            || Error::InvalidArgument(format!("local time {local} has no instant in {self}"));
        let naive = chrono::DateTime::from_timestamp_micros(local)
            .ok_or_else(none)?
            .naive_utc();
        let offset = match tz.offset_from_local_datetime(&naive) {
            LocalResult::Single(o) => o.fix(),
            LocalResult::Ambiguous(earlier, _) => earlier.fix(),
            // In a gap: the offset before it (no gap is longer than a day),
            // which moves the reading forward by the gap's length.
            LocalResult::None => tz
                .offset_from_local_datetime(&(naive - chrono::TimeDelta::hours(24)))
                .earliest()
                .ok_or_else(none)?
                .fix(),
        };
        let shift = i64::from(offset.local_minus_utc()) * 1_000_000;
        local.checked_sub(shift).ok_or_else(none)
    }

    /// [`TimeZone::local_to_utc`] of every value of a `TIMESTAMP_NTZ` (wall
    /// clock) array: the instants, as a TIMESTAMP in UTC.
    pub(crate) fn instants_of_local(&self, array: &dyn Array) -> Result<ArrayRef> {
        let local =
            super::value::ansi_cast(array, &ArrowType::Timestamp(TimeUnit::Microsecond, None))?;
        let local = local
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .ok_or_else(|| Error::Internal("local times not in microseconds".into()))?;
        let values: Vec<Option<i64>> = local
            .iter()
            .map(|v| v.map(|v| self.local_to_utc(v)).transpose())
            .collect::<Result<_>>()?;
        Ok(Arc::new(
            TimestampMicrosecondArray::from(values).with_timezone("UTC"),
        ))
    }

    /// Strings cast to TIMESTAMP as Spark casts them in this session zone:
    /// with an offset as they say, without one a wall clock reading here
    /// (a date alone: its midnight); one that is no timestamp is an error.
    pub(crate) fn instants_of_text(&self, array: &dyn Array) -> Result<ArrayRef> {
        let text = super::value::ansi_cast(array, &ArrowType::Utf8)?;
        let text = text
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| Error::Internal("text not a string array".into()))?;
        let values: Vec<Option<i64>> = text
            .iter()
            .map(|v| {
                v.map(|s| {
                    self.instant_of(s.trim()).ok_or_else(|| {
                        Error::InvalidArgument(format!(
                            "[CAST_INVALID_INPUT] the value '{s}' of the type STRING cannot be \
                             cast to TIMESTAMP"
                        ))
                    })
                })
                .transpose()
            })
            .collect::<Result<_>>()?;
        Ok(Arc::new(
            TimestampMicrosecondArray::from(values).with_timezone("UTC"),
        ))
    }

    /// The wall clock reading (microseconds since 1970-01-01 00:00 local
    /// time) in this zone of the instant `utc`.
    pub(crate) fn utc_to_local(&self, utc: i64) -> Option<i64> {
        let Some(tz) = self.tz else {
            return Some(utc);
        };
        let at = as_datetime_with_timezone::<TimestampMicrosecondType>(utc, tz)?;
        let offset = i64::from(at.offset().fix().local_minus_utc());
        utc.checked_add(offset.checked_mul(1_000_000)?)
    }

    /// Instants (a TIMESTAMP array) as wall clock readings here, as
    /// `TIMESTAMP_NTZ` (Spark's `CAST(ts AS TIMESTAMP_NTZ)`), or as Spark's
    /// `CAST(ts AS STRING)` text (`yyyy-MM-dd HH:mm:ss[.f]`, no trailing
    /// zeros) when `text`.
    pub(crate) fn local_times(&self, array: &dyn Array, text: bool) -> Result<ArrayRef> {
        let instants = super::value::ansi_cast(
            array,
            &ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        )?;
        let instants = instants
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .ok_or_else(|| Error::Internal("instants not in microseconds".into()))?;
        let local = |v: i64| {
            self.utc_to_local(v).ok_or_else(|| {
                Error::InvalidArgument(format!("instant {v} has no local time in {self}"))
            })
        };
        if !text {
            let values: Vec<Option<i64>> = instants
                .iter()
                .map(|v| v.map(local).transpose())
                .collect::<Result<_>>()?;
            return Ok(Arc::new(TimestampMicrosecondArray::from(values)));
        }
        let values: Vec<Option<String>> = instants
            .iter()
            .map(|v| {
                v.map(|v| {
                    let micros = local(v)?;
                    wall_text(micros).ok_or_else(|| {
                        Error::InvalidArgument(format!("local time {micros} out of range"))
                    })
                })
                .transpose()
            })
            .collect::<Result<_>>()?;
        Ok(Arc::new(StringArray::from(values)))
    }

    /// The instant of a TIMESTAMP literal's text: with an offset as it says,
    /// without one a wall clock reading in this zone.
    pub(crate) fn timestamp_instant(&self, text: &str) -> Option<i64> {
        match parse_timestamp_micros(text, false) {
            Some(local) => self.local_to_utc(local).ok(),
            None => parse_timestamp_micros(text, true),
        }
    }

    /// The instant of a string compared with a TIMESTAMP: a timestamp as
    /// [`TimeZone::timestamp_instant`], or a date (its midnight here).
    pub(crate) fn instant_of(&self, text: &str) -> Option<i64> {
        self.timestamp_instant(text).or_else(|| {
            let days = epoch_days(parse_date(text)?)?;
            self.local_to_utc(days.checked_mul(MICROS_PER_DAY)?).ok()
        })
    }
}

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// `yyyy-MM-dd HH:mm:ss[.f]` of a wall clock reading, the fraction without
/// trailing zeros (Spark's timestamp-to-string cast).
fn wall_text(micros: i64) -> Option<String> {
    let dt = chrono::DateTime::from_timestamp_micros(micros)?.naive_utc();
    let base = dt.format("%Y-%m-%d %H:%M:%S").to_string();
    let fraction = micros.rem_euclid(1_000_000);
    if fraction == 0 {
        return Some(base);
    }
    let digits = format!("{fraction:06}");
    Some(format!("{base}.{}", digits.trim_end_matches('0')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_offsets_parse_unknown_names_do_not() {
        for ok in [
            "UTC",
            "America/Los_Angeles",
            "+05:30",
            "-08:00",
            "Asia/Kolkata",
        ] {
            assert_eq!(TimeZone::parse(ok).unwrap().name(), ok);
        }
        let e = TimeZone::parse("Mars/Olympus").unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(
            e.to_string().contains("unknown time zone \"Mars/Olympus\""),
            "{e}"
        );
        assert_eq!(TimeZone::default(), TimeZone::utc());
    }

    #[test]
    fn readings_twice_or_never_are_resolved_as_java_does() {
        let la = TimeZone::parse("America/Los_Angeles").unwrap();
        let hour = 3_600_000_000i64;
        // 2024-11-03 01:30 happens twice in Los Angeles: the earlier (PDT, -07:00).
        let twice = 1_730_597_400_000_000; // 2024-11-03T01:30:00 as if UTC
        assert_eq!(la.local_to_utc(twice).unwrap(), twice + 7 * hour);
        // 2024-03-10 02:30 never happens: shifted forward an hour, 03:30 PDT.
        let never = 1_710_037_800_000_000; // 2024-03-10T02:30:00 as if UTC
        assert_eq!(la.local_to_utc(never).unwrap(), never + 8 * hour);
        assert_eq!(la.utc_to_local(never + 8 * hour), Some(never + hour));
    }

    #[test]
    fn local_times_become_instants() {
        let la = TimeZone::parse("America/Los_Angeles").unwrap();
        // 2024-12-31 19:00 in Los Angeles (PST, -08:00) is 2025-01-01 03:00 UTC.
        let local = 1_735_671_600_000_000; // 2024-12-31T19:00:00 as if UTC
        assert_eq!(la.local_to_utc(local).unwrap(), local + 8 * 3_600_000_000);
        let india = TimeZone::parse("+05:30").unwrap();
        assert_eq!(
            india.local_to_utc(0).unwrap(),
            -(5 * 3600 + 1800) * 1_000_000
        );
    }
}
