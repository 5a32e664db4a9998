"""write_table's overwrite, replaceWhere (``predicate=``), ignore and schema evolution
(``schema_mode``), checked against Delta Spark 4.4: tables created by Delta Spark (with
deletion vectors before the write) and by deltadv, written by deltadv, read back by Delta
Spark at every version, and compared with the same write done by Delta Spark on a twin
table (operation, operationParameters, metric names, rows)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltadv
from deltadv.exceptions import DeltaProtocolError, TableAlreadyExistsError
from deltadv.write import write_table

from .dml_tables import N, create_table, initial_model, table_files

Rows = list[tuple[Any, ...]]


def _spark_rows(spark: Any, path: str, version: int | None = None) -> Rows:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    df = reader.load(path)
    cols = sorted(df.columns)
    rows = [tuple(r[c] for c in cols) for r in df.select(*cols).collect()]
    # NULLs first in each column (None never compared with a value).
    return sorted(rows, key=lambda t: tuple((x is not None, x) for x in t))


def _commit(path: str, version: int) -> list[dict[str, Any]]:
    log = Path(path) / "_delta_log" / f"{version:020d}.json"
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _commit_info(path: str, version: int) -> dict[str, Any]:
    return next(a["commitInfo"] for a in _commit(path, version) if "commitInfo" in a)


def _latest(path: str) -> int:
    return deltadv.DeltaTable(path).version()


def _history(spark: Any, path: str) -> dict[int, tuple[str, dict[str, str]]]:
    rows = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    return {r["version"]: (r["operation"], dict(r["operationParameters"])) for r in rows}


def _new_rows(ids: range, part: int | None = None) -> pa.Table:
    """Rows shaped like `create_table`'s (id, part, s, n)."""
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "part": pa.array([part if part is not None else i % 3 for i in ids], pa.int64()),
            "s": [f"new{i}" for i in ids],
            "n": pa.array([i * 10 for i in ids], pa.int64()),
        }
    )


def _spark_twins(spark: Any, tmp_path: Path) -> tuple[str, str]:
    """Two identical Delta Spark tables with DVs (ids % 7 == 0 deleted by Spark)."""
    paths = []
    for name in ("ours", "theirs"):
        p = str(tmp_path / name)
        create_table(spark, p, mapped=False)
        spark.sql(f"DELETE FROM delta.`{p}` WHERE id % 7 = 0")
        paths.append(p)
    return paths[0], paths[1]


def _compare_commits(ours: str, theirs: str, version: int) -> None:
    """Same operation and parameters, same metric names, as Delta Spark's twin commit."""
    a, b = _commit_info(ours, version), _commit_info(theirs, version)
    assert a["operation"] == b["operation"]
    assert a["operationParameters"] == b["operationParameters"]
    assert set(a["operationMetrics"]) == set(b["operationMetrics"])
    assert a["isBlindAppend"] == b["isBlindAppend"]


