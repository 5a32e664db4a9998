//! Typed expressions over Arrow: any [`Expr`] (values and predicates) bound
//! to a table schema with Spark SQL's type rules, and evaluated per row with
//! arrow kernels. UPDATE's `SET` values and MERGE's values are
//! [`ValueExpr`]s; predicates outside the prunable subset (two columns,
//! arithmetic, `CASE`, …) are evaluated through the same tree.
//!
//! The rules (Spark 4's ANSI mode, where it matters):
//!
//! * integer literals are `INT` when they fit, else `BIGINT`, else a
//!   decimal; `1.5` is `DECIMAL(2,1)`; `1e3` is a double;
//! * `+ - *`: integers widen to the wider integer and fail on overflow;
//!   integers with decimals give decimals (Spark's precision and scale);
//!   anything with a float or double gives a double (two floats: a float);
//! * `/`: integers and floats give a double, decimals a decimal of scale
//!   `max(6, s1 + p2 + 1)`; a zero divisor fails (Spark's `DIVIDE_BY_ZERO`);
//! * comparisons widen numbers the same way; a string compared with another
//!   type is cast to it (failing on a value that does not convert); dates
//!   compared with timestamps are timestamps;
//! * `CASE` and `IN` widen their values to one type (strings win over other
//!   types, as Spark's `CASE` does);
//! * `CAST` fails on values that do not convert, `||` casts to strings.

use std::sync::Arc;

use arrow_array::{
    new_null_array, Array, ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array,
    Float64Array, Int32Array, Int64Array, NullArray, RecordBatch, StringArray,
    TimestampMicrosecondArray, UInt32Array,
};
use arrow_cast::cast::{cast_with_options, CastOptions};
use arrow_schema::{DataType as ArrowType, TimeUnit};

use super::bind::{Binder, BoundColumn};
use super::{ArithOp, Expr, Literal, Op};
use crate::error::{Error, Result};
use crate::log::schema::{
    epoch_days, parse_date, parse_decimal_value, parse_timestamp_micros, ColumnMappingMode,
    DataType, StructType,
};

/// Which part of a date [`Kind::DatePart`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DatePartKind {
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
}

/// A typed node: what it computes and the Arrow type of its result.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Typed {
    pub(crate) kind: Kind,
    pub(crate) data_type: ArrowType,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    /// A bound column (index into the columns of the predicate or value).
    Column(usize),
    /// A one-row array.
    Literal(ArrayRef),
    Arith(ArithOp, Box<Typed>, Box<Typed>),
    Neg(Box<Typed>),
    Concat(Vec<Typed>),
    /// A date part (year, month, day) of a date or timestamp, as INT.
    DatePart(DatePartKind, Box<Typed>),
    /// Cast the child to this node's type (explicit, or a widening).
    Cast(Box<Typed>),
    Case(Vec<(Typed, Typed)>, Option<Box<Typed>>),
    Cmp(Op, Box<Typed>, Box<Typed>),
    And(Vec<Typed>),
    Or(Vec<Typed>),
    Not(Box<Typed>),
    IsNull(Box<Typed>),
    In(Box<Typed>, Vec<Typed>),
}

impl Typed {
    /// Whether the value depends on a time zone: a date part of a TIMESTAMP
    /// (an instant; TIMESTAMP_NTZ has no zone), or a cast between one and a
    /// date, a string or a TIMESTAMP_NTZ. Taken in the expression's zone
    /// (Delta Spark: its session time zone, `spark.sql.session.timeZone`).
    fn reads_time_zone(&self) -> bool {
        let instant = |t: &Typed| matches!(t.data_type, ArrowType::Timestamp(_, Some(_)));
        match &self.kind {
            Kind::Column(_) | Kind::Literal(_) => false,
            Kind::DatePart(_, c) => instant(c) || c.reads_time_zone(),
            Kind::Cast(c) => {
                let zone_changes = instant(c) != instant(self)
                    && c.data_type != ArrowType::Null
                    && !is_numeric(&c.data_type)
                    && !is_numeric(&self.data_type);
                zone_changes || c.reads_time_zone()
            }
            Kind::Arith(_, a, b) | Kind::Cmp(_, a, b) => a.reads_time_zone() || b.reads_time_zone(),
            Kind::Neg(c) | Kind::Not(c) | Kind::IsNull(c) => c.reads_time_zone(),
            Kind::Concat(cs) | Kind::And(cs) | Kind::Or(cs) => {
                cs.iter().any(Typed::reads_time_zone)
            }
            Kind::Case(branches, otherwise) => {
                branches
                    .iter()
                    .any(|(w, t)| w.reads_time_zone() || t.reads_time_zone())
                    || otherwise.as_ref().is_some_and(|o| o.reads_time_zone())
            }
            Kind::In(v, items) => v.reads_time_zone() || items.iter().any(Typed::reads_time_zone),
        }
    }
}

/// A type mismatch found while binding: outside what deltadv evaluates (a
/// caller with a fallback, Spark, hands the text on).
fn type_error(what: impl std::fmt::Display) -> Error {
    Error::UnsupportedPredicate(what.to_string())
}

fn arrow_error(e: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("evaluating expression: {e}"))
}

/// The Delta name of an Arrow type, for messages (`long`, `decimal(10,2)`).
pub(crate) fn type_name(dt: &ArrowType) -> String {
    match crate::log::schema::from_arrow_type(dt, "", 0) {
        Ok(d) => d.to_string(),
        Err(_) if *dt == ArrowType::Null => "void".into(),
        Err(_) => dt.to_string(),
    }
}

fn is_int(dt: &ArrowType) -> bool {
    matches!(
        dt,
        ArrowType::Int8 | ArrowType::Int16 | ArrowType::Int32 | ArrowType::Int64
    )
}

fn is_numeric(dt: &ArrowType) -> bool {
    is_int(dt)
        || matches!(
            dt,
            ArrowType::Float32 | ArrowType::Float64 | ArrowType::Decimal128(..)
        )
}

/// An integer or decimal type as (precision, scale).
fn as_decimal(dt: &ArrowType) -> Option<(u8, i8)> {
    match dt {
        ArrowType::Int8 => Some((3, 0)),
        ArrowType::Int16 => Some((5, 0)),
        ArrowType::Int32 => Some((10, 0)),
        ArrowType::Int64 => Some((20, 0)),
        ArrowType::Decimal128(p, s) => Some((*p, *s)),
        _ => None,
    }
}

/// Spark's bounded decimal: precision at most 38.
fn decimal(range: i16, scale: i16) -> ArrowType {
    let scale = scale.clamp(0, 38);
    let precision = (range + scale).clamp(1, 38);
    ArrowType::Decimal128(precision as u8, scale.min(precision) as i8)
}

