//! Writing a table from Arrow data: data files through the [`data`] writer,
//! then one commit that creates the table ([`create`]) or appends to it
//! ([`append`]). Files written before a failed commit are removed (never
//! one the table's log references), so a failure leaves nothing behind.
//!
//! [`data`]: super::data
//! [`create`]: super::create
//! [`append`]: super::append

use std::collections::{HashMap, HashSet};

use arrow_array::RecordBatchReader;

use super::append::{append_files, check_appendable};
use super::create::{create_table, CreateOptions};
use super::data::{remove_files, DataWriter, TableLayout, WriterOptions};
use crate::error::{Error, Result};
use crate::io::TableStore;
use crate::log::actions::Add;
use crate::log::features::properties::COLUMN_MAPPING_MODE;
use crate::log::path::normalize_path;
use crate::log::schema::StructType;
use crate::table::snapshot::Snapshot;

/// What to do about a table that exists (or not) where data is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaveMode {
    /// Create the table; an error if one exists.
    ErrorIfExists,
    /// Append to the table; an error if there is none.
    Append,
}

impl SaveMode {
    /// `"error"` (or `"errorifexists"`) or `"append"`, as Spark names them.
    pub fn parse(text: &str) -> Result<SaveMode> {
        match text.to_ascii_lowercase().as_str() {
            "error" | "errorifexists" => Ok(SaveMode::ErrorIfExists),
            "append" => Ok(SaveMode::Append),
            other => Err(Error::InvalidArgument(format!(
                "mode {other:?} is not supported (expected \"error\" or \"append\")"
            ))),
        }
    }
}

/// How a table is written.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    pub mode: SaveMode,
    /// Partition columns: those of a new table; for an append, empty or the table's.
    pub partition_by: Vec<String>,
    /// Properties of a new table.
    pub configuration: HashMap<String, String>,
    /// A new table gets deletion vectors.
    pub enable_deletion_vectors: bool,
    pub writer: WriterOptions,
    /// Liquid clustering columns of a new table (`CLUSTER BY`).
    pub cluster_by: Vec<String>,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            mode: SaveMode::ErrorIfExists,
            partition_by: Vec::new(),
            configuration: HashMap::new(),
            enable_deletion_vectors: true,
            writer: WriterOptions::default(),
            cluster_by: Vec::new(),
        }
    }
}

