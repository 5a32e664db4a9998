//! Expressions: deltadv's SQL subset for predicates and for the values UPDATE
//! `SET`s and MERGE assigns and inserts, as text or as JSON, bound to a table
//! schema. Predicates are used two ways: to prune (partitions, files, row
//! groups) and to evaluate over Arrow; values ([`ValueExpr`]) are evaluated
//! over Arrow into the column's type.
//!
//! | file         | what it does                                                        |
//! |--------------|---------------------------------------------------------------------|
//! | `mod.rs`     | the tree ([`Expr`], [`Literal`], [`Op`]), its SQL printing, its JSON form, the grammar (here) |
//! | [`parse`]    | SQL text → [`Expr`] with the `sqlparser` crate; refuses what deltadv does not evaluate |
//! | [`bind`]     | [`Expr`] + table schema → [`Predicate`]: columns resolved (nested, column mapping), literals converted to the column's type, strictly or leniently |
//! | [`prune`]    | [`Predicate::may_match`] over what is known of a set of rows: partition values, `add.stats` ([`PruningStats`]), any [`ColumnStats`] |
//! | [`eval`]     | [`Predicate::evaluate`]: SQL three-valued logic over an Arrow batch with arrow kernels |
//! | [`value`]    | typed trees with Spark's type rules: [`ValueExpr`] (UPDATE/MERGE values) and predicates beyond column-vs-literal |
//! | [`zone`]     | [`TimeZone`]: the session time zone date parts, casts and offset-less literals of TIMESTAMPs are read in (Spark's `spark.sql.session.timeZone`) |
//!
//! Parquet row-group statistics are read in `scan::pruning` (they need the
//! file's footer and the Delta → parquet column resolution, which are the
//! scan's business); it hands them here as [`ColumnStats`].
//!
//! # The grammar
//!
//! This is the one description of what deltadv accepts; the README, the
//! Python docs and the Spark data source point here. Keywords are
//! case-insensitive; SQL is tokenized and parsed by `sqlparser` with Spark's
//! conventions (back-quoted identifiers, `'…'` and `"…"` strings, `''` for a
//! quote inside a string, no backslash escapes).
//!
//! ```text
//! predicate := predicate OR predicate | predicate AND predicate | NOT predicate
//!            | "(" predicate ")"
//!            | value op value                  op := = == != <> < <= > >= <=>
//!            | value [NOT] IN "(" value ("," value)* ")"
//!            | value IS [NOT] NULL
//!            | value [NOT] BETWEEN value AND value
//! value     := column | literal | "(" value ")"
//!            | value (+ | - | * | /) value | - value
//!            | CASE WHEN predicate THEN value [WHEN …]* [ELSE value] END
//!            | CASE value WHEN value THEN value [WHEN …]* [ELSE value] END
//!            | CAST "(" value AS type ")"
//!            | value || value | CONCAT "(" value ("," value)* ")"
//!            | (YEAR | MONTH | DAY) "(" value ")"   (of a date or timestamp)
//!            | (HOUR | MINUTE | SECOND) "(" value ")"   (of a timestamp)
//!            | predicate                      (a boolean value, e.g. in SET)
//! type      := BOOLEAN | TINYINT | SMALLINT | INT | BIGINT | FLOAT | DOUBLE
//!            | DECIMAL [(p [, s])] | STRING | BINARY | DATE | TIMESTAMP | TIMESTAMP_NTZ
//! column    := name ("." name)*              name := letter (letter | digit | _)* | `back quoted`
//! literal   := number | 'string' | "string" | TRUE | FALSE | NULL
//!            | DATE 'YYYY-MM-DD' | TIMESTAMP '…' | TIMESTAMP_NTZ '…'
//!            | X'hex' | CAST('…' AS DOUBLE)    number := [-] digits [. digits] [e [±] digits] [L]
//! ```
//!
//! Everything above is evaluated, with Spark SQL's ANSI semantics (Spark 4's
//! default) where they matter:
//!
//! * a comparison, `IN` or `IS NULL` of a **column with literals** binds to a
//!   leaf that also prunes files and row groups; any other predicate (two
//!   columns, arithmetic, `CASE`, …) is evaluated per row and prunes nothing;
//! * types are widened as Spark does: integers to the wider integer, integers
//!   and decimals to a decimal, anything with a float or double to double; a
//!   string compared with a number, date or timestamp is cast to that type;
//! * `+ - *` of integers stay integers and fail on overflow; `/` of integers
//!   gives a double; division by zero fails (`DIVIDE_BY_ZERO` in Spark);
//! * `CAST` fails on a value that does not convert (`'abc'` to INT), as ANSI
//!   casts do; `||`/`CONCAT` casts other types to strings, NULL when any part
//!   is NULL; `CASE` returns the widest type of its branches.
//!
//! Anything else (`LIKE`, other functions, `%`, subqueries, …) is refused by
//! the parser with [`Error::UnsupportedPredicate`](crate::Error::UnsupportedPredicate),
//! naming the construct and its character position. Parentheses, `NOT`s,
//! operators and `CASE` may nest at most [`MAX_PREDICATE_DEPTH`] levels (an
//! [`Error::InvalidArgument`](crate::Error::InvalidArgument): a limit of
//! deltadv's, not a construct outside the subset).
//!
//! A literal is converted to its column's type when the predicate is bound (a
//! string `'2024-01-02'` compares with a date column as a date); values that
//! do not convert exactly are an error in strict binding and "unknown" (no
//! pruning) in lenient binding.
//!
//! # The JSON form
//!
//! The same tree as JSON (serde's externally tagged enums), which is how
//! Spark's pushed filters reach Rust (no SQL is re-rendered). Each node is an
//! object with one key:
//!
//! ```text
//! {"column": ["a", "b"]}                       a.b (one string per nesting level)
//! {"literal": L}                               L is one of:
//!     "null" | {"bool": true} | {"number": "-1.50"} | {"double": "NaN"}
//!     | {"string": "it's"} | {"date": "2024-02-29"}
//!     | {"timestamp": "2024-01-02 03:04:05.000060Z"}      (with an offset or Z)
//!     | {"timestamp_ntz": "2024-01-02 03:04:05"} | {"binary": "0aff"}
//! {"and": [E, …]}  {"or": [E, …]}  {"not": E}  {"is_null": E}
//! {"cmp": {"op": "=", "left": E, "right": E}}  op: = != < <= > >= <=>
//! {"in": {"value": E, "list": [E, …]}}
//! {"arith": {"op": "+", "left": E, "right": E}}  op: + - * /
//! {"neg": E}
//! {"case": {"when": [[E, E], …], "otherwise": E | null}}
//! {"cast": {"expr": E, "to": "decimal(10,2)"}}  to: a Delta type name
//! {"concat": [E, …]}
//! {"date_part": {"part": "year", "expr": E}}   part: year, month, day, hour, minute, second
//! ```
//!
//! Numbers travel as text (`"number"`: exact decimal digits; `"double"`: the
//! shortest text that round-trips, or `NaN`, `inf`, `-inf`), so no value is
//! rounded on the way. A [`Filter`] is either form: a JSON string is SQL text,
//! a JSON object is the tree.

