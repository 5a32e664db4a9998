"""Generated columns and CHECK constraints that read a TIMESTAMP's date parts
depend on a time zone: Delta Spark 4.4 takes them in ``spark.sql.session.timeZone``,
deltadv in its ``time_zone`` write option (the Spark glue passes the session's).
Tables are created by Delta Spark; each write deltadv makes is repeated by Delta
Spark, under a session in the same zone, on a twin table, and the two must read
the same row for row (the expected values are Delta Spark's, never deltadv's)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltadv
from deltadv import spark as dspark
from deltadv.exceptions import ConstraintViolationError
from deltadv.write import write_table

LA = "America/Los_Angeles"
ZONE_KEY = "spark.sql.session.timeZone"

# Generated columns reading the zone (and one that does not: NTZ-free id).
DDL = (
    "(id BIGINT, ts TIMESTAMP, "
    "d DATE GENERATED ALWAYS AS (CAST(ts AS DATE)), "
    "h INT GENERATED ALWAYS AS (HOUR(ts)), "
    "y INT GENERATED ALWAYS AS (YEAR(ts))) USING delta"
)


@contextlib.contextmanager
def _session_zone(spark: Any, zone: str) -> Iterator[None]:
    """The shared session in `zone` for the block, restored after."""
    before = spark.conf.get(ZONE_KEY)
    spark.conf.set(ZONE_KEY, zone)
    try:
        yield
    finally:
        spark.conf.set(ZONE_KEY, before)


def _rows(spark: Any, path: str) -> list[tuple[Any, ...]]:
    with _session_zone(spark, "UTC"):
        df = spark.read.format("delta").load(path)
        cols = sorted(df.columns)
        rows = [tuple(r[c] for c in cols) for r in df.collect()]
    return sorted(rows, key=lambda row: [(v is not None, v) for v in row])


def _both(spark: Any, tmp_path: Path, ddl: str) -> tuple[str, str]:
    paths = []
    for name in ("ours", "twin"):
        p = str(tmp_path / name)
        spark.sql(f"CREATE TABLE delta.`{p}` {ddl}")
        spark.sql(
            f"ALTER TABLE delta.`{p}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
        )
        paths.append(p)
    return paths[0], paths[1]


def _instants(*iso: str) -> pa.Array:
    import datetime

    return pa.array([datetime.datetime.fromisoformat(t) for t in iso], pa.timestamp("us", tz="UTC"))


def _hours(spark: Any, path: str) -> dict[int, int]:
    with _session_zone(spark, "UTC"):
        return {r["id"]: r["h"] for r in spark.read.format("delta").load(path).collect()}


def test_python_writes_in_a_time_zone_match_delta_spark(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    ours, twin = _both(spark, tmp_path, DDL)
    tw = f"delta.`{twin}`"

    # append: 03:00Z on Jan 1st is 19:00 on Dec 31st in Los Angeles
    data = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "ts": _instants(
                "2025-01-01T03:00:00+00:00",
                "2024-03-10T09:30:00+00:00",
                "2024-07-01T12:00:00+00:00",
            ),
        }
    )
    write_table(ours, data, mode="append", time_zone=LA)
    with _session_zone(spark, LA):
        spark.sql(
            f"INSERT INTO {tw} (id, ts) VALUES "
            "(1, TIMESTAMP'2025-01-01 03:00:00+00:00'), "
            "(2, TIMESTAMP'2024-03-10 09:30:00+00:00'), "
            "(3, TIMESTAMP'2024-07-01 12:00:00+00:00')"
        )
    assert _rows(spark, ours) == _rows(spark, twin)
    # the zone mattered: in UTC the first row's hour would be 3
    assert _hours(spark, twin)[1] != 3

    # UPDATE with a literal without an offset (a wall clock reading in the zone)
    deltadv.DeltaTable(ours).update(
        {"ts": "TIMESTAMP '2024-11-03 01:30:00'"}, "id = 1", time_zone=LA
    )
    with _session_zone(spark, LA):
        spark.sql(f"UPDATE {tw} SET ts = TIMESTAMP '2024-11-03 01:30:00' WHERE id = 1")
    assert _rows(spark, ours) == _rows(spark, twin)

    # UPDATE whose predicate reads the zone
    deltadv.DeltaTable(ours).update({"id": "id + 10"}, "HOUR(ts) = 1", time_zone=LA)
    with _session_zone(spark, LA):
        spark.sql(f"UPDATE {tw} SET id = id + 10 WHERE HOUR(ts) = 1")
    assert _rows(spark, ours) == _rows(spark, twin)

    # MERGE: a matched update and an insert, generated columns computed
    src = pa.table(
        {
            "id": pa.array([2, 4], pa.int64()),
            "ts": _instants("2024-12-31T23:59:59+00:00", "2024-01-01T07:59:00+00:00"),
        }
    )
    (
        deltadv.DeltaTable(ours)
        .merge(src, "t.id = s.id", source_alias="s", target_alias="t", time_zone=LA)
        .when_matched_update({"ts": "s.ts"})
        .when_not_matched_insert({"id": "s.id", "ts": "s.ts"})
        .execute()
    )
    with _session_zone(spark, LA):
        spark.sql(
            f"MERGE INTO {tw} t USING (SELECT 2L AS id, "
            "TIMESTAMP'2024-12-31 23:59:59+00:00' AS ts UNION ALL SELECT 4L, "
            "TIMESTAMP'2024-01-01 07:59:00+00:00') s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET ts = s.ts "
            "WHEN NOT MATCHED THEN INSERT (id, ts) VALUES (s.id, s.ts)"
        )
    assert _rows(spark, ours) == _rows(spark, twin)

    # DELETE with a predicate that reads the zone
    deltadv.DeltaTable(ours).delete("YEAR(ts) = 2023", time_zone=LA)
    with _session_zone(spark, LA):
        spark.sql(f"DELETE FROM {tw} WHERE YEAR(ts) = 2023")
    assert _rows(spark, ours) == _rows(spark, twin)

    # Delta Spark's own write on top, in its session zone
    with _session_zone(spark, LA):
        for t in (f"delta.`{ours}`", tw):
            spark.sql(f"INSERT INTO {t} (id, ts) VALUES (9, TIMESTAMP'2025-06-01 02:00:00+00:00')")
    assert _rows(spark, ours) == _rows(spark, twin)


def test_check_constraint_reading_the_zone_fails_as_in_delta_spark(
    delta_spark: Any, tmp_path: Path
) -> None:
    spark = delta_spark
    ours, twin = _both(spark, tmp_path, "(id BIGINT, ts TIMESTAMP) USING delta")
    for p in (ours, twin):
        spark.sql(f"ALTER TABLE delta.`{p}` ADD CONSTRAINT evening CHECK (HOUR(ts) >= 12)")
    row = pa.table({"id": pa.array([1], pa.int64()), "ts": _instants("2025-01-01T03:00:00+00:00")})
    values = "(1, TIMESTAMP'2025-01-01 03:00:00+00:00')"

    # 03:00 in UTC: both refuse, nothing committed
    before = deltadv.DeltaTable(ours).version()
    with pytest.raises(ConstraintViolationError, match="CHECK constraint evening"):
        write_table(ours, row, mode="append")
    with _session_zone(spark, "UTC"), pytest.raises(Exception, match="evening"):
        spark.sql(f"INSERT INTO delta.`{twin}` (id, ts) VALUES {values}")
    assert deltadv.DeltaTable(ours).version() == before

    # 19:00 in Los Angeles: both accept
    write_table(ours, row, mode="append", time_zone=LA)
    with _session_zone(spark, LA):
        spark.sql(f"INSERT INTO delta.`{twin}` (id, ts) VALUES {values}")
    assert _rows(spark, ours) == _rows(spark, twin)
    assert len(_rows(spark, ours)) == 1

    # a fixed offset: 03:00Z is 08:30 at +05:30, refused by both
    with pytest.raises(ConstraintViolationError, match="CHECK constraint evening"):
        write_table(ours, row, mode="append", time_zone="+05:30")
    with _session_zone(spark, "+05:30"), pytest.raises(Exception, match="evening"):
        spark.sql(f"INSERT INTO delta.`{twin}` (id, ts) VALUES {values}")
    assert _rows(spark, ours) == _rows(spark, twin)


def test_unknown_time_zone_is_refused_before_writing(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    data = pa.table({"id": pa.array([1], pa.int64())})
    write_table(path, data)
    table = deltadv.DeltaTable(path)
    files = set(table.files())
    with pytest.raises(ValueError, match='unknown time zone "Mars/Olympus"'):
        write_table(path, data, mode="append", time_zone="Mars/Olympus")
    with pytest.raises(ValueError, match="unknown time zone"):
        table.update({"id": "2"}, time_zone="Mars/Olympus")
    with pytest.raises(ValueError, match="unknown time zone"):
        table.delete("id = 1", time_zone="Mars/Olympus")
    table = deltadv.DeltaTable(path)
    assert table.version() == 0
    assert set(table.files()) == files
    assert sorted(p.name for p in tmp_path.joinpath("t").glob("*.parquet")) == sorted(
        Path(f).name for f in files
    )


def test_spark_glue_writes_in_the_session_time_zone(delta_spark: Any, tmp_path: Path) -> None:
    """UPDATE, MERGE and append through the Spark glue on a session in Los
    Angeles: Spark computes the generated values in the session zone and
    deltadv's writer checks them in the same zone (no refusal)."""
    spark = delta_spark
    ours, twin = _both(spark, tmp_path, DDL)
    tw = f"delta.`{twin}`"
    with _session_zone(spark, LA):
        df = spark.sql(
            "SELECT 1L AS id, TIMESTAMP'2025-01-01 03:00:00+00:00' AS ts UNION ALL "
            "SELECT 2L, TIMESTAMP'2024-03-10 09:30:00+00:00'"
        )
        dspark.write_table(df, ours, mode="append")
        spark.sql(
            f"INSERT INTO {tw} (id, ts) VALUES (1, TIMESTAMP'2025-01-01 03:00:00+00:00'), "
            "(2, TIMESTAMP'2024-03-10 09:30:00+00:00')"
        )
    assert _rows(spark, ours) == _rows(spark, twin)
    assert _hours(spark, twin)[1] == 19  # Delta Spark's own value, read back

    with _session_zone(spark, LA):
        dspark.DeltaTable.forPath(spark, ours).update(
            "id = 1", {"ts": "TIMESTAMP'2024-06-30 22:15:00'"}
        )
        spark.sql(f"UPDATE {tw} SET ts = TIMESTAMP'2024-06-30 22:15:00' WHERE id = 1")
    assert _rows(spark, ours) == _rows(spark, twin)

    with _session_zone(spark, LA):
        sdf = spark.sql(
            "SELECT 2L AS id, TIMESTAMP'2024-12-31 23:59:59+00:00' AS ts UNION ALL "
            "SELECT 5L, TIMESTAMP'2024-01-01 07:59:00+00:00'"
        )
        (
            dspark.DeltaTable.forPath(spark, ours)
            .alias("t")
            .merge(sdf.alias("s"), "t.id = s.id")
            .whenMatchedUpdate(set={"ts": "s.ts"})
            .whenNotMatchedInsert(values={"id": "s.id", "ts": "s.ts"})
            .execute()
        )
        sdf.createOrReplaceTempView("tz_src")
        spark.sql(
            f"MERGE INTO {tw} t USING tz_src s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET ts = s.ts "
            "WHEN NOT MATCHED THEN INSERT (id, ts) VALUES (s.id, s.ts)"
        )
    assert _rows(spark, ours) == _rows(spark, twin)

    # DELETE: files are pruned with the literal read in the session zone
    # (08:00Z here; read in UTC, the file of id 5 at 07:59Z would be skipped)
    with _session_zone(spark, LA):
        cond = "ts < '2024-01-01 00:00:00'"
        dspark.DeltaTable.forPath(spark, ours).delete(cond)
        spark.sql(f"DELETE FROM {tw} WHERE {cond}")
    assert _rows(spark, ours) == _rows(spark, twin)
    assert 5 not in _hours(spark, twin)
    assert spark.conf.get(ZONE_KEY) == "UTC"


