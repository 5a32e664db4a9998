"""Creating tables (from Arrow and from a Spark DataFrame) with DVs enabled and
per-file stats, and enabling DVs on an existing table; checked with Delta Spark,
deltalake and polars as independent readers."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pytest

import deltadv
from deltadv import spark as dspark
from deltadv.write import commit_files, enable_deletion_vectors, write_files, write_table

N = 3000


def _data() -> pa.Table:
    ids = list(range(N))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": pa.array([["eu", "us west", "a%b", None][i % 4] for i in ids]),
            "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 50) for i in ids]),
            "amount": pa.array([decimal.Decimal(i) / 100 for i in ids], pa.decimal128(12, 2)),
            "ts": pa.array(
                [
                    dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=i)
                    for i in ids
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "s": pa.array([f"name-{i}" for i in ids]),
        }
    )


def _log(path: Path, version: int) -> list[dict[str, Any]]:
    text = (path / "_delta_log" / f"{version:020}.json").read_text()
    return [json.loads(x) for x in text.splitlines() if x.strip()]


def test_write_arrow_then_delete_read_by_everyone(delta_spark: Any, tmp_path: Path) -> None:
    import deltalake

    path = tmp_path / "t"
    t = write_table(str(path), _data(), partition_by=["region"], rows_per_file=400)
    actions = _log(path, 0)
    protocol = next(a["protocol"] for a in actions if "protocol" in a)
    assert "deletionVectors" in protocol["writerFeatures"]
    adds = [a["add"] for a in actions if "add" in a]
    assert len(adds) > 4
    stats = json.loads(adds[0]["stats"])
    assert {"numRecords", "minValues", "maxValues", "nullCount"} <= set(stats)
    assert stats["minValues"]["id"] <= stats["maxValues"]["id"]
    assert t.count() == N

    m = t.delete("s IN ('name-5', 'name-6') OR (id >= 2990 AND day > '2024-01-01')")
    gone = {5, 6} | {i for i in range(2990, N) if i % 50 != 0}
    assert m["num_deleted_rows"] == len(gone)
    expected = sorted(i for i in range(N) if i not in gone)

    spark = delta_spark
    theirs = spark.read.format("delta").load(str(path))
    assert sorted(r["id"] for r in theirs.select("id").collect()) == expected
    row = theirs.filter("id = 12").collect()[0]
    assert row["region"] == "eu" and row["amount"] == decimal.Decimal("0.12")
    assert row["day"] == dt.date(2024, 1, 13)
    odd = theirs.filter("region = 'a%b'").count()
    assert odd == len([i for i in expected if i % 4 == 2])
    dl = deltalake.DeltaTable(str(path)).scan(columns=["id"]).read_all()
    assert sorted(dl["id"].to_pylist()) == expected
    # polars.read_delta is not checked here: on this partitioned table it returns the
    # deleted rows too (it ignores the DVs), while Delta Spark and deltalake agree.
    # stats prune: a filter on a range of ids reads few files
    assert len(t.scan_tasks(filter="id < 100")) < len(adds)


def _parquet_files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*.parquet") if "_delta_log" not in p.parts}


def test_create_refuses_an_existing_table(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_table(str(root), _data())
    before = _parquet_files(root)
    with pytest.raises(deltadv.TableAlreadyExistsError, match="already exists") as info:
        write_table(str(root), _data())
    assert isinstance(info.value, FileExistsError)
    # Checked before anything was written: no orphan data file.
    assert _parquet_files(root) == before
    assert deltadv.DeltaTable(str(root)).count() == N


def test_create_that_loses_the_race_removes_its_files(tmp_path: Path) -> None:
    root = tmp_path / "t"
    # Files written for a new table (no table yet: the check passes) ...
    adds = write_files(str(root), _data(), partition_by=["region"], rows_per_file=1000)
    assert len(adds) >= 4 and len(_parquet_files(root)) == len(adds)
    # ... then another writer creates the table before our commit.
    write_table(str(root), _data().slice(0, 10))
    winner = _parquet_files(root) - {root / unquote(a["path"]) for a in adds}
    with pytest.raises(deltadv.TableAlreadyExistsError):
        commit_files(str(root), adds, schema=_data().schema, partition_by=["region"])
    # our files are gone, the winner's are all there
    assert _parquet_files(root) == winner
    assert deltadv.DeltaTable(str(root)).count() == 10


def test_enable_deletion_vectors_on_a_table_that_lacks_them(
    delta_spark: Any, tmp_path: Path
) -> None:
    import deltalake

    path = str(tmp_path / "plain")
    deltalake.write_deltalake(path, _data().drop_columns(["ts"]))
    t = deltadv.DeltaTable(path)
    with pytest.raises(deltadv.DeltaDVError, match="does not allow deletion vectors"):
        t.delete("id = 1")
    assert t.version() == 0
    version = enable_deletion_vectors(t)
    assert version == 1 and enable_deletion_vectors(t) == 1  # idempotent
    protocol = t.protocol()
    assert protocol["minReaderVersion"] == 3 and protocol["minWriterVersion"] == 7
    assert "deletionVectors" in protocol["readerFeatures"]
    assert {"appendOnly", "invariants"} <= set(protocol["writerFeatures"])  # implied by 1/2
    t.delete("id < 10")
    expected = list(range(10, N))
    spark = delta_spark
    assert (
        sorted(r["id"] for r in spark.read.format("delta").load(path).select("id").collect())
        == expected
    )
    dl = deltalake.DeltaTable(path).scan(columns=["id"]).read_all()
    assert sorted(dl["id"].to_pylist()) == expected


def test_spark_dataframe_to_table(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "from_spark")
    df = spark.range(0, 5000, numPartitions=3).selectExpr(
        "id", "id % 4 AS part", "cast(id AS double) / 3 AS x", "timestamp_seconds(id) AS ts"
    )
    t = dspark.write_table(df, path, partition_by=["part"])
    assert t.count() == 5000
    dspark.DeltaTable.forPath(spark, path).delete("x > 1000 AND part = 1")
    gone = {i for i in range(5000) if i / 3 > 1000 and i % 4 == 1}
    theirs = spark.read.format("delta").load(path)
    assert sorted(r["id"] for r in theirs.select("id").collect()) == [
        i for i in range(5000) if i not in gone
    ]
    row = theirs.filter("id = 7").collect()[0]
    assert row["part"] == 3 and row["ts"] == dt.datetime.fromtimestamp(7)
