"""Peak memory of streamed scans: a table of several GB (decoded) read batch by batch.

Builds (or reuses, under ``--dir``) one Delta table of ``--files`` parquet files
written by pyarrow (default 8; snappy, row groups of ``--row-group-rows`` rows,
default 131,072), the columns of bench_scan.py (``id`` long consecutive, ``k``
int, ``x``/``y`` double, ``s`` string ``'name-<0..9999>'``): file 0 holds
2 x ``--rows-per-file`` rows (default 2 x 12,582,912, about 1 GB decoded), the
others ``--rows-per-file`` (about 0.5 GB decoded each), about 4.6 GB in all.
Deletion vectors (uniform random row indexes, fixed seed), all in one DV file
written by ``deltadv.write_deletion_vectors``: 5% of file 0, 1% of file 1, 10%
of file 3, 2% of file 5; the other files have none. The log is written the way
bench_scan.py writes it (version 0: protocol, metaData, adds with the DV
descriptors and ``numRecords``).

Each measurement runs in a fresh subprocess (``--child <name>``), which imports
only what it needs, records its peak RSS after the imports (the baseline), then
reads, dropping each batch, and reports ``resource.getrusage(RUSAGE_SELF).ru_maxrss``
(the process's peak resident set), the decoded bytes it saw (sum of
``batch.nbytes``), wall and CPU time. Row count and ``sum(id)`` are checked
against what the builder kept (a reader that gets them wrong is reported WRONG).

Whole table (goal: deltadv peak RSS <= 512 MB):

* ``deltadv-scan``: ``deltadv.DeltaTable(path).scan()`` iterated (default
  ``prefetch_files=4``);
* ``pyarrow-dataset``: ``pyarrow.dataset.dataset(files).to_batches()`` over the
  same parquet files (IGNORES the DVs: every physical row; a streaming floor);
* ``duckdb-stream``: DuckDB ``delta_scan`` fetched with ``fetch_record_batch()``;
* ``deltalake-stream``: deltalake ``QueryBuilder().register('t', DeltaTable(path))
  .execute('select * from t')`` iterated (its result is a stream);
* ``deltalake-table``: deltalake ``DeltaTable(path).to_pyarrow_table()``, which
  would MATERIALISE the table (the contrast) but refuses tables with DVs
  (deltalake 1.6: "reader features {'deletionVectors'} ... not yet supported");
* ``deltalake-read_all``: so the materialising contrast is the same QueryBuilder
  result collected into one pyarrow Table (both skipped with ``--no-materialise``).

One ~1 GB file (file 0):

* ``deltadv-task``: the ``ScanTask`` of file 0 (``scan_tasks(split_size=2**40)``,
  one task per file), ``task.read()`` iterated;
* ``pyarrow-file``: ``pyarrow.dataset.dataset([file 0]).to_batches()`` (DVs ignored).

With ``--spark``: ``deltadv.spark.read(spark, path).write.format("noop")`` in a
local[2] session (benches/_spark.py), the RSS of every Python process under the
driver (pyspark.daemon and the workers it forks) polled with psutil every 20 ms;
reported: the largest single worker and the largest sum at one instant.

Threads (issue 28): deltadv decodes ``threads`` pieces of files (runs of row
groups) at once, each at most ``READ_AHEAD_BYTES`` (4 MiB) of batches ahead of the
reader, at most ``threads + 1`` pieces live; so its peak RSS is bounded by about
``baseline + 48 MB + (threads + 1) x 4 x (4 MiB + C)``, ``C`` the largest row
group's compressed bytes (fetched whole before it is decoded): linear in the
threads. A live piece holds its budget, a batch beyond it waiting for its permit,
the reader's batch, its compressed row group and decode buffers; and the allocator
keeps some of what each thread freed. With an arena per thread (jemalloc's default,
four per CPU) that was a third of the 16-thread figure: 616 MB on a 16-core machine
(issue 28, session 18), 615 MB here with 16 threads and ``_RJEM_MALLOC_CONF=narenas:64``
(the 16-core default on any machine). deltadv's runtime threads now share arenas
four to one (src/python/alloc.rs): peak 125 / 149 / 165 / 252 / 399-438 / 764 MB at
1 / 2 / 4 / 8 / 16 / 32 threads on this table (``C`` = 3.7 MiB, baseline ~72 MB),
about baseline + 15 MB + 21 MB a thread: the 512 MB goal holds up to about 20
threads (``DELTADV_NUM_THREADS``).
``--threads N`` runs every measurement with ``DELTADV_NUM_THREADS=N`` (default:
the CPUs the process may use); the report prints the bound with this table's ``C``.

Run:  .venv/bin/python benches/bench_stream_memory.py [--dir /tmp/deltadv-bench-mem] [--spark]
      [--threads N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

PARAMS_FILE = "_bench_stream_memory.json"  # at --dir's root, next to the table
COMMAND = "cd /work/main && .venv/bin/python benches/bench_stream_memory.py"
SEED = 20_251_123
DV_PERCENT = {0: 5, 1: 1, 3: 10, 5: 2}  # file index -> % of its rows deleted
GOAL_MB = 512
READ_AHEAD_MB = 4  # deltadv's scan::READ_AHEAD_BYTES, per piece read ahead
# The bound on deltadv's peak RSS: baseline + FIXED_MB + (threads + 1) x PIECE_FACTOR
# x (READ_AHEAD_MB + C). Fitted on this table at 1, 2 and 16 threads on a 16-core
# machine (issue 28) with an arena per thread: 137, 166 and 616 MB, baseline 75:
# ~45 MB whatever the threads (the scan's DVs, footers, the runtime, the allocator)
# and up to ~30 MB a live piece = 4 x (4 MiB + C): batches beyond the budget (one
# waiting for its permit, one with the reader), the compressed row group, decode
# buffers, and what the allocator keeps (arenas shared four to one since: ~21 MB a
# thread, see the docstring).
FIXED_MB = 48
PIECE_FACTOR = 4
CHUNK_ROW_GROUPS = 16  # row groups generated (and written) at a time
WHOLE = ["deltadv-scan", "pyarrow-dataset", "duckdb-stream", "deltalake-stream"]
ONE_FILE = ["deltadv-task", "pyarrow-file"]
IGNORES_DVS = {"pyarrow-dataset", "pyarrow-file"}


def peak_mb() -> float:
    """ru_maxrss (KiB on Linux) in MiB. Linux carries it over execve from the
    process that spawned us, so the parent of the measurements stays small (it
    imports neither pyarrow nor deltadv) and ``hwm_mb`` cross-checks it."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def hwm_mb() -> float:
    """VmHWM of /proc/self/status: the peak RSS of this process's own address space."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# --------------------------------------------------------------------------- building


def file_rows(params: dict[str, Any], i: int) -> int:
    return params["rows_per_file"] * (2 if i == 0 else 1)


def build(base: Path, params: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    import pyarrow.parquet as pq
    from bench_scan import ARROW_SCHEMA, add_action, make_file, write_commit

    import deltadv

    t0 = time.perf_counter()
    rng = np.random.default_rng(SEED)
    root = base / "table"
    root.mkdir(parents=True)
    rg = params["row_group_rows"]
    names, firsts = [], []
    first = 0
    decoded = 0
    for i in range(params["files"]):
        n = file_rows(params, i)
        name = f"part-{i:05d}-bench-stream-memory.c000.parquet"
        with pq.ParquetWriter(root / name, ARROW_SCHEMA, compression="snappy") as w:
            for start in range(0, n, rg * CHUNK_ROW_GROUPS):
                chunk = make_file(rng, first + start, min(rg * CHUNK_ROW_GROUPS, n - start))
                decoded += chunk.nbytes
                w.write_table(chunk, row_group_size=rg)
        names.append(name)
        firsts.append(first)
        first += n
        print(
            f"  file {i}: {n:,} rows written ({time.perf_counter() - t0:.0f} s)",
            file=sys.stderr,
            flush=True,
        )

    physical = {"rows": first, "id_sum": first * (first - 1) // 2}
    dv_files = sorted(DV_PERCENT)
    deleted = {
        i: np.sort(
            rng.choice(file_rows(params, i), round(file_rows(params, i) * DV_PERCENT[i] / 100),
                       replace=False)
        )
        for i in dv_files
    }  # fmt: skip
    descriptors = deltadv.write_deletion_vectors(
        str(root), [deltadv.DeletionVector(deleted[i]) for i in dv_files]
    )
    dvs = dict(zip(dv_files, descriptors, strict=True))
    write_commit(
        root,
        [add_action(root, name, file_rows(params, i), dvs.get(i)) for i, name in enumerate(names)],
    )

    def live(i: int) -> dict[str, int]:
        n, f = file_rows(params, i), firsts[i]
        d = deleted.get(i, np.zeros(0, dtype=np.int64))
        ids = n * (2 * f + n - 1) // 2 - int((d.astype(np.int64) + f).sum())
        return {"rows": n - len(d), "id_sum": ids}

    lives = [live(i) for i in range(params["files"])]
    n0 = file_rows(params, 0)
    expected = {
        "table": {
            "rows": sum(x["rows"] for x in lives),
            "id_sum": sum(x["id_sum"] for x in lives),
        },
        "table_physical": physical,
        "file0": lives[0],
        "file0_physical": {"rows": n0, "id_sum": n0 * (n0 - 1) // 2},
    }
    built = {
        "params": params,
        "expected": expected,
        "files": names,
        "decoded_bytes": decoded,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    (base / PARAMS_FILE).write_text(json.dumps(built, indent=1))
    print(f"  built in {built['seconds']} s, {decoded / 1e9:.2f} GB decoded", file=sys.stderr)
    return built


def get_table(base: Path, params: dict[str, Any]) -> dict[str, Any]:
    if (base / PARAMS_FILE).exists():
        built = json.loads((base / PARAMS_FILE).read_text())
        if built["params"] != params:
            sys.exit(
                f"FAIL: {base} holds a table built with {built['params']}, not {params}; "
                "use another --dir"
            )
        print(
            f"reusing the table in {base / 'table'} (built in {built['seconds']} s)",
            file=sys.stderr,
        )
        return built
    if base.exists() and any(base.iterdir()):
        sys.exit(f"FAIL: {base} exists and was not built by this script")
    print(f"building the table in {base / 'table'} ...", file=sys.stderr, flush=True)
    return build(base, params)


# --------------------------------------------------------------------------- children


def drain(reader: Any) -> dict[str, int]:
    """Pull every batch, keep only counters: bytes, rows, sum(id)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    nbytes = rows = id_sum = 0
    for batch in reader:
        if not isinstance(batch, pa.RecordBatch):  # arro3 (deltalake): PyCapsule interface
            batch = pa.record_batch(batch)
        nbytes += batch.nbytes
        rows += batch.num_rows
        id_sum += pc.sum(batch.column("id")).as_py() or 0
        del batch
    return {"bytes": nbytes, "rows": rows, "id_sum": id_sum}


