"""Multi-part and V2 (JSON or parquet manifest + sidecars) checkpoints, and in-commit
timestamps. Built from the classic checkpoint of a golden table with pyarrow, so the
same actions must replay to the same answers in every layout."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from deltadv import DeltaTable
from tests.python.test_table import copy_table

TABLE = "delta/kernel-defaults/basic-dv-with-checkpoint"
CP = 40
EXPECTED = {40: 460, 41: 459, 45: 455, 46: 454}


@pytest.fixture
def table(golden: Path, tmp_path: Path) -> Path:
    return copy_table(golden / TABLE, tmp_path / "t")


def _classic(root: Path) -> tuple[Path, pa.Table]:
    f = root / "_delta_log" / f"{CP:020}.checkpoint.parquet"
    return f, pq.read_table(f)


def _check(root: Path) -> None:
    for v, rows in EXPECTED.items():
        t = DeltaTable(str(root), version=v)
        assert t.count() == rows, v
    assert len(DeltaTable(str(root)).files()) == 2


def test_multi_part(table: Path) -> None:
    f, cp = _classic(table)
    f.unlink()
    half = cp.num_rows // 2
    for part, chunk in ((1, cp.slice(0, half)), (2, cp.slice(half))):
        pq.write_table(
            chunk, table / "_delta_log" / f"{CP:020}.checkpoint.{part:010}.0000000002.parquet"
        )
    hint = table / "_delta_log" / "_last_checkpoint"
    hint.write_text(json.dumps(json.loads(hint.read_text()) | {"parts": 2}))
    t = DeltaTable(str(table))
    assert t.count() == 454
    _check(table)


def test_incomplete_multi_part_falls_back_to_an_older_checkpoint(table: Path) -> None:
    f, cp = _classic(table)
    f.unlink()
    pq.write_table(
        cp.slice(0, 5), table / "_delta_log" / f"{CP:020}.checkpoint.0000000001.0000000002.parquet"
    )
    (table / "_delta_log" / "_last_checkpoint").unlink()
    _check(table)  # v30's checkpoint plus commits 31..46


MAP_FIELDS = {"configuration", "options", "partitionValues", "tags"}


def _clean(value: Any, key: str = "") -> Any:
    """pyarrow to_pylist() output -> log JSON (drop nulls, maps as objects)."""
    if key in MAP_FIELDS and isinstance(value, list):
        return dict(value)
    if isinstance(value, dict):
        return {k: _clean(v, k) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_clean(x) for x in value]
    return value


def _sidecars(root: Path, cp: pa.Table) -> list[dict[str, Any]]:
    files = cp.filter(pc.or_(pc.is_valid(cp["add"]), pc.is_valid(cp["remove"])))
    side_dir = root / "_delta_log" / "_sidecars"
    side_dir.mkdir()
    out = []
    for chunk in (files.slice(0, 20), files.slice(20)):
        name = f"{uuid.uuid4()}.parquet"
        pq.write_table(chunk.select(["add", "remove"]), side_dir / name)
        st = (side_dir / name).stat()
        out.append(
            {"path": name, "sizeInBytes": st.st_size, "modificationTime": int(st.st_mtime * 1000)}
        )
    return out


def test_v2_json_manifest_with_sidecars(table: Path) -> None:
    f, cp = _classic(table)
    f.unlink()
    (table / "_delta_log" / "_last_checkpoint").unlink()
    lines = [{"checkpointMetadata": {"version": CP}}]
    for row in cp.filter(
        pc.or_(pc.is_valid(cp["protocol"]), pc.is_valid(cp["metaData"]))
    ).to_pylist():
        lines.append(_clean({k: row[k] for k in ("protocol", "metaData") if row[k] is not None}))
    lines += [{"sidecar": s} for s in _sidecars(table, cp)]
    top = table / "_delta_log" / f"{CP:020}.checkpoint.{uuid.uuid4()}.json"
    top.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    _check(table)


def test_v2_parquet_manifest_with_sidecars(table: Path) -> None:
    f, cp = _classic(table)
    f.unlink()
    (table / "_delta_log" / "_last_checkpoint").unlink()
    sidecars = _sidecars(table, cp)
    meta = cp.filter(pc.or_(pc.is_valid(cp["protocol"]), pc.is_valid(cp["metaData"]))).select(
        ["protocol", "metaData"]
    )
    extra = pa.table(
        {
            "checkpointMetadata": pa.array(
                [{"version": CP}] + [None] * len(sidecars),
                pa.struct([("version", pa.int64())]),
            ),
            "sidecar": pa.array(
                [None, *sidecars],
                pa.struct(
                    [
                        ("path", pa.string()),
                        ("sizeInBytes", pa.int64()),
                        ("modificationTime", pa.int64()),
                    ]
                ),
            ),
        }
    )
    top = pa.concat_tables([meta, extra], promote_options="default")
    pq.write_table(top, table / "_delta_log" / f"{CP:020}.checkpoint.{uuid.uuid4()}.parquet")
    _check(table)


def test_in_commit_timestamps_drive_time_travel(golden: Path, tmp_path: Path) -> None:
    from datetime import datetime, timezone

    root = copy_table(golden / "delta/kernel-defaults/basic-dv-no-checkpoint", tmp_path / "ict")
    stamps = {0: 1_700_000_000_000, 1: 1_700_000_100_000}
    for v, ts in stamps.items():
        f = root / "_delta_log" / f"{v:020}.json"
        lines = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
        info = next((x for x in lines if "commitInfo" in x), {"commitInfo": {}})
        lines = [x for x in lines if "commitInfo" not in x]
        info["commitInfo"]["inCommitTimestamp"] = ts
        f.write_text("\n".join(json.dumps(x) for x in [info, *lines]) + "\n")
    t = DeltaTable(str(root))
    assert t._raw.timestamp() == stamps[1]
    t.load_as_version(datetime.fromtimestamp(1_700_000_050, tz=timezone.utc))
    assert t.version() == 0
    t.load_as_version(datetime.fromtimestamp(1_700_000_100, tz=timezone.utc))
    assert t.version() == 1


def test_checkpoint_written_by_deltalake(tmp_path: Path) -> None:
    """deltalake writes checkpoints whose `add.path` is non-nullable: rows of other
    actions (protocol, metaData) must still not count as adds."""
    import deltalake

    from deltadv._sample import make_table

    root = tmp_path / "dl"
    made = make_table(root, files=30, rows_per_file=100, deleted={3: [1, 2, 3], 7: [0]})
    deltalake.DeltaTable(str(root)).create_checkpoint()
    assert (root / "_delta_log" / f"{0:020}.checkpoint.parquet").exists()
    t = DeltaTable(str(root))
    assert len(t.files()) == 30
    assert t.count() == made["rows"] == 30 * 100 - 4
    assert sorted(len(dv) for dv in t.deletion_vectors().values()) == [1, 3]
