//! Local file system reads.

use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};

use crate::error::{Error, Result};

fn io_error(path: &str, source: std::io::Error) -> Error {
    if source.kind() == ErrorKind::NotFound {
        Error::NotFound {
            path: path.to_string(),
        }
    } else {
        Error::Io {
            path: path.to_string(),
            source,
        }
    }
}

/// Read bytes `[start, end)` of `path`, clipped to the file's length: a range
/// that runs past the end returns the bytes that exist (possibly none), and the
/// caller's format checks report the truncation. Never allocates more than the
/// file holds.
pub fn read_range(path: &str, start: u64, end: u64) -> Result<Vec<u8>> {
    let mut file = File::open(path).map_err(|e| io_error(path, e))?;
    let len = file.metadata().map_err(|e| io_error(path, e))?.len();
    let end = end.min(len);
    if start >= end {
        return Ok(Vec::new());
    }
    file.seek(SeekFrom::Start(start))
        .map_err(|e| io_error(path, e))?;
    let mut buf = Vec::with_capacity((end - start) as usize);
    file.take(end - start)
        .read_to_end(&mut buf)
        .map_err(|e| io_error(path, e))?;
    Ok(buf)
}

/// Read a whole file.
pub fn read(path: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| io_error(path, e))
}

/// Create `path` with `bytes`, failing if it already exists (no overwrite).
/// Writes to a temporary sibling first and links it into place, so a reader
/// never sees a partial file and a crash leaves at most a stray temp file.
pub fn create_new(path: &str, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let target = std::path::Path::new(path);
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io_error(path, e))?;
    }
    let tmp = format!("{path}.{}.tmp", uuid::Uuid::new_v4());
    let result = (|| {
        let mut f = std::fs::File::create_new(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::hard_link(&tmp, target)
    })();
    let _ = std::fs::remove_file(&tmp);
    result.map_err(|e| match e.kind() {
        ErrorKind::AlreadyExists => Error::Io {
            path: path.to_string(),
            source: std::io::Error::new(ErrorKind::AlreadyExists, "file already exists"),
        },
        _ => io_error(path, e),
    })
}