pub mod bind;
pub mod eval;
pub mod parse;
pub mod prune;
pub mod relation;
pub mod rewrite;
pub mod value;
pub mod zone;

use std::fmt;

use serde::{Deserialize, Serialize};

pub use self::bind::{Binding, BoundColumn, Predicate, Val};
pub use self::prune::{ColumnStats, PruningStats};
pub use self::value::ValueExpr;
pub use self::zone::TimeZone;

/// Deepest nesting of parentheses, `NOT`s, arithmetic operators and `CASE`s
/// an expression may have. The parser and everything that walks the tree
/// recurse once per level, so this bounds their stack use whatever the text.
pub const MAX_PREDICATE_DEPTH: usize = 128;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    #[serde(rename = "=")]
    Eq,
    #[serde(rename = "!=")]
    Ne,
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = ">=")]
    Ge,
    /// `<=>`: equal, with NULL <=> NULL true and never NULL itself.
    #[serde(rename = "<=>")]
    NullSafeEq,
}

impl Op {
    /// The operator with its operands swapped (`5 < x` is `x > 5`).
    pub fn flipped(self) -> Op {
        match self {
            Op::Lt => Op::Gt,
            Op::Le => Op::Ge,
            Op::Gt => Op::Lt,
            Op::Ge => Op::Le,
            other => other,
        }
    }

