"""Build sample Delta tables with deletion vectors by hand (pyarrow parquet + a JSON
commit), for the demo and for tests that need shapes no golden table has (e.g. many
data files sharing one DV file). Not a writer: DELETE through deltadv comes later."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from deltadv._core import DeletionVector, write_deletion_vectors

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "value", "type": "string", "nullable": True, "metadata": {}},
    ],
}


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
    (root / "_delta_log").mkdir(exist_ok=True)
    order = sorted(deleted)
    descriptors = (
        write_deletion_vectors(str(root), [DeletionVector(deleted[i]) for i in order])
        if order
        else []
    )
    by_file = dict(zip(order, descriptors, strict=True))
    now = int(time.time() * 1000)
    actions: list[dict[str, Any]] = [
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["deletionVectors"],
                "writerFeatures": ["deletionVectors"],
            }
        },
        {
            "metaData": {
                "id": str(uuid.uuid4()),
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(SCHEMA),
                "partitionColumns": [],
                "configuration": {"delta.enableDeletionVectors": "true"},
                "createdTime": now,
            }
        },
    ]
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
        actions.append({"add": add})
        logical += rows_per_file - (d.cardinality if d is not None else 0)
    with open(root / "_delta_log" / f"{0:020}.json", "w") as out:
        for a in actions:
            out.write(json.dumps(a) + "\n")
    return {"rows": logical, "dv_files": 1 if order else 0}
