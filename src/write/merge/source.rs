//! The MERGE source, read chunk by chunk: batches conformed to the types
//! Delta stores, concatenated up to the chunk size.

use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{DataType as ArrowType, Field, Schema, SchemaRef};

use super::{arrow_error, invalid};
use crate::error::Result;
use crate::log::schema::{from_arrow_type, to_arrow_type, ColumnMappingMode, StructType};

/// strings as strings, nanosecond timestamps as microseconds, …).
pub(super) struct SourceShape {
    pub(super) schema: SchemaRef,
    pub(super) delta: StructType,
}

impl SourceShape {
    pub(super) fn of(schema: &Schema) -> Result<SourceShape> {
        let mut fields = Vec::with_capacity(schema.fields().len());
        for f in schema.fields() {
            let dt = match f.data_type() {
                ArrowType::Timestamp(arrow_schema::TimeUnit::Nanosecond, tz) => {
                    ArrowType::Timestamp(arrow_schema::TimeUnit::Microsecond, tz.clone())
                }
                other => other.clone(),
            };
            let delta = from_arrow_type(&dt, f.name(), 0)?;
            let arrow = to_arrow_type(&delta, ColumnMappingMode::None, false)?;
            fields.push(Field::new(f.name(), arrow, true));
        }
        let schema = Arc::new(Schema::new(fields));
        let delta = StructType::from_arrow(&schema)?;
        Ok(SourceShape { schema, delta })
    }

    fn conform(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let columns = batch
            .columns()
            .iter()
            .zip(self.schema.fields())
            .map(|(c, f)| {
                if c.data_type() == f.data_type() {
                    Ok(c.clone())
                } else {
                    arrow_cast::cast(c, f.data_type()).map_err(arrow_error)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &arrow_array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
        )
        .map_err(arrow_error)
    }
}

/// Reads the source chunk by chunk.
pub(super) struct SourceChunks<R> {
    reader: R,
    shape: SourceShape,
    pending: Option<RecordBatch>,
    done: bool,
    limit: usize,
    /// Source rows read so far.
    pub(super) rows: u64,
}

impl<R: RecordBatchReader> SourceChunks<R> {
    /// Chunks of at most `limit` bytes (at least one batch) of `reader`.
    pub(super) fn new(reader: R, shape: SourceShape, limit: usize) -> SourceChunks<R> {
        SourceChunks {
            reader,
            shape,
            pending: None,
            done: false,
            limit: limit.max(1),
            rows: 0,
        }
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        if let Some(b) = self.pending.take() {
            return Ok(Some(b));
        }
        if self.done {
            return Ok(None);
        }
        match self.reader.next() {
            None => {
                self.done = true;
                Ok(None)
            }
            Some(b) => {
                let b = b.map_err(|e| invalid(format!("MERGE source: {e}")))?;
                if b.schema().fields().len() != self.shape.schema.fields().len() {
                    return Err(invalid("MERGE source: a batch changed the schema"));
                }
                self.rows += b.num_rows() as u64;
                Ok(Some(self.shape.conform(&b)?))
            }
        }
    }

    /// The next chunk (None at the end), and whether more follow.
    pub(super) fn next_chunk(&mut self) -> Result<Option<(RecordBatch, bool)>> {
        let mut parts = Vec::new();
        let mut bytes = 0usize;
        while bytes < self.limit {
            match self.next_batch()? {
                Some(b) => {
                    bytes += b.get_array_memory_size();
                    parts.push(b);
                }
                None => break,
            }
        }
        if parts.is_empty() {
            return Ok(None);
        }
        // Peek, so the caller knows whether this is the whole source.
        let more = match self.next_batch()? {
            Some(b) => {
                self.pending = Some(b);
                true
            }
            None => false,
        };
        let chunk = arrow_select::concat::concat_batches(&self.shape.schema, &parts)
            .map_err(arrow_error)?;
        Ok(Some((chunk, more)))
    }
}
