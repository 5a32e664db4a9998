"""``DeltaTable``: a Delta table at one version, read by the Rust core."""

from __future__ import annotations

import itertools
import json as _json
import os
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from deltadv import _core
from deltadv._core import (
    BatchReader,
    ChangeTaskInfo,
    CompactTaskInfo,
    DeletionVector,
    MergePlan,
    RawDeltaTable,
    RequestCounter,
    ScanTaskInfo,
    prepare_changes,
    prepare_delete,
    read_scan_task,
    read_scan_tasks,
    rewrite_compact_task,
    scan_task_schema,
)
from deltadv.expressions import partition_filter_tree
from deltadv.merge import Clause, TableMerger
from deltadv.typecheck import check_arg, check_args, check_str_list

# Defaults: each defined once, in the Rust core.
#: DV files are cut at about this size (bytes), as in the reference implementation.
DV_FILE_TARGET_SIZE: int = _core.DV_FILE_TARGET_SIZE
#: Size (bytes) at which a data file is closed and the next one started.
TARGET_FILE_SIZE: int = _core.TARGET_FILE_SIZE
#: Source bytes a MERGE holds in memory at once; a larger source is joined in chunks.
SOURCE_CHUNK_BYTES: int = _core.SOURCE_CHUNK_BYTES

#: A value for UPDATE's SET (or MERGE's): SQL text in deltadv's grammar, or a
#: pyarrow compute expression.
Value = str | pc.Expression

#: A scan filter: SQL text in deltadv's subset, or an expression tree in its JSON
#: form (a dict; see the Rust crate's ``expr`` module docs).
Filter = str | Mapping[str, Any]

#: Partitions to work on: SQL over partition columns, or deltalake's
#: ``[("part", "=", "a"), ("year", "in", ["2024", "2025"])]`` (ANDed).
PartitionFilters = str | Sequence[tuple[str, str, Any]]

#: Called as ``progress(done, total)`` as a long command's steps finish.
Progress = Callable[[int, int], None]

#: Delta Spark's default ``maxDeletedRowsRatio`` for OPTIMIZE.
MAX_DELETED_ROWS_RATIO: float = _core.MAX_DELETED_ROWS_RATIO

#: Files a scan reads ahead of the consumer (each at most a couple of batches deep).
DEFAULT_PREFETCH_FILES: int = _core.DEFAULT_PREFETCH_FILES


def _reader(native: BatchReader) -> pa.RecordBatchReader:
    """A pyarrow reader over a native batch stream: each batch is decoded when
    pulled, and errors surface as deltadv's own exception types."""
    return pa.RecordBatchReader.from_batches(
        pa.schema(native.schema), (pa.record_batch(b) for b in native)
    )


def _prefetch(files: int) -> int:
    if isinstance(files, bool) or not isinstance(files, int) or files < 1:
        raise ValueError(f"prefetch_files must be a positive integer, not {files!r}")
    return files


def _rows_args(limit: int | None, offset: int, where: str) -> tuple[int | None, int]:
    """``limit`` (None: every row) and ``offset`` checked: ints >= 0."""
    check_args({"limit": (limit, int, True), "offset": (offset, int, False)}, where=where)
    for name, value in (("limit", limit), ("offset", offset)):
        if value is not None and value < 0:
            raise ValueError(f"{where}: {name} must be >= 0, not {value}")
    return limit, offset


def _filter_args(filter: Filter | None) -> tuple[str | None, str | None]:
    """``filter`` as the native calls take it: (SQL text, tree JSON)."""
    if filter is None or isinstance(filter, str):
        return filter, None
    if isinstance(filter, Mapping):
        return None, _json.dumps(filter, allow_nan=False)
    raise TypeError(f"filter must be SQL text or an expression tree (dict), not {filter!r}")


class ScanTask:
    """One data file (or some of its row groups) to read: picklable, so it can be
    shipped to Spark executors, which read it with :meth:`read` without replaying
    the log.

    ``json`` describes the work and never holds storage credentials: those travel
    separately in ``storage_options`` (pickled with the task, never shown in its
    repr), so task JSON can sit in Spark rows, plans and logs.

    A task made by a :class:`DeltaTable` (:meth:`DeltaTable.scan_tasks`,
    :meth:`DeltaTable.cdf_tasks`) and read in the same process counts its
    requests in that table's :meth:`DeltaTable.request_counts`; a task pickled
    to another process (a Spark executor) counts there, in no table's counts.
    """

    __slots__ = ("_counter", "_info", "json", "size", "storage_options")

    def __init__(
        self, json: str, storage_options: dict[str, str] | None = None, size: int = 0
    ) -> None:
        self.json = json
        self.storage_options = dict(storage_options or {})
        #: About how many bytes the task reads (for packing tasks into Spark
        #: partitions); 0 when unknown.
        self.size = size
        self._info: ScanTaskInfo | None = None
        #: The request counters of the table that made the task (not pickled).
        self._counter: RequestCounter | None = None

    @property
    def info(self) -> ScanTaskInfo:
        """The task's description, typed (read from its JSON by the Rust core)."""
        if self._info is None:
            self._info = ScanTaskInfo(self.json)
        return self._info

    @property
    def path(self) -> str:
        """The data (or change) file the task reads, as in the log, URL-decoded."""
        return self.info.path

    @property
    def file_size(self) -> int:
        """The file's size in bytes."""
        return self.info.file_size

    @property
    def row_groups(self) -> list[int] | None:
        """The row groups the task reads (None: all of the file's)."""
        return self.info.row_groups

    @property
    def partition_values(self) -> dict[str, str | None]:
        """The file's partition values, as in the log."""
        return self.info.partition_values

    @property
    def deleted_rows(self) -> int:
        """Rows of the file its deletion vector deletes (0: none)."""
        return self.info.deleted_rows

    @property
    def change_type(self) -> str | None:
        """A change data feed task's ``_change_type`` (``"cdc"``: a change file, each
        row carries its own); None for a scan task."""
        return self.info.change_type

    def read(self, *, ordered: bool = True, batch_size: int | None = None) -> pa.RecordBatchReader:
        """A stream of the file's rows (Arrow record batches), deleted rows gone,
        decoded as they are pulled, its row groups on :func:`deltadv.num_threads`
        threads; in row order, or with ``ordered=False`` as they are decoded (the
        same rows, in batches whose order varies). ``batch_size`` is the rows of
        each decoded batch (default 8,192; a batch is smaller where deleted rows
        are dropped or a row group ends)."""
        check_args(
            {"ordered": (ordered, bool, False), "batch_size": (batch_size, int, True)},
            where="ScanTask.read",
        )
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"ScanTask.read: batch_size must be >= 1, not {batch_size}")
        return _reader(
            read_scan_task(
                self.json, self.storage_options or None, ordered, self._counter, batch_size
            )
        )

    def schema(self) -> pa.Schema:
        """The Arrow schema of the task's rows."""
        return pa.schema(scan_task_schema(self.json))

    def __reduce__(self) -> tuple[type[ScanTask], tuple[str, dict[str, str], int]]:
        return (ScanTask, (self.json, self.storage_options, self.size))

    def __repr__(self) -> str:
        info = self.info
        parts = [f"path={info.path!r}"]
        if info.row_groups is not None:
            parts.append(f"row_groups={info.row_groups!r}")
        if info.deleted_rows:
            parts.append(f"deleted_rows={info.deleted_rows}")
        if self.storage_options:
            parts.append("storage_options=<hidden>")
        return f"ScanTask({', '.join(parts)})"


