"""deltadv demo: makes its own data, needs no cloud and no ../shared.

Run with ``python -m deltadv.demo``. It builds deletion vectors, packs them into one
DV file the way a DELETE would, reads each back through its descriptor (one byte
range per DV), shows an inline descriptor, and shows what a corrupt file looks like.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

import deltadv
from deltadv import DeletionVector, DeletionVectorDescriptor


def table_demo(root: Path, spark: bool) -> None:
    """A Delta table with DVs, read by deltadv and then by Spark through mapInArrow."""
    from deltadv._sample import make_table

    deleted = {1: list(range(0, 200_000, 3)), 2: [5, 50, 500, 5_000]}
    made = make_table(root, files=4, rows_per_file=200_000, deleted=deleted)
    print(f"\nSample table {root.name}: 4 files x 200,000 rows; DVs on 2 files, in one DV file")
    table = deltadv.DeltaTable(str(root))
    files = table.get_add_actions()
    print(f"  version {table.version()}, {files.num_rows} live files, count() = {table.count():,}")
    print(files.select(["path", "num_records", "logical_rows", "dv_storage_type", "dv_offset"]))
    rows = table.to_pyarrow_table(["id"])
    assert rows.num_rows == made["rows"]
    ids = set(rows["id"].to_pylist())
    print(
        f"  to_pyarrow_table(): {rows.num_rows:,} rows; id 200003 (deleted by the DV): "
        f"{'present' if 200_003 in ids else 'gone'}, id 200001: "
        f"{'present' if 200_001 in ids else 'gone'}"
    )
    if not spark:
        return
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        print("  (pyspark not installed: skipping the Spark part)")
        return
    import os
    import sys

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("deltadv-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.log.level", "ERROR")
        .getOrCreate()
    )
    try:
        from deltadv import spark as dspark

        df = dspark.read(session, str(root))
        print(f"\nSpark (local[2], mapInArrow): count() = {df.count():,}")
        df.groupBy((df.id / 200_000).cast("int").alias("file")).count().orderBy("file").show()

        m = dspark.DeltaTable.forPath(session, str(root)).delete("id % 1000 = 7 OR id < 100")
        print(
            f"Spark DELETE (DVs written on the executors): version {m['version']}, "
            f"{m['num_deleted_rows']:,} rows deleted, "
            f"{m['num_deletion_vectors_added']} DVs added "
            f"({m['num_deletion_vectors_updated']} of them extend an older DV), "
            f"{m['num_removed_files']} files removed, 0 files rewritten"
        )
        print(f"  count() now {dspark.read(session, str(root)).count():,}")
        m = deltadv.DeltaTable(str(root)).delete("id BETWEEN 600000 AND 600009")
        print(f"Python DELETE: version {m['version']}, {m['num_deleted_rows']} rows deleted")
    finally:
        session.stop()


def main(argv: list[str] | None = None) -> int:
    print(f"deltadv {deltadv.__version__}: deletion vectors demo\n")
    rng = np.random.default_rng(7)
    dvs = {
        "part-0.parquet (2 rows, seed 000's first DELETE)": DeletionVector([24, 42]),
        "part-1.parquet (0.1% of 10M rows)": DeletionVector(rng.choice(10_000_000, 10_000, False)),
        "part-2.parquet (rows 300..800)": DeletionVector(range(300, 801)),
    }
    with tempfile.TemporaryDirectory(prefix="deltadv-demo-") as root:
        descriptors = deltadv.write_deletion_vectors(root, list(dvs.values()))
        dv_file = Path(descriptors[0].absolute_path(root) or "")
        print(f"Wrote {len(dvs)} DVs into one file: {dv_file.name} ({dv_file.stat().st_size} B)")
        for (name, dv), desc in zip(dvs.items(), descriptors, strict=True):
            print(f"\n  {name}")
            print(f"    deletionVector: {json.dumps(desc.to_json())}")
            back = desc.read(root)
            assert back == dv
            print(f"    read back: {back!r}")

        merged = dvs["part-0.parquet (2 rows, seed 000's first DELETE)"] | range(300, 801)
        inline = merged.to_inline_descriptor()
        print(f"\nA second DELETE on part-0 merges old and new rows: {merged!r}")
        print(f"  as an inline descriptor ({inline.size_in_bytes} B):")
        print(f"  {json.dumps(inline.to_json())}")

        data = bytearray(dv_file.read_bytes())
        data[-3] ^= 0xFF
        dv_file.write_bytes(bytes(data))
        try:
            descriptors[-1].read(root)
        except deltadv.CorruptDeletionVectorError as err:
            print(f"\nFlipping one byte of the file is caught:\n  {err}")

    spec = DeletionVectorDescriptor(
        "i", "^Bg9^0rr910000000000iXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", 44, 6
    )
    print(f"\nThe protocol's inline example decodes to {list(spec.read(''))}")

    with tempfile.TemporaryDirectory(prefix="deltadv-demo-table-") as tmp:
        table_demo(Path(tmp) / "events", spark="--no-spark" not in (argv or []))
    return 0


if __name__ == "__main__":
    sys.exit(main())
