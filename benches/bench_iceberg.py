"""UniForm Iceberg mirroring (issue 29): what it costs a commit, and how Iceberg
readers scan the mirror.

1. Commit latency: two IcebergCompatV3 tables of ``--files`` files (``--rows-per-file``
   rows each; same rows), one with ``delta.universalFormat.enabledFormats=iceberg``
   (every commit also writes its Iceberg snapshot: manifests, a Puffin file,
   manifest list, ``vN.metadata.json``), one without. ``--deletes`` rounds of a
   1-row DELETE (one DV) on each, alternating which goes first; prints the median
   wall ms of each and mirror on / off. The issue's goal: <= 1.5 on 1,000 files.
2. Scan: the mirrored table read whole by pyiceberg 0.12 (``StaticTable`` at the
   latest ``vN.metadata.json``, its Puffin DVs applied) vs deltadv's scan of the
   Delta table (``to_pyarrow_table``); best of ``--repeat``, same rows checked;
   prints both and pyiceberg / deltadv.

    python benches/bench_iceberg.py                     # 1,000 files, 20 deletes
    python benches/bench_iceberg.py --files 200 --deletes 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

import deltadv
from deltadv.write import write_table

V3 = {"delta.enableIcebergCompatV3": "true"}
UNIFORM = {**V3, "delta.universalFormat.enabledFormats": "iceberg"}


def data(files: int, rows: int) -> pa.Table:
    n = files * rows
    rng = np.random.default_rng(29)
    return pa.table(
        {
            "id": np.arange(n, dtype=np.int64),
            "k": rng.integers(0, 1000, n, dtype=np.int32),
            "x": rng.random(n),
            "s": pa.array([f"name-{i % 10_000}" for i in range(n)]),
        }
    )


def build(root: Path, files: int, rows: int) -> dict[str, str]:
    tables = {"off": str(root / "off"), "on": str(root / "on")}
    t = data(files, rows)
    for name, conf in (("off", V3), ("on", UNIFORM)):
        start = time.perf_counter()
        write_table(tables[name], t, configuration=conf, rows_per_file=rows)
        print(f"  created {name}: {files} files in {time.perf_counter() - start:.1f} s")
    return tables


def bench_deletes(tables: dict[str, str], files: int, rows: int, rounds: int) -> None:
    handles = {name: deltadv.DeltaTable(path) for name, path in tables.items()}
    times: dict[str, list[float]] = {"off": [], "on": []}
    rng = np.random.default_rng(7)
    targets = rng.choice(files, size=rounds, replace=False)
    for i, f in enumerate(targets):
        row = int(f) * rows + int(rng.integers(0, rows))
        order = ["off", "on"] if i % 2 == 0 else ["on", "off"]
        for name in order:
            start = time.perf_counter()
            m = handles[name].delete(f"id = {row}")
            times[name].append(time.perf_counter() - start)
            assert m["num_deleted_rows"] == 1, m
            assert m["iceberg_error"] is None, m["iceberg_error"]
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    print(f"1-row DELETE on {files} files, median of {rounds} (wall ms):")
    print(f"  mirror off {off * 1e3:8.1f}")
    print(f"  mirror on  {on * 1e3:8.1f}   (Iceberg snapshot written by each commit)")
    print(f"  on / off   {on / off:8.2f}   (goal <= 1.5)")


def bench_scan(path: str, repeat: int) -> None:
    from pyiceberg.table import StaticTable

    meta = Path(path) / "metadata"
    hint = (meta / "version-hint.text").read_text().strip()
    location = str(meta / f"v{hint}.metadata.json")

    def iceberg() -> pa.Table:
        return StaticTable.from_metadata(location).scan().to_arrow()

    def ours() -> pa.Table:
        return deltadv.DeltaTable(path).to_pyarrow_table()

    a, b = iceberg(), ours()
    assert a.num_rows == b.num_rows, (a.num_rows, b.num_rows)
    assert sorted(a.column("id").to_pylist()) == sorted(b.column("id").to_pylist())
    best = {"pyiceberg": float("inf"), "deltadv": float("inf")}
    for i in range(repeat):
        for name in ["pyiceberg", "deltadv"] if i % 2 == 0 else ["deltadv", "pyiceberg"]:
            start = time.perf_counter()
            (iceberg if name == "pyiceberg" else ours)()
            best[name] = min(best[name], time.perf_counter() - start)
    print(f"Full scan of the mirrored table ({b.num_rows:,} rows), best of {repeat} (wall ms):")
    print(f"  pyiceberg 0.12 (Iceberg metadata)  {best['pyiceberg'] * 1e3:8.1f}")
    print(f"  deltadv (Delta log)                {best['deltadv'] * 1e3:8.1f}")
    print(f"  pyiceberg / deltadv                {best['pyiceberg'] / best['deltadv']:8.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--rows-per-file", type=int, default=100)
    ap.add_argument("--deletes", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tables = build(Path(tmp), args.files, args.rows_per_file)
        bench_deletes(tables, args.files, args.rows_per_file, args.deletes)
        bench_scan(tables["on"], args.repeat)


if __name__ == "__main__":
    main()
