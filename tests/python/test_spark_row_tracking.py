"""Row tracking through the Spark read paths: ``deltadv.spark.read(...,
with_row_tracking=True)`` and ``spark.read.format("deltadv").option("withRowTracking",
"true")`` add ``_row_id`` and ``_row_commit_version``, computed on the executors
from what each scan task carries (the file's ``baseRowId`` and
``defaultRowCommitVersion``, the table's materialized column names).

The oracle is Delta Spark 4.4's own ``_metadata.row_id`` and
``_metadata.row_commit_version`` on a table Delta Spark created with row tracking
and deletion vectors and changed with UPDATE (materialized ids) and DELETE (DVs);
expected values are never deltadv's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltadv
from deltadv import spark as dspark
from deltadv.write import write_table
from tests.python.dml_tables import create_tracked_table, spark_row_ids

N = 40


def _ours(df: Any) -> dict[int, tuple[int, int, str]]:
    assert df.columns[-2:] == ["_row_id", "_row_commit_version"]
    return {
        r["id"]: (r["_row_id"], r["_row_commit_version"], r["s"])
        for r in df.select("id", "s", "_row_id", "_row_commit_version").collect()
    }


@pytest.fixture
def tracked_table(delta_spark: Any, tmp_path: Path) -> str:
    """Delta Spark's table: row tracking + DVs, three files (two INSERTs, one
    deltadv append of 7-row row groups), then UPDATE (rows of every file get
    materialized ids and the new version) and DELETE (DVs)."""
    spark = delta_spark
    path = str(tmp_path / "tracked")
    create_tracked_table(spark, path, N)
    ids = list(range(N, 2 * N))
    data = pa.table({"id": pa.array(ids, pa.int64()), "s": [f"s{i}" for i in ids]})
    write_table(path, data, mode="append", row_group_rows=7)
    spark.sql(f"UPDATE delta.`{path}` SET s = s || '-u' WHERE id % 9 = 0")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 11 = 3")
    return path


def test_spark_read_adds_delta_sparks_row_ids(delta_spark: Any, tracked_table: str) -> None:
    spark = delta_spark
    want = spark_row_ids(spark, tracked_table)
    assert len(want) == 2 * N - len([i for i in range(2 * N) if i % 11 == 3])
    # the table has both kinds of row: materialized (updated) and computed
    assert len({rcv for _, rcv, _ in want.values()}) >= 3
    df = dspark.read(spark, tracked_table, with_row_tracking=True)
    assert df.columns == ["id", "s", "_row_id", "_row_commit_version"]
    assert _ours(df) == want
    # split by row groups (the deltadv file has 7-row groups): each task keeps its
    # rows' physical indexes, so the ids stay right
    tasks = deltadv.DeltaTable(tracked_table).scan_tasks(split_size=1, with_row_tracking=True)
    assert sum(t.row_groups is not None for t in tasks) > 3
    split = dspark.read(spark, tracked_table, with_row_tracking=True, split_size=1)
    assert _ours(split) == want
    # each task alone (what an executor runs) gives its rows' values
    rows = pa.Table.from_batches([b for t in tasks for b in t.read()]).to_pylist()
    assert {r["id"]: (r["_row_id"], r["_row_commit_version"], r["s"]) for r in rows} == want
    # a column subset and a filter (pruning only; Spark filters the rows)
    some = dspark.read(
        spark, tracked_table, columns=["s", "id"], filter="id >= 40", with_row_tracking=True
    )
    assert some.columns == ["s", "id", "_row_id", "_row_commit_version"]
    assert _ours(some) == {i: v for i, v in want.items() if i >= 40}
    # without the option: the table's columns only
    assert dspark.read(spark, tracked_table).columns == ["id", "s"]


def test_data_source_adds_delta_sparks_row_ids(delta_spark: Any, tracked_table: str) -> None:
    spark = delta_spark
    dspark.register(spark)
    want = spark_row_ids(spark, tracked_table)
    reader = spark.read.format("deltadv").option("withRowTracking", "true")
    df = reader.load(tracked_table)
    assert df.columns == ["id", "s", "_row_id", "_row_commit_version"]
    assert _ours(df) == want
    split = reader.option("splitSize", "1").load(tracked_table)
    assert _ours(split) == want
    # time travel: the ids and versions of that version (before UPDATE and DELETE)
    v2 = reader.option("versionAsOf", "2").load(tracked_table)
    spark.catalog.clearCache()
    old = spark.sql(
        "SELECT id, s, _metadata.row_id AS rid, _metadata.row_commit_version AS rcv "
        f"FROM delta.`{tracked_table}` VERSION AS OF 2"
    ).collect()
    assert _ours(v2) == {r["id"]: (r["rid"], r["rcv"], r["s"]) for r in old}
    plain = spark.read.format("deltadv").load(tracked_table)
    assert plain.columns == ["id", "s"]


def test_row_tracking_on_an_untracked_table_is_refused(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "plain")
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, s STRING) USING delta")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 'a')")
    with pytest.raises(ValueError, match="does not track rows"):
        dspark.read(spark, path, with_row_tracking=True)
    dspark.register(spark)
    with pytest.raises(Exception, match="does not track rows"):
        spark.read.format("deltadv").option("withRowTracking", "true").load(path).collect()
    with pytest.raises(ValueError, match="change data feed"):
        dspark.read(spark, path, with_row_tracking=True, change_data_feed=True)
    with pytest.raises(Exception, match="withRowTracking must be true or false"):
        spark.read.format("deltadv").option("withRowTracking", "yes").load(path).collect()
