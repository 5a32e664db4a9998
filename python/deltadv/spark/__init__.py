"""PySpark glue, in plain Python over deltadv's public API.

Three entry points: :func:`read` (a table, or its Change Data Feed, into a
DataFrame), ``spark.read.format("deltadv")`` after :func:`register` (PySpark's
Python Data Source API), and :class:`DeltaTable` (``DeltaTable.forPath(spark,
path)``: DELETE, UPDATE, MERGE, OPTIMIZE, PURGE, VACUUM, RESTORE, history, as
Delta Spark shapes them); :func:`write_table` writes a DataFrame.

| module | what |
|---|---|
| :mod:`deltadv.spark.read` | ``read`` and ``register`` |
| :mod:`deltadv.spark.dml` | ``DeltaTable`` (Spark-side commands) and ``write_table`` |
| :mod:`deltadv.spark.merge` | ``DeltaMergeBuilder``: MERGE from Spark |
| :mod:`deltadv.spark.datasource` | the ``deltadv`` Python data source |
| :mod:`deltadv.spark.workers` | ``ship``: deltadv onto the workers; the check that they import it |
| ``deltadv.spark._tasks`` | task distribution: split size, packing, mapInArrow bodies |
"""

from deltadv.spark._tasks import TASK_COLUMN
from deltadv.spark.dml import HISTORY_SCHEMA, DeltaTable, write_table
from deltadv.spark.merge import DUPLICATE_ERROR, DeltaMergeBuilder
from deltadv.spark.read import read, register
from deltadv.spark.workers import ship
from deltadv.table import (
    DV_FILE_TARGET_SIZE,
    MAX_DELETED_ROWS_RATIO,
    TARGET_FILE_SIZE,
    ChangeTask,
    PartitionFilters,
    ScanTask,
)

__all__ = [
    "DUPLICATE_ERROR",
    "DV_FILE_TARGET_SIZE",
    "HISTORY_SCHEMA",
    "MAX_DELETED_ROWS_RATIO",
    "TARGET_FILE_SIZE",
    "TASK_COLUMN",
    "ChangeTask",
    "DeltaMergeBuilder",
    "DeltaTable",
    "PartitionFilters",
    "ScanTask",
    "read",
    "register",
    "ship",
    "write_table",
]
