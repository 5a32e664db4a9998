"""Streams through ``format("deltadv")`` on Spark Connect (issue 27 point 1): a
Connect client (a subprocess, the ``spark_connect`` fixture; its server lives in
the JVM of the classic ``delta_spark`` session) runs
``spark.readStream.format("deltadv")`` and ``df.writeStream.format("deltadv")``
after ``register(spark)``, with a checkpoint and ``Trigger.AvailableNow``, and
``foreachBatch`` calling deltadv's Spark MERGE with ``txn_app_id``/``txn_version``
(on Connect the function runs in a Python process beside the server, attached
to the client's session). Expected values are Delta Spark's: its streaming source
(``format("delta")``, on the classic session) over the same table with the same
options, and its batch reads of the tables the Connect queries wrote. A small
case on an S3 server checks that storage credentials given to ``register``
reach no plan, progress report, checkpoint or log.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.python.dml_tables import create_stream_table as _create
from tests.python.dml_tables import delta_append as _append
from tests.python.dml_tables import delta_history, delta_rows

Batches = list[tuple[int, list[list[Any]]]]

# The versions of the source table (see `source`).
V_CREATE, V_APPEND, V_APPEND_2, V_DV_DELETE, V_APPEND_3 = range(5)

#: The client's streaming reads: for each named run, its options; each batch's
#: rows go to <out>/<name>/<batch id>.json (foreachBatch runs beside the server).
READS = """
import os
from deltadv import spark as dspark

dspark.register(spark)
errors = {}
for name, options in ARGS["runs"].items():
    folder = os.path.join(ARGS["out"], name)
    os.makedirs(folder)

    def collect(df, batch_id, folder=folder):
        rows = sorted([list(r) for r in df.collect()])
        with open(os.path.join(folder, f"{batch_id}.json"), "w") as f:
            json.dump(rows, f)

    reader = spark.readStream.format("deltadv")
    for k, v in options.items():
        reader = reader.option(k, v)
    query = (
        reader.load(ARGS["path"]).writeStream.foreachBatch(collect)
        .option("checkpointLocation", folder + "-cp")
        .trigger(availableNow=True).start()
    )
    try:
        query.awaitTermination()
        errors[name] = None
    except Exception as e:
        errors[name] = str(e)
print(json.dumps(errors))
"""


@pytest.fixture(scope="module")
def source(delta_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A DV table written by Delta Spark; its versions are the V_* constants."""
    path = str(tmp_path_factory.mktemp("stream-connect") / "source")
    _create(delta_spark, path)
    _append(delta_spark, path, 0, 20, 2)
    _append(delta_spark, path, 20, 30, 1)
    delta_spark.sql(f"DELETE FROM delta.`{path}` WHERE id IN (3, 25)")  # DVs, files re-added
    _append(delta_spark, path, 30, 40, 1)
    assert delta_history(delta_spark, Path(path))[-1][0] == V_APPEND_3
    return path


