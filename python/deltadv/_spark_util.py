"""Helpers shared by ``deltadv.spark`` and ``deltadv.datasource`` (so neither
imports the other at module level)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

#: Spark's default split size (``spark.sql.files.maxPartitionBytes``).
DEFAULT_SPLIT_SIZE = 128 * 1024 * 1024


def _to_arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark's Arrow exchange uses for ``schema`` (timestamps in UTC).
    PySpark 4.2 takes the zone as ``timezone=``; 4.1 has no such parameter and always
    converts timestamps to UTC."""
    import inspect

    from pyspark.sql.pandas.types import to_arrow_schema as convert

    if "timezone" in inspect.signature(convert).parameters:
        return convert(schema, timezone="UTC")
    return convert(schema)


def _split_size(spark: Any) -> int:
    """Spark's own target split size (``spark.sql.files.maxPartitionBytes``)."""
    try:
        return int(spark._jsparkSession.sessionState().conf().filesMaxPartitionBytes())
    except Exception:  # Spark Connect or an older API: the documented default
        return DEFAULT_SPLIT_SIZE


def _task_frame(spark: Any, rows: list[tuple[Any, ...]], schema: str) -> Any:
    """A DataFrame of ``rows`` (task descriptions, never credentials) with one
    row per partition, distributed with ``parallelize``: no shuffle, so nothing
    of the work is written to Spark's local disks on the way to the executors."""
    rdd = spark.sparkContext.parallelize(rows, max(1, len(rows)))
    return spark.createDataFrame(rdd, schema)
