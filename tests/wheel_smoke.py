"""Smoke test of an installed deltadv wheel: scripts/check-wheel.sh runs it with the
interpreter of a fresh venv holding only the wheel and its dependencies, outside the
source tree. Exits non-zero on the first failed check."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import deltadv
import deltadv._core
from deltadv.write import enable_deletion_vectors, write_table


def check(ok: bool, what: str) -> None:
    if not ok:
        sys.exit(f"wheel smoke: FAILED: {what}")


def main() -> None:
    core = Path(deltadv._core.__file__)
    check("site-packages" in core.parts, f"deltadv imported from {core}, not the venv")
    check(core.name.endswith(".abi3.so"), f"{core.name} is not an abi3 extension")

    # Deletion vectors: set algebra and a serialize/deserialize round trip.
    rows = [3, *range(10, 20), 1 << 40]
    dv = deltadv.DeletionVector([3, 1 << 40]) | range(10, 20)
    check(dv.to_numpy().tolist() == rows, "DeletionVector contents")
    check(deltadv.DeletionVector.deserialize(dv.serialize()) == dv, "serialize round trip")
    check(deltadv.z85_decode("HelloWorld", 8).hex() == "864fd26fb559f75b", "Z85 spec vector")

    with tempfile.TemporaryDirectory() as tmp:
        # A table written by deltadv.write, then DELETE with a DV, read back.
        data = pa.table(
            {"id": pa.array(range(1000), pa.int64()), "g": [i % 4 for i in range(1000)]}
        )
        table = write_table(f"{tmp}/t", data, partition_by=["g"])
        metrics = table.delete("id IN (3, 4) OR id >= 990")
        gone = pc.or_(pc.is_in(data["id"], pa.array([3, 4])), pc.greater_equal(data["id"], 990))
        check(metrics["num_deleted_rows"] == 12, f"DELETE metrics {metrics}")
        expected = data.filter(pc.invert(gone))
        got = deltadv.DeltaTable(f"{tmp}/t").to_pyarrow().sort_by("id")
        check(got.select(["id", "g"]).to_pylist() == expected.to_pylist(), "rows after DELETE")

        # A data file written by pyarrow itself, committed by hand as a Delta table
        # without DVs; deltadv reads it, enables DVs and deletes from it.
        root = Path(tmp) / "p"
        (root / "_delta_log").mkdir(parents=True)
        pq.write_table(data, root / "part-0.parquet")
        fields = [
            {"name": n, "type": "long", "nullable": True, "metadata": {}} for n in "id g".split()
        ]
        actions = [
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            {
                "metaData": {
                    "id": "smoke",
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": json.dumps({"type": "struct", "fields": fields}),
                    "partitionColumns": [],
                    "configuration": {},
                }
            },
            {
                "add": {
                    "path": "part-0.parquet",
                    "partitionValues": {},
                    "size": (root / "part-0.parquet").stat().st_size,
                    "modificationTime": 0,
                    "dataChange": True,
                }
            },
        ]
        log = "".join(json.dumps(a) + "\n" for a in actions)
        (root / "_delta_log" / f"{0:020}.json").write_text(log)
        table = deltadv.DeltaTable(str(root))
        check(table.to_pyarrow().sort_by("id").to_pylist() == data.to_pylist(), "pyarrow table")
        enable_deletion_vectors(table)
        table = deltadv.DeltaTable(str(root))
        table.delete("id < 5")
        expected = data.filter(pc.greater_equal(data["id"], 5))
        got = deltadv.DeltaTable(str(root)).to_pyarrow().sort_by("id")
        check(got.to_pylist() == expected.to_pylist(), "pyarrow table after DELETE")

    print(f"wheel smoke: ok (deltadv {deltadv.__version__}, Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
