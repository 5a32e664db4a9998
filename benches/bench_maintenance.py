"""Maintenance of DV tables: PURGE from Spark vs Delta Spark's REORG, the read
speed-up PURGE buys, and a VACUUM dry run over 100,000 files vs deltalake.

1. PURGE: the 10M-row, 10-file people10m-like table of ``_delete_tables.py``
   (built once under ``--dir``) with ``--fraction`` (10%) of every file's rows
   deleted at random (one DV per file, written by deltadv). Timed on a fresh copy
   each run, in one local[2] SparkSession: ``deltadv.spark.DeltaTable.forPath(...)
   .purge()`` vs ``REORG TABLE delta.`...` APPLY (PURGE)`` (Delta Spark 4.4).
   Goal: deltadv <= 0.7x Delta Spark's time. Both bin-pack up to ``--target-size``
   (32 MiB: each ~25 MB file is its own bin, rewritten in parallel; Delta Spark's
   ``optimize.maxFileSize`` is set to the same). Both results checked (row count, no DV).
2. Read speed-up: ``DeltaTable.to_pyarrow_table()`` (every column) of the DV table
   vs of the purged table, same engine, same process.
3. VACUUM dry run: a table of ``--vacuum-files`` (100,000) one-row files, half of them
   removed long ago (expired tombstones, old mtimes); ``deltadv.DeltaTable.vacuum()``
   vs ``deltalake.DeltaTable.vacuum()`` (both dry runs, default retention, the same
   files listed). Goal: deltadv <= 0.5x deltalake's time.

Run:  .venv/bin/python benches/bench_maintenance.py [--repeat N] [--no-spark]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import deltadv

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _spark
from _delete_tables import describe_columns, fresh_copy, get_source, load

SEED = 20_261_124
PARAMS_FILE = "_bench_maintenance.json"
COMMAND = "cd /work/main && .venv/bin/python benches/bench_maintenance.py"


def best(times: list[float]) -> float:
    return min(times)


def prepare_deleted(base: Path, work: Path, fraction: float) -> Path:
    """``work/deleted``: the DV table with `fraction` of every file's rows deleted."""
    out = work / "deleted"
    marker = work / f"deleted-{fraction}.done"
    if marker.exists() and out.exists():
        return out
    fresh_copy(base / "dv", out)
    t = deltadv.DeltaTable(str(out))
    rng = np.random.default_rng(SEED)
    rows: dict[str, Any] = {}
    for f in t.get_add_actions(flatten=False).to_pylist():
        n = f["num_records"]
        rows[f["path"]] = np.sort(rng.choice(n, size=int(n * fraction), replace=False))
    t.delete_rows(rows)
    marker.write_text("ok")
    return out


def check_purged(path: Path, rows: int) -> list[str]:
    t = deltadv.DeltaTable(str(path))
    problems = []
    if t.count() != rows:
        problems.append(f"{path}: {t.count()} rows, not {rows}")
    if t.deletion_vectors():
        problems.append(f"{path}: DVs left after PURGE")
    return problems


def bench_purge(args: argparse.Namespace, base: Path, work: Path) -> dict[str, Any]:
    deleted = prepare_deleted(base, work, args.fraction)
    live = deltadv.DeltaTable(str(deleted)).count()
    copy = work / "t"
    out: dict[str, Any] = {"rows_after": live}
    problems: list[str] = []
    # read speed-up: the DV table and a purged copy, read whole
    fresh_copy(deleted, copy)
    dv_reads, purged_reads = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        n = deltadv.DeltaTable(str(copy)).to_pyarrow_table().num_rows
        dv_reads.append(time.perf_counter() - t0)
        assert n == live
    deltadv.DeltaTable(str(copy)).purge(target_size=args.target_size)
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        n = deltadv.DeltaTable(str(copy)).to_pyarrow_table().num_rows
        purged_reads.append(time.perf_counter() - t0)
        assert n == live
    out["read_dv"] = best(dv_reads)
    out["read_purged"] = best(purged_reads)
    if not args.no_spark:
        from deltadv import spark as dspark

        spark = _spark.make_session("bench-maintenance")
        # Both engines bin-pack up to the same size: files stay about as they were.
        spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(args.target_size))
        ours, theirs = [], []
        for _ in range(args.repeat):
            fresh_copy(deleted, copy)
            t0 = time.perf_counter()
            m = dspark.DeltaTable.forPath(spark, str(copy)).purge(target_size=args.target_size)
            ours.append(time.perf_counter() - t0)
            problems += check_purged(copy, live)
            out["deltadv_files_added"] = m["num_added_files"]
            fresh_copy(deleted, copy)
            t0 = time.perf_counter()
            spark.sql(f"REORG TABLE delta.`{copy}` APPLY (PURGE)").collect()
            theirs.append(time.perf_counter() - t0)
            problems += check_purged(copy, live)
        out["spark_deltadv"] = best(ours)
        out["spark_delta"] = best(theirs)
        spark.stop()
    out["problems"] = problems
    return out


