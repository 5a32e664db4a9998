//! Rewriting expression trees before they are bound: the columns an
//! expression names, the same expression with its column paths mapped, and
//! the top-level conjuncts of a condition. MERGE uses them to split its join
//! condition and to read names on one side of the join.

use super::Expr;

/// The column paths `e` names, in order (with repeats).
pub fn column_paths<'e>(e: &'e Expr, out: &mut Vec<&'e [String]>) {
    match e {
        Expr::Column(p) => out.push(p),
        Expr::Literal(_) => {}
        Expr::And(v) | Expr::Or(v) | Expr::Concat(v) => v.iter().for_each(|x| column_paths(x, out)),
        Expr::Not(x) | Expr::IsNull(x) | Expr::Neg(x) => column_paths(x, out),
        Expr::Cast { expr, .. } | Expr::DatePart { expr, .. } => column_paths(expr, out),
        Expr::Cmp { left, right, .. } | Expr::Arith { left, right, .. } => {
            column_paths(left, out);
            column_paths(right, out);
        }
        Expr::In { value, list } => {
            column_paths(value, out);
            list.iter().for_each(|x| column_paths(x, out));
        }
        Expr::Case { when, otherwise } => {
            for (c, v) in when {
                column_paths(c, out);
                column_paths(v, out);
            }
            if let Some(o) = otherwise {
                column_paths(o, out);
            }
        }
    }
}

/// `e` with every column path replaced by `f` of it.
pub fn map_columns(e: &Expr, f: &dyn Fn(&[String]) -> Vec<String>) -> Expr {
    let m = |x: &Expr| Box::new(map_columns(x, f));
    match e {
        Expr::Column(p) => Expr::Column(f(p)),
        Expr::Literal(l) => Expr::Literal(l.clone()),
        Expr::And(v) => Expr::And(v.iter().map(|x| map_columns(x, f)).collect()),
        Expr::Or(v) => Expr::Or(v.iter().map(|x| map_columns(x, f)).collect()),
        Expr::Concat(v) => Expr::Concat(v.iter().map(|x| map_columns(x, f)).collect()),
        Expr::Not(x) => Expr::Not(m(x)),
        Expr::IsNull(x) => Expr::IsNull(m(x)),
        Expr::Neg(x) => Expr::Neg(m(x)),
        Expr::Cast { expr, to } => Expr::Cast {
            expr: m(expr),
            to: to.clone(),
        },
        Expr::DatePart { part, expr } => Expr::DatePart {
            part: part.clone(),
            expr: m(expr),
        },
        Expr::Cmp { op, left, right } => Expr::Cmp {
            op: *op,
            left: m(left),
            right: m(right),
        },
        Expr::Arith { op, left, right } => Expr::Arith {
            op: *op,
            left: m(left),
            right: m(right),
        },
        Expr::In { value, list } => Expr::In {
            value: m(value),
            list: list.iter().map(|x| map_columns(x, f)).collect(),
        },
        Expr::Case { when, otherwise } => Expr::Case {
            when: when
                .iter()
                .map(|(c, v)| (map_columns(c, f), map_columns(v, f)))
                .collect(),
            otherwise: otherwise.as_ref().map(|o| m(o)),
        },
    }
}

/// The parts of `e` joined by top-level ANDs (`e` itself when it is no AND).
pub fn conjuncts(e: &Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::And(v) => v.iter().for_each(|x| conjuncts(x, out)),
        other => out.push(other.clone()),
    }
}
