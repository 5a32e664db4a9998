//! MERGE INTO, in this process: a source stream joined with the table on a
//! condition, then clauses applied in order, as Delta's MERGE does.
//!
//! ```text
//! MERGE INTO table AS t USING source AS s ON t.id = s.id [AND …]
//!   WHEN MATCHED [AND cond] THEN UPDATE SET … | UPDATE SET * | DELETE          (any number)
//!   WHEN NOT MATCHED [AND cond] THEN INSERT (…) VALUES (…) | INSERT *         (any number)
//!   WHEN NOT MATCHED BY SOURCE [AND cond] THEN UPDATE SET … | DELETE          (any number)
//! ```
//!
//! Expressions are deltadv's SQL (see [`crate::expr`]) over two relations:
//! `t.col` is a target column, `s.col` a source column (the aliases are the
//! caller's), and an unqualified name is whichever side has it (an error
//! when both do). In each group, the first clause whose condition holds
//! acts; only the last clause of a group may omit its condition. A target
//! row matched by several source rows that a clause would change is an
//! error (`DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE`, naming
//! the key), except under a single unconditional `DELETE`.
//!
//! How it runs: the condition's equalities between a target expression and a
//! source expression are the join keys (at least one is needed); the rest is
//! checked on each candidate pair. The source is read in chunks of at most
//! [`MergeSpec::source_chunk_bytes`]; each chunk is hashed on its keys
//! (`arrow-row` encoded), and the target files that may hold its keys (by
//! the keys' range and the condition's target-only parts, against file
//! stats and partition values) are read in parallel and probed. Matched and
//! not-matched-by-source rows become a change stream (see
//! [`super::changes`]) written by one [`ChangeWriter`]: old rows into ONE DV
//! file, new and inserted rows into new data files; the commit is one MERGE
//! through the transaction. A source larger than one chunk costs a pass over
//! the candidate target files per chunk (and, with `NOT MATCHED BY SOURCE`
//! clauses, one more over all files); memory stays bounded by the chunk.

//!
//! | module        | what it holds                                                   | I/O |
//! |---------------|-----------------------------------------------------------------|-----|
//! | [`plan`]      | the clause model and its rules; `operationParameters`, metrics, read set (shared with Spark) | no |
//! | `bound`       | the condition split into join keys, residual and pruning parts; clauses bound | no |
//! | `source`      | the source read in chunks of Delta's types                       | no  |
//! | `join`        | a chunk hashed on its keys and probed; key-range file pruning     | no  |
//! | `apply`       | clauses applied to pairs and rows: the change batches             | reads target files |
//! | this module   | [`merge`]: passes over chunks and files, the writer, the commit; [`commit_merge_changes`] (Spark's) | yes |

mod apply;
mod bound;
mod join;
pub mod plan;
mod source;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::RecordBatchReader;
use arrow_schema::{Field, Fields};
use futures::StreamExt;
use roaring::{RoaringBitmap, RoaringTreemap};
use serde_json::Value;

use self::apply::{process_file, take, FileOutcome, Pass};
use self::bound::BoundMerge;
use self::join::{key_ranges, Chunk, SourceKeys};
pub use self::plan::{
    duplicate_match_error, Assigned, ClauseAction, ClauseCounts, ClauseKind, MergeClause,
    MergePlan, MergeSpec, MergeTimes, DEFAULT_SOURCE_CHUNK_BYTES, DUPLICATE_MATCH_ERROR,
};
use self::source::{SourceChunks, SourceShape};
use super::changes::{
    check_can_rewrite, commit_changes_since, dml_metadata, row_ids_in_scan, AddedRowsCheck,
    ChangeWriter, DmlMetrics, DmlOperation, DmlOptions,
};
use super::data::TableLayout;
use crate::error::{Error, Result};
use crate::expr::{Binding, Expr, Predicate};
use crate::log::schema::{to_arrow_type, ColumnMappingMode, StructField, StructType};
use crate::scan::{self, ScanFile, ScanSpec, FILE_PATH_COLUMN, ROW_INDEX_COLUMN};
use crate::table::snapshot::Snapshot;

fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidArgument(message.into())
}

fn arrow_error(e: arrow_schema::ArrowError) -> Error {
    Error::InvalidArgument(format!("MERGE: {e}"))
}

/// Most bytes of source join keys a MERGE that inserts keeps to check rows a
/// concurrent commit added; with a larger source, any such file conflicts.
pub const SOURCE_KEYS_LIMIT: usize = 64 * 1024 * 1024;

/// How a MERGE that inserts and has no `NOT MATCHED BY SOURCE` clause (so
/// reads the whole table) tells whether a file a concurrent commit added
/// matters to it. Not when the file lies in a partition that the
/// condition's target-only partition predicates exclude (`t.part = 'a' AND
/// …`: Delta Spark's read set, such a MERGE reads only those partitions);
/// else when one of its rows has one of the source's keys (a key match is
/// enough: the rest of the condition is not evaluated, so the check errs
/// towards a conflict); without the source keys (more than
/// [`SOURCE_KEYS_LIMIT`] bytes of them), any such file.
struct InsertCheck {
    plan: Arc<BoundMerge>,
    keys: Option<SourceKeys>,
    spec: ScanSpec,
    partitions: Option<Predicate>,
}

impl InsertCheck {
    /// The check of `plan` (bound on `snapshot`'s table, scanned with
    /// `spec`), given the source keys when all were kept; None when it
    /// would check nothing (no keys, no partition predicate).
    fn new(
        snapshot: &Snapshot,
        plan: Arc<BoundMerge>,
        keys: Option<SourceKeys>,
        spec: ScanSpec,
    ) -> Option<InsertCheck> {
        let partitions = partition_read_set(snapshot, &plan);
        (keys.is_some() || partitions.is_some()).then_some(InsertCheck {
            plan,
            keys,
            spec,
            partitions,
        })
    }
}

/// The target-only parts of the join condition that name only partition
/// columns, as one predicate over the table; None when there are none. A
/// part that does not bind to the table is left out (the read set only
/// grows).
fn partition_read_set(snapshot: &Snapshot, plan: &BoundMerge) -> Option<Predicate> {
    let partition_columns = &snapshot.metadata().partition_columns;
    if partition_columns.is_empty() {
        return None;
    }
    let bind = |e: &Expr| {
        Predicate::bind_expr(
            e,
            e.to_string(),
            snapshot.schema(),
            partition_columns,
            snapshot.column_mapping(),
            Binding::Strict,
        )
        .ok()
    };
    let parts: Vec<Expr> = plan
        .target_only
        .iter()
        .filter(|e| bind(e).is_some_and(|p| p.partition_only()))
        .cloned()
        .collect();
    match parts.len() {
        0 => None,
        1 => parts.first().and_then(bind),
        _ => bind(&Expr::And(parts)),
    }
}

impl AddedRowsCheck for InsertCheck {
    fn first_match<'a>(
        &'a self,
        store: &'a crate::io::TableStore,
        file: &'a crate::log::actions::Add,
    ) -> futures::future::BoxFuture<'a, Result<Option<String>>> {
        Box::pin(async move {
            if let Some(p) = &self.partitions {
                if !p.may_match_file(&file.partition_values, None) {
                    return Ok(None); // a partition this MERGE did not read
                }
            }
            let Some(keys) = &self.keys else {
                return Ok(Some(format!(
                    "any row of a partition it read: its source keys were not kept \
                     (over {SOURCE_KEYS_LIMIT} bytes)"
                )));
            };
            let file = ScanFile::of_add(file);
            let mut batches =
                scan::stream_file(store, &self.spec, &file, scan::DeletedRows::Load).await?;
            while let Some(batch) = futures::TryStreamExt::try_next(&mut batches).await? {
                if let Some(row) = keys.first_match(&self.plan, &batch)? {
                    return Ok(Some(row));
                }
            }
            Ok(None)
        })
    }
}

