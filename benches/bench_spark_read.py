"""Spark reads of a table with deletion vectors: deltadv vs Delta Spark vs plain parquet.

Builds (or reuses, under ``--dir``) one Delta table written by Delta Spark in a
local[2] session: ``--rows`` rows (default 10,000,000) in ``--files`` data files
(default 10; ``spark.range(0, rows, 1, files)``, so one file per partition, each
one parquet row group at Spark's default 128 MB block size), five columns ``id``
long, ``k`` int (``pmod(hash(id, 1), 1000)``), ``x`` double (``rand(1)``),
``y`` double (``randn(2)``), ``s`` string (``'name-' || pmod(hash(id, 2), 10000)``),
with ``delta.enableDeletionVectors=true``; then
``DELETE FROM delta.`<path>` WHERE pmod(hash(id, 3), 100) < <--delete-percent>``
(default 10%: pseudo-random rows spread over every file), which Delta Spark
records as one deletion vector per data file.

Each reader's rows are counted once (checked against the builder's count) and
read once through each sink below (the warm-up: JIT, Python workers), then
timed, best of ``--repeat`` rounds (rounds rotate which reader goes first), as
fully materialised reads:

* ``toRdd``: ``df._jdf.queryExecution().toRdd().count()``, every row of the
  executed plan (all columns projected into UnsafeRows) iterated in the JVM.
  This is the figure the ratios use, because
* ``noop``: ``df.write.format("noop").mode("overwrite").save()`` FAILS for
  Delta Spark 4.4 on a table with DVs ("Cannot work with a non-pinned table
  snapshot of the TahoeFileIndex", from PreprocessTableWithDVs, for any V2
  write of a DV-table read: delta-io/delta#4794); it is timed for the two
  other readers, as a cross-check that both sinks measure the same work.

Readers:

* deltadv:        ``deltadv.spark.read(spark, path)`` (tasks planned on the driver,
  files read by the Rust core in Python workers through ``mapInArrow``); the
  planning (``read()`` itself) is timed too, and counted in the total;
* Delta Spark:    ``spark.read.format("delta").load(path)``;
* native parquet: ``spark.read.parquet(*files)`` over the same live data files.
  It IGNORES the deletion vectors (returns the deleted rows too): a floor for
  what reading these files costs in Spark, not a correct reader.
* mapInArrow floor: deltadv's own tasks, in the same partitions, through the
  same ``mapInArrow`` call, but each Python worker hands over the batches it
  decoded in an earlier round (kept in the worker's memory): what the hand-off
  from Python workers to the JVM (Arrow IPC, then rows) costs with no reading
  at all. No reader built on ``mapInArrow`` can be faster; not a reader either.

Spark Connect (``--connect``, issue 26): a Connect server is started inside the
same JVM (``SparkConnectService.start``: the same executors, Delta Spark loaded)
and a Connect client (this script, ``--client``, a subprocess: a process holds a
classic or a Connect session, not both) reads the same table through deltadv,
the floor and Delta Spark. Its ``noop`` and ``sum5`` runs are interleaved with
the classic ones in the same rounds (``toRdd`` needs the JVM DataFrame: classic
only). Goals: Connect / classic <= 1.05 for deltadv's noop and sum5; deltadv /
mapInArrow floor <= 1.10 on both kinds of session.

Goals (issue 14): deltadv / Delta Spark <= 0.6 and deltadv / native parquet
<= 1.0, each for toRdd, noop (where it runs) and sum5. The floor's own ratios
to the same readers are printed beside them: what the goals leave for reading.
The session is the tests' (local[2], Delta Spark jars from .cache/jars,
``spark.databricks.delta.snapshotPartitions=2``).

Run:  .venv/bin/python benches/bench_spark_read.py [--dir /tmp/deltadv-bench-spark-read] [--connect]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _spark  # benches/_spark.py (the script's folder is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
PARAMS_FILE = "_bench_spark_read.json"  # next to the table, in --dir
GOAL_DELTA = 0.6  # deltadv / Delta Spark, "<="
GOAL_NATIVE = 1.0  # deltadv / native parquet, "<="
GOAL_CONNECT = 1.05  # deltadv on Connect / deltadv on classic, "<="
GOAL_FLOOR = 1.10  # deltadv / mapInArrow floor, "<=", classic and Connect
CONNECT = " (connect)"  # suffix of a reader's name when the Connect client runs it
COMMAND = "cd /work/main && .venv/bin/python benches/bench_spark_read.py"


def make_session() -> Any:
    return _spark.make_session("deltadv-bench-spark-read")


def build(spark: Any, table: Path, params: dict[str, Any]) -> dict[str, Any]:
    """Write the table with Delta Spark, then DELETE; returns what it must contain."""
    rows, files, percent = params["rows"], params["files"], params["delete_percent"]
    t0 = time.perf_counter()
    (
        spark.range(0, rows, 1, files)
        .selectExpr(
            "id",
            "cast(pmod(hash(id, 1), 1000) AS int) AS k",
            "rand(1) AS x",
            "randn(2) AS y",
            "concat('name-', cast(pmod(hash(id, 2), 10000) AS string)) AS s",
        )
        .write.format("delta")
        .option("delta.enableDeletionVectors", "true")
        .save(str(table))
    )
    t_write = time.perf_counter() - t0
    where = f"pmod(hash(id, 3), 100) < {percent}"
    t1 = time.perf_counter()
    spark.sql(f"DELETE FROM delta.`{table}` WHERE {where}")
    t_delete = time.perf_counter() - t1
    live = spark.range(0, rows, 1, files).where(f"NOT ({where})").count()
    built = {
        "params": params,
        "delete": where,
        "live_rows": live,
        "seconds": {"write": round(t_write, 1), "delete": round(t_delete, 1)},
    }
    (table.parent / PARAMS_FILE).write_text(json.dumps(built, indent=1))
    return built


def get_table(spark: Any, base: Path, params: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    table = base / "table"
    if (base / PARAMS_FILE).exists():
        built = json.loads((base / PARAMS_FILE).read_text())
        if built["params"] != params:
            sys.exit(
                f"FAIL: {base} holds a table built with {built['params']}, not {params}; "
                "use another --dir"
            )
        print(f"reusing the table in {table} (built in {built['seconds']} s)")
        return table, built
    if base.exists() and any(base.iterdir()):
        sys.exit(f"FAIL: {base} exists and was not built by this script")
    base.mkdir(parents=True, exist_ok=True)
    print(f"building the table in {table} with Delta Spark ...")
    return table, build(spark, table, params)


FLOOR = "mapInArrow floor"


def _cached_batches(batches: Any) -> Any:
    """mapInArrow body of the floor: each task's batches, decoded once per Python
    worker and kept in that process (on ``builtins``, which outlives the
    pickled function) for later rounds."""
    import builtins

    from deltadv import ScanTask
    from deltadv.spark._tasks import TASK_BATCH_ROWS

    cache = builtins.__dict__.setdefault("_deltadv_bench_handoff", {})
    for batch in batches:
        for task in batch.column(0).to_pylist():
            if task not in cache:
                cache[task] = list(ScanTask(task, {}).read(batch_size=TASK_BATCH_ROWS))
            yield from cache[task]


def handoff_floor(spark: Any, path: str) -> Any:
    """deltadv's tasks and partitions, the same mapInArrow, no reading after the
    first round: the cost of the Python-to-JVM hand-off alone."""
    from pyspark.sql.pandas.types import from_arrow_schema

    import deltadv
    from deltadv.spark._tasks import split_size as _split_size
    from deltadv.spark._tasks import task_frame as _task_frame

    table = deltadv.DeltaTable(path)
    tasks = table.scan_tasks(split_size=_split_size(spark))
    frame = _task_frame(spark, [(t.json,) for t in tasks], "task string", [t.size for t in tasks])
    schema = from_arrow_schema(table.scan_schema(), prefer_timestamp_ntz=True)
    return frame.mapInArrow(_cached_batches, schema)


def cpu_jiffies() -> tuple[int, int] | None:
    """(busy, total) CPU time of the whole machine so far, from /proc/stat (Linux;
    None elsewhere): a run's busy share says whether its cores had idle time left."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    if before is None or after is None or after[1] == before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def read_alone(path: str, files: list[str], rounds: int = 3) -> tuple[float, float]:
    """CPU seconds (all threads of this process, best of ``rounds``) that reading
    the table costs with no Spark at all: deltadv's scan tasks read one after the
    other (parquet decode + DVs, as in a Python worker), and pyarrow's
    ``iter_batches`` of the same files (no DVs) for reference."""
    import pyarrow.parquet as pq

    import deltadv
    from deltadv import ScanTask
    from deltadv.spark._tasks import TASK_BATCH_ROWS

    tasks = [t.json for t in deltadv.DeltaTable(path).scan_tasks()]

    def ours() -> None:
        for task in tasks:
            for _ in ScanTask(task, {}).read(batch_size=TASK_BATCH_ROWS):
                pass

    def theirs() -> None:
        for f in files:
            for _ in pq.ParquetFile(f).iter_batches(batch_size=8192):
                pass

    best = []
    for read in (ours, theirs):
        times = []
        for _ in range(rounds):
            t0 = time.process_time()
            read()
            times.append(time.process_time() - t0)
        best.append(min(times))
    return best[0], best[1]


