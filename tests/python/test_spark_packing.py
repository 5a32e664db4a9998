"""Scan tasks are packed into Spark partitions the way Spark packs files (each
file worth its size plus ``openCostInBytes``, at most ``maxPartitionBytes`` a
partition, spread over the default parallelism), so a table of many small files
makes a few Spark tasks, not one per file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deltadv import spark as dspark
from deltadv._sample import make_table
from deltadv.spark._tasks import OPEN_COST
from deltadv.spark._tasks import pack as _pack

MB = 1024 * 1024


def test_pack_small_files_share_partitions() -> None:
    groups = _pack([1000] * 100, 128 * MB, parallelism=2)
    # 100 files worth 4 MiB each: two partitions of ~200 MiB would exceed the
    # split size; so ceil(100 * 4 MiB / 128 MiB) = 4 partitions of 32 or fewer.
    assert sorted(i for g in groups for i in g) == list(range(100))
    assert len(groups) == 4
    assert all(g == sorted(g) for g in groups)


def test_pack_large_files_one_each_and_parallelism_kept() -> None:
    assert _pack([200 * MB, 150 * MB, 300 * MB], 128 * MB, parallelism=2) == [[2], [0], [1]]
    # A small table still uses every core: the limit drops to total / parallelism.
    groups = _pack([10 * MB] * 4, 128 * MB, parallelism=4)
    assert len(groups) == 4
    assert len(_pack([], 128 * MB, 2)) == 0
    assert OPEN_COST == 4 * MB


def test_many_small_files_read_in_few_spark_tasks(spark: Any, tmp_path: Path) -> None:
    deleted = {3: [0, 1, 2], 17: list(range(0, 50, 2))}
    make_table(tmp_path / "t", files=40, rows_per_file=50, deleted=deleted)
    df = dspark.read(spark, str(tmp_path / "t"))
    parts = df.rdd.getNumPartitions()
    assert 1 <= parts <= 4, parts  # 40 files of a few KB each: packed
    gone = {f * 50 + r for f, rows in deleted.items() for r in rows}
    assert sorted(r["id"] for r in df.select("id").collect()) == [
        i for i in range(2000) if i not in gone
    ]


def test_data_source_packs_small_files(spark: Any, tmp_path: Path) -> None:
    """format("deltadv") packs its scan tasks too: 40 small files, a few Spark
    partitions, every live row once; splitSize bounds what one partition holds."""
    from deltadv.datasource import register_data_source

    deleted = {0: [5, 6], 39: list(range(10, 50))}
    make_table(tmp_path / "t", files=40, rows_per_file=50, deleted=deleted)
    register_data_source(spark)
    df = spark.read.format("deltadv").load(str(tmp_path / "t"))
    assert 1 <= df.rdd.getNumPartitions() <= spark.sparkContext.defaultParallelism * 2
    gone = {f * 50 + r for f, rows in deleted.items() for r in rows}
    assert sorted(r["id"] for r in df.select("id").collect()) == [
        i for i in range(2000) if i not in gone
    ]
    # 1-byte partitions: no two tasks share one, so every file is its own partition.
    one_each = spark.read.format("deltadv").option("splitSize", "1").load(str(tmp_path / "t"))
    assert one_each.rdd.getNumPartitions() == 40
    assert one_each.count() == 2000 - len(gone)


def test_data_source_packs_change_feed(spark: Any, tmp_path: Path) -> None:
    """A Change Data Feed read through the data source packs its change tasks and
    keeps every change: each of the 12 commits' inserts once."""
    import pyarrow as pa

    from deltadv.datasource import register_data_source
    from deltadv.write import write_table

    path = str(tmp_path / "cdf")
    for i in range(12):
        write_table(
            path,
            pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64())}),
            mode="error" if i == 0 else "append",
            configuration={"delta.enableChangeDataFeed": "true"},
        )
    register_data_source(spark)
    df = spark.read.format("deltadv").option("readChangeFeed", "true").load(path)
    assert df.rdd.getNumPartitions() < 12
    rows = df.select("id", "_change_type", "_commit_version").collect()
    assert sorted((r[0], r[1], r[2]) for r in rows) == [(i, "insert", i // 10) for i in range(120)]
