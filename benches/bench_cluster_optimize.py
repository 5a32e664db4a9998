"""OPTIMIZE of a liquid-clustered table with 10% of its rows deleted (DVs):
deltadv's clustering OPTIMIZE vs Delta Spark 4.4's, on identical copies.

The table: ``--rows`` rows (default 1M; the issue's figure is ``--rows 10000000``)
of (id, k, g, s, v, bucket = id % 100), ``k`` and ``g`` uniform random, written by deltadv with
``cluster_by=["k", "g"]`` into ``--files`` files (so every file spans the whole
k/g range), then ``--fraction`` (10%) of the rows deleted by deltadv with DVs
(``bucket < 10``).
The table is copied twice; one copy is clustered by ``DeltaTable.optimize()``
(deltadv, a child process), the other by ``OPTIMIZE delta.`...``` in a local[2]
SparkSession (Delta Spark 4.4, started before the clock). Both with the same
target file size (``--target-size``; Delta Spark's ``optimize.maxFileSize`` set
to it). Checked after each: row count, no DV left, every file
``clusteringProvider="liquid"``. Printed: both times, the ratio (goal ≤ 0.5x at
10M rows), and the mean normalised k/g box of the files before and after (lower
is tighter). deltadv's OPTIMIZE runs in a child process (timed inside it), so
its peak RSS is printed too, next to the child's RSS before the OPTIMIZE;
``--memory-budget`` sets its ``memory_budget`` (bytes of decoded rows a
clustering run holds at once; default deltadv's, 1 GiB).

Run:  .venv/bin/python benches/bench_cluster_optimize.py [--rows 10000000]
      [--memory-budget BYTES]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

import deltadv
from deltadv.write import write_table

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _spark

SEED = 20_261_126
KEY_RANGE = 1_000_000


def build(path: Path, rows: int, files: int, fraction: float) -> None:
    rng = np.random.default_rng(SEED)
    per_file = -(-rows // files)
    for i in range(files):
        start = i * per_file
        n = min(per_file, rows - start)
        ids = np.arange(start, start + n, dtype=np.int64)
        data = pa.table(
            {
                "id": ids,
                "k": rng.integers(0, KEY_RANGE, n, dtype=np.int64),
                "g": rng.integers(0, KEY_RANGE, n, dtype=np.int64),
                "s": pa.array([f"name-{j}" for j in ids.tolist()]),
                "v": rng.random(n),
                "bucket": (ids % 100).astype(np.int32),
            }
        )
        if i == 0:
            write_table(str(path), data, cluster_by=["k", "g"], rows_per_file=per_file)
        else:
            write_table(str(path), data, mode="append", rows_per_file=per_file)
    deltadv.DeltaTable(str(path)).delete(f"bucket < {round(fraction * 100)}")


def live_adds(path: Path) -> list[dict]:
    live: dict[str, dict] = {}
    log = path / "_delta_log"
    for f in sorted(log.glob("*.json")):
        for line in f.read_text().splitlines():
            a = json.loads(line) if line.strip() else {}
            if "add" in a:
                live[a["add"]["path"]] = a["add"]
            elif "remove" in a:
                live.pop(a["remove"]["path"], None)
    return list(live.values())


# deltadv's OPTIMIZE in a child process: its own time and peak RSS (KiB on Linux).
CHILD = """
import json, resource, sys, time
import deltadv
path, target, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) or None
table = deltadv.DeltaTable(path)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
m = table.optimize(target_size=target, memory_budget=budget)
seconds = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
files = m["num_added_files"]
print(json.dumps({"seconds": seconds, "files": files, "before": before, "peak": peak}))
"""


def optimize_in_child(path: Path, target_size: int, memory_budget: int | None) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(target_size), str(memory_budget or 0)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def mean_box(path: Path) -> float:
    boxes = []
    for add in live_adds(path):
        st = json.loads(add["stats"])
        box = 1.0
        for c in ("k", "g"):
            box *= (st["maxValues"][c] - st["minValues"][c]) / KEY_RANGE
        boxes.append(box)
    return sum(boxes) / len(boxes)


def check(path: Path, rows: int, who: str) -> None:
    adds = live_adds(path)
    n = sum(json.loads(a["stats"])["numRecords"] for a in adds)
    if n != rows:
        sys.exit(f"FAIL: {who}: {n} rows after OPTIMIZE, expected {rows}")
    if any("deletionVector" in a for a in adds):
        sys.exit(f"FAIL: {who}: a DV is left")
    if any(a.get("clusteringProvider") != "liquid" for a in adds):
        sys.exit(f"FAIL: {who}: a file is not marked clusteringProvider=liquid")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--fraction", type=float, default=0.1)
    ap.add_argument("--target-size", type=int, default=8 << 20)
    ap.add_argument("--dir", type=Path, default=None, help="work directory (default: a temp dir)")
    ap.add_argument(
        "--memory-budget", type=int, default=None, help="deltadv's memory_budget (bytes)"
    )
    args = ap.parse_args()

    work = args.dir or Path(tempfile.mkdtemp(prefix="bench_cluster_"))
    base = work / "base"
    shutil.rmtree(base, ignore_errors=True)
    t = time.perf_counter()
    build(base, args.rows, args.files, args.fraction)
    print(
        f"built {args.rows:,} rows in {args.files} files, "
        f"{args.fraction:.0%} deleted, in {time.perf_counter() - t:.1f}s ({base})"
    )
    live_rows = args.rows - sum(1 for i in range(args.rows) if i % 100 < round(args.fraction * 100))
    box_before = mean_box(base)
    ours, theirs = work / "deltadv", work / "spark"
    for p in (ours, theirs):
        shutil.rmtree(p, ignore_errors=True)
        shutil.copytree(base, p)

    spark = _spark.make_session("bench_cluster_optimize")
    spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(args.target_size))
    spark.range(1000).selectExpr("sum(id)").collect()  # JVM warm-up, off the clock

    child = optimize_in_child(ours, args.target_size, args.memory_budget)
    t_ours = child["seconds"]
    check(ours, live_rows, "deltadv")

    t = time.perf_counter()
    spark.sql(f"OPTIMIZE delta.`{theirs}`").collect()
    t_spark = time.perf_counter() - t
    check(theirs, live_rows, "Delta Spark")

    print(f"machine: {platform.machine()}, {platform.system()}; Spark local[2]")
    print(
        f"deltadv OPTIMIZE:     {t_ours:7.2f}s  ({child['files']} files, "
        f"mean k/g box {mean_box(ours):.4f})"
    )
    budget = args.memory_budget or "default (1 GiB)"
    print(
        f"deltadv peak RSS:     {child['peak'] / 1024:7.1f} MiB (process before OPTIMIZE: "
        f"{child['before'] / 1024:.1f} MiB; memory_budget {budget})"
    )
    print(
        f"Delta Spark OPTIMIZE: {t_spark:7.2f}s  ({len(live_adds(theirs))} files, "
        f"mean k/g box {mean_box(theirs):.4f})"
    )
    print(f"mean k/g box before: {box_before:.4f}")
    print(f"ratio deltadv / Delta Spark: {t_ours / t_spark:.2f}x (goal <= 0.5x at 10M rows)")
    spark.stop()
    if args.dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
