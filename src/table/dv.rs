//! Loading deletion vectors: composes `io` (fetch bytes) with `format`
//! (parse). Fetching and parsing stay two steps, so fetches can be coalesced
//! (by [`TableStore::get_ranges`], the one range coalescer) and the parser
//! fuzzed on its own. New DV files are written by [`crate::write::dv_files`].

use std::collections::{BTreeMap, HashMap};

use roaring::RoaringTreemap;

use crate::error::{Error, Result};
use crate::format::descriptor::{DeletionVectorDescriptor, StorageType};
use crate::format::file::{self, DvSlot, SerializedDv};
use crate::io::{block_on, StorePath as Path, TableStore};

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
/// fetched with [`TableStore::get_ranges`] (merged into as few GETs as its
/// coalescing rule allows), and all files are fetched concurrently.
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

    let results =
        futures::future::try_join_all(by_file.into_values().map(|(path, mut slots)| async move {
            slots.sort_by_key(|(s, _)| s.offset);
            // The first DV sits right after the version byte: fetch that byte
            // too, so the frame check sees it.
            let ranges: Vec<std::ops::Range<u64>> = slots
                .iter()
                .map(|(slot, _)| {
                    let (start, end) = slot.frame_range();
                    let start = if start == file::FIRST_DV_OFFSET {
                        0
                    } else {
                        start
                    };
                    start..end
                })
                .collect();
            let fetched = store.get_dv_ranges(&path, &ranges).await?;
            let name = store.display_path(&path);
            slots
                .into_iter()
                .zip(ranges.iter().zip(&fetched))
                .map(|((slot, i), (range, bytes))| {
                    frame(bytes, range.start, &slot, &name).map(|m| (i, m))
                })
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