class DeleteTask:
    """The executor side of a distributed DELETE (``deltadv.spark``): for the data
    files it was made for, :meth:`prepare` writes the new deletion vectors (old DV
    | rows to delete, all of one call in one DV file) and returns the prepared
    changes, which the driver commits with :meth:`DeltaTable.commit_delete`.
    Picklable; needs no log replay. Storage options are pickled with it but never
    shown in its repr."""

    __slots__ = ("adds", "dv_file_target_size", "inline_threshold", "storage_options", "table_uri")

    def __init__(
        self,
        table_uri: str,
        adds: dict[str, str],
        storage_options: dict[str, str] | None = None,
        inline_threshold: int = 0,
        dv_file_target_size: int = DV_FILE_TARGET_SIZE,
    ) -> None:
        self.table_uri = table_uri
        self.adds = dict(adds)
        self.storage_options = dict(storage_options or {})
        self.inline_threshold = inline_threshold
        self.dv_file_target_size = dv_file_target_size

    def prepare(self, rows: dict[str, Any]) -> list[str]:
        """Write the DVs deleting ``rows`` (``{data file path: row indexes}``, paths
        among this task's files); returns the prepared changes (JSON strings)."""
        unknown = [p for p in rows if p not in self.adds]
        if unknown:
            raise ValueError(f"{unknown[0]!r} is not one of this delete task's files")
        items = [(self.adds[p], r) for p, r in rows.items()]
        return prepare_delete(
            self.table_uri,
            self.storage_options,
            items,
            self.inline_threshold,
            self.dv_file_target_size,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            DeleteTask,
            (
                self.table_uri,
                self.adds,
                self.storage_options,
                self.inline_threshold,
                self.dv_file_target_size,
            ),
        )

    def __repr__(self) -> str:
        hidden = ", storage_options=<hidden>" if self.storage_options else ""
        return f"DeleteTask({self.table_uri!r}, files={len(self.adds)}{hidden})"


