"""The exceptions deltadv raises, by kind.

Every deltadv failure derives from :class:`DeltaDVError`. Where a builtin
exception fits, the class also derives from it, so existing handlers keep
working: a missing table is a :class:`FileNotFoundError`, a predicate outside
deltadv's SQL subset is a :class:`ValueError`, and so on. Bad arguments raise
plain :class:`ValueError` / :class:`TypeError`; a data or DV file that is gone
raises :class:`FileNotFoundError`; storage that refuses our credentials raises
:class:`PermissionError`.
"""

from __future__ import annotations


class DeltaDVError(Exception):
    """Base class of deltadv's errors."""


class TableNotFoundError(DeltaDVError, FileNotFoundError):
    """No Delta table at the given location: the path does not exist, or it
    exists but has no ``_delta_log`` with commits in it (the message says which)."""


class TableAlreadyExistsError(DeltaDVError, FileExistsError):
    """Creating a table where a Delta table already exists."""


class VersionNotFoundError(DeltaDVError, ValueError):
    """The requested version or timestamp is not in the table's log."""


class DeltaProtocolError(DeltaDVError):
    """The table needs something deltadv does not implement (a reader or writer
    feature, a protocol version), or an operation would break the protocol (for
    example writing deletion vectors where the table does not allow them)."""


class CommitConflictError(DeltaDVError):
    """A concurrent commit conflicts with this one; nothing was committed."""


class ConstraintViolationError(DeltaDVError, ValueError):
    """A written row breaks a rule of the table: a CHECK constraint, a NOT NULL
    column, an invariant, a generated column's expression or an identity column.
    The message is Delta Spark's (the rule and the row's values); nothing was
    committed and the files written were removed."""


class CorruptDeletionVectorError(DeltaDVError):
    """Deletion vector bytes that do not match the format or their descriptor."""


class CorruptLogError(DeltaDVError):
    """A Delta log that breaks the protocol: a missing version, a malformed line
    or action, a checkpoint that disagrees with ``_last_checkpoint``."""


class CorruptDataFileError(DeltaDVError):
    """A data file that cannot be decoded as the table says it should be."""


class UnsupportedPredicateError(DeltaDVError, ValueError):
    """A predicate outside deltadv's SQL subset (see :meth:`deltadv.DeltaTable.scan`).
    Spark callers fall back to letting Spark evaluate it."""


class InternalError(DeltaDVError):
    """A broken invariant inside deltadv: a bug, never a consequence of bad input.
    Please report it with the message."""


class StorageError(DeltaDVError, OSError):
    """The object store failed a request (other than not-found or permission)."""


class WorkerImportError(DeltaDVError, ImportError):
    """The Spark cluster's Python workers cannot import deltadv (or import another
    version): deltadv is neither installed in their environment nor shipped with
    :func:`deltadv.spark.ship`, or the shipped native module does not fit their
    Python or platform. The message says which and what to do."""


class UnsupportedSparkError(DeltaDVError, ImportError):
    """The installed PySpark lacks what a deltadv Spark feature needs (PySpark 3.5 and
    4.0 have no Python data source API with filters, so no ``format("deltadv")``);
    the message names the version and what to use instead."""


__all__ = [
    "CommitConflictError",
    "ConstraintViolationError",
    "CorruptDataFileError",
    "CorruptDeletionVectorError",
    "CorruptLogError",
    "DeltaDVError",
    "DeltaProtocolError",
    "InternalError",
    "StorageError",
    "StreamSourceChangedError",
    "TableAlreadyExistsError",
    "TableNotFoundError",
    "UnsupportedPredicateError",
    "UnsupportedSparkError",
    "VersionNotFoundError",
    "WorkerImportError",
]


class StreamSourceChangedError(DeltaDVError):
    """A streaming read (``spark.readStream.format("deltadv")``) met a commit it may
    not read past: one that deletes or rewrites rows (see the options
    ``ignoreDeletes`` and ``skipChangeCommits``), or a schema change. The message
    is Delta Spark's and names the version."""
