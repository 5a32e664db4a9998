"""Full scans to Arrow: a table with deletion vectors vs the same rows compacted.

Builds (or reuses, under ``--dir``) Delta tables of ``--files`` parquet files of
``--rows-per-file`` rows each (default 10 x 1,000,000 = 10M rows), written by
pyarrow with ``--row-group-rows`` rows per row group (default 131,072, so 8 row
groups per file; snappy, dictionary encoding on). Five columns: ``id`` long
(consecutive), ``k`` int (random 0..999), ``x`` double (uniform), ``y`` double
(normal), ``s`` string (``'name-<0..9999>'``, random).

* ``full``:        the files, no DVs (every row live): the "no-DV scan of the
  same files" that issue 14's DV-overhead goals divide by;
* ``dv<P>``:       the SAME data files (hard links) plus one DV file written by
  ``deltadv.write_deletion_vectors``: P% of each file's rows deleted, uniform
  random row indexes (fixed seed), ``deletionVector`` descriptors in the add
  actions, ``numRecords`` in the stats;
* ``compact<P>``:  the rows that survive in ``dv<P>``, rewritten without DVs into
  the same number of files (same row-group size).

P is 1, 10 and 50 by default (``--levels``). Before timing, each table's row
count and ``sum(id)`` are checked against what the builder kept (any mismatch
exits 1). Timed, best of ``--repeat`` rounds after ``--warmup``, rounds
alternating which of the pair goes first:

* ``deltadv.DeltaTable(path).to_pyarrow()``: open (log replay) + full
  materialisation of every column into one pyarrow Table;
* for reference, ``pyarrow.parquet.read_table(files)`` of the compacted and full
  tables (pyarrow's own multi-threaded reader; DVs would be ignored);
* peers reading the SAME ``dv<P>`` tables, DVs applied, every column
  materialised to Arrow, timed in the same rounds (``--peers``, default all):

  - ``duckdb``: DuckDB ``SELECT * FROM delta_scan('<path>')``, ``fetch_arrow_table()``
    (the ``delta`` extension from the ``duckdb-ext-delta`` wheel, loaded once per
    run with ``SET extension_directory``; one connection for the run);
  - ``polars``: ``pl.read_delta(path).to_arrow()``;
  - ``deltalake``: ``pa.table(QueryBuilder().register('t', DeltaTable(path))
    .execute('select * from t'))`` (deltalake's DataFusion query; the stream it
    returns collected into one pyarrow Table; strings come out as ``string_view``).

  Each peer runs in its own process (started once; its wall and CPU time are
  measured there, around the read alone), so its thread pools and heap do not
  disturb deltadv's figures. Each peer's row count and ``sum(id)`` are checked
  on every table first like deltadv's; a peer that errs or gets them wrong is
  reported (WRONG / FAILS) and not timed on that table.

Each figure is wall-clock time, with the process's CPU time (all threads,
``time.process_time``) next to it: on a shared 2-core machine CPU time is the
steadier of the two. GETs per scan are ``DeltaTable.request_counts()["gets"]``
after the scan minus before it (the open's 1 LIST + 2 GETs are not included).

Goals (issue 14): deltadv's DV scan / its scan of the same files without DVs
(``dv<P>`` / ``full``) <= 1.05 / 1.10 / 1.25 at 1 / 10 / 50% deleted (what applying
the DV costs); deltadv / each peer < 1.0 on the same DV table. DV / compacted is
reported too: it also counts decoding the rows the DV deletes, which uniform
random deletes leave in every page (its floor is full / compacted).
``full`` is timed in the same rounds as each pair, and each DV table is divided
by the full scans of its own rounds (best of as many runs on both sides).

Threads (issue 28): ``--threads N`` runs deltadv with N threads
(``DELTADV_NUM_THREADS=N`` and ``deltadv.set_num_threads(N)`` before anything
else), pyarrow with ``pa.set_cpu_count(N)``, DuckDB with ``SET threads=N`` and
polars with ``POLARS_MAX_THREADS=N``; every figure is printed with its CPU /
wall utilisation (process CPU time over wall time: how many cores the reader
kept busy; goal >= 1.8 for deltadv's full and DV scans on a 2-core machine).
The pyarrow reference on the full table's files (``pq.read_table(files,
use_threads=True)``, no DVs) gives deltadv full / pyarrow (goal <= 1.0) and
deltadv dv10 / pyarrow (goal <= 1.1). ``--threads 1,2,16`` runs the whole
benchmark once per thread count, each in a subprocess of its own (the tables
are built first, once), and ends with a summary: per table, wall, CPU and
utilisation per thread count, and the wall of each count / that of the
smallest (goal for 2 / 1: <= 0.6). Nothing here needs Java, deltalake, DuckDB
or polars: the tables are written with pyarrow and deltadv, and peers that do
not import are reported unavailable and skipped (``--peers none`` skips them).

Run:  .venv/bin/python benches/bench_scan.py [--dir /tmp/deltadv-bench-scan] [--repeat N]
      [--peers duckdb,polars,deltalake | --peers none] [--threads N[,N...]]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from _threads import run_by_threads

import deltadv

SEED = 20_251_122
PARAMS_FILE = "_bench_scan.json"  # at --dir's root, next to the tables
GOALS = {1: 1.05, 10: 1.10, 50: 1.25}  # ratio DV / full (same files, no DVs), "<="
PEERS = ("duckdb", "polars", "deltalake")
COMMAND = "cd /work/main && .venv/bin/python benches/bench_scan.py"

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "k", "type": "integer", "nullable": True, "metadata": {}},
        {"name": "x", "type": "double", "nullable": True, "metadata": {}},
        {"name": "y", "type": "double", "nullable": True, "metadata": {}},
        {"name": "s", "type": "string", "nullable": True, "metadata": {}},
    ],
}
ARROW_SCHEMA = pa.schema(
    [("id", pa.int64()), ("k", pa.int32()), ("x", pa.float64()), ("y", pa.float64()),
     ("s", pa.string())]
)  # fmt: skip
PROTOCOL = {
    "minReaderVersion": 3,
    "minWriterVersion": 7,
    "readerFeatures": ["deletionVectors"],
    "writerFeatures": ["deletionVectors"],
}


# --------------------------------------------------------------------------- building


def make_file(rng: np.random.Generator, first_id: int, n: int) -> pa.Table:
    """One data file's rows, vectorised."""
    s = pc.binary_join_element_wise(
        "name-", pc.cast(pa.array(rng.integers(0, 10_000, n)), pa.string()), ""
    )
    return pa.table(
        {
            "id": pa.array(np.arange(first_id, first_id + n, dtype=np.int64)),
            "k": pa.array(rng.integers(0, 1_000, n, dtype=np.int32)),
            "x": pa.array(rng.random(n)),
            "y": pa.array(rng.standard_normal(n)),
            "s": s,
        },
        schema=ARROW_SCHEMA,
    )


