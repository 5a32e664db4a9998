"""Reading Delta tables into Spark, in plain Python over deltadv's public API.

``read()`` plans scan tasks on the driver (one per live data file), distributes
them with ``parallelize`` (one row per task and partition, no shuffle), and
reads each task on the executors with ``DataFrame.mapInArrow``: the Rust core
fetches the file and its deletion vector and streams Arrow batches with the
deleted rows already gone. Only the task's JSON crosses to executors in rows;
storage options travel inside the mapInArrow function; the Rust runtime and
object-store clients are created there, per process.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from deltadv import DeltaTable as _LocalTable
from deltadv import ScanTask, UnsupportedPredicateError
from deltadv.spark._tasks import TASK_COLUMN, task_frame, task_reader
from deltadv.spark._tasks import split_size as _session_split_size
from deltadv.typecheck import check_arg, check_args, check_str_list

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


def register(
    spark: SparkSession,
    *,
    filter_pushdown: bool = False,
    storage_options: dict[str, str] | None = None,
) -> None:
    """Register ``spark.read.format("deltadv")`` (and ``df.write.format("deltadv")``)
    with this session. With ``filter_pushdown`` Spark hands simple filters to
    deltadv for file and row-group pruning (see deltadv.datasource for the caveat
    of Spark 4.2).

    ``storage_options`` are used by every ``format("deltadv")`` read and write of
    the session (options a query gives win over them). Pass credentials here, not
    as ``.option(...)``: Spark Connect writes a query's options in clear text to
    the event log, while these travel only inside the registered class."""
    from deltadv.spark.datasource import register_data_source

    check_arg("filter_pushdown", filter_pushdown, bool)
    check_arg("storage_options", storage_options, dict, optional=True)

    register_data_source(spark, filter_pushdown=filter_pushdown, storage_options=storage_options)


def read(
    spark: SparkSession,
    table_uri: str,
    version: int | None = None,
    columns: list[str] | None = None,
    filter: str | Column | None = None,
    storage_options: dict[str, str] | None = None,
    split_size: int | None = None,
    *,
    change_data_feed: bool = False,
    starting_version: int | None = None,
    ending_version: int | None = None,
    starting_timestamp: datetime | str | None = None,
    ending_timestamp: datetime | str | None = None,
    with_row_tracking: bool = False,
) -> DataFrame:
    """Read a Delta table (deletion vectors applied) into a Spark DataFrame.

    ``filter`` (a SQL string or Column) is applied by Spark to the rows. A string
    in deltadv's predicate subset (see :meth:`deltadv.DeltaTable.scan`) also prunes
    files by partition values and stats, and row groups by parquet statistics,
    before anything is read; other strings and Columns are only applied by Spark.
    Files larger than ``split_size`` bytes (default: Spark's
    ``spark.sql.files.maxPartitionBytes``) are read as several tasks, split by
    row groups.

    With ``change_data_feed=True`` the DataFrame is the table's Change Data Feed
    between ``starting_version``/``starting_timestamp`` and
    ``ending_version``/``ending_timestamp`` (see :meth:`deltadv.DeltaTable.load_cdf`):
    one Spark task per changed file, the table's columns (or ``columns``) then
    ``_change_type``, ``_commit_version`` and ``_commit_timestamp``.

    ``with_row_tracking=True`` (tables with row tracking) adds each row's
    ``_row_id`` and ``_row_commit_version`` after the columns, as
    :meth:`deltadv.DeltaTable.scan` does: the values Delta Spark shows as
    ``_metadata.row_id`` and ``_metadata.row_commit_version``. Each task carries
    its file's ``baseRowId`` and ``defaultRowCommitVersion`` (and the table's
    materialized column names), and the executors compute them. A table without
    row tracking raises ``ValueError``.
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    _check_read_args(
        table_uri,
        version,
        columns,
        filter,
        storage_options,
        split_size,
        change_data_feed,
        (starting_version, ending_version),
        (starting_timestamp, ending_timestamp),
        with_row_tracking,
    )
    if change_data_feed:
        if with_row_tracking:
            raise ValueError(
                "with_row_tracking reads the table's rows, not its change data feed "
                "(change_data_feed=True)"
            )
        if version is not None:
            raise ValueError("a change data feed read takes starting/ending versions, not version")
        table = _LocalTable(table_uri, storage_options=storage_options)
        arrow_schema, tasks = table.cdf_tasks(
            starting_version, ending_version, starting_timestamp, ending_timestamp, columns
        )
        df = _read_tasks(spark, tasks, from_arrow_schema(arrow_schema, prefer_timestamp_ntz=True))
        return df.filter(filter) if filter is not None else df
    range_given = (starting_version, ending_version, starting_timestamp, ending_timestamp)
    if any(v is not None for v in range_given):
        raise ValueError("starting/ending versions and timestamps need change_data_feed=True")
    table = _LocalTable(table_uri, version=version, storage_options=storage_options)
    size = split_size if split_size is not None else _session_split_size(spark)
    tasks = None
    if isinstance(filter, str):
        try:
            tasks = table.scan_tasks(
                columns,
                filter,
                filter_rows=False,
                split_size=size,
                with_row_tracking=with_row_tracking,
            )
        except UnsupportedPredicateError:
            tasks = None  # outside deltadv's predicate subset: Spark alone filters
    if tasks is None:
        tasks = table.scan_tasks(columns, split_size=size, with_row_tracking=with_row_tracking)
    arrow_schema = table.scan_schema(columns, with_row_tracking=with_row_tracking)
    df = _read_tasks(spark, tasks, from_arrow_schema(arrow_schema, prefer_timestamp_ntz=True))
    return df.filter(filter) if filter is not None else df


def _read_tasks(spark: SparkSession, tasks: list[ScanTask], schema: Any) -> DataFrame:
    """A DataFrame of the rows of ``tasks`` (one Spark task each), as ``schema``."""
    if not tasks:
        return spark.createDataFrame([], schema)
    rows = [(t.json,) for t in tasks]
    task_df = task_frame(spark, rows, f"{TASK_COLUMN} string", [t.size for t in tasks])
    return task_df.mapInArrow(task_reader(tasks[0].storage_options), schema)


def _check_read_args(
    table_uri: Any,
    version: Any,
    columns: Any,
    filter: Any,
    storage_options: Any,
    split_size: Any,
    change_data_feed: Any,
    versions: tuple[Any, Any],
    timestamps: tuple[Any, Any],
    with_row_tracking: Any,
) -> None:
    """``read()``'s arguments checked by type (TypeError naming the argument)."""
    from pyspark.sql import Column

    check_str_list("columns", columns)
    check_args(
        {
            "table_uri": (table_uri, str, False),
            "version": (version, int, True),
            "filter": (filter, (str, Column), True),
            "storage_options": (storage_options, dict, True),
            "split_size": (split_size, int, True),
            "change_data_feed": (change_data_feed, bool, False),
            "starting_version": (versions[0], int, True),
            "ending_version": (versions[1], int, True),
            "starting_timestamp": (timestamps[0], (datetime, str), True),
            "ending_timestamp": (timestamps[1], (datetime, str), True),
            "with_row_tracking": (with_row_tracking, bool, False),
        },
        where="deltadv.spark.read",
    )
