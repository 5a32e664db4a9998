//! Per-file statistics (`add.stats`) as Delta Spark 4.4 collects them:
//!
//! * `numRecords`; `minValues` / `maxValues` for numbers, decimals, dates,
//!   timestamps and strings (never booleans, binaries, arrays or maps);
//!   `nullCount` for every leaf (an array or map counts as one leaf);
//!   `tightBounds: true` when the table supports deletion vectors. Nested
//!   struct fields are nested JSON objects; a field under a null struct is null.
//! * Keys are physical names (column mapping `name`/`id`).
//! * Which columns: the first `delta.dataSkippingNumIndexedCols` leaves (default
//!   32, negative = all) of the data schema (partition columns excluded), or the
//!   columns of `delta.dataSkippingStatsColumns` when set (a struct names all of
//!   its leaves).
//! * Strings: min and max keep a prefix of [`STRING_PREFIX`] UTF-16 units (a
//!   surrogate pair is never split). A truncated max gets a tie-breaker so it
//!   stays an upper bound in UTF-8 byte order: `U+007F` when the first dropped
//!   character is below it, else `U+10FFFF`, skipping over `U+10FFFF`s in the
//!   value; when no bound fits in twice the prefix, the max is left out.
//! * Floats: NaN sorts above every number (so the max is `"NaN"` when the file
//!   holds one, the min only when every value is NaN); NaN and infinities are
//!   written as the strings `"NaN"`, `"Infinity"`, `"-Infinity"`; `-0.0` as `0.0`.
//! * Timestamps: truncated to milliseconds (readers widen the max by 1 ms),
//!   `2024-01-02T03:04:05.678Z`; `timestamp_ntz` without the zone.
//! * Decimals: exact, plain notation with `scale` fraction digits.
//!
//! Min/max/null counts come from arrow's aggregate kernels, batch by batch;
//! the file's bound is the min/max of its batches' bounds.

use std::collections::HashMap;

use arrow_arith::aggregate::{max, max_string, min, min_string};
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type,
    Int8Type, TimestampMicrosecondType,
};
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch};
use arrow_buffer::NullBuffer;
use chrono::DateTime;

use super::partition::{date_text, decimal_text};
use crate::error::{Error, Result};
use crate::log::features::properties::{TableProperties, DATA_SKIPPING_STATS_COLUMNS};
use crate::log::schema::{ColumnMappingMode, DataType, StructField};

/// Length (UTF-16 units, as Delta Spark counts) of string min/max prefixes.
pub const STRING_PREFIX: usize = 32;
/// Tie-breaker of a truncated max when the first dropped character is below it.
const ASCII_MAX: char = '\u{7F}';
/// Tie-breaker otherwise: the largest code point.
const UNICODE_MAX: char = char::MAX;

/// One column that gets stats, in the physical schema of the data files.
#[derive(Debug, Clone, PartialEq)]
pub struct StatsColumn {
    /// Physical name (the key in the stats JSON).
    pub name: String,
    /// Position among its parent's children in the data file.
    pub index: usize,
    pub kind: StatsKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum StatsKind {
    /// A leaf: null count always, min/max when the type has an order Delta uses.
    Leaf(DataType),
    Struct(Vec<StatsColumn>),
}

/// Which columns of the data files get which stats.
#[derive(Debug, Clone, PartialEq)]
pub struct StatsSpec {
    pub columns: Vec<StatsColumn>,
    /// Write `tightBounds: true` (tables that support deletion vectors).
    pub tight_bounds: bool,
}

/// Whether Delta keeps min/max for this type (numbers, dates, timestamps, strings).
pub fn has_min_max(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Byte
            | DataType::Short
            | DataType::Integer
            | DataType::Long
            | DataType::Float
            | DataType::Double
            | DataType::Decimal { .. }
            | DataType::Date
            | DataType::Timestamp
            | DataType::TimestampNtz
            | DataType::String
    )
}