def write_commit(root: Path, adds: list[dict[str, Any]]) -> None:
    """Version 0: protocol, metaData and the adds."""
    now = int(time.time() * 1000)
    metadata = {
        "id": str(uuid.uuid4()),
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(SCHEMA),
        "partitionColumns": [],
        "configuration": {"delta.enableDeletionVectors": "true"},
        "createdTime": now,
    }
    actions: list[dict[str, Any]] = [
        {"commitInfo": {"timestamp": now, "operation": "WRITE", "engineInfo": "bench_scan"}},
        {"protocol": PROTOCOL},
        {"metaData": metadata},
        *({"add": {**a, "modificationTime": now}} for a in adds),
    ]
    (root / "_delta_log").mkdir(parents=True)
    with open(root / "_delta_log" / f"{0:020}.json", "w") as out:
        for a in actions:
            out.write(json.dumps(a, separators=(",", ":")) + "\n")


def add_action(
    root: Path, name: str, rows: int, dv: deltadv.DeletionVectorDescriptor | None
) -> dict[str, Any]:
    stats = {"numRecords": rows, "tightBounds": dv is None}
    add: dict[str, Any] = {
        "path": name,
        "partitionValues": {},
        "size": (root / name).stat().st_size,
        "dataChange": True,
        "stats": json.dumps(stats, separators=(",", ":")),
    }
    if dv is not None:
        add["deletionVector"] = dv.to_json()
    return add


