//! PyO3 bindings (feature `python`): type conversion, GIL release and error
//! mapping only. All logic lives in the pure Rust modules.

use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::{
    PyFileNotFoundError, PyMemoryError, PyOSError, PyPermissionError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyRange, PyType};
use roaring::RoaringTreemap;
use std::sync::{Arc, OnceLock};

mod alloc;
mod convert;
mod dml;
mod maintain;
mod merge_plan;
mod options;
mod stream;
mod table;
mod tasks;
mod write;

use crate::codec::z85;
use crate::error::Error;
use crate::format::descriptor::DeletionVectorDescriptor as RsDescriptor;
use crate::format::{bitmap, rows};
use crate::table::dv;

/// The Python exception class `name` from `deltadv.exceptions` (defined in
/// Python so a class can also derive from a builtin such as FileNotFoundError).
fn exception_class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyType>> {
    py.import("deltadv.exceptions")?
        .getattr(name)?
        .cast_into::<PyType>()
        .map_err(Into::into)
}

/// A `deltadv.exceptions.<name>` error with `message`.
fn raise(name: &str, message: String) -> PyErr {
    Python::attach(|py| match exception_class(py, name) {
        Ok(class) => PyErr::from_type(class, message),
        Err(e) => e,
    })
}

/// Map a Rust error to the Python exception a user expects: one class per
/// kind of failure under `DeltaDVError`, builtins where they fit.
pub(crate) fn to_py(err: Error) -> PyErr {
    let message = err.to_string();
    match err {
        Error::CorruptDeletionVector { .. } => raise("CorruptDeletionVectorError", message),
        Error::InvalidZ85 { .. } | Error::InvalidDescriptor(_) | Error::InvalidArgument(_) => {
            PyValueError::new_err(message)
        }
        Error::Json { .. } => PyValueError::new_err(message),
        Error::NotFound { .. } | Error::MissingDataFile { .. } => {
            PyFileNotFoundError::new_err(message)
        }
        Error::PermissionDenied { .. } => PyPermissionError::new_err(message),
        Error::Conflict { .. } => raise("CommitConflictError", message),
        Error::ConstraintViolation(_) => raise("ConstraintViolationError", message),
        Error::TableExists(_) => raise("TableAlreadyExistsError", message),
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied => {
            PyPermissionError::new_err(message)
        }
        Error::Io { .. } => PyOSError::new_err(message),
        Error::VersionNotFound(_) => raise("VersionNotFoundError", message),
        Error::CorruptLog { .. } | Error::CorruptIceberg { .. } => {
            raise("CorruptLogError", message)
        }
        Error::Unsupported(_) | Error::Schema(_) => raise("DeltaProtocolError", message),
        Error::UnsupportedPredicate(_) => raise("UnsupportedPredicateError", message),
        Error::NotATable(_) => raise("TableNotFoundError", message),
        Error::ObjectStore { .. } => raise("StorageError", message),
        Error::Parquet { .. } => raise("CorruptDataFileError", message),
        Error::Internal(_) => raise("InternalError", message),
        Error::StreamSourceChanged { .. } => raise("StreamSourceChangedError", message),
        Error::OutOfMemory { .. } => PyMemoryError::new_err(message),
    }
}

/// Most 2^16-row bitmap containers one `range` of consecutive row indexes may
/// fill (2^32 rows). Larger ranges are refused before a bitmap is built: a
/// range costs no memory in Python, but `range(0, 2**62)` needs 2^46 containers.
const MAX_RANGE_CONTAINERS: u64 = 1 << 16;

/// Most row indexes a range with a step other than 1 may hold (each is
/// inserted one by one).
const MAX_STEPPED_RANGE_ROWS: u64 = 1 << 26;

