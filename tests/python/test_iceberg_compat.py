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


def test_partitioned_iceberg_compat_tables_get_partition_values_in_files(
    delta_spark: Any, tmp_path: Path
) -> None:
    """IcebergCompatV2 requires partition values materialized in every data file:
    deltadv's appended file holds the partition column as Delta Spark's own INSERT
    wrote it (physical name, field id)."""
    import pyarrow.parquet as pq

    spark = delta_spark
    path = str(tmp_path / "p")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, s STRING) USING delta PARTITIONED BY (s) {PROPS}"
    )
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 'a')")
    (spark_file,) = spark.read.format("delta").load(path).inputFiles()
    write_table(path, _data([(2, "b")]), mode="append")
    assert _rows(spark, path) == [(1, "a"), (2, "b")]
    spark.catalog.clearCache()
    files = set(spark.read.format("delta").load(path).inputFiles())
    (ours,) = files - {spark_file}

    def fields(uri: str) -> dict[str, bytes]:
        schema = pq.read_schema(uri.removeprefix("file://"))
        return {f.name: f.metadata[b"PARQUET:field_id"] for f in schema}

    assert fields(ours) == fields(spark_file)
    assert len(fields(ours)) == 2
    assert pq.read_table(ours.removeprefix("file://")).column(1).to_pylist() == ["b"]


# --- IcebergCompatV3 (Delta's protocol_rfcs/iceberg-compat-v3.md) -----------------

V3 = {"delta.enableIcebergCompatV3": "true"}
#: Iceberg's reserved field ids the RFC gives the materialized row tracking columns
ROW_ID_FIELD_ID = 2147483540
ROW_COMMIT_VERSION_FIELD_ID = 2147483539
#: rows of several files and partitions (deltadv's SQL has no %)
UPDATED = "id = 5 OR id = 9 OR id = 13 OR id = 17 OR id = 101"


def _pdata(rows: list[tuple[int, str, str]]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "s": pa.array([r[1] for r in rows], pa.string()),
            "p": pa.array([r[2] for r in rows], pa.string()),
        }
    )


def _triples(table: pa.Table) -> list[tuple[Any, ...]]:
    return list(zip(*(table[c].to_pylist() for c in ["id", "s", "p"]), strict=True))


def _log(path: str) -> list[dict[str, Any]]:
    return [
        action
        for commit in sorted((Path(path) / "_delta_log").glob("*.json"))
        for action in map(json.loads, commit.read_text().splitlines())
    ]


def _latest(path: str, kind: str) -> dict[str, Any]:
    return [a[kind] for a in _log(path) if kind in a][-1]


def _check_v3_files(spark: Any, path: str) -> dict[str, int]:
    """Every live data file (as Delta Spark lists them) against the RFC, read with
    pyarrow: each table column (partition columns too) under its physical name with
    its column-mapping id, materialized row tracking columns with Iceberg's reserved
    ids. Returns how many files hold each kind of column."""
    import pyarrow.parquet as pq

    metadata = _latest(path, "metaData")
    conf = metadata["configuration"]
    expected = {
        f["metadata"]["delta.columnMapping.physicalName"]: f["metadata"]["delta.columnMapping.id"]
        for f in json.loads(metadata["schemaString"])["fields"]
    }
    expected[conf["delta.rowTracking.materializedRowIdColumnName"]] = ROW_ID_FIELD_ID
    expected[conf["delta.rowTracking.materializedRowCommitVersionColumnName"]] = (
        ROW_COMMIT_VERSION_FIELD_ID
    )
    tracking = set(list(expected)[-2:])
    counts = {"files": 0, "tracking": 0}
    spark.catalog.clearCache()
    files = spark.read.format("delta").load(path).inputFiles()
    assert files
    for uri in files:
        schema = pq.read_schema(uri.removeprefix("file://"))
        got = {f.name: int(f.metadata[b"PARQUET:field_id"]) for f in schema}
        assert {f.name for f in schema if not f.metadata} == set(), (uri, schema)
        for name, field_id in got.items():
            assert expected.get(name) == field_id, (uri, name, field_id)
        table_columns = set(expected) - tracking
        assert table_columns <= set(got), (uri, got)  # partition column materialized
        counts["files"] += 1
        if tracking & set(got):
            assert tracking <= set(got), (uri, got)
            counts["tracking"] += 1
    return counts


