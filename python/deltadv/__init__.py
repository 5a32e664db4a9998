"""deltadv: Delta Lake deletion vectors for Python and PySpark, on a Rust core.

The main types:

* :class:`DeltaTable` - a Delta table at one version: files, DVs, history.
* :class:`DeletionVector` - a set of deleted row indexes (64-bit roaring bitmap).
* :class:`DeletionVectorDescriptor` - the ``deletionVector`` field of a log action.
* :func:`write_deletion_vectors` - pack DVs into one new DV file, get descriptors.
* :func:`z85_encode` / :func:`z85_decode` - Z85 exactly as Delta uses it.
* :func:`set_num_threads` / :func:`num_threads` - the threads deltadv works with
  (default: the CPUs the process may use, or ``DELTADV_NUM_THREADS``).

Errors derive from :class:`DeltaDVError`, one class per kind of failure (see
:mod:`deltadv.exceptions`): :class:`TableNotFoundError`,
:class:`DeltaProtocolError`, :class:`CommitConflictError`,
:class:`CorruptDeletionVectorError`, :class:`CorruptLogError`, ...; bad
arguments raise :class:`ValueError`.
"""

from deltadv._core import (
    CompactTaskInfo,
    DeletionVector,
    DeletionVectorDescriptor,
    MergePlan,
    __version__,
    num_threads,
    set_num_threads,
    write_deletion_vectors,
    z85_decode,
    z85_encode,
)
from deltadv.exceptions import (
    CommitConflictError,
    ConstraintViolationError,
    CorruptDataFileError,
    CorruptDeletionVectorError,
    CorruptLogError,
    DeltaDVError,
    DeltaProtocolError,
    InternalError,
    StorageError,
    StreamSourceChangedError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedPredicateError,
    UnsupportedSparkError,
    VersionNotFoundError,
    WorkerImportError,
)
from deltadv.merge import TableMerger
from deltadv.table import ChangeTask, CompactTask, DeleteTask, DeltaTable, ScanTask

__all__ = [
    "ChangeTask",
    "CommitConflictError",
    "CompactTask",
    "CompactTaskInfo",
    "ConstraintViolationError",
    "CorruptDataFileError",
    "CorruptDeletionVectorError",
    "CorruptLogError",
    "DeleteTask",
    "DeletionVector",
    "DeletionVectorDescriptor",
    "DeltaDVError",
    "DeltaProtocolError",
    "DeltaTable",
    "InternalError",
    "MergePlan",
    "ScanTask",
    "StorageError",
    "StreamSourceChangedError",
    "TableAlreadyExistsError",
    "TableMerger",
    "TableNotFoundError",
    "UnsupportedPredicateError",
    "UnsupportedSparkError",
    "VersionNotFoundError",
    "WorkerImportError",
    "__version__",
    "num_threads",
    "set_num_threads",
    "write_deletion_vectors",
    "z85_decode",
    "z85_encode",
]