/// Commit the changes of a MERGE that ran elsewhere (the Spark glue: its
/// tasks wrote `prepared`) as [`commit_changes`](super::changes::commit_changes)
/// does, with the check [`merge`] makes of files a concurrent commit added
/// when the MERGE inserts and has no `NOT MATCHED BY SOURCE` clause: files
/// outside the partitions its condition reads, and files without a row
/// holding one of its source keys, are no conflict. `source_keys` holds the
/// source columns the condition names (any superset of them will do), every
/// source row when `all_keys`; else only its schema is used (any added file
/// in the partitions read conflicts). A condition deltadv cannot bind (Spark
/// SQL beyond its subset) checks nothing: any added file conflicts, as
/// without this check.
pub async fn commit_merge_changes<R: RecordBatchReader>(
    snapshot: &Snapshot,
    prepared: Vec<super::changes::PreparedChanges>,
    options: &DmlOptions,
    merge_plan: &MergePlan,
    source_keys: R,
    all_keys: bool,
) -> Result<DmlMetrics> {
    let started = Instant::now();
    let check = if merge_plan.checks_added_rows() {
        remote_check(snapshot, merge_plan, source_keys, all_keys, options)
            .ok()
            .flatten()
    } else {
        None
    };
    commit_changes_since(
        snapshot,
        DmlOperation::Merge,
        prepared,
        options,
        started,
        check.as_ref().map(|c| c as &dyn AddedRowsCheck),
    )
    .await
}

/// The scan of the MERGE's target (with the file path and row index
/// columns) and the table's own fields in it (without those two).
fn target_scan(snapshot: &Snapshot) -> Result<(ScanSpec, Fields)> {
    let mut spec = ScanSpec::for_snapshot(snapshot, None);
    spec.with_metadata_columns = true;
    let table_fields: Fields = spec
        .output_schema()?
        .fields()
        .iter()
        .filter(|f| f.name() != FILE_PATH_COLUMN && f.name() != ROW_INDEX_COLUMN)
        .cloned()
        .collect();
    Ok((spec, table_fields))
}

/// The [`InsertCheck`] of [`commit_merge_changes`].
fn remote_check<R: RecordBatchReader>(
    snapshot: &Snapshot,
    merge_plan: &MergePlan,
    source_keys: R,
    all_keys: bool,
    options: &DmlOptions,
) -> Result<Option<InsertCheck>> {
    let shape = SourceShape::of(&source_keys.schema())?;
    let source = shape.delta.clone();
    let (mut spec, table_fields) = target_scan(snapshot)?;
    let table = snapshot.schema();
    let plan = BoundMerge::condition(
        merge_plan,
        table,
        &source,
        table,
        table_fields,
        &options.writer.time_zone,
    )?;
    let needed = plan.target_columns();
    spec.columns = Some(
        table
            .fields
            .iter()
            .map(|f| f.name.clone())
            .filter(|n| needed.contains(n))
            .collect(),
    );
    let keys = if all_keys {
        let mut keys = SourceKeys::new(&plan, SOURCE_KEYS_LIMIT)?;
        let mut chunks = SourceChunks::new(source_keys, shape, DEFAULT_SOURCE_CHUNK_BYTES);
        while let Some((chunk, _)) = chunks.next_chunk()? {
            keys.add(&plan, &chunk)?;
        }
        Some(keys).filter(SourceKeys::complete)
    } else {
        None
    };
    Ok(InsertCheck::new(snapshot, Arc::new(plan), keys, spec))
}

