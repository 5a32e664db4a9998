"""Writes on IcebergCompatV2 tables Delta Spark 4.4 created (UniForm Iceberg
enabled): appends, and DELETE/UPDATE/MERGE by copy-on-write (the tables forbid
deletion vectors), read back by Delta Spark row for row; the rules deltadv
cannot keep are refused with nothing committed. Expected rows come from a model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltadv
from deltadv.exceptions import DeltaProtocolError
from deltadv.write import write_table

PROPS = (
    "TBLPROPERTIES ('delta.enableIcebergCompatV2'='true', "
    "'delta.columnMapping.mode'='name', "
    "'delta.universalFormat.enabledFormats'='iceberg')"
)


def _rows(spark: Any, path: str) -> list[tuple[int, str]]:
    return sorted((r.id, r.s) for r in spark.read.format("delta").load(path).collect())


def _add_tags(path: str) -> list[list[str]]:
    """Per commit, the tags of its add actions (sorted JSON)."""
    return [
        sorted(
            json.dumps(a["add"].get("tags"), sort_keys=True)
            for a in map(json.loads, commit.read_text().splitlines())
            if "add" in a
        )
        for commit in sorted((Path(path) / "_delta_log").glob("*.json"))
    ]


def _data(rows: list[tuple[int, str]]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "s": pa.array([r[1] for r in rows], pa.string()),
        }
    )


def test_writes_on_an_iceberg_compat_v2_table(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, s STRING) USING delta {PROPS}")
    spark.sql(f"INSERT INTO delta.`{path}` SELECT id, CAST(id AS STRING) FROM range(20)")
    model = {i: (i, str(i)) for i in range(20)}

    def check(step: str) -> None:
        assert _rows(spark, path) == sorted(model.values()), step

    write_table(path, _data([(100, "a"), (101, "b")]), mode="append")
    model.update({100: (100, "a"), 101: (101, "b")})
    check("append")
    table = deltadv.DeltaTable(path)
    version = table.version()
    # no DVs on IcebergCompatV2: refused unless copy-on-write is allowed
    with pytest.raises(DeltaProtocolError, match=r"icebergCompatV2.*allow_copy_on_write"):
        table.delete("id < 5")
    with pytest.raises(DeltaProtocolError, match="icebergCompatV2"):
        table.enable_deletion_vectors()
    table.update_incremental()
    assert table.version() == version
    table.delete("id < 5", allow_copy_on_write=True)
    model = {i: r for i, r in model.items() if i >= 5}
    check("delete")
    table.update({"s": "'u'"}, "id = 7", allow_copy_on_write=True)
    model[7] = (7, "u")
    check("update")
    (
        table.merge(
            _data([(8, "m"), (200, "n")]), "t.id = s.id", "s", "t", allow_copy_on_write=True
        )
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    model.update({8: (8, "m"), 200: (200, "n")})
    check("merge")
    table.optimize()
    check("optimize")
    # no DV anywhere, every version readable, the properties kept
    for commit in sorted((Path(path) / "_delta_log").glob("*.json")):
        assert '"deletionVector"' not in commit.read_text(), commit.name
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    for v in range(len(history)):
        spark.read.format("delta").option("versionAsOf", v).load(path).count()
    props = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0].properties
    assert props["delta.enableIcebergCompatV2"] == "true"
    # Delta Spark's own DML on top
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 9")
    model.pop(9)
    check("Delta Spark on top")
    # every new file carries ICEBERG_COMPAT_VERSION as Delta Spark's own
    # (its INSERT in version 1, its copy-on-write DELETE last) carry it
    tags = _add_tags(path)
    spark_tags = {*tags[1], *tags[-1]}
    assert spark_tags == {'{"ICEBERG_COMPAT_VERSION": "2"}'}, spark_tags
    ours = tags[2:-1]
    assert len(ours) == 5 and all(ours), ours
    assert {t for commit in ours for t in commit} == spark_tags, ours


def test_iceberg_compat_v1_files_carry_no_version_tag(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "v1")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, s STRING) USING delta TBLPROPERTIES "
        "('delta.enableIcebergCompatV1'='true', 'delta.columnMapping.mode'='name')"
    )
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 'a')")
    write_table(path, _data([(2, "b")]), mode="append")
    assert _add_tags(path)[1:] == [["null"], ["null"]]
    assert _rows(spark, path) == [(1, "a"), (2, "b")]


def test_partitioned_iceberg_compat_tables_refuse_new_files(
    delta_spark: Any, tmp_path: Path
) -> None:
    spark = delta_spark
    path = str(tmp_path / "p")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, s STRING) USING delta PARTITIONED BY (s) {PROPS}"
    )
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 'a')")
    with pytest.raises(DeltaProtocolError, match="partition values"):
        write_table(path, _data([(2, "b")]), mode="append")
    assert _rows(spark, path) == [(1, "a")]
