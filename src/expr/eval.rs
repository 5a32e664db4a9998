//! Exact evaluation of a [`Predicate`] over an Arrow batch: SQL
//! three-valued logic with arrow's kernels (Kleene AND/OR, comparisons
//! against one-row scalars). A row is kept only where the predicate is TRUE.
//! Comparisons follow arrow's total order for floats, as Spark does for NaN
//! (NaN = NaN, NaN above every number).

use std::fmt;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BooleanArray, Datum, Decimal128Array, Float32Array, Float64Array, Int16Array,
    Int32Array, Int64Array, Int8Array, RecordBatch, Scalar, StringArray, StructArray,
    TimestampMicrosecondArray,
};
use arrow_schema::DataType as ArrowType;

use super::bind::{BoundColumn, Node, Predicate, Val};
use super::{column_text, Op};
use crate::error::{Error, Result};

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
            Val::Float(f) => Arc::new(Float32Array::from(vec![*f as f32 + 0.0])),
            _ => return Err(bad()),
        },
        ArrowType::Float64 => match v {
            Val::Float(f) => Arc::new(Float64Array::from(vec![*f + 0.0])),
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

/// Float columns with -0.0 read as 0.0 (adding 0.0 does exactly that, NaN
/// and everything else unchanged). arrow orders floats totally, -0.0 below
/// 0.0; Spark compares -0.0 equal to 0.0 and, like arrow, NaN equal to NaN
/// and above every number.
pub(crate) fn zero_without_sign(a: ArrayRef) -> Result<ArrayRef> {
    let zero: ArrayRef = match a.data_type() {
        ArrowType::Float32 => Arc::new(Float32Array::from(vec![0.0f32])),
        ArrowType::Float64 => Arc::new(Float64Array::from(vec![0.0f64])),
        _ => return Ok(a),
    };
    arrow_arith::numeric::add(&a, &Scalar::new(zero)).map_err(arrow_error)
}

pub(crate) fn column_array(batch: &RecordBatch, c: &BoundColumn) -> Result<ArrayRef> {
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

/// `rows` copies of `value`, with no nulls.
fn constant(value: bool, rows: usize) -> BooleanArray {
    let bits = if value {
        arrow_buffer::BooleanBuffer::new_set(rows)
    } else {
        arrow_buffer::BooleanBuffer::new_unset(rows)
    };
    BooleanArray::new(bits, None)
}

pub(crate) fn cmp_kernel(op: Op, a: &dyn Datum, b: &dyn Datum) -> Result<BooleanArray> {
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
            Node::Unknown => Ok(constant(true, rows)),
            Node::Eval(t) => {
                let a = t.eval(&self.columns, batch, &self.zone)?;
                a.as_any()
                    .downcast_ref::<BooleanArray>()
                    .cloned()
                    .ok_or_else(|| Error::Internal(format!("condition of type {}", a.data_type())))
            }
            // Folded from the first operand (an empty AND is TRUE, an empty OR FALSE).
            Node::And(parts) => match parts.split_first() {
                None => Ok(constant(true, rows)),
                Some((first, rest)) => rest.iter().try_fold(self.eval(first, batch)?, |acc, p| {
                    boolean::and_kleene(&acc, &self.eval(p, batch)?).map_err(arrow_error)
                }),
            },
            Node::Or(parts) => match parts.split_first() {
                None => Ok(constant(false, rows)),
                Some((first, rest)) => rest.iter().try_fold(self.eval(first, batch)?, |acc, p| {
                    boolean::or_kleene(&acc, &self.eval(p, batch)?).map_err(arrow_error)
                }),
            },
            Node::Not(inner) => boolean::not(&self.eval(inner, batch)?).map_err(arrow_error),
            Node::IsNull { col } => boolean::is_null(column(*col)?.as_ref()).map_err(arrow_error),
            Node::Cmp { col, op, value } => {
                let a = zero_without_sign(column(*col)?)?;
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
                let a = zero_without_sign(column(*col)?)?;
                // x IN (v1, v2, NULL) is x = v1 OR x = v2 OR NULL
                let mut acc = if *has_null {
                    Some(BooleanArray::new_null(rows))
                } else {
                    None
                };
                for v in values {
                    let s = scalar(v, a.data_type())?;
                    let eq = cmp_kernel(Op::Eq, &a, &Scalar::new(s))?;
                    acc = Some(match acc {
                        None => eq,
                        Some(acc) => boolean::or_kleene(&acc, &eq).map_err(arrow_error)?,
                    });
                }
                Ok(acc.unwrap_or_else(|| constant(false, rows)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::bind::tests::bind;
    use arrow_schema::{Field, Schema};

    fn batch() -> RecordBatch {
        let inner = StructArray::from(vec![(
            Arc::new(Field::new("Inner", ArrowType::Int32, true)),
            Arc::new(Int32Array::from(vec![
                Some(1),
                Some(2),
                None,
                Some(4),
                Some(5),
            ])) as ArrayRef,
        )]);
        // the struct itself is null in row 4: its field reads as null there
        let st = StructArray::new(
            inner.fields().clone(),
            inner.columns().to_vec(),
            Some(vec![true, true, true, true, false].into()),
        );
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", ArrowType::Int64, true),
                Field::new("part", ArrowType::Utf8, true),
                Field::new("x", ArrowType::Float64, true),
                Field::new("st", st.data_type().clone(), true),
            ])),
            vec![
                Arc::new(Int64Array::from(vec![
                    Some(1),
                    None,
                    Some(3),
                    Some(4),
                    Some(5),
                ])),
                Arc::new(StringArray::from(vec![
                    Some("a"),
                    Some("b"),
                    None,
                    Some("a"),
                    Some("it's"),
                ])),
                Arc::new(Float64Array::from(vec![
                    Some(1.5),
                    Some(f64::NAN),
                    None,
                    Some(f64::INFINITY),
                    Some(-0.5),
                ])),
                Arc::new(st),
            ],
        )
        .unwrap()
    }

    /// The `id`s of the rows `text` keeps (row index + 1 for the null id).
    fn rows(text: &str) -> Vec<usize> {
        let mask = bind(text).unwrap().evaluate(&batch()).unwrap();
        (0..mask.len())
            .filter(|&i| mask.is_valid(i) && mask.value(i))
            .map(|i| i + 1)
            .collect()
    }

    /// TRUE / FALSE / NULL per row.
    fn truth(text: &str) -> Vec<Option<bool>> {
        bind(text)
            .unwrap()
            .evaluate(&batch())
            .unwrap()
            .iter()
            .collect()
    }

    #[test]
    fn three_valued_logic() {
        let (t, f, n) = (Some(true), Some(false), None);
        assert_eq!(truth("id > 1"), vec![f, n, t, t, t]);
        assert_eq!(truth("NOT id > 1"), vec![t, n, f, f, f]);
        assert_eq!(truth("id > 1 AND part = 'a'"), vec![f, f, n, t, f]);
        assert_eq!(truth("id > 1 OR part = 'a'"), vec![t, n, t, t, t]);
        assert_eq!(truth("id = NULL"), vec![n, n, n, n, n]);
        assert_eq!(truth("id <=> NULL"), vec![f, t, f, f, f]);
        assert_eq!(truth("id <=> 3"), vec![f, f, t, f, f]);
        assert_eq!(truth("id IN (1, 4)"), vec![t, n, f, t, f]);
        assert_eq!(truth("id IN (1, NULL)"), vec![t, n, n, n, n]);
        assert_eq!(truth("id NOT IN (1, NULL)"), vec![f, n, n, n, n]);
        assert_eq!(truth("id IS NULL"), vec![f, t, f, f, f]);
        assert_eq!(truth("id IS NOT NULL"), vec![t, f, t, t, t]);
        assert_eq!(rows("part = 'a' OR id = 3"), vec![1, 3, 4]);
        assert_eq!(rows("NOT (part = 'a')"), vec![2, 5]);
        assert_eq!(rows("part = 'it''s'"), vec![5]);
        assert_eq!(rows("id BETWEEN 2 AND 4"), vec![3, 4]);
        assert_eq!(rows("3 >= id"), vec![1, 3]);
        assert_eq!(rows("id = 1 OR id = 3 OR id = 5"), vec![1, 3, 5]);
    }

    #[test]
    fn floats_order_nan_last_as_spark_does() {
        assert_eq!(rows("x = CAST('NaN' AS DOUBLE)"), vec![2]);
        assert_eq!(rows("x > CAST('inf' AS DOUBLE)"), vec![2]);
        assert_eq!(rows("x = CAST('inf' AS DOUBLE)"), vec![4]);
        assert_eq!(rows("x > 1"), vec![1, 2, 4]);
        assert_eq!(rows("x < 0"), vec![5]);
        assert_eq!(rows("x IN (CAST('NaN' AS DOUBLE), -0.5)"), vec![2, 5]);
    }

    #[test]
    fn negative_zero_equals_zero_as_in_spark() {
        let b = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("x", ArrowType::Float64, true),
                Field::new("f", ArrowType::Float32, true),
            ])),
            vec![
                Arc::new(Float64Array::from(vec![
                    Some(-0.0),
                    Some(0.0),
                    Some(f64::NAN),
                    None,
                ])),
                Arc::new(Float32Array::from(vec![
                    Some(-0.0),
                    Some(0.0),
                    Some(f32::NAN),
                    None,
                ])),
            ],
        )
        .unwrap();
        let truth = |text: &str| -> Vec<Option<bool>> {
            bind(text).unwrap().evaluate(&b).unwrap().iter().collect()
        };
        let (t, f) = (Some(true), Some(false));
        assert_eq!(truth("x = 0"), vec![t, t, f, None]);
        assert_eq!(truth("x = -0.0"), vec![t, t, f, None]);
        assert_eq!(truth("x < 0"), vec![f, f, f, None]);
        assert_eq!(truth("f <=> -0.0"), vec![t, t, f, f]);
        assert_eq!(truth("f IN (0)"), vec![t, t, f, None]);
        assert_eq!(truth("f = CAST('NaN' AS DOUBLE)"), vec![f, f, t, None]);
    }

    #[test]
    fn nested_fields_are_null_under_a_null_parent() {
        assert_eq!(rows("st.inner >= 4"), vec![4]);
        assert_eq!(rows("st.Inner IS NULL"), vec![3, 5]);
    }

    #[test]
    fn filter_keeps_true_rows_only() {
        let b = batch();
        let out = bind("id >= 3").unwrap().filter(&b).unwrap();
        assert_eq!(out.num_rows(), 3);
        // all rows true: the batch as it is
        let all = bind("part IS NULL OR part IS NOT NULL")
            .unwrap()
            .filter(&b)
            .unwrap();
        assert_eq!(all.num_rows(), 5);
        // a column the batch lacks is an error naming it
        let other = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("y", ArrowType::Int64, true)])),
            vec![Arc::new(Int64Array::from(vec![1]))],
        )
        .unwrap();
        let err = bind("id = 1")
            .unwrap()
            .evaluate(&other)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("predicate column id is not in the batch"),
            "{err}"
        );
    }
}
