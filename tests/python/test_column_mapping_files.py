"""A column-mapped table created by distributed writers: ``prepare_create`` decides the
physical names and field ids once, several ``write_files`` calls (Spark tasks) write files
with them, one ``commit_files`` (the driver) creates the table. Checked against Delta Spark
4.4: ids and maxColumnId as Delta Spark assigns them to the same schema, files with physical
names and parquet field ids, rows read back by Delta Spark, Delta Spark DML on top."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltadv.exceptions import DeltaDVError
from deltadv.write import commit_files, prepare_create, write_files

Rows = list[tuple[Any, ...]]


def _data(ids: range) -> pa.Table:
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


def _log(path: str, version: int) -> list[dict[str, Any]]:
    text = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _mapping(path: str) -> tuple[dict[str, int], dict[str, str], str]:
    """Ids and physical names by field path, and maxColumnId, of version 0."""
    meta = next(a["metaData"] for a in _log(path, 0) if "metaData" in a)
    ids: dict[str, int] = {}
    names: dict[str, str] = {}

    def walk(fields: list[dict[str, Any]], prefix: str) -> None:
        for f in fields:
            name = prefix + f["name"]
            ids[name] = f["metadata"]["delta.columnMapping.id"]
            names[name] = f["metadata"]["delta.columnMapping.physicalName"]
            t = f["type"]
            if isinstance(t, dict) and t.get("type") == "array":
                t = t["elementType"]
            if isinstance(t, dict) and t.get("type") == "struct":
                walk(t["fields"], name + ".")

    walk(json.loads(meta["schemaString"])["fields"], "")
    return ids, names, meta["configuration"]["delta.columnMapping.maxColumnId"]


def _rows(spark: Any, path: str) -> Rows:
    df = spark.read.format("delta").load(path)
    return sorted(tuple(r) for r in df.selectExpr("id", "s.x", "s.y", "arr[0].z", "part").collect())


@pytest.mark.parametrize("mode", ["name", "id"])
def test_distributed_create_of_a_column_mapped_table(
    delta_spark: Any, tmp_path: Path, mode: str
) -> None:
    spark = delta_spark
    conf = {"delta.columnMapping.mode": mode}
    schema = _data(range(1)).schema
    path = str(tmp_path / "ours")
    table_schema = prepare_create(schema, configuration=conf)
    adds: list[dict[str, Any]] = []
    for chunk in (range(0, 7), range(7, 15), range(15, 20)):
        adds += write_files(
            path,
            _data(chunk),
            schema=schema,
            partition_by=["part"],
            configuration=conf,
            table_schema=table_schema,
        )
    assert len(adds) >= 3
    assert (
        commit_files(
            path, adds, partition_by=["part"], configuration=conf, table_schema=table_schema
        )
        == 0
    )

    # Delta Spark's own table with the same schema: the ids it assigns, its maxColumnId.
    theirs = str(tmp_path / "theirs")
    spark.sql(
        f"CREATE TABLE delta.`{theirs}` (id BIGINT, s STRUCT<x: INT, y: STRING>, "
        f"arr ARRAY<STRUCT<z: INT>>, part STRING) USING delta PARTITIONED BY (part) "
        f"TBLPROPERTIES ('delta.columnMapping.mode' = '{mode}')"
    )
    our_ids, physical, our_max = _mapping(path)
    their_ids, their_physical, their_max = _mapping(theirs)
    assert (our_ids, our_max) == (their_ids, their_max)
    assert set(physical) == set(their_physical)
    assert all(p.startswith("col-") for p in physical.values())
    assert len(set(physical.values())) == len(physical)
    proto = next(a["protocol"] for a in _log(path, 0) if "protocol" in a)
    assert "columnMapping" in proto["readerFeatures"]
    assert "columnMapping" in proto["writerFeatures"]

    # Every file (from every writer) uses the committed physical names and ids.
    files = sorted(Path(path).rglob("*.parquet"))
    assert len(files) == len(adds)
    for f in files:
        fs = pq.read_schema(f)
        assert fs.names == [physical["id"], physical["s"], physical["arr"]]
        assert fs.field(physical["id"]).metadata[b"PARQUET:field_id"] == str(our_ids["id"]).encode()
        inner = fs.field(physical["s"]).type
        assert inner.field(0).name == physical["s.x"]
        assert inner.field(0).metadata[b"PARQUET:field_id"] == str(our_ids["s.x"]).encode()
    for a in adds:
        assert set(a["partitionValues"]) == {physical["part"]}

    assert _rows(spark, path) == sorted((i, i, f"y{i}", i, f"p{i % 2}") for i in range(20))
    # Delta Spark's DML on top.
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id < 3")
    spark.sql(f"UPDATE delta.`{path}` SET id = id + 100 WHERE id = 5")
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (w INT)")
    spark.sql(
        f"INSERT INTO delta.`{path}` VALUES "
        "(50, named_struct('x', 50, 'y', 'y50'), array(named_struct('z', 50)), 'p0', 1)"
    )
    want = [(i, i, f"y{i}", i, f"p{i % 2}") for i in range(3, 20) if i != 5]
    want += [(105, 5, "y5", 5, "p1"), (50, 50, "y50", 50, "p0")]
    assert _rows(spark, path) == sorted(want)


def test_column_mapped_create_by_files_needs_the_prepared_schema(tmp_path: Path) -> None:
    conf = {"delta.columnMapping.mode": "name"}
    data = _data(range(3))
    path = str(tmp_path / "t")
    # Physical names decided per writer would differ: refused, nothing written.
    with pytest.raises(ValueError, match="prepare_create"):
        write_files(path, data, configuration=conf)
    assert not list(Path(path).rglob("*.parquet"))
    table_schema = prepare_create(data.schema, configuration=conf)
    adds = write_files(path, data, configuration=conf, table_schema=table_schema)
    with pytest.raises(ValueError, match="prepare_create"):
        commit_files(path, adds, schema=data.schema, configuration=conf)
    # The prepared schema without the configuration that asked for column mapping.
    adds = write_files(path, data, configuration=conf, table_schema=table_schema)
    with pytest.raises(ValueError, match=r"delta\.columnMapping\.mode"):
        commit_files(path, adds, table_schema=table_schema)
    assert not (Path(path) / "_delta_log" / f"{0:020d}.json").exists()
    # Ids that repeat are refused.
    doubled = json.loads(table_schema)
    doubled["fields"][1]["metadata"]["delta.columnMapping.id"] = doubled["fields"][0]["metadata"][
        "delta.columnMapping.id"
    ]
    with pytest.raises(DeltaDVError, match=r"same delta\.columnMapping\.id"):
        write_files(path, data, configuration=conf, table_schema=json.dumps(doubled))
    # Without column mapping the prepared schema is the data's, as Delta writes it.
    plain = json.loads(prepare_create(data.schema))
    assert [f["name"] for f in plain["fields"]] == ["id", "s", "arr", "part"]
    assert all(f["metadata"] == {} for f in plain["fields"])