def duckdb_connection() -> Any:
    """A DuckDB connection with the delta extension of the ``duckdb-ext-delta``
    wheel (``duckdb_ext/extensions/v<version>/<platform>/delta.duckdb_extension``)."""
    import importlib.util

    import duckdb

    spec = importlib.util.find_spec("duckdb_ext")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("duckdb-ext-delta is not installed")
    ext_dir = Path(next(iter(spec.submodule_search_locations))) / "extensions"
    con = duckdb.connect()
    con.execute(f"SET extension_directory = '{ext_dir}'")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("LOAD delta")
    return con


def child(name: str, base: Path, built: dict[str, Any]) -> dict[str, Any]:
    root = base / "table"
    files = [str(root / f) for f in built["files"]]
    import pyarrow as pa  # every reader needs it; part of the baseline

    if name.startswith("deltadv"):
        import deltadv
    elif name.startswith("pyarrow"):
        import pyarrow.dataset as ds
    elif name == "duckdb-stream":
        con = duckdb_connection()
    elif name.startswith("deltalake"):
        from deltalake import DeltaTable, QueryBuilder
    baseline = peak_mb()
    c0, t0 = time.process_time(), time.perf_counter()
    if name == "deltadv-scan":
        got = drain(deltadv.DeltaTable(str(root)).scan())
    elif name == "deltadv-task":
        tasks = deltadv.DeltaTable(str(root)).scan_tasks(split_size=2**40)
        (task,) = [t for t in tasks if json.loads(t.json)["path"].endswith(built["files"][0])]
        got = drain(task.read())
    elif name == "pyarrow-dataset":
        got = drain(ds.dataset(files, format="parquet").to_batches())
    elif name == "pyarrow-file":
        got = drain(ds.dataset(files[:1], format="parquet").to_batches())
    elif name == "duckdb-stream":
        got = drain(con.execute(f"SELECT * FROM delta_scan('{root}')").fetch_record_batch())
    elif name == "deltalake-stream":
        q = QueryBuilder().register("t", DeltaTable(str(root))).execute("select * from t")
        got = drain(q)
    elif name in ("deltalake-table", "deltalake-read_all"):
        import pyarrow.compute as pc

        if name == "deltalake-table":
            table = DeltaTable(str(root)).to_pyarrow_table()
        else:
            q = QueryBuilder().register("t", DeltaTable(str(root))).execute("select * from t")
            table = pa.table(q)

        got = {
            "bytes": table.nbytes,
            "rows": table.num_rows,
            "id_sum": pc.sum(table["id"]).as_py(),
        }
        del table
    else:
        raise SystemExit(f"unknown measurement {name}")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        **got,
        "baseline_mb": baseline,
        "peak_mb": peak_mb(),
        "hwm_mb": hwm_mb(),
        "wall_s": wall,
        "cpu_s": cpu,
    }