/// The rows of a Python `range`, refused when negative, above
/// [`bitmap::MAX_ROW_INDEX`], or larger than the limits above.
fn rows_from_range(range: &Bound<'_, PyRange>) -> PyResult<RoaringTreemap> {
    let bound = |name: &str| -> PyResult<i128> {
        range.getattr(name)?.extract::<i128>().map_err(|_| {
            PyValueError::new_err(format!(
                "row index range {name} is out of the 128-bit integer range"
            ))
        })
    };
    let (start, stop, step) = (bound("start")?, bound("stop")?, bound("step")?);
    let too_large = || {
        PyValueError::new_err(format!(
            "row index range({start}, {stop}, {step}) has bounds too large for row indexes"
        ))
    };
    // Python guarantees step != 0. Number of rows, and the smallest and largest.
    let (span, stride) = if step > 0 {
        (stop.checked_sub(start), step)
    } else {
        (
            start.checked_sub(stop),
            step.checked_neg().ok_or_else(too_large)?,
        )
    };
    let span = span.ok_or_else(too_large)?;
    if span <= 0 {
        return Ok(RoaringTreemap::new());
    }
    let len = span / stride + i128::from(span % stride != 0);
    let last = (len - 1)
        .checked_mul(step)
        .and_then(|d| start.checked_add(d))
        .ok_or_else(too_large)?;
    let (low, high) = (start.min(last), start.max(last));
    if low < 0 {
        return Err(PyValueError::new_err(format!(
            "row indexes must be >= 0, found {low}"
        )));
    }
    if high > i128::from(bitmap::MAX_ROW_INDEX) {
        return Err(PyValueError::new_err(format!(
            "row index {high} exceeds the largest storable row index {}",
            bitmap::MAX_ROW_INDEX
        )));
    }
    // Both within 0..=MAX_ROW_INDEX (< 2^63) from here on.
    let (low, high) = (low as u64, high as u64);
    let mut map = RoaringTreemap::new();
    if step.abs() == 1 {
        let containers = (high >> 16) - (low >> 16) + 1;
        if containers > MAX_RANGE_CONTAINERS {
            return Err(PyValueError::new_err(format!(
                "range of {len} row indexes ({low}..={high}) is too large: it needs {containers} \
                 bitmap containers of 65536 rows, at most {MAX_RANGE_CONTAINERS} are accepted \
                 in one range"
            )));
        }
        map.insert_range(low..=high);
        return Ok(map);
    }
    if len > i128::from(MAX_STEPPED_RANGE_ROWS) {
        return Err(PyValueError::new_err(format!(
            "range of {len} row indexes (step {step}) is too large: at most \
             {MAX_STEPPED_RANGE_ROWS} are accepted in one range with a step other than 1"
        )));
    }
    let step = step.unsigned_abs() as u64;
    let mut row = low;
    while row <= high {
        // Ascending: each push goes after the current maximum.
        map.insert(row);
        match row.checked_add(step) {
            Some(next) => row = next,
            None => break,
        }
    }
    Ok(map)
}

/// Row indexes from any supported Python object.
pub(crate) fn rows_from_object(obj: &Bound<'_, PyAny>) -> PyResult<RoaringTreemap> {
    if let Ok(dv) = obj.cast::<DeletionVector>() {
        return Ok(dv.get().map(obj.py())?.clone());
    }
    if let Ok(range) = obj.cast::<PyRange>() {
        return rows_from_range(range);
    }
    // numpy arrays (and anything exposing to_numpy, e.g. pyarrow arrays).
    let array = if obj.hasattr("__array_interface__")? {
        Some(obj.clone())
    } else if obj.hasattr("to_numpy")? {
        Some(obj.call_method1("to_numpy", ())?)
    } else {
        None
    };
    if let Some(array) = array {
        if let Ok(a) = array.extract::<PyReadonlyArray1<'_, u64>>() {
            // Strided (non-contiguous) arrays are read through their view.
            return match a.as_slice() {
                Ok(values) => Ok(rows_from_values(values.iter().copied())),
                Err(_) => Ok(rows_from_values(a.as_array().iter().copied())),
            };
        }
        let np = obj.py().import("numpy")?;
        let signed = np.call_method1("asarray", (&array,))?;
        let kind: String = signed.getattr("dtype")?.getattr("kind")?.extract()?;
        if kind != "i" && kind != "u" {
            return Err(PyValueError::new_err(format!(
                "row indexes must be integers, found an array of dtype kind {kind:?}"
            )));
        }
        let as_i64 = signed.call_method1("astype", ("int64",))?;
        let a = as_i64.extract::<PyReadonlyArray1<'_, i64>>()?;
        let view = a.as_array();
        if let Some(bad) = view.iter().find(|v| **v < 0) {
            return Err(PyValueError::new_err(format!(
                "row indexes must be >= 0, found {bad}"
            )));
        }
        return Ok(rows_from_values(view.iter().map(|v| *v as u64)));
    }
    // Any other iterable, inserted as it is read (nothing is collected first).
    let mut map = RoaringTreemap::new();
    for item in obj.try_iter()? {
        let item = item?;
        let v: i64 = item.extract().map_err(|_| {
            PyValueError::new_err(format!(
                "row indexes must be non-negative integers, found {}",
                item.repr().map_or_else(
                    |_| "an object without a repr".to_string(),
                    |r| r.to_string()
                )
            ))
        })?;
        let row = u64::try_from(v)
            .map_err(|_| PyValueError::new_err(format!("row indexes must be >= 0, found {v}")))?;
        if map.try_push(row).is_err() {
            map.insert(row);
        }
    }
    Ok(map)
}

