"""The table commands of the command line (info, files, history, dvs, purge,
optimize, vacuum, restore, generate) run as a user runs them, in a subprocess;
the progress bar in a real terminal (tmux)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltadv
from deltadv.write import write_table

SCRIPT = str(Path(sys.executable).with_name("deltadv"))
ROWS = 1200
PARTS = 3


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=120, check=False)


def run_json(*args: str) -> Any:
    out = run(*args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def make_table(tmp_path: Path, files_per_part: int = 1) -> str:
    """ROWS rows (id, part = id % PARTS), `files_per_part` files per partition;
    then ids < 120 deleted with DVs (40 per partition)."""
    path = str(tmp_path / "t")
    ids = list(range(ROWS))
    chunk = ROWS // files_per_part
    for i in range(files_per_part):
        part_ids = ids[i * chunk : (i + 1) * chunk]
        data = pa.table(
            {
                "id": pa.array(part_ids, pa.int64()),
                "part": pa.array([x % PARTS for x in part_ids], pa.int64()),
            }
        )
        write_table(path, data, partition_by=["part"], mode="append" if i else "error")
    deltadv.DeltaTable(path).delete("id < 120")
    return path


def test_info_files_history_dvs(tmp_path: Path) -> None:
    path = make_table(tmp_path)
    info = run_json("info", path)
    assert info["version"] == 1
    assert info["rows"] == ROWS - 120
    assert info["deleted_rows"] == 120
    assert info["files"] == PARTS and info["files_with_dv"] == PARTS
    assert info["dv_files"] == 1  # one DELETE, one DV file
    assert "deletionVectors" in info["reader_features"]
    assert info["partition_columns"] == ["part"]
    files = run_json("files", path)
    assert sorted(f["deleted_rows"] for f in files) == [40] * PARTS
    assert sum(f["num_records"] for f in files) == ROWS
    history = run_json("history", path, "--limit", "1")
    assert [h["operation"] for h in history] == ["DELETE"]
    dvs = run_json("dvs", path)
    assert dvs["files_with_dv"] == PARTS
    assert all(abs(f["deleted_ratio"] - 40 / (ROWS / PARTS)) < 1e-9 for f in dvs["files"])
    # the readable form names what a user looks for
    text = run("info", path).stdout
    assert "deleted rows" in text and "120" in text and "deletionVectors" in text


def test_dvs_plot_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    import matplotlib.image

    path = make_table(tmp_path)
    png = tmp_path / "dvs.png"
    out = run("dvs", path, "--plot", str(png))
    assert out.returncode == 0, out.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width, _ = matplotlib.image.imread(png).shape
    assert width >= 400 and height >= 300


def test_purge_vacuum_restore_generate(tmp_path: Path) -> None:
    path = make_table(tmp_path)
    # a manifest would expose deleted rows: refused, exit 1, clear message
    out = run("generate", path)
    assert out.returncode == 1 and "deletion vectors" in out.stderr
    m = run_json("purge", path)
    assert m["version"] == 2
    assert m["num_removed_files"] == PARTS and m["num_deletion_vectors_removed"] == PARTS
    assert deltadv.DeltaTable(path).count() == ROWS - 120
    assert not deltadv.DeltaTable(path).deletion_vectors()
    # the purged files and the DV file are unreferenced, but inside the retention
    assert run_json("vacuum", path)["files"] == []
    out = run("vacuum", path, "--retention-hours", "0")
    assert out.returncode == 1 and "enforce" in out.stderr
    time.sleep(1.1)  # older than the cutoff
    dry = run_json("vacuum", path, "--retention-hours", "0", "--no-enforce-retention")
    assert dry["dry_run"] and len(dry["files"]) == PARTS + 1
    assert sum(f.startswith("deletion_vector_") for f in dry["files"]) == 1
    assert all(Path(path, f).exists() for f in dry["files"])  # a dry run deletes nothing
    done = run_json("vacuum", path, "--retention-hours", "0", "--no-enforce-retention", "--apply")
    assert sorted(done["files"]) == sorted(dry["files"])
    assert not any(Path(path, f).exists() for f in done["files"])
    assert deltadv.DeltaTable(path).count() == ROWS - 120
    ops = [h["operation"] for h in run_json("history", path, "--limit", "2")]
    assert ops == ["VACUUM END", "VACUUM START"]
    # restoring version 1 needs the files VACUUM removed: refused, nothing committed
    before = deltadv.DeltaTable(path).version()
    out = run("restore", path, "1")
    assert out.returncode == 1 and "VACUUM" in out.stderr
    assert deltadv.DeltaTable(path).version() == before
    # restoring the purge (version 2) is fine: it is the current state's files
    generated = run_json("generate", path)
    assert generated["data_files"] == PARTS
    manifest = Path(path, "_symlink_format_manifest", "part=0", "manifest").read_text()
    assert manifest.count("\n") == 1 and manifest.startswith("file:/")


def test_optimize_and_bad_input(tmp_path: Path) -> None:
    path = make_table(tmp_path, files_per_part=4)
    assert run_json("info", path)["files"] == 4 * PARTS
    m = run_json("optimize", path, "--partition-filter", "part = 0")
    assert m["num_removed_files"] == 4 and m["num_added_files"] == 1
    m = run_json("optimize", path)
    assert m["num_removed_files"] == 8 and m["num_added_files"] == 2
    assert run_json("info", path)["files"] == PARTS
    assert deltadv.DeltaTable(path).count() == ROWS - 120
    for args, message in (
        (("info", str(tmp_path / "nothing")), "nothing"),
        (("info", path, "--storage-option", "novalue"), "KEY=VALUE"),
        (("info", path, "--storage-option", "AWS_REGION=x"), "AWS_REGION"),
        (("optimize", path, "--partition-filter", "id = 1"), "partition"),
        (("restore", path, "99"), "99"),
    ):
        out = run(*args)
        assert out.returncode == 1, (args, out.stdout)
        assert message in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_no_progress_bar_when_piped(tmp_path: Path) -> None:
    path = make_table(tmp_path, files_per_part=3)
    out = run("optimize", path, "--target-size", "1")
    assert out.returncode == 0, out.stderr
    assert "━" not in out.stderr and "bins of files" not in out.stderr


def test_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: the terminal test needs it (apt-get install tmux)")
    path = make_table(tmp_path)
    # many small bins: with a target size of 1 byte every file with a DV is its own bin
    log = tmp_path / "terminal.log"
    session = f"deltadv-cli-{time.monotonic_ns()}"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "30"], check=True
    )
    try:
        subprocess.run(["tmux", "pipe-pane", "-t", session, f"cat >> {log}"], check=True)
        subprocess.run(
            [
                "tmux",
                "send-keys",
                "-t",
                session,
                f"{SCRIPT} purge {path} --target-size 1; printf 'FIN%s\\n' $?",
                "Enter",
            ],
            check=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            screen = subprocess.run(
                ["tmux", "capture-pane", "-p", "-t", session],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            if re.search(r"FIN\d", screen):
                break
            time.sleep(0.2)
        assert "FIN0" in screen, screen
        assert "num_removed_files" in screen
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
    drawn = log.read_text(errors="replace")
    # the bar was drawn (and cleared): its label and a done/total count
    assert "PURGE" in drawn and "bins of files" in drawn, drawn[-2000:]
    assert f"{PARTS}/{PARTS}" in drawn or f"0/{PARTS}" in drawn, drawn[-2000:]
