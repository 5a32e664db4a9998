//! Pruning: could any row of a set (a partition, a data file, a row group)
//! satisfy a [`Predicate`]? Given what is known about each column — exact
//! partition values, `add.stats` ([`PruningStats`]), parquet statistics (read by
//! `scan::pruning`) — [`Predicate::may_match`] answers `false` only as a
//! proof that no row does; anything unknown answers `true`. Pruning never
//! drops a matching row, so Spark may still apply the full filter afterwards.

use std::cmp::Ordering;
use std::collections::HashMap;

use serde_json::Value;

use super::bind::{convert, BoundColumn, Node, Predicate, Val};
use super::{Literal, Op};
use crate::log::schema::{
    epoch_days, parse_date, parse_decimal_value, parse_timestamp_micros, DataType,
};

/// What is known about one column over a set of rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ColumnStats {
    /// A lower bound of the non-null values (None: unknown).
    pub min: Option<Val>,
    /// An upper bound of the non-null values (None: unknown).
    pub max: Option<Val>,
    /// Known: every row is null.
    pub all_null: bool,
    /// Known: no row is null.
    pub none_null: bool,
}

impl ColumnStats {
    /// Exactly one value for every row (a partition value).
    pub fn exact(value: Option<Val>) -> Self {
        match value {
            None => ColumnStats {
                all_null: true,
                ..Default::default()
            },
            Some(v) => ColumnStats {
                min: Some(v.clone()),
                max: Some(v),
                all_null: false,
                none_null: true,
            },
        }
    }
}

impl Predicate {
    /// Whether it refers only to partition columns.
    pub fn partition_only(&self) -> bool {
        fn known(n: &Node) -> bool {
            match n {
                Node::And(p) | Node::Or(p) => p.iter().all(known),
                Node::Not(i) => known(i),
                Node::Unknown | Node::Eval(_) => false,
                _ => true,
            }
        }
        known(&self.root) && self.columns.iter().all(|c| c.partition)
    }

    /// Could any row described by `stats` (column index → what is known;
    /// `None` = nothing known) satisfy the predicate? `false` is a proof that
    /// none does.
    pub fn may_match(&self, stats: &dyn Fn(usize) -> Option<ColumnStats>) -> bool {
        may_match(&self.root, false, &self.columns, stats)
    }

    /// Could any row described by `stats` fail the predicate (be FALSE or
    /// NULL)? `false` is a proof that every row matches.
    pub fn may_fail(&self, stats: &dyn Fn(usize) -> Option<ColumnStats>) -> bool {
        // A row fails when NOT(p) is true or p is NULL; NULL needs a column
        // that may be null, which exact partition values rule in or out.
        may_match(&self.root, true, &self.columns, stats) || self.may_be_null(stats)
    }

    fn may_be_null(&self, stats: &dyn Fn(usize) -> Option<ColumnStats>) -> bool {
        (0..self.columns.len()).any(|i| stats(i).is_none_or(|s| !s.none_null))
    }

    /// Whether every row of a file with these partition values matches (only
    /// decidable for partition-only predicates).
    pub fn matches_whole_partition(&self, values: &HashMap<String, Option<String>>) -> bool {
        if !self.partition_only() {
            return false;
        }
        let stats = |i: usize| {
            let c = self.columns.get(i)?;
            let key = c.physical.first()?;
            let raw = values.get(key).cloned().flatten().filter(|s| !s.is_empty());
            match raw {
                None => Some(ColumnStats::exact(None)),
                Some(s) => convert(&Literal::Str(s), c, &super::TimeZone::utc())
                    .ok()
                    .flatten()
                    .map(|v| ColumnStats::exact(Some(v))),
            }
        };
        // Floats: NaN handling makes bounds one-sided; decide by rows instead.
        let float = self
            .columns
            .iter()
            .any(|c| matches!(c.data_type, DataType::Float | DataType::Double));
        !float && !self.may_fail(&stats)
    }

