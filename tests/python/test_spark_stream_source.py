"""``spark.readStream.format("deltadv")`` against Delta Spark's streaming source.

One DV table, written by a scripted sequence of commits (appends by Delta Spark
and by deltadv, OPTIMIZE, a DELETE that writes a deletion vector, a DELETE that
removes a whole file), is streamed by both sources with the same options and
``Trigger.AvailableNow`` into a ``foreachBatch`` sink: the micro-batches (id and
rows), the failure and its version, and the offsets in the checkpoint must be
Delta Spark's. Expected values are always what Delta Spark's source produced on
the same table. A second table checks a restart from a checkpoint and a schema
change under a running query.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from deltadv.spark.datasource import register_data_source
from deltadv.write import write_table
from tests.python.dml_tables import delta_append as _append

Batches = list[tuple[int, list[tuple[Any, ...]]]]

# The commits of the shared table (see `table`).
V_CREATE, V_SPARK_APPEND, V_DV_APPEND, V_OPTIMIZE, V_APPEND, V_DV_DELETE = range(6)
V_APPEND_2, V_WHOLE_FILE_DELETE, V_APPEND_3 = 6, 7, 8


def _version(spark: Any, path: str) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0]["version"])


@pytest.fixture(scope="module")
def table(delta_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The shared table: its versions are the V_* constants."""
    spark = delta_spark
    path = str(tmp_path_factory.mktemp("stream") / "t")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, v STRING) USING delta "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    _append(spark, path, 0, 20, 2)  # 1
    ids = range(20, 30)
    write_table(  # 2: deltadv appends
        path,
        pa.table({"id": pa.array(range(20, 30), pa.int64()), "v": [f"r{i}" for i in ids]}),
        mode="append",
    )
    spark.sql(f"OPTIMIZE delta.`{path}`")  # 3: dataChange=false
    _append(spark, path, 30, 40, 2)  # 4
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id IN (3, 33)")  # 5: DVs, files re-added
    _append(spark, path, 100, 110, 1)  # 6: one file
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id >= 100")  # 7: that file removed whole
    _append(spark, path, 200, 204, 2)  # 8
    assert _version(spark, path) == V_APPEND_3
    register_data_source(spark)
    return path


def _run(
    spark: Any,
    fmt: str,
    path: str,
    options: dict[str, str],
    checkpoint: Path,
    *,
    available_now: bool = True,
) -> tuple[Batches, str | None]:
    """Stream the table into foreachBatch until done (AvailableNow); the batches
    (id, sorted rows) and the query's error message (None if it finished)."""
    batches: Batches = []

    def collect(df: Any, batch_id: int) -> None:
        batches.append((batch_id, sorted(tuple(r) for r in df.collect())))

    reader = spark.readStream.format(fmt)
    for k, v in options.items():
        reader = reader.option(k, v)
    writer = (
        reader.load(path)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
    )
    query = writer.trigger(availableNow=True).start()
    try:
        query.awaitTermination()
    except Exception as e:  # StreamingQueryException: its message is the source's
        return sorted(batches), str(e)
    return sorted(batches), None


def _failed_version(error: str | None) -> int | None:
    if error is None:
        return None
    m = re.search(r"(?:at|in) version (\d+)", error)
    assert m, f"no version in the error: {error[:2000]}"
    return int(m.group(1))


def _offsets(checkpoint: Path) -> list[dict[str, Any]]:
    """The source offset of each batch in the checkpoint's offset log."""
    out = []
    files = [f for f in (checkpoint / "offsets").iterdir() if f.name.isdigit()]
    for f in sorted(files, key=lambda p: int(p.name)):
        out.append(json.loads(f.read_text().strip().splitlines()[-1]))
    return out


def _both(
    spark: Any, path: str, options: dict[str, str], tmp_path: Path
) -> tuple[tuple[Batches, str | None], tuple[Batches, str | None]]:
    ours = _run(spark, "deltadv", path, options, tmp_path / "ours")
    theirs = _run(spark, "delta", path, options, tmp_path / "theirs")
    return ours, theirs


def _rows(batches: Batches) -> list[tuple[Any, ...]]:
    return sorted(r for _, rows in batches for r in rows)


