"""The streaming source against Delta Spark's, case by case (issue 27 point 3).

``test_spark_stream_source.py`` covers appends, OPTIMIZE, a DELETE writing DVs and
a whole-file DELETE, from the snapshot and from startingVersion 1 (default,
ignoreDeletes, skipChangeCommits, maxFilesPerTrigger=1 / maxBytesPerTrigger with
skipChangeCommits), a restart and a schema change under a running query. This
file adds what it does not: UPDATE and MERGE writing DVs, an insert-only MERGE,
deltadv's PURGE (REORG), starting versions at each kind of commit,
``startingTimestamp``, ``maxFilesPerTrigger=1`` up to a failure,
``ignoreChanges``, the snapshot of files those operations wrote, schema changes
before the start of a query (two ADD COLUMNS; a DROP and a RENAME under column
mapping), and tables written by each project's streaming sink read by both
sources.

Each case runs ``spark.readStream.format("deltadv")`` and Delta Spark's
``format("delta")`` with the same options (``Trigger.AvailableNow`` into
``foreachBatch``): the same micro-batches (id and rows: the boundaries), the same
failure at the same version. The expected failure version of each case is
stated from the script (which commit does what), so a case cannot pass by both
sources failing elsewhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deltadv import DeltaTable
from deltadv.spark.datasource import register_data_source
from tests.python.dml_tables import create_stream_table as _create
from tests.python.dml_tables import delta_append as _append
from tests.python.dml_tables import delta_history
from tests.python.test_spark_stream_source import Batches, _failed_version, _run

# The commits of the DV table (see `table`).
V_APPEND_1, V_APPEND_2, V_UPDATE, V_APPEND_3, V_MERGE, V_MERGE_INSERT = 1, 2, 3, 4, 5, 6
V_DELETE, V_OPTIMIZE, V_APPEND_4, V_DELETE_2, V_PURGE, V_APPEND_5 = 7, 8, 9, 10, 11, 12
V_WHOLE_FILE_DELETE, V_APPEND_6 = 13, 14


def _merge(spark: Any, path: str, ids: list[int], *, insert_only: bool) -> None:
    spark.createDataFrame(
        [(i, f"m{i}") for i in ids], "id bigint, v string"
    ).createOrReplaceTempView("merge_source")
    matched = "" if insert_only else "WHEN MATCHED THEN UPDATE SET t.v = s.v "
    spark.sql(
        f"MERGE INTO delta.`{path}` t USING merge_source s ON t.id = s.id "
        f"{matched}WHEN NOT MATCHED THEN INSERT *"
    )


@pytest.fixture(scope="module")
def table(delta_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The DV table: its versions are the V_* constants; also each commit's
    timestamp (Delta Spark's history)."""
    spark = delta_spark
    path = str(tmp_path_factory.mktemp("stream-matrix") / "t")
    _create(spark, path)
    _append(spark, path, 0, 10)  # 1
    _append(spark, path, 10, 20)  # 2
    spark.sql(f"UPDATE delta.`{path}` SET v = 'u' WHERE id = 5")  # 3: DV + new file
    _append(spark, path, 20, 30)  # 4
    _merge(spark, path, [15, 25, 50, 51], insert_only=False)  # 5: DVs + new files
    _merge(spark, path, [60, 61, 62], insert_only=True)  # 6: adds only
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 22")  # 7: DV
    spark.sql(f"OPTIMIZE delta.`{path}`")  # 8: dataChange=false
    _append(spark, path, 70, 80)  # 9
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 71")  # 10: DV
    assert DeltaTable(path).purge()["version"] == V_PURGE  # 11: deltadv's REORG PURGE
    _append(spark, path, 90, 95)  # 12
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id >= 90")  # 13: the file removed whole
    _append(spark, path, 100, 105)  # 14
    history = delta_history(spark, Path(path))
    operations = [h[1] for h in history]
    assert operations[V_UPDATE : V_DELETE + 1] == ["UPDATE", "WRITE", "MERGE", "MERGE", "DELETE"]
    assert history[V_PURGE][1] == "REORG" and history[V_OPTIMIZE][1] == "OPTIMIZE"
    assert history[-1][0] == V_APPEND_6
    rows = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    times = {r["version"]: r["timestamp"] for r in rows}
    register_data_source(spark)
    return {"path": path, "times": times}