/// The decimal wide enough for both.
fn wider_decimal(a: (u8, i8), b: (u8, i8)) -> ArrowType {
    let (p1, s1, p2, s2) = (
        i16::from(a.0),
        i16::from(a.1),
        i16::from(b.0),
        i16::from(b.1),
    );
    decimal((p1 - s1).max(p2 - s2), s1.max(s2))
}

fn int_rank(dt: &ArrowType) -> u8 {
    match dt {
        ArrowType::Int8 => 1,
        ArrowType::Int16 => 2,
        ArrowType::Int32 => 3,
        _ => 4,
    }
}

/// The common type of two numeric types, as Spark widens them.
fn common_numeric(a: &ArrowType, b: &ArrowType) -> Option<ArrowType> {
    if !is_numeric(a) || !is_numeric(b) {
        return None;
    }
    if a == b {
        return Some(a.clone());
    }
    Some(match (a, b) {
        (ArrowType::Float64, _) | (_, ArrowType::Float64) => ArrowType::Float64,
        (ArrowType::Float32, o) | (o, ArrowType::Float32) => {
            if is_int(o) {
                ArrowType::Float32
            } else {
                ArrowType::Float64
            }
        }
        _ if is_int(a) && is_int(b) => {
            if int_rank(a) >= int_rank(b) {
                a.clone()
            } else {
                b.clone()
            }
        }
        _ => wider_decimal(as_decimal(a)?, as_decimal(b)?),
    })
}

/// Two timestamp-like types' common type (`timestamp` wins over `_ntz`).
fn common_time(a: &ArrowType, b: &ArrowType) -> Option<ArrowType> {
    use ArrowType::{Date32, Timestamp};
    match (a, b) {
        (Timestamp(TimeUnit::Microsecond, x), Timestamp(TimeUnit::Microsecond, y)) => Some(
            Timestamp(TimeUnit::Microsecond, x.clone().or_else(|| y.clone())),
        ),
        (Date32, t @ Timestamp(..)) | (t @ Timestamp(..), Date32) => Some(t.clone()),
        _ => None,
    }
}

/// The type both sides of a comparison are cast to.
fn comparison_type(a: &ArrowType, b: &ArrowType) -> Option<ArrowType> {
    if a == b {
        return Some(a.clone());
    }
    match (a, b) {
        (ArrowType::Null, o) | (o, ArrowType::Null) => Some(o.clone()),
        (ArrowType::Utf8, o) | (o, ArrowType::Utf8) if *o != ArrowType::Binary => Some(o.clone()),
        _ => common_numeric(a, b).or_else(|| common_time(a, b)),
    }
}

/// The type values of a `CASE` or `IN` list are widened to.
fn branch_type(a: &ArrowType, b: &ArrowType) -> Option<ArrowType> {
    if a == b {
        return Some(a.clone());
    }
    match (a, b) {
        (ArrowType::Null, o) | (o, ArrowType::Null) => Some(o.clone()),
        (ArrowType::Utf8, o) | (o, ArrowType::Utf8) if *o != ArrowType::Binary => {
            Some(ArrowType::Utf8)
        }
        _ => common_numeric(a, b).or_else(|| common_time(a, b)),
    }
}

/// `t` cast to `to` (no node when it already is).
fn cast_to(t: Typed, to: &ArrowType) -> Typed {
    if t.data_type == *to {
        t
    } else {
        Typed {
            kind: Kind::Cast(Box::new(t)),
            data_type: to.clone(),
        }
    }
}

fn one_row(array: ArrayRef) -> Typed {
    Typed {
        data_type: array.data_type().clone(),
        kind: Kind::Literal(array),
    }
}

/// A literal as Spark types it.
fn literal(lit: &Literal, zone: &super::TimeZone) -> Result<Typed> {
    let bad = || type_error(format!("invalid literal {lit}"));
    let array: ArrayRef = match lit {
        Literal::Null => Arc::new(NullArray::new(1)),
        Literal::Bool(b) => Arc::new(BooleanArray::from(vec![*b])),
        Literal::Double(d) => Arc::new(Float64Array::from(vec![*d])),
        Literal::Str(s) => Arc::new(StringArray::from(vec![s.as_str()])),
        Literal::Binary(b) => Arc::new(BinaryArray::from(vec![b.as_slice()])),
        Literal::Date(s) => Arc::new(Date32Array::from(vec![parse_date(s.trim())
            .and_then(epoch_days)
            .and_then(|d| i32::try_from(d).ok())
            .ok_or_else(bad)?])),
        Literal::Timestamp(s) => Arc::new(
            TimestampMicrosecondArray::from(vec![zone
                .timestamp_instant(s.trim())
                .ok_or_else(bad)?])
            .with_timezone("UTC"),
        ),
        Literal::TimestampNtz(s) => Arc::new(TimestampMicrosecondArray::from(vec![
            parse_timestamp_micros(s.trim(), false).ok_or_else(bad)?,
        ])),
        Literal::Number(n) => number(n).ok_or_else(bad)?,
    };
    Ok(one_row(array))
}

