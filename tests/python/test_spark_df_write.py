"""df.write.format("deltadv") (PySpark's Python data source writer) against Delta
Spark 4.4: each write lands in one commit made by deltadv's Rust transaction, and
Delta Spark then reads the table row for row as the twin table its own
df.write.format("delta") wrote with the same mode and data, and shows its history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deltadv import DeltaTable
from deltadv.spark.datasource import register_data_source
from tests.python.dml_tables import delta_history as _history
from tests.python.dml_tables import delta_rows as _rows

SESSION_CONFS = {"spark.databricks.delta.snapshotPartitions": "2"}


@pytest.fixture()
def dspark(delta_spark: Any) -> Any:
    register_data_source(delta_spark)
    return delta_spark


def _data_files(path: Path) -> set[str]:
    return {
        str(p.relative_to(path)) for p in path.rglob("*.parquet") if "_delta_log" not in p.parts
    }


def _df(spark: Any, start: int, end: int, parts: int = 2) -> Any:
    return spark.range(start, end, 1, parts).selectExpr(
        "id", "CAST(id % 3 AS INT) AS p", "concat('s', CAST(id AS STRING)) AS s"
    )


def _both(df: Any, ours: Path, twin: Path, mode: str, **options: str) -> None:
    """The same write through deltadv and through Delta Spark."""
    w = df.write.format("deltadv").mode("overwrite" if mode == "overwrite" else "append")
    if mode in ("error", "ignore"):
        w = w.option("saveMode", mode)
    w.options(**options).save(str(ours))
    t = df.write.format("delta").mode(mode)
    for key, value in options.items():
        t = t.option(key, value) if key != "partitionBy" else t.partitionBy(*value.split(","))
    t.save(str(twin))


def test_create_append_overwrite_match_delta_spark(dspark: Any, tmp_path: Path) -> None:
    spark = dspark
    ours, twin = tmp_path / "ours", tmp_path / "twin"
    _both(_df(spark, 0, 20), ours, twin, "error")
    assert _rows(spark, ours) == _rows(spark, twin)
    assert len(_rows(spark, ours)) == 20
    _both(_df(spark, 20, 30), ours, twin, "append")
    assert _rows(spark, ours) == _rows(spark, twin)
    assert len(_rows(spark, ours)) == 30
    _both(_df(spark, 100, 105, 3), ours, twin, "overwrite")
    assert _rows(spark, ours) == _rows(spark, twin)
    assert [r[0] for r in _rows(spark, ours)] == list(range(100, 105))
    # One commit per write, each recorded as Delta Spark's df.write records it:
    # WRITE with mode ErrorIfExists (the create), Append, Overwrite; partitionBy [].
    history, twin_history = _history(spark, ours), _history(spark, twin)
    assert [v for v, _, _ in history] == [0, 1, 2]
    assert history == twin_history
    assert [h[1] for h in history] == ["WRITE"] * 3
    assert [h[2]["mode"] for h in history] == ["ErrorIfExists", "Append", "Overwrite"]
    # The table was created with deletion vectors (deltadv's default).
    assert (
        DeltaTable(str(ours)).metadata()["configuration"]["delta.enableDeletionVectors"] == "true"
    )


def test_append_creates_the_table_as_delta(dspark: Any, tmp_path: Path) -> None:
    spark = dspark
    ours, twin = tmp_path / "ours", tmp_path / "twin"
    _both(_df(spark, 0, 7), ours, twin, "append")
    assert _rows(spark, ours) == _rows(spark, twin)
    assert len(_rows(spark, ours)) == 7
    # Recorded as Delta Spark's: WRITE, mode Append, on the create too.
    assert _history(spark, ours) == _history(spark, twin)
    assert _history(spark, ours)[0][2]["mode"] == "Append"
    # An overwrite that creates the table: WRITE, mode Overwrite, partitioned.
    ours2, twin2 = tmp_path / "ours2", tmp_path / "twin2"
    _both(_df(spark, 0, 9), ours2, twin2, "overwrite", partitionBy="p")
    assert _rows(spark, ours2) == _rows(spark, twin2)
    assert _history(spark, ours2) == _history(spark, twin2)
    assert _history(spark, ours2)[0][1:] == ("WRITE", {"mode": "Overwrite", "partitionBy": '["p"]'})


def test_merge_schema_and_overwrite_schema_as_delta_spark(dspark: Any, tmp_path: Path) -> None:
    """``mergeSchema`` adds the data's new columns (an append); ``overwriteSchema``
    with an overwrite replaces the schema and the partitioning: the same rows,
    schema, partition columns and history as Delta Spark's df.write."""
    spark = dspark
    ours, twin = tmp_path / "ours", tmp_path / "twin"
    _both(_df(spark, 0, 10), ours, twin, "error", partitionBy="p")
    wider = _df(spark, 10, 16).selectExpr("*", "id * 2 AS extra")
    with pytest.raises(Exception, match="schema evolution"):  # without mergeSchema
        wider.write.format("deltadv").mode("append").save(str(ours))
    assert DeltaTable(str(ours)).version() == 0
    _both(wider, ours, twin, "append", mergeSchema="true")
    assert _rows(spark, ours) == _rows(spark, twin)
    assert len(_rows(spark, ours)) == 16
    assert DeltaTable(str(ours)).schema() == DeltaTable(str(twin)).schema()
    other = spark.range(0, 5, 1, 2).selectExpr("CAST(id AS STRING) AS k", "id AS v")
    _both(other, ours, twin, "overwrite", overwriteSchema="true", partitionBy="k")
    assert _rows(spark, ours) == _rows(spark, twin)
    assert [r[0] for r in _rows(spark, ours)] == [str(i) for i in range(5)]
    assert DeltaTable(str(ours)).schema() == DeltaTable(str(twin)).schema()
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{ours}`").collect()[0]
    assert list(detail["partitionColumns"]) == ["k"]
    assert _history(spark, ours) == _history(spark, twin)


def test_replace_where_partition_by_and_violation(dspark: Any, tmp_path: Path) -> None:
    spark = dspark
    ours, twin = tmp_path / "ours", tmp_path / "twin"
    _both(_df(spark, 0, 30), ours, twin, "error", partitionBy="p")
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{ours}`").collect()[0]
    assert list(detail["partitionColumns"]) == ["p"]
    new = _df(spark, 1000, 1030).where("p = 1")
    _both(new, ours, twin, "overwrite", replaceWhere="p = 1")
    assert _rows(spark, ours) == _rows(spark, twin)
    rows = _rows(spark, ours)
    assert {r[0] for r in rows if r[1] == 1} == {i for i in range(1000, 1030) if i % 3 == 1}
    assert {r[0] for r in rows if r[1] != 1} == {i for i in range(30) if i % 3 != 1}
    h, th = _history(spark, ours)[-1], _history(spark, twin)[-1]
    assert (h[1], h[2]["mode"], h[2]["predicate"]) == (th[1], th[2]["mode"], th[2]["predicate"])
    # A row outside the predicate: nothing committed, no file left behind.
    files, version = _data_files(ours), DeltaTable(str(ours)).version()
    with pytest.raises(Exception, match="replaceWhere"):
        (
            _df(spark, 2000, 2010)
            .write.format("deltadv")
            .mode("overwrite")
            .option("replaceWhere", "p = 1")
            .save(str(ours))
        )
    assert DeltaTable(str(ours)).version() == version
    assert _data_files(ours) == files
    assert _rows(spark, ours) == _rows(spark, twin)


