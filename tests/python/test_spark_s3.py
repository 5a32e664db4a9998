"""deltadv.spark.read from a real S3-compatible server (moto on 127.0.0.1): DV tables
written and DELETEd by Delta Spark locally, uploaded, read through Spark with
``storage_options`` and compared row for row with Delta Spark's read of the local copy.
The executors' environment holds no S3 settings: they reach the server only through
the options each scan task carries."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deltadv import DeltaTable
from deltadv import spark as dspark
from deltadv._sample import make_table
from tests.python.s3server import client, s3_server, storage_options, upload_dir

BUCKET = "spark-dv"
COLS = ["id", "part", "s", "x"]


def _rows(df: Any, cols: list[str]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in cols) for r in df.select(*cols).collect())


@pytest.fixture(scope="module")
def tables(delta_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Local DV tables: 'partitioned' (Delta Spark, two DELETE rounds, so version 1 is
    worth time travel), 'mapped' (Delta Spark, column mapping by name: physical names
    and random file prefixes), 'packed' (deltadv._sample: ten DVs in one DV file)."""
    spark = delta_spark
    base = tmp_path_factory.mktemp("spark-s3")
    partitioned = base / "partitioned"
    (
        spark.range(0, 2000, numPartitions=2)
        .selectExpr("id", "concat('p ', id % 3) AS part", "concat('s', id) AS s", "id / 4d AS x")
        .write.format("delta")
        .partitionBy("part")
        .option("delta.enableDeletionVectors", "true")
        .save(str(partitioned))
    )
    spark.sql(f"DELETE FROM delta.`{partitioned}` WHERE id % 7 = 0")
    spark.sql(f"DELETE FROM delta.`{partitioned}` WHERE id BETWEEN 300 AND 900")
    mapped = base / "mapped"
    (
        spark.range(0, 1500, numPartitions=1)
        .selectExpr("id", "concat('p', id % 2) AS part", "concat('s', id) AS s", "id * 1.5d AS x")
        .write.format("delta")
        .partitionBy("part")
        .option("delta.enableDeletionVectors", "true")
        .option("delta.columnMapping.mode", "name")
        .save(str(mapped))
    )
    spark.sql(f"ALTER TABLE delta.`{mapped}` RENAME COLUMN s TO `s renamed`")
    spark.sql(f"DELETE FROM delta.`{mapped}` WHERE id % 5 = 1")
    packed = base / "packed"
    deleted = {i: list(range(i, 300, 11 + i)) for i in range(6)}
    make_table(packed, files=8, rows_per_file=300, deleted=deleted)
    return {"partitioned": partitioned, "mapped": mapped, "packed": packed}


@pytest.fixture(scope="module")
def s3(tables: dict[str, Path]) -> Iterator[str]:
    with s3_server() as endpoint:
        client(endpoint).create_bucket(Bucket=BUCKET)
        for name, local in tables.items():
            upload_dir(endpoint, BUCKET, local, name)
        yield endpoint


def _executor_env(spark: Any) -> set[str]:
    """Environment variable names the Python workers on executors see."""
    names = spark.sparkContext.parallelize(range(2), 2).map(lambda _: sorted(os.environ)).collect()
    return {n for ns in names for n in ns}


@pytest.mark.parametrize("scheme", ["s3", "s3a"])
def test_delta_spark_table_on_s3(
    delta_spark: Any, tables: dict[str, Path], s3: str, scheme: str
) -> None:
    spark = delta_spark
    theirs = _rows(spark.read.format("delta").load(str(tables["partitioned"])), COLS)
    assert len(theirs) == 2000 - len({i for i in range(2000) if i % 7 == 0 or 300 <= i <= 900})
    uri = f"{scheme}://{BUCKET}/partitioned"
    ours = _rows(dspark.read(spark, uri, storage_options=storage_options(s3)), COLS)
    assert ours == theirs


def test_executors_get_the_storage_options_but_task_rows_hold_no_secret(
    delta_spark: Any, tables: dict[str, Path], s3: str
) -> None:
    spark = delta_spark
    opts = storage_options(s3)
    leaked = _executor_env(spark) & {"AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_ENDPOINT"}
    assert not leaked, f"executors see {leaked}: this test would prove nothing"
    uri = f"s3://{BUCKET}/partitioned"
    tasks = DeltaTable(uri, storage_options=opts).scan_tasks()
    assert tasks
    secret = opts["AWS_SECRET_ACCESS_KEY"]
    for t in tasks:
        assert "storage_options" not in json.loads(t.json)
        assert secret not in t.json and secret not in repr(t)
        assert t.storage_options == opts
    df = dspark.read(spark, uri, storage_options=opts)
    theirs = _rows(spark.read.format("delta").load(str(tables["partitioned"])), COLS)
    assert _rows(df, COLS) == theirs


def test_time_travel_projection_and_filter_on_s3(
    delta_spark: Any, tables: dict[str, Path], s3: str
) -> None:
    spark = delta_spark
    local = str(tables["partitioned"])
    uri = f"s3://{BUCKET}/partitioned"
    opts = storage_options(s3)
    v1 = spark.read.format("delta").option("versionAsOf", 1).load(local)
    ours = dspark.read(spark, uri, version=1, storage_options=opts)
    assert _rows(ours, COLS) == _rows(v1, COLS)
    cols = ["x", "id"]
    ours = dspark.read(spark, uri, columns=cols, storage_options=opts)
    assert ours.columns == cols
    assert _rows(ours, cols) == _rows(spark.read.format("delta").load(local), cols)
    cond = "part = 'p 1' AND id > 1200"
    ours = dspark.read(spark, uri, filter=cond, storage_options=opts)
    assert _rows(ours, COLS) == _rows(spark.read.format("delta").load(local).filter(cond), COLS)


def test_column_mapped_table_on_s3(delta_spark: Any, tables: dict[str, Path], s3: str) -> None:
    spark = delta_spark
    cols = ["id", "part", "s renamed", "x"]
    theirs = _rows(spark.read.format("delta").load(str(tables["mapped"])), cols)
    df = dspark.read(spark, f"s3://{BUCKET}/mapped", storage_options=storage_options(s3))
    assert _rows(df, cols) == theirs


def test_packed_dv_file_on_s3(delta_spark: Any, tables: dict[str, Path], s3: str) -> None:
    """Many data files whose DVs share one DV file, read by a few Spark tasks."""
    spark = delta_spark
    cols = ["id", "value"]
    theirs = _rows(spark.read.format("delta").load(str(tables["packed"])), cols)
    df = dspark.read(spark, f"s3://{BUCKET}/packed", storage_options=storage_options(s3))
    # 8 small files, each worth Spark's 4 MiB open cost: 32 MiB over 2 cores
    # is 16 MiB a partition, so 4 files each, as Spark packs them.
    assert spark.sparkContext.defaultParallelism == 2
    assert df.rdd.getNumPartitions() == 2
    assert _rows(df, cols) == theirs
