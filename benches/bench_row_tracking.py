"""UPDATE of 1% of the rows: a row-tracking table vs the same table without row tracking.

Builds (under ``--dir``, default /tmp/deltadv-bench-row-tracking) two tables with the
same ``--rows`` rows (default 2,000,000: ``id`` long, ``s`` string, ``x`` double,
``k`` = id % 100 int) in
``--files`` files (default 8), both written by deltadv's ``write_table`` with deletion
vectors on; ``rt/`` also has ``delta.enableRowTracking=true`` (so an UPDATE reads each
updated row's id in its scan, with the row, and writes it to the materialized row-id
column), ``plain/`` does not.

Timed, each run on a fresh copy of the table (the copy is not timed), in rounds that
rotate the order: ``deltadv.DeltaTable(t).update({"x": "x + 1"}, "k = 7")``
(open + update, 1% of the rows, every file touched). Each run is checked: the number
of rows updated. Reported: best of ``--repeat`` per table and the ratio
row-tracking / plain measured in this run (goal: at most 1.2x).

Run:  .venv/bin/python benches/bench_row_tracking.py [--rows N] [--files F] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import deltadv
from deltadv.write import write_table


def build(path: Path, rows: int, files: int, tracking: bool) -> None:
    if (path / "_delta_log").exists():
        return
    per = rows // files
    config = {"delta.enableDeletionVectors": "true"}
    if tracking:
        config["delta.enableRowTracking"] = "true"
    for f in range(files):
        ids = pa.array(range(f * per, (f + 1) * per), pa.int64())
        data = pa.table(
            {
                "id": ids,
                "s": pc.binary_join_element_wise("row-", pc.cast(ids, pa.string()), ""),
                "x": pc.multiply(pc.cast(ids, pa.float64()), 0.5),
                "k": pa.array([i % 100 for i in range(f * per, (f + 1) * per)], pa.int32()),
            }
        )
        write_table(
            str(path),
            data,
            mode="error" if f == 0 else "append",
            configuration=config if f == 0 else None,
        )


def run_once(src: Path, work: Path, expected: int) -> float:
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(src, work)
    os.sync()
    start = time.perf_counter()
    m = deltadv.DeltaTable(str(work)).update({"x": "x + 1"}, "k = 7")
    elapsed = time.perf_counter() - start
    if m["num_updated_rows"] != expected:
        raise SystemExit(f"{src.name}: updated {m['num_updated_rows']} rows, not {expected}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default="/tmp/deltadv-bench-row-tracking")
    args = ap.parse_args()
    root = Path(args.dir) / f"{args.rows}x{args.files}"
    tables = {"row tracking": root / "rt", "plain": root / "plain"}
    for name, path in tables.items():
        build(path, args.rows, args.files, name == "row tracking")
    per = args.rows // args.files
    expected = sum(1 for i in range(per * args.files) if i % 100 == 7)
    times: dict[str, list[float]] = {name: [] for name in tables}
    names = list(tables)
    for r in range(args.repeat):
        order = names[r % 2 :] + names[: r % 2]
        for name in order:
            times[name].append(run_once(tables[name], root / "work", expected))
    best = {name: min(t) for name, t in times.items()}
    print(f"UPDATE of {expected:,} of {per * args.files:,} rows in {args.files} files")
    for name, t in best.items():
        print(
            f"  {name:13s} best {t * 1000:8.1f} ms",
            "(all: " + ", ".join(f"{x:.3f}" for x in times[name]) + " s)",
        )
    print(
        f"  ratio row tracking / plain: {best['row tracking'] / best['plain']:.2f}x (goal <= 1.2x)"
    )


if __name__ == "__main__":
    main()
