"""Delta Spark as the oracle for every column type, partition value and schema change:
tables written with DVs enabled and DELETEd by Delta Spark 4.4, read by deltadv through
Spark (rows and schema) and through ``DeltaTable.to_pyarrow`` (against Delta Spark's
``toArrow``), row for row. Every table has a unique ``id`` to line rows up by."""

from __future__ import annotations

import json
import math
import time
import uuid
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltadv
from deltadv import spark as dspark

# ---------------------------------------------------------------- comparison helpers


def _norm(v: Any) -> Any:
    """A value made comparable with ==: floats exact (NaN, -0.0 included), Spark Rows
    and arrow structs as dicts, maps as sorted item lists (arrow gives lists of pairs,
    Spark gives dicts)."""
    if isinstance(v, float):
        return ("float", "nan" if math.isnan(v) else v.hex())
    if hasattr(v, "asDict"):  # pyspark Row (struct)
        return {k: _norm(x) for k, x in v.asDict(recursive=False).items()}
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_norm(x) for x in v]
    return v


def _map_items(v: Any) -> Any:
    return None if v is None else sorted(v.items() if isinstance(v, dict) else v)


def _spark_rows(df: Any, maps: tuple[str, ...] = ()) -> list[Any]:
    rows = [r.asDict(recursive=False) for r in df.collect()]
    for r in rows:
        for m in maps:
            r[m] = _map_items(r[m])
    return [_norm(r) for r in sorted(rows, key=lambda r: r["id"])]


def _arrow_rows(table: pa.Table, maps: tuple[str, ...] = ()) -> list[Any]:
    rows = table.to_pylist()
    for r in rows:
        for m in maps:
            r[m] = _map_items(r[m])
    return [_norm(r) for r in sorted(rows, key=lambda r: r["id"])]


def _strip(dt: Any) -> Any:
    """A Spark type's JSON without field metadata: names, types, nullability."""
    j = dt.jsonValue() if hasattr(dt, "jsonValue") else dt
    if isinstance(j, dict):
        return {k: _strip(v) for k, v in j.items() if k != "metadata"}
    if isinstance(j, list):
        return [_strip(v) for v in j]
    return j


def _differences(ours: list[Any], theirs: list[Any], limit: int = 5) -> str:
    """A short account of where two row lists part, for assertion messages."""
    out = [f"ours {len(ours)} rows, Delta Spark {len(theirs)} rows"]
    for a, b in zip(ours, theirs, strict=False):
        if a != b:
            keys = [k for k in b if a.get(k) != b.get(k)] if isinstance(b, dict) else []
            out.append(
                f"id={b.get('id')}: " + ", ".join(f"{k}: {a.get(k)!r} != {b[k]!r}" for k in keys)
            )
            if len(out) > limit:
                break
    return "\n".join(out)


def _compare(spark: Any, path: str, maps: tuple[str, ...] = ()) -> list[Any]:
    """deltadv vs Delta Spark at the latest version: Spark schema (names, types,
    nullability), Spark rows, and DeltaTable.to_pyarrow rows vs Delta Spark's toArrow."""
    delta_df = spark.read.format("delta").load(path)
    ours_df = dspark.read(spark, path)
    assert _strip(ours_df.schema) == _strip(delta_df.schema)
    theirs = _spark_rows(delta_df, maps)
    ours = _spark_rows(ours_df, maps)
    assert ours == theirs, _differences(ours, theirs)
    theirs_arrow = _arrow_rows(delta_df.toArrow(), maps)
    ours_arrow = _arrow_rows(deltadv.DeltaTable(path).to_pyarrow(), maps)
    assert ours_arrow == theirs_arrow, _differences(ours_arrow, theirs_arrow)
    return theirs


