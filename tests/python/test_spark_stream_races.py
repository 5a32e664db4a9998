"""Races of streaming writes (issue 27 point 4), each made deterministic, checked
with Delta Spark 4.4 reading the tables back.

The ``format("deltadv")`` sink's micro-batch is driven as Spark drives it (its
tasks' ``write`` on the batch's rows, then ``commit`` with the batch id, the query
id from the checkpoint's metadata file) with a competitor committing in between:

- a concurrent append (deltadv, or Delta Spark's) between the batch's writing
  tasks and its commit: the batch commits after it, its rows once; the batch
  replayed (a restart from the checkpoint) commits nothing;
- another writer creating the table while the first batch's tasks wrote files for
  a new one: the batch fails with ``CommitConflictError`` (Delta Spark's sink
  fails with a concurrent modification too), its files removed; the replayed
  batch appends its rows once;
- two runs of one batch (two copies of a query: the same appId and batch id)
  committing at once, and two ``df.write`` with the same ``txnAppId`` /
  ``txnVersion`` from two threads: the batch lands once (the loser sees the
  table's txn and skips, or loses the commit race to a txn of its appId, a
  ``CommitConflictError``), its files removed.

The ``foreachBatch`` upsert (deltadv's Spark MERGE with ``txn_app_id`` /
``txn_version``) under a streaming query reading a deltadv source, with the
competitor committing between the MERGE's writing tasks and its commit (the hook
of test_spark_merge_concurrency.py): a concurrent Delta Spark append of other keys
rebases the MERGE through the transaction (rows once); a concurrent DELETE of a
row the MERGE updates fails the batch with ``CommitConflictError`` and nothing
committed, and the restarted query applies the batch once.
"""

from __future__ import annotations

import functools
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from deltadv import CommitConflictError, DeltaTable
from deltadv.write import write_table
from tests.python.dml_tables import delta_history, delta_rows

SCHEMA = "id LONG, v STRING"


def _arrow(ids: range | list[int], tag: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"{tag}{i}" for i in ids])})


def _rows(ids: range | list[int], tag: str) -> list[tuple[int, str]]:
    return [(i, f"{tag}{i}") for i in ids]