/// A number literal: INT, BIGINT, DECIMAL(p,s) or DOUBLE, as Spark reads it.
fn number(text: &str) -> Option<ArrayRef> {
    let t = text.trim().trim_end_matches(['L', 'l']);
    if t.contains(['e', 'E']) {
        return Some(Arc::new(Float64Array::from(vec![t.parse::<f64>().ok()?])));
    }
    let digits = t.trim_start_matches(['-', '+']);
    let (int_part, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if frac.is_empty() && !digits.contains('.') {
        if let Ok(v) = t.parse::<i32>() {
            return Some(Arc::new(Int32Array::from(vec![v])));
        }
        if let Ok(v) = t.parse::<i64>() {
            return Some(Arc::new(Int64Array::from(vec![v])));
        }
    }
    let scale = u8::try_from(frac.len()).ok()?;
    let int_digits = int_part.trim_start_matches('0').len();
    let precision = u8::try_from(int_digits).ok()?.checked_add(scale)?.max(1);
    if precision > 38 {
        return None;
    }
    let scale = i8::try_from(scale).ok()?;
    let v = parse_decimal_value(t, precision, scale)?;
    Some(Arc::new(
        Decimal128Array::from(vec![v])
            .with_precision_and_scale(precision, scale)
            .ok()?,
    ))
}

/// The Arrow type a `CAST` names (a Delta primitive type name).
fn cast_type(name: &str) -> Result<ArrowType> {
    let dt =
        crate::log::schema::parse_data_type(&serde_json::Value::String(name.to_string()), "CAST")?;
    match dt {
        DataType::Struct(_) | DataType::Array { .. } | DataType::Map { .. } | DataType::Variant => {
            Err(type_error(format!("CAST to {name} is not supported")))
        }
        other => crate::log::schema::to_arrow_type(&other, ColumnMappingMode::None, false),
    }
}

/// Whether a value of `from` may be cast to `to` with `CAST`.
fn castable(from: &ArrowType, to: &ArrowType) -> bool {
    from == to
        || *from == ArrowType::Null
        || (arrow_cast::can_cast_types(from, to)
            && !matches!(
                (from, to),
                (ArrowType::Binary, t) | (t, ArrowType::Binary)
                    if *t != ArrowType::Utf8 && *t != ArrowType::Binary
            ))
}

impl Binder<'_> {
    /// Bind any expression with its type.
    pub(crate) fn typed(&mut self, e: &Expr, depth: usize) -> Result<Typed> {
        self.check_depth(depth)?;
        let d = depth + 1;
        Ok(match e {
            Expr::Column(path) => {
                let col = self.column(path)?;
                let c = self.column_at(col)?;
                let data_type = crate::log::schema::to_arrow_type(
                    &c.data_type,
                    ColumnMappingMode::None,
                    false,
                )?;
                Typed {
                    kind: Kind::Column(col),
                    data_type,
                }
            }
            Expr::Literal(lit) => literal(lit, &self.zone)?,
            Expr::And(parts) | Expr::Or(parts) => {
                let parts = parts
                    .iter()
                    .map(|p| self.boolean(p, d))
                    .collect::<Result<Vec<_>>>()?;
                Typed {
                    kind: if matches!(e, Expr::And(_)) {
                        Kind::And(parts)
                    } else {
                        Kind::Or(parts)
                    },
                    data_type: ArrowType::Boolean,
                }
            }
            Expr::Not(inner) => Typed {
                kind: Kind::Not(Box::new(self.boolean(inner, d)?)),
                data_type: ArrowType::Boolean,
            },
            Expr::IsNull(inner) => Typed {
                kind: Kind::IsNull(Box::new(self.typed(inner, d)?)),
                data_type: ArrowType::Boolean,
            },
            Expr::Cmp { op, left, right } => {
                let (l, r) = (self.typed(left, d)?, self.typed(right, d)?);
                let to = comparison_type(&l.data_type, &r.data_type).ok_or_else(|| {
                    type_error(format!(
                        "cannot compare {left} ({}) with {right} ({})",
                        type_name(&l.data_type),
                        type_name(&r.data_type)
                    ))
                })?;
                Typed {
                    kind: Kind::Cmp(*op, Box::new(cast_to(l, &to)), Box::new(cast_to(r, &to))),
                    data_type: ArrowType::Boolean,
                }
            }
            Expr::In { value, list } => {
                let v = self.typed(value, d)?;
                let items = list
                    .iter()
                    .map(|x| self.typed(x, d))
                    .collect::<Result<Vec<_>>>()?;
                let mut to = v.data_type.clone();
                for (x, item) in list.iter().zip(&items) {
                    to = comparison_type(&to, &item.data_type).ok_or_else(|| {
                        type_error(format!(
                            "cannot compare {value} ({}) with {x} ({}) in IN",
                            type_name(&v.data_type),
                            type_name(&item.data_type)
                        ))
                    })?;
                }
                Typed {
                    kind: Kind::In(
                        Box::new(cast_to(v, &to)),
                        items.into_iter().map(|x| cast_to(x, &to)).collect(),
                    ),
                    data_type: ArrowType::Boolean,
                }
            }
            Expr::Arith { op, left, right } => {
                let (l, r) = (self.typed(left, d)?, self.typed(right, d)?);
                arith(*op, l, r, e)?
            }
            Expr::Neg(inner) => {
                let t = self.typed(inner, d)?;
                if !is_numeric(&t.data_type) && t.data_type != ArrowType::Null {
                    return Err(type_error(format!(
                        "cannot negate {inner} of type {}",
                        type_name(&t.data_type)
                    )));
                }
                Typed {
                    data_type: t.data_type.clone(),
                    kind: Kind::Neg(Box::new(t)),
                }
            }
            Expr::Concat(parts) => {
                let mut out = Vec::with_capacity(parts.len());
                for p in parts {
                    let t = self.typed(p, d)?;
                    if !castable(&t.data_type, &ArrowType::Utf8) {
                        return Err(type_error(format!(
                            "cannot concatenate {p} of type {}",
                            type_name(&t.data_type)
                        )));
                    }
                    out.push(cast_to(t, &ArrowType::Utf8));
                }
                Typed {
                    kind: Kind::Concat(out),
                    data_type: ArrowType::Utf8,
                }
            }
            Expr::DatePart { part, expr } => {
                let kind = match part.as_str() {
                    "year" => DatePartKind::Year,
                    "month" => DatePartKind::Month,
                    "day" => DatePartKind::Day,
                    "hour" => DatePartKind::Hour,
                    "minute" => DatePartKind::Minute,
                    "second" => DatePartKind::Second,
                    other => {
                        return Err(type_error(format!("unknown date part {other:?}")));
                    }
                };
                let of_time = matches!(
                    kind,
                    DatePartKind::Hour | DatePartKind::Minute | DatePartKind::Second
                );
                let t = self.typed(expr, d)?;
                let t = match &t.data_type {
                    ArrowType::Timestamp(_, _) => t,
                    // Spark reads a date or string as a timestamp for the
                    // time parts (a date: its midnight in the session zone).
                    ArrowType::Date32 | ArrowType::Utf8 | ArrowType::Null if of_time => cast_to(
                        t,
                        &ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                    ),
                    ArrowType::Date32 => t,
                    ArrowType::Utf8 | ArrowType::Null => cast_to(t, &ArrowType::Date32),
                    other => {
                        return Err(type_error(format!(
                            "{} of {expr} of type {}: needs a date or timestamp",
                            part.to_uppercase(),
                            type_name(other)
                        )))
                    }
                };
                Typed {
                    kind: Kind::DatePart(kind, Box::new(t)),
                    data_type: ArrowType::Int32,
                }
            }
            Expr::Cast { expr, to } => {
                let t = self.typed(expr, d)?;
                let target = cast_type(to)?;
                if !castable(&t.data_type, &target) {
                    return Err(type_error(format!(
                        "cannot cast {expr} of type {} to {to}",
                        type_name(&t.data_type)
                    )));
                }
                // Always a node, even to the same type: `CAST(x AS INT)` is
                // what the user wrote.
                Typed {
                    kind: Kind::Cast(Box::new(t)),
                    data_type: target,
                }
            }
            Expr::Case { when, otherwise } => {
                let mut branches = Vec::with_capacity(when.len());
                let mut to = ArrowType::Null;
                for (c, v) in when {
                    let c = self.boolean(c, d)?;
                    let v = self.typed(v, d)?;
                    to = branch_type(&to, &v.data_type).ok_or_else(|| {
                        type_error(format!(
                            "CASE branches of types {} and {} have no common type",
                            type_name(&to),
                            type_name(&v.data_type)
                        ))
                    })?;
                    branches.push((c, v));
                }
                let otherwise = match otherwise {
                    Some(o) => {
                        let o = self.typed(o, d)?;
                        to = branch_type(&to, &o.data_type).ok_or_else(|| {
                            type_error(format!(
                                "CASE branches of types {} and {} have no common type",
                                type_name(&to),
                                type_name(&o.data_type)
                            ))
                        })?;
                        Some(o)
                    }
                    None => None,
                };
                Typed {
                    kind: Kind::Case(
                        branches
                            .into_iter()
                            .map(|(c, v)| (c, cast_to(v, &to)))
                            .collect(),
                        otherwise.map(|o| Box::new(cast_to(o, &to))),
                    ),
                    data_type: to,
                }
            }
        })
    }

    /// Bind an expression that must be boolean (a condition).
    pub(crate) fn boolean(&mut self, e: &Expr, depth: usize) -> Result<Typed> {
        let t = self.typed(e, depth)?;
        match t.data_type {
            ArrowType::Boolean => Ok(t),
            ArrowType::Null => Ok(cast_to(t, &ArrowType::Boolean)),
            ref other => Err(Error::UnsupportedPredicate(format!(
                "{e} is a value of type {}, not a condition (compare it: `flag = TRUE`)",
                type_name(other)
            ))),
        }
    }
}

