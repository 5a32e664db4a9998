"""Storage credentials never leave the driver's memory except inside the Python
functions Spark ships to its executors: not in task JSON or reprs, not in
``explain()``, not in Spark's event log, and not in any file under
``spark.local.dir`` (task rows are distributed with ``parallelize``, so there is
no shuffle of them to spill). Exercised on a real S3-compatible server (moto on
127.0.0.1) with a sentinel secret, through every Spark path that reads a table:
``deltadv.spark.read``, the ``deltadv`` data source, and a Spark-side DELETE.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deltadv import DeltaTable
from deltadv import spark as dspark
from deltadv._sample import make_table
from tests.python.s3server import client, s3_server, storage_options, upload_dir

BUCKET = "secrets"
FILES, ROWS = 4, 250
DELETED = {0: [0, 7, 100], 2: list(range(0, ROWS, 3))}
#: Moto accepts any credentials: this one exists only to be looked for.
SECRET = "dvSentinelSecret-5b1e0c7a9d4f42e8"


def _expected_ids(extra_deleted: set[int] = frozenset()) -> list[int]:  # type: ignore[assignment]
    gone = {f * ROWS + r for f, rows in DELETED.items() for r in rows}
    return [i for i in range(FILES * ROWS) if i not in gone and i not in extra_deleted]


@pytest.fixture(scope="module")
def s3_table(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    local = tmp_path_factory.mktemp("secrets") / "t"
    make_table(local, files=FILES, rows_per_file=ROWS, deleted=DELETED)
    with s3_server() as endpoint:
        client(endpoint).create_bucket(Bucket=BUCKET)
        upload_dir(endpoint, BUCKET, local, "t")
        opts = storage_options(endpoint) | {"AWS_SECRET_ACCESS_KEY": SECRET}
        yield f"s3://{BUCKET}/t", opts


def _explain(df: Any) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain(mode="extended")
    return out.getvalue()


def _files_holding(root: Path, needle: bytes) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file():
            with contextlib.suppress(OSError):
                if needle in path.read_bytes():
                    hits.append(str(path))
    return hits


def test_no_secret_in_tasks_plans_event_log_or_local_disk(
    spark: Any, s3_table: tuple[str, dict[str, str]]
) -> None:
    uri, opts = s3_table
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.eventLog.enabled") == "true", "the session must log events"
    event_dir = Path(conf.get("spark.eventLog.dir").removeprefix("file:"))
    local_dir = Path(conf.get("spark.local.dir"))
    assert event_dir.is_dir() and local_dir.is_dir()

    # Task JSON and reprs.
    table = DeltaTable(uri, storage_options=opts)
    assert SECRET not in repr(table)
    tasks = table.scan_tasks()
    assert len(tasks) == FILES
    for t in tasks:
        assert SECRET not in t.json and SECRET not in repr(t)
        assert t.storage_options["AWS_SECRET_ACCESS_KEY"] == SECRET  # travels beside it

    plans = []
    # deltadv.spark.read: tasks parallelized, read in mapInArrow.
    df = dspark.read(spark, uri, storage_options=opts)
    plans.append(_explain(df))
    assert sorted(r["id"] for r in df.select("id").collect()) == _expected_ids()
    assert "Exchange" not in plans[-1], "task rows must not be shuffled"

    # The data source, options given as Spark reader options.
    dspark.register(spark)
    ds = spark.read.format("deltadv").options(**opts).load(uri)
    plans.append(_explain(ds))
    assert sorted(r["id"] for r in ds.select("id").collect()) == _expected_ids()

    # A Spark-side DELETE (candidate rows read on executors, DVs written there).
    gone = {i for i in _expected_ids() if i % 5 == 0}
    dspark.DeltaTable.forPath(spark, uri, storage_options=opts).delete("id % 5 = 0")
    after = dspark.read(spark, uri, storage_options=opts)
    plans.append(_explain(after))
    assert sorted(r["id"] for r in after.select("id").collect()) == _expected_ids(gone)

    for plan in plans:
        assert "== Physical Plan ==" in plan
        assert SECRET not in plan

    # Spark writes the event log as it goes (flushed at job ends).
    needle = SECRET.encode()
    logs = [p for p in event_dir.rglob("*") if p.is_file()]
    assert logs, f"no event log under {event_dir}"
    # It holds the jobs and their plans (so a secret in a plan would be found).
    assert any(b"SparkListenerJobEnd" in p.read_bytes() for p in logs)
    assert any(b"MapInArrow" in p.read_bytes() for p in logs)
    assert _files_holding(event_dir, needle) == []
    assert any(local_dir.rglob("*")), f"Spark wrote nothing under {local_dir}"
    assert _files_holding(local_dir, needle) == []


#: The Spark Connect client's part (run by the ``spark_connect`` fixture): plans
#: and the rows of every entry point, with the secret given as a storage option.
CONNECT_READS = """
import contextlib, io
from deltadv import spark as dspark
from deltadv.spark._tasks import task_frame

