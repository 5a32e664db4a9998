//! Parquet reads and writes through a [`TableStore`], so every request is
//! counted and goes through the same store configuration as the log.

use std::ops::Range;
use std::sync::Arc;

use arrow_schema::SchemaRef;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt;
use object_store::buffered::BufWriter;
use object_store::path::Path;
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::arrow::AsyncArrowWriter;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use parquet::file::properties::WriterProperties;

use crate::io::TableStore;

/// Bytes fetched with the footer at once, to get the metadata in one GET.
const FOOTER_PREFETCH: usize = 64 * 1024;

/// An [`AsyncFileReader`] over one file of a [`TableStore`].
#[derive(Debug, Clone)]
pub struct StoreFileReader {
    store: TableStore,
    path: Path,
    size: u64,
    /// Column chunks fetched a row group at a time (see
    /// [`StoreFileReader::with_row_group_chunks`]).
    chunks: Option<RowGroupChunks>,
}

/// Per row group, the byte ranges of the column chunks a read asks for in
/// several requests; and the bytes of the row group last fetched.
#[derive(Debug, Clone)]
struct RowGroupChunks {
    ranges: Arc<Vec<Vec<Range<u64>>>>,
    held: Option<(usize, Vec<Bytes>)>,
}

impl RowGroupChunks {
    /// The row group whose chunks hold every range of `wanted`, and for each
    /// range the chunk holding it.
    fn holding(&self, wanted: &[Range<u64>]) -> Option<(usize, Vec<usize>)> {
        let first = wanted.first()?;
        let inside = |c: &Range<u64>, r: &Range<u64>| c.start <= r.start && r.end <= c.end;
        let group = self
            .ranges
            .iter()
            .position(|chunks| chunks.iter().any(|c| inside(c, first)))?;
        let chunks = self.ranges.get(group)?;
        let at = wanted
            .iter()
            .map(|r| chunks.iter().position(|c| inside(c, r)))
            .collect::<Option<Vec<usize>>>()?;
        Some((group, at))
    }
}

impl StoreFileReader {
    pub fn new(store: TableStore, path: Path, size: u64) -> Self {
        StoreFileReader {
            store,
            path,
            size,
            chunks: None,
        }
    }

    /// Fetch the column chunks `ranges[g]` of row group `g` all at the first
    /// request for any of them, and answer the next requests within them from
    /// those bytes: a read that asks for a row group's columns in two steps
    /// (a late filter's columns, then the others at the rows it keeps) makes
    /// the GETs of one. Each clone fetches for itself.
    pub fn with_row_group_chunks(mut self, ranges: Vec<Vec<Range<u64>>>) -> Self {
        self.chunks = Some(RowGroupChunks {
            ranges: Arc::new(ranges),
            held: None,
        });
        self
    }
}

fn to_parquet(e: crate::error::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileReader for StoreFileReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move {
            self.store
                .get_range(&self.path, range)
                .await
                .map_err(to_parquet)
        }
        .boxed()
    }

    /// The column chunks of a row group in as few GETs as the store allows
    /// (see [`TableStore::get_ranges`]), instead of one GET per chunk.
    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        async move {
            let Some((group, at)) = self.chunks.as_ref().and_then(|c| c.holding(&ranges)) else {
                return self
                    .store
                    .get_ranges(&self.path, &ranges)
                    .await
                    .map_err(to_parquet);
            };
            let Some(chunks) = self.chunks.as_mut() else {
                return Err(ParquetError::General("row group chunks vanished".into()));
            };
            if chunks.held.as_ref().map(|(g, _)| *g) != Some(group) {
                chunks.held = None;
                let wanted = chunks.ranges.get(group).cloned().unwrap_or_default();
                let bytes = self
                    .store
                    .get_ranges(&self.path, &wanted)
                    .await
                    .map_err(to_parquet)?;
                chunks.held = Some((group, bytes));
            }
            let (held, ranges_of) = match (&chunks.held, chunks.ranges.get(group)) {
                (Some((_, held)), Some(r)) => (held, r),
                _ => return Err(ParquetError::General("row group chunks vanished".into())),
            };
            ranges
                .iter()
                .zip(at)
                .map(|(r, i)| {
                    let (Some(chunk), Some(bytes)) = (ranges_of.get(i), held.get(i)) else {
                        return Err(ParquetError::General("row group chunk vanished".into()));
                    };
                    let start = usize::try_from(r.start - chunk.start).unwrap_or(usize::MAX);
                    let end = usize::try_from(r.end - chunk.start).unwrap_or(usize::MAX);
                    if end > bytes.len() {
                        return Err(ParquetError::EOF(format!(
                            "{}: bytes {}..{} asked, the file ends at {}",
                            self.path,
                            r.start,
                            r.end,
                            chunk.start + bytes.len() as u64
                        )));
                    }
                    Ok(bytes.slice(start..end))
                })
                .collect()
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let metadata = ParquetMetaDataReader::new()
                .with_metadata_options(options.map(|o| o.metadata_options().clone()))
                .with_prefetch_hint(Some(FOOTER_PREFETCH));
            let size = self.size;
            let metadata = metadata.load_and_finish(self, size).await?;
            Ok(Arc::new(metadata))
        }
        .boxed()
    }
}

/// A parquet file being written to a [`TableStore`]: row groups are encoded in
/// memory and streamed to the store (a multipart upload once large); the
/// object appears when the writer is closed.
pub type StoreFileWriter = AsyncArrowWriter<BufWriter>;

/// Start writing a new parquet file at `relative` (to the table root).
pub fn create_file_writer(
    store: &TableStore,
    relative: &str,
    schema: SchemaRef,
    props: WriterProperties,
) -> crate::error::Result<StoreFileWriter> {
    let writer = store.buf_writer(&store.path(relative));
    AsyncArrowWriter::try_new(writer, schema, Some(props)).map_err(|e| {
        crate::error::Error::Parquet {
            file: relative.to_string(),
            detail: e.to_string(),
        }
    })
}
