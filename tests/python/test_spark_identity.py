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
from deltadv.exceptions import CommitConflictError, DeltaProtocolError
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
    # a BY DEFAULT column given explicit values needs no slot (the values are
    # the data's: see test_explicit_values_leave_the_mark_as_delta_spark)
    by_default = str(tmp_path / "d")
    _create(spark, by_default, start=1, step=1, always=False)
    given = pa.table(
        {"id": pa.array([50, 60], pa.int64()), "k": pa.array([1, 2], pa.int64()), "v": ["a", "b"]}
    )
    commit_files(by_default, write_files(by_default, given, mode="append"), mode="append")
    assert sorted(r[0] for r in _rows(spark, by_default)) == [1, 2, 3, 4, 5, 6, 50, 60]


def test_spark_write_table_appends_to_an_identity_table(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "t")
    _create(spark, path, start=0, step=2)
    df = spark.createDataFrame([(k, f"s{k}") for k in range(100, 130)], "k bigint, v string")
    dspark.write_table(df.repartition(3), path, mode="append")
    _check_ids(spark, path, 0, 2, 6 + 30)


def _twin(spark: Any, tmp_path: Path, start: int, step: int, always: bool) -> tuple[str, str]:
    """Two tables Delta Spark creates alike: ours (written by deltadv) and the
    twin (the same rows written by Delta Spark)."""
    ours, twin = str(tmp_path / "ours"), str(tmp_path / "twin")
    for p in (ours, twin):
        _create(spark, p, start=start, step=step, always=always)
    return ours, twin


