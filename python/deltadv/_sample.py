"""Build sample Delta tables with deletion vectors at version 0 (data files
written by deltadv's writer, DVs packed into one DV file, committed through
``deltadv.write.commit_files``), for the demo and for tests that need shapes no
golden table has (e.g. many data files sharing one DV file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from deltadv._core import DeletionVector, write_deletion_vectors
from deltadv.write import commit_files, write_files

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("value", pa.string())])


def make_table(
    root: Path,
    files: int,
    rows_per_file: int,
    deleted: dict[int, list[int]],
    row_group_size: int | None = None,
) -> dict[str, Any]:
    """Write `files` parquet files of `rows_per_file` rows (ids consecutive; row
    groups of `row_group_size` rows) and one commit adding them with deltadv's
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

    def batches() -> Any:
        for f in range(files):
            ids = pa.array(range(f * rows_per_file, (f + 1) * rows_per_file), pa.int64())
            values = pa.array([f"v{i}" for i in ids.to_pylist()])
            yield pa.record_batch([ids, values], schema=SCHEMA)

    # One file per `rows_per_file` rows, in order: file f holds ids f*n .. (f+1)*n-1.
    adds = write_files(
        str(root),
        batches(),
        schema=SCHEMA,
        rows_per_file=rows_per_file,
        row_group_rows=row_group_size,
    )
    if len(adds) != files:
        raise RuntimeError(f"expected {files} data files, the writer made {len(adds)}")
    logical = 0
    for f, add in enumerate(adds):
        d = by_file.get(f)
        if d is not None:
            add["deletionVector"] = d.to_json()
            # bounds over the physical rows: wide once rows are deleted
            stats = json.loads(add["stats"])
            stats["tightBounds"] = False
            add["stats"] = json.dumps(stats)
        logical += rows_per_file - (d.cardinality if d is not None else 0)
    commit_files(str(root), adds, schema=SCHEMA)
    return {"rows": logical, "dv_files": 1 if order else 0}
