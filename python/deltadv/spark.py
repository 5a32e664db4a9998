"""PySpark glue, in plain Python over deltadv's public API.

``read()`` plans scan tasks on the driver (one per live data file), builds a small
DataFrame with one row per task, and reads each task on the executors with
``DataFrame.mapInArrow``: the Rust core fetches the file and its deletion vector
and yields Arrow batches with the deleted rows already gone. Only the task's JSON
crosses to executors; the Rust runtime and object-store clients are created there,
per process.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from deltadv.table import DeltaTable, ScanTask

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

TASK_COLUMN = "task"


def _read_tasks(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: each input row is one task's JSON; yield its rows."""
    for batch in batches:
        for task in batch.column(TASK_COLUMN).to_pylist():
            yield from ScanTask(task).read()


DEFAULT_SPLIT_SIZE = 128 * 1024 * 1024


def _split_size(spark: SparkSession) -> int:
    """Spark's own target split size (``spark.sql.files.maxPartitionBytes``)."""
    try:
        return int(spark._jsparkSession.sessionState().conf().filesMaxPartitionBytes())
    except Exception:  # Spark Connect or an older API: the documented default
        return DEFAULT_SPLIT_SIZE


def read(
    spark: SparkSession,
    table_uri: str,
    version: int | None = None,
    columns: list[str] | None = None,
    filter: str | Column | None = None,
    storage_options: dict[str, str] | None = None,
    split_size: int | None = None,
) -> DataFrame:
    """Read a Delta table (deletion vectors applied) into a Spark DataFrame.

    ``filter`` (a SQL string or Column) is applied by Spark to the rows. A string
    in deltadv's predicate subset (see :meth:`deltadv.DeltaTable.scan`) also prunes
    files by partition values and stats, and row groups by parquet statistics,
    before anything is read; other strings and Columns are only applied by Spark.
    Files larger than ``split_size`` bytes (default: Spark's
    ``spark.sql.files.maxPartitionBytes``) are read as several tasks, split by
    row groups.
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    table = DeltaTable(table_uri, version=version, storage_options=storage_options)
    size = split_size if split_size is not None else _split_size(spark)
    tasks = None
    if isinstance(filter, str):
        try:
            tasks = table.scan_tasks(columns, filter, filter_rows=False, split_size=size)
        except ValueError:
            tasks = None  # outside deltadv's predicate subset: Spark alone filters
    if tasks is None:
        tasks = table.scan_tasks(columns, split_size=size)
    arrow_schema = table.scan_schema(columns)
    spark_schema = from_arrow_schema(arrow_schema, prefer_timestamp_ntz=True)
    if not tasks:
        df = spark.createDataFrame([], spark_schema)
    else:
        task_df = spark.createDataFrame([(t.json,) for t in tasks], f"{TASK_COLUMN} string")
        task_df = task_df.repartition(len(tasks))
        df = task_df.mapInArrow(_read_tasks, spark_schema)
    return df.filter(filter) if filter is not None else df
