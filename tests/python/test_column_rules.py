"""Generated columns, column defaults, identity columns, CHECK constraints and
NOT NULL on every write that adds rows (append, UPDATE, MERGE; Python and Spark
paths), checked against Delta Spark 4.4: tables are created by Delta Spark,
written by deltadv, and every write is repeated by Delta Spark itself on a twin
table; the two tables must read the same row for row (the expected values are
Delta Spark's, never deltadv's). Violations fail in both, commit nothing and
leave no new data file referenced."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltadv
from deltadv import spark as dspark
from deltadv.exceptions import CommitConflictError, ConstraintViolationError
from deltadv.write import write_table


def _rows(spark: Any, path: str) -> list[tuple[Any, ...]]:
    df = spark.read.format("delta").load(path)
    cols = sorted(df.columns)
    rows = [tuple(r[c] for c in cols) for r in df.collect()]
    return sorted(rows, key=lambda row: [(v is not None, v) for v in row])


def _version(path: str) -> int:
    return deltadv.DeltaTable(path).version()


def _files(path: str) -> set[str]:
    return set(deltadv.DeltaTable(path).files())


def _both(spark: Any, tmp_path: Path, ddl: str, *after: str) -> tuple[str, str]:
    """The table `ddl` (columns and clauses after the name) created twice by
    Delta Spark: the one deltadv writes, and Delta Spark's twin."""
    paths = []
    for name in ("ours", "twin"):
        p = str(tmp_path / name)
        spark.sql(f"CREATE TABLE delta.`{p}` {ddl}")
        spark.sql(
            f"ALTER TABLE delta.`{p}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
        )
        for stmt in after:
            spark.sql(stmt.format(t=f"delta.`{p}`"))
        paths.append(p)
    return paths[0], paths[1]


def _identity_meta(path: str, column: str) -> dict[str, Any]:
    """The column's metadata in the latest metaData action."""
    schema = json.loads(deltadv.DeltaTable(path).metadata()["schemaString"])
    return next(f["metadata"] for f in schema["fields"] if f["name"] == column)


def _spark_fails(spark: Any, sql: str, needle: str) -> None:
    with pytest.raises(Exception) as e:
        spark.sql(sql)
    assert needle in str(e.value), str(e.value)[:2000]