def build_vacuum_table(path: Path, files: int) -> None:
    """`files` one-row parquet files; version 0 adds them, version 1 removes every
    other one with a deletion timestamp a year old; every file's mtime is 30 days old."""
    marker = path / "_bench_files"
    if marker.exists() and marker.read_text() == str(files):
        return
    shutil.rmtree(path, ignore_errors=True)
    (path / "_delta_log").mkdir(parents=True)
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), sink)
    data = sink.getvalue().to_pybytes()
    old = time.time() - 30 * 86400
    year_ago_ms = int((time.time() - 365 * 86400) * 1000)
    stats = json.dumps(
        {"numRecords": 1, "minValues": {"id": 1}, "maxValues": {"id": 1}, "nullCount": {"id": 0}}
    )
    names = []
    for i in range(files):
        d = path / f"d{i % 100:02d}"
        d.mkdir(exist_ok=True)
        name = f"d{i % 100:02d}/part-{i:06d}.parquet"
        (path / name).write_bytes(data)
        os.utime(path / name, (old, old))
        names.append(name)
    schema = json.dumps(
        {
            "type": "struct",
            "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}],
        }
    )
    with open(path / "_delta_log" / f"{0:020}.json", "w") as log:
        log.write(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}) + "\n")
        log.write(
            json.dumps(
                {
                    "metaData": {
                        "id": "bench",
                        "format": {"provider": "parquet", "options": {}},
                        "schemaString": schema,
                        "partitionColumns": [],
                        "configuration": {},
                        "createdTime": year_ago_ms,
                    }
                }
            )
            + "\n"
        )
        for n in names:
            log.write(
                json.dumps(
                    {
                        "add": {
                            "path": n,
                            "partitionValues": {},
                            "size": len(data),
                            "modificationTime": year_ago_ms,
                            "dataChange": True,
                            "stats": stats,
                        }
                    }
                )
                + "\n"
            )
    with open(path / "_delta_log" / f"{1:020}.json", "w") as log:
        for n in names[::2]:
            log.write(
                json.dumps(
                    {
                        "remove": {
                            "path": n,
                            "deletionTimestamp": year_ago_ms,
                            "dataChange": True,
                            "extendedFileMetadata": True,
                            "partitionValues": {},
                            "size": len(data),
                        }
                    }
                )
                + "\n"
            )
    marker.write_text(str(files))


def bench_vacuum(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Both modes: full (list storage) and lite (expired tombstones only)."""
    path = work / "vacuum"
    build_vacuum_table(path, args.vacuum_files)
    expected = {f"d{i % 100:02d}/part-{i:06d}.parquet" for i in range(0, args.vacuum_files, 2)}
    out: dict[str, Any] = {"listed": len(expected), "problems": []}
    ours_table = deltadv.DeltaTable(str(path))
    theirs_table = deltalake.DeltaTable(str(path))
    for full in (True, False):
        ours, theirs = [], []
        listed: dict[str, set[str]] = {}
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            files = ours_table.vacuum(full=full)
            ours.append(time.perf_counter() - t0)
            listed["deltadv"] = set(files)
            t0 = time.perf_counter()
            files = theirs_table.vacuum(full=full)
            theirs.append(time.perf_counter() - t0)
            listed["deltalake"] = {
                f[len(str(path)) + 1 :] if f.startswith(str(path)) else f for f in files
            }
        mode = "full" if full else "lite"
        out[mode] = (best(ours), best(theirs))
        out["problems"] += [
            f"{engine} ({mode}) listed {len(got)} files, {len(got ^ expected)} differ"
            for engine, got in listed.items()
            if got != expected
        ]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/tmp/deltadv-bench-delete", help="cache of source tables")
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--rows-per-file", type=int, default=1_000_000)
    ap.add_argument("--fraction", type=float, default=0.10)
    ap.add_argument("--vacuum-files", type=int, default=100_000)
    ap.add_argument(
        "--target-size",
        type=int,
        default=32 << 20,
        help="PURGE bin size (bytes) for both engines; the default keeps one file per file",
    )
    ap.add_argument("--repeat", type=int, default=2, help="timed runs per engine (best reported)")
    ap.add_argument("--no-spark", action="store_true", help="skip the Spark comparison")
    args = ap.parse_args()
    print(
        f"python {platform.python_version()}, deltadv {deltadv.__version__}, "
        f"deltalake {deltalake.__version__}, pyarrow {pa.__version__}, "
        f"{platform.machine()}, {os.cpu_count()} cores, load average {load()}"
    )
    root = Path(args.dir).resolve()
    base = root / "maintenance"
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
        f"columns: {describe_columns(False)}; {args.fraction:.0%} of each file's rows deleted"
    )
    work = root / "maintenance-work"
    work.mkdir(exist_ok=True)
    purge = bench_purge(args, base, work)
    print("PURGE:")
    if "spark_deltadv" in purge:
        ratio = purge["spark_deltadv"] / purge["spark_delta"]
        print(
            f"  deltadv Spark purge()             best {purge['spark_deltadv']:8.3f} s "
            f"({purge['deltadv_files_added']} files written, target {args.target_size} B)"
        )
        print(f"  Delta Spark REORG ... PURGE       best {purge['spark_delta']:8.3f} s")
        print(f"  ratio: deltadv / Delta Spark = {ratio:.2f}x (goal <= 0.7x)")
    print("Read after PURGE (deltadv to_pyarrow_table, every column):")
    print(f"  with DVs ({args.fraction:.0%} deleted)   best {purge['read_dv']:8.3f} s")
    print(f"  purged                       best {purge['read_purged']:8.3f} s")
    print(f"  speed-up: {purge['read_dv'] / purge['read_purged']:.2f}x")
    vac = bench_vacuum(args, work)
    print(
        f"VACUUM dry run, {args.vacuum_files:,} files ({vac['listed']:,} to delete), "
        "tables loaded before timing:"
    )
    for mode in ("full", "lite"):
        ours, theirs = vac[mode]
        print(
            f"  {mode}: deltadv {ours:.3f} s, deltalake vacuum(full={mode == 'full'}) "
            f"{theirs:.3f} s, ratio {ours / theirs:.2f}x (goal <= 0.5x)"
        )
    problems = purge["problems"] + vac["problems"]
    for p in problems:
        print(f"PROBLEM: {p}")
    print(f"command: {COMMAND} --repeat {args.repeat}")
    if problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
