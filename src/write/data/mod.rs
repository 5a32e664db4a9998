//! The data file writer: Arrow record batches in, parquet data files and their
//! `add` actions (with Delta stats) out. Nothing is committed here.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`DataWriter`]: streams batches into one open file per partition, rolls files at a size / row count |
//! | `input.rs` | the incoming data checked against the table schema, brought to the physical layout |
//! | `partition.rs` | partition values, Hive directories, `add.path` encoding, the split of a batch by partition |
//! | `stats.rs` | `add.stats` as Delta Spark collects them (which columns, truncation, NaN, timestamps) |
//!
//! Batches are written as they arrive (the input is never collected): each
//! partition has at most one open file, whose row groups are encoded in
//! memory and streamed to the store through [`crate::io::parquet`]. A file is
//! closed when it reaches the target size or row count, when too many
//! partitions are open, or at [`DataWriter::finish`]. Every file started is
//! remembered, so a caller whose commit fails can remove them
//! ([`DataWriter::started_files`]).

pub mod input;
pub mod partition;
pub mod rules;
pub mod stats;

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType as ArrowType, SchemaRef};
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use self::partition::PartitionValue;
use self::stats::{StatsSpec, WrittenFileStats};
use crate::error::{Error, Result};
use crate::io::parquet::{create_file_writer, StoreFileWriter};
use crate::io::TableStore;
use crate::log::actions::{Add, Cdc};
use crate::log::features;
use crate::log::features::properties::{
    DATA_SKIPPING_NUM_INDEXED_COLS, DATA_SKIPPING_STATS_COLUMNS,
};
use crate::log::schema::{ColumnMappingMode, DataType, StructField, StructType};
use crate::table::snapshot::Snapshot;

/// Default size at which a data file is closed and the next one started.
pub const DEFAULT_TARGET_FILE_SIZE: usize = 128 * 1024 * 1024;
/// Most files open at once (one per partition); beyond it the least recently
/// written is closed.
pub const MAX_OPEN_FILES: usize = 64;

/// What the writer needs to know about the table it writes for.
#[derive(Debug, Clone)]
pub struct TableLayout {
    /// The table's logical schema (with column mapping metadata).
    pub schema: StructType,
    /// Partition columns (logical names, in order).
    pub partition_columns: Vec<String>,
    pub mode: ColumnMappingMode,
    /// Table properties (stats columns and counts).
    pub configuration: HashMap<String, Option<String>>,
    /// The table supports deletion vectors (stats carry `tightBounds`).
    pub deletion_vectors: bool,
    /// Data files hold the partition columns too
    /// ([`features::materialize_partition_columns`]).
    pub materialize_partitions: bool,
}

impl TableLayout {
    /// The layout of a table with this protocol and metadata.
    pub fn of(
        protocol: &crate::log::actions::Protocol,
        metadata: &crate::log::actions::Metadata,
    ) -> Result<TableLayout> {
        Ok(TableLayout {
            schema: StructType::parse(&metadata.schema_string)?,
            partition_columns: metadata.partition_columns.clone(),
            mode: crate::log::schema::column_mapping_mode(&metadata.configuration)?,
            configuration: metadata.configuration.clone(),
            deletion_vectors: features::is_supported(protocol, "deletionVectors"),
            materialize_partitions: features::materialize_partition_columns(
                Some(protocol),
                &metadata.configuration,
            ),
        })
    }

    /// The layout of an existing table.
    pub fn of_snapshot(snapshot: &Snapshot) -> TableLayout {
        let metadata = snapshot.metadata();
        TableLayout {
            schema: snapshot.schema().clone(),
            partition_columns: metadata.partition_columns.clone(),
            mode: snapshot.column_mapping(),
            configuration: metadata.configuration.clone(),
            deletion_vectors: features::is_supported(snapshot.protocol(), "deletionVectors"),
            materialize_partitions: features::materialize_partition_columns(
                Some(snapshot.protocol()),
                &metadata.configuration,
            ),
        }
    }

    /// The layout of a table about to be created (no column mapping).
    pub fn new_table(
        schema: StructType,
        partition_columns: Vec<String>,
        configuration: &HashMap<String, String>,
        deletion_vectors: bool,
    ) -> TableLayout {
        let configuration: HashMap<String, Option<String>> = configuration
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect();
        TableLayout {
            schema,
            partition_columns,
            mode: ColumnMappingMode::None,
            materialize_partitions: features::materialize_partition_columns(None, &configuration),
            configuration,
            deletion_vectors,
        }
    }
}

