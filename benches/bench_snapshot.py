"""Snapshot loading of a big table: deltadv vs the ``deltalake`` package.

Builds (or reuses) a synthetic Delta table whose log is what matters; the data
files are NOT written:

* version 0: protocol (reader 3 / writer 7, ``deletionVectors`` feature), metaData
  (``id`` long, ``value`` double, ``name`` string; ``delta.enableDeletionVectors``)
  and ``--files`` adds (default 100,000), each with ``stats`` JSON (numRecords,
  minValues / maxValues / nullCount of the three columns, ``tightBounds`` false
  when the file has a DV); ``--dv-fraction`` of them (default 10%) carry a
  ``deletionVector`` descriptor of storage type ``u``, all pointing into ONE real
  DV file written by ``deltadv.write_deletion_vectors``;
* a classic checkpoint ``_delta_log/00000000000000000000.checkpoint.parquet`` of
  version 0 (protocol, metaData and all the adds) plus ``_delta_log/_last_checkpoint``,
  written by ``deltalake`` (``DeltaTable.create_checkpoint()``), or by pyarrow
  following the PROTOCOL.md checkpoint schema (``--checkpoint-writer pyarrow``, and
  the automatic fallback if deltalake refuses);
* ``--commits`` JSON commits on top (default 100), each appending a few files,
  removing a few live ones, and rewriting the DV of a few live files the way a
  DELETE does: ``remove(path, oldDv)`` + ``add(path, newDv)``, newDv a superset.

Then it checks that both readers see the same snapshot (version, number of live
files, set of paths, total numRecords, and deltadv's counts against what the
builder expects) and times, best of ``--repeat`` after ``--warmup`` rounds, in
this process:

* deltadv:   ``deltadv.DeltaTable(path)`` + ``.get_add_actions()``  (pyarrow Table)
* deltalake: ``deltalake.DeltaTable(path)`` + ``.get_add_actions(flatten=True)``
  (one row per live file with its stats; an arro3 Table, so its conversion to a
  pyarrow Table is timed separately and NOT counted in the total)

Goal: deltadv / deltalake <= 0.5.

Threads (issue 28): ``--threads N`` runs deltadv with N threads
(``DELTADV_NUM_THREADS=N`` and ``deltadv.set_num_threads(N)`` before anything else:
checkpoint decoding, live-row replay and the stats / DV parsing of
``get_add_actions`` use up to N threads) and prints deltadv's CPU time (all
threads) and utilisation (CPU / wall) beside its wall time. ``--threads 1,2`` runs
the whole benchmark once per count, each in a subprocess of its own, then prints
deltadv's wall / CPU / utilisation per count and wall(N) / wall(smallest) (goal
for 2 / 1: <= 0.6).

Cold (``--cold N``, default 5): deltadv's open + ``get_add_actions()`` is also
timed in N fresh interpreters (after ``import deltadv``), best and median: what
a job that opens the table once pays; the in-process rounds above reuse what
earlier loads left (allocator arenas, faulted pages, imported modules), and
which of them a best-of lands on swings between runs. With ``--threads`` the
summary prints the cold figures per count and their 2 / 1.

Run:  .venv/bin/python benches/bench_snapshot.py [--dir DIR] [--repeat N] [--warmup N] [--cold N]
      [--threads N[,N...]]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from _threads import run_by_threads

import deltadv

SEED = 20_251_122
GOAL = 0.5
PARAMS_FILE = "_bench_snapshot.json"  # at the table root; Delta readers ignore it
ADDS_PER_COMMIT = 5
REMOVES_PER_COMMIT = 3
DELETES_PER_COMMIT = 2

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "value", "type": "double", "nullable": True, "metadata": {}},
        {"name": "name", "type": "string", "nullable": True, "metadata": {}},
    ],
}
PROTOCOL = {
    "minReaderVersion": 3,
    "minWriterVersion": 7,
    "readerFeatures": ["deletionVectors"],
    "writerFeatures": ["deletionVectors"],
}


# --------------------------------------------------------------------------- building


class File:
    """A live data file of the synthetic table (its add action's content)."""

    __slots__ = ("dv", "n", "num", "path", "size")

    def __init__(self, num: int, path: str) -> None:
        self.num = num
        self.path = path
        self.n = 1_000 + (num * 7919) % 1_000  # numRecords
        self.size = 40_000 + self.n * 24
        self.dv: int | None = None  # index into the list of DV row sets

    def stats(self) -> str:
        lo = self.num * 2_000
        return json.dumps(
            {
                "numRecords": self.n,
                "minValues": {"id": lo, "value": lo / 3, "name": f"name_{self.num:07d}_a"},
                "maxValues": {
                    "id": lo + self.n - 1,
                    "value": (lo + self.n) / 3,
                    "name": f"name_{self.num:07d}_z",
                },
                "nullCount": {"id": 0, "value": self.num % 3, "name": self.num % 5},
                "tightBounds": self.dv is None,
            },
            separators=(",", ":"),
        )


def add_action(f: File, dvs: list[dict[str, Any]], ts: int) -> dict[str, Any]:
    add: dict[str, Any] = {
        "path": f.path,
        "partitionValues": {},
        "size": f.size,
        "modificationTime": ts,
        "dataChange": True,
        "stats": f.stats(),
    }
    if f.dv is not None:
        add["deletionVector"] = dvs[f.dv]
    return {"add": add}


def remove_action(f: File, dvs: list[dict[str, Any]], ts: int) -> dict[str, Any]:
    remove: dict[str, Any] = {
        "path": f.path,
        "deletionTimestamp": ts,
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": {},
        "size": f.size,
    }
    if f.dv is not None:
        remove["deletionVector"] = dvs[f.dv]
    return {"remove": remove}


def write_json_commit(root: Path, version: int, actions: list[dict[str, Any]]) -> None:
    path = root / "_delta_log" / f"{version:020}.json"
    with open(path, "w") as out:
        for a in actions:
            out.write(json.dumps(a, separators=(",", ":")))
            out.write("\n")


def commit_info(operation: str, ts: int) -> dict[str, Any]:
    return {"commitInfo": {"timestamp": ts, "operation": operation, "engineInfo": "bench"}}


# Checkpoint schema of PROTOCOL.md ("Checkpoint Schema"), for the pyarrow writer.
_STR_MAP = pa.map_(pa.string(), pa.string())
_DV = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)
CHECKPOINT_SCHEMA = pa.schema(
    [
        ("txn", pa.struct([("appId", pa.string()), ("version", pa.int64()),
                           ("lastUpdated", pa.int64())])),
        ("add", pa.struct([("path", pa.string()), ("partitionValues", _STR_MAP),
                           ("size", pa.int64()), ("modificationTime", pa.int64()),
                           ("dataChange", pa.bool_()), ("stats", pa.string()),
                           ("tags", _STR_MAP), ("deletionVector", _DV)])),
        ("remove", pa.struct([("path", pa.string()), ("deletionTimestamp", pa.int64()),
                              ("dataChange", pa.bool_()), ("extendedFileMetadata", pa.bool_()),
                              ("partitionValues", _STR_MAP), ("size", pa.int64()),
                              ("deletionVector", _DV)])),
        ("metaData", pa.struct([("id", pa.string()), ("name", pa.string()),
                                ("description", pa.string()),
                                ("format", pa.struct([("provider", pa.string()),
                                                      ("options", _STR_MAP)])),
                                ("schemaString", pa.string()),
                                ("partitionColumns", pa.list_(pa.string())),
                                ("configuration", _STR_MAP), ("createdTime", pa.int64())])),
        ("protocol", pa.struct([("minReaderVersion", pa.int32()),
                                ("minWriterVersion", pa.int32()),
                                ("readerFeatures", pa.list_(pa.string())),
                                ("writerFeatures", pa.list_(pa.string()))])),
    ]
)  # fmt: skip