def _same_after_spark_insert(spark: Any, ours: str, twin: str) -> None:
    """The marks equal the twin's; a Delta Spark INSERT on each then hands out
    the same value, not one already in the table; Delta Spark describes ours."""
    assert _mark(ours) == _mark(twin)
    assert _rows(spark, ours) == _rows(spark, twin)
    for p in (ours, twin):
        spark.sql(f"INSERT INTO delta.`{p}` (k, v) VALUES (-1, 'spark')")
    got, want = _rows(spark, ours), _rows(spark, twin)
    assert got == want
    ids = [r[0] for r in got]
    assert len(set(ids)) == len(ids), "duplicate identity values"
    assert _mark(ours) == _mark(twin)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{ours}`").collect()
    assert len(history) == len(spark.sql(f"DESCRIBE HISTORY delta.`{twin}`").collect())
    assert spark.sql(f"DESCRIBE DETAIL delta.`{ours}`").collect()[0]["numFiles"] > 0


@pytest.mark.parametrize(("step", "always"), [(2, True), (-3, True), (5, False)])
@pytest.mark.parametrize("partitions", [1, 3])
def test_spark_write_table_numbers_as_delta_spark(
    delta_spark: Any, tmp_path: Path, step: int, always: bool, partitions: int
) -> None:
    """The glue's append interleaves identity values across its tasks as Delta
    Spark's append of the same partitions does: the same ids, the same mark."""
    spark = delta_spark
    ours, twin = _twin(spark, tmp_path, 10, step, always)
    df = spark.createDataFrame([(k, f"s{k}") for k in range(100, 131)], "k bigint, v string")
    df = df.coalesce(1) if partitions == 1 else df.repartition(partitions)
    df.write.format("delta").mode("append").save(twin)
    dspark.write_table(df, ours, mode="append")
    _same_after_spark_insert(spark, ours, twin)


def test_explicit_values_leave_the_mark_as_delta_spark(delta_spark: Any, tmp_path: Path) -> None:
    """Values given to a GENERATED BY DEFAULT column through write_files +
    commit_files leave the high-water mark where Delta Spark's INSERT of the
    same values leaves it; generated values in the same table move it."""
    spark = delta_spark
    ours, twin = _twin(spark, tmp_path, 1, 1, always=False)
    spark.sql(f"INSERT INTO delta.`{twin}` (id, k, v) VALUES (50, 1, 'a'), (60, 2, 'b')")
    assert _mark(twin) == 6  # Delta Spark: explicit values leave the mark
    given = pa.table(
        {"id": pa.array([50, 60], pa.int64()), "k": pa.array([1, 2], pa.int64()), "v": ["a", "b"]}
    )
    adds = write_files(ours, given, mode="append")
    assert not any("tags" in a and a["tags"] for a in adds)
    commit_files(ours, adds, mode="append")
    assert _mark(ours) == _mark(twin)
    # generated values (two writers of one commit, interleaved) move it as Delta
    # Spark's append of the same two partitions does
    spark.createDataFrame([(10, "x"), (11, "y"), (12, "z")], "k bigint, v string").repartition(
        2
    ).write.format("delta").mode("append").save(twin)
    # the same rows per writer as Delta Spark's two partitions (read off its ids)
    base = _mark(ours) + 1
    by_slot: dict[int, list[int]] = {0: [], 1: []}
    for ident, k, _ in _rows(spark, twin):
        if k >= 10:
            by_slot[(ident - base) % 2].append(k)
    adds = []
    for slot, keys in by_slot.items():
        data = pa.table({"k": pa.array(keys, pa.int64()), "v": [f"{'xyz'[k - 10]}" for k in keys]})
        adds += write_files(ours, data, mode="append", identity_slot=slot, identity_slots=2)
    assert all(a["tags"]["deltadv.identityHighWaterMark.id"] is not None for a in adds), (
        "write_files reports the values it handed out"
    )
    commit_files(ours, adds, mode="append")
    log = sorted(Path(ours, "_delta_log").glob("*.json"))[-1].read_text()
    assert "deltadv.identityHighWaterMark" not in log  # the tags never reach the log
    _same_after_spark_insert(spark, ours, twin)


@pytest.mark.parametrize(("step", "always"), [(10, True), (-4, False)])
@pytest.mark.parametrize("small", [True, False])
def test_spark_merge_inserts_number_as_delta_spark(
    delta_spark: Any, tmp_path: Path, step: int, always: bool, small: bool
) -> None:
    """MERGE inserts continue the sequence from the mark. A small source Spark
    can size (a table: broadcast, its inserts written by one writer, on the
    driver) gets exactly the values Delta Spark's MERGE of the same rows
    gives; a Python source (inserts written by the tasks of a shuffle,
    interleaved as Delta Spark's over the stage's partitions) gets what Delta
    Spark guarantees: unique values on the grid, beyond the old mark, and the
    mark at the furthest one."""
    spark = delta_spark
    ours, twin = _twin(spark, tmp_path, 100, step, always)
    rows = [(k, f"n{k}") for k in range(3, 12)]
    source = spark.createDataFrame(rows, "k bigint, v string").coalesce(1)
    if small:
        src_path = str(tmp_path / "src")
        source.write.format("delta").save(src_path)
        source = spark.read.format("delta").load(src_path)
    source.createOrReplaceTempView("identity_merge_src")
    spark.sql(
        f"MERGE INTO delta.`{twin}` t USING identity_merge_src s ON t.k = s.k "
        "WHEN MATCHED THEN UPDATE SET v = s.v "
        "WHEN NOT MATCHED THEN INSERT (k, v) VALUES (s.k, s.v)"
    )
    before = _mark(ours)
    (
        dspark.DeltaTable.forPath(spark, ours)
        .alias("t")
        .merge(source.alias("s"), "t.k = s.k")
        .whenMatchedUpdate(set={"v": "s.v"})
        .whenNotMatchedInsert(values={"k": "s.k", "v": "s.v"})
        .execute()
    )
    new = sorted(r[0] for r in _rows(spark, ours) if r[1] >= 6)
    assert len(new) == len(set(new)) == 6
    assert all((i - 100) % step == 0 and (i - before) * step > 0 for i in new)
    assert _mark(ours) == (max(new) if step > 0 else min(new))
    if small:
        _same_after_spark_insert(spark, ours, twin)
    else:
        _check_ids(spark, ours, 100, step, 6 + 6)


def test_commit_files_refuses_values_a_concurrent_writer_may_repeat(
    delta_spark: Any, tmp_path: Path
) -> None:
    """Files written in slots after one mark, committed after Delta Spark's own
    INSERT moved it (it handed out the same values): the commit conflicts, as
    Delta Spark's second of two concurrent identity inserts does; nothing is
    committed and the files are removed. Written again, they commit."""
    spark = delta_spark
    path = str(tmp_path / "t")
    _create(spark, path, start=1, step=1)
    data = pa.table({"k": pa.array([10, 11], pa.int64()), "v": ["a", "b"]})
    adds = write_files(path, data, mode="append", identity_slot=0, identity_slots=1)
    spark.sql(f"INSERT INTO delta.`{path}` (k, v) VALUES (20, 'first')")
    before = deltadv.DeltaTable(path).version()
    with pytest.raises(CommitConflictError, match="high-water mark"):
        commit_files(path, adds, mode="append")
    assert deltadv.DeltaTable(path).version() == before
    assert not any(Path(path, a["path"]).exists() for a in adds)
    adds = write_files(path, data, mode="append", identity_slot=0, identity_slots=1)
    commit_files(path, adds, mode="append")
    _check_ids(spark, path, 1, 1, 6 + 1 + 2)
    assert sorted(r[0] for r in _rows(spark, path) if r[1] in (10, 11)) == [8, 9]