impl StatsSpec {
    /// The stats of a table whose data files hold `data_fields` (the table
    /// schema without partition columns, in order), per its `configuration`.
    pub fn new(
        data_fields: &[StructField],
        mode: ColumnMappingMode,
        configuration: &HashMap<String, Option<String>>,
        tight_bounds: bool,
    ) -> Result<StatsSpec> {
        let properties = TableProperties::new(configuration);
        let columns = if let Some(list) = properties.data_skipping_stats_columns() {
            let paths = parse_column_list(list)?;
            let paths: Vec<Vec<String>> = paths
                .into_iter()
                .map(|p| p.into_iter().map(|s| s.to_lowercase()).collect())
                .collect();
            filter(data_fields, &paths, mode)?
        } else {
            let n = properties.data_skipping_num_indexed_cols()?;
            let budget = usize::try_from(n).unwrap_or(usize::MAX); // negative: all
            truncate(data_fields, budget, mode)?.0
        };
        Ok(StatsSpec {
            columns,
            tight_bounds,
        })
    }
}

fn column(
    field: &StructField,
    index: usize,
    mode: ColumnMappingMode,
    kind: StatsKind,
) -> Result<StatsColumn> {
    Ok(StatsColumn {
        name: field.physical_name(mode)?.to_string(),
        index,
        kind,
    })
}

/// Every leaf of `field`.
fn whole(field: &StructField, index: usize, mode: ColumnMappingMode) -> Result<StatsColumn> {
    let kind = match &field.data_type {
        DataType::Struct(st) => StatsKind::Struct(
            st.fields
                .iter()
                .enumerate()
                .map(|(i, f)| whole(f, i, mode))
                .collect::<Result<_>>()?,
        ),
        other => StatsKind::Leaf(other.clone()),
    };
    column(field, index, mode, kind)
}

/// The first `budget` leaves of `fields`, in schema order, and how many were taken.
fn truncate(
    fields: &[StructField],
    budget: usize,
    mode: ColumnMappingMode,
) -> Result<(Vec<StatsColumn>, usize)> {
    let mut taken = 0usize;
    let mut out = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        if taken >= budget {
            break;
        }
        let kind = match &f.data_type {
            DataType::Struct(st) => {
                let (children, n) = truncate(&st.fields, budget - taken, mode)?;
                taken += n;
                StatsKind::Struct(children)
            }
            other => {
                taken += 1;
                StatsKind::Leaf(other.clone())
            }
        };
        out.push(column(f, i, mode, kind)?);
    }
    Ok((out, taken))
}

/// The columns of `fields` named by `paths` (lower-cased logical name parts).
fn filter(
    fields: &[StructField],
    paths: &[Vec<String>],
    mode: ColumnMappingMode,
) -> Result<Vec<StatsColumn>> {
    let mut out = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let lower = f.name.to_lowercase();
        let tails: Vec<Vec<String>> = paths
            .iter()
            .filter(|p| p.first() == Some(&lower))
            .map(|p| p.get(1..).unwrap_or_default().to_vec())
            .collect();
        if tails.is_empty() {
            continue;
        }
        if tails.iter().all(Vec::is_empty) {
            out.push(whole(f, i, mode)?);
        } else if let DataType::Struct(st) = &f.data_type {
            let rest: Vec<Vec<String>> = tails.into_iter().filter(|t| !t.is_empty()).collect();
            let children = filter(&st.fields, &rest, mode)?;
            out.push(column(f, i, mode, StatsKind::Struct(children))?);
        }
    }
    Ok(out)
}

/// Parse a comma-separated list of column paths: parts separated by dots,
/// optionally quoted with backticks (a doubled backtick is a literal one).
pub fn parse_column_list(text: &str) -> Result<Vec<Vec<String>>> {
    let bad = |why: &str| {
        Error::InvalidArgument(format!(
            "table property {DATA_SKIPPING_STATS_COLUMNS} = {text:?} is not a list of column names: {why}"
        ))
    };
    let mut paths: Vec<Vec<String>> = Vec::new();
    if text.trim().is_empty() {
        return Ok(paths);
    }
    let mut path: Vec<String> = Vec::new();
    let mut part = String::new();
    let mut quoted_part = false;
    let mut chars = text.chars().peekable();
    let finish_part = |part: &mut String, quoted: &mut bool, path: &mut Vec<String>| {
        let name = if *quoted {
            std::mem::take(part)
        } else {
            std::mem::take(part).trim().to_string()
        };
        *quoted = false;
        if name.is_empty() {
            return Err(bad("an empty name"));
        }
        path.push(name);
        Ok(())
    };
    while let Some(c) = chars.next() {
        match c {
            '`' => {
                if !part.trim().is_empty() {
                    return Err(bad("a backtick inside a name"));
                }
                part.clear();
                loop {
                    match chars.next() {
                        Some('`') if chars.peek() == Some(&'`') => {
                            chars.next();
                            part.push('`');
                        }
                        Some('`') => break,
                        Some(other) => part.push(other),
                        None => return Err(bad("an unclosed backtick")),
                    }
                }
                quoted_part = true;
                while chars.peek().is_some_and(|c| c.is_whitespace()) {
                    chars.next();
                }
                if !matches!(chars.peek(), None | Some('.') | Some(',')) {
                    return Err(bad("text after a quoted name"));
                }
            }
            '.' => finish_part(&mut part, &mut quoted_part, &mut path)?,
            ',' => {
                finish_part(&mut part, &mut quoted_part, &mut path)?;
                paths.push(std::mem::take(&mut path));
            }
            other => part.push(other),
        }
    }
    finish_part(&mut part, &mut quoted_part, &mut path)?;
    paths.push(path);
    Ok(paths)
}