def write_checkpoint_pyarrow(root: Path, version: int, actions: list[dict[str, Any]]) -> int:
    """A classic single-file checkpoint of ``actions`` (protocol, metaData, adds)."""
    rows = []
    for a in actions:
        ((kind, body),) = a.items()
        if kind in ("add", "metaData"):
            body = {**body}
            for key in ("partitionValues", "configuration"):
                if key in body:
                    body[key] = list(body[key].items())
            if kind == "metaData":
                body["format"] = {**body["format"], "options": list(body["format"]["options"])}
        rows.append({kind: body})
    table = pa.Table.from_pylist(rows, schema=CHECKPOINT_SCHEMA)
    pq.write_table(table, root / "_delta_log" / f"{version:020}.checkpoint.parquet")
    last = {"version": version, "size": len(rows)}
    (root / "_delta_log" / "_last_checkpoint").write_text(json.dumps(last))
    return len(rows)


def build(root: Path, files: int, dv_fraction: float, commits: int, writer: str) -> dict:
    """Write the table; returns the expected snapshot (and how it was built)."""
    t_start = time.perf_counter()
    rng = random.Random(SEED)
    (root / "_delta_log").mkdir(parents=True)
    ts0 = int(time.time() * 1000) - (commits + 1) * 60_000

    # Plan everything first, so that all DVs can go into one DV file.
    dv_rows: list[list[int]] = []

    def new_dv(f: File, extra: int) -> None:
        old = set(dv_rows[f.dv]) if f.dv is not None else set()
        start = (f.num * 131 + len(dv_rows) * 17) % (f.n - extra)
        dv_rows.append(sorted(old | set(range(start, start + extra))))
        f.dv = len(dv_rows) - 1

    live: dict[str, File] = {}
    order: list[str] = []  # live paths, for random picks
    initial: list[File] = []
    for num in range(files):
        f = File(num, f"part-{num:06d}-{uuid.UUID(int=rng.getrandbits(128))}.c000.parquet")
        if rng.random() < dv_fraction:
            new_dv(f, 1 + num % 20)
        initial.append(f)
        live[f.path] = f
        order.append(f.path)

    def pick() -> File:
        i = rng.randrange(len(order))
        order[i], order[-1] = order[-1], order[i]
        return live[order[-1]]

    # Each planned commit: list of ("add" | "remove", File snapshot) in order.
    plans: list[list[tuple[str, File]]] = []
    next_num = files
    for _ in range(commits):
        steps: list[tuple[str, File]] = []
        for _ in range(REMOVES_PER_COMMIT):
            f = pick()
            order.pop()
            del live[f.path]
            steps.append(("remove", f))
        for _ in range(DELETES_PER_COMMIT):  # DELETE: remove(path, oldDv) + add(path, newDv)
            f = pick()
            old = File.__new__(File)
            old.num, old.path, old.n, old.size, old.dv = f.num, f.path, f.n, f.size, f.dv
            steps.append(("remove", old))
            new_dv(f, 5)
            new = File.__new__(File)
            new.num, new.path, new.n, new.size, new.dv = f.num, f.path, f.n, f.size, f.dv
            steps.append(("add", new))
        for _ in range(ADDS_PER_COMMIT):
            f = File(next_num, f"part-{next_num:06d}-{uuid.UUID(int=rng.getrandbits(128))}.parquet")
            next_num += 1
            live[f.path] = f
            order.append(f.path)
            steps.append(("add", f))
        plans.append(steps)

    t_dv = time.perf_counter()
    descriptors = deltadv.write_deletion_vectors(
        str(root), [deltadv.DeletionVector(rows) for rows in dv_rows]
    )
    dvs = [d.to_json() for d in descriptors]
    dv_files = sorted(p.name for p in root.iterdir() if p.name.startswith("deletion_vector_"))
    t_dv = time.perf_counter() - t_dv

    # Version 0: protocol, metaData, all the adds.
    metadata = {
        "id": str(uuid.UUID(int=rng.getrandbits(128))),
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(SCHEMA),
        "partitionColumns": [],
        "configuration": {"delta.enableDeletionVectors": "true"},
        "createdTime": ts0,
    }
    v0 = [{"protocol": PROTOCOL}, {"metaData": metadata}]
    v0 += [add_action(f, dvs, ts0) for f in initial]
    write_json_commit(root, 0, [commit_info("CREATE TABLE AS SELECT", ts0), *v0])

    # Checkpoint of version 0.
    t_cp = time.perf_counter()
    how = None
    if writer == "deltalake":
        try:
            deltalake.DeltaTable(str(root)).create_checkpoint()
            how = f"deltalake {deltalake.__version__} DeltaTable.create_checkpoint()"
        except Exception as e:
            print(
                f"  deltalake create_checkpoint failed ({type(e).__name__}: {e}); "
                "falling back to pyarrow"
            )
            for p in (root / "_delta_log").glob("*checkpoint*"):
                p.unlink()
    if how is None:
        write_checkpoint_pyarrow(root, 0, v0)
        how = f"pyarrow {pa.__version__}, PROTOCOL.md checkpoint schema"
    t_cp = time.perf_counter() - t_cp
    cp_file = root / "_delta_log" / f"{0:020}.checkpoint.parquet"
    last_cp = root / "_delta_log" / "_last_checkpoint"
    if not cp_file.exists() or not last_cp.exists():
        sys.exit(f"FAIL: no classic checkpoint written ({how}): {sorted(root.iterdir())}")
    cp_rows = pq.ParquetFile(cp_file).metadata.num_rows

    # The JSON commits on top.
    counts = {"add": 0, "remove": 0}
    for v, steps in enumerate(plans, start=1):
        ts = ts0 + v * 60_000
        actions = [commit_info("WRITE", ts)]
        for kind, f in steps:
            counts[kind] += 1
            actions.append(add_action(f, dvs, ts) if kind == "add" else remove_action(f, dvs, ts))
        write_json_commit(root, v, actions)

    expected = {
        "params": {"files": files, "dv_fraction": dv_fraction, "commits": commits, "seed": SEED},
        "version": commits,
        "live_files": len(live),
        "num_records": sum(f.n for f in live.values()),
        "dv_files_with_dv": sum(f.dv is not None for f in live.values()),
        "dv_cardinality": sum(len(dv_rows[f.dv]) for f in live.values() if f.dv is not None),
        "how": {
            "initial_adds": files,
            "initial_adds_with_dv": sum(f.dv is not None for f in initial),
            "dv_file": dv_files,
            "dv_descriptors": len(dvs),
            "checkpoint": how,
            "checkpoint_rows": cp_rows,
            "last_checkpoint": json.loads(last_cp.read_text()),
            "commit_adds": counts["add"],
            "commit_removes": counts["remove"],
            "log_bytes": sum(p.stat().st_size for p in (root / "_delta_log").iterdir()),
            "seconds": {
                "dv": round(t_dv, 2),
                "checkpoint": round(t_cp, 2),
                "total": round(time.perf_counter() - t_start, 2),
            },
        },
    }
    expected["logical_rows"] = expected["num_records"] - expected["dv_cardinality"]
    (root / PARAMS_FILE).write_text(json.dumps(expected, indent=1))
    return expected


