//! Loading deletion vectors: composes `io` (fetch bytes) with `format` (parse).

use roaring::RoaringTreemap;

use crate::error::{Error, Result};
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

/// Write `maps` into one new DV file `<table_root>/<prefix>/deletion_vector_<uuid>.bin`
/// and return a `u` descriptor for each, in order. `prefix` is the optional
/// random directory prefix (empty for none).
pub fn write_file(
    table_root: &str,
    prefix: &str,
    maps: &[RoaringTreemap],
) -> Result<Vec<DeletionVectorDescriptor>> {
    let uuid = uuid::Uuid::new_v4();
    let mut writer = file::DvFileWriter::new(Vec::new())?;
    let mut descriptors = Vec::with_capacity(maps.len());
    for map in maps {
        let slot = writer.append(map)?;
        descriptors.push(
            DeletionVectorDescriptor::relative(uuid, prefix, slot)?.with_max_row_index(map.max()),
        );
    }
    let bytes = writer.finish()?;
    let path = descriptors
        .first()
        .and_then(|d| d.absolute_path(table_root))
        .ok_or_else(|| Error::InvalidArgument("no deletion vectors to write".to_string()))?;
    local::create_new(&path, &bytes)?;
    Ok(descriptors)
}
