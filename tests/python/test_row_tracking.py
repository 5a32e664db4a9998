"""Row tracking through deltadv's UPDATE and MERGE, checked with Delta Spark 4.4 as
the oracle: each DML runs on one table by deltadv and on an identical twin by Delta
Spark itself; afterwards Delta Spark's ``_metadata.row_id`` and
``_metadata.row_commit_version`` of every row must be the same on both (updated
rows keep their id and get the DML's commit version; untouched rows keep both;
inserted rows get fresh ids). PURGE/OPTIMIZE after the DML keep them, and Delta
Spark's own DML and DESCRIBE HISTORY work on top.

Expected values come from Delta Spark's twin table, never from deltadv."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltadv
from deltadv import spark as dspark
from deltadv.write import write_table
from tests.python.dml_tables import create_tracked_table, spark_row_ids

N = 40


def _read_row_ids(path: str) -> dict[int, tuple[int, int, str]]:
    """The same map as deltadv's reader gives it (``with_row_tracking``)."""
    t = deltadv.DeltaTable(path).to_pyarrow_table(["id", "s"], with_row_tracking=True)
    assert t.column_names == ["id", "s", "_row_id", "_row_commit_version"]
    return {r["id"]: (r["_row_id"], r["_row_commit_version"], r["s"]) for r in t.to_pylist()}


