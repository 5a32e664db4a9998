"""Source tables of the DELETE benchmarks (``bench_delete_one_row.py``,
``bench_delete_heatmap.py``): people10m-like rows generated with numpy, parquet
files written by pyarrow, and hand-written Delta logs over the SAME files.

Columns (the ``people10m`` dataset of seed 001, made up): ``id`` long (consecutive),
``firstName`` / ``middleName`` string (5,000 made-up names), ``lastName`` string
(50,000), ``gender`` string (M/F), ``birthDate`` timestamp (a day 1950-2000 at
05:00 UTC), ``ssn`` string (``ddd-dd-dddd``, random digits), ``salary`` int
(20,000-179,999); optionally ``bucket`` int (a random permutation of 0..rows-1
within each file, so ``bucket < k`` selects exactly k rows of every file).
About 24.8 bytes per row in snappy parquet.

Each source table is ONE set of parquet files with two logs, in two directories
holding hard links to the same files:

* ``dv/``:  protocol reader 3 / writer 7 with the ``deletionVectors`` feature,
  ``delta.enableDeletionVectors=true`` (merge-on-read deletes);
* ``cow/``: the same protocol, ``delta.enableDeletionVectors=false`` (Delta Spark
  deletes copy-on-write; deltalake 1.6 writes no DVs and accepts this protocol).

Version 0 adds every file with ``stats`` (numRecords, minValues, maxValues,
nullCount of every column, as Delta Spark writes them).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

COLUMNS: list[tuple[str, str, pa.DataType]] = [
    ("id", "long", pa.int64()),
    ("firstName", "string", pa.string()),
    ("middleName", "string", pa.string()),
    ("lastName", "string", pa.string()),
    ("gender", "string", pa.string()),
    ("birthDate", "timestamp", pa.timestamp("us", tz="UTC")),
    ("ssn", "string", pa.string()),
    ("salary", "integer", pa.int32()),
]
BUCKET: tuple[str, str, pa.DataType] = ("bucket", "integer", pa.int32())
PROTOCOL = {
    "minReaderVersion": 3,
    "minWriterVersion": 7,
    "readerFeatures": ["deletionVectors"],
    "writerFeatures": ["deletionVectors"],
}
DAY_US = 86_400 * 1_000_000


def columns(with_bucket: bool) -> list[tuple[str, str, pa.DataType]]:
    return [*COLUMNS, BUCKET] if with_bucket else list(COLUMNS)


def _names(rng: np.random.Generator, n: int, lo: int, hi: int) -> pa.StringArray:
    """`n` made-up capitalised names of `lo`..`hi` letters (random, may repeat)."""
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", np.uint8)
    lengths = rng.integers(lo, hi + 1, n)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    data = letters[rng.integers(0, 26, int(offsets[-1]))]
    data[offsets[:-1]] -= 32  # upper-case first letter
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))


def _ssns(rng: np.random.Generator, n: int) -> pa.StringArray:
    """`n` random ``ddd-dd-dddd`` strings, built as one fixed-width byte block."""
    pattern = "ddd-dd-dddd"
    width = len(pattern)
    block = rng.integers(0, 10, (n, width), dtype=np.uint8) + ord("0")
    for i, c in enumerate(pattern):
        if c != "d":
            block[:, i] = ord(c)
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(block.reshape(-1)))


class People:
    """Generator of people10m-like rows; name pools drawn once from `seed`."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        pools = np.random.default_rng(seed)
        self.first = _names(pools, 5_000, 4, 10)
        self.last = _names(pools, 50_000, 5, 12)

    def rows(self, first_id: int, n: int, part: int, with_bucket: bool) -> pa.Table:
        """`n` rows with ids ``first_id .. first_id + n - 1``; `part` seeds the values."""
        rng = np.random.default_rng([self.seed, part])
        days = rng.integers(-7_305, 10_957, n)  # 1950-01-01 .. 1999-12-31
        data: dict[str, pa.Array] = {
            "id": pa.array(np.arange(first_id, first_id + n, dtype=np.int64)),
            "firstName": self.first.take(pa.array(rng.integers(0, len(self.first), n))),
            "middleName": self.first.take(pa.array(rng.integers(0, len(self.first), n))),
            "lastName": self.last.take(pa.array(rng.integers(0, len(self.last), n))),
            "gender": pa.array(np.array(["M", "F"])[rng.integers(0, 2, n)]),
            "birthDate": pa.array(
                days * DAY_US + 5 * 3_600 * 1_000_000, pa.timestamp("us", tz="UTC")
            ),
            "ssn": _ssns(rng, n),
            "salary": pa.array(rng.integers(20_000, 180_000, n, dtype=np.int32)),
        }
        if with_bucket:
            data["bucket"] = pa.array(rng.permutation(n).astype(np.int32))
        return pa.table(data, schema=pa.schema([(c, t) for c, _, t in columns(with_bucket)]))


def _stat_value(v: Any) -> Any:
    if hasattr(v, "isoformat"):  # timestamp: Delta Spark's 'yyyy-MM-ddTHH:mm:ss.SSSZ' (UTC)
        return v.strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond // 1000:03d}Z"
    return v


