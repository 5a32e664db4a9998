"""DeltaTable over the golden tables: versions, live files, row counts, DVs, history,
time travel, and clear errors for corrupt logs."""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltadv
from deltadv import DeltaTable

TEMPLATE = "delta/spark/table-with-dv-special-char"
PLACEHOLDER = "{{FOLDER_WITH_SPECIAL_CHAR}}"
TEST_PREFIXED = {
    "delta/spark/table-with-dv-small",
    "delta/spark/table-with-dv-large",
    "delta/spark/partitioned-table-with-dv-large",
}


@pytest.fixture(scope="session")
def expected(golden: Path) -> dict[str, Any]:
    data = json.loads((golden / "expected.json").read_text())
    return {k: v for k, v in data.items() if not k.startswith("_")}


def copy_table(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def materialize_template(golden: Path, tmp: Path) -> Path:
    root = copy_table(golden / TEMPLATE, tmp / "special")
    log = root / "_delta_log" / "00000000000000000000.json"
    folder = root / "folder&with%special char"
    log.write_text(log.read_text().replace(PLACEHOLDER, str(folder)))
    return root


def table_root(golden: Path, name: str, tmp: Path) -> Path:
    return materialize_template(golden, tmp) if name == TEMPLATE else golden / name


def test_every_golden_table_every_version(
    golden: Path, expected: dict[str, Any], tmp_path: Path
) -> None:
    versions_checked = 0
    for name, exp in expected.items():
        root = table_root(golden, name, tmp_path)
        stats = exp["log_stats"]
        t = DeltaTable(str(root))
        assert t.version() == stats["latest_version"], name
        files = t.get_add_actions()
        assert files.num_rows == stats["live_files"], name
        assert files["dv_storage_type"].null_count == files.num_rows - stats["live_files_with_dv"]
        assert t.count() == exp["rows"], name
        per_version = {
            **exp.get("per_version_rows_helper", {}),
            **exp.get("per_version_rows_given", {}),
        }
        for v, rows in per_version.items():
            assert DeltaTable(str(root), version=int(v)).count() == rows, (name, v)
            t.load_as_version(int(v))
            assert t.version() == int(v) and t.count() == rows
            versions_checked += 1
        if name not in TEST_PREFIXED:
            t.update_incremental()
            dvs = t.deletion_vectors()
            assert sum(len(dv) for dv in dvs.values()) == stats["sum_dv_cardinality_live"], name
    assert versions_checked > 150


def test_small_table_details(golden: Path) -> None:
    t = DeltaTable(str(golden / "delta-kernel-rs/table-with-dv-small"))
    assert t.schema() == pa.schema([pa.field("value", pa.int32())])
    assert t.protocol()["minReaderVersion"] == 3
    assert "deletionVectors" in t.protocol()["readerFeatures"]
    ((path, dv),) = t.deletion_vectors().items()
    assert path.endswith(".parquet") and list(dv) == [0, 9]
    row = t.get_add_actions().to_pylist()[0]
    assert row["num_records"] == 10 and row["logical_rows"] == 8 and row["tight_bounds"] is False
    assert row["dv_unique_id"] == "uvBn[lx{q8@P<9BNH/isA@1"
    hist = t.history()
    assert [h["version"] for h in hist] == [1, 0]
    assert hist[0]["operation"] == "DELETE"


def test_column_mapping_and_partitions(golden: Path) -> None:
    t = DeltaTable(str(golden / "delta-kernel-rs/golden_data/dv-with-columnmapping/delta"))
    names = t.schema().names
    assert not any(n.startswith("col-") for n in names), names
    parts = t.get_add_actions().column("partition").combine_chunks()
    assert parts.type.num_fields == 1
    assert all(isinstance(v, int) for v in parts.field(0).to_pylist())


def test_time_travel_by_timestamp(golden: Path, tmp_path: Path) -> None:
    root = copy_table(golden / "delta/kernel-defaults/basic-dv-no-checkpoint", tmp_path / "t")
    base = datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp()
    for v in (0, 1):
        f = root / "_delta_log" / f"{v:020}.json"
        os.utime(f, (base + 100 * v, base + 100 * v))
    t = DeltaTable(str(root))
    t.load_as_version(datetime(2024, 1, 1, 0, 0, 50, tzinfo=timezone.utc))
    assert t.version() == 0
    t.load_as_version("2024-01-01T00:01:40+00:00")
    assert t.version() == 1
    with pytest.raises(ValueError, match="no commit at or before"):
        t.load_as_version(datetime(2023, 1, 1))
    # Without in-commit timestamps, resolving a timestamp reads one commit (the
    # newest, to see that it has none), not every commit.
    fresh = DeltaTable(str(root))
    before = fresh.request_counts()["gets"]
    fresh._raw.load_timestamp(int((base + 50) * 1000))
    gets = fresh.request_counts()["gets"] - before
    assert fresh.version() == 0
    # 1 probe of the newest commit, then loading v0: _last_checkpoint + commit 0.
    assert gets == 3


def test_version_beyond_latest(golden: Path) -> None:
    with pytest.raises(deltadv.VersionNotFoundError, match="version 99 requested"):
        DeltaTable(str(golden / "delta-kernel-rs/table-with-dv-small"), version=99)


def test_not_a_table(tmp_path: Path) -> None:
    # A directory that exists but holds no Delta log.
    (tmp_path / "part-0.parquet").write_bytes(b"PAR1")
    not_a_table = "is not a Delta table: it has no _delta_log"
    with pytest.raises(deltadv.TableNotFoundError, match=not_a_table):
        DeltaTable(str(tmp_path))
    (tmp_path / "_delta_log").mkdir()
    (tmp_path / "_delta_log" / "notes.txt").write_text("x")
    with pytest.raises(deltadv.TableNotFoundError, match="is not a Delta table"):
        DeltaTable(str(tmp_path))


def test_missing_path_is_not_a_table(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    with pytest.raises(deltadv.TableNotFoundError, match="the path does not exist") as info:
        DeltaTable(str(missing))
    assert "no-such-dir" in str(info.value)
    # Callers that only know builtins catch it as a missing file.
    assert isinstance(info.value, FileNotFoundError)
    assert isinstance(info.value, deltadv.DeltaDVError)


# --- corrupt logs: each a clear error naming the file -----------------------------------


@pytest.fixture
def writable_table(golden: Path, tmp_path: Path) -> Path:
    return copy_table(golden / "delta/kernel-defaults/basic-dv-with-checkpoint", tmp_path / "t")


def test_missing_version_in_the_middle(writable_table: Path) -> None:
    (writable_table / "_delta_log" / f"{43:020}.json").unlink()
    with pytest.raises(deltadv.CorruptLogError, match=r"00000000000000000043\.json.*missing"):
        DeltaTable(str(writable_table))


def test_malformed_json_line(writable_table: Path) -> None:
    f = writable_table / "_delta_log" / f"{45:020}.json"
    f.write_text(f.read_text() + '{"add": {"path": \n')
    with pytest.raises(deltadv.CorruptLogError, match=r"00000000000000000045\.json.*line \d+"):
        DeltaTable(str(writable_table))


def test_checkpoint_disagrees_with_last_checkpoint(writable_table: Path) -> None:
    f = writable_table / "_delta_log" / "_last_checkpoint"
    hint = json.loads(f.read_text())
    hint["size"] = hint["size"] + 7
    f.write_text(json.dumps(hint))
    with pytest.raises(deltadv.CorruptLogError, match=r"checkpoint\.parquet.*_last_checkpoint"):
        DeltaTable(str(writable_table))


def test_unsupported_reader_feature(golden: Path, tmp_path: Path) -> None:
    root = copy_table(golden / "delta-kernel-rs/table-with-dv-small", tmp_path / "t")
    f = root / "_delta_log" / f"{0:020}.json"
    f.write_text(
        f.read_text().replace('"deletionVectors"]', '"deletionVectors","fancyNewThing"]', 1)
    )
    with pytest.raises(deltadv.DeltaProtocolError, match='reader feature "fancyNewThing"'):
        DeltaTable(str(root))


def test_illegal_duplicate_add(golden: Path, tmp_path: Path) -> None:
    root = copy_table(golden / "delta-kernel-rs/table-with-dv-small", tmp_path / "t")
    f = root / "_delta_log" / f"{1:020}.json"
    lines = f.read_text().splitlines()
    add = next(json.loads(x) for x in lines if '"add"' in x)
    add["add"].pop("deletionVector")
    f.write_text("\n".join([*lines, json.dumps(add)]) + "\n")
    with pytest.raises(deltadv.CorruptLogError, match=r"00000000000000000001\.json.*added twice"):
        DeltaTable(str(root))


def test_table_is_an_arrow_stream(tmp_path: Path) -> None:
    """pa.table() and polars.DataFrame() take the DeltaTable itself (deleted rows gone)."""
    import polars as pl
    import pyarrow as pa

    from deltadv.write import write_table

    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": pa.array(range(10), pa.int64())}))
    t = deltadv.DeltaTable(path)
    t.delete("id < 3")
    assert sorted(pa.table(t).column("id").to_pylist()) == list(range(3, 10))
    assert sorted(pl.DataFrame(t)["id"].to_list()) == list(range(3, 10))