def test_ignore_and_errorifexists_on_existing_table(dspark: Any, tmp_path: Path) -> None:
    spark = dspark
    ours, twin = tmp_path / "ours", tmp_path / "twin"
    _both(_df(spark, 0, 10), ours, twin, "error")
    _both(_df(spark, 50, 60), ours, twin, "ignore")
    assert _rows(spark, ours) == _rows(spark, twin)
    assert DeltaTable(str(ours)).version() == 0
    files = _data_files(ours)
    with pytest.raises(Exception, match="already exists"):
        _df(spark, 50, 60).write.format("deltadv").mode("append").option(
            "saveMode", "errorifexists"
        ).save(str(ours))
    with pytest.raises(Exception, match="already exist"):
        _df(spark, 50, 60).write.format("delta").mode("errorifexists").save(str(twin))
    assert DeltaTable(str(ours)).version() == 0 and _data_files(ours) == files
    # Spark itself refuses these modes to every Python data source, before deltadv runs.
    for mode in ("error", "errorifexists", "ignore"):
        with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
            _df(spark, 0, 1).write.format("deltadv").mode(mode).save(str(ours))
    # DataFrameWriter.partitionBy: Spark refuses it for a Python data source.
    with pytest.raises(Exception, match="partitioning"):
        _df(spark, 0, 1).write.format("deltadv").mode("append").partitionBy("p").save(str(ours))
    assert DeltaTable(str(ours)).version() == 0


