//! Duration table properties (`delta.deletedFileRetentionDuration`,
//! `delta.logRetentionDuration`, ...), written as Spark calendar intervals:
//! `interval 1 week`, `interval 7 days`, `interval 2 days 12 hours`, or the
//! same without the `interval` keyword. Months and years are refused, as Delta
//! refuses them for these properties (their length in time is not fixed).
//!
//! Only the syntax lives here; the keys, their defaults and the typed
//! accessors are in [`crate::log::features::properties`].

use crate::error::{Error, Result};

const MS_PER_SECOND: i64 = 1_000;
const MS_PER_MINUTE: i64 = 60 * MS_PER_SECOND;
const MS_PER_HOUR: i64 = 60 * MS_PER_MINUTE;
const MS_PER_DAY: i64 = 24 * MS_PER_HOUR;
const MS_PER_WEEK: i64 = 7 * MS_PER_DAY;

/// Milliseconds per unit; microseconds are `None` (handled apart).
fn unit_ms(unit: &str) -> Option<Option<i64>> {
    let unit = unit.to_ascii_lowercase();
    let singular = unit.strip_suffix('s').unwrap_or(&unit);
    Some(match singular {
        "week" => Some(MS_PER_WEEK),
        "day" => Some(MS_PER_DAY),
        "hour" => Some(MS_PER_HOUR),
        "minute" => Some(MS_PER_MINUTE),
        "second" => Some(MS_PER_SECOND),
        "millisecond" => Some(1),
        "microsecond" => None,
        _ => return None,
    })
}

/// An interval property's value as milliseconds (microseconds truncated).
/// `key` names the property in errors.
pub fn parse_interval_ms(text: &str, key: &str) -> Result<i64> {
    let bad = |why: &str| {
        Error::InvalidArgument(format!(
            "table property {key} = {text:?} is not a valid interval ({why}); \
             expected e.g. \"interval 1 week\""
        ))
    };
    let mut words = text.split_whitespace().peekable();
    if words
        .peek()
        .is_some_and(|w| w.eq_ignore_ascii_case("interval"))
    {
        words.next();
    }
    let mut total_micros: i128 = 0;
    let mut any = false;
    while let Some(number) = words.next() {
        let n: i64 = number
            .parse()
            .map_err(|_| bad(&format!("{number:?} is not a whole number")))?;
        let unit = words
            .next()
            .ok_or_else(|| bad(&format!("no unit after {n}")))?;
        let micros = match unit_ms(unit) {
            Some(Some(ms)) => i128::from(n) * i128::from(ms) * 1_000,
            Some(None) => i128::from(n),
            None => return Err(bad(&format!("unknown or unsupported unit {unit:?}"))),
        };
        total_micros += micros;
        any = true;
    }
    if !any {
        return Err(bad("no amount"));
    }
    i64::try_from(total_micros / 1_000).map_err(|_| bad("out of range"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::log::features::properties::DELETED_FILE_RETENTION_DURATION;

    #[test]
    fn intervals_as_delta_writes_them() {
        let ms = |t: &str| parse_interval_ms(t, "k").unwrap();
        assert_eq!(ms("interval 1 week"), 604_800_000);
        assert_eq!(ms("interval 7 days"), 604_800_000);
        assert_eq!(ms("INTERVAL 168 HOURS"), 604_800_000);
        assert_eq!(ms("1 hour"), 3_600_000);
        assert_eq!(ms("interval 2 days 12 hours"), 216_000_000);
        assert_eq!(ms("interval 90 minutes 30 seconds"), 5_430_000);
        assert_eq!(ms("interval 1500 milliseconds"), 1_500);
        assert_eq!(ms("interval 2500 microseconds"), 2);
        assert_eq!(ms("interval 0 seconds"), 0);
    }

    #[test]
    fn bad_intervals_name_the_property_and_value() {
        for (text, why) in [
            ("interval 1 month", "unknown or unsupported unit \"month\""),
            ("interval 2 years", "unknown or unsupported unit \"years\""),
            ("interval one week", "\"one\" is not a whole number"),
            ("interval 3", "no unit after 3"),
            ("interval", "no amount"),
            ("", "no amount"),
            ("interval 1.5 days", "\"1.5\" is not a whole number"),
            ("interval 9223372036854775807 weeks", "out of range"),
        ] {
            let e = parse_interval_ms(text, DELETED_FILE_RETENTION_DURATION)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(DELETED_FILE_RETENTION_DURATION)
                    && e.contains(&format!("{text:?}"))
                    && e.contains(why),
                "{text:?}: {e}"
            );
        }
    }
}