/// The decimal type of an operand: an integer literal has just its digits
/// (Spark's `DecimalType.fromLiteral`), other integers their type's range.
fn operand_decimal(t: &Typed) -> Option<(u8, i8)> {
    if let Kind::Literal(a) = &t.kind {
        let v = match a.data_type() {
            ArrowType::Int32 => a
                .as_any()
                .downcast_ref::<Int32Array>()
                .map(|x| i64::from(x.value(0))),
            ArrowType::Int64 => a.as_any().downcast_ref::<Int64Array>().map(|x| x.value(0)),
            _ => None,
        };
        if let Some(v) = v {
            let digits = v.unsigned_abs().checked_ilog10().map_or(1, |d| d + 1);
            return u8::try_from(digits).ok().map(|p| (p, 0));
        }
    }
    as_decimal(&t.data_type)
}

/// Type `left op right`.
fn arith(op: ArithOp, l: Typed, r: Typed, e: &Expr) -> Result<Typed> {
    let (lt, rt) = (l.data_type.clone(), r.data_type.clone());
    let null = |t: &ArrowType| *t == ArrowType::Null;
    let refuse = || {
        type_error(format!(
            "cannot apply {} to {} and {} in {e}",
            op.symbol(),
            type_name(&lt),
            type_name(&rt)
        ))
    };
    if (!is_numeric(&lt) && !null(&lt)) || (!is_numeric(&rt) && !null(&rt)) {
        return Err(refuse());
    }
    // NULL takes the other side's type (NULL + NULL: int).
    let lt2 = if null(&lt) { rt.clone() } else { lt.clone() };
    let rt2 = if null(&rt) { lt2.clone() } else { rt.clone() };
    let lt2 = if null(&lt2) { ArrowType::Int32 } else { lt2 };
    let rt2 = if null(&rt2) { ArrowType::Int32 } else { rt2 };
    let common = common_numeric(&lt2, &rt2).ok_or_else(refuse)?;
    let (l, r, out) = match (op, &common) {
        (ArithOp::Div, ArrowType::Decimal128(..)) => {
            // Spark: scale max(6, s1 + p2 + 1); arrow's kernel gives the
            // dividend's scale + 4, so the dividend is rescaled first.
            let (p1, s1) = operand_decimal(&l).ok_or_else(refuse)?;
            let (p2, s2) = operand_decimal(&r).ok_or_else(refuse)?;
            let scale = 6i16.max(i16::from(s1) + i16::from(p2) + 1).min(38);
            let left_scale = (scale - 4).max(i16::from(s1));
            let left = decimal(i16::from(p1) - i16::from(s1), left_scale);
            let right = ArrowType::Decimal128(p2, s2);
            let (l, r) = (cast_to(l, &left), cast_to(r, &right));
            let out = arith_type(op, &left, &right).ok_or_else(refuse)?;
            (l, r, out)
        }
        (ArithOp::Div, _) => (
            cast_to(l, &ArrowType::Float64),
            cast_to(r, &ArrowType::Float64),
            ArrowType::Float64,
        ),
        (_, ArrowType::Decimal128(..)) => {
            // Each side as its own decimal; arrow's result type is Spark's.
            let left = operand_decimal(&l)
                .or_else(|| as_decimal(&lt2))
                .map_or(common.clone(), |(p, s)| ArrowType::Decimal128(p, s));
            let right = operand_decimal(&r)
                .or_else(|| as_decimal(&rt2))
                .map_or(common.clone(), |(p, s)| ArrowType::Decimal128(p, s));
            let out = arith_type(op, &left, &right).ok_or_else(refuse)?;
            (cast_to(l, &left), cast_to(r, &right), out)
        }
        _ => (cast_to(l, &common), cast_to(r, &common), common.clone()),
    };
    Ok(Typed {
        kind: Kind::Arith(op, Box::new(l), Box::new(r)),
        data_type: out,
    })
}

/// The result type of arrow's decimal kernel for `l op r`.
fn arith_type(op: ArithOp, l: &ArrowType, r: &ArrowType) -> Option<ArrowType> {
    let z = |t: &ArrowType| -> Option<ArrayRef> {
        match t {
            ArrowType::Decimal128(p, s) => Decimal128Array::from(vec![1i128])
                .with_precision_and_scale(*p, *s)
                .ok()
                .map(|a| Arc::new(a) as ArrayRef),
            _ => None,
        }
    };
    let (a, b) = (z(l)?, z(r)?);
    kernel(op, &a, &b).ok().map(|x| x.data_type().clone())
}

fn kernel(op: ArithOp, a: &dyn Array, b: &dyn Array) -> Result<ArrayRef> {
    use arrow_arith::numeric;
    let (a, b) = (&a as &dyn arrow_array::Datum, &b as &dyn arrow_array::Datum);
    match op {
        ArithOp::Add => numeric::add(a, b),
        ArithOp::Sub => numeric::sub(a, b),
        ArithOp::Mul => numeric::mul(a, b),
        ArithOp::Div => numeric::div(a, b),
    }
    .map_err(arrow_error)
}

/// The mask with NULL read as false.
pub(crate) fn true_only(mask: BooleanArray) -> BooleanArray {
    if mask.null_count() == 0 {
        mask
    } else {
        arrow_select::filter::prep_null_mask_filter(&mask)
    }
}

