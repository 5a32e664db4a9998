"""deltadv.spark on plain PySpark, without Delta Spark: read with a filter, DELETE,
UPDATE, MERGE (update, delete and insert clauses), writes through Spark,
``format("deltadv")`` (read and ``df.write``, or its refusal where PySpark lacks the
Python data source API), and the parsing of Spark's ``explain()`` text that MERGE
and the writers rely on.

scripts/check-spark-min.sh runs this file with the lowest and the highest PySpark
deltadv claims (pyproject's ``spark`` extra: 3.5 and 4.3) and no Delta Spark jars;
the main suite runs it with the test extra's pin (4.2). Expected rows are computed
with pyarrow from the input data, and deltadv's own reader must agree with them too."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyspark
import pytest
from pyspark.sql import functions as F

import deltadv
from deltadv import spark as dspark
from deltadv.exceptions import UnsupportedSparkError
from deltadv.write import write_table

N = 3000
COLUMNS = ["id", "part", "value", "ts", "ntz"]
PYSPARK = tuple(int(p) for p in pyspark.__version__.split(".")[:2])
#: PySpark 4.1 is the first with the Python data source API (with filters) that
#: ``format("deltadv")`` needs; 3.5 and 4.0 refuse it with UnsupportedSparkError.
DATA_SOURCE = PYSPARK >= (4, 1)


def _data(n: int = N, ids: list[int] | None = None, scale: float = 0.5) -> pa.Table:
    """Rows ``ids`` (default ``range(n)``) as the Spark frames of :func:`_frame` make them."""
    column = pa.array(range(n) if ids is None else ids, pa.int64())
    seconds = pc.multiply(column, 1_000_000)
    return pa.table(
        {
            "id": column,
            "part": pa.array(["abc"[i % 3] for i in column.to_pylist()]),
            "value": pc.multiply(column.cast(pa.float64()), scale),
            "ts": seconds.cast(pa.timestamp("us", tz="UTC")),
            "ntz": seconds.cast(pa.timestamp("us")),
        }
    )


def _frame(ids: Any, scale: float = 0.5) -> Any:
    """A Spark frame of ids (``id`` column) with :func:`_data`'s columns, computed by Spark."""
    return ids.selectExpr(
        "id",
        "substr('abc', CAST(id % 3 AS INT) + 1, 1) AS part",
        f"CAST(id AS DOUBLE) * {scale} AS value",
        "timestamp_seconds(id) AS ts",
        "CAST(timestamp_seconds(id) AS TIMESTAMP_NTZ) AS ntz",
    )


def _sorted(table: pa.Table) -> dict[str, list[Any]]:
    table = table.sort_by("id")
    return {name: table[name].to_pylist() for name in COLUMNS}


def _spark_rows(df: Any) -> dict[str, list[Any]]:
    """The frame's rows through Spark's own Arrow collect (``toArrow``; PySpark 3.5
    has only the classic session's ``_collect_as_arrow``), not deltadv's."""
    if hasattr(type(df), "toArrow"):
        return _sorted(df.toArrow())
    return _sorted(pa.Table.from_batches(df._collect_as_arrow()))


