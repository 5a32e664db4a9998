"""Storage credentials never leave the driver's memory except inside the Python
functions Spark ships to its executors: not in task JSON or reprs, not in
``explain()``, not in Spark's event log, and not in any file under
``spark.local.dir`` (task rows are made without a shuffle, so there is none of
them to spill). Exercised on a real S3-compatible server (moto on 127.0.0.1) with
a sentinel secret, through every Spark path that reads or writes a table:
``deltadv.spark.read``, the ``deltadv`` data source (reads and ``df.write``), and a
Spark-side DELETE, on classic and Spark Connect sessions.
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


def _written(spark: Any, uri: str, opts: dict[str, str]) -> list[int]:
    return sorted(r["id"] for r in dspark.read(spark, uri, storage_options=opts).collect())


def test_no_secret_from_df_write(spark: Any, s3_table: tuple[str, dict[str, str]]) -> None:
    """``df.write.format("deltadv")`` on a classic session, credentials given both
    ways (writer options, redacted by classic Spark's ``spark.redaction.regex``,
    and ``register(storage_options=)``): a create and an append on the S3 server;
    no secret in the plans, the event log or ``spark.local.dir``."""
    uri, opts = s3_table
    conf = spark.sparkContext.getConf()
    event_dir = Path(conf.get("spark.eventLog.dir").removeprefix("file:"))
    local_dir = Path(conf.get("spark.local.dir"))
    target = uri.rsplit("/", 1)[0] + "/written_classic"
    first = spark.range(0, 40, numPartitions=2)
    plan = _explain(first)
    dspark.register(spark)
    first.write.format("deltadv").mode("append").options(**opts).save(target)
    dspark.register(spark, storage_options=opts)
    spark.range(40, 60, numPartitions=2).write.format("deltadv").mode("append").save(target)
    assert _written(spark, target, opts) == list(range(60))
    again = spark.read.format("deltadv").load(target)
    assert sorted(r["id"] for r in again.collect()) == list(range(60))
    for text in (plan, _explain(again)):
        assert SECRET not in text
    assert _files_holding(event_dir, SECRET.encode()) == []
    assert _files_holding(local_dir, SECRET.encode()) == []


#: The Spark Connect client's part (run by the ``spark_connect`` fixture): plans
#: and the rows of every entry point, with the secret given as a storage option
#: where deltadv takes it: deltadv functions' ``storage_options`` and
#: ``register(spark, storage_options=)`` for ``format("deltadv")``.
CONNECT_READS = """
import contextlib, io
from deltadv import spark as dspark
from deltadv.spark._tasks import task_frame

def explain(df):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain(mode="extended")
    return out.getvalue()

uri, opts, target = ARGS["uri"], ARGS["opts"], ARGS["target"]
out = {"plans": [], "ids": []}
df = dspark.read(spark, uri, storage_options=opts)
out["plans"].append(explain(df))
out["ids"].append(sorted(r["id"] for r in df.select("id").collect()))
# Credentials bound to the registered data source: never in the query's options
# (which Spark Connect writes to the event log in clear text).
dspark.register(spark, storage_options=opts)
ds = spark.read.format("deltadv").load(uri)
out["plans"].append(explain(ds))
out["ids"].append(sorted(r["id"] for r in ds.select("id").collect()))
dspark.DeltaTable.forPath(spark, uri, storage_options=opts).delete("id % 7 = 0")
after = dspark.read(spark, uri, storage_options=opts)
out["plans"].append(explain(after))
out["ids"].append(sorted(r["id"] for r in after.select("id").collect()))
new = spark.range(0, 30, numPartitions=2)
new.write.format("deltadv").mode("append").save(target)
spark.range(30, 50, numPartitions=2).write.format("deltadv").mode("append").save(target)
back = spark.read.format("deltadv").load(target)
out["plans"].append(explain(back))
out["ids"].append(sorted(r["id"] for r in back.collect()))
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
    a read, a ``format("deltadv")`` read, a DELETE and two ``df.write`` appends
    (the first creates the table): storage options inside their pickled functions
    or bound to the registered data source class. (Options given to
    ``.option(...)`` would be in the event log: Spark Connect logs each query's
    plan, options in clear text.)"""
    uri, opts = s3_table
    conf = spark.sparkContext.getConf()
    event_dir = Path(conf.get("spark.eventLog.dir").removeprefix("file:"))
    local_dir = Path(conf.get("spark.local.dir"))
    before = _expected_ids()  # what the table holds before this test's DELETE
    table = DeltaTable(uri, storage_options=opts)
    current = sorted(r["id"] for r in dspark.read(spark, uri, storage_options=opts).collect())
    assert set(current) <= set(before) and table.version() >= 0
    target = uri.rsplit("/", 1)[0] + "/written_connect"
    out = spark_connect(CONNECT_READS, uri=uri, opts=opts, target=target)
    assert out["ids"][0] == current
    assert out["ids"][1] == current
    assert out["ids"][2] == [i for i in current if i % 7]
    assert out["ids"][3] == list(range(50))
    assert _written(spark, target, opts) == list(range(50))
    assert len(out["rows"]) == FILES and all(SECRET not in r for r in out["rows"])
    for plan in out["plans"]:
        assert "== Physical Plan ==" in plan and SECRET not in plan
    assert "Exchange" not in out["plans"][0], "task rows must not be shuffled"
    needle = SECRET.encode()
    logs = [p for p in event_dir.rglob("*") if p.is_file()]
    # The server logged the client's operations (so options in them would be found).
    assert any(b"ConnectOperationStarted" in p.read_bytes() for p in logs)
    assert _files_holding(event_dir, needle) == []
    assert _files_holding(local_dir, needle) == []


def test_registered_storage_options_under_query_options() -> None:
    """Storage options bound at registration reach the reader and writer; a
    query's own storage options win over them (case-insensitive keys)."""
    from deltadv.spark.datasource import DeltaDVDataSource, _storage_options

    bound = type(
        "DeltaDVDataSource",
        (DeltaDVDataSource,),
        {"_storage": {"AWS_REGION": "r1", "AWS_SECRET_ACCESS_KEY": SECRET}},
    )
    source = bound({"path": "s3://b/t", "aws_region": "r2"})
    assert _storage_options(source._options()) == {
        "AWS_REGION": "r2",
        "AWS_SECRET_ACCESS_KEY": SECRET,
    }
    assert _storage_options(DeltaDVDataSource({"path": "p"})._options()) == {}
