//! `GENERATE symlink_format_manifest`: the manifest files Presto, Trino,
//! Athena and Redshift Spectrum read a Delta table through, as Delta Spark
//! writes them: `_symlink_format_manifest/manifest` (or one per partition,
//! `_symlink_format_manifest/<col=value/…>/manifest`), each listing the
//! absolute URIs of the partition's live data files, one per line. Stale
//! partition manifests of an earlier generation are removed.
//!
//! Refused while any live file has a deletion vector: such readers ignore
//! DVs and would return deleted rows (run PURGE first), and on column-mapped
//! tables (their files' column names are not the table's), as Delta Spark
//! refuses both.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::data::partition::{escape_path_name, HIVE_DEFAULT_PARTITION};
use crate::error::{Error, Result};
use crate::log::schema::ColumnMappingMode;
use crate::table::snapshot::Snapshot;

/// The manifests' directory under the table root.
pub const MANIFEST_DIR: &str = "_symlink_format_manifest";

/// What was written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ManifestReport {
    /// Manifest files written (relative to the table root), sorted.
    pub manifests: Vec<String>,
    /// Data files listed in them.
    pub data_files: u64,
    /// Stale manifests removed.
    pub removed: Vec<String>,
}

/// Write the symlink manifests of `snapshot` (see the module docs).
pub async fn generate_symlink_manifest(snapshot: &Snapshot) -> Result<ManifestReport> {
    if snapshot.column_mapping() != ColumnMappingMode::None {
        return Err(Error::Unsupported(format!(
            "GENERATE symlink_format_manifest is not supported on tables with column mapping \
             (mode {}): the data files' column names are not the table's",
            snapshot.column_mapping()
        )));
    }
    let files = snapshot.files()?;
    if let Some(f) = files.iter().find(|f| f.add.deletion_vector.is_some()) {
        return Err(Error::Unsupported(format!(
            "[DELTA_UNSUPPORTED_GENERATE_WITH_DELETION_VECTORS] GENERATE symlink_format_manifest \
             is not supported on table versions with deletion vectors ({} has one): readers of \
             the manifest would return deleted rows. Run purge() (REORG TABLE ... APPLY (PURGE)) \
             first, then generate again",
            f.path
        )));
    }
    let store = snapshot.store();
    // As Hadoop qualifies local paths (`file:/tmp/t`, one slash), which is
    // what Delta Spark writes; other stores' URIs as they are.
    let url = store.url().as_str().trim_end_matches('/');
    let root = match url.strip_prefix("file:///") {
        Some(rest) => format!("file:/{rest}"),
        None => url.to_string(),
    };
    let partitions = &snapshot.metadata().partition_columns;
    let mut by_dir: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in &files {
        let mut dir = String::new();
        for c in partitions {
            let value = f.add.partition_values.get(c).cloned().flatten();
            dir.push_str(&escape_path_name(c));
            dir.push('=');
            match value {
                Some(v) => dir.push_str(&escape_path_name(&v)),
                None => dir.push_str(HIVE_DEFAULT_PARTITION),
            }
            dir.push('/');
        }
        let uri = if f.add.path.contains("://") || f.add.path.starts_with('/') {
            f.add.path.clone()
        } else {
            format!("{root}/{}", f.add.path)
        };
        by_dir.entry(dir).or_default().push(uri);
    }
    let mut report = ManifestReport::default();
    for (dir, mut uris) in by_dir {
        uris.sort();
        report.data_files += uris.len() as u64;
        let name = format!("{MANIFEST_DIR}/{dir}manifest");
        let mut text = uris.join("\n");
        text.push('\n');
        store.put(&store.path(&name), Bytes::from(text)).await?;
        report.manifests.push(name);
    }
    // Manifests of partitions that are gone (an earlier generation).
    let written: std::collections::HashSet<&String> = report.manifests.iter().collect();
    for meta in store.list_all().await? {
        let Some(relative) = store.relative_to_root(&meta.location) else {
            continue;
        };
        if relative.starts_with(&format!("{MANIFEST_DIR}/"))
            && relative.ends_with("/manifest")
            && !written.contains(&relative)
        {
            store.delete(&meta.location).await?;
            report.removed.push(relative);
        }
    }
    report.manifests.sort();
    Ok(report)
}
