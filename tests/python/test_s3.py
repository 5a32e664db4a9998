"""The golden tables read from a real S3-compatible server on 127.0.0.1, with the
request counts checked: one GET per DV file, not per data file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deltadv import DeletionVectorDescriptor, DeltaTable
from deltadv._sample import make_table
from tests.python.s3server import client, s3_server, storage_options, upload_dir
from tests.python.test_table import TEMPLATE, TEST_PREFIXED, materialize_template

BUCKET = "golden"


@pytest.fixture(scope="module")
def s3(golden: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with s3_server() as endpoint:
        client(endpoint).create_bucket(Bucket=BUCKET)
        expected = json.loads((golden / "expected.json").read_text())
        for name in expected:
            if name.startswith("_") or name == TEMPLATE:
                continue
            upload_dir(endpoint, BUCKET, golden / name, name)
        yield endpoint


def _dv_files(files: Any) -> set[str]:
    out = set()
    for row in files.to_pylist():
        if row["dv_storage_type"] in ("u", "p"):
            d = DeletionVectorDescriptor(
                row["dv_storage_type"],
                row["dv_path_or_inline_dv"],
                row["dv_size_in_bytes"],
                row["dv_cardinality"],
                offset=row["dv_offset"],
            )
            out.add(d.absolute_path(""))
    return out


def test_golden_tables_on_s3(s3: str, golden: Path) -> None:
    expected = json.loads((golden / "expected.json").read_text())
    opts = storage_options(s3)
    for name, exp in expected.items():
        if name.startswith("_") or name == TEMPLATE:
            continue
        t = DeltaTable(f"s3://{BUCKET}/{name}", storage_options=opts)
        assert t.version() == exp["log_stats"]["latest_version"], name
        assert t.count() == exp["rows"], name
        for v, rows in exp.get("per_version_rows_given", {}).items():
            t.load_as_version(int(v))
            assert t.count() == rows, (name, v)
        if name in TEST_PREFIXED:
            continue
        t.update_incremental()
        files = t.get_add_actions()
        dv_files = _dv_files(files)
        before = t.request_counts()["gets"]
        dvs = t.deletion_vectors()
        gets = t.request_counts()["gets"] - before
        assert sum(len(d) for d in dvs.values()) == exp["log_stats"]["sum_dv_cardinality_live"]
        assert gets == len(dv_files), (name, gets, dv_files)


def test_many_dvs_in_one_file_cost_one_get(s3: str, tmp_path: Path) -> None:
    """Ten data files whose DVs share one DV file: loading all DVs is one ranged GET."""
    deleted = {i: list(range(i, 500, 7 + i)) for i in range(10)}
    made = make_table(tmp_path / "packed", files=12, rows_per_file=500, deleted=deleted)
    upload_dir(s3, BUCKET, tmp_path / "packed", "packed")
    t = DeltaTable(f"s3://{BUCKET}/packed", storage_options=storage_options(s3))
    assert t.count() == made["rows"]
    before = t.request_counts()
    dvs = t.deletion_vectors()
    after = t.request_counts()
    assert after["gets"] - before["gets"] == 1
    assert after["lists"] == before["lists"] and after["puts"] == 0
    assert len(dvs) == 10
    by_rows = sorted(sorted(dv) for dv in dvs.values())
    assert by_rows == sorted(sorted(v) for v in deleted.values())


def test_bad_storage_option_is_a_clear_error(s3: str) -> None:
    with pytest.raises(ValueError, match="unknown storage option"):
        DeltaTable(f"s3://{BUCKET}/x", storage_options={"AWS_NOT_A_KEY": "1"})


def test_template_table_on_s3_is_materialized_locally(golden: Path, tmp_path: Path) -> None:
    # The 'p' DV of the template points at a local file: read it from disk.
    root = materialize_template(golden, tmp_path)
    assert DeltaTable(str(root)).count() == 5
