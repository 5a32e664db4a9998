//! Loading and writing deletion vectors: composes `io` (fetch bytes) with
//! `format` (parse). Fetching and parsing stay two steps, so fetches can be
//! coalesced and the parser fuzzed on its own.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use object_store::path::Path;
use roaring::RoaringTreemap;

use crate::error::{Error, Result};
use crate::format::descriptor::{DeletionVectorDescriptor, StorageType};
use crate::format::file::{self, DvSlot, SerializedDv};
use crate::io::{block_on, TableStore};

/// Ranges of one DV file closer than this are fetched with one GET.
pub const COALESCE_GAP: u64 = 1 << 20;

/// One coalesced GET: byte range `[start, end)` and the DVs (slot, caller index) inside it.
struct RangeGroup {
    start: u64,
    end: u64,
    members: Vec<(DvSlot, usize)>,
}

/// Where a file-backed DV lives in `store`. A `p` DV must name a file in
/// the table's own store: a `file:` URI only on a local table (and without a
/// host), any other URI only in the table's bucket/container.
fn dv_path(store: &TableStore, d: &DeletionVectorDescriptor) -> Result<Path> {
    let missing = || {
        Error::InvalidDescriptor(format!(
            "deletion vector {} has no file path",
            d.unique_id()
        ))
    };
    match d.storage_type() {
        StorageType::UuidRelative => Ok(store.path(&d.relative_path().ok_or_else(missing)?)),
        StorageType::AbsolutePath => {
            let raw = d.path_or_inline_dv();
            let file_uri = raw
                .get(..5)
                .is_some_and(|s| s.eq_ignore_ascii_case("file:"));
            if file_uri {
                let foreign = !store.is_local()
                    || url::Url::parse(raw).map_or(true, |u| u.host_str().is_some());
                if foreign {
                    return Err(Error::InvalidArgument(format!(
                        "deletion vector file {raw} is not in the table's store {}: deltadv \
                         reads files only from the store holding the table",
                        store.url().scheme()
                    )));
                }
            }
            store.resolve(&d.absolute_path("").ok_or_else(missing)?)
        }
        StorageType::Inline => Err(Error::InvalidArgument(format!(
            "{} is an inline deletion vector",
            d.unique_id()
        ))),
    }
}

/// Load many DVs. Inline DVs need no request; the ranges of each DV file are
/// merged into as few GETs as possible (one, unless they are over
/// [`COALESCE_GAP`] apart), and all files are fetched concurrently.
pub async fn load_many(
    store: &TableStore,
    descriptors: &[&DeletionVectorDescriptor],
) -> Result<Vec<RoaringTreemap>> {
    load_many_as(
        store,
        descriptors,
        DeletionVectorDescriptor::inline_bitmap,
        file::read_dv,
    )
    .await
}

/// [`load_many`], each DV kept as its checked serialized bytes (for callers
/// that decode row indexes straight from them: `format::rows`).
pub async fn load_many_serialized(
    store: &TableStore,
    descriptors: &[&DeletionVectorDescriptor],
) -> Result<Vec<SerializedDv>> {
    load_many_as(
        store,
        descriptors,
        DeletionVectorDescriptor::inline_serialized,
        file::read_dv_serialized,
    )
    .await
}

/// How [`load_many_as`] turns an inline descriptor, or a DV frame inside
/// fetched bytes (bytes, their file offset, slot, file name), into `T`.
type InlineDecoder<T> = fn(&DeletionVectorDescriptor) -> Result<T>;
type FrameDecoder<T> = fn(&[u8], u64, &DvSlot, &str) -> Result<T>;

async fn load_many_as<T>(
    store: &TableStore,
    descriptors: &[&DeletionVectorDescriptor],
    inline: InlineDecoder<T>,
    frame: FrameDecoder<T>,
) -> Result<Vec<T>> {
    let mut out: Vec<Option<T>> = descriptors.iter().map(|_| None).collect();
    // DV file -> (slot, index in `descriptors`)
    let mut by_file: BTreeMap<String, (Path, Vec<(DvSlot, usize)>)> = BTreeMap::new();
    for (i, d) in descriptors.iter().enumerate() {
        if d.storage_type() == StorageType::Inline {
            if let Some(slot) = out.get_mut(i) {
                *slot = Some(inline(d)?);
            }
            continue;
        }
        let path = dv_path(store, d)?;
        by_file
            .entry(path.to_string())
            .or_insert_with(|| (path, Vec::new()))
            .1
            .push((d.slot(), i));
    }

    let fetches = by_file.into_values().flat_map(|(path, mut slots)| {
        slots.sort_by_key(|(s, _)| s.offset);
        // Group slots into coalesced ranges.
        let mut groups: Vec<RangeGroup> = Vec::new();
        for (slot, i) in slots {
            let (start, end) = slot.frame_range();
            // The first DV sits right after the version byte: fetch it too and check it.
            let start = if start == file::FIRST_DV_OFFSET {
                0
            } else {
                start
            };
            match groups.last_mut() {
                Some(g) if start <= g.end.saturating_add(COALESCE_GAP) => {
                    g.end = g.end.max(end);
                    g.members.push((slot, i));
                }
                _ => groups.push(RangeGroup {
                    start,
                    end,
                    members: vec![(slot, i)],
                }),
            }
        }
        groups
            .into_iter()
            .map(move |g| (path.clone(), g.start, g.end, g.members))
    });
    let results =
        futures::future::try_join_all(fetches.map(|(path, start, end, members)| async move {
            let bytes: Bytes = store.get_range(&path, start..end).await?;
            let name = store_display(store, &path);
            members
                .into_iter()
                .map(|(slot, i)| frame(&bytes, start, &slot, &name).map(|m| (i, m)))
                .collect::<Result<Vec<_>>>()
        }))
        .await?;
    for (i, map) in results.into_iter().flatten() {
        if let Some(slot) = out.get_mut(i) {
            *slot = Some(map);
        }
    }
    // Every descriptor was either decoded inline or fetched above; a missing
    // one would silently bring its deleted rows back, so it is an error.
    out.into_iter()
        .zip(descriptors)
        .map(|(map, d)| {
            map.ok_or_else(|| {
                Error::InvalidArgument(format!("deletion vector {} was not loaded", d.unique_id()))
            })
        })
        .collect()
}