/// A treemap of `values`: appended in one pass when they ascend strictly,
/// inserted one by one otherwise.
fn rows_from_values(values: impl Iterator<Item = u64> + Clone) -> RoaringTreemap {
    if values.clone().is_sorted_by(|a, b| a < b) {
        let mut map = RoaringTreemap::new();
        if map.append(values.clone()).is_ok() {
            return map;
        }
    }
    values.collect()
}

/// Fewest rows for which `to_numpy` and `deserialize` release the GIL while
/// they decode: below it, releasing and taking it back costs more than it frees.
const DETACH_FROM_ROWS: u64 = 1 << 16;

/// Fewest rows (32 MiB) for which `to_numpy` lets numpy allocate the array
/// and fills it in place. From 32 MiB on, glibc's malloc always maps fresh
/// memory, so every first write to a page faults; numpy asks for transparent
/// huge pages on large arrays, which makes those faults 2 MiB instead of 4 KiB
/// (10M/dense in benches/bench_deserialize.py: ~20 ms -> ~10 ms). Below it, a
/// `Vec` filled without zeroing and handed to numpy is cheaper: malloc recycles
/// a block already mapped, where calloc (numpy.zeros) would zero it first.
const NUMPY_ALLOC_FROM_ROWS: u64 = 1 << 22;

/// A set of deleted row indexes (a 64-bit roaring bitmap).
///
/// One read from bytes (`deserialize`) keeps the validated bytes and builds the
/// bitmap only when an operation needs it: `to_numpy`, `len` and `cardinality`
/// work from the bytes directly ([`rows`]).
#[pyclass(module = "deltadv._core", frozen, eq)]
#[derive(Clone)]
pub struct DeletionVector {
    /// The RoaringBitmapArray bytes it was read from, checked by [`rows::validate`].
    bytes: Option<Arc<[u8]>>,
    /// Number of rows (known in both forms without building the bitmap).
    cardinality: u64,
    /// The bitmap; built from `bytes` on first use when read from bytes.
    map: OnceLock<RoaringTreemap>,
}

impl PartialEq for DeletionVector {
    fn eq(&self, other: &Self) -> bool {
        if self.cardinality != other.cardinality {
            return false;
        }
        if let (Some(a), Some(b)) = (&self.bytes, &other.bytes) {
            if a == b {
                return true;
            }
        }
        Python::attach(|py| match (self.map(py), other.map(py)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        })
    }
}

impl DeletionVector {
    /// From bytes already checked (`file::read_dv_serialized`,
    /// `inline_serialized`): the bitmap is built only when needed.
    pub(crate) fn from_serialized(dv: crate::format::file::SerializedDv) -> Self {
        DeletionVector {
            bytes: Some(Arc::from(dv.bytes)),
            cardinality: dv.cardinality,
            map: OnceLock::new(),
        }
    }