def _deltadv_table(path: str) -> None:
    for lo in (0, N // 2):
        data = pa.table(
            {
                "id": pa.array(range(lo, lo + N // 2), pa.int64()),
                "s": pa.array([f"s{i}" for i in range(lo, lo + N // 2)]),
            }
        )
        write_table(
            path,
            data,
            mode="error" if lo == 0 else "append",
            configuration={
                "delta.enableRowTracking": "true",
                "delta.enableDeletionVectors": "true",
            }
            if lo == 0
            else None,
        )


def _twins(spark: Any, tmp_path: Path, created_by: str) -> tuple[str, str]:
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    for p in (ours, theirs):
        if created_by == "spark":
            create_tracked_table(spark, p, N)
        else:
            _deltadv_table(p)
    assert spark_row_ids(spark, ours) == spark_row_ids(spark, theirs)
    return ours, theirs


def _still_usable(spark: Any, path: str, before: dict[int, tuple[int, int, str]]) -> None:
    """Delta Spark's own DML and history on top of deltadv's commits."""
    top = max(rid for rid, _, _ in before.values())
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1000, 'x')")
    spark.sql(f"UPDATE delta.`{path}` SET s = 'y' WHERE id = 5")
    after = spark_row_ids(spark, path)
    assert after[1000][0] > top, "Delta Spark's insert reused a row id"
    assert after[5][0] == before[5][0] and after[5][2] == "y"
    assert len({rid for rid, _, _ in after.values()}) == len(after)
    assert spark.sql(f"DESCRIBE HISTORY delta.`{path}`").count() >= 4


@pytest.mark.parametrize("created_by", ["spark", "deltadv"])
def test_update_keeps_row_ids(delta_spark: Any, tmp_path: Path, created_by: str) -> None:
    spark = delta_spark
    ours, theirs = _twins(spark, tmp_path, created_by)
    before = spark_row_ids(spark, ours)
    where = "id IN (0, 7, 14, 21, 28, 35)"
    m = deltadv.DeltaTable(ours).update({"s": "s || '-u'"}, where)
    assert m["num_updated_rows"] == 6
    spark.sql(f"UPDATE delta.`{theirs}` SET s = s || '-u' WHERE {where}")
    got, want = spark_row_ids(spark, ours), spark_row_ids(spark, theirs)
    assert got == want
    assert {i for i in got if got[i][1] != before[i][1]} == {0, 7, 14, 21, 28, 35}
    # deltadv's reader shows what Delta Spark's _metadata shows, on both tables
    assert _read_row_ids(ours) == got and _read_row_ids(theirs) == want
    # A second UPDATE of rows deltadv already rewrote: ids come from the
    # materialized column now.
    deltadv.DeltaTable(ours).update({"s": "s || '-v'"}, "id < 10")
    spark.sql(f"UPDATE delta.`{theirs}` SET s = s || '-v' WHERE id < 10")
    got, want = spark_row_ids(spark, ours), spark_row_ids(spark, theirs)
    assert got == want
    assert {i: r[0] for i, r in got.items()} == {i: r[0] for i, r in before.items()}
    # materialized values (written by deltadv and by Delta Spark) read back
    assert _read_row_ids(ours) == got and _read_row_ids(theirs) == want
    # PURGE and OPTIMIZE keep both values.
    t = deltadv.DeltaTable(ours)
    t.purge()
    assert spark_row_ids(spark, ours) == want
    t.optimize()
    assert spark_row_ids(spark, ours) == want
    assert _read_row_ids(ours) == want
    _still_usable(spark, ours, want)


def test_merge_keeps_row_ids(delta_spark: Any, tmp_path: Path) -> None:
    """MERGE with update + insert: matched rows keep their ids and get the new
    version, as with Delta Spark's MERGE; inserted rows get fresh, distinct ids
    (their order inside the new file is the writer's, so only freshness is
    compared)."""
    spark = delta_spark
    ours, theirs = _twins(spark, tmp_path, "spark")
    before = spark_row_ids(spark, ours)
    keys = [3, 17, 22, 39, 50, 51]
    src = pa.table({"id": pa.array(keys, pa.int64()), "s": [f"m{k}" for k in keys]})
    m = (
        deltadv.DeltaTable(ours)
        .merge(src, "t.id = s.id", "s", "t")
        .when_matched_update({"s": "s.s"})
        .when_not_matched_insert_all()
        .execute()
    )
    assert m["num_target_rows_updated"] == 4 and m["num_target_rows_inserted"] == 2
    spark.createDataFrame(src.to_pandas()).createOrReplaceTempView("rt_src")
    spark.sql(
        f"MERGE INTO delta.`{theirs}` t USING rt_src s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET s = s.s WHEN NOT MATCHED THEN INSERT *"
    )
    got, want = spark_row_ids(spark, ours), spark_row_ids(spark, theirs)
    assert set(got) == set(want)
    old = {i: r for i, r in got.items() if i < N}
    assert old == {i: want[i] for i in old}
    top = max(rid for rid, _, _ in before.values())
    for k in (50, 51):
        assert got[k][0] > top and got[k][1:] == want[k][1:]
    assert got[50][0] != got[51][0]
    # inserted rows included: deltadv's reader agrees with Delta Spark's _metadata
    assert _read_row_ids(ours) == got and _read_row_ids(theirs) == want
    _still_usable(spark, ours, got)


def test_spark_glue_update_keeps_row_ids(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    ours, theirs = _twins(spark, tmp_path, "spark")
    dspark.DeltaTable.forPath(spark, ours).update("id > 30", {"s": "upper(s)"})
    spark.sql(f"UPDATE delta.`{theirs}` SET s = upper(s) WHERE id > 30")
    assert spark_row_ids(spark, ours) == spark_row_ids(spark, theirs)


def test_copy_on_write_dml_keeps_row_ids(delta_spark: Any, tmp_path: Path) -> None:
    """A row-tracking table without deletion vectors: deltadv's copy-on-write
    UPDATE, DELETE and MERGE rewrite the touched files, the copied rows keeping
    their ids and commit versions (materialized), as Delta Spark's own
    copy-on-write DML on a twin table does."""
    spark = delta_spark
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    for p in (ours, theirs):
        spark.sql(
            f"CREATE TABLE delta.`{p}` (id BIGINT, s STRING) USING delta TBLPROPERTIES ("
            "'delta.enableRowTracking'='true', 'delta.enableDeletionVectors'='false')"
        )
        for lo in (0, N // 2):
            values = ", ".join(f"({i}, 's{i}')" for i in range(lo, lo + N // 2))
            spark.sql(f"INSERT INTO delta.`{p}` VALUES {values}")
    t = deltadv.DeltaTable(ours)
    m = t.update({"s": "s || '-u'"}, "id IN (1, 25)", allow_copy_on_write=True)
    assert m["num_updated_rows"] == 2
    spark.sql(f"UPDATE delta.`{theirs}` SET s = s || '-u' WHERE id IN (1, 25)")
    got, want = spark_row_ids(spark, ours), spark_row_ids(spark, theirs)
    assert got == want
    assert _read_row_ids(ours) == got
    deltadv.DeltaTable(ours).delete("id IN (2, 30)", allow_copy_on_write=True)
    spark.sql(f"DELETE FROM delta.`{theirs}` WHERE id IN (2, 30)")
    got, want = spark_row_ids(spark, ours), spark_row_ids(spark, theirs)
    assert got == want
    assert _read_row_ids(ours) == got
    source = pa.table({"id": pa.array([3, 33], pa.int64()), "s": ["m3", "m33"]})
    (
        deltadv.DeltaTable(ours)
        .merge(
            source,
            "t.id = s.id",
            source_alias="s",
            target_alias="t",
            allow_copy_on_write=True,
        )
        .when_matched_update({"s": "s.s"})
        .execute()
    )
    spark.createDataFrame(source.to_pandas()).createOrReplaceTempView("rt_cow_src")
    spark.sql(
        f"MERGE INTO delta.`{theirs}` t USING rt_cow_src s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET s = s.s"
    )
    got, want = spark_row_ids(spark, ours), spark_row_ids(spark, theirs)
    assert got == want
    assert _read_row_ids(ours) == got
    # no deletion vector anywhere: these were rewrites
    assert not deltadv.DeltaTable(ours).deletion_vectors()
    _still_usable(spark, ours, got)


def test_row_tracking_columns_need_a_tracking_table(tmp_path: Path) -> None:
    path = str(tmp_path / "plain")
    write_table(path, pa.table({"id": pa.array([1, 2], pa.int64()), "s": ["a", "b"]}))
    with pytest.raises(ValueError, match="rowTracking"):
        deltadv.DeltaTable(path).to_pyarrow_table(with_row_tracking=True)


def _strip_row_tracking_names(path: str) -> None:
    """Remove the materialized column names from the table's metaData (and
    the checksum files that repeat it)."""
    log = Path(path) / "_delta_log"
    for crc in log.glob("*.crc"):
        crc.unlink()
    for commit in sorted(log.glob("*.json")):
        lines = []
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "metaData" in action:
                conf = action["metaData"]["configuration"]
                conf.pop("delta.rowTracking.materializedRowIdColumnName", None)
                conf.pop("delta.rowTracking.materializedRowCommitVersionColumnName", None)
            lines.append(json.dumps(action))
        commit.write_text("\n".join(lines) + "\n")


def _named_columns(path: str) -> tuple[str, str]:
    conf = deltadv.DeltaTable(path).metadata()["configuration"]
    return (
        conf["delta.rowTracking.materializedRowIdColumnName"],
        conf["delta.rowTracking.materializedRowCommitVersionColumnName"],
    )


@pytest.mark.parametrize("dvs", [True, False], ids=["dvs", "copy_on_write"])
def test_dml_names_the_materialized_columns_when_absent(
    delta_spark: Any, tmp_path: Path, dvs: bool
) -> None:
    """A table with row tracking enabled whose metadata names no materialized
    columns: deltadv's UPDATE and MERGE name them in their own commit's
    metaData (``_row-id-col-<uuid>``, ``_row-commit-version-col-<uuid>``, as
    Delta Spark names them) and keep the rows' ids in them.

    Delta Spark names the columns at every metadata update of a table that
    supports row tracking, so it never leaves this shape itself; the twin
    "ours" is a Delta Spark table with the two names removed from its log,
    the shape a writer that enables row tracking without naming the columns
    leaves (deltalake 1.6 adds the feature without names through
    ``alter.add_feature`` but refuses ``delta.enableRowTracking``)."""
    spark = delta_spark
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    for p in (ours, theirs):
        spark.sql(
            f"CREATE TABLE delta.`{p}` (id BIGINT, s STRING) USING delta TBLPROPERTIES ("
            "'delta.enableRowTracking'='true', "
            f"'delta.enableDeletionVectors'='{str(dvs).lower()}')"
        )
        for lo in (0, N // 2):
            values = ", ".join(f"({i}, 's{i}')" for i in range(lo, lo + N // 2))
            spark.sql(f"INSERT INTO delta.`{p}` VALUES {values}")
    _strip_row_tracking_names(ours)
    conf = deltadv.DeltaTable(ours).metadata()["configuration"]
    assert "delta.rowTracking.materializedRowIdColumnName" not in conf
    assert conf["delta.enableRowTracking"] == "true"
    # Delta Spark shows no _metadata.row_id without the names (it has none
    # to read materialized ids from); the default ids are the same.
    default_ids = "SELECT id, _metadata.base_row_id + _metadata.row_index AS rid FROM delta.`{}`"
    spark.catalog.clearCache()
    assert sorted(spark.sql(default_ids.format(ours)).collect()) == sorted(
        spark.sql(default_ids.format(theirs)).collect()
    )
    version = deltadv.DeltaTable(ours).version()
    m = deltadv.DeltaTable(ours).update(
        {"s": "s || '-u'"}, "id IN (0, 7, 21, 35)", allow_copy_on_write=not dvs
    )
    assert m["num_updated_rows"] == 4
    spark.sql(f"UPDATE delta.`{theirs}` SET s = s || '-u' WHERE id IN (0, 7, 21, 35)")
    got, want = spark_row_ids(spark, ours), spark_row_ids(spark, theirs)
    assert got == want
    # the names came with the UPDATE's own commit, in Delta Spark's format
    assert deltadv.DeltaTable(ours).version() == version + 1
    rid, rcv = _named_columns(ours)
    assert rid.startswith("_row-id-col-") and len(rid) == len("_row-id-col-") + 36
    assert rcv.startswith("_row-commit-version-col-")
    assert len(rcv) == len("_row-commit-version-col-") + 36
    commit = (Path(ours) / "_delta_log" / f"{version + 1:020d}.json").read_text()
    assert rid in commit and rcv in commit
    # a MERGE on top: the ids it keeps come from the column the UPDATE named
    source = pa.table({"id": pa.array([0, 3, 77], pa.int64()), "s": ["m0", "m3", "m77"]})
    (
        deltadv.DeltaTable(ours)
        .merge(source, "t.id = s.id", "s", "t", allow_copy_on_write=not dvs)
        .when_matched_update({"s": "s.s"})
        .execute()
    )
    spark.createDataFrame(source.to_pandas()).createOrReplaceTempView("rt_named_src")
    spark.sql(
        f"MERGE INTO delta.`{theirs}` t USING rt_named_src s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET s = s.s"
    )
    got, want = spark_row_ids(spark, ours), spark_row_ids(spark, theirs)
    assert got == want
    assert _named_columns(ours) == (rid, rcv)
    assert _read_row_ids(ours) == got
    _still_usable(spark, ours, got)
    assert _named_columns(ours) == (rid, rcv)  # Delta Spark keeps them


def _stripped_twins(spark: Any, tmp_path: Path, dvs: bool) -> tuple[str, str]:
    """Delta Spark's row-tracking twins; "ours" without the materialized names."""
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    for p in (ours, theirs):
        spark.sql(
            f"CREATE TABLE delta.`{p}` (id BIGINT, s STRING) USING delta TBLPROPERTIES ("
            "'delta.enableRowTracking'='true', "
            f"'delta.enableDeletionVectors'='{str(dvs).lower()}')"
        )
        for lo in (0, N // 2):
            values = ", ".join(f"({i}, 's{i}')" for i in range(lo, lo + N // 2))
            spark.sql(f"INSERT INTO delta.`{p}` VALUES {values}")
    _strip_row_tracking_names(ours)
    assert (
        "delta.rowTracking.materializedRowIdColumnName"
        not in (deltadv.DeltaTable(ours).metadata()["configuration"])
    )
    return ours, theirs


def _assert_named_in(path: str, version: int) -> tuple[str, str]:
    rid, rcv = _named_columns(path)
    assert rid.startswith("_row-id-col-") and rcv.startswith("_row-commit-version-col-")
    commit = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text()
    assert rid in commit and rcv in commit
    return rid, rcv


def test_copy_on_write_delete_names_the_materialized_columns_when_absent(
    delta_spark: Any, tmp_path: Path
) -> None:
    """A copy-on-write DELETE (no DVs) on a row-tracking table whose metadata names
    no materialized columns names them in its own commit (as UPDATE/MERGE) and the
    copied rows keep their row ids and commit versions: Delta Spark's ``_metadata``
    shows the same as on the twin Delta Spark deleted from."""
    spark = delta_spark
    ours, theirs = _stripped_twins(spark, tmp_path, dvs=False)
    version = deltadv.DeltaTable(ours).version()
    m = deltadv.DeltaTable(ours).delete("id IN (1, 8, 30)", allow_copy_on_write=True)
    assert m["num_deleted_rows"] == 3
    spark.sql(f"DELETE FROM delta.`{theirs}` WHERE id IN (1, 8, 30)")
    assert deltadv.DeltaTable(ours).version() == version + 1
    _assert_named_in(ours, version + 1)
    got, want = spark_row_ids(spark, ours), spark_row_ids(spark, theirs)
    assert len(got) == N - 3
    assert got == want
    assert _read_row_ids(ours) == got
    _still_usable(spark, ours, got)


@pytest.mark.parametrize("operation", ["purge", "optimize"])
def test_compaction_names_the_materialized_columns_when_absent(
    delta_spark: Any, tmp_path: Path, operation: str
) -> None:
    """PURGE and OPTIMIZE on a row-tracking table whose metadata names no
    materialized columns: the compaction names them in its commit and every row
    keeps its row id and row commit version, as Delta Spark's REORG/OPTIMIZE keep
    them on the twin table."""
    spark = delta_spark
    ours, theirs = _stripped_twins(spark, tmp_path, dvs=True)
    # DVs to purge (DVs need no materialized columns); the rows' commit versions
    # are those of the two INSERTs, the file each row is in.
    deltadv.DeltaTable(ours).delete("id IN (2, 9, 33)")
    spark.sql(f"DELETE FROM delta.`{theirs}` WHERE id IN (2, 9, 33)")
    before = spark_row_ids(spark, theirs)
    assert len({rcv for _, rcv, _ in before.values()}) == 2
    assert _read_row_ids(ours) == before
    if operation == "purge":
        m = deltadv.DeltaTable(ours).purge()
        spark.sql(f"REORG TABLE delta.`{theirs}` APPLY (PURGE)")
    else:
        m = deltadv.DeltaTable(ours).optimize()
        spark.sql(f"OPTIMIZE delta.`{theirs}`")
    assert m["num_removed_files"] >= 1
    version = deltadv.DeltaTable(ours).version()
    assert m["version"] == version
    _assert_named_in(ours, version)
    got, want = spark_row_ids(spark, ours), spark_row_ids(spark, theirs)
    assert want == before  # Delta Spark's compaction keeps them
    assert got == want
    assert _read_row_ids(ours) == got
    _still_usable(spark, ours, got)