def test_table_properties_and_column_mapping(dspark: Any, tmp_path: Path) -> None:
    spark = dspark
    ours, twin = tmp_path / "ours", tmp_path / "twin"
    # Spark lower-cases option keys; the log must hold Delta's spelling.
    props = {"delta.checkpointInterval": "5", "delta.columnMapping.mode": "name"}
    _both(_df(spark, 0, 12, 3), ours, twin, "error", **props)
    assert _rows(spark, ours) == _rows(spark, twin)
    for path in (ours, twin):
        conf = DeltaTable(str(path)).metadata()["configuration"]
        assert {k: conf.get(k) for k in props} == props, path
    schema = json.loads(DeltaTable(str(ours)).metadata()["schemaString"])
    physical = [f["metadata"]["delta.columnMapping.physicalName"] for f in schema["fields"]]
    assert all(name.startswith("col-") for name in physical)
    # Delta Spark renames a column (column mapping at work), then deltadv appends.
    spark.sql(f"ALTER TABLE delta.`{ours}` RENAME COLUMN s TO t")
    spark.sql(f"ALTER TABLE delta.`{twin}` RENAME COLUMN s TO t")
    more = _df(spark, 12, 20).withColumnRenamed("s", "t")
    _both(more, ours, twin, "append")
    assert _rows(spark, ours) == _rows(spark, twin)
    assert len(_rows(spark, ours)) == 20
    # An unknown delta.* property is refused, as Delta Spark refuses it.
    with pytest.raises(Exception, match="unknown table property"):
        _df(spark, 0, 1).write.format("deltadv").mode("append").option(
            "delta.noSuchThing", "1"
        ).save(str(tmp_path / "other"))


def test_failed_task_leaves_no_commit_and_no_files(dspark: Any, tmp_path: Path) -> None:
    spark = dspark
    from pyspark.sql.functions import udf

    ours = tmp_path / "ours"
    _df(spark, 0, 10).write.format("deltadv").mode("append").save(str(ours))
    files = _data_files(ours)

    @udf("long")
    def boom(x: int) -> int:
        if x == 399:  # the last partition fails once the others have written their files
            import time

            time.sleep(4)  # (a task still running when the job fails is killed, see below)
            raise ValueError("boom in one task")
        return x

    df = (
        spark.range(0, 400, 1, 4)
        .select(boom("id").alias("id"))
        .selectExpr("id", "CAST(id % 3 AS INT) AS p", "concat('s', CAST(id AS STRING)) AS s")
    )
    # The tasks that finished wrote files; abort() removes them, the failed task
    # removed its own. (A task Spark kills mid-write may leave its files: the
    # module docs say when.)
    for target in (ours, tmp_path / "new"):
        with pytest.raises(Exception, match="boom in one task"):
            df.write.format("deltadv").mode("append").save(str(target))
    assert DeltaTable(str(ours)).version() == 0
    assert _data_files(ours) == files
    assert not (tmp_path / "new" / "_delta_log").exists()
    assert _data_files(tmp_path / "new") == set()
    assert [r[0] for r in _rows(spark, ours)] == list(range(10))


