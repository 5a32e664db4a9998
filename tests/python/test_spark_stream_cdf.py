"""``spark.readStream.format("deltadv").option("readChangeFeed", "true")`` against
Delta Spark's change-feed stream (``format("delta")``, same option).

One DV table with the change data feed on, written by a scripted sequence of
commits (appends, a DELETE writing deletion vectors, an UPDATE and a MERGE writing
DVs and change files, OPTIMIZE, a deltadv DELETE, a column added), is streamed by
both sources with the same options and ``Trigger.AvailableNow`` into a
``foreachBatch`` sink: the micro-batches (id and every row, ``_change_type``,
``_commit_version`` and ``_commit_timestamp`` included) and the offsets in the
checkpoint must be Delta Spark's. Expected values are always what Delta Spark's
source produced on the same table. A restart from a truncated checkpoint replays
and re-plans the last batches as Delta Spark does; a stream whose schema is older
than a later schema change stops at that version.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deltadv import DeltaTable
from deltadv.spark.datasource import register_data_source
from tests.python.dml_tables import delta_append as _append

Batches = list[tuple[int, list[tuple[Any, ...]]]]

# The commits of the shared table (see `table`).
V_CREATE, V_APPEND, V_APPEND_2, V_DV_DELETE, V_UPDATE, V_MERGE = range(6)
V_OPTIMIZE, V_APPEND_3, V_DELTADV_DELETE, V_ADD_COLUMN, V_APPEND_4 = range(6, 11)


def _version(spark: Any, path: str) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0]["version"])


@pytest.fixture(scope="module")
def table(delta_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The shared table: its versions are the V_* constants."""
    spark = delta_spark
    path = str(tmp_path_factory.mktemp("stream_cdf") / "t")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, v STRING) USING delta TBLPROPERTIES ("
        "'delta.enableDeletionVectors' = 'true', 'delta.enableChangeDataFeed' = 'true')"
    )
    _append(spark, path, 0, 20, 2)  # 1
    _append(spark, path, 20, 30, 1)  # 2
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id IN (3, 23)")  # 3: DVs, no change file
    spark.sql(f"UPDATE delta.`{path}` SET v = concat('u', v) WHERE id % 10 = 5")  # 4
    spark.sql(  # 5: an update, a delete, an insert
        f"MERGE INTO delta.`{path}` t USING (SELECT * FROM VALUES (6L, 'm6'), (7L, 'm7'), "
        "(50L, 'm50') AS s(id, v)) s ON t.id = s.id "
        "WHEN MATCHED AND s.id = 7 THEN DELETE WHEN MATCHED THEN UPDATE SET t.v = s.v "
        "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v)"
    )
    spark.sql(f"OPTIMIZE delta.`{path}`")  # 6: dataChange=false
    _append(spark, path, 100, 104, 2)  # 7
    DeltaTable(path).delete("id = 101")  # 8: deltadv writes a DV
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (w INT)")  # 9
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (200, 'r200', 1), (201, 'r201', 2)")  # 10
    assert _version(spark, path) == V_APPEND_4
    register_data_source(spark)
    return path


def _sorted(rows: list[Any]) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in rows), key=repr)


