"""DELETE through Spark (deltadv.spark.DeltaTable.forPath(...).delete), checked
against Delta Spark: Delta Spark reads what we delete, deletes again on top of our
DVs, and shows our metrics in DESCRIBE HISTORY; deltalake reads our output too.
Expected rows come from the generating formula, not from deltadv."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import deltadv
from deltadv import spark as dspark

N = 6000


def _make(spark: Any, path: str) -> None:
    (
        spark.range(0, N, numPartitions=3)
        .selectExpr("id", "id % 3 AS part", "concat('v', id) AS s")
        .write.format("delta")
        .partitionBy("part")
        .option("delta.enableDeletionVectors", "true")
        .option("delta.checkpointInterval", "2")
        .save(path)
    )


def _delta_ids(spark: Any, path: str) -> list[int]:
    rows = spark.read.format("delta").load(path).select("id").collect()
    return sorted(r["id"] for r in rows)


def history_predicate(spark: Any, path: str, version: int) -> str:
    """The DELETE predicate Delta Spark's DESCRIBE HISTORY shows for ``version``."""
    rows = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    return next(r for r in rows if r["version"] == version)["operationParameters"]["predicate"]


def _commit(path: str, version: int) -> list[dict[str, Any]]:
    text = (Path(path) / "_delta_log" / f"{version:020}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_spark_delete_round_trip_with_delta_spark(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "t")
    _make(spark, path)
    table = dspark.DeltaTable.forPath(spark, path)

    # 1. a condition outside deltadv's subset: Spark evaluates it on the executors
    m = table.delete("id % 7 = 0 AND s LIKE 'v1%'")
    gone = {i for i in range(N) if i % 7 == 0 and str(i).startswith("1")}
    assert m["num_deleted_rows"] == len(gone) and m["version"] == 1
    adds = [a["add"] for a in _commit(path, 1) if "add" in a]
    assert adds and all(a["deletionVector"]["storageType"] == "u" for a in adds)
    # DV files are written by the executors: the metric counts the commit's DV files
    dv_files = {a["deletionVector"]["pathOrInlineDv"] for a in adds}
    assert m["num_dv_files_written"] == len(dv_files) > 0
    assert _delta_ids(spark, path) == [i for i in range(N) if i not in gone]

    # 2. Delta Spark deletes on top of our DVs; deltadv reads that
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 5 = 0")
    gone |= {i for i in range(N) if i % 5 == 0}
    ours = sorted(r["id"] for r in dspark.read(spark, path).select("id").collect())
    assert ours == [i for i in range(N) if i not in gone]

    # 3. a Column condition, on top of Delta Spark's DVs (old DV | new rows)
    from pyspark.sql import functions as F

    m = table.delete((F.col("id") >= 5900) | (F.col("s") == "v42"))
    newly = ({i for i in range(5900, N)} | {42}) - gone
    gone |= newly
    assert m["num_deletion_vectors_updated"] > 0
    # History records Spark SQL text (a JSON list of strings), not a Column repr:
    # Spark evaluates it on the version before and finds exactly the rows deleted.
    info = next(a["commitInfo"] for a in _commit(path, m["version"]) if "commitInfo" in a)
    (recorded,) = json.loads(info["operationParameters"]["predicate"])
    assert "Column<" not in recorded
    before = spark.read.format("delta").option("versionAsOf", m["version"] - 1).load(path)
    hit = sorted(r["id"] for r in before.filter(recorded).select("id").collect())
    assert hit == sorted(newly) and m["num_deleted_rows"] == len(newly)
    assert history_predicate(spark, path, m["version"]) == info["operationParameters"]["predicate"]
    assert _delta_ids(spark, path) == [i for i in range(N) if i not in gone]

    # 4. a partition-only condition removes whole files without DVs
    m = table.delete("part = 2")
    assert m["version"] == 4 and m["checkpointed"], m  # interval 2: ours, read below
    assert (Path(path) / "_delta_log" / f"{4:020}.checkpoint.parquet").is_file()
    gone |= {i for i in range(N) if i % 3 == 2}
    actions = _commit(path, m["version"])
    assert all(list(a) in (["commitInfo"], ["remove"]) for a in actions)
    assert m["num_removed_files"] > 0 and m["num_deletion_vectors_added"] == 0
    expected = [i for i in range(N) if i not in gone]
    assert _delta_ids(spark, path) == expected

    # Delta Spark's history shows our operation and metrics
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    ours_h = next(h for h in history if h["version"] == 1)
    assert ours_h["operation"] == "DELETE"
    assert int(ours_h["operationMetrics"]["numDeletedRows"]) == len(
        {i for i in range(N) if i % 7 == 0 and str(i).startswith("1")}
    )
    # other readers agree
    import deltalake

    dl = deltalake.DeltaTable(path).scan(columns=["id"]).read_all()
    assert sorted(dl["id"].to_pylist()) == expected
    assert sorted(deltadv.DeltaTable(path).to_pyarrow(["id"])["id"].to_pylist()) == expected


def test_spark_delete_unknown_column_names_only_table_columns(
    delta_spark: Any, tmp_path: Path
) -> None:
    from pyspark.errors import AnalysisException

    spark = delta_spark
    path = str(tmp_path / "t")
    _make(spark, path)
    table = dspark.DeltaTable.forPath(spark, path)
    with pytest.raises(AnalysisException) as info:
        table.delete("idd = 3 AND s LIKE 'v%'")
    message = str(info.value).split("\n")[0]
    assert "`idd`" in message and "`id`" in message
    assert "_row_index" not in message and "_file_path" not in message
    assert deltadv.DeltaTable(path).version() == 0  # nothing committed
