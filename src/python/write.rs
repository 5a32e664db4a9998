//! Bindings for writing tables: Arrow data in through the Arrow PyCapsule
//! stream interface, data files and commits made by `crate::write::files`.

use std::collections::HashMap;

use arrow::ffi_stream::{FFI_ArrowArrayStream, RecordBatchStreamReader};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyDict};

use super::options::WriteArgs;
use super::to_py;
use crate::io::{block_on, TableStore};
use crate::log::actions::Add;
use crate::log::path::normalize_path;
use crate::log::schema::StructType;
use crate::write::files;

/// A reader over `data`'s Arrow C stream (`__arrow_c_stream__`), taken over
/// from the capsule (the capsule is left with a released stream).
#[allow(unsafe_code)]
pub(super) fn stream_reader(data: &Bound<'_, PyAny>) -> PyResult<RecordBatchStreamReader> {
    if !data.hasattr("__arrow_c_stream__")? {
        return Err(PyValueError::new_err(format!(
            "data must be Arrow data with __arrow_c_stream__ (a pyarrow Table or \
             RecordBatchReader, a polars DataFrame, ...), not {}",
            data.get_type().name()?
        )));
    }
    let capsule = data
        .call_method0("__arrow_c_stream__")?
        .cast_into::<PyCapsule>()?;
    let pointer = capsule.pointer_checked(Some(c"arrow_array_stream"))?;
    let raw = pointer.as_ptr().cast::<FFI_ArrowArrayStream>();
    // SAFETY: a capsule named "arrow_array_stream" holds a valid
    // FFI_ArrowArrayStream (Arrow PyCapsule interface). Moving it out and
    // leaving an empty (released) one in its place is the protocol's way to
    // take ownership: the capsule's destructor then skips the release.
    let stream = unsafe { std::ptr::replace(raw, FFI_ArrowArrayStream::empty()) };
    RecordBatchStreamReader::try_new(stream)
        .map_err(|e| PyValueError::new_err(format!("invalid Arrow stream: {e}")))
}

/// The schema a write describes: the Delta schema (JSON) `table_schema` of
/// `prepare_create` when given, else that of the Arrow schema `schema_ipc`.
fn schema_of(
    schema_ipc: Option<&[u8]>,
    table_schema: Option<&str>,
) -> crate::Result<Option<StructType>> {
    match table_schema {
        Some(text) => StructType::parse(text).map(Some),
        None => schema_from_ipc(schema_ipc),
    }
}

pub(super) fn schema_from_ipc(schema_ipc: Option<&[u8]>) -> crate::Result<Option<StructType>> {
    schema_ipc
        .map(|bytes| {
            let arrow = arrow_ipc::convert::try_schema_from_ipc_buffer(bytes)
                .map_err(|e| crate::Error::InvalidArgument(format!("invalid Arrow schema: {e}")))?;
            StructType::from_arrow(&arrow)
        })
        .transpose()
}

/// Write `data` as data files and commit them: create the table (mode
/// "error"), append to it ("append"), overwrite it ("overwrite", with
/// `predicate`: only the rows it matches) or nothing when it exists
/// ("ignore"). Returns the version.
///
/// Options (keywords): `mode`, `partition_by`, `configuration`,
/// `enable_deletion_vectors`, `target_file_size`, `rows_per_file`,
/// `row_group_rows`, `predicate`, `schema_mode`.
#[pyfunction]
#[pyo3(signature = (table_uri, storage_options, data, **options))]
pub fn write_table(
    py: Python<'_>,
    table_uri: &str,
    storage_options: HashMap<String, String>,
    data: &Bound<'_, PyAny>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<u64> {
    let (options, _) = WriteArgs::from_kwargs("write_table", options)?
        .write_options()
        .map_err(to_py)?;
    let reader = stream_reader(data)?;
    py.detach(|| -> crate::Result<u64> {
        let store = TableStore::open(table_uri, &storage_options)?;
        block_on(files::write_table(&store, reader, &options))?
    })
    .map_err(to_py)
}

