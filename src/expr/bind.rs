//! [`Expr`] + table schema → [`Predicate`]: column names resolved (case-
//! insensitively, nested struct fields, physical names under column
//! mapping), literals converted exactly to their column's type.
//!
//! What binds: comparisons, `IN` and `IS NULL` of a column with literals,
//! under AND/OR/NOT. Anything else the tree can hold (arithmetic, `CASE`,
//! column-to-column comparisons) is refused with
//! [`Error::UnsupportedPredicate`] until evaluation supports it. In
//! [`Binding::Lenient`] mode every leaf that does not bind becomes "unknown"
//! (prunes nothing) instead.

use std::cmp::Ordering;

use super::{column_text, Expr, Filter, Literal, Op, MAX_PREDICATE_DEPTH};
use crate::error::{Error, Result};
use crate::log::features;
use crate::log::schema::{
    epoch_days, parse_date, parse_decimal_value, parse_timestamp_micros, ColumnMappingMode,
    DataType, StructType,
};

pub(crate) const MICROS_PER_DAY: i128 = 86_400_000_000;

/// Deepest tree [`Predicate::bind`] walks: the parser and the JSON reader
/// both stay far below it; it guards trees built by hand.
const MAX_BIND_DEPTH: usize = 4 * MAX_PREDICATE_DEPTH;

/// A value in a column's comparison domain. Integers, dates (days),
/// timestamps (µs) and decimals (unscaled) are `Int`.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Int(i128),
    Float(f64),
    Str(String),
    Bool(bool),
}

impl Val {
    pub(crate) fn compare(&self, other: &Val) -> Option<Ordering> {
        match (self, other) {
            (Val::Int(a), Val::Int(b)) => Some(a.cmp(b)),
            (Val::Float(a), Val::Float(b)) => a.partial_cmp(b),
            (Val::Str(a), Val::Str(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
            (Val::Bool(a), Val::Bool(b)) => Some(a.cmp(b)),
            _ => None,
        }
    }
}

/// A column a predicate refers to.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundColumn {
    /// Logical path (top-level name first).
    pub logical: Vec<String>,
    /// Physical path (names in data files and stats).
    pub physical: Vec<String>,
    pub data_type: DataType,
    /// A partition column (top level only).
    pub partition: bool,
    /// `delta.columnMapping.id` of the top-level field, if any.
    pub field_id: Option<i64>,
    /// Min/max statistics can be compared with values of the column's type
    /// (false after a type change that altered how old files' bounds read).
    pub bounds_comparable: bool,
}

/// A bound predicate node; columns are indexes into [`Predicate::columns`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    And(Vec<Node>),
    Or(Vec<Node>),
    Not(Box<Node>),
    /// `value` None: a NULL literal.
    Cmp {
        col: usize,
        op: Op,
        value: Option<Val>,
    },
    In {
        col: usize,
        values: Vec<Val>,
        has_null: bool,
    },
    IsNull {
        col: usize,
    },
    /// A leaf that could not be bound (lenient mode): always "might match".
    Unknown,
    /// Any other boolean expression (two columns, arithmetic, `CASE`, …):
    /// evaluated per row, prunes nothing.
    Eval(Box<super::value::Typed>),
}

/// A predicate bound to a table schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Predicate {
    pub(crate) root: Node,
    pub(crate) columns: Vec<BoundColumn>,
    text: String,
    /// The time zone its instants are read in (Spark's session time zone).
    pub(crate) zone: super::TimeZone,
}

/// How to treat leaves that cannot be bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// Unknown columns and literals that do not convert are errors.
    Strict,
    /// They become "unknown" (no pruning); for filters Spark applies itself.
    Lenient,
}

impl Predicate {
    /// Parse `text` and bind it to a table's schema (instants read in UTC).
    pub fn new(
        text: &str,
        schema: &StructType,
        partition_columns: &[String],
        mode: ColumnMappingMode,
        binding: Binding,
    ) -> Result<Predicate> {
        let utc = super::TimeZone::utc();
        Self::new_in_zone(text, schema, partition_columns, mode, binding, &utc)
    }