    /// The complement for non-null operands (`NOT (x < 5)` is `x >= 5`).
    pub fn negated(self) -> Op {
        match self {
            Op::Eq => Op::Ne,
            Op::Ne => Op::Eq,
            Op::Lt => Op::Ge,
            Op::Le => Op::Gt,
            Op::Gt => Op::Le,
            Op::Ge => Op::Lt,
            Op::NullSafeEq => Op::NullSafeEq,
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::NullSafeEq => "<=>",
        }
    }
}

/// An arithmetic operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArithOp {
    #[serde(rename = "+")]
    Add,
    #[serde(rename = "-")]
    Sub,
    #[serde(rename = "*")]
    Mul,
    #[serde(rename = "/")]
    Div,
}

impl ArithOp {
    pub fn symbol(self) -> &'static str {
        match self {
            ArithOp::Add => "+",
            ArithOp::Sub => "-",
            ArithOp::Mul => "*",
            ArithOp::Div => "/",
        }
    }
}

/// A literal as written; typed when bound to a column.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Literal {
    Null,
    Bool(bool),
    /// Number text, sign included (`-12`, `1.5`, `2e3`): exact.
    Number(String),
    /// A double given as one (`CAST('NaN' AS DOUBLE)`, or Spark's pushed
    /// floats): NaN and infinities included.
    Double(#[serde(with = "double_text")] f64),
    #[serde(rename = "string")]
    Str(String),
    Date(String),
    Timestamp(String),
    TimestampNtz(String),
    Binary(#[serde(with = "hex_bytes")] Vec<u8>),
}

impl PartialEq for Literal {
    fn eq(&self, other: &Self) -> bool {
        use Literal::*;
        match (self, other) {
            (Null, Null) => true,
            (Bool(a), Bool(b)) => a == b,
            (Number(a), Number(b))
            | (Str(a), Str(b))
            | (Date(a), Date(b))
            | (Timestamp(a), Timestamp(b))
            | (TimestampNtz(a), TimestampNtz(b)) => a == b,
            // Bit-exact, so NaN equals itself and a tree equals its reparse.
            (Double(a), Double(b)) => a.to_bits() == b.to_bits(),
            (Binary(a), Binary(b)) => a == b,
            _ => false,
        }
    }
}

/// Serde for doubles as text (`"1.5"`, `"NaN"`, `"inf"`, `"-inf"`): JSON
/// numbers cannot hold NaN or infinities.
mod double_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::double_string(*v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        let text = String::deserialize(d)?;
        super::parse_double(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("invalid double {text:?}")))
    }
}

