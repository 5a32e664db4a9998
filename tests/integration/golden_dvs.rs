//! Every DV listed in golden/dv_contents.json decodes, through a descriptor
//! parsed from the table's own log JSON, to exactly the listed row indexes.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use deltadv::table::dv;
use deltadv::{DeletionVectorDescriptor, StorageType};
use serde_json::Value;

use crate::common::golden_dir;

/// Placeholder in the special-char template table (INDEX.md caveat 2).
const FOLDER_PLACEHOLDER: &str = "{{FOLDER_WITH_SPECIAL_CHAR}}";
/// Prefix Delta Spark's test build puts on DV file names (INDEX.md caveat 1).
const TEST_DV_PREFIX: &str = "test%dv%prefix-";

/// The `deletionVector` JSON objects of every add/remove in the table's JSON commits.
fn log_descriptors(table: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    let mut commits: Vec<_> = fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    commits.sort();
    for commit in commits {
        for line in fs::read_to_string(&commit).unwrap().lines() {
            let Ok(action) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            for kind in ["add", "remove"] {
                if let Some(dv) = action.get(kind).and_then(|a| a.get("deletionVector")) {
                    if dv.is_object() {
                        out.push(dv.clone());
                    }
                }
            }
        }
    }
    out
}

fn same_descriptor(log: &Value, listed: &Value) -> bool {
    [
        "storageType",
        "pathOrInlineDv",
        "sizeInBytes",
        "cardinality",
    ]
    .iter()
    .all(|k| log.get(k) == listed.get(k))
        && log.get("offset").and_then(Value::as_i64) == listed.get("offset").and_then(Value::as_i64)
}

/// A directory where a `u` DV can be found under its spec name: the table itself,
/// or (for Delta Spark's test-prefixed names) a temp dir of links to the files.
fn root_for(
    table: &Path,
    descriptor: &DeletionVectorDescriptor,
    links: &tempfile::TempDir,
) -> String {
    let rel = descriptor.relative_path().unwrap();
    if table.join(&rel).is_file() {
        return table.to_str().unwrap().to_string();
    }
    let prefixed = table.join(format!("{TEST_DV_PREFIX}{rel}"));
    assert!(
        prefixed.is_file(),
        "neither {rel} nor its test-prefixed name exists in {}",
        table.display()
    );
    let link = links.path().join(&rel);
    if !link.exists() {
        std::os::unix::fs::symlink(&prefixed, &link).unwrap();
    }
    links.path().to_str().unwrap().to_string()
}

#[test]
fn every_golden_dv_decodes_to_the_listed_rows() {
    let Some(golden) = golden_dir() else { return };
    let contents: Value =
        serde_json::from_str(&fs::read_to_string(golden.join("dv_contents.json")).unwrap())
            .unwrap();
    let tables = contents["tables"].as_object().unwrap();
    let mut checked = 0;
    let mut by_type: HashMap<StorageType, usize> = HashMap::new();
    for (table_rel, entries) in tables {
        let table = golden.join(table_rel);
        let in_log = log_descriptors(&table);
        let links = tempfile::tempdir().unwrap();
        for entry in entries.as_array().unwrap() {
            let listed = &entry["descriptor"];
            let log_json = in_log
                .iter()
                .find(|d| same_descriptor(d, listed))
                .unwrap_or_else(|| panic!("{table_rel}: descriptor {listed} not in the log"));
            let expected: Vec<u64> = entry["deleted_row_indexes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();

            let text = log_json.to_string();
            let forms: Vec<String> = if text.contains(FOLDER_PLACEHOLDER) {
                // Instantiate the template both ways Spark's test does: raw and URI-encoded.
                let folder = table.join("folder&with%special char");
                let raw = folder.to_str().unwrap().to_string();
                let encoded = raw.replace('%', "%25").replace(' ', "%20");
                vec![
                    text.replace(FOLDER_PLACEHOLDER, &raw),
                    text.replace(FOLDER_PLACEHOLDER, &encoded),
                ]
            } else {
                vec![text]
            };
            for form in forms {
                let descriptor = DeletionVectorDescriptor::from_json(&form).unwrap();
                let root = match descriptor.storage_type() {
                    StorageType::UuidRelative => root_for(&table, &descriptor, &links),
                    _ => table.to_str().unwrap().to_string(),
                };
                let rows: Vec<u64> = dv::load(&descriptor, &root)
                    .unwrap_or_else(|e| panic!("{table_rel}: {form}: {e}"))
                    .iter()
                    .collect();
                assert_eq!(rows, expected, "{table_rel}: {form}");
                *by_type.entry(descriptor.storage_type()).or_default() += 1;
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 122, "INDEX.md lists 122 distinct DVs");
    assert!(by_type[&StorageType::Inline] >= 3);
    assert!(by_type[&StorageType::AbsolutePath] >= 2);
}