    /// Bind a filter (SQL text or a tree) to a table's schema (instants read
    /// in UTC).
    pub fn bind(
        filter: &Filter,
        schema: &StructType,
        partition_columns: &[String],
        mode: ColumnMappingMode,
        binding: Binding,
    ) -> Result<Predicate> {
        let utc = super::TimeZone::utc();
        Self::bind_in_zone(filter, schema, partition_columns, mode, binding, &utc)
    }

    /// [`Predicate::bind`] with instants read in `zone` (see
    /// [`Predicate::new_in_zone`]).
    pub fn bind_in_zone(
        filter: &Filter,
        schema: &StructType,
        partition_columns: &[String],
        mode: ColumnMappingMode,
        binding: Binding,
        zone: &super::TimeZone,
    ) -> Result<Predicate> {
        match filter {
            Filter::Sql(text) => {
                Self::new_in_zone(text, schema, partition_columns, mode, binding, zone)
            }
            Filter::Expr(e) => Self::bind_expr_in_zone(
                e,
                e.to_string(),
                schema,
                partition_columns,
                mode,
                binding,
                zone,
            ),
        }
    }

    pub(crate) fn bind_expr(
        expr: &Expr,
        text: String,
        schema: &StructType,
        partition_columns: &[String],
        mode: ColumnMappingMode,
        binding: Binding,
    ) -> Result<Predicate> {
        let utc = super::TimeZone::utc();
        Self::bind_expr_in_zone(expr, text, schema, partition_columns, mode, binding, &utc)
    }

    /// [`Predicate::new`] with instants read in `zone` (Spark's session time
    /// zone: literals without an offset, date parts and casts of TIMESTAMPs).
    pub fn new_in_zone(
        text: &str,
        schema: &StructType,
        partition_columns: &[String],
        mode: ColumnMappingMode,
        binding: Binding,
        zone: &super::TimeZone,
    ) -> Result<Predicate> {
        let expr = Expr::parse(text)?;
        Self::bind_expr_in_zone(
            &expr,
            text.to_string(),
            schema,
            partition_columns,
            mode,
            binding,
            zone,
        )
    }

    pub(crate) fn bind_expr_in_zone(
        expr: &Expr,
        text: String,
        schema: &StructType,
        partition_columns: &[String],
        mode: ColumnMappingMode,
        binding: Binding,
        zone: &super::TimeZone,
    ) -> Result<Predicate> {
        let mut b = Binder::new(schema, partition_columns, mode, binding);
        b.zone = zone.clone();
        let root = b.bind(expr, 0)?;
        Ok(Predicate {
            root,
            columns: b.columns,
            text,
            zone: zone.clone(),
        })
    }

    /// The predicate as given (SQL; a tree is printed as SQL).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The columns it refers to (indexes are those passed to the stats callback).
    pub fn columns(&self) -> &[BoundColumn] {
        &self.columns
    }
}

/// Resolves the columns of a tree against a schema, collecting them.
pub(crate) struct Binder<'a> {
    schema: &'a StructType,
    partition_columns: &'a [String],
    mode: ColumnMappingMode,
    binding: Binding,
    columns: Vec<BoundColumn>,
    /// The session time zone literals without an offset are read in.
    pub(crate) zone: super::TimeZone,
}

impl<'a> Binder<'a> {
    pub(crate) fn new(
        schema: &'a StructType,
        partition_columns: &'a [String],
        mode: ColumnMappingMode,
        binding: Binding,
    ) -> Self {
        Binder {
            schema,
            partition_columns,
            mode,
            binding,
            columns: Vec::new(),
            zone: super::TimeZone::utc(),
        }
    }

    /// The columns bound so far.
    pub(crate) fn into_columns(self) -> Vec<BoundColumn> {
        self.columns
    }

