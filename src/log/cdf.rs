//! Change Data Feed: which rows of which files one commit changed, as Delta
//! Spark's CDF reader (`table_changes`) derives them. Pure: takes a commit's
//! actions, returns what to read.
//!
//! Per commit:
//!
//! | the commit has                          | rows it changed                         |
//! |-----------------------------------------|-----------------------------------------|
//! | `cdc` actions                           | the rows of those files only, each with |
//! |                                         | its stored `_change_type`               |
//! | a MERGE whose metrics count 0 changes   | none                                    |
//! | an `add` (dataChange) of a path only    | its rows minus its DV: `insert`         |
//! | a `remove` (dataChange) of a path only  | its rows minus its DV: `delete`         |
//! | a `remove` and an `add` of one path     | rows in the new DV, not the old: `delete`; |
//! |                                         | rows in the old DV, not the new: `insert`  |
//!
//! The last row is how a DELETE with deletion vectors (which writes no `cdc`
//! file) shows up in the feed: only the rows the new DV adds are read.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::actions::{Action, Metadata};
use super::features::properties::TableProperties;
use super::path::normalize_path;
use crate::error::{Error, Result};
use crate::format::descriptor::DeletionVectorDescriptor;

/// The column saying how a row changed (stored in `cdc` files, added otherwise).
pub const CHANGE_TYPE_COLUMN: &str = "_change_type";
/// The version of the commit that changed a row.
pub const COMMIT_VERSION_COLUMN: &str = "_commit_version";
/// The timestamp of that commit.
pub const COMMIT_TIMESTAMP_COLUMN: &str = "_commit_timestamp";
/// The directory (under the table root) of `cdc` files.
pub const CHANGE_DATA_DIR: &str = "_change_data";

/// How a row changed (`_change_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeType {
    Insert,
    Delete,
    UpdatePreimage,
    UpdatePostimage,
}

impl ChangeType {
    /// The `_change_type` value.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeType::Insert => "insert",
            ChangeType::Delete => "delete",
            ChangeType::UpdatePreimage => "update_preimage",
            ChangeType::UpdatePostimage => "update_postimage",
        }
    }
}

/// Which rows of a file a commit changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChangedRows {
    /// A `cdc` file: all its rows, each with the `_change_type` stored in it.
    CdcFile,
    /// Every row of a data file that `deletion_vector` does not delete.
    Live {
        change_type: ChangeType,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deletion_vector: Option<DeletionVectorDescriptor>,
    },
    /// Only the rows in `rows` that are not in `except`: the difference of
    /// the DVs of a file removed and re-added by one commit.
    DvDifference {
        change_type: ChangeType,
        rows: DeletionVectorDescriptor,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        except: Option<DeletionVectorDescriptor>,
    },
}

/// A file with rows one commit changed.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangedFile {
    /// URL-decoded, relative to the table root (or an absolute URI).
    pub path: String,
    pub size: u64,
    pub partition_values: HashMap<String, Option<String>>,
    pub rows: ChangedRows,
}

/// Whether the feed is on in `metadata` (`delta.enableChangeDataFeed`, read
/// case-insensitively as Delta Spark does).
pub fn is_enabled(metadata: &Metadata) -> bool {
    TableProperties::of(metadata).enable_change_data_feed()
}

/// A MERGE that says it changed no row: Delta Spark serves no change for it
/// even when it rewrote files.
pub fn is_noop_merge(commit_info: Option<&serde_json::Value>) -> bool {
    let Some(info) = commit_info else {
        return false;
    };
    if info.get("operation").and_then(|o| o.as_str()) != Some("MERGE") {
        return false;
    }
    let metrics = info.get("operationMetrics");
    [
        "numTargetRowsInserted",
        "numTargetRowsUpdated",
        "numTargetRowsDeleted",
    ]
    .iter()
    .all(|k| metrics.and_then(|m| m.get(*k)).and_then(|v| v.as_str()) == Some("0"))
}

