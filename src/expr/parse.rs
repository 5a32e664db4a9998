//! SQL text → [`Expr`], with `sqlparser` (Spark's conventions; see the
//! grammar in [`crate::expr`]). sqlparser parses far more SQL than deltadv
//! evaluates: its tree is mapped onto ours, and every construct outside the
//! subset is refused with an [`Error::UnsupportedPredicate`] that names it and
//! its character position.
//!
//! Nesting is bounded twice: sqlparser's own recursion limit (parentheses and
//! most prefix forms; its `recursive-protection` feature also grows the stack
//! while it parses), and [`MAX_PREDICATE_DEPTH`] while mapping, which counts
//! what sqlparser does not (a chain of `NOT`s) and keeps every later walk
//! over the tree shallow. Long AND/OR chains are flattened, not nested.

use std::any::TypeId;

use sqlparser::ast::{
    BinaryOperator, CastKind, DataType as SqlType, Expr as SqlExpr, TimezoneInfo, UnaryOperator,
    Value,
};
use sqlparser::dialect::{Dialect, SparkSqlDialect};
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Location, Token, TokenWithSpan, Tokenizer};

use super::{parse_double, quoted, unhex, ArithOp, Expr, Literal, Op, MAX_PREDICATE_DEPTH};
use crate::error::{Error, Result};

/// sqlparser's recursion budget. Each of our levels costs it one or two
/// units (`NOT (` two), so this never refuses what [`MAX_PREDICATE_DEPTH`]
/// allows, and it stops runaway parenthesis towers before they are built.
const PARSER_RECURSION_LIMIT: usize = 4 * MAX_PREDICATE_DEPTH + 16;

/// Spark's SQL conventions, with identifiers that may hold any Unicode
/// letter (as deltadv's grammar always allowed: `é = 1`).
#[derive(Debug)]
struct PredicateDialect;

impl Dialect for PredicateDialect {
    /// Behave as Spark wherever sqlparser asks which dialect this is.
    fn dialect(&self) -> TypeId {
        TypeId::of::<SparkSqlDialect>()
    }

    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        SparkSqlDialect.is_delimited_identifier_start(ch)
    }

    fn identifier_quote_style(&self, identifier: &str) -> Option<char> {
        SparkSqlDialect.identifier_quote_style(identifier)
    }

    fn is_identifier_start(&self, ch: char) -> bool {
        ch.is_alphabetic() || ch == '_'
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        ch.is_alphanumeric() || ch == '_'
    }
}

impl Expr {
    /// Parse SQL text (see [`crate::expr`] for the grammar).
    pub fn parse(text: &str) -> Result<Expr> {
        parse(text)
    }
}

/// Parse SQL text (see [`crate::expr`] for the grammar).
pub fn parse(text: &str) -> Result<Expr> {
    parse_with(text, "predicate", |m, tree| m.predicate(tree, 0))
}

/// Parse SQL text as a value (an UPDATE `SET` expression, a MERGE insert
/// value): a column, literal, arithmetic, `CASE`, `CAST`, concatenation, or
/// a predicate as a boolean value.
pub fn parse_value(text: &str) -> Result<Expr> {
    parse_with(text, "expression", |m, tree| m.value(tree, 0))
}

