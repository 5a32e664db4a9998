"""Planning a Spark read of a table with many files: deltadv vs Delta Spark.

Builds (or reuses, under ``--dir``) a Delta table of ``--files`` data files
(default 100,000) committed by deltadv in ``--commits`` commits (default 11, so
the log has a checkpoint at version 10 and one JSON commit after it), every
tenth file with a deletion vector. Planning reads only the log, so the data
files themselves are not written (both readers would fail on the first one;
neither opens any while planning). Then, each timed best of ``--repeat``
(default 3), rounds alternating which goes first:

* deltadv:     ``deltadv.spark.read(spark, path)``: log replay (Rust), one scan
  task per file, the tasks packed into partitions as Spark packs files and
  parallelized into the DataFrame mapInArrow reads (no Spark job runs);
* deltadv (tasks only): ``DeltaTable(path).scan_tasks()``, the driver's part;
* Delta Spark: ``spark.read.format("delta").load(path).inputFiles()``: log
  replay (a Spark job over the checkpoint and commits) and the file list.

The counts are checked (files; for deltadv's DataFrame, its partitions).
Goal: deltadv / Delta Spark <= 0.5.

Run:  .venv/bin/python benches/bench_plan.py [--files 100000] [--repeat 3] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _spark import make_session

import deltadv
from deltadv import spark as dspark
from deltadv.write import commit_files

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.int32()), ("s", pa.string())])
GOAL = 0.5


def build(root: Path, files: int, commits: int) -> None:
    """Commit `files` add actions (every tenth with an inline DV) in `commits` commits."""
    root.mkdir(parents=True)
    inline = deltadv.DeletionVector([0]).to_inline_descriptor().to_json()
    per = -(-files // commits)
    t0 = time.perf_counter()
    for c in range(commits):
        adds: list[dict[str, Any]] = []
        for i in range(c * per, min(files, (c + 1) * per)):
            add: dict[str, Any] = {
                "path": f"part-{i:06}-bench.parquet",
                "size": 4096,
                "partitionValues": {},
                "modificationTime": 1_700_000_000_000,
                "dataChange": True,
                "stats": json.dumps({"numRecords": 100, "minValues": {"id": i * 100}}),
            }
            if i % 10 == 0:
                add["deletionVector"] = inline
            adds.append(add)
        if adds:
            commit_files(str(root), adds, mode="error" if c == 0 else "append", schema=SCHEMA)
    print(f"  built {files:,} files in {commits} commits: {time.perf_counter() - t0:.1f} s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", default="/tmp/deltadv-bench-plan")
    p.add_argument("--files", type=int, default=100_000)
    p.add_argument("--commits", type=int, default=11)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    root = Path(args.dir) / f"t{args.files}"
    if not (root / "_delta_log").is_dir():
        build(root, args.files, args.commits)
    log = sorted(x.name for x in (root / "_delta_log").iterdir())
    print(f"  log: {len(log)} files, checkpoint: {any('checkpoint' in x for x in log)}")
    spark = make_session("deltadv-bench-plan")
    uri = str(root)

    def ours() -> int:
        df = dspark.read(spark, uri)
        return df.rdd.getNumPartitions()

    def ours_tasks() -> int:
        return len(deltadv.DeltaTable(uri).scan_tasks())

    def theirs() -> int:
        return len(spark.read.format("delta").load(uri).inputFiles())

    readers = {"deltadv": ours, "deltadv (tasks only)": ours_tasks, "Delta Spark": theirs}
    # deltadv's DataFrame packs the tasks into partitions as Spark packs files.
    from deltadv.spark._tasks import pack as _pack
    from deltadv.spark._tasks import split_size as _split_size

    packed = len(
        _pack([4096] * args.files, _split_size(spark), spark.sparkContext.defaultParallelism)
    )
    expected = {"deltadv": packed, "deltadv (tasks only)": args.files, "Delta Spark": args.files}
    for name, run in readers.items():  # warm-up and check
        n = run()
        if n != expected[name]:
            sys.exit(f"FAIL: {name} planned {n:,}, expected {expected[name]:,}")
    print(f"  {args.files:,} scan tasks in {packed:,} Spark partitions")
    times: dict[str, list[float]] = {name: [] for name in readers}
    names = list(readers)
    for i in range(args.repeat):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            t0 = time.perf_counter()
            readers[name]()
            times[name].append(time.perf_counter() - t0)
    print(f"\nplanning {args.files:,} files, best of {args.repeat}, seconds")
    for name, ts in times.items():
        print(f"  {name:<22} {min(ts):7.2f}   all: {', '.join(f'{t:.2f}' for t in ts)}")
    ratio = min(times["deltadv"]) / min(times["Delta Spark"])
    print(
        f"\n  deltadv / Delta Spark = {ratio:.2f} (goal <= {GOAL}: "
        f"{'met' if ratio <= GOAL else 'NOT met'})"
    )
    tasks_ratio = min(times["deltadv (tasks only)"]) / min(times["Delta Spark"])
    print(f"  deltadv tasks only / Delta Spark = {tasks_ratio:.2f}")
    print(f"  load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    spark.stop()


if __name__ == "__main__":
    main()
