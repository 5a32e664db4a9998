"""Type stubs for the native module ``deltadv._core``."""

from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar, Literal, TypedDict, Unpack, final

import numpy as np
import numpy.typing as npt

__all__ = [
    "COMPACT_TARGET_SIZE",
    "DEFAULT_PREFETCH_FILES",
    "DV_FILE_TARGET_SIZE",
    "ENGINE_INFO",
    "MAX_DELETED_ROWS_RATIO",
    "SOURCE_CHUNK_BYTES",
    "TARGET_FILE_SIZE",
    "ArrowBatch",
    "ArrowSchema",
    "ArrowStream",
    "BatchReader",
    "ChangeTaskInfo",
    "CompactTaskInfo",
    "DeletionVector",
    "DeletionVectorDescriptor",
    "MergePlan",
    "RawDeltaTable",
    "RequestCounter",
    "RowIterator",
    "ScanTaskInfo",
    "__version__",
    "_set_fault_points",
    "canonical_table_property",
    "commit_files",
    "num_threads",
    "prepare_changes",
    "prepare_create",
    "prepare_delete",
    "read_scan_task",
    "read_scan_tasks",
    "remove_uncommitted",
    "rewrite_compact_task",
    "scan_task_schema",
    "set_num_threads",
    "write_deletion_vectors",
    "write_files",
    "write_table",
    "z85_decode",
    "z85_encode",
]

__version__: str
#: ``commitInfo.engineInfo`` of every commit deltadv writes (``deltadv/<version>``).
ENGINE_INFO: str
#: DV files are cut at about this size (bytes), as in the reference implementation.
DV_FILE_TARGET_SIZE: int
#: Size (bytes) at which a data file is closed and the next one started.
TARGET_FILE_SIZE: int
#: Source bytes a MERGE holds in memory at once; a larger source is joined in chunks.
SOURCE_CHUNK_BYTES: int
#: Delta Spark's default ``maxDeletedRowsRatio`` for OPTIMIZE.
MAX_DELETED_ROWS_RATIO: float
#: OPTIMIZE/PURGE's default target file size without ``delta.targetFileSize``.
COMPACT_TARGET_SIZE: int
#: Files a scan reads ahead of the consumer.
DEFAULT_PREFETCH_FILES: int

class _ScanOptions(TypedDict, total=False):
    columns: list[str] | None
    filter: str | None
    filter_json: str | None
    filter_rows: bool
    split_size: int | None
    with_metadata: bool
    with_row_tracking: bool
    time_zone: str | None

class _CdfOptions(TypedDict, total=False):
    starting_version: int | None
    ending_version: int | None
    starting_timestamp: int | None
    ending_timestamp: int | None
    columns: list[str] | None
    filter: str | None

class _DmlOptions(TypedDict, total=False):
    allow_copy_on_write: bool
    inline_threshold: int
    dv_file_target_size: int
    target_file_size: int
    source_chunk_bytes: int
    merge_schema: bool
    source_alias: str
    target_alias: str
    new_columns: bytes | None
    parameters: str | None
    extra_metrics: str | None
    read_files: list[str] | None
    time_zone: str | None
    txn_app_id: str | None
    txn_version: int | None

class _WriteOptions(TypedDict, total=False):
    mode: str
    schema_ipc: bytes | None
    partition_by: list[str]
    configuration: dict[str, str]
    enable_deletion_vectors: bool
    target_file_size: int
    rows_per_file: int | None
    row_group_rows: int | None
    cluster_by: list[str]
    predicate: str | None
    schema_mode: str | None
    identity_slot: int | None
    table_schema: str | None
    identity_slots: int | None
    time_zone: str | None
    operation: str | None
    operation_mode: str | None
    txn_app_id: str | None
    txn_version: int | None
    output_mode: str | None

# Errors are raised as the classes of ``deltadv.exceptions``.

_RowsLike = Iterable[int] | range | npt.ArrayLike | "DeletionVector"