    pub(crate) fn from_map(map: RoaringTreemap) -> Self {
        DeletionVector {
            bytes: None,
            cardinality: map.len(),
            map: OnceLock::from(map),
        }
    }

    /// The bitmap, built from the bytes (with the GIL released) on first use.
    fn map(&self, py: Python<'_>) -> PyResult<&RoaringTreemap> {
        if let Some(map) = self.map.get() {
            return Ok(map);
        }
        let built = match &self.bytes {
            Some(bytes) => py.detach(|| bitmap::deserialize(bytes)).map_err(to_py)?,
            None => RoaringTreemap::new(),
        };
        Ok(self.map.get_or_init(|| built))
    }

    /// The MemoryError of a `to_numpy` whose array cannot be allocated.
    fn allocation_error(&self, why: impl std::fmt::Display) -> PyErr {
        PyMemoryError::new_err(format!(
            "cannot allocate {} row indexes ({} bytes) for to_numpy: {why}",
            self.cardinality,
            self.cardinality.saturating_mul(8)
        ))
    }
}

#[pymethods]
impl DeletionVector {
    #[new]
    #[pyo3(signature = (rows=None))]
    fn new(rows: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let mut map = match rows {
            Some(obj) => rows_from_object(obj)?,
            None => RoaringTreemap::new(),
        };
        // Use run containers where they are smaller (Delta and CRoaring read them).
        map.optimize();
        bitmap::check_writable(&map).map_err(to_py)?;
        Ok(DeletionVector::from_map(map))
    }

    /// Number of deleted rows.
    #[getter]
    fn cardinality(&self) -> u64 {
        self.cardinality
    }

    fn __len__(&self) -> usize {
        self.cardinality as usize
    }

    fn __contains__(&self, py: Python<'_>, row: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(match row.extract::<u64>() {
            Ok(r) => self.map(py)?.contains(r),
            Err(_) => false,
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyResult<RowIterator> {
        Ok(RowIterator {
            inner: std::sync::Mutex::new(slf.map(slf.py())?.clone().into_iter()),
        })
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let head: Vec<String> = self
            .map(py)?
            .iter()
            .take(8)
            .map(|r| r.to_string())
            .collect();
        let more = if self.cardinality > 8 { ", ..." } else { "" };
        Ok(format!(
            "DeletionVector(cardinality={}, rows=[{}{more}])",
            self.cardinality,
            head.join(", ")
        ))
    }

    fn __bool__(&self) -> bool {
        self.cardinality != 0
    }

    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let cls = py.get_type::<DeletionVector>().getattr("deserialize")?;
        Ok((cls, (self.serialize(py)?,)))
    }

    /// Smallest and largest deleted row (None when empty).
    fn min(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        Ok(self.map(py)?.min())
    }
    fn max(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        Ok(self.map(py)?.max())
    }

