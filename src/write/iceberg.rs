//! Iceberg v3 metadata beside the Delta log (UniForm, deletion vectors
//! included): [`sync_iceberg`] converts a Delta snapshot into an Iceberg
//! snapshot under `<table>/metadata/`, incrementally from the Delta version
//! the latest Iceberg metadata records (`delta-version`), or in full the
//! first time. The decisions are [`crate::iceberg::convert`]'s; this module
//! reads the previous state, fetches DV bytes and writes.
//!
//! Order of writes, for readers that open `metadata/` by path: manifests,
//! the Puffin file and the manifest list (new, uniquely named), then
//! `v<N+1>.metadata.json` with put-if-absent (two syncs racing: one wins, the
//! other fails with [`Error::Conflict`] and wrote only orphans), then
//! `version-hint.text`. A crash before the metadata file leaves orphans only;
//! after it, readers that list or probe versions see the new snapshot, and the
//! hint catches up at the next sync.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

use crate::error::{Error, Result};
use crate::format::bitmap::{self, PORTABLE_MAGIC};
use crate::iceberg::convert::{
    self, metadata_file_name, same_partitioning, DeltaFile, DeltaInput, DvBytes, Ids, PrevState,
    TableShape, METADATA_DIR, VERSION_HINT,
};
use crate::iceberg::manifest;
use crate::iceberg::metadata::{convert_schema, partition_columns, TableMetadata};
use crate::io::TableStore;
use crate::log::actions::{Action, DomainMetadata, Metadata};
use crate::log::features::properties::{TableProperties, ROW_TRACKING_DOMAIN};
use crate::log::path::normalize_path;
use crate::log::schema::StructType;
use crate::table::snapshot::LiveFile;
use crate::table::snapshot::Snapshot;

/// Commits read at once to find the files a range of versions touched.
const COMMIT_READ_CONCURRENCY: usize = 16;
/// Above this many Delta versions since the last conversion, the commits are
/// not read: every file is compared instead.
const MAX_COMMITS_TO_READ: u64 = 1000;
/// Manifests fetched at once.
const MANIFEST_READ_CONCURRENCY: usize = 16;

/// What one [`sync_iceberg`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncReport {
    /// The Delta version the Iceberg metadata now mirrors.
    pub delta_version: u64,
    /// The Delta version mirrored before (None: first conversion).
    pub previous_delta_version: Option<u64>,
    /// The new Iceberg snapshot (None: already up to date, nothing written).
    pub snapshot_id: Option<i64>,
    /// N of the current `metadata/vN.metadata.json`.
    pub metadata_version: u64,
    /// Its location.
    pub metadata_location: String,
    /// Files written, relative to the table root, in write order.
    pub files_written: Vec<String>,
    pub added_data_files: usize,
    pub removed_data_files: usize,
    pub added_dvs: usize,
    pub removed_dvs: usize,
    pub manifests_reused: usize,
    pub manifests_written: usize,
}

/// The table root as Iceberg locations spell it: the store URL,
/// percent-decoded (Iceberg readers use locations as plain paths), without a
/// trailing `/`.
pub fn table_location(store: &TableStore) -> String {
    let url = store.url().as_str().trim_end_matches('/');
    percent_encoding::percent_decode_str(url)
        .decode_utf8_lossy()
        .into_owned()
}

/// The Iceberg view of the snapshot's schema and partitioning.
pub fn table_shape(snapshot: &Snapshot) -> Result<TableShape> {
    shape_of(snapshot.store(), snapshot.schema(), snapshot.metadata())
}

/// The Iceberg view of a table's schema and partitioning.
fn shape_of(store: &TableStore, schema: &StructType, metadata: &Metadata) -> Result<TableShape> {
    let mut converted = convert_schema(schema)?;
    let properties = TableProperties::new(&metadata.configuration);
    if let Some((row_id, commit_version)) = properties.materialized_row_tracking_columns() {
        converted.map_row_tracking_columns(row_id, commit_version);
    }
    Ok(TableShape {
        location: table_location(store),
        schema: converted,
        partition: partition_columns(schema, &metadata.partition_columns)?,
        delta_table_id: metadata.id.clone(),
    })
}

