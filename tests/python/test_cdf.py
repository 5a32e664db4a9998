"""Change Data Feed: ``DeltaTable.load_cdf``, ``deltadv.spark.read(change_data_feed=True)``
and ``spark.read.format("deltadv").option("readChangeFeed", "true")``, and the change
files deltadv's DELETE, UPDATE and MERGE write on CDF tables.

Checked against Delta Spark's ``table_changes`` (``readChangeFeed``) row for row,
``_commit_timestamp`` included, both ways: tables Delta Spark writes are read by
deltadv, and every version deltadv writes is read by Delta Spark. Expected rows
come from Delta Spark, from the kernel-rs tests of the golden tables, or from a
model that applies each statement's meaning to plain Python dicts; never from
deltadv's output.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltadv
from deltadv import spark as dspark
from deltadv.write import write_table
from tests.python.dml_tables import N, Row, create_table, initial_model, small_table, table_files
from tests.python.test_merge import _source

#: The columns the feed adds after the table's, with their Arrow types.
CDF_TYPES = {
    "_change_type": pa.string(),
    "_commit_version": pa.int64(),
    "_commit_timestamp": pa.timestamp("us", tz="UTC"),
}
CDF_NAMES = list(CDF_TYPES)

#: One change row: the table's columns, then _change_type, _commit_version and
#: (where present) _commit_timestamp in microseconds since the epoch.
Change = tuple[Any, ...]
Feed = tuple[list[str], list[Change]]

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

# delta-io/delta-kernel-rs kernel/tests/integration/features/cdf.rs,
# cdf_with_deletion_vector: (value, _change_type, _commit_version) of every commit.
CDF_TABLE_WITH_DV: list[Change] = [
    (0, "insert", 0),
    (1, "insert", 0),
    (2, "insert", 0),
    (3, "insert", 0),
    (4, "insert", 0),
    (5, "insert", 0),
    (6, "insert", 0),
    (7, "insert", 0),
    (8, "insert", 0),
    (9, "insert", 0),
    (0, "delete", 1),
    (9, "delete", 1),
    (0, "insert", 2),
    (9, "insert", 2),
    (0, "delete", 3),
    (1, "delete", 3),
    (4, "delete", 3),
    (5, "delete", 3),
    (1, "insert", 4),
    (4, "insert", 4),
    (3, "delete", 5),
    (0, "insert", 5),
    (5, "insert", 5),
    (3, "insert", 6),
]

# delta-io/delta-kernel-rs kernel/tests/integration/features/cdf.rs,
# cdf_with_cdc_and_dvs: (id, comment, _change_type, _commit_version). The test's
# blank comments are empty strings in the table's files, not NULLs.
CDF_TABLE_WITH_CDC_AND_DVS: list[Change] = [
    (1, "initial", "insert", 0),
    (2, "insert1", "insert", 1),
    (3, "insert1-delete1", "insert", 1),
    (4, "insert1-delete2", "insert", 1),
    (5, "insert1-delete2", "insert", 1),
    (3, "insert1-delete1", "delete", 2),
    (3, "insert1-delete1", "insert", 4),
    (4, "insert1-delete2", "delete", 5),
    (5, "insert1-delete2", "delete", 5),
    (4, "insert1-delete2", "insert", 7),
    (5, "insert2", "insert", 8),
    (1, "initial", "update_preimage", 9),
    (1, "update1", "update_postimage", 9),
    (2, "insert1", "update_preimage", 9),
    (2, "update1", "update_postimage", 9),
    (3, "insert1-delete1", "update_preimage", 9),
    (3, "update1", "update_postimage", 9),
    (1, "update1", "delete", 10),
    (2, "update1", "update_preimage", 12),
    (2, "update2", "update_postimage", 12),
    (6, "insert3", "insert", 14),
    (7, "insert3", "insert", 14),
    (8, "insert4", "insert", 15),
    (9, "insert4", "insert", 15),
    (8, "insert4", "delete", 16),
    (7, "insert3", "delete", 16),
    (10, "merge1-insert", "insert", 18),
    (11, "merge1-insert", "insert", 18),
    (9, "merge1-update", "update_postimage", 18),
    (9, "insert4", "update_preimage", 18),
    (11, "merge1-insert", "update_preimage", 20),
    (11, "", "update_postimage", 20),
    (12, "merge2-insert", "insert", 22),
    (11, "", "delete", 22),
    (3, "update1", "delete", 24),
    (4, "insert1-delete2", "delete", 24),
    (5, "insert2", "delete", 24),
    (2, "update2", "delete", 24),
    (6, "insert3", "delete", 24),
    (9, "merge1-update", "delete", 24),
    (0, "new", "insert", 25),
    (1, "after-large-delete", "insert", 25),
    (2, "", "insert", 25),
]


# ---------------------------------------------------------------- reading helpers


def _order(row: Change) -> tuple[tuple[bool, Any], ...]:
    return tuple((value is None, value) for value in row)


def _sorted(rows: Iterable[Change]) -> list[Change]:
    return sorted(rows, key=_order)


def _cdf(path: str, **kwargs: Any) -> Feed:
    """deltadv's ``load_cdf``: its column names and its rows, sorted, with
    ``_commit_timestamp`` in microseconds (the schema checked on the way)."""
    reader = deltadv.DeltaTable(path).load_cdf(**kwargs)
    assert isinstance(reader, pa.RecordBatchReader)
    data = reader.read_all()
    assert data.column_names[-3:] == CDF_NAMES
    for name, kind in CDF_TYPES.items():
        assert data.schema.field(name).type == kind, name
    i = data.column_names.index("_commit_timestamp")
    data = data.set_column(i, "_commit_timestamp", data.column(i).cast(pa.int64()))
    return data.column_names, _sorted(zip(*(c.to_pylist() for c in data.columns), strict=True))


def _spark_rows(df: Any) -> Feed:
    """A feed DataFrame's column names and sorted rows, ``_commit_timestamp`` in µs."""
    from pyspark.sql import functions as F

    df = df.withColumn("_commit_timestamp", F.unix_micros("_commit_timestamp"))
    return df.columns, _sorted(tuple(r) for r in df.collect())