/// `array` (one row) repeated `rows` times.
fn repeat(array: &ArrayRef, rows: usize) -> Result<ArrayRef> {
    if array.data_type() == &ArrowType::Null {
        return Ok(new_null_array(&ArrowType::Null, rows));
    }
    let zeros = UInt32Array::from(vec![0u32; rows]);
    arrow_select::take::take(array.as_ref(), &zeros, None).map_err(arrow_error)
}

/// `CAST` with ANSI semantics: a value that does not convert is an error.
pub(crate) fn ansi_cast(array: &dyn Array, to: &ArrowType) -> Result<ArrayRef> {
    let options = CastOptions {
        safe: false,
        ..Default::default()
    };
    cast_with_options(array, to, &options).map_err(|e| {
        Error::InvalidArgument(format!(
            "cannot cast a value of type {} to {}: {e}",
            type_name(array.data_type()),
            type_name(to)
        ))
    })
}

/// `CAST` of `a` to `to` with instants read in `zone`, as Spark's session
/// time zone: a TIMESTAMP to a DATE, STRING or TIMESTAMP_NTZ takes its
/// local time there; a STRING, DATE or TIMESTAMP_NTZ to a TIMESTAMP is a
/// wall clock reading there.
fn zoned_cast(a: ArrayRef, to: &ArrowType, zone: &super::TimeZone) -> Result<ArrayRef> {
    let zoned = |t: &ArrowType| matches!(t, ArrowType::Timestamp(_, Some(_)));
    let from = a.data_type().clone();
    if zoned(&from) && !zoned(to) {
        return match to {
            ArrowType::Utf8 => zone.local_times(a.as_ref(), true),
            ArrowType::Timestamp(TimeUnit::Microsecond, None) => {
                zone.local_times(a.as_ref(), false)
            }
            _ => ansi_cast(zone.tag(a).as_ref(), to),
        };
    }
    if zoned(to) && !zoned(&from) {
        let instants = match from {
            ArrowType::Date32 | ArrowType::Timestamp(_, None) => {
                zone.instants_of_local(a.as_ref())?
            }
            ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View => {
                zone.instants_of_text(a.as_ref())?
            }
            _ => a,
        };
        return ansi_cast(instants.as_ref(), to);
    }
    ansi_cast(a.as_ref(), to)
}

/// Whether any valid value of `a` is zero.
fn has_zero(a: &ArrayRef) -> Result<bool> {
    let zero = ansi_cast(&Int32Array::from(vec![0]), a.data_type())?;
    let eq = arrow_ord::cmp::eq(a, &arrow_array::Scalar::new(zero)).map_err(arrow_error)?;
    Ok(eq.true_count() > 0)
}

impl Typed {
    /// Evaluate over `batch`; `columns` are the bound columns the tree's
    /// column indexes point into. The result has the batch's row count.
    /// Instants are read in `zone` where a value depends on one.
    pub(crate) fn eval(
        &self,
        columns: &[BoundColumn],
        batch: &RecordBatch,
        zone: &super::TimeZone,
    ) -> Result<ArrayRef> {
        use arrow_arith::boolean;
        let rows = batch.num_rows();
        let boolean_of = |t: &Typed| -> Result<BooleanArray> {
            let a = t.eval(columns, batch, zone)?;
            a.as_any()
                .downcast_ref::<BooleanArray>()
                .cloned()
                .ok_or_else(|| Error::Internal(format!("condition of type {}", a.data_type())))
        };
        Ok(match &self.kind {
            Kind::Column(col) => {
                let c = columns
                    .get(*col)
                    .ok_or_else(|| Error::Internal("expression column out of range".into()))?;
                let a = super::eval::column_array(batch, c)?;
                if a.data_type() == &self.data_type {
                    a
                } else {
                    // a column read in another layout of its type (strings
                    // as views): the expression is typed for the table's
                    arrow_cast::cast(&a, &self.data_type).map_err(arrow_error)?
                }
            }
            Kind::Literal(a) => repeat(a, rows)?,
            Kind::Cast(inner) => {
                let a = inner.eval(columns, batch, zone)?;
                if a.data_type() == &self.data_type {
                    a
                } else {
                    zoned_cast(a, &self.data_type, zone)?
                }
            }
            Kind::Arith(op, l, r) => {
                let (a, b) = (l.eval(columns, batch, zone)?, r.eval(columns, batch, zone)?);
                if *op == ArithOp::Div && has_zero(&b)? {
                    return Err(Error::InvalidArgument(
                        "[DIVIDE_BY_ZERO] division by zero".into(),
                    ));
                }
                let out = kernel(*op, a.as_ref(), b.as_ref())?;
                if out.data_type() == &self.data_type {
                    out
                } else {
                    ansi_cast(out.as_ref(), &self.data_type)?
                }
            }
            Kind::Neg(inner) => {
                let a = inner.eval(columns, batch, zone)?;
                if a.data_type() == &ArrowType::Null {
                    a
                } else {
                    arrow_arith::numeric::neg(a.as_ref()).map_err(arrow_error)?
                }
            }
            Kind::DatePart(part, inner) => {
                let a = zone.tag(inner.eval(columns, batch, zone)?);
                let part = match part {
                    DatePartKind::Year => arrow_arith::temporal::DatePart::Year,
                    DatePartKind::Month => arrow_arith::temporal::DatePart::Month,
                    DatePartKind::Day => arrow_arith::temporal::DatePart::Day,
                    DatePartKind::Hour => arrow_arith::temporal::DatePart::Hour,
                    DatePartKind::Minute => arrow_arith::temporal::DatePart::Minute,
                    DatePartKind::Second => arrow_arith::temporal::DatePart::Second,
                };
                arrow_arith::temporal::date_part(a.as_ref(), part).map_err(arrow_error)?
            }
            Kind::Concat(parts) => {
                let mut acc: Option<StringArray> = None;
                for p in parts {
                    let a = p.eval(columns, batch, zone)?;
                    let s = a
                        .as_any()
                        .downcast_ref::<StringArray>()
                        .cloned()
                        .ok_or_else(|| Error::Internal("concat of a non-string".into()))?;
                    acc = Some(match acc {
                        None => s,
                        Some(prev) => {
                            arrow_string::concat_elements::concat_elements_utf8(&prev, &s)
                                .map_err(arrow_error)?
                        }
                    });
                }
                Arc::new(acc.unwrap_or_else(|| StringArray::from(vec![None::<&str>; rows])))
            }
            Kind::Case(branches, otherwise) => {
                let mut acc = match otherwise {
                    Some(o) => o.eval(columns, batch, zone)?,
                    None => new_null_array(&self.data_type, rows),
                };
                for (c, v) in branches.iter().rev() {
                    let mask = true_only(boolean_of(c)?);
                    let v = v.eval(columns, batch, zone)?;
                    acc = arrow_select::zip::zip(&mask, &v, &acc).map_err(arrow_error)?;
                }
                acc
            }
            Kind::Cmp(op, l, r) => {
                let a = super::eval::zero_without_sign(l.eval(columns, batch, zone)?)?;
                let b = super::eval::zero_without_sign(r.eval(columns, batch, zone)?)?;
                if a.data_type() == &ArrowType::Null {
                    return Ok(Arc::new(if *op == Op::NullSafeEq {
                        boolean::is_null(b.as_ref()).map_err(arrow_error)?
                    } else {
                        BooleanArray::new_null(rows)
                    }));
                }
                Arc::new(super::eval::cmp_kernel(*op, &a, &b)?)
            }
            Kind::And(parts) => {
                let mut acc = BooleanArray::from(vec![true; rows]);
                for p in parts {
                    acc = boolean::and_kleene(&acc, &boolean_of(p)?).map_err(arrow_error)?;
                }
                Arc::new(acc)
            }
            Kind::Or(parts) => {
                let mut acc = BooleanArray::from(vec![false; rows]);
                for p in parts {
                    acc = boolean::or_kleene(&acc, &boolean_of(p)?).map_err(arrow_error)?;
                }
                Arc::new(acc)
            }
            Kind::Not(inner) => Arc::new(boolean::not(&boolean_of(inner)?).map_err(arrow_error)?),
            Kind::IsNull(inner) => {
                let a = inner.eval(columns, batch, zone)?;
                Arc::new(boolean::is_null(a.as_ref()).map_err(arrow_error)?)
            }
            Kind::In(value, items) => {
                let a = super::eval::zero_without_sign(value.eval(columns, batch, zone)?)?;
                let mut acc = BooleanArray::from(vec![false; rows]);
                for item in items {
                    let b = super::eval::zero_without_sign(item.eval(columns, batch, zone)?)?;
                    let eq =
                        if a.data_type() == &ArrowType::Null || b.data_type() == &ArrowType::Null {
                            BooleanArray::new_null(rows)
                        } else {
                            super::eval::cmp_kernel(Op::Eq, &a, &b)?
                        };
                    acc = boolean::or_kleene(&acc, &eq).map_err(arrow_error)?;
                }
                Arc::new(acc)
            }
        })
    }
}