    /// Pruning of one data file from its `partitionValues` (keyed by physical
    /// name; a missing key or empty string is null) and, when given, its
    /// `add.stats`.
    pub fn may_match_file(
        &self,
        values: &HashMap<String, Option<String>>,
        stats: Option<&PruningStats>,
    ) -> bool {
        self.may_match(&|i| {
            let c = self.columns.get(i)?;
            if !c.partition {
                return stats.and_then(|s| s.column(c));
            }
            let key = c.physical.first()?;
            let raw = values.get(key).cloned().flatten().filter(|s| !s.is_empty());
            match raw {
                None => Some(ColumnStats::exact(None)),
                Some(s) => {
                    let v = convert(&Literal::Str(s), c, &super::TimeZone::utc())
                        .ok()
                        .flatten()?;
                    Some(ColumnStats::exact(Some(v)))
                }
            }
        })
    }
}

fn leaf_cmp(op: Op, value: &Val, s: &ColumnStats, float: bool) -> bool {
    use Ordering::*;
    let (min, max) = (s.min.as_ref(), s.max.as_ref());
    // NaN sorts above every number in Spark and may be missing from float
    // stats: a max never rules out >, >= or != there.
    let max = if float && matches!(op, Op::Gt | Op::Ge | Op::Ne) {
        None
    } else {
        max
    };
    let c = |b: Option<&Val>| b.and_then(|b| b.compare(value));
    match op {
        Op::Eq | Op::NullSafeEq => {
            !(matches!(c(min), Some(Greater)) || matches!(c(max), Some(Less)))
        }
        Op::Ne => !(matches!(c(min), Some(Equal)) && matches!(c(max), Some(Equal))),
        Op::Lt => !matches!(c(min), Some(Greater | Equal)),
        Op::Le => !matches!(c(min), Some(Greater)),
        Op::Gt => !matches!(c(max), Some(Less | Equal)),
        Op::Ge => !matches!(c(max), Some(Less)),
    }
}

fn may_match(
    n: &Node,
    negated: bool,
    columns: &[BoundColumn],
    stats: &dyn Fn(usize) -> Option<ColumnStats>,
) -> bool {
    let is_float = |col: usize| {
        columns
            .get(col)
            .is_some_and(|c| matches!(c.data_type, DataType::Float | DataType::Double))
    };
    match n {
        Node::Unknown | Node::Eval(_) => true,
        Node::And(parts) if !negated => parts.iter().all(|p| may_match(p, false, columns, stats)),
        Node::And(parts) => parts.iter().any(|p| may_match(p, true, columns, stats)),
        Node::Or(parts) if !negated => parts.iter().any(|p| may_match(p, false, columns, stats)),
        Node::Or(parts) => parts.iter().all(|p| may_match(p, true, columns, stats)),
        Node::Not(inner) => may_match(inner, !negated, columns, stats),
        Node::IsNull { col } => {
            let Some(s) = stats(*col) else { return true };
            if negated {
                !s.all_null
            } else {
                !s.none_null
            }
        }
        Node::Cmp { col, op, value } => {
            let s = stats(*col);
            match (op, value) {
                // NULL <=> NULL is IS NULL; x <=> v is x = v, and its negation
                // is x IS NULL OR x != v.
                (Op::NullSafeEq, None) => {
                    may_match(&Node::IsNull { col: *col }, negated, columns, stats)
                }
                (_, None) => false, // a comparison with NULL is never true
                (Op::NullSafeEq, Some(v)) if negated => {
                    let Some(s) = s else { return true };
                    !s.none_null || (!s.all_null && leaf_cmp(Op::Ne, v, &s, is_float(*col)))
                }
                (op, Some(v)) => {
                    let Some(s) = s else { return true };
                    if s.all_null {
                        return false;
                    }
                    let op = if negated { op.negated() } else { *op };
                    leaf_cmp(op, v, &s, is_float(*col))
                }
            }
        }
        Node::In {
            col,
            values,
            has_null,
        } => {
            let Some(s) = stats(*col) else { return true };
            if s.all_null {
                return false;
            }
            if negated {
                // x NOT IN (…, NULL) is never true.
                if *has_null {
                    return false;
                }
                values
                    .iter()
                    .all(|v| leaf_cmp(Op::Ne, v, &s, is_float(*col)))
            } else {
                values
                    .iter()
                    .any(|v| leaf_cmp(Op::Eq, v, &s, is_float(*col)))
            }
        }
    }
}

