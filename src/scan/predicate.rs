//! Scan predicates: a small SQL subset, parsed, bound to a table schema, and
//! used two ways:
//!
//! * **pruning** ([`Predicate::may_match`]): given what is known about a set of
//!   rows (a partition's values, a file's stats, a row group's parquet stats),
//!   decide whether any row *might* satisfy the predicate. `false` is a proof
//!   that none does; anything unknown answers `true`. Pruning never drops a
//!   matching row, so Spark may still apply the full filter afterwards.
//! * **exact filtering** ([`Predicate::evaluate`]): SQL three-valued logic
//!   over an Arrow batch; a row is kept only where the predicate is TRUE.
//!
//! Grammar (keywords case-insensitive):
//!
//! ```text
//! expr    := or
//! or      := and ("OR" and)*
//! and     := not ("AND" not)*
//! not     := "NOT" not | primary
//! primary := "(" expr ")"
//!          | column op literal | literal op column
//!          | column ["NOT"] "IN" "(" literal ("," literal)* ")"
//!          | column "IS" ["NOT"] "NULL"
//!          | column ["NOT"] "BETWEEN" literal "AND" literal
//! op      := "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">=" | "<=>"
//! column  := name ("." name)*        name := [A-Za-z_][A-Za-z0-9_]* | `back quoted`
//! literal := ["-"] number | 'string' | TRUE | FALSE | NULL
//!          | DATE 'YYYY-MM-DD' | TIMESTAMP '…' | TIMESTAMP_NTZ '…'
//! ```
//!
//! A literal is converted to its column's type when the predicate is bound
//! (a string `'2024-01-02'` compares with a date column as a date); values
//! that do not convert exactly are an error in strict binding and "unknown"
//! (no pruning) in lenient binding.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BooleanArray, Datum, Decimal128Array, Float32Array, Float64Array, Int16Array,
    Int32Array, Int64Array, Int8Array, RecordBatch, Scalar, StringArray, StructArray,
    TimestampMicrosecondArray,
};
use arrow_schema::DataType as ArrowType;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::log::features;
use crate::log::schema::{
    epoch_days, parse_date, parse_decimal_value, parse_timestamp_micros, ColumnMappingMode,
    DataType, StructType,
};

const MICROS_PER_DAY: i128 = 86_400_000_000;

// ---------------------------------------------------------------------------
// Syntax
// ---------------------------------------------------------------------------

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `<=>`: equal, with NULL <=> NULL true and never NULL itself.
    NullSafeEq,
}

impl Op {
    /// The operator with its operands swapped (`5 < x` is `x > 5`).
    fn flipped(self) -> Op {
        match self {
            Op::Lt => Op::Gt,
            Op::Le => Op::Ge,
            Op::Gt => Op::Lt,
            Op::Ge => Op::Le,
            other => other,
        }
    }

    /// The complement for non-null operands (`NOT (x < 5)` is `x >= 5`).
    fn negated(self) -> Op {
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

    fn symbol(self) -> &'static str {
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

/// A literal as written.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    Null,
    Bool(bool),
    /// Number text, sign included (`-12`, `1.5`, `2e3`).
    Number(String),
    Str(String),
    Date(String),
    Timestamp(String),
    TimestampNtz(String),
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quoted = |s: &str| format!("'{}'", s.replace('\'', "''"));
        match self {
            Literal::Null => write!(f, "NULL"),
            Literal::Bool(b) => write!(f, "{}", if *b { "TRUE" } else { "FALSE" }),
            Literal::Number(n) => write!(f, "{n}"),
            Literal::Str(s) => write!(f, "{}", quoted(s)),
            Literal::Date(s) => write!(f, "DATE {}", quoted(s)),
            Literal::Timestamp(s) => write!(f, "TIMESTAMP {}", quoted(s)),
            Literal::TimestampNtz(s) => write!(f, "TIMESTAMP_NTZ {}", quoted(s)),
        }
    }
}

/// A parsed predicate, not yet bound to a schema.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
    Cmp {
        column: Vec<String>,
        op: Op,
        value: Literal,
    },
    In {
        column: Vec<String>,
        values: Vec<Literal>,
    },
    IsNull {
        column: Vec<String>,
    },
}

