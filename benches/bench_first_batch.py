"""First rows of a large table with deletion vectors: ``head(5)`` latency, against polars
and deltalake.

Builds (or reuses, under ``--dir``) two Delta tables written with pyarrow and
deltadv: ``big``, ``--files`` small parquet files (default 10,000 x 100 rows,
the columns of bench_scan.py), every file with a DV deleting 10% of its rows
(uniform random, fixed seed), the DVs packed ``--files-per-dv-file`` to a DV
file (default 100, so 100 DV files), as Delta Spark packs them; and ``subset``,
the same shape with ``--subset`` files (default 500). One commit each (protocol,
metaData, the adds with their DV descriptors and ``numRecords``).

``head(5)`` (issue 28: delta-rs issue #4627, ``pl.scan_delta(path).head(5)``
loads every DV of the table before its first row). Each reader runs in a fresh
process; the time is the open (snapshot load) plus the first five rows:

* ``deltadv-limit``: ``deltadv.DeltaTable(uri).scan(limit=5).read_all()``, with
  the object-store requests made after the snapshot load
  (``request_counts()``: ``gets`` counts every GET, ``dv_gets`` those of DV
  files). Its rows
  must be the first five live rows of file 0, in order;
* ``deltadv-polars``: ``deltadv.polars.scan_delta(table).head(5).collect()`` on
  the ``deltadv.DeltaTable`` opened (timed), so its requests are counted too;
* ``polars``: ``pl.scan_delta(uri).head(5).collect()`` (polars, DVs through
  deltalake);
* ``deltalake``: ``QueryBuilder().register('t', DeltaTable(uri)).execute('select
  * from t limit 5')`` collected.

Peers run under a cap of ``--cap`` seconds (default 60): one that does not return
is reported ``> cap`` (killed). Every reader's rows are checked against the DVs
(five rows, each a live row of the table); a wrong answer is reported WRONG.
Each table is read from the local disk and, unless ``--no-s3``, from a real S3
server (moto_server on 127.0.0.1, started here; the tables uploaded to it).

Goals (issue 28): on ``big``, deltadv's ``head(5)`` (both ways) under 0.5 s with
at most 2 data-file and 2 DV-file GETs after the snapshot load; on ``subset``,
deltadv / the fastest peer <= 0.5.

Lazy polars scans of whole tables: benches/bench_polars.py.

Run:  .venv/bin/python benches/bench_first_batch.py [--dir /tmp/deltadv-bench-first-batch]
      [--files 10000] [--subset 500] [--cap 60] [--no-s3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
from bench_scan import add_action, make_file, write_commit

import deltadv

SEED = 20_261_127
PARAMS_FILE = "_bench_first_batch.json"
HEAD = 5
DELETED_SHARE = 0.10
READERS = ("deltadv-limit", "deltadv-polars", "polars", "deltalake")
ROOT = Path(__file__).resolve().parent.parent
OPTIONS_ENV = "DELTADV_BENCH_STORAGE_OPTIONS"


# --------------------------------------------------------------------------- building


def build_table(root: Path, files: int, rows: int, per_dv_file: int, seed: int) -> None:
    """``files`` files of ``rows`` rows, ids ``file * rows + row``; a DV on each."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True)
    names = [f"part-{i:05}.parquet" for i in range(files)]
    for i, name in enumerate(names):
        pq.write_table(make_file(rng, i * rows, rows), root / name)
    n_deleted = max(1, int(rows * DELETED_SHARE))
    deleted = [np.sort(rng.choice(rows, n_deleted, replace=False)) for _ in range(files)]
    descriptors: list[Any] = []
    for start in range(0, files, per_dv_file):
        group = deleted[start : start + per_dv_file]
        descriptors += deltadv.write_deletion_vectors(
            str(root), [deltadv.DeletionVector(d.tolist()) for d in group]
        )
    write_commit(
        root,
        [add_action(root, n, rows, dv) for n, dv in zip(names, descriptors, strict=True)],
    )
    np.save(root.parent / f"{root.name}-deleted.npy", np.stack(deleted))