def test_replace_where_reads_timestamps_in_the_session_time_zone(
    dspark: Any, tmp_path: Path
) -> None:
    spark = dspark
    ours, twin = tmp_path / "ours", tmp_path / "twin"
    # Hours around midnight in Los Angeles (08:00 UTC); the literal has no offset.
    base = "TIMESTAMP '2024-01-01 00:00:00 UTC'"

    def hours(start: int, end: int) -> Any:
        return spark.range(start, end, 1, 2).selectExpr(
            "id", f"{base} + make_interval(0, 0, 0, 0, CAST(id AS INT), 0, 0) AS ts"
        )

    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        _both(hours(0, 16), ours, twin, "error")
        # Before midnight in Los Angeles: hours 0..7 UTC. Hours 8.. would violate it.
        cut = "ts < TIMESTAMP '2024-01-01 00:00:00'"
        _both(
            hours(100, 108).selectExpr("id", "ts - INTERVAL 100 HOURS AS ts"),
            ours,
            twin,
            "overwrite",
            replaceWhere=cut,
        )
        assert _rows(spark, ours) == _rows(spark, twin)
        assert sorted(r[0] for r in _rows(spark, ours)) == list(range(8, 16)) + list(
            range(100, 108)
        )
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")


def _first_commit(path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The protocol and the configuration of a table's version 0, from its log."""
    actions = [json.loads(line) for line in (path / "_delta_log" / f"{0:020}.json").open()]
    protocol = next(a["protocol"] for a in actions if "protocol" in a)
    configuration = next(a["metaData"] for a in actions if "metaData" in a)["configuration"]
    return protocol, configuration


def test_feature_properties_go_to_the_protocol_as_delta_spark(dspark: Any, tmp_path: Path) -> None:
    """``delta.feature.<name>=supported`` (any case, as Spark lower-cases it) asks
    the new table's protocol for the feature and is not kept in its configuration,
    as Delta Spark's own write does."""
    spark = dspark
    ours, twin = tmp_path / "ours", tmp_path / "twin"
    # DVs on in both (deltadv's create turns them on by default, Delta Spark's not).
    props = {
        "delta.feature.allowColumnDefaults": "supported",
        "delta.enableDeletionVectors": "true",
    }
    _both(_df(spark, 0, 6), ours, twin, "error", **props)
    (p_ours, c_ours), (p_twin, c_twin) = _first_commit(ours), _first_commit(twin)
    assert "allowColumnDefaults" in p_twin["writerFeatures"]
    assert "allowColumnDefaults" in p_ours["writerFeatures"]
    assert set(p_ours["writerFeatures"]) == set(p_twin["writerFeatures"])
    assert set(p_ours.get("readerFeatures") or []) == set(p_twin.get("readerFeatures") or [])
    assert not any(k.startswith("delta.feature.") for k in {**c_ours, **c_twin})
    # Delta Spark then uses the feature on our table as on its own.
    for path in (ours, twin):
        spark.sql(f"ALTER TABLE delta.`{path}` ALTER COLUMN s SET DEFAULT 'dflt'")
        spark.sql(f"INSERT INTO delta.`{path}` (id, p) VALUES (100, 1)")
    assert _rows(spark, ours) == _rows(spark, twin)
    with pytest.raises(Exception, match="unknown table property"):
        _df(spark, 0, 1).write.format("deltadv").mode("append").option(
            "delta.feature.noSuchFeature", "supported"
        ).save(str(tmp_path / "other"))