def test_overwrite_replaces_every_row_like_delta_spark(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    ours, theirs = _spark_twins(spark, tmp_path)
    v0 = _latest(ours)
    before = {k: v for k, v in deltadv.DeltaTable(ours).deletion_vectors().items()}
    assert before, "the Spark DELETE left deletion vectors"
    data = _new_rows(range(5000, 5100))
    write_table(ours, data, mode="overwrite")
    spark.createDataFrame(data.to_pandas()).write.format("delta").mode("overwrite").save(theirs)

    assert _latest(ours) == v0 + 1
    _compare_commits(ours, theirs, v0 + 1)
    metrics = _commit_info(ours, v0 + 1)["operationMetrics"]
    assert metrics["numOutputRows"] == "100"
    # Every live file removed, each with its DV descriptor (a tombstone for VACUUM).
    removes = [a["remove"] for a in _commit(ours, v0 + 1) if "remove" in a]
    assert int(metrics["numRemovedFiles"]) == len(removes) > 0
    with_dv = {r["path"] for r in removes if r.get("deletionVector")}
    assert len(with_dv) == len(before)
    want = sorted((i, i * 10, i % 3, f"new{i}") for i in range(5000, 5100))
    assert _spark_rows(spark, ours) == want == _spark_rows(spark, theirs)
    for v in range(v0 + 2):
        assert _spark_rows(spark, ours, v) == _spark_rows(spark, theirs, v), v
    assert _history(spark, ours)[v0 + 1][0] == "WRITE"
    assert _history(spark, ours)[v0 + 1][1]["mode"].strip('"') == "Overwrite"

    # VACUUM (lite: from the log's tombstones) deletes the old data and DV files.
    dv_files_before = {f for f in table_files(Path(ours)) if f.startswith("deletion_vector_")}
    assert dv_files_before
    deltadv.DeltaTable(ours).vacuum(
        retention_hours=0, dry_run=False, enforce_retention_duration=False, full=False
    )
    left = table_files(Path(ours))
    assert not (left & dv_files_before)
    assert {f for f in left if f.endswith(".parquet")} == set(deltadv.DeltaTable(ours).files())

    # Delta Spark's own DML on top.
    spark.sql(f"DELETE FROM delta.`{ours}` WHERE id < 5010")
    spark.sql(f"UPDATE delta.`{ours}` SET n = -1 WHERE id = 5050")
    rows = _spark_rows(spark, ours)
    assert len(rows) == 90 and (5050, -1, 5050 % 3, "new5050") in rows


def test_replace_where_on_spark_table_like_delta_spark(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    ours, theirs = _spark_twins(spark, tmp_path)
    v0 = _latest(ours)
    # `n` is a data column: the predicate cuts files (deltadv: DVs).
    pred = "n >= 1000 AND n < 1500"
    data = _new_rows(range(1000, 1500, 2))
    data = data.set_column(3, "n", pa.array(list(range(1000, 1500, 2)), pa.int64()))
    write_table(ours, data, mode="overwrite", predicate=pred)
    (
        spark.createDataFrame(data.to_pandas())
        .write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", pred)
        .save(theirs)
    )
    _compare_commits(ours, theirs, v0 + 1)
    info = _commit_info(ours, v0 + 1)
    assert info["operationParameters"]["predicate"] == pred
    model = {k: r for k, r in initial_model().items() if k % 7 != 0}
    deleted = [k for k, r in model.items() if 1000 <= r["n"] < 1500]
    for k in deleted:
        del model[k]
    assert info["operationMetrics"]["numDeletedRows"] == str(len(deleted))
    for i in range(1000, 1500, 2):
        model[i] = {"id": i, "part": i % 3, "s": f"new{i}", "n": i}
    want = sorted((r["id"], r["n"], r["part"], r["s"]) for r in model.values())
    assert _spark_rows(spark, ours) == want == _spark_rows(spark, theirs)
    # deltadv cut the files with deletion vectors rather than rewriting them.
    adds = [a["add"] for a in _commit(ours, v0 + 1) if "add" in a]
    assert any(a.get("deletionVector") for a in adds)
    assert info["operationMetrics"]["numCopiedRows"] == "0"
    for v in range(v0 + 2):
        assert _spark_rows(spark, ours, v) == _spark_rows(spark, theirs, v), v
    spark.sql(f"UPDATE delta.`{ours}` SET s = 'x' WHERE n >= 1000 AND n < 1010")
    spark.sql(f"DELETE FROM delta.`{ours}` WHERE id = 1002")
    assert len(_spark_rows(spark, ours)) == len(want) - 1


def test_replace_where_by_partition_removes_whole_files(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("part", pa.int64()), ("s", pa.string())])
    base = pa.table(
        {"id": list(range(300)), "part": [i % 3 for i in range(300)], "s": ["a"] * 300},
        schema=schema,
    )
    write_table(path, base, partition_by=["part"])
    deltadv.DeltaTable(path).delete("id < 30")
    new = pa.table({"id": [1000, 1001], "part": [1, 1], "s": ["b", "b"]}, schema=schema)
    write_table(path, new, mode="overwrite", predicate="part = 1")
    actions = _commit(path, 2)
    removes = [a["remove"] for a in actions if "remove" in a]
    adds = [a["add"] for a in actions if "add" in a]
    # The part=1 file goes whole (with its DV descriptor); only the new file is added.
    assert len(removes) == 1 and removes[0]["partitionValues"] == {"part": "1"}
    assert removes[0].get("deletionVector")
    assert len(adds) == 1 and adds[0]["partitionValues"] == {"part": "1"}
    want = sorted(
        [(i, i % 3, "a") for i in range(30, 300) if i % 3 != 1] + [(1000, 1, "b"), (1001, 1, "b")]
    )
    assert _spark_rows(spark, path) == sorted((r[0], r[1], r[2]) for r in want)
    assert _history(spark, path)[2][1]["predicate"].strip('"') == "part = 1"


def test_replace_where_violation_commits_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": [1, 2, 3], "s": ["a", "b", "c"]}))
    files = table_files(Path(path))
    bad = pa.table({"id": [5, 50], "s": ["x", None]})
    with pytest.raises(ValueError, match="id < 10"):
        write_table(path, bad, mode="overwrite", predicate="id < 10")
    # NULL does not satisfy the predicate either (Delta Spark's constraint check).
    with pytest.raises(ValueError, match="s = 'x'"):
        write_table(path, bad.slice(0, 2), mode="overwrite", predicate="s = 'x'")
    assert _latest(path) == 0
    assert table_files(Path(path)) == files


def test_replace_where_on_table_without_dvs_rewrites_files(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": list(range(10))}), enable_deletion_vectors=False)
    write_table(path, pa.table({"id": [100]}), mode="overwrite", predicate="id >= 5")
    t = deltadv.DeltaTable(path)
    assert sorted(t.to_pyarrow_table().column("id").to_pylist()) == [0, 1, 2, 3, 4, 100]
    assert t.deletion_vectors() == {}
    assert _commit_info(path, 1)["operationMetrics"]["numCopiedRows"] == "5"


def test_overwrite_creates_and_ignore_skips(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": [1]}), mode="overwrite")
    assert _latest(path) == 0
    assert _commit_info(path, 0)["operation"] == "CREATE TABLE AS SELECT"
    write_table(path, pa.table({"id": [2]}), mode="ignore")
    assert _latest(path) == 0
    assert deltadv.DeltaTable(path).to_pyarrow_table().column("id").to_pylist() == [1]
    write_table(str(tmp_path / "u"), pa.table({"id": [3]}), mode="ignore")
    assert _latest(str(tmp_path / "u")) == 0
    with pytest.raises(TableAlreadyExistsError):
        write_table(path, pa.table({"id": [2]}))


def test_invalid_combinations_are_clear_errors(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": [1]}))
    with pytest.raises(ValueError, match='only allowed with mode="overwrite"'):
        write_table(path, pa.table({"id": [2]}), mode="append", predicate="id = 1")
    with pytest.raises(ValueError, match='schema_mode="overwrite" is only allowed'):
        write_table(path, pa.table({"id": [2]}), mode="append", schema_mode="overwrite")
    with pytest.raises(ValueError, match="cannot be used with a predicate"):
        write_table(
            path, pa.table({"id": [2]}), mode="overwrite", schema_mode="overwrite", predicate="id=1"
        )
    with pytest.raises(ValueError, match="schema_mode"):
        write_table(path, pa.table({"id": [2]}), mode="append", schema_mode="bogus")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode"):
        write_table(path, pa.table({"id": [2]}), mode="bogus")  # type: ignore[arg-type]
    # A type change is refused by a merge; nothing committed.
    with pytest.raises(ValueError, match="'id' is long in the table and string in the data"):
        write_table(path, pa.table({"id": ["x"]}), mode="append", schema_mode="merge")
    assert _latest(path) == 0


def test_schema_merge_append_like_delta_spark(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    ours, theirs = _spark_twins(spark, tmp_path)
    v0 = _latest(ours)
    # New column `extra`, and `s` missing: null.
    data = pa.table(
        {
            "id": pa.array([9000, 9001], pa.int64()),
            "part": pa.array([0, 1], pa.int64()),
            "n": pa.array([1, 2], pa.int64()),
            "extra": ["e0", "e1"],
        }
    )
    write_table(ours, data, mode="append", schema_mode="merge")
    (
        spark.createDataFrame(data.to_pandas())
        .write.format("delta")
        .mode("append")
        .option("mergeSchema", "true")
        .save(theirs)
    )
    _compare_commits(ours, theirs, v0 + 1)
    schema_ours = spark.read.format("delta").load(ours).schema
    assert schema_ours == spark.read.format("delta").load(theirs).schema
    assert [f.name for f in schema_ours.fields] == ["id", "part", "s", "n", "extra"]
    assert _spark_rows(spark, ours) == _spark_rows(spark, theirs)
    rows = _spark_rows(spark, ours)
    # (extra, id, n, part, s): old rows get a null `extra`, new rows a null `s`.
    assert (None, 1, 1, 1, "v1") in rows
    assert ("e0", 9000, 1, 0, None) in rows
    assert ("e1", 9001, 2, 1, None) in rows
    assert len(rows) == len([k for k in range(N) if k % 7 != 0]) + 2
    # Overwrite with a merge: schema kept and widened again.
    more = pa.table(
        {"id": pa.array([1], pa.int64()), "part": pa.array([1], pa.int64()), "z": [1.5]}
    )
    write_table(ours, more, mode="overwrite", schema_mode="merge")
    df = spark.read.format("delta").load(ours)
    assert [f.name for f in df.schema.fields] == ["id", "part", "s", "n", "extra", "z"]
    assert _spark_rows(spark, ours) == [(None, 1, None, 1, None, 1.5)]
    assert _commit_info(ours, v0 + 2)["operationParameters"]["canMergeSchema"] is True
    spark.sql(f"ALTER TABLE delta.`{ours}` ADD COLUMNS (w INT)")
    spark.sql(f"UPDATE delta.`{ours}` SET w = 3")
    assert spark.read.format("delta").load(ours).collect()[0]["w"] == 3


def test_schema_overwrite_like_delta_spark(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    ours, theirs = _spark_twins(spark, tmp_path)
    v0 = _latest(ours)
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "w": ["a", "b"]})
    write_table(ours, data, mode="overwrite", schema_mode="overwrite")
    (
        spark.createDataFrame(data.to_pandas())
        .write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .save(theirs)
    )
    _compare_commits(ours, theirs, v0 + 1)
    for p in (ours, theirs):
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{p}`").collect()[0]
        assert list(detail["partitionColumns"]) == []
    assert spark.read.format("delta").load(ours).schema == (
        spark.read.format("delta").load(theirs).schema
    )
    assert _spark_rows(spark, ours) == [(1, "a"), (2, "b")] == _spark_rows(spark, theirs)
    # Repartitioned by partition_by.
    write_table(ours, data, mode="overwrite", schema_mode="overwrite", partition_by=["w"])
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{ours}`").collect()[0]
    assert list(detail["partitionColumns"]) == ["w"]
    assert _spark_rows(spark, ours, v0) == _spark_rows(spark, theirs, v0)


def _mapped_data(ids: range) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "s": pa.array(
                [{"x": i, "y": f"y{i}"} for i in ids],
                pa.struct([("x", pa.int32()), ("y", pa.string())]),
            ),
            "arr": pa.array([[{"z": i}] for i in ids], pa.list_(pa.struct([("z", pa.int32())]))),
            "part": [f"p{i % 2}" for i in ids],
        }
    )


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapped_create_like_delta_spark(delta_spark: Any, tmp_path: Path, mode: str) -> None:
    import pyarrow.parquet as pq

    spark = delta_spark
    path = str(tmp_path / "t")
    write_table(
        path,
        _mapped_data(range(20)),
        partition_by=["part"],
        configuration={"delta.columnMapping.mode": mode},
    )
    actions = _commit(path, 0)
    meta = next(a["metaData"] for a in actions if "metaData" in a)
    proto = next(a["protocol"] for a in actions if "protocol" in a)
    # Delta Spark 4.4: ids in pre-order (a struct before its fields, struct fields
    # inside arrays too), maxColumnId, protocol 3/7 with columnMapping in both lists.
    assert meta["configuration"]["delta.columnMapping.maxColumnId"] == "7"
    assert (proto["minReaderVersion"], proto["minWriterVersion"]) == (3, 7)
    assert "columnMapping" in proto["readerFeatures"] and "columnMapping" in proto["writerFeatures"]
    schema = json.loads(meta["schemaString"])
    f = {x["name"]: x for x in schema["fields"]}
    ids = {
        "id": f["id"]["metadata"]["delta.columnMapping.id"],
        "s": f["s"]["metadata"]["delta.columnMapping.id"],
        "x": f["s"]["type"]["fields"][0]["metadata"]["delta.columnMapping.id"],
        "y": f["s"]["type"]["fields"][1]["metadata"]["delta.columnMapping.id"],
        "arr": f["arr"]["metadata"]["delta.columnMapping.id"],
        "z": f["arr"]["type"]["elementType"]["fields"][0]["metadata"]["delta.columnMapping.id"],
        "part": f["part"]["metadata"]["delta.columnMapping.id"],
    }
    assert ids == {"id": 1, "s": 2, "x": 3, "y": 4, "arr": 5, "z": 6, "part": 7}
    physical = {n: x["metadata"]["delta.columnMapping.physicalName"] for n, x in f.items()}
    assert all(p.startswith("col-") for p in physical.values())
    # The data files use the physical names and carry the field ids.
    data_file = next(Path(path).rglob("*.parquet"))
    file_schema = pq.read_schema(data_file)
    assert file_schema.names == [physical["id"], physical["s"], physical["arr"]]
    assert file_schema.field(physical["id"]).metadata[b"PARQUET:field_id"] == b"1"
    assert file_schema.field(physical["s"]).type.field(0).metadata[b"PARQUET:field_id"] == b"3"

    def rows() -> Rows:
        df = spark.read.format("delta").load(path)
        cols = ["id", "s.x", "s.y", "arr[0].z", "part"] + [
            c for c in df.columns if c not in ("id", "s", "arr", "part")
        ]
        return sorted(tuple(r) for r in df.selectExpr(*cols).collect())

    assert rows() == sorted((i, i, f"y{i}", i, f"p{i % 2}") for i in range(20))
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
    assert detail["properties"]["delta.columnMapping.mode"] == mode
    assert list(detail["partitionColumns"]) == ["part"]
    # Delta Spark's own DML and ALTER on top.
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id < 2")
    spark.sql(f"UPDATE delta.`{path}` SET id = id + 100 WHERE id = 2")
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (w INT)")
    # deltadv append with a schema merge: `extra` gets id 9 (after Spark's `w`, 8).
    more = _mapped_data(range(50, 52)).append_column("extra", pa.array(["e0", "e1"]))
    write_table(path, more, mode="append", schema_mode="merge")
    t = deltadv.DeltaTable(path)
    v = t.version()
    meta = next(a["metaData"] for a in _commit(path, v) if "metaData" in a)
    extra = next(x for x in json.loads(meta["schemaString"])["fields"] if x["name"] == "extra")
    assert extra["metadata"]["delta.columnMapping.id"] == 9
    assert meta["configuration"]["delta.columnMapping.maxColumnId"] == "9"
    # MERGE with schema evolution adds `more` (id 10).
    src = pa.table({"id": pa.array([3, 60], pa.int64()), "part": ["p1", "p0"], "more": [1.5, 2.5]})
    (
        t.merge(src, "t.id = s.id", "s", "t", merge_schema=True)
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    meta = next(a["metaData"] for a in _commit(path, v + 1) if "metaData" in a)
    assert meta["configuration"]["delta.columnMapping.maxColumnId"] == "10"
    want = [(i, i, f"y{i}", i, f"p{i % 2}", None, None, None) for i in range(4, 20)]
    want += [(102, 2, "y2", 2, "p0", None, None, None), (3, 3, "y3", 3, "p1", None, None, 1.5)]
    want += [(i, i, f"y{i}", i, f"p{i % 2}", None, f"e{i - 50}", None) for i in (50, 51)]
    want += [(60, None, None, None, "p0", None, None, 2.5)]
    assert rows() == sorted(want)  # ids are unique: None never compared


def _protocol_of(path: str, version: int) -> dict[str, Any] | None:
    found = [a["protocol"] for a in _commit(path, version) if "protocol" in a]
    if not found:
        return None
    (p,) = found
    return {k: sorted(v) if isinstance(v, list) else v for k, v in p.items()}


@pytest.mark.parametrize("dvs", [False, True])
def test_schema_evolution_adding_timestamp_ntz_as_delta_spark(
    delta_spark: Any, tmp_path: Path, dvs: bool
) -> None:
    """A timestamp_ntz column added by an append with schema_mode="merge" and by
    MERGE schema evolution, as Delta Spark 4.4 does it: refused
    (DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT, nothing committed) while the table
    lacks the timestampNtz feature, from 1/2 and from 3/7 with deletionVectors;
    once the feature is enabled, the same writes commit with no protocol change,
    equal to Delta Spark's twin writes, and Delta Spark writes on top."""
    spark = delta_spark
    props = " TBLPROPERTIES ('delta.enableDeletionVectors'='true')" if dvs else ""
    paths = {}
    for name in ("append_ours", "append_theirs", "merge_ours", "merge_theirs"):
        paths[name] = str(tmp_path / name)
        spark.sql(f"CREATE TABLE delta.`{paths[name]}` (id BIGINT, s STRING) USING delta{props}")
        spark.sql(f"INSERT INTO delta.`{paths[name]}` VALUES (1, 'a'), (2, 'b')")
    new = "SELECT 3L AS id, 'c' AS s, TIMESTAMP_NTZ'2024-01-02 03:04:05' AS ts"
    data = pa.table(
        {
            "id": pa.array([3], pa.int64()),
            "s": ["c"],
            "ts": pa.array([datetime(2024, 1, 2, 3, 4, 5)], pa.timestamp("us")),
        }
    )

    def ours_append() -> None:
        write_table(paths["append_ours"], data, mode="append", schema_mode="merge")

    def theirs_append() -> None:
        spark.sql(new).write.format("delta").mode("append").option("mergeSchema", "true").save(
            paths["append_theirs"]
        )

    def ours_merge() -> None:
        (
            deltadv.DeltaTable(paths["merge_ours"])
            .merge(data, "t.id = s.id", "s", "t", merge_schema=True, allow_copy_on_write=True)
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )

    def theirs_merge() -> None:
        spark.sql(
            f"MERGE WITH SCHEMA EVOLUTION INTO delta.`{paths['merge_theirs']}` t "
            f"USING ({new}) s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
        )

    refusal = "DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT"
    for ours, theirs in ((ours_append, theirs_append), (ours_merge, theirs_merge)):
        with pytest.raises(DeltaProtocolError, match=refusal):
            ours()
        with pytest.raises(Exception, match=refusal):
            theirs()
    for path in paths.values():
        assert _latest(path) == 1, path
        spark.sql(
            f"ALTER TABLE delta.`{path}` "
            "SET TBLPROPERTIES ('delta.feature.timestampNtz'='supported')"
        )
    ours_append()
    theirs_append()
    ours_merge()
    theirs_merge()
    for kind in ("append", "merge"):
        ours, theirs = paths[f"{kind}_ours"], paths[f"{kind}_theirs"]
        assert _latest(ours) == _latest(theirs) == 3, kind
        assert _protocol_of(ours, 3) is None and _protocol_of(theirs, 3) is None, kind
        assert _spark_rows(spark, ours) == _spark_rows(spark, theirs), kind
        assert (3, "c", datetime(2024, 1, 2, 3, 4, 5)) in [
            (r.id, r.s, r.ts) for r in spark.read.format("delta").load(ours).collect()
        ]
        spark.sql(f"INSERT INTO delta.`{ours}` VALUES (4, 'd', TIMESTAMP_NTZ'2025-01-01 00:00:00')")
        assert spark.read.format("delta").load(ours).count() == 4, kind