class ChangeTask:
    """The executor side of a distributed UPDATE or MERGE (``deltadv.spark``):
    :meth:`prepare` writes a stream of changed rows -- the table's columns with
    their new values, plus ``_file_path`` / ``_row_index`` of the target row each
    replaces (null for an insert) and an optional ``_change`` column
    (``"update"``, the default; ``"delete"``; ``"insert"``) -- as new data files
    and ONE deletion vector file for the rows it replaces, and returns what it
    wrote for :meth:`DeltaTable.commit_changes`. Picklable; needs no log replay.
    Storage options are pickled with it but never shown in its repr."""

    __slots__ = ("storage_options", "table_uri", "task")

    @property
    def info(self) -> ChangeTaskInfo:
        """The task's description, typed (read from its JSON by the Rust core)."""
        return ChangeTaskInfo(self.task)

    @property
    def paths(self) -> list[str]:
        """The data files whose rows the task may replace."""
        return self.info.paths

    def __init__(
        self, table_uri: str, task: str, storage_options: dict[str, str] | None = None
    ) -> None:
        self.table_uri = table_uri
        self.task = task
        self.storage_options = dict(storage_options or {})

    def prepare(
        self, data: Any, identity_slot: int | None = None, identity_slots: int | None = None
    ) -> str:
        """Write the change stream ``data`` (anything with ``__arrow_c_stream__``);
        returns the prepared changes (JSON). On a failure, the files written are
        removed. Identity values of inserted rows are handed out in
        ``identity_slot`` (distinct for each writer of one commit, e.g. the Spark
        task's partition index; see :func:`deltadv.write.write_files`), interleaved
        as Delta Spark's with ``identity_slots`` (the number of writers); without
        a slot, inserts into an identity column are refused."""
        if not hasattr(data, "__arrow_c_stream__"):
            raise TypeError(f"data must have __arrow_c_stream__, not {type(data).__name__}")
        check_arg("identity_slot", identity_slot, int, optional=True)
        check_arg("identity_slots", identity_slots, int, optional=True)
        return prepare_changes(
            self.task, self.storage_options, self.table_uri, data, identity_slot, identity_slots
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (ChangeTask, (self.table_uri, self.task, self.storage_options))

    def __repr__(self) -> str:
        files = len(self.paths)
        hidden = ", storage_options=<hidden>" if self.storage_options else ""
        return f"ChangeTask({self.table_uri!r}, files={files}{hidden})"


class CompactTask:
    """One bin of files of an OPTIMIZE or PURGE (``DeltaTable.compact_tasks``), for
    distributed runners (``deltadv.spark``): :meth:`rewrite` writes the bin's files
    anew and returns the new files' add actions (JSON) for
    :meth:`DeltaTable.commit_compaction`. Picklable; needs no log replay. Storage
    options are pickled with it but never shown in its repr."""

    __slots__ = ("json", "storage_options", "table_uri")

    def __init__(
        self, table_uri: str, json: str, storage_options: dict[str, str] | None = None
    ) -> None:
        self.table_uri = table_uri
        self.json = json
        self.storage_options = dict(storage_options or {})

    @property
    def info(self) -> CompactTaskInfo:
        """The bin's description, typed (read from its JSON by the Rust core)."""
        return CompactTaskInfo(self.json)

    @property
    def paths(self) -> list[str]:
        """The files the bin rewrites."""
        return self.info.paths

    @property
    def size(self) -> int:
        """Their size in bytes, together."""
        return self.info.size

    def rewrite(self) -> str:
        """Rewrite the bin (deleted rows dropped); the new files' add actions (JSON).
        On a failure, the files written are removed."""
        return rewrite_compact_task(self.table_uri, self.storage_options, self.json)

    def __reduce__(self) -> tuple[Any, ...]:
        return (CompactTask, (self.table_uri, self.json, self.storage_options))

    def __repr__(self) -> str:
        hidden = ", storage_options=<hidden>" if self.storage_options else ""
        return f"CompactTask({self.table_uri!r}, files={len(self.paths)}{hidden})"


class DeltaTable:
    """A Delta table at one version.

    ``table_uri`` is a local path or a ``file://``, ``s3://`` / ``s3a://``,
    ``az://`` / ``abfss://``, ``gs://`` or ``memory://`` URI. ``storage_options``
    takes the same keys as the ``deltalake`` package (``AWS_ENDPOINT_URL``,
    ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``, ``AWS_ALLOW_HTTP``, ...); environment
    variables fill in the rest.
    """

    def __init__(
        self,
        table_uri: str,
        version: int | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        check_arg("table_uri", table_uri, (str, os.PathLike))
        check_arg("version", version, int, optional=True)
        check_arg("storage_options", storage_options, Mapping, optional=True)
        options = None if storage_options is None else dict(storage_options)
        self._raw = RawDeltaTable(str(table_uri), version, options)

    @property
    def table_uri(self) -> str:
        return self._raw.table_uri

    def version(self) -> int:
        """The loaded version."""
        return self._raw.version()

    def schema(self) -> pa.Schema:
        """The table schema as Arrow (logical column names)."""
        return pa.schema(self._raw.arrow_schema())

    def scan_schema(
        self, columns: list[str] | None = None, *, with_row_tracking: bool = False
    ) -> pa.Schema:
        """The Arrow schema a scan of ``columns`` (all when None) returns; with
        ``with_row_tracking`` (see :meth:`scan`), ``_row_id`` and
        ``_row_commit_version`` after them."""
        check_str_list("columns", columns)
        check_args(
            {"with_row_tracking": (with_row_tracking, bool, False)},
            where="scan_schema",
        )
        if with_row_tracking:
            return pa.schema(self._raw.scan_schema(columns, True))
        schema = self.schema()
        if columns is None:
            return schema
        missing = [c for c in columns if c not in schema.names]
        if missing:
            raise ValueError(f"no column {missing[0]!r} in the table (columns: {schema.names})")
        return pa.schema([schema.field(c) for c in columns])

    def change_feed_schema(self) -> pa.Schema:
        """The Arrow schema of this version's change data feed rows: the table's
        columns, then ``_change_type``, ``_commit_version`` and
        ``_commit_timestamp`` (as :meth:`load_cdf` and a change-feed stream
        return them)."""
        return pa.schema(self._raw.stream_change_schema())

    def transaction_version(self, app_id: str) -> int | None:
        """The latest version the application ``app_id`` committed in a ``txn``
        action (a streaming query's last batch id written by the
        ``format("deltadv")`` sink, a writer's ``txnVersion``), None when it
        committed none (deltalake's ``transaction_version``, Delta Spark's
        ``txnVersion``)."""
        return self._raw.transaction_version(app_id)

    def transaction_applied(self, app_id: str, version: int) -> bool:
        """Whether this version holds the write ``version`` of application
        ``app_id`` already: a write carrying that ``txn`` (``txn_app_id`` /
        ``txn_version``, a streaming batch) is skipped. ValueError for an empty
        ``app_id`` or a negative ``version``."""
        return self._raw.transaction_applied(app_id, version)

    def protocol(self) -> dict[str, Any]:
        """The protocol action (reader/writer versions and features)."""
        return self._raw.protocol()

    def metadata(self) -> dict[str, Any]:
        """The metaData action (id, schemaString, partitionColumns, configuration, ...)."""
        return self._raw.metadata()

    def files(self) -> list[str]:
        """Paths of the live data files, relative to the table root (URL-decoded),
        as deltalake's ``files()`` listed them."""
        return self.get_add_actions().column("path").to_pylist()

    def get_add_actions(self, flatten: bool = False) -> pa.Table:
        """The live files' add actions as a table, as deltalake's ``get_add_actions``:
        path, size_bytes, modification_time, data_change, num_records, plus
        logical_rows (num_records minus deleted rows), tight_bounds, the DV
        descriptor fields (``dv_*``), and ``partition`` (a struct of typed
        columns). ``flatten`` turns the struct into ``partition.<column>`` columns."""
        # Through the stream: pa.table() of a stream object imports pandas
        # first where it is installed (~0.3 s in a fresh process).
        table = pa.RecordBatchReader.from_stream(self._raw.add_actions_table()).read_all()
        return table.flatten() if flatten else table

    def deletion_vectors(self) -> dict[str, DeletionVector]:
        """The deletion vector of every live file that has one, by file path."""
        return dict(self._raw.deletion_vectors())

    def scan(
        self,
        columns: list[str] | None = None,
        filter: Filter | None = None,
        *,
        prefetch_files: int = DEFAULT_PREFETCH_FILES,
        with_row_tracking: bool = False,
        ordered: bool = True,
        limit: int | None = None,
        offset: int = 0,
        batch_size: int | None = None,
        string_view: bool = False,
        read_ahead_bytes: int | None = None,
    ) -> pa.RecordBatchReader:
        """Every live row (DVs applied) of the loaded version, as Arrow batches.

        ``filter`` is a predicate in a small SQL subset: ``column op literal``
        (``= != <> < <= > >= <=>``), ``IN (...)``, ``IS [NOT] NULL``,
        ``BETWEEN``, combined with ``AND``/``OR``/``NOT`` and parentheses, e.g.
        ``"part = 'a' AND (x > 1.5 OR d >= DATE '2024-01-01')"`` (the grammar is
        documented once, in the Rust crate's ``expr`` module), or the same
        predicate as an expression tree in its JSON form (a dict, as
        :mod:`deltadv.datasource` builds from Spark's filters). Only matching
        rows are returned; files and row groups it rules out (by partition
        values, file statistics and parquet row-group statistics) are not read.

        The reader is a stream: the row groups of the files are decoded in
        parallel, on :func:`deltadv.num_threads` threads, each piece at most a
        few batches ahead of the reader (``prefetch_files`` footers are fetched
        ahead), so memory stays bounded whatever the table's size (it grows
        linearly with the threads). Batches come in file order and row order
        within a file; with ``ordered=False``, as they are decoded (the same
        rows, faster where their order does not matter). Errors (a missing data
        file, a corrupt DV) are raised as deltadv's typed exceptions by the read
        that meets them.

        ``with_row_tracking`` (tables with row tracking) adds each row's
        ``_row_id`` and ``_row_commit_version`` (int64): the values Delta Spark
        shows as ``_metadata.row_id`` and ``_metadata.row_commit_version``, which
        stay with a row through UPDATE, MERGE, PURGE and OPTIMIZE.

        ``limit`` returns at most that many rows (after ``filter``; the first ones,
        in order), ``offset`` skips that many first: the stream stops once it has
        its rows (files past them are not opened, beyond those already read
        ahead), and without a filter the files the log's row counts (numRecords
        less DV cardinality) place wholly before ``offset`` or past ``limit`` are
        not read at all. ``limit=0`` reads no file. With ``ordered=False``, the
        rows are ``limit`` rows of the scan, not necessarily its first ones.

        A file's deletion vector is fetched when the file comes into the
        read-ahead (those of the ``prefetch_files`` files of a window together,
        one GET per DV file they share), so a scan stopped early has fetched the
        DVs of the files it read, not the table's.

        ``batch_size`` is the rows of each decoded batch (default 8,192; the last
        batch of a row group, or one the DV or ``filter`` thins, has fewer): larger
        batches cost less to decode and hand over, at the price of memory (each
        piece read ahead holds at least one batch).

        With ``string_view``, string and binary columns (and fields, at any
        depth) come as ``string_view`` / ``binary_view`` instead of ``string`` /
        ``binary``: the same values, decoded without gathering their bytes into
        one buffer, and taken without a copy by readers that keep strings as
        views (polars; :mod:`deltadv.polars` asks for them).

        ``read_ahead_bytes`` is the decoded bytes each piece of a file (a run of
        row groups) may hold ahead of the reader (default 4 MiB): a larger budget
        lets large row groups decode in parallel ahead of a reader that keeps
        up, at the price of up to that much memory per thread.
        """
        check_str_list("columns", columns)
        check_args(
            {
                "with_row_tracking": (with_row_tracking, bool, False),
                "ordered": (ordered, bool, False),
                "batch_size": (batch_size, int, True),
                "string_view": (string_view, bool, False),
                "read_ahead_bytes": (read_ahead_bytes, int, True),
            },
            where="scan",
        )
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"scan: batch_size must be >= 1, not {batch_size}")
        if read_ahead_bytes is not None and read_ahead_bytes < 1:
            raise ValueError(f"scan: read_ahead_bytes must be >= 1, not {read_ahead_bytes}")
        limit, offset = _rows_args(limit, offset, "scan")
        sql, tree = _filter_args(filter)
        return _reader(
            self._raw.scan(
                columns,
                sql,
                False,
                tree,
                _prefetch(prefetch_files),
                with_row_tracking,
                ordered,
                limit=limit,
                offset=offset,
                batch_size=batch_size,
                string_view=string_view,
                read_ahead_bytes=read_ahead_bytes,
            )
        )

    def to_pyarrow_table(
        self,
        columns: list[str] | None = None,
        filter: Filter | None = None,
        *,
        with_row_tracking: bool = False,
        limit: int | None = None,
        offset: int = 0,
        string_view: bool = False,
    ) -> pa.Table:
        """The table's rows (DVs applied) as a pyarrow Table (``filter``,
        ``with_row_tracking``, ``limit``, ``offset``, ``string_view``: see :meth:`scan`), as
        deltalake's ``to_pyarrow_table``. Every batch is kept, so the row groups
        decode whole ahead of the assembly (not within :meth:`scan`'s small
        read-ahead budget)."""
        check_str_list("columns", columns)
        check_args(
            {
                "with_row_tracking": (with_row_tracking, bool, False),
                "string_view": (string_view, bool, False),
            },
            where="to_pyarrow_table",
        )
        limit, offset = _rows_args(limit, offset, "to_pyarrow_table")
        sql, tree = _filter_args(filter)
        raw = self._raw.scan(
            columns,
            sql,
            False,
            tree,
            DEFAULT_PREFETCH_FILES,
            with_row_tracking,
            True,
            True,
            limit=limit,
            offset=offset,
            string_view=string_view,
        )
        return _reader(raw).read_all()

    def to_pyarrow(
        self, columns: list[str] | None = None, filter: Filter | None = None
    ) -> pa.Table:
        """Alias of :meth:`to_pyarrow_table` (deltadv's earlier name)."""
        return self.to_pyarrow_table(columns, filter)

    def to_pandas(self, columns: list[str] | None = None, filter: Filter | None = None) -> Any:
        """The table's rows (DVs applied) as a pandas DataFrame (needs pandas)."""
        return self.to_pyarrow_table(columns, filter).to_pandas()

    def scan_tasks(
        self,
        columns: list[str] | None = None,
        filter: Filter | None = None,
        *,
        filter_rows: bool = True,
        split_size: int | None = None,
        with_metadata: bool = False,
        with_row_tracking: bool = False,
        time_zone: str = "UTC",
    ) -> list[ScanTask]:
        """Small, picklable tasks: one per live file that ``filter`` cannot rule out,
        or several per file larger than ``split_size`` bytes (split by row groups).
        ``task.read()`` streams the task's rows and needs no log replay. With
        ``filter_rows=False`` the filter only prunes (files, row groups) and the
        caller applies it to the rows, as Spark does; predicates that do not bind
        are then ignored instead of raising. ``with_metadata`` adds each row's
        ``_row_index`` (physical index in its file) and ``_file_path`` columns;
        ``with_row_tracking`` each row's ``_row_id`` and ``_row_commit_version``
        (see :meth:`scan`; the tasks carry what the executors compute them from).
        ``time_zone``: the session time zone ``filter`` reads TIMESTAMPs in
        (literals without an offset, date parts), as Spark's
        ``spark.sql.session.timeZone``."""
        check_str_list("columns", columns)
        check_args(
            {
                "filter_rows": (filter_rows, bool, False),
                "split_size": (split_size, int, True),
                "with_metadata": (with_metadata, bool, False),
                "with_row_tracking": (with_row_tracking, bool, False),
            },
            where="scan_tasks",
        )
        sql, tree = _filter_args(filter)
        tasks = self._raw.scan_tasks(
            columns=columns,
            filter=sql,
            filter_json=tree,
            filter_rows=filter_rows,
            split_size=split_size,
            with_metadata=with_metadata,
            with_row_tracking=with_row_tracking,
            time_zone=time_zone,
        )
        return self._tasks(tasks)

    def scan_with_row_index(
        self, columns: list[str] | None = None, filter: Filter | None = None
    ) -> pa.RecordBatchReader:
        """Like :meth:`scan`, plus ``_row_index`` (the row's physical index in its
        data file) and ``_file_path`` (the data file) columns, for targeted DML."""
        sql, tree = _filter_args(filter)
        return _reader(self._raw.scan(columns, sql, True, tree, DEFAULT_PREFETCH_FILES))

    def delete(
        self,
        predicate: str | pc.Expression | None = None,
        *,
        inline_threshold: int = 0,
        allow_copy_on_write: bool = False,
        dv_file_target_size: int = DV_FILE_TARGET_SIZE,
        time_zone: str = "UTC",
    ) -> dict[str, Any]:
        """Delete the rows matching ``predicate`` with deletion vectors (merge-on-read).

        ``predicate`` is deltadv's SQL subset (see :meth:`scan`), a pyarrow compute
        expression (``pc.field("id") > 5``), or None for every row. Files ruled out
        by partition values or stats are not read; files matched entirely by a
        partition predicate are removed unread. DVs of files already carrying one
        are extended (old | new). DVs whose serialized size is at most
        ``inline_threshold`` bytes are stored inline in the log (0: never); DV files
        are cut at about ``dv_file_target_size`` bytes.
        Returns the operation metrics (also written to the commit's commitInfo)
        and moves this object to the new version.

        A table that does not allow DVs is refused (enable them with
        ``deltadv.write.enable_deletion_vectors``) unless ``allow_copy_on_write``:
        then the touched files are rewritten without the deleted rows.

        ``time_zone`` (an IANA name or an offset like ``"+05:30"``) is the session
        time zone a SQL predicate reads TIMESTAMPs in (literals without an offset,
        date parts), as Delta Spark's ``spark.sql.session.timeZone``.
        """
        if predicate is None or isinstance(predicate, str):
            return self._raw.delete(
                predicate,
                inline_threshold,
                allow_copy_on_write,
                dv_file_target_size,
                time_zone,
            )
        if not isinstance(predicate, pc.Expression):
            raise TypeError(
                f"predicate must be a str or pyarrow.compute.Expression, not {predicate!r}"
            )
        rows: dict[str, list[int]] = {}
        for batch in self.scan_with_row_index():
            hit = pa.Table.from_batches([batch]).filter(predicate)
            for path, index in zip(
                hit["_file_path"].to_pylist(), hit["_row_index"].to_pylist(), strict=True
            ):
                rows.setdefault(path, []).append(index)
        return self._raw.delete_rows(
            rows, inline_threshold, str(predicate), allow_copy_on_write, dv_file_target_size
        )

    def delete_rows(
        self,
        rows: dict[str, Any],
        *,
        inline_threshold: int = 0,
        allow_copy_on_write: bool = False,
        dv_file_target_size: int = DV_FILE_TARGET_SIZE,
    ) -> dict[str, Any]:
        """Delete rows by physical row index: ``{data file path: row indexes}``
        (a list, range, numpy array or DeletionVector each), for callers that already
        know which rows go (e.g. erasure requests resolved by key lookups). Paths are
        as in :meth:`files`. Returns the operation metrics; see :meth:`delete`."""
        return self._raw.delete_rows(
            dict(rows), inline_threshold, None, allow_copy_on_write, dv_file_target_size
        )

    def delete_task(
        self,
        paths: list[str],
        *,
        inline_threshold: int = 0,
        dv_file_target_size: int = DV_FILE_TARGET_SIZE,
    ) -> DeleteTask:
        """A :class:`DeleteTask` for the live data files ``paths`` (as in
        :meth:`files`), to prepare a DELETE's deletion vectors elsewhere (Spark
        executors)."""
        adds = self._raw.add_actions()
        missing = [p for p in paths if p not in adds]
        if missing:
            raise ValueError(
                f"{missing[0]!r} is not a live data file of {self.table_uri} "
                f"at version {self.version()}"
            )
        return DeleteTask(
            self.table_uri,
            {p: adds[p] for p in paths},
            self._raw.storage_options,
            inline_threshold,
            dv_file_target_size,
        )

    def commit_delete(
        self,
        prepared: list[str],
        *,
        predicate: str | None = None,
        inline_threshold: int = 0,
    ) -> dict[str, Any]:
        """Commit the changes :meth:`DeleteTask.prepare` returned (from any number
        of tasks) as one DELETE recording ``predicate``. Files whose DV changed
        since they were prepared are rebased (their rows checked against the new
        DV). Returns the operation metrics; see :meth:`delete`."""
        return self._raw.commit_prepared(list(prepared), predicate, inline_threshold)

    def update(
        self,
        updates: Mapping[str, Value],
        predicate: str | pc.Expression | None = None,
        *,
        allow_copy_on_write: bool = False,
        inline_threshold: int = 0,
        dv_file_target_size: int = DV_FILE_TARGET_SIZE,
        target_file_size: int = TARGET_FILE_SIZE,
        time_zone: str = "UTC",
    ) -> dict[str, Any]:
        """UPDATE the rows matching ``predicate`` (None: every row), setting each
        column of ``updates`` to its value, with deletion vectors: the old copies
        of the rows are marked deleted in their files' DVs (one DV file), the new
        versions are written to new data files (partitioned, column-mapped and
        with stats as the table's), and one commit records both, as Delta Spark's
        UPDATE does (deltalake's ``update`` signature).

        Values and the predicate are SQL in deltadv's grammar -- columns,
        literals, arithmetic, ``||``/``concat``, ``CAST``, ``CASE WHEN``,
        comparisons (documented once, in the Rust crate's ``expr`` module), e.g.
        ``{"price": "price * 1.1", "tag": "CASE WHEN qty > 5 THEN 'bulk' ELSE tag END"}``
        -- evaluated with Spark's ANSI rules (overflow, a failed CAST and division
        by zero are errors), or pyarrow compute expressions (then every value must
        be one, and pyarrow evaluates them). Files ruled out by partition values
        or stats are not read. Returns Delta Spark's UPDATE metrics
        (``num_updated_rows``, ``num_deletion_vectors_added``, ...) in snake_case,
        and moves this object to the new version; nothing is committed when no
        row matches. A table without DVs is refused unless
        ``allow_copy_on_write``: then the touched files are rewritten.

        ``time_zone`` (an IANA name such as ``"America/Los_Angeles"`` or an
        offset such as ``"+05:30"``) is the session time zone the predicate,
        the values, generated columns and CHECK constraints read TIMESTAMPs in
        (date parts, casts to DATE or STRING, literals without an offset), as
        Delta Spark reads them in ``spark.sql.session.timeZone``.
        """
        if not isinstance(updates, Mapping) or not updates:
            raise ValueError("updates must be a non-empty mapping of column -> value")
        exprs = [v for v in updates.values() if isinstance(v, pc.Expression)]
        if not exprs and not isinstance(predicate, pc.Expression):
            for column, value in updates.items():
                if not isinstance(value, str):
                    raise TypeError(
                        f"the value for {column!r} must be SQL text or a "
                        f"pyarrow.compute.Expression, not {value!r}"
                    )
            return self._raw.update(
                list(updates.items()),
                predicate,
                allow_copy_on_write=allow_copy_on_write,
                inline_threshold=inline_threshold,
                dv_file_target_size=dv_file_target_size,
                target_file_size=target_file_size,
                time_zone=time_zone,
            )
        return self._update_with_pyarrow(
            updates,
            predicate,
            allow_copy_on_write=allow_copy_on_write,
            inline_threshold=inline_threshold,
            dv_file_target_size=dv_file_target_size,
            target_file_size=target_file_size,
            time_zone=time_zone,
        )

    def _update_with_pyarrow(
        self,
        updates: Mapping[str, Value],
        predicate: str | pc.Expression | None,
        **options: Any,
    ) -> dict[str, Any]:
        """UPDATE with pyarrow expressions: pyarrow evaluates the predicate and the
        values batch by batch; the Rust core writes and commits the change stream."""
        import pyarrow.acero as ac

        names = self.schema().names
        lower = {n.lower(): n for n in names}
        columns: dict[str, pc.Expression] = {}
        for column, value in updates.items():
            if not isinstance(value, pc.Expression):
                raise TypeError(
                    f"the value for {column!r} must be a pyarrow.compute.Expression like "
                    "the others (SQL text and expressions do not mix)"
                )
            name = lower.get(column.lower())
            if name is None:
                raise ValueError(
                    f"UPDATE sets column {column!r}, which is not in the table "
                    f"(columns: {', '.join(names)})"
                )
            columns[name] = value
        if predicate is not None and not isinstance(predicate, str | pc.Expression):
            raise TypeError(
                f"predicate must be a str or pyarrow.compute.Expression, not {predicate!r}"
            )
        sql = predicate if isinstance(predicate, str) else None
        copy = options["allow_copy_on_write"]
        task = self.change_task(
            self.files(),
            allow_copy_on_write=copy,
            inline_threshold=options["inline_threshold"],
            dv_file_target_size=options["dv_file_target_size"],
            target_file_size=options["target_file_size"],
            time_zone=options["time_zone"],
        )
        source = self.scan_with_row_index(filter=sql)
        projection = {n: columns.get(n, pc.field(n)) for n in names}
        projection["_file_path"] = pc.field("_file_path")
        projection["_row_index"] = pc.field("_row_index")

        filt = predicate if isinstance(predicate, pc.Expression) else None
        project = ac.ProjectNodeOptions(list(projection.values()), list(projection))

        def changed() -> Any:
            for batch in source:
                rows = pa.Table.from_batches([batch])
                if filt is not None:
                    rows = rows.filter(filt)
                if rows.num_rows == 0:
                    continue
                plan = ac.Declaration.from_sequence(
                    [
                        ac.Declaration("table_source", ac.TableSourceNodeOptions(rows)),
                        ac.Declaration("project", project),
                    ]
                )
                yield from plan.to_table(use_threads=False).to_batches()

        batches = changed()
        head = next(batches, None)
        prepared = []
        if head is not None:  # no matching row: nothing is written or committed
            chained = itertools.chain([head], batches)
            prepared.append(task.prepare(pa.RecordBatchReader.from_batches(head.schema, chained)))
        return self.commit_changes(
            "UPDATE",
            prepared,
            predicate=_text(predicate),
            allow_copy_on_write=copy,
            inline_threshold=options["inline_threshold"],
        )

    def merge(
        self,
        source: Any,
        predicate: str,
        source_alias: str | None = None,
        target_alias: str | None = None,
        *,
        allow_copy_on_write: bool = False,
        inline_threshold: int = 0,
        dv_file_target_size: int = DV_FILE_TARGET_SIZE,
        target_file_size: int = TARGET_FILE_SIZE,
        source_chunk_bytes: int = SOURCE_CHUNK_BYTES,
        merge_schema: bool = False,
        time_zone: str = "UTC",
    ) -> TableMerger:
        """MERGE ``source`` into this table on ``predicate`` (deltalake's builder):
        add clauses with ``when_matched_update(...)``, ``when_not_matched_insert_all()``,
        ... and run it with ``execute()``. ``source`` is Arrow data -- a pyarrow
        Table or RecordBatchReader, a polars or pandas DataFrame, anything with
        ``__arrow_c_stream__`` -- read as a stream, ``source_chunk_bytes`` at a
        time. ``predicate`` and clause expressions are deltadv SQL over
        ``<target_alias>.col`` and ``<source_alias>.col`` (default aliases
        ``target`` and ``source``); it must equate a target expression with a
        source expression (the join key), e.g. ``"t.id = s.id"``.

        Changed rows are marked deleted in their files' DVs and written anew, as
        Delta Spark's MERGE does; an insert-only MERGE writes no DV. A target row
        that several source rows would change raises
        ``DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE`` (ValueError)
        naming the key. A table without DVs is refused unless
        ``allow_copy_on_write``: then the touched files are rewritten. With
        ``merge_schema`` (deltalake's name; Delta Spark's schema evolution), source
        columns the table lacks are added to it, in the MERGE's commit, when an
        ``update_all``/``insert_all`` clause writes them (else they are ignored);
        not yet on column-mapped tables. ``time_zone``: the session time zone
        conditions, values, generated columns and CHECK constraints read
        TIMESTAMPs in, as in :meth:`update`.
        """
        check_args(
            {
                "predicate": (predicate, str, False),
                "source_alias": (source_alias, str, True),
                "target_alias": (target_alias, str, True),
                "merge_schema": (merge_schema, bool, False),
            },
            where="merge",
        )
        return TableMerger(
            self._run_merge,
            self.table_uri,
            source,
            predicate,
            source_alias or "source",
            target_alias or "target",
            {
                "allow_copy_on_write": allow_copy_on_write,
                "inline_threshold": inline_threshold,
                "dv_file_target_size": dv_file_target_size,
                "target_file_size": target_file_size,
                "source_chunk_bytes": source_chunk_bytes,
                "merge_schema": merge_schema,
                "time_zone": time_zone,
            },
        )

    def _run_merge(
        self,
        source: Any,
        predicate: str,
        clauses: list[Clause],
        source_alias: str,
        target_alias: str,
        options: dict[str, Any],
    ) -> dict[str, Any]:
        """Run a MERGE :class:`TableMerger` built (its runner)."""
        return self._raw.merge(
            source,
            predicate,
            clauses,
            source_alias=source_alias,
            target_alias=target_alias,
            **options,
        )

    def change_task(
        self,
        paths: list[str],
        *,
        allow_copy_on_write: bool = False,
        inline_threshold: int = 0,
        dv_file_target_size: int = DV_FILE_TARGET_SIZE,
        target_file_size: int = TARGET_FILE_SIZE,
        new_columns: pa.Schema | None = None,
        time_zone: str = "UTC",
    ) -> ChangeTask:
        """A :class:`ChangeTask` whose change stream may replace rows of the live
        data files ``paths`` (as in :meth:`files`), to write part of an UPDATE or
        MERGE elsewhere (Spark executors). Raises if the table cannot be
        updated (features, properties, DVs off without ``allow_copy_on_write``).
        ``new_columns``: a schema whose columns the table lacks are written too
        (MERGE schema evolution; pass the same to :meth:`commit_changes`).
        ``time_zone``: the session time zone generated columns and CHECK
        constraints read TIMESTAMPs in (the Spark session's, for Spark)."""
        task = self._raw.change_task(
            list(paths),
            allow_copy_on_write=allow_copy_on_write,
            inline_threshold=inline_threshold,
            dv_file_target_size=dv_file_target_size,
            target_file_size=target_file_size,
            new_columns=_schema_bytes(new_columns),
            time_zone=time_zone,
        )
        return ChangeTask(self.table_uri, task, self._raw.storage_options)

    def commit_changes(
        self,
        operation: str,
        prepared: list[str],
        *,
        predicate: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        extra_metrics: Mapping[str, Any] | None = None,
        read_files: list[str] | None = None,
        allow_copy_on_write: bool = False,
        inline_threshold: int = 0,
        new_columns: pa.Schema | None = None,
        merge_plan: MergePlan | None = None,
        merge_keys: pa.Table | None = None,
        merge_keys_complete: bool = True,
        time_zone: str = "UTC",
        txn_app_id: str | None = None,
        txn_version: int | None = None,
    ) -> dict[str, Any]:
        """Commit what :meth:`ChangeTask.prepare` returned (from any number of
        tasks) as one ``"UPDATE"`` or ``"MERGE"``; ``parameters`` become the
        commit's operationParameters (``predicate`` sets Delta's ``predicate``),
        ``extra_metrics`` are added to its operationMetrics, ``read_files`` are
        the files the operation read (None: the whole table, for the conflict
        checker). Files whose DV changed since they were prepared are rebased
        when the rows are disjoint; if the commit fails, the new files are removed.
        A MERGE that inserts gives its ``merge_plan`` and ``merge_keys`` (the
        source columns its condition names; every source row when
        ``merge_keys_complete``, else just their schema): then a file a
        concurrent commit added conflicts only when it lies in a partition the
        condition reads and (with the keys) holds a row with one of the source's
        keys, as :meth:`merge` checks (reading instants in ``time_zone``, the
        session time zone the MERGE ran in). ``txn_app_id`` / ``txn_version``
        (together): the commit carries Delta's ``txn`` action and is skipped
        (``version`` None, the new files removed) when the table holds that
        version of the application already (Delta Spark's ``txnAppId`` /
        ``txnVersion``).
        Returns the metrics; see :meth:`update`."""
        params = dict(parameters or {})
        if predicate is not None and "predicate" not in params:
            params["predicate"] = _json.dumps([predicate])
        return self._raw.commit_changes(
            operation,
            list(prepared),
            parameters=_json.dumps(params),
            extra_metrics=_json.dumps({k: str(v) for k, v in (extra_metrics or {}).items()}),
            read_files=None if read_files is None else list(read_files),
            allow_copy_on_write=allow_copy_on_write,
            inline_threshold=inline_threshold,
            new_columns=_schema_bytes(new_columns),
            merge_plan=merge_plan,
            merge_keys=merge_keys,
            merge_keys_complete=merge_keys_complete,
            time_zone=time_zone,
            txn_app_id=txn_app_id,
            txn_version=txn_version,
        )

    def purge(
        self,
        partition_filters: PartitionFilters | None = None,
        target_size: int | None = None,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """``REORG TABLE ... APPLY (PURGE)``: rewrite every file that has a deletion
        vector without its deleted rows (files of one partition bin-packed up to
        ``target_size`` bytes, default the table's ``delta.targetFileSize`` or 1 GiB),
        committed with ``dataChange=false`` as Delta Spark's ``REORG``. A file whose
        rows are all deleted is just removed. Returns Delta's OPTIMIZE metrics in
        snake_case (``num_removed_files``, ``num_added_files``,
        ``num_deletion_vectors_removed``, ``num_added_bytes``, ...) and ``version``
        (None when no file has a DV). A concurrent commit that changed a file being
        rewritten makes it fail with :class:`~deltadv.CommitConflictError`, leaving
        nothing behind: run it again."""
        return self._compact(
            "purge", target_size, MAX_DELETED_ROWS_RATIO, partition_filters, progress
        )

    def optimize(
        self,
        target_size: int | None = None,
        partition_filters: PartitionFilters | None = None,
        max_deleted_rows_ratio: float = MAX_DELETED_ROWS_RATIO,
        progress: Progress | None = None,
        full: bool = False,
        memory_budget: int | None = None,
    ) -> dict[str, Any]:
        """``OPTIMIZE``: bin-pack the files smaller than ``target_size`` bytes (default
        the table's ``delta.targetFileSize``, else 1 GiB, as Delta Spark) in each
        partition into files of about that size, and rewrite every file with more
        than ``max_deleted_rows_ratio`` of its rows deleted, without them. Committed
        with ``dataChange=false`` as Delta Spark's ``OPTIMIZE``; metrics as
        :meth:`purge`.

        On a liquid-clustered table (``CLUSTER BY``) it clusters instead, as Delta
        Spark: the files no OPTIMIZE clustered yet and those of partial ZCubes are
        rewritten together in Hilbert-curve order over the clustering columns (DVs
        purged), into files of ``target_size`` tagged ``clusteringProvider="liquid"``;
        a table already clustered is left alone. Files clustered by other columns
        (the clustering columns changed since) are left alone too, except with
        ``full=True``: Delta Spark's ``OPTIMIZE ... FULL`` reclusters them together
        with every partial ZCube (refused on a table that is not clustered).
        Clustering holds at most about ``memory_budget`` bytes of decoded rows at
        once (default 1 GiB): a larger run is clustered in groups of that size, one
        after the other, into one ZCube."""
        return self._compact(
            "optimize",
            target_size,
            max_deleted_rows_ratio,
            partition_filters,
            progress,
            full,
            memory_budget,
        )

    def compact_tasks(
        self,
        mode: str,
        target_size: int | None = None,
        max_deleted_rows_ratio: float = MAX_DELETED_ROWS_RATIO,
        partition_filters: PartitionFilters | None = None,
        full: bool = False,
        memory_budget: int | None = None,
    ) -> tuple[str, list[str]]:
        """The plan of a ``"purge"`` or ``"optimize"`` (JSON) and its rewrite tasks
        (JSON, one per bin of files), for distributed runners: each task is run
        with :func:`deltadv.table.rewrite_compact_task` and the results committed
        with :meth:`commit_compaction`. ``full`` and ``memory_budget``: see
        :meth:`optimize`."""
        sql, tree = _partition_filter(partition_filters)
        return self._raw.compact_plan(
            mode,
            target_size=target_size,
            max_deleted_rows_ratio=max_deleted_rows_ratio,
            partition_filter=sql,
            partition_filter_json=tree,
            full=full,
            memory_budget=memory_budget,
        )

    def commit_compaction(
        self, plan: str, results: list[str], partition_filters: PartitionFilters | None = None
    ) -> dict[str, Any]:
        """Commit a compaction planned on this version (see :meth:`compact_tasks`);
        on a failure the files the tasks wrote are removed."""
        sql, tree = _partition_filter(partition_filters)
        return self._raw.commit_compaction(plan, results, sql, tree)

    def abort_compaction(self, results: list[str]) -> None:
        """Remove the files compaction tasks wrote, for a compaction given up."""
        self._raw.abort_compaction(results)

    def _compact(
        self,
        mode: str,
        target_size: int | None,
        max_deleted_rows_ratio: float,
        partition_filters: PartitionFilters | None,
        progress: Progress | None,
        full: bool = False,
        memory_budget: int | None = None,
    ) -> dict[str, Any]:
        if target_size is not None and (isinstance(target_size, bool) or target_size <= 0):
            raise ValueError(f"target_size must be a positive number of bytes, not {target_size!r}")
        if memory_budget is not None and (isinstance(memory_budget, bool) or memory_budget <= 0):
            raise ValueError(
                f"memory_budget must be a positive number of bytes, not {memory_budget!r}"
            )
        plan, tasks = self.compact_tasks(
            mode, target_size, max_deleted_rows_ratio, partition_filters, full, memory_budget
        )
        options = self._raw.storage_options
        results: list[str] = []
        try:
            for i, task in enumerate(tasks):
                results.append(rewrite_compact_task(self.table_uri, options, task))
                if progress is not None:
                    progress(i + 1, len(tasks))
        except BaseException:
            self.abort_compaction(results)
            raise
        return self.commit_compaction(plan, results, partition_filters)

    def vacuum(
        self,
        retention_hours: float | None = None,
        dry_run: bool = True,
        enforce_retention_duration: bool = True,
        progress: Progress | None = None,
        full: bool = True,
    ) -> list[str]:
        """Delete the files under the table root that no version inside the retention
        period reads (deltalake's and Delta Spark's VACUUM); returns them (relative
        paths), or with ``dry_run`` (the default) only lists them.

        Kept: live data files and their DV files; files (and DV files) whose
        ``remove`` is newer than the retention (``retention_hours``, default the
        table's ``delta.deletedFileRetentionDuration``, one week); anything newer than
        the retention; hidden directories (``_delta_log``, ...). A retention shorter
        than the table's raises ``ValueError`` unless ``enforce_retention_duration``
        is False. A real run commits ``VACUUM START`` and ``VACUUM END`` (as Delta
        Spark) around the deletes, which run in parallel batches;
        ``progress(deleted, total)`` is called as they finish.

        ``full=True`` (the default, as Delta Spark's VACUUM) lists everything under the
        root, so orphans of failed writes go too; ``full=False`` (deltalake's default,
        Delta Spark's ``VACUUM LITE``) only takes the files of expired tombstones in the
        log, without listing storage.

        Iceberg metadata beside the log (UniForm, ``metadata/``; see
        :meth:`sync_iceberg`): Iceberg snapshots older than the retention, except the
        current one, are expired first (a real run writes the next
        ``vN.metadata.json`` without them); the files the remaining snapshots read
        (metadata files, ``version-hint.text``, manifest lists, manifests, Puffin
        files) are kept and ``full`` takes the other ``metadata/`` files older than the
        retention. Iceberg metadata that cannot be read leaves ``metadata/`` alone."""
        report = self.vacuum_report(
            retention_hours, dry_run, enforce_retention_duration, progress, full
        )
        return list(report["files"])

    def vacuum_report(
        self,
        retention_hours: float | None = None,
        dry_run: bool = True,
        enforce_retention_duration: bool = True,
        progress: Progress | None = None,
        full: bool = True,
    ) -> dict[str, Any]:
        """:meth:`vacuum`, with what it found: ``files``, ``bytes``, ``dry_run`` and the
        versions of the ``VACUUM START``/``END`` commits (``start_version``,
        ``end_version``), and ``iceberg_snapshots_expired``."""
        if retention_hours is not None and (
            isinstance(retention_hours, bool) or not isinstance(retention_hours, int | float)
        ):
            raise TypeError(f"retention_hours must be a number, not {retention_hours!r}")
        return self._raw.vacuum(
            retention_hours, dry_run, enforce_retention_duration, progress, full
        )

    def sync_iceberg(self) -> dict[str, Any]:
        """Mirror the latest version as an Iceberg v3 snapshot (Delta UniForm's layout,
        deletion vectors included) under ``<table>/metadata/``, so Iceberg readers
        (pyiceberg, DuckDB, Spark, Trino...) read the table by the path of
        ``metadata/vN.metadata.json`` with no data rewritten: data files with their
        record counts and column stats, and each deletion vector as a
        ``deletion-vector-v1`` blob of a Puffin file (the Delta DV's own bytes).

        Incremental from the Delta version the latest Iceberg metadata records
        (``delta-version``), in full the first time; unchanged manifests are reused.
        Needs column mapping (``delta.columnMapping.mode=name``) for field ids, and
        ``numRecords`` in every file's stats. Returns ``delta_version``,
        ``previous_delta_version``, ``snapshot_id`` (None when already up to date:
        nothing written), ``metadata_version`` (N), ``metadata_location``,
        ``files_written`` (relative paths, in write order), ``added_data_files``,
        ``removed_data_files``, ``added_dvs``, ``removed_dvs``, ``manifests_reused``
        and ``manifests_written``. A concurrent sync that wins the same metadata
        version makes this one raise ``CommitConflictError``.

        On a UniForm table (``delta.universalFormat.enabledFormats=iceberg`` with
        ``delta.enableIcebergCompatV3=true``) every deltadv commit runs this itself,
        best-effort: a failure leaves the commit standing and shows as
        ``iceberg_error`` in the write's metrics; the next commit, or this method
        (which raises the error), catches up."""
        return self._raw.sync_iceberg()

    def set_table_properties(self, properties: Mapping[str, str]) -> dict[str, Any]:
        """Set table properties on the latest version in one ``SET TBLPROPERTIES``
        commit, as Delta Spark's ``ALTER TABLE ... SET TBLPROPERTIES``; moves this
        object to the new version. Delta property names match without case and are
        kept in Delta's spelling; other keys are kept as given.

        Settable here: retention and log properties, ``delta.checkpointInterval``,
        statistics columns, ``delta.isolationLevel``, ``delta.targetFileSize``,
        ``delta.enableDeletionVectors`` (``true`` adds the protocol feature), and
        ``delta.universalFormat.enabledFormats=iceberg`` on a table created with
        ``delta.enableIcebergCompatV3=true``: the commit converts the current snapshot
        into Iceberg metadata once, and every later commit is mirrored (see
        :meth:`sync_iceberg`). Properties deltadv only sets at creation (column
        mapping, row tracking, change data feed, Iceberg compatibility, ...) raise
        ``DeltaProtocolError``; an unknown ``delta.*`` name or a value that does
        not parse raises ``ValueError``. Returns ``version`` (None: every value was
        set already, nothing committed), ``iceberg_snapshot_id``, ``iceberg_error``,
        ``attempts``, ``rebases``, ``checkpointed`` and ``checkpoint_error``."""
        if not isinstance(properties, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in properties.items()
        ):
            raise TypeError("properties must be a mapping of str to str")
        return self._raw.set_table_properties(dict(properties))

    def restore(self, target: int | datetime | str) -> dict[str, Any]:
        """RESTORE the table to an earlier version (an int) or to the version at a
        time (``datetime``, naive = UTC, or ISO-8601 text), as Delta Spark's
        ``RESTORE TABLE ... TO VERSION AS OF``: files live then and not now come back
        with the deletion vectors they had then, files live now and not then are
        removed; the schema and properties come back, the protocol never
        downgrades. Returns Delta's RESTORE metrics in snake_case
        (``num_restored_files``, ``num_removed_files``, ``table_size_after_restore``,
        ...), ``version`` (the new one) and ``restored_version``. A file VACUUM has
        since removed makes it fail (``FileNotFoundError``), committing nothing."""
        if isinstance(target, bool):
            raise TypeError("target must be a version (int), datetime or ISO-8601 string")
        if isinstance(target, int):
            if target < 0:
                raise ValueError(f"version must be >= 0, not {target}")
            return self._raw.restore(target, None)
        if isinstance(target, str | datetime):
            return self._raw.restore(None, _millis(target))
        raise TypeError(
            f"target must be a version (int), datetime or ISO-8601 string, not {target!r}"
        )

    def disable_deletion_vectors(self) -> dict[str, Any]:
        """Drop the ``deletionVectors`` table feature, as Delta Spark 4.4's ``ALTER
        TABLE ... DROP FEATURE deletionVectors`` does: unset
        ``delta.enableDeletionVectors`` (no new DVs), PURGE the existing ones, add
        tombstones for DV files old versions still reference, write three barrier
        checkpoints, then downgrade the protocol (without ``deletionVectors``, with
        ``checkpointProtection``) and checkpoint it. Afterwards readers without DV
        support read the table. Returns the version of each step (``version`` is the
        downgrade's)."""
        return self._raw.disable_deletion_vectors()

    def generate_symlink_manifest(self) -> dict[str, Any]:
        """Write Delta's ``_symlink_format_manifest`` (one manifest per partition) for
        Presto/Trino/Athena, as Delta Spark's ``GENERATE symlink_format_manifest``.
        Refused (:class:`~deltadv.DeltaProtocolError`) while any live file has a
        deletion vector -- those engines would return deleted rows: :meth:`purge`
        first -- and on column-mapped tables. Returns the manifests written."""
        return self._raw.generate_symlink_manifest()

    def dv_stats(self) -> pa.Table:
        """Where deletes sit, one row per live file: ``path``, ``partition`` (the
        partition values), ``num_records``, ``deleted_rows``, ``deleted_ratio``
        (deleted / records; 0 without stats), ``size_bytes``, ``dv_storage_type``
        and whether :meth:`purge` (``has_dv``) and :meth:`optimize` (ratio over
        ``max_deleted_rows_ratio``) would rewrite it."""
        adds = self.get_add_actions(flatten=False)
        records = pc.fill_null(adds["num_records"], 0)
        deleted = pc.fill_null(adds["dv_cardinality"], 0)
        ratio = pc.if_else(
            pc.greater(records, 0),
            pc.divide(pc.cast(deleted, pa.float64()), pc.cast(records, pa.float64())),
            0.0,
        )
        return pa.table(
            {
                "path": adds["path"],
                "partition": adds["partition"],
                "num_records": adds["num_records"],
                "deleted_rows": pc.cast(deleted, pa.int64()),
                "deleted_ratio": ratio,
                "size_bytes": adds["size_bytes"],
                "dv_storage_type": adds["dv_storage_type"],
                "has_dv": pc.greater(deleted, 0),
                "over_optimize_ratio": pc.greater(ratio, MAX_DELETED_ROWS_RATIO),
            }
        )

    def predicate_is_partition_only(self, predicate: str) -> bool:
        """Whether ``predicate`` (deltadv's SQL subset) names only partition
        columns, so a DELETE with it removes whole files unread. Raises
        UnsupportedPredicateError outside the subset."""
        return self._raw.predicate_is_partition_only(predicate)

    def count(self) -> int:
        """Live row count: sum(numRecords) - sum(DV cardinality) from the log; files
        whose stats lack numRecords have their parquet footer read instead."""
        return self._raw.count()

    def history(self, limit: int | None = None) -> list[dict[str, Any]]:
        """commitInfo of each commit, newest first (as deltalake's ``history``), with
        ``version``, ``timestamp`` (commitInfo's, else the commit file's modification
        time), ``commitFileModificationTime`` and ``commitTimestamp`` (Delta Spark's
        commit time: the in-commit timestamp, else the file time made monotonic),
        in milliseconds."""
        check_arg("limit", limit, int, optional=True)
        return self._raw.history(limit)

    def load_as_version(self, version: int | datetime | str) -> None:
        """Reload at a version number, or at the latest commit at or before a
        timestamp (``datetime``, naive = UTC, or an ISO-8601 string)."""
        if isinstance(version, bool):
            raise TypeError("version must be an int, datetime or ISO-8601 string")
        if isinstance(version, int):
            self._raw.load_version(version)
            return
        if isinstance(version, (str, datetime)):
            self._raw.load_timestamp(_millis(version))
            return
        raise TypeError(f"version must be an int, datetime or ISO-8601 string, not {version!r}")

    def load_cdf(
        self,
        starting_version: int | None = None,
        ending_version: int | None = None,
        starting_timestamp: datetime | str | None = None,
        ending_timestamp: datetime | str | None = None,
        columns: list[str] | None = None,
        predicate: str | None = None,
    ) -> pa.RecordBatchReader:
        """The Change Data Feed of a version range (both ends included), as Delta
        Spark's ``table_changes`` and deltalake's ``load_cdf`` give it: every row a
        commit inserted, deleted or updated, with ``_change_type`` (``insert``,
        ``delete``, ``update_preimage``, ``update_postimage``), ``_commit_version``
        and ``_commit_timestamp`` after the table's columns (or ``columns``).

        The range starts at ``starting_version`` (default 0) or at the first commit
        at or after ``starting_timestamp``, and ends at ``ending_version`` (default,
        and at most, the latest) or at the last commit at or before
        ``ending_timestamp`` (``datetime``, naive = UTC, or ISO-8601 text). The
        table must have had ``delta.enableChangeDataFeed`` on throughout
        (:class:`~deltadv.DeltaProtocolError` otherwise). ``predicate`` (deltadv's
        SQL subset over the table's columns) keeps only the rows it matches.

        Commits that wrote change files are read from them; otherwise added files
        are inserts, removed files deletes, and a file whose deletion vector a commit
        replaced yields only the rows the new DV deletes (and any it restores),
        read with a row selection of just those rows. Rows stream in commit order,
        file by file, up to :func:`deltadv.num_threads` files read at once.
        """
        schema, tasks = self.cdf_tasks(
            starting_version,
            ending_version,
            starting_timestamp,
            ending_timestamp,
            columns,
            predicate,
        )
        if not tasks:
            return pa.RecordBatchReader.from_batches(schema, [])
        native = read_scan_tasks(
            [t.json for t in tasks],
            self._raw.storage_options or None,
            counter=self._raw.request_counter(),
        )
        return pa.RecordBatchReader.from_batches(schema, (pa.record_batch(b) for b in native))

    def cdf_tasks(
        self,
        starting_version: int | None = None,
        ending_version: int | None = None,
        starting_timestamp: datetime | str | None = None,
        ending_timestamp: datetime | str | None = None,
        columns: list[str] | None = None,
        predicate: str | None = None,
    ) -> tuple[pa.Schema, list[ScanTask]]:
        """The tasks of :meth:`load_cdf` (picklable; one per changed file, in commit
        order) and the schema of their rows, for distributed readers (Spark)."""
        versions = {"starting_version": starting_version, "ending_version": ending_version}
        for name, value in versions.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"{name} must be an int, not {value!r}")
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, not {value}")
        check_str_list("columns", columns)
        check_arg("predicate", predicate, str, optional=True)
        schema, tasks = self._raw.cdf_tasks(
            starting_version=starting_version,
            ending_version=ending_version,
            starting_timestamp=None if starting_timestamp is None else _millis(starting_timestamp),
            ending_timestamp=None if ending_timestamp is None else _millis(ending_timestamp),
            columns=columns,
            filter=predicate,
        )
        return pa.schema(schema), self._tasks((t, 0) for t in tasks)

    def enable_deletion_vectors(self) -> int:
        """Turn deletion vectors on for the latest version (protocol feature and
        ``delta.enableDeletionVectors=true``, one commit; see
        :func:`deltadv.write.enable_deletion_vectors`); moves this object to the
        new version and returns it."""
        self.update_incremental()
        return self._raw.enable_deletion_vectors()

    def update_incremental(self) -> None:
        """Reload at the latest version."""
        self._raw.load_version(None)

    def _tasks(self, tasks: Any) -> list[ScanTask]:
        """Scan tasks of (JSON, size) pairs made by this table: they count their
        requests in its counters when read in this process."""
        options = self._raw.storage_options
        counter = self._raw.request_counter()
        out = []
        for text, size in tasks:
            task = ScanTask(text, options, size)
            task._counter = counter
            out.append(task)
        return out

    def request_counts(self) -> dict[str, int]:
        """Object-store requests made through this table: gets (``dv_gets`` of them
        fetched deletion vector files), puts, lists, deletes, heads, and
        ``bytes_read`` (what the GETs returned). The reads of the scan tasks it
        made count here when read in this process (see :class:`ScanTask`)."""
        return self._raw.request_counts()

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The Arrow PyCapsule stream of the loaded version's rows (deletion vectors
        applied), so ``pa.table(t)``, ``polars.DataFrame(t)`` and other Arrow
        consumers take the table directly; :meth:`scan` chooses columns and filters."""
        return self.scan().__arrow_c_stream__(requested_schema)

    def __repr__(self) -> str:
        return f"DeltaTable({self.table_uri!r}, version={self.version()})"

    def to_polars(self, columns: list[str] | None = None, filter: Filter | None = None) -> Any:
        """The table's rows (DVs applied) as a polars DataFrame (``columns``,
        ``filter``: see :meth:`scan`; needs polars: ``pip install
        'deltadv[polars]'``). A lazy frame with polars predicates:
        ``deltadv.polars.scan_delta(table)``."""
        try:
            import polars as pl
        except ImportError as error:
            raise ImportError(
                "DeltaTable.to_polars needs polars: pip install 'deltadv[polars]'"
            ) from error
        # strings as views, polars' own layout: taken without a copy
        table = self.to_pyarrow_table(columns, filter, string_view=True)
        return pl.from_arrow(table, rechunk=False)


def _partition_filter(filters: PartitionFilters | None) -> tuple[str | None, str | None]:
    """Partition filters as the native calls take them: (SQL text, tree JSON);
    deltalake's tuples go as one expression tree (:mod:`deltadv.expressions`)."""
    if filters is None or isinstance(filters, str):
        return filters, None
    if not isinstance(filters, Sequence):
        raise TypeError(
            "partition_filters must be str | list of (column, op, value) tuples, "
            f"not {type(filters).__name__}: {filters!r}"
        )
    tree = partition_filter_tree(filters)
    return None, None if tree is None else _json.dumps(tree, allow_nan=False)


def _millis(when: datetime | str) -> int:
    """A point in time (``datetime``, naive = UTC, or ISO-8601 text) in ms since the epoch."""
    if isinstance(when, str):
        when = datetime.fromisoformat(when)
    if not isinstance(when, datetime):
        raise TypeError(f"a timestamp must be a datetime or ISO-8601 string, not {when!r}")
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    # Exact integer arithmetic: a float product could land 1 ms short.
    return (when - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(milliseconds=1)


def _schema_bytes(schema: pa.Schema | None) -> bytes | None:
    """A schema as Arrow IPC bytes (how the core takes one)."""
    return None if schema is None else schema.serialize().to_pybytes()


def _text(predicate: str | pc.Expression | None) -> str | None:
    """A predicate as the text recorded in the commit."""
    return None if predicate is None else str(predicate)