def get_table(args: argparse.Namespace) -> tuple[Path, dict, Callable[[], None]]:
    params = {
        "files": args.files,
        "dv_fraction": args.dv_fraction,
        "commits": args.commits,
        "seed": SEED,
    }
    if args.dir is None:
        tmp = Path(tempfile.mkdtemp(prefix="deltadv-bench-snapshot-"))
        root = tmp / "table"

        def cleanup() -> None:
            shutil.rmtree(tmp, ignore_errors=True)
    else:
        root = Path(args.dir).resolve()

        def cleanup() -> None:
            pass

        if (root / PARAMS_FILE).exists():
            expected = json.loads((root / PARAMS_FILE).read_text())
            if expected["params"] != params:
                sys.exit(
                    f"FAIL: {root} holds a table built with {expected['params']}, "
                    f"not {params}; use another --dir"
                )
            print(f"reusing the table in {root}")
            return root, expected, cleanup
        if root.exists() and any(root.iterdir()):
            sys.exit(f"FAIL: {root} exists and is not a table built by this script")
    print(f"building the table in {root} ...")
    expected = build(root, args.files, args.dv_fraction, args.commits, args.checkpoint_writer)
    return root, expected, cleanup


def describe(root: Path, e: dict) -> None:
    h = e["how"]
    print(f"  table:       {root}")
    print(
        f"  version 0:   protocol (3/7, deletionVectors), metaData (id long, value double, "
        f"name string), {h['initial_adds']:,} adds with stats JSON, "
        f"{h['initial_adds_with_dv']:,} with a 'u' DV"
    )
    print(
        f"  DV file:     {', '.join(h['dv_file'])} ({h['dv_descriptors']:,} DVs, written by "
        "deltadv.write_deletion_vectors)"
    )
    print(
        f"  checkpoint:  {0:020}.checkpoint.parquet, {h['checkpoint_rows']:,} rows, by "
        f"{h['checkpoint']}; _last_checkpoint = {json.dumps(h['last_checkpoint'])}"
    )
    print(
        f"  commits:     1..{e['version']} JSON ({h['commit_adds']} adds, "
        f"{h['commit_removes']} removes; per commit {ADDS_PER_COMMIT} appends, "
        f"{REMOVES_PER_COMMIT} removes, {DELETES_PER_COMMIT} DV rewrites = "
        "remove(path, oldDv) + add(path, newDv))"
    )
    print(
        f"  expected:    version {e['version']}, {e['live_files']:,} live files "
        f"({e['dv_files_with_dv']:,} with a DV), numRecords {e['num_records']:,}, "
        f"logical rows {e['logical_rows']:,}"
    )
    print(f"  _delta_log:  {h['log_bytes'] / 1e6:.1f} MB; built in {h['seconds']}")


