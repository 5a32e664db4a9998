"""DELETE speed-up heatmap: deletion vectors (deltadv) vs copy-on-write (deltalake),
by files touched x rows deleted per file; and PUTs per deltadv DELETE.

Seed 002's heatmap. Builds (or reuses, under ``--dir``, default
/tmp/deltadv-bench-delete/heatmap) a table of ``--files`` parquet files (default
100) of ``--rows-per-file`` people10m-like rows each (default 200,000; one row
group per file; columns as in ``_delete_tables.py`` plus ``bucket`` int, a random
permutation of 0..rows-1 within each file), ids consecutive across files, and two
Delta logs over the same files (protocol 3/7 with ``deletionVectors``;
``delta.enableDeletionVectors`` true in ``dv/``, false in ``cow/``).

Cell (N files touched, k rows per file) deletes ``id <= N * rows AND bucket < k``:
exactly k scattered rows in each of the first N files (the others are ruled out by
their id stats). For every cell, each run on a fresh copy of the table (copy not
timed), best of ``--repeat``:

* deltadv predicate:   ``deltadv.DeltaTable(dv).delete(predicate)`` (open + delete:
  reads ``id`` and ``bucket`` of the N files, writes one DV file, commits);
* deltadv delete_rows: ``deltadv.DeltaTable(dv).delete_rows({path: rows})`` with the
  row indexes known beforehand (as an erasure request resolved by key lookups);
* deltalake (CoW):     ``deltalake.DeltaTable(cow).delete(predicate)`` (open +
  delete: rewrites the N files).

Every run is checked (rows deleted, the log's row count, files with a DV).
``request_counts()["puts"]`` of the deltadv table object before and after each
delete gives the PUTs per DELETE (expected: 1 DV file + 1 commit = 2, for any N).
Speed-ups (deltalake / deltadv, best vs best) are printed and drawn, annotated,
into ``--png`` (default docs/delete_heatmap.png).

Goal: speed-up >= 2 in every cell.

Threads (issue 28): ``--threads N[,N...]`` times only ``deltadv predicate`` (no
deltalake, no heatmap), with N threads (``DELTADV_NUM_THREADS=N`` and
``deltadv.set_num_threads(N)`` before anything else; the DELETE's candidate scan
reads up to max(4, N) files at once, each on up to N threads), wall and CPU time
(all threads) per cell; with several counts, each count runs in a subprocess of its
own, then wall / CPU / utilisation per count and wall(N) / wall(smallest) are
printed (goal for 2 / 1: <= 0.6). The case of issue 28, DELETE of 1% random rows
over a 16-file table (``bucket`` is a random permutation in each file)::

    .venv/bin/python benches/bench_delete_heatmap.py --dir /tmp/del16 --files 16 \
        --rows-per-file 200000 --touched 16 --per-file 2000 --repeat 5 --threads 1,2

Run:  .venv/bin/python benches/bench_delete_heatmap.py [--dir DIR] [--repeat N]
      [--threads N[,N...]]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import deltadv

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _delete_tables import describe_columns, fresh_copy, get_source, load
from _threads import run_by_threads

ROOT = Path(__file__).resolve().parents[1]
SEED = 20_251_123
PARAMS_FILE = "_bench_delete_heatmap.json"
GOAL = 2.0
COMMAND = "cd /work/main && .venv/bin/python benches/bench_delete_heatmap.py"

Run = dict[str, Any]
Cell = tuple[int, int]  # (files touched, rows deleted per file)


# --------------------------------------------------------------------------- engines


class Workload:
    """The source tables and, per cell, the predicate and the row indexes it selects."""

    def __init__(self, base: Path, src: dict[str, Any]) -> None:
        self.base = base
        self.rows_per_file: int = src["rows_per_file"]
        self.total: int = src["rows"]
        self.paths: list[str] = src["paths"]
        # bucket column of every file (a permutation of 0..rows-1), for delete_rows.
        self.buckets = [
            pq.read_table(base / "data" / p, columns=["bucket"])["bucket"].to_numpy()
            for p in self.paths
        ]

    def predicate(self, cell: Cell) -> str:
        n, k = cell
        return f"id <= {n * self.rows_per_file} AND bucket < {k}"

    def rows(self, cell: Cell) -> dict[str, np.ndarray]:
        n, k = cell
        return {
            self.paths[f]: np.flatnonzero(self.buckets[f] < k).astype(np.uint64) for f in range(n)
        }


def _timed_delete(path: Path, delete: Any) -> Run:
    """Open the table and run ``delete(table)``: times (wall; CPU of all the
    process's threads), rows deleted, requests."""
    c0 = time.process_time()
    t0 = time.perf_counter()
    dt = deltadv.DeltaTable(str(path))
    t1 = time.perf_counter()
    before = dt.request_counts()
    m = delete(dt)
    t2 = time.perf_counter()
    c2 = time.process_time()
    after = dt.request_counts()
    return {
        "total": t2 - t0,
        "cpu": c2 - c0,
        "open": t1 - t0,
        "deleted": m["num_deleted_rows"],
        "puts": after["puts"] - before["puts"],
        "gets": after["gets"] - before["gets"],
    }


def run_deltadv_predicate(w: Workload, path: Path, cell: Cell) -> Run:
    return _timed_delete(path, lambda dt: dt.delete(w.predicate(cell)))


def run_deltadv_rows(w: Workload, path: Path, cell: Cell) -> Run:
    rows = w.rows(cell)  # computed before the clock starts
    return _timed_delete(path, lambda dt: dt.delete_rows(rows))


def run_deltalake(w: Workload, path: Path, cell: Cell) -> Run:
    t0 = time.perf_counter()
    dt = deltalake.DeltaTable(str(path))
    t1 = time.perf_counter()
    m = dt.delete(w.predicate(cell))
    t2 = time.perf_counter()
    return {"total": t2 - t0, "open": t1 - t0, "deleted": m["num_deleted_rows"]}


# name -> (source log, DVs expected, runner)
ENGINES: dict[str, tuple[str, bool, Callable[[Workload, Path, Cell], Run]]] = {
    "deltadv predicate": ("dv", True, run_deltadv_predicate),
    "deltadv delete_rows": ("dv", True, run_deltadv_rows),
    "deltalake (CoW)": ("cow", False, run_deltalake),
}


def check(w: Workload, path: Path, cell: Cell, dv: bool, run: Run) -> list[str]:
    """What is wrong with the table after the delete of `cell` (read by deltadv's log)."""
    n, k = cell
    problems = []
    if run["deleted"] != n * k:
        problems.append(f"reported {run['deleted']} deleted rows, not {n * k}")
    t = deltadv.DeltaTable(str(path))
    if t.count() != w.total - n * k:
        problems.append(f"log row count {t.count()}, not {w.total - n * k}")
    files = t.get_add_actions()
    with_dv = files.num_rows - files["dv_cardinality"].null_count
    if with_dv != (n if dv else 0):
        problems.append(f"{with_dv} files with a DV, expected {n if dv else 0}")
    return problems


def measure(w: Workload, work: Path, name: str, cell: Cell, label: str = "run") -> Run:
    variant, dv, fn = ENGINES[name]
    copy = fresh_copy(w.base / variant, work / "table")
    r = fn(w, copy, cell)
    problems = check(w, copy, cell, dv, r)
    if problems:
        sys.exit(f"FAIL: {name} {cell}: {'; '.join(problems)}")
    shutil.rmtree(copy)
    extra = f"   puts {r['puts']}, gets {r['gets']}" if "puts" in r else ""
    print(
        f"  {label:<7} N={cell[0]:<3} k={cell[1]:<6} {name:<20} {r['total']:8.3f} s"
        f"   (open {r['open']:.3f}){extra}",
        flush=True,
    )
    return r


# --------------------------------------------------------------------------- output


def seconds(s: float) -> str:
    return f"{s * 1e3:.0f} ms" if s < 1 else f"{s:.1f} s"


def draw(
    png: Path,
    touched: list[int],
    per_file: list[int],
    speedups: dict[str, dict[Cell, float]],
    best: dict[str, dict[Cell, Run]],
    title: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    panels = list(speedups)
    values = [v for s in speedups.values() for v in s.values()]
    norm = LogNorm(vmin=min(1.0, *values), vmax=max(values))
    fig, axes = plt.subplots(1, len(panels), figsize=(6.8 * len(panels), 5.6), squeeze=False)
    image = None
    for ax, panel in zip(axes[0], panels, strict=True):
        grid = np.array([[speedups[panel][(n, k)] for k in per_file] for n in touched])
        image = ax.imshow(grid, cmap="viridis", norm=norm, origin="lower")
        ax.set_xticks(range(len(per_file)), [f"{k:,}" for k in per_file])
        ax.set_yticks(range(len(touched)), [str(n) for n in touched])
        ax.set_xlabel("rows deleted per file")
        ax.set_ylabel("files touched")
        ax.set_title(f"deltalake (copy-on-write) / {panel}", fontsize=10)
        for i, n in enumerate(touched):
            for j, k in enumerate(per_file):
                s = speedups[panel][(n, k)]
                ours = best[panel][(n, k)]["total"]
                theirs = best["deltalake (CoW)"][(n, k)]["total"]
                bright = norm(s) > 0.55
                ax.text(
                    j,
                    i,
                    f"{s:,.1f}x\ndeltadv {seconds(ours)}\nCoW {seconds(theirs)}",
                    ha="center",
                    va="center",
                    fontsize=8.5,
                    color="black" if bright else "white",
                    fontweight="bold" if s >= GOAL else "normal",
                )
    if image is not None:
        fig.colorbar(image, ax=axes[0].tolist(), label="speed-up (x, log scale)", shrink=0.85)
    fig.suptitle(title, fontsize=10)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110, bbox_inches="tight")
    plt.close(fig)


def run_threads(w: Workload, work: Path, cells: list[Cell], repeat: int) -> dict[str, Run]:
    """``deltadv predicate`` on every cell with this process's threads: best of
    ``repeat`` (after one warm-up run), by cell (``"N,k"``)."""
    name = "deltadv predicate"
    print(f"\n{name} with {deltadv.num_threads()} threads (warm-up, then {repeat} runs a cell)")
    measure(w, work, name, cells[0], "warm-up")
    best: dict[str, Run] = {}
    for cell in cells:
        for _ in range(repeat):
            r = measure(w, work, name, cell)
            key = f"{cell[0]},{cell[1]}"
            if key not in best or r["total"] < best[key]["total"]:
                best[key] = {**r, "load": load()}
    print(f"\nbest of {repeat}, ms (open + delete), cpu ms, utilisation (cpu / wall)")
    for key, r in best.items():
        print(
            f"  N,k = {key:<12} {r['total'] * 1e3:8.1f} {r['cpu'] * 1e3:8.1f} "
            f"{r['cpu'] / r['total']:5.2f}   (load average {r['load']})"
        )
    return best


def by_threads(counts: list[int]) -> None:
    """:func:`run_threads` once per thread count, each in a subprocess of its own
    (its report printed as it runs), then wall / CPU / utilisation per count and
    the wall of each count / that of the smallest."""
    counts = sorted(counts)
    results: dict[int, dict[str, Run]] = run_by_threads(__file__, counts)
    low = counts[0]
    print(f"\n======== summary by threads ({', '.join(map(str, counts))}) ========")
    print("deltadv predicate, best wall ms / cpu ms / utilisation per thread count:")
    for key in results[low]:
        cells = []
        for n in counts:
            r = results[n][key]
            cells.append(
                f"{n:>3}: {r['total'] * 1e3:7.1f} {r['cpu'] * 1e3:7.1f} "
                f"{r['cpu'] / r['total']:5.2f}"
            )
        print(f"  N,k = {key:<12} " + "   ".join(cells))
    print(f"wall with N threads / wall with {low} (goal for 2 / 1: <= 0.6):")
    for key in results[low]:
        cells = []
        for n in counts[1:]:
            ratio = results[n][key]["total"] / results[low][key]["total"]
            goal = ""
            if (low, n) == (1, 2):
                goal = " (met)" if ratio <= 0.6 else " (NOT met)"
            cells.append(f"{n}/{low}: {ratio:5.2f}{goal}")
        print(f"  N,k = {key:<12} " + "   ".join(cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/tmp/deltadv-bench-delete", help="cache of source tables")
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--rows-per-file", type=int, default=200_000)
    ap.add_argument("--row-group-rows", type=int, default=1_048_576)
    ap.add_argument("--touched", default="1,10,100", help="files touched per cell")
    ap.add_argument("--per-file", default="1,1000,100000", help="rows deleted per file")
    ap.add_argument("--repeat", type=int, default=2, help="timed runs per engine and cell")
    ap.add_argument("--png", default=str(ROOT / "docs" / "delete_heatmap.png"))
    ap.add_argument(
        "--threads",
        help="time only deltadv predicate with N threads; several, comma-separated: "
        "one subprocess per count, then a summary",
    )
    ap.add_argument("--json-out", help=argparse.SUPPRESS)  # a subprocess's figures, for its parent
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")] if args.threads else []
    if any(t < 1 for t in threads):
        sys.exit(f"FAIL: --threads takes positive integers, not {args.threads!r}")
    if len(threads) == 1:
        os.environ["DELTADV_NUM_THREADS"] = str(threads[0])  # before deltadv's runtime starts
        deltadv.set_num_threads(threads[0])
    touched = [int(x) for x in args.touched.split(",")]
    per_file = [int(x) for x in args.per_file.split(",")]
    if max(touched) > args.files or max(per_file) > args.rows_per_file:
        sys.exit("FAIL: a cell needs more files or rows than the table has")

    print(
        f"python {platform.python_version()}, deltadv {deltadv.__version__}, "
        f"deltalake {deltalake.__version__}, pyarrow {pa.__version__}, "
        f"{platform.machine()}, {os.cpu_count()} cores, load average {load()}; "
        f"deltadv threads {deltadv.num_threads()}"
    )
    base = Path(args.dir).resolve() / "heatmap"
    params = {
        "files": args.files,
        "rows_per_file": args.rows_per_file,
        "row_group_rows": args.row_group_rows,
        "seed": SEED,
    }
    src = get_source(
        base,
        PARAMS_FILE,
        params,
        seed=SEED,
        files=args.files,
        rows_per_file=args.rows_per_file,
        row_group_rows=args.row_group_rows,
        with_bucket=True,
    )
    print(
        f"  source: {src['files']} files x {src['rows_per_file']:,} rows = {src['rows']:,} "
        f"rows, {src['bytes'] / 1e6:.0f} MB ({src['bytes'] / src['files'] / 1e6:.1f} MB/file, "
        f"{src['row_groups_per_file']} row group(s) per file)"
    )
    print(f"  columns: {describe_columns(True)}")
    w = Workload(base, src)
    work = Path(args.dir).resolve() / "work"
    work.mkdir(parents=True, exist_ok=True)
    cells = [(n, k) for n in touched for k in per_file]
    if len(threads) > 1:
        by_threads(threads)  # the source is built by now: the subprocesses reuse it
        return
    if threads:
        best_runs = run_threads(w, work, cells, args.repeat)
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(best_runs))
        return
    names = list(ENGINES)

    print("\nwarm-up (untimed): each engine once on the smallest cell")
    for name in names:
        measure(w, work, name, cells[0], "warm-up")
    print(f"\nruns ({args.repeat} per engine and cell; fresh copy each)")
    best: dict[str, dict[Cell, Run]] = {name: {} for name in names}
    t_start = time.perf_counter()
    for cell in cells:
        for i in range(args.repeat):
            order = names[i % len(names) :] + names[: i % len(names)]
            for name in order:
                r = measure(w, work, name, cell)
                if cell not in best[name] or r["total"] < best[name][cell]["total"]:
                    best[name][cell] = r
    elapsed = time.perf_counter() - t_start

    ours = ["deltadv predicate", "deltadv delete_rows"]
    speedups = {
        o: {c: best["deltalake (CoW)"][c]["total"] / best[o][c]["total"] for c in cells}
        for o in ours
    }
    print(f"\nbest of {args.repeat}, seconds (open + delete)")
    header = "  " + f"{'N files':>7} {'k rows/file':>11} " + " ".join(f"{n:>20}" for n in names)
    print(header)
    for n, k in cells:
        print(
            f"  {n:>7} {k:>11,} "
            + " ".join(f"{best[name][(n, k)]['total']:>20.3f}" for name in names)
        )
    for o in ours:
        print(f"\nspeed-up deltalake (CoW) / {o}   (goal >= {GOAL:.0f} in every cell)")
        print("  " + "N \\ k".rjust(7) + " " + " ".join(f"{k:>10,}" for k in per_file))
        for n in touched:
            print(f"  {n:>7} " + " ".join(f"{speedups[o][(n, k)]:>9.1f}x" for k in per_file))
        low = [c for c in cells if speedups[o][c] < GOAL]
        print(f"  goal {'met' if not low else 'NOT met in ' + str(low)}")
    print("\nPUTs (and GETs) per deltadv DELETE, request_counts() after - before")
    print("  " + f"{'N files':>7} {'k rows/file':>11} {'predicate':>16} {'delete_rows':>16}")
    for n, k in cells:
        p, r = best["deltadv predicate"][(n, k)], best["deltadv delete_rows"][(n, k)]
        print(
            f"  {n:>7} {k:>11,} {p['puts']:>6} ({p['gets']:>3} gets) "
            f"{r['puts']:>6} ({r['gets']:>3} gets)"
        )
    title = (
        f"DELETE speed-up, {src['files']} files x {src['rows_per_file']:,} rows "
        f"({src['bytes'] / src['files'] / 1e6:.1f} MB/file); best of {args.repeat}; "
        f"deltadv {deltadv.__version__}, deltalake {deltalake.__version__}; "
        f"{os.cpu_count()} cores; {time.strftime('%Y-%m-%d')}"
    )
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("\n  heatmap not drawn: matplotlib is missing (pip install -e '.[bench]')")
    else:
        draw(Path(args.png), touched, per_file, speedups, best, title)
        print(f"\n  heatmap written to {args.png}")
    print(f"  timed part took {elapsed:.0f} s; load average at the end: {load()}")


if __name__ == "__main__":
    main()