/// How data files are cut.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// Close a file once its encoded size reaches this many bytes.
    pub target_file_size: usize,
    /// Close a file once it holds this many rows.
    pub max_rows_per_file: Option<usize>,
    /// Rows per parquet row group (the parquet crate's default when None).
    pub row_group_rows: Option<usize>,
    /// The session time zone generated columns and CHECK constraints read
    /// instants in (Spark's `spark.sql.session.timeZone`; UTC by default).
    pub time_zone: crate::expr::TimeZone,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            target_file_size: DEFAULT_TARGET_FILE_SIZE,
            max_rows_per_file: None,
            row_group_rows: None,
            time_zone: crate::expr::TimeZone::utc(),
        }
    }
}

/// A partition column: its name, physical name, type and position in the table schema.
#[derive(Debug, Clone)]
struct PartitionColumn {
    name: String,
    physical: String,
    data_type: DataType,
}

struct OpenFile {
    key: Vec<PartitionValue>,
    /// Relative to the table root, decoded.
    relative: String,
    writer: StoreFileWriter,
    stats: WrittenFileStats,
    rows: usize,
    last_write: u64,
}

/// Streams record batches into parquet data files of one table.
pub struct DataWriter {
    store: TableStore,
    layout: TableLayout,
    options: WriterOptions,
    /// Physical Arrow type of every table column, in table order.
    targets: Vec<ArrowType>,
    /// Positions (in the table schema) of the columns data files hold, in
    /// file order: the data columns, then the partition columns when the
    /// table materializes them.
    data_columns: Vec<usize>,
    /// Positions of the partition columns, in partition order.
    partition_positions: Vec<usize>,
    partitions: Vec<PartitionColumn>,
    file_schema: SchemaRef,
    stats: StatsSpec,
    props: WriterProperties,
    open: Vec<OpenFile>,
    adds: Vec<Add>,
    started: Vec<String>,
    writes: u64,
    /// Writes `cdc` files (under `_change_data/`, with `_change_type`).
    change_data: bool,
    /// Defaults, generated and identity columns, constraints (none for
    /// change data files: their rows are the data files' rows).
    pub(crate) rules: rules::RowRules,
}

impl DataWriter {
    /// A writer for the table described by `layout` at `store`.
    pub fn try_new(
        store: TableStore,
        layout: TableLayout,
        options: WriterOptions,
    ) -> Result<DataWriter> {
        let mut partition_positions = Vec::new();
        let mut partitions = Vec::new();
        for name in &layout.partition_columns {
            let i = layout.schema.index_of(name).ok_or_else(|| {
                Error::InvalidArgument(format!("partition column {name:?} is not in the schema"))
            })?;
            let field = layout
                .schema
                .fields
                .get(i)
                .ok_or_else(|| Error::Internal(format!("schema field {i} missing")))?;
            partition::check_partition_type(name, &field.data_type)?;
            partition_positions.push(i);
            partitions.push(PartitionColumn {
                name: name.clone(),
                physical: field.physical_name(layout.mode)?.to_string(),
                data_type: field.data_type.clone(),
            });
        }
        let mut data_columns: Vec<usize> = (0..layout.schema.fields.len())
            .filter(|i| !partition_positions.contains(i))
            .collect();
        // Stats cover the data columns (the first ones of the file).
        let data_fields: Vec<StructField> = data_columns
            .iter()
            .filter_map(|i| layout.schema.fields.get(*i).cloned())
            .collect();
        if layout.materialize_partitions {
            data_columns.extend(partition_positions.iter().copied());
        }
        let physical = with_reserved_field_ids(
            layout.schema.to_arrow(layout.mode, true)?,
            &layout.schema,
            &layout.configuration,
        );
        let targets: Vec<ArrowType> = physical
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let file_fields: Vec<Arc<arrow_schema::Field>> = data_columns
            .iter()
            .filter_map(|i| physical.fields().get(*i).cloned())
            .collect();
        let file_schema = Arc::new(arrow_schema::Schema::new(file_fields));
        let stats = StatsSpec::new(
            &data_fields,
            layout.mode,
            &layout.configuration,
            layout.deletion_vectors,
        )?;
        let rules =
            rules::RowRules::new(&layout.schema, &layout.configuration, &options.time_zone)?;
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(options.row_group_rows.or(Some(1024 * 1024)))
            .build();
        Ok(DataWriter {
            store,
            layout,
            options,
            targets,
            data_columns,
            partition_positions,
            partitions,
            file_schema,
            stats,
            props,
            open: Vec::new(),
            adds: Vec::new(),
            started: Vec::new(),
            writes: 0,
            change_data: false,
            rules,
        })
    }