def get_tables(base: Path, params: dict[str, Any]) -> None:
    if (base / PARAMS_FILE).exists():
        built = json.loads((base / PARAMS_FILE).read_text())
        if built != params:
            sys.exit(
                f"FAIL: {base} holds tables built with {built}, not {params}; use another --dir"
            )
        print(f"reusing the tables in {base}")
        return
    if base.exists() and any(base.iterdir()):
        sys.exit(f"FAIL: {base} exists and was not built by this script")
    t0 = time.perf_counter()
    for name, files in (("big", params["files"]), ("subset", params["subset"])):
        print(f"building {name}: {files:,} files x {params['rows']} rows ...", flush=True)
        build_table(base / name, files, params["rows"], params["per_dv_file"], SEED + files)
    (base / PARAMS_FILE).write_text(json.dumps(params))
    print(f"  built in {time.perf_counter() - t0:.0f} s")


def upload(endpoint: str, base: Path, names: list[str]) -> None:
    """The tables into bucket ``bench`` of the S3 server, 16 uploads at a time."""
    sys.path.insert(0, str(ROOT))
    from tests.python.s3server import client

    s3 = client(endpoint)
    s3.create_bucket(Bucket="bench")
    paths = [p for n in names for p in sorted((base / n).rglob("*")) if p.is_file()]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        list(
            pool.map(
                lambda p: s3.upload_file(str(p), "bench", p.relative_to(base).as_posix()), paths
            )
        )
    print(f"uploaded {len(paths):,} files to {endpoint} in {time.perf_counter() - t0:.0f} s")


# --------------------------------------------------------------------------- readers (child)


def read_head(name: str, uri: str, options: dict[str, str]) -> dict[str, Any]:
    """Open ``uri`` and take its first rows with reader ``name``: ids, seconds,
    and for deltadv-limit the requests after the snapshot load."""
    # the libraries are imported before the clock starts (their import is not
    # the latency measured here)
    import polars as pl
    from deltalake import DeltaTable as LakeTable
    from deltalake import QueryBuilder

    import deltadv.polars as dpl

    t0 = time.perf_counter()
    out: dict[str, Any] = {}
    if name == "deltadv-limit":
        table = deltadv.DeltaTable(uri, storage_options=options or None)
        out["open_s"] = time.perf_counter() - t0
        before = table.request_counts()
        ids = table.scan(columns=["id"], limit=HEAD).read_all().column("id").to_pylist()
        after = table.request_counts()
        out["requests"] = {k: after[k] - before.get(k, 0) for k in after}
    elif name == "deltadv-polars":
        table = deltadv.DeltaTable(uri, storage_options=options or None)
        out["open_s"] = time.perf_counter() - t0
        before = table.request_counts()
        ids = dpl.scan_delta(table).head(HEAD).collect()["id"].to_list()
        after = table.request_counts()
        out["requests"] = {k: after[k] - before.get(k, 0) for k in after}
    elif name == "polars":
        ids = (
            pl.scan_delta(uri, storage_options=options or None).head(HEAD).collect()["id"].to_list()
        )
    elif name == "deltalake":
        lake = LakeTable(uri, storage_options=options or None)
        result = QueryBuilder().register("t", lake).execute(f"select id from t limit {HEAD}")
        ids = [v for batch in result for v in batch.column(0).to_pylist()]
    else:
        raise SystemExit(f"unknown reader {name}")
    out["seconds"] = time.perf_counter() - t0
    out["ids"] = ids
    return out