/// A value expression bound to a table schema (an UPDATE `SET` value).
#[derive(Debug, Clone, PartialEq)]
pub struct ValueExpr {
    root: Typed,
    columns: Vec<BoundColumn>,
    text: String,
    zone: super::TimeZone,
}

impl ValueExpr {
    /// Parse `text` as a value and bind it to a table's schema.
    pub fn new(
        text: &str,
        schema: &StructType,
        partition_columns: &[String],
        mode: ColumnMappingMode,
    ) -> Result<ValueExpr> {
        let expr = super::parse::parse_value(text)?;
        Self::bind(&expr, text.to_string(), schema, partition_columns, mode)
    }

    /// [`ValueExpr::new`] with instants read in `zone` (Spark's session
    /// time zone; see [`super::zone`]).
    pub fn new_in_zone(
        text: &str,
        schema: &StructType,
        partition_columns: &[String],
        mode: ColumnMappingMode,
        zone: &super::TimeZone,
    ) -> Result<ValueExpr> {
        let expr = super::parse::parse_value(text)?;
        Self::bind_in_zone(
            &expr,
            text.to_string(),
            schema,
            partition_columns,
            mode,
            zone,
        )
    }

    /// Bind a tree to a table's schema (`text`: how to name it).
    pub fn bind(
        expr: &Expr,
        text: String,
        schema: &StructType,
        partition_columns: &[String],
        mode: ColumnMappingMode,
    ) -> Result<ValueExpr> {
        let utc = super::TimeZone::utc();
        Self::bind_in_zone(expr, text, schema, partition_columns, mode, &utc)
    }

    /// [`ValueExpr::bind`] with instants read in `zone`.
    pub fn bind_in_zone(
        expr: &Expr,
        text: String,
        schema: &StructType,
        partition_columns: &[String],
        mode: ColumnMappingMode,
        zone: &super::TimeZone,
    ) -> Result<ValueExpr> {
        let mut b = Binder::new(
            schema,
            partition_columns,
            mode,
            super::bind::Binding::Strict,
        );
        b.zone = zone.clone();
        let root = b.typed(expr, 0)?;
        Ok(ValueExpr {
            root,
            columns: b.into_columns(),
            text,
            zone: zone.clone(),
        })
    }

    /// The time zone instants are read in.
    pub fn time_zone(&self) -> &super::TimeZone {
        &self.zone
    }

    /// The Arrow type of the values.
    pub fn data_type(&self) -> &ArrowType {
        &self.root.data_type
    }

    /// The expression as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The columns it reads.
    pub fn columns(&self) -> &[BoundColumn] {
        &self.columns
    }

    /// Whether its values depend on a time zone (date parts of a TIMESTAMP,
    /// `CAST` of one to DATE or STRING, …): they are taken in
    /// [`ValueExpr::time_zone`], as Delta Spark takes them in
    /// `spark.sql.session.timeZone`.
    pub fn reads_time_zone(&self) -> bool {
        self.root.reads_time_zone()
    }

    /// The values for each row of `batch` (which holds the columns under
    /// their logical names).
    pub fn evaluate(&self, batch: &RecordBatch) -> Result<ArrayRef> {
        self.root.eval(&self.columns, batch, &self.zone)
    }