def _run(spark: Any, fmt: str, path: str, options: dict[str, str], checkpoint: Path) -> Batches:
    """Stream the table's change feed into foreachBatch until done (AvailableNow):
    the batches (id, sorted rows)."""
    batches: Batches = []

    def collect(df: Any, batch_id: int) -> None:
        batches.append((batch_id, _sorted(df.collect())))

    reader = spark.readStream.format(fmt).option("readChangeFeed", "true")
    for k, v in options.items():
        reader = reader.option(k, v)
    query = (
        reader.load(path)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return sorted(batches)


def _offsets(checkpoint: Path) -> list[dict[str, Any]]:
    """The source offset of each batch in the checkpoint's offset log."""
    files = [f for f in (checkpoint / "offsets").iterdir() if f.name.isdigit()]
    return [
        json.loads(f.read_text().strip().splitlines()[-1])
        for f in sorted(files, key=lambda p: int(p.name))
    ]


def _both(
    spark: Any, path: str, options: dict[str, str], tmp_path: Path
) -> tuple[Batches, Batches]:
    ours = _run(spark, "deltadv", path, options, tmp_path / "ours")
    theirs = _run(spark, "delta", path, options, tmp_path / "theirs")
    return ours, theirs


def _rows(batches: Batches) -> list[tuple[Any, ...]]:
    return _sorted([r for _, rows in batches for r in rows])


def _changes(batches: Batches) -> set[tuple[int, str, int]]:
    """(id, _change_type, _commit_version) of every row."""
    return {(r[0], r[3], r[4]) for r in _rows(batches)}


def test_initial_snapshot_as_inserts(delta_spark: Any, table: str, tmp_path: Path) -> None:
    """No starting version: the latest snapshot's rows (DVs applied) as inserts of
    the latest version, with its commit time, in one batch as Delta Spark's."""
    ours, theirs = _both(delta_spark, table, {}, tmp_path)
    assert ours == theirs
    assert len(theirs) == 1
    rows = _rows(ours)
    assert {(r[3], r[4]) for r in rows} == {("insert", V_APPEND_4)}
    assert {r[0] for r in rows} >= {0, 6, 50, 100, 200}
    assert not {3, 7, 23, 101} & {r[0] for r in rows}


def test_snapshot_one_file_per_batch(delta_spark: Any, table: str, tmp_path: Path) -> None:
    """maxFilesPerTrigger=1 over the snapshot: one file a batch, Delta Spark's
    order, and the same offsets in the checkpoint."""
    ours, theirs = _both(delta_spark, table, {"maxFilesPerTrigger": "1"}, tmp_path)
    assert ours == theirs
    assert len(theirs) > 2
    assert _offsets(tmp_path / "ours") == _offsets(tmp_path / "theirs")


def test_every_change_from_a_starting_version(delta_spark: Any, table: str, tmp_path: Path) -> None:
    """From version 1: every commit's changes, DELETE/UPDATE/MERGE included (none
    stops the stream), nothing for OPTIMIZE; the same batches as Delta Spark's."""
    ours, theirs = _both(delta_spark, table, {"startingVersion": str(V_APPEND)}, tmp_path)
    assert ours == theirs
    changes = _changes(ours)
    assert {
        (3, "delete", V_DV_DELETE),
        (23, "delete", V_DV_DELETE),
        (5, "update_preimage", V_UPDATE),
        (5, "update_postimage", V_UPDATE),
        (7, "delete", V_MERGE),
        (6, "update_postimage", V_MERGE),
        (50, "insert", V_MERGE),
        (101, "delete", V_DELTADV_DELETE),
        (200, "insert", V_APPEND_4),
    } <= changes
    assert V_OPTIMIZE not in {v for _, _, v in changes}
    # the DV delete reads only the deleted rows, not the files' others
    assert {i for i, _, v in changes if v == V_DV_DELETE} == {3, 23}


@pytest.mark.parametrize(
    "options",
    [{"maxFilesPerTrigger": "1"}, {"maxBytesPerTrigger": "1b"}],
    ids=["maxFiles1", "maxBytes1b"],
)
def test_admission_keeps_commits_whole(
    delta_spark: Any, table: str, tmp_path: Path, options: dict[str, str]
) -> None:
    """One file a batch from version 1: plain appends split file by file, the
    commits with change files or DVs stay whole; the batches and offsets are Delta
    Spark's. Then a restart from the checkpoint with the last batch uncommitted and
    the one before it planned but not run: the same two batches again."""
    options = {"startingVersion": str(V_APPEND), **options}
    ours, theirs = _both(delta_spark, table, options, tmp_path)
    assert ours == theirs
    assert _offsets(tmp_path / "ours") == _offsets(tmp_path / "theirs")
    # each change commit in one batch
    for version in (V_DV_DELETE, V_UPDATE, V_MERGE, V_DELTADV_DELETE):
        in_batches = [b for b, rows in ours if any(r[4] == version for r in rows)]
        assert len(in_batches) == 1, (version, in_batches)
    # the two-file append over two batches
    assert len([b for b, rows in ours if any(r[4] == V_APPEND for r in rows)]) == 2
    if "maxBytesPerTrigger" in options:
        return
    last = max(b for b, _ in ours)
    for side in ("ours", "theirs"):
        checkpoint = tmp_path / side
        for log, batch in (("commits", last), ("commits", last - 1), ("offsets", last)):
            for name in (str(batch), f".{batch}.crc"):  # the log file and its checksum
                (checkpoint / log / name).unlink(missing_ok=True)
    again_ours = _run(delta_spark, "deltadv", table, options, tmp_path / "ours")
    again_theirs = _run(delta_spark, "delta", table, options, tmp_path / "theirs")
    assert again_ours == again_theirs
    assert again_ours == [b for b in ours if b[0] >= last - 1]


def test_schema_change_stops_an_older_stream(table: str) -> None:
    """A stream read with the schema before the column was added stops at that
    version; DELETE, UPDATE and MERGE before it did not stop it. A stream from
    ``startingVersion=latest`` has nothing to read yet."""
    from deltadv.exceptions import StreamSourceChangedError
    from deltadv.streaming import StreamSource

    old = StreamSource(
        table, version=V_DELTADV_DELETE, starting_version=V_APPEND, read_change_feed=True
    )
    assert old.schema().names == ["id", "v", "_change_type", "_commit_version", "_commit_timestamp"]
    start = old.initial_offset()
    one = StreamSource(  # the first batch ends before the change: read
        table,
        version=V_DELTADV_DELETE,
        starting_version=V_APPEND,
        read_change_feed=True,
        max_files_per_trigger=1,
    )
    assert one.latest_offset(start)["reservoirVersion"] == V_APPEND
    with pytest.raises(StreamSourceChangedError, match=f"version {V_ADD_COLUMN}"):
        old.latest_offset(start)
    current = StreamSource(table, starting_version=V_APPEND, read_change_feed=True)
    assert current.latest_offset(current.initial_offset())["reservoirVersion"] == V_APPEND_4 + 1
    latest = StreamSource(table, starting_version="latest", read_change_feed=True)
    nothing = latest.initial_offset()
    assert latest.latest_offset(nothing) == nothing  # no commit after the latest yet


def test_table_without_the_feed_is_refused(tmp_path: Path) -> None:
    """A table whose change data feed is off cannot be streamed as a feed, from
    its snapshot or from a version: the error names the property
    (DeltaProtocolError); its rows still stream."""
    import pyarrow as pa

    from deltadv.exceptions import DeltaProtocolError
    from deltadv.streaming import StreamSource
    from deltadv.write import write_table

    path = str(tmp_path / "off")
    write_table(path, pa.table({"id": pa.array([1, 2], pa.int64())}))  # version 0
    write_table(path, pa.table({"id": pa.array([3], pa.int64())}), mode="append")  # 1
    for source in (
        StreamSource(path, read_change_feed=True),
        StreamSource(path, starting_version=1, read_change_feed=True),
    ):
        with pytest.raises(DeltaProtocolError, match=r"delta\.enableChangeDataFeed"):
            source.latest_offset(source.initial_offset())
    rows = StreamSource(path, starting_version=1)
    assert rows.latest_offset(rows.initial_offset())["reservoirVersion"] == 2
