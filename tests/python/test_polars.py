"""deltadv.polars (issue 28, points 7 and 8): ``scan_delta`` through polars' IO
plugin gives the rows ``DeltaTable.to_pyarrow_table`` gives, for random
projections, predicates (pushed down or not) and ``n_rows``, on the golden
tables, on tables Delta Spark wrote (partitioned, column-mapped, with DVs) and
on tables deltalake wrote; it agrees with ``pl.scan_delta`` where that reads
the table (no DVs), time travel included."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltadv
from deltadv import DeltaTable
from deltadv.write import write_table
from tests.python.test_spark_read import _key, _root

pl = pytest.importorskip("polars")
from polars.testing import assert_frame_equal  # noqa: E402

import deltadv.polars as dpl  # noqa: E402

#: Types a random predicate compares (and fields of structs; lists and maps are only projected).
COMPARABLE = (
    pl.Int8,
    pl.Int16,
    pl.Int32,
    pl.Int64,
    pl.Float32,
    pl.Float64,
    pl.String,
    pl.Binary,
    pl.Date,
    pl.Boolean,
)


def _comparable(dtype: Any) -> bool:
    if isinstance(dtype, pl.Struct):  # a struct's fields are compared
        return any(_comparable(f.dtype) for f in dtype.fields)
    return dtype in COMPARABLE or isinstance(dtype, pl.Datetime | pl.Decimal)


def _leaf(rng: random.Random, frame: Any, name: str) -> Any:
    """A random predicate on column ``name`` (or a field of it) over values the
    column holds; some map to deltadv's tree, some (arithmetic, string
    functions) do not."""
    col = pl.col(name)
    dtype = frame.schema[name]
    series = frame[name]
    if isinstance(dtype, pl.Struct):
        field = rng.choice([f for f in dtype.fields if _comparable(f.dtype)])
        col, dtype = col.struct.field(field.name), field.dtype
        series = series.struct.field(field.name)
    values = [v for v in series.to_list() if v is not None]
    if not values:
        return col.is_null() if rng.random() < 0.5 else col.is_not_null()
    v = rng.choice(values)
    if dtype == pl.Boolean:
        return rng.choice([col == v, col != v, col, ~col, col.is_null()])
    kind = rng.randrange(12)
    if kind == 0:
        return col.is_in(rng.sample(values, min(3, len(values))))
    if kind == 1:
        return col.is_null() if rng.random() < 0.5 else col.is_not_null()
    if kind == 2:
        lo, hi = sorted([v, rng.choice(values)])
        return col.is_between(
            pl.lit(lo), pl.lit(hi), closed=rng.choice(["both", "left", "right", "none"])
        )
    if kind == 3:  # does not map: polars evaluates it
        if dtype.is_numeric():
            return col * 2 > v
        if dtype == pl.String:
            return col.str.starts_with(v[:1]) | (col.str.len_chars() > 3)
        return col.cast(pl.String).str.len_bytes() > 2
    if kind == 4:
        return pl.lit(v) < col  # the literal on the left
    if kind == 5:
        return col.eq_missing(pl.lit(v)) if rng.random() < 0.5 else col.ne_missing(pl.lit(v))
    op = rng.choice(["==", "!=", "<", "<=", ">", ">="])
    return {
        "==": col == v,
        "!=": col != v,
        "<": col < v,
        "<=": col <= v,
        ">": col > v,
        ">=": col >= v,
    }[op]


def _predicate(rng: random.Random, frame: Any, names: list[str], depth: int = 0) -> Any:
    r = rng.random()
    if depth < 2 and r < 0.25:
        left = _predicate(rng, frame, names, depth + 1)
        return left & _predicate(rng, frame, names, depth + 1)
    if depth < 2 and r < 0.4:
        left = _predicate(rng, frame, names, depth + 1)
        return left | _predicate(rng, frame, names, depth + 1)
    if depth < 2 and r < 0.5:
        return ~_predicate(rng, frame, names, depth + 1)
    return _leaf(rng, frame, rng.choice(names))


def check_random_scans(table: DeltaTable, rng: random.Random, cases: int) -> int:
    """``cases`` random (projection, predicate, n_rows) scans of ``table`` through
    ``scan_delta`` equal the same query run by polars over
    ``to_pyarrow_table``'s rows (in order: both scans keep file and row order);
    a predicate that maps whole, given to deltadv alone, keeps the rows polars
    keeps. Returns how many predicates were pushed down (in part or whole)."""
    full = dpl.polars_schema(table.schema())
    want_all = pl.from_arrow(table.to_pyarrow_table())
    assert isinstance(want_all, pl.DataFrame)
    assert want_all.schema == full
    lazy = dpl.scan_delta(table)
    assert lazy.collect_schema() == full
    names = list(full.names())
    comparable = [n for n in names if _comparable(full[n])]
    pushed = 0
    for _ in range(cases):
        columns = rng.sample(names, rng.randint(1, len(names)))
        query, want = lazy, want_all
        if comparable and rng.random() < 0.8:
            predicate = _predicate(rng, want_all, comparable)
            pushed += dpl.to_filter(predicate, full) is not None
            if (exact := dpl.to_filter(predicate, full, exact=True)) is not None:
                alone = pl.from_arrow(table.to_pyarrow_table(filter=exact))
                assert_frame_equal(alone, want_all.filter(predicate))
            query, want = query.filter(predicate), want.filter(predicate)
        query, want = query.select(columns), want.select(columns)
        if rng.random() < 0.3:
            n = rng.randint(0, 5)
            query, want = query.head(n), want.head(n)
        got = query.collect()
        assert_frame_equal(got, want)
    return pushed


# --- golden tables ---------------------------------------------------------------------


def test_golden_tables(golden: Path, tmp_path: Path) -> None:
    """Every golden table: its row count and values as its source states them,
    and random scans equal to_pyarrow_table's rows."""
    expected = json.loads((golden / "expected.json").read_text())
    rng = random.Random(28)
    tables = pushed = 0
    for name, exp in expected.items():
        if name.startswith("_"):
            continue
        root = _root(golden, name, tmp_path)
        lazy = dpl.scan_delta(root)
        assert lazy.select(pl.len()).collect().item() == exp["rows"], name
        if "values" in exp:
            got = lazy.select(exp["columns"]).collect().rows()
            assert sorted(map(_key, got)) == sorted(map(_key, exp["values"])), name
        pushed += check_random_scans(DeltaTable(str(root)), rng, 4)
        tables += 1
    assert tables >= 16
    assert pushed > 10  # the pushdown path was taken, not only polars' filter