/// Delta truncates timestamp stats to milliseconds.
const TIMESTAMP_STATS_SLACK_MICROS: i128 = 1_000;
/// Delta Spark truncates string stats to this many characters.
const STRING_STATS_PREFIX: usize = 32;

fn nested<'a>(v: Option<&'a Value>, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v?, |v, p| v.get(p))
}

/// A stats JSON value as a bound (lower bound when `upper` is false).
fn json_bound(v: &Value, c: &BoundColumn, upper: bool) -> Option<Val> {
    let widen = |x: i128, by: i128| if upper { x + by } else { x - by };
    Some(match &c.data_type {
        DataType::Byte | DataType::Short | DataType::Integer | DataType::Long => {
            Val::Int(i128::from(v.as_i64()?))
        }
        DataType::Float | DataType::Double => Val::Float(v.as_f64()?),
        DataType::Decimal { precision, scale } => {
            if let Some(i) = v.as_i64() {
                let s = i.to_string();
                Val::Int(parse_decimal_value(&s, 38, *scale).or_else(|| {
                    // out of range at this scale: no bound
                    let _ = precision;
                    None
                })?)
            } else {
                // A JSON float: exact only within f64's integer range; widen
                // by one unit for the rounding of the text into f64.
                let f = v.as_f64()?;
                let scaled = f * 10f64.powi(i32::from(*scale));
                if !scaled.is_finite() || scaled.abs() > 9.0e15 {
                    return None;
                }
                Val::Int(widen(scaled.round() as i128, 1))
            }
        }
        DataType::String => {
            let s = v.as_str()?;
            if upper && s.chars().count() >= STRING_STATS_PREFIX {
                return None; // possibly a truncated prefix: not an upper bound
            }
            Val::Str(s.to_string())
        }
        DataType::Boolean => Val::Bool(v.as_bool()?),
        DataType::Date => Val::Int(i128::from(parse_date(v.as_str()?).and_then(epoch_days)?)),
        DataType::Timestamp | DataType::TimestampNtz => {
            let zoned = c.data_type == DataType::Timestamp;
            let micros = parse_timestamp_micros(v.as_str()?, zoned)?;
            Val::Int(widen(i128::from(micros), TIMESTAMP_STATS_SLACK_MICROS))
        }
        _ => return None,
    })
}

/// What a file's `add.stats` (as read from the log) says, for
/// [`Predicate::may_match`]: the pruning view of stats. The stats a writer
/// collects for a new file are [`crate::write::data::stats::WrittenFileStats`].
pub struct PruningStats {
    value: Option<Value>,
    num_records: Option<i64>,
}

impl PruningStats {
    /// Parse `add.stats` (unparseable or absent stats: nothing known).
    pub fn parse(stats: Option<&str>) -> PruningStats {
        let value: Option<Value> = stats.and_then(|s| serde_json::from_str(s).ok());
        let num_records = value
            .as_ref()
            .and_then(|v| v.get("numRecords"))
            .and_then(Value::as_i64);
        PruningStats { value, num_records }
    }

    /// `numRecords` (physical rows).
    pub fn num_records(&self) -> Option<i64> {
        self.num_records
    }