# --------------------------------------------------------------------------- checking


def check(root: Path, e: dict) -> str:
    """Both readers against each other and against the builder; exits on a mismatch."""
    problems: list[str] = []

    def same(what: str, ours: object, theirs: object, want: object | None = None) -> None:
        ok = ours == theirs and (want is None or ours == want)
        line = f"  {what:<24} deltadv {ours!s:<14} deltalake {theirs!s:<14}"
        if want is not None:
            line += f" expected {want}"
        print(line + ("" if ok else "   <-- MISMATCH"))
        if not ok:
            problems.append(what)

    ours = deltadv.DeltaTable(str(root))
    theirs = deltalake.DeltaTable(str(root))
    files = ours.get_add_actions()
    actions = pa.table(theirs.get_add_actions(flatten=True))
    same("version", ours.version(), theirs.version(), e["version"])
    same("live files", files.num_rows, actions.num_rows, e["live_files"])
    our_paths = set(files["path"].to_pylist())
    their_paths = set(actions["path"].to_pylist())
    same("distinct paths", len(our_paths), len(their_paths), e["live_files"])
    if our_paths != their_paths:
        problems.append("path sets")
        print(
            f"  path sets differ: only deltadv {sorted(our_paths - their_paths)[:5]}, "
            f"only deltalake {sorted(their_paths - our_paths)[:5]}"
        )
    else:
        print("  path sets                identical")
    our_n = pc.sum(files["num_records"]).as_py()
    their_n = pc.sum(actions["num_records"]).as_py()
    same("sum(numRecords)", our_n, their_n, e["num_records"])
    # Per-file numRecords, joined on path.
    theirs_by_path = dict(
        zip(actions["path"].to_pylist(), actions["num_records"].to_pylist(), strict=True)
    )
    diff = [
        p
        for p, n in zip(files["path"].to_pylist(), files["num_records"].to_pylist(), strict=True)
        if theirs_by_path.get(p) != n
    ]
    print(f"  per-file numRecords      {len(diff)} differ" + ("   <-- MISMATCH" if diff else ""))
    if diff:
        problems.append("per-file numRecords")
    # Deletion vectors: deltalake's add actions have no DV columns, so only deltadv vs builder.
    dv_col = "dv_cardinality"
    with_dv = files.num_rows - files[dv_col].null_count
    card = pc.sum(files[dv_col]).as_py()
    for what, got, want in (
        ("files with a DV", with_dv, e["dv_files_with_dv"]),
        ("sum(DV cardinality)", card, e["dv_cardinality"]),
        ("count()", ours.count(), e["logical_rows"]),
    ):
        ok = got == want
        print(
            f"  {what:<24} deltadv {got!s:<14} {'':<24} expected {want}"
            + ("" if ok else "   <-- MISMATCH")
        )
        if not ok:
            problems.append(what)
    print(f"  deltalake count()        {theirs.count():,} (numRecords, DVs not subtracted)")
    print(f"  deltadv requests         {ours.request_counts()}")
    if problems:
        print(f"\nFAIL: the readers disagree: {', '.join(problems)}")
        sys.exit(1)
    return dv_col