def test_generated_columns_append_update_merge(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    ours, twin = _both(
        spark,
        tmp_path,
        "(id BIGINT, x INT, s STRING, "
        "g BIGINT GENERATED ALWAYS AS (x * 2 + id), "
        "label STRING GENERATED ALWAYS AS (concat(s, '-', CAST(x AS STRING)))) USING delta",
    )
    tw = f"delta.`{twin}`"

    # append without the generated columns: computed
    write_table(
        ours,
        pa.table(
            {
                "id": pa.array([1, 2, 3], pa.int64()),
                "x": pa.array([10, 20, None], pa.int32()),
                "s": ["a", "b", "c"],
            }
        ),
        mode="append",
    )
    spark.sql(f"INSERT INTO {tw} (id, x, s) VALUES (1, 10, 'a'), (2, 20, 'b'), (3, NULL, 'c')")
    assert _rows(spark, ours) == _rows(spark, twin)

    # append with correct generated values: accepted
    write_table(
        ours,
        pa.table(
            {
                "id": pa.array([4], pa.int64()),
                "x": pa.array([1], pa.int32()),
                "s": ["d"],
                "g": pa.array([6], pa.int64()),
                "label": ["d-1"],
            }
        ),
        mode="append",
    )
    spark.sql(f"INSERT INTO {tw} VALUES (4, 1, 'd', 6, 'd-1')")
    assert _rows(spark, ours) == _rows(spark, twin)

    # a wrong generated value: both refuse, nothing committed
    before, files = _version(ours), _files(ours)
    with pytest.raises(ConstraintViolationError) as e:
        write_table(
            ours,
            pa.table(
                {
                    "id": pa.array([5], pa.int64()),
                    "x": pa.array([1], pa.int32()),
                    "s": ["e"],
                    "g": pa.array([99], pa.int64()),
                    "label": ["e-1"],
                }
            ),
            mode="append",
        )
    msg = str(e.value)
    assert "CHECK constraint Generated Column (g <=> x * 2 + id)" in msg, msg
    assert " - g : 99" in msg and " - x : 1" in msg, msg
    _spark_fails(spark, f"INSERT INTO {tw} VALUES (5, 1, 'e', 99, 'e-1')", "Generated Column")
    assert _version(ours) == before and _files(ours) == files
    # the files written for the refused append were removed
    assert {p.name for p in Path(ours).rglob("*.parquet")} == {Path(f).name for f in files}

    # UPDATE of a source column: the generated columns follow
    deltadv.DeltaTable(ours).update({"x": "x + 1"}, "id <= 2")
    spark.sql(f"UPDATE {tw} SET x = x + 1 WHERE id <= 2")
    assert _rows(spark, ours) == _rows(spark, twin)

    # UPDATE setting a generated column to a wrong value: both refuse
    before = _version(ours)
    with pytest.raises(ConstraintViolationError, match="Generated Column"):
        deltadv.DeltaTable(ours).update({"g": "0"}, "id = 1")
    _spark_fails(spark, f"UPDATE {tw} SET g = 0 WHERE id = 1", "Generated Column")
    assert _version(ours) == before

    # MERGE: matched update of x, not matched insert without the generated columns
    src = pa.table(
        {"id": pa.array([2, 7], pa.int64()), "x": pa.array([5, 7], pa.int32()), "s": ["B", "g"]}
    )
    (
        deltadv.DeltaTable(ours)
        .merge(src, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update({"x": "s.x"})
        .when_not_matched_insert({"id": "s.id", "x": "s.x", "s": "s.s"})
        .execute()
    )
    spark.createDataFrame(src.to_pandas()).createOrReplaceTempView("gen_src")
    spark.sql(
        f"MERGE INTO {tw} t USING gen_src s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET x = s.x "
        "WHEN NOT MATCHED THEN INSERT (id, x, s) VALUES (s.id, s.x, s.s)"
    )
    assert _rows(spark, ours) == _rows(spark, twin)

    # the Spark glue's UPDATE (Spark evaluates the values and the generation
    # expressions, deltadv's writer checks them)
    dspark.DeltaTable.forPath(spark, ours).update("id = 3", {"x": "4"})
    spark.sql(f"UPDATE {tw} SET x = 4 WHERE id = 3")
    assert _rows(spark, ours) == _rows(spark, twin)

    # the Spark glue's MERGE: generated columns of updated and inserted rows
    sdf = spark.createDataFrame([(1, 30, "A"), (9, 9, "i")], "id bigint, x int, s string")
    (
        dspark.DeltaTable.forPath(spark, ours)
        .alias("t")
        .merge(sdf.alias("s"), "t.id = s.id")
        .whenMatchedUpdate(set={"x": "s.x"})
        .whenNotMatchedInsert(values={"id": "s.id", "x": "s.x", "s": "s.s"})
        .execute()
    )
    sdf.createOrReplaceTempView("gen_src2")
    spark.sql(
        f"MERGE INTO {tw} t USING gen_src2 s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET x = s.x "
        "WHEN NOT MATCHED THEN INSERT (id, x, s) VALUES (s.id, s.x, s.s)"
    )
    assert _rows(spark, ours) == _rows(spark, twin)

    # Delta Spark's own writes on top of deltadv's still work
    spark.sql(f"INSERT INTO delta.`{ours}` (id, x, s) VALUES (8, 8, 'h')")
    spark.sql(f"INSERT INTO {tw} (id, x, s) VALUES (8, 8, 'h')")
    spark.sql(f"UPDATE delta.`{ours}` SET x = 0 WHERE id = 8")
    spark.sql(f"UPDATE {tw} SET x = 0 WHERE id = 8")
    assert _rows(spark, ours) == _rows(spark, twin)


def test_generated_date_parts_and_refused_expressions(delta_spark: Any, tmp_path: Path) -> None:
    import datetime

    spark = delta_spark
    ours, twin = _both(
        spark,
        tmp_path,
        "(d DATE, y INT GENERATED ALWAYS AS (YEAR(d)), "
        "m INT GENERATED ALWAYS AS (month(d)), dd DATE GENERATED ALWAYS AS (CAST(d AS DATE))) "
        "USING delta",
    )
    days = [datetime.date(2024, 2, 29), datetime.date(1999, 12, 31), None]
    write_table(ours, pa.table({"d": pa.array(days, pa.date32())}), mode="append")
    spark.sql(
        f"INSERT INTO delta.`{twin}` (d) VALUES (DATE'2024-02-29'), (DATE'1999-12-31'), (NULL)"
    )
    assert _rows(spark, ours) == _rows(spark, twin)

    # an expression outside deltadv's subset: refused before any file is written
    path = str(tmp_path / "t")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (s STRING, u STRING GENERATED ALWAYS AS (upper(s))) "
        "USING delta"
    )
    before = _version(path)
    with pytest.raises(deltadv.DeltaProtocolError, match=r"column 'u' is a generated column"):
        write_table(path, pa.table({"s": ["a"]}), mode="append")
    assert _version(path) == before
    assert not list(Path(path).glob("*.parquet"))


def test_defaults_on_append_and_merge_insert(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    ours, twin = _both(
        spark,
        tmp_path,
        "(id BIGINT, n INT DEFAULT 42, s STRING DEFAULT 'none') USING delta "
        "TBLPROPERTIES ('delta.feature.allowColumnDefaults' = 'supported')",
    )
    tw = f"delta.`{twin}`"
    write_table(ours, pa.table({"id": pa.array([1, 2], pa.int64())}), mode="append")
    spark.sql(f"INSERT INTO {tw} (id) VALUES (1), (2)")
    write_table(
        ours,
        pa.table({"id": pa.array([3], pa.int64()), "s": ["given"]}),
        mode="append",
    )
    spark.sql(f"INSERT INTO {tw} (id, s) VALUES (3, 'given')")
    assert _rows(spark, ours) == _rows(spark, twin)

    src = pa.table({"id": pa.array([3, 4], pa.int64()), "n": pa.array([7, 8], pa.int32())})
    (
        deltadv.DeltaTable(ours)
        .merge(src, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update({"n": "s.n"})
        .when_not_matched_insert({"id": "s.id"})
        .execute()
    )
    spark.createDataFrame(src.to_pandas()).createOrReplaceTempView("def_src")
    spark.sql(
        f"MERGE INTO {tw} t USING def_src s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET n = s.n "
        "WHEN NOT MATCHED THEN INSERT (id) VALUES (s.id)"
    )
    assert _rows(spark, ours) == _rows(spark, twin)
    assert (4, 42, "none") in _rows(spark, ours)

    # the Spark glue's MERGE insert fills the defaults too
    sdf = spark.createDataFrame([(5, "five")], "id bigint, s string")
    (
        dspark.DeltaTable.forPath(spark, ours)
        .alias("t")
        .merge(sdf.alias("s"), "t.id = s.id")
        .whenNotMatchedInsert(values={"id": "s.id", "s": "s.s"})
        .execute()
    )
    spark.sql(f"INSERT INTO {tw} (id, s) VALUES (5, 'five')")
    assert _rows(spark, ours) == _rows(spark, twin)
    assert (5, 42, "five") in _rows(spark, ours)


def test_identity_columns(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    ours, twin = _both(
        spark,
        tmp_path,
        "(id BIGINT GENERATED ALWAYS AS IDENTITY (START WITH 10 INCREMENT BY 5), v STRING) "
        "USING delta",
    )
    tw = f"delta.`{twin}`"
    write_table(ours, pa.table({"v": ["a", "b", "c"]}), mode="append")
    # one partition: Delta Spark hands out consecutive values in row order
    spark.createDataFrame([("a",), ("b",), ("c",)], "v string").coalesce(1).createOrReplaceTempView(
        "id_src"
    )
    spark.sql(f"INSERT INTO {tw} (v) SELECT v FROM id_src")
    assert _rows(spark, ours) == _rows(spark, twin) == [(10, "a"), (15, "b"), (20, "c")]
    assert _identity_meta(ours, "id")["delta.identity.highWaterMark"] == 20
    assert _identity_meta(twin, "id")["delta.identity.highWaterMark"] == 20

    # GENERATED ALWAYS: explicit values refused by both
    before = _version(ours)
    with pytest.raises(ValueError, match="GENERATED ALWAYS AS IDENTITY column id"):
        write_table(ours, pa.table({"id": pa.array([1], pa.int64()), "v": ["x"]}), mode="append")
    _spark_fails(spark, f"INSERT INTO {tw} VALUES (1, 'x')", "IDENTITY")
    assert _version(ours) == before
    # UPDATE of the identity column refused by both
    with pytest.raises(ValueError, match="IDENTITY column id"):
        deltadv.DeltaTable(ours).update({"id": "id + 1"})
    _spark_fails(spark, f"UPDATE {tw} SET id = id + 1", "IDENTITY")

    # MERGE insert: values continue from the high-water mark
    src = pa.table({"v": ["b", "d"]})
    (
        deltadv.DeltaTable(ours)
        .merge(src, "t.v = s.v", source_alias="s", target_alias="t")
        .when_not_matched_insert({"v": "s.v"})
        .execute()
    )
    spark.sql(f"INSERT INTO {tw} (v) VALUES ('d')")
    assert _rows(spark, ours) == _rows(spark, twin)
    assert (25, "d") in _rows(spark, ours)

    # Delta Spark continues from deltadv's high-water mark, no duplicates;
    # a deltadv DELETE that read the table before it proceeds (a winner that
    # only moved the high-water mark is no conflict for a transaction that
    # leaves the metadata alone, as in Delta Spark)
    stale = deltadv.DeltaTable(ours)
    spark.sql(f"INSERT INTO delta.`{ours}` (v) VALUES ('e')")
    stale.delete("v = 'a'")
    spark.sql(f"INSERT INTO {tw} (v) VALUES ('e')")
    spark.sql(f"DELETE FROM {tw} WHERE v = 'a'")
    assert _rows(spark, ours) == _rows(spark, twin)
    ids = [r[0] for r in _rows(spark, ours)]
    assert len(ids) == len(set(ids)) and max(ids) == 30
    assert _identity_meta(ours, "id")["delta.identity.highWaterMark"] == 30
    # ... while a deltadv append that read it before hands out no duplicate:
    # it conflicts (its metadata update would lose Delta Spark's mark)
    stale = deltadv.DeltaTable(ours)
    spark.sql(f"INSERT INTO delta.`{ours}` (v) VALUES ('f')")
    with pytest.raises(CommitConflictError):
        (
            stale.merge(pa.table({"v": ["g"]}), "t.v = s.v", source_alias="s", target_alias="t")
            .when_not_matched_insert({"v": "s.v"})
            .execute()
        )


def test_identity_concurrent_appends_never_duplicate(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "t")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT GENERATED BY DEFAULT AS IDENTITY, v INT) "
        "USING delta"
    )
    results: list[Any] = []
    barrier = threading.Barrier(4)

    def append(k: int) -> None:
        barrier.wait()
        try:
            write_table(path, pa.table({"v": pa.array([k] * 50, pa.int32())}), mode="append")
            results.append("ok")
        except CommitConflictError as e:
            results.append(e)

    threads = [threading.Thread(target=append, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    landed = results.count("ok")
    assert landed >= 1 and len(results) == 4
    rows = spark.read.format("delta").load(path).collect()
    ids = [r["id"] for r in rows]
    assert len(rows) == 50 * landed
    assert len(ids) == len(set(ids))
    # the committed high-water mark covers every value handed out
    assert _identity_meta(path, "id")["delta.identity.highWaterMark"] == max(ids)


def test_check_constraints_and_not_null(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    ours, twin = _both(
        spark,
        tmp_path,
        "(id BIGINT NOT NULL, n INT, s STRUCT<a: INT NOT NULL, b: STRING>) USING delta",
        "ALTER TABLE {t} ADD CONSTRAINT positive CHECK (n > 0)",
    )
    tw = f"delta.`{twin}`"
    st = pa.struct([pa.field("a", pa.int32(), nullable=False), pa.field("b", pa.string())])

    def data(ids: list[int], ns: list[int | None], ss: list[Any]) -> pa.Table:
        return pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "n": pa.array(ns, pa.int32()),
                "s": pa.array(ss, st),
            }
        )

    write_table(
        ours, data([1, 2], [5, 6], [{"a": 1, "b": "x"}, {"a": 2, "b": None}]), mode="append"
    )
    spark.sql(
        f"INSERT INTO {tw} VALUES (1, 5, named_struct('a', 1, 'b', 'x')), "
        "(2, 6, named_struct('a', 2, 'b', CAST(NULL AS STRING)))"
    )
    assert _rows(spark, ours) == _rows(spark, twin)

    before, files = _version(ours), _files(ours)
    with pytest.raises(ConstraintViolationError) as e:
        write_table(ours, data([3, 4], [7, -1], [{"a": 3}, {"a": 4}]), mode="append")
    msg = str(e.value)
    assert "CHECK constraint positive (n > 0) violated by row with values:" in msg, msg
    assert " - n : -1" in msg, msg
    _spark_fails(
        spark,
        f"INSERT INTO {tw} VALUES (3, 7, named_struct('a', 3, 'b', 'c')), "
        "(4, -1, named_struct('a', 4, 'b', 'd'))",
        "positive",
    )
    # NULL makes the constraint not true: Delta Spark refuses it too
    with pytest.raises(ConstraintViolationError, match="positive"):
        write_table(ours, data([5], [None], [{"a": 5}]), mode="append")
    _spark_fails(
        spark, f"INSERT INTO {tw} VALUES (5, NULL, named_struct('a', 5, 'b', 'e'))", "positive"
    )
    # a NULL struct makes its NOT NULL field NULL: both refuse it
    with pytest.raises(ConstraintViolationError, match=r"column: s\.a"):
        write_table(ours, data([5], [1], [None]), mode="append")
    _spark_fails(spark, f"INSERT INTO {tw} VALUES (5, 1, NULL)", "s.a")
    # nested NOT NULL
    with pytest.raises(
        ConstraintViolationError, match=r"NOT NULL constraint violated for column: s\.a"
    ):
        write_table(
            ours,
            pa.table(
                {
                    "id": pa.array([6], pa.int64()),
                    "n": pa.array([1], pa.int32()),
                    "s": pa.array(
                        [{"a": None, "b": "y"}], pa.struct([("a", pa.int32()), ("b", pa.string())])
                    ),
                }
            ),
            mode="append",
        )
    _spark_fails(
        spark,
        f"INSERT INTO {tw} VALUES (6, 1, named_struct('a', CAST(NULL AS INT), 'b', 'y'))",
        "NOT NULL",
    )
    assert _version(ours) == before and _files(ours) == files

    # UPDATE and MERGE (Python) violating: nothing committed
    table = deltadv.DeltaTable(ours)
    with pytest.raises(ConstraintViolationError, match="positive"):
        table.update({"n": "n - 10"}, "id = 1")
    _spark_fails(spark, f"UPDATE {tw} SET n = n - 10 WHERE id = 1", "positive")
    src = pa.table({"id": pa.array([2], pa.int64()), "n": pa.array([0], pa.int32())})
    with pytest.raises(ConstraintViolationError, match="positive"):
        (
            table.merge(src, "t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_update({"n": "s.n"})
            .execute()
        )
    spark.createDataFrame(src.to_pandas()).createOrReplaceTempView("chk_src")
    _spark_fails(
        spark,
        f"MERGE INTO {tw} t USING chk_src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET n = s.n",
        "positive",
    )
    assert _version(ours) == before and _files(ours) == files

    # Spark glue UPDATE: violating refused, a valid one lands
    dt = dspark.DeltaTable.forPath(spark, ours)
    with pytest.raises(Exception, match="positive"):
        dt.update("id = 2", {"n": "n - 100"})
    assert _version(ours) == before
    dt.update("id = 2", {"n": "n + 100"})
    spark.sql(f"UPDATE {tw} SET n = n + 100 WHERE id = 2")
    assert _rows(spark, ours) == _rows(spark, twin)
    table = deltadv.DeltaTable(ours)
    table.update({"n": "n * 2"}, "id = 1")
    spark.sql(f"UPDATE {tw} SET n = n * 2 WHERE id = 1")
    assert _rows(spark, ours) == _rows(spark, twin)
    # Delta Spark's constraint still enforced on deltadv's table
    _spark_fails(
        spark,
        f"INSERT INTO delta.`{ours}` VALUES (7, 0, named_struct('a', 7, 'b', 'f'))",
        "positive",
    )


def test_identity_explicit_values_leave_the_high_water_mark(
    delta_spark: Any, tmp_path: Path
) -> None:
    """GENERATED BY DEFAULT: values the data gives (append, MERGE insert) are
    written as given and do not move `delta.identity.highWaterMark`; only
    values handed out do (Delta Spark 4.4 tracks the mark of generated values
    only: `ColumnWithDefaultExprUtils.addDefaultExprsOrReturnConstraints`). A
    later insert without the column continues from the mark, in both."""
    spark = delta_spark
    ours, twin = _both(
        spark,
        tmp_path,
        "(id BIGINT GENERATED BY DEFAULT AS IDENTITY (START WITH 10 INCREMENT BY 5), v STRING) "
        "USING delta",
    )
    tw = f"delta.`{twin}`"

    def mark(path: str) -> Any:
        return _identity_meta(path, "id").get("delta.identity.highWaterMark")

    def generated(v: str) -> None:
        write_table(ours, pa.table({"v": [v]}), mode="append")
        spark.createDataFrame([(v,)], "v string").coalesce(1).createOrReplaceTempView("idx_src")
        spark.sql(f"INSERT INTO {tw} (v) SELECT v FROM idx_src")

    # an explicit value before any generated one: no mark in either
    write_table(ours, pa.table({"id": pa.array([100], pa.int64()), "v": ["a"]}), mode="append")
    spark.sql(f"INSERT INTO {tw} VALUES (100, 'a')")
    assert mark(ours) is None and mark(twin) is None
    # the first generated value is the start, not 100 + step
    generated("b")
    assert _rows(spark, ours) == _rows(spark, twin) == [(10, "b"), (100, "a")]
    assert mark(ours) == mark(twin) == 10
    # explicit values above the mark (append, MERGE insert) leave it at 10
    write_table(ours, pa.table({"id": pa.array([1000], pa.int64()), "v": ["c"]}), mode="append")
    spark.sql(f"INSERT INTO {tw} VALUES (1000, 'c')")
    src = pa.table({"id": pa.array([7000], pa.int64()), "v": ["d"]})
    (
        deltadv.DeltaTable(ours)
        .merge(src, "t.v = s.v", source_alias="s", target_alias="t")
        .when_not_matched_insert({"id": "s.id", "v": "s.v"})
        .execute()
    )
    spark.createDataFrame(src.to_pandas()).createOrReplaceTempView("idx_merge")
    spark.sql(
        f"MERGE INTO {tw} t USING idx_merge s ON t.v = s.v "
        "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v)"
    )
    assert mark(ours) == mark(twin) == 10
    # an explicit NULL is written as NULL (no value handed out)
    write_table(ours, pa.table({"id": pa.array([None], pa.int64()), "v": ["n"]}), mode="append")
    spark.sql(f"INSERT INTO {tw} VALUES (NULL, 'n')")
    assert mark(ours) == mark(twin) == 10
    # the next generated value follows the mark in both
    generated("e")
    assert mark(ours) == mark(twin) == 15
    assert _rows(spark, ours) == _rows(spark, twin)
    assert (15, "e") in _rows(spark, ours)


def test_nested_rule_metadata_is_ignored_as_delta_spark_does(
    delta_spark: Any, tmp_path: Path
) -> None:
    """Delta Spark 4.4 declares defaults, generated and identity columns at the
    top level only (its SQL refuses them inside STRUCT<...>), yet its table
    builder and `ALTER COLUMN s.f SET DEFAULT` put such metadata on nested
    fields. Its writes then ignore it: the field keeps the value given (NULL
    when the struct is left out), nothing is computed or checked. deltadv
    writes the same rows."""
    from delta.tables import DeltaTable as SparkDeltaTable
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    spark = delta_spark
    _spark_fails(
        spark,
        f"CREATE TABLE delta.`{tmp_path / 'x'}` "
        "(id INT, s STRUCT<a: INT, b: INT GENERATED ALWAYS AS (id * 2)>) USING delta",
        "PARSE_SYNTAX_ERROR",
    )
    inner = StructType(
        [
            StructField("a", IntegerType()),
            StructField("g", IntegerType(), metadata={"delta.generationExpression": "s.a * 2"}),
            StructField(
                "i",
                LongType(),
                metadata={
                    "delta.identity.start": 1,
                    "delta.identity.step": 1,
                    "delta.identity.allowExplicitInsert": True,
                },
            ),
            StructField("d", IntegerType()),
        ]
    )
    paths = []
    for name in ("ours", "twin"):
        p = str(tmp_path / name)
        (
            SparkDeltaTable.create(spark)
            .location(p)
            .addColumn("id", "INT")
            .addColumn("s", inner)
            .property("delta.feature.allowColumnDefaults", "supported")
            .property("delta.enableDeletionVectors", "true")
            .execute()
        )
        spark.sql(f"ALTER TABLE delta.`{p}` ALTER COLUMN s.d SET DEFAULT 7")
        paths.append(p)
    ours, twin = paths
    nested = json.loads(deltadv.DeltaTable(ours).metadata()["schemaString"])["fields"][1]
    meta = {f["name"]: f["metadata"] for f in nested["type"]["fields"]}
    assert meta["g"]["delta.generationExpression"] == "s.a * 2"
    assert meta["i"]["delta.identity.start"] == 1
    assert meta["d"]["CURRENT_DEFAULT"] == "7"

    st = pa.struct([("a", pa.int32()), ("g", pa.int32()), ("i", pa.int64()), ("d", pa.int32())])
    write_table(
        ours,
        pa.table(
            {
                "id": pa.array([1, 2], pa.int32()),
                "s": pa.array(
                    [
                        {"a": 3, "g": None, "i": None, "d": None},
                        {"a": 3, "g": 99, "i": 5, "d": 1},
                    ],
                    st,
                ),
            }
        ),
        mode="append",
    )
    spark.sql(
        f"INSERT INTO delta.`{twin}` VALUES "
        "(1, named_struct('a', 3, 'g', CAST(NULL AS INT), 'i', CAST(NULL AS BIGINT), "
        "'d', CAST(NULL AS INT))), (2, named_struct('a', 3, 'g', 99, 'i', 5L, 'd', 1))"
    )
    write_table(ours, pa.table({"id": pa.array([3], pa.int32())}), mode="append")
    spark.sql(f"INSERT INTO delta.`{twin}` (id) VALUES (3)")
    assert _rows(spark, ours) == _rows(spark, twin)
    assert _rows(spark, ours)[0][0] == 1 and _rows(spark, ours)[0][1]["g"] is None
    # the nested identity field has no high-water mark in either
    for p in (ours, twin):
        nested = json.loads(deltadv.DeltaTable(p).metadata()["schemaString"])["fields"][1]
        assert "delta.identity.highWaterMark" not in nested["type"]["fields"][2]["metadata"]


def test_timestamp_date_parts_are_taken_in_the_write_time_zone(
    delta_spark: Any, tmp_path: Path
) -> None:
    """YEAR/MONTH/DAY and CAST(.. AS DATE) of a TIMESTAMP depend on a time zone:
    deltadv takes its ``time_zone`` write option (UTC by default), Delta Spark its
    session time zone. With both in UTC they compute the same values; under
    America/Los_Angeles Delta Spark computes others for the same instants, which
    deltadv refuses in UTC (the violation names the zone) and accepts when told
    the same zone (tests/python/test_time_zone_rules.py has the full matrix)."""
    import datetime

    spark = delta_spark
    ddl = (
        "(ts TIMESTAMP, y INT GENERATED ALWAYS AS (YEAR(ts)), "
        "m INT GENERATED ALWAYS AS (MONTH(ts)), dd INT GENERATED ALWAYS AS (DAY(ts)), "
        "d DATE GENERATED ALWAYS AS (CAST(ts AS DATE))) USING delta"
    )
    ours, twin = _both(spark, tmp_path, ddl)
    utc = datetime.timezone.utc
    instants = [
        datetime.datetime(2025, 1, 1, 3, 0, tzinfo=utc),
        datetime.datetime(2024, 3, 1, 5, 0, tzinfo=utc),
        None,
    ]
    write_table(
        ours, pa.table({"ts": pa.array(instants, pa.timestamp("us", tz="UTC"))}), mode="append"
    )
    values = (
        "(TIMESTAMP'2025-01-01 03:00:00+00:00'), (TIMESTAMP'2024-03-01 05:00:00+00:00'), (NULL)"
    )
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    spark.sql(f"INSERT INTO delta.`{twin}` (ts) VALUES {values}")
    assert _rows(spark, ours) == _rows(spark, twin)

    def parts(path: str) -> list[tuple[Any, ...]]:
        rows = spark.read.format("delta").load(path).select("y", "m", "dd", "d").collect()
        return sorted((tuple(r) for r in rows), key=str)

    d = datetime.date
    assert parts(ours) == sorted(
        [(2025, 1, 1, d(2025, 1, 1)), (2024, 3, 1, d(2024, 3, 1)), (None, None, None, None)],
        key=str,
    )
    la = str(tmp_path / "la")
    spark.sql(f"CREATE TABLE delta.`{la}` {ddl}")
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        spark.sql(f"INSERT INTO delta.`{la}` (ts) VALUES {values}")
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert parts(la) == sorted(
        [(2024, 12, 31, d(2024, 12, 31)), (2024, 2, 29, d(2024, 2, 29)), (None, None, None, None)],
        key=str,
    )
    # Los Angeles values (Delta Spark's, read back) given to deltadv in UTC:
    # refused, naming the time zone rule; in Los Angeles: accepted
    la_rows = spark.read.format("delta").load(la).where("ts IS NOT NULL").orderBy("ts")
    la_row = la_rows.collect()[-1]
    given = pa.table(
        {
            "ts": pa.array(instants[:1], pa.timestamp("us", tz="UTC")),
            "y": pa.array([la_row["y"]], pa.int32()),
            "m": pa.array([la_row["m"]], pa.int32()),
            "dd": pa.array([la_row["dd"]], pa.int32()),
            "d": pa.array([la_row["d"]], pa.date32()),
        }
    )
    before = _version(ours)
    with pytest.raises(ConstraintViolationError, match="in time zone UTC") as e:
        write_table(ours, given, mode="append")
    assert "Generated Column (y <=> YEAR(ts))" in str(e.value), str(e.value)
    assert "spark.sql.session.timeZone" in str(e.value)
    assert _version(ours) == before
    write_table(ours, given, mode="append", time_zone="America/Los_Angeles")
    assert _version(ours) == before + 1
