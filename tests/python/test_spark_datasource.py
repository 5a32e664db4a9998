"""spark.read.format("deltadv") (PySpark's Python data source API) against Delta Spark:
tables with DVs written and DELETEd by Delta Spark 4.4 read row for row as Delta
Spark reads them, with and without pushed filters and with time travel; plus
pure-Python checks of the Spark filter -> predicate string conversion."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

import deltadv
from deltadv.datasource import (
    PUSHDOWN_CONF,
    DeltaDVDataSource,
    DeltaDVPlainReader,
    DeltaDVReader,
    filters_to_predicate,
    register_data_source,
    to_predicate,
)

COLS = ["id", "part", "x", "s", "d", "ts", "amount", "st"]
# Delta Spark's state reconstruction defaults to 50 shuffle tasks per snapshot; a
# few are plenty for these small tables and keep this module quick on 2 cores.
SESSION_CONFS = {PUSHDOWN_CONF: None, "spark.databricks.delta.snapshotPartitions": "2"}


def _rows(df: Any, cols: list[str] = COLS) -> list[tuple[Any, ...]]:
    """The rows of the (top-level) columns `cols`, in a canonical order."""
    quoted = ["`" + c.replace("`", "``") + "`" for c in cols]
    return sorted((tuple(r) for r in df.select(*quoted).collect()), key=repr)


def _pushed(spark: Any, path: str) -> Any:
    """A fresh load() with pushdown: one per query (see the module docs' caveat)."""
    return spark.read.format("deltadv").option("filterPushdown", "true").load(path)


def _one_task_each(spark: Any, path: str, pushdown: bool = True) -> Any:
    """Like ``_pushed``, with splitSize 1 byte: no partition packs two scan tasks
    (and these one-row-group files split no further), so Spark partitions count
    the scan tasks that pruning left."""
    reader = spark.read.format("deltadv").option("filterPushdown", str(pushdown).lower())
    return reader.option("splitSize", "1").load(path)


@pytest.fixture(scope="module")
def spark_ds(delta_spark: Any) -> Iterator[Any]:
    """The shared session with format("deltadv") registered with pushdown enabled;
    the settings changed here are put back afterwards."""
    before = {k: delta_spark.conf.get(k, None) for k in SESSION_CONFS}
    register_data_source(delta_spark, filter_pushdown=True)
    assert delta_spark.conf.get(PUSHDOWN_CONF) == "true"
    for k, v in SESSION_CONFS.items():
        if v is not None:
            delta_spark.conf.set(k, v)
    yield delta_spark
    for k, v in before.items():
        if v is None:
            delta_spark.conf.unset(k)
        else:
            delta_spark.conf.set(k, v)


@pytest.fixture(scope="module")
def dv_table(spark_ds: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Partitioned by `part` (with a NULL partition), four files per partition value
    with disjoint id ranges (so stats can skip files), two DELETE rounds that write
    DVs; every type a pushed literal can take, and a struct."""
    spark = spark_ds
    path = str(tmp_path_factory.mktemp("ds") / "partitioned")
    (
        spark.range(0, 2000, numPartitions=4)
        .selectExpr(
            "id",
            "CASE WHEN id % 97 = 0 THEN NULL ELSE CAST(id % 4 AS INT) END AS part",
            "CAST(id * 0.5 AS DOUBLE) AS x",
            "CASE WHEN id % 11 = 0 THEN NULL WHEN id % 13 = 0 THEN 'it''s' "
            "ELSE concat('s-', id) END AS s",
            "date_add(DATE'2024-01-01', CAST(id % 40 AS INT)) AS d",
            "timestamp_seconds(1704067200 + id * 60) AS ts",
            "CAST(id / 8 AS DECIMAL(10, 2)) AS amount",
            "named_struct('a', id % 10, 'b', concat('b', id)) AS st",
        )
        .repartitionByRange(4, "id")
        .sortWithinPartitions("id")
        .write.format("delta")
        .partitionBy("part")
        .option("delta.enableDeletionVectors", "true")
        .save(path)
    )
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 7 = 0")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id BETWEEN 300 AND 450 OR part = 2 AND id < 900")
    files = deltadv.DeltaTable(path).get_add_actions()
    assert files["dv_storage_type"].null_count < files.num_rows, "DELETE wrote no DVs"
    return path


def test_reads_like_delta_spark(spark_ds: Any, dv_table: str) -> None:
    ours = spark_ds.read.format("deltadv").load(dv_table)
    theirs = spark_ds.read.format("delta").load(dv_table)
    assert ours.schema.fieldNames() == theirs.schema.fieldNames()
    assert [f.dataType for f in ours.schema] == [f.dataType for f in theirs.schema]
    rows = _rows(ours)
    assert rows == _rows(theirs)
    assert len(rows) == theirs.count() < 2000


FILTERS = [
    "part = 2",
    "part IS NULL",
    "part IN (1, 3)",
    "part <=> 1",
    "NOT (part = 2)",
    "part <> 0 AND id >= 1500",
    "id BETWEEN 100 AND 400",
    "id > 1990 OR id < 5",
    "x <= 30.5",
    "x > -1.0 AND x < 2.25",
    "s IS NULL",
    "s IS NOT NULL AND id < 60",
    "s = 'it''s'",
    "s IN ('s-1', 's-500', 'nope')",
    "s LIKE 's-19%'",
    "d = DATE'2024-01-10'",
    "d >= DATE'2024-02-05'",
    "ts < TIMESTAMP'2024-01-01 02:00:00'",
    "ts >= TIMESTAMP'2024-01-02 08:00:00+02:00'",
    "amount > 240.5",
    "amount IN (1.25, 100.00)",
    "NOT (id IN (1, 2, 3)) AND part = 1",
    "part = 1 AND NOT (s IS NULL)",
    "id = -1",
    "st.a = 3 AND id < 500",
    "st.b IN ('b10', 'b1999')",
]


@pytest.mark.parametrize("condition", FILTERS)
def test_pushed_filters_match_delta_spark(spark_ds: Any, dv_table: str, condition: str) -> None:
    ours = _pushed(spark_ds, dv_table).filter(condition)
    theirs = spark_ds.read.format("delta").load(dv_table).filter(condition)
    assert _rows(ours) == _rows(theirs)


def test_pushed_filters_prune_files(spark_ds: Any, dv_table: str) -> None:
    """Spark partitions = scan tasks = files left after pruning (all files are small)."""

    def tasks(condition: str | None, pushdown: bool = True) -> int:
        df = _one_task_each(spark_ds, dv_table, pushdown)  # a fresh load() per query
        return (df if condition is None else df.filter(condition)).rdd.getNumPartitions()

    live = deltadv.DeltaTable(dv_table).get_add_actions()
    parts = [p["part"] for p in live["partition"].to_pylist()]
    # 5 partition values x 4 id ranges, less files whose rows were all deleted
    assert tasks(None) == live.num_rows > 15
    # partition values
    assert tasks("part = 1") == parts.count(1) == 4
    assert tasks("part IS NULL") == parts.count(None) == 4
    # file stats: ids were range-partitioned into 4 files per partition value
    assert tasks("id >= 1900") == len(set(parts)) == 5
    assert tasks("part = 3 AND id < 100") == 1
    # what cannot be pushed prunes nothing; without pushdown nothing is pruned
    assert tasks("s LIKE 's-1%' OR id % 2 = 0") == live.num_rows
    assert tasks("part = 1", pushdown=False) == live.num_rows


def test_loaded_frame_reused_without_pushdown(spark_ds: Any, dv_table: str) -> None:
    """The default: one load(), many queries, each as Delta Spark answers it."""
    ours = spark_ds.read.format("deltadv").load(dv_table)
    theirs = spark_ds.read.format("delta").load(dv_table)
    for cond in ["part = 1", None, "id > 1500", "id % 2 = 0", "s LIKE 's-1%'"]:
        o, t = (ours, theirs) if cond is None else (ours.filter(cond), theirs.filter(cond))
        assert o.count() == t.count(), cond


@pytest.mark.xfail(
    strict=True,
    reason="Spark 4.2 reuses the partitions of the last pushed query for a later query "
    "with no pushable filter on the same loaded DataFrame; if this passes, Spark fixed "
    "it and pushdown can become the default",
)
def test_loaded_frame_reused_with_pushdown(spark_ds: Any, dv_table: str) -> None:
    ours = _pushed(spark_ds, dv_table)
    theirs = spark_ds.read.format("delta").load(dv_table)
    assert ours.filter("part = 1").count() == theirs.filter("part = 1").count()
    assert ours.count() == theirs.count()  # Spark 4.2: only the part = 1 files


def test_odd_column_names(spark_ds: Any, tmp_path: Path) -> None:
    """Column mapping allows names the predicate has to back-quote."""
    spark = spark_ds
    path = str(tmp_path / "odd")
    (
        spark.range(0, 600, numPartitions=3)
        .selectExpr("id", "id % 4 AS `a b`", "concat('o''k ', id % 5) AS `x.y`", "id AS `and`")
        .write.format("delta")
        .partitionBy("a b")
        .option("delta.enableDeletionVectors", "true")
        .option("delta.columnMapping.mode", "name")
        .save(path)
    )
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 3 = 0")
    cols = ["id", "a b", "x.y", "and"]
    for cond in ["`a b` = 2", "`x.y` = 'o''k 3'", "`and` > 500", "`a b` IN (1, 3) AND id < 50"]:
        ours = _pushed(spark, path).filter(cond)
        theirs = spark.read.format("delta").load(path).filter(cond)
        assert _rows(ours, cols) == _rows(theirs, cols), cond
    pruned = _one_task_each(spark, path).filter("`a b` = 2").rdd.getNumPartitions()
    assert pruned < _one_task_each(spark, path).rdd.getNumPartitions()


def test_user_schema_selects_columns(spark_ds: Any, dv_table: str) -> None:
    ours = spark_ds.read.format("deltadv").schema("s string, id long").load(dv_table)
    assert ours.schema.fieldNames() == ["s", "id"]
    theirs = spark_ds.read.format("delta").load(dv_table)
    assert _rows(ours, ["s", "id"]) == _rows(theirs, ["s", "id"])


def test_time_travel_matches_delta_spark(spark_ds: Any, tmp_path: Path) -> None:
    spark = spark_ds
    path = str(tmp_path / "travel")
    first = spark.range(0, 500).selectExpr("id", "id % 3 AS k")
    first.write.format("delta").option("delta.enableDeletionVectors", "true").save(path)
    more = spark.range(500, 800).selectExpr("id", "id % 3 AS k")
    more.write.format("delta").mode("append").save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 5 = 0")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE k = 1 AND id > 200")
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert sorted(h.version for h in history) == [0, 1, 2, 3]
    cols = ["id", "k"]
    counts = set()
    for h in history:
        theirs = _rows(spark.read.format("delta").option("versionAsOf", h.version).load(path), cols)
        for key in ("versionAsOf", "version"):
            ours = spark.read.format("deltadv").option(key, h.version).load(path)
            assert _rows(ours, cols) == theirs, (key, h.version)
        stamp = h.timestamp.isoformat(sep=" ")  # UTC, as the session time zone is
        theirs_t = spark.read.format("delta").option("timestampAsOf", stamp).load(path)
        ours_t = spark.read.format("deltadv").option("timestampAsOf", stamp).load(path)
        assert _rows(ours_t, cols) == _rows(theirs_t, cols) == theirs, stamp
        counts.add(len(theirs))
    assert len(counts) == 4  # every version differs


def test_every_row_deleted(spark_ds: Any, tmp_path: Path) -> None:
    """No scan tasks at all: Spark's stand-in partition reads nothing."""
    spark = spark_ds
    path = str(tmp_path / "emptied")
    writer = spark.range(0, 50).selectExpr("id", "id % 2 AS k").write.format("delta")
    writer.partitionBy("k").option("delta.enableDeletionVectors", "true").save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 10 = 0")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id >= 0")
    assert spark.read.format("delta").load(path).count() == 0
    ours = spark.read.format("deltadv").load(path)
    assert ours.schema.fieldNames() == ["id", "k"]
    assert ours.collect() == []
    assert _pushed(spark, path).filter("k = 1").collect() == []


def test_missing_table_is_a_clear_error(spark_ds: Any, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-table"
    with pytest.raises(Exception, match=r"no Delta table at .* the path does not exist") as info:
        spark_ds.read.format("deltadv").load(str(missing)).collect()
    assert "no-such-table" in str(info.value)


def test_unknown_option_is_an_error(spark_ds: Any, dv_table: str) -> None:
    with pytest.raises(Exception, match="unknown option"):
        spark_ds.read.format("deltadv").option("versoin", "1").load(dv_table).collect()


# ----- pure Python: Spark filters -> expression trees (JSON form) ------------------------


def _col(*path: str) -> dict[str, Any]:
    return {"column": list(path)}


def _cmp(op: str, path: tuple[str, ...], lit: Any) -> dict[str, Any]:
    return {"cmp": {"op": op, "left": _col(*path), "right": {"literal": lit}}}


def test_comparisons() -> None:
    assert to_predicate(EqualTo(("a",), 1)) == _cmp("=", ("a",), {"number": "1"})
    assert to_predicate(EqualNullSafe(("a",), 1)) == _cmp("<=>", ("a",), {"number": "1"})
    assert to_predicate(EqualNullSafe(("a",), None)) == _cmp("<=>", ("a",), "null")
    assert to_predicate(EqualTo(("a",), None)) == _cmp("=", ("a",), "null")
    assert to_predicate(GreaterThan(("a",), -5)) == _cmp(">", ("a",), {"number": "-5"})
    assert to_predicate(GreaterThanOrEqual(("a",), 2.5)) == _cmp(">=", ("a",), {"double": "2.5"})
    assert to_predicate(LessThan(("a",), 1e20)) == _cmp("<", ("a",), {"double": "1e+20"})
    assert to_predicate(LessThanOrEqual(("a",), True)) == _cmp("<=", ("a",), {"bool": True})
    assert to_predicate(EqualTo(("a",), False)) == _cmp("=", ("a",), {"bool": False})
    assert to_predicate(IsNull(("a",))) == {"is_null": _col("a")}
    assert to_predicate(IsNotNull(("a",))) == {"not": {"is_null": _col("a")}}
    assert to_predicate(In(("a",), (1, None))) == {
        "in": {"value": _col("a"), "list": [{"literal": {"number": "1"}}, {"literal": "null"}]}
    }
    assert to_predicate(Not(EqualTo(("a",), 1))) == {"not": _cmp("=", ("a",), {"number": "1"})}


def test_literals_are_exact() -> None:
    def lit(v: Any) -> Any:
        tree = to_predicate(EqualTo(("c",), v))
        assert tree is not None, v
        return tree["cmp"]["right"]["literal"]

    assert lit(dt.date(2024, 2, 29)) == {"date": "2024-02-29"}
    assert lit(dt.date(33, 1, 2)) == {"date": "0033-01-02"}
    assert lit(Decimal("1.50")) == {"number": "1.50"}
    assert lit(Decimal("-1E+3")) == {"number": "-1000"}
    assert lit(Decimal("1E-8")) == {"number": "0.00000001"}
    assert lit(12345678901234567890123) == {"number": "12345678901234567890123"}
    assert lit(b"\x00\xffa") == {"binary": "00ff61"}
    assert lit('it\'s "q" `c` \\ \n') == {"string": 'it\'s "q" `c` \\ \n'}
    assert lit(float("nan")) == {"double": "nan"}
    assert lit(float("inf")) == {"double": "inf"}
    assert lit(float("-inf")) == {"double": "-inf"}
    assert lit(-0.0) == {"double": "-0.0"}
    for x in [0.1, 1 / 3, 5e-324, 1.7976931348623157e308]:
        assert float(lit(x)["double"]) == x
    # the tree survives JSON as the binding receives it
    tree = to_predicate(In(("c",), (float("nan"), Decimal("1.5"), "x'y", b"\x01")))
    assert json.loads(json.dumps(tree)) == tree


def test_timestamps() -> None:
    # what PySpark decodes for a `timestamp` column: aware, in UTC
    utc = dt.datetime(2024, 1, 2, 3, 4, 5, 60, tzinfo=ZoneInfo("UTC"))
    assert to_predicate(GreaterThan(("t",), utc)) == _cmp(
        ">", ("t",), {"timestamp": "2024-01-02 03:04:05.000060Z"}
    )
    # another zone is converted, not relabelled
    plus2 = dt.datetime(2024, 1, 2, 3, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert to_predicate(EqualTo(("t",), plus2)) == _cmp(
        "=", ("t",), {"timestamp": "2024-01-02 01:00:00Z"}
    )
    # `timestamp_ntz` columns give naive datetimes
    ntz = dt.datetime(1999, 12, 31, 23, 59, 59)
    assert to_predicate(LessThan(("t",), ntz)) == _cmp(
        "<", ("t",), {"timestamp_ntz": "1999-12-31 23:59:59"}
    )


def test_column_names_need_no_quoting() -> None:
    for path in [("a b",), ("a`b",), ("a.b",), ("a", "b"), ("1col",), ("é",), ("Null",)]:
        assert to_predicate(IsNull(path)) == {"is_null": {"column": list(path)}}


def test_unpushable_filters_are_left_out() -> None:
    for f in [
        StringStartsWith(("s",), "a"),
        StringEndsWith(("s",), "a"),
        StringContains(("s",), "a"),
        EqualTo(("m",), Decimal("NaN")),
        EqualTo(("arr",), [1, 2]),
        EqualTo((), 1),
        Not(StringContains(("s",), "a")),
    ]:
        assert to_predicate(f) is None, f
    got = filters_to_predicate(
        [IsNotNull(("a",)), StringStartsWith(("s",), "x"), GreaterThan(("a",), 4)]
    )
    assert got == {"and": [{"not": {"is_null": _col("a")}}, _cmp(">", ("a",), {"number": "4"})]}
    assert filters_to_predicate([StringContains(("s",), "x")]) is None
    assert filters_to_predicate([]) is None


def test_the_data_source_repeats_no_grammar() -> None:
    """The SQL grammar lives in the Rust crate's expr module only: the data source
    renders no SQL and keeps no keyword list."""
    import inspect

    import deltadv.expressions as ex
    import deltadv.spark.datasource as ds

    source = inspect.getsource(ds) + inspect.getsource(ex)
    for word in ["_KEYWORDS", "TIMESTAMP_NTZ '", "BETWEEN", "back-quoted"]:
        assert word not in source, word


def test_options() -> None:
    from deltadv.datasource import _split_size, _storage_options, _table_uri, _version_option

    opts = {
        "path": "s3://bucket/t",
        "storage.aws_endpoint_url": "http://localhost:9000",
        "aws_region": "eu-west-1",
        "storage.azure_storage_account_name": "acct",
        "versionasof": "3",
    }
    assert _storage_options(opts) == {
        "AWS_ENDPOINT_URL": "http://localhost:9000",
        "AWS_REGION": "eu-west-1",
        "AZURE_STORAGE_ACCOUNT_NAME": "acct",
    }
    assert _table_uri(opts) == "s3://bucket/t"
    assert _table_uri({"path": "rel/t"}) == str(Path("rel/t").resolve())
    assert _version_option(opts) == 3
    assert _split_size({}) == 128 * 1024 * 1024
    with pytest.raises(ValueError, match="unknown option"):
        _storage_options({"path": "x", "region": "eu-west-1"})
    with pytest.raises(ValueError, match="conflicting"):
        _version_option({"version": "1", "versionasof": "2"})
    with pytest.raises(ValueError, match="integer"):
        _version_option({"version": "latest"})
    with pytest.raises(ValueError, match="table path"):
        _table_uri({})
    with pytest.raises(ValueError, match="splitSize"):
        _split_size({"splitsize": "0"})


def test_predicates_bind_to_the_columns(dv_table: str) -> None:
    """Every literal form we emit converts exactly to its column's type: with
    filter_rows=True deltadv binds strictly and raises on anything it would
    otherwise silently ignore while pruning; and the rows it keeps are those the
    same filter keeps in Python."""
    utc = ZoneInfo("UTC")
    cases: list[tuple[Any, Any]] = [
        (EqualTo(("part",), 2), lambda r: r["part"] == 2),
        (In(("part",), (1, None, 3)), lambda r: r["part"] in (1, 3)),
        (EqualNullSafe(("part",), None), lambda r: r["part"] is None),
        (GreaterThan(("id",), 1990), lambda r: r["id"] > 1990),
        (LessThanOrEqual(("x",), 30.5), lambda r: r["x"] <= 30.5),
        (GreaterThan(("x",), 990.2), lambda r: r["x"] > 990.2),
        (EqualTo(("s",), "it's"), lambda r: r["s"] == "it's"),
        (In(("s",), ("s-1", "s-500")), lambda r: r["s"] in ("s-1", "s-500")),
        (EqualTo(("d",), dt.date(2024, 1, 10)), lambda r: r["d"] == dt.date(2024, 1, 10)),
        (
            LessThan(("ts",), dt.datetime(2024, 1, 1, 0, 3, 0, 500, tzinfo=utc)),
            lambda r: r["ts"] < dt.datetime(2024, 1, 1, 0, 3, 0, 500, tzinfo=utc),
        ),
        (
            GreaterThanOrEqual(("amount",), Decimal("240.50")),
            lambda r: r["amount"] >= Decimal("240.50"),
        ),
        (EqualTo(("st", "a"), 3), lambda r: r["st"] is not None and r["st"]["a"] == 3),
        (
            Not(In(("st", "b"), ("b10",))),
            lambda r: r["st"] is not None and r["st"]["b"] != "b10",
        ),
        (IsNotNull(("s",)), lambda r: r["s"] is not None),
    ]
    table = deltadv.DeltaTable(dv_table)
    everything = len(table.scan_tasks())
    rows = table.to_pyarrow().to_pylist()
    for f, keep in cases:
        tree = to_predicate(f)
        assert tree is not None, f
        assert len(table.scan_tasks(None, tree)) <= everything, f
        got = sorted(r["id"] for r in table.to_pyarrow(["id"], filter=tree).to_pylist())
        assert got == sorted(r["id"] for r in rows if keep(r)), f
        assert got, f"{f} matches no row: a weak case"


def reader_tasks(path: str, reader: DeltaDVPlainReader) -> list[str]:
    """The JSON of the scan tasks the reader plans, as deltadv plans them."""
    tasks = deltadv.DeltaTable(path).scan_tasks(None, reader.predicate, filter_rows=False)
    return [t.json for t in tasks]


def test_reader_hands_every_filter_back(dv_table: str) -> None:
    source = DeltaDVDataSource({"path": dv_table, "filterpushdown": "true"})
    reader = source.reader(source.schema())
    filters = [EqualTo(("part",), 1), StringContains(("s",), "x"), GreaterThan(("id",), 3)]
    assert list(reader.pushFilters(filters)) == filters  # Spark still applies them all
    assert all(a is b for a, b in zip(reader.pushFilters(filters), filters, strict=True))
    assert reader.predicate == {
        "and": [_cmp("=", ("part",), {"number": "1"}), _cmp(">", ("id",), {"number": "3"})]
    }
    partitions = reader.partitions()  # each: the JSON texts of the scan tasks it packs
    assert partitions and all(
        p.value and all(isinstance(t, str) for t in p.value) for p in partitions
    )
    texts = [t for p in partitions for t in p.value]
    assert sorted(texts) == sorted(reader_tasks(dv_table, reader))  # each task once
    plain = DeltaDVDataSource({"path": dv_table})  # pushdown is opt-in
    assert isinstance(plain.reader(plain.schema()), DeltaDVPlainReader)
    assert not isinstance(plain.reader(plain.schema()), DeltaDVReader)


# ----- odd values: pushed as exact trees, read as Delta Spark reads them -------------------


@pytest.fixture(scope="module")
def odd_table(spark_ds: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Values that text rendering gets wrong: NaN, infinities, -0.0, wide decimals,
    micro-second timestamps, strings with quotes, backslashes and newlines; over
    three files so pruning has something to skip."""
    from pyspark.sql.types import (
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    utc = dt.timezone.utc
    rows = [
        (0, 1.5, 1.5, Decimal("12345678901234.5678"), dt.date(2024, 2, 29), "it's"),
        (1, float("nan"), float("nan"), Decimal("-0.0001"), dt.date(1900, 1, 1), 'say "hi"'),
        (2, float("inf"), float("inf"), Decimal("1.0001"), dt.date(2024, 1, 1), "a\\b"),
        (3, float("-inf"), float("-inf"), Decimal("0"), None, "line\nbreak"),
        (4, -0.0, -0.0, None, dt.date(9999, 12, 31), "`tick`"),
        (5, 0.0, 0.0, Decimal("99999999999999.9999"), dt.date(1970, 1, 1), ""),
        (6, None, None, Decimal("-99999999999999.9999"), dt.date(2024, 2, 28), None),
        (7, 1e-300, 1e-30, Decimal("0.5"), dt.date(2000, 1, 1), "é ü 😀"),
        (8, -2.5, -2.5, Decimal("2.5"), dt.date(2000, 1, 2), "it''s"),
    ]
    schema = StructType(
        [
            StructField("id", LongType()),
            StructField("x", DoubleType()),
            StructField("f", FloatType()),
            StructField("m", DecimalType(18, 4)),
            StructField("d", DateType()),
            StructField("s", StringType()),
            StructField("ts", TimestampType()),
            StructField("ntz", TimestampNTZType()),
        ]
    )
    base = dt.datetime(2024, 1, 2, 3, 4, 5, 123456)
    data = [
        (
            *r,
            (base + dt.timedelta(microseconds=r[0])).replace(tzinfo=utc),
            base + dt.timedelta(days=r[0]),
        )
        for r in rows
    ]
    path = str(tmp_path_factory.mktemp("ds") / "odd")
    (
        spark_ds.createDataFrame(data, schema)
        .repartitionByRange(3, "id")
        .write.format("delta")
        .option("delta.enableDeletionVectors", "true")
        .save(path)
    )
    spark_ds.sql(f"DELETE FROM delta.`{path}` WHERE id = 8")
    return path


def _odd_cases() -> list[tuple[str, Any, Any]]:
    from pyspark.sql import functions as F

    nan, inf = float("nan"), float("inf")
    base = dt.datetime(2024, 1, 2, 3, 4, 5, 123456)
    return [
        ("x = NaN", F.col("x") == F.lit(nan), EqualTo(("x",), nan)),
        ("x > inf", F.col("x") > F.lit(inf), GreaterThan(("x",), inf)),
        ("x = inf", F.col("x") == F.lit(inf), EqualTo(("x",), inf)),
        ("x <= -inf", F.col("x") <= F.lit(-inf), LessThanOrEqual(("x",), -inf)),
        ("x = 0.0", F.col("x") == F.lit(0.0), EqualTo(("x",), 0.0)),
        ("f = -0.0", F.col("f") == F.lit(-0.0).cast("float"), EqualTo(("f",), -0.0)),
        ("x >= 1e-300", F.col("x") >= F.lit(1e-300), GreaterThanOrEqual(("x",), 1e-300)),
        ("f = NaN", F.col("f") == F.lit(nan).cast("float"), EqualTo(("f",), nan)),
        ("x IN (NaN, 1.5)", F.col("x").isin(nan, 1.5), In(("x",), (nan, 1.5))),
        ("x <=> NaN", F.col("x").eqNullSafe(F.lit(nan)), EqualNullSafe(("x",), nan)),
        (
            "m = wide",
            F.col("m") == F.lit(Decimal("12345678901234.5678")),
            EqualTo(("m",), Decimal("12345678901234.5678")),
        ),
        (
            "m IN tiny",
            F.col("m").isin(Decimal("-0.0001"), Decimal("1.0001")),
            In(("m",), (Decimal("-0.0001"), Decimal("1.0001"))),
        ),
        (
            "m >= max",
            F.col("m") >= F.lit(Decimal("99999999999999.9999")),
            GreaterThanOrEqual(("m",), Decimal("99999999999999.9999")),
        ),
        (
            "d = leap",
            F.col("d") == F.lit(dt.date(2024, 2, 29)),
            EqualTo(("d",), dt.date(2024, 2, 29)),
        ),
        (
            "d < 1901",
            F.col("d") < F.lit(dt.date(1901, 1, 1)),
            LessThan(("d",), dt.date(1901, 1, 1)),
        ),
        (
            "d = 9999",
            F.col("d") == F.lit(dt.date(9999, 12, 31)),
            EqualTo(("d",), dt.date(9999, 12, 31)),
        ),
        ("s quote", F.col("s") == F.lit("it's"), EqualTo(("s",), "it's")),
        ("s dquote", F.col("s") == F.lit('say "hi"'), EqualTo(("s",), 'say "hi"')),
        ("s backslash", F.col("s") == F.lit("a\\b"), EqualTo(("s",), "a\\b")),
        ("s newline", F.col("s") == F.lit("line\nbreak"), EqualTo(("s",), "line\nbreak")),
        ("s empty", F.col("s") == F.lit(""), EqualTo(("s",), "")),
        ("s unicode", F.col("s") >= F.lit("é"), GreaterThanOrEqual(("s",), "é")),
        ("s in", F.col("s").isin("`tick`", "it''s"), In(("s",), ("`tick`", "it''s"))),
        (
            "ts micros",
            F.col("ts")
            == F.lit(base.replace(tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=2)),
            EqualTo(("ts",), base.replace(tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=2)),
        ),
        (
            "ntz",
            F.col("ntz") > F.lit(base + dt.timedelta(days=6)),
            GreaterThan(("ntz",), base + dt.timedelta(days=6)),
        ),
        ("not x = 1.5", ~(F.col("x") == F.lit(1.5)), Not(EqualTo(("x",), 1.5))),
        ("d is null", F.col("d").isNull(), IsNull(("d",))),
    ]


# The Columns need a running session: the cases are built inside the tests.
ODD_CASES = [
    "x = NaN",
    "x > inf",
    "x = inf",
    "x <= -inf",
    "x = 0.0",
    "f = -0.0",
    "x >= 1e-300",
    "f = NaN",
    "x IN (NaN, 1.5)",
    "x <=> NaN",
    "m = wide",
    "m IN tiny",
    "m >= max",
    "d = leap",
    "d < 1901",
    "d = 9999",
    "s quote",
    "s dquote",
    "s backslash",
    "s newline",
    "s empty",
    "s unicode",
    "s in",
    "ts micros",
    "ntz",
    "not x = 1.5",
    "d is null",
]


@pytest.mark.parametrize("case", ODD_CASES)
def test_pushed_odd_values_match_delta_spark(spark_ds: Any, odd_table: str, case: str) -> None:
    """Spark pushes the filter (as a tree, values exact) and still applies it; the
    rows equal Delta Spark's. The same tree bound strictly in deltadv alone keeps
    the same rows, so no value was rounded or mistyped on the way."""
    _, condition, pushed = {c[0]: c for c in _odd_cases()}[case]
    cols = ["id", "x", "f", "m", "d", "s", "ts", "ntz"]
    theirs = spark_ds.read.format("delta").load(odd_table).filter(condition)
    ours = _pushed(spark_ds, odd_table).filter(condition)
    expected = _rows(theirs, cols)
    assert repr(_rows(ours, cols)) == repr(expected)  # repr: NaN equals NaN
    want_ids = sorted(r[0] for r in expected)
    tree = to_predicate(pushed)
    assert tree is not None
    got = deltadv.DeltaTable(odd_table).to_pyarrow(["id"], filter=tree)
    assert sorted(got["id"].to_pylist()) == want_ids


def test_odd_pushed_trees_prune(spark_ds: Any, odd_table: str) -> None:
    """The cases above test pushdown only if Spark hands us the filters and the
    tree binds: filters whose values only one file's stats admit leave one Spark
    partition (one scan task) of the table's three files."""
    cases = {c[0]: c for c in _odd_cases()}

    def partitions(condition: Any) -> int:
        return int(_one_task_each(spark_ds, odd_table).filter(condition).rdd.getNumPartitions())

    table = deltadv.DeltaTable(odd_table)
    assert len(table.files()) == 3
    assert _one_task_each(spark_ds, odd_table, pushdown=False).rdd.getNumPartitions() == 3
    by_row = table.scan_with_row_index(["id"]).read_all().to_pylist()
    for name in ["d = 9999", "d < 1901", "ntz"]:
        _, condition, _ = cases[name]
        ids = {
            r["id"]
            for r in spark_ds.read.format("delta").load(odd_table).filter(condition).collect()
        }
        holding = {r["_file_path"] for r in by_row if r["id"] in ids}
        assert ids and 1 <= len(holding) <= partitions(condition) < 3, name
