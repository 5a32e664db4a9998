//! New DV files: how new deletion vectors are packed and written. Every
//! operation that writes DVs (DELETE, UPDATE, MERGE, and the Python
//! `write_deletion_vectors`) goes through here: small DVs inline in the log,
//! the rest packed into as few DV files of about the target size as possible.
//!
//! ```text
//! maps:  [m0 (inline)] [m1] [m2] [m3] [m4]          target size ≈ 2 MiB
//!                        └── file A ──┘ └ file B ┘   each: version byte, then per DV
//!                                                    BE size, bitmap, BE CRC-32
//! ```
//! A DV file is a new, uniquely named object that nothing references until a
//! commit does: a failure before the commit leaves at most an orphan for VACUUM.

use std::collections::HashMap;

use bytes::Bytes;
use roaring::RoaringTreemap;

use super::fail_point;
use crate::error::{Error, Result};
use crate::format::bitmap;
use crate::format::descriptor::DeletionVectorDescriptor;
use crate::format::file;
use crate::io::{block_on, TableStore};

/// Default target size of a DV file, as in the reference implementation.
pub const DEFAULT_DV_FILE_TARGET_SIZE: usize = 2 << 20;

/// Group `maps` (in order) into DV files of about `target` bytes each.
fn dv_file_groups<M: std::borrow::Borrow<RoaringTreemap>>(
    maps: &[M],
    target: usize,
) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let mut start = 0;
    let mut bytes = 0usize;
    for (i, m) in maps.iter().enumerate() {
        let size = bitmap::serialized_size(m.borrow()) + 8; // + size and checksum fields
        if i > start && bytes + size > target {
            groups.push(start..i);
            start = i;
            bytes = 0;
        }
        bytes += size;
    }
    if start < maps.len() {
        groups.push(start..maps.len());
    }
    groups
}

/// The descriptors of new DVs `maps` (in order): each whose serialized
/// bitmap is at most `inline_threshold` bytes inline (0: none), the others
/// written into as few new DV files of about `target_size` bytes as possible
/// (one PUT each, nothing overwritten). DELETE, UPDATE and MERGE write their
/// DVs here.
pub async fn write_dvs(
    store: &TableStore,
    maps: &[&RoaringTreemap],
    inline_threshold: usize,
    target_size: usize,
) -> Result<Vec<DeletionVectorDescriptor>> {
    let inline = |map: &RoaringTreemap| {
        inline_threshold > 0 && bitmap::serialized_size(map) <= inline_threshold
    };
    let in_files: Vec<&RoaringTreemap> = maps.iter().copied().filter(|m| !inline(m)).collect();
    let mut written = Vec::with_capacity(in_files.len());
    if !in_files.is_empty() {
        fail_point("dv_write")?;
        for range in dv_file_groups(&in_files, target_size) {
            let group = in_files.get(range.clone()).ok_or_else(|| {
                Error::Internal(format!(
                    "DV file group {range:?} is outside the {} deletion vectors",
                    in_files.len()
                ))
            })?;
            written.extend(write_file_to(store, "", group).await?);
        }
    }
    let mut written = written.into_iter();
    maps.iter()
        .map(|m| {
            if inline(m) {
                DeletionVectorDescriptor::inline(m)
            } else {
                written
                    .next()
                    .ok_or_else(|| Error::Internal("a DV file wrote too few DVs".into()))
            }
        })
        .collect()
}

/// Serialize `maps` into the bytes of one DV file and their `u` descriptors.
pub fn encode_file<M: std::borrow::Borrow<RoaringTreemap>>(
    uuid: uuid::Uuid,
    prefix: &str,
    maps: &[M],
) -> Result<(Bytes, Vec<DeletionVectorDescriptor>)> {
    let mut writer = file::DvFileWriter::new(Vec::new())?;
    let mut descriptors = Vec::with_capacity(maps.len());
    for map in maps {
        let map = map.borrow();
        let slot = writer.append(map)?;
        descriptors.push(
            DeletionVectorDescriptor::relative(uuid, prefix, slot)?.with_max_row_index(map.max()),
        );
    }
    Ok((Bytes::from(writer.finish()?), descriptors))
}

/// Write `maps` into one new DV file `<root>/<prefix>/deletion_vector_<uuid>.bin`
/// (one PUT, never overwriting) and return a `u` descriptor for each, in order.
pub async fn write_file_to<M: std::borrow::Borrow<RoaringTreemap>>(
    store: &TableStore,
    prefix: &str,
    maps: &[M],
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dv_files_are_cut_at_the_target_size() {
        let maps: Vec<RoaringTreemap> = (0..10u64)
            .map(|i| (0..1000u64).map(|r| r * 3 + i).collect())
            .collect();
        let one = bitmap::serialized_size(&maps[0]) + 8;
        assert_eq!(dv_file_groups(&maps, usize::MAX), vec![0..10]);
        assert_eq!(
            dv_file_groups(&maps, 1).len(),
            10,
            "one DV per file at least"
        );
        let groups = dv_file_groups(&maps, one * 3);
        assert_eq!(groups, vec![0..3, 3..6, 6..9, 9..10]);
        assert!(dv_file_groups::<RoaringTreemap>(&[], 100).is_empty());
    }
}
