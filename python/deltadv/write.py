"""Writing Delta tables from Arrow data, and enabling deletion vectors.

Python only hands Arrow data to deltadv's Rust core (through the Arrow C
stream interface, batch by batch): Rust checks it against the table schema,
writes the parquet data files with Delta stats (as Delta Spark collects them),
and makes the commit. Nothing here writes a file.

- :func:`write_table`: write and commit in one call (create, append,
  overwrite all rows or those a predicate matches, ignore), with schema
  evolution (``schema_mode``).
- :func:`write_files` + :func:`commit_files`: write data files in several
  places (e.g. Spark executors), commit them once (the Spark driver); a
  column-mapped table is created with the schema of :func:`prepare_create`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Literal

import pyarrow as pa

from deltadv import _core
from deltadv.table import TARGET_FILE_SIZE, DeltaTable

Mode = Literal["error", "append", "overwrite", "ignore"]
SchemaMode = Literal["merge", "overwrite"]
OutputMode = Literal["append", "complete"]
Operation = Literal["CREATE TABLE AS SELECT", "WRITE"]


def _stream(data: Any, schema: pa.Schema | None) -> Any:
    """Anything with ``__arrow_c_stream__`` as is; an iterable of record batches
    (with ``schema``) as a lazy RecordBatchReader."""
    if hasattr(data, "__arrow_c_stream__"):
        return data
    if schema is None:
        raise TypeError(
            "data must have __arrow_c_stream__ (pyarrow Table or RecordBatchReader, "
            "polars DataFrame, ...); an iterable of record batches needs schema="
        )
    return pa.RecordBatchReader.from_batches(schema, iter(data))


def _schema_ipc(schema: pa.Schema | None) -> bytes | None:
    return None if schema is None else schema.serialize().to_pybytes()


def write_table(
    table_uri: str,
    data: Any,
    *,
    mode: Mode = "error",
    partition_by: list[str] | None = None,
    storage_options: dict[str, str] | None = None,
    configuration: dict[str, str] | None = None,
    enable_deletion_vectors: bool = True,
    target_file_size: int = TARGET_FILE_SIZE,
    rows_per_file: int | None = None,
    row_group_rows: int | None = None,
    cluster_by: list[str] | None = None,
    predicate: str | None = None,
    schema_mode: SchemaMode | None = None,
    time_zone: str = "UTC",
    txn_app_id: str | None = None,
    txn_version: int | None = None,
) -> DeltaTable:
    """Write Arrow ``data`` (anything with ``__arrow_c_stream__``: a pyarrow Table
    or RecordBatchReader, a polars DataFrame, ...) to a Delta table, streamed.

    ``mode="error"`` creates the table (``delta.enableDeletionVectors=true`` by
    default, ``partition_by`` and ``configuration`` as given) and raises
    TableAlreadyExistsError, before writing anything, if one exists.
    ``mode="append"`` appends to an existing table (TableNotFoundError if there
    is none); the data must match its schema (names case-insensitive, types,
    nullability: ValueError otherwise) and ``partition_by``, if given, its
    partition columns. ``mode="overwrite"`` replaces every row of the table in
    one commit (creating it if absent); with ``predicate`` (SQL text, Delta
    Spark's ``replaceWhere``) only the rows it matches are replaced (deleted
    with deletion vectors where it cuts a file), and every new row must satisfy
    it (ValueError otherwise, nothing committed). ``mode="ignore"`` writes
    nothing when the table exists. ``schema_mode="merge"`` adds the data's new
    columns to the table (nullable; columns the data lacks are null);
    ``schema_mode="overwrite"`` (only with ``mode="overwrite"``) replaces the
    schema and the partitioning (``partition_by``; unpartitioned when not given,
    as Delta Spark's ``overwriteSchema``). Files roll
    over at ``target_file_size`` bytes or ``rows_per_file`` rows. If the commit
    fails (e.g. CommitConflictError), the data files written are removed.
    ``cluster_by`` (on create, not together with ``partition_by``) makes a
    liquid-clustered table, as Delta Spark's ``CREATE TABLE ... CLUSTER BY``:
    :meth:`DeltaTable.optimize` then clusters it.

    ``time_zone`` (an IANA name such as ``"America/Los_Angeles"`` or an offset
    such as ``"+05:30"``) is the session time zone generated columns, CHECK
    constraints and ``predicate`` read TIMESTAMPs in (date parts, casts to DATE
    or STRING, literals without an offset), as Delta Spark reads them in
    ``spark.sql.session.timeZone``; an unknown name raises ValueError before
    anything is written.

    ``txn_app_id`` and ``txn_version`` (together; Delta Spark's ``txnAppId`` /
    ``txnVersion`` writer options) make the write idempotent: the commit
    carries Delta's ``txn`` action, and a write whose ``txn_version`` is at or
    below the table's :meth:`DeltaTable.transaction_version` for
    ``txn_app_id`` writes and commits nothing (a ``foreachBatch`` replayed
    after a failure); a concurrent commit of the same application id is a
    CommitConflictError.
    """
    _core.write_table(
        table_uri,
        dict(storage_options or {}),
        _stream(data, None),
        mode=mode,
        partition_by=list(partition_by or []),
        configuration=dict(configuration or {}),
        enable_deletion_vectors=enable_deletion_vectors,
        target_file_size=target_file_size,
        rows_per_file=rows_per_file,
        row_group_rows=row_group_rows,
        cluster_by=list(cluster_by or []),
        predicate=predicate,
        schema_mode=schema_mode,
        time_zone=time_zone,
        txn_app_id=txn_app_id,
        txn_version=txn_version,
    )
    return DeltaTable(table_uri, storage_options=storage_options)


def write_files(
    table_uri: str,
    data: Any,
    *,
    mode: Mode = "error",
    schema: pa.Schema | None = None,
    partition_by: list[str] | None = None,
    storage_options: dict[str, str] | None = None,
    configuration: dict[str, str] | None = None,
    enable_deletion_vectors: bool = True,
    target_file_size: int = TARGET_FILE_SIZE,
    rows_per_file: int | None = None,
    row_group_rows: int | None = None,
    identity_slot: int | None = None,
    table_schema: str | None = None,
    identity_slots: int | None = None,
    time_zone: str = "UTC",
    predicate: str | None = None,
    schema_mode: SchemaMode | None = None,
) -> list[dict[str, Any]]:
    """Write ``data`` (Arrow data, or an iterable of record batches with
    ``schema``) as data files of a table, WITHOUT committing them; returns
    their add actions for :func:`commit_files`.

    With ``mode="append"`` the files are written for the existing table (its
    schema, partitioning, column mapping and stats settings); with
    ``mode="error"`` for a table to be created with ``schema`` (default: the
    data's), ``partition_by`` and ``configuration``. On a failure, the files
    written so far are removed.

    Identity columns the data leaves out get values only with ``identity_slot``:
    a number distinct for each writer whose files go into one commit (a Spark
    task's partition index). With ``identity_slots``, the number of writers
    (``identity_slot`` below it), values interleave as Delta Spark's: writer
    ``p`` hands out ``base + step * (p + k * identity_slots)`` for its k-th row,
    ``base`` being the value after the table's high-water mark (or the start),
    exactly what Delta Spark gives partition ``p`` of a write of as many
    partitions. Where the number of writers is unknown (no ``identity_slots``),
    writer ``p`` hands out ``base + step * ((p << 33) + k)`` instead: still
    unique and on the start/step grid, but not Delta Spark's numbering (writer 0
    hands out what a single writer does). Either way writers never collide.
    The last value each writer handed out rides in its add actions' ``tags``
    (``deltadv.identityHighWaterMark.<column>``) to :func:`commit_files`.
    ``time_zone``: as :func:`write_table`'s.

    A table created with column mapping (``configuration`` with
    ``delta.columnMapping.mode``) needs ``table_schema``, the schema of
    :func:`prepare_create` (the same for every writer and for
    :func:`commit_files`): the files then carry its physical names and ids.

    With ``mode="overwrite"`` and ``predicate`` (``replaceWhere``), every row
    must satisfy the predicate (ValueError otherwise, the files removed); give
    :func:`commit_files` the same predicate. ``schema_mode`` (as
    :func:`write_table`'s): the files are written for the evolved schema; give
    :func:`commit_files` the same ``schema_mode`` and ``schema``.
    """
    adds = _core.write_files(
        table_uri,
        dict(storage_options or {}),
        _stream(data, schema),
        mode=mode,
        schema_ipc=_schema_ipc(schema),
        partition_by=list(partition_by or []),
        configuration=dict(configuration or {}),
        enable_deletion_vectors=enable_deletion_vectors,
        target_file_size=target_file_size,
        rows_per_file=rows_per_file,
        row_group_rows=row_group_rows,
        identity_slot=identity_slot,
        table_schema=table_schema,
        identity_slots=identity_slots,
        time_zone=time_zone,
        predicate=predicate,
        schema_mode=schema_mode,
    )
    return [json.loads(a) for a in adds]


def commit_files(
    table_uri: str,
    adds: Iterable[dict[str, Any]],
    *,
    mode: Mode = "error",
    schema: pa.Schema | None = None,
    partition_by: list[str] | None = None,
    storage_options: dict[str, str] | None = None,
    configuration: dict[str, str] | None = None,
    enable_deletion_vectors: bool = True,
    table_schema: str | None = None,
    predicate: str | None = None,
    time_zone: str = "UTC",
    schema_mode: SchemaMode | None = None,
    operation: Operation = "CREATE TABLE AS SELECT",
    operation_mode: Mode | None = None,
    txn_app_id: str | None = None,
    txn_version: int | None = None,
    output_mode: OutputMode | None = None,
) -> int:
    """Commit data files already written under ``table_uri`` (``adds``: their add
    actions, e.g. from :func:`write_files`; deletion vectors allowed). With
    ``mode="error"`` this creates the table (version 0, ``schema`` required;
    the protocol and metadata are decided by deltadv's Rust core); with
    ``mode="append"`` it is a blind append. If the commit fails, the files are
    removed (never one the table references). Returns the committed version.

    On a table with identity columns the commit raises each column's high-water
    mark to the furthest value :func:`write_files` handed out (carried in the
    adds' ``deltadv.identityHighWaterMark.<column>`` tags, which the commit
    takes off), as Delta Spark's writes do. As in Delta Spark, values the data
    gave a ``GENERATED BY DEFAULT`` column explicitly leave the mark where it is
    (and the mark never goes back). When a concurrent commit moved a mark since
    the files' values were handed out (they may repeat its values), the commit
    raises ``CommitConflictError`` and removes the files: write them again.

    ``table_schema`` (the schema of :func:`prepare_create`, given to every
    :func:`write_files` too) takes the place of ``schema`` when creating a
    column-mapped table.

    ``mode="overwrite"`` replaces the table's rows by the files in one commit
    (creating the table if absent), or with ``predicate`` (SQL text, Delta
    Spark's ``replaceWhere``, read in ``time_zone`` as :func:`write_table`'s)
    only the rows it matches; ``mode="ignore"`` commits nothing on an existing
    table. ``schema_mode``: as :func:`write_table`'s (the schema evolved to
    ``schema``).

    A commit that creates the table records ``operation``: ``"CREATE TABLE AS
    SELECT"`` (``partitionBy``), or ``"WRITE"`` with ``mode`` ``operation_mode``
    (default ``mode``; ``"append"`` records ``Append``) and ``partitionBy``, as
    Delta Spark's ``df.write.format("delta").save(path)`` records a new table.
    Appends and overwrites of an existing table record ``WRITE`` either way.

    ``txn_app_id`` / ``txn_version``: as :func:`write_table`'s (a write the
    table holds already commits nothing, its files removed; the table's
    version is returned). With ``output_mode`` (``"append"``, or
    ``"complete"`` with ``mode="overwrite"``) the commit is a streaming
    micro-batch, recorded as Delta Spark's sink records it: ``STREAMING
    UPDATE`` with ``outputMode``, ``queryId`` (``txn_app_id``, the query's id)
    and ``epochId`` (``txn_version``, the batch id)."""
    return _core.commit_files(
        table_uri,
        dict(storage_options or {}),
        [json.dumps(a) for a in adds],
        mode=mode,
        schema_ipc=_schema_ipc(schema),
        table_schema=table_schema,
        partition_by=list(partition_by or []),
        configuration=dict(configuration or {}),
        enable_deletion_vectors=enable_deletion_vectors,
        predicate=predicate,
        time_zone=time_zone,
        schema_mode=schema_mode,
        operation=operation,
        operation_mode=operation_mode,
        txn_app_id=txn_app_id,
        txn_version=txn_version,
        output_mode=output_mode,
    )


def remove_files(
    table_uri: str,
    adds: Iterable[dict[str, Any]],
    *,
    storage_options: dict[str, str] | None = None,
) -> None:
    """Remove data files :func:`write_files` wrote (``adds``, their add actions)
    for a write given up before :func:`commit_files`; files the table's latest
    version references are kept."""
    _core.remove_uncommitted(table_uri, dict(storage_options or {}), [json.dumps(a) for a in adds])


def table_property_name(key: str) -> str | None:
    """The canonical spelling of the table property ``key`` given in any case
    (``"delta.enabledeletionvectors"`` -> ``"delta.enableDeletionVectors"``;
    ``delta.feature.<name>`` of a known feature too), as Delta keeps it; None
    for a key Delta does not know. Spark lower-cases a data source's options."""
    return _core.canonical_table_property(key)


def prepare_create(schema: pa.Schema, *, configuration: dict[str, str] | None = None) -> str:
    """The schema (Delta's JSON ``schemaString``) of a table to be created with
    ``configuration`` from data files written apart: with column mapping
    (``delta.columnMapping.mode`` ``"name"`` or ``"id"``) every column, nested
    ones too, gets its field id and ``col-<uuid>`` physical name here, once, as
    Delta Spark assigns them. Give it as ``table_schema`` (with the same
    ``configuration``) to every :func:`write_files` call and to the
    :func:`commit_files` that creates the table. Without column mapping it is
    ``schema`` as Delta writes it."""
    return _core.prepare_create(schema.serialize().to_pybytes(), dict(configuration or {}))


def create_table(
    table_uri: str,
    schema: pa.Schema,
    adds: list[dict[str, Any]],
    *,
    partition_by: list[str] | None = None,
    storage_options: dict[str, str] | None = None,
    configuration: dict[str, str] | None = None,
    enable_deletion_vectors: bool = True,
) -> int:
    """Commit version 0 of a new table whose data files are already written:
    :func:`commit_files` with ``mode="error"``. Returns the version (0)."""
    return commit_files(
        table_uri,
        adds,
        mode="error",
        schema=schema,
        partition_by=partition_by,
        storage_options=storage_options,
        configuration=configuration,
        enable_deletion_vectors=enable_deletion_vectors,
    )


def enable_deletion_vectors(table: DeltaTable) -> int:
    """Upgrade the table's protocol to reader 3 / writer 7 with the deletionVectors
    feature (keeping the features its old versions implied) and set
    ``delta.enableDeletionVectors=true``, as one commit. Returns the new version;
    a no-op (returns the current version) if DVs are already enabled."""
    return table.enable_deletion_vectors()