def _txns(path: Path) -> list[tuple[int, str, int]]:
    """(commit version, appId, txn version) of every txn action in the log."""
    out = []
    for commit in sorted((path / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                out.append((int(commit.stem), action["txn"]["appId"], action["txn"]["version"]))
    return out


def _on_disk(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*.parquet")}


class Sink:
    """The ``format("deltadv")`` sink of a query with checkpoint ``checkpoint``,
    driven as Spark drives it: :meth:`write` is a task, :meth:`commit` the
    driver's commit of the batch."""

    def __init__(self, spark: Any, path: Path, checkpoint: Path) -> None:
        from pyspark.sql.types import StructType

        from deltadv.spark.datasource import DeltaDVDataSource

        checkpoint.mkdir(parents=True, exist_ok=True)
        metadata = checkpoint / "metadata"
        if not metadata.exists():  # what Spark writes when the query first starts
            metadata.write_text(json.dumps({"id": str(uuid.uuid4())}) + "\n")
        self.query_id = json.loads(metadata.read_text())["id"]
        schema = StructType.fromDDL(SCHEMA)
        options = {"path": str(path), "checkpointlocation": str(checkpoint)}
        self.writer = DeltaDVDataSource(options).streamWriter(schema, False)

    def write(self, data: pa.Table) -> Any:
        return self.writer.write(iter(data.to_batches()))

    def commit(self, messages: list[Any], batch_id: int) -> None:
        self.writer.commit(messages, batch_id)


@pytest.mark.parametrize("competitor", ["deltadv", "delta-spark"])
def test_sink_batch_commits_after_a_concurrent_append(
    delta_spark: Any, tmp_path: Path, competitor: str
) -> None:
    spark = delta_spark
    path = tmp_path / "sink"
    sink = Sink(spark, path, tmp_path / "cp")
    sink.commit([sink.write(_arrow(range(0, 10), "b"))], 0)
    tasks = [sink.write(_arrow(range(10, 15), "b")), sink.write(_arrow(range(15, 20), "b"))]
    # The competitor commits between the batch's tasks and its commit.
    if competitor == "deltadv":
        write_table(str(path), _arrow(range(100, 104), "c"), mode="append")
    else:
        spark.createDataFrame(_rows(range(100, 104), "c"), SCHEMA).write.format("delta").mode(
            "append"
        ).save(str(path))
    sink.commit(tasks, 1)
    expected = sorted(_rows(range(20), "b") + _rows(range(100, 104), "c"), key=repr)
    assert delta_rows(spark, path) == expected
    history = delta_history(spark, path)
    assert [(v, op) for v, op, _ in history] == [
        (0, "STREAMING UPDATE"),
        (1, "WRITE"),
        (2, "STREAMING UPDATE"),
    ]
    assert history[2][2]["epochId"] == "1" and history[2][2]["queryId"] == sink.query_id
    assert _txns(path) == [(0, sink.query_id, 0), (2, sink.query_id, 1)]
    # The batch replayed after a restart (Spark had not recorded it): skipped,
    # its files removed.
    sink.commit([sink.write(_arrow(range(10, 20), "b"))], 1)
    assert DeltaTable(str(path)).version() == 2
    assert delta_rows(spark, path) == expected
    assert _on_disk(path) == set(DeltaTable(str(path)).files())


def test_sink_first_batch_loses_to_a_concurrent_create(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = tmp_path / "sink"
    sink = Sink(spark, path, tmp_path / "cp")
    tasks = [sink.write(_arrow(range(0, 6), "b"))]  # files for a new table
    write_table(str(path), _arrow(range(100, 103), "c"), mode="error")  # the competitor
    with pytest.raises(CommitConflictError, match=r"created .* while the batch's tasks wrote"):
        sink.commit(tasks, 0)
    assert DeltaTable(str(path)).version() == 0
    assert _on_disk(path) == set(DeltaTable(str(path)).files())  # the batch's files removed
    # The restarted query runs batch 0 again: appended once.
    sink.commit([sink.write(_arrow(range(0, 6), "b"))], 0)
    sink.commit([sink.write(_arrow(range(0, 6), "b"))], 0)
    assert delta_rows(spark, path) == sorted(
        _rows(range(6), "b") + _rows(range(100, 103), "c"), key=repr
    )
    assert _txns(path) == [(1, sink.query_id, 0)]


def _together(*calls: Callable[[], Any]) -> list[Any]:
    """Run ``calls`` in threads started together; each one's result or exception."""
    barrier = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = calls[i]()
        except Exception as e:
            out[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return out


def test_two_runs_of_one_batch_land_once(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path, cp = tmp_path / "sink", tmp_path / "cp"
    first = Sink(spark, path, cp)
    first.commit([first.write(_arrow(range(0, 4), "b"))], 0)
    # A copy of the checkpoint: the same query id, the same next batch.
    second = Sink(spark, path, cp)
    assert second.query_id == first.query_id
    expected = _rows(range(4), "b")
    for batch in range(1, 7):
        ids = range(batch * 10, batch * 10 + 5)
        a, b = first.write(_arrow(ids, "b")), second.write(_arrow(ids, "b"))
        outcomes = _together(
            functools.partial(first.commit, [a], batch),
            functools.partial(second.commit, [b], batch),
        )
        for outcome in outcomes:  # skipped (None) or the commit race lost to the same appId
            assert outcome is None or isinstance(outcome, CommitConflictError), outcomes
        expected += _rows(ids, "b")
        assert [t[1:] for t in _txns(path)] == [(first.query_id, v) for v in range(batch + 1)]
    assert delta_rows(spark, path) == sorted(expected, key=repr)
    assert _on_disk(path) == set(DeltaTable(str(path)).files())


def test_df_write_same_txn_from_two_threads_lands_once(delta_spark: Any, tmp_path: Path) -> None:
    from deltadv.spark.datasource import register_data_source

    spark = delta_spark
    register_data_source(spark)
    path = str(tmp_path / "t")
    spark.createDataFrame(_rows(range(3), "a"), SCHEMA).write.format("delta").option(
        "delta.enableDeletionVectors", "true"
    ).save(path)
    expected = _rows(range(3), "a")

    def write(df: Any, version: int) -> None:
        # A new thread has no active session in the JVM, where the lookup of
        # the registered data source starts.
        spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        (
            df.write.format("deltadv")
            .mode("append")
            .option("txnAppId", "app")
            .option("txnVersion", str(version))
            .save(path)
        )

    for version in range(3):
        df = spark.createDataFrame(
            _rows(range(10 * (version + 1), 10 * (version + 1) + 3), "w"), SCHEMA
        )
        call = functools.partial(write, df, version)
        outcomes = _together(call, call)
        for outcome in outcomes:
            assert outcome is None or "CommitConflictError" in str(outcome), outcomes
        expected += [tuple(r) for r in df.collect()]
        assert DeltaTable(path).transaction_version("app") == version
    assert delta_rows(spark, Path(path)) == sorted(expected, key=repr)
    assert [t[1:] for t in _txns(Path(path))] == [("app", v) for v in range(3)]
    assert _on_disk(Path(path)) == set(DeltaTable(path).files())


# --------------------------------------------------------------------------------------
# foreachBatch upserts racing other writers
# --------------------------------------------------------------------------------------


@pytest.fixture
def before_merge_commit(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Run a competitor once, between the next Spark MERGE's writing tasks and its
    commit (foreachBatch runs in this process on a classic session)."""
    from deltadv.spark import merge as spark_merge

    pending: list[Callable[[], None]] = []
    original = spark_merge._SparkMerge._commit

    def commit(self: Any, out: list[Any]) -> dict[str, Any]:
        if pending:
            pending.pop()()
        return original(self, out)

    monkeypatch.setattr(spark_merge._SparkMerge, "_commit", commit)
    yield pending.append
    assert not pending, "the competitor never ran"


def _upsert_stream(spark: Any, source: Path, target: Path, checkpoint: Path, log: list[Any]) -> Any:
    """Stream ``source`` (deltadv) into ``target`` with a foreachBatch MERGE made
    idempotent with txn_app_id / txn_version; ``log`` gets (batch id, metrics or
    the exception). Returns the finished query's exception (None if none)."""
    from deltadv.spark import DeltaTable as SparkDeltaTable

    def upsert(batch: Any, batch_id: int) -> None:
        try:
            m = (
                SparkDeltaTable.forPath(spark, str(target))
                .alias("t")
                .merge(batch.alias("s"), "t.id = s.id", txn_app_id="upsert", txn_version=batch_id)
                .whenMatchedUpdateAll()
                .whenNotMatchedInsertAll()
                .execute()
            )
        except Exception as e:
            log.append((batch_id, e))
            raise
        log.append((batch_id, m))

    q = (
        spark.readStream.format("deltadv")
        .load(str(source))
        .writeStream.foreachBatch(upsert)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        q.awaitTermination(180)
    except Exception as e:
        return e
    return q.exception()


def _dv_table(spark: Any, path: Path, rows: list[tuple[int, str]]) -> None:
    spark.createDataFrame(rows, SCHEMA).coalesce(1).write.format("delta").option(
        "delta.enableDeletionVectors", "true"
    ).save(str(path))


def test_foreach_batch_merge_rebased_past_a_concurrent_append(
    delta_spark: Any, tmp_path: Path, before_merge_commit: Any
) -> None:
    from deltadv.spark.datasource import register_data_source

    spark = delta_spark
    register_data_source(spark)
    source, target = tmp_path / "source", tmp_path / "target"
    _dv_table(spark, target, _rows(range(0, 6), "old"))
    _dv_table(spark, source, _rows(range(4, 9), "new"))  # 4, 5 update; 6..8 insert
    other = _rows(range(100, 103), "other")

    def competitor() -> None:  # Delta Spark appends other keys
        spark.createDataFrame(other, SCHEMA).write.format("delta").mode("append").save(str(target))

    before_merge_commit(competitor)
    log: list[Any] = []
    assert _upsert_stream(spark, source, target, tmp_path / "cp", log) is None
    ((batch, metrics),) = log
    # Lost the race for version 1, retried as version 2 through the transaction.
    assert batch == 0 and metrics["version"] == 2 and metrics["attempts"] == 2, metrics
    assert metrics["num_target_rows_updated"] == 2 and metrics["num_target_rows_inserted"] == 3
    expected = _rows(range(4), "old") + _rows(range(4, 9), "new") + other
    assert delta_rows(spark, target) == sorted(expected, key=repr)
    assert [op for _, op, _ in delta_history(spark, target)] == ["WRITE", "WRITE", "MERGE"]
    assert [t[1:] for t in _txns(target)] == [("upsert", 0)]


def test_foreach_batch_merge_conflict_fails_the_batch_then_lands_once(
    delta_spark: Any, tmp_path: Path, before_merge_commit: Any
) -> None:
    from deltadv.spark.datasource import register_data_source

    spark = delta_spark
    register_data_source(spark)
    source, target, cp = tmp_path / "source", tmp_path / "target", tmp_path / "cp"
    _dv_table(spark, target, _rows(range(0, 6), "old"))
    _dv_table(spark, source, _rows(range(4, 9), "new"))

    # deltadv DELETEs row 5, which the MERGE updates: a DV on the file it rewrites.
    before_merge_commit(lambda: DeltaTable(str(target)).delete("id = 5"))
    log: list[Any] = []
    error = _upsert_stream(spark, source, target, cp, log)
    ((batch, raised),) = log
    assert batch == 0 and isinstance(raised, CommitConflictError), raised
    assert error is not None and "CommitConflictError" in str(error)
    # Nothing of the MERGE committed: the DELETE is the table's last commit.
    assert [op for _, op, _ in delta_history(spark, target)] == ["WRITE", "DELETE"]
    assert _txns(target) == []
    assert _on_disk(target) == set(DeltaTable(str(target)).files())
    # Restarted from the checkpoint: batch 0 runs again and applies once (row 5
    # is inserted now, no longer matched).
    log.clear()
    assert _upsert_stream(spark, source, target, cp, log) is None
    assert [b for b, _ in log] == [0]
    expected = _rows(range(4), "old") + _rows(range(4, 9), "new")
    assert delta_rows(spark, target) == sorted(expected, key=repr)
    assert [t[1:] for t in _txns(target)] == [("upsert", 0)]
    # And once more (a replay after the commit): skipped.
    assert _upsert_stream(spark, source, target, tmp_path / "cp2", log) is None
    assert log[-1] == (0, {"version": None, "skipped": True})
    assert delta_rows(spark, target) == sorted(expected, key=repr)
