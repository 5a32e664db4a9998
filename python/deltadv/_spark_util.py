"""Helpers shared by ``deltadv.spark`` and ``deltadv.datasource`` (so neither
imports the other at module level)."""

from __future__ import annotations

from collections.abc import Sequence
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


#: Spark's default ``spark.sql.files.openCostInBytes``: what opening one more
#: file is worth, in bytes, when files are packed into partitions.
OPEN_COST = 4 * 1024 * 1024


def _pack(sizes: Sequence[int], split_size: int, parallelism: int) -> list[list[int]]:
    """Task indexes grouped into partitions the way Spark packs files: at most
    ``min(split_size, max(OPEN_COST, total / parallelism))`` bytes a partition
    (each task counted with ``OPEN_COST`` more), largest tasks first, next fit;
    each group in task order."""
    total = sum(s + OPEN_COST for s in sizes)
    limit = min(split_size, max(OPEN_COST, total // max(1, parallelism)))
    groups: list[list[int]] = []
    current: list[int] = []
    filled = 0
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        if current and filled + sizes[i] > limit:
            groups.append(sorted(current))
            current, filled = [], 0
        current.append(i)
        filled += sizes[i] + OPEN_COST
    if current:
        groups.append(sorted(current))
    return groups


def _task_frame(
    spark: Any, rows: list[tuple[Any, ...]], schema: str, sizes: Sequence[int] | None = None
) -> Any:
    """A DataFrame of ``rows`` (task descriptions, never credentials), distributed
    with ``parallelize``: no shuffle, so nothing of the work is written to Spark's
    local disks on the way to the executors. Without ``sizes``, one row per
    partition; with them (bytes each task reads), rows packed into partitions
    as Spark packs files (``_pack``), so many small files make few Spark tasks."""
    sc = spark.sparkContext
    if sizes is None:
        return spark.createDataFrame(sc.parallelize(rows, max(1, len(rows))), schema)
    groups = _pack(sizes, _split_size(spark), sc.defaultParallelism)
    packed = [[rows[i] for i in g] for g in groups]
    rdd = sc.parallelize(packed, max(1, len(packed))).flatMap(lambda group: group)
    return spark.createDataFrame(rdd, schema)