def _delta_stream(spark: Any, path: str, options: dict[str, str]) -> tuple[Batches, str | None]:
    """Delta Spark's source over ``path`` (classic session), AvailableNow into
    foreachBatch: the batches (id, sorted rows) and the query's error."""
    import tempfile

    batches: Batches = []

    def collect(df: Any, batch_id: int) -> None:
        batches.append((batch_id, sorted([list(r) for r in df.collect()])))

    reader = spark.readStream.format("delta")
    for k, v in options.items():
        reader = reader.option(k, v)
    with tempfile.TemporaryDirectory() as cp:
        query = (
            reader.load(path)
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", cp)
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination()
        except Exception as e:
            return sorted(batches), str(e)
    return sorted(batches), None


def _client_batches(folder: Path) -> Batches:
    return sorted((int(f.stem), json.loads(f.read_text())) for f in folder.glob("*.json"))


def _failed_version(error: str | None) -> int | None:
    import re

    if error is None:
        return None
    m = re.search(r"(?:at|in) version (\d+)", error)
    assert m, f"no version in the error: {error[:2000]}"
    return int(m.group(1))


def test_source_on_connect_as_delta_spark(
    delta_spark: Any, spark_connect: Any, source: str, tmp_path: Path
) -> None:
    """The snapshot (one file a batch, DVs applied) and the commits after a
    starting version, with and without skipChangeCommits: the Connect client's
    batches and failures are Delta Spark's source's."""
    runs = {
        "snapshot": {"maxFilesPerTrigger": "1"},
        "default": {"startingVersion": str(V_APPEND)},
        "skip": {"startingVersion": str(V_APPEND), "skipChangeCommits": "true"},
    }
    errors = spark_connect(READS, path=source, out=str(tmp_path), runs=runs)
    for name, options in runs.items():
        theirs, their_error = _delta_stream(delta_spark, source, options)
        ours = _client_batches(tmp_path / name)
        assert ours == theirs, name
        assert _failed_version(errors[name]) == _failed_version(their_error), errors[name]
    assert _failed_version(errors["default"]) == V_DV_DELETE
    assert "skipChangeCommits" in errors["default"]
    assert errors["snapshot"] is None and errors["skip"] is None
    snapshot = _client_batches(tmp_path / "snapshot")
    assert len(snapshot) == 4  # the snapshot's four files, one a batch
    ids = sorted(r[0] for _, rows in snapshot for r in rows)
    assert ids == [i for i in range(40) if i not in (3, 25)]
    skipped = sorted(r[0] for _, rows in _client_batches(tmp_path / "skip") for r in rows)
    assert skipped == list(range(40))  # the DELETE's commit skipped whole
    # the offsets the Connect query kept are Delta Spark's DeltaSourceOffset JSON
    last = sorted((tmp_path / "snapshot-cp" / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
    offset = json.loads(last[-1].read_text().splitlines()[-1])
    assert offset["reservoirVersion"] == V_APPEND_3 + 1 and offset["index"] == -1


#: The sink: a deltadv stream of the client's own source table (created with
#: one append by the test) into the deltadv sink, in append mode and, grouped,
#: in complete mode; a second append, both queries run again from their
#: checkpoints; then batch 1 of the append query replayed.
SINK = """
import shutil
from pyspark.sql import functions as F
from deltadv import spark as dspark
from deltadv import DeltaTable

dspark.register(spark)
src, out = ARGS["source"], ARGS["out"]

def run(mode):
    stream = spark.readStream.format("deltadv").load(src)
    if mode == "complete":
        stream = stream.groupBy((F.col("id") % 3).alias("k")).count()
    query = (
        stream.writeStream.format("deltadv").outputMode(mode)
        .option("checkpointLocation", f"{out}/{mode}-cp")
        .trigger(availableNow=True).start(f"{out}/{mode}")
    )
    query.awaitTermination()
    return str(query.id)

result = {"ids": [run("append"), run("complete")]}
(spark.range(100, 130, 1, 2).selectExpr("id", "concat('r', cast(id as string)) as v")
    .write.format("delta").mode("append").save(src))
result["ids"] += [run("append"), run("complete")]
# A crash after batch 1's commit, before Spark recorded it: Spark runs it again.
import os
os.remove(f"{out}/append-cp/commits/1")
os.remove(f"{out}/append-cp/commits/.1.crc")
result["version_before_replay"] = DeltaTable(f"{out}/append").version()
result["ids"].append(run("append"))
result["version_after_replay"] = DeltaTable(f"{out}/append").version()
result["replayed"] = os.path.exists(f"{out}/append-cp/commits/1")
print(json.dumps(result))
"""


def test_sink_on_connect_append_exactly_once_and_complete(
    delta_spark: Any, spark_connect: Any, tmp_path: Path
) -> None:
    spark = delta_spark
    src = str(tmp_path / "src")
    _create(spark, src)
    _append(spark, src, 0, 40, 2)
    out = spark_connect(SINK, source=src, out=str(tmp_path))
    append_id, complete_id = out["ids"][0], out["ids"][1]
    assert out["ids"] == [append_id, complete_id, append_id, complete_id, append_id]
    # Delta Spark reads what the Connect queries wrote: every source row once
    expected = delta_rows(spark, Path(src))
    assert len(expected) == 70
    assert delta_rows(spark, tmp_path / "append") == expected
    assert out["version_before_replay"] == out["version_after_replay"] == 1
    assert out["replayed"]
    history = delta_history(spark, tmp_path / "append")
    assert [(h[1], h[2]) for h in history] == [
        ("STREAMING UPDATE", {"outputMode": "Append", "queryId": append_id, "epochId": str(b)})
        for b in range(2)
    ]
    counts: dict[int, int] = {}
    for row in expected:
        counts[row[0] % 3] = counts.get(row[0] % 3, 0) + 1
    assert delta_rows(spark, tmp_path / "complete") == sorted(counts.items())
    history = delta_history(spark, tmp_path / "complete")
    assert [(h[1], h[2]["outputMode"], h[2]["queryId"]) for h in history] == [
        ("STREAMING UPDATE", "Complete", complete_id)
    ] * 2


#: foreachBatch upserts with deltadv's Spark MERGE, idempotent by batch id; the
#: function captures the client's ``spark`` (Spark Connect unpickles it as the
#: session the batch runs in), as the README's example does.
UPSERT = """
from deltadv import spark as dspark
from deltadv.spark import DeltaTable as SparkDeltaTable

dspark.register(spark)
target = ARGS["target"]

def upsert(batch, batch_id):
    (SparkDeltaTable.forPath(spark, target).alias("t")
        .merge(batch.alias("s"), "t.id = s.id", txn_app_id="upsert", txn_version=batch_id)
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())

query = (
    spark.readStream.format("deltadv").option("maxFilesPerTrigger", "1").load(ARGS["source"])
    .writeStream.foreachBatch(upsert).option("checkpointLocation", ARGS["checkpoint"])
    .trigger(availableNow=True).start()
)
query.awaitTermination()
# batch 0 again (a replay): skipped by its txn version
replay = spark.createDataFrame([(0, "again")], "id bigint, v string")
skipped = (SparkDeltaTable.forPath(spark, target).alias("t")
    .merge(replay.alias("s"), "t.id = s.id", txn_app_id="upsert", txn_version=0)
    .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
print(json.dumps({"skipped": skipped}))
"""


def test_foreach_batch_merge_on_connect(
    delta_spark: Any, spark_connect: Any, source: str, tmp_path: Path
) -> None:
    from deltadv import DeltaTable

    spark = delta_spark
    target = str(tmp_path / "target")
    spark.createDataFrame([(i, f"old{i}") for i in range(-5, 5)], "id bigint, v string").coalesce(
        1
    ).write.format("delta").option("delta.enableDeletionVectors", "true").save(target)
    out = spark_connect(UPSERT, source=source, target=target, checkpoint=str(tmp_path / "cp"))
    assert out["skipped"] == {"version": None, "skipped": True}
    model = {i: f"old{i}" for i in range(-5, 5)}
    model.update(dict(delta_rows(spark, Path(source))))  # the source's rows win
    assert sorted(delta_rows(spark, Path(target))) == sorted(model.items())
    history = delta_history(spark, Path(target))
    merges = [h for h in history if h[1] == "MERGE"]
    assert len(merges) == 4  # the source snapshot's four files, one a batch
    assert DeltaTable(target).transaction_version("upsert") == 3


#: Credentials bound by register(storage_options=): a stream from an S3 table
#: into the deltadv sink on S3; plans, progress and explain text returned.
SECRETS = """
import contextlib, io
from deltadv import spark as dspark

dspark.register(spark, storage_options=ARGS["opts"])
stream = spark.readStream.format("deltadv").load(ARGS["uri"])
text = io.StringIO()
with contextlib.redirect_stdout(text):
    stream.explain(extended=True)
query = (
    stream.writeStream.format("deltadv").option("checkpointLocation", ARGS["checkpoint"])
    .trigger(availableNow=True).start(ARGS["target"])
)
query.awaitTermination()
with contextlib.redirect_stdout(text):
    query.explain(extended=True)
progress = [json.dumps(p, default=str) for p in query.recentProgress]
print(json.dumps({"text": text.getvalue(), "progress": progress}))
"""


def test_no_secret_from_streams_on_connect(
    spark: Any, delta_spark: Any, spark_connect: Any, tmp_path: Path
) -> None:
    from deltadv import spark as dspark
    from deltadv._sample import make_table
    from tests.python.s3server import client, s3_server, storage_options, upload_dir
    from tests.python.test_spark_secrets import SECRET, _files_holding

    local = tmp_path / "t"
    make_table(local, files=2, rows_per_file=50, deleted={0: [0, 7]})
    conf = spark.sparkContext.getConf()
    event_dir = Path(conf.get("spark.eventLog.dir").removeprefix("file:"))
    local_dir = Path(conf.get("spark.local.dir"))
    with s3_server() as endpoint:
        client(endpoint).create_bucket(Bucket="streams")
        upload_dir(endpoint, "streams", local, "t")
        opts = storage_options(endpoint) | {"AWS_SECRET_ACCESS_KEY": SECRET}
        uri, target = "s3://streams/t", "s3://streams/sink"
        out = spark_connect(
            SECRETS, uri=uri, target=target, opts=opts, checkpoint=str(tmp_path / "cp")
        )
        written = dspark.read(spark, target, storage_options=opts).collect()
        expected = dspark.read(spark, uri, storage_options=opts).collect()
    assert sorted(map(tuple, written)) == sorted(map(tuple, expected))
    assert len(expected) == 98
    assert "StreamingRelation" in out["text"] or "deltadv" in out["text"].lower()
    assert out["progress"], "the query reported no progress"
    for text in (out["text"], *out["progress"]):
        assert SECRET not in text
    needle = SECRET.encode()
    assert _files_holding(tmp_path / "cp", needle) == []
    assert _files_holding(event_dir, needle) == []
    assert _files_holding(local_dir, needle) == []