    /// All row indexes, ascending, as a uint64 numpy array. Read from bytes,
    /// they are decoded from the bytes straight into the array's buffer (no
    /// bitmap is built); otherwise listed from the bitmap.
    fn to_numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let detach = self.cardinality >= DETACH_FROM_ROWS;
        if self.cardinality >= NUMPY_ALLOC_FROM_ROWS {
            // numpy.zeros raises MemoryError itself when the allocation fails
            // (numpy's allocator checks the request against the memory there
            // is; the extension's reserves address space without that check).
            let array = py
                .import("numpy")?
                .call_method1("zeros", (self.cardinality, "uint64"))
                .map_err(|e| match e.is_instance_of::<PyMemoryError>(py) {
                    true => self.allocation_error(e),
                    false => e,
                })?
                .cast_into::<PyArray1<u64>>()?;
            {
                let mut writable = array.try_readwrite()?;
                let out = writable.as_slice_mut()?;
                match &self.bytes {
                    Some(bytes) => py.detach(|| rows::decode_to_slice(bytes, out)),
                    None => {
                        let map = self.map(py)?;
                        py.detach(|| bitmap::write_to_slice(map, out))
                    }
                }
                .map_err(to_py)?;
            }
            return Ok(array);
        }
        let rows: Vec<u64> = if let Some(bytes) = &self.bytes {
            let decode = || rows::decode(bytes);
            if detach { py.detach(decode) } else { decode() }.map_err(to_py)?
        } else {
            let map = self.map(py)?;
            let list = || bitmap::to_vec(map);
            if detach { py.detach(list) } else { list() }.map_err(|e| self.allocation_error(e))?
        };
        Ok(PyArray1::from_vec(py, rows))
    }

    /// Rows in either set.
    fn union(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Self> {
        let other = rows_from_object(other)?;
        Ok(DeletionVector::from_map(self.map(py)? | &other))
    }

    /// Rows in this set and not in `other`.
    fn difference(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Self> {
        let other = rows_from_object(other)?;
        Ok(DeletionVector::from_map(self.map(py)? - &other))
    }

    /// Rows in both sets.
    fn intersection(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Self> {
        let other = rows_from_object(other)?;
        Ok(DeletionVector::from_map(self.map(py)? & &other))
    }

    fn __or__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Self> {
        self.union(py, other)
    }
    fn __sub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Self> {
        self.difference(py, other)
    }
    fn __and__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Self> {
        self.intersection(py, other)
    }

    /// The RoaringBitmapArray bytes (portable layout, with magic).
    fn serialize<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let map = self.map(py)?;
        let bytes = py.detach(|| bitmap::serialize(map)).map_err(to_py)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Parse RoaringBitmapArray bytes (portable or the older native layout).
    /// Every check runs here (corrupt bytes raise now, not later); the bitmap
    /// itself is built only when an operation needs it.
    #[staticmethod]
    fn deserialize(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        let validate = || rows::validate(data);
        // The input size bounds the work: ~8 rows per byte outside run containers.
        let cardinality = if data.len() as u64 >= DETACH_FROM_ROWS / 8 {
            py.detach(validate)
        } else {
            validate()
        }
        .map_err(to_py)?;
        Ok(DeletionVector {
            bytes: Some(Arc::from(data)),
            cardinality,
            map: OnceLock::new(),
        })
    }

    /// An inline (`i`) descriptor holding this set.
    fn to_inline_descriptor(&self, py: Python<'_>) -> PyResult<DeletionVectorDescriptor> {
        let inner = RsDescriptor::inline(self.map(py)?).map_err(to_py)?;
        Ok(DeletionVectorDescriptor { inner })
    }
}

/// Iterator over a DeletionVector's rows, ascending.
#[pyclass(module = "deltadv._core")]
pub struct RowIterator {
    inner: std::sync::Mutex<roaring::treemap::IntoIter>,
}

#[pymethods]
impl RowIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }
    fn __next__(&self) -> Option<u64> {
        self.inner.lock().ok()?.next()
    }
}

/// The `deletionVector` field of an add or remove action.
#[pyclass(module = "deltadv._core", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct DeletionVectorDescriptor {
    inner: RsDescriptor,
}

#[pymethods]
impl DeletionVectorDescriptor {
    #[new]
    #[pyo3(signature = (storage_type, path_or_inline_dv, size_in_bytes, cardinality, offset=None, max_row_index=None))]
    fn new(
        storage_type: &str,
        path_or_inline_dv: String,
        size_in_bytes: i64,
        cardinality: i64,
        offset: Option<i64>,
        max_row_index: Option<u64>,
    ) -> PyResult<Self> {
        let inner = RsDescriptor::try_new(
            storage_type,
            path_or_inline_dv,
            offset,
            size_in_bytes,
            cardinality,
        )
        .map_err(to_py)?
        .with_max_row_index(max_row_index);
        Ok(DeletionVectorDescriptor { inner })
    }

    /// Build from the JSON object of a log action (a dict, or its JSON text).
    #[staticmethod]
    fn from_json(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Self> {
        let text: String = if let Ok(s) = value.extract::<String>() {
            s
        } else {
            py.import("json")?
                .call_method1("dumps", (value,))?
                .extract()?
        };
        let inner = RsDescriptor::from_json(&text).map_err(to_py)?;
        Ok(DeletionVectorDescriptor { inner })
    }

    /// The JSON object for a log action, as a dict.
    fn to_json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let text = self.inner.to_json();
        py.import("json")?
            .call_method1("loads", (text,))?
            .cast_into::<PyDict>()
            .map_err(Into::into)
    }

