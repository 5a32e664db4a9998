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


def read(
    spark: SparkSession,
    table_uri: str,
    version: int | None = None,
    columns: list[str] | None = None,
    filter: str | Column | None = None,
    storage_options: dict[str, str] | None = None,
) -> DataFrame:
    """Read a Delta table (deletion vectors applied) into a Spark DataFrame.

    ``filter`` (a SQL string or Column) is applied by Spark after the scan.
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    table = DeltaTable(table_uri, version=version, storage_options=storage_options)
    tasks = table.scan_tasks(columns)
    arrow_schema = tasks[0].schema() if tasks else _projected(table.schema(), columns)
    spark_schema = from_arrow_schema(arrow_schema, prefer_timestamp_ntz=True)
    if not tasks:
        df = spark.createDataFrame([], spark_schema)
    else:
        task_df = spark.createDataFrame([(t.json,) for t in tasks], f"{TASK_COLUMN} string")
        task_df = task_df.repartition(len(tasks))
        df = task_df.mapInArrow(_read_tasks, spark_schema)
    return df.filter(filter) if filter is not None else df


def _projected(schema: pa.Schema, columns: list[str] | None) -> pa.Schema:
    if columns is None:
        return schema
    return pa.schema([schema.field(c) for c in columns])