/// MERGE `source` into the table at `snapshot` (see the module docs); one
/// commit, nothing committed when nothing changes. On a failure, every
pub async fn merge<R: RecordBatchReader>(
    snapshot: &Snapshot,
    source: R,
    spec: &MergeSpec,
    options: &DmlOptions,
) -> Result<DmlMetrics> {
    let started = Instant::now();
    let dvs = check_can_rewrite(snapshot, options.delete.allow_copy_on_write)?;
    let merge_plan = MergePlan::new(spec)?;
    let shape = SourceShape::of(&source.schema())?;
    let (mut scan_spec, table_fields) = target_scan(snapshot)?;
    let evolved = evolve(snapshot, spec, &merge_plan, &shape.delta)?;
    let (table, table_fields) = match &evolved {
        None => (snapshot.schema().clone(), table_fields),
        Some((schema, _)) => {
            let mut fields: Vec<Field> = table_fields.iter().map(|f| f.as_ref().clone()).collect();
            for f in schema.fields.iter().skip(fields.len()) {
                let dt = to_arrow_type(&f.data_type, ColumnMappingMode::None, false)?;
                fields.push(Field::new(&f.name, dt, true));
            }
            (schema.clone(), Fields::from(fields))
        }
    };
    let mut bound = BoundMerge::new(
        &merge_plan,
        snapshot.schema(),
        &shape.delta,
        &table,
        table_fields,
        &options.writer.time_zone,
    )?;
    // Read only the columns the MERGE needs (e.g. just the key for an upsert
    // whose UPDATE SET * assigns every column).
    let needed = bound.target_columns();
    scan_spec.columns = Some(
        snapshot
            .schema()
            .fields
            .iter()
            .map(|f| f.name.clone())
            .filter(|n| needed.contains(n))
            .collect(),
    );
    let store = snapshot.store().clone();
    let live = super::live_files(snapshot)?;
    let targets: Vec<crate::log::actions::Add> = live.values().map(|f| f.add.clone()).collect();
    // The evolved schema, and on a table that tracks rows without naming
    // its materialized columns, their names: committed with the rows.
    let metadata = dml_metadata(snapshot, evolved.as_ref().map(|(_, m)| m));
    let layout = match &metadata {
        None => TableLayout::of_snapshot(snapshot),
        Some(metadata) => TableLayout::of(snapshot.protocol(), metadata)?,
    };
    let mut writer = ChangeWriter::try_new(
        store.clone(),
        layout,
        targets,
        dvs,
        options.delete.clone(),
        options.writer.clone(),
    )?;
    // Updated rows keep their ids: the target scan reads them with the
    // rows, and the change batches carry them to the writer.
    let mut target_spec = scan_spec.clone();
    target_spec.row_tracking = row_ids_in_scan(snapshot, writer.tracks_rows())?;
    if target_spec.row_tracking.is_some() {
        bound.carry_row_ids();
    }
    let plan = Arc::new(bound);
    let mut chunks = SourceChunks::new(source, shape, spec.source_chunk_bytes);
    let mut stats = RunStats::new(merge_plan.clauses().len());
    // Inserting, the MERGE reads the whole table; it keeps its source keys
    // to tell whether files a concurrent commit adds hold a matching row.
    let mut keys = if merge_plan.checks_added_rows() {
        Some(SourceKeys::new(&plan, SOURCE_KEYS_LIMIT)?)
    } else {
        None
    };
    let run = run_merge(
        snapshot,
        &plan,
        &mut chunks,
        &target_spec,
        &mut writer,
        &mut stats,
        keys.as_mut(),
    )
    .await;
    let prepared = match run {
        Ok(()) => writer.finish().await,
        Err(e) => Err(e),
    };
    let prepared = match prepared {
        Ok(p) => p,
        Err(e) => {
            writer.abort().await;
            return Err(e);
        }
    };
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let times = MergeTimes {
        materialize_source_ms: ms(stats.source_time),
        scan_ms: ms(stats.scan_time),
        rewrite_ms: ms(stats.write_time),
    };
    let mut options = options.clone();
    options.new_metadata = metadata;
    for (k, v) in merge_plan.metrics(&stats.counts, chunks.rows, &times) {
        options
            .extra_metrics
            .entry(k.to_string())
            .or_insert(Value::String(v.to_string()));
    }
    for (k, v) in merge_plan.operation_parameters() {
        options.parameters.entry(k).or_insert(v);
    }
    options.read_files = if merge_plan.reads_whole_table() {
        None
    } else {
        Some(stats.scanned)
    };
    let check = if merge_plan.checks_added_rows() {
        let keys = keys.filter(SourceKeys::complete);
        InsertCheck::new(snapshot, plan.clone(), keys, scan_spec.clone())
    } else {
        None
    };
    commit_changes_since(
        snapshot,
        DmlOperation::Merge,
        vec![prepared],
        &options,
        started,
        check.as_ref().map(|c| c as &dyn AddedRowsCheck),
    )
    .await
}