fn column_text(path: &[String]) -> String {
    path.iter()
        .map(|p| {
            let plain = p
                .chars()
                .enumerate()
                .all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
            if plain && !p.is_empty() && !is_keyword(p) {
                p.clone()
            } else {
                format!("`{}`", p.replace('`', "``"))
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

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
            Expr::And(parts) => join(f, parts, "AND"),
            Expr::Or(parts) => join(f, parts, "OR"),
            Expr::Not(e) => write!(f, "(NOT {e})"),
            Expr::Cmp { column, op, value } => {
                write!(f, "{} {} {value}", column_text(column), op.symbol())
            }
            Expr::In { column, values } => {
                let vals: Vec<String> = values.iter().map(ToString::to_string).collect();
                write!(f, "{} IN ({})", column_text(column), vals.join(", "))
            }
            Expr::IsNull { column } => write!(f, "{} IS NULL", column_text(column)),
        }
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
];

fn is_keyword(word: &str) -> bool {
    KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(word))
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Quoted(String),
    Str(String),
    Number(String),
    Op(Op),
    Minus,
    LParen,
    RParen,
    Comma,
    Dot,
}

/// Deepest nesting of parentheses and `NOT`s a predicate may have. The parser
/// and everything that walks the parsed tree recurse once per level, so this
/// bounds their stack use whatever the text.
pub const MAX_PREDICATE_DEPTH: usize = 128;

/// Longest prefix of a predicate quoted in an error message.
const QUOTED_TEXT_LIMIT: usize = 200;

/// `text` for an error message, cut to its first [`QUOTED_TEXT_LIMIT`] characters.
fn quoted(text: &str) -> String {
    match text.char_indices().nth(QUOTED_TEXT_LIMIT) {
        Some((cut, _)) => format!(
            "{:?}... ({} bytes)",
            text.get(..cut).unwrap_or(text),
            text.len()
        ),
        None => format!("{text:?}"),
    }
}

fn syntax(text: &str, at: usize, what: impl fmt::Display) -> Error {
    Error::UnsupportedPredicate(format!(
        "cannot parse predicate {} at character {at}: {what}",
        quoted(text)
    ))
}

fn tokenize(text: &str) -> Result<Vec<(usize, Token)>> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let at = |i: usize| chars.get(i).map_or(text.len(), |(p, _)| *p);
    let ch = |i: usize| chars.get(i).map(|(_, c)| *c);
    while let Some(c) = ch(i) {
        let start = at(i);
        match c {
            c if c.is_whitespace() => i += 1,
            '(' | ')' | ',' | '.' | '-' => {
                // A '.' followed by a digit starts a number (".5").
                if c == '.' && ch(i + 1).is_some_and(|d| d.is_ascii_digit()) {
                    let (tok, next) = number(&chars, i);
                    out.push((start, Token::Number(tok)));
                    i = next;
                    continue;
                }
                out.push((
                    start,
                    match c {
                        '(' => Token::LParen,
                        ')' => Token::RParen,
                        ',' => Token::Comma,
                        '.' => Token::Dot,
                        _ => Token::Minus,
                    },
                ));
                i += 1;
            }
            '\'' | '`' | '"' => {
                let quote = c;
                let mut s = String::new();
                i += 1;
                loop {
                    match ch(i) {
                        None => return Err(syntax(text, start, "unterminated quote")),
                        Some(q) if q == quote => {
                            if ch(i + 1) == Some(quote) {
                                s.push(quote);
                                i += 2;
                            } else {
                                i += 1;
                                break;
                            }
                        }
                        Some(other) => {
                            s.push(other);
                            i += 1;
                        }
                    }
                }
                out.push((
                    start,
                    if quote == '`' {
                        Token::Quoted(s)
                    } else {
                        Token::Str(s)
                    },
                ));
            }
            c if c.is_ascii_digit() => {
                let (tok, next) = number(&chars, i);
                out.push((start, Token::Number(tok)));
                i = next;
            }
            c if c.is_alphabetic() || c == '_' => {
                let mut s = String::new();
                while let Some(c) = ch(i).filter(|c| c.is_alphanumeric() || *c == '_') {
                    s.push(c);
                    i += 1;
                }
                out.push((start, Token::Word(s)));
            }
            '=' | '!' | '<' | '>' => {
                let two: String = [Some(c), ch(i + 1)].iter().flatten().collect();
                let three: String = [Some(c), ch(i + 1), ch(i + 2)].iter().flatten().collect();
                let (op, len) = if three == "<=>" {
                    (Op::NullSafeEq, 3)
                } else {
                    match two.as_str() {
                        "==" => (Op::Eq, 2),
                        "!=" | "<>" => (Op::Ne, 2),
                        "<=" => (Op::Le, 2),
                        ">=" => (Op::Ge, 2),
                        _ => match c {
                            '=' => (Op::Eq, 1),
                            '<' => (Op::Lt, 1),
                            '>' => (Op::Gt, 1),
                            _ => return Err(syntax(text, start, "unexpected '!'")),
                        },
                    }
                };
                out.push((start, Token::Op(op)));
                i += len;
            }
            other => return Err(syntax(text, start, format!("unexpected {other:?}"))),
        }
    }
    Ok(out)
}

/// Digits, an optional fraction and an optional exponent, from `i`.
fn number(chars: &[(usize, char)], mut i: usize) -> (String, usize) {
    let ch = |i: usize| chars.get(i).map(|(_, c)| *c);
    let mut s = String::new();
    while let Some(c) = ch(i).filter(|c| c.is_ascii_digit() || *c == '.') {
        s.push(c);
        i += 1;
    }
    if let Some(e) = ch(i).filter(|c| *c == 'e' || *c == 'E') {
        let sign = ch(i + 1).filter(|c| *c == '+' || *c == '-');
        let digit_at = if sign.is_some() { i + 2 } else { i + 1 };
        if ch(digit_at).is_some_and(|c| c.is_ascii_digit()) {
            s.push(e);
            if let Some(sg) = sign {
                s.push(sg);
            }
            i = digit_at;
            while let Some(c) = ch(i).filter(|c| c.is_ascii_digit()) {
                s.push(c);
                i += 1;
            }
        }
    }
    (s, i)
}