@final
class DeletionVector:
    """A set of deleted row indexes: a 64-bit roaring bitmap.

    Build it from a list, ``range``, numpy array, pyarrow array or another
    DeletionVector. Negative indexes raise ValueError.
    """

    def __new__(cls, rows: _RowsLike | None = None) -> DeletionVector: ...
    @property
    def cardinality(self) -> int: ...
    def __len__(self) -> int: ...
    def __contains__(self, row: object, /) -> bool: ...
    def __iter__(self) -> Iterator[int]: ...
    def __bool__(self) -> bool: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __or__(self, other: _RowsLike, /) -> DeletionVector: ...
    def __ror__(self, other: _RowsLike, /) -> DeletionVector: ...
    def __sub__(self, other: _RowsLike, /) -> DeletionVector: ...
    def __rsub__(self, other: _RowsLike, /) -> DeletionVector: ...
    def __and__(self, other: _RowsLike, /) -> DeletionVector: ...
    def __rand__(self, other: _RowsLike, /) -> DeletionVector: ...
    def min(self) -> int | None: ...
    def max(self) -> int | None: ...
    def to_numpy(self) -> np.ndarray[Any, np.dtype[np.uint64]]:
        """All row indexes, ascending, as uint64."""
    def union(self, other: _RowsLike) -> DeletionVector: ...
    def difference(self, other: _RowsLike) -> DeletionVector: ...
    def intersection(self, other: _RowsLike) -> DeletionVector: ...
    def serialize(self) -> bytes:
        """RoaringBitmapArray bytes (portable layout, magic 1681511377)."""
    @staticmethod
    def deserialize(data: bytes) -> DeletionVector:
        """Parse RoaringBitmapArray bytes (portable, or the older native layout).

        Raises CorruptDeletionVectorError on any malformed input.
        """
    def to_inline_descriptor(self) -> DeletionVectorDescriptor: ...

@final
class RowIterator:
    """Iterator over a DeletionVector's rows, ascending."""

    def __iter__(self) -> RowIterator: ...
    def __next__(self) -> int: ...

@final
class DeletionVectorDescriptor:
    """The ``deletionVector`` field of an add or remove action, validated."""

    def __new__(
        cls,
        storage_type: Literal["u", "i", "p"],
        path_or_inline_dv: str,
        size_in_bytes: int,
        cardinality: int,
        offset: int | None = None,
        max_row_index: int | None = None,
    ) -> DeletionVectorDescriptor: ...
    @staticmethod
    def from_json(value: dict[str, Any] | str) -> DeletionVectorDescriptor: ...
    def to_json(self) -> dict[str, Any]: ...
    @property
    def storage_type(self) -> Literal["u", "i", "p"]: ...
    @property
    def path_or_inline_dv(self) -> str: ...
    @property
    def offset(self) -> int | None: ...
    @property
    def size_in_bytes(self) -> int: ...
    @property
    def cardinality(self) -> int: ...
    @property
    def max_row_index(self) -> int | None: ...
    @property
    def unique_id(self) -> str:
        """storageType + pathOrInlineDv (+ '@' + offset when present)."""
    def absolute_path(self, table_root: str) -> str | None: ...
    def read(self, table_root: str) -> DeletionVector:
        """Load the deleted rows, reading only this DV's byte range."""
    def __hash__(self) -> int: ...
    def __eq__(self, other: object, /) -> bool: ...

def write_deletion_vectors(
    table_root: str, deletion_vectors: list[DeletionVector], prefix: str = ""
) -> list[DeletionVectorDescriptor]:
    """Write the DVs into one new DV file under table_root; one 'u' descriptor each."""

def z85_encode(data: bytes) -> str: ...
def set_num_threads(n: int) -> None: ...
def num_threads() -> int: ...
def z85_decode(text: str, size: int) -> bytes: ...

@final
class ArrowStream:
    """Record batches exported through the Arrow PyCapsule interface (once)."""

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...
    def __arrow_c_schema__(self) -> object: ...

