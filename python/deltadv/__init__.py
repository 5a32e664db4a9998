"""deltadv: Delta Lake deletion vectors for Python and PySpark, on a Rust core.

The main types:

* :class:`DeltaTable` - a Delta table at one version: files, DVs, history.
* :class:`DeletionVector` - a set of deleted row indexes (64-bit roaring bitmap).
* :class:`DeletionVectorDescriptor` - the ``deletionVector`` field of a log action.
* :func:`write_deletion_vectors` - pack DVs into one new DV file, get descriptors.
* :func:`z85_encode` / :func:`z85_decode` - Z85 exactly as Delta uses it.

Errors derive from :class:`DeltaDVError`; corrupt DV bytes raise
:class:`CorruptDeletionVectorError`; a commit that loses a race it cannot be
rebased over raises :class:`CommitConflictError`; bad arguments raise
:class:`ValueError`.
"""

from deltadv._core import (
    CommitConflictError,
    CorruptDeletionVectorError,
    DeletionVector,
    DeletionVectorDescriptor,
    DeltaDVError,
    __version__,
    write_deletion_vectors,
    z85_decode,
    z85_encode,
)
from deltadv.table import DeltaTable, ScanTask

__all__ = [
    "CommitConflictError",
    "CorruptDeletionVectorError",
    "DeletionVector",
    "DeletionVectorDescriptor",
    "DeltaDVError",
    "DeltaTable",
    "ScanTask",
    "__version__",
    "write_deletion_vectors",
    "z85_decode",
    "z85_encode",
]