struct Parser<'a> {
    text: &'a str,
    tokens: Vec<(usize, Token)>,
    pos: usize,
    /// Open parentheses and `NOT`s around the current position.
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos).map(|(_, t)| t)
    }

    fn offset(&self) -> usize {
        self.tokens
            .get(self.pos)
            .map_or(self.text.len(), |(o, _)| *o)
    }

    fn error(&self, what: impl fmt::Display) -> Error {
        syntax(self.text, self.offset(), what)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.pos).map(|(_, t)| t.clone());
        self.pos += 1;
        t
    }

    fn keyword(&mut self, word: &str) -> bool {
        if matches!(self.peek(), Some(Token::Word(w)) if w.eq_ignore_ascii_case(word)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, token: &Token, what: &str) -> Result<()> {
        if self.peek() == Some(token) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(format!("expected {what}")))
        }
    }

    fn or(&mut self) -> Result<Expr> {
        let mut parts = vec![self.and()?];
        while self.keyword("OR") {
            parts.push(self.and()?);
        }
        Ok(if parts.len() == 1 {
            parts.remove(0)
        } else {
            Expr::Or(parts)
        })
    }

    fn and(&mut self) -> Result<Expr> {
        let mut parts = vec![self.not()?];
        while self.keyword("AND") {
            parts.push(self.not()?);
        }
        Ok(if parts.len() == 1 {
            parts.remove(0)
        } else {
            Expr::And(parts)
        })
    }

    /// One level deeper (a `NOT` or an opening parenthesis), refused past
    /// [`MAX_PREDICATE_DEPTH`]. Pair with `self.depth -= 1` on success.
    fn descend(&mut self) -> Result<()> {
        if self.depth >= MAX_PREDICATE_DEPTH {
            // A limit of deltadv's, not a construct outside its subset: an error
            // of its own, so callers with a fallback (Spark) do not hand the text on.
            return Err(Error::InvalidArgument(format!(
                "predicate nested deeper than {MAX_PREDICATE_DEPTH} levels (parentheses and NOTs) at character {}: {}",
                self.offset(),
                quoted(self.text)
            )));
        }
        self.depth += 1;
        Ok(())
    }

    fn not(&mut self) -> Result<Expr> {
        if matches!(self.peek(), Some(Token::Word(w)) if w.eq_ignore_ascii_case("NOT")) {
            self.descend()?;
            self.pos += 1;
            let inner = self.not()?;
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr> {
        if self.peek() == Some(&Token::LParen) {
            self.descend()?;
            self.pos += 1;
            let e = self.or()?;
            self.expect(&Token::RParen, "')'")?;
            self.depth -= 1;
            return Ok(e);
        }
        if self.at_column() {
            let column = self.column()?;
            return self.after_column(column);
        }
        // literal op column
        let value = self.literal()?;
        let op = match self.next() {
            Some(Token::Op(op)) => op,
            _ => {
                self.pos = self.pos.saturating_sub(1);
                return Err(self.error("expected a comparison operator"));
            }
        };
        let column = self.column()?;
        Ok(Expr::Cmp {
            column,
            op: op.flipped(),
            value,
        })
    }

    fn at_column(&self) -> bool {
        match self.peek() {
            Some(Token::Quoted(_)) => true,
            Some(Token::Word(w)) => !is_keyword(w) || self.word_is_column(),
            _ => false,
        }
    }

    /// A keyword-looking word used as a column (`date = ...`): it is a column
    /// when an operator or IN/IS/BETWEEN follows, not a literal's string.
    fn word_is_column(&self) -> bool {
        let Some(Token::Word(w)) = self.peek() else {
            return false;
        };
        let next = self.tokens.get(self.pos + 1).map(|(_, t)| t);
        let literal_prefix = ["DATE", "TIMESTAMP", "TIMESTAMP_NTZ"]
            .iter()
            .any(|k| k.eq_ignore_ascii_case(w));
        let value_word = ["NULL", "TRUE", "FALSE"]
            .iter()
            .any(|k| k.eq_ignore_ascii_case(w));
        if value_word {
            return false;
        }
        literal_prefix && !matches!(next, Some(Token::Str(_)))
    }

    fn column(&mut self) -> Result<Vec<String>> {
        let mut path = Vec::new();
        loop {
            match self.next() {
                Some(Token::Word(w)) | Some(Token::Quoted(w)) => path.push(w),
                _ => {
                    self.pos = self.pos.saturating_sub(1);
                    return Err(self.error("expected a column name"));
                }
            }
            if self.peek() == Some(&Token::Dot) {
                self.pos += 1;
            } else {
                return Ok(path);
            }
        }
    }

    fn after_column(&mut self, column: Vec<String>) -> Result<Expr> {
        if let Some(Token::Op(op)) = self.peek().cloned() {
            self.pos += 1;
            let value = self.literal()?;
            return Ok(Expr::Cmp { column, op, value });
        }
        if self.keyword("IS") {
            let negated = self.keyword("NOT");
            if !self.keyword("NULL") {
                return Err(self.error("expected NULL after IS"));
            }
            let e = Expr::IsNull { column };
            return Ok(if negated { Expr::Not(Box::new(e)) } else { e });
        }
        let negated = self.keyword("NOT");
        let e = if self.keyword("IN") {
            self.expect(&Token::LParen, "'(' after IN")?;
            let mut values = vec![self.literal()?];
            while self.peek() == Some(&Token::Comma) {
                self.pos += 1;
                values.push(self.literal()?);
            }
            self.expect(&Token::RParen, "')'")?;
            Expr::In { column, values }
        } else if self.keyword("BETWEEN") {
            let low = self.literal()?;
            if !self.keyword("AND") {
                return Err(self.error("expected AND in BETWEEN"));
            }
            let high = self.literal()?;
            Expr::And(vec![
                Expr::Cmp {
                    column: column.clone(),
                    op: Op::Ge,
                    value: low,
                },
                Expr::Cmp {
                    column,
                    op: Op::Le,
                    value: high,
                },
            ])
        } else {
            return Err(self.error("expected an operator, IN, IS or BETWEEN after the column"));
        };
        Ok(if negated { Expr::Not(Box::new(e)) } else { e })
    }

    fn literal(&mut self) -> Result<Literal> {
        let negative = if self.peek() == Some(&Token::Minus) {
            self.pos += 1;
            true
        } else {
            false
        };
        let token = self.next();
        let lit = match token {
            Some(Token::Number(n)) => {
                if n.parse::<f64>().is_err() {
                    self.pos -= 1;
                    return Err(self.error(format!("invalid number {n:?}")));
                }
                Literal::Number(if negative { format!("-{n}") } else { n })
            }
            _ if negative => {
                self.pos = self.pos.saturating_sub(1);
                return Err(self.error("expected a number after '-'"));
            }
            Some(Token::Str(s)) => Literal::Str(s),
            Some(Token::Word(w)) => {
                let typed = |p: &mut Self, make: fn(String) -> Literal| match p.next() {
                    Some(Token::Str(s)) => Ok(make(s)),
                    _ => {
                        p.pos = p.pos.saturating_sub(1);
                        Err(p.error(format!("expected a quoted value after {w}")))
                    }
                };
                match w.to_ascii_uppercase().as_str() {
                    "NULL" => Literal::Null,
                    "TRUE" => Literal::Bool(true),
                    "FALSE" => Literal::Bool(false),
                    "DATE" => typed(self, Literal::Date)?,
                    "TIMESTAMP" => typed(self, Literal::Timestamp)?,
                    "TIMESTAMP_NTZ" => typed(self, Literal::TimestampNtz)?,
                    _ => {
                        self.pos -= 1;
                        return Err(self.error(format!("expected a literal, found {w:?}")));
                    }
                }
            }
            _ => {
                self.pos = self.pos.saturating_sub(1);
                return Err(self.error("expected a literal"));
            }
        };
        Ok(lit)
    }
}

impl Expr {
    /// Parse the predicate text (see the module docs for the grammar).
    pub fn parse(text: &str) -> Result<Expr> {
        let tokens = tokenize(text)?;
        if tokens.is_empty() {
            return Err(syntax(text, 0, "empty predicate"));
        }
        let mut p = Parser {
            text,
            tokens,
            pos: 0,
            depth: 0,
        };
        let e = p.or()?;
        if p.pos < p.tokens.len() {
            return Err(p.error("unexpected text after the predicate"));
        }
        Ok(e)
    }
}

// ---------------------------------------------------------------------------
// Binding: columns resolved, literals typed
// ---------------------------------------------------------------------------

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
    fn compare(&self, other: &Val) -> Option<Ordering> {
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

#[derive(Debug, Clone, PartialEq)]
enum Node {
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
}

/// A predicate bound to a table schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Predicate {
    root: Node,
    columns: Vec<BoundColumn>,
    text: String,
}

/// How to treat leaves that cannot be bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// Unknown columns and literals that do not convert are errors.
    Strict,
    /// They become "unknown" (no pruning); for filters Spark applies itself.
    Lenient,
}

