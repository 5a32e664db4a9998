"""DELETE (or UPDATE) of one row from one big file: deletion vectors vs copy-on-write.

Seed 001's case: 10M rows in ONE parquet file of ~250 MB, ``DELETE ... WHERE id = <k>``.
Builds (or reuses, under ``--dir``, default /tmp/deltadv-bench-delete/one_row) one
data file of ``--rows`` people10m-like rows (default 10,000,000; columns ``id`` long,
``firstName``, ``middleName``, ``lastName``, ``gender`` string, ``birthDate``
timestamp, ``ssn`` string, ``salary`` int; see ``_delete_tables.py``), written by
pyarrow (snappy) with ``--row-group-rows`` rows per row group (default 1,048,576,
pyarrow's default: 10 row groups), and two Delta logs over that same file
(protocol 3/7 with ``deletionVectors``; ``delta.enableDeletionVectors`` true in
``dv/``, false in ``cow/``).

Timed, each run on a fresh copy of the table (copied and flushed to disk before
the clock starts; the copy is not timed), in rounds that rotate the order:

* deltadv (DV):          ``deltadv.DeltaTable(dv) .delete("id = k")`` (open + delete);
* deltalake (CoW):       ``deltalake.DeltaTable(cow).delete("id = k")`` (open + delete;
  rewrites the file without the row);
* Delta Spark (DV):      ``DELETE FROM delta.`dv` WHERE id = k``;
* Delta Spark (CoW):     ``DELETE FROM delta.`cow` WHERE id = k`` (DVs disabled).

Spark is local[2] with the tests' configuration (tests/python/conftest.py); skip
it with ``--no-spark``. Every run is checked afterwards (one row deleted, the log's
row count, a DV or no DV as expected); once, Delta Spark also reads deltadv's
result. Reported: best of ``--repeat`` (after ``--warmup``) per engine, and the
ratios measured in this run.

With ``--op update`` every engine runs ``UPDATE ... SET salary = salary + 1 WHERE
id = <k>`` instead (deltadv: ``update({"salary": "salary + 1"}, "id = k")``,
deltalake: ``update(updates=..., predicate=...)``, copy-on-write), and the checks
look for the row updated, none lost.

Goal: deltadv at least 30x faster than copy-on-write, and faster than Delta
Spark's DV delete (or update).

Run:  .venv/bin/python benches/bench_delete_one_row.py [--op update] [--dir DIR] [--no-spark]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _spark  # benches/_spark.py (the script's folder is on sys.path)
import deltalake
import pyarrow as pa
import pyarrow.compute as pc

import deltadv

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _delete_tables import describe_columns, fresh_copy, get_source, load

ROOT = Path(__file__).resolve().parents[1]
SEED = 20_251_122
PARAMS_FILE = "_bench_delete_one_row.json"
GOAL_COW = 30.0
COMMAND = "cd /work/main && .venv/bin/python benches/bench_delete_one_row.py"

Run = dict[str, Any]

#: The statement every engine runs: "delete" or "update" (``--op``).
OP = "delete"
#: The UPDATE's assignment, in deltadv's / deltalake's SQL and in Spark's.
SET = {"salary": "salary + 1"}


def make_session() -> Any:
    return _spark.make_session("deltadv-bench-delete-one-row")


# --------------------------------------------------------------------------- engines


def run_deltadv(path: Path, key: int) -> Run:
    t0 = time.perf_counter()
    dt = deltadv.DeltaTable(str(path))
    t1 = time.perf_counter()
    before = dt.request_counts()
    if OP == "update":
        m = dt.update(SET, f"id = {key}")
        changed = m["num_updated_rows"]
    else:
        m = dt.delete(f"id = {key}")
        changed = m["num_deleted_rows"]
    t2 = time.perf_counter()
    after = dt.request_counts()
    return {
        "total": t2 - t0,
        "phases": {"open": t1 - t0, OP: t2 - t1},
        "deleted": changed,
        "note": f"gets {after['gets'] - before['gets']}, puts {after['puts'] - before['puts']}",
    }


def run_deltalake(path: Path, key: int) -> Run:
    t0 = time.perf_counter()
    dt = deltalake.DeltaTable(str(path))
    t1 = time.perf_counter()
    if OP == "update":
        m = dt.update(updates=SET, predicate=f"id = {key}")
        changed = m["num_updated_rows"]
    else:
        m = dt.delete(f"id = {key}")
        changed = m["num_deleted_rows"]
    t2 = time.perf_counter()
    return {
        "total": t2 - t0,
        "phases": {"open": t1 - t0, OP: t2 - t1},
        "deleted": changed,
        "note": f"copied {m.get('num_copied_rows'):,} rows into {m.get('num_added_files')} file(s)",
    }


def spark_runner(spark: Any) -> Callable[[Path, int], Run]:
    def run_spark(path: Path, key: int) -> Run:
        t0 = time.perf_counter()
        if OP == "update":
            sql = f"UPDATE delta.`{path}` SET salary = salary + 1 WHERE id = {key}"
        else:
            sql = f"DELETE FROM delta.`{path}` WHERE id = {key}"
        rows = spark.sql(sql).collect()
        t1 = time.perf_counter()
        return {"total": t1 - t0, "phases": {}, "deleted": rows[0][0], "note": ""}

    return run_spark


# --------------------------------------------------------------------------- checks


def check(path: Path, rows: int, key: int, dv: bool, run: Run) -> list[str]:
    """What is wrong with the table after a one-row delete or update (read by
    deltadv's log)."""
    problems = []
    if run["deleted"] != 1:
        problems.append(f"reported {run['deleted']} changed rows, not 1")
    t = deltadv.DeltaTable(str(path))
    if t.version() != 1:
        problems.append(f"version {t.version()}, not 1")
    left = rows if OP == "update" else rows - 1
    if t.count() != left:
        problems.append(f"log row count {t.count()}, not {left}")
    files = t.get_add_actions()
    with_dv = files.num_rows - files["dv_cardinality"].null_count
    if with_dv != (1 if dv else 0):
        problems.append(f"{with_dv} files with a DV, expected {1 if dv else 0}")
    return problems


def cross_check(spark: Any | None, path: Path, rows: int, key: int) -> None:
    """deltadv's result as seen by deltadv's scan and by Delta Spark."""
    t = deltadv.DeltaTable(str(path))
    left = rows if OP == "update" else rows - 1
    want = 1 if OP == "update" else 0
    hit = t.to_pyarrow(["id"], filter=f"id = {key}").num_rows
    near = t.to_pyarrow(["id"], filter=f"id >= {key - 1} AND id <= {key + 1}")
    ids = sorted(near["id"].to_pylist())
    line = f"  deltadv scan of deltadv's result: id = {key} -> {hit} rows; neighbours {ids}"
    ok = hit == want and ids == sorted({key - 1, key + 1} | ({key} if want else set()))
    if spark is not None:
        df = spark.read.format("delta").load(str(path))
        n = df.count()
        gone = df.where(f"id = {key}").count()
        line += f"; Delta Spark: count() {n:,}, id = {key} -> {gone} rows"
        ok = ok and n == left and gone == want
    print(line + ("" if ok else "   <-- MISMATCH"))
    if not ok:
        sys.exit(f"FAIL: deltadv's {OP} result is wrong")


# --------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/tmp/deltadv-bench-delete", help="cache of source tables")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--row-group-rows", type=int, default=1_048_576)
    ap.add_argument("--key", type=int, help="id to delete (default: rows * 0.512 + 1)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per engine (best reported)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs per engine first")
    ap.add_argument("--no-spark", action="store_true", help="skip Delta Spark")
    ap.add_argument("--op", choices=["delete", "update"], default="delete")
    args = ap.parse_args()
    global OP
    OP = args.op
    key = args.key if args.key is not None else int(args.rows * 0.512) + 1

    print(
        f"python {platform.python_version()}, deltadv {deltadv.__version__}, "
        f"deltalake {deltalake.__version__}, pyarrow {pa.__version__}, "
        f"{platform.machine()}, {os.cpu_count()} cores, load average {load()}"
    )
    base = Path(args.dir).resolve() / "one_row"
    params = {"rows": args.rows, "row_group_rows": args.row_group_rows, "seed": SEED}
    src = get_source(
        base,
        PARAMS_FILE,
        params,
        seed=SEED,
        files=1,
        rows_per_file=args.rows,
        row_group_rows=args.row_group_rows,
        with_bucket=False,
    )
    print(
        f"  source: 1 file, {src['rows']:,} rows, {src['bytes'] / 1e6:.1f} MB, "
        f"{src['row_groups_per_file']} row groups; columns: {describe_columns(False)}"
    )
    print(f"  {OP}: id = {key} (row index {key - 1})")

    spark = None
    if not args.no_spark:
        t = time.perf_counter()
        spark = make_session()
        took = time.perf_counter() - t
        print(f"  Spark {spark.version} session local[2] started in {took:.1f} s")

    # name -> (source log, DV expected, runner)
    engines: dict[str, tuple[str, bool, Callable[[Path, int], Run]]] = {
        "deltadv (DV)": ("dv", True, run_deltadv),
        "deltalake (CoW)": ("cow", False, run_deltalake),
    }
    if spark is not None:
        run_spark = spark_runner(spark)
        engines["Delta Spark (DV)"] = ("dv", True, run_spark)
        engines["Delta Spark (CoW)"] = ("cow", False, run_spark)

    work = Path(args.dir).resolve() / "work"
    work.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[Run]] = {name: [] for name in engines}
    names = list(engines)
    cross_checked = False
    print(f"\nruns (warm-up {args.warmup}, timed {args.repeat} per engine; fresh copy each)")
    for i in range(args.warmup + args.repeat):
        order = names[i % len(names) :] + names[: i % len(names)]
        for name in order:
            variant, dv, fn = engines[name]
            copy = fresh_copy(base / variant, work / "table")
            r = fn(copy, key)
            problems = check(copy, args.rows, key, dv, r)
            if problems:
                sys.exit(f"FAIL: {name}: {'; '.join(problems)}")
            if name == "deltadv (DV)" and not cross_checked:
                cross_check(spark, copy, args.rows, key)
                cross_checked = True
            timed = i >= args.warmup
            if timed:
                runs[name].append(r)
            phases = " ".join(f"{k} {v:.3f}" for k, v in r["phases"].items())
            print(
                f"  {'run' if timed else 'warm-up'} {name:<18} {r['total']:8.3f} s"
                f"   {phases}   {r['note']}",
                flush=True,
            )
            shutil.rmtree(copy)

    best = {name: min(rs, key=lambda r: r["total"]) for name, rs in runs.items()}
    size = f"one {src['bytes'] / 1e6:.0f} MB file"
    print(f"\n{OP.upper()} one row of {args.rows:,} ({size}); best of {args.repeat}, seconds")
    print(f"  {'engine':<18} {'best':>8} {'median':>8}   phases of the best run")
    for name, r in best.items():
        med = statistics.median(x["total"] for x in runs[name])
        phases = " ".join(f"{k} {v:.3f}" for k, v in r["phases"].items())
        print(f"  {name:<18} {r['total']:8.3f} {med:8.3f}   {phases}")
    ours = best["deltadv (DV)"]["total"]
    print("\nspeed-up of deltadv (other / deltadv, best vs best)")
    for name in names[1:]:
        ratio = best[name]["total"] / ours
        if "CoW" in name:
            goal = f"goal >= {GOAL_COW:.0f}: {'met' if ratio >= GOAL_COW else 'NOT met'}"
        else:
            goal = f"goal > 1: {'met' if ratio > 1 else 'NOT met'}"
        print(f"  {name:<18} {ratio:8.1f}x   ({goal})")
    all_totals = {n: [round(r["total"], 3) for r in rs] for n, rs in runs.items()}
    print(f"  all timed totals (s): {all_totals}")
    # How much of deltadv's delete is the scan for the row? (informational, untimed above)
    copy = fresh_copy(base / "dv", work / "table")
    t = deltadv.DeltaTable(str(copy))
    t0 = time.perf_counter()
    found = t.scan_with_row_index(["id"], filter=f"id = {key}").read_all()
    t1 = time.perf_counter()
    print(
        f"\n  for reference: deltadv scan_with_row_index(['id'], 'id = {key}') alone: "
        f"{t1 - t0:.3f} s, row index {pc.min(found['_row_index']).as_py()}"
    )
    shutil.rmtree(copy)
    print(f"  load average at the end: {load()}")
    if spark is not None:
        spark.stop()


if __name__ == "__main__":
    main()
