"""Task distribution for the Spark glue: Spark's split size, packing tasks into
partitions as Spark packs files, the DataFrame of task rows, and the
``mapInArrow`` bodies that run tasks on the executors. Over the public
``deltadv`` API only; shared by the read, DML, MERGE and data source modules."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from deltadv import ChangeTask, CompactTask, ScanTask

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

#: Spark's default split size (``spark.sql.files.maxPartitionBytes``).
DEFAULT_SPLIT_SIZE = 128 * 1024 * 1024


def to_arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark's Arrow exchange uses for ``schema`` (timestamps in UTC).
    PySpark 4.2 takes the zone as ``timezone=``; 4.1 has no such parameter and always
    converts timestamps to UTC."""
    import inspect

    from pyspark.sql.pandas.types import to_arrow_schema as convert

    if "timezone" in inspect.signature(convert).parameters:
        return convert(schema, timezone="UTC")
    return convert(schema)


def split_size(spark: Any) -> int:
    """Spark's own target split size (``spark.sql.files.maxPartitionBytes``)."""
    try:
        return int(spark._jsparkSession.sessionState().conf().filesMaxPartitionBytes())
    except Exception:  # Spark Connect or an older API: the documented default
        return DEFAULT_SPLIT_SIZE


def session_time_zone(spark: Any) -> str:
    """The session's ``spark.sql.session.timeZone`` (Spark Connect too): the zone
    Delta Spark reads TIMESTAMPs in for generated columns and CHECK constraints,
    passed to deltadv's writers as ``time_zone``."""
    return str(spark.conf.get("spark.sql.session.timeZone"))


#: Spark's default ``spark.sql.files.openCostInBytes``: what opening one more
#: file is worth, in bytes, when files are packed into partitions.
OPEN_COST = 4 * 1024 * 1024


def pack(sizes: Sequence[int], split_size: int, parallelism: int) -> list[list[int]]:
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


def task_frame(
    spark: Any, rows: list[tuple[Any, ...]], schema: str, sizes: Sequence[int] | None = None
) -> Any:
    """A DataFrame of ``rows`` (task descriptions, never credentials), distributed
    with ``parallelize``: no shuffle, so nothing of the work is written to Spark's
    local disks on the way to the executors. Without ``sizes``, one row per
    partition; with them (bytes each task reads), rows packed into partitions
    as Spark packs files (``pack``), so many small files make few Spark tasks."""
    sc = spark.sparkContext
    if sizes is None:
        return spark.createDataFrame(sc.parallelize(rows, max(1, len(rows))), schema)
    groups = pack(sizes, split_size(spark), sc.defaultParallelism)
    packed = [[rows[i] for i in g] for g in groups]
    rdd = sc.parallelize(packed, max(1, len(packed))).flatMap(lambda group: group)
    return spark.createDataFrame(rdd, schema)


#: The column of task rows that holds each task's JSON.
TASK_COLUMN = "task"

Body = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def task_reader(storage_options: dict[str, str]) -> Body:
    """The mapInArrow body: each input row is one task's JSON (no credentials);
    yield its rows. ``storage_options`` travel inside this function (pickled with
    it to the executors), never in the task rows."""

    def read_tasks(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for task in batch.column(TASK_COLUMN).to_pylist():
                yield from ScanTask(task, storage_options).read()

    return read_tasks


def compact_runner(table_uri: str, storage_options: dict[str, str]) -> Body:
    """The mapInArrow body of PURGE/OPTIMIZE: each input row is one bin's rewrite
    task (JSON, no credentials); one output row with the new files' add actions.
    Storage options travel inside this function, never in the rows."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for task in batch.column(TASK_COLUMN).to_pylist():
                added = CompactTask(table_uri, task, storage_options).rewrite()
                yield pa.record_batch([pa.array([added])], names=["added"])

    return run


def task_slot() -> int | None:
    """This Spark task's partition index: its slot for identity values (distinct
    across the tasks of one stage; see :func:`deltadv.write.write_files`). None
    outside a Spark task (on the driver)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return None if context is None else context.partitionId()


def task_slots(count: int | None) -> tuple[int | None, int | None]:
    """This Spark task's identity slot and the number of slots: ``count`` (the
    stage's partitions, known on the driver) when the task's index is below it,
    so its values interleave as Delta Spark's (``start + step * (index + k *
    count)``); else no count (values at ``index << 33``, unique still; see
    :func:`deltadv.write.write_files`). ``(None, None)`` outside a Spark task."""
    slot = task_slot()
    if slot is None:
        return None, None
    return slot, count if count is not None and slot < count else None


def stage_partitions(df: Any) -> int | None:
    """How many tasks a narrow stage over ``df`` (``mapInArrow``) runs: the
    partitions of its physical plan (a task whose index turns out past it takes
    a slot of unknown count, see :func:`task_slots`); None when Spark does not
    say."""
    try:
        execution = df._jdf.queryExecution()
        plan = execution.executedPlan()
        if plan.getClass().getSimpleName() == "AdaptiveSparkPlanExec":
            # Adaptive execution plans its stages when they run: the partitions
            # its input plan promises (it may coalesce them, never add).
            n = int(plan.inputPlan().outputPartitioning().numPartitions())
        else:
            # No stages to run first: the RDD is built, not computed.
            n = int(execution.toRdd().getNumPartitions())
    except Exception:  # internal APIs: without them, slots of unknown count
        return None
    return n if n > 0 else None


def change_writer(task: ChangeTask) -> Body:
    """The mapInArrow body of UPDATE/MERGE: the partition's change stream into
    ``task.prepare`` (new data files + one DV file; identity values in the task's
    slot); one row with its result."""

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        first = next(batches, None)
        if first is None:
            return
        data = pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], batches))
        prepared = task.prepare(data, task_slot())
        yield pa.record_batch([pa.array([prepared], pa.string())], names=["prepared"])

    return write