/// The Delta table state a conversion mirrors: a loaded snapshot's
/// ([`DeltaState::of`]), or a snapshot's moved past one commit made on it
/// ([`DeltaState::after_commit`], which spares the commit a reload).
pub struct DeltaState<'a> {
    pub store: &'a TableStore,
    pub version: u64,
    /// The commit's time (in-commit timestamp, or the commit file's).
    pub timestamp_ms: i64,
    pub metadata: Metadata,
    pub schema: StructType,
    pub files: Vec<LiveFile>,
    /// `rowIdHighWaterMark` of the row tracking domain.
    pub row_id_high_water_mark: Option<i64>,
    /// The actions of commit `version`, when known (not read again).
    pub commit: Option<Vec<Action>>,
}

impl<'a> DeltaState<'a> {
    /// The state of a loaded snapshot.
    pub fn of(snapshot: &'a Snapshot) -> Result<DeltaState<'a>> {
        Ok(DeltaState {
            store: snapshot.store(),
            version: snapshot.version(),
            timestamp_ms: snapshot.timestamp().unwrap_or_else(now_ms),
            metadata: snapshot.metadata().clone(),
            schema: snapshot.schema().clone(),
            files: snapshot.files()?,
            row_id_high_water_mark: domain_high_water_mark(
                snapshot.domain_metadata().get(ROW_TRACKING_DOMAIN),
            )?,
            commit: None,
        })
    }

    /// The state after the commit `version` of `actions`, made directly on
    /// `snapshot` (version − 1): its file actions applied to the live files,
    /// its metadata and row tracking domain taken, its commitInfo's time.
    pub fn after_commit(
        snapshot: &'a Snapshot,
        version: u64,
        actions: &[Action],
    ) -> Result<DeltaState<'a>> {
        let mut state = DeltaState::of(snapshot)?;
        state.version = version;
        let mut removed: HashSet<String> = HashSet::new();
        let mut added = Vec::new();
        for a in actions {
            match a {
                Action::Remove(r) => {
                    removed.insert(normalize_path(&r.path));
                }
                Action::Add(add) => added.push(LiveFile::new(add.as_ref().clone())?),
                Action::Metadata(m) => {
                    state.schema = StructType::parse(&m.schema_string)?;
                    state.metadata = m.clone();
                }
                Action::DomainMetadata(d) if d.domain == ROW_TRACKING_DOMAIN => {
                    state.row_id_high_water_mark = domain_high_water_mark(Some(d))?;
                }
                Action::CommitInfo(info) => {
                    let at = |k: &str| info.get(k).and_then(serde_json::Value::as_i64);
                    if let Some(t) = at("inCommitTimestamp").or_else(|| at("timestamp")) {
                        state.timestamp_ms = t;
                    }
                }
                _ => {}
            }
        }
        removed.extend(added.iter().map(|f| f.path.clone()));
        state.files.retain(|f| !removed.contains(&f.path));
        state.files.extend(added);
        state.commit = Some(actions.to_vec());
        Ok(state)
    }
}

/// The store path of an Iceberg location under the table root.
fn store_path(
    store: &TableStore,
    shape: &TableShape,
    location: &str,
) -> Result<crate::io::StorePath> {
    match location
        .strip_prefix(&shape.location)
        .and_then(|r| r.strip_prefix('/'))
    {
        Some(rel) => Ok(store.path(rel)),
        None => store.resolve(location),
    }
}