// ---------------------------------------------------------------------------
// Accumulation
// ---------------------------------------------------------------------------

/// A min or max seen so far.
#[derive(Debug, Clone, PartialEq)]
enum Bound {
    Int(i64),
    F32(f32),
    F64(f64),
    Dec(i128),
    Str(String),
    Date(i32),
    /// Microseconds since the epoch.
    Ts(i64),
}

fn pick_float<T: num_like::Float>(a: T, b: T, upper: bool) -> T {
    // NaN sorts above every number.
    match (a.nan(), b.nan()) {
        (true, _) => {
            if upper {
                a
            } else {
                b
            }
        }
        (_, true) => {
            if upper {
                b
            } else {
                a
            }
        }
        _ => {
            if (b > a) == upper {
                b
            } else {
                a
            }
        }
    }
}

mod num_like {
    pub trait Float: PartialOrd + Copy {
        fn nan(self) -> bool;
    }
    impl Float for f32 {
        fn nan(self) -> bool {
            self.is_nan()
        }
    }
    impl Float for f64 {
        fn nan(self) -> bool {
            self.is_nan()
        }
    }
}

impl Bound {
    /// The smaller (or, with `upper`, larger) of two bounds of one column.
    fn merge(self, other: Bound, upper: bool) -> Bound {
        fn pick<T: Ord>(a: T, b: T, upper: bool) -> T {
            if upper {
                a.max(b)
            } else {
                a.min(b)
            }
        }
        match (self, other) {
            (Bound::Int(a), Bound::Int(b)) => Bound::Int(pick(a, b, upper)),
            (Bound::Dec(a), Bound::Dec(b)) => Bound::Dec(pick(a, b, upper)),
            (Bound::Date(a), Bound::Date(b)) => Bound::Date(pick(a, b, upper)),
            (Bound::Ts(a), Bound::Ts(b)) => Bound::Ts(pick(a, b, upper)),
            (Bound::Str(a), Bound::Str(b)) => Bound::Str(pick(a, b, upper)),
            (Bound::F32(a), Bound::F32(b)) => Bound::F32(pick_float(a, b, upper)),
            (Bound::F64(a), Bound::F64(b)) => Bound::F64(pick_float(a, b, upper)),
            (a, _) => a, // one column always yields one variant
        }
    }
}

#[derive(Debug, Clone, Default)]
struct LeafStats {
    nulls: u64,
    min: Option<Bound>,
    max: Option<Bound>,
}

/// The stats of one data file being written, accumulated batch by batch and
/// serialised into its `add.stats`. (Stats read back from the log for
/// pruning are [`crate::expr::PruningStats`].)
#[derive(Debug, Clone)]
pub struct WrittenFileStats {
    num_records: u64,
    /// One entry per leaf of the spec, depth first.
    leaves: Vec<LeafStats>,
}

fn leaf_count(columns: &[StatsColumn]) -> usize {
    columns
        .iter()
        .map(|c| match &c.kind {
            StatsKind::Leaf(_) => 1,
            StatsKind::Struct(children) => leaf_count(children),
        })
        .sum()
}

fn kernel_error(column: &str, e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("stats of column '{column}': {e}"))
}

/// `array` with its rows nulled where the enclosing struct is null.
fn under_parent(array: &ArrayRef, parent: Option<&NullBuffer>, column: &str) -> Result<ArrayRef> {
    match parent {
        Some(p) if p.null_count() > 0 => {
            let parent_null = BooleanArray::new(!p.inner(), None);
            arrow_select::nullif::nullif(array, &parent_null).map_err(|e| kernel_error(column, e))
        }
        _ => Ok(array.clone()),
    }
}

