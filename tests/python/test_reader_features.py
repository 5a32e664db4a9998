"""Tables whose protocols carry the reader features Delta Spark 4.4 and deltalake
1.6 write (variantType, typeWidening, variantShredding-preview …), created here by
those tools: deltadv reads them as the writing tool does, DELETEs from them, and the
writing tool reads the result back. Expected rows come from the data each test
writes, not from deltadv.

Also Delta Spark's rule for deletion vectors: written only when the protocol has
the feature AND delta.enableDeletionVectors is true; otherwise DELETE is refused
unless copy-on-write is allowed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import deltadv
from deltadv import DeltaDVError
from deltadv import spark as dspark

N = 30


def _log(path: str) -> list[dict[str, Any]]:
    out = []
    for f in sorted((Path(path) / "_delta_log").glob("*.json")):
        out += [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
    return out


def _protocol(path: str) -> dict[str, Any]:
    return [a["protocol"] for a in _log(path) if "protocol" in a][-1]


def _commit(path: str, version: int) -> list[dict[str, Any]]:
    text = (Path(path) / "_delta_log" / f"{version:020}.json").read_text()
    return [json.loads(x) for x in text.splitlines() if x.strip()]


def _deltalake_rows(path: str) -> list[dict[str, Any]]:
    """What deltalake reads (its DataFusion reader applies deletion vectors)."""
    from deltalake import DeltaTable, QueryBuilder

    result = QueryBuilder().register("t", DeltaTable(path)).execute("SELECT * FROM t")
    rows = pa.table(result.read_all()).to_pylist()
    return sorted(rows, key=lambda r: r["id"])


def _ours(path: str, **kw: Any) -> list[dict[str, Any]]:
    return sorted(deltadv.DeltaTable(path).to_pyarrow(**kw).to_pylist(), key=lambda r: r["id"])


def _data(lo: int, hi: int) -> pa.Table:
    ids = list(range(lo, hi))
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "s": pa.array([f"s{i}" for i in ids], pa.string())}
    )


def _in(ids: Any) -> str:
    return f"id IN ({', '.join(str(i) for i in sorted(ids))})"


def _rows(ids: Any) -> list[dict[str, Any]]:
    return [{"id": i, "s": f"s{i}"} for i in sorted(ids)]


# --------------------------------------------------------------------------- deltalake


def test_deltalake_dv_table_with_variant_type_feature(tmp_path: Path) -> None:
    import deltalake

    path = str(tmp_path / "t")
    dv_on = {"delta.enableDeletionVectors": "true"}
    deltalake.write_deltalake(path, _data(0, N // 2), configuration=dv_on)
    deltalake.write_deltalake(path, _data(N // 2, N), mode="append")
    protocol = _protocol(path)
    # The case the issue reports: deltalake 1.6 lists variantType although no
    # column is a variant (if a later deltalake stops, this test no longer covers it).
    assert "variantType" in protocol["readerFeatures"], protocol
    assert "deletionVectors" in protocol["readerFeatures"], protocol

    assert _ours(path) == _deltalake_rows(path) == _rows(range(N))
    gone = {i for i in range(N) if i % 3 == 0}
    m = deltadv.DeltaTable(path).delete(_in(gone))
    assert m["num_deleted_rows"] == len(gone) and m["version"] == 2
    adds = [a["add"] for a in _commit(path, 2) if "add" in a]
    assert len(adds) == 2 and all(a["deletionVector"] for a in adds)
    want = _rows(set(range(N)) - gone)
    assert _deltalake_rows(path) == want
    assert _ours(path) == want
    # deltalake keeps writing to the table after our DVs
    deltalake.write_deltalake(path, _data(N, N + 3), mode="append")
    assert _ours(path) == _deltalake_rows(path) == want + _rows(range(N, N + 3))


def test_deltalake_add_feature_without_the_property(tmp_path: Path) -> None:
    """alter.add_feature(DeletionVectors) adds the feature but not
    delta.enableDeletionVectors: DELETE must not write DVs (as Delta Spark and
    deltalake itself, which rewrite files then)."""
    import deltalake
    from deltalake import TableFeatures

    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, _data(0, N))
    deltalake.DeltaTable(path).alter.add_feature(
        TableFeatures.DeletionVectors, allow_protocol_versions_increase=True
    )
    protocol = _protocol(path)
    assert "deletionVectors" in protocol["readerFeatures"], protocol
    assert "deletionVectors" in protocol["writerFeatures"], protocol
    t = deltadv.DeltaTable(path)
    assert "delta.enableDeletionVectors" not in t.metadata()["configuration"]
    with pytest.raises(DeltaDVError, match=r"delta\.enableDeletionVectors is not set") as e:
        t.delete("id < 5")
    assert "supports the deletionVectors feature" in str(e.value)
    assert "allow_copy_on_write=True" in str(e.value)
    assert t.version() == 1 and deltadv.DeltaTable(path).version() == 1

    m = t.delete("id < 5", allow_copy_on_write=True)
    assert m["num_deleted_rows"] == 5 and m["num_removed_files"] == 1
    commit = _commit(path, 2)
    assert not [a for a in commit if "add" in a and a["add"].get("deletionVector")]
    want = _rows(range(5, N))
    assert _deltalake_rows(path) == want
    assert _ours(path) == want


# --------------------------------------------------------------------------- Spark


@contextmanager
def _spark_conf(spark: Any, **conf: str) -> Iterator[None]:
    """Set Spark SQL confs for a block (the session is shared by all tests)."""
    keys = {k.replace("__", "."): v for k, v in conf.items()}
    old = {k: spark.conf.get(k, None) for k in keys}
    for k, v in keys.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def _variant_json(i: int) -> str:
    return f'{{"a":{i},"b":"x{i}"}}'


def _make_variant_table(spark: Any, path: str, props: str) -> None:
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id INT, v VARIANT) USING delta TBLPROPERTIES ({props})"
    )
    spark.sql(
        f"INSERT INTO delta.`{path}` SELECT CAST(id AS INT), "
        f"parse_json(concat('{{\"a\":', id, ',\"b\":\"x', id, '\"}}')) FROM range({N})"
    )
    spark.sql(f"INSERT INTO delta.`{path}` VALUES ({N}, NULL)")


def _spark_variants(spark: Any, path: str) -> list[tuple[int, str | None]]:
    rows = spark.sql(f"SELECT id, to_json(v) AS j FROM delta.`{path}`").collect()
    return sorted((r["id"], r["j"]) for r in rows)


def _expected_variants(ids: Any) -> list[tuple[int, str | None]]:
    return [(i, _variant_json(i) if i < N else None) for i in sorted(ids)]


def test_spark_variant_table(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "v")
    _make_variant_table(spark, path, "'delta.enableDeletionVectors' = 'true'")
    protocol = _protocol(path)
    assert "variantType" in protocol["readerFeatures"], protocol
    assert _spark_variants(spark, path) == _expected_variants(range(N + 1))

    # deltadv reads the physical struct<value, metadata>; the bytes are the ones
    # deltalake reads (its field order is metadata, value).
    t = deltadv.DeltaTable(path)
    v = t.schema().field("v").type
    assert pa.types.is_struct(v) and [f.name for f in v] == ["value", "metadata"]
    assert all(pa.types.is_binary(f.type) for f in v)
    ours = _ours(path)
    theirs = _deltalake_rows(path)
    assert [r["id"] for r in ours] == [r["id"] for r in theirs] == list(range(N + 1))
    for a, b in zip(ours, theirs, strict=True):
        if b["v"] is None:
            assert a["v"] is None
        else:
            assert a["v"] == {"value": b["v"]["value"], "metadata": b["v"]["metadata"]}
    assert ours[N]["v"] is None and ours[0]["v"]["metadata"]

    # Spark through deltadv (mapInArrow): the variant column arrives as the struct
    df = dspark.read(spark, path)
    assert df.schema["v"].dataType.simpleString() == "struct<value:binary,metadata:binary>"
    got = sorted(
        (r["id"], None if r["v"] is None else bytes(r["v"]["value"])) for r in df.collect()
    )
    assert got == [(r["id"], None if r["v"] is None else r["v"]["value"]) for r in ours]

    # and through the Python data source, format("deltadv")
    from deltadv.datasource import register_data_source

    register_data_source(spark)
    ds = spark.read.format("deltadv").load(path)
    assert ds.schema["v"].dataType.simpleString() == "struct<value:binary,metadata:binary>"
    got_ds = sorted(
        (r["id"], None if r["v"] is None else bytes(r["v"]["value"])) for r in ds.collect()
    )
    assert got_ds == got

    # DELETE with DVs (a predicate on id; the variant column is not evaluated)
    gone = {i for i in range(N + 1) if i % 4 == 1}
    m = t.delete(_in(gone))
    assert m["num_deleted_rows"] == len(gone) and m["num_dv_files_written"] >= 1
    keep = set(range(N + 1)) - gone
    assert _spark_variants(spark, path) == _expected_variants(keep)
    assert [r["id"] for r in _deltalake_rows(path)] == sorted(keep)

    # copy-on-write: the rewritten file's variants still read in Delta Spark
    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')"
    )
    t = deltadv.DeltaTable(path)
    with pytest.raises(DeltaDVError, match=r'delta\.enableDeletionVectors is "false"'):
        t.delete("id = 2")
    m = t.delete("id = 2 OR id = 3", allow_copy_on_write=True)
    assert m["num_deleted_rows"] == 2 and m["num_added_files"] >= 1
    keep -= {2, 3}
    assert _spark_variants(spark, path) == _expected_variants(keep)
    assert [r["id"] for r in _ours(path)] == sorted(keep)


def test_spark_shredded_variants(delta_spark: Any, tmp_path: Path) -> None:
    """Shredded variant files (Delta Spark's variantShredding): the variant column
    is refused with an error naming shredding; other columns read, and DELETE
    with DVs works (it does not rewrite files). Copy-on-write is refused."""
    spark = delta_spark
    path = str(tmp_path / "shred")
    with _spark_conf(
        spark,
        spark__sql__variant__writeShredding__enabled="true",
        spark__sql__variant__forceShreddingSchemaForTest="a int, b string",
    ):
        _make_variant_table(
            spark,
            path,
            "'delta.enableVariantShredding' = 'true', 'delta.enableDeletionVectors' = 'true'",
        )
    protocol = _protocol(path)
    shredding = {"variantShredding", "variantShredding-preview"}
    assert shredding & set(protocol["readerFeatures"]), protocol
    import pyarrow.parquet as pq

    files = list(Path(path).glob("*.parquet"))
    assert any("typed_value" in pq.read_schema(f).field("v").type.names for f in files)

    t = deltadv.DeltaTable(path)
    assert sorted(t.to_pyarrow(columns=["id"])["id"].to_pylist()) == list(range(N + 1))
    with pytest.raises(DeltaDVError, match="shredded"):
        t.to_pyarrow()
    m = t.delete("id >= 20")
    assert m["num_deleted_rows"] == N + 1 - 20
    assert _spark_variants(spark, path) == _expected_variants(range(20))
    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')"
    )
    with pytest.raises(DeltaDVError, match="variantShredding"):
        deltadv.DeltaTable(path).delete("id = 1", allow_copy_on_write=True)


WIDEN_ROWS_BEFORE = [
    # i INT, f FLOAT, d DECIMAL(5,2), dt DATE, b BYTE
    (1, "0.1", "1.23", "2024-01-02", 1),
    (2, "2.5", "4.56", "2024-03-04", 2),
    (3, "-7.25", "-9.99", "2023-12-31", -3),
]


def _f32(text: str) -> float:
    """A FLOAT value as read after widening to DOUBLE."""
    return float(np.float32(text))


def test_spark_type_widening(delta_spark: Any, tmp_path: Path) -> None:
    import datetime as dt

    spark = delta_spark
    path = str(tmp_path / "w")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id INT, f FLOAT, d DECIMAL(5,2), dt DATE, b BYTE) "
        "USING delta TBLPROPERTIES ('delta.enableTypeWidening' = 'true', "
        "'delta.enableDeletionVectors' = 'true', 'delta.feature.timestampNtz' = 'supported')"
    )
    values = ", ".join(
        f"({i}, {f}, {d}, DATE'{day}', {b})" for i, f, d, day, b in WIDEN_ROWS_BEFORE
    )
    spark.sql(f"INSERT INTO delta.`{path}` VALUES {values}")
    for change in [
        "id TYPE BIGINT",
        "f TYPE DOUBLE",
        "d TYPE DECIMAL(10,4)",
        "dt TYPE TIMESTAMP_NTZ",
        "b TYPE INT",
    ]:
        spark.sql(f"ALTER TABLE delta.`{path}` ALTER COLUMN {change}")
    spark.sql(
        f"INSERT INTO delta.`{path}` VALUES (3000000000, 1e300, 123456.7891, "
        "TIMESTAMP_NTZ'2024-05-06 07:08:09', 100000)"
    )
    protocol = _protocol(path)
    assert "typeWidening" in protocol["readerFeatures"], protocol
    schema = {
        f["name"]: f
        for f in json.loads(deltadv.DeltaTable(path).metadata()["schemaString"])["fields"]
    }
    assert schema["f"]["metadata"]["delta.typeChanges"] == [
        {"toType": "double", "fromType": "float"}
    ]

    def midnight(day: str) -> dt.datetime:
        return dt.datetime.fromisoformat(day)

    expected = [
        {
            "id": i,
            "f": _f32(f),
            "d": Decimal(d).quantize(Decimal("0.0001")),
            "dt": midnight(day),
            "b": b,
        }
        for i, f, d, day, b in WIDEN_ROWS_BEFORE
    ] + [
        {
            "id": 3000000000,
            "f": 1e300,
            "d": Decimal("123456.7891"),
            "dt": dt.datetime(2024, 5, 6, 7, 8, 9),
            "b": 100000,
        }
    ]
    t = deltadv.DeltaTable(path)
    arrow = t.schema()
    assert [str(arrow.field(c).type) for c in ["id", "f", "d", "dt", "b"]] == [
        "int64",
        "double",
        "decimal128(10, 4)",
        "timestamp[us]",
        "int32",
    ]

    def spark_rows(where: str = "true") -> list[dict[str, Any]]:
        rows = spark.read.format("delta").load(path).where(where).collect()
        return sorted((r.asDict() for r in rows), key=lambda r: r["id"])

    assert _ours(path) == spark_rows() == expected
    # Filters on widened columns: old files' stats are in the old types (a
    # decimal(5,2) row-group bound read at scale 4 would prune 1.23 out).
    for where, keep in [
        ("d > 1", lambda r: r["d"] > 1),
        ("d < -9.5", lambda r: r["d"] < Decimal("-9.5")),
        ("f > 0.1", lambda r: r["f"] > 0.1),
        ("dt >= '2024-01-02'", lambda r: r["dt"] >= dt.datetime(2024, 1, 2)),
        ("b > 2", lambda r: r["b"] > 2),
        ("id >= 2", lambda r: r["id"] >= 2),
    ]:
        want = [r for r in expected if keep(r)]
        assert _ours(path, filter=where) == want, where
    # through Spark (mapInArrow)
    got = sorted((r.asDict() for r in dspark.read(spark, path).collect()), key=lambda r: r["id"])
    assert got == expected

    # DELETE with DVs on widened columns; Delta Spark reads the result
    m = t.delete("f > 0.1 AND d < 5")  # id 1 (0.1f widens above 0.1) and 2
    assert m["num_deleted_rows"] == 2
    left = [r for r in expected if r["id"] not in (1, 2)]
    assert spark_rows() == left and _ours(path) == left

    # copy-on-write on a widened table: rewritten files keep the type they were
    # written with (delta.typeChanges covers it); Delta Spark still reads them.
    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')"
    )
    m = deltadv.DeltaTable(path).delete("b = -3", allow_copy_on_write=True)
    assert m["num_deleted_rows"] == 1 and m["num_removed_files"] == 1
    left = [r for r in left if r["id"] != 3]
    assert spark_rows() == left and _ours(path) == left
    # and Delta Spark deletes again on top
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 3000000000")
    assert _ours(path) == []


def test_spark_feature_without_the_property(delta_spark: Any, tmp_path: Path) -> None:
    """The protocol keeps deletionVectors after delta.enableDeletionVectors is set
    to false: Delta Spark then rewrites files, and deltadv refuses DVs."""
    spark = delta_spark
    path = str(tmp_path / "t")
    spark.range(0, N).selectExpr("id", "concat('s', id) AS s").write.format("delta").option(
        "delta.enableDeletionVectors", "true"
    ).save(path)
    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')"
    )
    assert "deletionVectors" in _protocol(path)["writerFeatures"]
    # Delta Spark's own DELETE: no DV
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 0")
    version = deltadv.DeltaTable(path).version()
    assert not [a for a in _commit(path, version) if "add" in a and a["add"].get("deletionVector")]
    with pytest.raises(DeltaDVError, match=r'delta\.enableDeletionVectors is "false"'):
        deltadv.DeltaTable(path).delete("id = 1")
    assert deltadv.DeltaTable(path).version() == version
    m = deltadv.DeltaTable(path).delete("id = 1", allow_copy_on_write=True)
    assert m["num_deleted_rows"] == 1
    rows = spark.read.format("delta").load(path).collect()
    assert sorted(r["id"] for r in rows) == list(range(2, N))