def _has_dvs(path: str) -> bool:
    """Whether the Delta log (JSON commits) ever added a file with a deletion vector."""
    for commit in sorted((Path(path) / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            add = json.loads(line).get("add")
            if add and add.get("deletionVector"):
                return True
    return False


def _delete(spark: Any, path: str, condition: str) -> None:
    spark.sql(f"DELETE FROM delta.`{path}` WHERE {condition}")


@pytest.fixture(scope="module", autouse=True)
def _small_snapshots(delta_spark: Any) -> Any:
    """Delta Spark replays the log into 50 partitions by default; 2 do for tiny tables."""
    key = "spark.databricks.delta.snapshotPartitions"
    old = delta_spark.conf.get(key, None)
    delta_spark.conf.set(key, "2")
    yield
    if old is None:
        delta_spark.conf.unset(key)
    else:
        delta_spark.conf.set(key, old)


# ---------------------------------------------------------------- every column type

TYPES_SELECT = [
    "id",
    "cast(id % 256 - 128 AS tinyint) AS by",
    "cast((id * 7919) % 65536 - 32768 AS smallint) AS sh",
    "CASE WHEN id % 97 = 0 THEN NULL ELSE cast((id * 104729) % 4294967296 - 2147483648 AS int)"
    " END AS i",
    "CASE WHEN id = 1 THEN 9223372036854775807 WHEN id = 2 THEN -9223372036854775808"
    " ELSE id * 1000000007 - 5000000000 END AS l",
    "CASE WHEN id % 50 = 0 THEN cast('NaN' AS float) WHEN id % 50 = 1 THEN NULL"
    " WHEN id % 50 = 2 THEN cast('-Infinity' AS float) ELSE cast(id / 3.0 AS float) END AS f",
    "CASE WHEN id % 40 = 0 THEN cast('NaN' AS double) WHEN id % 40 = 1 THEN NULL"
    " WHEN id % 40 = 2 THEN cast('Infinity' AS double) WHEN id % 40 = 3 THEN cast(-0.0 AS double)"
    " ELSE id / 7.0d END AS d",
    "CASE WHEN id % 3 = 0 THEN NULL ELSE id % 2 = 0 END AS bo",
    "CASE WHEN id % 10 = 0 THEN NULL WHEN id % 10 = 1 THEN X'' ELSE unhex(hex(id * 31)) END AS bin",
    "CASE WHEN id % 13 = 0 THEN NULL WHEN id % 13 = 1 THEN ''"
    " ELSE concat('ünï ', id, ' 🦀 日本 \\t\"q\"') END AS s",
    # microseconds everywhere; session time zone is UTC (conftest)
    "CASE WHEN id % 17 = 0 THEN NULL"
    " ELSE timestamp_micros(1700000000123456 + id * 3600000001 - 900000000000000) END AS ts",
    "CASE WHEN id % 19 = 0 THEN NULL"
    " ELSE cast(timestamp_micros(946684800000001 + id * 86399999999) AS timestamp_ntz) END AS tn",
    "CASE WHEN id % 23 = 0 THEN NULL ELSE date_add(DATE'1960-02-29', cast(id * 37 AS int)) END"
    " AS dt",
    "CASE WHEN id % 29 = 0 THEN NULL ELSE cast((id * 1234567) % 10000000000 - 4999999999 AS"
    " decimal(12,0)) / 100 END AS dec_small",
    "CASE WHEN id = 3 THEN cast('99999999999999999999.999999999999999999' AS decimal(38,18))"
    " WHEN id = 4 THEN cast('-99999999999999999999.999999999999999999' AS decimal(38,18))"
    " WHEN id % 31 = 0 THEN NULL"
    " ELSE cast(concat(id - 1000, '.', lpad(cast((id * 982451653) % 1000000000000000000 AS"
    " string), 18, '0')) AS decimal(38,18)) END AS dec_big",
    "CASE WHEN id % 37 = 0 THEN NULL ELSE named_struct('x', id, 'y', concat('y', id),"
    " 'z', named_struct('w', CASE WHEN id % 5 = 0 THEN NULL ELSE id * 2.5d END)) END AS st",
    "CASE WHEN id % 9 = 0 THEN NULL WHEN id % 9 = 1 THEN filter(array(named_struct('k', 0,"
    " 'v', 'x')), e -> false) ELSE transform(sequence(0, cast(id % 4 AS int)),"
    " k -> named_struct('k', k, 'v', CASE WHEN k = 2 THEN NULL ELSE concat('v', k, '-', id)"
    " END)) END AS arr",
    "CASE WHEN id % 11 = 0 THEN NULL ELSE map_from_arrays(array('a', concat('k ü', id)),"
    " array(cast(id AS int), CASE WHEN id % 3 = 0 THEN NULL ELSE -1 END)) END AS m",
]


def _cast_types(df: Any) -> Any:
    return df.selectExpr(
        *[c for c in df.columns if c != "dec_small"],
        "cast(dec_small AS decimal(10,2)) AS dec_small",
    )


@pytest.fixture(scope="module")
def types_table(delta_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    spark = delta_spark
    path = str(tmp_path_factory.mktemp("types") / "t")
    df = _cast_types(spark.range(0, 3000, numPartitions=2).selectExpr(*TYPES_SELECT))
    df.write.format("delta").option("delta.enableDeletionVectors", "true").save(path)
    for cond in ("id % 7 = 0", "id BETWEEN 500 AND 650", "isnan(d) AND id % 80 = 0"):
        _delete(spark, path, cond)
    assert _has_dvs(path)
    return path


def test_every_type_rows_and_schema(delta_spark: Any, types_table: str) -> None:
    theirs = _compare(delta_spark, types_table, maps=("m",))
    assert len(theirs) == 3000 - len(
        {i for i in range(3000) if i % 7 == 0 or 500 <= i <= 650 or (i % 80 == 0)}
    )


def test_every_type_schema_is_exact(delta_spark: Any, types_table: str) -> None:
    """The Spark types deltadv.spark.read declares: tz-aware vs NTZ timestamps, exact
    decimal precision/scale, nested element and value types."""
    from pyspark.sql import types as T

    schema = dspark.read(delta_spark, types_table).schema
    want = {
        "by": T.ByteType(),
        "sh": T.ShortType(),
        "i": T.IntegerType(),
        "l": T.LongType(),
        "f": T.FloatType(),
        "d": T.DoubleType(),
        "bo": T.BooleanType(),
        "bin": T.BinaryType(),
        "s": T.StringType(),
        "ts": T.TimestampType(),
        "tn": T.TimestampNTZType(),
        "dt": T.DateType(),
        "dec_small": T.DecimalType(10, 2),
        "dec_big": T.DecimalType(38, 18),
    }
    for name, t in want.items():
        assert schema[name].dataType == t, name
    assert isinstance(schema["st"].dataType, T.StructType)
    assert schema["st"].dataType["z"].dataType["w"].dataType == T.DoubleType()
    arr = schema["arr"].dataType
    assert isinstance(arr, T.ArrayType) and isinstance(arr.elementType, T.StructType)
    m = schema["m"].dataType
    assert isinstance(m, T.MapType)
    assert (m.keyType, m.valueType) == (T.StringType(), T.IntegerType())


def test_every_type_column_projection(delta_spark: Any, types_table: str) -> None:
    cols = ["id", "m", "dec_big", "ts", "tn"]
    theirs = _spark_rows(delta_spark.read.format("delta").load(types_table).select(*cols), ("m",))
    ours = _spark_rows(dspark.read(delta_spark, types_table, columns=cols), ("m",))
    assert ours == theirs, _differences(ours, theirs)
    arrow = deltadv.DeltaTable(types_table).to_pyarrow(cols)
    assert arrow.column_names == cols


def test_exact_decimals_and_microseconds(delta_spark: Any, types_table: str) -> None:
    """Spot values straight from the SQL that wrote them, not only through the oracle."""
    rows = {r.id: r for r in dspark.read(delta_spark, types_table).collect()}
    assert rows[3].dec_big == Decimal("99999999999999999999.999999999999999999")
    assert rows[4].dec_big == Decimal("-99999999999999999999.999999999999999999")
    assert rows[5].dec_small == Decimal((5 * 1234567) % 10000000000 - 4999999999) / 100
    assert rows[2].tn == datetime(2000, 1, 2, 23, 59, 59, 999999)
    # pyspark turns TimestampType into a naive datetime in the process's local time
    want_ts = datetime.fromtimestamp(800003600).replace(microsecond=123457)
    assert rows[1].ts == want_ts
    assert rows[1].dt == date(1960, 4, 6)


@pytest.mark.parametrize(
    "literal",
    [
        "0001-01-03 00:00:00.000001",  # PySpark cannot convert values within a day of datetime.min
        "1582-10-04 12:00:00.5",
        "1600-06-15 01:02:03.000004",
        "2262-04-12 00:00:00.000001",
        "9999-12-31 23:59:59.999999",
    ],
)
def test_timestamps_outside_the_nanosecond_range(
    delta_spark: Any, tmp_path: Path, literal: str
) -> None:
    """Delta Spark writes TimestampType as INT96 by default; values before 1677 or after
    2262 do not fit in int64 nanoseconds. Compared first as integers (microseconds since
    the epoch, days since the epoch), which survive any value, then as values."""
    spark = delta_spark
    path = str(tmp_path / "ts")
    step = "-" if literal > "5000" else "+"  # stay inside years 1..9999
    (
        spark.range(0, 20, numPartitions=1)
        .selectExpr(
            "id",
            f"timestamp'{literal}' {step} make_dt_interval(0, 0, 0, id) AS ts",
            f"cast(timestamp'{literal}' AS timestamp_ntz) AS tn",
            f"cast(timestamp'{literal}' AS date) AS dt",
        )
        .write.format("delta")
        .option("delta.enableDeletionVectors", "true")
        .save(path)
    )
    _delete(spark, path, "id % 3 = 0")
    assert _has_dvs(path)
    as_ints = (
        "id",
        "unix_micros(ts) AS ts",
        "unix_micros(cast(tn AS timestamp)) AS tn",
        "unix_date(dt) AS dt",
    )
    theirs = _spark_rows(spark.read.format("delta").load(path).selectExpr(*as_ints))
    ours = _spark_rows(dspark.read(spark, path).selectExpr(*as_ints))
    assert ours == theirs, _differences(ours, theirs)
    _compare(spark, path)


# ---------------------------------------------------------------- partition values

ODD = ["a b", "50%", "x=y", "a/b", "ü ñ", "#?&:{}[]", "100%25", "'quote\"", "", None]


def test_partitioned_by_date_and_odd_strings(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "parts")
    odd = spark.createDataFrame([(i, s) for i, s in enumerate(ODD)], "k long, ps string")
    (
        spark.range(0, 2000, numPartitions=1)
        .selectExpr(
            "id",
            f"id % {len(ODD)} AS k",
            "CASE WHEN id % 4 = 3 THEN NULL ELSE date_add(DATE'1969-12-30', cast(id % 4 AS int))"
            " END AS pd",
            "concat('v', id) AS v",
        )
        .join(odd, "k")
        .drop("k")
        .coalesce(1)
        .write.format("delta")
        .partitionBy("pd", "ps")
        .option("delta.enableDeletionVectors", "true")
        .save(path)
    )
    # ps is ODD[id % 10]: every DELETE leaves rows in every partition
    for cond in ("id % 7 = 0", "ps = 'x=y' AND id % 20 = 2", "pd IS NULL AND id % 3 = 0"):
        _delete(spark, path, cond)
    assert _has_dvs(path)
    dirs = {p.name for p in Path(path).rglob("ps=*") if p.is_dir()}
    assert any("%" in d for d in dirs), dirs  # Delta escaped the odd characters
    theirs = _compare(spark, path)
    assert {r["ps"] for r in theirs} >= {"a b", "50%", "x=y", "a/b", None}
    _delete(spark, path, "ps = '50%'")  # a whole partition: files removed, no DV
    _compare(spark, path)


# ---------------------------------------------------------------- schema changes


def _evolve(spark: Any, path: str) -> None:
    """RENAME (top level, nested, partition), DROP, ADD (top level, and a new column
    under the dropped column's name), INSERT, with a DELETE between the steps."""
    t = f"delta.`{path}`"
    _delete(spark, path, "id % 7 = 0")
    spark.sql(f"ALTER TABLE {t} RENAME COLUMN a TO `a renamed`")
    spark.sql(f"ALTER TABLE {t} RENAME COLUMN st.x TO x2")
    spark.sql(f"ALTER TABLE {t} RENAME COLUMN part TO `part ition`")
    spark.sql(f"ALTER TABLE {t} DROP COLUMN gone")
    spark.sql(f"ALTER TABLE {t} ADD COLUMNS (added string, st2 struct<q: int>)")
    spark.sql(f"ALTER TABLE {t} ADD COLUMNS (gone string)")  # same name, new column
    _delete(spark, path, "id % 11 = 0")
    spark.sql(
        f"INSERT INTO {t} SELECT id, concat('p', id % 3), id * 2, concat('b', id),"
        " named_struct('x2', id, 'y', id * 1.5d), concat('added', id),"
        " named_struct('q', cast(id AS int)), concat('g', id) FROM range(1000, 1400)"
    )
    _delete(spark, path, "id % 13 = 0 OR id BETWEEN 1100 AND 1120")


def _base_table(spark: Any, path: str, mode: str | None) -> None:
    writer = (
        spark.range(0, 1000, numPartitions=1)
        .selectExpr(
            "id",
            "concat('p', id % 3) AS part",
            "id * 2 AS a",
            "concat('b', id) AS b",
            "named_struct('x', id, 'y', id * 1.5d) AS st",
            "cast(id AS int) AS gone",
        )
        .write.format("delta")
        .partitionBy("part")
        .option("delta.enableDeletionVectors", "true")
    )
    if mode is not None:
        writer = writer.option("delta.columnMapping.mode", mode)
    writer.save(path)


@pytest.mark.parametrize("mode", ["id", "name"])
def test_column_mapping_rename_drop_add(delta_spark: Any, tmp_path: Path, mode: str) -> None:
    spark = delta_spark
    path = str(tmp_path / f"mapped-{mode}")
    _base_table(spark, path, mode)
    assert deltadv.DeltaTable(path).metadata()["configuration"]["delta.columnMapping.mode"] == mode
    _compare(spark, path)
    _evolve(spark, path)
    assert _has_dvs(path)
    theirs = _compare(spark, path)
    old = next(r for r in theirs if r["id"] == 1)
    assert old["gone"] is None and old["added"] is None  # not the dropped column's data
    assert spark.read.format("delta").load(path).columns == [
        "id",
        "part ition",
        "a renamed",
        "b",
        "st",
        "added",
        "st2",
        "gone",
    ]


@pytest.mark.parametrize("mode", [None, "name", "id"])
def test_add_columns_old_files_lack(delta_spark: Any, tmp_path: Path, mode: str | None) -> None:
    """Schema evolution: files written before ALTER TABLE ADD COLUMNS lack the new
    columns, top level and inside a struct; Delta Spark reads them as nulls."""
    spark = delta_spark
    path = str(tmp_path / f"evolve-{mode}")
    _base_table(spark, path, mode)
    t = f"delta.`{path}`"
    _delete(spark, path, "id % 7 = 0")
    spark.sql(f"ALTER TABLE {t} ADD COLUMNS (added string, st2 struct<q: int>)")
    spark.sql(f"ALTER TABLE {t} ADD COLUMNS (st.added_inner string)")
    spark.sql(
        f"INSERT INTO {t} SELECT id, concat('p', id % 3), id * 2, concat('b', id),"
        " named_struct('x', id, 'y', id * 1.5d, 'added_inner', concat('ai', id)),"
        " cast(id AS int), concat('added', id), named_struct('q', cast(id AS int))"
        " FROM range(1000, 1400)"
    )
    _delete(spark, path, "id % 11 = 0")
    assert _has_dvs(path)
    theirs = _compare(spark, path)
    old = next(r for r in theirs if r["id"] == 1)
    assert old["st"]["added_inner"] is None and old["added"] is None


# ---------------------------------------------------------------- id mode by field id


def _live_adds(root: Path) -> dict[str, dict[str, Any]]:
    """The live add actions by path, from the JSON commits (the test tables have no
    checkpoint). Replay is keyed on (path, DV id) as the protocol says: a DELETE commits
    the file's new add (with DV) and the remove of its old add (without) side by side."""
    assert not list((root / "_delta_log").glob("*.checkpoint*.parquet"))

    def key(action: dict[str, Any]) -> tuple[str, str | None]:
        dv = action.get("deletionVector")
        return (action["path"], dv and dv["storageType"] + dv["pathOrInlineDv"])

    live: dict[tuple[str, str | None], dict[str, Any]] = {}
    for commit in sorted((root / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live[key(action["add"])] = action["add"]
            elif "remove" in action:
                live.pop(key(action["remove"]), None)
    assert len({p for p, _ in live}) == len(live)
    return {p: add for (p, _), add in live.items()}


def _renamed_by_id(field: pa.Field, n: list[int], reverse: bool) -> pa.Field:
    """The field under a new name, its PARQUET:field_id kept, children likewise (in
    reverse order if asked)."""
    n[0] += 1
    t = field.type
    if pa.types.is_struct(t):
        children = [_renamed_by_id(t.field(i), n, reverse) for i in range(t.num_fields)]
        t = pa.struct(children[::-1] if reverse else children)
    return pa.field(f"not_the_physical_name_{n[0]}", t, field.nullable, field.metadata)


def _field_ids(fields: Any) -> list[Any]:
    """PARQUET:field_id of every field, depth first, nested struct fields included."""
    out = []
    for f in fields:
        out.append((f.metadata or {}).get(b"PARQUET:field_id"))
        if pa.types.is_struct(f.type):
            out.extend(_field_ids(list(f.type)))
    return out


def _retyped(arr: pa.Array, t: pa.DataType) -> pa.Array:
    """`arr` rebuilt as type `t`: the same values, struct children matched by field id
    (so under other names, in any order)."""
    if not pa.types.is_struct(t):
        return arr
    by_id = {_field_ids([arr.type.field(i)])[0]: i for i in range(arr.type.num_fields)}
    children = [_retyped(arr.field(by_id[_field_ids([f])[0]]), f.type) for f in list(t)]
    mask = arr.is_null() if arr.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)


@pytest.mark.parametrize("order", ["same", "reversed"])
def test_id_mode_reads_by_parquet_field_id(delta_spark: Any, tmp_path: Path, order: str) -> None:
    """In id mode Delta Spark resolves columns by parquet field id, not name. Rewrite one
    Delta Spark data file with every column (nested ones too) renamed but field ids and
    row order kept, columns and struct fields in the same or in reversed order, commit it
    in place of the old one with the same DV, and read."""
    reverse = order == "reversed"
    spark = delta_spark
    root = tmp_path / "by-id"
    path = str(root)
    (
        spark.range(0, 1000, numPartitions=2)
        .selectExpr(
            "id",
            "concat('s', id) AS s",
            "named_struct('x', id * 3, 'y', concat('y', id)) AS st",
        )
        .write.format("delta")
        .option("delta.enableDeletionVectors", "true")
        .option("delta.columnMapping.mode", "id")
        .save(path)
    )
    _delete(spark, path, "id % 5 = 0")
    before = _spark_rows(spark.read.format("delta").load(path))
    adds = _live_adds(root)
    old_path, old = sorted(adds.items())[0]
    assert old.get("deletionVector"), "want the rewritten file to carry a DV"

    data = pq.read_table(root / old_path)
    ids = _field_ids(data.schema)
    assert len(ids) == 5 and all(ids), f"Delta Spark wrote no field ids: {data.schema}"
    counter = [0]
    fields = [_renamed_by_id(f, counter, reverse) for f in data.schema]
    schema = pa.schema(fields[::-1] if reverse else fields)
    new_name = f"part-rewritten-{order}-{uuid.uuid4()}.c000.snappy.parquet"
    by_id = {
        _field_ids([f])[0]: c.combine_chunks()
        for f, c in zip(data.schema, data.columns, strict=True)
    }
    columns = [_retyped(by_id[_field_ids([f])[0]], f.type) for f in schema]
    pq.write_table(pa.Table.from_arrays(columns, schema=schema), root / new_name)
    written = pq.ParquetFile(root / new_name).schema_arrow
    assert [f.name for f in written] != [f.name for f in data.schema]
    assert sorted(_field_ids(written)) == sorted(ids)
    assert (_field_ids(written) == ids) == (not reverse)

    now = int(time.time() * 1000)
    remove = {
        "path": old_path,
        "deletionTimestamp": now,
        "dataChange": False,
        "extendedFileMetadata": True,
        "partitionValues": old["partitionValues"],
        "size": old["size"],
        "deletionVector": old["deletionVector"],
    }
    add = dict(old, path=new_name, size=(root / new_name).stat().st_size, dataChange=False)
    add["modificationTime"] = now
    version = max(int(p.stem) for p in (root / "_delta_log").glob("*.json")) + 1
    commit = [
        {"commitInfo": {"timestamp": now, "operation": "REWRITE FOR TEST"}},
        {"remove": remove},
        {"add": add},
    ]
    (root / "_delta_log" / f"{version:020}.json").write_text(
        "".join(json.dumps(a) + "\n" for a in commit)
    )
    (root / old_path).unlink()  # nothing may still read the old file

    theirs = _spark_rows(spark.read.format("delta").load(path))
    assert theirs == before, "Delta Spark should read the renamed file by field id"
    ours = _spark_rows(dspark.read(spark, path))
    assert ours == theirs, _differences(ours, theirs)
    ours_arrow = _arrow_rows(deltadv.DeltaTable(path).to_pyarrow())
    assert ours_arrow == _arrow_rows(spark.read.format("delta").load(path).toArrow())