    #[getter]
    fn storage_type(&self) -> &'static str {
        self.inner.storage_type().code()
    }
    #[getter]
    fn path_or_inline_dv(&self) -> &str {
        self.inner.path_or_inline_dv()
    }
    #[getter]
    fn offset(&self) -> Option<u32> {
        self.inner.offset()
    }
    #[getter]
    fn size_in_bytes(&self) -> u32 {
        self.inner.size_in_bytes()
    }
    #[getter]
    fn cardinality(&self) -> u64 {
        self.inner.cardinality()
    }
    #[getter]
    fn max_row_index(&self) -> Option<u64> {
        self.inner.max_row_index()
    }
    #[getter]
    fn unique_id(&self) -> String {
        self.inner.unique_id()
    }

    /// The DV file's location (None for inline DVs).
    fn absolute_path(&self, table_root: &str) -> Option<String> {
        self.inner.absolute_path(table_root)
    }

    /// Load the deleted rows (reads only this DV's byte range; every check of
    /// the bytes runs now, the bitmap is built only when an operation needs it).
    fn read(&self, py: Python<'_>, table_root: &str) -> PyResult<DeletionVector> {
        let loaded = py
            .detach(|| dv::load_serialized(&self.inner, table_root, &Default::default()))
            .map_err(to_py)?;
        Ok(DeletionVector::from_serialized(loaded))
    }

    /// Python syntax, in the constructor's keyword form (evaluates back to an
    /// equal descriptor).
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let text = |s: &str| -> PyResult<String> {
            Ok(pyo3::types::PyString::new(py, s).repr()?.to_string())
        };
        let offset = self
            .inner
            .offset()
            .map_or_else(|| "None".to_string(), |o| o.to_string());
        let max_row_index = self
            .inner
            .max_row_index()
            .map_or_else(String::new, |m| format!(", max_row_index={m}"));
        Ok(format!(
            "DeletionVectorDescriptor(storage_type={}, path_or_inline_dv={}, size_in_bytes={}, cardinality={}, offset={offset}{max_row_index})",
            text(self.inner.storage_type().code())?,
            text(self.inner.path_or_inline_dv())?,
            self.inner.size_in_bytes(),
            self.inner.cardinality()
        ))
    }
}

/// Arm fault-injection points for tests (`dv_write`, `commit_put`,
/// `after_commit`; comma separated, "" disarms).
#[pyfunction]
fn _set_fault_points(points: &str) {
    crate::write::set_fault_points(points);
}

/// Work with `n` threads from now on (the runtime's workers, row groups a
/// scan decodes at once); ValueError for 0, or for more than the runtime,
/// once built, has workers (see `crate::io::runtime`).
#[pyfunction]
fn set_num_threads(n: i64) -> PyResult<()> {
    let n = usize::try_from(n).map_err(|_| {
        PyValueError::new_err(format!("the number of threads must be at least 1, not {n}"))
    })?;
    crate::io::set_num_threads(n).map_err(to_py)
}

/// The threads deltadv works with: `set_num_threads`'s value, else
/// `DELTADV_NUM_THREADS`, else the CPUs this process may use.
#[pyfunction]
fn num_threads() -> usize {
    crate::io::num_threads()
}

/// Z85-encode bytes the way Delta does (zero padding to 4 bytes).
#[pyfunction]
fn z85_encode(data: &[u8]) -> String {
    z85::encode(data)
}

/// Decode Delta's Z85 into exactly `size` bytes.
#[pyfunction]
fn z85_decode<'py>(py: Python<'py>, text: &str, size: usize) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = z85::decode(text, size).map_err(to_py)?;
    Ok(PyBytes::new(py, &bytes))
}