/// Write `data` as data files of the table at `table_uri` (existing, mode
/// "append"; or about to be created with `schema_ipc`, mode "error")
/// without committing; their add actions as JSON.
///
/// Options (keywords): those of `write_table`, `schema_ipc`, `table_schema`
/// (the Delta schema of `prepare_create`, for a column-mapped table to be
/// created).
#[pyfunction]
#[pyo3(signature = (table_uri, storage_options, data, **options))]
pub fn write_files(
    py: Python<'_>,
    table_uri: &str,
    storage_options: HashMap<String, String>,
    data: &Bound<'_, PyAny>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Vec<String>> {
    let args = WriteArgs::from_kwargs("write_files", options)?;
    let table_schema = args.table_schema.clone();
    let (options, schema_ipc) = args.write_options().map_err(to_py)?;
    let reader = stream_reader(data)?;
    py.detach(|| -> crate::Result<Vec<String>> {
        let schema = schema_of(schema_ipc.as_deref(), table_schema.as_deref())?;
        let store = TableStore::open(table_uri, &storage_options)?;
        let adds = block_on(files::write_files(
            &store,
            reader,
            schema.as_ref(),
            &options,
        ))??;
        adds.iter()
            .map(|a| {
                serde_json::to_string(a).map_err(|source| crate::Error::Json {
                    context: "add action".into(),
                    source,
                })
            })
            .collect()
    })
    .map_err(to_py)
}

/// Commit data files already written under the table root (`adds`, add
/// actions as JSON): create the table (mode "error", `schema_ipc` required)
/// or append. On failure the files are removed. Returns the version.
///
/// Options (keywords): `mode`, `schema_ipc`, `table_schema`, `partition_by`,
/// `configuration`, `enable_deletion_vectors`, `predicate`, `schema_mode`,
/// `time_zone`, and for a commit that creates the table `operation`
/// (`"CREATE TABLE AS SELECT"`, the default, or `"WRITE"`) with
/// `operation_mode` (the save mode `"WRITE"` records; default `mode`).
#[pyfunction]
#[pyo3(signature = (table_uri, storage_options, adds, **options))]
pub fn commit_files(
    py: Python<'_>,
    table_uri: &str,
    storage_options: HashMap<String, String>,
    adds: Vec<String>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<u64> {
    let args = WriteArgs::from_kwargs("commit_files", options)?;
    let table_schema = args.table_schema.clone();
    let (options, schema_ipc) = args.write_options().map_err(to_py)?;
    py.detach(|| -> crate::Result<u64> {
        let store = TableStore::open(table_uri, &storage_options)?;
        let adds = adds
            .iter()
            .map(|a| {
                serde_json::from_str::<Add>(a).map_err(|source| crate::Error::Json {
                    context: "add action".into(),
                    source,
                })
            })
            .collect::<crate::Result<Vec<Add>>>()?;
        let schema = match schema_of(schema_ipc.as_deref(), table_schema.as_deref()) {
            Ok(s) => s,
            Err(e) => {
                let paths: Vec<String> = adds.iter().map(|a| normalize_path(&a.path)).collect();
                let _ = block_on(files::remove_uncommitted(&store, &paths));
                return Err(e);
            }
        };
        block_on(files::commit_files(&store, adds, schema.as_ref(), &options))?
    })
    .map_err(to_py)
}

/// The canonical spelling of a table property given in any case (Spark
/// lower-cases data source options); None for one Delta does not know.
#[pyfunction]
pub fn canonical_table_property(key: &str) -> Option<String> {
    crate::log::features::canonical_table_property(key)
}

/// Remove data files written under the table root (`adds`, add actions as
/// JSON, e.g. of `write_files`) that the table's latest version does not
/// reference: the files of a distributed write given up before its commit.
#[pyfunction]
pub fn remove_uncommitted(
    py: Python<'_>,
    table_uri: &str,
    storage_options: HashMap<String, String>,
    adds: Vec<String>,
) -> PyResult<()> {
    py.detach(|| -> crate::Result<()> {
        let store = TableStore::open(table_uri, &storage_options)?;
        let paths = adds
            .iter()
            .map(|a| {
                serde_json::from_str::<Add>(a)
                    .map(|a| normalize_path(&a.path))
                    .map_err(|source| crate::Error::Json {
                        context: "add action".into(),
                        source,
                    })
            })
            .collect::<crate::Result<Vec<String>>>()?;
        block_on(files::remove_uncommitted(&store, &paths))?
    })
    .map_err(to_py)
}

/// The Delta schema (JSON) of a table to be created with `configuration`
/// from data files written apart: with column mapping, physical names and
/// field ids decided once, for every `write_files` and the `commit_files`
/// (`table_schema`).
#[pyfunction]
pub fn prepare_create(
    schema_ipc: &[u8],
    configuration: HashMap<String, String>,
) -> PyResult<String> {
    let prepare = || -> crate::Result<String> {
        let schema = schema_from_ipc(Some(schema_ipc))?.ok_or_else(|| {
            crate::Error::InvalidArgument("prepare_create needs the data's schema".into())
        })?;
        Ok(files::prepare_create(&schema, &configuration)?.to_schema_string())
    };
    prepare().map_err(to_py)
}