def test_initial_snapshot_one_file_per_batch(delta_spark: Any, table: str, tmp_path: Path) -> None:
    """The snapshot of the latest version, its files in Delta Spark's order, one
    a batch (DVs applied), and the same offsets in the checkpoint."""
    (ours, error), (theirs, their_error) = _both(
        delta_spark, table, {"maxFilesPerTrigger": "1"}, tmp_path
    )
    assert their_error is None and error is None, error
    assert len(theirs) > 3  # the table has several files
    assert ours == theirs
    assert 3 not in [r[0] for r in _rows(ours)] and 33 not in [r[0] for r in _rows(ours)]
    # the same offsets, field for field (Delta Spark's DeltaSourceOffset JSON)
    assert _offsets(tmp_path / "ours") == _offsets(tmp_path / "theirs")


@pytest.mark.parametrize(
    ("options", "fails_at"),
    [
        ({}, V_DV_DELETE),  # a DELETE writing DVs re-adds files: an update
        ({"ignoreDeletes": "true"}, V_DV_DELETE),  # tolerates whole-file removes only
        ({"skipChangeCommits": "true"}, None),
        ({"skipChangeCommits": "true", "maxFilesPerTrigger": "1"}, None),
        ({"maxBytesPerTrigger": "1b", "skipChangeCommits": "true"}, None),
    ],
    ids=["default", "ignoreDeletes", "skipChangeCommits", "skip-maxFiles1", "skip-maxBytes"],
)
def test_changes_from_a_starting_version(
    delta_spark: Any,
    table: str,
    tmp_path: Path,
    options: dict[str, str],
    fails_at: int | None,
) -> None:
    """From startingVersion 1: the same batches, or the same failure at the same
    version, as Delta Spark's source with the same options."""
    options = {"startingVersion": str(V_SPARK_APPEND), **options}
    (ours, error), (theirs, their_error) = _both(delta_spark, table, options, tmp_path)
    assert _failed_version(their_error) == fails_at, their_error
    assert _failed_version(error) == fails_at, error
    assert ours == theirs
    if fails_at is not None:
        assert error is not None and "skipChangeCommits" in error
    else:
        # the appends, the DELETE's and whole-file DELETE's commits skipped
        assert [r[0] for r in _rows(ours)] == sorted(
            [*range(0, 40), *range(100, 110), *range(200, 204)]
        )


def test_ignore_deletes_passes_whole_file_removes(
    delta_spark: Any, table: str, tmp_path: Path
) -> None:
    """After the DV delete: the file appended at 6 and removed whole at 7 was
    already streamed; ignoreDeletes lets the stream pass the remove, the default
    fails on it."""
    start = {"startingVersion": str(V_APPEND_2)}
    (ours, error), (theirs, their_error) = _both(
        delta_spark, table, {**start, "ignoreDeletes": "true"}, tmp_path / "a"
    )
    assert their_error is None and error is None, error
    assert ours == theirs
    assert [r[0] for r in _rows(ours)] == [*range(100, 110), *range(200, 204)]
    (ours, error), (theirs, their_error) = _both(delta_spark, table, start, tmp_path / "b")
    assert _failed_version(their_error) == V_WHOLE_FILE_DELETE
    assert _failed_version(error) == V_WHOLE_FILE_DELETE
    assert "ignoreDeletes" in (error or "")
    assert ours == theirs


