//! Writing a table from Arrow data: data files through the [`data`] writer,
//! then one commit that creates the table ([`create`]), appends to it
//! ([`append`]) or overwrites it ([`overwrite`]: all rows, or those a
//! predicate matches), with schema evolution ([`SchemaMode`]). Files written before a failed commit are removed (never
//! one the table's log references), so a failure leaves nothing behind.
//!
//! [`data`]: super::data
//! [`create`]: super::create
//! [`append`]: super::append
//! [`overwrite`]: super::overwrite

use std::collections::{HashMap, HashSet};

use arrow_array::RecordBatchReader;

use super::app_txn::AppCommit;
use super::append::{append_files_as, check_appendable};
use super::create::{create_table, CreateOperation, CreateOptions};
use super::data::rules::{Identity, IdentitySlot};
use super::data::{remove_files, DataWriter, TableLayout, WriterOptions};
use super::overwrite::{overwrite_files, OverwriteOptions};
use crate::error::{Error, Result};
use crate::expr::{Binding, Predicate};
use crate::io::TableStore;
use crate::log::actions::{Add, Metadata};
use crate::log::features::properties::{COLUMN_MAPPING_MAX_ID, COLUMN_MAPPING_MODE};
use crate::log::path::normalize_path;
use crate::log::schema::{
    assign_column_mapping, assign_new_column_mapping, check_column_mapping_unique,
    column_mapping_mode, is_column_mapped, merge_schemas, ColumnMappingMode, StructType,
};
use crate::table::snapshot::Snapshot;

/// What to do about a table that exists (or not) where data is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaveMode {
    /// Create the table; an error if one exists.
    ErrorIfExists,
    /// Append to the table; an error if there is none.
    Append,
    /// Replace the table's rows (those a predicate matches, when given);
    /// create the table when there is none.
    Overwrite,
    /// Create the table; write nothing if one exists.
    Ignore,
}

impl SaveMode {
    /// `"error"` (or `"errorifexists"`), `"append"`, `"overwrite"` or
    /// `"ignore"`, as Spark names them.
    pub fn parse(text: &str) -> Result<SaveMode> {
        match text.to_ascii_lowercase().as_str() {
            "error" | "errorifexists" => Ok(SaveMode::ErrorIfExists),
            "append" => Ok(SaveMode::Append),
            "overwrite" => Ok(SaveMode::Overwrite),
            "ignore" => Ok(SaveMode::Ignore),
            other => Err(Error::InvalidArgument(format!(
                "mode {other:?} is not supported (expected \"error\", \"append\", \
                 \"overwrite\" or \"ignore\")"
            ))),
        }
    }

    /// The name Spark gives the mode (`SaveMode` in the JVM), as Delta Spark
    /// records it in `operationParameters.mode`.
    pub fn spark_name(self) -> &'static str {
        match self {
            SaveMode::ErrorIfExists => "ErrorIfExists",
            SaveMode::Append => "Append",
            SaveMode::Overwrite => "Overwrite",
            SaveMode::Ignore => "Ignore",
        }
    }

    /// Whether the mode creates the table when there is none.
    fn creates(self) -> bool {
        !matches!(self, SaveMode::Append)
    }
}

/// Schema evolution of a write to an existing table (deltalake's
/// `schema_mode`); without one the data must match the table's schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaMode {
    /// Columns of the data the table lacks are added, nullable (Delta
    /// Spark's `mergeSchema`); columns the data lacks are written as nulls.
    Merge,
    /// The table's schema and partitioning (`partition_by`, none when empty)
    /// replaced by the data's; only with [`SaveMode::Overwrite`] (Delta
    /// Spark's `overwriteSchema`).
    Overwrite,
}