struct Binder<'a> {
    schema: &'a StructType,
    partition_columns: &'a [String],
    mode: ColumnMappingMode,
    binding: Binding,
    columns: Vec<BoundColumn>,
}

impl Binder<'_> {
    fn column(&mut self, path: &[String]) -> Result<usize> {
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

    fn bind(&mut self, e: &Expr) -> Result<Node> {
        let lenient = |r: Result<Node>, binding: Binding| match r {
            Err(_) if binding == Binding::Lenient => Ok(Node::Unknown),
            other => other,
        };
        match e {
            Expr::And(parts) => Ok(Node::And(
                parts.iter().map(|p| self.bind(p)).collect::<Result<_>>()?,
            )),
            Expr::Or(parts) => Ok(Node::Or(
                parts.iter().map(|p| self.bind(p)).collect::<Result<_>>()?,
            )),
            Expr::Not(inner) => Ok(Node::Not(Box::new(self.bind(inner)?))),
            Expr::Cmp { column, op, value } => {
                let r = self.cmp(column, *op, value);
                lenient(r, self.binding)
            }
            Expr::In { column, values } => {
                let r = self.in_list(column, values);
                lenient(r, self.binding)
            }
            Expr::IsNull { column } => {
                let r = self.column(column).map(|col| Node::IsNull { col });
                lenient(r, self.binding)
            }
        }
    }

    fn cmp(&mut self, column: &[String], op: Op, value: &Literal) -> Result<Node> {
        let col = self.column(column)?;
        let c =
            self.columns.get(col).cloned().ok_or_else(|| {
                Error::Internal(format!("column {} not bound", column_text(column)))
            })?;
        let value = convert(value, &c)?;
        Ok(Node::Cmp { col, op, value })
    }

    fn in_list(&mut self, column: &[String], values: &[Literal]) -> Result<Node> {
        let col = self.column(column)?;
        let c =
            self.columns.get(col).cloned().ok_or_else(|| {
                Error::Internal(format!("column {} not bound", column_text(column)))
            })?;
        let mut out = Vec::new();
        let mut has_null = false;
        for v in values {
            match convert(v, &c)? {
                Some(v) => out.push(v),
                None => has_null = true,
            }
        }
        Ok(Node::In {
            col,
            values: out,
            has_null,
        })
    }
}