/// Write deletion vectors into one new DV file under `table_root` (with an
/// optional random directory `prefix`) and return a `u` descriptor for each.
#[pyfunction]
#[pyo3(signature = (table_root, deletion_vectors, prefix=""))]
fn write_deletion_vectors(
    py: Python<'_>,
    table_root: &str,
    deletion_vectors: Vec<PyRef<'_, DeletionVector>>,
    prefix: &str,
) -> PyResult<Vec<DeletionVectorDescriptor>> {
    let maps: Vec<RoaringTreemap> = deletion_vectors
        .iter()
        .map(|d| d.map(py).cloned())
        .collect::<PyResult<_>>()?;
    let descriptors = py
        .detach(|| crate::write::dv_files::write_file(table_root, prefix, &maps))
        .map_err(to_py)?;
    Ok(descriptors
        .into_iter()
        .map(|inner| DeletionVectorDescriptor { inner })
        .collect())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    crate::io::runtime::on_thread_start(alloc::share_arenas);
    m.add_class::<DeletionVector>()?;
    m.add_class::<DeletionVectorDescriptor>()?;
    m.add_class::<RowIterator>()?;
    m.add_class::<table::RawDeltaTable>()?;
    m.add_class::<stream::ArrowStream>()?;
    m.add_class::<stream::ArrowSchema>()?;
    m.add_class::<tasks::ScanTaskInfo>()?;
    m.add_class::<tasks::ChangeTaskInfo>()?;
    m.add_class::<tasks::CompactTaskInfo>()?;
    m.add_class::<tasks::RequestCounter>()?;
    m.add_class::<stream::BatchReader>()?;
    m.add_class::<stream::ArrowBatch>()?;
    m.add_class::<merge_plan::MergePlan>()?;
    m.add_function(wrap_pyfunction!(z85_encode, m)?)?;
    m.add_function(wrap_pyfunction!(set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(_set_fault_points, m)?)?;
    m.add_function(wrap_pyfunction!(z85_decode, m)?)?;
    m.add_function(wrap_pyfunction!(write_deletion_vectors, m)?)?;
    m.add_function(wrap_pyfunction!(tasks::prepare_delete, m)?)?;
    m.add_function(wrap_pyfunction!(dml::prepare_changes, m)?)?;
    m.add_function(wrap_pyfunction!(maintain::rewrite_compact_task, m)?)?;
    m.add_function(wrap_pyfunction!(write::write_table, m)?)?;
    m.add_function(wrap_pyfunction!(write::write_files, m)?)?;
    m.add_function(wrap_pyfunction!(write::commit_files, m)?)?;
    m.add_function(wrap_pyfunction!(write::prepare_create, m)?)?;
    m.add_function(wrap_pyfunction!(write::remove_uncommitted, m)?)?;
    m.add_function(wrap_pyfunction!(write::canonical_table_property, m)?)?;
    m.add_function(wrap_pyfunction!(tasks::read_scan_task, m)?)?;
    m.add_function(wrap_pyfunction!(tasks::read_scan_tasks, m)?)?;
    m.add_function(wrap_pyfunction!(tasks::scan_task_schema, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("ENGINE_INFO", crate::write::ENGINE_INFO)?;
    // Defaults Python's signatures show: one definition each, in Rust.
    m.add(
        "DV_FILE_TARGET_SIZE",
        crate::write::delete::DEFAULT_DV_FILE_TARGET_SIZE,
    )?;
    m.add(
        "TARGET_FILE_SIZE",
        crate::write::data::DEFAULT_TARGET_FILE_SIZE,
    )?;
    m.add(
        "SOURCE_CHUNK_BYTES",
        crate::write::merge::DEFAULT_SOURCE_CHUNK_BYTES,
    )?;
    m.add(
        "MAX_DELETED_ROWS_RATIO",
        crate::write::optimize::DEFAULT_MAX_DELETED_ROWS_RATIO,
    )?;
    m.add(
        "COMPACT_TARGET_SIZE",
        crate::write::optimize::DEFAULT_TARGET_SIZE,
    )?;
    m.add(
        "DEFAULT_PREFETCH_FILES",
        crate::scan::DEFAULT_PREFETCH_FILES,
    )?;
    Ok(())
}
