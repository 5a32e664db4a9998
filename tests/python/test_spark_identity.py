"""Identity columns written by several writers for one commit: the Spark glue's
MERGE (inserts written by executor tasks and by the driver), its ``write_table``
(``write_files`` in each task, ``commit_files`` on the driver), and
``write_files``/``commit_files`` called directly. Each writer hands out values in
its own slot (``identity_slot``: the Spark task's partition index), so values never
collide without coordination; the commit raises the high-water mark past every
value written, in the same commit.

Tables are created by Delta Spark 4.4 and read back by it; a following Delta Spark
INSERT must hand out values beyond every value deltadv wrote (the oracle of the
mark), and every value must lie on the column's start/step grid."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltadv
from deltadv import spark as dspark
from deltadv.exceptions import DeltaProtocolError
from deltadv.write import commit_files, write_files


def _mark(path: str, column: str = "id") -> int:
    """The column's high-water mark in the table's latest metadata."""
    schema = json.loads(deltadv.DeltaTable(path).metadata()["schemaString"])
    meta = next(f["metadata"] for f in schema["fields"] if f["name"] == column)
    return int(meta["delta.identity.highWaterMark"])


def _rows(spark: Any, path: str) -> list[tuple[int, int, str]]:
    spark.catalog.clearCache()
    rows = spark.read.format("delta").load(path).collect()
    return sorted((r["id"], r["k"], r["v"]) for r in rows)


def _create(spark: Any, path: str, start: int, step: int, always: bool = True) -> None:
    kind = "ALWAYS" if always else "BY DEFAULT"
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT GENERATED {kind} AS IDENTITY "
        f"(START WITH {start} INCREMENT BY {step}), k BIGINT, v STRING) USING delta "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    spark.createDataFrame([(k, f"v{k}") for k in range(6)], "k bigint, v string").coalesce(
        1
    ).createOrReplaceTempView("identity_seed")
    spark.sql(f"INSERT INTO delta.`{path}` (k, v) SELECT k, v FROM identity_seed")


def _check_ids(spark: Any, path: str, start: int, step: int, rows: int) -> list[int]:
    """Delta Spark reads every row; the ids are unique, on the grid, and the mark
    covers them all; a Delta Spark INSERT then goes beyond every one."""
    got = _rows(spark, path)
    assert len(got) == rows
    ids = [r[0] for r in got]
    assert len(set(ids)) == len(ids), "duplicate identity values"
    for i in ids:
        assert (i - start) % step == 0 and (i - start) // step >= 0, i
    furthest = max(ids) if step > 0 else min(ids)
    mark = _mark(path)
    assert (mark >= furthest) if step > 0 else (mark <= furthest)
    spark.sql(f"INSERT INTO delta.`{path}` (k, v) VALUES (-1, 'spark')")
    after = _rows(spark, path)
    new = [r[0] for r in after if r[2] == "spark"]
    assert len(new) == 1 and new[0] not in ids
    assert (new[0] > max(ids)) if step > 0 else (new[0] < min(ids))
    assert spark.sql(f"DESCRIBE HISTORY delta.`{path}`").count() >= 3
    return ids


def test_spark_merge_inserts_into_an_identity_column(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "t")
    _create(spark, path, start=100, step=10)
    assert _mark(path) == 150  # Delta Spark's six values: 100 .. 150
    # matched keys 3..5 update, 6..29 insert, from several source partitions (the
    # inserts are written by more than one writer)
    source = spark.createDataFrame(
        [(k, f"new{k}") for k in range(3, 30)], "k bigint, v string"
    ).repartition(4)
    metrics = (
        dspark.DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(source.alias("s"), "t.k = s.k")
        .whenMatchedUpdate(set={"v": "s.v"})
        .whenNotMatchedInsert(values={"k": "s.k", "v": "s.v"})
        .execute()
    )
    assert metrics["num_target_rows_inserted"] == 24
    assert metrics["num_target_rows_updated"] == 3
    ids = _check_ids(spark, path, 100, 10, 6 + 24)
    # the seed rows kept their ids; the updated ones too
    seeded = {r[1]: r[0] for r in _rows(spark, path) if r[1] < 6 and r[2] != "spark"}
    assert seeded == {k: 100 + 10 * k for k in range(6)}
    assert min(i for i in ids if i > 150) > 150  # new values beyond Delta Spark's mark
    # MERGE with insert * on a source without the identity column, after Delta
    # Spark's insert: values continue past Delta Spark's mark
    before = _mark(path)
    more = spark.createDataFrame([(k, f"m{k}") for k in range(40, 44)], "k bigint, v string")
    (
        dspark.DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(more.alias("s"), "t.k = s.k")
        .whenNotMatchedInsert(values={"k": "s.k", "v": "s.v"})
        .execute()
    )
    fresh = [r[0] for r in _rows(spark, path) if r[1] >= 40]
    assert len(fresh) == 4 and all(i > before for i in fresh)
    assert _mark(path) >= max(fresh)


@pytest.mark.parametrize("step", [10, -3])
def test_write_files_in_slots_then_commit_files(
    delta_spark: Any, tmp_path: Path, step: int
) -> None:
    spark = delta_spark
    path = str(tmp_path / "t")
    _create(spark, path, start=7, step=step)
    # two "tasks" (slots 0 and 1), one commit
    adds = []
    for slot, keys in ((0, range(10, 15)), (1, range(20, 23))):
        data = pa.table({"k": pa.array(list(keys), pa.int64()), "v": [f"w{k}" for k in keys]})
        adds += write_files(path, data, mode="append", identity_slot=slot)
    version = commit_files(path, adds, mode="append")
    assert version == deltadv.DeltaTable(path).version()
    ids = _check_ids(spark, path, 7, step, 6 + 5 + 3)
    ours = sorted(i for i in ids if i not in {7 + step * j for j in range(6)})
    assert len(ours) == 8
    # slot 0 continues right after Delta Spark's values, as one writer would
    first = 7 + step * 6
    assert (first in ours) and (first + step in ours)


def test_write_files_without_a_slot_is_refused(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "t")
    _create(spark, path, start=1, step=1)
    before = deltadv.DeltaTable(path).version()
    files = sorted(Path(path).rglob("*.parquet"))
    data = pa.table({"k": pa.array([1], pa.int64()), "v": ["x"]})
    with pytest.raises(DeltaProtocolError, match="identity_slot"):
        write_files(path, data, mode="append")
    assert deltadv.DeltaTable(path).version() == before
    assert sorted(Path(path).rglob("*.parquet")) == files  # nothing left behind
    # a BY DEFAULT column given explicit values needs no slot; the commit raises
    # the mark past them, so Delta Spark's next value is beyond them
    by_default = str(tmp_path / "d")
    _create(spark, by_default, start=1, step=1, always=False)
    given = pa.table(
        {"id": pa.array([50, 60], pa.int64()), "k": pa.array([1, 2], pa.int64()), "v": ["a", "b"]}
    )
    commit_files(by_default, write_files(by_default, given, mode="append"), mode="append")
    assert _mark(by_default) == 60
    _check_ids(spark, by_default, 1, 1, 8)


def test_spark_write_table_appends_to_an_identity_table(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "t")
    _create(spark, path, start=0, step=2)
    df = spark.createDataFrame([(k, f"s{k}") for k in range(100, 130)], "k bigint, v string")
    dspark.write_table(df.repartition(3), path, mode="append")
    _check_ids(spark, path, 0, 2, 6 + 30)
