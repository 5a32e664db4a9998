"""Delta Spark as the oracle: tables with DVs written and DELETEd by Delta Spark 4.4
(partitioned with checkpoints, column-mapped, many row groups), read by deltadv
(through Spark and through DeltaTable) row for row against Delta Spark's own read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import deltadv
from deltadv import spark as dspark


def _rows(df: Any, cols: list[str]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in cols) for r in df.select(*cols).collect())


def _compare(spark: Any, path: str, cols: list[str]) -> int:
    theirs = _rows(spark.read.format("delta").load(path), cols)
    ours = _rows(dspark.read(spark, path), cols)
    assert ours == theirs
    arrow = deltadv.DeltaTable(path).to_pyarrow(cols)
    assert sorted(zip(*(arrow[c].to_pylist() for c in cols), strict=True)) == theirs
    return len(theirs)


def test_partitioned_with_checkpoints_and_delete_rounds(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "partitioned")
    (
        spark.range(0, 3000)
        .selectExpr("id", "id % 5 AS part", "cast(id * 1.5 AS double) AS x", "uuid() AS s")
        .write.format("delta")
        .partitionBy("part")
        .option("delta.enableDeletionVectors", "true")
        .option("delta.checkpointInterval", "2")
        .save(path)
    )
    cols = ["id", "part", "x"]
    for cond in ("id % 7 = 0", "id BETWEEN 100 AND 400", "part = 3 AND id % 2 = 0", "id = 2999"):
        spark.sql(f"DELETE FROM delta.`{path}` WHERE {cond}")
        _compare(spark, path, cols)
    t = deltadv.DeltaTable(path)
    assert (a := t.get_add_actions())["dv_storage_type"].null_count < a.num_rows  # DVs were written
    assert any(
        p.name.endswith(".checkpoint.parquet")
        for p in (tmp_path / "partitioned" / "_delta_log").iterdir()
    )
    assert t.count() == spark.read.format("delta").load(path).count()


def test_column_mapping_and_many_row_groups(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "mapped")
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop.set("parquet.block.size", str(64 * 1024))  # many small row groups
    try:
        (
            spark.range(0, 60_000)
            .coalesce(1)
            .selectExpr("id", "concat('name-', id) AS `a name`", "id * 2 AS value")
            .write.format("delta")
            .option("delta.enableDeletionVectors", "true")
            .option("delta.columnMapping.mode", "name")
            .save(path)
        )
    finally:
        hadoop.unset("parquet.block.size")
    import pyarrow.parquet as pq

    data = [p for p in (tmp_path / "mapped").rglob("*.parquet") if "_delta_log" not in p.parts]
    assert max(pq.ParquetFile(p).metadata.num_row_groups for p in data) > 1, "want row groups"
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 13 = 0 OR id BETWEEN 20000 AND 20500")
    n = _compare(spark, path, ["id", "a name", "value"])
    assert n == 60_000 - len({i for i in range(60_000) if i % 13 == 0 or 20000 <= i <= 20500})


def test_filters_that_prune_row_groups_and_split_files(delta_spark: Any, tmp_path: Path) -> None:
    """Filters prune files (stats) and row groups (parquet stats) and files split
    into row-group tasks, on a Delta Spark table with DVs: same rows as Delta Spark."""
    spark = delta_spark
    path = str(tmp_path / "pruned")
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop.set("parquet.block.size", str(32 * 1024))
    try:
        (
            spark.range(0, 80_000, numPartitions=2)
            .selectExpr("id", "id % 3 AS part", "concat('s', id) AS s", "id / 4 AS x")
            .repartition(2, "part")
            .sortWithinPartitions("id")
            .write.format("delta")
            .partitionBy("part")
            .option("delta.enableDeletionVectors", "true")
            .save(path)
        )
    finally:
        hadoop.unset("parquet.block.size")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 11 = 0 OR id BETWEEN 41000 AND 41999")
    t = deltadv.DeltaTable(path)
    assert (a := t.get_add_actions())["dv_storage_type"].null_count < a.num_rows
    all_tasks = t.scan_tasks(split_size=64 * 1024)
    assert len(all_tasks) > len(t.files()), "large files become several tasks"
    for cond in (
        "id >= 40000 AND id < 43000",
        "part = 1 AND id > 70000",
        "id IN (11, 12, 41500, 79999) OR s = 's77'",
        "NOT (id < 79000) AND s IS NOT NULL",
    ):
        theirs = _rows(spark.read.format("delta").load(path).filter(cond), ["id", "part", "s"])
        ours = _rows(
            dspark.read(spark, path, filter=cond, split_size=64 * 1024), ["id", "part", "s"]
        )
        assert ours == theirs, cond
        assert len(theirs) > 0, cond
        pruned = t.scan_tasks(filter=cond, filter_rows=False, split_size=64 * 1024)
        assert len(pruned) < len(all_tasks), cond
        arrow = t.to_pyarrow(["id", "part", "s"], filter=cond)
        got = sorted(zip(*(arrow[c].to_pylist() for c in ["id", "part", "s"]), strict=True))
        assert got == theirs, cond
