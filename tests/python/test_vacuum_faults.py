"""VACUUM interrupted: a failure between its VACUUM START commit and the deletes,
and a SIGKILL in the middle of the deletes. Either way the table stays readable
(by deltadv and Delta Spark), nothing a live version reads is gone, and a rerun
finishes the job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

import deltadv
from deltadv._core import _set_fault_points
from deltadv.write import write_table
from tests.python.dml_tables import table_files

ROWS = 400


def purged_table(tmp_path: Path, files: int) -> tuple[str, set[str]]:
    """A table of `files` appends whose rows < 40 of each are deleted, then purged:
    the old files and the DV file become unreferenced. Returns its path and the
    files VACUUM (retention 0) must delete."""
    path = str(tmp_path / "t")
    for i in range(files):
        ids = list(range(i * ROWS, (i + 1) * ROWS))
        write_table(
            path,
            pa.table({"id": pa.array(ids, pa.int64()), "s": [f"v{x}" for x in ids]}),
            mode="append" if i else "error",
        )
    t = deltadv.DeltaTable(path)
    t.delete(" OR ".join(f"(id >= {i * ROWS} AND id < {i * ROWS + 40})" for i in range(files)))
    # the old data files and the DV file: everything from before the purge
    doomed = table_files(Path(path))
    t.purge()
    assert table_files(Path(path)) - doomed
    time.sleep(1.1)  # older than a 0-hour cutoff
    return path, doomed


def expected_rows(files: int) -> list[tuple[Any, ...]]:
    return sorted((i, f"v{i}") for f in range(files) for i in range(f * ROWS + 40, (f + 1) * ROWS))


def rows_of(path: str) -> list[tuple[Any, ...]]:
    return sorted(
        (r["id"], r["s"]) for r in deltadv.DeltaTable(path).to_pyarrow_table().to_pylist()
    )


def test_failure_before_the_deletes_records_it_and_a_rerun_completes(
    delta_spark: Any, tmp_path: Path
) -> None:
    path, doomed = purged_table(tmp_path, 3)
    table = deltadv.DeltaTable(path)
    _set_fault_points("vacuum_delete")
    try:
        try:
            table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
        except OSError as e:
            assert "vacuum_delete" in str(e)
        else:
            raise AssertionError("the armed fault point did not fire")
    finally:
        _set_fault_points("")
    # nothing deleted; VACUUM START and a FAILED VACUUM END recorded
    assert doomed <= table_files(Path(path))
    history = deltadv.DeltaTable(path).history(2)
    assert [h["operation"] for h in history] == ["VACUUM END", "VACUUM START"]
    assert history[0]["operationParameters"]["status"] == "FAILED"
    assert rows_of(path) == expected_rows(3)
    got = sorted_rows_spark(delta_spark, path)
    assert got == expected_rows(3)
    # the rerun deletes exactly the unreferenced files
    deleted = deltadv.DeltaTable(path).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False
    )
    assert set(deleted) == doomed
    assert not (doomed & table_files(Path(path)))
    assert deltadv.DeltaTable(path).history(1)[0]["operationParameters"]["status"] == "COMPLETED"
    assert sorted_rows_spark(delta_spark, path) == expected_rows(3)


def sorted_rows_spark(spark: Any, path: str) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["s"]) for r in spark.read.format("delta").load(path).collect())


def test_sigkill_during_the_deletes(delta_spark: Any, tmp_path: Path) -> None:
    path, doomed = purged_table(tmp_path, 6)
    code = (
        "import sys, time, deltadv\n"
        "def progress(done, total):\n"
        "    print('deleted', done, 'of', total, flush=True)\n"
        "    time.sleep(30)\n"
        f"deltadv.DeltaTable({path!r}).vacuum(retention_hours=0, "
        "enforce_retention_duration=False, dry_run=False, progress=progress)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("deleted"), (line, proc.stderr.read() if proc.stderr else "")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    # some files went, the table reads right (nothing live was deleted)
    assert doomed - table_files(Path(path)), "the kill came before any delete"
    assert rows_of(path) == expected_rows(6)
    assert sorted_rows_spark(delta_spark, path) == expected_rows(6)
    # a VACUUM START without its END: the rerun finishes the job
    assert deltadv.DeltaTable(path).history(1)[0]["operation"] == "VACUUM START"
    rest = deltadv.DeltaTable(path).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False
    )
    assert set(rest) <= doomed
    assert not (doomed & table_files(Path(path)))
    assert sorted_rows_spark(delta_spark, path) == expected_rows(6)