def test_delete_then_read_through_spark(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    data = _data()
    write_table(path, data, partition_by=["part"], rows_per_file=500)
    table = dspark.DeltaTable.forPath(spark, path)
    ids, value = data["id"], data["value"]

    # Outside deltadv's predicate subset (`&`): Spark evaluates it on the executors.
    first = pc.and_(pc.equal(pc.bit_wise_and(ids, 7), 0), pc.less(value, 1000))
    metrics = table.delete("(id & 7) = 0 AND value < 1000")
    assert metrics["num_deleted_rows"] == pc.sum(first).as_py() > 0
    # Partition-only: whole files removed unread.
    second = pc.equal(data["part"], "c")
    table.delete("part = 'c'")
    # In the subset: files pruned by stats, Spark evaluates the rest.
    third = pc.greater_equal(ids, 2500)
    table.delete("id >= 2500")

    gone = pc.or_(pc.or_(first, second), third)
    expected = _sorted(data.filter(pc.invert(gone)))
    assert len(expected["id"]) == N - pc.sum(gone).as_py()
    assert _sorted(deltadv.DeltaTable(path).to_pyarrow()) == expected
    assert _spark_rows(dspark.read(spark, path)) == expected
    few = data.filter(pc.and_(pc.invert(gone), pc.less(ids, 100)))
    assert _spark_rows(dspark.read(spark, path, filter="id < 100")) == _sorted(few)
    assert _spark_rows(table.toDF().filter("id < 100")) == _sorted(few)
    if not DATA_SOURCE:
        return
    dspark.register(spark, filter_pushdown=True)
    assert _spark_rows(spark.read.format("deltadv").load(path)) == expected
    pushed = spark.read.format("deltadv").option("filterPushdown", "true").load(path)
    assert _spark_rows(pushed.filter("id < 100")) == _sorted(few)


def test_update_and_merge_through_spark(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "m")
    n = 300
    data = _data(n)
    write_table(path, data, partition_by=["part"], rows_per_file=60)
    table = dspark.DeltaTable.forPath(spark, path)
    ids = data["id"]

    # UPDATE: value + 1000 where id % 5 = 0.
    hit = _multiple(ids, 5)
    metrics = table.update("id % 5 = 0", {"value": "value + 1000"})
    assert metrics["num_updated_rows"] == pc.sum(hit).as_py() == n // 5
    value = pc.if_else(hit, pc.add(data["value"], 1000.0), data["value"])
    expected = data.set_column(2, "value", value)

    # MERGE, a small source (broadcast; its rows collected on the driver): ids
    # 250..349; matched ids divisible by 4 deleted, the other matched get the
    # source's value (id * 2), ids 300..349 inserted.
    source = _frame(spark.range(250, 350), scale=2.0)
    metrics = (
        table.alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedDelete("s.id % 4 = 0")
        .whenMatchedUpdate(set={"value": "s.value"})
        .whenNotMatchedInsertAll()
        .execute()
    )
    src = _data(ids=list(range(250, 350)), scale=2.0)
    matched = pc.greater_equal(expected["id"], 250)
    gone = pc.and_(matched, _multiple(expected["id"], 4))
    new_value = pc.if_else(matched, pc.multiply(expected["id"].cast(pa.float64()), 2.0), value)
    expected = expected.set_column(2, "value", new_value).filter(pc.invert(gone))
    inserted = src.filter(pc.greater_equal(src["id"], n))
    expected = pa.concat_tables([expected, inserted])
    assert metrics["num_target_rows_deleted"] == pc.sum(gone).as_py() > 0
    assert metrics["num_target_rows_updated"] == pc.sum(matched).as_py() - pc.sum(gone).as_py()
    assert metrics["num_target_rows_inserted"] == inserted.num_rows == 50

    # MERGE, a source Spark cannot size (a local list: joined, not broadcast),
    # insert only: id 10 matches (nothing happens), 1000 and 1001 are inserted.
    listed = _frame(spark.createDataFrame([(10,), (1000,), (1001,)], "id long"))
    metrics = (
        table.alias("t").merge(listed.alias("s"), "t.id = s.id").whenNotMatchedInsertAll().execute()
    )
    assert metrics["num_target_rows_inserted"] == 2
    expected = pa.concat_tables([expected, _data(ids=[1000, 1001])])

    assert _sorted(deltadv.DeltaTable(path).to_pyarrow()) == _sorted(expected)
    # PURGE rewrites the files with deletion vectors (mapInArrow tasks); same rows.
    assert table.purge()["num_deletion_vectors_removed"] > 0
    assert _spark_rows(dspark.read(spark, path)) == _sorted(expected)
    operations = [r["operation"] for r in table.history().collect()]
    assert operations[:4] == ["REORG", "MERGE", "MERGE", "UPDATE"]


def _multiple(values: pa.ChunkedArray, k: int) -> pa.ChunkedArray:
    return pc.equal(pc.subtract(values, pc.multiply(pc.divide(values, k), k)), 0)


def test_format_deltadv(spark: Any, tmp_path: Path) -> None:
    """PySpark >= 4.1: ``format("deltadv")`` reads, ``df.write.format("deltadv")``
    creates and appends. Older: register refuses, naming the version and the
    functions to use instead."""
    path = str(tmp_path / "f")
    if not DATA_SOURCE:
        version = re.escape(f"PySpark {pyspark.__version__}")
        with pytest.raises(UnsupportedSparkError, match=version) as e:
            dspark.register(spark)
        assert "deltadv.spark.read" in str(e.value)
        assert "deltadv.spark.write_table" in str(e.value)
        with pytest.raises(UnsupportedSparkError, match=r"PySpark 4\.1 or later"):
            importlib.import_module("deltadv.spark.datasource")
        return
    dspark.register(spark)
    first = _frame(spark.range(0, 200, 1, 2))
    first.write.format("deltadv").mode("append").save(path)
    _frame(spark.range(200, 300, 1, 2)).write.format("deltadv").mode("append").save(path)
    expected = _sorted(_data(300))
    assert _sorted(deltadv.DeltaTable(path).to_pyarrow()) == expected
    assert deltadv.DeltaTable(path).version() == 1
    loaded = spark.read.format("deltadv").load(path)
    assert _spark_rows(loaded) == expected
    few = _data(300).filter(pc.less(_data(300)["id"], 10))
    assert _spark_rows(loaded.filter("id < 10")) == _sorted(few)


@pytest.mark.parametrize("partition_by", [[], ["part"]])
def test_write_through_spark(spark: Any, tmp_path: Path, partition_by: list[str]) -> None:
    path = str(tmp_path / "w")
    df = spark.range(0, N, numPartitions=3).selectExpr(
        "id",
        "substr('abc', CAST(id % 3 AS INT) + 1, 1) AS part",
        "CAST(id AS DOUBLE) * 0.5 AS value",
        "timestamp_seconds(id) AS ts",
        "CAST(timestamp_seconds(id) AS TIMESTAMP_NTZ) AS ntz",
    )
    dspark.write_table(df, path, partition_by=partition_by)
    written = deltadv.DeltaTable(path)
    assert written.schema().field("ts").type == pa.timestamp("us", tz="UTC")
    assert written.schema().field("ntz").type == pa.timestamp("us")
    assert _sorted(written.to_pyarrow()) == _sorted(_data())
    assert _spark_rows(dspark.read(spark, path)) == _sorted(_data())


def test_explain_parsing(spark: Any) -> None:
    """What MERGE and the writers read from ``explain()`` text, parsed on this
    PySpark: a frame's alias, Spark's size estimate, the join's key columns and a
    stage's partitions (where the text is not recognized they fall back to no
    alias, no size, no key pushdown and unknown partitions, each only slower)."""
    from deltadv.spark import _tasks, merge

    source = spark.createDataFrame([(1, "a"), (2, "b"), (2, "c")], "id long, v string")
    assert merge._alias_of(source.alias("s").filter("id > 0")) == "s"
    assert merge._alias_of(source) is None
    assert merge._alias_of(source.alias("s").selectExpr("id")) is None
    small = merge._estimated_bytes(spark.range(10))  # 10 longs
    assert small is not None and 0 < small <= 1024
    unknown = merge._estimated_bytes(source)  # a local list: Spark cannot size it
    assert unknown is not None and unknown > 10 * 1024 * 1024

    target = spark.range(0, 10, 1, 3).selectExpr("id", "'x' AS v").alias("t")
    joined = target.join(source.alias("s"), F.expr("t.id = s.id AND t.v <> s.v"))
    local = _tasks.collect_arrow(source)
    assert sorted(local.to_pylist(), key=str) == sorted(
        [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 2, "v": "c"}], key=str
    )
    assert merge._key_values(joined, local, {"id", "v"}) == {"id": [1, 2]}

    assert _tasks.stage_partitions(spark.range(0, 10, 1, 3)) == 3
    assert _tasks.stage_partitions(spark.range(0, 10).repartition(5, "id")) == 5
    assert _tasks.stage_partitions(spark.range(0, 10, 1, 3).coalesce(1)) == 1
    assert _sorted(_tasks.collect_arrow(_frame(spark.range(0, 50, 1, 3)))) == _sorted(_data(50))
