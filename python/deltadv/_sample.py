"""Build sample Delta tables with deletion vectors at version 0 (pyarrow parquet
files, DVs packed into one DV file, committed through ``deltadv.write.create_table``),
for the demo and for tests that need shapes no golden table has (e.g. many data
files sharing one DV file)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from deltadv._core import DeletionVector, write_deletion_vectors
from deltadv.write import create_table

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("value", pa.string())])


def make_table(
    root: Path,
    files: int,
    rows_per_file: int,
    deleted: dict[int, list[int]],
    row_group_size: int | None = None,
) -> dict[str, Any]:
    """Write `files` parquet files of `rows_per_file` rows (ids consecutive; row
    groups of `row_group_size` rows) and one commit adding them with min/max/nullCount
    stats, with the DVs of `deleted` (file index -> row indexes) packed into ONE DV
    file. Returns {"rows": logical rows, "dv_files": 1 or 0}."""
    root.mkdir(parents=True, exist_ok=True)
    order = sorted(deleted)
    descriptors = (
        write_deletion_vectors(str(root), [DeletionVector(deleted[i]) for i in order])
        if order
        else []
    )
    by_file = dict(zip(order, descriptors, strict=True))
    now = int(time.time() * 1000)
    adds: list[dict[str, Any]] = []
    logical = 0
    for f in range(files):
        ids = pa.array(range(f * rows_per_file, (f + 1) * rows_per_file), pa.int64())
        table = pa.table({"id": ids, "value": pa.array([f"v{i}" for i in ids.to_pylist()])})
        name = f"part-{f:05d}-{uuid.uuid4()}.parquet"
        pq.write_table(table, root / name, row_group_size=row_group_size)
        d = by_file.get(f)
        values = table["value"].to_pylist()
        stats = {
            "numRecords": rows_per_file,
            "minValues": {"id": f * rows_per_file, "value": min(values)},
            "maxValues": {"id": (f + 1) * rows_per_file - 1, "value": max(values)},
            "nullCount": {"id": 0, "value": 0},
            "tightBounds": d is None,
        }
        add: dict[str, Any] = {
            "path": name,
            "partitionValues": {},
            "size": (root / name).stat().st_size,
            "modificationTime": now,
            "dataChange": True,
            "stats": json.dumps(stats),
        }
        if d is not None:
            add["deletionVector"] = d.to_json()
        adds.append(add)
        logical += rows_per_file - (d.cardinality if d is not None else 0)
    create_table(str(root), SCHEMA, adds)
    return {"rows": logical, "dv_files": 1 if order else 0}
