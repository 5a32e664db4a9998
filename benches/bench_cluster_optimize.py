"""OPTIMIZE of a liquid-clustered table with 10% of its rows deleted (DVs):
deltadv's clustering OPTIMIZE vs Delta Spark 4.4's, on identical copies.

The table: ``--rows`` rows (default 1M; the issue's figure is ``--rows 10000000``)
of (id, k, g, s, v, bucket = id % 100), ``k`` and ``g`` uniform random, written by deltadv with
``cluster_by=["k", "g"]`` into ``--files`` files (so every file spans the whole
k/g range), then ``--fraction`` (10%) of the rows deleted by deltadv with DVs
(``bucket < 10``).
The table is copied twice; one copy is clustered by ``DeltaTable.optimize()``
(deltadv, this process), the other by ``OPTIMIZE delta.`...``` in a local[2]
SparkSession (Delta Spark 4.4, started before the clock). Both with the same
target file size (``--target-size``; Delta Spark's ``optimize.maxFileSize`` set
to it). Checked after each: row count, no DV left, every file
``clusteringProvider="liquid"``. Printed: both times, the ratio (goal ≤ 0.5x at
10M rows), and the mean normalised k/g box of the files before and after (lower
is tighter).

Run:  .venv/bin/python benches/bench_cluster_optimize.py [--rows 10000000]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
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

    t = time.perf_counter()
    metrics = deltadv.DeltaTable(str(ours)).optimize(target_size=args.target_size)
    t_ours = time.perf_counter() - t
    check(ours, live_rows, "deltadv")

    t = time.perf_counter()
    spark.sql(f"OPTIMIZE delta.`{theirs}`").collect()
    t_spark = time.perf_counter() - t
    check(theirs, live_rows, "Delta Spark")

    print(f"machine: {platform.machine()}, {platform.system()}; Spark local[2]")
    print(
        f"deltadv OPTIMIZE:     {t_ours:7.2f}s  ({metrics['num_added_files']} files, "
        f"mean k/g box {mean_box(ours):.4f})"
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