/// Tokenize and parse `text` as one sqlparser expression (nothing after it),
/// then map it with `map`; `what` names it in errors.
fn parse_with(
    text: &str,
    what: &str,
    map: impl FnOnce(&Mapper<'_>, &SqlExpr) -> Result<Expr>,
) -> Result<Expr> {
    if text.trim().is_empty() {
        return Err(syntax(text, 0, format!("empty {what}")));
    }
    let dialect = PredicateDialect;
    let tokens = Tokenizer::new(&dialect, text)
        .tokenize_with_location()
        .map_err(|e| parser_error(text, ParserError::TokenizerError(e.to_string())))?;
    check_nesting(text, &tokens)?;
    let mut parser = Parser::new(&dialect)
        .with_recursion_limit(PARSER_RECURSION_LIMIT)
        .with_tokens_with_locations(tokens);
    let tree = parser.parse_expr().map_err(|e| parser_error(text, e))?;
    let next = parser.peek_token();
    if next.token != Token::EOF {
        let at = char_offset(text, next.span.start);
        return Err(syntax(
            text,
            at,
            format!("unexpected {} after the {what}", next.token),
        ));
    }
    map(&Mapper { text }, &tree)
}

/// Refuse, before parsing, nesting that is certainly too deep: more than
/// [`MAX_PREDICATE_DEPTH`] + 1 open parentheses (one more for an `IN` list),
/// or a run of more than [`MAX_PREDICATE_DEPTH`] prefix operators (`NOT`,
/// `(`, unary `-`/`+`), each of which opens a level. sqlparser does not
/// count a chain of `NOT`s against its recursion limit the same way (it
/// stops short and reports leftover text), so this gives such input the
/// depth error it deserves; exact counting happens while mapping.
fn check_nesting(text: &str, tokens: &[TokenWithSpan]) -> Result<()> {
    let (mut open, mut run) = (0usize, 0usize);
    for t in tokens {
        let prefix = match &t.token {
            Token::Whitespace(_) => continue,
            Token::LParen => {
                open += 1;
                true
            }
            Token::RParen => {
                open = open.saturating_sub(1);
                false
            }
            Token::Word(w) => w.quote_style.is_none() && w.value.eq_ignore_ascii_case("NOT"),
            Token::Minus | Token::Plus => true,
            _ => false,
        };
        run = if prefix { run + 1 } else { 0 };
        if open > MAX_PREDICATE_DEPTH + 1 || run > MAX_PREDICATE_DEPTH {
            return Err(too_deep(text, Some(char_offset(text, t.span.start))));
        }
    }
    Ok(())
}

fn syntax(text: &str, at: usize, what: impl std::fmt::Display) -> Error {
    Error::UnsupportedPredicate(format!(
        "cannot parse predicate {} at character {at}: {what}",
        quoted(text)
    ))
}

fn too_deep(text: &str, at: Option<usize>) -> Error {
    // A limit of deltadv's, not a construct outside its subset: an error of
    // its own kind, so callers with a fallback (Spark) do not hand the text on.
    let place = at.map(|n| format!(" at character {n}")).unwrap_or_default();
    Error::InvalidArgument(format!(
        "predicate nested deeper than {MAX_PREDICATE_DEPTH} levels (parentheses, NOTs, operators and CASEs){place}: {}",
        quoted(text)
    ))
}

/// sqlparser's error as ours: its " at Line: L, Column: C" suffix becomes a
/// character offset.
fn parser_error(text: &str, e: ParserError) -> Error {
    let message = match e {
        ParserError::RecursionLimitExceeded => return too_deep(text, None),
        ParserError::TokenizerError(m) | ParserError::ParserError(m) => m,
    };
    let (what, at) = match message.rsplit_once(" at Line: ") {
        Some((what, place)) => {
            let mut nums = place
                .split(", Column: ")
                .map(|n| n.trim().parse::<u64>().ok());
            match (nums.next().flatten(), nums.next().flatten()) {
                (Some(line), Some(column)) => (
                    what.to_string(),
                    char_offset(text, Location::new(line, column)),
                ),
                _ => (message.clone(), text.chars().count()),
            }
        }
        // No location: sqlparser ran out of input.
        None => (message.clone(), text.chars().count()),
    };
    syntax(text, at, what)
}

/// A 1-based (line, column) location as a 0-based character offset.
fn char_offset(text: &str, at: Location) -> usize {
    let (mut line, mut column) = (1u64, 1u64);
    for (i, c) in text.chars().enumerate() {
        if line == at.line && column == at.column {
            return i;
        }
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    text.chars().count()
}

/// Where `e` starts, as far as its leftmost token tells (without walking
/// deep: only the left spine, a bounded number of steps).
fn start(e: &SqlExpr) -> Option<Location> {
    let mut cur = e;
    for _ in 0..4 * MAX_PREDICATE_DEPTH {
        cur = match cur {
            SqlExpr::Identifier(i) => return Some(i.span.start),
            SqlExpr::CompoundIdentifier(v) => return v.first().map(|i| i.span.start),
            SqlExpr::Value(v) => return Some(v.span.start),
            SqlExpr::TypedString(t) => return Some(t.value.span.start),
            SqlExpr::Case { case_token, .. } => return Some(case_token.0.span.start),
            SqlExpr::Function(f) => {
                return f
                    .name
                    .0
                    .first()
                    .and_then(|p| p.as_ident())
                    .map(|i| i.span.start)
            }
            SqlExpr::BinaryOp { left, .. } => left,
            SqlExpr::IsDistinctFrom(left, _) | SqlExpr::IsNotDistinctFrom(left, _) => left,
            SqlExpr::Like { expr, .. }
            | SqlExpr::ILike { expr, .. }
            | SqlExpr::SimilarTo { expr, .. }
            | SqlExpr::RLike { expr, .. }
            | SqlExpr::InList { expr, .. }
            | SqlExpr::InSubquery { expr, .. }
            | SqlExpr::Between { expr, .. }
            | SqlExpr::IsNull(expr)
            | SqlExpr::IsNotNull(expr)
            | SqlExpr::IsTrue(expr)
            | SqlExpr::IsFalse(expr)
            | SqlExpr::IsNotTrue(expr)
            | SqlExpr::IsNotFalse(expr)
            | SqlExpr::IsUnknown(expr)
            | SqlExpr::IsNotUnknown(expr)
            | SqlExpr::UnaryOp { expr, .. }
            | SqlExpr::Nested(expr)
            | SqlExpr::Cast { expr, .. }
            | SqlExpr::Collate { expr, .. } => expr,
            SqlExpr::AtTimeZone { timestamp, .. } => timestamp,
            SqlExpr::CompoundFieldAccess { root, .. } => root,
            _ => return None,
        };
    }
    None
}

/// A short name for a construct deltadv refuses.
fn construct(e: &SqlExpr) -> String {
    match e {
        SqlExpr::BinaryOp { op, .. } => format!("the operator {op}"),
        SqlExpr::UnaryOp { op, .. } => format!("the unary operator {op}"),
        SqlExpr::Like { .. } => "LIKE".into(),
        SqlExpr::ILike { .. } => "ILIKE".into(),
        SqlExpr::SimilarTo { .. } => "SIMILAR TO".into(),
        SqlExpr::RLike { .. } => "RLIKE/REGEXP".into(),
        SqlExpr::Function(f) => format!("the function {}", f.name),
        SqlExpr::Cast { .. } => "this form of CAST".into(),
        SqlExpr::InSubquery { .. } | SqlExpr::Subquery(_) | SqlExpr::Exists { .. } => {
            "a subquery".into()
        }
        SqlExpr::IsTrue(_)
        | SqlExpr::IsFalse(_)
        | SqlExpr::IsNotTrue(_)
        | SqlExpr::IsNotFalse(_)
        | SqlExpr::IsUnknown(_)
        | SqlExpr::IsNotUnknown(_) => "IS [NOT] TRUE/FALSE/UNKNOWN".into(),
        SqlExpr::TypedString(t) => format!("a {} literal", t.data_type),
        SqlExpr::Value(v) => format!("the literal {v}"),
        SqlExpr::Interval(_) => "INTERVAL".into(),
        SqlExpr::CompoundFieldAccess { .. } => "field or element access".into(),
        SqlExpr::AtTimeZone { .. } => "AT TIME ZONE".into(),
        _ => "this expression".into(),
    }
}

struct Mapper<'a> {
    text: &'a str,
}

impl Mapper<'_> {
    fn at(&self, e: &SqlExpr) -> Option<usize> {
        start(e).map(|l| char_offset(self.text, l))
    }

    fn refuse(&self, e: &SqlExpr, what: impl std::fmt::Display) -> Error {
        let at = self.at(e).unwrap_or(0);
        let near: String = self.text.chars().skip(at).take(40).collect();
        syntax(self.text, at, format!("{what} (at {near:?})"))
    }

    fn unsupported(&self, e: &SqlExpr) -> Error {
        self.refuse(e, format!("{} is not supported", construct(e)))
    }

    /// One level deeper than `depth`, refused past [`MAX_PREDICATE_DEPTH`].
    fn deeper(&self, depth: usize, e: &SqlExpr) -> Result<usize> {
        if depth >= MAX_PREDICATE_DEPTH {
            return Err(too_deep(self.text, self.at(e)));
        }
        Ok(depth + 1)
    }

    /// A boolean expression.
    fn predicate(&self, e: &SqlExpr, depth: usize) -> Result<Expr> {
        match e {
            SqlExpr::BinaryOp {
                op: op @ (BinaryOperator::And | BinaryOperator::Or),
                ..
            } => {
                // Walk the left spine iteratively: `a OR b OR c …` is one flat list
                // however long.
                let mut rights = Vec::new();
                let mut cur = e;
                while let SqlExpr::BinaryOp { left, op: o, right } = cur {
                    if o != op {
                        break;
                    }
                    rights.push(right.as_ref());
                    cur = left;
                }
                let mut parts = Vec::with_capacity(rights.len() + 1);
                parts.push(self.predicate(cur, depth)?);
                for r in rights.into_iter().rev() {
                    parts.push(self.predicate(r, depth)?);
                }
                Ok(if *op == BinaryOperator::And {
                    Expr::And(parts)
                } else {
                    Expr::Or(parts)
                })
            }
            SqlExpr::UnaryOp {
                op: UnaryOperator::Not,
                expr,
            } => {
                let d = self.deeper(depth, e)?;
                Ok(Expr::Not(Box::new(self.predicate(expr, d)?)))
            }
            SqlExpr::Nested(inner) => {
                let d = self.deeper(depth, e)?;
                self.predicate(inner, d)
            }
            SqlExpr::BinaryOp { left, op, right } => {
                let op = match op {
                    BinaryOperator::Eq => Op::Eq,
                    BinaryOperator::NotEq => Op::Ne,
                    BinaryOperator::Lt => Op::Lt,
                    BinaryOperator::LtEq => Op::Le,
                    BinaryOperator::Gt => Op::Gt,
                    BinaryOperator::GtEq => Op::Ge,
                    BinaryOperator::Spaceship => Op::NullSafeEq,
                    BinaryOperator::Plus
                    | BinaryOperator::Minus
                    | BinaryOperator::Multiply
                    | BinaryOperator::Divide => {
                        return Err(self.refuse(e, "a value where a predicate is expected"))
                    }
                    _ => return Err(self.unsupported(e)),
                };
                Ok(Expr::Cmp {
                    op,
                    left: Box::new(self.value(left, depth)?),
                    right: Box::new(self.value(right, depth)?),
                })
            }
            SqlExpr::IsNotDistinctFrom(left, right) => Ok(Expr::Cmp {
                op: Op::NullSafeEq,
                left: Box::new(self.value(left, depth)?),
                right: Box::new(self.value(right, depth)?),
            }),
            SqlExpr::IsDistinctFrom(left, right) => Ok(Expr::Not(Box::new(Expr::Cmp {
                op: Op::NullSafeEq,
                left: Box::new(self.value(left, depth)?),
                right: Box::new(self.value(right, depth)?),
            }))),
            SqlExpr::InList {
                expr,
                list,
                negated,
            } => {
                let e = Expr::In {
                    value: Box::new(self.value(expr, depth)?),
                    list: list
                        .iter()
                        .map(|v| self.value(v, depth))
                        .collect::<Result<_>>()?,
                };
                Ok(if *negated { Expr::Not(Box::new(e)) } else { e })
            }
            SqlExpr::IsNull(expr) => Ok(Expr::IsNull(Box::new(self.value(expr, depth)?))),
            SqlExpr::IsNotNull(expr) => Ok(Expr::Not(Box::new(Expr::IsNull(Box::new(
                self.value(expr, depth)?,
            ))))),
            SqlExpr::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let value = self.value(expr, depth)?;
                let e = Expr::And(vec![
                    Expr::Cmp {
                        op: Op::Ge,
                        left: Box::new(value.clone()),
                        right: Box::new(self.value(low, depth)?),
                    },
                    Expr::Cmp {
                        op: Op::Le,
                        left: Box::new(value),
                        right: Box::new(self.value(high, depth)?),
                    },
                ]);
                Ok(if *negated { Expr::Not(Box::new(e)) } else { e })
            }
            // A bare column is the condition `column = TRUE` (Spark's reading of
            // a boolean column; other types fail when bound).
            SqlExpr::Identifier(_) | SqlExpr::CompoundIdentifier(_) => Ok(Expr::Cmp {
                op: Op::Eq,
                left: Box::new(self.value(e, depth)?),
                right: Box::new(Expr::Literal(Literal::Bool(true))),
            }),
            SqlExpr::Value(_) | SqlExpr::TypedString(_) | SqlExpr::Case { .. } => Err(self.refuse(
                e,
                "a value where a predicate is expected (compare it: `flag = TRUE`)",
            )),
            _ => Err(self.unsupported(e)),
        }
    }

    /// A value: a column, a literal, arithmetic or CASE.
    fn value(&self, e: &SqlExpr, depth: usize) -> Result<Expr> {
        match e {
            SqlExpr::Identifier(i) => Ok(Expr::Column(vec![i.value.clone()])),
            SqlExpr::CompoundIdentifier(parts) => Ok(Expr::Column(
                parts.iter().map(|i| i.value.clone()).collect(),
            )),
            SqlExpr::Value(v) => Ok(Expr::Literal(self.literal(e, &v.value)?)),
            SqlExpr::TypedString(t) => {
                let text = match &t.value.value {
                    Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => s.clone(),
                    _ => return Err(self.unsupported(e)),
                };
                Ok(Expr::Literal(match t.data_type {
                    SqlType::Date => Literal::Date(text),
                    SqlType::Timestamp(None, TimezoneInfo::None) => Literal::Timestamp(text),
                    SqlType::TimestampNtz(None) => Literal::TimestampNtz(text),
                    _ => return Err(self.unsupported(e)),
                }))
            }
            SqlExpr::UnaryOp {
                op: UnaryOperator::Not,
                ..
            } => self.predicate(e, depth),
            SqlExpr::UnaryOp { op, expr } => {
                if let SqlExpr::Value(v) = expr.as_ref() {
                    if let Value::Number(n, _) = &v.value {
                        let lit = self.literal(expr, &v.value)?;
                        return Ok(Expr::Literal(match (op, lit) {
                            (UnaryOperator::Minus, Literal::Number(_)) => {
                                Literal::Number(format!("-{}", n.trim_end_matches(['L', 'l'])))
                            }
                            (UnaryOperator::Plus, lit) => lit,
                            _ => return Err(self.unsupported(e)),
                        }));
                    }
                }
                let d = self.deeper(depth, e)?;
                match op {
                    UnaryOperator::Minus => Ok(Expr::Neg(Box::new(self.value(expr, d)?))),
                    UnaryOperator::Plus => self.value(expr, d),
                    _ => Err(self.unsupported(e)),
                }
            }
            SqlExpr::Nested(inner) => {
                let d = self.deeper(depth, e)?;
                self.value(inner, d)
            }
            SqlExpr::BinaryOp {
                op: BinaryOperator::StringConcat,
                ..
            } => {
                // `a || b || c` is one flat list, walked iteratively.
                let mut rights = Vec::new();
                let mut cur = e;
                while let SqlExpr::BinaryOp {
                    left,
                    op: BinaryOperator::StringConcat,
                    right,
                } = cur
                {
                    rights.push(right.as_ref());
                    cur = left;
                }
                let d = self.deeper(depth, e)?;
                let mut parts = Vec::with_capacity(rights.len() + 1);
                parts.push(self.value(cur, d)?);
                for r in rights.into_iter().rev() {
                    parts.push(self.value(r, d)?);
                }
                Ok(Expr::Concat(parts))
            }
            SqlExpr::BinaryOp { left, op, right } => {
                let op = match op {
                    BinaryOperator::Plus => ArithOp::Add,
                    BinaryOperator::Minus => ArithOp::Sub,
                    BinaryOperator::Multiply => ArithOp::Mul,
                    BinaryOperator::Divide => ArithOp::Div,
                    // A predicate as a boolean value (`SET flag = a > b`).
                    BinaryOperator::And
                    | BinaryOperator::Or
                    | BinaryOperator::Eq
                    | BinaryOperator::NotEq
                    | BinaryOperator::Lt
                    | BinaryOperator::LtEq
                    | BinaryOperator::Gt
                    | BinaryOperator::GtEq
                    | BinaryOperator::Spaceship => return self.predicate(e, depth),
                    _ => return Err(self.unsupported(e)),
                };
                let d = self.deeper(depth, e)?;
                Ok(Expr::Arith {
                    op,
                    left: Box::new(self.value(left, d)?),
                    right: Box::new(self.value(right, d)?),
                })
            }
            SqlExpr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                let d = self.deeper(depth, e)?;
                let operand = operand.as_ref().map(|o| self.value(o, d)).transpose()?;
                let when = conditions
                    .iter()
                    .map(|w| {
                        let condition = match &operand {
                            // CASE x WHEN v … is CASE WHEN x = v …
                            Some(x) => Expr::Cmp {
                                op: Op::Eq,
                                left: Box::new(x.clone()),
                                right: Box::new(self.value(&w.condition, d)?),
                            },
                            None => self.predicate(&w.condition, d)?,
                        };
                        Ok((condition, self.value(&w.result, d)?))
                    })
                    .collect::<Result<_>>()?;
                let otherwise = match else_result {
                    Some(v) => Some(Box::new(self.value(v, d)?)),
                    None => None,
                };
                Ok(Expr::Case { when, otherwise })
            }
            SqlExpr::Cast {
                kind: CastKind::Cast,
                expr,
                data_type,
                format: None,
            } => {
                let text = match expr.as_ref() {
                    SqlExpr::Value(v) => match &v.value {
                        Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Some(s),
                        _ => None,
                    },
                    _ => None,
                };
                let double = matches!(
                    data_type,
                    SqlType::Double(_) | SqlType::DoublePrecision | SqlType::Float64
                );
                match text {
                    // A double literal: NaN and infinities kept exactly.
                    Some(s) if double => parse_double(s)
                        .map(|d| Expr::Literal(Literal::Double(d)))
                        .ok_or_else(|| self.refuse(e, format!("invalid double {s:?}"))),
                    _ => {
                        let to = self.type_name(e, data_type)?;
                        let d = self.deeper(depth, e)?;
                        Ok(Expr::Cast {
                            expr: Box::new(self.value(expr, d)?),
                            to,
                        })
                    }
                }
            }
            SqlExpr::Function(f)
                if [
                    "year",
                    "month",
                    "day",
                    "dayofmonth",
                    "hour",
                    "minute",
                    "second",
                ]
                .iter()
                .any(|n| f.name.to_string().eq_ignore_ascii_case(n)) =>
            {
                let sqlparser::ast::FunctionArguments::List(list) = &f.args else {
                    return Err(self.unsupported(e));
                };
                let d = self.deeper(depth, e)?;
                let arg = match list.args.as_slice() {
                    [sqlparser::ast::FunctionArg::Unnamed(
                        sqlparser::ast::FunctionArgExpr::Expr(x),
                    )] if list.duplicate_treatment.is_none() && list.clauses.is_empty() => {
                        self.value(x, d)?
                    }
                    _ => return Err(self.refuse(e, "a date part function takes one argument")),
                };
                let name = f.name.to_string().to_lowercase();
                let part = if name == "dayofmonth" {
                    "day".to_string()
                } else {
                    name
                };
                Ok(Expr::DatePart {
                    part,
                    expr: Box::new(arg),
                })
            }
            SqlExpr::Function(f) if f.name.to_string().eq_ignore_ascii_case("concat") => {
                let sqlparser::ast::FunctionArguments::List(list) = &f.args else {
                    return Err(self.unsupported(e));
                };
                if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
                    return Err(self.unsupported(e));
                }
                let d = self.deeper(depth, e)?;
                let parts = list
                    .args
                    .iter()
                    .map(|a| match a {
                        sqlparser::ast::FunctionArg::Unnamed(
                            sqlparser::ast::FunctionArgExpr::Expr(x),
                        ) => self.value(x, d),
                        _ => Err(self.unsupported(e)),
                    })
                    .collect::<Result<Vec<_>>>()?;
                if parts.is_empty() {
                    return Err(self.refuse(e, "concat() needs at least one argument"));
                }
                Ok(Expr::Concat(parts))
            }
            // A predicate as a boolean value.
            SqlExpr::InList { .. }
            | SqlExpr::IsNull(_)
            | SqlExpr::IsNotNull(_)
            | SqlExpr::Between { .. }
            | SqlExpr::IsDistinctFrom(..)
            | SqlExpr::IsNotDistinctFrom(..) => self.predicate(e, depth),
            _ => Err(self.unsupported(e)),
        }
    }

    /// A CAST target as a Delta primitive type name.
    fn type_name(&self, e: &SqlExpr, t: &SqlType) -> Result<String> {
        use sqlparser::ast::ExactNumberInfo;
        Ok(match t {
            SqlType::Boolean | SqlType::Bool => "boolean".into(),
            SqlType::TinyInt(_) => "byte".into(),
            SqlType::SmallInt(_) | SqlType::Int2(_) => "short".into(),
            SqlType::Int(_) | SqlType::Integer(_) | SqlType::Int4(_) | SqlType::Int32 => {
                "integer".into()
            }
            SqlType::BigInt(_) | SqlType::Int8(_) | SqlType::Int64 => "long".into(),
            SqlType::Float(_) | SqlType::Real | SqlType::Float4 | SqlType::Float32 => {
                "float".into()
            }
            SqlType::Double(_) | SqlType::DoublePrecision | SqlType::Float8 | SqlType::Float64 => {
                "double".into()
            }
            SqlType::Decimal(info) | SqlType::Numeric(info) | SqlType::Dec(info) => match info {
                ExactNumberInfo::None => "decimal(10,0)".into(),
                ExactNumberInfo::Precision(p) => format!("decimal({p},0)"),
                ExactNumberInfo::PrecisionAndScale(p, s) => format!("decimal({p},{s})"),
            },
            SqlType::String(_) | SqlType::Varchar(_) | SqlType::Text | SqlType::Char(_) => {
                "string".into()
            }
            SqlType::Binary(_) | SqlType::Bytea => "binary".into(),
            SqlType::Date => "date".into(),
            SqlType::Timestamp(None, TimezoneInfo::None) => "timestamp".into(),
            SqlType::TimestampNtz(None) => "timestamp_ntz".into(),
            SqlType::Custom(name, args) if args.is_empty() => {
                match name.to_string().to_ascii_lowercase().as_str() {
                    "byte" => "byte".into(),
                    "short" => "short".into(),
                    "long" => "long".into(),
                    _ => return Err(self.refuse(e, format!("CAST to {t} is not supported"))),
                }
            }
            _ => return Err(self.refuse(e, format!("CAST to {t} is not supported"))),
        })
    }

    fn literal(&self, e: &SqlExpr, v: &Value) -> Result<Literal> {
        Ok(match v {
            Value::Null => Literal::Null,
            Value::Boolean(b) => Literal::Bool(*b),
            Value::Number(n, _long) => {
                // `_long`: Spark's `1L` suffix, an integer in any case.
                if n.parse::<f64>().is_err() {
                    return Err(self.refuse(e, format!("invalid number {n:?}")));
                }
                Literal::Number(n.clone())
            }
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Literal::Str(s.clone()),
            Value::HexStringLiteral(h) => Literal::Binary(
                unhex(h).ok_or_else(|| self.refuse(e, format!("invalid hex literal X'{h}'")))?,
            ),
            _ => return Err(self.unsupported(e)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> String {
        match parse(text) {
            Ok(e) => e.to_string(),
            Err(e) => panic!("{text}: {e}"),
        }
    }

    fn error(text: &str) -> String {
        match parse(text) {
            Ok(e) => panic!("{text} parsed as {e}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn every_grammar_form() {
        let cases = [
            ("id = 5", "id = 5"),
            ("id == 5", "id = 5"),
            ("5 < id", "5 < id"),
            ("NOT id >= -3", "(NOT id >= -3)"),
            ("not not id >= - 3", "(NOT (NOT id >= -3))"),
            ("id <> 1 OR id != 2", "(id != 1 OR id != 2)"),
            ("id <=> NULL", "id <=> NULL"),
            ("id IS NOT DISTINCT FROM 1", "id <=> 1"),
            ("id IS DISTINCT FROM 1", "(NOT id <=> 1)"),
            (
                "id IN (1, 2) AND part IS NOT NULL",
                "(id IN (1, 2) AND (NOT part IS NULL))",
            ),
            ("id NOT IN (1)", "(NOT id IN (1))"),
            ("id between 1 and 10", "(id >= 1 AND id <= 10)"),
            ("id NOT BETWEEN 1 AND 10", "(NOT (id >= 1 AND id <= 10))"),
            (
                "`a name` <> 1 or x <= 1.5e3",
                "(`a name` != 1 OR x <= 1.5e3)",
            ),
            ("a.b.`c d` = .5", "a.b.`c d` = .5"),
            ("`a``b` = 1", "`a``b` = 1"),
            ("é = 1", "`é` = 1"),
            (
                "`date` = 1 AND date = 2 AND Timestamp > 3",
                "(`date` = 1 AND `date` = 2 AND `Timestamp` > 3)",
            ),
            ("part = 'it''s'", "part = 'it''s'"),
            ("part = \"dq\"", "part = 'dq'"),
            (r"part = 'a\b'", r"part = 'a\b'"),
            ("b = TRUE OR b = false", "(b = TRUE OR b = FALSE)"),
            ("d = DATE '2024-01-02'", "d = DATE '2024-01-02'"),
            ("d = DATE'2024-01-02'", "d = DATE '2024-01-02'"),
            (
                "t < TIMESTAMP '2024-01-02 03:04:05Z'",
                "t < TIMESTAMP '2024-01-02 03:04:05Z'",
            ),
            (
                "t < TIMESTAMP_NTZ '2024-01-02'",
                "t < TIMESTAMP_NTZ '2024-01-02'",
            ),
            ("x = CAST('NaN' AS DOUBLE)", "x = CAST('NaN' AS DOUBLE)"),
            (
                "x > CAST('-Infinity' AS DOUBLE)",
                "x > CAST('-inf' AS DOUBLE)",
            ),
            ("b = X'0aFF'", "b = X'0aff'"),
            ("id = 5L", "id = 5"),
            ("id = -5L", "id = -5"),
            ("id = +5", "id = 5"),
            ("((id = 1))", "id = 1"),
            ("(a = 1 OR b = 2) AND c = 3", "((a = 1 OR b = 2) AND c = 3)"),
            ("id = 1 -- a comment", "id = 1"),
            // arithmetic and CASE parse into the tree
            ("id + 1 * 2 > 3", "(id + (1 * 2)) > 3"),
            ("(id - 1) / 2 = -id", "((id - 1) / 2) = (- id)"),
            ("- -5 = id", "(- -5) = id"),
            (
                "CASE WHEN id > 1 THEN 2 WHEN id IS NULL THEN 0 ELSE 3 END = 2",
                "(CASE WHEN id > 1 THEN 2 WHEN id IS NULL THEN 0 ELSE 3 END) = 2",
            ),
            (
                "CASE id WHEN 1 THEN 'a' END IS NULL",
                "(CASE WHEN id = 1 THEN 'a' END) IS NULL",
            ),
            // CAST, concatenation, predicates as values
            ("CAST(x AS INT) = 1", "CAST(x AS INT) = 1"),
            (
                "CAST(x AS decimal(10, 2)) > CAST(y AS BIGINT)",
                "CAST(x AS DECIMAL(10,2)) > CAST(y AS BIGINT)",
            ),
            ("CAST(x AS long) = 1", "CAST(x AS BIGINT) = 1"),
            ("a || 'b' || c = 'x'", "(a || 'b' || c) = 'x'"),
            ("concat(a, 1) = 'x'", "(a || 1) = 'x'"),
            ("(a = 1) = TRUE", "(a = 1) = TRUE"),
            ("a = (b IS NULL)", "a = (b IS NULL)"),
        ];
        for (text, want) in cases {
            assert_eq!(parsed(text), want, "{text}");
            // what we print parses back to the same tree
            let tree = parse(text).unwrap();
            assert_eq!(parse(&tree.to_string()).unwrap(), tree, "{text}");
        }
    }

    #[test]
    fn a_bare_column_is_compared_with_true() {
        let e = parse("flag AND NOT s.del").unwrap_or_else(|e| panic!("{e}"));
        let is_true = |path: &[&str]| Expr::cmp(path, Op::Eq, Literal::Bool(true));
        assert_eq!(
            e,
            Expr::And(vec![
                is_true(&["flag"]),
                Expr::Not(Box::new(is_true(&["s", "del"])))
            ])
        );
    }

    #[test]
    fn errors_name_the_construct_and_position() {
        let cases = [
            ("", "at character 0: empty predicate"),
            ("   ", "empty predicate"),
            ("id =", "at character 4: Expected: an expression"),
            (
                "id = 1 garbage",
                "at character 7: unexpected garbage after the predicate",
            ),
            ("id = 1 ; drop", "at character 7: unexpected ;"),
            ("(id = 1", "at character 7: Expected: )"),
            ("id IS 5", "at character 6"),
            ("'a' 'b'", "at character 4: unexpected 'b'"),
            ("id = 'x", "at character 5: Unterminated string literal"),
            (
                "id % 7 = 0",
                "at character 0: the operator % is not supported",
            ),
            ("id LIKE '1%'", "at character 0: LIKE is not supported"),
            (
                "x = 1\n AND upper(s) = 'A'",
                "at character 11: the function upper is not supported",
            ),
            ("id IN (SELECT 1)", "a subquery is not supported"),
            ("id IS TRUE", "IS [NOT] TRUE/FALSE/UNKNOWN is not supported"),
            ("x = CAST('abc' AS DOUBLE)", "invalid double \"abc\""),
            ("b = X'abc'", "invalid hex literal"),
            ("1", "at character 0: a value where a predicate is expected"),
            ("id + 1", "a value where a predicate is expected"),
            (
                "t = TIMESTAMP WITH TIME ZONE '2024-01-01'",
                "is not supported",
            ),
            ("id = 1 AND", "Expected: an expression"),
            (
                "CAST(x AS ARRAY<INT>) = 1",
                "CAST to ARRAY<INT> is not supported",
            ),
            ("concat() = 'a'", "concat() needs at least one argument"),
        ];
        for (text, want) in cases {
            let err = error(text);
            assert!(err.contains("cannot parse predicate"), "{text}: {err}");
            assert!(err.contains(want), "{text}: {err}");
            assert!(
                err.starts_with("predicate outside deltadv's SQL subset"),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn nesting_is_limited_not_a_stack_overflow() {
        let m = MAX_PREDICATE_DEPTH;
        // At the limit: parses.
        assert!(parse(&format!("{}id = 1", "NOT ".repeat(m))).is_ok());
        let parens = format!("{}id = 1{}", "(".repeat(m), ")".repeat(m));
        assert_eq!(parsed(&parens), "id = 1");
        assert!(parse(&format!(
            "{}id = 1{}",
            "NOT (".repeat(m / 2),
            ")".repeat(m / 2)
        ))
        .is_ok());
        assert!(parse(&format!(
            "{}id = 1{}",
            "NOT (".repeat(m / 2),
            ")".repeat(m / 2)
        ))
        .is_ok());
        let arith = format!(
            "id = {}1{}",
            "(1 + ".repeat(m / 2 - 1),
            ")".repeat(m / 2 - 1)
        );
        assert!(parse(&arith).is_ok(), "{arith}");
        // One past it, and far past it.
        for text in [
            format!("{}id = 1", "NOT ".repeat(m + 1)),
            format!("{}id = 1{}", "(".repeat(m + 1), ")".repeat(m + 1)),
            format!("{}id = 1", "NOT ".repeat(100_000)),
            format!("{}id = 1{}", "(".repeat(200_000), ")".repeat(200_000)),
            format!("{}id = 1", "(NOT ".repeat(100_000)),
            format!("{}id = 1{}", "NOT (".repeat(100_000), ")".repeat(100_000)),
            format!("id = {}", vec!["1"; 20_000].join(" + ")),
            format!("id = {}1", "- ".repeat(20_000)),
        ] {
            let err = parse(&text).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
            let err = err.to_string();
            assert!(
                err.contains(&format!("predicate nested deeper than {m} levels")),
                "{err}"
            );
            // The message quotes a prefix of the text, not all of it.
            assert!(err.len() < 600, "{} bytes", err.len());
        }
        // Long flat chains are not nesting.
        let flat = vec!["id = 1"; 20_000].join(" OR ");
        let Expr::Or(parts) = parse(&flat).unwrap() else {
            panic!("not an OR")
        };
        assert_eq!(parts.len(), 20_000);
        let mixed = vec!["a = 1 AND b = 2"; 10_000].join(" OR ");
        assert!(parse(&mixed).is_ok());
        assert!(parse(&format!("id IN ({})", vec!["1"; 50_000].join(", "))).is_ok());
    }

    #[test]
    fn offsets_count_characters_across_lines() {
        assert_eq!(char_offset("ab\ncd", Location::new(2, 2)), 4);
        assert_eq!(char_offset("éé x", Location::new(1, 4)), 3);
        assert_eq!(char_offset("a", Location::new(5, 1)), 1);
    }
}
