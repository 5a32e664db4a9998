"""Creating Delta tables with deletion vectors enabled, and enabling DVs on an
existing table. Data files are written with pyarrow (with per-file stats:
numRecords, min/max, nullCount) and stored through deltadv's object-store layer;
every log commit (schema, protocol, metadata, put-if-absent) is made by the Rust
core: no Python code writes under ``_delta_log``."""

from __future__ import annotations

import io
import json
import math
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltadv._core import create_table as _core_create_table
from deltadv._core import put_object, remove_uncommitted_files
from deltadv.exceptions import TableAlreadyExistsError, TableNotFoundError
from deltadv.table import DeltaTable

#: Delta Spark truncates string stats to this many characters.
STRING_PREFIX = 32


def _stat_value(t: pa.DataType, v: Any, upper: bool) -> Any:
    """A min/max as Delta writes it, or None to leave it out."""
    if v is None:
        return None
    if pa.types.is_integer(t):
        return int(v)
    if pa.types.is_floating(t):
        return None if math.isnan(v) or math.isinf(v) else float(v)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        if len(v) <= STRING_PREFIX:
            return v
        return None if upper else v[:STRING_PREFIX]  # a prefix is a lower bound
    if pa.types.is_date32(t):
        return v.isoformat()
    if pa.types.is_timestamp(t):
        # milliseconds, as Delta Spark writes them (readers widen the max)
        text = v.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
        return text + ("Z" if t.tz is not None else "")
    return None


def file_stats(table: pa.Table) -> dict[str, Any]:
    """numRecords, minValues, maxValues and nullCount of the top-level columns."""
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        t = column.type
        if pa.types.is_nested(t):
            continue
        nulls[name] = column.null_count
        if column.null_count == len(column):
            continue
        if pa.types.is_floating(t) and pc.any(pc.is_nan(column)).as_py():
            continue
        mm = pc.min_max(column).as_py()
        lo, hi = _stat_value(t, mm["min"], False), _stat_value(t, mm["max"], True)
        if lo is not None:
            mins[name] = lo
        if hi is not None:
            maxs[name] = hi
    return {
        "numRecords": table.num_rows,
        "minValues": mins,
        "maxValues": maxs,
        "nullCount": nulls,
        "tightBounds": True,
    }