@final
class ArrowSchema:
    def __arrow_c_schema__(self) -> object: ...

@final
class ArrowBatch:
    """One decoded record batch (``pyarrow.record_batch(b)`` takes it, zero-copy)."""

    def __arrow_c_array__(
        self, requested_schema: object | None = None
    ) -> tuple[object, object]: ...
    def __len__(self) -> int: ...

@final
class BatchReader:
    """Record batches decoded as they are pulled (one consumer, once)."""

    @property
    def schema(self) -> ArrowSchema: ...
    def __iter__(self) -> BatchReader: ...
    def __next__(self) -> ArrowBatch: ...
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...
    def __arrow_c_schema__(self) -> object: ...

@final
class RawDeltaTable:
    """Native half of deltadv.DeltaTable."""

    def __new__(
        cls,
        table_uri: str,
        version: int | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> RawDeltaTable: ...
    @property
    def table_uri(self) -> str: ...
    @property
    def storage_options(self) -> dict[str, str]: ...
    def version(self) -> int: ...
    def timestamp(self) -> int | None: ...
    def arrow_schema(self) -> ArrowSchema: ...
    def schema_json(self) -> dict[str, Any]: ...
    def transaction_version(self, app_id: str) -> int | None: ...
    def transaction_applied(self, app_id: str, version: int) -> bool: ...
    def protocol(self) -> dict[str, Any]: ...
    def metadata(self) -> dict[str, Any]: ...
    def add_actions_table(self) -> ArrowStream: ...
    def count(self) -> int: ...
    def deletion_vectors(self) -> list[tuple[str, DeletionVector]]: ...
    def history(self, limit: int | None = None) -> list[dict[str, Any]]: ...
    def load_version(self, version: int | None = None) -> None: ...
    def load_timestamp(self, timestamp_ms: int) -> None: ...
    def request_counts(self) -> dict[str, int]: ...
    def request_counter(self) -> RequestCounter: ...
    def compact_plan(self, mode: str, **options: Any) -> tuple[str, list[str]]: ...
    def commit_compaction(
        self,
        plan: str,
        results: list[str],
        partition_filter: str | None = None,
        partition_filter_json: str | None = None,
    ) -> dict[str, Any]: ...
    def abort_compaction(self, results: list[str]) -> None: ...
    def disable_deletion_vectors(self) -> dict[str, Any]: ...
    def generate_symlink_manifest(self) -> dict[str, Any]: ...
    def vacuum(
        self,
        retention_hours: float | None = None,
        dry_run: bool = True,
        enforce_retention_duration: bool = True,
        progress: Callable[[int, int], object] | None = None,
        full: bool = True,
    ) -> dict[str, Any]: ...
    def restore(
        self, version: int | None = None, timestamp_ms: int | None = None
    ) -> dict[str, Any]: ...
    def sync_iceberg(self) -> dict[str, Any]: ...
    def set_table_properties(self, properties: dict[str, str]) -> dict[str, Any]: ...
    def cdf_tasks(self, **options: Unpack[_CdfOptions]) -> tuple[ArrowSchema, list[str]]: ...
    def scan_tasks(self, **options: Unpack[_ScanOptions]) -> list[tuple[str, int]]: ...
    def stream_initial_offset(self) -> dict[str, Any]: ...
    def stream_starting_version(self, timestamp_ms: int) -> int: ...
    def stream_change_schema(self) -> ArrowSchema: ...
    def stream_scan(
        self,
        start: str,
        bound: str | None = None,
        limited: bool = False,
        max_files: int | None = None,
        max_bytes: int | None = None,
        starting_version: int | None = None,
        ignore_deletes: bool = False,
        ignore_changes: bool = False,
        skip_change_commits: bool = False,
        batch: bool = False,
        read_change_feed: bool = False,
        check_start: bool = True,
    ) -> tuple[dict[str, Any], list[tuple[str, int]]]: ...
    def scan_schema(
        self, columns: list[str] | None = None, row_tracking: bool = False
    ) -> ArrowSchema: ...
    def scan(
        self,
        columns: list[str] | None = None,
        filter: str | None = None,
        with_metadata: bool = False,
        filter_json: str | None = None,
        prefetch_files: int = ...,
        row_tracking: bool = False,
        ordered: bool = True,
        materialize: bool = False,
        limit: int | None = None,
        offset: int = 0,
        batch_size: int | None = None,
        string_view: bool = False,
        read_ahead_bytes: int | None = None,
    ) -> BatchReader: ...
    def delete_rows(
        self,
        rows: dict[str, Any],
        inline_threshold: int = 0,
        predicate: str | None = None,
        allow_copy_on_write: bool = False,
        dv_file_target_size: int = ...,  # 2 MiB
    ) -> dict[str, Any]: ...
    def delete(
        self,
        predicate: str | None = None,
        inline_threshold: int = 0,
        allow_copy_on_write: bool = False,
        dv_file_target_size: int = ...,  # 2 MiB
        time_zone: str | None = None,
    ) -> dict[str, Any]: ...
    def commit_prepared(
        self, prepared: list[str], predicate: str | None = None, inline_threshold: int = 0
    ) -> dict[str, Any]: ...
    def update(
        self,
        updates: list[tuple[str, str]],
        predicate: str | None = None,
        **options: Unpack[_DmlOptions],
    ) -> dict[str, Any]: ...
    def merge(
        self,
        source: Any,
        predicate: str,
        clauses: list[tuple[str, str, str | None, list[tuple[str, str]]]],
        **options: Unpack[_DmlOptions],
    ) -> dict[str, Any]: ...
    def change_task(self, paths: list[str], **options: Unpack[_DmlOptions]) -> str: ...
    def commit_changes(
        self,
        operation: str,
        prepared: list[str],
        *,
        merge_plan: MergePlan | None = None,
        merge_keys: object | None = None,
        merge_keys_complete: bool = True,
        **options: Unpack[_DmlOptions],
    ) -> dict[str, Any]: ...
    def add_actions(self) -> dict[str, str]: ...
    def predicate_is_partition_only(self, predicate: str) -> bool: ...
    def enable_deletion_vectors(self) -> int: ...

def _set_fault_points(points: str) -> None: ...
def read_scan_task(
    task: str,
    storage_options: dict[str, str] | None = None,
    ordered: bool = True,
    counter: RequestCounter | None = None,
    batch_size: int | None = None,
) -> BatchReader: ...
def read_scan_tasks(
    tasks: list[str],
    storage_options: dict[str, str] | None = None,
    ordered: bool = True,
    counter: RequestCounter | None = None,
    batch_size: int | None = None,
) -> BatchReader: ...
def write_table(
    table_uri: str,
    storage_options: dict[str, str],
    data: object,
    **options: Unpack[_WriteOptions],
) -> int:
    """Write ``data`` (``__arrow_c_stream__``) as data files and commit them
    (mode "error": create; "append"; "overwrite", all rows or those
    ``predicate`` matches; "ignore"), with ``schema_mode`` "merge" or
    "overwrite". Returns the version."""

def write_files(
    table_uri: str,
    storage_options: dict[str, str],
    data: object,
    **options: Unpack[_WriteOptions],
) -> list[str]:
    """Write data files without committing; their add actions as JSON."""

def commit_files(
    table_uri: str,
    storage_options: dict[str, str],
    adds: list[str],
    **options: Unpack[_WriteOptions],
) -> int:
    """Commit written data files (create or append); removes them on failure."""

def canonical_table_property(key: str) -> str | None: ...
def remove_uncommitted(table_uri: str, storage_options: dict[str, str], adds: list[str]) -> None:
    """Remove written data files (add actions as JSON) no commit references."""

def prepare_create(schema_ipc: bytes, configuration: dict[str, str]) -> str:
    """The Delta schema (JSON) of a table to be created from files written
    apart: column mapping ids and physical names decided once."""

def prepare_delete(
    table_uri: str,
    storage_options: dict[str, str],
    items: list[tuple[str, Any]],
    inline_threshold: int = 0,
    dv_file_target_size: int = ...,  # 2 MiB
) -> list[str]: ...
def scan_task_schema(task: str) -> ArrowSchema: ...
def rewrite_compact_task(table_uri: str, storage_options: dict[str, str], task: str) -> str: ...
def prepare_changes(
    task: str,
    storage_options: dict[str, str],
    table_uri: str,
    data: object,
    identity_slot: int | None = None,
    identity_slots: int | None = None,
) -> str:
    """Write a change stream (UPDATE/MERGE) for a change task: new data files
    and one DV file; the prepared changes as JSON."""

@final
class RequestCounter:
    """A table's request counters, for the scan tasks it makes (not picklable)."""

@final
class ScanTaskInfo:
    """What one scan (or change data feed) task reads, from its JSON."""

    def __new__(cls, task: str) -> ScanTaskInfo: ...
    @property
    def path(self) -> str: ...
    @property
    def file_size(self) -> int: ...
    @property
    def row_groups(self) -> list[int] | None: ...
    @property
    def partition_values(self) -> dict[str, str | None]: ...
    @property
    def deleted_rows(self) -> int: ...
    @property
    def with_metadata(self) -> bool: ...
    @property
    def change_type(self) -> str | None: ...
    @property
    def commit_version(self) -> int | None: ...
    @property
    def commit_timestamp(self) -> int | None: ...
    def schema(self) -> ArrowSchema: ...

@final
class ChangeTaskInfo:
    """What one UPDATE/MERGE change task may change, from its JSON."""

    def __new__(cls, task: str) -> ChangeTaskInfo: ...
    @property
    def paths(self) -> list[str]: ...
    @property
    def deletion_vectors(self) -> bool: ...
    @property
    def inline_threshold(self) -> int: ...
    @property
    def dv_file_target_size(self) -> int: ...
    @property
    def target_file_size(self) -> int: ...

@final
class CompactTaskInfo:
    """One bin of an OPTIMIZE/PURGE, from its JSON."""

    def __new__(cls, task: str) -> CompactTaskInfo: ...
    @property
    def paths(self) -> list[str]: ...
    @property
    def size(self) -> int: ...
    @property
    def partition_values(self) -> dict[str, str | None]: ...
    @property
    def target_size(self) -> int: ...

_MergeClause = tuple[str, str, str | None, list[tuple[str, str]]]

@final
class MergePlan:
    """A validated MERGE: clause order and shapes checked; the rules that follow
    (``operationParameters``, metrics, read set, duplicate matches) come from it."""

    DUPLICATE_MATCH_ERROR: ClassVar[str]
    SOURCE_KEYS_LIMIT: ClassVar[int]
    def __new__(
        cls,
        predicate: str,
        clauses: list[_MergeClause],
        *,
        target_alias: str = "target",
        source_alias: str = "source",
    ) -> MergePlan: ...
    @property
    def clauses(self) -> list[_MergeClause]: ...
    def change(self, clause: int) -> str: ...
    @property
    def deletes_duplicates_once(self) -> bool: ...
    @property
    def reads_whole_table(self) -> bool: ...
    @property
    def checks_added_rows(self) -> bool: ...
    @property
    def writes_source_columns(self) -> bool: ...
    def assignments(
        self, clause: int, table: list[str], source: list[str]
    ) -> list[tuple[str, str | None, str | None]]: ...
    def operation_parameters(self) -> dict[str, str]: ...
    def metrics(
        self,
        counts: list[int],
        source_rows: int,
        *,
        materialize_source_ms: int = 0,
        scan_ms: int = 0,
        rewrite_ms: int = 0,
    ) -> dict[str, int]: ...
    def duplicate_error(self, detail: str | None = None) -> ValueError: ...
