//! Every golden table: at the latest version and at every version the sources
//! state, the live file set and the logical row count match expected.json.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::Path;

use deltadv::io::{block_on, TableStore};
use deltadv::table::snapshot::Snapshot;
use serde_json::Value;

use crate::common::golden_dir;

/// Tables whose DV files carry Delta Spark's test-build name prefix (INDEX.md caveat 1).
const TEST_PREFIXED: &[&str] = &[
    "delta/spark/table-with-dv-small",
    "delta/spark/table-with-dv-large",
    "delta/spark/partitioned-table-with-dv-large",
];
const TEMPLATE: &str = "delta/spark/table-with-dv-special-char";

fn load(root: &str, version: Option<u64>) -> Snapshot {
    let store = TableStore::open(root, &HashMap::new()).unwrap();
    block_on(Snapshot::load(store, version))
        .unwrap()
        .unwrap_or_else(|e| panic!("{root} @ {version:?}: {e}"))
}

/// Copy the special-char template table into `dir`, filling in the placeholder.
pub fn materialize_template(golden: &Path, dir: &Path) -> String {
    let src = golden.join(TEMPLATE);
    let dst = dir.join("table-with-dv-special-char");
    copy_dir(&src, &dst);
    let folder = dst.join("folder&with%special char");
    let log = dst.join("_delta_log/00000000000000000000.json");
    let text = fs::read_to_string(&log).unwrap();
    fs::write(
        &log,
        text.replace("{{FOLDER_WITH_SPECIAL_CHAR}}", folder.to_str().unwrap()),
    )
    .unwrap();
    dst.to_str().unwrap().to_string()
}

pub fn copy_dir(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).unwrap();
    for entry in fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let to = dst.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to);
        } else {
            fs::copy(entry.path(), &to).unwrap();
            let mut perms = fs::metadata(&to).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perms.set_readonly(false);
            fs::set_permissions(&to, perms).unwrap();
        }
    }
}

#[test]
fn golden_tables_at_every_stated_version() {
    let Some(golden) = golden_dir() else { return };
    let expected: Value =
        serde_json::from_str(&fs::read_to_string(golden.join("expected.json")).unwrap()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut checked_versions = 0;
    for (table, exp) in expected.as_object().unwrap() {
        if table.starts_with('_') {
            continue;
        }
        let root = if table == TEMPLATE {
            materialize_template(&golden, tmp.path())
        } else {
            golden.join(table).to_str().unwrap().to_string()
        };
        let stats = &exp["log_stats"];
        let snap = load(&root, None);
        assert_eq!(
            snap.version(),
            stats["latest_version"].as_u64().unwrap(),
            "{table}"
        );
        assert_eq!(
            snap.num_files() as u64,
            stats["live_files"].as_u64().unwrap(),
            "{table}"
        );
        let materialized = snap.files().unwrap();
        assert_eq!(materialized.len(), snap.num_files());
        let with_dv = materialized
            .iter()
            .filter(|f| f.add.deletion_vector.is_some())
            .count();
        assert_eq!(with_dv, snap.dv_descriptors().unwrap().len());
        assert_eq!(
            with_dv as u64,
            stats["live_files_with_dv"].as_u64().unwrap(),
            "{table}"
        );
        assert_eq!(
            snap.logical_rows(),
            exp["rows"].as_i64(),
            "{table}: logical rows"
        );

        // Decoded DVs agree with the descriptors' cardinalities (one GET per DV file).
        if !TEST_PREFIXED.contains(&table.as_str()) {
            let dvs = block_on(snap.deletion_vectors()).unwrap().unwrap();
            let decoded: u64 = dvs.iter().map(|(_, m)| m.len()).sum();
            assert_eq!(
                decoded,
                stats["sum_dv_cardinality_live"].as_u64().unwrap(),
                "{table}"
            );
        }

        let mut versions: BTreeMap<u64, i64> = BTreeMap::new();
        for key in ["per_version_rows_helper", "per_version_rows_given"] {
            for (v, rows) in exp
                .get(key)
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                versions.insert(v.parse().unwrap(), rows.as_i64().unwrap());
            }
        }
        for (v, rows) in versions {
            let snap = load(&root, Some(v));
            assert_eq!(snap.version(), v);
            assert_eq!(snap.logical_rows(), Some(rows), "{table} @ v{v}");
            checked_versions += 1;
        }
    }
    assert!(
        checked_versions > 150,
        "checked {checked_versions} versions"
    );
}

#[test]
fn checkpoint_tables_use_their_checkpoints() {
    let Some(golden) = golden_dir() else { return };
    for (table, cp) in [
        ("delta/kernel-defaults/basic-dv-with-checkpoint", 40),
        (
            "delta-kernel-rs/golden_data/dv-partitioned-with-checkpoint/delta",
            10,
        ),
        (
            "delta-kernel-rs/golden_data/dv-with-columnmapping/delta",
            10,
        ),
        ("delta-rs/table_with_deletion_logs", 20),
    ] {
        let snap = load(golden.join(table).to_str().unwrap(), None);
        assert_eq!(snap.segment().checkpoint_version, Some(cp), "{table}");
    }
}

#[test]
fn compacted_log_files_are_used_and_agree() {
    let Some(golden) = golden_dir() else { return };
    let snap = load(
        golden
            .join("delta-kernel-rs/compacted-log-files-table")
            .to_str()
            .unwrap(),
        None,
    );
    assert!(
        snap.segment()
            .commits
            .iter()
            .any(|c| matches!(c.path, deltadv::log::path::LogPath::Compaction { .. })),
        "a compaction file was used: {:?}",
        snap.segment()
            .commits
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>()
    );
    assert_eq!(snap.logical_rows(), Some(5));
}