# --------------------------------------------------------------------------- timing


def run_deltadv(root: str) -> tuple[float, ...]:
    c0 = time.process_time()
    t0 = time.perf_counter()
    dt = deltadv.DeltaTable(root)
    t1 = time.perf_counter()
    files = dt.get_add_actions()
    t2 = time.perf_counter()
    c2 = time.process_time()
    assert files.num_rows > 0
    return (t2 - t0, t1 - t0, t2 - t1, c2 - c0)


def run_deltalake(root: str) -> tuple[float, ...]:
    t0 = time.perf_counter()
    dt = deltalake.DeltaTable(root)
    t1 = time.perf_counter()
    actions = dt.get_add_actions(flatten=True)
    t2 = time.perf_counter()
    table = pa.table(actions)  # not counted in the total
    t3 = time.perf_counter()
    assert table.num_rows > 0
    return (t2 - t0, t1 - t0, t2 - t1, t3 - t2)


COLD_SNIPPET = """
import json, sys, time
import deltadv
t0 = time.perf_counter()
dt = deltadv.DeltaTable(sys.argv[1])
t1 = time.perf_counter()
files = dt.get_add_actions()
t2 = time.perf_counter()
assert files.num_rows > 0
print(json.dumps([t2 - t0, t1 - t0, t2 - t1]))
"""