    /// The values cast to `to` as Spark's store assignment does (ANSI:
    /// numbers to numbers, failing on overflow; strings only to strings), or
    /// an error naming `column` when the types do not go together.
    pub fn check_assignable(&self, column: &str, to: &ArrowType) -> Result<()> {
        let from = self.data_type();
        let ok = from == to
            || *from == ArrowType::Null
            || (is_numeric(from) && is_numeric(to))
            || (common_time(from, to).is_some())
            || *to == ArrowType::Utf8 && castable(from, to);
        if ok {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "cannot assign {} (of type {}) to column {column} of type {}",
                self.text,
                type_name(from),
                type_name(to)
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::bind::tests::{bind, schema};
    use arrow_array::cast::AsArray;
    use arrow_schema::{Field, Schema};

    fn batch() -> RecordBatch {
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", ArrowType::Int64, true),
                Field::new("part", ArrowType::Utf8, true),
                Field::new("x", ArrowType::Float64, true),
                Field::new("amount", ArrowType::Decimal128(10, 2), true),
                Field::new("a name", ArrowType::Int32, true),
                Field::new("small", ArrowType::Int8, true),
                Field::new("d", ArrowType::Date32, true),
            ])),
            vec![
                Arc::new(Int64Array::from(vec![
                    Some(1),
                    None,
                    Some(3),
                    Some(i64::MAX),
                ])),
                Arc::new(StringArray::from(vec![
                    Some("a"),
                    Some("b"),
                    None,
                    Some("7"),
                ])),
                Arc::new(Float64Array::from(vec![
                    Some(1.5),
                    Some(-2.0),
                    None,
                    Some(0.0),
                ])),
                Arc::new(
                    Decimal128Array::from(vec![Some(150), Some(-1), None, Some(0)])
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
                Arc::new(Int32Array::from(vec![Some(10), Some(20), Some(30), None])),
                Arc::new(arrow_array::Int8Array::from(vec![
                    Some(127),
                    Some(1),
                    None,
                    Some(0),
                ])),
                Arc::new(Date32Array::from(vec![
                    Some(0),
                    Some(1),
                    None,
                    Some(19_000),
                ])),
            ],
        )
        .unwrap()
    }

    fn value(text: &str) -> Result<ValueExpr> {
        ValueExpr::new(text, &schema(), &[], ColumnMappingMode::None)
    }

    /// The values of `text` over the first `rows` rows, printed as Spark
    /// would show them (arrow's display).
    fn shown(text: &str, rows: usize) -> Vec<String> {
        let v = value(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let b = batch().slice(0, rows);
        let a = v.evaluate(&b).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(a.len(), rows, "{text}");
        assert_eq!(a.data_type(), v.data_type(), "{text}");
        let f = arrow_cast::display::ArrayFormatter::try_new(
            a.as_ref(),
            &arrow_cast::display::FormatOptions::default().with_null("NULL"),
        )
        .unwrap();
        (0..rows).map(|i| f.value(i).to_string()).collect()
    }

    fn err(text: &str) -> String {
        match value(text) {
            Err(e) => e.to_string(),
            Ok(v) => match v.evaluate(&batch()) {
                Err(e) => e.to_string(),
                Ok(a) => panic!("{text} evaluated to {a:?}"),
            },
        }
    }

    #[test]
    fn literals_are_typed_as_spark_types_them() {
        assert_eq!(value("1").unwrap().data_type(), &ArrowType::Int32);
        assert_eq!(value("3000000000").unwrap().data_type(), &ArrowType::Int64);
        assert_eq!(value("1L").unwrap().data_type(), &ArrowType::Int32);
        assert_eq!(
            value("1.50").unwrap().data_type(),
            &ArrowType::Decimal128(3, 2)
        );
        assert_eq!(
            value("0.01").unwrap().data_type(),
            &ArrowType::Decimal128(2, 2)
        );
        assert_eq!(value("1e3").unwrap().data_type(), &ArrowType::Float64);
        assert_eq!(
            value("99999999999999999999").unwrap().data_type(),
            &ArrowType::Decimal128(20, 0)
        );
        assert_eq!(value("'s'").unwrap().data_type(), &ArrowType::Utf8);
        assert_eq!(
            value("DATE '2024-01-02'").unwrap().data_type(),
            &ArrowType::Date32
        );
    }

    #[test]
    fn arithmetic_widens_and_checks() {
        assert_eq!(shown("id + 1", 3), ["2", "NULL", "4"]);
        assert_eq!(value("id + 1").unwrap().data_type(), &ArrowType::Int64);
        assert_eq!(value("small * 2").unwrap().data_type(), &ArrowType::Int32);
        assert_eq!(shown("`a name` * 2 - id", 3), ["19", "NULL", "57"]);
        assert_eq!(shown("x * 2", 3), ["3.0", "-4.0", "NULL"]);
        assert_eq!(shown("id / 2", 3), ["0.5", "NULL", "1.5"]);
        assert_eq!(value("id / 2").unwrap().data_type(), &ArrowType::Float64);
        assert_eq!(shown("-id", 1), ["-1"]);
        assert_eq!(shown("- x", 2), ["-1.5", "2.0"]);
        // decimals: Spark's precision and scale
        assert_eq!(shown("amount + 1", 2), ["2.50", "0.99"]);
        assert_eq!(
            value("amount + 1").unwrap().data_type(),
            &ArrowType::Decimal128(11, 2)
        );
        assert_eq!(
            value("amount + `a name`").unwrap().data_type(),
            &ArrowType::Decimal128(13, 2)
        );
        assert_eq!(
            value("amount * 1.5").unwrap().data_type(),
            &ArrowType::Decimal128(13, 3)
        );
        assert_eq!(shown("amount * 1.5", 1), ["2.250"]);
        // Spark: decimal(10,2) / decimal(1,0) is decimal(15,6)... scale max(6, 2+1+1)
        let div = value("amount / 3").unwrap();
        assert!(
            matches!(div.data_type(), ArrowType::Decimal128(_, s) if *s >= 6),
            "{:?}",
            div.data_type()
        );
        assert_eq!(shown("amount / 3", 1)[0], "0.500000");
        assert_eq!(shown("amount + x", 1), ["3.0"]);
        // NULL operands
        assert_eq!(shown("id + NULL", 1), ["NULL"]);
        // ANSI: overflow and division by zero fail
        assert!(err("id + 1").contains("Overflow"), "{}", err("id + 1"));
        assert!(err("id / 0").contains("DIVIDE_BY_ZERO"));
        assert!(err("x / (id - id)").contains("DIVIDE_BY_ZERO"));
        // types that do not add
        assert!(
            err("part + 1").contains("cannot apply + to string and integer"),
            "{}",
            err("part + 1")
        );
        assert!(err("-part").contains("cannot negate"));
    }

    #[test]
    fn date_parts() {
        assert_eq!(shown("YEAR(DATE '2024-03-05')", 1), ["2024"]);
        assert_eq!(shown("month(DATE '2024-03-05')", 1), ["3"]);
        assert_eq!(shown("day(DATE '2024-03-05')", 1), ["5"]);
        assert_eq!(shown("dayofmonth('2024-02-29')", 1), ["29"]);
        assert_eq!(
            shown("year(TIMESTAMP_NTZ '2023-12-31 23:00:00') + 1", 1),
            ["2024"]
        );
        assert_eq!(shown("year(NULL)", 1), ["NULL"]);
        assert!(
            err("year(x)").contains("needs a date or timestamp"),
            "{}",
            err("year(x)")
        );
        let e = crate::expr::parse::parse_value("year(d)").unwrap();
        assert_eq!(e.to_string(), "YEAR(d)");
        let back = Expr::from_json(&e.to_json().unwrap()).unwrap();
        assert_eq!(back, e);
    }

    /// Values of `text` (over one row) with instants read in `zone`.
    fn shown_in(text: &str, zone: &str) -> String {
        let zone = crate::expr::TimeZone::parse(zone).unwrap();
        let v = ValueExpr::new_in_zone(text, &schema(), &[], ColumnMappingMode::None, &zone)
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        let a = v.evaluate(&batch().slice(0, 1)).unwrap();
        let f = arrow_cast::display::ArrayFormatter::try_new(
            a.as_ref(),
            &arrow_cast::display::FormatOptions::default().with_null("NULL"),
        )
        .unwrap();
        f.value(0).to_string()
    }

    #[test]
    fn instants_are_read_in_the_session_time_zone() {
        let at = "TIMESTAMP '2025-01-01 03:00:00Z'";
        for (zone, year, hour, date) in [
            ("UTC", "2025", "3", "2025-01-01"),
            ("America/Los_Angeles", "2024", "19", "2024-12-31"),
            ("+05:30", "2025", "8", "2025-01-01"),
        ] {
            assert_eq!(shown_in(&format!("YEAR({at})"), zone), year, "{zone}");
            assert_eq!(shown_in(&format!("HOUR({at})"), zone), hour, "{zone}");
            assert_eq!(
                shown_in(&format!("CAST({at} AS DATE)"), zone),
                date,
                "{zone}"
            );
        }
        assert_eq!(
            shown_in(&format!("CAST({at} AS STRING)"), "America/Los_Angeles"),
            "2024-12-31 19:00:00"
        );
        assert_eq!(
            shown_in(&format!("CAST({at} AS TIMESTAMP_NTZ)"), "+05:30"),
            "2025-01-01T08:30:00"
        );
        // A literal, string or date without an offset is local time there.
        let la = "America/Los_Angeles";
        assert_eq!(
            shown_in(
                "TIMESTAMP '2024-12-31 19:00:00' = TIMESTAMP '2025-01-01 03:00:00Z'",
                la
            ),
            "true"
        );
        assert_eq!(
            shown_in(
                "CAST('2024-12-31 19:00:00' AS TIMESTAMP) = TIMESTAMP '2025-01-01 03:00:00Z'",
                la
            ),
            "true"
        );
        assert_eq!(
            shown_in(
                "CAST(DATE '2025-01-01' AS TIMESTAMP) = TIMESTAMP '2025-01-01 08:00:00Z'",
                la
            ),
            "true"
        );
        assert_eq!(shown_in("HOUR(DATE '2025-01-01')", la), "0");
        assert_eq!(
            shown_in("MINUTE(TIMESTAMP '2025-01-01 03:07:09Z')", "+05:30"),
            "37"
        );
        assert_eq!(
            shown_in("SECOND(TIMESTAMP '2025-01-01 03:07:09Z')", la),
            "9"
        );
        // TIMESTAMP_NTZ has no zone.
        assert_eq!(
            shown_in("HOUR(TIMESTAMP_NTZ '2025-01-01 03:00:00')", la),
            "3"
        );
    }

    #[test]
    fn concat_cast_and_case() {
        assert_eq!(shown("part || '-' || id", 3), ["a-1", "NULL", "NULL"]);
        assert_eq!(shown("concat(part, x)", 2), ["a1.5", "b-2.0"]);
        assert_eq!(shown("CAST(x AS INT)", 2), ["1", "-2"]);
        assert_eq!(shown("CAST(id AS STRING) || 'x'", 1), ["1x"]);
        assert_eq!(shown("CAST('7' AS INT)", 1), ["7"]);
        assert!(err("CAST(part AS INT)").contains("cannot cast a value of type string to integer"));
        assert_eq!(shown("CAST('2024-02-29' AS DATE)", 1), ["2024-02-29"]);
        assert_eq!(shown("CAST(amount AS DECIMAL(5,1))", 2), ["1.5", "0.0"]);
        assert!(err("CAST(id AS ARRAY<INT>)").contains("not supported"));
        assert_eq!(
            shown(
                "CASE WHEN id > 2 THEN 'big' WHEN id IS NULL THEN 'none' ELSE part END",
                3
            ),
            ["a", "none", "big"]
        );
        assert_eq!(
            shown("CASE WHEN x > 0 THEN 1 ELSE 2.5 END", 2),
            ["1.0", "2.5"]
        );
        assert_eq!(
            shown("CASE id WHEN 1 THEN x END", 3),
            ["1.5", "NULL", "NULL"]
        );
        assert_eq!(
            shown("CASE WHEN id > 1 THEN id END", 3),
            ["NULL", "NULL", "3"]
        );
        assert!(err("CASE WHEN id > 1 THEN d ELSE 1 END").contains("no common type"));
        // a bare column is `column = TRUE`: an integer column does not compare
        assert!(!err("CASE WHEN id THEN 1 END").is_empty());
    }

    #[test]
    fn predicates_as_values_and_general_comparisons() {
        assert_eq!(shown("id >= `a name` / 10", 3), ["true", "NULL", "true"]);
        assert_eq!(shown("id > `a name` / 10", 3), ["false", "NULL", "false"]);
        assert_eq!(
            shown("part = '7' OR id = 1", 4),
            ["true", "NULL", "NULL", "true"]
        );
        assert_eq!(shown("id IN (1, x)", 2), ["true", "NULL"]);
        assert_eq!(shown("NOT (x IS NULL)", 3), ["true", "true", "false"]);
        assert_eq!(shown("d < '1970-01-02'", 2), ["true", "false"]);
        assert!(err("d < 'nope'").contains("cannot cast"));
        assert!(err("d < 1").contains("cannot compare"));
        // and the predicate evaluator uses the same tree for them
        let p = bind("id + 1 > `a name` / 10 + 0.5").unwrap();
        let mask = p.evaluate(&batch().slice(0, 3)).unwrap();
        assert_eq!(
            mask.iter().collect::<Vec<_>>(),
            [Some(true), None, Some(true)]
        );
        // ... which never prunes
        assert!(p.may_match(&|_| None));
    }

    #[test]
    fn assignment_follows_store_assignment() {
        let v = value("x * 2").unwrap();
        assert!(v.check_assignable("id", &ArrowType::Int64).is_ok());
        let s = value("part").unwrap();
        let e = s
            .check_assignable("id", &ArrowType::Int64)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cannot assign part (of type string) to column id of type long"),
            "{e}"
        );
        assert!(value("id")
            .unwrap()
            .check_assignable("part", &ArrowType::Utf8)
            .is_ok());
        let b = batch();
        let ints = ansi_cast(
            value("x").unwrap().evaluate(&b).unwrap().as_ref(),
            &ArrowType::Int64,
        )
        .unwrap();
        assert_eq!(
            ints.as_primitive::<arrow_array::types::Int64Type>()
                .value(0),
            1
        );
    }
}