    pub(crate) fn check_depth(&self, depth: usize) -> Result<()> {
        if depth > MAX_BIND_DEPTH {
            return Err(Error::InvalidArgument(format!(
                "expression nested deeper than {MAX_BIND_DEPTH} levels"
            )));
        }
        Ok(())
    }

    pub(crate) fn column_at(&self, col: usize) -> Result<&BoundColumn> {
        self.bound(col)
    }

    pub(crate) fn column(&mut self, path: &[String]) -> Result<usize> {
        let (first, rest) = path
            .split_first()
            .ok_or_else(|| Error::InvalidArgument("empty column name".into()))?;
        let missing = || {
            let names: Vec<&str> = self.schema.fields.iter().map(|f| f.name.as_str()).collect();
            Error::InvalidArgument(format!(
                "predicate column {} is not in the table (columns: {})",
                column_text(path),
                names.join(", ")
            ))
        };
        let top = self.schema.field_ignore_case(first).ok_or_else(missing)?;
        let mut logical = vec![top.name.clone()];
        let mut physical = vec![top.physical_name(self.mode)?.to_string()];
        let mut leaf = top;
        for part in rest {
            let DataType::Struct(st) = &leaf.data_type else {
                return Err(missing());
            };
            let f = st.field_ignore_case(part).ok_or_else(missing)?;
            logical.push(f.name.clone());
            physical.push(f.physical_name(self.mode)?.to_string());
            leaf = f;
        }
        let bound = BoundColumn {
            partition: rest.is_empty() && self.partition_columns.contains(&top.name),
            field_id: top.field_id(),
            logical,
            physical,
            data_type: leaf.data_type.clone(),
            bounds_comparable: features::bounds_comparable(leaf),
        };
        if let Some(i) = self.columns.iter().position(|c| *c == bound) {
            return Ok(i);
        }
        self.columns.push(bound);
        Ok(self.columns.len() - 1)
    }

    fn bind(&mut self, e: &Expr, depth: usize) -> Result<Node> {
        if depth > MAX_BIND_DEPTH {
            return Err(Error::InvalidArgument(format!(
                "predicate nested deeper than {MAX_BIND_DEPTH} levels"
            )));
        }
        let simple = match e {
            Expr::And(parts) => {
                return Ok(Node::And(
                    parts
                        .iter()
                        .map(|p| self.bind(p, depth + 1))
                        .collect::<Result<_>>()?,
                ))
            }
            Expr::Or(parts) => {
                return Ok(Node::Or(
                    parts
                        .iter()
                        .map(|p| self.bind(p, depth + 1))
                        .collect::<Result<_>>()?,
                ))
            }
            Expr::Not(inner) => return Ok(Node::Not(Box::new(self.bind(inner, depth + 1)?))),
            Expr::Cmp { op, left, right } => self.cmp(*op, left, right),
            Expr::In { value, list } => self.in_list(value, list),
            Expr::IsNull(inner) => match inner.as_ref() {
                Expr::Column(path) => self.column(path).map(|col| Some(Node::IsNull { col })),
                _ => Ok(None),
            },
            _ => Ok(None),
        };
        // Not a column against literals: evaluated per row (no pruning).
        let leaf = match simple {
            Ok(Some(node)) => Ok(node),
            Ok(None) => self.boolean(e, depth + 1).map(|t| Node::Eval(Box::new(t))),
            Err(err) => Err(err),
        };
        match leaf {
            Err(_) if self.binding == Binding::Lenient => Ok(Node::Unknown),
            other => other,
        }
    }

    /// `left op right` as a prunable leaf when it is a column and a
    /// literal; `None` for any other shape.
    fn cmp(&mut self, op: Op, left: &Expr, right: &Expr) -> Result<Option<Node>> {
        let (path, op, lit) = match (left, right) {
            (Expr::Column(path), Expr::Literal(lit)) => (path, op, lit),
            (Expr::Literal(lit), Expr::Column(path)) => (path, op.flipped(), lit),
            _ => return Ok(None),
        };
        let col = self.column(path)?;
        let c = self.bound(col)?;
        if matches!(lit, Literal::Binary(_)) || matches!(c.data_type, DataType::Binary) {
            return Ok(None);
        }
        let value = convert(lit, c, &self.zone)?;
        Ok(Some(Node::Cmp { col, op, value }))
    }