def test_golden_time_travel_by_version(golden: Path) -> None:
    name = "delta-kernel-rs/cdf-table-with-dv"
    exp = json.loads((golden / "expected.json").read_text())[name]
    per_version = exp["per_version_rows_helper"]
    assert len(per_version) > 3
    for v, rows in per_version.items():
        assert dpl.scan_delta(golden / name, version=int(v)).collect().height == rows, v
        assert dpl.read_delta(golden / name, version=int(v)).height == rows, v


def test_golden_dv_table_head_and_partition_pushdown(golden: Path) -> None:
    """On a partitioned DV table: ``head`` stops early and a partition predicate
    reads fewer files than a full scan (the pushdown reaches the scan)."""
    root = golden / "delta-kernel-rs/golden_data/dv-partitioned-with-checkpoint/delta"
    table = DeltaTable(str(root))
    assert table.get_add_actions()["dv_storage_type"].null_count < len(table.files())
    want = pl.from_arrow(table.to_pyarrow_table())
    assert isinstance(want, pl.DataFrame)
    assert_frame_equal(dpl.scan_delta(table).head(3).collect(), want.head(3))

    def gets(query: Any) -> int:
        fresh = DeltaTable(str(root))
        before = fresh.request_counts()["gets"]
        query(dpl.scan_delta(fresh)).collect()
        return fresh.request_counts()["gets"] - before

    part = want["part"].drop_nulls()[0]
    everything = gets(lambda lf: lf)
    one_part = gets(lambda lf: lf.filter(pl.col("part") == part))
    assert one_part < everything, (one_part, everything)
    assert gets(lambda lf: lf.head(1)) < everything


# --- deltalake-written tables, and pl.scan_delta as a peer ------------------------------