def test_restart_from_checkpoint_and_schema_change(delta_spark: Any, tmp_path: Path) -> None:
    """A query stopped and restarted from its checkpoint reads exactly the commits
    after its last batch; a schema change under a running query stops it at that
    version, as Delta Spark's."""
    spark = delta_spark
    path = str(tmp_path / "r")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, v STRING) USING delta "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    _append(spark, path, 0, 6, 2)
    register_data_source(spark)
    first = {
        fmt: _run(spark, fmt, path, {"maxFilesPerTrigger": "1"}, tmp_path / fmt)
        for fmt in ("deltadv", "delta")
    }
    assert first["deltadv"] == first["delta"]
    _append(spark, path, 10, 13, 1)
    spark.sql(f"OPTIMIZE delta.`{path}`")
    _append(spark, path, 20, 24, 2)
    second = {
        fmt: _run(spark, fmt, path, {"maxFilesPerTrigger": "1"}, tmp_path / fmt)
        for fmt in ("deltadv", "delta")
    }
    assert second["deltadv"] == second["delta"]
    assert _offsets(tmp_path / "deltadv") == _offsets(tmp_path / "delta")
    batches, error = second["deltadv"]
    assert error is None
    assert [r[0] for r in _rows(batches)] == [*range(10, 13), *range(20, 24)]
    assert min(b for b, _ in batches) == max(b for b, _ in first["deltadv"][0]) + 1

    # A schema change while the queries run (trigger: as fast as possible).
    queries = {}
    seen: dict[str, Batches] = {"deltadv": [], "delta": []}
    for fmt in ("deltadv", "delta"):

        def collect(df: Any, batch_id: int, fmt: str = fmt) -> None:
            seen[fmt].append((batch_id, sorted(tuple(r) for r in df.collect())))

        queries[fmt] = (
            spark.readStream.format(fmt)
            .load(path)
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(tmp_path / fmt))
            .trigger(processingTime="0 seconds")
            .start()
        )
    for q in queries.values():
        q.processAllAvailable()
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (w INT)")
    changed = _version(spark, path)
    _append(spark, path, 30, 31, 1)
    errors = {}
    for fmt, q in queries.items():
        deadline = time.monotonic() + 120
        while q.isActive and time.monotonic() < deadline:
            time.sleep(0.5)
        exc = q.exception()
        q.stop()
        errors[fmt] = None if exc is None else str(exc)
    assert _failed_version(errors["delta"]) == changed
    assert _failed_version(errors["deltadv"]) == changed
    assert "schema change" in (errors["deltadv"] or "")
    assert seen["deltadv"] == seen["delta"]


def test_stream_source_without_spark(tmp_path: Path) -> None:
    """deltadv.streaming.StreamSource on its own: the offsets and tasks of a
    table deltadv wrote (expected values from the table's history as written
    here), argument checks, and a delete stopping the stream at its version."""
    from deltadv import DeltaTable
    from deltadv.exceptions import StreamSourceChangedError, VersionNotFoundError
    from deltadv.streaming import StreamSource

    path = str(tmp_path / "s")
    write_table(path, pa.table({"id": pa.array([1, 2, 3], pa.int64())}))  # version 0
    write_table(path, pa.table({"id": pa.array([4], pa.int64())}), mode="append")  # 1

    def ids(source: StreamSource, start: dict[str, Any], end: dict[str, Any]) -> list[int]:
        batches = [b for t in source.tasks(start, end) for b in t.read()]
        return sorted(i for b in batches for i in b.column("id").to_pylist())

    snapshot = StreamSource(path)  # the snapshot of version 1, then its changes
    start = snapshot.initial_offset()
    end = snapshot.latest_offset(start)
    assert (end["reservoirVersion"], end["index"], end["isStartingVersion"]) == (2, -1, False)
    assert ids(snapshot, start, end) == [1, 2, 3, 4]
    assert snapshot.latest_offset(end) == end  # nothing new
    assert snapshot.tasks(end, end) == []

    changes = StreamSource(path, starting_version=1)
    start = changes.initial_offset()
    end = changes.latest_offset(start)
    assert (end["reservoirVersion"], end["index"]) == (2, -1)
    assert ids(changes, start, end) == [4]

    DeltaTable(path).delete("id = 2")  # version 2: the file re-added with a DV
    with pytest.raises(StreamSourceChangedError, match="at version 2") as e:
        changes.latest_offset(end)
    assert "skipChangeCommits" in str(e.value)
    skipping = StreamSource(path, starting_version=1, skip_change_commits=True)
    assert skipping.latest_offset(end)["reservoirVersion"] == 3

    with pytest.raises(VersionNotFoundError):
        StreamSource(path, starting_version=9)
    with pytest.raises(ValueError, match="max_files_per_trigger"):
        StreamSource(path, max_files_per_trigger=0)
    with pytest.raises(ValueError, match="not both"):
        StreamSource(path, starting_version=0, starting_timestamp="2020-01-01")