/// With schema evolution, the table's schema and metadata with the source
/// columns it lacks appended (nullable), when an `UPDATE SET *` or
/// `INSERT *` clause writes them; None when nothing changes.
fn evolve(
    snapshot: &Snapshot,
    spec: &MergeSpec,
    plan: &MergePlan,
    source: &StructType,
) -> Result<Option<(StructType, crate::log::actions::Metadata)>> {
    if !spec.schema_evolution || !plan.writes_source_columns() {
        return Ok(None);
    }
    evolved_metadata(snapshot, source)
}

/// The table's schema and metadata with the columns of `source` it lacks
/// appended (nullable); None when it has them all. Refused on column-mapped
/// tables and for a new `timestamp_ntz` column (both need more than a schema
/// change).
pub fn evolved_metadata(
    snapshot: &Snapshot,
    source: &StructType,
) -> Result<Option<(StructType, crate::log::actions::Metadata)>> {
    let table = snapshot.schema();
    let new: Vec<StructField> = source
        .fields
        .iter()
        .filter(|f| table.field_ignore_case(&f.name).is_none())
        .map(|f| StructField {
            nullable: true,
            ..f.clone()
        })
        .collect();
    if new.is_empty() {
        return Ok(None);
    }
    let mut evolved = StructType::new(table.fields.iter().cloned().chain(new).collect());
    let mut metadata = snapshot.metadata().clone();
    if snapshot.column_mapping() != ColumnMappingMode::None {
        // New columns get fresh ids and physical names, as Delta Spark's.
        let (mapped, max_id) =
            crate::log::schema::assign_new_column_mapping(table, &metadata.configuration, &evolved);
        evolved = mapped;
        metadata.configuration.insert(
            crate::log::features::properties::COLUMN_MAPPING_MAX_ID.to_string(),
            Some(max_id.to_string()),
        );
    }
    crate::log::features::protocol::check_schema_features(snapshot.protocol(), &evolved)?;
    metadata.schema_string = evolved.to_schema_string();
    Ok(Some((evolved, metadata)))
}

struct RunStats {
    counts: ClauseCounts,
    scanned: BTreeSet<String>,
    source_time: Duration,
    scan_time: Duration,
    write_time: Duration,
}

impl RunStats {
    fn new(clauses: usize) -> RunStats {
        RunStats {
            counts: ClauseCounts::new(clauses),
            scanned: BTreeSet::new(),
            source_time: Duration::ZERO,
            scan_time: Duration::ZERO,
            write_time: Duration::ZERO,
        }
    }
}