    /// A writer of the change data files (`cdc` actions) of the table
    /// described by `layout`: its columns, then `_change_type`, laid out as
    /// its data files (partition directories, physical names) under
    /// `_change_data/`. [`DataWriter::finish_change_data`] returns them.
    pub fn for_change_data(
        store: TableStore,
        mut layout: TableLayout,
        options: WriterOptions,
    ) -> Result<DataWriter> {
        layout.schema.fields.push(StructField::change_type_column());
        // cdc files carry no stats.
        layout
            .configuration
            .insert(DATA_SKIPPING_NUM_INDEXED_COLS.into(), Some("0".into()));
        layout.configuration.remove(DATA_SKIPPING_STATS_COLUMNS);
        let mut writer = DataWriter::try_new(store, layout, options)?;
        writer.change_data = true;
        writer.rules = rules::RowRules::default();
        Ok(writer)
    }

    /// The identity columns' high-water marks after the rows written so far:
    /// (column, mark) of those that handed out values.
    pub fn identity_high_water_marks(&self) -> Vec<(String, i64)> {
        self.rules.high_water_marks()
    }

    /// `batch` (change rows: every table column, in table order) with the
    /// identity values of its inserted rows handed out, so that the change
    /// data files get the values the data files get.
    pub fn fill_identity(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        if self.rules.identity.is_empty() {
            return Ok(batch.clone());
        }
        let mut columns = batch.columns().to_vec();
        let all: Vec<usize> = (0..columns.len()).collect();
        self.rules
            .fill_identity(&mut columns, batch.num_rows(), &all)?;
        RecordBatch::try_new(batch.schema(), columns)
            .map_err(|e| Error::Internal(format!("identity values: {e}")))
    }

    /// Every file this writer started (relative, decoded), committed or not.
    pub fn started_files(&self) -> &[String] {
        &self.started
    }

    /// Check incoming data of this schema against the table, before any row.
    pub fn check_schema(&self, schema: &arrow_schema::SchemaRef) -> Result<()> {
        self.table_columns(&RecordBatch::new_empty(schema.clone()))
            .map(|_| ())
    }

    /// The table columns of `batch` (incoming data), checked and converted,
    /// and the positions of those the data gives (the others are NULL, or
    /// placeholders a rule fills: see [`rules::RowRules::apply`]).
    fn table_columns(&self, batch: &RecordBatch) -> Result<(Vec<ArrayRef>, Vec<usize>)> {
        let schema = batch.schema();
        let names = || schema.fields().iter().map(|f| f.name().as_str());
        input::check_no_extra(names(), &self.layout.schema.fields, "")?;
        let mut out = Vec::with_capacity(self.layout.schema.fields.len());
        let mut given = Vec::with_capacity(self.layout.schema.fields.len());
        for (pos, (field, target)) in self
            .layout
            .schema
            .fields
            .iter()
            .zip(&self.targets)
            .enumerate()
        {
            let column = match input::find_field(names(), &field.name)
                .and_then(|i| batch.columns().get(i))
            {
                Some(c) => {
                    given.push(pos);
                    input::convert_field(c, field, target)?
                }
                None if self.rules.fills(pos) => rules::placeholder(target, batch.num_rows()),
                None if field.nullable => arrow_array::new_null_array(target, batch.num_rows()),
                None => {
                    return Err(Error::InvalidArgument(format!(
                        "the data does not match the table schema: column '{}' is not nullable \
                         in the table and missing from the data",
                        field.name
                    )))
                }
            };
            out.push(column);
        }
        self.rules.check_given(&given)?;
        Ok((out, given))
    }