def _table_changes(spark: Any, path: str, **options: Any) -> Feed:
    """Delta Spark's ``readChangeFeed`` of ``path`` with these options."""
    return _spark_rows(_change_feed_df(spark, path, **options))


def _change_feed_df(spark: Any, path: str, **options: Any) -> Any:
    reader = spark.read.format("delta").option("readChangeFeed", "true")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(path)


def _no_timestamps(rows: Iterable[Change]) -> list[Change]:
    return _sorted(row[:-1] for row in rows)


def _versions(rows: Iterable[Change]) -> set[int]:
    """The _commit_version of rows with timestamps."""
    return {row[-2] for row in rows}


def _as_datetime(micros: int) -> datetime:
    return EPOCH + timedelta(microseconds=micros)


def _as_text(micros: int) -> str:
    """A whole-millisecond instant as Spark's timestamp text (UTC session zone)."""
    when = _as_datetime(micros)
    return f"{when:%Y-%m-%d %H:%M:%S}.{when.microsecond // 1000:03d}"


def _monotonic_mtimes(root: Path) -> dict[int, int]:
    """Commit timestamps (µs) of a table without in-commit timestamps, as Delta
    Spark derives them: each commit file's modification time in ms, raised to 1 ms
    after the previous commit's where it is not later."""
    out: dict[int, int] = {}
    last = None
    for f in sorted((root / "_delta_log").glob("*.json")):
        millis = f.stat().st_mtime_ns // 1_000_000
        if last is not None and millis <= last:
            millis = last + 1
        out[int(f.stem)] = millis * 1000
        last = millis
    return out


def _log_actions(root: Path, version: int, kind: str) -> list[dict[str, Any]]:
    """The ``kind`` actions (``add``, ``remove``, ``cdc``...) of one commit."""
    lines = (root / "_delta_log" / f"{version:020}.json").read_text().splitlines()
    return [a[kind] for a in map(json.loads, filter(None, lines)) if kind in a]


def _set_feed(spark: Any, path: str, on: bool) -> None:
    """Delta Spark's ALTER TABLE turning the feed on or off (one commit)."""
    value = "true" if on else "false"
    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableChangeDataFeed' = '{value}')"
    )


def _change_files(root: Path) -> set[str]:
    return {f for f in table_files(root) if f.startswith("_change_data")}


# ----------------------------------------------------------------- the row model


def _row(r: Row) -> Change:
    return (r["id"], r["part"], r["s"], r["n"])


def _insert(model: dict[int, Row], version: int, rows: list[Row]) -> list[Change]:
    for r in rows:
        model[r["id"]] = dict(r)
    return [(*_row(r), "insert", version) for r in rows]


def _delete(model: dict[int, Row], version: int, which: Callable[[Row], bool]) -> list[Change]:
    gone = [model.pop(i) for i in [i for i, r in model.items() if which(r)]]
    return [(*_row(r), "delete", version) for r in gone]