/// The table at `store`, if there is one.
async fn latest(store: &TableStore) -> Result<Option<Snapshot>> {
    match Snapshot::load(store.clone(), None).await {
        Ok(s) => Ok(Some(s)),
        Err(Error::NotATable(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Where data files go and what they must look like: a new table's layout
/// from `schema`, or the existing table's (with its snapshot).
pub async fn target(
    store: &TableStore,
    schema: Option<&StructType>,
    options: &WriteOptions,
) -> Result<(TableLayout, Option<Snapshot>)> {
    let existing = latest(store).await?;
    match (options.mode, existing) {
        (SaveMode::ErrorIfExists, Some(s)) => Err(Error::TableExists(format!(
            "{} (version {})",
            store.url(),
            s.version()
        ))),
        (SaveMode::ErrorIfExists, None) => {
            let schema = schema.ok_or_else(|| {
                Error::InvalidArgument("creating a table needs the data's schema".into())
            })?;
            let mapped = options
                .configuration
                .get(COLUMN_MAPPING_MODE)
                .is_some_and(|m| !m.eq_ignore_ascii_case("none"));
            if mapped {
                return Err(Error::Unsupported(format!(
                    "creating a table with {COLUMN_MAPPING_MODE} (deltadv does not assign \
                     physical names; create it with Delta Spark, then append)"
                )));
            }
            let layout = TableLayout::new_table(
                schema.clone(),
                options.partition_by.clone(),
                &options.configuration,
                options.enable_deletion_vectors,
            );
            Ok((layout, None))
        }
        (SaveMode::Append, None) => Err(Error::NotATable(format!(
            "no Delta table at {} to append to",
            store.url()
        ))),
        (SaveMode::Append, Some(s)) => {
            let table_parts = &s.metadata().partition_columns;
            if !options.partition_by.is_empty() && &options.partition_by != table_parts {
                return Err(Error::InvalidArgument(format!(
                    "partition_by {:?} differs from the table's partition columns {table_parts:?}",
                    options.partition_by
                )));
            }
            if !options.cluster_by.is_empty() {
                let table: Vec<String> = crate::log::features::clustering::clustering_columns(
                    s.protocol(),
                    s.domain_metadata(),
                    s.schema(),
                    s.column_mapping(),
                )?
                .unwrap_or_default()
                .iter()
                .map(|c| c.name())
                .collect();
                if options.cluster_by != table {
                    return Err(Error::InvalidArgument(format!(
                        "cluster_by {:?} differs from the table's clustering columns {table:?}",
                        options.cluster_by
                    )));
                }
            }
            check_appendable(&s)?;
            Ok((TableLayout::of_snapshot(&s), Some(s)))
        }
    }
}

fn input_error(e: arrow_schema::ArrowError) -> Error {
    Error::InvalidArgument(format!("reading the input data: {e}"))
}

/// The schema a write with `options` describes the data by: the given one;
/// for a new table without one, the data's; for an append, none (the
/// table's is used).
fn data_schema(
    reader_schema: &arrow_schema::Schema,
    schema: Option<&StructType>,
    options: &WriteOptions,
) -> Result<Option<StructType>> {
    match (schema, options.mode) {
        (Some(s), _) => Ok(Some(s.clone())),
        (None, SaveMode::ErrorIfExists) => StructType::from_arrow(reader_schema).map(Some),
        (None, SaveMode::Append) => Ok(None),
    }
}

/// Write the batches of `reader` as data files laid out as `layout`; on a
/// failure the files written so far are removed.
async fn write_layout<R: RecordBatchReader>(
    store: &TableStore,
    reader: R,
    layout: TableLayout,
    options: &WriteOptions,
) -> Result<(Vec<Add>, Vec<(String, i64)>)> {
    let mut writer = DataWriter::try_new(store.clone(), layout, options.writer.clone())?;
    let written = async {
        // The data's schema is checked before anything is written.
        writer.check_schema(&reader.schema())?;
        for batch in reader {
            writer.write(&batch.map_err(input_error)?).await?;
        }
        writer.finish().await
    }
    .await;
    match written {
        Ok(adds) => Ok((adds, writer.identity_high_water_marks())),
        Err(e) => {
            let _ = remove_files(store, writer.started_files()).await;
            Err(e)
        }
    }
}

/// Write the batches of `reader` as data files for the table at `store`,
/// without committing them; their add actions. On a failure the files
/// written so far are removed.
pub async fn write_files<R: RecordBatchReader>(
    store: &TableStore,
    reader: R,
    schema: Option<&StructType>,
    options: &WriteOptions,
) -> Result<Vec<Add>> {
    let schema = data_schema(&reader.schema(), schema, options)?;
    let (layout, _) = target(store, schema.as_ref(), options).await?;
    let (adds, marks) = write_layout(store, reader, layout, options).await?;
    if let Some((column, _)) = marks.first() {
        // Files committed apart (by commit_files, maybe with other tasks'
        // files) cannot carry the identity high-water mark.
        let paths: Vec<String> = adds.iter().map(|a| normalize_path(&a.path)).collect();
        let _ = remove_files(store, &paths).await;
        return Err(Error::Unsupported(format!(
            "identity column '{column}' needs new values, which deltadv hands out only when \
             it writes and commits in one call (write_table)"
        )));
    }
    Ok(adds)
}

/// Commit `adds` to `snapshot`'s table (append) or as a new table (create,
/// `schema` required); when the commit fails, the files are removed (any the
/// log references are kept).
async fn commit_to(
    store: &TableStore,
    snapshot: Option<Snapshot>,
    adds: Vec<Add>,
    schema: Option<&StructType>,
    options: &WriteOptions,
) -> Result<u64> {
    let paths: Vec<String> = adds.iter().map(|a| normalize_path(&a.path)).collect();
    let committed = match snapshot {
        Some(s) => append_files(&s, adds).await,
        None => match schema {
            None => Err(Error::InvalidArgument(
                "creating a table needs the data's schema".into(),
            )),
            Some(schema) => {
                let create = CreateOptions {
                    partition_by: options.partition_by.clone(),
                    configuration: options.configuration.clone(),
                    enable_deletion_vectors: options.enable_deletion_vectors,
                    cluster_by: options.cluster_by.clone(),
                };
                create_table(store, schema, adds, &create).await
            }
        },
    };
    if committed.is_err() {
        let _ = remove_uncommitted(store, &paths).await;
    }
    committed
}

/// Commit data files written under the table root (`adds`): create the
/// table (mode error, `schema` required) or append to it. When the commit
/// fails, the files are removed (any the log references are kept).
pub async fn commit_files(
    store: &TableStore,
    adds: Vec<Add>,
    schema: Option<&StructType>,
    options: &WriteOptions,
) -> Result<u64> {
    match target(store, schema, options).await {
        Ok((_, snapshot)) => commit_to(store, snapshot, adds, schema, options).await,
        Err(e) => {
            let paths: Vec<String> = adds.iter().map(|a| normalize_path(&a.path)).collect();
            let _ = remove_uncommitted(store, &paths).await;
            Err(e)
        }
    }
}

/// Write the batches of `reader` and commit them in one go (see
/// [`write_files`] and [`commit_files`]), with the table's log replayed
/// once: an append commits on the snapshot the files were written for (the
/// transaction checks what was committed since). Returns the committed
/// version.
pub async fn write_table<R: RecordBatchReader>(
    store: &TableStore,
    reader: R,
    options: &WriteOptions,
) -> Result<u64> {
    let schema = data_schema(&reader.schema(), None, options)?;
    let (layout, snapshot) = target(store, schema.as_ref(), options).await?;
    let (adds, marks) = write_layout(store, reader, layout, options).await?;
    match (&snapshot, marks.is_empty()) {
        (Some(s), false) => {
            let paths: Vec<String> = adds.iter().map(|a| normalize_path(&a.path)).collect();
            let committed = super::append::append_files_with_identity(s, adds, &marks).await;
            if committed.is_err() {
                let _ = remove_uncommitted(store, &paths).await;
            }
            committed
        }
        _ => commit_to(store, snapshot, adds, schema.as_ref(), options).await,
    }
}

/// Remove data files (`paths` relative to the root, decoded) that no commit
/// references: files referenced by the table's latest version are kept.
pub async fn remove_uncommitted(store: &TableStore, paths: &[String]) -> Result<()> {
    let live: HashSet<String> = match latest(store).await? {
        Some(s) => s.files()?.into_iter().map(|f| f.path).collect(),
        None => HashSet::new(),
    };
    let orphans: Vec<String> = paths
        .iter()
        .filter(|p| !live.contains(*p))
        .cloned()
        .collect();
    remove_files(store, &orphans).await
}