/// This batch's min and max of a column of type `dt` (None: no non-null value).
fn bounds(array: &ArrayRef, dt: &DataType, column: &str) -> Result<Option<(Bound, Bound)>> {
    let wrong = || {
        kernel_error(
            column,
            format!("Arrow type {} does not hold {dt}", array.data_type()),
        )
    };
    macro_rules! prim {
        ($t:ty, $variant:ident, $conv:expr) => {{
            let a = array.as_primitive_opt::<$t>().ok_or_else(wrong)?;
            match (min(a), max(a)) {
                (Some(lo), Some(hi)) => {
                    Some((Bound::$variant($conv(lo)), Bound::$variant($conv(hi))))
                }
                _ => None,
            }
        }};
    }
    Ok(match dt {
        DataType::Byte => prim!(Int8Type, Int, i64::from),
        DataType::Short => prim!(Int16Type, Int, i64::from),
        DataType::Integer => prim!(Int32Type, Int, i64::from),
        DataType::Long => prim!(Int64Type, Int, |v: i64| v),
        DataType::Float => prim!(Float32Type, F32, |v: f32| v),
        DataType::Double => prim!(Float64Type, F64, |v: f64| v),
        DataType::Decimal { .. } => prim!(Decimal128Type, Dec, |v: i128| v),
        DataType::Date => prim!(Date32Type, Date, |v: i32| v),
        DataType::Timestamp | DataType::TimestampNtz => {
            prim!(TimestampMicrosecondType, Ts, |v: i64| v)
        }
        DataType::String => {
            let a = array.as_string_opt::<i32>().ok_or_else(wrong)?;
            match (min_string(a), max_string(a)) {
                (Some(lo), Some(hi)) => {
                    Some((Bound::Str(lo.to_string()), Bound::Str(hi.to_string())))
                }
                _ => None,
            }
        }
        _ => None,
    })
}

impl WrittenFileStats {
    /// No rows yet, for the columns `spec` collects stats of.
    pub fn new(spec: &StatsSpec) -> WrittenFileStats {
        WrittenFileStats {
            num_records: 0,
            leaves: vec![LeafStats::default(); leaf_count(&spec.columns)],
        }
    }

    /// Rows added so far.
    pub fn num_records(&self) -> u64 {
        self.num_records
    }

    /// Add one batch (in the data files' physical schema) to the stats.
    pub fn update(&mut self, spec: &StatsSpec, batch: &RecordBatch) -> Result<()> {
        self.num_records += batch.num_rows() as u64;
        let mut next = 0usize;
        for c in &spec.columns {
            let array = batch
                .columns()
                .get(c.index)
                .ok_or_else(|| kernel_error(&c.name, "the batch lacks this column"))?;
            self.visit(c, array, None, &mut next)?;
        }
        Ok(())
    }