/// The files with rows the commit (`actions`, read from `file`) changed, in
/// the order Delta's reader lists them: `cdc` files, else inserted files,
/// deleted files, then DV differences.
pub fn changed_files(actions: &[Action], file: &str) -> Result<Vec<ChangedFile>> {
    let cdc: Vec<ChangedFile> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Cdc(c) => Some(ChangedFile {
                path: normalize_path(&c.path),
                size: u64::try_from(c.size).unwrap_or(0),
                partition_values: c.partition_values.clone(),
                rows: ChangedRows::CdcFile,
            }),
            _ => None,
        })
        .collect();
    if !cdc.is_empty() {
        return Ok(cdc);
    }
    let commit_info = actions.iter().find_map(|a| match a {
        Action::CommitInfo(v) => Some(v),
        _ => None,
    });
    if is_noop_merge(commit_info) {
        return Ok(Vec::new());
    }
    // By decoded path; BTreeMap for a stable order.
    let mut adds = BTreeMap::new();
    let mut removes = BTreeMap::new();
    for a in actions {
        match a {
            Action::Add(add) if add.data_change => {
                adds.insert(normalize_path(&add.path), add.as_ref());
            }
            Action::Remove(r) if r.data_change => {
                removes.insert(normalize_path(&r.path), r.as_ref());
            }
            _ => {}
        }
    }
    let mut inserted = Vec::new();
    let mut deleted = Vec::new();
    let mut differences = Vec::new();
    for (path, add) in &adds {
        let size = u64::try_from(add.size).unwrap_or(0);
        let Some(remove) = removes.get(path) else {
            inserted.push(ChangedFile {
                path: path.clone(),
                size,
                partition_values: add.partition_values.clone(),
                rows: ChangedRows::Live {
                    change_type: ChangeType::Insert,
                    deletion_vector: add.deletion_vector.clone(),
                },
            });
            continue;
        };
        let file_of = |rows| ChangedFile {
            path: path.clone(),
            size,
            partition_values: add.partition_values.clone(),
            rows,
        };
        match (&remove.deletion_vector, &add.deletion_vector) {
            (None, None) => {
                return Err(Error::CorruptLog {
                    file: file.to_string(),
                    detail: format!(
                        "{path} is removed and added again without a deletion vector on \
                         either side: the change data feed cannot tell which rows changed"
                    ),
                })
            }
            (old, Some(new)) if old.as_ref().map(|o| o.unique_id()) != Some(new.unique_id()) => {
                differences.push(file_of(ChangedRows::DvDifference {
                    change_type: ChangeType::Delete,
                    rows: new.clone(),
                    except: old.clone(),
                }));
                if let Some(old) = old {
                    differences.push(file_of(ChangedRows::DvDifference {
                        change_type: ChangeType::Insert,
                        rows: old.clone(),
                        except: Some(new.clone()),
                    }));
                }
            }
            (Some(old), None) => differences.push(file_of(ChangedRows::DvDifference {
                change_type: ChangeType::Insert,
                rows: old.clone(),
                except: None,
            })),
            // The same DV on both sides: no row changed.
            _ => {}
        }
    }
    for (path, remove) in &removes {
        if adds.contains_key(path) {
            continue;
        }
        deleted.push(ChangedFile {
            path: path.clone(),
            size: remove.size.and_then(|s| u64::try_from(s).ok()).unwrap_or(0),
            partition_values: remove.partition_values.clone().unwrap_or_default(),
            rows: ChangedRows::Live {
                change_type: ChangeType::Delete,
                deletion_vector: remove.deletion_vector.clone(),
            },
        });
    }
    inserted.extend(deleted);
    inserted.extend(differences);
    Ok(inserted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::actions::parse_commit;

    fn dv(z85: &str, cardinality: u64) -> String {
        format!(
            r#"{{"storageType":"u","pathOrInlineDv":"{z85}","offset":1,"sizeInBytes":36,"cardinality":{cardinality}}}"#
        )
    }

    fn changes(lines: &[String]) -> Vec<ChangedFile> {
        let text = lines.join("\n");
        let actions = parse_commit(text.as_bytes(), "00.json").unwrap();
        changed_files(&actions, "00.json").unwrap()
    }

    const A: &str = "vBn[lx{q8@P<9BNH/isA";
    const B: &str = "wBn[lx{q8@P<9BNH/isA";

    #[test]
    fn cdc_files_win_over_adds_and_removes() {
        let got = changes(&[
            r#"{"add":{"path":"a.parquet","partitionValues":{},"size":1,"modificationTime":0,"dataChange":true}}"#.into(),
            r#"{"cdc":{"path":"_change_data/c%20d.parquet","partitionValues":{"p":"1"},"size":7,"dataChange":false}}"#.into(),
        ]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].path, "_change_data/c d.parquet");
        assert_eq!(got[0].size, 7);
        assert_eq!(got[0].rows, ChangedRows::CdcFile);
    }

    #[test]
    fn adds_insert_removes_delete_pairs_diff() {
        let got = changes(&[
            r#"{"add":{"path":"new.parquet","partitionValues":{},"size":1,"modificationTime":0,"dataChange":true}}"#.into(),
            r#"{"add":{"path":"compacted.parquet","partitionValues":{},"size":1,"modificationTime":0,"dataChange":false}}"#.into(),
            r#"{"remove":{"path":"gone.parquet","dataChange":true,"size":5}}"#.into(),
            format!(r#"{{"remove":{{"path":"dv.parquet","dataChange":true,"deletionVector":{}}}}}"#, dv(A, 2)),
            format!(r#"{{"add":{{"path":"dv.parquet","partitionValues":{{}},"size":9,"modificationTime":0,"dataChange":true,"deletionVector":{}}}}}"#, dv(B, 3)),
            r#"{"remove":{"path":"first.parquet","dataChange":true}}"#.to_string(),
            format!(r#"{{"add":{{"path":"first.parquet","partitionValues":{{}},"size":9,"modificationTime":0,"dataChange":true,"deletionVector":{}}}}}"#, dv(A, 2)),
        ]);
        let kinds: Vec<(&str, String)> = got
            .iter()
            .map(|f| {
                let k = match &f.rows {
                    ChangedRows::CdcFile => "cdc".to_string(),
                    ChangedRows::Live {
                        change_type,
                        deletion_vector,
                    } => {
                        format!(
                            "live {} {}",
                            change_type.as_str(),
                            deletion_vector.is_some()
                        )
                    }
                    ChangedRows::DvDifference {
                        change_type,
                        rows,
                        except,
                    } => format!(
                        "diff {} {} {}",
                        change_type.as_str(),
                        rows.cardinality(),
                        except.as_ref().map_or(0, |e| e.cardinality())
                    ),
                };
                (f.path.as_str(), k)
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("new.parquet", "live insert false".to_string()),
                ("gone.parquet", "live delete false".to_string()),
                ("dv.parquet", "diff delete 3 2".to_string()),
                ("dv.parquet", "diff insert 2 3".to_string()),
                ("first.parquet", "diff delete 2 0".to_string()),
            ]
        );
    }

    #[test]
    fn a_merge_that_changed_nothing_serves_nothing() {
        let info = r#"{"commitInfo":{"operation":"MERGE","operationMetrics":{"numTargetRowsInserted":"0","numTargetRowsUpdated":"0","numTargetRowsDeleted":"0"}}}"#;
        let add = r#"{"add":{"path":"a.parquet","partitionValues":{},"size":1,"modificationTime":0,"dataChange":true}}"#;
        assert!(changes(&[info.into(), add.into()]).is_empty());
        let update = info.replace(
            r#""numTargetRowsUpdated":"0""#,
            r#""numTargetRowsUpdated":"1""#,
        );
        assert_eq!(changes(&[update, add.into()]).len(), 1);
    }

    #[test]
    fn a_pair_without_dvs_is_a_clear_error() {
        let text = [
            r#"{"remove":{"path":"a.parquet","dataChange":true}}"#,
            r#"{"add":{"path":"a.parquet","partitionValues":{},"size":1,"modificationTime":0,"dataChange":true}}"#,
        ]
        .join("\n");
        let actions = parse_commit(text.as_bytes(), "07.json").unwrap();
        let e = changed_files(&actions, "07.json").unwrap_err().to_string();
        assert!(e.contains("07.json") && e.contains("a.parquet"), "{e}");
    }
}