async fn run_merge<R: RecordBatchReader>(
    snapshot: &Snapshot,
    plan: &Arc<BoundMerge>,
    chunks: &mut SourceChunks<R>,
    scan_spec: &ScanSpec,
    writer: &mut ChangeWriter,
    stats: &mut RunStats,
    mut keys: Option<&mut SourceKeys>,
) -> Result<()> {
    let store = snapshot.store().clone();
    let by_source = !plan.by_source.is_empty();
    let mut acted: HashMap<String, RoaringTreemap> = HashMap::new();
    let mut matched: HashMap<String, RoaringTreemap> = HashMap::new();
    let mut first = true;
    let mut multi = false;
    loop {
        let t = Instant::now();
        let next = chunks.next_chunk()?;
        stats.source_time += t.elapsed();
        let Some((source, more)) = next else { break };
        if first && more {
            multi = true;
        }
        first = false;
        let t = Instant::now();
        let chunk = Arc::new(Chunk::build(plan, source)?);
        if let Some(keys) = keys.as_deref_mut() {
            keys.add(plan, &chunk.source)?;
        }
        stats.source_time += t.elapsed();
        let inline_by_source = by_source && !multi;
        // Files that may hold the chunk's keys (all of them when unmatched
        // target rows matter).
        let mut spec = scan_spec.clone();
        let files = if inline_by_source {
            scan::plan(snapshot, None)?
        } else {
            let mut parts = key_ranges(plan, &chunk)?;
            parts.extend(plan.target_only.iter().cloned());
            let table = snapshot.schema();
            let pruning = Predicate::bind_expr(
                &Expr::And(parts),
                String::new(),
                table,
                &snapshot.metadata().partition_columns,
                snapshot.column_mapping(),
                Binding::Lenient,
            )?;
            let files = scan::plan(snapshot, Some(&pruning))?;
            spec.filter = Some(Arc::new(pruning));
            spec.filter_rows = false;
            files
        };
        let pass = Pass::Join {
            by_source: inline_by_source,
        };
        let mut matched_sources = RoaringBitmap::new();
        run_files(
            plan,
            Some(&chunk),
            &pass,
            &store,
            &spec,
            files,
            writer,
            stats,
            |o| {
                matched_sources.extend(o.matched_sources.iter().copied());
                if by_source && multi {
                    matched
                        .entry(o.path.clone())
                        .or_default()
                        .extend(o.matched_targets.iter());
                }
                let seen = acted.entry(o.path.clone()).or_default();
                if !plan.dedupe && !seen.is_disjoint(&o.acted) {
                    return Err(duplicate_match_error(Some(&format!("in {}", o.path))));
                }
                seen.extend(o.acted.iter());
                Ok(())
            },
        )
        .await?;
        // Source rows no target row matched.
        if !plan.not_matched.is_empty() {
            let n = chunk.source.num_rows() as u32;
            let unmatched: Vec<u32> = (0..n).filter(|i| !matched_sources.contains(*i)).collect();
            if !unmatched.is_empty() {
                let t = Instant::now();
                let rows = take(&chunk.source, &unmatched)?;
                let j = plan.rel.batch(None, Some(&rows))?;
                let changes = plan.apply(&plan.not_matched, None, &j, &mut stats.counts)?;
                for c in &changes {
                    writer.write(c).await?;
                }
                stats.write_time += t.elapsed();
            }
        }
    }
    if by_source && multi {
        let pass = Pass::BySource {
            matched: Arc::new(matched),
        };
        let files = scan::plan(snapshot, None)?;
        run_files(
            plan,
            None,
            &pass,
            &store,
            scan_spec,
            files,
            writer,
            stats,
            |_| Ok(()),
        )
        .await?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn run_files(
    plan: &Arc<BoundMerge>,
    chunk: Option<&Arc<Chunk>>,
    pass: &Pass,
    store: &crate::io::TableStore,
    spec: &ScanSpec,
    files: Vec<ScanFile>,
    writer: &mut ChangeWriter,
    stats: &mut RunStats,
    mut each: impl FnMut(&FileOutcome) -> Result<()>,
) -> Result<()> {
    let t = Instant::now();
    let mut write_time = Duration::ZERO;
    for f in &files {
        stats.scanned.insert(f.path.clone());
    }
    let mut outcomes = futures::stream::iter(files)
        .map(|file| {
            let (plan, chunk, pass) = (plan.clone(), chunk.cloned(), pass.clone());
            let (store, spec) = (store.clone(), spec.clone());
            crate::io::runtime::spawn(process_file(plan, chunk, pass, store, spec, file))
        })
        .buffered(super::read_concurrency());
    while let Some(outcome) = outcomes.next().await {
        let o = outcome??;
        each(&o)?;
        stats.counts.merge(&o.counts);
        let w = Instant::now();
        for c in &o.changes {
            writer.write(c).await?;
        }
        write_time += w.elapsed();
    }
    stats.write_time += write_time;
    stats.scan_time += t.elapsed().saturating_sub(write_time);
    Ok(())
}