/// Load one file-backed or inline DV.
pub async fn load_one(
    store: &TableStore,
    descriptor: &DeletionVectorDescriptor,
) -> Result<RoaringTreemap> {
    load_many(store, &[descriptor]).await?.pop().ok_or_else(|| {
        Error::InvalidArgument(format!(
            "deletion vector {} was not loaded",
            descriptor.unique_id()
        ))
    })
}

fn store_display(store: &TableStore, path: &Path) -> String {
    format!(
        "{}://{}/{}",
        store.url().scheme(),
        store.url().host_str().unwrap_or(""),
        path
    )
    .replace(":////", ":///")
}

/// Load the rows one descriptor marks as deleted, from a table at `table_root`
/// (a local path or any supported URI). Reads exactly the DV's byte range.
pub fn load(descriptor: &DeletionVectorDescriptor, table_root: &str) -> Result<RoaringTreemap> {
    load_with_options(descriptor, table_root, &HashMap::new())
}

/// [`load`], the DV kept as its checked serialized bytes.
pub fn load_serialized(
    descriptor: &DeletionVectorDescriptor,
    table_root: &str,
    options: &HashMap<String, String>,
) -> Result<SerializedDv> {
    load_single(
        descriptor,
        table_root,
        options,
        DeletionVectorDescriptor::inline_serialized,
        file::read_dv_serialized,
    )
}

/// [`load`] with storage options.
pub fn load_with_options(
    descriptor: &DeletionVectorDescriptor,
    table_root: &str,
    options: &HashMap<String, String>,
) -> Result<RoaringTreemap> {
    load_single(
        descriptor,
        table_root,
        options,
        DeletionVectorDescriptor::inline_bitmap,
        file::read_dv,
    )
}

/// One DV, decoded by `inline` or `frame` (see [`load_many_as`]); a store
/// is opened only for a file-backed DV.
fn load_single<T>(
    descriptor: &DeletionVectorDescriptor,
    table_root: &str,
    options: &HashMap<String, String>,
    inline: InlineDecoder<T>,
    frame: FrameDecoder<T>,
) -> Result<T> {
    if descriptor.storage_type() == StorageType::Inline {
        return inline(descriptor);
    }
    let store = TableStore::open(table_root, options)?;
    let mut loaded = block_on(load_many_as(&store, &[descriptor], inline, frame))??;
    loaded.pop().ok_or_else(|| {
        Error::InvalidArgument(format!(
            "deletion vector {} was not loaded",
            descriptor.unique_id()
        ))
    })
}

/// Serialize `maps` into the bytes of one DV file and their `u` descriptors.
pub fn encode_file(
    uuid: uuid::Uuid,
    prefix: &str,
    maps: &[RoaringTreemap],
) -> Result<(Bytes, Vec<DeletionVectorDescriptor>)> {
    let mut writer = file::DvFileWriter::new(Vec::new())?;
    let mut descriptors = Vec::with_capacity(maps.len());
    for map in maps {
        let slot = writer.append(map)?;
        descriptors.push(
            DeletionVectorDescriptor::relative(uuid, prefix, slot)?.with_max_row_index(map.max()),
        );
    }
    Ok((Bytes::from(writer.finish()?), descriptors))
}

/// Write `maps` into one new DV file `<root>/<prefix>/deletion_vector_<uuid>.bin`
/// (one PUT, never overwriting) and return a `u` descriptor for each, in order.
pub async fn write_file_to(
    store: &TableStore,
    prefix: &str,
    maps: &[RoaringTreemap],
) -> Result<Vec<DeletionVectorDescriptor>> {
    if maps.is_empty() {
        return Err(Error::InvalidArgument(
            "no deletion vectors to write".to_string(),
        ));
    }
    let (bytes, descriptors) = encode_file(uuid::Uuid::new_v4(), prefix, maps)?;
    let rel = descriptors
        .first()
        .and_then(|d| d.relative_path())
        .ok_or_else(|| Error::InvalidArgument("no deletion vector file was encoded".to_string()))?;
    let path = store.path(&rel);
    if !store.put_if_absent(&path, bytes).await? {
        return Err(Error::Io {
            path: rel,
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "DV file already exists",
            ),
        });
    }
    Ok(descriptors)
}

/// Blocking [`write_file_to`] for a table root URI or path.
pub fn write_file(
    table_root: &str,
    prefix: &str,
    maps: &[RoaringTreemap],
) -> Result<Vec<DeletionVectorDescriptor>> {
    let store = TableStore::open(table_root, &HashMap::new())?;
    block_on(write_file_to(&store, prefix, maps))?
}
