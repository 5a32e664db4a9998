"""Scan tasks are packed into Spark partitions the way Spark packs files (each
file worth its size plus ``openCostInBytes``, at most ``maxPartitionBytes`` a
partition, spread over the default parallelism), so a table of many small files
makes a few Spark tasks, not one per file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deltadv import spark as dspark
from deltadv._sample import make_table
from deltadv._spark_util import OPEN_COST, _pack

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
