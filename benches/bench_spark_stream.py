"""Spark streaming on a DV table: deltadv's source and sink vs Delta Spark's.

(a) **Source throughput.** One Delta table, built once under ``--dir``: created by
Delta Spark with ``delta.enableDeletionVectors=true`` (version 0), then
``--commits`` (default 100) appends of ``--rows-per-commit`` rows (default
50,000; one file each, written by deltadv's ``write_table``: ``id`` long, ``k``
int, ``s`` string), and after every tenth append a Delta Spark ``DELETE`` of 1%
of that append's rows, which writes a deletion vector. Each reader streams it
with ``Trigger.AvailableNow`` into Spark's ``noop`` sink, a fresh checkpoint per
run, in two shapes:

* ``changes``: ``startingVersion=1``, ``skipChangeCommits=true``: the rows of the
  100 append commits, commit by commit (the DV commits skipped whole);
* ``snapshot``: no starting version: the table's snapshot at the latest version,
  deletion vectors applied.

Timed from ``start()`` to the end of ``awaitTermination()``, best of ``--repeat``
rounds (rounds rotate which reader goes first). One untimed run per reader and
shape first, into a ``foreachBatch`` summing each batch: its rows (count and sum
of ``id``) are checked against what the builder wrote (Delta Spark's
``numInputRows`` counts the rows its DVs drop, so it is not used). Goal (issue 27):
deltadv / Delta Spark time <= 1.0 (printed as met / NOT met; never a failure).

(b) **Latency.** For each system (deltadv: ``readStream.format("deltadv")`` into
``writeStream.format("deltadv")``; Delta Spark: ``format("delta")`` both sides),
a fresh source table (Delta Spark, DVs on, 100 rows) streamed into a fresh sink
table with ``trigger(processingTime="0 seconds")``; once the initial snapshot is
in the sink, ``--batches`` (default 20) times: one small append to the source
(10 rows, deltadv's ``write_table``, the same for both), then the sink's log is
polled (``deltadv.DeltaTable(sink).version()``, every 2 ms) until the batch's
commit is there. The latency is from the append's return to the sink commit
seen; median (and min, max) per system, and the ratio deltadv / Delta Spark of
the medians.

The session is the tests' (``benches/_spark.py``: local[2], Delta Spark jars
from .cache/jars). The figures are for one run on one machine: ratios only.

Run:  .venv/bin/python benches/bench_spark_stream.py [--dir /tmp/deltadv-bench-spark-stream]
      [--commits 100] [--rows-per-commit 50000] [--repeat 3] [--batches 20]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _spark  # benches/_spark.py (the script's folder is on sys.path)

PARAMS_FILE = "_bench_spark_stream.json"  # next to the table, in --dir
GOAL = 1.0  # deltadv / Delta Spark source time, "<="
DELETE_EVERY = 10  # a DV DELETE after every tenth append
POLL = 0.002
COMMAND = "cd /work/main && .venv/bin/python benches/bench_spark_stream.py"
READERS = ("deltadv", "delta")


def _rows(start: int, count: int) -> Any:
    import pyarrow as pa

    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "k": pa.array([i % 1000 for i in ids], pa.int32()),
            "s": pa.array([f"name-{i % 10_000}" for i in ids]),
        }
    )


def _create(spark: Any, path: Path) -> None:
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, k INT, s STRING) USING delta "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )


def build(spark: Any, table: Path, params: dict[str, Any]) -> dict[str, Any]:
    """Create the table, then the appends and DV DELETEs; returns what it holds."""
    from deltadv.write import write_table

    t0 = time.perf_counter()
    _create(spark, table)
    n = params["rows_per_commit"]
    deleted: list[int] = []
    for c in range(params["commits"]):
        write_table(str(table), _rows(c * n, n), mode="append")
        if (c + 1) % DELETE_EVERY == 0:
            where = f"id >= {c * n} AND id < {(c + 1) * n} AND id % 100 = 7"
            spark.sql(f"DELETE FROM delta.`{table}` WHERE {where}")
            deleted += range(c * n + 7, (c + 1) * n, 100)
    total = params["commits"] * n
    id_sum = total * (total - 1) // 2
    built = {
        "params": params,
        "appended": [total, id_sum],  # rows, sum of id
        "live": [total - len(deleted), id_sum - sum(deleted)],
        "seconds": round(time.perf_counter() - t0, 1),
    }
    (table.parent / PARAMS_FILE).write_text(json.dumps(built, indent=1))
    return built


def get_table(spark: Any, base: Path, params: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    table = base / "table"
    if (base / PARAMS_FILE).exists():
        built = json.loads((base / PARAMS_FILE).read_text())
        if built["params"] != params:
            sys.exit(
                f"FAIL: {base} holds a table built with {built['params']}, not {params}; "
                "use another --dir"
            )
        print(f"reusing the table in {table} (built in {built['seconds']} s)")
        return table, built
    if base.exists() and any(base.iterdir()):
        sys.exit(f"FAIL: {base} exists and was not built by this script")
    base.mkdir(parents=True, exist_ok=True)
    print(f"building the table in {table} ...")
    return table, build(spark, table, params)


def stream_once(
    spark: Any, fmt: str, path: str, shape: str, tmp: Path, check: bool = False
) -> tuple[float, tuple[int, int] | None]:
    """One AvailableNow run of ``fmt``'s source into noop: (seconds, None); with
    ``check``, into a foreachBatch summing each batch (untimed use): (seconds,
    (rows, sum of id))."""
    checkpoint = Path(tempfile.mkdtemp(dir=tmp))
    reader = spark.readStream.format(fmt)
    if shape == "changes":
        reader = reader.option("startingVersion", "1").option("skipChangeCommits", "true")
    sums: list[tuple[int, int]] = []

    def total(df: Any, _batch: int) -> None:
        row = df.selectExpr("count(*)", "coalesce(sum(id), 0)").collect()[0]
        sums.append((int(row[0]), int(row[1])))

    t0 = time.perf_counter()
    writer = reader.load(path).writeStream
    writer = writer.foreachBatch(total) if check else writer.format("noop")
    q = writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    q.awaitTermination()
    seconds = time.perf_counter() - t0
    if q.exception() is not None:
        sys.exit(f"FAIL: {fmt} {shape}: {q.exception()}")
    shutil.rmtree(checkpoint, ignore_errors=True)
    if not check:
        return seconds, None
    return seconds, (sum(r for r, _ in sums), sum(s for _, s in sums))


def throughput(spark: Any, path: str, built: dict[str, Any], repeat: int, tmp: Path) -> None:
    expected = {"changes": built["appended"], "snapshot": built["live"]}
    print("\n(a) source throughput: AvailableNow into noop, best of", repeat)
    print(f"  {'shape':<9} {'reader':<12} {'best s':>8} {'rows':>11} {'rows/s':>12}")
    for shape in ("changes", "snapshot"):
        rows = expected[shape][0]
        best: dict[str, float] = {}
        for fmt in READERS:  # warm-up, and the rows checked (count, sum of id)
            _, got = stream_once(spark, fmt, path, shape, tmp, check=True)
            if got != tuple(expected[shape]):
                sys.exit(f"FAIL: {fmt} {shape} read {got} (rows, sum), {expected[shape]} expected")
        for r in range(repeat):
            order = READERS if r % 2 == 0 else READERS[::-1]
            for fmt in order:
                seconds, _ = stream_once(spark, fmt, path, shape, tmp)
                best[fmt] = min(best.get(fmt, seconds), seconds)
        for fmt in READERS:
            name = "deltadv" if fmt == "deltadv" else "Delta Spark"
            print(
                f"  {shape:<9} {name:<12} {best[fmt]:>8.2f} {rows:>11,} {rows / best[fmt]:>12,.0f}"
            )
        ratio = best["deltadv"] / best["delta"]
        verdict = "met" if ratio <= GOAL else "NOT met"
        print(f"  {shape:<9} ratio deltadv / Delta Spark time: {ratio:.2f}", end=" ")
        print(f"(goal <= {GOAL}: {verdict})")


def latency_once(spark: Any, fmt: str, batches: int, tmp: Path) -> list[float]:
    """Seconds from each small append to the source until the sink has its commit."""
    import deltadv
    from deltadv.write import write_table

    base = Path(tempfile.mkdtemp(dir=tmp))
    source, sink = base / "source", base / "sink"
    _create(spark, source)
    write_table(str(source), _rows(0, 100), mode="append")
    q = (
        spark.readStream.format(fmt)
        .load(str(source))
        .writeStream.format(fmt)
        .option("checkpointLocation", str(base / "cp"))
        .trigger(processingTime="0 seconds")
        .start(str(sink))
    )

    def sink_version() -> int:
        try:
            return deltadv.DeltaTable(str(sink)).version()
        except deltadv.TableNotFoundError:
            return -1

    def wait_for(version: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while sink_version() < version:
            if q.exception() is not None:
                sys.exit(f"FAIL: {fmt} latency query: {q.exception()}")
            if time.monotonic() > deadline:
                sys.exit(f"FAIL: {fmt}: sink version {version} not seen after {timeout} s")
            time.sleep(POLL)

    out = []
    try:
        wait_for(0)  # the initial snapshot
        for b in range(batches):
            write_table(str(source), _rows(1000 + 10 * b, 10), mode="append")
            t0 = time.perf_counter()
            wait_for(b + 1)
            out.append(time.perf_counter() - t0)
    finally:
        q.stop()
    rows = deltadv.DeltaTable(str(sink)).to_pyarrow_table().num_rows
    if rows != 100 + 10 * batches:
        sys.exit(f"FAIL: {fmt}: the sink holds {rows} rows, {100 + 10 * batches} expected")
    shutil.rmtree(base, ignore_errors=True)
    return out


def latency(spark: Any, batches: int, tmp: Path) -> None:
    print(f"\n(b) latency: one small append -> visible in the sink, {batches} micro-batches")
    print(f"  {'system':<12} {'median ms':>10} {'min ms':>8} {'max ms':>8}")
    medians = {}
    for fmt in READERS:
        got = latency_once(spark, fmt, batches, tmp)
        medians[fmt] = statistics.median(got)
        name = "deltadv" if fmt == "deltadv" else "Delta Spark"
        print(
            f"  {name:<12} {medians[fmt] * 1e3:>10.0f} {min(got) * 1e3:>8.0f} "
            f"{max(got) * 1e3:>8.0f}"
        )
    print(
        f"  ratio deltadv / Delta Spark median latency: {medians['deltadv'] / medians['delta']:.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/tmp/deltadv-bench-spark-stream", help="built if missing")
    ap.add_argument("--commits", type=int, default=100)
    ap.add_argument("--rows-per-commit", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3, help="timed rounds (best is reported)")
    ap.add_argument("--batches", type=int, default=20, help="micro-batches timed for latency")
    ap.add_argument("--skip", choices=("throughput", "latency"), help="leave one part out")
    args = ap.parse_args()

    import pyarrow as pa
    import pyspark

    import deltadv
    from deltadv.spark.datasource import register_data_source

    print(f"command: {COMMAND} {' '.join(sys.argv[1:])}".rstrip())
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    spark = _spark.make_session("deltadv-bench-spark-stream")
    register_data_source(spark)
    print(
        f"python {platform.python_version()}, deltadv {deltadv.__version__}, "
        f"pyspark {pyspark.__version__}, pyarrow {pa.__version__}, {platform.machine()}, "
        f"{os.cpu_count()} cpus, load average {load}, {spark.sparkContext.master}"
    )
    params = {"commits": args.commits, "rows_per_commit": args.rows_per_commit}
    table, built = get_table(spark, Path(args.dir).resolve(), params)
    dt = deltadv.DeltaTable(str(table))
    print(
        f"  {table}: version {dt.version()}, {len(dt.files())} live files, "
        f"{len(dt.deletion_vectors())} with a DV; {built['appended'][0]:,} rows appended, "
        f"{built['live'][0]:,} live"
    )
    with tempfile.TemporaryDirectory(prefix="deltadv-bench-stream-") as tmp:
        if args.skip != "throughput":
            throughput(spark, str(table), built, args.repeat, Path(tmp))
        if args.skip != "latency":
            latency(spark, args.batches, Path(tmp))
    spark.stop()


if __name__ == "__main__":
    main()