def noop(df: Any) -> None:
    """``df.write.format("noop")``: every row of every column produced, then dropped."""
    df.write.format("noop").mode("overwrite").save()


def to_rdd(df: Any) -> int:
    """Every row of the executed plan, iterated in the JVM (no sink): the work of
    ``noop``, but without the V2 write that Delta Spark refuses on DV tables."""
    return int(df._jdf.queryExecution().toRdd().count())


def sum5(df: Any) -> Any:
    """A five-column aggregate (every column read, one row back to the driver)."""
    return df.selectExpr("sum(id)", "sum(k)", "sum(x)", "sum(y)", "sum(length(s))").collect()[0]


def client(url: str) -> None:
    """``--client``: a Connect client. Reads ``{"path": ...}`` from the first stdin
    line, warms its readers up (count, sum5, noop), prints ``READY <json>``, then
    runs one ``<reader>\t<sink>`` per stdin line and prints ``[total, plan]``
    seconds for it."""
    from pyspark.sql import SparkSession

    from deltadv import spark as dspark

    spark = SparkSession.builder.remote(url).getOrCreate()
    path = json.loads(sys.stdin.readline())["path"]
    readers: dict[str, Callable[[], Any]] = {
        "deltadv": lambda: dspark.read(spark, path),
        "Delta Spark": lambda: spark.read.format("delta").load(path),
        FLOOR: lambda: handoff_floor(spark, path),
    }
    counts, sums, noop_error = {}, {}, {}
    for name, make_df in readers.items():
        counts[name] = make_df().count()
        sums[name] = list(sum5(make_df()))
        try:
            noop(make_df())
        except Exception as e:  # Delta Spark 4.4 on a DV table, as on classic
            noop_error[name] = str(e).splitlines()[0][:120]
    ready = {"counts": counts, "sums": sums, "noop_error": noop_error}
    print("READY " + json.dumps(ready), flush=True)
    sinks = {"noop": noop, "sum5": sum5}
    for line in sys.stdin:
        name, sink = line.rstrip("\n").split("\t")
        t0 = time.perf_counter()
        df = readers[name]()
        t1 = time.perf_counter()
        sinks[sink](df)
        print(json.dumps([time.perf_counter() - t0, t1 - t0]), flush=True)
    spark.stop()