def explain(df):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain(mode="extended")
    return out.getvalue()

uri, opts = ARGS["uri"], ARGS["opts"]
out = {"plans": [], "ids": []}
df = dspark.read(spark, uri, storage_options=opts)
out["plans"].append(explain(df))
out["ids"].append(sorted(r["id"] for r in df.select("id").collect()))
dspark.register(spark)
# Planned, not run: Spark Connect logs the plan of each query it runs, reader
# options in clear text, to the event log (Spark's doing, not deltadv's): on
# Connect, credentials must not be passed as reader options.
ds = spark.read.format("deltadv").options(**opts).load(uri)
out["plans"].append(explain(ds))
dspark.DeltaTable.forPath(spark, uri, storage_options=opts).delete("id % 7 = 0")
after = dspark.read(spark, uri, storage_options=opts)
out["plans"].append(explain(after))
out["ids"].append(sorted(r["id"] for r in after.select("id").collect()))
from deltadv import DeltaTable
rows = task_frame(spark, [(t.json,) for t in DeltaTable(uri, storage_options=opts).scan_tasks()],
                  "task string").collect()
out["rows"] = [r["task"] for r in rows]
print(json.dumps(out))
"""


def test_no_secret_on_spark_connect(
    spark: Any, spark_connect: Any, s3_table: tuple[str, dict[str, str]]
) -> None:
    """The same on Spark Connect: the client's plans and task rows, and the event
    log and local disk of the server (the JVM of ``spark``), hold no secret after
    a read and a DELETE (storage options inside their pickled functions). The data
    source is only planned here: Spark Connect writes the plans of the queries it
    runs to the event log, reader options (``.options(**storage)``) in clear."""
    uri, opts = s3_table
    conf = spark.sparkContext.getConf()
    event_dir = Path(conf.get("spark.eventLog.dir").removeprefix("file:"))
    local_dir = Path(conf.get("spark.local.dir"))
    before = _expected_ids()  # what the table holds before this test's DELETE
    table = DeltaTable(uri, storage_options=opts)
    current = sorted(r["id"] for r in dspark.read(spark, uri, storage_options=opts).collect())
    assert set(current) <= set(before) and table.version() >= 0
    out = spark_connect(CONNECT_READS, uri=uri, opts=opts)
    assert out["ids"][0] == current
    assert out["ids"][1] == [i for i in current if i % 7]
    assert len(out["rows"]) == FILES and all(SECRET not in r for r in out["rows"])
    for plan in out["plans"]:
        assert "== Physical Plan ==" in plan and SECRET not in plan
    assert "Exchange" not in out["plans"][0], "task rows must not be shuffled"
    needle = SECRET.encode()
    assert _files_holding(event_dir, needle) == []
    assert _files_holding(local_dir, needle) == []
