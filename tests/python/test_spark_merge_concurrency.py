"""Concurrent MERGEs through the Spark glue (deltadv.spark), on tables Delta Spark
creates and reads back: a MERGE that inserts reads the whole table, so a file a
concurrent commit added conflicts only where it could have changed what the MERGE
did, as deltadv's in-process MERGE decides (the rule lives in the Rust commit):

- concurrent MERGEs inserting disjoint keys (two Spark-glue MERGEs, the source
  broadcast or a 100,000-row source joined sort-merge; or Delta Spark's own MERGE
  as the winner) both commit, the later rebased, nothing raised;
- a concurrent MERGE (Spark glue, in-process, or Delta Spark's) that inserted one
  of the later MERGE's source keys makes it raise CommitConflictError (Delta
  Spark's ConcurrentAppendException), committing nothing and leaving no file
  behind;
- a MERGE whose condition reads one partition (``t.part = 'a' AND ...``) is not
  stopped by a concurrent commit adding rows to another partition, even one with
  one of its keys (Delta Spark's read set of target-only partition predicates), and
  is stopped by the same row in its own partition.

The race is made deterministic: the competitor commits from inside the hook
between the first MERGE's writing tasks and its commit. Expected rows come from a
model of the statements, compared with what Delta Spark reads. The commit the
Spark MERGE makes (``DeltaTable.commit_changes`` with its plan and source keys) is
also pinned without Spark, case by case, keys not kept included."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltadv
from deltadv import CommitConflictError
from deltadv import spark as dspark
from deltadv.spark import merge as spark_merge
from deltadv.write import write_table
from tests.python.dml_tables import table_files

#: id -> (part, v)
Model = dict[int, tuple[str, str]]
Hook = Callable[[Callable[[], None]], None]


def _create(spark: Any, path: str, isolation: str | None = None) -> Model:
    """A table by Delta Spark: ids 0..19, part 'a' (even) / 'b' (odd), DVs on."""
    props = "'delta.enableDeletionVectors' = 'true'"
    if isolation is not None:
        props += f", 'delta.isolationLevel' = '{isolation}'"
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, part STRING, v STRING) USING delta "
        f"PARTITIONED BY (part) TBLPROPERTIES ({props})"
    )
    spark.sql(
        f"INSERT INTO delta.`{path}` SELECT id, IF(id % 2 = 0, 'a', 'b'), concat('v', id) "
        "FROM range(20)"
    )
    return {i: ("a" if i % 2 == 0 else "b", f"v{i}") for i in range(20)}


def _read(spark: Any, path: str) -> Model:
    rows = spark.read.format("delta").load(path).collect()
    out = {r["id"]: (r["part"], r["v"]) for r in rows}
    assert len(out) == len(rows), "duplicate ids"
    return out


def _upsert(model: Model, rows: list[tuple[int, str, str]], part: str | None = None) -> None:
    """The model of an upsert (matched: v set; not matched: inserted), of the
    target rows in ``part`` when given."""
    for i, p, v in rows:
        if i in model and (part is None or model[i][0] == part):
            model[i] = (model[i][0], v)
        else:
            model[i] = (p, v)


def _spark_upsert(spark: Any, path: str, source: Any, condition: str = "t.id = s.id") -> Any:
    return (
        dspark.DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(source.alias("s"), condition)
        .whenMatchedUpdate(set={"v": "s.v"})
        .whenNotMatchedInsertAll()
        .execute()
    )


def _source(spark: Any, rows: list[tuple[int, str, str]]) -> Any:
    return spark.createDataFrame(rows, "id long, part string, v string")


def _delta_spark_upsert(spark: Any, path: str, rows: list[tuple[int, str, str]]) -> None:
    """The same upsert by Delta Spark's own MERGE."""
    values = ", ".join(f"({i}, '{p}', '{v}')" for i, p, v in rows)
    spark.sql(
        f"MERGE INTO delta.`{path}` t USING (SELECT * FROM VALUES {values} AS s(id, part, v)) s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"
    )


@pytest.fixture
def before_commit(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hook]:
    """Run a competitor once, between the next Spark MERGE's writing tasks and its
    commit (a MERGE the competitor runs itself commits straight away)."""
    pending: list[Callable[[], None]] = []
    original = spark_merge._SparkMerge._commit

    def commit(self: Any, out: list[Any]) -> dict[str, Any]:
        if pending:
            pending.pop()()
        return original(self, out)

    monkeypatch.setattr(spark_merge._SparkMerge, "_commit", commit)
    yield pending.append
    assert not pending, "the competitor never ran"