def build(base: Path, params: dict[str, Any]) -> dict[str, Any]:
    """Write every table under ``base``; returns what each must contain."""
    t0 = time.perf_counter()
    files, n, rg = params["files"], params["rows_per_file"], params["row_group_rows"]
    rng = np.random.default_rng(SEED)
    full = base / "full"
    full.mkdir(parents=True)
    names = [
        f"part-{i:05d}-{uuid.UUID(int=int(rng.integers(2**63)))}.c000.parquet" for i in range(files)
    ]
    expected: dict[str, dict[str, int]] = {}

    data: list[pa.Table] = []
    for i, name in enumerate(names):
        t = make_file(rng, i * n, n)
        pq.write_table(t, full / name, row_group_size=rg)
        data.append(t)
    write_commit(full, [add_action(full, name, n, None) for name in names])
    expected["full"] = {"rows": files * n, "id_sum": files * n * (files * n - 1) // 2}
    print(f"  full: {files} files written ({time.perf_counter() - t0:.1f} s)")

    for level in params["levels"]:
        dv_root, compact_root = base / f"dv{level:02d}", base / f"compact{level:02d}"
        dv_root.mkdir()
        compact_root.mkdir()
        deleted = [
            np.sort(rng.choice(n, size=round(n * level / 100), replace=False)) for _ in names
        ]
        for name in names:  # same bytes, no copy
            os.link(full / name, dv_root / name)
        dvs = deltadv.write_deletion_vectors(
            str(dv_root), [deltadv.DeletionVector(d) for d in deleted]
        )
        write_commit(
            dv_root,
            [add_action(dv_root, name, n, dv) for name, dv in zip(names, dvs, strict=True)],
        )

        rows = id_sum = 0
        compact_adds = []
        for name, t, d in zip(names, data, deleted, strict=True):
            keep = np.ones(n, dtype=bool)
            keep[d] = False
            kept = t.filter(pa.array(keep))
            pq.write_table(kept, compact_root / name, row_group_size=rg)
            compact_adds.append(add_action(compact_root, name, kept.num_rows, None))
            rows += kept.num_rows
            id_sum += pc.sum(kept["id"]).as_py()
        write_commit(compact_root, compact_adds)
        expected[f"dv{level:02d}"] = expected[f"compact{level:02d}"] = {
            "rows": rows,
            "id_sum": id_sum,
        }
        print(f"  {level}%: dv + compact written ({time.perf_counter() - t0:.1f} s)")

    built = {"params": params, "expected": expected, "seconds": time.perf_counter() - t0}
    (base / PARAMS_FILE).write_text(json.dumps(built, indent=1))
    return built


def get_tables(base: Path, params: dict[str, Any]) -> dict[str, Any]:
    if (base / PARAMS_FILE).exists():
        built = json.loads((base / PARAMS_FILE).read_text())
        if built["params"] != params:
            sys.exit(
                f"FAIL: {base} holds tables built with {built['params']}, not {params}; "
                "use another --dir"
            )
        print(f"reusing the tables in {base} (built in {built['seconds']:.0f} s)")
        return built
    if base.exists() and any(base.iterdir()):
        sys.exit(f"FAIL: {base} exists and was not built by this script")
    print(f"building the tables in {base} ...")
    return build(base, params)


# --------------------------------------------------------------------------- timing


class Run:
    """One timed scan: wall seconds (open + scan, and the open alone), CPU seconds
    of the whole process (every thread) for both, GETs of the scan, rows."""

    __slots__ = ("cpu_s", "gets", "open_s", "rows", "scan_s", "total_s")

    def __init__(self, open_s: float, scan_s: float, cpu_s: float, gets: int, rows: int) -> None:
        self.open_s, self.scan_s, self.cpu_s = open_s, scan_s, cpu_s
        self.gets, self.rows = gets, rows
        self.total_s = open_s + scan_s

    @property
    def util(self) -> float:
        """CPU time / wall time: the cores this scan kept busy."""
        return self.cpu_s / self.total_s if self.total_s > 0 else 0.0


def scan_deltadv(root: Path, check: dict[str, int] | None = None) -> Run:
    c0, t0 = time.process_time(), time.perf_counter()
    dt = deltadv.DeltaTable(str(root))
    t1 = time.perf_counter()
    before = dt.request_counts()
    table = dt.to_pyarrow()
    t2, c2 = time.perf_counter(), time.process_time()
    after = dt.request_counts()
    if check is not None:
        got = {"rows": table.num_rows, "id_sum": pc.sum(table["id"]).as_py()}
        if got != check:
            sys.exit(f"FAIL: {root.name}: deltadv read {got}, expected {check}")
        if table.schema.names != ARROW_SCHEMA.names:
            sys.exit(f"FAIL: {root.name}: columns {table.schema.names}")
    return Run(t1 - t0, t2 - t1, c2 - c0, after["gets"] - before["gets"], table.num_rows)


def scan_pyarrow(root: Path) -> Run:
    files = sorted(str(p) for p in root.glob("*.parquet"))
    c0, t0 = time.process_time(), time.perf_counter()
    table = pq.read_table(files, use_threads=True)
    t1, c1 = time.perf_counter(), time.process_time()
    return Run(0.0, t1 - t0, c1 - c0, 0, table.num_rows)


def duckdb_connection() -> Any:
    """A DuckDB connection with the ``delta`` extension of the ``duckdb-ext-delta``
    wheel, which installs ``duckdb_ext/extensions/v<duckdb>/<platform>/
    delta.duckdb_extension`` into site-packages: that ``extensions`` folder is
    DuckDB's ``extension_directory`` layout."""
    import importlib.util

    import duckdb

    spec = importlib.util.find_spec("duckdb_ext")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("duckdb-ext-delta is not installed (pip install duckdb-ext-delta)")
    ext_dir = Path(next(iter(spec.submodule_search_locations))) / "extensions"
    con = duckdb.connect()
    con.execute(f"SET extension_directory = '{ext_dir}'")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("LOAD delta")
    return con


def peer_readers(names: list[str]) -> tuple[dict[str, Callable[[Path], pa.Table]], list[str]]:
    """``name -> read(path) -> pyarrow.Table`` for the peers that import; versions."""
    readers: dict[str, Callable[[Path], pa.Table]] = {}
    versions = []
    for name in names:
        try:
            if name == "duckdb":
                import duckdb

                con = duckdb_connection()
                if os.environ.get("DELTADV_NUM_THREADS"):  # --threads
                    con.execute(f"SET threads = {int(os.environ['DELTADV_NUM_THREADS'])}")
                readers[name] = lambda root, con=con: con.execute(
                    f"SELECT * FROM delta_scan('{root}')"
                ).fetch_arrow_table()
                versions.append(f"duckdb {duckdb.__version__} (delta extension)")
            elif name == "polars":
                import polars as pl

                readers[name] = lambda root: pl.read_delta(str(root)).to_arrow()
                versions.append(f"polars {pl.__version__}")
            elif name == "deltalake":
                import deltalake
                from deltalake import DeltaTable, QueryBuilder

                def read_deltalake(root: Path) -> pa.Table:
                    q = QueryBuilder().register("t", DeltaTable(str(root)))
                    return pa.table(q.execute("select * from t"))

                readers[name] = read_deltalake
                versions.append(f"deltalake {deltalake.__version__} (QueryBuilder)")
            else:
                sys.exit(f"FAIL: unknown peer {name!r} (known: {', '.join(PEERS)})")
        except Exception as e:  # not installed, extension missing: say so, go on
            print(f"  peer {name} unavailable: {type(e).__name__}: {str(e)[:200]}")
    return readers, versions


def scan_peer(read: Callable[[Path], pa.Table], root: Path) -> tuple[Run, dict[str, int]]:
    c0, t0 = time.process_time(), time.perf_counter()
    table = read(root)
    t1, c1 = time.perf_counter(), time.process_time()
    got = {"rows": table.num_rows, "id_sum": pc.sum(table["id"]).as_py()}
    return Run(0.0, t1 - t0, c1 - c0, 0, table.num_rows), got


def peer_worker(name: str, conn: Any) -> None:
    """One peer in its own process (so its thread pools and heap do not disturb
    deltadv's figures, nor the other peers'): reads the paths sent on ``conn``,
    answers with its timed Run and what it read."""
    readers, versions = peer_readers([name])
    conn.send(versions)
    while (path := conn.recv()) is not None:
        try:
            r, got = scan_peer(readers[name], Path(path))
            conn.send(("ok", (r.total_s, r.cpu_s, r.rows), got))
        except Exception as e:
            conn.send(("error", f"{type(e).__name__}: {str(e).splitlines()[0][:150]}", None))


class Peer:
    """Handle on a peer_worker process."""

    def __init__(self, name: str) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=peer_worker, args=(name, child), daemon=True)
        self.proc.start()
        self.versions: list[str] = self.conn.recv()

    def scan(self, root: Path) -> tuple[Run, dict[str, int]]:
        self.conn.send(str(root))
        status, value, got = self.conn.recv()
        if status != "ok":
            raise RuntimeError(value)
        wall, cpu, rows = value
        return Run(0.0, wall, cpu, 0, rows), got

    def close(self) -> None:
        self.conn.send(None)
        self.proc.join(10)