def _partition_value(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def write_data_files(
    table_uri: str,
    data: pa.Table,
    partition_by: list[str],
    storage_options: dict[str, str] | None = None,
    rows_per_file: int = 1_000_000,
) -> list[dict[str, Any]]:
    """Write ``data`` as parquet data files under the table root (one directory per
    partition, Hive style) and return their add actions. Files are new, uniquely
    named objects: nothing references them until a commit does."""
    options = dict(storage_options or {})
    now = int(time.time() * 1000)
    adds = []
    groups: Iterable[tuple[dict[str, Any], pa.Table]]
    if partition_by:
        keys = data.select(partition_by).group_by(partition_by).aggregate([]).to_pylist()
        groups = []
        for key in keys:
            mask = None
            for col, val in key.items():
                m = pc.is_null(data[col]) if val is None else pc.equal(data[col], val)
                mask = m if mask is None else pc.and_(mask, m)
            groups.append((key, data.filter(mask).drop_columns(partition_by)))
    else:
        groups = [({}, data)]
    for key, part in groups:
        directory = "".join(f"{c}={_hive(v)}/" for c, v in key.items())
        for start in range(0, max(part.num_rows, 1), rows_per_file):
            chunk = part.slice(start, rows_per_file)
            buf = io.BytesIO()
            pq.write_table(chunk, buf)
            name = f"{directory}part-{uuid.uuid4()}.snappy.parquet"
            put_object(table_uri, options, name, buf.getvalue(), True)
            adds.append(
                {
                    # add.path is a URI path: the object name, percent-encoded
                    "path": quote(name, safe="/="),
                    "partitionValues": {c: _partition_value(v) for c, v in key.items()},
                    "size": buf.tell(),
                    "modificationTime": now,
                    "dataChange": True,
                    "stats": json.dumps(file_stats(chunk)),
                }
            )
    return adds


def _hive(v: Any) -> str:
    """A partition directory value, escaped the Hive way (%XX for odd characters)."""
    if v is None:
        return "__HIVE_DEFAULT_PARTITION__"
    return quote(_partition_value(v) or "", safe=" -_.")


def write_table(
    table_uri: str,
    data: pa.Table | pa.RecordBatchReader | Any,
    *,
    partition_by: list[str] | None = None,
    storage_options: dict[str, str] | None = None,
    configuration: dict[str, str] | None = None,
    enable_deletion_vectors: bool = True,
    rows_per_file: int = 1_000_000,
) -> DeltaTable:
    """Create a new Delta table from Arrow data (anything with
    ``__arrow_c_stream__``), with ``delta.enableDeletionVectors=true`` by default
    and per-file stats. Raises TableAlreadyExistsError, before writing anything,
    if a table exists there; if another writer creates one meanwhile, raises
    CommitConflictError and removes the data files it wrote."""
    table = pa.table(data) if not isinstance(data, pa.Table) else data
    partition_by = list(partition_by or [])
    missing = [c for c in partition_by if c not in table.column_names]
    if missing:
        raise ValueError(f"partition column {missing[0]!r} is not in the data")
    check_no_table(table_uri, storage_options)
    adds: list[dict[str, Any]] = []
    with _removed_on_failure(table_uri, storage_options, adds):
        adds += write_data_files(table_uri, table, partition_by, storage_options, rows_per_file)
        return _create(
            table_uri,
            table.schema,
            adds,
            partition_by,
            storage_options,
            configuration,
            enable_deletion_vectors,
        )


def check_no_table(table_uri: str, storage_options: dict[str, str] | None) -> None:
    """TableAlreadyExistsError if a Delta table exists at ``table_uri``."""
    try:
        existing = DeltaTable(table_uri, storage_options=storage_options)
    except TableNotFoundError:
        return
    raise TableAlreadyExistsError(
        f"a Delta table already exists at {existing.table_uri} (version {existing.version()})"
    )


@contextmanager
def _removed_on_failure(
    table_uri: str, storage_options: dict[str, str] | None, adds: list[dict[str, Any]]
) -> Iterator[None]:
    """On any failure inside the block, remove the data files of ``adds`` (written
    but not committed), then re-raise."""
    try:
        yield
    except BaseException:
        if adds:
            paths = [a["path"] for a in adds]
            remove_uncommitted_files(table_uri, dict(storage_options or {}), paths)
        raise


def _create(
    table_uri: str,
    schema: pa.Schema,
    adds: list[dict[str, Any]],
    partition_by: list[str],
    storage_options: dict[str, str] | None,
    configuration: dict[str, str] | None,
    enable_deletion_vectors: bool,
) -> DeltaTable:
    create_table(
        table_uri,
        schema,
        adds,
        partition_by=partition_by,
        storage_options=storage_options,
        configuration=configuration,
        enable_deletion_vectors=enable_deletion_vectors,
    )
    return DeltaTable(table_uri, storage_options=storage_options)


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
    """Commit version 0 of a new table whose data files are already written under
    ``table_uri``: ``adds`` are their add actions (as in the log, deletion vectors
    allowed). The Delta schema, protocol and metadata are decided by deltadv's
    Rust core; the commit is created with put-if-absent (CommitConflictError if a
    table appeared meanwhile). Returns the version (0)."""
    return _core_create_table(
        table_uri,
        dict(storage_options or {}),
        schema.serialize().to_pybytes(),
        [json.dumps(a) for a in adds],
        list(partition_by or []),
        dict(configuration or {}),
        enable_deletion_vectors,
    )


def enable_deletion_vectors(table: DeltaTable) -> int:
    """Upgrade the table's protocol to reader 3 / writer 7 with the deletionVectors
    feature (keeping the features its old versions implied) and set
    ``delta.enableDeletionVectors=true``, as one commit. Returns the new version;
    a no-op (returns the current version) if DVs are already enabled."""
    table.update_incremental()
    return table._raw.enable_deletion_vectors()