def run_reader(name: str, uri: str, options: dict[str, str], cap: float) -> dict[str, Any]:
    """``read_head`` in a fresh process, killed after ``cap`` seconds."""
    cmd = [sys.executable, __file__, "--child", name, "--uri", uri]
    # the storage options (credentials) go through the environment, not argv
    env = {**os.environ, OPTIONS_ENV: json.dumps(options)}
    t0 = time.perf_counter()
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=cap, check=False, env=env
        )
    except subprocess.TimeoutExpired:
        return {"capped": True, "wall_s": time.perf_counter() - t0}
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["exit " + str(done.returncode)])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def check(ids: list[int], deleted: np.ndarray, rows: int, ordered: bool) -> str:
    """'ok' when ``ids`` are HEAD live rows (the first HEAD of file 0 when ordered)."""
    if len(ids) != HEAD:
        return f"WRONG: {len(ids)} rows"
    for i in ids:
        f, r = divmod(int(i), rows)
        if not 0 <= f < len(deleted) or r in set(deleted[f].tolist()):
            return f"WRONG: row {i} is deleted or not in the table"
    if ordered:
        gone = set(deleted[0].tolist())
        want = [r for r in range(rows) if r not in gone][:HEAD]
        if ids != want:
            return f"WRONG: {ids}, expected the first live rows {want}"
    return "ok"


# --------------------------------------------------------------------------- main


def report(
    table: str, where: str, uri: str, options: dict[str, str], base: Path, args: Any
) -> None:
    deleted = np.load(base / f"{table}-deleted.npy")
    print(f"\n{table} ({len(deleted):,} files), {where}: head({HEAD}), open + first rows")
    print(f"  {'reader':<15} {'seconds':>9}  requests after the load  check")
    best_peer, ours = float("inf"), 0.0
    for name in READERS:
        if args.only and name not in args.only.split(","):
            continue
        res = run_reader(name, uri, options, args.cap)
        if res.get("capped"):
            print(
                f"  {name:<15} {'> ' + str(int(args.cap)):>9}  -  "
                f"did not return in {args.cap:.0f} s (killed)"
            )
            continue
        if "error" in res:
            print(f"  {name:<15} {'-':>9}  -  FAILS: {res['error'][:160]}")
            continue
        ok = check(res["ids"], deleted, args.rows, ordered=name.startswith("deltadv"))
        req = res.get("requests")
        shown = (
            ", ".join(f"{k} {v}" for k, v in req.items() if v and k != "bytes_read") if req else "-"
        )
        print(f"  {name:<15} {res['seconds']:>9.3f}  {shown or 'none'}  {ok}")
        if ok == "ok":
            if name.startswith("deltadv"):
                ours = max(ours, res["seconds"])
            else:
                best_peer = min(best_peer, res["seconds"])
    if ours and best_peer < float("inf"):
        print(f"  deltadv (slower of its two) / fastest peer: {ours / best_peer:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/tmp/deltadv-bench-first-batch")
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--subset", type=int, default=500)
    ap.add_argument("--rows", type=int, default=100, help="rows per file")
    ap.add_argument("--files-per-dv-file", type=int, default=100)
    ap.add_argument("--cap", type=float, default=60.0, help="seconds a reader may take")
    ap.add_argument("--no-s3", action="store_true", help="local tables only")
    ap.add_argument("--only", help="comma-separated readers")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--uri", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        options = json.loads(os.environ.get(OPTIONS_ENV, "{}"))
        print(json.dumps(read_head(args.child, args.uri, options)))
        return

    base = Path(args.dir)
    params = {
        "files": args.files,
        "subset": args.subset,
        "rows": args.rows,
        "per_dv_file": args.files_per_dv_file,
    }
    get_tables(base, params)
    print(
        f"python {platform.python_version()}, deltadv {deltadv.__version__}, "
        f"{platform.machine()}, {os.cpu_count()} cpus, load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    for table in ("big", "subset"):
        report(table, "local disk", str(base / table), {}, base, args)
    if not args.no_s3:
        sys.path.insert(0, str(ROOT))
        from tests.python.s3server import s3_server, storage_options

        with s3_server() as endpoint:
            upload(endpoint, base, ["big", "subset"])
            options = storage_options(endpoint)
            for table in ("big", "subset"):
                report(table, "S3 (moto_server)", f"s3://bench/{table}", options, base, args)


if __name__ == "__main__":
    main()