def by_threads(threads: list[str] | list[int]) -> None:
    """The benchmark once per thread count, each in a subprocess of its own
    (its report printed as it runs), then wall / CPU / utilisation per count and
    the wall of each count / that of the smallest."""
    counts = sorted(int(t) for t in threads)
    results: dict[int, dict[str, Any]] = run_by_threads(__file__, counts)
    ms, low = 1e3, counts[0]
    print(f"\n======== summary by threads ({', '.join(map(str, counts))}) ========")
    print("best wall ms / cpu ms / utilisation (cpu / wall) per thread count:")
    for reader in ("deltadv", "pyarrow"):
        for name in results[low][reader]:
            cells = []
            for n in counts:
                f = results[n][reader].get(name)
                cells.append(
                    f"{n:>3}: {f['wall'] * ms:7.0f} {f['cpu'] * ms:7.0f} {f['util']:5.2f}"
                    if f
                    else f"{n:>3}: -"
                )
            print(f"  {reader:<8} {name:<10} " + "   ".join(cells))
    print(f"wall with N threads / wall with {low} (goal for 2 / 1: <= 0.6):")
    for reader in ("deltadv", "pyarrow"):
        for name in results[low][reader]:
            base = results[low][reader][name]["wall"]
            cells = []
            for n in counts[1:]:
                f = results[n][reader].get(name)
                if f is None:
                    continue
                ratio = f["wall"] / base
                goal = ""
                if reader == "deltadv" and (low, n) == (1, 2):
                    goal = " (met)" if ratio <= 0.6 else " (NOT met)"
                cells.append(f"{n}/{low}: {ratio:5.2f}{goal}")
            print(f"  {reader:<8} {name:<10} " + "   ".join(cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/tmp/deltadv-bench-scan", help="tables (built if missing)")
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--rows-per-file", type=int, default=1_000_000)
    ap.add_argument("--row-group-rows", type=int, default=131_072)
    ap.add_argument("--levels", default="1,10,50", help="percentages of rows deleted")
    ap.add_argument("--repeat", type=int, default=5, help="timed rounds (best is reported)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    ap.add_argument("--no-pyarrow", action="store_true", help="skip the pyarrow reference")
    ap.add_argument(
        "--peers", default=",".join(PEERS), help="peers on the dv tables, comma-separated, or none"
    )
    ap.add_argument(
        "--threads",
        help="threads for deltadv (and pyarrow, duckdb, polars); several, comma-separated: "
        "one subprocess per count, then a summary",
    )
    ap.add_argument("--json-out", help=argparse.SUPPRESS)  # a subprocess's figures, for its parent
    args = ap.parse_args()
    peer_names = [] if args.peers in ("", "none") else args.peers.split(",")
    threads = [int(t) for t in args.threads.split(",")] if args.threads else []
    if any(t < 1 for t in threads):
        sys.exit(f"FAIL: --threads takes positive integers, not {args.threads!r}")
    if len(threads) == 1:
        # Before anything starts deltadv's runtime; peers (other processes)
        # read the variables.
        os.environ["DELTADV_NUM_THREADS"] = os.environ["POLARS_MAX_THREADS"] = str(threads[0])
        deltadv.set_num_threads(threads[0])
        pa.set_cpu_count(threads[0])

    params = {
        "files": args.files,
        "rows_per_file": args.rows_per_file,
        "row_group_rows": args.row_group_rows,
        "levels": [int(v) for v in args.levels.split(",")],
        "seed": SEED,
    }
    print(f"command: {COMMAND} {' '.join(sys.argv[1:])}".rstrip())
    print(
        f"python {platform.python_version()}, deltadv {deltadv.__version__}, "
        f"pyarrow {pa.__version__}, {platform.machine()}, {os.cpu_count()} cpus "
        f"({len(os.sched_getaffinity(0))} usable); threads: deltadv {deltadv.num_threads()}, "
        f"pyarrow {pa.cpu_count()}"
    )
    if len(threads) > 1:
        get_tables(Path(args.dir).resolve(), params)
        by_threads(threads)
        return
    peers: dict[str, Peer] = {}
    for name in peer_names:
        peer = Peer(name)
        if peer.versions:
            peers[name] = peer
        else:
            peer.close()
    if peers:
        versions = ", ".join(v for p in peers.values() for v in p.versions)
        print(f"peers (each in its own process): {versions}")
    base = Path(args.dir).resolve()
    built = get_tables(base, params)
    expected = built["expected"]
    files, n = params["files"], params["rows_per_file"]
    print(
        f"  {files} files x {n:,} rows ({files * n:,}), row groups of "
        f"{params['row_group_rows']:,} rows; columns id long, k int, x double, y double, "
        "s string"
    )
    for name in ["full"] + [f"{p}{lv:02d}" for lv in params["levels"] for p in ("dv", "compact")]:
        size = sum(p.stat().st_size for p in (base / name).glob("*.parquet"))
        dv = sum(p.stat().st_size for p in (base / name).glob("deletion_vector_*"))
        extra = f", DV file {dv / 1e6:.2f} MB" if dv else ""
        rows = expected[name]["rows"]
        print(f"  {name:<10} {rows:>11,} live rows, parquet {size / 1e6:.0f} MB{extra}")

    print("\nchecking row counts and sum(id) (deltadv.DeltaTable(path).to_pyarrow())")
    for name, want in expected.items():
        r = scan_deltadv(base / name, want)
        print(f"  {name:<10} ok: {r.rows:,} rows, {r.gets} GETs for the scan")
    dv_names = [f"dv{lv:02d}" for lv in params["levels"]]
    # peer -> table -> why it is not timed there (an error, or wrong rows)
    peer_bad: dict[str, dict[str, str]] = {name: {} for name in peers}
    if peers:
        print("\nchecking the peers on the dv tables (row count and sum(id), DVs applied)")
    for peer, handle in peers.items():
        for name in dv_names:
            try:
                _, got = handle.scan(base / name)
            except Exception as e:
                peer_bad[peer][name] = f"FAILS: {type(e).__name__}: {str(e).splitlines()[0][:150]}"
            else:
                want = expected[name]
                if got != want:
                    note = " (DVs ignored?)" if got["rows"] == expected["full"]["rows"] else ""
                    peer_bad[peer][name] = (
                        f"WRONG: {got['rows']:,} rows, sum(id) {got['id_sum']}, expected "
                        f"{want['rows']:,} / {want['id_sum']}{note}"
                    )
            print(f"  {peer:<10} {name:<6} {peer_bad[peer].get(name, 'ok')}")

    # Each pair timed with the full scan beside it; rounds alternate who goes first.
    pairs: list[tuple[str, str]] = [(f"dv{lv:02d}", f"compact{lv:02d}") for lv in params["levels"]]
    deltadv_runs: dict[str, list[Run]] = {name: [] for pair in pairs for name in pair}
    deltadv_runs["full"] = []
    full_beside: dict[str, list[Run]] = {dv: [] for dv, _ in pairs}
    pyarrow_runs: dict[str, list[Run]] = {"full": []}
    pyarrow_runs.update({b: [] for _, b in pairs})
    peer_runs: dict[str, dict[str, list[Run]]] = {
        peer: {name: [] for name in dv_names if name not in peer_bad[peer]} for peer in peers
    }
    for i in range(args.warmup + args.repeat):
        groups: list[tuple[str, ...]] = [(dv, "full", compact) for dv, compact in pairs]
        for group in groups:
            # deltadv on the pair, then each peer on the pair's dv table; the order
            # rotates every round
            jobs: list[tuple[str | None, str]] = [(None, name) for name in group]
            jobs += [(p, group[0]) for p in peers if group[0] in peer_runs[p]]
            k = i % len(jobs)
            for peer, name in jobs[k:] + jobs[:k]:
                if peer is None:
                    r = scan_deltadv(base / name)
                    if i >= args.warmup:
                        deltadv_runs[name].append(r)
                        if name == "full":  # also kept per pair: same sample count
                            full_beside[group[0]].append(r)
                else:
                    r, _ = peers[peer].scan(base / name)
                    if i >= args.warmup:
                        peer_runs[peer][name].append(r)
        if not args.no_pyarrow:
            for name in pyarrow_runs:
                r = scan_pyarrow(base / name)
                if i >= args.warmup:
                    pyarrow_runs[name].append(r)

    def best(runs: list[Run]) -> Run:
        return min(runs, key=lambda r: r.total_s)

    def best_cpu(runs: list[Run]) -> float:
        return min(r.cpu_s for r in runs)

    def lowest(runs: list[Run], field: str) -> float:
        return min(getattr(r, field) for r in runs)

    def median(runs: list[Run], field: str) -> float:
        return statistics.median(getattr(r, field) for r in runs)

    ms = 1e3
    print(f"\ntiming: best of {args.repeat} (after {args.warmup} warm-up), ms")
    print(
        f"  {'table':<10} {'rows':>11} {'deltadv':>9} {'(open':>7} {'+ scan)':>8} "
        f"{'cpu':>7} {'util':>5} {'GETs':>5} {'pyarrow':>9} {'cpu':>7} {'util':>5}"
    )
    for name, runs in deltadv_runs.items():
        b = best(runs)
        theirs = pyarrow_runs.get(name)
        pa_ms = ""
        if theirs:
            t = best(theirs)
            pa_ms = f"{t.total_s * ms:9.0f} {best_cpu(theirs) * ms:7.0f} {t.util:5.2f}"
        print(
            f"  {name:<10} {b.rows:>11,} {b.total_s * ms:>9.0f} {b.open_s * ms:>7.1f} "
            f"{b.scan_s * ms:>8.0f} {best_cpu(runs) * ms:>7.0f} {b.util:5.2f} {b.gets:>5} {pa_ms}"
        )
    print(
        f"\nutilisation (cpu / wall of the best run; {deltadv.num_threads()} threads; "
        "goal >= 1.8 on 2 cores for full and DV scans):"
    )
    for name in ["full", *(dv for dv, _ in pairs)]:
        print(f"  deltadv {name:<8} {best(deltadv_runs[name]).util:5.2f}")
    if pyarrow_runs["full"]:
        ref = best(pyarrow_runs["full"])
        print(
            "\npyarrow reference: pq.read_table(files, use_threads=True) of the full table's "
            f"files (no DVs): {ref.total_s * ms:.0f} ms wall, {ref.cpu_s * ms:.0f} ms cpu, "
            f"util {ref.util:.2f}"
        )
        pa_goals = [("full", 1.0)] + [(dv, 1.1) for dv, _ in pairs if dv == "dv10"]
        for name, goal in pa_goals:
            ratio = best(deltadv_runs[name]).total_s / ref.total_s
            met = "met" if ratio <= goal else "NOT met"
            print(f"  deltadv {name} / pyarrow   wall {ratio:5.2f}   (goal <= {goal}: {met})")
    if args.json_out:
        figures = {
            "threads": deltadv.num_threads(),
            "deltadv": {
                k: {"wall": best(v).total_s, "cpu": best_cpu(v), "util": best(v).util}
                for k, v in deltadv_runs.items()
            },
            "pyarrow": {
                k: {"wall": best(v).total_s, "cpu": best_cpu(v), "util": best(v).util}
                for k, v in pyarrow_runs.items()
                if v
            },
        }
        Path(args.json_out).write_text(json.dumps(figures))
    print(
        "\nratio deltadv DV / full: the DV table vs the same files read without DVs in the"
        "\nsame rounds (best vs best of as many runs; wall clock, and process CPU time,"
        "\nwhich other work on the machine disturbs less), goal"
    )
    for pick in (lowest, median):
        if pick is median:
            print("  the same, median vs median (steadier when the machine is busy):")
        for dv_name, _ in pairs:
            level = int(dv_name[2:])
            beside = full_beside[dv_name]
            ratio = pick(deltadv_runs[dv_name], "total_s") / pick(beside, "total_s")
            cpu = pick(deltadv_runs[dv_name], "cpu_s") / pick(beside, "cpu_s")
            goal = GOALS.get(level)
            met = "no goal" if goal is None else "met" if ratio <= goal else "NOT met"
            shown = met if goal is None else f"<= {goal}: {met}"
            print(f"  {level:>3}% deleted   wall {ratio:5.2f}   cpu {cpu:5.2f}   ({shown})")
    if peers:
        print(
            "\npeers on the dv tables (DVs applied, every column to Arrow), ms, best of "
            f"{args.repeat}, and deltadv / peer (wall, cpu; goal < 1.0: faster than the peer)"
        )
        print(
            f"  {'table':<6} {'peer':<10} {'wall':>7} {'cpu':>7} {'util':>5}   "
            f"{'deltadv/peer':>12} {'cpu':>5}"
        )
        for name in dv_names:
            ours = deltadv_runs[name]
            for peer in peers:
                if name in peer_bad[peer]:
                    print(f"  {name:<6} {peer:<10} {peer_bad[peer][name]}")
                    continue
                theirs = peer_runs[peer][name]
                wall = best(ours).total_s / best(theirs).total_s
                cpu = best_cpu(ours) / best_cpu(theirs)
                verdict = "met" if wall < 1.0 else "NOT met"
                print(
                    f"  {name:<6} {peer:<10} {best(theirs).total_s * ms:7.0f} "
                    f"{best_cpu(theirs) * ms:7.0f} {best(theirs).util:5.2f}   {wall:12.2f} "
                    f"{cpu:5.2f}   ({verdict})"
                )
    print(
        "\nfor reference, DV / compacted (the surviving rows rewritten without DVs), and"
        "\nits floor full / compacted (what DV / compacted would be if applying the DV"
        "\ncost nothing); wall, cpu:"
    )
    for dv_name, compact_name in pairs:
        dv_s = best(deltadv_runs[dv_name]).total_s
        compact_s = best(deltadv_runs[compact_name]).total_s
        dv_c = best_cpu(deltadv_runs[dv_name])
        compact_c = best_cpu(deltadv_runs[compact_name])
        full, full_cpu = best(full_beside[dv_name]).total_s, best_cpu(full_beside[dv_name])
        print(
            f"  {int(dv_name[2:]):>3}%: dv / compacted {dv_s / compact_s:.2f}, "
            f"{dv_c / compact_c:.2f}; full / compacted {full / compact_s:.2f}, "
            f"{full_cpu / compact_c:.2f}"
        )
    all_ms = {k: [round(r.total_s * ms) for r in v] for k, v in deltadv_runs.items()}
    print(f"\nall deltadv totals (ms): {all_ms}")
    for peer, runs in peer_runs.items():
        peer_ms = {k: [round(r.total_s * ms) for r in v] for k, v in runs.items()}
        print(f"all {peer} totals (ms): {peer_ms}")
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for handle in peers.values():
        handle.close()


if __name__ == "__main__":
    main()