    /// Write one batch of incoming data.
    pub async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let (mut columns, given) = self.table_columns(batch)?;
        self.rules.apply(&mut columns, batch.num_rows(), &given)?;
        let data: Vec<ArrayRef> = self
            .data_columns
            .iter()
            .filter_map(|i| columns.get(*i).cloned())
            .collect();
        let data = RecordBatch::try_new(self.file_schema.clone(), data).map_err(|e| {
            Error::InvalidArgument(format!("the data does not match the table schema: {e}"))
        })?;
        if self.partitions.is_empty() {
            return self.write_part(Vec::new(), data).await;
        }
        let mut keys: Vec<Vec<PartitionValue>> =
            vec![Vec::with_capacity(self.partitions.len()); batch.num_rows()];
        for (p, pos) in self.partitions.iter().zip(&self.partition_positions) {
            let array = columns
                .get(*pos)
                .ok_or_else(|| Error::Internal(format!("partition column {} missing", p.name)))?;
            let values = partition::partition_values(&p.name, &p.data_type, array)?;
            for (k, v) in keys.iter_mut().zip(values) {
                k.push(v);
            }
        }
        for (key, part) in partition::split(&data, keys)? {
            self.write_part(key, part).await?;
        }
        Ok(())
    }

    async fn write_part(&mut self, key: Vec<PartitionValue>, mut batch: RecordBatch) -> Result<()> {
        while batch.num_rows() > 0 {
            // (Bound first: a scrutinee's borrow would live across the await.)
            let found = self.open.iter().position(|f| f.key == key);
            let index = match found {
                Some(i) => i,
                None => self.open_file(key.clone()).await?,
            };
            self.writes += 1;
            let writes = self.writes;
            let spec = &self.stats;
            let file = self
                .open
                .get_mut(index)
                .ok_or_else(|| Error::Internal("open file vanished".into()))?;
            let room = self
                .options
                .max_rows_per_file
                .map_or(usize::MAX, |m| m.max(1).saturating_sub(file.rows));
            let take = room.min(batch.num_rows());
            let head = batch.slice(0, take);
            batch = batch.slice(take, batch.num_rows() - take);
            file.writer.write(&head).await.map_err(|e| Error::Parquet {
                file: file.relative.clone(),
                detail: e.to_string(),
            })?;
            file.stats.update(spec, &head)?;
            file.rows += take;
            file.last_write = writes;
            let size = file.writer.bytes_written() + file.writer.in_progress_size();
            let full = size >= self.options.target_file_size
                || self
                    .options
                    .max_rows_per_file
                    .is_some_and(|m| file.rows >= m);
            if full {
                self.close_file(index).await?;
            }
        }
        Ok(())
    }

    async fn open_file(&mut self, key: Vec<PartitionValue>) -> Result<usize> {
        if self.open.len() >= MAX_OPEN_FILES {
            let oldest = self
                .open
                .iter()
                .enumerate()
                .min_by_key(|(_, f)| f.last_write)
                .map(|(i, _)| i);
            if let Some(i) = oldest {
                self.close_file(i).await?;
            }
        }
        let names: Vec<String> = self.partitions.iter().map(|p| p.physical.clone()).collect();
        let dir = partition::directory(&names, &key);
        let (root, kind) = if self.change_data {
            (format!("{}/", crate::log::cdf::CHANGE_DATA_DIR), "cdc")
        } else {
            (String::new(), "part")
        };
        let relative = format!(
            "{root}{dir}{kind}-{:05}-{}.c000.snappy.parquet",
            self.started.len(),
            uuid::Uuid::new_v4()
        );
        let writer = create_file_writer(
            &self.store,
            &relative,
            self.file_schema.clone(),
            self.props.clone(),
        )?;
        self.started.push(relative.clone());
        self.open.push(OpenFile {
            key,
            relative,
            writer,
            stats: WrittenFileStats::new(&self.stats),
            rows: 0,
            last_write: self.writes,
        });
        Ok(self.open.len() - 1)
    }

    async fn close_file(&mut self, index: usize) -> Result<()> {
        if index >= self.open.len() {
            return Ok(());
        }
        let mut file = self.open.swap_remove(index);
        super::fail_point("data_write")?;
        file.writer.finish().await.map_err(|e| Error::Parquet {
            file: file.relative.clone(),
            detail: e.to_string(),
        })?;
        let size = file.writer.bytes_written();
        let partition_values = self
            .partitions
            .iter()
            .zip(&file.key)
            .map(|(p, v)| (p.physical.clone(), v.value.clone()))
            .collect();
        self.adds.push(Add {
            path: partition::encode_add_path(&file.relative),
            partition_values,
            size: i64::try_from(size).unwrap_or(i64::MAX),
            modification_time: super::now_ms(),
            data_change: true,
            stats: Some(file.stats.to_json(&self.stats)),
            // ICEBERG_COMPAT_VERSION on icebergCompatV2 tables, as Delta Spark
            tags: features::iceberg::new_file_tags(&self.layout.configuration),
            deletion_vector: None,
            base_row_id: None,
            default_row_commit_version: None,
            clustering_provider: None,
        });
        Ok(())
    }

    /// Close every open file; the add actions of the files written since
    /// the last call, in the order they were closed.
    pub async fn finish(&mut self) -> Result<Vec<Add>> {
        while !self.open.is_empty() {
            self.close_file(0).await?;
        }
        Ok(std::mem::take(&mut self.adds))
    }

    /// [`DataWriter::finish`] of a change data writer: the `cdc` actions.
    pub async fn finish_change_data(&mut self) -> Result<Vec<Cdc>> {
        Ok(self
            .finish()
            .await?
            .into_iter()
            .map(|a| Cdc {
                path: a.path,
                partition_values: a.partition_values,
                size: a.size,
                data_change: false,
            })
            .collect())
    }
}

