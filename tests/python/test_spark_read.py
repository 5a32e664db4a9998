"""deltadv.spark.read on local[2]: every golden table's rows (DVs applied) equal the
expected rows and values in golden/expected.json."""

from __future__ import annotations

import json
import math
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from deltadv import spark as dspark
from tests.python.test_table import TEMPLATE, copy_table, materialize_template

PREFIX = "test%dv%prefix-"


def _root(golden: Path, name: str, tmp: Path) -> Path:
    if name == TEMPLATE:
        return materialize_template(golden, tmp / "special")
    if name.startswith("delta/spark/"):
        # Delta Spark's test build prefixes DV file names; give them their spec names.
        root = copy_table(golden / name, tmp / name.replace("/", "_"))
        for f in root.glob(PREFIX + "*"):
            shutil.move(f, f.with_name(f.name[len(PREFIX) :]))
        return root
    return golden / name


def _norm(v: Any) -> Any:
    if isinstance(v, datetime):
        v = v if v.tzinfo else v.replace(tzinfo=timezone.utc)
        return v.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(v, float):
        return round(v, 12)
    return v


def _key(row: list[Any]) -> str:
    return json.dumps([_norm(v) for v in row], sort_keys=True, default=str)


def test_golden_tables_through_spark(spark: Any, golden: Path, tmp_path: Path) -> None:
    expected = json.loads((golden / "expected.json").read_text())
    compared = 0
    for name, exp in expected.items():
        if name.startswith("_"):
            continue
        root = _root(golden, name, tmp_path)
        df = dspark.read(spark, str(root), columns=exp["columns"])
        rows = [list(r) for r in df.collect()]
        assert len(rows) == exp["rows"], name
        if "values" in exp:
            got = sorted(_key(r) for r in rows)
            want = sorted(_key(r) for r in exp["values"])
            assert got == want, name
            compared += 1
    assert compared >= 11


def test_time_travel_and_filter(spark: Any, golden: Path) -> None:
    root = golden / "delta-kernel-rs/cdf-table-with-dv"
    for v, rows in json.loads((golden / "expected.json").read_text())[
        "delta-kernel-rs/cdf-table-with-dv"
    ]["per_version_rows_helper"].items():
        assert dspark.read(spark, str(root), version=int(v)).count() == rows
    df = dspark.read(spark, str(golden / "delta-kernel-rs/table-with-dv-small"), filter="value > 4")
    assert sorted(r.value for r in df.collect()) == [5, 6, 7, 8]


def test_unknown_column_fails_on_the_driver(spark: Any, golden: Path) -> None:
    with pytest.raises(ValueError, match="no column"):
        dspark.read(spark, str(golden / "delta-kernel-rs/table-with-dv-small"), columns=["nope"])


def test_float_values_are_exact(spark: Any, golden: Path) -> None:
    df = dspark.read(spark, str(golden / "delta-kernel-rs/with-short-dv"), columns=["rand"])
    assert all(isinstance(r.rand, float) and not math.isnan(r.rand) for r in df.collect())


def test_spark_tasks_work_with_the_task_cpus(spark: Any) -> None:
    # A Spark task's Python worker sizes deltadv's threads to the task's CPUs
    # (spark.task.cpus, 1 here), not to the machine's cores.
    from deltadv.spark._tasks import task_threads

    def body(batches: Any) -> Any:
        import pyarrow as pa

        import deltadv

        task_threads()
        for b in batches:
            yield pa.record_batch([pa.array([deltadv.num_threads()] * b.num_rows)], names=["n"])

    rows = spark.range(0, 4, 1, 2).mapInArrow(body, "n long").collect()
    assert spark.conf.get("spark.task.cpus", "1") == "1"
    assert sorted(r.n for r in rows) == [1, 1, 1, 1]