/// Serde for bytes as lower-case hex.
mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::hex(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        super::unhex(&text).ok_or_else(|| serde::de::Error::custom(format!("invalid hex {text:?}")))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A double as the shortest text that parses back to it (`NaN`, `inf`, `-inf`).
fn double_string(v: f64) -> String {
    format!("{v:?}")
}

/// Text to a double: Rust's float syntax, plus `Infinity`/`-Infinity` (Spark's
/// spelling). `None` for anything else.
fn parse_double(text: &str) -> Option<f64> {
    let t = text.trim();
    match t {
        "Infinity" | "+Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        _ => t.parse().ok(),
    }
}

/// An expression: a predicate or a value. See the module docs for the grammar
/// and the JSON form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expr {
    /// A column by path (top-level name first), as written.
    Column(Vec<String>),
    Literal(Literal),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
    Cmp {
        op: Op,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    In {
        value: Box<Expr>,
        list: Vec<Expr>,
    },
    IsNull(Box<Expr>),
    Arith {
        op: ArithOp,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    Neg(Box<Expr>),
    /// `CASE WHEN c THEN v … ELSE otherwise END` (`otherwise` None: NULL).
    Case {
        when: Vec<(Expr, Expr)>,
        otherwise: Option<Box<Expr>>,
    },
    /// `CAST(expr AS type)`; `to` is a Delta primitive type name
    /// (`integer`, `long`, `decimal(10,2)`, `string`, `timestamp_ntz`, …).
    Cast {
        expr: Box<Expr>,
        to: String,
    },
    /// String concatenation (`a || b`, `concat(a, b, …)`): NULL when any
    /// part is NULL; non-string parts are cast to strings.
    Concat(Vec<Expr>),
    /// `YEAR(x)`, `MONTH(x)`, `DAY(x)` of a date or timestamp, `HOUR(x)`,
    /// `MINUTE(x)`, `SECOND(x)` of a timestamp (`part`: `year`, `month`,
    /// `day`, `hour`, `minute` or `second`): an INT.
    DatePart {
        part: String,
        expr: Box<Expr>,
    },
}

impl Expr {
    /// `column op literal`.
    pub fn cmp(column: &[&str], op: Op, value: Literal) -> Expr {
        Expr::Cmp {
            op,
            left: Box::new(Expr::column(column)),
            right: Box::new(Expr::Literal(value)),
        }
    }

    /// A column by path.
    pub fn column(path: &[&str]) -> Expr {
        Expr::Column(path.iter().map(|p| p.to_string()).collect())
    }

    /// The tree from its JSON form (see the module docs).
    pub fn from_json(text: &str) -> crate::Result<Expr> {
        // serde_json refuses nesting deeper than 128 JSON levels, which
        // bounds the tree's depth (and so every walk over it).
        serde_json::from_str(text)
            .map_err(|e| crate::Error::InvalidArgument(format!("invalid expression JSON: {e}")))
    }

    /// The tree's JSON form.
    pub fn to_json(&self) -> crate::Result<String> {
        serde_json::to_string(self).map_err(|source| crate::Error::Json {
            context: "expression".into(),
            source,
        })
    }
}

/// A predicate as a caller gives it: SQL text or a tree. In JSON (scan
/// tasks), a string is SQL and an object is the tree's JSON form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Filter {
    Sql(String),
    Expr(Expr),
}

impl From<&str> for Filter {
    fn from(text: &str) -> Self {
        Filter::Sql(text.to_string())
    }
}

impl From<Expr> for Filter {
    fn from(e: Expr) -> Self {
        Filter::Expr(e)
    }
}

const KEYWORDS: &[&str] = &[
    "AND",
    "OR",
    "NOT",
    "IN",
    "IS",
    "NULL",
    "BETWEEN",
    "TRUE",
    "FALSE",
    "DATE",
    "TIMESTAMP",
    "TIMESTAMP_NTZ",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "CAST",
    "AS",
];

/// A column path as SQL: plain names bare, anything else back-quoted.
pub fn column_text(path: &[String]) -> String {
    path.iter()
        .map(|p| {
            let plain = p
                .chars()
                .enumerate()
                .all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
            let keyword = KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(p));
            if plain && !p.is_empty() && !keyword {
                p.clone()
            } else {
                format!("`{}`", p.replace('`', "``"))
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Null => write!(f, "NULL"),
            Literal::Bool(b) => write!(f, "{}", if *b { "TRUE" } else { "FALSE" }),
            Literal::Number(n) => write!(f, "{n}"),
            Literal::Double(d) => write!(f, "CAST({} AS DOUBLE)", quote(&double_string(*d))),
            Literal::Str(s) => write!(f, "{}", quote(s)),
            Literal::Date(s) => write!(f, "DATE {}", quote(s)),
            Literal::Timestamp(s) => write!(f, "TIMESTAMP {}", quote(s)),
            Literal::TimestampNtz(s) => write!(f, "TIMESTAMP_NTZ {}", quote(s)),
            Literal::Binary(b) => write!(f, "X'{}'", hex(b)),
        }
    }
}

/// An operand of a comparison, `IN` or `IS NULL`: a predicate in parentheses.
fn operand(e: &Expr) -> String {
    match e {
        Expr::Cmp { .. } | Expr::In { .. } | Expr::IsNull(_) => format!("({e})"),
        _ => e.to_string(),
    }
}

/// SQL that parses back to the same tree: every compound node in parentheses.
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |f: &mut fmt::Formatter<'_>, parts: &[Expr], sep: &str| -> fmt::Result {
            write!(f, "(")?;
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    write!(f, " {sep} ")?;
                }
                write!(f, "{p}")?;
            }
            write!(f, ")")
        };
        match self {
            Expr::Column(path) => write!(f, "{}", column_text(path)),
            Expr::Literal(l) => write!(f, "{l}"),
            Expr::And(parts) => join(f, parts, "AND"),
            Expr::Or(parts) => join(f, parts, "OR"),
            Expr::Not(e) => write!(f, "(NOT {e})"),
            Expr::Cmp { op, left, right } => {
                write!(f, "{} {} {}", operand(left), op.symbol(), operand(right))
            }
            Expr::In { value, list } => {
                let vals: Vec<String> = list.iter().map(ToString::to_string).collect();
                write!(f, "{} IN ({})", operand(value), vals.join(", "))
            }
            Expr::IsNull(e) => write!(f, "{} IS NULL", operand(e)),
            Expr::Arith { op, left, right } => write!(f, "({left} {} {right})", op.symbol()),
            // The space keeps `- -5` from reading as a `--` comment.
            Expr::Neg(e) => write!(f, "(- {e})"),
            Expr::Case { when, otherwise } => {
                write!(f, "(CASE")?;
                for (c, v) in when {
                    write!(f, " WHEN {c} THEN {v}")?;
                }
                if let Some(e) = otherwise {
                    write!(f, " ELSE {e}")?;
                }
                write!(f, " END)")
            }
            Expr::Cast { expr, to } => write!(f, "CAST({expr} AS {})", sql_type_name(to)),
            Expr::Concat(parts) => join(f, parts, "||"),
            Expr::DatePart { part, expr } => write!(f, "{}({expr})", part.to_uppercase()),
        }
    }
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Filter::Sql(text) => write!(f, "{text}"),
            Filter::Expr(e) => write!(f, "{e}"),
        }
    }
}