def _update(
    model: dict[int, Row],
    version: int,
    which: Callable[[Row], bool],
    change: Callable[[Row], Row],
) -> list[Change]:
    out: list[Change] = []
    for i, old in list(model.items()):
        if which(old):
            new = change(dict(old))
            model[i] = new
            out += [(*_row(old), "update_preimage", version)]
            out += [(*_row(new), "update_postimage", version)]
    return out


def _merge(
    model: dict[int, Row],
    version: int,
    source: list[Row],
    delete: Callable[[Row], bool],
    update: Callable[[Row, Row], Row],
) -> list[Change]:
    """MERGE on id: a matched row is deleted where ``delete(source row)``, else
    updated to ``update(target row, source row)``; an unmatched source row is inserted."""
    out: list[Change] = []
    for s in source:
        old = model.get(s["id"])
        if old is None:
            out += _insert(model, version, [s])
        elif delete(s):
            del model[s["id"]]
            out.append((*_row(old), "delete", version))
        else:
            new = update(dict(old), s)
            model[s["id"]] = new
            out += [(*_row(old), "update_preimage", version)]
            out += [(*_row(new), "update_postimage", version)]
    return out


# --------------------------------------------------------------- 1. golden tables


def test_golden_cdf_table_with_dv(golden: Path) -> None:
    """Inline DVs added, replaced and dropped on one file: each commit yields only
    the rows whose deletion state changed (old DV vs new DV)."""
    root = golden / "delta-kernel-rs" / "cdf-table-with-dv"
    path = str(root)
    names, rows = _cdf(path)
    assert names == ["value", *CDF_NAMES]
    assert _no_timestamps(rows) == _sorted(CDF_TABLE_WITH_DV)
    # No in-commit timestamps: the commit files' modification times, made monotonic.
    stamps = _monotonic_mtimes(root)
    assert {(r[2], r[3]) for r in rows} == {(v, stamps[v]) for v in range(7)}
    # The schema the feed declares up front is the one it returns.
    table = deltadv.DeltaTable(path)
    assert table.change_feed_schema() == table.load_cdf(starting_version=0).schema
    assert table.change_feed_schema().names == ["value", *CDF_NAMES]
    # Changes are per commit: every range is the commits it spans.
    for start in range(7):
        for end in range(start, 8):
            want = [r for r in CDF_TABLE_WITH_DV if start <= r[2] <= end]
            _, got = _cdf(path, starting_version=start, ending_version=end)
            assert _no_timestamps(got) == _sorted(want), (start, end)


def test_golden_cdf_table_with_cdc_and_dvs(golden: Path) -> None:
    """A Databricks table with DV DELETEs, UPDATEs and MERGEs that wrote change
    files, OPTIMIZEs (no data change: nothing in the feed) and a DELETE of whole
    files with DVs."""
    root = golden / "delta-kernel-rs" / "cdf-table-with-cdc-and-dvs"
    path = str(root)
    names, rows = _cdf(path)
    assert names == ["id", "comment", *CDF_NAMES]
    assert _no_timestamps(rows) == _sorted(CDF_TABLE_WITH_CDC_AND_DVS)
    stamps = _monotonic_mtimes(root)
    assert {(r[3], r[4]) for r in rows} == {
        (r[3], stamps[r[3]]) for r in CDF_TABLE_WITH_CDC_AND_DVS
    }

    for start, end in [(0, 0), (2, 9), (9, 9), (10, 17), (18, 22), (11, 11), (24, 25)]:
        want = [r for r in CDF_TABLE_WITH_CDC_AND_DVS if start <= r[3] <= end]
        _, got = _cdf(path, starting_version=start, ending_version=end)
        assert _no_timestamps(got) == _sorted(want), (start, end)

    # timestamps select the commits at or after the start, at or before the end
    _, got = _cdf(
        path,
        starting_timestamp=_as_datetime(stamps[10]),
        ending_timestamp=_as_text(stamps[12]),
    )
    want = [r for r in CDF_TABLE_WITH_CDC_AND_DVS if 10 <= r[3] <= 12]
    assert _no_timestamps(got) == _sorted(want)

    # a projection, and a predicate over the table's columns
    names, got = _cdf(path, columns=["comment"])
    assert names == ["comment", *CDF_NAMES]
    assert _no_timestamps(got) == _sorted(r[1:] for r in CDF_TABLE_WITH_CDC_AND_DVS)
    _, got = _cdf(path, predicate="id >= 9 AND comment <> ''")
    want = [r for r in CDF_TABLE_WITH_CDC_AND_DVS if r[0] >= 9 and r[1] != ""]
    assert _no_timestamps(got) == _sorted(want)