def _typed_rows(n: int, seed: int) -> pa.Table:
    rng = random.Random(seed)
    utc = dt.timezone.utc

    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.1 else v

    ints = [maybe(rng.randint(-50, 50)) for _ in range(n)]
    return pa.table(
        {
            "id": pa.array(range(seed * 1000, seed * 1000 + n), pa.int64()),
            "p": pa.array([rng.choice(["a", "b", "c"]) for _ in range(n)]),
            "i8": pa.array([None if v is None else v // 2 for v in ints], pa.int8()),
            "i32": pa.array(ints, pa.int32()),
            "f": pa.array(
                [maybe(rng.choice([rng.random() * 10, float("nan"), -0.0])) for _ in range(n)]
            ),
            "s": pa.array([maybe(rng.choice(["", "x", "xyz", "ab", "é"])) for _ in range(n)]),
            "d": pa.array(
                [
                    maybe(dt.date(2024, 1, 1) + dt.timedelta(days=rng.randint(0, 9)))
                    for _ in range(n)
                ]
            ),
            "t": pa.array(
                [
                    maybe(
                        dt.datetime(2024, 1, 1, tzinfo=utc) + dt.timedelta(hours=rng.randint(0, 99))
                    )
                    for _ in range(n)
                ],
                pa.timestamp("us", "UTC"),
            ),
            "ntz": pa.array(
                [
                    maybe(dt.datetime(2024, 1, 1) + dt.timedelta(seconds=rng.randint(0, 9)))
                    for _ in range(n)
                ],
                pa.timestamp("us"),
            ),
            "dec": pa.array(
                [maybe(decimal.Decimal(rng.randint(-999, 999)) / 100) for _ in range(n)],
                pa.decimal128(10, 2),
            ),
            "b": pa.array([maybe(bytes([rng.randrange(3)] * rng.randint(0, 2))) for _ in range(n)]),
            "bo": pa.array([maybe(rng.random() < 0.5) for _ in range(n)]),
            "st": pa.array([{"x": i, "y": str(i)} for i in range(n)]),
            "l": pa.array([[i, i + 1] for i in range(n)]),
        }
    )


@pytest.fixture(scope="module")
def deltalake_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[int]]:
    """A partitioned table deltalake wrote in three commits; returns its path and
    each commit's time (ms)."""
    deltalake = pytest.importorskip("deltalake")
    path = str(tmp_path_factory.mktemp("polars") / "deltalake")
    for v in range(3):
        mode = "overwrite" if v == 1 else "append"
        deltalake.write_deltalake(path, _typed_rows(60, v), mode=mode, partition_by=["p"])
        time.sleep(0.3)  # commit times well apart (see test_time_travel_by_datetime)
    history = DeltaTable(path).history()
    # the commit time time travel goes by (no in-commit timestamps here: the
    # commit file's time, as Delta Spark's), not commitInfo's timestamp
    return path, [h["commitTimestamp"] for h in sorted(history, key=lambda h: h["version"])]


def test_deltalake_table_random_scans(deltalake_table: tuple[str, list[int]]) -> None:
    path, _ = deltalake_table
    pushed = 0
    for v in (0, 2):
        pushed += check_random_scans(DeltaTable(path, version=v), random.Random(v), 25)
    assert pushed > 10


def _sorted(frame: Any) -> Any:
    return frame.sort("id")


def test_same_as_pl_scan_delta(deltalake_table: tuple[str, list[int]]) -> None:
    """Peer check on a table without DVs: the same frames as polars' own reader,
    at the latest version and by version number."""
    path, _ = deltalake_table
    queries = [
        lambda lf: lf,
        lambda lf: lf.filter(pl.col("p") == "b").select("id", "s", "t"),
        lambda lf: lf.filter((pl.col("i32") > 3) | pl.col("s").str.contains("y")),
        lambda lf: lf.filter(pl.col("d").is_in([dt.date(2024, 1, 2), dt.date(2024, 1, 5)])),
        lambda lf: lf.filter(~pl.col("dec").is_between(-1, 1)).select("id", "dec"),
        lambda lf: lf.filter(pl.col("f") > 5.0).select("id", "f"),
        lambda lf: lf.select(pl.len()),
    ]
    for version in (None, 0):
        for query in queries:
            ours = query(dpl.scan_delta(path, version=version)).collect()
            theirs = query(pl.scan_delta(path, version=version)).collect()
            if "id" in ours.columns:
                ours, theirs = _sorted(ours), _sorted(theirs)
            assert_frame_equal(ours, theirs)


def test_time_travel_by_datetime(deltalake_table: tuple[str, list[int]]) -> None:
    """``version`` as a datetime (aware or naive = UTC) or ISO text is the latest
    commit at or before it, as pl.scan_delta reads it."""
    path, stamps = deltalake_table
    for v, ms in enumerate(stamps):
        when = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)
        # `when` is the commit time deltadv goes by (the commit file's time);
        # pl.scan_delta is checked 100 ms later, as deltalake may go by
        # commitInfo's timestamp, a few ms before it
        later = when + dt.timedelta(milliseconds=100)
        want = _sorted(pl.from_arrow(DeltaTable(path, version=v).to_pyarrow_table()))
        for point in (when, when.replace(tzinfo=None), when.isoformat(), later):
            assert_frame_equal(_sorted(dpl.scan_delta(path, version=point).collect()), want)
        assert_frame_equal(_sorted(pl.scan_delta(path, version=later).collect()), want)
        assert_frame_equal(
            _sorted(dpl.read_delta(path, version=when, columns=["id"])), want.select("id")
        )


