"""The Spark glue on Spark Connect (issue 26): every entry point run by a Connect
client (a subprocess, see the ``spark_connect`` fixture) on one table and by the
classic session on its twin; the results are equal and Delta Spark (the oracle,
in the JVM both share) reads both tables row for row. Task rows are made without
a SparkContext and without a shuffle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

N = 600

#: The operations, run the same on both sessions: ``ops(spark, path)`` -> results.
OPS = """
def ops(spark, path):
    from pyspark.sql import functions as F

    from deltadv import spark as dspark

    def clean(metrics):  # row counts (file layouts follow the twins' random file names)
        return {k: v for k, v in metrics.items() if "rows" in k or k in ("version", "operation")}

    out = {}
    read = dspark.read(spark, path, filter="id % 7 = 0").select("id").collect()
    out["read"] = sorted(r["id"] for r in read)
    dspark.register(spark)
    out["format"] = spark.read.format("deltadv").load(path).filter("part = 1").count()
    dt = dspark.DeltaTable.forPath(spark, path)
    out["toDF"] = dt.toDF().count()
    out["delete"] = clean(dt.delete("id % 5 = 0"))
    out["update"] = clean(dt.update("id % 11 = 0", {"s": "concat(s, '-u')"}))
    source = spark.createDataFrame(
        [(i, f"n{i}") for i in range(590, 620)], "id bigint, s string"
    )
    m = (
        dt.alias("t")
        .merge(source.alias("src"), "t.id = src.id")
        .whenMatchedUpdate(set={"s": "src.s"})
        .whenNotMatchedInsert(values={"id": "src.id", "part": "src.id % 3", "s": "src.s"})
        .execute()
    )
    out["merge"] = clean(m)
    out["purge"] = clean(dt.purge())
    out["optimize"] = clean(dt.optimize())
    out["restore"] = clean(dt.restoreToVersion(1))
    out["vacuum"] = dt.vacuum(1000).count()
    out["history"] = [r["operation"] for r in dt.history().collect()]
    changes = (
        spark.read.format("deltadv")
        .option("readChangeFeed", "true")
        .option("startingVersion", 1)
        .option("endingVersion", 1)
        .load(path)
        .select("id", "_change_type")
        .collect()
    )
    out["changes"] = sorted([r["id"], r["_change_type"]] for r in changes)
    frame = spark.range(0, 50).select(F.col("id"), (F.col("id") % 3).alias("part"))
    dspark.write_table(frame.selectExpr("id", "part", "'w' AS s"), path + "-w")
    # Column conditions (a string literal in one): history records them as SQL.
    import json

    w = dspark.DeltaTable.forPath(spark, path + "-w")
    out["delete_column"] = clean(w.delete((F.col("id") >= 45) & (F.col("s") == "w")))
    out["update_column"] = clean(w.update(F.col("id") < 3, {"s": F.lit("u")}))
    out["predicates"] = [
        json.loads(h["operationParameters"]["predicate"])
        for h in w.history().collect()
        if h["operation"] in ("DELETE", "UPDATE")
    ]
    out["written"] = sorted(r["id"] for r in dspark.read(spark, path + "-w").collect())
    return out
