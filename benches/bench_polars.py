"""Lazy polars scans: ``deltadv.polars.scan_delta`` vs ``pl.scan_delta``, same queries,
same tables, same run.

Builds (or reuses, under ``--dir``) two Delta tables of ``--files`` files of
``--rows-per-file`` rows, written by ``deltalake.write_deltalake``, with
bench_scan.py's five columns (``id`` long, ``k`` int 0..999, ``x`` and ``y``
double, ``s`` ``'name-<0..9999>'``): ``full`` (no DVs) and ``dv10`` (the same
rows, those with ``k < 100`` (~10%) deleted by deltadv with deletion vectors). Each query is
collected by both readers (checked to give the same rows, sorted by ``id``),
then timed, best of ``--repeat`` rounds, alternating which goes first:

* ``selective``: ``filter(pl.col("k") >= 990).select("id", "x")`` (pushed down);
* ``rare``:      ``filter(pl.col("x") < 0.0001).select("id", "s")`` (pushed down,
  ~0.01% of the rows: the filter's column decoded first, the others at its rows);
* ``two_preds``: ``filter((pl.col("k") == 5) & (pl.col("y") > 2)).select("id", "s", "x")``
  (pushed down);
* ``unmapped``:  ``filter(pl.col("s").str.ends_with("7")).select("id")`` (polars
  evaluates it);
* ``two_cols``:  ``select("id", "s")``;
* ``head5``:     ``head(5)``.

Prints wall ms and deltadv / pl.scan_delta per query and table. The issue 28 goal
for ``selective`` is <= 0.8.

    python benches/bench_polars.py --files 4 --rows-per-file 500000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

import deltadv
import deltadv.polars as dpl

QUERIES: dict[str, Callable[[pl.LazyFrame], pl.LazyFrame]] = {
    "selective": lambda lf: lf.filter(pl.col("k") >= 990).select("id", "x"),
    "rare": lambda lf: lf.filter(pl.col("x") < 0.0001).select("id", "s"),
    "two_preds": lambda lf: lf.filter((pl.col("k") == 5) & (pl.col("y") > 2)).select(
        "id", "s", "x"
    ),
    "unmapped": lambda lf: lf.filter(pl.col("s").str.ends_with("7")).select("id"),
    "two_cols": lambda lf: lf.select("id", "s"),
    "head5": lambda lf: lf.head(5),
}


def build(root: Path, files: int, rows: int) -> dict[str, str]:
    import deltalake

    tables = {"full": str(root / "full"), "dv10": str(root / "dv10")}
    if all((Path(p) / "_delta_log").is_dir() for p in tables.values()):
        return tables
    rng = np.random.default_rng(28)
    for i in range(files):
        ids = np.arange(i * rows, (i + 1) * rows, dtype=np.int64)
        batch = pa.table(
            {
                "id": ids,
                "k": rng.integers(0, 1000, rows, dtype=np.int32),
                "x": rng.random(rows),
                "y": rng.normal(size=rows),
                "s": pa.array(np.char.add("name-", rng.integers(0, 10_000, rows).astype(str))),
            }
        )
        for path in tables.values():
            deltalake.write_deltalake(path, batch, mode="append")
    table = deltadv.DeltaTable(tables["dv10"])
    table.enable_deletion_vectors()
    table.delete("k < 100")  # about 10% of the rows, spread over every file
    return tables


def best(run: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--rows-per-file", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="keep/reuse tables here")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench_polars_"))
    tables = build(root, args.files, args.rows_per_file)
    print(f"polars {pl.__version__}, {args.files} files x {args.rows_per_file:,} rows, {root}")
    print(f"{'table':6} {'query':10} {'deltadv ms':>11} {'pl ms':>8} {'ratio':>6}")
    for name, path in tables.items():
        for query_name, query in QUERIES.items():

            def ours(q: Callable[[pl.LazyFrame], pl.LazyFrame] = query, p: str = path) -> Any:
                return q(dpl.scan_delta(p)).collect()

            def theirs(q: Callable[[pl.LazyFrame], pl.LazyFrame] = query, p: str = path) -> Any:
                return q(pl.scan_delta(p)).collect()

            a, b = ours(), theirs()
            if query_name == "head5":
                same = a.height == b.height == 5
            else:
                same = a.sort("id").equals(b.sort("id"))
            if not same:
                print(f"{name:6} {query_name:10} WRONG: {a.shape} vs pl.scan_delta {b.shape}")
                continue
            t_ours = t_theirs = float("inf")
            for round_ in range(2):  # alternate which goes first
                first, second = (ours, theirs) if round_ == 0 else (theirs, ours)
                t1 = best(first, args.repeat)
                t2 = best(second, args.repeat)
                r_ours, r_theirs = (t1, t2) if round_ == 0 else (t2, t1)
                t_ours, t_theirs = min(t_ours, r_ours), min(t_theirs, r_theirs)
            print(
                f"{name:6} {query_name:10} {t_ours * 1e3:11.1f} {t_theirs * 1e3:8.1f} "
                f"{t_ours / t_theirs:6.2f}"
            )


if __name__ == "__main__":
    main()