impl SchemaMode {
    /// `"merge"` or `"overwrite"`; `None` for no evolution.
    pub fn parse(text: Option<&str>) -> Result<Option<SchemaMode>> {
        match text.map(str::to_ascii_lowercase).as_deref() {
            None => Ok(None),
            Some("merge") => Ok(Some(SchemaMode::Merge)),
            Some("overwrite") => Ok(Some(SchemaMode::Overwrite)),
            Some(other) => Err(Error::InvalidArgument(format!(
                "schema_mode {other:?} is not supported (expected \"merge\" or \"overwrite\")"
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
    /// With [`SaveMode::Overwrite`]: replace only the rows this predicate
    /// matches (Delta Spark's `replaceWhere`); the data must satisfy it.
    pub predicate: Option<String>,
    /// Schema evolution of an existing table.
    pub schema_mode: Option<SchemaMode>,
    /// [`write_files`]: which of the writers of one commit this one is;
    /// identity values are handed out in its slot (none: refused).
    pub identity_slot: Option<IdentitySlot>,
    /// How a commit that creates the table is recorded.
    pub create_operation: CreateOperation,
    /// An application transaction (`txn`) the commit carries, and a
    /// streaming batch's operation: see [`super::app_txn`]. A write the
    /// table holds already is skipped (its files removed).
    pub app: AppCommit,
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
            predicate: None,
            schema_mode: None,
            identity_slot: None,
            create_operation: CreateOperation::default(),
            app: AppCommit::default(),
        }
    }
}

impl WriteOptions {
    /// The `operationParameters` Delta Spark's DataFrameWriter records
    /// besides `mode`: `partitionBy` as the writer gave it, and for schema
    /// evolution `canMergeSchema` / `canOverwriteSchema` (JSON booleans).
    fn schema_parameters(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut p = serde_json::Map::new();
        p.insert(
            "partitionBy".into(),
            serde_json::to_string(&self.partition_by)
                .unwrap_or_default()
                .into(),
        );
        match self.schema_mode {
            Some(SchemaMode::Merge) => {
                p.insert("canMergeSchema".into(), true.into());
            }
            Some(SchemaMode::Overwrite) => {
                p.insert("canOverwriteSchema".into(), true.into());
            }
            None => {}
        }
        p
    }

    /// Refuse combinations that mean nothing (as Delta Spark refuses them).
    pub fn validate(&self) -> Result<()> {
        if self.predicate.is_some() && self.mode != SaveMode::Overwrite {
            return Err(Error::InvalidArgument(format!(
                "predicate (replaceWhere) is only allowed with mode=\"overwrite\", not {:?}",
                self.mode
            )));
        }
        if self.schema_mode == Some(SchemaMode::Overwrite) {
            if self.mode != SaveMode::Overwrite {
                return Err(Error::InvalidArgument(format!(
                    "schema_mode=\"overwrite\" is only allowed with mode=\"overwrite\", not {:?} \
                     (use schema_mode=\"merge\" to add columns)",
                    self.mode
                )));
            }
            if self.predicate.is_some() {
                return Err(Error::InvalidArgument(
                    "schema_mode=\"overwrite\" cannot be used with a predicate (replaceWhere): \
                     replacing the schema replaces every row"
                        .into(),
                ));
            }
        }
        Ok(())
    }
}

/// Where a write goes: the layout its data files take, the table's snapshot
/// (None: the table is created), and the new metadata of a schema change.
pub struct WriteTarget {
    pub layout: TableLayout,
    pub snapshot: Option<Snapshot>,
    /// Metadata to commit with the data (schema evolution).
    pub metadata: Option<Metadata>,
    /// Mode ignore on an existing table: write nothing.
    pub skip: bool,
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
/// from `schema`, or the existing table's (with its snapshot), evolved by
/// `options.schema_mode`.
pub async fn target(
    store: &TableStore,
    schema: Option<&StructType>,
    options: &WriteOptions,
) -> Result<WriteTarget> {
    options.validate()?;
    let existing = latest(store).await?;
    match (options.mode, existing) {
        (SaveMode::ErrorIfExists, Some(s)) => Err(Error::TableExists(format!(
            "{} (version {})",
            store.url(),
            s.version()
        ))),
        (SaveMode::Ignore, Some(s)) => Ok(WriteTarget {
            layout: TableLayout::of_snapshot(&s),
            snapshot: Some(s),
            metadata: None,
            skip: true,
        }),
        (mode, None) if mode.creates() => {
            let schema = schema.ok_or_else(|| {
                Error::InvalidArgument("creating a table needs the data's schema".into())
            })?;
            let layout = new_table_layout(schema, options)?;
            Ok(WriteTarget {
                layout,
                snapshot: None,
                metadata: None,
                skip: false,
            })
        }
        (_, None) => Err(Error::NotATable(format!(
            "no Delta table at {} to append to",
            store.url()
        ))),
        (_, Some(s)) => existing_target(s, schema, options),
    }
}

/// The layout of a new table: with column mapping (`delta.columnMapping.mode`
/// name or id), the schema gets field ids and physical names as Delta Spark
/// assigns them ([`assign_column_mapping`]) and the configuration
/// `delta.columnMapping.maxColumnId`. Fields of `schema` that already carry
/// an id and physical name ([`prepare_create`]) keep them.
fn new_table_layout(schema: &StructType, options: &WriteOptions) -> Result<TableLayout> {
    let mut configuration: HashMap<String, Option<String>> = options
        .configuration
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    // Iceberg compatibility completes the configuration (column mapping,
    // row tracking) before the files are laid out.
    crate::log::features::iceberg::new_table_configuration(
        &mut configuration,
        options.enable_deletion_vectors,
    )?;
    let mode = column_mapping_mode(&configuration)?;
    let configuration: HashMap<String, String> = configuration
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect();
    let mut layout = TableLayout::new_table(
        schema.clone(),
        options.partition_by.clone(),
        &configuration,
        options.enable_deletion_vectors,
    );
    if mode != ColumnMappingMode::None {
        check_column_mapping_unique(schema)?;
        let (mapped, max_id) = assign_column_mapping(schema, schema.max_field_id());
        layout.schema = mapped;
        layout.mode = mode;
        layout
            .configuration
            .insert(COLUMN_MAPPING_MAX_ID.to_string(), Some(max_id.to_string()));
    } else if schema.max_field_id() > 0 {
        return Err(Error::InvalidArgument(format!(
            "the schema carries column mapping ids (a schema from prepare_create?) but the \
             configuration has no {COLUMN_MAPPING_MODE}: give the same configuration as to \
             prepare_create"
        )));
    }
    Ok(layout)
}

/// The schema of a table to be created with `configuration` from data
/// files written apart ([`write_files`] by several writers, then
/// [`commit_files`]): with column mapping, the field ids and physical names
/// are decided here, once, and every [`write_files`] and the
/// [`commit_files`] get this schema, so the files carry the physical names
/// and field ids the table commits. Without column mapping, `schema`.
pub fn prepare_create(
    schema: &StructType,
    configuration: &HashMap<String, String>,
) -> Result<StructType> {
    let options = WriteOptions {
        configuration: configuration.clone(),
        ..WriteOptions::default()
    };
    Ok(new_table_layout(schema, &options)?.schema)
}

/// Refuse `cluster_by` on a write to the existing table `s` unless it names
/// the table's clustering columns.
fn check_cluster_by(s: &Snapshot, cluster_by: &[String]) -> Result<()> {
    if cluster_by.is_empty() {
        return Ok(());
    }
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
    if cluster_by != table.as_slice() {
        return Err(Error::InvalidArgument(format!(
            "cluster_by {cluster_by:?} differs from the table's clustering columns {table:?}"
        )));
    }
    Ok(())
}

/// The target of an append or overwrite of the existing table `s`.
fn existing_target(
    s: Snapshot,
    schema: Option<&StructType>,
    options: &WriteOptions,
) -> Result<WriteTarget> {
    let table_parts = &s.metadata().partition_columns;
    let overwrite_schema = options.schema_mode == Some(SchemaMode::Overwrite);
    if !overwrite_schema && !options.partition_by.is_empty() && &options.partition_by != table_parts
    {
        return Err(Error::InvalidArgument(format!(
            "partition_by {:?} differs from the table's partition columns {table_parts:?} \
             (only schema_mode=\"overwrite\" changes the partitioning)",
            options.partition_by
        )));
    }
    check_cluster_by(&s, &options.cluster_by)?;
    check_appendable(&s)?;
    let new_schema = match (options.schema_mode, schema) {
        (None, _) | (Some(_), None) => None,
        (Some(SchemaMode::Merge), Some(data)) => merge_schemas(s.schema(), data)?,
        (Some(SchemaMode::Overwrite), Some(data)) => Some(data.clone()),
    };
    if let Some(schema) = &new_schema {
        crate::log::features::protocol::check_schema_features(s.protocol(), schema)?;
    }
    // Delta Spark 4.4's overwriteSchema replaces the partitioning by the
    // writer's partitionBy (none given: unpartitioned).
    let new_parts = if overwrite_schema {
        options.partition_by.clone()
    } else {
        table_parts.clone()
    };
    crate::log::features::iceberg::check_partition_change(s.protocol(), s.metadata(), &new_parts)?;
    if new_schema.is_none() && &new_parts == table_parts {
        return Ok(WriteTarget {
            layout: TableLayout::of_snapshot(&s),
            snapshot: Some(s),
            metadata: None,
            skip: false,
        });
    }
    let mut metadata = s.metadata().clone();
    let mut schema = new_schema.unwrap_or_else(|| s.schema().clone());
    if s.column_mapping() != ColumnMappingMode::None {
        // New columns get fresh ids and physical names, after the table's
        // largest id; schema overwrite keeps counting from it too.
        let (mapped, max_id) =
            assign_new_column_mapping(s.schema(), &metadata.configuration, &schema);
        schema = mapped;
        metadata
            .configuration
            .insert(COLUMN_MAPPING_MAX_ID.to_string(), Some(max_id.to_string()));
    }
    for column in &new_parts {
        if schema.field(column).is_none() {
            return Err(Error::InvalidArgument(format!(
                "partition column {column:?} is not in the new schema"
            )));
        }
    }
    metadata.schema_string = schema.to_schema_string();
    metadata.partition_columns = new_parts;
    let layout = TableLayout::of(s.protocol(), &metadata)?;
    Ok(WriteTarget {
        layout,
        snapshot: Some(s),
        metadata: Some(metadata),
        skip: false,
    })
}

fn input_error(e: arrow_schema::ArrowError) -> Error {
    Error::InvalidArgument(format!("reading the input data: {e}"))
}

/// The schema a write with `options` describes the data by: the given one;
/// for a write that may create the table or evolve its schema, the data's;
/// for a plain append, none (the table's is used).
fn data_schema(
    reader_schema: &arrow_schema::Schema,
    schema: Option<&StructType>,
    options: &WriteOptions,
) -> Result<Option<StructType>> {
    match (schema, options.mode) {
        (Some(s), _) => Ok(Some(s.clone())),
        (None, SaveMode::Append) if options.schema_mode.is_none() => Ok(None),
        (None, _) => StructType::from_arrow(reader_schema).map(Some),
    }
}

/// Write the batches of `reader` as data files laid out as `layout`; on a
/// failure the files written so far are removed. A `distributed` writer
/// (one of several for one commit) hands out identity values only in
/// `options.identity_slot`.
async fn write_layout<R: RecordBatchReader>(
    store: &TableStore,
    reader: R,
    layout: TableLayout,
    options: &WriteOptions,
    distributed: bool,
) -> Result<(Vec<Add>, Vec<(String, i64)>)> {
    // replaceWhere: every new row must satisfy the predicate (Delta Spark's
    // constraint check, on by default); bound to the layout's schema.
    let constraint = match &options.predicate {
        Some(text) => Some(Predicate::new_in_zone(
            text,
            &layout.schema,
            &layout.partition_columns,
            ColumnMappingMode::None,
            Binding::Strict,
            &options.writer.time_zone,
        )?),
        None => None,
    };
    let mut writer = DataWriter::try_new(store.clone(), layout, options.writer.clone())?;
    if distributed {
        writer.rules.distributed = true;
        if let Some(slot) = options.identity_slot {
            writer.rules.set_identity_slot(slot);
        }
    }
    let written = async {
        // The data's schema is checked before anything is written.
        writer.check_schema(&reader.schema())?;
        for batch in reader {
            let batch = batch.map_err(input_error)?;
            if let Some(p) = &constraint {
                check_replace_where(p, &batch)?;
            }
            writer.write(&batch).await?;
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

/// Refuse a batch with a row the overwrite predicate does not match (FALSE
/// or NULL, as Delta Spark's replaceWhere constraint).
fn check_replace_where(predicate: &Predicate, batch: &arrow_array::RecordBatch) -> Result<()> {
    use arrow_array::Array;
    let mask = predicate.evaluate(batch)?;
    let bad = (0..mask.len()).find(|&i| !(mask.is_valid(i) && mask.value(i)));
    match bad {
        None => Ok(()),
        Some(i) => Err(Error::InvalidArgument(format!(
            "data written does not match the overwrite predicate (replaceWhere) {:?}: \
             row {i} of a batch of {} does not satisfy it (nothing was committed)",
            predicate.text(),
            batch.num_rows()
        ))),
    }
}

/// Write the batches of `reader` as data files for the table at `store`,
/// without committing them; their add actions. On a failure the files
/// written so far are removed. Identity values are handed out only with
/// `options.identity_slot` (distinct for each writer of one commit; see
/// [`IdentitySlot`]); the last value handed out in each column rides in
/// the adds' tags ([`IDENTITY_MARK_TAG`]) to [`commit_files`], which
/// raises the high-water marks to them.
pub async fn write_files<R: RecordBatchReader>(
    store: &TableStore,
    reader: R,
    schema: Option<&StructType>,
    options: &WriteOptions,
) -> Result<Vec<Add>> {
    let schema = data_schema(&reader.schema(), schema, options)?;
    let target = target(store, schema.as_ref(), options).await?;
    if target.skip {
        return Ok(Vec::new());
    }
    refuse_mapped_create(&target, schema.as_ref())?;
    let layout = target.layout;
    let (mut adds, marks) = write_layout(store, reader, layout.clone(), options, true).await?;
    if let Err(e) = tag_identity_marks(&mut adds, &layout, &marks) {
        let paths: Vec<String> = adds.iter().map(|a| normalize_path(&a.path)).collect();
        let _ = remove_files(store, &paths).await;
        return Err(e);
    }
    Ok(adds)
}

/// Prefix of the add-action tag by which [`write_files`] hands
/// [`commit_files`] the last identity value it handed out in a column
/// (`deltadv.identityHighWaterMark.<column>`); [`commit_files`] takes the
/// tags off before committing, so they never reach the log.
pub const IDENTITY_MARK_TAG: &str = "deltadv.identityHighWaterMark.";

/// Prefix of the add-action tag with the high-water mark a writer's values
/// followed (`deltadv.identityBaseMark.<column>`; no value: none, the
/// values began at the start): [`commit_files`] refuses to commit values
/// that followed a mark a concurrent commit has since moved (they may
/// repeat its values), as Delta Spark's metadata conflict check does.
pub const IDENTITY_BASE_TAG: &str = "deltadv.identityBaseMark.";

/// The high-water mark of identity column `column` in `layout` (none: no
/// such column, or no value handed out yet).
fn mark_in(layout: &TableLayout, column: &str) -> Result<Option<i64>> {
    match layout.schema.fields.iter().find(|f| f.name == column) {
        Some(f) => Ok(Identity::of(0, f)?.and_then(|i| i.high_water_mark)),
        None => Ok(None),
    }
}

/// Tag every add of one writer with the identity values it handed out
/// (`marks`: per column, its last value in step order) and the marks of
/// `layout` they followed.
fn tag_identity_marks(
    adds: &mut [Add],
    layout: &TableLayout,
    marks: &[(String, i64)],
) -> Result<()> {
    if marks.is_empty() {
        return Ok(());
    }
    let mut bases = Vec::new();
    for (column, _) in marks {
        bases.push(mark_in(layout, column)?.map(|b| b.to_string()));
    }
    for add in adds {
        let tags = add.tags.get_or_insert_with(HashMap::new);
        for ((column, mark), base) in marks.iter().zip(&bases) {
            tags.insert(
                format!("{IDENTITY_MARK_TAG}{column}"),
                Some(mark.to_string()),
            );
            tags.insert(format!("{IDENTITY_BASE_TAG}{column}"), base.clone());
        }
    }
    Ok(())
}

/// Refuse to commit identity values that followed a high-water mark other
/// than the table's now (`bases`: per column, the marks the writers'
/// values followed): a concurrent commit moved it since, and may have
/// handed out the same values.
fn check_identity_bases(
    snapshot: &Snapshot,
    layout: &TableLayout,
    bases: &[(String, Option<i64>)],
) -> Result<()> {
    for (column, base) in bases {
        let now = mark_in(layout, column)?;
        if now != *base {
            return Err(Error::Conflict {
                version: snapshot.version(),
                detail: format!(
                    "identity column '{column}': the files' values follow the high-water mark \
                     {base:?}, but a concurrent commit moved it to {now:?} (it may have handed \
                     out the same values); write the files again"
                ),
            });
        }
    }
    Ok(())
}

/// The identity values the writers of `adds` handed out (per column, one
/// mark per tagged add) and the marks they followed, the tags taken off.
/// Only generated values move a mark: values the data gave a `GENERATED BY
/// DEFAULT` column leave it, as in Delta Spark.
#[allow(clippy::type_complexity)]
fn take_identity_marks(
    adds: &mut [Add],
) -> Result<(Vec<(String, i64)>, Vec<(String, Option<i64>)>)> {
    let mut marks = Vec::new();
    let mut bases = Vec::new();
    for add in adds {
        let Some(tags) = add.tags.as_mut() else {
            continue;
        };
        let ours: Vec<String> = tags
            .keys()
            .filter(|k| k.starts_with(IDENTITY_MARK_TAG) || k.starts_with(IDENTITY_BASE_TAG))
            .cloned()
            .collect();
        for key in ours {
            let value = tags.remove(&key).flatten();
            let is_mark = key.starts_with(IDENTITY_MARK_TAG);
            let long = match value.as_deref().map(str::parse::<i64>) {
                Some(Ok(v)) => Some(v),
                None if !is_mark => None,
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "add {}: tag {key} must hold an identity value (a long), found {value:?}",
                        add.path
                    )))
                }
            };
            match (is_mark, long) {
                (true, Some(mark)) => {
                    marks.push((key[IDENTITY_MARK_TAG.len()..].to_string(), mark));
                }
                (_, base) => bases.push((key[IDENTITY_BASE_TAG.len()..].to_string(), base)),
            }
        }
        if tags.is_empty() {
            add.tags = None;
        }
    }
    bases.sort();
    bases.dedup();
    Ok((marks, bases))
}

/// Column mapping assigns random physical names: files written by
/// [`write_files`] for a new table can only be committed by a later
/// [`commit_files`] with the same names when both were given the schema of
/// [`prepare_create`] (every field with its id and physical name).
fn refuse_mapped_create(target: &WriteTarget, schema: Option<&StructType>) -> Result<()> {
    let prepared = schema.is_some_and(is_column_mapped);
    if target.snapshot.is_none() && target.layout.mode != ColumnMappingMode::None && !prepared {
        return Err(Error::InvalidArgument(format!(
            "creating a table with {COLUMN_MAPPING_MODE} = {} by write_files/commit_files \
             needs the schema of prepare_create (physical names and field ids decided once, \
             given to every write_files and to commit_files); the schema given has fields \
             without them",
            target.layout.mode
        )));
    }
    Ok(())
}

/// Commit `adds` to the table of `target` (append or overwrite, with its
/// schema change) or as a new table (create, `schema` required); when the
/// commit fails, the files are removed (any the log references are kept).
async fn commit_to(
    store: &TableStore,
    target: WriteTarget,
    adds: Vec<Add>,
    schema: Option<&StructType>,
    options: &WriteOptions,
) -> Result<u64> {
    let paths: Vec<String> = adds.iter().map(|a| normalize_path(&a.path)).collect();
    let committed = match target.snapshot {
        Some(s) if target.skip => Ok(s.version()),
        Some(s) if options.app.applied_in(&s) => {
            // Applied already (a replayed batch): the files go, nothing commits.
            let _ = remove_uncommitted(store, &paths).await;
            Ok(s.version())
        }
        Some(s) if options.mode == SaveMode::Overwrite => {
            let overwrite = OverwriteOptions {
                predicate: options.predicate.clone(),
                metadata: target.metadata,
                partition_by: options.partition_by.clone(),
                parameters: options.schema_parameters(),
                time_zone: options.writer.time_zone.clone(),
                app: options.app.clone(),
            };
            overwrite_files(&s, adds, &overwrite).await
        }
        Some(s) => {
            let parameters = options.schema_parameters();
            append_files_as(&s, adds, target.metadata, parameters, &options.app).await
        }
        None if schema.is_none() => Err(Error::InvalidArgument(
            "creating a table needs the data's schema".into(),
        )),
        None => {
            // The layout's schema and properties: with column mapping, the
            // ids and physical names the files were written with.
            let layout = target.layout;
            let create = CreateOptions {
                partition_by: options.partition_by.clone(),
                configuration: layout
                    .configuration
                    .into_iter()
                    .filter_map(|(k, v)| v.map(|v| (k, v)))
                    .collect(),
                enable_deletion_vectors: options.enable_deletion_vectors,
                cluster_by: options.cluster_by.clone(),
                operation: options.create_operation,
                app: options.app.clone(),
            };
            create_table(store, &layout.schema, adds, &create).await
        }
    };
    if committed.is_err() {
        let _ = remove_uncommitted(store, &paths).await;
    }
    committed
}

/// Commit data files written under the table root (`adds`): create the
/// table (`schema` required), append to it or overwrite it, as
/// `options.mode` says. When the commit fails, the files are removed (any
/// the log references are kept).
pub async fn commit_files(
    store: &TableStore,
    mut adds: Vec<Add>,
    schema: Option<&StructType>,
    options: &WriteOptions,
) -> Result<u64> {
    let prepared = async {
        let (marks, bases) = take_identity_marks(&mut adds)?;
        let mut target = target(store, schema, options).await?;
        refuse_mapped_create(&target, schema)?;
        if let (false, Some(s)) = (target.skip, &target.snapshot) {
            check_identity_bases(s, &target.layout, &bases)?;
            // Identity values the writers handed out (apart, e.g. Spark
            // tasks in their slots): the marks rise to them in this commit.
            let base = target.metadata.as_ref().unwrap_or(s.metadata());
            let raised = super::data::rules::with_high_water_marks(base, &marks)?;
            if raised != *base {
                target.metadata = Some(raised);
            }
        }
        Ok::<_, Error>(target)
    };
    match prepared.await {
        Ok(target) => commit_to(store, target, adds, schema, options).await,
        Err(e) => {
            let paths: Vec<String> = adds.iter().map(|a| normalize_path(&a.path)).collect();
            let _ = remove_uncommitted(store, &paths).await;
            Err(e)
        }
    }
}

/// Write the batches of `reader` and commit them in one go (see
/// [`write_files`] and [`commit_files`]), with the table's log replayed
/// once: an append or overwrite commits on the snapshot the files were
/// written for (the transaction checks what was committed since). Mode
/// ignore on an existing table writes nothing. Returns the committed
/// version (the table's current one when nothing was written).
pub async fn write_table<R: RecordBatchReader>(
    store: &TableStore,
    reader: R,
    options: &WriteOptions,
) -> Result<u64> {
    let schema = data_schema(&reader.schema(), None, options)?;
    let mut target = target(store, schema.as_ref(), options).await?;
    if let (true, Some(s)) = (target.skip, &target.snapshot) {
        return Ok(s.version());
    }
    if let Some(s) = target
        .snapshot
        .as_ref()
        .filter(|s| options.app.applied_in(s))
    {
        return Ok(s.version()); // applied already (txnAppId/txnVersion): nothing written
    }
    let (adds, marks) = write_layout(store, reader, target.layout.clone(), options, false).await?;
    if let (false, Some(s)) = (marks.is_empty(), &target.snapshot) {
        // Identity values handed out: their high-water marks go into the
        // commit's metadata (a concurrent metadata change then conflicts).
        let base = target.metadata.as_ref().unwrap_or(s.metadata());
        match super::data::rules::with_high_water_marks(base, &marks) {
            Ok(m) => target.metadata = Some(m),
            Err(e) => {
                let paths: Vec<String> = adds.iter().map(|a| normalize_path(&a.path)).collect();
                let _ = remove_files(store, &paths).await;
                return Err(e);
            }
        }
    }
    commit_to(store, target, adds, schema.as_ref(), options).await
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn add(path: &str) -> Add {
        serde_json::from_value(serde_json::json!({
            "path": path, "partitionValues": {}, "size": 1,
            "modificationTime": 0, "dataChange": true,
            "tags": {"other": "kept"}
        }))
        .unwrap()
    }

    /// A create records `CREATE TABLE AS SELECT` (partitionBy) by default,
    /// and `WRITE` with the save mode Delta Spark's df.write records when asked.
    #[test]
    fn a_create_is_recorded_as_its_operation() {
        use std::sync::Arc;

        use arrow_array::{ArrayRef, Int64Array, RecordBatch, RecordBatchIterator};

        use crate::io::block_on;

        let data: ArrayRef = Arc::new(Int64Array::from(vec![1, 2]));
        let batch = RecordBatch::try_from_iter([("id", data)]).unwrap();
        let cases = [
            (
                CreateOperation::CreateTableAsSelect,
                "CREATE TABLE AS SELECT",
                None,
            ),
            (
                CreateOperation::Write {
                    mode: SaveMode::Append.spark_name(),
                },
                "WRITE",
                Some("Append"),
            ),
        ];
        for (operation, name, mode) in cases {
            let dir = tempfile::tempdir().unwrap();
            let store =
                TableStore::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
            let options = WriteOptions {
                create_operation: operation,
                ..Default::default()
            };
            let reader = RecordBatchIterator::new(vec![Ok(batch.clone())], batch.schema());
            block_on(write_table(&store, reader, &options))
                .unwrap()
                .unwrap();
            let snapshot = block_on(Snapshot::load(store.clone(), None))
                .unwrap()
                .unwrap();
            let history = block_on(snapshot.history(None)).unwrap().unwrap();
            assert_eq!(history[0]["operation"], name);
            let parameters = &history[0]["operationParameters"];
            assert_eq!(parameters.get("mode").and_then(|m| m.as_str()), mode);
            assert_eq!(parameters["partitionBy"], "[]");
        }
    }

    #[test]
    fn identity_marks_ride_in_tags_and_are_taken_off() {
        let field =
            crate::log::schema::StructField::new("id", crate::log::schema::DataType::Long, false)
                .with_metadata([
                    (
                        crate::log::features::properties::IDENTITY_START_KEY,
                        serde_json::json!(1),
                    ),
                    (
                        crate::log::features::properties::IDENTITY_HIGH_WATER_MARK_KEY,
                        serde_json::json!(20),
                    ),
                ]);
        let layout = TableLayout {
            schema: StructType::new(vec![field]),
            partition_columns: vec![],
            mode: ColumnMappingMode::None,
            configuration: HashMap::new(),
            deletion_vectors: true,
            materialize_partitions: false,
        };
        let mut adds = vec![add("a.parquet"), add("b.parquet")];
        tag_identity_marks(&mut adds[..1], &layout, &[("id".into(), 30)]).unwrap();
        tag_identity_marks(&mut adds[1..], &layout, &[("id".into(), 45)]).unwrap();
        let (marks, bases) = take_identity_marks(&mut adds).unwrap();
        assert_eq!(marks, vec![("id".to_string(), 30), ("id".to_string(), 45)]);
        assert_eq!(bases, vec![("id".to_string(), Some(20))]);
        // the other tags stay; ours never reach the log
        for a in &adds {
            let tags = a.tags.as_ref().unwrap();
            assert_eq!(tags.len(), 1);
            assert_eq!(tags.get("other"), Some(&Some("kept".to_string())));
        }
        // no marks: nothing tagged (explicit values only)
        let mut plain = vec![add("c.parquet")];
        tag_identity_marks(&mut plain, &layout, &[]).unwrap();
        let (marks, bases) = take_identity_marks(&mut plain).unwrap();
        assert!(marks.is_empty() && bases.is_empty());
        // a tag that is not a long is refused, naming the add
        let mut bad = vec![add("d.parquet")];
        bad[0]
            .tags
            .as_mut()
            .unwrap()
            .insert(format!("{IDENTITY_MARK_TAG}id"), Some("twelve".to_string()));
        let e = take_identity_marks(&mut bad).unwrap_err().to_string();
        assert!(e.contains("d.parquet") && e.contains("twelve"), "{e}");
    }
}