class ConnectClient:
    """A Connect server in `spark`'s JVM and a ``--client`` subprocess of it."""

    def __init__(self, spark: Any, path: str) -> None:
        import socket
        import subprocess

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        context = spark._jsc.sc()
        context.conf().set("spark.connect.grpc.binding.address", "127.0.0.1")
        context.conf().set("spark.connect.grpc.binding.port", str(port))
        spark._jvm.org.apache.spark.sql.connect.service.SparkConnectService.start(context)
        env = dict(os.environ, SPARK_CONNECT_MODE_ENABLED="1")
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--client", f"sc://127.0.0.1:{port}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.ready = json.loads(self._send(json.dumps({"path": path}))[len("READY ") :])
        self.noop_error: dict[str, str] = self.ready["noop_error"]

    def _send(self, line: str) -> str:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        got = self.proc.stdout.readline()
        if not got:
            sys.exit(f"FAIL: the Connect client exited ({self.proc.wait()})")
        return got

    def run(self, name: str, sink: str) -> tuple[float, float]:
        total, plan = json.loads(self._send(f"{name}\t{sink}"))
        return total, plan

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=120)


def main() -> None:
    if sys.argv[1:2] == ["--client"]:
        client(sys.argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/tmp/deltadv-bench-spark-read", help="built if missing")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--delete-percent", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5, help="timed rounds (best is reported)")
    ap.add_argument(
        "--connect",
        action="store_true",
        help="also time deltadv, the floor and Delta Spark through a Spark Connect client",
    )
    args = ap.parse_args()

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyspark

    import deltadv
    from deltadv import spark as dspark

    print(f"command: {COMMAND} {' '.join(sys.argv[1:])}".rstrip())
    spark = make_session()
    print(
        f"python {platform.python_version()}, deltadv {deltadv.__version__}, "
        f"pyspark {pyspark.__version__}, Delta Spark jars "
        f"{', '.join(p.name for p in sorted((ROOT / '.cache' / 'jars').glob('*.jar')))}, "
        f"pyarrow {pa.__version__}, {platform.machine()}, {os.cpu_count()} cpus, "
        f"{spark.sparkContext.master}"
    )
    params = {
        "rows": args.rows,
        "files": args.files,
        "delete_percent": args.delete_percent,
    }
    table, built = get_table(spark, Path(args.dir).resolve(), params)
    path = str(table)

    dt = deltadv.DeltaTable(path)
    files = dt.get_add_actions()
    paths = [str(table / p) for p in files["path"].to_pylist()]
    with_dv = files.num_rows - files["dv_cardinality"].null_count
    deleted = pc.sum(files["dv_cardinality"]).as_py() or 0
    size = pc.sum(files["size_bytes"]).as_py()
    print(
        f"  {path}: version {dt.version()}, {files.num_rows} live files ({size / 1e6:.0f} MB), "
        f"{with_dv} with a DV, numRecords {pc.sum(files['num_records']).as_py():,}, "
        f"DV cardinality {deleted:,}, live rows {built['live_rows']:,}"
    )
    print(f"  built in {built['seconds']} s; DELETE WHERE {built['delete']}")
    if with_dv == 0:
        sys.exit("FAIL: the DELETE wrote no deletion vectors")

    readers: dict[str, Callable[[], Any]] = {
        "deltadv": lambda: dspark.read(spark, path),
        "Delta Spark": lambda: spark.read.format("delta").load(path),
        "native parquet": lambda: spark.read.parquet(*paths),
        FLOOR: lambda: handoff_floor(spark, path),
    }
    want = {
        "deltadv": built["live_rows"],
        "Delta Spark": built["live_rows"],
        "native parquet": built["params"]["rows"],
        FLOOR: built["live_rows"],
    }

    print("\nwarm-up: count(), then one toRdd and one noop pass of each reader")
    noop_error: dict[str, str] = {}
    sums: dict[str, tuple[Any, ...]] = {}
    for name, make_df in readers.items():
        t0 = time.perf_counter()
        n = make_df().count()
        note = "" if name != "native parquet" else "   (DVs ignored: every physical row)"
        print(f"  {name:<16} {n:>12,} rows in {time.perf_counter() - t0:.1f} s{note}")
        if n != want[name]:
            sys.exit(f"FAIL: {name} counted {n:,} rows, expected {want[name]:,}")
        to_rdd(make_df())
        sums[name] = tuple(sum5(make_df()))
        try:
            noop(make_df())
        except Exception as e:  # Delta Spark 4.4 on a DV table: see the docstring
            noop_error[name] = str(e).splitlines()[0][:120]
            print(f"  {name:<16} noop write FAILS: {noop_error[name]}")

    ours_sum, theirs_sum = sums["deltadv"], sums["Delta Spark"]
    # id, k and length(s) sum exactly; x and y are doubles (order-dependent sums).
    exact = all(ours_sum[i] == theirs_sum[i] for i in (0, 1, 4))
    close = all(
        abs(ours_sum[i] - theirs_sum[i]) <= 1e-6 * max(1.0, abs(theirs_sum[i])) for i in (2, 3)
    )
    if not (exact and close):
        sys.exit(f"FAIL: sums differ: deltadv {ours_sum} vs Delta Spark {theirs_sum}")
    if sums[FLOOR][:2] != ours_sum[:2] or sums[FLOOR][4] != ours_sum[4]:
        sys.exit(f"FAIL: the floor's sums {sums[FLOOR]} differ from deltadv's {ours_sum}")

    remote: ConnectClient | None = None
    if args.connect:
        print("starting a Spark Connect server in this JVM and a client (warm-up as above)")
        remote = ConnectClient(spark, path)
        for name, n in remote.ready["counts"].items():
            print(f"  {name + CONNECT:<26} {n:>12,} rows")
            if n != want[name]:
                sys.exit(f"FAIL: {name} on Connect counted {n:,} rows, expected {want[name]:,}")
            got = tuple(remote.ready["sums"][name])
            if got[:2] != sums[name][:2] or got[4] != sums[name][4]:
                sys.exit(f"FAIL: {name} sums on Connect {got} differ from classic {sums[name]}")
        for name, error in remote.noop_error.items():
            print(f"  {name + CONNECT:<26} noop write FAILS: {error}")

    # name -> sink -> [(total, plan)]; rounds rotate which reader goes first.
    runs: dict[str, dict[str, list[tuple[float, float]]]] = {
        name: {"toRdd": [], "noop": [], "sum5": []} for name in readers
    }
    busy: dict[str, dict[str, list[float | None]]] = {
        name: {"toRdd": [], "noop": [], "sum5": []} for name in readers
    }
    connect_names = list(remote.ready["counts"]) if remote else []
    for name in connect_names:
        runs[name + CONNECT] = {"toRdd": [], "noop": [], "sum5": []}
    names = list(readers)
    for i in range(args.repeat):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            sinks: list[tuple[str, Callable[[Any], Any]]] = [("toRdd", to_rdd), ("sum5", sum5)]
            if name not in noop_error:
                sinks.append(("noop", noop))
            for sink, run in sinks:
                j0 = cpu_jiffies()
                t0 = time.perf_counter()
                df = readers[name]()
                t1 = time.perf_counter()
                run(df)
                runs[name][sink].append((time.perf_counter() - t0, t1 - t0))
                busy[name][sink].append(busy_share(j0, cpu_jiffies()))
            if remote and name in connect_names:  # the same reader through Connect
                for sink in ("noop", "sum5"):
                    if sink == "noop" and name in remote.noop_error:
                        continue
                    runs[name + CONNECT][sink].append(remote.run(name, sink))

    print(f"\ntiming: fully materialised reads, best of {args.repeat}, seconds (plan included)")
    print(
        f"  {'reader':<26} {'toRdd':>7} {'(plan)':>7} {'noop':>7} {'sum5':>7}"
        "   all toRdd / all noop / all sum5"
    )
    best: dict[str, dict[str, float]] = {}
    for name, by_sink in runs.items():
        best[name] = {sink: min(r)[0] for sink, r in by_sink.items() if r}
        first = by_sink["toRdd"] or by_sink["sum5"]
        plan = min(first)[1]
        rdd_s = f"{best[name]['toRdd']:>7.2f}" if "toRdd" in best[name] else f"{'-':>7}"
        noop_s = f"{best[name]['noop']:7.2f}" if "noop" in best[name] else f"{'fails':>7}"
        all_s = " / ".join(", ".join(f"{t:.2f}" for t, _ in r) for r in by_sink.values() if r)
        sum_s = f"{best[name]['sum5']:7.2f}"
        print(f"  {name:<26} {rdd_s} {plan:>7.2f} {noop_s} {sum_s}   {all_s}")
    print()
    for peer, goal in (("Delta Spark", GOAL_DELTA), ("native parquet", GOAL_NATIVE)):
        ratios = {
            sink: best["deltadv"][sink] / best[peer][sink]
            for sink in ("toRdd", "noop", "sum5")
            if sink in best["deltadv"] and sink in best[peer]
        }
        shown = ", ".join(f"{r:.2f} ({sink})" for sink, r in ratios.items())
        verdict = "met" if all(r <= goal for r in ratios.values()) else "NOT met"
        note = "   (native parquet ignores the DVs)" if peer == "native parquet" else ""
        print(f"  deltadv / {peer:<15} = {shown}   (goal <= {goal}: {verdict}){note}")
    print("  the hand-off alone (no reading), against the same readers:")
    for peer in ("Delta Spark", "native parquet"):
        ratios = {
            sink: best[FLOOR][sink] / best[peer][sink]
            for sink in ("toRdd", "noop", "sum5")
            if sink in best[FLOOR] and sink in best[peer]
        }
        shown = ", ".join(f"{r:.2f} ({sink})" for sink, r in ratios.items())
        print(f"  {FLOOR} / {peer:<15} = {shown}")

    def ratio_line(label: str, ours: str, theirs: str, goal: float | None) -> None:
        ratios = {
            sink: best[ours][sink] / best[theirs][sink]
            for sink in ("toRdd", "noop", "sum5")
            if sink in best[ours] and sink in best[theirs]
        }
        shown = ", ".join(f"{r:.2f} ({sink})" for sink, r in ratios.items())
        verdict = ""
        if goal is not None:
            met = "met" if all(r <= goal for r in ratios.values()) else "NOT met"
            verdict = f"   (goal <= {goal}: {met})"
        print(f"  {label:<40} = {shown}{verdict}")

    print("  deltadv against its own floor (the same tasks, no reading):")
    ratio_line(f"deltadv / {FLOOR} (classic)", "deltadv", FLOOR, GOAL_FLOOR)
    # What reading adds to the floor: the floor is deltadv's own tasks with the
    # reading taken out, so deltadv's reading (its CPU time, measured alone)
    # fits first into the idle time left during the floor's runs and spreads
    # the rest over the cores. An estimate, not a bound (the runs are noisy).
    ours_cpu, pyarrow_cpu = read_alone(path, paths)
    cores = spark.sparkContext.defaultParallelism
    floor_rdd = best[FLOOR]["toRdd"]
    i = min(range(len(runs[FLOOR]["toRdd"])), key=lambda k: runs[FLOOR]["toRdd"][k][0])
    share = busy[FLOOR]["toRdd"][i]
    print(
        f"  reading alone, no Spark (this process, best of 3): deltadv {ours_cpu:.2f} s CPU "
        f"({ours_cpu / len(paths) * 1000:.0f} ms per file, DVs applied), pyarrow iter_batches "
        f"{pyarrow_cpu:.2f} s CPU (no DVs)"
    )
    if share is not None:
        idle = (1 - share) * cores * floor_rdd
        extra = max(0.0, ours_cpu - idle) / cores
        print(
            f"  the machine was {share:.0%} busy during the floor's best toRdd run ({idle:.2f} "
            f"CPU-s idle on {cores} cores): reading adds about {extra:.2f} s, deltadv / floor "
            f"(toRdd) about {(floor_rdd + extra) / floor_rdd:.2f}; "
            f"{GOAL_FLOOR} needs reading <= "
            f"{((GOAL_FLOOR - 1) * floor_rdd * cores + idle) / len(paths) * 1000:.0f} ms CPU "
            "per file"
        )
    if remote:
        ratio_line(f"deltadv / {FLOOR} (connect)", "deltadv" + CONNECT, FLOOR + CONNECT, GOAL_FLOOR)
        print("  Spark Connect against classic (same JVM, same executors, same rounds):")
        ratio_line("deltadv: connect / classic", "deltadv" + CONNECT, "deltadv", GOAL_CONNECT)
        ratio_line(f"{FLOOR}: connect / classic", FLOOR + CONNECT, FLOOR, None)
        ratio_line("Delta Spark: connect / classic", "Delta Spark" + CONNECT, "Delta Spark", None)
        ratio_line(
            "deltadv / Delta Spark (connect)", "deltadv" + CONNECT, "Delta Spark" + CONNECT, None
        )
        remote.close()
    print(f"  load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    spark.stop()


if __name__ == "__main__":
    main()
