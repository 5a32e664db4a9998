"""MERGE upserting 0.1% of a 10M-row, 10-file table: deletion vectors vs copy-on-write.

Source table (built once under ``--dir``, default /tmp/deltadv-bench-delete/merge):
``--files`` (10) parquet files of ``--rows-per-file`` (1,000,000) people10m-like
rows (see ``_delete_tables.py``), with two Delta logs over the same files
(``dv/``: deletion vectors enabled; ``cow/``: disabled).

The MERGE source: ``--fraction`` (0.1%) of the table's row count, half of it
existing ids spread over every file (``salary`` + 1, other columns unchanged),
half new ids above the table's (inserted); one parquet file, read by every engine.

    MERGE INTO t USING s ON t.id = s.id
      WHEN MATCHED THEN UPDATE SET *  WHEN NOT MATCHED THEN INSERT *

Timed, each run on a fresh copy of the table (the copy is not timed):

* Python: deltadv ``DeltaTable(dv).merge(src, ...).when_matched_update_all()
  .when_not_matched_insert_all().execute()`` (DVs) vs deltalake's ``merge`` with the
  same clauses on ``cow/`` (deltalake writes no DVs: copy-on-write). Goal: >= 10x.
* Spark (local[2]): ``deltadv.spark.DeltaTable.forPath(...).alias("t").merge(
  src.alias("s"), ...)`` vs Delta Spark's ``MERGE INTO`` on ``dv/`` (Delta Spark
  writes DVs for MERGE). Goal: deltadv <= 0.5x Delta Spark's time.

Every run is checked (row count, one updated and one inserted row); PUTs per MERGE
are counted (deltadv Python: the table's object-store request counter; the Spark
runs: files the MERGE added under the table: data files, DV files, commit).

Run:  .venv/bin/python benches/bench_merge.py [--no-spark] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import _spark  # benches/_spark.py (the script's folder is on sys.path)
import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import deltadv

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _delete_tables import describe_columns, fresh_copy, get_source, load

SEED = 20_261_123
PARAMS_FILE = "_bench_merge.json"
COMMAND = "cd /work/main && .venv/bin/python benches/bench_merge.py"

Run = dict[str, Any]


def make_merge_source(table: Path, out: Path, rows: int, fraction: float) -> dict[str, Any]:
    """Half existing ids (salary + 1), half new ids; written to ``out`` (parquet)."""
    n = max(2, int(rows * fraction))
    rng = np.random.default_rng(SEED)
    existing = np.sort(rng.choice(rows, size=n // 2, replace=False)) + 1
    t = deltadv.DeltaTable(str(table))
    # the existing rows as they are, then salary + 1
    ids = pa.array(existing, pa.int64())
    current = t.to_pyarrow_table(filter=f"id >= {int(existing[0])} AND id <= {int(existing[-1])}")
    current = current.filter(pc.is_in(current["id"], value_set=ids)).sort_by("id")
    updated = current.set_column(
        current.schema.get_field_index("salary"),
        "salary",
        pc.add(current["salary"], pa.scalar(1, pa.int32())),
    )
    new_ids = pa.array(np.arange(rows + 1, rows + 1 + (n - n // 2)), pa.int64())
    template = current.slice(0, 1)
    inserted = pa.concat_tables([template] * len(new_ids)).set_column(0, "id", new_ids)
    source = pa.concat_tables([updated, inserted])
    pq.write_table(source, out)
    return {
        "path": out,
        "rows": source.num_rows,
        "updated": updated.num_rows,
        "inserted": inserted.num_rows,
        "probe_update": (int(updated["id"][0].as_py()), int(updated["salary"][0].as_py())),
        "probe_insert": int(new_ids[0].as_py()),
    }


def files_under(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()}


def run_deltadv(path: Path, src: pa.Table) -> Run:
    t0 = time.perf_counter()
    t = deltadv.DeltaTable(str(path))
    before = t.request_counts()
    m = (
        t.merge(src, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    took = time.perf_counter() - t0
    puts = t.request_counts()["puts"] - before["puts"]
    return {
        "seconds": took,
        "puts": puts,
        "updated": m["num_target_rows_updated"],
        "inserted": m["num_target_rows_inserted"],
        "files_added": m["num_target_files_added"],
    }


def run_deltalake(path: Path, src: pa.Table) -> Run:
    t0 = time.perf_counter()
    m = (
        deltalake.DeltaTable(str(path))
        .merge(src, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    return {
        "seconds": time.perf_counter() - t0,
        "updated": m["num_target_rows_updated"],
        "inserted": m["num_target_rows_inserted"],
    }


def run_deltadv_spark(spark: Any, path: Path, src_path: Path) -> Run:
    from deltadv import spark as dspark

    before = files_under(path)
    t0 = time.perf_counter()
    src = spark.read.parquet(str(src_path))
    m = (
        dspark.DeltaTable.forPath(spark, str(path))
        .alias("t")
        .merge(src.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    took = time.perf_counter() - t0
    return {
        "seconds": took,
        "puts": len(files_under(path) - before),
        "updated": m["num_target_rows_updated"],
        "inserted": m["num_target_rows_inserted"],
    }


def run_delta_spark(spark: Any, path: Path, src_path: Path) -> Run:
    before = files_under(path)
    t0 = time.perf_counter()
    spark.read.parquet(str(src_path)).createOrReplaceTempView("merge_src")
    row = spark.sql(
        f"MERGE INTO delta.`{path}` t USING merge_src s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    ).collect()[0]
    took = time.perf_counter() - t0
    return {
        "seconds": took,
        "puts": len(files_under(path) - before),
        "updated": int(row["num_updated_rows"]),
        "inserted": int(row["num_inserted_rows"]),
    }


def check(path: Path, rows: int, info: dict[str, Any], run: Run, dv: bool) -> list[str]:
    problems = []
    if (run["updated"], run["inserted"]) != (info["updated"], info["inserted"]):
        problems.append(f"reported {run['updated']}/{run['inserted']} updated/inserted")
    if dv:
        t = deltadv.DeltaTable(str(path))
        if t.count() != rows + info["inserted"]:
            problems.append(f"log row count {t.count()}, not {rows + info['inserted']}")
        key, salary = info["probe_update"]
        got = t.to_pyarrow(["id", "salary"], filter=f"id = {key}").to_pylist()
        if got != [{"id": key, "salary": salary}]:
            problems.append(f"id {key}: {got}, want salary {salary}")
        new = info["probe_insert"]
        if t.to_pyarrow(["id"], filter=f"id = {new}").num_rows != 1:
            problems.append(f"inserted id {new} missing")
    else:
        d = deltalake.DeltaTable(str(path))
        n = sum(pa.table(d.get_add_actions(flatten=True))["num_records"].to_pylist())
        if n != rows + info["inserted"]:
            problems.append(f"log row count {n}, not {rows + info['inserted']}")
    return problems


def timed(name: str, runs: list[Run]) -> float:
    best = min(r["seconds"] for r in runs)
    med = statistics.median(r["seconds"] for r in runs)
    extra = f", PUTs {runs[0]['puts']}" if "puts" in runs[0] else ""
    print(f"  {name:<24} best {best:8.3f} s  median {med:8.3f} s  ({len(runs)} runs{extra})")
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/tmp/deltadv-bench-delete", help="cache of source tables")
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--rows-per-file", type=int, default=1_000_000)
    ap.add_argument("--fraction", type=float, default=0.001)
    ap.add_argument("--repeat", type=int, default=2, help="timed runs per engine (best reported)")
    ap.add_argument("--no-spark", action="store_true", help="skip the Spark comparison")
    args = ap.parse_args()
    rows = args.files * args.rows_per_file
    print(
        f"python {platform.python_version()}, deltadv {deltadv.__version__}, "
        f"deltalake {deltalake.__version__}, pyarrow {pa.__version__}, "
        f"{platform.machine()}, {os.cpu_count()} cores, load average {load()}"
    )
    base = Path(args.dir).resolve() / "merge"
    params = {"files": args.files, "rows_per_file": args.rows_per_file, "seed": SEED}
    src = get_source(
        base,
        PARAMS_FILE,
        params,
        seed=SEED,
        files=args.files,
        rows_per_file=args.rows_per_file,
        row_group_rows=1_048_576,
        with_bucket=False,
    )
    print(
        f"  table: {args.files} files, {src['rows']:,} rows, {src['bytes'] / 1e6:.1f} MB; "
        f"columns: {describe_columns(False)}"
    )
    work = Path(args.dir).resolve() / "merge-work"
    work.mkdir(exist_ok=True)
    info = make_merge_source(base / "dv", work / "source.parquet", rows, args.fraction)
    source = pq.read_table(info["path"])
    print(
        f"  MERGE source: {info['rows']:,} rows ({args.fraction:.2%}): "
        f"{info['updated']:,} matched (UPDATE SET *), {info['inserted']:,} new (INSERT *)"
    )
    copy = work / "t"
    results: dict[str, list[Run]] = {}
    problems: list[str] = []

    def go(name: str, variant: str, fn: Any, dv: bool) -> None:
        for _ in range(args.repeat):
            fresh_copy(base / variant, copy)
            run = fn(copy)
            problems.extend(f"{name}: {p}" for p in check(copy, rows, info, run, dv))
            results.setdefault(name, []).append(run)

    print("Python:")
    go("deltadv (DV)", "dv", lambda p: run_deltadv(p, source), True)
    go("deltalake (CoW)", "cow", lambda p: run_deltalake(p, source), False)
    ours = timed("deltadv (DV)", results["deltadv (DV)"])
    theirs = timed("deltalake (CoW)", results["deltalake (CoW)"])
    print(f"  ratio: deltalake / deltadv = {theirs / ours:.1f}x (goal >= 10x)")

    if not args.no_spark:
        spark = _spark.make_session("deltadv-bench-merge")
        print("Spark (local[2]):")
        go("deltadv Spark (DV)", "dv", lambda p: run_deltadv_spark(spark, p, info["path"]), True)
        go("Delta Spark (DV)", "dv", lambda p: run_delta_spark(spark, p, info["path"]), True)
        ours = timed("deltadv Spark (DV)", results["deltadv Spark (DV)"])
        theirs = timed("Delta Spark (DV)", results["Delta Spark (DV)"])
        print(f"  ratio: deltadv / Delta Spark = {ours / theirs:.2f}x (goal <= 0.5x)")
    shutil.rmtree(copy, ignore_errors=True)
    if problems:
        print("\n".join(problems))
        sys.exit("FAIL: a MERGE result was wrong")
    print(f"command: {COMMAND} " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
