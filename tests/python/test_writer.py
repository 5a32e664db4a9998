"""deltadv's Rust data-file writer (issue 11): every Delta type, partitions,
column mapping, appends, failures, and stats good enough for Delta Spark to skip
files. Oracles: Delta Spark 4.4 (reads our tables, and writes the same rows so
its stats and partition values can be compared with ours) and deltalake."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltadv
from deltadv import spark as dspark
from deltadv.write import commit_files, write_files, write_table

UTC = dt.timezone.utc


def _adds(root: Path) -> list[dict[str, Any]]:
    out = []
    for f in sorted((root / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            if line.strip() and "add" in (a := json.loads(line)):
                out.append(a["add"])
    return out


def _data_files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*.parquet") if "_delta_log" not in p.parts}


def _norm(v: Any) -> Any:
    """Comparable values: NaN as a marker, nested containers normalised."""
    if isinstance(v, float) and math.isnan(v):
        return "<NaN>"
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    if isinstance(v, bytearray):
        return bytes(v)
    return v


def _rows(table: Any, key: str = "id") -> list[dict[str, Any]]:
    t = pa.table(table)
    return [_norm(r) for r in sorted(t.to_pylist(), key=lambda r: r[key])]


def _types_table() -> pa.Table:
    """One column per Delta type deltadv writes, with nulls, NaN, infinities,
    long and non-ASCII strings."""
    n = 8
    long = "y" * 40
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "b": pa.array([1, -128, 127, None, 0, 5, 6, 7], pa.int8()),
            "sh": pa.array([1, -32768, 32767, None, 0, 5, 6, 7], pa.int16()),
            "i": pa.array([1, -(2**31), 2**31 - 1, None, 0, 5, 6, 7], pa.int32()),
            "l": pa.array([1, -(2**63), 2**63 - 1, None, 0, 5, 6, 7], pa.int64()),
            "f": pa.array([1.5, float("nan"), -2.25, None, 0.0, 3.0, 4.0, 5.0], pa.float32()),
            "d": pa.array([1.5, float("inf"), -0.0, None, 1e300, -1e-300, 2.0, 3.0]),
            "dec": pa.array(
                [decimal.Decimal(x) if x else None for x in ["1.50", "-99.99", None, "0.01"] * 2],
                pa.decimal128(10, 2),
            ),
            "big": pa.array(
                [decimal.Decimal("12345678901234567890123456789012.123456"), None] * 4,
                pa.decimal128(38, 6),
            ),
            "s": pa.array(["a", long, "z" * 37 + "é", None, "", "日本語", "é" * 40, "m"]),
            "long": pa.array(["z" * 37 + "é", long, None, "z" * 33] * 2),
            "bin": pa.array([b"\x00\x01", None, b"", b"x" * 50] * 2, pa.binary()),
            "flag": pa.array([True, False, None, True] * 2),
            "day": pa.array(
                [dt.date(2024, 1, 2), None, dt.date(1900, 1, 1), dt.date(2100, 12, 31)] * 2
            ),
            "ts": pa.array(
                [
                    dt.datetime(2024, 1, 2, 3, 4, 5, 678999, tzinfo=UTC),
                    None,
                    dt.datetime(1960, 1, 1, tzinfo=UTC),
                    dt.datetime(2024, 1, 2, 3, 4, 5, 678001, tzinfo=UTC),
                ]
                * 2,
                pa.timestamp("us", tz="UTC"),
            ),
            "ntz": pa.array(
                [
                    dt.datetime(2024, 1, 2, 3, 4, 5, 678999),
                    dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
                    None,
                    None,
                ]
                * 2,
                pa.timestamp("us"),
            ),
            "st": pa.array(
                [{"x": 1, "y": "b"}, None, {"x": None, "y": "a"}, {"x": -3, "y": None}] * 2,
                pa.struct([("x", pa.int32()), ("y", pa.string())]),
            ),
            "arr": pa.array([[1, None], None, [], [3]] * 2, pa.list_(pa.int32())),
            "m": pa.array(
                [[("k", 1)], None, [], [("a", None), ("b", 2)]] * 2,
                pa.map_(pa.string(), pa.int32()),
            ),
        }
    )


def test_every_type_read_by_delta_spark_and_deltalake_with_delta_spark_stats(
    delta_spark: Any, tmp_path: Path
) -> None:
    import deltalake

    spark = delta_spark
    ours = tmp_path / "ours"
    data = _types_table()
    write_table(str(ours), data)
    expected = _rows(data)
    assert _rows(spark.read.format("delta").load(str(ours)).toArrow()) == expected
    assert _rows(deltalake.DeltaTable(str(ours)).scan().read_all()) == expected

    # Delta Spark writes the same rows into its own table: its stats are the oracle.
    theirs = tmp_path / "theirs"
    spark.sql(
        f"CREATE TABLE delta.`{theirs}` USING delta "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true') "
        f"AS SELECT * FROM delta.`{ours}`"
    )
    (mine,), (spark_add,) = _adds(ours), _adds(theirs)
    assert json.loads(mine["stats"]) == json.loads(spark_add["stats"])
    # the string max is truncated with Delta Spark's tie-breaker
    stats = json.loads(mine["stats"])
    assert stats["maxValues"]["long"] == "z" * 32 + "\x7f"
    assert stats["minValues"]["long"] == "y" * 32


def _partitioned_table() -> pa.Table:
    odd = ["a/b c=d%e:f#g?hé", "", None, "plain", "x{y}[z]^'*\"", "a/b c=d%e:f#g?hé"]
    n = len(odd)
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "ps": pa.array(odd),
            "pi": pa.array([1, -5, None, 1, 7, 1], pa.int32()),
            "pd": pa.array([dt.date(2024, 1, 2), None, dt.date(1900, 1, 1)] * 2),
            "pts": pa.array(
                [
                    dt.datetime(2024, 1, 2, 3, 4, 5, 678999, tzinfo=UTC),
                    None,
                    dt.datetime(1960, 1, 1, tzinfo=UTC),
                ]
                * 2,
                pa.timestamp("us", tz="UTC"),
            ),
            "pntz": pa.array(
                [dt.datetime(2024, 1, 2, 3, 4, 5, 100000), None, dt.datetime(1960, 1, 1)] * 2,
                pa.timestamp("us"),
            ),
            "pb": pa.array([True, None, False] * 2),
            "pdec": pa.array(
                [decimal.Decimal("1.50"), None, decimal.Decimal("-0.01")] * 2, pa.decimal128(5, 2)
            ),
            "v": pa.array([f"v{i}" for i in range(n)]),
        }
    )


PARTS = ["ps", "pi", "pd", "pts", "pntz", "pb", "pdec"]


def test_partitions_as_delta_spark_writes_them(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    ours = tmp_path / "ours"
    data = _partitioned_table()
    write_table(str(ours), data, partition_by=PARTS)
    # '' is written as a null partition value, as Delta Spark does
    expected = _rows(
        data.set_column(1, "ps", pa.array([None if not s else s for s in data["ps"].to_pylist()]))
    )
    got = spark.read.format("delta").load(str(ours)).select(*data.column_names)
    assert _rows(got.toArrow()) == expected
    import deltalake

    assert (
        _rows(deltalake.DeltaTable(str(ours)).scan().read_all().select(data.column_names))
        == expected
    )

    theirs = tmp_path / "theirs"
    cols = ", ".join(PARTS)
    spark.sql(
        f"CREATE TABLE delta.`{theirs}` USING delta PARTITIONED BY ({cols}) "
        f"AS SELECT * FROM delta.`{ours}`"
    )

    def layout(root: Path) -> set[tuple[str, str]]:
        return {
            (a["path"].rsplit("/", 1)[0], json.dumps(a["partitionValues"], sort_keys=True))
            for a in _adds(root)
        }

    # same directories (escaped, then URI-encoded in add.path) and partition values
    assert layout(ours) == layout(theirs)
    # and the directories exist as add.path says, once decoded
    for a in _adds(ours):
        assert (ours / unquote(a["path"])).is_file()


@pytest.mark.parametrize("mapping", ["name", "id"])
def test_append_to_a_column_mapped_table_made_by_delta_spark(
    delta_spark: Any, tmp_path: Path, mapping: str
) -> None:
    spark = delta_spark
    path = tmp_path / "cm"
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, `Odd Name` STRING, s STRUCT<a: INT, b: STRING>, "
        "p STRING) USING delta PARTITIONED BY (p) "
        f"TBLPROPERTIES ('delta.columnMapping.mode' = '{mapping}', 'delta.minReaderVersion' = '2', "
        "'delta.minWriterVersion' = '5')"
    )
    spark.sql(
        f"INSERT INTO delta.`{path}` VALUES (1, 'spark', named_struct('a', 1, 'b', 'x'), 'p1')"
    )
    data = pa.table(
        {
            "id": pa.array([2, 3], pa.int64()),
            "odd name": ["deltadv", None],  # names match case-insensitively
            "s": pa.array(
                [{"a": 2, "b": "y"}, None], pa.struct([("a", pa.int32()), ("b", pa.string())])
            ),
            "p": ["p1", "p2"],
        }
    )
    table = write_table(str(path), data, mode="append")
    assert table.version() == 2
    rows = spark.read.format("delta").load(str(path)).orderBy("id").collect()
    assert [(r["id"], r["Odd Name"], r["p"]) for r in rows] == [
        (1, "spark", "p1"),
        (2, "deltadv", "p1"),
        (3, None, "p2"),
    ]
    assert rows[1]["s"]["b"] == "y" and rows[2]["s"] is None
    # deltalake, a second reader, maps the physical names back too
    import deltalake

    theirs = pa.table(deltalake.DeltaTable(str(path)).scan().read_all()).to_pylist()
    assert sorted((r["id"], r["Odd Name"], r["p"]) for r in theirs) == [
        (1, "spark", "p1"),
        (2, "deltadv", "p1"),
        (3, None, "p2"),
    ]
    # our files use the physical names (and field ids), and so do the stats
    log0 = (path / "_delta_log" / f"{0:020}.json").read_text().splitlines()
    meta = next(json.loads(x)["metaData"] for x in log0 if "metaData" in json.loads(x))
    fields = {f["name"]: f for f in json.loads(meta["schemaString"])["fields"]}
    physical = {n: f["metadata"]["delta.columnMapping.physicalName"] for n, f in fields.items()}
    new = _adds(path)[1:]
    assert len(new) == 2
    for a in new:
        file = pq.read_schema(path / unquote(a["path"]))
        assert set(file.names) == {physical["id"], physical["Odd Name"], physical["s"]}
        assert (
            file.field(physical["id"]).metadata[b"PARQUET:field_id"]
            == str(fields["id"]["metadata"]["delta.columnMapping.id"]).encode()
        )
        stats = json.loads(a["stats"])
        assert set(stats["nullCount"]) == {physical["id"], physical["Odd Name"], physical["s"]}
        assert set(a["partitionValues"]) == {physical["p"]}


def test_two_appends_counted_by_delta_spark(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "t")
    data = pa.table({"id": pa.array(range(100), pa.int64()), "g": [i % 3 for i in range(100)]})
    write_table(path, data, partition_by=["g"])
    write_table(path, data.slice(0, 40), mode="append")
    t = write_table(path, data.slice(40, 25), mode="append", partition_by=["g"])
    assert t.version() == 2
    assert spark.read.format("delta").load(path).count() == 165
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()
    assert [h["operation"] for h in history] == ["CREATE TABLE AS SELECT", "WRITE", "WRITE"]
    assert history[2]["operationParameters"]["mode"] == "Append"
    assert history[2]["isBlindAppend"] is True
    # Spark's writer appends too (mode="append" through the executors)
    df = spark.range(1000, 1010).selectExpr("id", "cast(id % 3 AS bigint) AS g")
    dspark.write_table(df, path, mode="append")
    assert spark.read.format("delta").load(path).count() == 175
    with pytest.raises(deltadv.TableAlreadyExistsError):
        dspark.write_table(df, path)


def _files_read(spark: Any, df: Any) -> int:
    """Files Spark's scan read for ``df`` (FileSourceScanExec's numFiles metric)."""
    df.collect()
    plan = df._jdf.queryExecution().executedPlan()
    leaves = plan.collectLeaves()
    counts = []
    for i in range(leaves.size()):
        metrics = leaves.apply(i).metrics()
        if metrics.contains("numFiles"):
            counts.append(metrics.apply("numFiles").value())
    assert counts, "no file scan in the plan"
    return sum(counts)


def test_delta_spark_skips_files_thanks_to_our_stats(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "t")
    data = pa.table(
        {
            "id": pa.array(range(1000), pa.int64()),
            "name": [f"name-{i:04d}" for i in range(1000)],
        }
    )
    write_table(path, data, rows_per_file=100)
    assert len(_adds(Path(path))) == 10
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        df = spark.read.format("delta").load(path)
        assert _files_read(spark, df) == 10
        hit = df.filter("id = 555")
        assert _files_read(spark, hit) == 1
        assert hit.count() == 1
        assert _files_read(spark, df.filter("name >= 'name-0990'")) == 1
        assert _files_read(spark, df.filter("id > 5000")) == 0
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")


def test_schema_mismatches_are_refused_before_writing(tmp_path: Path) -> None:
    root = tmp_path / "t"
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "x": pa.array([1.0, 2.0])})
    write_table(
        str(root),
        data.cast(pa.schema([pa.field("id", pa.int64(), False), pa.field("x", pa.float64())])),
    )
    before = _data_files(root)
    cases = {
        "extra": (data.append_column("y", pa.array([1, 2])), "'y'"),
        "type": (pa.table({"id": pa.array([1, 2], pa.int64()), "x": ["a", "b"]}), "'x'"),
        # Delta Spark's message (a ConstraintViolationError, a ValueError)
        "nulls": (
            pa.table({"id": pa.array([1, None], pa.int64())}),
            "NOT NULL constraint violated for column: id",
        ),
    }
    for name, (bad, column) in cases.items():
        with pytest.raises(ValueError, match=column):
            write_table(str(root), bad, mode="append")
        assert _data_files(root) == before, name
    with pytest.raises(ValueError, match="partition"):
        write_table(str(root), data, mode="append", partition_by=["x"])
    with pytest.raises(deltadv.TableNotFoundError):
        write_table(str(tmp_path / "none"), data, mode="append")
    # a narrower integer and a missing nullable column are fine (as in Delta Spark)
    t = write_table(str(root), pa.table({"ID": pa.array([3], pa.int32())}), mode="append")
    assert sorted(t.to_pyarrow_table()["id"].to_pylist()) == [1, 2, 3]


def test_a_failure_mid_stream_leaves_no_file(tmp_path: Path) -> None:
    root = tmp_path / "t"
    schema = pa.schema([pa.field("id", pa.int64())])
    write_table(str(root), pa.table({"id": [0]}, schema=schema))
    before = _data_files(root)

    def batches() -> Any:
        for i in range(5):
            yield pa.record_batch([pa.array(range(i * 10, i * 10 + 10), pa.int64())], schema=schema)
        raise RuntimeError("the source broke")

    reader = pa.RecordBatchReader.from_batches(schema, batches())
    with pytest.raises(Exception, match="the source broke"):
        write_table(str(root), reader, mode="append", rows_per_file=10)
    assert _data_files(root) == before
    assert deltadv.DeltaTable(str(root)).version() == 0


def test_commit_files_appends_files_written_elsewhere(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("g", pa.string())])
    parts = [
        write_files(
            root,
            pa.table({"id": [i, i + 1], "g": ["a", "b"]}, schema=schema),
            schema=schema,
            partition_by=["g"],
        )
        for i in (0, 10)
    ]
    version = commit_files(root, parts[0] + parts[1], schema=schema, partition_by=["g"])
    assert version == 0
    more = write_files(
        root,
        iter([pa.record_batch([pa.array([20]), pa.array(["c"])], schema=schema)]),
        mode="append",
        schema=schema,
    )
    assert commit_files(root, more, mode="append") == 1
    t = deltadv.DeltaTable(root)
    assert sorted(t.to_pyarrow_table()["id"].to_pylist()) == [0, 1, 10, 11, 20]


def test_append_to_a_row_tracking_ict_table_made_by_delta_spark(
    delta_spark: Any, tmp_path: Path
) -> None:
    spark = delta_spark
    path = str(tmp_path / "rt")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, s STRING) USING delta TBLPROPERTIES ("
        "'delta.enableRowTracking' = 'true', 'delta.enableInCommitTimestamps' = 'true', "
        "'delta.enableDeletionVectors' = 'true')"
    )
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (0, 'a'), (1, 'b')")
    write_table(
        path, pa.table({"id": pa.array([2, 3, 4], pa.int64()), "s": ["c", "d", "e"]}), mode="append"
    )
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (5, 'f')")

    def row_ids() -> dict[int, int]:
        df = spark.read.format("delta").load(path).select("id", "_metadata.row_id")
        return {r["id"]: r["row_id"] for r in df.collect()}

    ids = row_ids()
    assert sorted(ids) == [0, 1, 2, 3, 4, 5]
    assert sorted(ids.values()) == list(range(6)), ids  # fresh, distinct ids, Spark's continue
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()
    assert [h["operation"] for h in history][-2:] == ["WRITE", "WRITE"]
    stamps = [h["timestamp"] for h in history]
    assert stamps == sorted(stamps)
    # deltalake, a second reader, reads the table with our commit in it
    import deltalake

    theirs = pa.table(deltalake.DeltaTable(path).scan().read_all()).to_pylist()
    assert sorted((r["id"], r["s"]) for r in theirs) == [
        (0, "a"),
        (1, "b"),
        (2, "c"),
        (3, "d"),
        (4, "e"),
        (5, "f"),
    ]