def test_a_deltadv_iceberg_compat_v3_table(delta_spark: Any, tmp_path: Path) -> None:
    """A V3 table deltadv creates (partitioned, DVs on) gets column mapping, row
    tracking and the feature; append, DELETE (DVs), UPDATE, MERGE, PURGE, OPTIMIZE
    and RESTORE by deltadv keep the RFC's rules in every file, rows and row ids as
    Delta Spark reads them; Delta Spark writes on top."""
    from tests.python.dml_tables import spark_row_ids

    spark = delta_spark
    path = str(tmp_path / "v3")
    rows = [(i, f"s{i}", "ab"[i % 2]) for i in range(20)]
    write_table(path, _pdata(rows), partition_by=["p"], configuration=V3, rows_per_file=5)
    protocol = _latest(path, "protocol")
    assert (protocol["minReaderVersion"], protocol["minWriterVersion"]) == (3, 7)
    for f in ["columnMapping", "deletionVectors", "rowTracking", "domainMetadata"]:
        assert f in protocol["writerFeatures"], protocol
    assert "icebergCompatV3" in protocol["writerFeatures"], protocol
    assert "icebergCompatV3" not in protocol["readerFeatures"], protocol
    conf = _latest(path, "metaData")["configuration"]
    assert conf["delta.enableIcebergCompatV3"] == "true"
    assert conf["delta.columnMapping.mode"] == "name"
    assert conf["delta.enableRowTracking"] == "true"
    assert conf["delta.enableDeletionVectors"] == "true"
    model = {r[0]: r for r in rows}

    def check(step: str) -> None:
        spark.catalog.clearCache()
        got = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
        assert got == sorted(model.values()), step
        ours = deltadv.DeltaTable(path).to_pyarrow_table()
        assert sorted(_triples(ours)) == got, step
        _check_v3_files(spark, path)

    check("create")
    write_table(path, _pdata([(100, "x", "a"), (101, "y", "c")]), mode="append")
    model.update({100: (100, "x", "a"), 101: (101, "y", "c")})
    check("append")
    table = deltadv.DeltaTable(path)
    table.delete("id < 3")
    model = {i: r for i, r in model.items() if i >= 3}
    check("delete")
    before = spark_row_ids(spark, path)
    table.update({"s": "'u'"}, UPDATED)
    for i in [5, 9, 13, 17, 101]:
        model[i] = (i, "u", model[i][2])
    check("update")
    after = spark_row_ids(spark, path)
    # updated rows keep their row ids (Delta Spark's _metadata.row_id)
    assert {i: r[0] for i, r in after.items()} == {i: r[0] for i, r in before.items()}
    (
        table.merge(_pdata([(6, "m", "a"), (200, "n", "b")]), "t.id = s.id", "s", "t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    model.update({6: (6, "m", "a"), 200: (200, "n", "b")})
    check("merge")
    merged = spark_row_ids(spark, path)
    assert merged[6][0] == after[6][0]
    assert table.purge()["num_removed_files"] > 0
    check("purge")
    assert {i: r[:2] for i, r in spark_row_ids(spark, path).items()} == {
        i: r[:2] for i, r in merged.items()
    }
    counts = _check_v3_files(spark, path)
    # the rewrites wrote the materialized row tracking columns, with their ids
    assert counts["tracking"] > 0, counts
    table.optimize()
    check("optimize")
    restored_to = table.version() - 2
    table.restore(restored_to)
    spark.catalog.clearCache()
    assert sorted(tuple(r) for r in spark.read.format("delta").load(path).collect()) == sorted(
        tuple(r)
        for r in spark.read.format("delta").option("versionAsOf", restored_to).load(path).collect()
    )
    # every add deltadv wrote has numRecords and the tag Delta Spark writes
    for a in _log(path):
        if "add" in a:
            assert "numRecords" in json.loads(a["add"]["stats"]), a
            assert a["add"]["tags"]["ICEBERG_COMPAT_VERSION"] == "3", a
    # Delta Spark's own writes on top
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (300, 'z', 'b')")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 4")
    spark.catalog.clearCache()
    got = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    ours = deltadv.DeltaTable(path).to_pyarrow_table()
    assert sorted(_triples(ours)) == got
    assert (300, "z", "b") in got and 4 not in {r[0] for r in got}


def test_iceberg_compat_v3_settings_that_conflict_are_refused(tmp_path: Path) -> None:
    data = _pdata([(1, "a", "a")])
    for extra, says in [
        ({"delta.columnMapping.mode": "none"}, "columnMapping.mode=none"),
        ({"delta.enableRowTracking": "false"}, "enableRowTracking=false"),
        ({"delta.enableIcebergCompatV2": "true"}, "only one Iceberg compatibility"),
    ]:
        path = tmp_path / next(iter(extra)).replace(".", "_")
        with pytest.raises(ValueError, match=says):
            write_table(str(path), data, configuration={**V3, **extra})
        assert not (path / "_delta_log").exists()
    # V2 forbids deletion vectors, which write_table turns on by default
    with pytest.raises(ValueError, match="enable_deletion_vectors=False"):
        write_table(
            str(tmp_path / "v2"), data, configuration={"delta.enableIcebergCompatV2": "true"}
        )


def test_deltadv_writes_a_delta_spark_iceberg_compat_v3_table(
    delta_spark: Any, tmp_path: Path
) -> None:
    """Delta Spark 4.4 creates the V3 table (it adds column mapping and row tracking
    itself); deltadv's append, DELETE, UPDATE, MERGE and PURGE keep the RFC's rules
    in the files they write, and Delta Spark reads the rows and row ids."""
    from tests.python.dml_tables import spark_row_ids

    spark = delta_spark
    path = str(tmp_path / "spark-v3")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, s STRING, p STRING) USING delta "
        "PARTITIONED BY (p) TBLPROPERTIES ('delta.enableIcebergCompatV3'='true', "
        "'delta.enableDeletionVectors'='true')"
    )
    spark.sql(
        f"INSERT INTO delta.`{path}` "
        "SELECT id, concat('s', id), IF(id % 2 = 0, 'a', 'b') FROM range(20)"
    )
    protocol = _latest(path, "protocol")
    assert {"icebergCompatV3", "rowTracking", "columnMapping"} <= set(protocol["writerFeatures"])
    spark_tags = {json.dumps(a["add"]["tags"]) for a in _log(path) if "add" in a}
    model = {i: (i, f"s{i}", "ab"[i % 2]) for i in range(20)}

    def check(step: str) -> None:
        spark.catalog.clearCache()
        got = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
        assert got == sorted(model.values()), step

    write_table(path, _pdata([(100, "x", "a"), (101, "y", "c")]), mode="append")
    model.update({100: (100, "x", "a"), 101: (101, "y", "c")})
    check("append")
    table = deltadv.DeltaTable(path)
    table.delete("id < 3")
    model = {i: r for i, r in model.items() if i >= 3}
    check("delete")
    before = spark_row_ids(spark, path)
    table.update({"s": "'u'"}, UPDATED)
    for i in [5, 9, 13, 17, 101]:
        model[i] = (i, "u", model[i][2])
    check("update")
    assert {i: r[0] for i, r in spark_row_ids(spark, path).items()} == {
        i: r[0] for i, r in before.items()
    }
    (
        table.merge(_pdata([(6, "m", "a"), (200, "n", "b")]), "t.id = s.id", "s", "t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    model.update({6: (6, "m", "a"), 200: (200, "n", "b")})
    check("merge")
    table.purge()
    check("purge")
    counts = _check_v3_files(spark, path)
    assert counts["tracking"] > 0, counts
    # deltadv's files carry the tag Delta Spark's INSERT wrote
    ours = {json.dumps(a["add"]["tags"]) for a in _log(path) if "add" in a}
    assert spark_tags == {'{"ICEBERG_COMPAT_VERSION": "3"}'} == ours, (spark_tags, ours)
    spark.sql(f"UPDATE delta.`{path}` SET s = 'w' WHERE id = 7")
    model[7] = (7, "w", "b")
    check("Delta Spark on top")
    assert _check_v3_files(spark, path)["files"] > 0


def test_copy_on_write_on_an_iceberg_compat_v3_table(delta_spark: Any, tmp_path: Path) -> None:
    """A V3 table without deletion vectors: copy-on-write DELETE and UPDATE copy the
    rows with their row ids into the materialized columns, which carry Iceberg's
    reserved field ids; Delta Spark reads the same rows and ids."""
    from tests.python.dml_tables import spark_row_ids

    spark = delta_spark
    path = str(tmp_path / "v3-cow")
    rows = [(i, f"s{i}", "ab"[i % 2]) for i in range(12)]
    write_table(
        path, _pdata(rows), partition_by=["p"], configuration=V3, enable_deletion_vectors=False
    )
    assert "deletionVectors" not in _latest(path, "protocol")["writerFeatures"]
    before = spark_row_ids(spark, path)
    table = deltadv.DeltaTable(path)
    table.delete("id = 3", allow_copy_on_write=True)
    table.update({"s": "'u'"}, "id = 4", allow_copy_on_write=True)
    after = spark_row_ids(spark, path)
    assert {i: r[0] for i, r in after.items()} == {i: r[0] for i, r in before.items() if i != 3}
    assert after[4][2] == "u"
    counts = _check_v3_files(spark, path)
    assert counts["tracking"] == counts["files"] >= 2, counts
    for commit in sorted((Path(path) / "_delta_log").glob("*.json")):
        assert '"deletionVector"' not in commit.read_text(), commit.name


def test_delta_spark_reads_a_table_with_its_iceberg_mirror(
    delta_spark: Any, tmp_path: Path
) -> None:
    """The Iceberg mirror of a UniForm table (written by each deltadv commit) is only
    under ``metadata/``: Delta Spark reads the V3 table with DVs as before the
    mirror, at every version, and writes on top; the mirror then follows its commit."""
    spark = delta_spark
    path = str(tmp_path / "v3-mirror")
    rows = [(i, f"s{i}", "ab"[i % 2]) for i in range(20)]
    uniform = {**V3, "delta.universalFormat.enabledFormats": "iceberg"}
    write_table(path, _pdata(rows), partition_by=["p"], configuration=uniform)
    table = deltadv.DeltaTable(path)
    assert table.delete("id IN (0, 3, 6, 9, 12, 15, 18)")["iceberg_error"] is None
    report = deltadv.DeltaTable(path).sync_iceberg()
    assert (report["delta_version"], report["snapshot_id"]) == (1, None)  # mirrored already
    assert (Path(path) / "metadata" / "version-hint.text").exists()
    want = sorted(r for r in rows if r[0] % 3 != 0)
    got = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    assert got == want
    old = spark.read.format("delta").option("versionAsOf", 0).load(path).collect()
    assert sorted(tuple(r) for r in old) == sorted(rows)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 1")
    report = deltadv.DeltaTable(path).sync_iceberg()
    assert (report["previous_delta_version"], report["delta_version"]) == (1, 2)
    assert sorted(_triples(deltadv.DeltaTable(path).to_pyarrow_table())) == [
        r for r in want if r[0] != 1
    ]