def test_what_is_pushed_down(
    deltalake_table: tuple[str, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The predicates polars hands the source (literals typed by polars) map to
    deltadv's tree, for every literal type; the ones that do not map are left
    to polars. Checked on what the source really receives."""
    path, _ = deltalake_table
    # (exact?, tree) of each translation the source asks for: first the whole
    # predicate (exact), then, where it does not map whole, the part that does
    seen: list[tuple[bool, Any]] = []
    to_filter = dpl.to_filter

    def recording(predicate: Any, schema: Any, *, exact: bool = False) -> Any:
        seen.append((exact, tree := to_filter(predicate, schema, exact=exact)))
        return tree

    monkeypatch.setattr(dpl, "to_filter", recording)
    utc = dt.timezone.utc
    mapped = {
        "int": pl.col("i32") >= 3,
        "int8": pl.col("i8") < -3,
        "float": pl.col("f") > 2.5,
        "string": pl.col("s") == "xyz",
        "date": pl.col("d").is_in([dt.date(2024, 1, 3)]),
        "timestamp": pl.col("t") < dt.datetime(2024, 1, 2, 5, tzinfo=utc),
        "timestamp_ntz": pl.col("ntz") != dt.datetime(2024, 1, 1, 0, 0, 3),
        "decimal": pl.col("dec") <= decimal.Decimal("0.5"),
        "binary": pl.col("b") == b"\x01",
        "bool": pl.col("bo"),
        "null": pl.col("s").is_null() | pl.col("i32").is_not_null(),
        "not": ~(pl.col("p") == "a"),
        "between": pl.col("id").is_between(10, 40, closed="left"),
        "eq_missing": pl.col("i32").eq_missing(pl.lit(None, pl.Int32)),
        "int as double": pl.col("i32") > 2.5,
        "struct field": pl.col("st").struct.field("x") >= 30,
    }
    not_mapped = {
        "arith": pl.col("i32") * 2 > 3,
        "string fn": pl.col("s").str.contains("y"),
        "nan": pl.col("f") == float("nan"),
        "is_in null": pl.col("i32").is_in([1, None]),
        "two columns": pl.col("i32") > pl.col("i8"),
    }
    # maps, but deltadv's strict binding refuses a fractional literal for an int column
    refused = {"int as double"}
    table = DeltaTable(path)
    want_all = pl.from_arrow(table.to_pyarrow_table())
    for cases, expect_tree in ((mapped, True), (not_mapped, False)):
        for kind, predicate in cases.items():
            seen.clear()
            got = dpl.scan_delta(path).filter(predicate).collect()
            assert_frame_equal(got, want_all.filter(predicate))
            if kind in refused:  # then the part that maps, refused too: polars filters
                assert seen[0][1] is not None and seen == [(True, seen[0][1]), (False, seen[0][1])]
            elif expect_tree:  # the scan's alone
                assert len(seen) == 1 and seen[0][0] and seen[0][1] is not None, (kind, seen)
            else:
                assert seen == [(True, None), (False, None)], (kind, seen)
    # of an AND, the part that maps is pushed down, also inside an OR; not under a NOT
    p_is_c = {"cmp": {"op": "=", "left": {"column": ["p"]}, "right": {"literal": {"string": "c"}}}}
    big = {"cmp": {"op": ">", "left": {"column": ["id"]}, "right": {"literal": {"number": "40"}}}}
    partial = (pl.col("p") == "c") & (pl.col("i32") * 2 > 3)
    for predicate, tree in (
        (partial, p_is_c),
        (partial | (pl.col("id") > 40), {"or": [p_is_c, big]}),
        (~partial, None),
        (partial | pl.col("s").str.contains("y"), None),
    ):
        seen.clear()
        got = dpl.scan_delta(path).filter(predicate).collect()
        assert_frame_equal(got, want_all.filter(predicate))
        assert seen == [(True, None), (False, tree)], predicate


def test_a_predicate_that_maps_whole_is_the_scans_alone(
    deltalake_table: tuple[str, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A predicate that maps whole is applied by the scan only, n_rows is the
    scan's limit; one that does not map whole (or that the scan refuses) is
    applied by polars too, on every row the scan gives."""
    path, _ = deltalake_table
    want_all = pl.from_arrow(DeltaTable(path).to_pyarrow_table())
    assert isinstance(want_all, pl.DataFrame)
    calls: list[tuple[Any, bool, Any]] = []  # (columns, sorted; with a tree?; limit)
    scan = DeltaTable.scan
    refuse = False

    def recording(self: DeltaTable, columns: Any = None, filter: Any = None, **kw: Any) -> Any:
        calls.append((sorted(columns), filter is not None, kw.get("limit")))
        if refuse and filter is not None:
            raise deltadv.UnsupportedPredicateError("refused for the test")
        return scan(self, columns, filter, **kw)

    monkeypatch.setattr(DeltaTable, "scan", recording)
    whole = (pl.col("i32") >= 3) & ~pl.col("s").is_null()
    partial = (pl.col("i32") >= 3) & (pl.col("i8") * 2 > -7)
    read = ["i32", "id", "s"]
    for predicate, want_calls in (
        (whole, [(read, True, None)]),
        (partial, [(["i32", "i8", "id"], True, None)]),
    ):
        calls.clear()
        got = dpl.scan_delta(path).filter(predicate).select("id").collect()
        assert_frame_equal(got, want_all.filter(predicate).select("id"))
        assert calls == want_calls, (predicate, calls)
    # n_rows with a predicate that maps whole: the scan's limit
    table = DeltaTable(path)
    schema = dpl.polars_schema(table.schema())
    calls.clear()
    frames = list(dpl._batches(table, schema.names(), schema, read, whole, 2, None))
    assert_frame_equal(pl.concat(frames), want_all.filter(whole).select(read).head(2))
    assert calls == [(read, True, 2)]
    # the scan refuses the tree: polars filters the whole table's rows
    refuse = True
    calls.clear()
    got = dpl.scan_delta(path).filter(whole).select("id").collect()
    assert_frame_equal(got, want_all.filter(whole).select("id"))
    assert calls == [(read, True, None), (read, True, None), (read, False, None)]


def test_to_polars_read_delta_and_batch_size(deltalake_table: tuple[str, list[int]]) -> None:
    path, _ = deltalake_table
    table = DeltaTable(path)
    want = pl.from_arrow(table.to_pyarrow_table(["id", "s"], "i32 > 0"))
    assert_frame_equal(table.to_polars(["id", "s"], "i32 > 0"), want)
    assert_frame_equal(dpl.read_delta(path, columns=["s", "id"]), table.to_polars(["s", "id"]))
    # batch_size is honoured as an upper bound (polars hands it to the source)
    frames = list(
        dpl._batches(
            table, table.schema().names, dpl.polars_schema(table.schema()), ["id"], None, None, 7
        )
    )
    assert frames and max(f.height for f in frames) <= 7
    assert sum(f.height for f in frames) == table.count()
    with pytest.raises(ValueError, match="open DeltaTable"):
        dpl.scan_delta(table, version=0)
    with pytest.raises(TypeError, match=r"version must be int \| str \| datetime \| None"):
        dpl.scan_delta(path, version=True)
    with pytest.raises(TypeError, match=r"source must be str \| Path, not int"):
        dpl.scan_delta(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="columns must be list"):
        dpl.read_delta(path, columns="id")  # type: ignore[arg-type]


# --- tables written by Delta Spark ------------------------------------------------------


@pytest.fixture(scope="module")
def spark_tables(delta_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The Delta Spark tables, made in one go: a partitioned table and a
    column-mapped one (a renamed column), both with DVs from DELETEs; with the
    ids Delta Spark reads back from each."""
    spark = delta_spark
    base = tmp_path_factory.mktemp("polars_spark")
    out: dict[str, Any] = {}
    select = (
        "id",
        "cast(id % 4 AS string) AS part",
        "cast(id % 7 AS int) AS small",
        "CASE WHEN id % 9 = 0 THEN NULL ELSE id / 8 END AS x",
        "concat('s', id % 13) AS s",
        "date_add(DATE'2024-01-01', cast(id % 30 AS int)) AS d",
        "timestamp_seconds(1704067200 + id * 3600) AS ts",
        "cast(timestamp_seconds(1704067200 + id) AS timestamp_ntz) AS ntz",
        "cast(id / 3 AS decimal(12, 3)) AS dec",
        "id % 2 = 0 AS flag",
        "named_struct('a', id, 'b', concat('v', id)) AS nested",
    )
    partitioned = str(base / "partitioned")
    (
        spark.range(0, 400, numPartitions=2)
        .selectExpr(*select)
        .write.format("delta")
        .partitionBy("part")
        .option("delta.enableDeletionVectors", "true")
        .save(partitioned)
    )
    spark.sql(f"DELETE FROM delta.`{partitioned}` WHERE id % 5 = 0 OR s = 's3'")
    mapped = str(base / "mapped")
    (
        spark.range(0, 300, numPartitions=2)
        .selectExpr(*select)
        .write.format("delta")
        .option("delta.enableDeletionVectors", "true")
        .option("delta.columnMapping.mode", "name")
        .save(mapped)
    )
    spark.sql(f"ALTER TABLE delta.`{mapped}` RENAME COLUMN small TO `small renamed`")
    spark.sql(f"DELETE FROM delta.`{mapped}` WHERE id % 6 = 1")
    for name, path in (("partitioned", partitioned), ("mapped", mapped)):
        df = spark.read.format("delta").load(path)
        out[name] = {
            "path": path,
            "ids": sorted(r.id for r in df.select("id").collect()),
            "filtered": sorted(
                r.id for r in df.filter("x > 10 AND d < DATE'2024-01-20'").collect()
            ),
        }
    return out


@pytest.mark.parametrize("name", ["partitioned", "mapped"])
def test_delta_spark_tables(spark_tables: dict[str, Any], name: str) -> None:
    info = spark_tables[name]
    table = DeltaTable(info["path"])
    assert table.get_add_actions()["dv_storage_type"].null_count < len(table.files())  # DVs
    lazy = dpl.scan_delta(info["path"])
    if name == "mapped":
        assert "small renamed" in lazy.collect_schema()
    assert sorted(lazy.select("id").collect()["id"].to_list()) == info["ids"]
    filtered = lazy.filter((pl.col("x") > 10) & (pl.col("d") < dt.date(2024, 1, 20)))
    assert sorted(filtered.collect()["id"].to_list()) == info["filtered"]
    assert check_random_scans(table, random.Random(name), 30) > 5


# --- polars is optional -----------------------------------------------------------------


def test_clear_error_without_polars(tmp_path: Path) -> None:
    """Without polars, ``import deltadv.polars`` and ``DeltaTable.to_polars`` say
    which extra to install."""
    path = str(tmp_path / "t")
    write_table(path, pa.table({"a": [1]}))
    code = (
        "import sys\n"
        "sys.modules['polars'] = None\n"
        "import deltadv\n"
        "try:\n"
        "    import deltadv.polars\n"
        "except ImportError as e:\n"
        "    print('module:', e)\n"
        "try:\n"
        f"    deltadv.DeltaTable({path!r}).to_polars()\n"
        "except ImportError as e:\n"
        "    print('method:', e)\n"
    )
    package = str(Path(deltadv.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": package}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout
    hint = "pip install 'deltadv[polars]'"
    lines = out.splitlines()
    assert len(lines) == 2, out
    assert lines[0].startswith("module:") and hint in lines[0]
    assert lines[1].startswith("method:") and hint in lines[1]