def info_child(base: Path, params: dict[str, Any]) -> dict[str, Any]:
    """Versions, and the table (built here if missing, so the parent stays small)."""
    import pyarrow as pa

    import deltadv

    versions = (
        f"python {platform.python_version()}, deltadv {deltadv.__version__} "
        f"({deltadv.num_threads()} threads), pyarrow {pa.__version__}"
    )
    for mod in ("duckdb", "deltalake", "pyspark"):
        try:
            versions += f", {mod} {__import__(mod).__version__}"
        except ImportError:
            pass
    built = get_table(base, params)
    import pyarrow.parquet as pq

    largest = 0  # the largest row group's compressed bytes
    for name in built["files"]:
        meta = pq.ParquetFile(base / "table" / name).metadata
        for i in range(meta.num_row_groups):
            rg = meta.row_group(i)
            size = sum(rg.column(j).total_compressed_size for j in range(rg.num_columns))
            largest = max(largest, size)
    return {
        "versions": versions,
        "built": built,
        "threads": deltadv.num_threads(),
        "row_group_bytes": largest,
    }


def spark_child(base: Path, built: dict[str, Any]) -> dict[str, Any]:
    """deltadv.spark.read(...).write.format("noop") with psutil polling the Python
    processes under this driver (the JVM's pyspark.daemon and its forked workers)."""
    import _spark  # benches/_spark.py
    import psutil

    from deltadv import spark as dspark

    spark = _spark.make_session("deltadv-bench-stream-memory")
    me = psutil.Process()
    per_pid: dict[int, float] = {}
    names: dict[int, str] = {}
    peak_sum = [0.0]
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            total = 0.0
            for p in me.children(recursive=True):
                try:
                    if "python" not in p.name():
                        continue
                    rss = p.memory_info().rss / 2**20
                    cmd = " ".join(p.cmdline()[1:])[:60]
                except psutil.Error:
                    continue
                total += rss
                per_pid[p.pid] = max(per_pid.get(p.pid, 0.0), rss)
                names[p.pid] = cmd
            peak_sum[0] = max(peak_sum[0], total)
            stop.wait(0.02)

    root = str(base / "table")
    # warm-up: the Python workers start and import deltadv (reused afterwards)
    spark.range(2).mapInArrow(lambda it: it, "id long").count()
    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    c0, t0 = time.process_time(), time.perf_counter()
    df = dspark.read(spark, root)
    tasks = df.rdd.getNumPartitions()
    df.write.format("noop").mode("overwrite").save()
    wall = time.perf_counter() - t0
    stop.set()
    watcher.join()
    # the rows, checked in a separate pass (not under the poller)
    from pyspark.sql import functions as F

    row = dspark.read(spark, root).agg(F.count("*"), F.sum("id")).first()
    spark.stop()
    workers = {pid: mb for pid, mb in per_pid.items()}
    return {
        "rows": row[0],
        "id_sum": row[1],
        "bytes": None,
        "tasks": tasks,
        "worker_peak_mb": max(workers.values()) if workers else None,
        "workers": {f"{pid} {names[pid]}": round(mb) for pid, mb in workers.items()},
        "sum_peak_mb": peak_sum[0],
        "peak_mb": max(workers.values()) if workers else None,
        "baseline_mb": None,
        "wall_s": wall,
        "cpu_s": time.process_time() - c0,
    }