    /// What the stats say about `c`. Min/max are bounds whether or not
    /// `tightBounds` is set; nullCount is used only when it is 0 or equals
    /// numRecords, which stay true when a DV deletes rows.
    pub fn column(&self, c: &BoundColumn) -> Option<ColumnStats> {
        let v = self.value.as_ref()?;
        let bounds = |key: &str, upper: bool| {
            nested(v.get(key), &c.physical)
                .filter(|_| c.bounds_comparable)
                .and_then(|x| json_bound(x, c, upper))
        };
        let min = bounds("minValues", false);
        let max = bounds("maxValues", true);
        let nulls = nested(v.get("nullCount"), &c.physical).and_then(Value::as_i64);
        let (all_null, none_null) = match (nulls, self.num_records) {
            (Some(n), Some(total)) => (n == total, n == 0),
            (Some(0), None) => (false, true),
            _ => (false, false),
        };
        Some(ColumnStats {
            min,
            max,
            all_null,
            none_null,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::bind::tests::{bind, schema};
    use crate::expr::{Binding, Expr, Filter};
    use crate::log::schema::{ColumnMappingMode, StructField, StructType};

    fn range(min: i128, max: i128) -> ColumnStats {
        ColumnStats {
            min: Some(Val::Int(min)),
            max: Some(Val::Int(max)),
            all_null: false,
            none_null: false,
        }
    }

    fn may(text: &str, id: ColumnStats) -> bool {
        bind(text).unwrap().may_match(&|_| Some(id.clone()))
    }

    #[test]
    fn each_operator_uses_bounds_soundly() {
        assert!(may("id = 5", range(1, 9)));
        assert!(may("id = 1", range(1, 9)));
        assert!(may("id = 9", range(1, 9)));
        assert!(!may("id = 10", range(1, 9)));
        assert!(!may("id = 0", range(1, 9)));
        assert!(!may("id > 9", range(1, 9)));
        assert!(may("id >= 9", range(1, 9)));
        assert!(!may("id >= 10", range(1, 9)));
        assert!(!may("id < 1", range(1, 9)));
        assert!(may("id <= 1", range(1, 9)));
        assert!(!may("id <= 0", range(1, 9)));
        assert!(!may("id != 4", range(4, 4)));
        assert!(may("id != 4", range(4, 5)));
        assert!(may("id <=> 4", range(1, 9)));
        assert!(!may("id <=> 10", range(1, 9)));
        assert!(!may("10 < id", range(1, 9)));
        assert!(may("9 <= id", range(1, 9)));
        assert!(!may("NOT id <= 9", range(1, 9)));
        assert!(may("NOT id < 9", range(1, 9)));
        assert!(!may("id IN (0, 10)", range(1, 9)));
        assert!(may("id IN (0, 5)", range(1, 9)));
        assert!(!may("id NOT IN (4, NULL)", range(1, 9)));
        assert!(!may("id NOT IN (4)", range(4, 4)));
        assert!(may("id NOT IN (4)", range(4, 5)));
        assert!(!may("id = NULL", range(1, 9)));
        assert!(!may("NOT id = NULL", range(1, 9)));
        assert!(may("id = 5 OR id = 100", range(1, 9)));
        assert!(!may("id = 50 OR id = 100", range(1, 9)));
        assert!(!may("id = 5 AND id = 100", range(1, 9)));
        assert!(!may("NOT (id > 0 AND id < 10)", range(1, 9)));
        assert!(may("NOT (id > 1 AND id < 10)", range(1, 9)));
        // each leaf is judged alone: id != 1 and id < 2 both may hold somewhere
        assert!(may("NOT (id = 1 OR id >= 2)", range(1, 9)));
        assert!(!may("NOT (id >= 1 OR id = 2)", range(1, 9)));
        assert!(may("id BETWEEN 9 AND 20", range(1, 9)));
        assert!(!may("id BETWEEN 10 AND 20", range(1, 9)));
        assert!(!may("id NOT BETWEEN 0 AND 20", range(1, 9)));
        // unknown stats never prune
        assert!(bind("id = 10").unwrap().may_match(&|_| None));
        assert!(may("id = 10", ColumnStats::default()));
        // strings compare by bytes
        let s = |min: &str, max: &str| ColumnStats {
            min: Some(Val::Str(min.into())),
            max: Some(Val::Str(max.into())),
            ..Default::default()
        };
        let p = bind("part >= 'b'").unwrap();
        assert!(!p.may_match(&|_| Some(s("a", "az"))));
        assert!(p.may_match(&|_| Some(s("a", "b"))));
        let p = bind("part = 'é'").unwrap();
        assert!(
            !p.may_match(&|_| Some(s("a", "z"))),
            "é sorts after z in UTF-8"
        );
    }

    #[test]
    fn nulls_in_stats() {
        let all_null = ColumnStats {
            all_null: true,
            ..Default::default()
        };
        let no_null = ColumnStats {
            none_null: true,
            ..range(1, 9)
        };
        assert!(!may("id = 5", all_null.clone()));
        assert!(!may("NOT id = 5", all_null.clone()));
        assert!(!may("id IN (5)", all_null.clone()));
        assert!(!may("id NOT IN (5)", all_null.clone()));
        assert!(!may("id IS NOT NULL", all_null.clone()));
        assert!(may("id IS NULL", all_null.clone()));
        assert!(may("id <=> NULL", all_null.clone()));
        assert!(may("NOT id <=> 5", all_null.clone()));
        assert!(!may("id IS NULL", no_null.clone()));
        assert!(may("id IS NULL", range(1, 9)));
        assert!(!may("id <=> NULL", no_null.clone()));
        assert!(may(
            "NOT id <=> 4",
            ColumnStats {
                none_null: false,
                ..range(4, 4)
            }
        ));
        assert!(!may(
            "NOT id <=> 4",
            ColumnStats {
                none_null: true,
                ..range(4, 4)
            }
        ));
        // may_fail: a NULL row fails every comparison
        let p = bind("id >= 1").unwrap();
        assert!(!p.may_fail(&|_| Some(no_null.clone())));
        assert!(p.may_fail(&|_| Some(range(1, 9))));
        assert!(p.may_fail(&|_| Some(ColumnStats {
            none_null: true,
            ..range(0, 9)
        })));
    }

    #[test]
    fn floats_never_prune_on_max_and_nan_never_prunes() {
        let s = ColumnStats {
            min: Some(Val::Float(1.0)),
            max: Some(Val::Float(2.0)),
            ..Default::default()
        };
        let m = |text: &str| bind(text).unwrap().may_match(&|_| Some(s.clone()));
        assert!(m("x > 5"), "NaN may be above max");
        assert!(m("x != 1.5"));
        assert!(!m("x < 0.5"));
        assert!(!m("x = 0.5"));
        assert!(!m("x = 3"), "NaN is not 3");
        for nan in [
            "x = CAST('NaN' AS DOUBLE)",
            "x >= CAST('NaN' AS DOUBLE)",
            "x < CAST('NaN' AS DOUBLE)",
            "NOT x = CAST('NaN' AS DOUBLE)",
            "x IN (CAST('NaN' AS DOUBLE))",
        ] {
            assert!(m(nan), "{nan}");
        }
        assert!(!m("x = CAST('inf' AS DOUBLE)"));
        assert!(!m("x < CAST('-inf' AS DOUBLE)"));
        assert!(m("x < CAST('inf' AS DOUBLE)"));
    }

    #[test]
    fn partition_values_are_exact() {
        let p = bind("part = 'a' OR part IS NULL").unwrap();
        let pv = |v: Option<&str>| HashMap::from([("part".to_string(), v.map(String::from))]);
        assert!(p.may_match_file(&pv(Some("a")), None));
        assert!(p.may_match_file(&pv(None), None));
        assert!(p.may_match_file(&pv(Some("")), None));
        assert!(!p.may_match_file(&pv(Some("b")), None));
        assert!(bind("part = 'a'").unwrap().partition_only());
        assert!(!bind("part = 'a' AND id = 1").unwrap().partition_only());
        assert!(bind("part = 'a'")
            .unwrap()
            .matches_whole_partition(&pv(Some("a"))));
        assert!(!bind("part = 'a'")
            .unwrap()
            .matches_whole_partition(&pv(Some("b"))));
        assert!(!bind("part = 'a'")
            .unwrap()
            .matches_whole_partition(&pv(None)));
        assert!(!bind("part = 'a' AND id = 1")
            .unwrap()
            .matches_whole_partition(&pv(Some("a"))));
        let lenient = Predicate::bind(
            &Filter::Expr(Expr::from_json(r#"{"cmp": {"op": "=", "left": {"column": ["part"]}, "right": {"literal": {"number": "1"}}}}"#).unwrap()),
            &schema(),
            &["part".to_string()],
            ColumnMappingMode::None,
            Binding::Lenient,
        )
        .unwrap();
        assert!(
            !lenient.partition_only(),
            "an unknown leaf is not decided by partitions"
        );
    }

    #[test]
    fn file_stats_respect_wide_bounds() {
        let p = bind("id > 100").unwrap();
        let c = p.columns()[0].clone();
        let fs = PruningStats::parse(Some(
            r#"{"numRecords":10,"minValues":{"id":1},"maxValues":{"id":100},"nullCount":{"id":3},"tightBounds":false}"#,
        ));
        assert_eq!(fs.num_records(), Some(10));
        let s = fs.column(&c).unwrap();
        assert!(!s.all_null && !s.none_null);
        assert!(!p.may_match(&|_| fs.column(&c)));
        let fs = PruningStats::parse(Some(r#"{"numRecords":4,"nullCount":{"id":4}}"#));
        assert!(fs.column(&c).unwrap().all_null);
        assert!(PruningStats::parse(Some("not json")).column(&c).is_none());
        assert!(PruningStats::parse(None).column(&c).is_none());
        // strings of 32+ characters may be truncated prefixes: no upper bound
        let p = bind("part > 'zz'").unwrap();
        let c = p.columns()[0].clone();
        let long = "a".repeat(32);
        let fs = PruningStats::parse(Some(&format!(
            r#"{{"numRecords":1,"minValues":{{"part":"{long}"}},"maxValues":{{"part":"{long}"}}}}"#
        )));
        assert_eq!(fs.column(&c).unwrap().max, None);
        assert!(p.may_match(&|_| fs.column(&c)));
        // decimals given as JSON floats are widened by one unit
        let p = bind("amount > 1.23").unwrap();
        let c = p.columns()[0].clone();
        let fs = PruningStats::parse(Some(
            r#"{"numRecords":1,"minValues":{"amount":1.23},"maxValues":{"amount":1.23}}"#,
        ));
        assert!(p.may_match(&|_| fs.column(&c)));
        // timestamps are widened by the millisecond truncation
        let s = StructType::new(vec![StructField::new("t", DataType::Timestamp, true)]);
        let p = Predicate::new(
            "t > TIMESTAMP '2024-01-01 00:00:00.000500'",
            &s,
            &[],
            ColumnMappingMode::None,
            Binding::Strict,
        )
        .unwrap();
        let fs = PruningStats::parse(Some(
            r#"{"numRecords":1,"minValues":{"t":"2024-01-01T00:00:00.000Z"},"maxValues":{"t":"2024-01-01T00:00:00.000Z"},"nullCount":{"t":0}}"#,
        ));
        let c = p.columns()[0].clone();
        assert!(
            p.may_match(&|_| fs.column(&c)),
            "max may be 00:00:00.000999"
        );
    }
}
