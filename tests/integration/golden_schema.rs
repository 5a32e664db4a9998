//! Column mapping on a golden table: the schema string, physical names, field
//! ids and partition values read from the table's own log.

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::Array;
use deltadv::log::schema::{
    column_mapping_mode, partition_arrays, ColumnMappingMode, StructType, PARQUET_FIELD_ID_KEY,
};
use serde_json::Value;

use crate::common::golden_dir;

#[test]
fn golden_dv_with_columnmapping() {
    let Some(golden) = golden_dir() else {
        return;
    };
    let log = golden.join("delta-kernel-rs/golden_data/dv-with-columnmapping/delta/_delta_log");
    let text = std::fs::read_to_string(log.join("00000000000000000000.json")).unwrap();
    let actions: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let meta = actions.iter().find_map(|a| a.get("metaData")).unwrap();
    let schema = StructType::parse(meta["schemaString"].as_str().unwrap()).unwrap();
    let configuration: HashMap<String, Option<String>> = meta["configuration"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().map(str::to_string)))
        .collect();
    let mode = column_mapping_mode(&configuration).unwrap();
    assert_eq!(mode, ColumnMappingMode::Name);

    let logical = schema.to_arrow(ColumnMappingMode::None, false).unwrap();
    let names: Vec<_> = logical.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["part", "col1", "col2"]);

    let physical = schema.to_arrow(mode, true).unwrap();
    for (f, sf) in physical.fields().iter().zip(&schema.fields) {
        assert!(f.name().starts_with("col-"), "{}", f.name());
        assert_eq!(f.name(), sf.physical_name(mode).unwrap());
        let id = f
            .metadata()
            .get(PARQUET_FIELD_ID_KEY)
            .map(|s| s.parse::<i64>().unwrap());
        assert_eq!(id, sf.field_id());
        assert!(sf.field_id().is_some());
    }

    // Partition values of the add actions are keyed by the physical name.
    let partition_columns: Vec<String> = meta["partitionColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let maps: Vec<HashMap<String, Option<String>>> = actions
        .iter()
        .filter_map(|a| a.get("add"))
        .map(|add| serde_json::from_value(add["partitionValues"].clone()).unwrap())
        .collect();
    assert!(!maps.is_empty());
    let refs: Vec<&HashMap<String, Option<String>>> = maps.iter().collect();
    let out = partition_arrays(&schema, &partition_columns, mode, &refs).unwrap();
    let (field, array) = &out[0];
    assert_eq!(field.name(), "part");
    assert_eq!(array.len(), maps.len());
    assert_eq!(array.null_count(), 0);
    let ints = array.as_primitive::<Int32Type>();
    assert!(ints.iter().all(|v| v.is_some_and(|v| v >= 0)));
}
