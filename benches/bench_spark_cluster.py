"""MERGE and DELETE on a Spark standalone cluster: deltadv's Spark glue vs Delta Spark,
on the same cluster, on copies of the same table (issue 26, point 5's benchmark).

The cluster is the tests' (tests/python/cluster.py): a master and two workers on
127.0.0.1, 1 core and one executor JVM (512 MiB) each, started from pyspark's jars.
This script is the driver (classic session, client mode), with Delta Spark's jars
from .cache/jars in ``spark.jars`` (shipped to the executors) and this checkout's
deltadv on the executors' Python workers. Tables live on the local filesystem,
which the workers share (all on 127.0.0.1).

The table (built once per run by Delta Spark on the cluster): ``--rows`` rows
(default 1,000,000) in ``--files`` files (4) of (id long, k long = id % 10,
s string = 's' || id, x double = rand(1)), deletion vectors enabled. Each timed
run works on a fresh copy (the copy is not timed):

* DELETE of ``pmod(hash(id, 3), 100) < 5`` (5%, spread over every file):
  ``deltadv.spark.DeltaTable.forPath(spark, path).delete(cond)`` vs
  ``DELETE FROM delta.`path` WHERE cond``;
* MERGE of a ``--source`` row source (default 100,000; half existing ids spread
  over the table, half new ids): ``WHEN MATCHED THEN UPDATE SET s = src.s, x =
  src.x WHEN NOT MATCHED THEN INSERT *``, through deltadv's ``merge`` builder vs
  Delta Spark's ``MERGE INTO delta.`path` t USING src``.

Both engines write deletion vectors. After every run both copies are read by Delta
Spark and compared (row count and sums over every column, equal between the engines
and to the expected count). Rounds rotate which engine goes first; best and median
of ``--repeat`` are printed, and the ratio deltadv / Delta Spark (reported, no goal).

Run:  .venv/bin/python benches/bench_spark_cluster.py [--rows 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.python.cluster import Cluster, standalone_cluster  # noqa: E402

COMMAND = "cd /work/main && .venv/bin/python benches/bench_spark_cluster.py"
DELETE_COND = "pmod(hash(id, 3), 100) < 5"


def session(cluster: Cluster, local_dir: Path) -> Any:
    """A classic driver on `cluster` with Delta Spark's jars (driver and executors)."""
    os.environ.update(cluster.env)
    from pyspark.sql import SparkSession

    jars = sorted((ROOT / ".cache" / "jars").glob("*.jar"))
    if not jars:
        sys.exit("FAIL: Delta Spark jars missing in .cache/jars: run scripts/setup.sh")
    builder = SparkSession.builder.appName("deltadv-bench-spark-cluster")
    conf = {
        **cluster.driver_conf(),
        "spark.jars": ",".join(str(j) for j in jars),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.driver.memory": "1g",
        "spark.local.dir": str(local_dir),
    }
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def build(spark: Any, path: Path, rows: int, files: int) -> None:
    (
        spark.range(0, rows, 1, files)
        .selectExpr("id", "id % 10 AS k", "concat('s', id) AS s", "rand(1) AS x")
        .write.format("delta")
        .option("delta.enableDeletionVectors", "true")
        .save(str(path))
    )