def _when(times: dict[int, Any], version: int, plus_ms: int = 0) -> str:
    """Commit ``version``'s timestamp (plus ``plus_ms``) as option text (UTC)."""
    from datetime import timedelta

    return (times[version] + timedelta(milliseconds=plus_ms)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _ids(batches: Batches) -> list[int]:
    return sorted(r[0] for _, rows in batches for r in rows)


APPENDED_AFTER_1 = [*range(0, 30), 60, 61, 62, *range(70, 80), *range(90, 95), *range(100, 105)]

#: (id, options, the version the query fails at or None, the ids it reads or
#: None when only compared). "at" in options: startingTimestamp is that
#: commit's timestamp ("at+1": 1 ms after it), with skipChangeCommits.
CASES: list[tuple[str, dict[str, str], int | None, list[int] | None]] = [
    ("sv1-default", {"startingVersion": "1"}, V_UPDATE, None),
    ("sv1-maxFiles1", {"startingVersion": "1", "maxFilesPerTrigger": "1"}, V_UPDATE, None),
    ("sv1-skip", {"startingVersion": "1", "skipChangeCommits": "true"}, None, APPENDED_AFTER_1),
    (
        "sv1-skip-maxFiles1",
        {"startingVersion": "1", "skipChangeCommits": "true", "maxFilesPerTrigger": "1"},
        None,
        APPENDED_AFTER_1,
    ),
    ("sv4-ignoreDeletes", {"startingVersion": "4", "ignoreDeletes": "true"}, V_MERGE, None),
    ("sv6-insert-only-merge", {"startingVersion": "6"}, V_DELETE, None),
    ("sv8-optimize", {"startingVersion": "8"}, V_DELETE_2, None),
    ("sv11-purge", {"startingVersion": "11"}, V_WHOLE_FILE_DELETE, None),
    (
        "sv11-ignoreDeletes-maxFiles1",
        {"startingVersion": "11", "ignoreDeletes": "true", "maxFilesPerTrigger": "1"},
        None,
        [*range(90, 95), *range(100, 105)],
    ),
    # deprecated in Delta Spark: rewritten files read again (DVs applied)
    (
        "sv1-ignoreChanges-maxFiles1",
        {"startingVersion": "1", "ignoreChanges": "true", "maxFilesPerTrigger": "1"},
        None,
        None,
    ),
    # startingTimestamp: the rows show where the stream started
    ("ts9", {"at": "9"}, None, [*range(70, 80), *range(90, 95), *range(100, 105)]),
    ("ts11+1ms", {"at+1": "11"}, None, [*range(90, 95), *range(100, 105)]),
    ("snapshot-maxFiles1", {"maxFilesPerTrigger": "1"}, None, None),
]


@pytest.mark.parametrize(
    ("options", "fails_at", "ids"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_dv_table_as_delta_spark(
    delta_spark: Any,
    table: dict[str, Any],
    tmp_path: Path,
    options: dict[str, str],
    fails_at: int | None,
    ids: list[int] | None,
) -> None:
    opts = dict(options)
    if "at" in opts:
        at = _when(table["times"], int(opts.pop("at")))
        opts = {"startingTimestamp": at, "skipChangeCommits": "true"}
    elif "at+1" in opts:
        at = _when(table["times"], int(opts.pop("at+1")), 1)
        opts = {"startingTimestamp": at, "skipChangeCommits": "true"}
    path = table["path"]
    ours, error = _run(delta_spark, "deltadv", path, opts, tmp_path / "ours")
    theirs, their_error = _run(delta_spark, "delta", path, opts, tmp_path / "theirs")
    assert _failed_version(their_error) == fails_at, their_error
    assert _failed_version(error) == fails_at, error
    assert ours == theirs  # the same batches: ids, boundaries, rows
    if ids is not None:
        assert _ids(ours) == ids
    if opts.get("maxFilesPerTrigger") == "1" and fails_at is None:
        assert len(ours) > 1  # several batches: their boundaries were compared
    if options.get("maxFilesPerTrigger") and "startingVersion" not in options:
        # the snapshot: every live row, deletes applied, one file a batch
        live = sorted(r[0] for r in delta_spark.read.format("delta").load(path).collect())
        assert _ids(ours) == live


@pytest.fixture(scope="module")
def schema_table(delta_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """0 create, 1-2 appends, 3 ADD COLUMNS w, 4 an append with w, 5 ADD COLUMNS
    z, 6 an append with z."""
    spark = delta_spark
    path = str(tmp_path_factory.mktemp("stream-schema") / "t")
    _create(spark, path)
    _append(spark, path, 0, 5)
    _append(spark, path, 5, 10)
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (w INT)")
    spark.createDataFrame([(20, "r20", 7)], "id bigint, v string, w int").write.format(
        "delta"
    ).mode("append").save(path)
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (z STRING)")
    spark.createDataFrame(
        [(30, "r30", 8, "z")], "id bigint, v string, w int, z string"
    ).write.format("delta").mode("append").save(path)
    register_data_source(spark)
    return path


@pytest.mark.parametrize(
    ("options", "fails_at", "ids"),
    [
        ({}, None, [*range(10), 20, 30]),  # the snapshot, after the changes
        # from before both changes: the data of each older schema read with the
        # latest (its columns a subset)
        ({"startingVersion": "1"}, None, [*range(10), 20, 30]),
        ({"startingVersion": "4"}, None, [20, 30]),  # between them
        ({"startingVersion": "6"}, None, [30]),  # after them
    ],
    ids=["snapshot", "sv1-before-changes", "sv4-between", "sv6-after"],
)
def test_schema_change_before_the_query(
    delta_spark: Any,
    schema_table: str,
    tmp_path: Path,
    options: dict[str, str],
    fails_at: int | None,
    ids: list[int] | None,
) -> None:
    """A query loaded after two ADD COLUMNS (its schema: the latest) that reads
    commits from before them."""
    ours, error = _run(delta_spark, "deltadv", schema_table, options, tmp_path / "ours")
    theirs, their_error = _run(delta_spark, "delta", schema_table, options, tmp_path / "theirs")
    assert _failed_version(their_error) == fails_at, their_error
    assert _failed_version(error) == fails_at, error
    assert ours == theirs
    if ids is not None:
        assert _ids(ours) == ids


def test_tables_written_by_each_sink(delta_spark: Any, tmp_path: Path) -> None:
    """Delta Spark's sink writes one table, deltadv's another, from the same
    stream (two runs, one batch each); both sources read each table with the
    same batches, from the snapshot (one file a batch) and from version 1."""
    spark = delta_spark
    register_data_source(spark)
    src = tmp_path / "src"
    schema = "id LONG, v STRING"

    def add_input(name: str, ids: range) -> None:
        rows = [(i, f"s{i}") for i in ids]
        spark.createDataFrame(rows, schema).repartition(2).write.parquet(str(src / name))

    def sink(fmt: str) -> None:
        q = (
            spark.readStream.schema(schema)
            .option("recursiveFileLookup", "true")
            .parquet(str(src))
            .writeStream.format(fmt)
            .option("checkpointLocation", str(tmp_path / f"{fmt}-cp"))
            .trigger(availableNow=True)
            .start(str(tmp_path / fmt))
        )
        q.awaitTermination(120)
        assert q.exception() is None, q.exception()

    add_input("a", range(0, 10))
    sink("delta")
    sink("deltadv")
    add_input("b", range(10, 25))
    sink("delta")
    sink("deltadv")
    for fmt in ("delta", "deltadv"):
        path = str(tmp_path / fmt)
        for name, options in (
            ("snapshot", {"maxFilesPerTrigger": "1"}),
            ("sv1", {"startingVersion": "1", "maxFilesPerTrigger": "1"}),
        ):
            cp = tmp_path / f"read-{fmt}-{name}"
            ours, error = _run(spark, "deltadv", path, options, cp / "ours")
            theirs, their_error = _run(spark, "delta", path, options, cp / "theirs")
            assert error is None and their_error is None, (error, their_error)
            assert ours == theirs, (fmt, name)
            expected = list(range(25)) if name == "snapshot" else list(range(10, 25))
            assert _ids(ours) == expected, (fmt, name)
            assert len(ours) >= 2, (fmt, name)  # several files, one a batch


@pytest.fixture(scope="module")
def mapped_table(delta_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Column mapping: 0 create (id, v, x, y), 1 insert, 2 DROP COLUMN x, 3
    insert, 4 RENAME COLUMN y TO z, 5 insert."""
    spark = delta_spark
    path = str(tmp_path_factory.mktemp("stream-mapped") / "t")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, v STRING, x INT, y INT) USING delta "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', "
        "'delta.columnMapping.mode' = 'name')"
    )
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 'a', 1, 1), (2, 'b', 2, 2)")
    spark.sql(f"ALTER TABLE delta.`{path}` DROP COLUMN x")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (3, 'c', 3)")
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN y TO z")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (4, 'd', 4)")
    register_data_source(spark)
    return path


@pytest.mark.parametrize(
    ("options", "blocked", "ids"),
    [
        ({}, False, [1, 2, 3, 4]),
        ({"startingVersion": "1"}, True, []),  # before the drop
        ({"startingVersion": "3"}, True, []),  # before the rename
        ({"startingVersion": "5"}, False, [4]),
    ],
    ids=["snapshot", "sv1-before-drop", "sv3-before-rename", "sv5-after"],
)
def test_column_mapping_drop_and_rename_before_the_query(
    delta_spark: Any,
    mapped_table: str,
    tmp_path: Path,
    options: dict[str, str],
    blocked: bool,
    ids: list[int],
) -> None:
    """Delta Spark refuses to stream across a column dropped or renamed under
    column mapping (without its schema tracking, which deltadv lacks): a query
    whose schema is the latest, started before such a change, fails at once."""
    ours, error = _run(delta_spark, "deltadv", mapped_table, options, tmp_path / "ours")
    theirs, their_error = _run(delta_spark, "delta", mapped_table, options, tmp_path / "theirs")
    assert ours == theirs
    assert _ids(ours) == ids
    if blocked:
        assert their_error and "INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG" in their_error
        assert error and "read-incompatible schema changes" in error, error
        # named: the start, or the change when the scan meets it first
        assert int(options["startingVersion"]) <= (_failed_version(error) or -1) < 5
    else:
        assert error is None and their_error is None, (error, their_error)
