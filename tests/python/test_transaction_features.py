"""Table features the Rust transaction maintains for every commit, checked with Delta
Spark 4.4 as the oracle on tables Delta Spark creates and writes itself:

* row tracking: rows that survive a deltadv DELETE keep Delta Spark's
  ``_metadata.row_id`` and ``_metadata.row_commit_version``; the high-water mark is
  carried, so Delta Spark's next insert gets fresh ids;
* in-commit timestamps: deltadv's commits carry a monotonic ``inCommitTimestamp``
  (commitInfo first), which Delta Spark's history and timestamp time travel use;
* V2 checkpoints: on a ``v2Checkpoint`` table the checkpoint deltadv writes after a
  commit is a V2 checkpoint, which Delta Spark reads.

Expected rows come from the data each test writes, never from deltadv."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

import deltadv

N = 40


def _commit(path: str, version: int) -> list[dict[str, Any]]:
    text = (Path(path) / "_delta_log" / f"{version:020}.json").read_text()
    return [json.loads(x) for x in text.splitlines() if x.strip()]


def _row_ids(spark: Any, path: str) -> dict[int, tuple[int, int]]:
    rows = spark.sql(
        "SELECT id, _metadata.row_id AS rid, _metadata.row_commit_version AS rcv "
        f"FROM delta.`{path}`"
    ).collect()
    return {r["id"]: (r["rid"], r["rcv"]) for r in rows}


def test_row_tracking_survives_a_delete(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "rt")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, s STRING) USING delta TBLPROPERTIES ("
        "'delta.enableRowTracking'='true', 'delta.enableDeletionVectors'='true')"
    )
    for lo in (0, N // 2):  # two files from two commits
        values = ", ".join(f"({i}, 's{i}')" for i in range(lo, lo + N // 2))
        spark.sql(f"INSERT INTO delta.`{path}` VALUES {values}")
    before = _row_ids(spark, path)
    assert len(before) == N and len({rid for rid, _ in before.values()}) == N

    gone = {1, 2, 3, 25, 39}
    t = deltadv.DeltaTable(path)
    m = t.delete("id IN (1, 2, 3, 25, 39)")
    assert m["num_deleted_rows"] == len(gone)
    # The re-added files keep baseRowId / defaultRowCommitVersion.
    adds = [a["add"] for a in _commit(path, m["version"]) if "add" in a]
    assert adds and all(a["baseRowId"] is not None for a in adds)
    assert all(a["deletionVector"] for a in adds)

    spark.catalog.clearCache()
    after = _row_ids(spark, path)
    assert set(after) == set(range(N)) - gone
    assert after == {i: before[i] for i in after}, "row ids changed for surviving rows"

    # Delta Spark's next insert gets ids above everything assigned so far.
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (100, 's100'), (101, 's101')")
    now = _row_ids(spark, path)
    assert min(now[100][0], now[101][0]) > max(rid for rid, _ in before.values())


def test_row_ids_for_files_deltadv_adds(delta_spark: Any, tmp_path: Path) -> None:
    """A table deltadv creates with row tracking: ids 0..n-1 in file order, then a
    Delta Spark insert continues after the high-water mark deltadv recorded."""
    from deltadv.write import write_table

    spark = delta_spark
    path = str(tmp_path / "rt_ours")
    write_table(
        path,
        pa.table({"id": pa.array(range(10), pa.int64())}),
        configuration={"delta.enableRowTracking": "true"},
    )
    protocol = next(a["protocol"] for a in _commit(path, 0) if "protocol" in a)
    assert {"rowTracking", "domainMetadata"} <= set(protocol["writerFeatures"])
    ids = _row_ids(spark, path)
    assert sorted(rid for rid, _ in ids.values()) == list(range(10))
    assert {rcv for _, rcv in ids.values()} == {0}
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (10)")
    assert _row_ids(spark, path)[10][0] == 10
    import deltalake

    ids_read = pa.table(deltalake.DeltaTable(path).scan().read_all())["id"].to_pylist()
    assert sorted(ids_read) == list(range(11))


def test_in_commit_timestamps_are_monotonic(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "ict")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT) USING delta TBLPROPERTIES ("
        "'delta.enableInCommitTimestamps'='true', 'delta.enableDeletionVectors'='true')"
    )
    spark.sql(f"INSERT INTO delta.`{path}` SELECT id FROM range({N})")
    t = deltadv.DeltaTable(path)
    previous = _commit(path, t.version())[0]["commitInfo"]["inCommitTimestamp"]
    versions = []
    for i in range(3):
        versions.append(t.delete(f"id = {i}")["version"])
    icts = []
    for v in versions:
        first = _commit(path, v)[0]
        assert "commitInfo" in first, "commitInfo must be the first action"
        icts.append(first["commitInfo"]["inCommitTimestamp"])
        assert first["commitInfo"]["timestamp"] == icts[-1]
    assert previous < icts[0] < icts[1] < icts[2]
    import deltalake

    assert pa.table(deltalake.DeltaTable(path).scan().read_all()).num_rows == N - 3

    # Delta Spark's history reports the in-commit timestamps…
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    by_version = {r["version"]: r["timestamp"] for r in history}
    for v, ict in zip(versions, icts, strict=True):
        assert int(by_version[v].timestamp() * 1000) == ict
    # …and time travel by timestamp resolves through them.
    from datetime import datetime, timezone

    at = datetime.fromtimestamp(icts[1] / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[
        :-3
    ]
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    n = spark.sql(f"SELECT count(*) AS n FROM delta.`{path}` TIMESTAMP AS OF '{at}'").first()
    assert n is not None and n["n"] == N - 2


def test_v2_checkpoint_written_after_commit(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "v2")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT) USING delta TBLPROPERTIES ("
        "'delta.checkpointPolicy'='v2', 'delta.enableDeletionVectors'='true', "
        "'delta.checkpointInterval'='3')"
    )
    spark.sql(f"INSERT INTO delta.`{path}` SELECT id FROM range({N})")
    t = deltadv.DeltaTable(path)
    assert t.version() == 1
    m = t.delete("id = 5")  # version 2
    m = t.delete("id = 6")  # version 3: a checkpoint is due
    assert m["version"] == 3 and m["checkpointed"]
    log = Path(path) / "_delta_log"
    tops = sorted(p.name for p in log.glob("00000000000000000003.checkpoint.*.json"))
    assert len(tops) == 1, sorted(p.name for p in log.iterdir())
    first = json.loads((log / tops[0]).read_text().splitlines()[0])
    assert first == {"checkpointMetadata": {"version": 3}}
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == 3

    # Delta Spark reads the table through our checkpoint: the commits before it
    # are hidden to prove it (Delta Spark wants the checkpoint version's own commit).
    for v in range(3):
        p = log / f"{v:020}.json"
        p.rename(p.with_suffix(".hidden"))
    try:
        spark.catalog.clearCache()
        ids = sorted(r["id"] for r in spark.read.format("delta").load(path).collect())
        assert ids == [i for i in range(N) if i not in (5, 6)]
        assert deltadv.DeltaTable(path).count() == N - 2
    finally:
        for v in range(3):
            p = log / f"{v:020}.hidden"
            p.rename(p.with_suffix(".json"))


def test_copy_on_write_delete_keeps_row_ids(delta_spark: Any, tmp_path: Path) -> None:
    """Without deletion vectors a DELETE rewrites the file; on a row-tracking table
    the rows it copies keep their ids and commit versions (materialized), as Delta
    Spark shows them before and after."""
    spark = delta_spark
    path = str(tmp_path / "cow")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT) USING delta TBLPROPERTIES ("
        "'delta.enableRowTracking'='true', 'delta.enableDeletionVectors'='false')"
    )
    spark.sql(f"INSERT INTO delta.`{path}` SELECT id FROM range(5)")
    before = _row_ids(spark, path)
    m = deltadv.DeltaTable(path).delete("id = 1", allow_copy_on_write=True)
    assert m["num_deleted_rows"] == 1 and m["num_removed_files"] == 1
    spark.catalog.clearCache()
    assert _row_ids(spark, path) == {k: v for k, v in before.items() if k != 1}
    assert not deltadv.DeltaTable(path).deletion_vectors()


def test_purge_keeps_row_ids(delta_spark: Any, tmp_path: Path) -> None:
    """PURGE of a row-tracking table rewrites its files with the rows' ids and commit
    versions materialized, so Delta Spark reads the same ids after it; then OPTIMIZE
    (which merges files) keeps them too."""
    spark = delta_spark
    path = str(tmp_path / "rt")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, s STRING) USING delta TBLPROPERTIES ("
        "'delta.enableRowTracking'='true', 'delta.enableDeletionVectors'='true')"
    )
    for lo in (0, N // 2):
        values = ", ".join(f"({i}, 's{i}')" for i in range(lo, lo + N // 2))
        spark.sql(f"INSERT INTO delta.`{path}` VALUES {values}")
    before = _row_ids(spark, path)
    t = deltadv.DeltaTable(path)
    t.delete("id IN (1, 2, 3, 25, 39)")
    gone = {1, 2, 3, 25, 39}
    with_dvs = len(t.deletion_vectors())
    m = t.purge()
    assert with_dvs >= 2 and m["num_deletion_vectors_removed"] == with_dvs
    assert not t.deletion_vectors()
    spark.catalog.clearCache()
    after = _row_ids(spark, path)
    assert set(after) == set(range(N)) - gone
    assert after == {i: before[i] for i in after}, "row ids changed by PURGE"
    t.optimize()
    spark.catalog.clearCache()
    assert _row_ids(spark, path) == after, "row ids changed by OPTIMIZE"
    assert len(t.files()) == 1
    # Delta Spark's next insert still gets ids above everything assigned so far.
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (100, 's100')")
    assert _row_ids(spark, path)[100][0] > max(rid for rid, _ in before.values())