    /// `value IN (…)` as a prunable leaf when it is a column and literals;
    /// `None` for any other shape.
    fn in_list(&mut self, value: &Expr, list: &[Expr]) -> Result<Option<Node>> {
        let Expr::Column(path) = value else {
            return Ok(None);
        };
        if !list
            .iter()
            .all(|v| matches!(v, Expr::Literal(l) if !matches!(l, Literal::Binary(_))))
        {
            return Ok(None);
        }
        let col = self.column(path)?;
        let c = self.bound(col)?.clone();
        if matches!(c.data_type, DataType::Binary) {
            return Ok(None);
        }
        let mut values = Vec::new();
        let mut has_null = false;
        for v in list {
            let Expr::Literal(lit) = v else {
                return Ok(None);
            };
            match convert(lit, &c, &self.zone)? {
                Some(v) => values.push(v),
                None => has_null = true,
            }
        }
        Ok(Some(Node::In {
            col,
            values,
            has_null,
        }))
    }

    fn bound(&self, col: usize) -> Result<&BoundColumn> {
        self.columns
            .get(col)
            .ok_or_else(|| Error::Internal(format!("predicate column {col} not bound")))
    }
}

fn type_error(lit: &Literal, c: &BoundColumn) -> Error {
    Error::UnsupportedPredicate(format!(
        "predicate value {lit} does not convert exactly to column {} of type {}",
        column_text(&c.logical),
        c.data_type
    ))
}