async fn get_optional(store: &TableStore, rel: &str) -> Result<Option<Bytes>> {
    match store.get(&store.path(rel)).await {
        Ok(b) => Ok(Some(b)),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

fn metadata_rel(n: u64) -> String {
    format!("{METADATA_DIR}/{}", metadata_file_name(n))
}

/// N of the latest `metadata/vN.metadata.json` (0: none) and that file,
/// parsed: from the hint, then probing forward (the hint is written after
/// the metadata file); the file named by the hint is fetched while the next
/// one is probed.
pub async fn latest_metadata(store: &TableStore) -> Result<Option<(u64, TableMetadata)>> {
    let hint_rel = format!("{METADATA_DIR}/{VERSION_HINT}");
    let hinted = match get_optional(store, &hint_rel).await? {
        Some(b) => String::from_utf8_lossy(&b)
            .trim()
            .parse::<u64>()
            .unwrap_or(0),
        None => 0,
    };
    let mut n = 0;
    if hinted > 0 {
        let (file_rel, next_path) = (metadata_rel(hinted), store.path(&metadata_rel(hinted + 1)));
        let (file, next) = futures::join!(get_optional(store, &file_rel), store.exists(&next_path));
        match (file?, next?) {
            (Some(bytes), false) => {
                let metadata = TableMetadata::parse(&bytes, &file_rel)?;
                return Ok(Some((hinted, metadata)));
            }
            (Some(_), true) => n = hinted + 1,
            // A hint naming a missing file (deleted, or bad): from the start.
            (None, _) => {}
        }
    }
    while store.exists(&store.path(&metadata_rel(n + 1))).await? {
        n += 1;
    }
    if n == 0 {
        return Ok(None);
    }
    Ok(Some((n, read_prev_metadata(store, n).await?)))
}

/// Which manifests' entries are read (see [`PrevState`]).
#[derive(Debug, Clone, Copy)]
struct EntriesToRead {
    data: bool,
    deletes: bool,
}

/// The manifests of the manifest list at `location`, with their live
/// entries where `read` asks for them, and which were read.
async fn read_manifests(
    store: &TableStore,
    shape: &TableShape,
    location: &str,
    read: EntriesToRead,
) -> Result<(
    Vec<(manifest::ManifestFile, Vec<manifest::ManifestEntry>)>,
    EntriesToRead,
)> {
    let list_bytes = store.get(&store_path(store, shape, location)?).await?;
    let list = manifest::read_manifest_list(&list_bytes, location)?;
    // Delete manifests about to be merged are read (convert::build merges
    // past MAX_DELETE_MANIFESTS, with their entries).
    let deletes = list
        .iter()
        .filter(|mf| mf.content == manifest::MANIFEST_CONTENT_DELETES)
        .count();
    let read = EntriesToRead {
        data: read.data,
        deletes: read.deletes || deletes >= convert::MAX_DELETE_MANIFESTS,
    };
    let manifests = futures::stream::iter(list.into_iter().map(|mf| async move {
        let wanted = if mf.content == manifest::MANIFEST_CONTENT_DATA {
            read.data
        } else {
            read.deletes
        };
        if !wanted {
            return Ok::<_, Error>((mf, Vec::new()));
        }
        let path = store_path(store, shape, &mf.manifest_path)?;
        let bytes = store.get(&path).await?;
        let entries = manifest::read_manifest(&bytes, &shape.partition, &mf.manifest_path)?;
        Ok::<_, Error>((mf, entries))
    }))
    .buffered(MANIFEST_READ_CONCURRENCY)
    .try_collect()
    .await?;
    Ok((manifests, read))
}

/// The latest converted metadata, `vN.metadata.json`.
async fn read_prev_metadata(store: &TableStore, n: u64) -> Result<TableMetadata> {
    let rel = metadata_rel(n);
    let bytes = store.get(&store.path(&rel)).await?;
    TableMetadata::parse(&bytes, &rel)
}

/// The converted state at metadata version `n`: `metadata` and its current
/// snapshot's manifests (their entries where `read` asks for them).
async fn read_prev(
    store: &TableStore,
    shape: &TableShape,
    n: u64,
    metadata: TableMetadata,
    read: EntriesToRead,
) -> Result<PrevState> {
    let mut manifests = Vec::new();
    // With no manifest carried over, every file is added again.
    let mut loaded = EntriesToRead {
        data: true,
        deletes: true,
    };
    // Manifests of another partitioning are not carried over: every file is
    // added again under the current spec.
    if let (Some(current), true) = (
        metadata.current_snapshot(),
        same_partitioning(&metadata, shape),
    ) {
        manifests = match read_manifests(store, shape, &current.manifest_list, read).await {
            Ok((m, read)) => {
                loaded = read;
                m
            }
            // Deleted (by a VACUUM that does not know metadata/): convert in
            // full on top of the metadata that is left.
            Err(Error::NotFound { .. }) => Vec::new(),
            Err(e) => return Err(e),
        };
    }
    Ok(PrevState {
        metadata,
        metadata_version: n,
        manifests,
        data_entries_loaded: loaded.data,
        delete_entries_loaded: loaded.deletes,
    })
}

/// What the Delta commits since the converted version changed.
struct RangeChanges {
    /// Locations of the files they added or removed.
    touched: HashSet<String>,
    /// Locations of the files live at the converted version.
    previously_live: HashSet<String>,
    /// A file they removed had a DV (a remove names the DV of the file it
    /// removes): the DV entries of the converted version may change.
    removed_dvs: bool,
}

/// What the Delta commits `from + 1 ..= to` changed, given the locations
/// live at `to` (and commit `to`'s actions when known); `None` when a commit
/// is gone (log cleanup) or there are too many to read.
async fn range_changes(
    store: &TableStore,
    shape: &TableShape,
    from: u64,
    to: u64,
    live: &HashSet<String>,
    last: Option<&[Action]>,
) -> Result<Option<RangeChanges>> {
    if to <= from || to - from > MAX_COMMITS_TO_READ {
        return Ok(None);
    }
    let commits: Vec<Option<Vec<Action>>> =
        futures::stream::iter((from + 1..=to).map(|v| async move {
            if let (true, Some(actions)) = (v == to, last) {
                return Ok(Some(actions.to_vec()));
            }
            match super::commit::read_commit(store, v).await {
                Ok(actions) => Ok(Some(actions)),
                Err(Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        }))
        .buffered(COMMIT_READ_CONCURRENCY)
        .try_collect()
        .await?;
    let mut touched = HashSet::new();
    let mut previously_live = live.clone();
    let mut removed_dvs = false;
    // Undo the commits, latest first: within one, its adds before its
    // removes (a file re-added with a new DV is both, and stays live).
    for commit in commits.iter().rev() {
        let Some(actions) = commit else {
            return Ok(None);
        };
        for a in actions {
            if let Action::Add(add) = a {
                let location = shape.file_location(&normalize_path(&add.path));
                previously_live.remove(&location);
                touched.insert(location);
            }
        }
        for a in actions {
            if let Action::Remove(r) = a {
                removed_dvs |= r.deletion_vector.is_some();
                let location = shape.file_location(&normalize_path(&r.path));
                previously_live.insert(location.clone());
                touched.insert(location);
            }
        }
    }
    Ok(Some(RangeChanges {
        touched,
        previously_live,
        removed_dvs,
    }))
}

/// `rowIdHighWaterMark` of a row tracking domain (None: no row id yet), as
/// the transaction reads it.
fn domain_high_water_mark(d: Option<&DomainMetadata>) -> Result<Option<i64>> {
    let mark = super::transaction::high_water_mark(d)?;
    Ok((mark >= 0).then_some(mark))
}

/// The DV bytes (portable layout) of the files `indexes` of `files`.
async fn load_dvs(
    store: &TableStore,
    live: &[crate::table::snapshot::LiveFile],
    indexes: &[usize],
) -> Result<DvBytes> {
    let descriptors: Vec<(usize, &crate::DeletionVectorDescriptor)> = indexes
        .iter()
        .filter_map(|&i| {
            live.get(i)
                .and_then(|f| f.add.deletion_vector.as_ref())
                .map(|d| (i, d))
        })
        .collect();
    let refs: Vec<&crate::DeletionVectorDescriptor> = descriptors.iter().map(|(_, d)| *d).collect();
    let loaded = crate::table::dv::load_many_serialized(store, &refs).await?;
    let mut out = HashMap::with_capacity(loaded.len());
    for ((i, _), dv) in descriptors.into_iter().zip(loaded) {
        let portable = dv.bytes.get(..4) == Some(&PORTABLE_MAGIC.to_le_bytes()[..]);
        let bytes = if portable {
            dv.bytes
        } else {
            // The older native layout: same rows, re-serialized portably.
            let map = bitmap::deserialize(&dv.bytes)?;
            let mut buf = Vec::new();
            bitmap::serialize_into(&map, &mut buf)?;
            buf
        };
        out.insert(i, (bytes, dv.cardinality));
    }
    Ok(out)
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Mirror `snapshot` as the current Iceberg snapshot under `metadata/`.
/// Nothing is written when the Iceberg metadata already mirrors its version.
pub async fn sync_iceberg(snapshot: &Snapshot) -> Result<SyncReport> {
    sync_state(&DeltaState::of(snapshot)?).await
}

/// [`sync_iceberg`] of a [`DeltaState`].
pub async fn sync_state(state: &DeltaState<'_>) -> Result<SyncReport> {
    let store = state.store;
    let shape = shape_of(store, &state.schema, &state.metadata)?;
    let (n, prev_metadata) = match latest_metadata(store).await? {
        Some((n, m)) => (n, Some(m)),
        None => (0, None),
    };
    let version = state.version;
    let previous_delta_version = prev_metadata
        .as_ref()
        .and_then(TableMetadata::delta_version)
        .and_then(|v| u64::try_from(v).ok());
    // Mirrored already, or past it (a later commit's mirror ran first).
    if let Some(pv) = previous_delta_version.filter(|pv| *pv >= version) {
        return Ok(SyncReport {
            delta_version: pv,
            previous_delta_version,
            snapshot_id: None,
            metadata_version: n,
            metadata_location: shape.metadata_location(&metadata_file_name(n)),
            ..Default::default()
        });
    }
    let live = &state.files;
    let locations: Vec<String> = live.iter().map(|f| shape.file_location(&f.path)).collect();
    let changes = match previous_delta_version {
        Some(pv) if pv < version => {
            let set: HashSet<String> = locations.iter().cloned().collect();
            range_changes(store, &shape, pv, version, &set, state.commit.as_deref())
                .await?
                .map(|c| (c, set))
        }
        _ => None,
    };
    // Column stats are converted only for files whose data entry may be
    // written: those the commits since touched (all, when unknown).
    let files = live
        .iter()
        .zip(&locations)
        .map(|(f, location)| {
            let touched = changes
                .as_ref()
                .is_none_or(|(c, _)| c.touched.contains(location));
            let data_file = match f.num_records {
                Some(n) if !touched => {
                    convert::data_file_without_stats(&shape, &f.add, &f.path, n)?
                }
                _ => convert::data_file(&shape, &f.add, &f.path)?,
            };
            Ok(DeltaFile {
                data_file,
                dv_cardinality: f.add.deletion_vector.as_ref().map(|d| d.cardinality()),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    // Data manifests are read only when a file live at the converted version
    // is gone (their entries are rewritten); else they are kept whole.
    // Delete manifests only when a file had a DV that a commit removed.
    let read = EntriesToRead {
        data: changes
            .as_ref()
            .is_none_or(|(c, locations)| !c.previously_live.iter().all(|p| locations.contains(p))),
        deletes: changes.as_ref().is_none_or(|(c, _)| c.removed_dvs),
    };
    // The DVs of touched files (those the new snapshot surely writes) are
    // fetched while the previous snapshot's manifests are read.
    let touched_dvs: Vec<usize> = match &changes {
        Some((c, _)) => files
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                f.dv_cardinality.is_some() && c.touched.contains(&f.data_file.file_path)
            })
            .map(|(i, _)| i)
            .collect(),
        None => Vec::new(),
    };
    let (prev, prefetched) = futures::join!(
        async {
            match prev_metadata {
                Some(m) => read_prev(store, &shape, n, m, read).await.map(Some),
                None => Ok(None),
            }
        },
        load_dvs(store, live, &touched_dvs)
    );
    let (prev, mut dvs) = (prev?, prefetched?);
    let (touched, previously_live) = match changes {
        Some((c, _)) => (Some(c.touched), Some(c.previously_live)),
        None => (None, None),
    };
    let input = DeltaInput {
        version,
        timestamp_ms: state.timestamp_ms,
        files,
        touched,
        previously_live,
        row_id_high_water_mark: state.row_id_high_water_mark,
    };
    let plan = convert::plan(prev.as_ref(), &input);
    let missing: Vec<usize> = plan
        .dv_blobs
        .iter()
        .copied()
        .filter(|i| !dvs.contains_key(i))
        .collect();
    dvs.extend(load_dvs(store, live, &missing).await?);
    let token = uuid::Uuid::new_v4();
    let ids = Ids {
        snapshot_id: (token.as_u128() as i64) & i64::MAX,
        token: token.to_string(),
        now_ms: now_ms(),
        fallback_table_uuid: uuid::Uuid::new_v4().to_string(),
    };
    let out = convert::build(prev.as_ref(), &shape, &input, &plan, &dvs, &ids)?;

    let mut written = Vec::with_capacity(out.files.len() + 2);
    futures::stream::iter(out.files.iter().map(|f| async move {
        store
            .put(&store.path(&f.path), Bytes::from(f.bytes.clone()))
            .await
    }))
    .buffer_unordered(MANIFEST_READ_CONCURRENCY)
    .try_collect::<Vec<()>>()
    .await?;
    written.extend(out.files.iter().map(|f| f.path.clone()));
    let meta_path = store.path(&out.metadata_file.path);
    if !store
        .put_if_absent(&meta_path, Bytes::from(out.metadata_file.bytes.clone()))
        .await?
    {
        return Err(Error::Conflict {
            version,
            detail: format!(
                "another Iceberg sync wrote {} first; the files this one wrote are orphans",
                out.metadata_file.path
            ),
        });
    }
    written.push(out.metadata_file.path.clone());
    store
        .put(
            &store.path(&out.version_hint.path),
            Bytes::from(out.version_hint.bytes.clone()),
        )
        .await?;
    written.push(out.version_hint.path.clone());
    Ok(SyncReport {
        delta_version: version,
        previous_delta_version,
        snapshot_id: Some(out.snapshot_id),
        metadata_version: out.metadata_version,
        metadata_location: shape.metadata_location(&metadata_file_name(out.metadata_version)),
        files_written: written,
        added_data_files: out.added_data_files,
        removed_data_files: out.removed_data_files,
        added_dvs: out.added_delete_files,
        removed_dvs: out.removed_delete_files,
        manifests_reused: out.manifests_reused,
        manifests_written: out.manifests_written,
    })
}

/// What VACUUM keeps under `metadata/`, after expiring Iceberg snapshots.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IcebergVacuum {
    /// Files (relative to the table root) the live Iceberg snapshots read:
    /// the current metadata file, `version-hint.text`, the metadata log's
    /// files, manifest lists, manifests and Puffin files.
    pub keep: HashSet<String>,
    /// Snapshots expired (older than the cutoff, not the current one).
    pub expired_snapshots: usize,
}

/// The path relative to the table root of an Iceberg location under it.
fn relative(shape: &TableShape, location: &str) -> Option<String> {
    location
        .strip_prefix(&shape.location)
        .and_then(|r| r.strip_prefix('/'))
        .map(str::to_string)
}

/// VACUUM's part of the Iceberg metadata (`None`: there is none): expire
/// the snapshots older than `cutoff_ms` but the current one (a real run
/// writes the next `vN.metadata.json` without them, put-if-absent, then the
/// hint), and name the files the remaining snapshots read, so that VACUUM
/// deletes only the others (and only those older than the cutoff).
pub async fn vacuum_iceberg(
    snapshot: &Snapshot,
    cutoff_ms: i64,
    dry_run: bool,
) -> Result<Option<IcebergVacuum>> {
    let store = snapshot.store();
    let Some((n, metadata)) = latest_metadata(store).await? else {
        return Ok(None);
    };
    let shape = table_shape(snapshot)?;
    let mut current_n = n;
    let mut result = IcebergVacuum::default();
    let location = shape.metadata_location(&metadata_file_name(n));
    let metadata = match metadata.expire_snapshots(cutoff_ms, now_ms(), &location) {
        None => metadata,
        Some(next) => {
            result.expired_snapshots = metadata.snapshots.len() - next.snapshots.len();
            if !dry_run {
                let rel = format!("{METADATA_DIR}/{}", metadata_file_name(n + 1));
                if !store
                    .put_if_absent(&store.path(&rel), Bytes::from(next.to_json()?))
                    .await?
                {
                    return Err(Error::Conflict {
                        version: snapshot.version(),
                        detail: format!(
                            "an Iceberg sync wrote {rel} while VACUUM expired snapshots"
                        ),
                    });
                }
                store
                    .put(
                        &store.path(&format!("{METADATA_DIR}/{VERSION_HINT}")),
                        Bytes::from((n + 1).to_string()),
                    )
                    .await?;
                current_n = n + 1;
            }
            next
        }
    };
    let keep = &mut result.keep;
    keep.insert(format!("{METADATA_DIR}/{}", metadata_file_name(current_n)));
    keep.insert(format!("{METADATA_DIR}/{VERSION_HINT}"));
    if current_n != n {
        // The file the new one follows stays in its log.
        keep.insert(format!("{METADATA_DIR}/{}", metadata_file_name(n)));
    }
    keep.extend(
        metadata
            .metadata_log
            .iter()
            .filter_map(|e| relative(&shape, &e.metadata_file)),
    );
    let lists: HashSet<&str> = metadata
        .snapshots
        .iter()
        .map(|s| s.manifest_list.as_str())
        .collect();
    let manifests: Vec<Vec<manifest::ManifestFile>> =
        futures::stream::iter(lists.iter().map(|location| {
            let shape = &shape;
            async move {
                let bytes = store.get(&store_path(store, shape, location)?).await?;
                manifest::read_manifest_list(&bytes, location)
            }
        }))
        .buffer_unordered(MANIFEST_READ_CONCURRENCY)
        .try_collect()
        .await?;
    keep.extend(lists.iter().filter_map(|l| relative(&shape, l)));
    let mut delete_manifests: HashSet<&str> = HashSet::new();
    for mf in manifests.iter().flatten() {
        if let Some(rel) = relative(&shape, &mf.manifest_path) {
            keep.insert(rel);
        }
        if mf.content == manifest::MANIFEST_CONTENT_DELETES {
            delete_manifests.insert(mf.manifest_path.as_str());
        }
    }
    // Puffin files: named by the entries of the delete manifests.
    let puffins: Vec<Vec<String>> =
        futures::stream::iter(delete_manifests.into_iter().map(|location| {
            let shape = &shape;
            async move {
                let bytes = store.get(&store_path(store, shape, location)?).await?;
                let entries = manifest::read_manifest(&bytes, &shape.partition, location)?;
                Ok::<_, Error>(
                    entries
                        .into_iter()
                        .map(|e| e.data_file.file_path)
                        .collect::<Vec<_>>(),
                )
            }
        }))
        .buffer_unordered(MANIFEST_READ_CONCURRENCY)
        .try_collect()
        .await?;
    keep.extend(puffins.iter().flatten().filter_map(|p| relative(&shape, p)));
    Ok(Some(result))
}
