"""deltadv.spark on plain PySpark, without Delta Spark: read (``dspark.read`` and
``format("deltadv")``), DELETE and write through Spark.

scripts/check-spark-min.sh runs this file with the lowest PySpark deltadv claims
(pyproject's ``spark`` extra) and no Delta Spark jars; the main suite runs it with the
highest (the test extra's pin). Expected rows are computed with pyarrow from the
input data, and deltadv's own reader must agree with them too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import deltadv
from deltadv import spark as dspark
from deltadv.write import write_table

N = 3000
COLUMNS = ["id", "part", "value", "ts", "ntz"]


def _data(n: int = N) -> pa.Table:
    ids = pa.array(range(n), pa.int64())
    seconds = pc.multiply(ids, 1_000_000)
    return pa.table(
        {
            "id": ids,
            "part": pa.array(["abc"[i % 3] for i in range(n)]),
            "value": pc.multiply(ids.cast(pa.float64()), 0.5),
            "ts": seconds.cast(pa.timestamp("us", tz="UTC")),
            "ntz": seconds.cast(pa.timestamp("us")),
        }
    )


def _sorted(table: pa.Table) -> dict[str, list[Any]]:
    table = table.sort_by("id")
    return {name: table[name].to_pylist() for name in COLUMNS}


def _spark_rows(df: Any) -> dict[str, list[Any]]:
    return _sorted(df.toArrow())


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

    dspark.register(spark, filter_pushdown=True)
    assert _spark_rows(spark.read.format("deltadv").load(path)) == expected
    pushed = spark.read.format("deltadv").option("filterPushdown", "true").load(path)
    few = data.filter(pc.and_(pc.invert(gone), pc.less(ids, 100)))
    assert _spark_rows(pushed.filter("id < 100")) == _sorted(few)
    assert _spark_rows(dspark.read(spark, path, filter="id < 100")) == _sorted(few)


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