/// Convert a literal to `c`'s comparison domain (`None` for NULL); a
/// timestamp or date without an offset compared with a TIMESTAMP is a wall
/// clock reading in `zone`, as Spark reads it in its session time zone.
pub(crate) fn convert(
    lit: &Literal,
    c: &BoundColumn,
    zone: &super::TimeZone,
) -> Result<Option<Val>> {
    if *lit == Literal::Null {
        return Ok(None);
    }
    let err = || type_error(lit, c);
    let text = match lit {
        Literal::Number(s) | Literal::Str(s) => Some(s.as_str()),
        _ => None,
    };
    let v = match &c.data_type {
        DataType::Byte | DataType::Short | DataType::Integer | DataType::Long => {
            let s = text.ok_or_else(err)?;
            let v = parse_decimal_value(s.trim(), 38, 0).ok_or_else(err)?;
            let (lo, hi) = match c.data_type {
                DataType::Byte => (i128::from(i8::MIN), i128::from(i8::MAX)),
                DataType::Short => (i128::from(i16::MIN), i128::from(i16::MAX)),
                DataType::Integer => (i128::from(i32::MIN), i128::from(i32::MAX)),
                _ => (i128::from(i64::MIN), i128::from(i64::MAX)),
            };
            if v < lo || v > hi {
                return Err(err());
            }
            Val::Int(v)
        }
        DataType::Float | DataType::Double => {
            let f = match lit {
                // Given as a double (Spark's pushed values, CAST('NaN' AS
                // DOUBLE)): NaN and infinities are values like any other
                // (arrow's and Spark's comparisons both order NaN last).
                Literal::Double(d) => *d,
                _ => {
                    let s = text.ok_or_else(err)?;
                    let f: f64 = s.trim().parse().map_err(|_| err())?;
                    if f.is_nan() {
                        return Err(err());
                    }
                    f
                }
            };
            Val::Float(if c.data_type == DataType::Float {
                f64::from(f as f32)
            } else {
                f
            })
        }
        DataType::Decimal { precision, scale } => {
            let s = text.ok_or_else(err)?;
            Val::Int(parse_decimal_value(s.trim(), *precision, *scale).ok_or_else(err)?)
        }
        DataType::String => match lit {
            Literal::Str(s) => Val::Str(s.clone()),
            _ => return Err(err()),
        },
        DataType::Boolean => match lit {
            Literal::Bool(b) => Val::Bool(*b),
            Literal::Str(s) if s.eq_ignore_ascii_case("true") => Val::Bool(true),
            Literal::Str(s) if s.eq_ignore_ascii_case("false") => Val::Bool(false),
            _ => return Err(err()),
        },
        DataType::Date => match lit {
            Literal::Date(s) | Literal::Str(s) => Val::Int(i128::from(
                parse_date(s.trim()).and_then(epoch_days).ok_or_else(err)?,
            )),
            _ => return Err(err()),
        },
        DataType::Timestamp | DataType::TimestampNtz => {
            let zoned = c.data_type == DataType::Timestamp;
            match lit {
                Literal::Date(s) => {
                    let days = parse_date(s.trim()).and_then(epoch_days).ok_or_else(err)?;
                    let local =
                        i64::try_from(i128::from(days) * MICROS_PER_DAY).map_err(|_| err())?;
                    Val::Int(i128::from(if zoned {
                        zone.local_to_utc(local)?
                    } else {
                        local
                    }))
                }
                Literal::Str(s) => Val::Int(i128::from(if zoned {
                    zone.instant_of(s.trim()).ok_or_else(err)?
                } else {
                    parse_timestamp_micros(s.trim(), false)
                        .or_else(|| {
                            parse_date(s.trim())
                                .and_then(epoch_days)
                                .and_then(|d| d.checked_mul(86_400_000_000))
                        })
                        .ok_or_else(err)?
                })),
                Literal::Timestamp(s) | Literal::TimestampNtz(s) => {
                    Val::Int(i128::from(if zoned {
                        zone.timestamp_instant(s.trim()).ok_or_else(err)?
                    } else {
                        parse_timestamp_micros(s.trim(), false).ok_or_else(err)?
                    }))
                }
                _ => return Err(err()),
            }
        }
        DataType::Binary
        | DataType::Struct(_)
        | DataType::Array { .. }
        | DataType::Map { .. }
        | DataType::Variant => {
            return Err(Error::UnsupportedPredicate(format!(
                "predicates on column {} of type {} are not supported",
                column_text(&c.logical),
                c.data_type
            )))
        }
    };
    Ok(Some(v))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::log::schema::StructField;

    pub(crate) fn schema() -> StructType {
        StructType::new(vec![
            StructField::new("id", DataType::Long, true),
            StructField::new("part", DataType::String, true),
            StructField::new("x", DataType::Double, true),
            StructField::new("d", DataType::Date, true),
            StructField::new(
                "amount",
                DataType::Decimal {
                    precision: 10,
                    scale: 2,
                },
                true,
            ),
            StructField::new("a name", DataType::Integer, true),
            StructField::new("small", DataType::Byte, true),
            StructField::new("f", DataType::Float, true),
            StructField::new("b", DataType::Boolean, true),
            StructField::new("t", DataType::Timestamp, true),
            StructField::new("ntz", DataType::TimestampNtz, true),
            StructField::new("bin", DataType::Binary, true),
            StructField::new(
                "st",
                DataType::Struct(StructType::new(vec![StructField::new(
                    "Inner",
                    DataType::Integer,
                    true,
                )])),
                true,
            ),
        ])
    }

    pub(crate) fn bind(text: &str) -> Result<Predicate> {
        Predicate::new(
            text,
            &schema(),
            &["part".to_string()],
            ColumnMappingMode::None,
            Binding::Strict,
        )
    }

    fn lenient(text: &str) -> Predicate {
        Predicate::new(
            text,
            &schema(),
            &[],
            ColumnMappingMode::None,
            Binding::Lenient,
        )
        .unwrap()
    }

    /// The one value `text` (`col op literal`) binds to.
    fn value(text: &str) -> Option<Val> {
        match bind(text).unwrap().root {
            Node::Cmp { value, .. } => value,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn literals_convert_to_the_column_type() {
        assert_eq!(value("id = -12"), Some(Val::Int(-12)));
        assert_eq!(value("id = '7'"), Some(Val::Int(7)));
        assert_eq!(value("id = 1e2"), Some(Val::Int(100)));
        assert_eq!(value("small = 127"), Some(Val::Int(127)));
        assert_eq!(value("x = 1.5"), Some(Val::Float(1.5)));
        assert_eq!(value("f = 0.1"), Some(Val::Float(f64::from(0.1f32))));
        assert_eq!(value("amount = 1.5"), Some(Val::Int(150)));
        assert_eq!(value("amount = '-0.01'"), Some(Val::Int(-1)));
        assert_eq!(value("part = 'it''s'"), Some(Val::Str("it's".into())));
        assert_eq!(value("b = TRUE"), Some(Val::Bool(true)));
        assert_eq!(value("b = 'false'"), Some(Val::Bool(false)));
        assert_eq!(value("d = DATE '1970-01-02'"), Some(Val::Int(1)));
        assert_eq!(value("d = '1969-12-31'"), Some(Val::Int(-1)));
        assert_eq!(
            value("t = DATE '1970-01-02'"),
            Some(Val::Int(MICROS_PER_DAY))
        );
        assert_eq!(
            value("t = TIMESTAMP '1970-01-01 00:00:01.000002+01:00'"),
            Some(Val::Int(-3_600_000_000 + 1_000_002))
        );
        assert_eq!(
            value("ntz = TIMESTAMP_NTZ '1970-01-01 00:00:01'"),
            Some(Val::Int(1_000_000))
        );
        assert_eq!(value("t = '1970-01-02'"), Some(Val::Int(MICROS_PER_DAY)));
        assert_eq!(value("id = NULL"), None);
        // literal on the left: the operator flips
        let p = bind("5 < id").unwrap();
        assert!(matches!(p.root, Node::Cmp { op: Op::Gt, .. }));
        // nested fields, case-insensitively
        let p = bind("ST.inner = 3").unwrap();
        assert_eq!(p.columns()[0].logical, vec!["st", "Inner"]);
        // one column bound once
        assert_eq!(
            bind("id = 1 OR id > 5 OR ID IS NULL")
                .unwrap()
                .columns()
                .len(),
            1
        );
    }

    #[test]
    fn doubles_given_as_doubles_keep_nan_and_infinity() {
        let Some(Val::Float(f)) = value("x = CAST('NaN' AS DOUBLE)") else {
            panic!()
        };
        assert!(f.is_nan());
        assert_eq!(
            value("x < CAST('inf' AS DOUBLE)"),
            Some(Val::Float(f64::INFINITY))
        );
        // NaN as text is not a number of the column: refused, as before
        assert!(bind("x = 'NaN'").is_err());
        // a double is no integer, decimal or string
        for text in [
            "id = CAST('1' AS DOUBLE)",
            "amount = CAST('1' AS DOUBLE)",
            "part = CAST('1' AS DOUBLE)",
        ] {
            assert!(
                bind(text)
                    .unwrap_err()
                    .to_string()
                    .contains("does not convert"),
                "{text}"
            );
        }
    }

    #[test]
    fn strict_binding_refuses_what_does_not_convert() {
        let cases = [
            (
                "nope = 1",
                "predicate column nope is not in the table (columns: id, part",
            ),
            (
                "st.nope = 1",
                "predicate column st.nope is not in the table",
            ),
            ("id.x = 1", "predicate column id.x is not in the table"),
            (
                "id = 'abc'",
                "does not convert exactly to column id of type long",
            ),
            ("id = 1.5", "does not convert"),
            ("id = 9223372036854775808", "does not convert"),
            ("small = 128", "does not convert"),
            (
                "amount = 1.005",
                "does not convert exactly to column amount",
            ),
            ("amount = 123456789.1", "does not convert"),
            ("part = 1", "does not convert"),
            ("b = 1", "does not convert"),
            ("d = '2024-02-30'", "does not convert"),
            ("d = TIMESTAMP '2024-01-01 00:00:00'", "does not convert"),
            ("t = 'yesterday'", "does not convert"),
            ("st = 1", "predicates on column st of type struct"),
            ("d < 1", "does not convert"),
            (
                "d < `a name`",
                "cannot compare d (date) with `a name` (integer)",
            ),
            ("part + 1 > 2", "cannot apply + to string and integer"),
            ("CASE WHEN id > 1 THEN d ELSE 0 END = 1", "no common type"),
        ];
        for (text, want) in cases {
            let err = bind(text).unwrap_err();
            let message = err.to_string();
            assert!(message.contains(want), "{text}: {message}");
            // an unknown column is the caller's mistake; the rest is outside the subset
            let unknown_column = message.contains("is not in the table");
            assert_eq!(
                matches!(err, Error::InvalidArgument(_)),
                unknown_column,
                "{text}: {err:?}"
            );
        }
        // a tree that is a value, not a predicate
        let e = Expr::column(&["id"]);
        let err = Predicate::bind(
            &Filter::Expr(e),
            &schema(),
            &[],
            ColumnMappingMode::None,
            Binding::Strict,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("is a value of type long, not a condition"),
            "{err}"
        );
    }

    #[test]
    fn lenient_binding_turns_what_does_not_bind_into_unknown() {
        let p = lenient("nope = 1 AND id = 3 AND id + 1 > 2 AND x = 'NaN' AND part + 1 > 2");
        let Node::And(parts) = &p.root else { panic!() };
        assert_eq!(parts.len(), 5);
        assert_eq!(
            parts.iter().filter(|n| **n == Node::Unknown).count(),
            3,
            "{parts:?}"
        );
        // arithmetic binds, for evaluation only
        assert!(matches!(parts[2], Node::Eval(_)), "{parts:?}");
        // syntax errors stay errors: there is nothing to bind
        assert!(Predicate::new(
            "id =",
            &schema(),
            &[],
            ColumnMappingMode::None,
            Binding::Lenient
        )
        .is_err());
    }

    #[test]
    fn column_mapping_gives_physical_names() {
        let schema = StructType::parse(
            r#"{"type":"struct","fields":[{"name":"Id","type":"long","nullable":true,
            "metadata":{"delta.columnMapping.id":7,"delta.columnMapping.physicalName":"col-7"}}]}"#,
        )
        .unwrap();
        let p = Predicate::new(
            "id = 1",
            &schema,
            &["Id".to_string()],
            ColumnMappingMode::Name,
            Binding::Strict,
        )
        .unwrap();
        let c = &p.columns()[0];
        assert_eq!(c.logical, vec!["Id"]);
        assert_eq!(c.physical, vec!["col-7"]);
        assert_eq!(c.field_id, Some(7));
        assert!(c.partition);
    }

    #[test]
    fn trees_bind_like_their_sql() {
        let e = Expr::from_json(
            r#"{"and": [{"cmp": {"op": ">", "left": {"literal": {"number": "5"}}, "right": {"column": ["ID"]}}},
                        {"in": {"value": {"column": ["part"]}, "list": [{"literal": {"string": "a"}}, {"literal": "null"}]}}]}"#,
        )
        .unwrap();
        let tree = Predicate::bind(
            &Filter::Expr(e.clone()),
            &schema(),
            &["part".to_string()],
            ColumnMappingMode::None,
            Binding::Strict,
        )
        .unwrap();
        let sql = bind("5 > ID AND part IN ('a', NULL)").unwrap();
        assert_eq!(tree.root, sql.root);
        assert_eq!(tree.columns, sql.columns);
        assert_eq!(tree.text(), e.to_string());
    }
}
