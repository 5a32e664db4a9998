//! Type widening (PROTOCOL.md, "Type Widening"): which type changes Delta
//! allows, the `delta.typeChanges` history they leave in a column's
//! metadata, and whether a column's statistics still compare after them.
//! Pure.

use super::properties::TYPE_CHANGES_KEY;
use super::reader_features;
use crate::error::{Error, Result};
use crate::log::actions::Protocol;
use crate::log::schema::{parse_data_type, DataType, StructField, StructType};

/// Whether Delta's type widening allows changing a column from `from` to
/// `to` (PROTOCOL.md, "Type Widening"; Delta Spark 4.4 reads all of these).
pub fn type_change_supported(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    let int_rank = |t: &DataType| match t {
        Byte => Some(1),
        Short => Some(2),
        Integer => Some(3),
        Long => Some(4),
        _ => None,
    };
    // A decimal holding every value of an integer type: 10 integer digits
    // for byte/short/int, 20 for long.
    let decimal_holds = |digits: i16, precision: u8, scale: i8| {
        scale >= 0 && i16::from(precision) - i16::from(scale) >= digits
    };
    match (from, to) {
        _ if from == to => true,
        (Float, Double) | (Date, TimestampNtz) => true,
        (Byte | Short | Integer, Double) => true,
        (
            Decimal {
                precision: p1,
                scale: s1,
            },
            Decimal {
                precision: p2,
                scale: s2,
            },
        ) => s2 >= s1 && i16::from(*p2) - i16::from(*s2) >= i16::from(*p1) - i16::from(*s1),
        (Byte | Short | Integer, Decimal { precision, scale }) => {
            decimal_holds(10, *precision, *scale)
        }
        (Long, Decimal { precision, scale }) => decimal_holds(20, *precision, *scale),
        _ => match (int_rank(from), int_rank(to)) {
            (Some(a), Some(b)) => a <= b,
            _ => false,
        },
    }
}

/// One recorded type change of a column (`delta.typeChanges`).
#[derive(Debug, Clone, PartialEq)]
pub struct TypeChange {
    pub from: DataType,
    pub to: DataType,
    /// Within the column: `element`, `key`, `value`, dotted for nesting;
    /// None for the column itself.
    pub field_path: Option<String>,
}

/// The type changes recorded on one field (none when there is no history).
pub fn type_changes(field: &StructField) -> Result<Vec<TypeChange>> {
    let Some(history) = field.metadata.get(TYPE_CHANGES_KEY) else {
        return Ok(Vec::new());
    };
    let bad = |what: String| {
        Error::Unsupported(format!(
            "column '{}': malformed {TYPE_CHANGES_KEY} ({what})",
            field.name
        ))
    };
    let entries = history
        .as_array()
        .ok_or_else(|| bad(format!("expected a list, found {history}")))?;
    entries
        .iter()
        .map(|e| {
            let text = |key: &str| {
                e.get(key)
                    .and_then(|v| v.as_str())
                    .ok_or_else(|| bad(format!("an entry without a string \"{key}\": {e}")))
            };
            let ty = |key: &str| {
                let name = text(key)?;
                parse_data_type(&serde_json::Value::from(name), &field.name)
                    .map_err(|_| bad(format!("unknown type {name:?}")))
            };
            Ok(TypeChange {
                from: ty("fromType")?,
                to: ty("toType")?,
                field_path: e
                    .get("fieldPath")
                    .and_then(|v| v.as_str())
                    .map(str::to_string),
            })
        })
        .collect()
}

/// On a table that supports type widening, refuse a schema recording a type
/// change deltadv cannot read (the protocol asks readers to fail then).
pub fn check_type_changes(p: &Protocol, schema: &StructType) -> Result<()> {
    if !reader_features(p).any(|f| f == "typeWidening" || f == "typeWidening-preview") {
        return Ok(());
    }
    fn walk(st: &StructType, parent: &str) -> Result<()> {
        for f in &st.fields {
            let path = if parent.is_empty() {
                f.name.clone()
            } else {
                format!("{parent}.{}", f.name)
            };
            for c in type_changes(f)? {
                // String-like changes are not widening and readers ignore them.
                let stringish = c.from == DataType::String && c.to == DataType::String;
                if !stringish && !type_change_supported(&c.from, &c.to) {
                    let at = c.field_path.map(|p| format!(".{p}")).unwrap_or_default();
                    return Err(Error::Unsupported(format!(
                        "column '{path}{at}': the table records a type change from {} to {} \
                         ({TYPE_CHANGES_KEY}), which type widening does not allow",
                        c.from, c.to
                    )));
                }
            }
            walk_type(&f.data_type, &path)?;
        }
        Ok(())
    }
    fn walk_type(dt: &DataType, path: &str) -> Result<()> {
        match dt {
            DataType::Struct(st) => walk(st, path),
            DataType::Array { element, .. } => walk_type(element, path),
            DataType::Map { key, value, .. } => {
                walk_type(key, path)?;
                walk_type(value, path)
            }
            _ => Ok(()),
        }
    }
    walk(schema, "")
}

