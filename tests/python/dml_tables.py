"""Tables and row models shared by the UPDATE and MERGE tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

import deltadv
from deltadv.write import write_table

#: Rows of the partitioned table Delta Spark creates (`create_table`).
N = 3000

Row = dict[str, Any]


def initial_model() -> dict[int, Row]:
    """The rows of `create_table`'s table, by id."""
    return {i: {"id": i, "part": i % 3, "s": f"v{i}", "n": i} for i in range(N)}


def create_table(spark: Any, path: str, mapped: bool) -> None:
    """N rows (id, part = id % 3, s = 'v<id>', n = id) written by Delta Spark, partitioned
    by part, DVs on, a checkpoint every 2 commits; column-mapped by name if `mapped`."""
    writer = (
        spark.range(0, N, numPartitions=3)
        .selectExpr("id", "id % 3 AS part", "concat('v', id) AS s", "id AS n")
        .write.format("delta")
        .partitionBy("part")
        .option("delta.enableDeletionVectors", "true")
        .option("delta.checkpointInterval", "2")
    )
    if mapped:
        writer = writer.option("delta.columnMapping.mode", "name")
    writer.save(path)


def sorted_rows(rows: list[Row]) -> list[tuple[Any, ...]]:
    """(id, part, s, n) of `rows`, sorted."""
    return sorted((r["id"], r["part"], r["s"], r["n"]) for r in rows)


def small_table(tmp_path: Path) -> deltadv.DeltaTable:
    """A 10-row table at tmp_path/t written by deltadv: id (NOT NULL), s, n int32."""
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("s", pa.string()),
            pa.field("n", pa.int32()),
        ]
    )
    data = pa.table(
        {
            "id": pa.array(range(10), pa.int64()),
            "s": [f"v{i}" for i in range(10)],
            "n": pa.array(range(10), pa.int32()),
        },
        schema=schema,
    )
    return write_table(str(tmp_path / "t"), data)


def table_files(root: Path) -> set[str]:
    """The files under a table's root outside its log (data and DV files)."""
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and "_delta_log" not in p.parts
    }


def create_tracked_table(spark: Any, path: str, rows: int) -> None:
    """Delta Spark's (id BIGINT, s STRING) table with row tracking and DVs on: ids
    0..rows-1, s = 's<id>', in two files from two INSERT commits."""
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, s STRING) USING delta TBLPROPERTIES ("
        "'delta.enableRowTracking'='true', 'delta.enableDeletionVectors'='true')"
    )
    for lo in (0, rows // 2):
        values = ", ".join(f"({i}, 's{i}')" for i in range(lo, lo + rows // 2))
        spark.sql(f"INSERT INTO delta.`{path}` VALUES {values}")


def spark_row_ids(spark: Any, path: str) -> dict[int, tuple[int, int, str]]:
    """id -> (row id, row commit version, s), as Delta Spark's ``_metadata`` shows them."""
    spark.catalog.clearCache()
    rows = spark.sql(
        "SELECT id, s, _metadata.row_id AS rid, _metadata.row_commit_version AS rcv "
        f"FROM delta.`{path}`"
    ).collect()
    return {r["id"]: (r["rid"], r["rcv"], r["s"]) for r in rows}


def delta_rows(spark: Any, path: Path) -> list[tuple[Any, ...]]:
    """Delta Spark's rows of the table at ``path``, sorted."""
    df = spark.read.format("delta").load(str(path))
    return sorted((tuple(r) for r in df.collect()), key=repr)


def delta_history(spark: Any, path: Path) -> list[tuple[int, str, dict[str, str]]]:
    """Delta Spark's history of ``path``: (version, operation, parameters), by version."""
    rows = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    return sorted((r["version"], r["operation"], dict(r["operationParameters"])) for r in rows)


def delta_append(spark: Any, path: str, start: int, end: int, files: int = 1) -> None:
    """Delta Spark appends ids ``start..end`` (``id``, ``v = 'r<id>'``) in ``files`` files:
    the commits the streaming tests script."""
    (
        spark.range(start, end, 1, files)
        .selectExpr("id", "concat('r', cast(id as string)) as v")
        .write.format("delta")
        .mode("append")
        .save(path)
    )


def create_stream_table(spark: Any, path: str) -> None:
    """An empty ``(id BIGINT, v STRING)`` table with deletion vectors, created by Delta Spark."""
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, v STRING) USING delta "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
