"""df.writeStream.format("deltadv") (PySpark's Python stream writer) against Delta
Spark 4.4: each micro-batch is one STREAMING UPDATE commit made by deltadv's Rust
transaction, carrying the txn action (appId = the query id, version = the batch
id), so a batch Spark replays from its checkpoint is skipped. Delta Spark's own
writeStream.format("delta") runs the same stream into a twin table: Delta Spark
reads both row for row and shows the same history. Also the foreachBatch upsert:
deltadv's Spark MERGE and writers with txn_app_id / txn_version (Delta Spark's
txnAppId / txnVersion) applied once when a batch is replayed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from deltadv import DeltaTable
from deltadv.spark.datasource import register_data_source
from tests.python.dml_tables import delta_history as _history
from tests.python.dml_tables import delta_rows as _rows

SCHEMA = "id LONG, k INT, s STRING"


@pytest.fixture()
def dspark(delta_spark: Any) -> Any:
    register_data_source(delta_spark)
    return delta_spark


def _metrics(spark: Any, path: Path) -> list[tuple[list[str], str]]:
    """Per version: the operationMetrics keys and numOutputRows."""
    rows = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    return [
        (sorted(m), m.get("numOutputRows", ""))
        for m in (dict(r["operationMetrics"]) for r in sorted(rows, key=lambda r: r["version"]))
    ]


def _txns(path: Path) -> list[dict[str, Any]]:
    """Every txn action in the table's JSON commits, oldest first."""
    out = []
    for commit in sorted((path / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                out.append(action["txn"])
    return out


def _add_input(spark: Any, src: Path, name: str, ids: range) -> list[tuple[Any, ...]]:
    """One parquet file of rows ``ids`` in the source folder; returns the rows."""
    rows = [(i, i % 3, f"s{i}") for i in ids]
    spark.createDataFrame(rows, SCHEMA).coalesce(1).write.parquet(str(src / name))
    return rows


def _run(spark: Any, src: Path, fmt: str, table: Path, checkpoint: Path, mode: str) -> str:
    """Run the stream over the source folder until it is drained
    (Trigger.AvailableNow); returns the query id."""
    df = spark.readStream.schema(SCHEMA).option("recursiveFileLookup", "true").parquet(str(src))
    if mode == "complete":
        df = df.groupBy("k").count()
    q = (
        df.writeStream.format(fmt)
        .option("checkpointLocation", str(checkpoint))
        .outputMode(mode)
        .trigger(availableNow=True)
        .start(str(table))
    )
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    return str(q.id)


def _shape(history: list[tuple[int, str, dict[str, str]]]) -> list[tuple[Any, ...]]:
    """History without the query id (each query has its own)."""
    return [(v, op, {k: x for k, x in p.items() if k != "queryId"}) for v, op, p in history]


def test_append_stream_exactly_once_and_replayed_batch_skipped(dspark: Any, tmp_path: Path) -> None:
    spark = dspark
    src, ours, twin = tmp_path / "src", tmp_path / "ours", tmp_path / "twin"
    cp, twin_cp = tmp_path / "cp", tmp_path / "twin_cp"
    expected = _add_input(spark, src, "a", range(0, 10))
    qid = _run(spark, src, "deltadv", ours, cp, "append")
    twin_qid = _run(spark, src, "delta", twin, twin_cp, "append")
    expected += _add_input(spark, src, "b", range(10, 25))
    # Restarted from its checkpoint: the same query id, the next batch id.
    assert _run(spark, src, "deltadv", ours, cp, "append") == qid
    assert _run(spark, src, "delta", twin, twin_cp, "append") == twin_qid
    assert _rows(spark, ours) == sorted(expected, key=repr)
    assert _rows(spark, twin) == sorted(expected, key=repr)
    history = _history(spark, ours)
    assert [h[1] for h in history] == ["STREAMING UPDATE"] * 2
    assert [h[2] for h in history] == [
        {"outputMode": "Append", "queryId": qid, "epochId": "0"},
        {"outputMode": "Append", "queryId": qid, "epochId": "1"},
    ]
    assert _shape(history) == _shape(_history(spark, twin))
    assert _metrics(spark, ours) == _metrics(spark, twin)
    assert [m[1] for m in _metrics(spark, ours)] == ["10", "15"]
    assert [(t["appId"], t["version"]) for t in _txns(ours)] == [(qid, 0), (qid, 1)]
    assert DeltaTable(str(ours)).transaction_version(qid) == 1
    assert DeltaTable(str(twin)).transaction_version(twin_qid) == 1  # Delta Spark's txn too

    # A crash after the commit of batch 1 but before Spark recorded it: its
    # commit log entry gone, the restarted query runs batch 1 again. The sink
    # finds txn version 1 of the query in the table and commits nothing.
    for checkpoint in (cp, twin_cp):
        (checkpoint / "commits" / "1").unlink()
        (checkpoint / "commits" / ".1.crc").unlink(missing_ok=True)
    assert _run(spark, src, "deltadv", ours, cp, "append") == qid
    assert _run(spark, src, "delta", twin, twin_cp, "append") == twin_qid
    assert (cp / "commits" / "1").exists()  # Spark saw the batch through
    assert DeltaTable(str(ours)).version() == 1 == DeltaTable(str(twin)).version()
    assert _rows(spark, ours) == sorted(expected, key=repr)
    # The replayed batch's files were removed: every data file is the table's.
    on_disk = {str(p.relative_to(ours)) for p in ours.rglob("*.parquet")}
    assert on_disk == set(DeltaTable(str(ours)).files())
    # Delta Spark's streaming read of the table deltadv's sink wrote.
    stream_cp = tmp_path / "read_cp"
    q = (
        spark.readStream.format("delta")
        .load(str(ours))
        .writeStream.format("memory")
        .queryName("deltadv_sink_read")
        .option("checkpointLocation", str(stream_cp))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    read = sorted((tuple(r) for r in spark.table("deltadv_sink_read").collect()), key=repr)
    assert read == sorted(expected, key=repr)


def test_complete_mode_overwrites_like_delta_spark(dspark: Any, tmp_path: Path) -> None:
    spark = dspark
    src, ours, twin = tmp_path / "src", tmp_path / "ours", tmp_path / "twin"
    rows = _add_input(spark, src, "a", range(0, 7))
    _run(spark, src, "deltadv", ours, tmp_path / "cp", "complete")
    _run(spark, src, "delta", twin, tmp_path / "twin_cp", "complete")
    rows += _add_input(spark, src, "b", range(7, 20))
    _run(spark, src, "deltadv", ours, tmp_path / "cp", "complete")
    _run(spark, src, "delta", twin, tmp_path / "twin_cp", "complete")
    counts: dict[int, int] = {}
    for _, k, _ in rows:
        counts[k] = counts.get(k, 0) + 1
    assert _rows(spark, ours) == sorted(counts.items(), key=repr)
    assert _rows(spark, ours) == _rows(spark, twin)
    history = _history(spark, ours)
    assert [(h[1], h[2]["outputMode"], h[2]["epochId"]) for h in history] == [
        ("STREAMING UPDATE", "Complete", "0"),
        ("STREAMING UPDATE", "Complete", "1"),
    ]
    assert _shape(history) == _shape(_history(spark, twin))
    assert _metrics(spark, ours) == _metrics(spark, twin)
    assert [m[1] for m in _metrics(spark, ours)] == ["3", "3"]
    # Batch 1 replaced every row in one commit: it removes batch 0's files.
    last = (ours / "_delta_log" / f"{1:020d}.json").read_text().splitlines()
    actions = [next(iter(json.loads(line))) for line in last]
    assert "remove" in actions and "add" in actions and actions.count("txn") == 1


def test_stream_options_refused(dspark: Any, tmp_path: Path) -> None:
    spark = dspark
    src = tmp_path / "src"
    _add_input(spark, src, "a", range(3))
    df = spark.readStream.schema(SCHEMA).parquet(str(src / "a"))
    q = (
        df.writeStream.format("deltadv")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .option("replaceWhere", "k = 1")
        .trigger(availableNow=True)
        .start(str(tmp_path / "t"))
    )
    with pytest.raises(Exception, match="replacewhere"):
        q.awaitTermination(120)
        raise AssertionError(q.exception())
    assert not (tmp_path / "t" / "_delta_log").exists()
    # Update mode: Spark refuses it for the sink, as for Delta Spark's.
    counts = df.groupBy("k").count()
    q = (
        counts.writeStream.format("deltadv")
        .option("checkpointLocation", str(tmp_path / "cp2"))
        .outputMode("update")
        .trigger(availableNow=True)
        .start(str(tmp_path / "t"))
    )
    with pytest.raises(Exception, match="does not support Update mode"):
        q.awaitTermination(120)
        raise AssertionError(q.exception())
    assert not (tmp_path / "t" / "_delta_log").exists()


def _merge_batch(spark: Any, path: Path, batch: Any, batch_id: int) -> dict[str, Any]:
    from deltadv.spark import DeltaTable as SparkDeltaTable

    return (
        SparkDeltaTable.forPath(spark, str(path))
        .alias("t")
        .merge(batch.alias("s"), "t.id = s.id", txn_app_id="upsert", txn_version=batch_id)
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )


def test_foreach_batch_merge_applied_once(dspark: Any, tmp_path: Path) -> None:
    spark = dspark
    target, src = tmp_path / "target", tmp_path / "src"
    spark.createDataFrame([(i, 0, f"old{i}") for i in range(6)], SCHEMA).coalesce(1).write.format(
        "delta"
    ).option("delta.enableDeletionVectors", "true").save(str(target))
    _add_input(spark, src, "a", range(4, 9))  # 4, 5 update; 6..8 insert
    seen: list[int] = []

    def upsert(batch: Any, batch_id: int) -> None:
        seen.append(batch_id)
        _merge_batch(spark, target, batch, batch_id)

    q = (
        spark.readStream.schema(SCHEMA)
        .option("recursiveFileLookup", "true")
        .parquet(str(src))
        .writeStream.foreachBatch(upsert)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    assert seen == [0]
    expected = sorted(
        [(i, 0, f"old{i}") for i in range(4)] + [(i, i % 3, f"s{i}") for i in range(4, 9)],
        key=repr,
    )
    assert _rows(spark, target) == expected
    version = DeltaTable(str(target)).version()
    history = _history(spark, target)
    assert history[-1][1] == "MERGE"
    assert [(t["appId"], t["version"]) for t in _txns(target)] == [("upsert", 0)]
    # The batch replayed (same batch id): nothing runs, nothing commits.
    replay = spark.read.schema(SCHEMA).parquet(str(src / "a"))
    assert _merge_batch(spark, target, replay, 0) == {"version": None, "skipped": True}
    assert DeltaTable(str(target)).version() == version
    # The next batch id applies.
    more = spark.createDataFrame([(4, 9, "new4")], SCHEMA)
    assert _merge_batch(spark, target, more, 1)["version"] == version + 1
    assert (4, 9, "new4") in _rows(spark, target)
    assert DeltaTable(str(target)).transaction_version("upsert") == 1


def test_idempotent_writes_txn_app_id_and_version(dspark: Any, tmp_path: Path) -> None:
    from deltadv.spark import write_table

    spark = dspark
    ours, twin = tmp_path / "ours", tmp_path / "twin"
    first = spark.createDataFrame([(1, 1, "a"), (2, 2, "b")], SCHEMA)
    second = spark.createDataFrame([(3, 0, "c")], SCHEMA)
    for df, version in ((first, 0), (first, 0), (second, 1), (second, 1), (first, 0)):
        for fmt, path in (("deltadv", ours), ("delta", twin)):
            (
                df.write.format(fmt)
                .mode("append")
                .option("txnAppId", "app")
                .option("txnVersion", str(version))
                .save(str(path))
            )
    assert _rows(spark, ours) == [(1, 1, "a"), (2, 2, "b"), (3, 0, "c")]
    assert _rows(spark, ours) == _rows(spark, twin)
    assert DeltaTable(str(ours)).version() == 1 == DeltaTable(str(twin)).version()
    table = DeltaTable(str(ours))
    assert table.transaction_version("app") == 1
    assert table.transaction_applied("app", 1) and table.transaction_applied("app", 0)
    assert not table.transaction_applied("app", 2)
    assert not table.transaction_applied("nobody", 0)
    with pytest.raises(ValueError, match="-1"):
        table.transaction_applied("app", -1)
    # deltadv.spark.write_table: the same rule, under another application id.
    write_table(second, str(ours), mode="append", txn_app_id="other", txn_version=5)
    write_table(second, str(ours), mode="append", txn_app_id="other", txn_version=5)
    write_table(second, str(ours), mode="append", txn_app_id="other", txn_version=4)
    assert len(_rows(spark, ours)) == 4
    assert DeltaTable(str(ours)).transaction_version("other") == 5
    with pytest.raises(ValueError, match="together"):
        write_table(second, str(ours), mode="append", txn_app_id="other")
    shutil.rmtree(tmp_path / "ours")