def test_golden_tables_match_delta_spark(delta_spark: Any, golden: Path) -> None:
    """Delta Spark's table_changes on the same golden tables: it agrees with the
    kernel-rs expectations, and deltadv agrees with it to the microsecond."""
    spark = delta_spark
    path = str(golden / "delta-kernel-rs" / "cdf-table-with-cdc-and-dvs")
    want = _table_changes(spark, path, startingVersion=0)
    assert _no_timestamps(want[1]) == _sorted(CDF_TABLE_WITH_CDC_AND_DVS)
    assert _cdf(path) == want
    for start, end in [(9, 12), (18, 25)]:
        want = _table_changes(spark, path, startingVersion=start, endingVersion=end)
        assert _cdf(path, starting_version=start, ending_version=end) == want, (start, end)

    # cdf-table-with-dv up to v4 only: its v5 inline DV (used by v5 and v6) ends in
    # the z85 crate's private '#' tail (golden INDEX.md, caveat 3), which Delta
    # Spark's Base85 decodes to another bitmap; there the kernel-rs test is the
    # only oracle (test_golden_cdf_table_with_dv).
    path = str(golden / "delta-kernel-rs" / "cdf-table-with-dv")
    want = _table_changes(spark, path, startingVersion=0, endingVersion=4)
    assert _no_timestamps(want[1]) == _sorted(r for r in CDF_TABLE_WITH_DV if r[2] <= 4)
    assert _cdf(path, starting_version=0, ending_version=4) == want


# ------------------------------------------------- 2. Delta Spark writes, deltadv reads


@dataclass
class SparkWritten:
    """A CDF table Delta Spark wrote, and the changes the model expects of it."""

    path: str
    latest: int
    changes: list[Change]


@pytest.fixture(scope="module", params=["plain", "partitioned-mapped-ict"])
def spark_written(request: Any, delta_spark: Any, tmp_path_factory: Any) -> SparkWritten:
    """Delta Spark's own writes on a DV + CDF table (id, part, s, n): plain, or
    partitioned by part, column-mapped by name, with in-commit timestamps.

    v0 CREATE TABLE, v1 INSERT 300 rows, v2 DELETE (DVs), v3 UPDATE (DVs + change
    files), v4 MERGE (delete, update, insert), v5 DELETE of whole files."""
    spark = delta_spark
    partitioned = request.param != "plain"
    path = str(tmp_path_factory.mktemp("spark_written") / "t")
    props = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}
    if partitioned:
        props["delta.columnMapping.mode"] = "name"
        props["delta.enableInCommitTimestamps"] = "true"
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, part BIGINT, s STRING, n BIGINT) USING delta "
        + ("PARTITIONED BY (part) " if partitioned else "")
        + "TBLPROPERTIES ("
        + ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
        + ")"
    )
    model: dict[int, Row] = {}
    changes: list[Change] = []

    spark.range(0, 300, numPartitions=3).selectExpr(
        "id", "id % 3 AS part", "concat('v', id) AS s", "id AS n"
    ).write.format("delta").mode("append").save(path)
    changes += _insert(
        model, 1, [{"id": i, "part": i % 3, "s": f"v{i}", "n": i} for i in range(300)]
    )

    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 10 = 3")
    changes += _delete(model, 2, lambda r: r["id"] % 10 == 3)

    spark.sql(f"UPDATE delta.`{path}` SET s = concat(s, '-u'), n = n + 1000 WHERE id < 20")
    changes += _update(
        model, 3, lambda r: r["id"] < 20, lambda r: r | {"s": r["s"] + "-u", "n": r["n"] + 1000}
    )

    spark.range(250, 320).selectExpr(
        "id", "id % 3 AS part", "concat('m', id) AS s", "-id AS n"
    ).createOrReplaceTempView("cdf_merge_source")
    spark.sql(
        f"MERGE INTO delta.`{path}` t USING cdf_merge_source s ON t.id = s.id "
        "WHEN MATCHED AND s.id % 2 = 0 THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET t.s = s.s, t.n = s.n "
        "WHEN NOT MATCHED THEN INSERT *"
    )
    source = [{"id": i, "part": i % 3, "s": f"m{i}", "n": -i} for i in range(250, 320)]
    changes += _merge(
        model, 4, source, lambda s: s["id"] % 2 == 0, lambda t, s: t | {"s": s["s"], "n": s["n"]}
    )

    if partitioned:  # every file of a partition
        spark.sql(f"DELETE FROM delta.`{path}` WHERE part = 2")
        changes += _delete(model, 5, lambda r: r["part"] == 2)
    else:  # the second file of v1 (ids 100..199), which has a DV
        spark.sql(f"DELETE FROM delta.`{path}` WHERE id >= 100 AND id < 200")
        changes += _delete(model, 5, lambda r: 100 <= r["id"] < 200)
        removes = _log_actions(Path(path), 5, "remove")
        assert len(removes) == 1 and removes[0].get("deletionVector"), removes
    return SparkWritten(path, 5, changes)


