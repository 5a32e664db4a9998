"""Maintenance against Delta Spark 4.4: PURGE and OPTIMIZE (Python and Spark),
VACUUM and RESTORE. Every result is read back by Delta Spark row for row and
compared with a row model; commit metadata is compared with Delta Spark's own
commands on twin tables; concurrency and faults leave nothing behind."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

import deltadv
from deltadv import spark as dspark
from deltadv._core import _set_fault_points
from deltadv.write import write_table
from tests.python.dml_tables import (
    N,
    Row,
    create_table,
    initial_model,
    sorted_rows,
    table_files,
)


def spark_rows(spark: Any, path: str, version: int | None = None) -> list[tuple[Any, ...]]:
    spark.catalog.clearCache()
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return sorted_rows([r.asDict() for r in reader.load(path).collect()])


def commit(path: str, version: int) -> list[dict[str, Any]]:
    text = Path(path, "_delta_log", f"{version:020}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def commit_info(path: str, version: int) -> dict[str, Any]:
    return next(a["commitInfo"] for a in commit(path, version) if "commitInfo" in a)


def latest_version(path: str) -> int:
    return deltadv.DeltaTable(path).version()


def deleted_table(spark: Any, path: str, mapped: bool) -> dict[int, Row]:
    """The shared DML table with DVs from deltadv and from Delta Spark; its model."""
    create_table(spark, path, mapped)
    deltadv.DeltaTable(path).delete("id < 60 OR id IN (700, 1500, 2999)")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id BETWEEN 1000 AND 1010")
    return {
        i: r
        for i, r in initial_model().items()
        if not (i < 60 or i in (700, 1500, 2999) or 1000 <= i <= 1010)
    }


@pytest.mark.parametrize("mapped", [False, True], ids=["plain", "column-mapped"])
def test_purge_read_back_by_delta_spark(delta_spark: Any, tmp_path: Path, mapped: bool) -> None:
    spark = delta_spark
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    model = deleted_table(spark, ours, mapped)
    deleted_table(spark, theirs, mapped)
    want = sorted_rows(list(model.values()))
    t = deltadv.DeltaTable(ours)
    with_dvs = len(t.deletion_vectors())
    before = t.version()
    assert with_dvs > 0
    m = t.purge()
    assert m["version"] == before + 1
    assert m["num_removed_files"] == with_dvs == m["num_deletion_vectors_removed"]
    assert 0 < m["num_added_files"] <= with_dvs
    assert not t.deletion_vectors()
    actions = commit(ours, m["version"])
    files = [a.get("add") or a.get("remove") for a in actions if "add" in a or "remove" in a]
    assert files and all(f["dataChange"] is False for f in files)
    assert spark_rows(spark, ours) == want
    assert sorted_rows(t.to_pyarrow_table().to_pylist()) == want
    assert spark_rows(spark, ours, before) == want  # time travel before PURGE
    # the same operation, parameters and metric names as Delta Spark's REORG
    spark.sql(f"REORG TABLE delta.`{theirs}` APPLY (PURGE)")
    mine, delta = commit_info(ours, m["version"]), commit_info(theirs, latest_version(theirs))
    assert mine["operation"] == delta["operation"] == "REORG"
    assert set(mine["operationParameters"]) == set(delta["operationParameters"])
    assert set(mine["operationMetrics"]) == set(delta["operationMetrics"])
    assert spark_rows(spark, theirs) == want
    # Delta Spark's own REORG has nothing left to do; its DML works on top
    v = latest_version(ours)
    spark.sql(f"REORG TABLE delta.`{ours}` APPLY (PURGE)")
    assert not deltadv.DeltaTable(ours).deletion_vectors()
    spark.sql(f"DELETE FROM delta.`{ours}` WHERE id = 2000")
    del model[2000]
    assert spark_rows(spark, ours) == sorted_rows(list(model.values()))
    assert latest_version(ours) > v


def test_purge_after_a_delete_that_emptied_a_file(tmp_path: Path) -> None:
    """The DELETE removed the emptied file itself; PURGE rewrites the other."""
    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": pa.array(range(10), pa.int64())}))
    write_table(path, pa.table({"id": pa.array(range(10, 20), pa.int64())}), mode="append")
    t = deltadv.DeltaTable(path)
    t.delete("id < 10 OR id = 15")
    m = t.purge()
    assert m["num_removed_files"] == 1 and m["num_added_files"] == 1
    assert sorted(r["id"] for r in t.to_pyarrow_table().to_pylist()) == [
        i for i in range(10, 20) if i != 15
    ]


def small_files_table(tmp_path: Path, name: str, appends: int = 4) -> tuple[str, list[int]]:
    """`appends` appends of 50 rows (part = id % 2): 2 small files each."""
    path = str(tmp_path / name)
    ids: list[int] = []
    for a in range(appends):
        chunk = list(range(a * 50, (a + 1) * 50))
        ids += chunk
        write_table(
            path,
            pa.table({"id": pa.array(chunk, pa.int64()), "part": pa.array([i % 2 for i in chunk])}),
            partition_by=["part"],
            mode="append" if a else "error",
        )
    return path, ids


def test_optimize_bin_packs_filters_and_rewrites_deleted(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path, ids = small_files_table(tmp_path, "t")
    twin, _ = small_files_table(tmp_path, "twin")
    t = deltadv.DeltaTable(path)
    assert len(t.files()) == 8
    m = t.optimize(partition_filters=[("part", "=", 0)])
    assert (m["num_removed_files"], m["num_added_files"]) == (4, 1)
    assert len(t.files()) == 5
    m = t.optimize(partition_filters="part = 1")
    assert (m["num_removed_files"], m["num_added_files"]) == (4, 1)
    assert t.optimize()["version"] is None  # nothing left to do
    want = sorted((i, i % 2) for i in ids)
    got = sorted((r["id"], r["part"]) for r in spark.read.format("delta").load(path).collect())
    assert got == want
    spark.sql(f"OPTIMIZE delta.`{twin}`")
    mine = commit_info(path, latest_version(path))
    delta = commit_info(twin, latest_version(twin))
    assert mine["operation"] == delta["operation"] == "OPTIMIZE"
    assert set(mine["operationMetrics"]) == set(delta["operationMetrics"])
    assert set(delta["operationParameters"]) <= set(mine["operationParameters"])
    # max_deleted_rows_ratio: with no file "small", only files over the ratio go
    t.delete("id IN (0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22)")  # 12 of part 0's 100
    t.delete("id = 1")  # 1 of part 1's 100
    m = t.optimize(target_size=1)
    assert (m["num_removed_files"], m["num_added_files"]) == (1, 1)
    live = {f["partition"]["part"]: f for f in t.dv_stats().to_pylist()}
    assert live[0]["deleted_rows"] == 0 and live[1]["deleted_rows"] == 1


def test_purge_conflicts_with_a_concurrent_delete(delta_spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    model = deleted_table(delta_spark, path, mapped=False)
    t = deltadv.DeltaTable(path)
    before_files = table_files(Path(path))
    plan, tasks = t.compact_tasks("purge")
    results = [deltadv.table.rewrite_compact_task(path, {}, task) for task in tasks]
    # meanwhile another writer deletes a row of a file being rewritten
    deltadv.DeltaTable(path).delete("id = 300")
    del model[300]
    after_delete = table_files(Path(path))
    with pytest.raises(deltadv.CommitConflictError):
        t.commit_compaction(plan, results)
    # nothing the compaction wrote is left (only the DELETE's DV file is new);
    # the deleted row stays deleted
    rewritten = {f for f in after_delete - before_files if "deletion_vector" not in f}
    assert rewritten and not rewritten & table_files(Path(path))
    assert {f for f in table_files(Path(path)) - before_files if not f.startswith(".")} == {
        f for f in after_delete - before_files - rewritten if not f.startswith(".")
    }
    want = sorted_rows(list(model.values()))
    assert spark_rows(delta_spark, path) == want
    m = deltadv.DeltaTable(path).purge()
    assert m["version"] is not None
    assert spark_rows(delta_spark, path) == want


@pytest.mark.parametrize("mode", ["purge", "optimize"])
@pytest.mark.parametrize("point", ["data_write", "commit_put"])
def test_compaction_faults_leave_the_table_as_it_was(
    delta_spark: Any, tmp_path: Path, point: str, mode: str
) -> None:
    path = str(tmp_path / "t")
    model = deleted_table(delta_spark, path, mapped=False)
    t = deltadv.DeltaTable(path)
    version, files = t.version(), table_files(Path(path))
    run = t.purge if mode == "purge" else t.optimize
    _set_fault_points(point)
    try:
        with pytest.raises(OSError, match=point):
            run()
    finally:
        _set_fault_points("")
    assert deltadv.DeltaTable(path).version() == version
    assert table_files(Path(path)) == files
    rerun = deltadv.DeltaTable(path)
    assert (rerun.purge() if mode == "purge" else rerun.optimize())["version"] == version + 1
    assert spark_rows(delta_spark, path) == sorted_rows(list(model.values()))


def test_spark_purge_and_optimize(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "t")
    model = deleted_table(spark, path, mapped=True)
    dt = dspark.DeltaTable.forPath(spark, path)
    m = dt.purge()
    assert m["num_deletion_vectors_removed"] > 0
    assert not deltadv.DeltaTable(path).deletion_vectors()
    assert dt.optimize()["version"] is not None
    assert len(deltadv.DeltaTable(path).files()) == 3  # one per partition
    assert spark_rows(spark, path) == sorted_rows(list(model.values()))
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 2").collect()
    assert [h["operation"] for h in history] == ["OPTIMIZE", "REORG"]


def test_vacuum_keeps_live_dv_files_that_deltalake_full_vacuum_lists(
    delta_spark: Any, tmp_path: Path
) -> None:
    """deltalake 1.6.6's full VACUUM lists (and deletes) the DV file a live file still
    references once it is older than the retention; ours keeps it."""
    path = str(tmp_path / "t")
    model = deleted_table(delta_spark, path, mapped=False)
    live_dvs = {p.name for p in Path(path).glob("deletion_vector_*.bin")}
    assert live_dvs
    old = time.time() - 30 * 86400
    for p in Path(path).rglob("*"):
        if p.is_file() and "_delta_log" not in p.parts:
            os.utime(p, (old, old))
    theirs = deltalake.DeltaTable(path).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=True, full=True
    )
    assert live_dvs & {Path(f).name for f in theirs}, theirs  # the bug, as it is
    ours = deltadv.DeltaTable(path).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False
    )
    assert not live_dvs & {Path(f).name for f in ours}
    assert spark_rows(delta_spark, path) == sorted_rows(list(model.values()))
    # deltalake's real run on a copy loses deleted-row information
    copy = str(tmp_path / "copy")
    shutil.copytree(path, copy)
    deltalake.DeltaTable(copy).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True
    )
    assert not any(Path(copy).glob("deletion_vector_*.bin"))
    with pytest.raises(FileNotFoundError):
        deltadv.DeltaTable(copy).to_pyarrow_table()


def test_vacuum_interop_with_delta_spark(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "t")
    model = deleted_table(spark, path, mapped=False)
    deltadv.DeltaTable(path).purge()
    want = sorted_rows(list(model.values()))
    time.sleep(1.1)
    files = deltadv.DeltaTable(path).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False
    )
    assert files and any(f.startswith("deletion_vector_") for f in files)
    assert spark_rows(spark, path) == want
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"VACUUM delta.`{path}` RETAIN 0 HOURS")
        spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 2500")
        del model[2500]
        deltadv.DeltaTable(path).purge()
        time.sleep(1.1)
        spark.sql(f"VACUUM delta.`{path}` RETAIN 0 HOURS")
    finally:
        spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "true")
    deltadv.DeltaTable(path).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False
    )
    want = sorted_rows(list(model.values()))
    assert spark_rows(spark, path) == want
    assert sorted_rows(deltadv.DeltaTable(path).to_pyarrow_table().to_pylist()) == want
    with pytest.raises(ValueError, match="enforce_retention_duration"):
        deltadv.DeltaTable(path).vacuum(retention_hours=1)


def test_restore_matches_delta_spark(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    for path in (ours, theirs):
        create_table(spark, path, mapped=False)
        t = deltadv.DeltaTable(path)
        t.delete("id < 10")
        t.delete("id < 20")  # the same files' DVs replaced
        t.update({"s": "'x'"}, "id = 100")
        t.purge()
    target = 1  # the first DELETE: files with their first DVs
    want = spark_rows(spark, ours, target)
    m = deltadv.DeltaTable(ours).restore(target)
    assert m["restored_version"] == target
    assert spark_rows(spark, ours) == want
    assert sorted_rows(deltadv.DeltaTable(ours).to_pyarrow_table().to_pylist()) == want
    readded = [a["add"] for a in commit(ours, m["version"]) if "add" in a]
    assert readded and any(a.get("deletionVector") for a in readded)
    assert all(a["dataChange"] for a in readded)
    spark.sql(f"RESTORE TABLE delta.`{theirs}` TO VERSION AS OF {target}")
    mine, delta = commit_info(ours, m["version"]), commit_info(theirs, latest_version(theirs))
    assert mine["operation"] == delta["operation"] == "RESTORE"
    assert set(mine["operationMetrics"]) == set(delta["operationMetrics"])
    assert {k: mine["operationMetrics"][k] for k in delta["operationMetrics"]} == dict(
        delta["operationMetrics"]
    )
    assert spark_rows(spark, theirs) == want
    # time travel past the restore still reads the old versions
    assert len(spark_rows(spark, ours, 2)) == N - 20
    with pytest.raises(ValueError, match="older than"):
        deltadv.DeltaTable(ours).restore(latest_version(ours))


def test_purge_killed_midway_leaves_the_table_readable(delta_spark: Any, tmp_path: Path) -> None:
    """SIGKILL after the first bin is rewritten, before the commit: the table reads
    as before (its version unchanged), and a rerun completes."""
    import signal
    import subprocess
    import sys

    path = str(tmp_path / "t")
    model = deleted_table(delta_spark, path, mapped=False)
    version = latest_version(path)
    code = (
        "import time, deltadv\n"
        "def progress(done, total):\n"
        "    print('bins', done, 'of', total, flush=True)\n"
        "    time.sleep(30)\n"
        f"deltadv.DeltaTable({path!r}).purge(target_size=1, progress=progress)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("bins 1 of"), (line, proc.stderr.read() if proc.stderr else "")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert latest_version(path) == version
    want = sorted_rows(list(model.values()))
    assert spark_rows(delta_spark, path) == want
    m = deltadv.DeltaTable(path).purge()
    assert m["version"] == version + 1
    assert spark_rows(delta_spark, path) == want
    assert not deltadv.DeltaTable(path).deletion_vectors()