fn type_error(lit: &Literal, c: &BoundColumn) -> Error {
    Error::UnsupportedPredicate(format!(
        "predicate value {lit} does not convert exactly to column {} of type {}",
        column_text(&c.logical),
        c.data_type
    ))
}

/// Convert a literal to `c`'s comparison domain (`None` for NULL).
fn convert(lit: &Literal, c: &BoundColumn) -> Result<Option<Val>> {
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
            let s = text.ok_or_else(err)?;
            let f: f64 = s.trim().parse().map_err(|_| err())?;
            if f.is_nan() {
                return Err(err());
            }
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
                    Val::Int(i128::from(days) * MICROS_PER_DAY)
                }
                Literal::Str(s) => Val::Int(i128::from(
                    parse_timestamp_micros(s.trim(), zoned)
                        .or_else(|| {
                            parse_date(s.trim())
                                .and_then(epoch_days)
                                .and_then(|d| d.checked_mul(86_400_000_000))
                        })
                        .ok_or_else(err)?,
                )),
                Literal::Timestamp(s) | Literal::TimestampNtz(s) => Val::Int(i128::from(
                    parse_timestamp_micros(s.trim(), zoned).ok_or_else(err)?,
                )),
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

// ---------------------------------------------------------------------------
// Pruning
// ---------------------------------------------------------------------------

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
    /// Parse `text` and bind it to a table's schema.
    pub fn new(
        text: &str,
        schema: &StructType,
        partition_columns: &[String],
        mode: ColumnMappingMode,
        binding: Binding,
    ) -> Result<Predicate> {
        let expr = Expr::parse(text)?;
        let mut b = Binder {
            schema,
            partition_columns,
            mode,
            binding,
            columns: Vec::new(),
        };
        let root = b.bind(&expr)?;
        Ok(Predicate {
            root,
            columns: b.columns,
            text: text.to_string(),
        })
    }

    /// The predicate as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The columns it refers to (indexes are those passed to the stats callback).
    pub fn columns(&self) -> &[BoundColumn] {
        &self.columns
    }

    /// Whether it refers only to partition columns.
    pub fn partition_only(&self) -> bool {
        fn known(n: &Node) -> bool {
            match n {
                Node::And(p) | Node::Or(p) => p.iter().all(known),
                Node::Not(i) => known(i),
                Node::Unknown => false,
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
                Some(s) => convert(&Literal::Str(s), c)
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
        stats: Option<&FileStats>,
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
                    let v = convert(&Literal::Str(s), c).ok().flatten()?;
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
        Node::Unknown => true,
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

// ---------------------------------------------------------------------------
// Stats of a file (add.stats JSON)
// ---------------------------------------------------------------------------

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

/// File-level stats from `add.stats`, for [`Predicate::may_match`].
pub struct FileStats {
    value: Option<Value>,
    num_records: Option<i64>,
}

impl FileStats {
    /// Parse `add.stats` (unparseable or absent stats: nothing known).
    pub fn parse(stats: Option<&str>) -> FileStats {
        let value: Option<Value> = stats.and_then(|s| serde_json::from_str(s).ok());
        let num_records = value
            .as_ref()
            .and_then(|v| v.get("numRecords"))
            .and_then(Value::as_i64);
        FileStats { value, num_records }
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

// ---------------------------------------------------------------------------
// Exact evaluation over Arrow batches
// ---------------------------------------------------------------------------

fn arrow_error(e: impl fmt::Display) -> Error {
    Error::InvalidArgument(format!("evaluating predicate: {e}"))
}

/// A one-row array of `dt` holding `v`.
fn scalar(v: &Val, dt: &ArrowType) -> Result<ArrayRef> {
    let bad = || {
        Error::InvalidArgument(format!(
            "predicate value {v:?} cannot be compared with Arrow type {dt}"
        ))
    };
    let int = |v: &Val| match v {
        Val::Int(i) => Ok(*i),
        _ => Err(bad()),
    };
    Ok(match dt {
        ArrowType::Int8 => Arc::new(Int8Array::from(vec![
            i8::try_from(int(v)?).map_err(|_| bad())?
        ])),
        ArrowType::Int16 => Arc::new(Int16Array::from(vec![
            i16::try_from(int(v)?).map_err(|_| bad())?
        ])),
        ArrowType::Int32 => Arc::new(Int32Array::from(vec![
            i32::try_from(int(v)?).map_err(|_| bad())?
        ])),
        ArrowType::Int64 => Arc::new(Int64Array::from(vec![
            i64::try_from(int(v)?).map_err(|_| bad())?
        ])),
        ArrowType::Date32 => Arc::new(arrow_array::Date32Array::from(vec![
            i32::try_from(int(v)?).map_err(|_| bad())?
        ])),
        ArrowType::Timestamp(arrow_schema::TimeUnit::Microsecond, tz) => Arc::new(
            TimestampMicrosecondArray::from(vec![i64::try_from(int(v)?).map_err(|_| bad())?])
                .with_timezone_opt(tz.clone()),
        ),
        ArrowType::Decimal128(p, s) => Arc::new(
            Decimal128Array::from(vec![int(v)?])
                .with_precision_and_scale(*p, *s)
                .map_err(arrow_error)?,
        ),
        ArrowType::Float32 => match v {
            Val::Float(f) => Arc::new(Float32Array::from(vec![*f as f32])),
            _ => return Err(bad()),
        },
        ArrowType::Float64 => match v {
            Val::Float(f) => Arc::new(Float64Array::from(vec![*f])),
            _ => return Err(bad()),
        },
        ArrowType::Utf8 => match v {
            Val::Str(s) => Arc::new(StringArray::from(vec![s.as_str()])),
            _ => return Err(bad()),
        },
        ArrowType::LargeUtf8 => match v {
            Val::Str(s) => Arc::new(arrow_array::LargeStringArray::from(vec![s.as_str()])),
            _ => return Err(bad()),
        },
        ArrowType::Utf8View => match v {
            Val::Str(s) => Arc::new(arrow_array::StringViewArray::from(vec![s.as_str()])),
            _ => return Err(bad()),
        },
        ArrowType::Boolean => match v {
            Val::Bool(b) => Arc::new(BooleanArray::from(vec![*b])),
            _ => return Err(bad()),
        },
        _ => return Err(bad()),
    })
}

fn column_array(batch: &RecordBatch, c: &BoundColumn) -> Result<ArrayRef> {
    let missing = || {
        Error::InvalidArgument(format!(
            "predicate column {} is not in the batch",
            column_text(&c.logical)
        ))
    };
    let (first, rest) = c.logical.split_first().ok_or_else(missing)?;
    let mut array = batch.column_by_name(first).cloned().ok_or_else(missing)?;
    for part in rest {
        let s = array
            .as_any()
            .downcast_ref::<StructArray>()
            .ok_or_else(missing)?;
        let child = s.column_by_name(part).cloned().ok_or_else(missing)?;
        // A null parent makes the child null.
        array = match s.nulls() {
            Some(parent) => {
                let merged = arrow_buffer::NullBuffer::union(Some(parent), child.nulls());
                arrow_array::make_array(
                    child
                        .to_data()
                        .into_builder()
                        .nulls(merged)
                        .build()
                        .map_err(arrow_error)?,
                )
            }
            None => child,
        };
    }
    Ok(array)
}

fn cmp_kernel(op: Op, a: &dyn Datum, b: &dyn Datum) -> Result<BooleanArray> {
    use arrow_ord::cmp;
    match op {
        Op::Eq => cmp::eq(a, b),
        Op::Ne => cmp::neq(a, b),
        Op::Lt => cmp::lt(a, b),
        Op::Le => cmp::lt_eq(a, b),
        Op::Gt => cmp::gt(a, b),
        Op::Ge => cmp::gt_eq(a, b),
        Op::NullSafeEq => cmp::not_distinct(a, b),
    }
    .map_err(arrow_error)
}

impl Predicate {
    /// SQL three-valued evaluation over `batch`, which must hold the
    /// predicate's columns under their logical names.
    pub fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray> {
        self.eval(&self.root, batch)
    }

    /// The rows of `batch` where the predicate is TRUE.
    pub fn filter(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let mask = self.evaluate(batch)?;
        if mask.null_count() == 0 && mask.true_count() == batch.num_rows() {
            return Ok(batch.clone());
        }
        arrow_select::filter::filter_record_batch(batch, &mask).map_err(arrow_error)
    }

    fn eval(&self, n: &Node, batch: &RecordBatch) -> Result<BooleanArray> {
        use arrow_arith::boolean;
        let rows = batch.num_rows();
        let column = |col: usize| -> Result<ArrayRef> {
            let c = self
                .columns
                .get(col)
                .ok_or_else(|| Error::Internal("predicate column index out of range".into()))?;
            column_array(batch, c)
        };
        match n {
            Node::Unknown => Ok(BooleanArray::from(vec![true; rows])),
            Node::And(parts) => parts
                .iter()
                .try_fold(BooleanArray::from(vec![true; rows]), |acc, p| {
                    boolean::and_kleene(&acc, &self.eval(p, batch)?).map_err(arrow_error)
                }),
            Node::Or(parts) => parts
                .iter()
                .try_fold(BooleanArray::from(vec![false; rows]), |acc, p| {
                    boolean::or_kleene(&acc, &self.eval(p, batch)?).map_err(arrow_error)
                }),
            Node::Not(inner) => boolean::not(&self.eval(inner, batch)?).map_err(arrow_error),
            Node::IsNull { col } => boolean::is_null(column(*col)?.as_ref()).map_err(arrow_error),
            Node::Cmp { col, op, value } => {
                let a = column(*col)?;
                match value {
                    None if *op == Op::NullSafeEq => {
                        boolean::is_null(a.as_ref()).map_err(arrow_error)
                    }
                    None => Ok(BooleanArray::new_null(rows)),
                    Some(v) => {
                        let s = scalar(v, a.data_type())?;
                        cmp_kernel(*op, &a, &Scalar::new(s))
                    }
                }
            }
            Node::In {
                col,
                values,
                has_null,
            } => {
                let a = column(*col)?;
                let mut acc = if *has_null {
                    BooleanArray::new_null(rows)
                } else {
                    BooleanArray::from(vec![false; rows])
                };
                for v in values {
                    let s = scalar(v, a.data_type())?;
                    let eq = cmp_kernel(Op::Eq, &a, &Scalar::new(s))?;
                    acc = boolean::or_kleene(&acc, &eq).map_err(arrow_error)?;
                }
                Ok(acc)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::schema::StructField;

    fn schema() -> StructType {
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
        ])
    }

    fn bind(text: &str) -> Result<Predicate> {
        Predicate::new(
            text,
            &schema(),
            &["part".to_string()],
            ColumnMappingMode::None,
            Binding::Strict,
        )
    }

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
    fn parses_the_grammar() {
        let cases = [
            ("id = 5", "id = 5"),
            ("5 < id", "id > 5"),
            ("NOT id >= -3", "(NOT id >= -3)"),
            (
                "id IN (1, 2) AND part IS NOT NULL",
                "(id IN (1, 2) AND (NOT part IS NULL))",
            ),
            (
                "`a name` <> 1 or x <= 1.5e3",
                "(`a name` != 1 OR x <= 1.5e3)",
            ),
            ("id between 1 and 10", "(id >= 1 AND id <= 10)"),
            ("part = 'it''s'", "part = 'it''s'"),
            ("d = DATE '2024-01-02'", "d = DATE '2024-01-02'"),
            ("id NOT IN (1)", "(NOT id IN (1))"),
            ("id <=> NULL", "id <=> NULL"),
        ];
        for (text, want) in cases {
            assert_eq!(Expr::parse(text).unwrap().to_string(), want, "{text}");
        }
        for bad in [
            "",
            "id =",
            "id = 1 garbage",
            "(id = 1",
            "id IS 5",
            "'a' 'b'",
            "id = 'x",
        ] {
            let err = Expr::parse(bad).unwrap_err().to_string();
            assert!(err.contains("cannot parse predicate"), "{bad}: {err}");
        }
    }

    #[test]
    fn nesting_is_limited_not_a_stack_overflow() {
        // At the limit: parses, binds and evaluates.
        let nots = format!("{}id = 1", "NOT ".repeat(MAX_PREDICATE_DEPTH));
        let deep = bind(&nots).unwrap();
        assert!(deep.may_match(&|_| Some(range(1, 1))));
        let parens = format!(
            "{}id = 1{}",
            "(".repeat(MAX_PREDICATE_DEPTH),
            ")".repeat(MAX_PREDICATE_DEPTH)
        );
        assert_eq!(Expr::parse(&parens).unwrap().to_string(), "id = 1");
        let mixed = format!(
            "{}id = 1{}",
            "NOT (".repeat(MAX_PREDICATE_DEPTH / 2),
            ")".repeat(MAX_PREDICATE_DEPTH / 2)
        );
        assert!(Expr::parse(&mixed).is_ok());
        // One past it, and far past it (these overflowed the stack before).
        for text in [
            format!("{}id = 1", "NOT ".repeat(MAX_PREDICATE_DEPTH + 1)),
            format!("{}id = 1", "NOT ".repeat(100_000)),
            format!("{}id = 1{}", "(".repeat(200_000), ")".repeat(200_000)),
            format!("{}id = 1", "(NOT ".repeat(100_000)),
        ] {
            let err = Expr::parse(&text).unwrap_err().to_string();
            assert!(
                err.contains(&format!(
                    "predicate nested deeper than {MAX_PREDICATE_DEPTH} levels"
                )),
                "{err}"
            );
            // The message quotes a prefix of the text, not all of it.
            assert!(err.len() < 600, "{} bytes", err.len());
        }
        // Long flat chains are not nesting.
        let flat = vec!["id = 1"; 20_000].join(" OR ");
        assert!(bind(&flat).unwrap().may_match(&|_| Some(range(1, 1))));
    }

    #[test]
    fn binding_errors_name_the_column() {
        let err = bind("nope = 1").unwrap_err().to_string();
        assert!(err.contains("nope") && err.contains("columns: id"), "{err}");
        let err = bind("id = 'abc'").unwrap_err().to_string();
        assert!(err.contains("does not convert"), "{err}");
        let err = bind("amount = 1.005").unwrap_err().to_string();
        assert!(err.contains("amount"), "{err}");
        let lenient = Predicate::new(
            "nope = 1 AND id = 3",
            &schema(),
            &[],
            ColumnMappingMode::None,
            Binding::Lenient,
        )
        .unwrap();
        assert!(lenient.may_match(&|_| Some(range(3, 3))));
        assert!(!lenient.may_match(&|_| Some(range(4, 9))));
    }

    #[test]
    fn pruning_uses_bounds_soundly() {
        assert!(may("id = 5", range(1, 9)));
        assert!(!may("id = 10", range(1, 9)));
        assert!(!may("id > 9", range(1, 9)));
        assert!(may("id >= 9", range(1, 9)));
        assert!(!may("id < 1", range(1, 9)));
        assert!(may("id <= 1", range(1, 9)));
        assert!(!may("id != 4", range(4, 4)));
        assert!(may("id != 4", range(4, 5)));
        assert!(!may("NOT id <= 9", range(1, 9)));
        assert!(!may("id IN (0, 10)", range(1, 9)));
        assert!(may("id IN (0, 5)", range(1, 9)));
        assert!(!may("id NOT IN (4, NULL)", range(1, 9)));
        assert!(!may("id NOT IN (4)", range(4, 4)));
        assert!(!may("id = NULL", range(1, 9)));
        assert!(may("id = 5 OR id = 100", range(1, 9)));
        assert!(!may("NOT (id > 0 AND id < 10)", range(1, 9)));
        assert!(may("id BETWEEN 9 AND 20", range(1, 9)));
        assert!(!may("id BETWEEN 10 AND 20", range(1, 9)));
        // nulls
        let all_null = ColumnStats {
            all_null: true,
            ..Default::default()
        };
        let no_null = ColumnStats {
            none_null: true,
            ..range(1, 9)
        };
        assert!(!may("id = 5", all_null.clone()));
        assert!(!may("id IS NOT NULL", all_null.clone()));
        assert!(may("id IS NULL", all_null.clone()));
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
        // unknown stats never prune
        assert!(bind("id = 10").unwrap().may_match(&|_| None));
        assert!(may("id = 10", ColumnStats::default()));
    }

    #[test]
    fn floats_never_prune_on_max() {
        let s = ColumnStats {
            min: Some(Val::Float(1.0)),
            max: Some(Val::Float(2.0)),
            ..Default::default()
        };
        let p = bind("x > 5").unwrap();
        assert!(p.may_match(&|_| Some(s.clone())), "NaN may be above max");
        let p = bind("x < 0.5").unwrap();
        assert!(!p.may_match(&|_| Some(s.clone())));
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
    }

    #[test]
    fn file_stats_respect_wide_bounds() {
        let p = bind("id > 100").unwrap();
        let c = p.columns()[0].clone();
        let fs = FileStats::parse(Some(
            r#"{"numRecords":10,"minValues":{"id":1},"maxValues":{"id":100},"nullCount":{"id":3},"tightBounds":false}"#,
        ));
        let s = fs.column(&c).unwrap();
        assert!(!s.all_null && !s.none_null);
        assert!(!p.may_match(&|_| fs.column(&c)));
        let fs = FileStats::parse(Some(r#"{"numRecords":4,"nullCount":{"id":4}}"#));
        assert!(fs.column(&c).unwrap().all_null);
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
        let fs = FileStats::parse(Some(
            r#"{"numRecords":1,"minValues":{"t":"2024-01-01T00:00:00.000Z"},"maxValues":{"t":"2024-01-01T00:00:00.000Z"},"nullCount":{"t":0}}"#,
        ));
        let c = p.columns()[0].clone();
        assert!(
            p.may_match(&|_| fs.column(&c)),
            "max may be 00:00:00.000999"
        );
    }

    #[test]
    fn evaluates_with_three_valued_logic() {
        use arrow_array::Int64Array;
        use arrow_schema::{Field, Schema};
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", ArrowType::Int64, true),
                Field::new("part", ArrowType::Utf8, true),
            ])),
            vec![
                Arc::new(Int64Array::from(vec![Some(1), None, Some(3), Some(4)])),
                Arc::new(StringArray::from(vec![
                    Some("a"),
                    Some("b"),
                    None,
                    Some("a"),
                ])),
            ],
        )
        .unwrap();
        let rows = |text: &str| {
            let out = bind(text).unwrap().filter(&batch).unwrap();
            let ids = out
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .iter()
                .collect::<Vec<_>>();
            ids
        };
        assert_eq!(rows("id > 1"), vec![Some(3), Some(4)]);
        assert_eq!(rows("NOT id > 1"), vec![Some(1)]);
        assert_eq!(rows("id IS NULL"), vec![None]);
        assert_eq!(rows("id NOT IN (1, NULL)"), Vec::<Option<i64>>::new());
        assert_eq!(rows("id IN (1, 4)"), vec![Some(1), Some(4)]);
        assert_eq!(
            rows("part = 'a' OR id = 3"),
            vec![Some(1), Some(3), Some(4)]
        );
        assert_eq!(rows("id <=> NULL"), vec![None]);
        assert_eq!(rows("NOT (part = 'a')"), vec![None]);
    }
}