def test_delta_spark_writes_deltadv_reads_every_range(
    delta_spark: Any, spark_written: SparkWritten
) -> None:
    spark = delta_spark
    path, latest = spark_written.path, spark_written.latest
    names, full = _table_changes(spark, path, startingVersion=0)
    assert names == ["id", "part", "s", "n", *CDF_NAMES]
    assert _no_timestamps(full) == _sorted(spark_written.changes)  # the oracle is sane
    assert _cdf(path) == (names, full)
    # every range over v1..v5 (v0, the CREATE TABLE, has no rows: just two ranges)
    ranges = [(0, 0), (0, 2)]
    ranges += [(start, end) for start in range(1, latest + 1) for end in range(start, latest + 1)]
    for start, end in ranges:
        want = _table_changes(spark, path, startingVersion=start, endingVersion=end)
        got = _cdf(path, starting_version=start, ending_version=end)
        assert got == want, (start, end)
    # an ending version past the latest is the latest, as for Delta Spark
    want = _table_changes(spark, path, startingVersion=3, endingVersion=latest + 10)
    assert _cdf(path, starting_version=3, ending_version=latest + 10) == want
    assert _versions(want[1]) == {3, 4, 5}


def test_delta_spark_writes_columns_predicate_timestamps(
    delta_spark: Any, spark_written: SparkWritten
) -> None:
    spark = delta_spark
    path = spark_written.path
    df = _change_feed_df(spark, path, startingVersion=0)

    want = _spark_rows(df.select("s", "id", *CDF_NAMES))
    assert _cdf(path, columns=["s", "id"]) == want
    want = _spark_rows(df.filter("id < 120 OR n < 0"))
    assert len(want[1]) < len(spark_written.changes)
    assert _cdf(path, predicate="id < 120 OR n < 0") == want
    want = _spark_rows(df.filter("id < 120").select("n", "id", *CDF_NAMES))
    assert _cdf(path, columns=["n", "id"], predicate="id < 120") == want

    # Versions chosen by timestamp: from exactly v2's commit to 1 ms before v4's
    # gives v2..v3; 1 ms after v2's gives v3 on.
    stamps = {row[-2]: row[-1] for row in _spark_rows(df)[1]}
    start, end = stamps[2], stamps[4] - 1000
    want = _table_changes(
        spark, path, startingTimestamp=_as_text(start), endingTimestamp=_as_text(end)
    )
    assert _versions(want[1]) == {2, 3}
    got = _cdf(path, starting_timestamp=_as_datetime(start), ending_timestamp=_as_datetime(end))
    assert got == want
    got = _cdf(path, starting_timestamp=_as_text(start), ending_timestamp=_as_text(end))
    assert got == want
    want = _table_changes(spark, path, startingTimestamp=_as_text(stamps[2] + 1000))
    assert _versions(want[1]) == {3, 4, 5}
    assert _cdf(path, starting_timestamp=_as_text(stamps[2] + 1000)) == want


# ------------------------------------------------- 3. deltadv writes, Delta Spark reads