/// `physical` (the Arrow schema of `schema`'s columns in data files) with
/// the field ids IcebergCompatV3 reserves for the materialized row tracking
/// columns ([`features::iceberg::reserved_field_id`]): those columns are
/// internal fields of the writer's schema, which carry no id of their own.
fn with_reserved_field_ids(
    physical: arrow_schema::Schema,
    schema: &StructType,
    configuration: &HashMap<String, Option<String>>,
) -> arrow_schema::Schema {
    let fields: Vec<arrow_schema::Field> = physical
        .fields()
        .iter()
        .zip(&schema.fields)
        .map(|(arrow, delta)| {
            let id = delta
                .is_internal()
                .then(|| features::iceberg::reserved_field_id(configuration, arrow.name()))
                .flatten();
            match id {
                Some(id) => {
                    let mut metadata = arrow.metadata().clone();
                    metadata.insert(
                        crate::log::schema::PARQUET_FIELD_ID_KEY.to_string(),
                        id.to_string(),
                    );
                    arrow.as_ref().clone().with_metadata(metadata)
                }
                None => arrow.as_ref().clone(),
            }
        })
        .collect();
    arrow_schema::Schema::new(fields)
}

/// Remove data files that were written but never committed (`paths`
/// relative to the table root, decoded). Missing files are fine.
pub async fn remove_files(store: &TableStore, paths: &[String]) -> Result<()> {
    for p in paths {
        match store.delete(&store.path(p)).await {
            Ok(()) | Err(Error::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::schema::PARQUET_FIELD_ID_KEY;

    fn ids(configuration: &[(&str, &str)]) -> Vec<Option<String>> {
        let configuration: HashMap<String, Option<String>> = configuration
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect();
        let schema = StructType::new(vec![
            StructField::new("a", DataType::Long, true)
                .with_metadata([("delta.columnMapping.id", 1)])
                .with_metadata([("delta.columnMapping.physicalName", "col-a")]),
            StructField::internal("_row-id-col-x", DataType::Long),
            StructField::internal("_row-commit-version-col-y", DataType::Long),
            // a table column that happens to be named like one is not internal
            StructField::new("_row-id-col-x", DataType::Long, true),
        ]);
        let physical = schema.to_arrow(ColumnMappingMode::None, true).unwrap();
        with_reserved_field_ids(physical, &schema, &configuration)
            .fields()
            .iter()
            .map(|f| f.metadata().get(PARQUET_FIELD_ID_KEY).cloned())
            .collect()
    }

    #[test]
    fn materialized_row_tracking_columns_get_reserved_ids_on_v3_tables() {
        let names = [
            (
                "delta.rowTracking.materializedRowIdColumnName",
                "_row-id-col-x",
            ),
            (
                "delta.rowTracking.materializedRowCommitVersionColumnName",
                "_row-commit-version-col-y",
            ),
        ];
        let mut v3 = names.to_vec();
        v3.push(("delta.enableIcebergCompatV3", "true"));
        assert_eq!(
            ids(&v3),
            vec![
                None,
                Some("2147483540".to_string()),
                Some("2147483539".to_string()),
                None
            ]
        );
        assert_eq!(ids(&names), vec![None; 4]);
    }
}