def merge_source(spark: Any, rows: int, size: int) -> Any:
    """`size` rows: even positions hit existing ids spread over the table, odd ones
    are new ids above it."""
    step = max(1, rows // size)  # even positions n < size: n * step < rows, distinct
    return spark.range(0, size, 1, 2).selectExpr(
        f"CASE WHEN id % 2 = 0 THEN (id * {step}) % {rows} ELSE {rows} + id END AS id",
        "id % 10 AS k",
        "concat('m', id) AS s",
        "cast(id AS double) AS x",
    )


def summary(spark: Any, path: Path) -> tuple[Any, ...]:
    """Delta Spark's read: row count and sums over every column."""
    row = (
        spark.read.format("delta")
        .load(str(path))
        .selectExpr("count(*)", "sum(id)", "sum(k)", "sum(hash(s))", "round(sum(x), 3)")
        .collect()[0]
    )
    return tuple(row)


def deltadv_delete(spark: Any, path: Path, _source: Any) -> None:
    from deltadv import spark as dspark

    dspark.DeltaTable.forPath(spark, str(path)).delete(DELETE_COND)


def delta_delete(spark: Any, path: Path, _source: Any) -> None:
    spark.sql(f"DELETE FROM delta.`{path}` WHERE {DELETE_COND}")


def deltadv_merge(spark: Any, path: Path, source: Any) -> None:
    from deltadv import spark as dspark

    (
        dspark.DeltaTable.forPath(spark, str(path))
        .alias("t")
        .merge(source.alias("src"), "t.id = src.id")
        .whenMatchedUpdate(set={"s": "src.s", "x": "src.x"})
        .whenNotMatchedInsertAll()
        .execute()
    )


def delta_merge(spark: Any, path: Path, source: Any) -> None:
    source.createOrReplaceTempView("bench_src")
    spark.sql(
        f"MERGE INTO delta.`{path}` t USING bench_src src ON t.id = src.id "
        "WHEN MATCHED THEN UPDATE SET s = src.s, x = src.x "
        "WHEN NOT MATCHED THEN INSERT *"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--source", type=int, default=100_000, help="MERGE source rows")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per engine and operation")
    ap.add_argument("--dir", default=None, help="work folder (default: a temporary one)")
    args = ap.parse_args()
    print(f"command: {COMMAND} {' '.join(sys.argv[1:])}".rstrip())

    work = Path(args.dir or tempfile.mkdtemp(prefix="deltadv-bench-spark-cluster-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with standalone_cluster(work / "cluster-logs") as cluster:
        print(f"cluster {cluster.master_url} up in {time.perf_counter() - t0:.1f} s")
        spark = session(cluster, work / "driver-local")
        import pyspark

        import deltadv

        print(
            f"python {platform.python_version()}, deltadv {deltadv.__version__}, "
            f"pyspark {pyspark.__version__}, {platform.machine()}, {os.cpu_count()} cpus, "
            f"2 workers x 1 core, executors 512 MiB; load average "
            f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}"
        )
        base = work / "base"
        t1 = time.perf_counter()
        build(spark, base, args.rows, args.files)
        print(
            f"built {args.rows:,} rows in {args.files} files by Delta Spark in "
            f"{time.perf_counter() - t1:.1f} s"
        )
        source = merge_source(spark, args.rows, args.source).cache()
        source.count()
        # what each operation must leave, computed by Spark from the generators
        inserted = source.join(spark.range(args.rows), "id", "left_anti").count()
        kept = spark.range(args.rows).where(f"NOT ({DELETE_COND})").count()

        ops: dict[str, dict[str, Callable[[Any, Path, Any], None]]] = {
            "DELETE": {"deltadv": deltadv_delete, "Delta Spark": delta_delete},
            "MERGE": {"deltadv": deltadv_merge, "Delta Spark": delta_merge},
        }
        times: dict[str, dict[str, list[float]]] = {
            op: {engine: [] for engine in engines} for op, engines in ops.items()
        }
        # one untimed run of each (warm-up: JIT, Python workers, Delta's classes)
        for i in range(args.repeat + 1):
            for op, engines in ops.items():
                names = list(engines)
                order = names[i % 2 :] + names[: i % 2]
                results = {}
                for engine in order:
                    copy = work / f"{op.lower()}-{engine.replace(' ', '-')}-{i}"
                    shutil.copytree(base, copy)
                    start = time.perf_counter()
                    engines[engine](spark, copy, source)
                    elapsed = time.perf_counter() - start
                    results[engine] = summary(spark, copy)
                    if i > 0:
                        times[op][engine].append(elapsed)
                    shutil.rmtree(copy)
                if results["deltadv"] != results["Delta Spark"]:
                    sys.exit(f"FAIL: {op} results differ: {results}")
                count = results["deltadv"][0]
                if op == "MERGE" and count != args.rows + inserted:
                    sys.exit(f"FAIL: MERGE left {count:,} rows, {args.rows + inserted:,} expected")
                if op == "DELETE" and count != kept:
                    sys.exit(f"FAIL: DELETE left {count:,} rows, {kept:,} expected")
                label = "warm-up" if i == 0 else f"run {i}"
                shown = ", ".join(f"{e} {times[op][e][-1]:.2f} s" if i > 0 else e for e in order)
                print(f"  {label}: {op}: {shown}; {count:,} rows after, results equal")

        print(f"\nseconds over {args.repeat} runs (fresh copy each), best / median:")
        for op, by_engine in times.items():
            ours, theirs = by_engine["deltadv"], by_engine["Delta Spark"]
            print(
                f"  {op:<7} deltadv {min(ours):6.2f} / {statistics.median(ours):6.2f}   "
                f"Delta Spark {min(theirs):6.2f} / {statistics.median(theirs):6.2f}   "
                f"deltadv / Delta Spark = {min(ours) / min(theirs):.2f} (best), "
                f"{statistics.median(ours) / statistics.median(theirs):.2f} (median)"
            )
        print(f"  load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
        spark.stop()
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