def test_replace_where_reads_the_zone(delta_spark: Any, tmp_path: Path) -> None:
    """``mode="overwrite"`` with ``predicate`` (replaceWhere): the rows replaced
    and the check of the new rows read the literal in the write's zone."""
    spark = delta_spark
    ours, twin = _both(spark, tmp_path, "(id BIGINT, ts TIMESTAMP) USING delta")
    for p in (ours, twin):
        spark.sql(
            f"INSERT INTO delta.`{p}` VALUES (1, TIMESTAMP'2024-01-01 07:59:00+00:00'), "
            "(2, TIMESTAMP'2024-01-01 09:00:00+00:00')"
        )
    cond = "ts < '2024-01-01 00:00:00'"  # 08:00Z in Los Angeles
    new = pa.table({"id": pa.array([3], pa.int64()), "ts": _instants("2023-06-01T00:00:00+00:00")})
    write_table(ours, new, mode="overwrite", predicate=cond, time_zone=LA)
    with _session_zone(spark, LA):
        (
            spark.sql("SELECT 3L AS id, TIMESTAMP'2023-06-01 00:00:00+00:00' AS ts")
            .write.format("delta")
            .mode("overwrite")
            .option("replaceWhere", cond)
            .save(twin)
        )
    assert _rows(spark, ours) == _rows(spark, twin)
    assert sorted(r[0] for r in _rows(spark, twin)) == [2, 3]
