"""Driver program for tests/python/test_spark_standalone.py: a classic SparkSession
on the standalone cluster of tests/python/cluster.py, or a Spark Connect client of
a Connect server on that cluster (``"remote": "sc://..."``), running deltadv's
Spark DML on a table on the S3 server. Run as a script with one argument, a JSON
file: {"conf": {...}, "remote": ..., "uri": ..., "storage_options": {...},
"mode": "ops"|"faults", "copy_dir": ..., "marker_dir": ...}. Prints one line
``RESULT <json>`` per step (its own process: a process holds one SparkContext,
and a test can SIGKILL cluster processes without touching pytest's)."""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

import deltadv
from deltadv import spark as dspark


def emit(step: str, **values: Any) -> None:
    print("RESULT " + json.dumps({"step": step, **values}, default=str), flush=True)


def executors(spark: SparkSession) -> int:
    return int(spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()) - 1


def wait_executors(spark: SparkSession, count: int, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while executors(spark) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{executors(spark)} executors after {timeout} s, {count} wanted")
        time.sleep(0.5)


def python_worker_pids(spark: SparkSession) -> list[int]:
    """The pids of the Python workers running 16 small tasks (mapInArrow: no
    SparkContext, so classic and Connect alike)."""

    def pid(batches: Any) -> Any:
        import pyarrow as pa

        for _ in batches:
            time.sleep(0.1)  # tasks long enough to spread over both executors
            yield pa.RecordBatch.from_pylist([{"pid": os.getpid()}])

    frame = spark.range(0, 16, numPartitions=16).mapInArrow(pid, "pid long")
    return sorted({r.pid for r in frame.collect()})


def version(cfg: dict[str, Any]) -> int:
    return deltadv.DeltaTable(cfg["uri"], storage_options=cfg["storage_options"]).version()


def download(cfg: dict[str, Any], dest: Path) -> None:
    """Copy the table's objects from the S3 server to `dest` (the oracle reads it)."""
    import boto3

    opts = cfg["storage_options"]
    bucket, prefix = cfg["uri"][len("s3://") :].split("/", 1)
    s3 = boto3.client(
        "s3",
        endpoint_url=opts["AWS_ENDPOINT_URL"],
        aws_access_key_id=opts["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=opts["AWS_SECRET_ACCESS_KEY"],
        region_name=opts["AWS_REGION"],
    )
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        for obj in page.get("Contents", []):
            local = dest / obj["Key"][len(prefix) + 1 :]
            local.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(bucket, obj["Key"], str(local))


def merge_source(spark: SparkSession, id_expr: Any) -> Any:
    """100k source rows: even ids 0..199998; in the target, ids below its size match."""
    return (
        spark.range(0, 100_000, numPartitions=4)
        .select(id_expr.alias("n"))
        .selectExpr("n * 2 AS id", "(n * 2) % 10 AS k", "concat('m', n * 2) AS s")
    )


def run_merge(spark: SparkSession, cfg: dict[str, Any], source: Any) -> dict[str, Any]:
    dt = dspark.DeltaTable.forPath(spark, cfg["uri"], cfg["storage_options"])
    return (
        dt.alias("t")
        .merge(source.alias("src"), "t.id = src.id")
        .whenMatchedUpdate(set={"s": "src.s"})
        .whenNotMatchedInsert("src.id % 100 = 0", {"id": "src.id", "k": "src.k", "s": "src.s"})
        .execute()
    )


def ops(spark: SparkSession, cfg: dict[str, Any]) -> None:
    uri, opts = cfg["uri"], cfg["storage_options"]
    remote = bool(cfg.get("remote"))
    if not remote:  # a Connect server's executors are waited for by the test
        wait_executors(spark, 2)
    df = dspark.read(spark, uri, filter="k = 3 AND id > 1000", storage_options=opts)
    rows = df.collect()
    emit(
        "read",
        ids=sorted(r.id for r in rows),
        executors=None if remote else executors(spark),
        driver=os.getpid(),
        pids=python_worker_pids(spark),
    )
    dt = dspark.DeltaTable.forPath(spark, uri, opts)
    emit("delete", metrics=dt.delete("id % 7 = 0"), version=version(cfg))
    m = dt.update("id % 5 = 1", {"s": "concat(s, '-u')"})
    emit("update", metrics=m, version=version(cfg))
    from pyspark.sql import functions as F

    emit(
        "merge",
        metrics=run_merge(spark, cfg, merge_source(spark, F.col("id"))),
        version=version(cfg),
    )
    emit("optimize", metrics=dt.optimize(), version=version(cfg))
    new = spark.range(300_000, 300_100, numPartitions=2).selectExpr(
        "id", "id % 10 AS k", "concat('a', id) AS s"
    )
    dspark.write_table(new, uri, mode="append", storage_options=opts)
    emit("append", version=version(cfg))
    dspark.register(spark)
    written = spark.range(400_000, 400_100, numPartitions=2).selectExpr(
        "id", "id % 10 AS k", "concat('w', id) AS s"
    )
    written.write.format("deltadv").mode("append").options(**opts).save(uri)
    emit("df_write", version=version(cfg))
    download(cfg, Path(cfg["copy_dir"]) / "before_vacuum")
    deleted = [r.path for r in dt.vacuum().collect()]
    emit("vacuum", deleted=deleted, version=version(cfg))
    download(cfg, Path(cfg["copy_dir"]) / "after_vacuum")


def slow_udf(marker: Path) -> Any:
    """Identity on ids; the first call in each Python worker process leaves a
    marker named by its pid and sleeps, so the test can kill the worker whose
    executor is running the task."""
    from pyspark.sql.functions import udf

    def slow(x: int) -> int:
        mark = marker / str(os.getpid())
        if not mark.exists():
            mark.write_text("")
            time.sleep(5)
        return x

    return udf(slow, "bigint")


def faults(spark: SparkSession, cfg: dict[str, Any]) -> None:
    uri, opts = cfg["uri"], cfg["storage_options"]
    root = Path(cfg["marker_dir"])
    wait_executors(spark, 2)
    spark.udf.register("slow_id", slow_udf(root / "delete"))
    dt = dspark.DeltaTable.forPath(spark, uri, opts)
    emit("ready")
    try:
        emit("delete", metrics=dt.delete("slow_id(id) % 7 = 0"), version=version(cfg))
    except Exception as e:
        emit("delete", error=f"{type(e).__name__}: {e}"[:2000], version=version(cfg))
    deadline = time.monotonic() + 180
    while not (root / "go").exists():  # the test restarts the killed worker
        if time.monotonic() > deadline:
            raise RuntimeError("no go from the test")
        time.sleep(0.2)
    wait_executors(spark, 2)
    emit("executors", count=executors(spark))
    source = merge_source(spark, slow_udf(root / "merge")("id"))
    try:
        emit("merge", metrics=run_merge(spark, cfg, source), version=version(cfg))
    except Exception as e:
        emit("merge", error=f"{type(e).__name__}: {e}"[:2000], version=version(cfg))
    download(cfg, Path(cfg["copy_dir"]) / "after")


def main() -> None:
    cfg = json.loads(Path(sys.argv[1]).read_text())
    if cfg.get("remote"):
        spark = SparkSession.builder.remote(cfg["remote"]).getOrCreate()
    else:
        builder = SparkSession.builder.appName(f"deltadv-standalone-{cfg['mode']}")
        for k, v in cfg["conf"].items():
            builder = builder.config(k, v)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
    try:
        (ops if cfg["mode"] == "ops" else faults)(spark, cfg)
    except Exception:
        traceback.print_exc()
        emit("failed", error=traceback.format_exc()[-3000:])
        raise
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