"""


def _make(spark: Any, path: str) -> None:
    (
        spark.range(0, N, numPartitions=3)
        .selectExpr("id", "id % 3 AS part", "concat('v', id) AS s")
        .write.format("delta")
        .partitionBy("part")
        .option("delta.enableDeletionVectors", "true")
        .option("delta.enableChangeDataFeed", "true")
        .save(path)
    )


def _oracle(spark: Any, path: str) -> list[tuple[Any, ...]]:
    rows = spark.read.format("delta").load(path).collect()
    return sorted((r["id"], r["part"], r["s"]) for r in rows)


def test_every_entry_point_on_spark_connect(
    delta_spark: Any, spark_connect: Any, tmp_path: Path
) -> None:
    classic, remote = str(tmp_path / "classic"), str(tmp_path / "connect")
    _make(delta_spark, classic)
    _make(delta_spark, remote)
    scope: dict[str, Any] = {}
    exec(OPS, scope)
    expected = scope["ops"](delta_spark, classic)
    got = spark_connect(OPS + "print(json.dumps(ops(spark, ARGS['path'])))\n", path=remote)
    assert got == expected
    # not vacuous: the operations did what they say, by the generating formula
    assert expected["read"] == list(range(0, N, 7))
    assert expected["delete"]["num_deleted_rows"] == N // 5
    assert expected["update"]["num_updated_rows"] == len(
        [i for i in range(N) if i % 11 == 0 and i % 5]
    )
    merged = expected["merge"]
    assert merged["num_target_rows_updated"] == len([i for i in range(590, 600) if i % 5])
    assert merged["num_target_rows_inserted"] == len(
        [i for i in range(590, 620) if i >= N or i % 5 == 0]
    )
    operations = set(expected["history"])
    assert {"DELETE", "UPDATE", "MERGE", "RESTORE", "OPTIMIZE", "REORG"} <= operations
    # Delta Spark reads both tables row for row, and the restored version 1
    assert _oracle(delta_spark, remote) == _oracle(delta_spark, classic)
    gone = {i for i in range(N) if i % 5 == 0}
    assert [r[0] for r in _oracle(delta_spark, remote)] == [i for i in range(N) if i not in gone]
    assert _oracle(delta_spark, remote + "-w") == _oracle(delta_spark, classic + "-w")
    written = _oracle(delta_spark, remote + "-w")
    assert [r[0] for r in written] == list(range(45))
    assert [r[2] for r in written] == ["u"] * 3 + ["w"] * 42
    assert expected["predicates"] == [["(id < 3)"], ["((id >= 45) AND (s = 'w'))"]]


TASKS = """
def tasks(spark):
    from deltadv.spark._tasks import default_parallelism, explain_text, split_size, task_frame

    frame = task_frame(spark, [(f"t{i}",) for i in range(7)], "task string", [1] * 7)
    single = task_frame(spark, [(f"t{i}", i) for i in range(3)], "task string, file int")
    from pyspark.sql import functions as F

    parts = frame.select("task", F.spark_partition_id().alias("p")).collect()
    return {
        "plan": explain_text(frame, "simple") + explain_text(single, "simple"),
        "rows": sorted(r["task"] for r in frame.collect()),
        "single": sorted([r["task"], r["file"]] for r in single.collect()),
        "partitions": len({r["p"] for r in parts}),
        "single_partitions": len(
            {r["p"] for r in single.select(F.spark_partition_id().alias("p")).collect()}
        ),
        "parallelism": default_parallelism(spark),
        "split": split_size(spark),
    }
"""


@pytest.mark.parametrize("session", ["classic", "connect"])
def test_task_rows_without_sparkcontext_or_shuffle(
    delta_spark: Any, spark_connect: Any, session: str
) -> None:
    if session == "classic":
        scope: dict[str, Any] = {}
        exec(TASKS, scope)
        got = scope["tasks"](delta_spark)
    else:
        got = spark_connect(TASKS + "print(json.dumps(tasks(spark)))\n")
    assert "Exchange" not in got["plan"], got["plan"]
    assert got["rows"] == sorted(f"t{i}" for i in range(7))
    assert got["single"] == [[f"t{i}", i] for i in range(3)]
    # the test session is local[2] with Spark's default split size: seven tiny
    # tasks packed as Spark packs files (two partitions), three unpacked: three
    assert got["parallelism"] == 2
    assert got["split"] == 128 * 1024 * 1024
    assert got["partitions"] == 2
    assert got["single_partitions"] == 3


def test_default_parallelism_measured_once_per_session(delta_spark: Any) -> None:
    """On a master that is not ``local[N]`` and without a parallelism setting,
    the default parallelism is measured with one small job per session: a
    second call does not run it again, a new session measures again."""
    from deltadv.spark._tasks import default_parallelism

    class Conf:
        def get(self, key: str, default: Any = None) -> Any:
            if key == "spark.master":
                return "spark://127.0.0.1:7077"
            if "parallelism" in key.lower():
                return None
            return delta_spark.conf.get(key, default)

    class Session:
        def __init__(self) -> None:
            self.conf = Conf()
            self.jobs = 0

        def range(self, *args: Any) -> Any:
            self.jobs += 1
            return delta_spark.range(*args)

    first, second = Session(), Session()
    assert default_parallelism(first) == 2 and first.jobs == 1  # local[2] underneath
    assert default_parallelism(first) == 2 and first.jobs == 1
    assert default_parallelism(second) == 2 and second.jobs == 1