@pytest.mark.parametrize("shape", ["broadcast", "sort-merge-100k", "delta-spark-winner"])
def test_spark_merges_inserting_disjoint_keys_both_commit(
    delta_spark: Any, tmp_path: Path, before_commit: Any, shape: str
) -> None:
    spark = delta_spark
    path = str(tmp_path / "t")
    model = _create(spark, path)
    first = [(1, "b", "A"), (4, "a", "A"), (100, "a", "A"), (101, "b", "A")]
    if shape == "sort-merge-100k":
        first += [(1000 + i, "a" if i % 2 else "b", "N") for i in range(100_000)]
    second = [(2, "a", "B"), (7, "b", "B"), (200, "a", "B")]

    def competitor() -> None:
        if shape == "delta-spark-winner":
            _delta_spark_upsert(spark, path, second)
            return
        m = _spark_upsert(spark, path, _source(spark, second))
        assert m["version"] == 2 and m["num_target_rows_inserted"] == 1

    before_commit(competitor)
    key = "spark.sql.autoBroadcastJoinThreshold"
    old = spark.conf.get(key)
    if shape == "sort-merge-100k":
        spark.conf.set(key, "-1")
    try:
        m = _spark_upsert(spark, path, _source(spark, first))
    finally:
        spark.conf.set(key, old)
    # Lost the race to version 2, whose new files hold none of its keys: rebased.
    assert m["version"] == 3 and m["attempts"] == 2 and m["rebases"] >= 1
    assert m["num_target_rows_updated"] == 2
    assert m["num_target_rows_inserted"] == len(first) - 2
    _upsert(model, second)
    _upsert(model, first)
    assert _read(spark, path) == model
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert [r["operation"] for r in sorted(history, key=lambda r: r["version"])] == [
        "CREATE TABLE",
        "WRITE",
        "MERGE",
        "MERGE",
    ]


@pytest.mark.parametrize("competitor_api", ["spark", "python", "delta-spark"])
def test_spark_merge_conflicts_on_a_concurrent_row_with_its_key(
    delta_spark: Any, tmp_path: Path, before_commit: Any, competitor_api: str
) -> None:
    spark = delta_spark
    path = str(tmp_path / "t")
    model = _create(spark, path)
    first = [(1, "b", "A"), (100, "a", "A"), (300, "b", "A")]
    second = [(3, "b", "B"), (100, "b", "B")]
    after: dict[str, Any] = {}

    def competitor() -> None:
        pre = table_files(Path(path))  # with the loser's new files
        if competitor_api == "delta-spark":
            _delta_spark_upsert(spark, path, second)
            after["winner"] = table_files(Path(path)) - pre
            return
        if competitor_api == "spark":
            m = _spark_upsert(spark, path, _source(spark, second))
        else:
            src = pa.table(
                {
                    "id": pa.array([r[0] for r in second], pa.int64()),
                    "part": [r[1] for r in second],
                    "v": [r[2] for r in second],
                }
            )
            m = (
                deltadv.DeltaTable(path)
                .merge(src, "t.id = s.id", source_alias="s", target_alias="t")
                .when_matched_update({"v": "s.v"})
                .when_not_matched_insert_all()
                .execute()
            )
        assert m["version"] == 2
        after["winner"] = table_files(Path(path)) - pre

    before = table_files(Path(path))
    before_commit(competitor)
    with pytest.raises(CommitConflictError, match=r"(?s)ConcurrentAppend.*would have matched"):
        _spark_upsert(spark, path, _source(spark, first))
    # Nothing of the loser committed nor left behind; the winner's rows intact.
    assert deltadv.DeltaTable(path).version() == 2
    assert after["winner"] and table_files(Path(path)) == before | after["winner"]
    _upsert(model, second)
    assert _read(spark, path) == model
    # Run again on the new version, it matches the row the winner inserted.
    m = _spark_upsert(spark, path, _source(spark, first))
    assert (m["num_target_rows_updated"], m["num_target_rows_inserted"]) == (2, 1)
    _upsert(model, first)
    assert _read(spark, path) == model


