"""Task distribution for the Spark glue: Spark's split size, packing tasks into
partitions as Spark packs files, the DataFrame of task rows, and the
``mapInArrow`` bodies that run tasks on the executors. Over the public
``deltadv`` API only; shared by the read, DML, MERGE and data source modules."""

from __future__ import annotations

import itertools
import os
import re
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from deltadv import ChangeTask, CompactTask, ScanTask, set_num_threads
from deltadv.spark.workers import require_workers

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

#: Spark's default split size (``spark.sql.files.maxPartitionBytes``).
DEFAULT_SPLIT_SIZE = 128 * 1024 * 1024

#: Rows per batch a Spark task decodes and hands to the JVM (``ScanTask.read``'s
#: default; 65,536 measured no faster: the decode's CPU is the same, see
#: benches/README.md, bench_spark_read.py).
TASK_BATCH_ROWS = 8192


def to_arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark's Arrow exchange uses for ``schema`` (timestamps in UTC).
    PySpark 4.2 takes the zone as ``timezone=``; 4.1 has no such parameter and always
    converts timestamps to UTC."""
    import inspect

    from pyspark.sql.pandas.types import to_arrow_schema as convert

    if "timezone" in inspect.signature(convert).parameters:
        return convert(schema, timezone="UTC")
    return convert(schema)


def byte_size(text: str) -> int:
    """A Spark byte-size setting (``"128MB"``, ``"10m"``, ``"134217728"``, ``"-1"``)
    in bytes, as Spark's ``JavaUtils.byteStringAsBytes`` reads it."""
    match = re.fullmatch(r"\s*(-?\d+)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _BYTE_UNITS:
        raise ValueError(f"a byte size such as '128MB' or '134217728', got {text!r}")
    return int(match.group(1)) * _BYTE_UNITS[unit]


_BYTE_UNITS = {
    "": 1,
    "b": 1,
    **{u: 1024**i for i, u in enumerate(("k", "m", "g", "t", "p"), 1)},
    **{u + "b": 1024**i for i, u in enumerate(("k", "m", "g", "t", "p"), 1)},
}


def conf_bytes(spark: Any, key: str, default: int) -> int:
    """The session's byte-size setting ``key`` through ``spark.conf`` (classic and
    Spark Connect alike), ``default`` (Spark's documented default) where unset."""
    value = spark.conf.get(key, None)
    return default if value is None else byte_size(str(value))


def split_size(spark: Any) -> int:
    """Spark's own target split size (``spark.sql.files.maxPartitionBytes``,
    128 MiB where unset)."""
    return conf_bytes(spark, "spark.sql.files.maxPartitionBytes", DEFAULT_SPLIT_SIZE)


#: Spark's default ``spark.sql.autoBroadcastJoinThreshold``.
DEFAULT_BROADCAST_THRESHOLD = 10 * 1024 * 1024


def broadcast_threshold(spark: Any) -> int:
    """``spark.sql.autoBroadcastJoinThreshold`` in bytes (10 MiB where unset; -1:
    never broadcast)."""
    return conf_bytes(spark, "spark.sql.autoBroadcastJoinThreshold", DEFAULT_BROADCAST_THRESHOLD)


#: The default parallelism measured per session (with a job): weakly keyed by
#: the session object, so a new session measures again and a dropped one is
#: forgotten.
_MEASURED_PARALLELISM: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def default_parallelism(spark: Any) -> int:
    """How many partitions Spark gives a leaf of local rows or a ``range``
    (``SparkSession.leafNodeDefaultParallelism``), read without a SparkContext so
    that it works on Spark Connect too: ``spark.sql.leafNodeDefaultParallelism``,
    else ``spark.default.parallelism``, else the cores of a ``local[N]`` master
    (``local[*]``: this machine's), else measured: the partitions of a
    ``spark.range`` (one small job, no shuffle: its last row's partition), once
    per session."""
    import os

    from pyspark.sql import functions as F

    for key in ("spark.sql.leafNodeDefaultParallelism", "spark.default.parallelism"):
        value = spark.conf.get(key, None)
        if value is not None:
            return max(1, int(value))
    master = str(spark.conf.get("spark.master", None) or "")
    local = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?", master)
    if local is not None:
        cores = local.group(1)
        if cores is None:
            return 1
        return max(1, os.cpu_count() or 1) if cores == "*" else max(1, int(cores))
    cached = _MEASURED_PARALLELISM.get(spark)
    if cached is not None:
        return cached
    last = spark.range(0, 1 << 16).select(F.spark_partition_id()).tail(1)
    measured = int(last[0][0]) + 1 if last else 1
    _MEASURED_PARALLELISM[spark] = measured
    return measured


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
    """A DataFrame of ``rows`` (task descriptions, never credentials), one Spark
    partition per group of rows, without a SparkContext (Spark Connect too) and
    without a shuffle, so nothing of the work is written to Spark's local disks
    on the way to the executors: ``spark.range(groups, numPartitions=groups)``,
    each partition's one id turned into its group's rows by ``mapInArrow`` (the
    groups travel in its pickled function, in the stage's broadcast task
    binary). Without ``sizes``, one row a partition; with them (bytes each task
    reads), rows packed into partitions as Spark packs files (``pack``), so many
    small files make few Spark tasks. ``schema``: ``"name type, ..."`` with
    types ``string``, ``int`` or ``bigint``. First checks, once per session, that
    the workers import deltadv (:func:`deltadv.spark.workers.require_workers`)."""
    require_workers(spark)
    fields = []
    for part in schema.split(","):
        name, _, kind = part.strip().partition(" ")
        if kind.strip() not in _ARROW_TYPES:
            raise ValueError(f"task_frame: a column type of {sorted(_ARROW_TYPES)}, got {part!r}")
        fields.append(pa.field(name, _ARROW_TYPES[kind.strip()]))
    arrow_schema = pa.schema(fields)
    if sizes is None:
        groups = [[i] for i in range(len(rows))]
    else:
        groups = pack(sizes, split_size(spark), default_parallelism(spark))
    packed = [[rows[i] for i in g] for g in groups]

    def emit(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for group in batch.column("id").to_pylist():
                columns = list(zip(*packed[group], strict=True)) or [() for _ in arrow_schema]
                yield pa.record_batch(
                    [pa.array(c, f.type) for c, f in zip(columns, arrow_schema, strict=True)],
                    schema=arrow_schema,
                )

    n = max(1, len(packed))
    return spark.range(0, len(packed), 1, n).mapInArrow(emit, schema)


_ARROW_TYPES = {"string": pa.string(), "int": pa.int32(), "bigint": pa.int64()}


#: The column of task rows that holds each task's JSON.
TASK_COLUMN = "task"

Body = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def task_threads() -> None:
    """Size deltadv's threads for this Spark task (on an executor): the CPUs
    Spark gave it (``spark.task.cpus``, 1 by default), since each task is that
    many cores' worth of work there; ``DELTADV_NUM_THREADS`` set in the
    executor's environment wins. Nothing outside a Spark task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None or os.environ.get("DELTADV_NUM_THREADS"):
        return
    cpus = getattr(context, "cpus", None)
    try:
        set_num_threads(max(1, int(cpus())) if callable(cpus) else 1)
    except ValueError:
        # A reused worker whose runtime was built by a task given fewer CPUs:
        # it goes on with those (a matter of speed, not of results).
        pass


def task_reader(storage_options: dict[str, str]) -> Body:
    """The mapInArrow body: each input row is one task's JSON (no credentials);
    yield its rows, as they are decoded (their order within a partition does
    not matter to Spark), on the task's threads (:func:`task_threads`).
    ``storage_options`` travel inside this function (pickled with it to the
    executors), never in the task rows."""

    def read_tasks(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_threads()
        for batch in batches:
            for task in batch.column(TASK_COLUMN).to_pylist():
                yield from ScanTask(task, storage_options).read(
                    ordered=False, batch_size=TASK_BATCH_ROWS
                )

    return read_tasks


def compact_runner(table_uri: str, storage_options: dict[str, str]) -> Body:
    """The mapInArrow body of PURGE/OPTIMIZE: each input row is one bin's rewrite
    task (JSON, no credentials); one output row with the new files' add actions.
    Storage options travel inside this function, never in the rows."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_threads()
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


def collect_arrow(df: Any) -> pa.Table:
    """``df``'s rows on the driver as an Arrow table: ``DataFrame.toArrow`` (PySpark
    4), else (PySpark 3.5, which lacks it) each partition's batches written as
    Arrow IPC bytes by ``mapInArrow`` and collected: public API on classic and
    Spark Connect sessions alike, the batches exactly as Spark's Arrow exchange
    gives them (partition order kept)."""
    if hasattr(type(df), "toArrow"):
        return df.toArrow()

    def to_ipc(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, batch.schema) as writer:
                writer.write_batch(batch)
            yield pa.record_batch([pa.array([sink.getvalue().to_pybytes()], pa.binary())], ["ipc"])

    rows = df.mapInArrow(to_ipc, "ipc binary").collect()
    batches = [b for row in rows for b in pa.ipc.open_stream(row[0])]
    if not batches:
        return to_arrow_schema(df.schema).empty_table()
    return pa.Table.from_batches(batches)


def arrow_frame(spark: Any, table: pa.Table, schema: StructType) -> Any:
    """A DataFrame of ``table``'s rows as ``schema``: a local relation
    (``createDataFrame`` of an Arrow table, PySpark 4), else (PySpark 3.5, whose
    ``createDataFrame`` takes no Arrow table) one partition whose ``mapInArrow``
    emits the table's batches (the table travels in the pickled function)."""
    import pyspark

    if int(pyspark.__version__.split(".")[0]) >= 4:
        return spark.createDataFrame(table, schema)
    batches = table.to_batches()

    def emit(_: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from batches

    return spark.range(0, 1, 1, 1).mapInArrow(emit, schema)


def explain_text(df: Any, mode: str) -> str:
    """What ``df.explain(mode=mode)`` prints (classic and Spark Connect alike)."""
    import contextlib
    import io

    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        df.explain(mode=mode)
    return text.getvalue()


def stage_partitions(df: Any) -> int | None:
    """How many tasks a narrow stage over ``df`` (``mapInArrow``) runs: the
    partitions of the first exchange of its physical plan (adaptive execution may
    coalesce them, never add), else of its RDD (classic Spark: built, not
    computed) or its ``Range``'s splits; None when Spark does not say (a task
    whose index turns out past it takes a slot of unknown count, see
    :func:`task_slots`)."""
    physical = explain_text(df, "simple")
    exchange = re.search(r"Exchange (\w+)(\(.*)?", physical)
    n: int | None = None
    if exchange is not None:
        if exchange.group(1) == "SinglePartition":
            n = 1
        else:
            # hashpartitioning(k#1L, 4), RoundRobinPartitioning(3), ...: the last
            # argument of the partitioning is its number of partitions
            count = re.match(r"Exchange \w+\((?:.*, )?(\d+)\)", exchange.group(0))
            n = int(count.group(1)) if count else None
    else:
        try:
            n = int(df.rdd.getNumPartitions())
        except Exception:  # Spark Connect: no RDDs; a range says its splits
            splits = re.findall(r"Range \(.*splits=(\d+)\)", physical)
            n = int(splits[0]) if len(splits) == 1 else None
    return n if n is not None and n > 0 else None


def change_writer(task: ChangeTask) -> Body:
    """The mapInArrow body of UPDATE/MERGE: the partition's change stream into
    ``task.prepare`` (new data files + one DV file; identity values in the task's
    slot); one row with its result."""

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_threads()
        first = next(batches, None)
        if first is None:
            return
        data = pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], batches))
        prepared = task.prepare(data, task_slot())
        yield pa.record_batch([pa.array([prepared], pa.string())], names=["prepared"])

    return write