def stats(table: pa.Table) -> str:
    """The add action's ``stats`` JSON of a data file holding `table`."""
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name in table.column_names:
        col = table[name]
        mm = pc.min_max(col)
        mins[name] = _stat_value(mm["min"].as_py())
        maxs[name] = _stat_value(mm["max"].as_py())
        nulls[name] = col.null_count
    return json.dumps(
        {"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls},
        separators=(",", ":"),
    )


def write_logs(base: Path, files: list[dict[str, Any]], with_bucket: bool) -> None:
    """``base/dv`` and ``base/cow``: hard links to the data files in ``base/data``
    plus a version-0 commit adding them (see the module doc)."""
    schema = {
        "type": "struct",
        "fields": [
            {"name": c, "type": t, "nullable": True, "metadata": {}}
            for c, t, _ in columns(with_bucket)
        ],
    }
    now = int(time.time() * 1000)
    for name, enabled in (("dv", "true"), ("cow", "false")):
        root = base / name
        (root / "_delta_log").mkdir(parents=True)
        for f in files:
            os.link(base / "data" / f["path"], root / f["path"])
        actions: list[dict[str, Any]] = [
            {
                "commitInfo": {
                    "timestamp": now,
                    "operation": "CREATE TABLE AS SELECT",
                    "engineInfo": "deltadv-bench",
                }
            },
            {"protocol": PROTOCOL},
            {
                "metaData": {
                    "id": str(uuid.uuid4()),
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": json.dumps(schema),
                    "partitionColumns": [],
                    "configuration": {"delta.enableDeletionVectors": enabled},
                    "createdTime": now,
                }
            },
        ]
        for f in files:
            actions.append(
                {
                    "add": {
                        "path": f["path"],
                        "partitionValues": {},
                        "size": f["size"],
                        "modificationTime": now,
                        "dataChange": True,
                        "stats": f["stats"],
                    }
                }
            )
        with open(root / "_delta_log" / f"{0:020}.json", "w") as out:
            for a in actions:
                out.write(json.dumps(a, separators=(",", ":")) + "\n")


def build(
    base: Path,
    seed: int,
    files: int,
    rows_per_file: int,
    row_group_rows: int,
    with_bucket: bool,
) -> dict[str, Any]:
    """Write the data files (``base/data``) and both logs; returns a description."""
    t0 = time.perf_counter()
    people = People(seed)
    (base / "data").mkdir(parents=True)
    written: list[dict[str, Any]] = []
    t_gen = t_write = 0.0
    for f in range(files):
        t = time.perf_counter()
        table = people.rows(1 + f * rows_per_file, rows_per_file, f, with_bucket)
        t_gen += time.perf_counter() - t
        t = time.perf_counter()
        part_id = uuid.UUID(bytes=np.random.default_rng([seed, f]).bytes(16))
        name = f"part-{f:05d}-{part_id}.c000.snappy.parquet"
        pq.write_table(table, base / "data" / name, row_group_size=row_group_rows)
        t_write += time.perf_counter() - t
        written.append(
            {"path": name, "size": (base / "data" / name).stat().st_size, "stats": stats(table)}
        )
    write_logs(base, written, with_bucket)
    meta = pq.ParquetFile(base / "data" / written[0]["path"]).metadata
    return {
        "files": files,
        "rows_per_file": rows_per_file,
        "rows": files * rows_per_file,
        "row_groups_per_file": meta.num_row_groups,
        "bytes": sum(f["size"] for f in written),
        "paths": [f["path"] for f in written],
        "seconds": {
            "generate": round(t_gen, 1),
            "write": round(t_write, 1),
            "total": round(time.perf_counter() - t0, 1),
        },
    }


def get_source(
    base: Path, params_file: str, params: dict[str, Any], **build_args: Any
) -> dict[str, Any]:
    """The source tables under `base`: reused if built with the same `params`,
    built if `base` is missing or empty, refused otherwise."""
    marker = base / params_file
    if marker.exists():
        built = json.loads(marker.read_text())
        if built["params"] != params:
            raise SystemExit(
                f"FAIL: {base} holds tables built with {built['params']}, not {params}; "
                "use another --dir"
            )
        print(f"reusing the source tables in {base} (built in {built['seconds']} s)")
        return built
    if base.exists() and any(base.iterdir()):
        raise SystemExit(f"FAIL: {base} exists and was not built by this script")
    print(f"building the source tables in {base} ...", flush=True)
    built = {"params": params, **build(base, **build_args)}
    marker.write_text(json.dumps(built, indent=1))
    return built


def fresh_copy(src: Path, dst: Path) -> Path:
    """A real copy of the table `src` at `dst` (replacing it), flushed to disk so
    that write-back of the copy does not run during the timed delete."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    os.sync()
    return dst


def describe_columns(with_bucket: bool) -> str:
    return ", ".join(f"{c} {t}" for c, t, _ in columns(with_bucket))


def load() -> str:
    """The 1/5/15-minute load averages (the machine is shared: context for the figures)."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())