@pytest.mark.parametrize(
    ("winner", "into"),
    [("merge", "b"), ("append", "b"), ("merge", "a"), ("append", "a")],
)
def test_spark_merge_reads_only_the_partitions_of_its_condition(
    delta_spark: Any, tmp_path: Path, before_commit: Any, winner: str, into: str
) -> None:
    """The MERGE's condition reads partition 'a' only; a concurrent commit adds a
    row with one of its keys (100): in partition 'b' no conflict, in 'a' one. The
    append runs on a Serializable table, where even a blind append counts."""
    spark = delta_spark
    path = str(tmp_path / "t")
    model = _create(spark, path, "Serializable" if winner == "append" else None)
    first = [(2, "a", "A"), (3, "a", "A"), (100, "a", "A")]
    new_row = [(100, into, "W")]

    def competitor() -> None:
        src = pa.table({"id": pa.array([100], pa.int64()), "part": [into], "v": ["W"]})
        if winner == "append":
            write_table(path, src, mode="append")
        else:
            (
                deltadv.DeltaTable(path)
                .merge(src, "t.id = s.id", source_alias="s", target_alias="t")
                .when_not_matched_insert_all()
                .execute()
            )

    before_commit(competitor)
    condition = "t.part = 'a' AND t.id = s.id"
    if into == "a":
        with pytest.raises(CommitConflictError, match="ConcurrentAppend"):
            _spark_upsert(spark, path, _source(spark, first), condition)
        _upsert(model, new_row)
        assert _read(spark, path) == model
        return
    m = _spark_upsert(spark, path, _source(spark, first), condition)
    assert m["version"] == 3 and m["attempts"] == 2
    # id 2 is in partition 'a': updated; ids 3 (in 'b') and 100 (the winner's, in
    # 'b') are not matched by this condition: inserted into 'a'.
    assert (m["num_target_rows_updated"], m["num_target_rows_inserted"]) == (1, 2)
    want = [(i, p, "A" if i == 2 else v) for i, (p, v) in model.items()]
    want += [(100, "b", "W"), (3, "a", "A"), (100, "a", "A")]
    got = [(r["id"], r["part"], r["v"]) for r in spark.read.format("delta").load(path).collect()]
    assert sorted(got) == sorted(want)


def _inserts(ids: list[int], part: str) -> pa.Table:
    """A change stream of inserted rows (as the Spark MERGE's writers take it)."""
    n = len(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "part": [part] * n,
            "v": ["A"] * n,
            "_file_path": pa.nulls(n, pa.string()),
            "_row_index": pa.nulls(n, pa.int64()),
            "_change": ["insert"] * n,
        }
    )


@pytest.mark.parametrize(
    ("condition", "keys", "complete", "conflicts"),
    [
        ("t.id = s.id", [5, 6], True, False),
        ("t.id = s.id", [5, 100], True, True),
        ("t.part = 'a' AND t.id = s.id", [5, 100], True, False),
        ("t.part = 'a' AND t.id = s.id", [5, 100], False, False),
        ("t.part = 'b' AND t.id = s.id", [5, 6], False, True),
        ("t.id = s.id", [5, 6], False, True),
    ],
    ids=["disjoint", "shared", "other-partition", "other-partition-no-keys", "no-keys", "all"],
)
def test_commit_changes_checks_added_files_with_the_merge_plan(
    tmp_path: Path, condition: str, keys: list[int], complete: bool, conflicts: bool
) -> None:
    """The commit the Spark MERGE makes (``DeltaTable.commit_changes`` with its
    plan and source keys), on a stale table after a concurrent MERGE inserted id
    100 into partition 'b': a conflict only when the new row lies in a partition
    the condition reads and has one of the keys, or (keys not kept:
    ``merge_keys_complete=False``) whenever it lies in a partition read."""
    path = str(tmp_path / "t")
    ids = list(range(10))
    initial = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "part": ["a" if i % 2 == 0 else "b" for i in ids],
            "v": [f"v{i}" for i in ids],
        }
    )
    write_table(path, initial, partition_by=["part"])
    stale = deltadv.DeltaTable(path)
    prepared = stale.change_task([]).prepare(_inserts(keys, "a"))
    winner = pa.table({"id": pa.array([100], pa.int64()), "part": ["b"], "v": ["W"]})
    (
        deltadv.DeltaTable(path)
        .merge(winner, "t.id = s.id", source_alias="s", target_alias="t")
        .when_not_matched_insert_all()
        .execute()
    )
    plan = deltadv.MergePlan(
        condition, [("not_matched", "insert_all", None, [])], target_alias="t", source_alias="s"
    )
    assert plan.checks_added_rows

    def commit() -> dict[str, Any]:
        return stale.commit_changes(
            "MERGE",
            [prepared],
            merge_plan=plan,
            merge_keys=pa.table({"id": pa.array(keys if complete else [], pa.int64())}),
            merge_keys_complete=complete,
        )

    want = [(i, "a" if i % 2 == 0 else "b") for i in ids] + [(100, "b")]
    if conflicts:
        with pytest.raises(CommitConflictError, match="ConcurrentAppend"):
            commit()
        assert deltadv.DeltaTable(path).version() == 1
    else:
        assert commit()["version"] == 2
        want += [(k, "a") for k in keys]
    got = deltadv.DeltaTable(path).to_pyarrow_table().select(["id", "part"]).to_pylist()
    assert sorted((r["id"], r["part"]) for r in got) == sorted(want)