/// Whether min/max statistics of `field` can be compared with values of its
/// current type: true unless a type change recorded on the field itself
/// changed how its bounds read (anything but integer widening — e.g. a
/// float's JSON bound rounds differently as a double, a decimal's parquet
/// bound is scaled by the old scale).
pub fn bounds_comparable(field: &StructField) -> bool {
    let integral = |t: &DataType| {
        matches!(
            t,
            DataType::Byte | DataType::Short | DataType::Integer | DataType::Long
        )
    };
    match type_changes(field) {
        Ok(changes) => changes
            .iter()
            .filter(|c| c.field_path.is_none())
            .all(|c| integral(&c.from) && integral(&c.to)),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::{err, protocol};
    use super::*;

    #[test]
    fn type_change_rules() {
        use DataType::*;
        let dec = |precision, scale| Decimal { precision, scale };
        for (from, to) in [
            (Byte, Short),
            (Short, Integer),
            (Integer, Long),
            (Byte, Long),
            (Float, Double),
            (Integer, Double),
            (Date, TimestampNtz),
            (dec(5, 2), dec(10, 4)),
            (dec(5, 2), dec(5, 2)),
            (Integer, dec(10, 0)),
            (Short, dec(12, 2)),
            (Long, dec(20, 0)),
        ] {
            assert!(type_change_supported(&from, &to), "{from} -> {to}");
        }
        for (from, to) in [
            (Long, Integer),
            (Double, Float),
            (Long, Double),
            (Date, Timestamp),
            (dec(10, 4), dec(10, 2)),
            (dec(5, 2), dec(6, 4)),
            (Integer, dec(9, 0)),
            (Long, dec(20, 1)),
            (String, Long),
        ] {
            assert!(!type_change_supported(&from, &to), "{from} -> {to}");
        }
    }

    fn schema_with(field: serde_json::Value) -> StructType {
        StructType::parse(&json!({"type": "struct", "fields": [field]}).to_string()).unwrap()
    }

    #[test]
    fn type_change_history_is_validated_on_type_widening_tables() {
        let tw = protocol(3, 7, &["typeWidening"], &["typeWidening"]);
        let ok = schema_with(
            json!({"name": "e", "type": "long", "nullable": true, "metadata": {
            "delta.typeChanges": [
                {"fromType": "short", "toType": "integer"},
                {"fromType": "integer", "toType": "long"}]}}),
        );
        check_type_changes(&tw, &ok).unwrap();
        assert!(bounds_comparable(&ok.fields[0]));
        let nested = schema_with(json!({"name": "e", "type": {"type": "array", "elementType":
            {"type": "map", "keyType": "string", "valueType": "decimal(10, 4)",
             "valueContainsNull": true}, "containsNull": true}, "nullable": true, "metadata": {
            "delta.typeChanges": [{"fromType": "decimal(6, 2)", "toType": "decimal(10, 4)",
                                   "fieldPath": "element.value"}]}}));
        check_type_changes(&tw, &nested).unwrap();
        let float = schema_with(json!({"name": "f", "type": "double", "nullable": true,
            "metadata": {"delta.typeChanges": [{"fromType": "float", "toType": "double"}]}}));
        check_type_changes(&tw, &float).unwrap();
        assert!(!bounds_comparable(&float.fields[0]));
        let bad = schema_with(json!({"name": "s", "type": {"type": "struct", "fields": [
            {"name": "x", "type": "integer", "nullable": true, "metadata": {
                "delta.typeChanges": [{"fromType": "long", "toType": "integer"}]}}]},
            "nullable": true, "metadata": {}}));
        let e = err(check_type_changes(&tw, &bad));
        assert!(
            e.contains("'s.x'") && e.contains("from long to integer"),
            "{e}"
        );
        // without the feature the metadata is not looked at
        check_type_changes(&protocol(3, 7, &[], &[]), &bad).unwrap();
        let malformed = schema_with(json!({"name": "m", "type": "long", "nullable": true,
            "metadata": {"delta.typeChanges": [{"fromType": "int4", "toType": "long"}]}}));
        let e = err(check_type_changes(&tw, &malformed));
        assert!(
            e.contains("malformed delta.typeChanges") && e.contains("int4"),
            "{e}"
        );
        assert!(!bounds_comparable(&malformed.fields[0]));
        assert!(bounds_comparable(&StructField::new(
            "n",
            DataType::Long,
            true
        )));
    }
}
