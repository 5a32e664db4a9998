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
}

impl StoreFileReader {
    pub fn new(store: TableStore, path: Path, size: u64) -> Self {
        StoreFileReader { store, path, size }
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
            self.store
                .get_ranges(&self.path, &ranges)
                .await
                .map_err(to_parquet)
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