    fn visit(
        &mut self,
        c: &StatsColumn,
        array: &ArrayRef,
        parent: Option<&NullBuffer>,
        next: &mut usize,
    ) -> Result<()> {
        match &c.kind {
            StatsKind::Struct(children) => {
                let s = array
                    .as_struct_opt()
                    .ok_or_else(|| kernel_error(&c.name, "not a struct array"))?;
                let nulls = NullBuffer::union(parent, s.nulls());
                for child in children {
                    let a = s
                        .columns()
                        .get(child.index)
                        .ok_or_else(|| kernel_error(&child.name, "the struct lacks this field"))?;
                    self.visit(child, a, nulls.as_ref(), next)?;
                }
            }
            StatsKind::Leaf(dt) => {
                let array = under_parent(array, parent, &c.name)?;
                let leaf = self
                    .leaves
                    .get_mut(*next)
                    .ok_or_else(|| kernel_error(&c.name, "more leaves than the spec has"))?;
                *next += 1;
                leaf.nulls += array.logical_null_count() as u64;
                if has_min_max(dt) {
                    if let Some((lo, hi)) = bounds(&array, dt, &c.name)? {
                        leaf.min = Some(match leaf.min.take() {
                            Some(old) => old.merge(lo, false),
                            None => lo,
                        });
                        leaf.max = Some(match leaf.max.take() {
                            Some(old) => old.merge(hi, true),
                            None => hi,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// The `add.stats` JSON.
    pub fn to_json(&self, spec: &StatsSpec) -> String {
        let mut mins = Vec::new();
        let mut maxs = Vec::new();
        let mut nulls = Vec::new();
        let mut next = 0usize;
        for c in &spec.columns {
            self.render(c, &mut next, &mut mins, &mut maxs, &mut nulls);
        }
        let mut top = vec![(
            "numRecords".to_string(),
            Json::Raw(self.num_records.to_string()),
        )];
        if !mins.is_empty() {
            top.push(("minValues".into(), Json::Obj(mins)));
        }
        if !maxs.is_empty() {
            top.push(("maxValues".into(), Json::Obj(maxs)));
        }
        if !nulls.is_empty() {
            top.push(("nullCount".into(), Json::Obj(nulls)));
        }
        if spec.tight_bounds {
            top.push(("tightBounds".into(), Json::Raw("true".into())));
        }
        let mut out = String::new();
        Json::Obj(top).write(&mut out);
        out
    }

    fn render(
        &self,
        c: &StatsColumn,
        next: &mut usize,
        mins: &mut Vec<(String, Json)>,
        maxs: &mut Vec<(String, Json)>,
        nulls: &mut Vec<(String, Json)>,
    ) {
        match &c.kind {
            StatsKind::Struct(children) => {
                let (mut lo, mut hi, mut nc) = (Vec::new(), Vec::new(), Vec::new());
                for child in children {
                    self.render(child, next, &mut lo, &mut hi, &mut nc);
                }
                for (list, obj) in [(mins, lo), (maxs, hi), (nulls, nc)] {
                    if !obj.is_empty() {
                        list.push((c.name.clone(), Json::Obj(obj)));
                    }
                }
            }
            StatsKind::Leaf(dt) => {
                let Some(leaf) = self.leaves.get(*next) else {
                    return;
                };
                *next += 1;
                nulls.push((c.name.clone(), Json::Raw(leaf.nulls.to_string())));
                if let Some(v) = leaf.min.as_ref().and_then(|b| bound_json(b, dt, false)) {
                    mins.push((c.name.clone(), v));
                }
                if let Some(v) = leaf.max.as_ref().and_then(|b| bound_json(b, dt, true)) {
                    maxs.push((c.name.clone(), v));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------

/// A JSON object tree whose leaves are already rendered (decimals stay exact).
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Obj(Vec<(String, Json)>),
    Raw(String),
}

fn json_string(s: &str) -> String {
    // Serializing a &str cannot fail.
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

impl Json {
    fn write(&self, out: &mut String) {
        match self {
            Json::Raw(s) => out.push_str(s),
            Json::Obj(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&json_string(k));
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

fn float_json(v: f64, single: bool) -> String {
    if v.is_nan() {
        return "\"NaN\"".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "\"Infinity\""
        } else {
            "\"-Infinity\""
        }
        .into();
    }
    let v = if v == 0.0 { 0.0 } else { v }; // -0.0 as 0.0
    let text = if single {
        serde_json::to_string(&(v as f32))
    } else {
        serde_json::to_string(&v)
    };
    text.unwrap_or_else(|_| "null".into())
}

/// Milliseconds-truncated timestamp text (`Z` suffix when zoned).
fn timestamp_json(micros: i64, zoned: bool) -> Option<String> {
    let millis = micros.div_euclid(1000);
    let dt = DateTime::from_timestamp_millis(millis)?;
    let text = dt.format("%Y-%m-%dT%H:%M:%S%.3f").to_string();
    Some(json_string(&if zoned { text + "Z" } else { text }))
}

fn bound_json(b: &Bound, dt: &DataType, upper: bool) -> Option<Json> {
    let raw = match (b, dt) {
        (Bound::Int(v), _) => v.to_string(),
        (Bound::F32(v), _) => float_json(f64::from(*v), true),
        (Bound::F64(v), _) => float_json(*v, false),
        (Bound::Dec(v), DataType::Decimal { scale, .. }) => decimal_text(*v, *scale),
        (Bound::Date(d), _) => json_string(&date_text(*d)?),
        (Bound::Ts(t), DataType::Timestamp) => timestamp_json(*t, true)?,
        (Bound::Ts(t), _) => timestamp_json(*t, false)?,
        (Bound::Str(s), _) => {
            let text = if upper {
                truncate_max(s, STRING_PREFIX)?
            } else {
                truncate_min(s, STRING_PREFIX)
            };
            json_string(&text)
        }
        (Bound::Dec(_), _) => return None,
    };
    Some(Json::Raw(raw))
}

// ---------------------------------------------------------------------------
// String prefixes
// ---------------------------------------------------------------------------

/// Byte length of the prefix of `s` made of the characters that start before
/// UTF-16 unit `units` (so a surrogate pair is never split).
fn prefix_bytes(s: &str, units: usize) -> usize {
    let mut at = 0usize;
    for (i, c) in s.char_indices() {
        if at >= units {
            return i;
        }
        at += c.len_utf16();
    }
    s.len()
}

/// A string min truncated to `prefix` UTF-16 units (a lower bound of it).
pub fn truncate_min(s: &str, prefix: usize) -> String {
    s.get(..prefix_bytes(s, prefix)).unwrap_or(s).to_string()
}

/// A string max truncated to about `prefix` UTF-16 units, with a tie-breaker
/// that keeps it an upper bound; None when none fits in `2 * prefix` units.
pub fn truncate_max(s: &str, prefix: usize) -> Option<String> {
    if s.encode_utf16().count() <= prefix {
        return Some(s.to_string());
    }
    let limit = 2 * prefix;
    let mut end = prefix_bytes(s, prefix);
    let mut units = s.get(..end).map_or(0, |p| p.encode_utf16().count());
    while units <= limit {
        let Some(c) = s.get(end..).and_then(|rest| rest.chars().next()) else {
            return Some(s.to_string());
        };
        if c == UNICODE_MAX {
            end += c.len_utf8();
            units += c.len_utf16();
            continue;
        }
        let head = s.get(..end)?;
        let tie = if c < ASCII_MAX {
            ASCII_MAX
        } else {
            UNICODE_MAX
        };
        return Some(format!("{head}{tie}"));
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{
        Float32Array, Float64Array, Int32Array, Int64Array, ListArray, StringArray, StructArray,
        TimestampMicrosecondArray,
    };
    use arrow_schema::{DataType as ArrowType, Field, Fields};
    use serde_json::{json, Value};

    use super::*;
    use crate::log::features::properties::DATA_SKIPPING_NUM_INDEXED_COLS;

    fn field(name: &str, dt: DataType) -> StructField {
        StructField::new(name, dt, true)
    }

    fn stats_of(fields: &[StructField], config: &[(&str, &str)], columns: Vec<ArrayRef>) -> Value {
        let config: HashMap<String, Option<String>> = config
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect();
        let spec = StatsSpec::new(fields, ColumnMappingMode::None, &config, true).unwrap();
        let batch =
            RecordBatch::try_from_iter(fields.iter().map(|f| f.name.clone()).zip(columns)).unwrap();
        let mut stats = WrittenFileStats::new(&spec);
        // two halves: bounds merge across batches
        let half = batch.num_rows() / 2;
        stats.update(&spec, &batch.slice(0, half)).unwrap();
        stats
            .update(&spec, &batch.slice(half, batch.num_rows() - half))
            .unwrap();
        serde_json::from_str(&stats.to_json(&spec)).unwrap()
    }

    #[test]
    fn string_prefixes_as_delta_spark_4_4() {
        let a40 = "a".repeat(40);
        assert_eq!(truncate_min(&a40, 32), "a".repeat(32));
        // Delta Spark 4.4 wrote 32 z's + U+007F for this value (probe of a real table)
        let z = format!("{}\u{ffff}\u{ffff}q", "z".repeat(37));
        assert_eq!(
            truncate_max(&z, 32).unwrap(),
            format!("{}\u{7f}", "z".repeat(32))
        );
        // the first dropped character is above U+007F: the largest code point
        let e = format!("{}é", "x".repeat(32));
        assert_eq!(
            truncate_max(&e, 32).unwrap(),
            format!("{}\u{10ffff}", "x".repeat(32))
        );
        // short strings are kept whole
        assert_eq!(truncate_max("abc", 32).unwrap(), "abc");
        // a surrogate pair across the cut is kept whole (33 UTF-16 units)
        let s = format!("{}😀tail", "x".repeat(31));
        assert_eq!(truncate_min(&s, 32), format!("{}😀", "x".repeat(31)));
        // U+10FFFF characters after the prefix are skipped over
        let m = format!("{}{}b", "x".repeat(32), "\u{10ffff}".repeat(2));
        assert_eq!(
            truncate_max(&m, 32).unwrap(),
            format!("{}{}\u{7f}", "x".repeat(32), "\u{10ffff}".repeat(2))
        );
        // nothing fits in twice the prefix: no max
        let all = format!("{}{}", "x".repeat(32), "\u{10ffff}".repeat(20));
        assert_eq!(truncate_max(&all, 32), None);
        // bounds hold in byte order
        for v in [&a40, &z, &e, &s, &m] {
            assert!(truncate_min(v, 32).as_str() <= v.as_str());
            assert!(truncate_max(v, 32).unwrap().as_str() >= v.as_str());
        }
    }

    #[test]
    fn floats_nan_infinity_and_negative_zero() {
        let fields = [field("f", DataType::Float), field("d", DataType::Double)];
        let s = stats_of(
            &fields,
            &[],
            vec![
                Arc::new(Float32Array::from(vec![
                    Some(f32::NAN),
                    Some(1.5),
                    None,
                    Some(2.5),
                ])),
                Arc::new(Float64Array::from(vec![
                    Some(f64::INFINITY),
                    Some(-0.0),
                    Some(3.0),
                    None,
                ])),
            ],
        );
        // as Delta Spark 4.4 wrote for the same values
        assert_eq!(s["minValues"], json!({"f": 1.5, "d": 0.0}));
        assert_eq!(s["maxValues"], json!({"f": "NaN", "d": "Infinity"}));
        assert_eq!(s["nullCount"], json!({"f": 1, "d": 1}));
        let all_nan = stats_of(
            &[field("f", DataType::Double)],
            &[],
            vec![Arc::new(Float64Array::from(vec![f64::NAN, f64::NAN]))],
        );
        assert_eq!(all_nan["minValues"], json!({"f": "NaN"}));
        assert_eq!(all_nan["maxValues"], json!({"f": "NaN"}));
    }

    #[test]
    fn nulls_nested_structs_and_types_without_bounds() {
        let st = DataType::Struct(crate::log::schema::StructType::new(vec![
            field("x", DataType::Integer),
            field("y", DataType::String),
        ]));
        let fields = [
            field("st", st),
            field(
                "l",
                DataType::Array {
                    element: Box::new(DataType::Integer),
                    contains_null: true,
                },
            ),
            field("t", DataType::Timestamp),
        ];
        let sf = Fields::from(vec![
            Field::new("x", ArrowType::Int32, true),
            Field::new("y", ArrowType::Utf8, true),
        ]);
        // row 1's struct is null, but its children hold values: they must not count
        let st_arr = StructArray::new(
            sf,
            vec![
                Arc::new(Int32Array::from(vec![5, 99, 7, -3])),
                Arc::new(StringArray::from(vec![
                    Some("b"),
                    Some("zzz"),
                    None,
                    Some("a"),
                ])),
            ],
            Some(NullBuffer::from(vec![true, false, true, true])),
        );
        let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1)]),
            None,
            Some(vec![]),
            None,
        ]);
        let ts = TimestampMicrosecondArray::from(vec![
            Some(1_704_164_645_678_999),
            None,
            Some(1_704_164_645_000_001),
            None,
        ])
        .with_timezone("UTC");
        let s = stats_of(
            &fields,
            &[],
            vec![Arc::new(st_arr), Arc::new(list), Arc::new(ts)],
        );
        assert_eq!(s["numRecords"], json!(4));
        assert_eq!(
            s["nullCount"],
            json!({"st": {"x": 1, "y": 2}, "l": 2, "t": 2})
        );
        assert_eq!(
            s["minValues"],
            json!({"st": {"x": -3, "y": "a"}, "t": "2024-01-02T03:04:05.000Z"})
        );
        assert_eq!(
            s["maxValues"],
            json!({"st": {"x": 7, "y": "b"}, "t": "2024-01-02T03:04:05.678Z"})
        );
        assert_eq!(s["tightBounds"], json!(true));
    }

    fn ints(n: usize) -> Vec<StructField> {
        (0..n)
            .map(|i| field(&format!("c{i}"), DataType::Long))
            .collect()
    }

    fn names(spec: &StatsSpec) -> Vec<String> {
        fn walk(cs: &[StatsColumn], prefix: &str, out: &mut Vec<String>) {
            for c in cs {
                let name = format!("{prefix}{}", c.name);
                match &c.kind {
                    StatsKind::Leaf(_) => out.push(name),
                    StatsKind::Struct(ch) => walk(ch, &format!("{name}."), out),
                }
            }
        }
        let mut out = Vec::new();
        walk(&spec.columns, "", &mut out);
        out
    }

    fn spec(fields: &[StructField], config: &[(&str, &str)]) -> Result<StatsSpec> {
        let config = config
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect();
        StatsSpec::new(fields, ColumnMappingMode::None, &config, false)
    }

    #[test]
    fn num_indexed_cols_counts_leaves_in_schema_order() {
        assert_eq!(names(&spec(&ints(40), &[]).unwrap()).len(), 32);
        let nested = vec![
            field("a", DataType::Long),
            field(
                "s",
                DataType::Struct(crate::log::schema::StructType::new(vec![
                    field("x", DataType::Long),
                    field("y", DataType::Long),
                ])),
            ),
            field("b", DataType::Long),
        ];
        let two = spec(&nested, &[(DATA_SKIPPING_NUM_INDEXED_COLS, "2")]).unwrap();
        assert_eq!(names(&two), ["a", "s.x"]);
        let all = spec(&nested, &[(DATA_SKIPPING_NUM_INDEXED_COLS, "-1")]).unwrap();
        assert_eq!(names(&all), ["a", "s.x", "s.y", "b"]);
        assert!(
            names(&spec(&nested, &[(DATA_SKIPPING_NUM_INDEXED_COLS, "0")]).unwrap()).is_empty()
        );
        assert!(spec(&nested, &[(DATA_SKIPPING_NUM_INDEXED_COLS, "many")]).is_err());
        // stats columns win over the count; case-insensitive; a struct names its leaves
        let chosen = spec(
            &nested,
            &[
                (DATA_SKIPPING_NUM_INDEXED_COLS, "1"),
                (DATA_SKIPPING_STATS_COLUMNS, "B, `S`.y"),
            ],
        )
        .unwrap();
        assert_eq!(names(&chosen), ["s.y", "b"]);
        let whole = spec(&nested, &[(DATA_SKIPPING_STATS_COLUMNS, "s")]).unwrap();
        assert_eq!(names(&whole), ["s.x", "s.y"]);
        // the written stats hold exactly those columns
        let s = stats_of(
            &ints(3),
            &[(DATA_SKIPPING_STATS_COLUMNS, "c2")],
            vec![
                Arc::new(Int64Array::from(vec![1, 2])),
                Arc::new(Int64Array::from(vec![3, 4])),
                Arc::new(Int64Array::from(vec![5, 6])),
            ],
        );
        assert_eq!(s["minValues"], json!({"c2": 5}));
        assert_eq!(s["nullCount"], json!({"c2": 0}));
    }

    #[test]
    fn column_lists_parse_like_spark_identifiers() {
        assert_eq!(
            parse_column_list(" a , b.c,`d.e`.f, `x``y` ").unwrap(),
            vec![
                vec!["a".to_string()],
                vec!["b".into(), "c".into()],
                vec!["d.e".into(), "f".into()],
                vec!["x`y".into()],
            ]
        );
        assert!(parse_column_list("").unwrap().is_empty());
        for bad in ["a,,b", "`a", "a.", "`a`b"] {
            assert!(parse_column_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn decimals_and_dates_are_exact() {
        let fields = [
            field(
                "d",
                DataType::Decimal {
                    precision: 38,
                    scale: 3,
                },
            ),
            field("dt", DataType::Date),
        ];
        let dec = arrow_array::Decimal128Array::from(vec![
            Some(-1500),
            Some(12_345_678),
            Some(99_999_999_999_999_999_999_999_999_999_999_999_999),
            None,
        ])
        .with_precision_and_scale(38, 3)
        .unwrap();
        let dates = arrow_array::Date32Array::from(vec![Some(19724), None, Some(-25567), Some(0)]);
        let config: HashMap<String, Option<String>> = HashMap::new();
        let spec = StatsSpec::new(&fields, ColumnMappingMode::None, &config, false).unwrap();
        let batch = RecordBatch::try_from_iter(vec![
            ("d", Arc::new(dec) as ArrayRef),
            ("dt", Arc::new(dates)),
        ])
        .unwrap();
        let mut stats = WrittenFileStats::new(&spec);
        stats.update(&spec, &batch).unwrap();
        let text = stats.to_json(&spec);
        assert!(
            text.contains(r#""minValues":{"d":-1.500,"dt":"1900-01-01"}"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#""maxValues":{"d":99999999999999999999999999999999999.999,"dt":"2024-01-02"}"#
            ),
            "{text}"
        );
        assert!(!text.contains("tightBounds"), "{text}");
    }
}