@pytest.mark.parametrize("mapped", [False, True], ids=["plain", "column-mapped"])
def test_deltadv_writes_delta_spark_reads(delta_spark: Any, tmp_path: Path, mapped: bool) -> None:
    """deltadv's DML (Python and Spark APIs) on a CDF table Delta Spark created:
    after each statement, the new version's feed is what the model expects, and
    Delta Spark's table_changes reads exactly the same rows."""
    from pyspark.sql import functions as F

    spark = delta_spark
    root = tmp_path / "t"
    path = str(root)
    create_table(spark, path, mapped)  # v0; v1 turns the feed on
    _set_feed(spark, path, True)
    model = initial_model()
    table = deltadv.DeltaTable(path)
    version = 1
    every: list[Change] = []

    def check(step: str, expected: list[Change], change_files: bool) -> None:
        nonlocal version
        version += 1
        assert deltadv.DeltaTable(path).version() == version, step
        names, got = _cdf(path, starting_version=version, ending_version=version)
        assert names == ["id", "part", "s", "n", *CDF_NAMES], step
        assert _no_timestamps(got) == _sorted(expected), step
        want = _table_changes(spark, path, startingVersion=version, endingVersion=version)
        assert want == (names, got), step
        cdc = _log_actions(root, version, "cdc")
        if change_files:
            assert cdc, f"{step}: no cdc action"
            assert all((root / c["path"]).is_file() for c in cdc), step
            if not mapped:
                assert all(c["path"].startswith("_change_data/") for c in cdc), step
        else:
            assert not cdc, f"{step}: {cdc}"
        every.extend(expected)

    # 1. Python DELETE with DVs: deletes, and no change files
    change_files_before = _change_files(root)
    gone = range(7, N, 100)
    table.delete(f"id IN ({', '.join(map(str, gone))})")
    check("python delete", _delete(model, version + 1, lambda r: r["id"] in gone), False)
    assert _change_files(root) == change_files_before

    # 2. Python UPDATE of ids 0..4: 5 preimages with the old values, 5 postimages
    table.update({"s": "s || '-u'", "n": "n + 1000"}, "id < 5")
    expected = _update(
        model,
        version + 1,
        lambda r: r["id"] < 5,
        lambda r: r | {"s": r["s"] + "-u", "n": r["n"] + 1000},
    )
    assert [c[4] for c in expected].count("update_preimage") == 5
    assert {c[:4] for c in expected if c[4] == "update_preimage"} == {
        (i, i % 3, f"v{i}", i) for i in range(5)
    }
    check("python update", expected, True)

    # 3. Python UPDATE moving rows to other partitions
    table.update({"part": "part + 10"}, "id BETWEEN 20 AND 29")
    expected = _update(
        model, version + 1, lambda r: 20 <= r["id"] <= 29, lambda r: r | {"part": r["part"] + 10}
    )
    check("python partition move", expected, True)

    # 4. Python MERGE: matched delete, matched update, not matched insert
    source = [
        {"id": i, "part": i % 3, "s": "del" if i % 2 == 0 else f"m{i}", "n": -i}
        for i in range(100, 120)
    ]
    source += [{"id": i, "part": 1, "s": f"new{i}", "n": i} for i in range(5000, 5005)]
    (
        table.merge(_source(source), "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_delete("s.s = 'del'")
        .when_matched_update({"s": "s.s", "n": "s.n"})
        .when_not_matched_insert({"id": "s.id", "part": "s.part", "s": "s.s", "n": "s.n"})
        .execute()
    )
    expected = _merge(
        model,
        version + 1,
        source,
        lambda s: s["s"] == "del",
        lambda t, s: t | {"s": s["s"], "n": s["n"]},
    )
    kinds = {c[4] for c in expected}
    assert kinds == {"delete", "update_preimage", "update_postimage", "insert"}
    check("python merge", expected, True)

    # 5. Spark API UPDATE (Spark evaluates the values)
    dt = dspark.DeltaTable.forPath(spark, path)
    dt.update("id % 500 = 1", {"s": "upper(s)"})
    expected = _update(
        model, version + 1, lambda r: r["id"] % 500 == 1, lambda r: r | {"s": r["s"].upper()}
    )
    check("spark update", expected, True)

    # 6. Spark API MERGE
    sdf = spark.range(200, 210).union(spark.range(6000, 6003))
    sdf = sdf.selectExpr("id", "id % 3 AS part", "concat('sp', id) AS s", "id * 2 AS n")
    (
        dspark.DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(sdf.alias("s"), "t.id = s.id")
        .whenMatchedDelete("s.id % 2 = 1")
        .whenMatchedUpdate(set={"s": "s.s", "n": F.col("s.n") + 1})
        .whenNotMatchedInsertAll()
        .execute()
    )
    source = [
        {"id": i, "part": i % 3, "s": f"sp{i}", "n": i * 2}
        for i in [*range(200, 210), *range(6000, 6003)]
    ]
    expected = _merge(
        model,
        version + 1,
        source,
        lambda s: s["id"] % 2 == 1,
        lambda t, s: t | {"s": s["s"], "n": s["n"] + 1},
    )
    check("spark merge", expected, True)

    # 7. Spark API DELETE: rows (DVs), then whole files (the moved partitions)
    dspark.DeltaTable.forPath(spark, path).delete("id % 250 = 3")
    check("spark delete", _delete(model, version + 1, lambda r: r["id"] % 250 == 3), False)
    dspark.DeltaTable.forPath(spark, path).delete("part >= 10")
    expected = _delete(model, version + 1, lambda r: r["part"] >= 10)
    assert len(expected) == 10
    check("spark delete of partitions", expected, False)

    # 8. Delta Spark's own UPDATE on top of ours
    spark.sql(f"UPDATE delta.`{path}` SET n = -n WHERE id % 300 = 2")
    expected = _update(
        model, version + 1, lambda r: r["id"] % 300 == 2, lambda r: r | {"n": -r["n"]}
    )
    check("Delta Spark update", expected, True)

    # the whole range at once, and the table itself
    want = _table_changes(spark, path, startingVersion=2)
    assert _no_timestamps(want[1]) == _sorted(every)
    assert _cdf(path, starting_version=2) == want
    rows = spark.read.format("delta").load(path).collect()
    assert _sorted(tuple(r) for r in rows) == _sorted(map(_row, model.values()))


# ---------------------------------------------------------------- 4. Spark read path


@pytest.mark.parametrize("spark_written", ["partitioned-mapped-ict"], indirect=True)
def test_spark_read_path(delta_spark: Any, spark_written: SparkWritten) -> None:
    """``deltadv.spark.read(change_data_feed=True)`` and the data source's
    readChangeFeed option give load_cdf's rows, with Delta Spark's column types."""
    spark = delta_spark
    path = spark_written.path

    df = dspark.read(spark, path, change_data_feed=True, starting_version=0)
    reference = _change_feed_df(spark, path, startingVersion=0)
    assert [(f.name, f.dataType) for f in df.schema] == [
        (f.name, f.dataType) for f in reference.schema
    ]
    want = _spark_rows(reference)
    assert _spark_rows(df) == want == _cdf(path, starting_version=0)

    # a range, a projection, and a filter (Spark's, also pruning where deltadv can)
    df = dspark.read(
        spark,
        path,
        change_data_feed=True,
        starting_version=2,
        ending_version=4,
        columns=["s", "id"],
        filter="id < 120",
    )
    got = _spark_rows(df)
    assert _versions(got[1]) == {2, 3}  # v4's MERGE touched ids 250..319 only
    assert got == _cdf(
        path, starting_version=2, ending_version=4, columns=["s", "id"], predicate="id < 120"
    )

    stamps = {row[-2]: row[-1] for row in want[1]}
    df = dspark.read(
        spark,
        path,
        change_data_feed=True,
        starting_timestamp=_as_datetime(stamps[3]),
        ending_timestamp=_as_text(stamps[4]),
    )
    got = _spark_rows(df)
    assert _versions(got[1]) == {3, 4}
    assert got == _cdf(path, starting_version=3, ending_version=4)

    dspark.register(spark)
    df = (
        spark.read.format("deltadv")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .option("endingVersion", 3)
        .load(path)
    )
    assert _spark_rows(df) == _cdf(path, starting_version=0, ending_version=3)


# ---------------------------------------------------------------------- 5. errors


def test_errors_leave_the_table_unchanged(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    root = tmp_path / "t"
    path = str(root)
    small_table(tmp_path)  # v0, written by deltadv without the feed

    def state() -> tuple[int, set[str], set[str]]:
        log = {p.name for p in (root / "_delta_log").iterdir()}
        return deltadv.DeltaTable(path).version(), table_files(root), log

    def spark_refuses(code: str, **options: Any) -> None:
        with pytest.raises(Exception, match=code):
            _change_feed_df(spark, path, **options).collect()

    def refused(kind: type[Exception], message: str | None, **kwargs: Any) -> None:
        before = state()
        with pytest.raises(kind, match=message):
            deltadv.DeltaTable(path).load_cdf(**kwargs).read_all()
        assert state() == before, kwargs

    refused(deltadv.DeltaProtocolError, "delta.enableChangeDataFeed")
    spark_refuses("DELTA_MISSING_CHANGE_DATA", startingVersion=0)

    _set_feed(spark, path, True)
    refused(deltadv.DeltaProtocolError, "delta.enableChangeDataFeed", starting_version=0)
    assert _cdf(path, starting_version=1) == (["id", "s", "n", *CDF_NAMES], [])

    deltadv.DeltaTable(path).delete("id = 3")  # v2
    _set_feed(spark, path, False)
    deltadv.DeltaTable(path).delete("id = 4")  # v4, no feed
    _, rows = _cdf(path, starting_version=1, ending_version=2)
    assert _no_timestamps(rows) == [(3, "v3", 3, "delete", 2)]

    # the feed turned off inside the range (v3 turns it off)
    for start, end in [(1, 3), (1, None), (3, 4), (4, 4)]:
        refused(
            deltadv.DeltaProtocolError,
            "delta.enableChangeDataFeed",
            starting_version=start,
            ending_version=end,
        )
    spark_refuses("DELTA_MISSING_CHANGE_DATA", startingVersion=1)

    # versions that are not there
    assert issubclass(deltadv.VersionNotFoundError, ValueError)
    refused(deltadv.VersionNotFoundError, None, starting_version=5)
    spark_refuses("DELTA_CDC_START_VERSION_AFTER_LATEST", startingVersion=5)
    refused(deltadv.VersionNotFoundError, None, starting_version=2, ending_version=1)
    spark_refuses("DELTA_INVALID_CDC_RANGE", startingVersion=2, endingVersion=1)


def test_merge_commit_without_changed_rows_yields_nothing(delta_spark: Any, tmp_path: Path) -> None:
    """A MERGE whose metrics say no row was inserted, updated or deleted publishes
    nothing even where it rewrote a file (Delta Spark's CDCReader
    shouldSkipFileActionsInCommit); with a changed-row count it is read from its
    file actions. The two commits are written here as such a MERGE would write them."""
    spark = delta_spark
    root = tmp_path / "t"
    path = str(root)
    spark.range(0, 10, numPartitions=1).selectExpr("id", "concat('v', id) AS s").write.format(
        "delta"
    ).option("delta.enableChangeDataFeed", "true").save(path)
    (add,) = _log_actions(root, 0, "add")
    source = add["path"]
    for version, updated in [(1, "0"), (2, "1")]:
        copy = f"part-rewritten-{version}.snappy.parquet"
        (root / copy).write_bytes((root / source).read_bytes())
        metrics = {
            "numTargetRowsInserted": "0",
            "numTargetRowsUpdated": updated,
            "numTargetRowsDeleted": "0",
        }
        now = 1_700_000_000_000 + version
        actions = [
            {"commitInfo": {"timestamp": now, "operation": "MERGE", "operationMetrics": metrics}},
            {
                "remove": {
                    "path": source,
                    "deletionTimestamp": now,
                    "dataChange": True,
                    "extendedFileMetadata": True,
                    "partitionValues": {},
                    "size": add["size"],
                }
            },
            {"add": add | {"path": copy, "modificationTime": now}},
        ]
        log = root / "_delta_log" / f"{version:020}.json"
        log.write_text("".join(json.dumps(a) + "\n" for a in actions))
        source = copy
    for version in (1, 2):
        want = _table_changes(spark, path, startingVersion=version, endingVersion=version)
        assert _cdf(path, starting_version=version, ending_version=version) == want
    assert _table_changes(spark, path, startingVersion=1, endingVersion=1)[1] == []
    _, rows = _table_changes(spark, path, startingVersion=2, endingVersion=2)
    want = [(i, f"v{i}", kind, 2) for i in range(10) for kind in ("delete", "insert")]
    assert _no_timestamps(rows) == _sorted(want)


#: Prints ``[num_threads, [[id, _change_type, _commit_version], ...]]`` of the whole
#: feed of the table at argv[1], in the order load_cdf streams it.
_FEED_IN_ORDER = """
import json, sys
import deltadv
rows = deltadv.DeltaTable(sys.argv[1]).load_cdf().read_all().to_pylist()
feed = [[r["id"], r["_change_type"], r["_commit_version"]] for r in rows]
print(json.dumps([deltadv.num_threads(), feed]))
"""


def test_load_cdf_reads_files_at_once_in_commit_order(tmp_path: Path) -> None:
    """Many change files (24 inserted files, then a DELETE with DVs touching 6 of
    them) read at 1 and at 4 threads, each in a fresh process (DELTADV_NUM_THREADS):
    the same rows in the same order, commit by commit, and the rows a model of the
    statements gives."""
    import os
    import subprocess
    import sys

    path = str(tmp_path / "t")
    feed_on = {"delta.enableChangeDataFeed": "true"}
    for v in range(3):
        ids = pa.table({"id": pa.array(range(v * 400, (v + 1) * 400), pa.int64())})
        mode = "error" if v == 0 else "append"
        write_table(path, ids, mode=mode, configuration=feed_on, rows_per_file=50)
    deltadv.DeltaTable(path).delete("id < 100 OR id >= 1100")
    model = [[i, "insert", i // 400] for i in range(1200)]
    model += [[i, "delete", 3] for i in range(1200) if i < 100 or i >= 1100]

    def feed(threads: int) -> list[list[Any]]:
        env = {**os.environ, "DELTADV_NUM_THREADS": str(threads)}
        done = subprocess.run(
            [sys.executable, "-c", _FEED_IN_ORDER, path],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        got_threads, rows = json.loads(done.stdout)
        assert got_threads == threads
        return rows

    one, four = feed(1), feed(4)
    assert four == one
    assert [r[2] for r in one] == sorted(r[2] for r in one), "commit order"
    assert sorted(one) == sorted(model)