/// A Delta primitive type name as SQL's (`long` → `BIGINT`), for printing.
fn sql_type_name(delta: &str) -> String {
    match delta {
        "byte" => "TINYINT".into(),
        "short" => "SMALLINT".into(),
        "integer" => "INT".into(),
        "long" => "BIGINT".into(),
        other => other.to_ascii_uppercase(),
    }
}

/// Longest prefix of a predicate quoted in an error message.
const QUOTED_TEXT_LIMIT: usize = 200;

/// `text` for an error message, cut to its first [`QUOTED_TEXT_LIMIT`] characters.
pub(crate) fn quoted(text: &str) -> String {
    match text.char_indices().nth(QUOTED_TEXT_LIMIT) {
        Some((cut, _)) => format!(
            "{:?}... ({} bytes)",
            text.get(..cut).unwrap_or(text),
            text.len()
        ),
        None => format!("{text:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_form_round_trips_every_node() {
        let e = Expr::Or(vec![
            Expr::And(vec![
                Expr::cmp(&["a", "b c"], Op::NullSafeEq, Literal::Null),
                Expr::Not(Box::new(Expr::IsNull(Box::new(Expr::column(&["s"]))))),
            ]),
            Expr::In {
                value: Box::new(Expr::column(&["x"])),
                list: vec![
                    Expr::Literal(Literal::Double(f64::NAN)),
                    Expr::Literal(Literal::Double(f64::NEG_INFINITY)),
                    Expr::Literal(Literal::Double(0.1)),
                ],
            },
            Expr::cmp(&["d"], Op::Ge, Literal::Date("2024-02-29".into())),
            Expr::cmp(
                &["t"],
                Op::Lt,
                Literal::Timestamp("2024-01-02 03:04:05.000060Z".into()),
            ),
            Expr::cmp(
                &["n"],
                Op::Le,
                Literal::TimestampNtz("1999-12-31 23:59:59".into()),
            ),
            Expr::cmp(&["m"], Op::Eq, Literal::Number("-1.50".into())),
            Expr::cmp(&["s"], Op::Ne, Literal::Str("it's \"q\"".into())),
            Expr::cmp(&["bin"], Op::Eq, Literal::Binary(vec![0, 0xff, 0x10])),
            Expr::cmp(&["flag"], Op::Eq, Literal::Bool(false)),
            Expr::Cmp {
                op: Op::Gt,
                left: Box::new(Expr::Case {
                    when: vec![(
                        Expr::cmp(&["a"], Op::Gt, Literal::Number("1".into())),
                        Expr::Arith {
                            op: ArithOp::Mul,
                            left: Box::new(Expr::column(&["a"])),
                            right: Box::new(Expr::Neg(Box::new(Expr::column(&["b"])))),
                        },
                    )],
                    otherwise: None,
                }),
                right: Box::new(Expr::Literal(Literal::Number("0".into()))),
            },
        ]);
        let json = e.to_json().unwrap();
        assert_eq!(Expr::from_json(&json).unwrap(), e);
        // and as a Filter (an object is the tree)
        let f: Filter = serde_json::from_str(&json).unwrap();
        assert_eq!(f, Filter::Expr(e.clone()));
        let f: Filter = serde_json::from_str("\"id = 1\"").unwrap();
        assert_eq!(f, Filter::Sql("id = 1".into()));
        // the printed SQL parses back to the same tree
        assert_eq!(Expr::parse(&e.to_string()).unwrap(), e);
    }

    #[test]
    fn json_form_is_as_documented() {
        let e = Expr::from_json(
            r#"{"and": [
                {"cmp": {"op": "<=", "left": {"column": ["st", "x y"]}, "right": {"literal": {"number": "1e3"}}}},
                {"in": {"value": {"column": ["x"]}, "list": [{"literal": {"double": "NaN"}}, {"literal": "null"}]}},
                {"not": {"is_null": {"column": ["d"]}}},
                {"cmp": {"op": "=", "left": {"column": ["d"]}, "right": {"literal": {"date": "0033-01-02"}}}}
            ]}"#,
        )
        .unwrap();
        assert_eq!(
            e.to_string(),
            "(st.`x y` <= 1e3 AND x IN (CAST('NaN' AS DOUBLE), NULL) AND (NOT d IS NULL) AND d = DATE '0033-01-02')"
        );
        for bad in [
            r#"{"cmp": {"op": "~", "left": {"column": ["a"]}, "right": {"literal": "null"}}}"#,
            r#"{"literal": {"double": "1.5x"}}"#,
            r#"{"literal": {"binary": "abc"}}"#,
            r#"{"column": "a"}"#,
            r#"{"nope": 1}"#,
        ] {
            let err = Expr::from_json(bad).unwrap_err().to_string();
            assert!(err.contains("invalid expression JSON"), "{bad}: {err}");
        }
        // deeper than serde_json's limit: an error, not a stack overflow
        let deep = format!(
            "{}{{\"column\":[\"a\"]}}{}",
            "{\"not\":".repeat(10_000),
            "}".repeat(10_000)
        );
        assert!(Expr::from_json(&deep).is_err());
    }

    #[test]
    fn doubles_as_text_are_exact() {
        for v in [
            0.1,
            1.0 / 3.0,
            -0.0,
            1e308,
            5e-324,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            assert_eq!(
                parse_double(&double_string(v)).unwrap().to_bits(),
                v.to_bits()
            );
        }
        assert!(parse_double("NaN").unwrap().is_nan());
        assert!(parse_double("nan").unwrap().is_nan());
        assert_eq!(parse_double("Infinity"), Some(f64::INFINITY));
        assert_eq!(parse_double("-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_double("1e+20"), Some(1e20));
        assert_eq!(parse_double("x"), None);
    }
}