# --------------------------------------------------------------------------- main


def run_child(name: str, base: Path, extra: list[str] | None = None) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--dir", str(base), "--child", name, *(extra or [])]
    # the info child (which may build the table) reports its progress on stderr
    err = None if name == "info" else subprocess.PIPE
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
    if out.returncode != 0:
        lines = ((out.stderr or "").strip() or out.stdout.strip() or "?").splitlines()
        return {"error": lines[-1][:200]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/tmp/deltadv-bench-mem", help="table (built if missing)")
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--rows-per-file", type=int, default=12_582_912)
    ap.add_argument("--row-group-rows", type=int, default=131_072)
    ap.add_argument("--no-materialise", action="store_true", help="skip deltalake-table")
    ap.add_argument("--spark", action="store_true", help="also the Spark worker measurement")
    ap.add_argument("--only", help="comma-separated measurement names")
    ap.add_argument("--threads", type=int, help="deltadv's threads (DELTADV_NUM_THREADS)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    params = {
        "files": args.files,
        "rows_per_file": args.rows_per_file,
        "row_group_rows": args.row_group_rows,
        "dv_percent": {str(k): v for k, v in DV_PERCENT.items()},
        "seed": SEED,
    }
    base = Path(args.dir).resolve()
    if args.child == "info":
        print(json.dumps(info_child(base, params)))
        return
    if args.child:
        built = json.loads((base / PARAMS_FILE).read_text())
        if args.child == "spark-noop":
            result = spark_child(base, built)
        else:
            result = child(args.child, base, built)
        print(json.dumps(result))
        return

    # This process imports neither pyarrow nor deltadv: see peak_mb().
    print(f"command: {COMMAND} {' '.join(sys.argv[1:])}".rstrip(), flush=True)
    if args.threads is not None:
        if args.threads < 1:
            sys.exit(f"FAIL: --threads takes a positive integer, not {args.threads}")
        os.environ["DELTADV_NUM_THREADS"] = str(args.threads)  # every child's
    extra = [f"--files={args.files}", f"--rows-per-file={args.rows_per_file}",
             f"--row-group-rows={args.row_group_rows}"]  # fmt: skip
    info = run_child("info", base, extra)
    if "error" in info:
        sys.exit(f"FAIL: building/reading the table: {info['error']}")
    built = info["built"]
    print(
        f"{info['versions']}, {platform.machine()}, {os.cpu_count()} cpus, "
        f"RAM {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB"
    )
    exp = built["expected"]
    root = base / "table"
    size = sum((root / f).stat().st_size for f in built["files"])
    f0 = (root / built["files"][0]).stat().st_size
    print(
        f"  {args.files} files, parquet {size / 1e9:.2f} GB, decoded (Arrow) "
        f"{built['decoded_bytes'] / 1e9:.2f} GB; {exp['table_physical']['rows']:,} rows, "
        f"{exp['table']['rows']:,} live; file 0: {exp['file0_physical']['rows']:,} rows "
        f"({exp['file0']['rows']:,} live), parquet {f0 / 1e6:.0f} MB; DVs on files "
        f"{', '.join(f'{i} ({p}%)' for i, p in DV_PERCENT.items())}"
    )

    names = [*WHOLE, *ONE_FILE]
    if not args.no_materialise:
        names[len(WHOLE) : len(WHOLE)] = ["deltalake-table", "deltalake-read_all"]
    if args.spark:
        names.append("spark-noop")
    if args.only:
        names = [n for n in names if n in args.only.split(",")] or args.only.split(",")
    threads, c_mb = info["threads"], info["row_group_bytes"] / 2**20
    per_piece = PIECE_FACTOR * (READ_AHEAD_MB + c_mb)
    print(
        f"  deltadv: {threads} threads; bound on its peak RSS: baseline + {FIXED_MB} MB + "
        f"(threads + 1) x {PIECE_FACTOR} x ({READ_AHEAD_MB} MiB + C = largest row group "
        f"compressed, {c_mb:.1f} MiB) = baseline + {FIXED_MB + (threads + 1) * per_piece:.0f} MB"
    )
    print(
        f"\npeak RSS of a fresh process per measurement (MB = MiB); goal for deltadv "
        f"<= {GOAL_MB} MB\n"
        f"  {'measurement':<18} {'peak MB':>8} {'VmHWM':>6} {'base MB':>8} {'decoded GB':>10} "
        f"{'rows':>12} {'wall s':>7} {'cpu s':>7}  check"
    )
    results: dict[str, dict[str, Any]] = {}
    for name in names:
        r = run_child(name, base)
        results[name] = r
        if "error" in r:
            print(f"  {name:<18} FAILED: {r['error']}", flush=True)
            continue
        key = "file0" if name in ONE_FILE else "table"
        if name in IGNORES_DVS:
            key += "_physical"
        ok = r["rows"] == exp[key]["rows"] and r["id_sum"] == exp[key]["id_sum"]
        r["ok"] = ok
        note = "ok" if ok else f"WRONG (expected {exp[key]['rows']:,} rows)"
        if name in IGNORES_DVS:
            note += " (DVs ignored: physical rows)"
        if name.startswith("deltalake-") and name != "deltalake-stream":
            note += " (materialises the table)"
        if name.startswith("deltadv") or name == "spark-noop":
            met = r["peak_mb"] is not None and r["peak_mb"] <= GOAL_MB
            note += f"; goal {'met' if met else 'NOT met'}"
        if name.startswith("deltadv") and r.get("baseline_mb") is not None:
            bound = r["baseline_mb"] + FIXED_MB + (threads + 1) * per_piece
            within = "within" if r["peak_mb"] <= bound else "ABOVE"
            note += f"; {within} the bound {bound:.0f} MB"
        gb = f"{r['bytes'] / 1e9:10.2f}" if r.get("bytes") is not None else f"{'-':>10}"
        hwm = f"{r['hwm_mb']:6.0f}" if r.get("hwm_mb") is not None else f"{'-':>6}"
        base_mb = f"{r['baseline_mb']:8.0f}" if r.get("baseline_mb") is not None else f"{'-':>8}"
        print(
            f"  {name:<18} {r['peak_mb']:8.0f} {hwm} {base_mb} {gb} {r['rows']:>12,} "
            f"{r['wall_s']:7.1f} {r['cpu_s']:7.1f}  {note}",
            flush=True,
        )
        if name == "spark-noop":
            print(
                f"    {r['tasks']} Spark tasks; largest single Python worker "
                f"{r['worker_peak_mb']:.0f} MB, all Python processes at once "
                f"{r['sum_peak_mb']:.0f} MB; per process: {r['workers']}"
            )

    def ratio(a: str, b: str) -> str:
        ra, rb = results.get(a, {}), results.get(b, {})
        if not ra.get("ok") or not rb.get("ok"):
            return "n/a"
        return f"{ra['peak_mb'] / rb['peak_mb']:.2f}"

    print("\npeak RSS ratios (deltadv / peer):")
    for peer in ["pyarrow-dataset", "duckdb-stream", "deltalake-stream", "deltalake-table",
                 "deltalake-read_all"]:  # fmt: skip
        if peer in results:
            print(f"  deltadv-scan / {peer:<18} {ratio('deltadv-scan', peer)}")
    if "pyarrow-file" in results:
        print(f"  deltadv-task / {'pyarrow-file':<18} {ratio('deltadv-task', 'pyarrow-file')}")
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
