//! Arrow across the boundary (the Arrow PyCapsule interface): a scan as a
//! Python stream of batches decoded as they are pulled (`BatchReader`), one
//! batch (`ArrowBatch`), batches exported once (`ArrowStream`) and a schema
//! (`ArrowSchema`). The other binding modules use these; this one uses none
//! of them.
//!
//! `BatchReader` is both a Python iterator (each `next` decodes one batch
//! with the GIL released and raises deltadv's typed errors) and an Arrow
//! PyCapsule stream (`__arrow_c_stream__`) for consumers that pull through C.

use std::ffi::CStr;
use std::sync::{Arc, Mutex};

use arrow::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{Array, RecordBatch, RecordBatchIterator, RecordBatchReader, StructArray};
use arrow_schema::{ArrowError, SchemaRef};
use futures::StreamExt;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};

use super::to_py;
use crate::io::block_on;
use crate::scan::BatchStream;

const ARRAY_NAME: &CStr = c"arrow_array";
const STREAM_NAME: &CStr = c"arrow_array_stream";
const SCHEMA_NAME: &CStr = c"arrow_schema";

/// Record batches exported once through `__arrow_c_stream__`.
#[pyclass(module = "deltadv._core")]
pub struct ArrowStream {
    schema: SchemaRef,
    batches: Mutex<Option<Vec<RecordBatch>>>,
}

impl ArrowStream {
    pub fn new(schema: SchemaRef, batches: Vec<RecordBatch>) -> Self {
        ArrowStream {
            schema,
            batches: Mutex::new(Some(batches)),
        }
    }
}

#[pymethods]
impl ArrowStream {
    /// Arrow PyCapsule interface: hand the batches over (once).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let batches = self
            .batches
            .lock()
            .ok()
            .and_then(|mut g| g.take())
            .ok_or_else(|| PyValueError::new_err("this Arrow stream was already consumed"))?;
        let reader = RecordBatchIterator::new(
            batches.into_iter().map(Ok::<_, ArrowError>),
            self.schema.clone(),
        );
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, STREAM_NAME)
    }

    /// Arrow PyCapsule interface for the schema.
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        schema_capsule(py, &self.schema)
    }
}

fn schema_capsule<'py>(py: Python<'py>, schema: &SchemaRef) -> PyResult<Bound<'py, PyCapsule>> {
    let ffi = FFI_ArrowSchema::try_from(schema.as_ref())
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    PyCapsule::new_with_value(py, ffi, SCHEMA_NAME)
}

/// An Arrow schema exported through `__arrow_c_schema__`.
#[pyclass(module = "deltadv._core", frozen)]
pub struct ArrowSchema {
    schema: SchemaRef,
}

impl ArrowSchema {
    pub fn new(schema: SchemaRef) -> Self {
        ArrowSchema { schema }
    }
}

#[pymethods]
impl ArrowSchema {
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        schema_capsule(py, &self.schema)
    }
}

/// Record batches decoded one at a time from a scan (one consumer, once).
#[pyclass(module = "deltadv._core")]
pub struct BatchReader {
    schema: SchemaRef,
    stream: Arc<Mutex<Option<BatchStream>>>,
}

impl BatchReader {
    pub fn new(schema: SchemaRef, stream: BatchStream) -> Self {
        BatchReader {
            schema,
            stream: Arc::new(Mutex::new(Some(stream))),
        }
    }
}

/// The next batch of a shared stream (`None` at the end, or once taken over).
fn next_batch(stream: &Mutex<Option<BatchStream>>) -> crate::Result<Option<RecordBatch>> {
    let mut guard = match stream.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    let Some(s) = guard.as_mut() else {
        return Ok(None);
    };
    match block_on(s.next())? {
        Some(Ok(batch)) => Ok(Some(batch)),
        Some(Err(e)) => {
            *guard = None; // a failed stream ends
            Err(e)
        }
        None => {
            *guard = None;
            Ok(None)
        }
    }
}

/// The C-stream side: pulls from the same stream as the Python iterator.
struct CReader {
    schema: SchemaRef,
    stream: Arc<Mutex<Option<BatchStream>>>,
}

impl Iterator for CReader {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        next_batch(&self.stream)
            .map_err(|e| ArrowError::ExternalError(Box::new(e)))
            .transpose()
    }
}

impl RecordBatchReader for CReader {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

#[pymethods]
impl BatchReader {
    /// The Arrow schema of every batch.
    #[getter]
    fn schema(&self) -> ArrowSchema {
        ArrowSchema::new(self.schema.clone())
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Decode the next batch (the GIL released meanwhile).
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<ArrowBatch>> {
        let stream = self.stream.clone();
        let batch = py.detach(move || next_batch(&stream)).map_err(to_py)?;
        Ok(batch.map(|batch| ArrowBatch { batch }))
    }

    /// Arrow PyCapsule interface: the rest of the stream, pulled through C.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let reader = CReader {
            schema: self.schema.clone(),
            stream: self.stream.clone(),
        };
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, STREAM_NAME)
    }

    /// Arrow PyCapsule interface for the schema.
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        schema_capsule(py, &self.schema)
    }
}

/// One record batch, handed to Python through `__arrow_c_array__`
/// (`pyarrow.record_batch(b)` takes it without copying).
#[pyclass(module = "deltadv._core", frozen)]
pub struct ArrowBatch {
    batch: RecordBatch,
}

#[pymethods]
impl ArrowBatch {
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema;
        let data = StructArray::from(self.batch.clone()).into_data();
        // The batch's schema as a struct schema (with its metadata).
        let schema = FFI_ArrowSchema::try_from(self.batch.schema().as_ref())
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let array = FFI_ArrowArray::new(&data);
        let schema = PyCapsule::new_with_value(py, schema, SCHEMA_NAME)?;
        let array = PyCapsule::new_with_value(py, array, ARRAY_NAME)?;
        PyTuple::new(py, [schema.into_any(), array.into_any()])
    }

    fn __len__(&self) -> usize {
        self.batch.num_rows()
    }
}