def run_cold(root: str, rounds: int) -> list[tuple[float, ...]]:
    """deltadv's DeltaTable() + get_add_actions() in ``rounds`` fresh interpreters
    (this process's environment, DELTADV_NUM_THREADS included), each timed after
    ``import deltadv``: what a job that opens the table once pays (nothing reused
    from an earlier load: allocator, page tables, lazily imported modules)."""
    out = []
    for _ in range(rounds):
        done = subprocess.run(
            [sys.executable, "-c", COLD_SNIPPET, root],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            sys.exit(f"FAIL: a cold round exited {done.returncode}: {done.stderr[-2000:]}")
        out.append(tuple(json.loads(done.stdout.strip().splitlines()[-1])))
    return sorted(out)


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def by_threads(counts: list[int]) -> None:
    """The benchmark once per thread count, each in a subprocess of its own (its
    report printed as it runs), then deltadv's wall / CPU / utilisation per count
    and the wall of each count / that of the smallest."""
    counts = sorted(counts)
    results: dict[int, dict[str, Any]] = run_by_threads(__file__, counts)
    ms, low = 1e3, counts[0]
    print(f"\n======== summary by threads ({', '.join(map(str, counts))}) ========")
    print("deltadv DeltaTable() + get_add_actions(), best wall ms / cpu ms / utilisation:")
    for n in counts:
        r = results[n]
        print(
            f"  {n:>3} threads: {r['wall'] * ms:7.1f} {r['cpu'] * ms:7.1f} "
            f"{r['cpu'] / r['wall']:5.2f}   (open {r['open'] * ms:.1f} + files "
            f"{r['files'] * ms:.1f}; load average {r['load']})"
        )
    print(f"wall with N threads / wall with {low} (goal for 2 / 1: <= 0.6):")
    for n in counts[1:]:
        ratio = results[n]["wall"] / results[low]["wall"]
        goal = ""
        if (low, n) == (1, 2):
            goal = " (met)" if ratio <= 0.6 else " (NOT met)"
        print(f"  {n}/{low}: {ratio:5.2f}{goal}")
    if all(results[n].get("cold") for n in counts):
        print("cold: a fresh process per round, best / median wall ms:")
        for n in counts:
            c = results[n]["cold"]
            print(f"  {n:>3} threads: {c[0] * ms:7.1f} {c[len(c) // 2] * ms:7.1f}")
        for n in counts[1:]:
            c, c0 = results[n]["cold"], results[low]["cold"]
            print(
                f"  {n}/{low}: best {c[0] / c0[0]:5.2f}, "
                f"median {c[len(c) // 2] / c0[len(c0) // 2]:5.2f}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", help="table directory; built if missing, reused if built before")
    ap.add_argument("--files", type=int, default=100_000, help="adds in version 0")
    ap.add_argument("--dv-fraction", type=float, default=0.1, help="share of adds with a DV")
    ap.add_argument("--commits", type=int, default=100, help="JSON commits after the checkpoint")
    ap.add_argument("--repeat", type=int, default=5, help="timed rounds (best is reported)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    ap.add_argument("--checkpoint-writer", choices=["deltalake", "pyarrow"], default="deltalake")
    ap.add_argument(
        "--cold",
        type=int,
        default=5,
        help="also time deltadv in this many fresh processes (a load with nothing reused); 0: not",
    )
    ap.add_argument(
        "--threads",
        help="threads for deltadv; several, comma-separated: one subprocess per count "
        "(reuse the table: give --dir), then a summary",
    )
    ap.add_argument("--json-out", help=argparse.SUPPRESS)  # a subprocess's figures, for its parent
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")] if args.threads else []
    if any(t < 1 for t in threads):
        sys.exit(f"FAIL: --threads takes positive integers, not {args.threads!r}")
    if len(threads) == 1:
        os.environ["DELTADV_NUM_THREADS"] = str(threads[0])  # before deltadv's runtime starts
        deltadv.set_num_threads(threads[0])

    print(
        f"python {platform.python_version()}, deltadv {deltadv.__version__}, "
        f"deltalake {deltalake.__version__}, pyarrow {pa.__version__}, "
        f"{platform.machine()}, {os.cpu_count()} cpus ({len(os.sched_getaffinity(0))} usable); "
        f"deltadv threads {deltadv.num_threads()}; load average {load()}"
    )
    if len(threads) > 1:
        if args.dir is None:
            sys.exit("FAIL: --threads with several counts needs --dir (one table for every run)")
        root, _, _ = get_table(args)  # built once, before the runs
        by_threads(threads)
        return
    root, expected, cleanup = get_table(args)
    try:
        describe(root, expected)
        print("\nagreement")
        check(root, expected)

        uri = str(root)
        runs: dict[str, list[tuple[float, ...]]] = {"deltadv": [], "deltalake": []}
        for i in range(args.warmup + args.repeat):
            # Alternate who goes first, so neither always gets the warmer page cache.
            pair = [("deltadv", run_deltadv), ("deltalake", run_deltalake)]
            for name, fn in pair if i % 2 == 0 else pair[::-1]:
                r = fn(uri)
                if i >= args.warmup:
                    runs[name].append(r)
        ours = min(runs["deltadv"])
        theirs = min(runs["deltalake"])
        ms = 1e3
        print(f"\ntiming: best of {args.repeat} (after {args.warmup} warm-up), ms")
        print(f"  {'reader':<10} {'total':>9}   phases")
        print(
            f"  {'deltadv':<10} {ours[0] * ms:>9.1f}   DeltaTable() {ours[1] * ms:.1f}"
            f" + files() {ours[2] * ms:.1f}   (cpu {ours[3] * ms:.1f}, utilisation "
            f"{ours[3] / ours[0]:.2f}, {deltadv.num_threads()} threads)"
        )
        print(
            f"  {'deltalake':<10} {theirs[0] * ms:>9.1f}   DeltaTable() {theirs[1] * ms:.1f}"
            f" + get_add_actions(flatten=True) {theirs[2] * ms:.1f}"
            f"   (+ pa.table() {theirs[3] * ms:.1f}, not counted)"
        )
        ratio = ours[0] / theirs[0]
        verdict = "met" if ratio <= GOAL else "NOT met"
        print(f"  ratio deltadv / deltalake = {ratio:.2f}   (goal <= {GOAL}: {verdict})")
        all_ms = {k: [round(r[0] * ms, 1) for r in v] for k, v in runs.items()}
        print(f"  all totals (ms): {all_ms}; load average {load()}")
        cold = [r[0] for r in run_cold(uri, args.cold)] if args.cold > 0 else []
        if cold:
            print(
                f"  deltadv cold, {args.cold} fresh processes: best {cold[0] * ms:.1f}, "
                f"median {cold[len(cold) // 2] * ms:.1f} ms (open + files, after import)"
            )
        if args.json_out:
            figures = {
                "threads": deltadv.num_threads(),
                "wall": ours[0],
                "open": ours[1],
                "files": ours[2],
                "cpu": ours[3],
                "load": load(),
                "cold": cold,
            }
            Path(args.json_out).write_text(json.dumps(figures))
    finally:
        cleanup()


if __name__ == "__main__":
    main()
