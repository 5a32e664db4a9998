//! Loading deletion vectors: composes `io` (fetch bytes) with `format` (parse).

use roaring::RoaringTreemap;

use crate::error::Result;
use crate::format::descriptor::{DeletionVectorDescriptor, StorageType};
use crate::format::file;
use crate::io::local;

/// Load the rows a descriptor marks as deleted. `table_root` is a local path
/// (object stores arrive with the snapshot layer). Reads exactly the DV's byte
/// range, plus the version byte when the DV is the file's first.
pub fn load(descriptor: &DeletionVectorDescriptor, table_root: &str) -> Result<RoaringTreemap> {
    if descriptor.storage_type() == StorageType::Inline {
        return descriptor.inline_bitmap();
    }
    let path = descriptor.absolute_path(table_root).unwrap_or_default();
    let slot = descriptor.slot();
    let (start, end) = slot.frame_range();
    // The first DV sits right after the version byte: fetch it too and check it.
    let start = if start == file::FIRST_DV_OFFSET {
        0
    } else {
        start
    };
    let bytes = local::read_range(&path, start, end)?;
    file::read_dv(&bytes, start, &slot, &path)
}
