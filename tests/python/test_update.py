"""UPDATE with deletion vectors (Python and Spark APIs), checked against Delta
Spark: every version deltadv writes is read back by Delta Spark row for row,
Delta Spark's own UPDATE runs on top of ours, and deltalake's DV-aware scan reads
the result. Expected rows come from a model that applies each statement's
meaning to plain Python dicts, never from deltadv's output."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import deltadv
from deltadv import spark as dspark
from deltadv.write import write_table
from tests.python.dml_tables import (
    Row,
    create_table,
    initial_model,
    small_table,
    sorted_rows,
    table_files,
)


def _delta_spark_rows(spark: Any, path: str) -> list[tuple[Any, ...]]:
    df = spark.read.format("delta").load(path)
    return sorted_rows([r.asDict() for r in df.collect()])


def _deltadv_rows(path: str) -> list[tuple[Any, ...]]:
    return sorted_rows(deltadv.DeltaTable(path).to_pyarrow_table().to_pylist())


def _expect(model: dict[int, Row]) -> list[tuple[Any, ...]]:
    return sorted_rows(list(model.values()))


@pytest.mark.parametrize("mapped", [False, True], ids=["plain", "column-mapped"])
def test_update_rounds_read_back_by_delta_spark(
    delta_spark: Any, tmp_path: Path, mapped: bool
) -> None:
    from pyspark.sql import functions as F

    spark = delta_spark
    path = str(tmp_path / "t")
    create_table(spark, path, mapped)
    model = initial_model()
    table = deltadv.DeltaTable(path)

    def check(step: str) -> None:
        want = _expect(model)
        assert _delta_spark_rows(spark, path) == want, step
        assert _deltadv_rows(path) == want, step

    # 1. Python, SQL values: concatenation and arithmetic on a range of rows
    m = table.update({"s": "s || '-a'", "n": "n * 2 + 1"}, "id BETWEEN 100 AND 399")
    for i in range(100, 400):
        model[i]["s"] += "-a"
        model[i]["n"] = model[i]["n"] * 2 + 1
    assert m["num_updated_rows"] == 300 and m["num_copied_rows"] == 0
    assert m["num_deletion_vectors_added"] == 3  # one file per partition touched
    check("python SQL update")

    # 2. Python, pyarrow expressions
    m = table.update({"n": pc.field("n") - 5}, (pc.field("id") > 2500) & (pc.field("part") == 1))
    hit = [i for i in model if i > 2500 and model[i]["part"] == 1]
    for i in hit:
        model[i]["n"] -= 5
    assert m["num_updated_rows"] == len(hit)
    check("python pyarrow update")

    # 3. Spark, a condition and values outside deltadv's grammar (Spark evaluates)
    dt = dspark.DeltaTable.forPath(spark, path)
    m = dt.update("id % 7 = 0", {"s": "upper(s)", "n": F.col("n") + 100})
    for i, r in model.items():
        if i % 7 == 0:
            r["s"] = r["s"].upper()
            r["n"] += 100
    assert m["num_updated_rows"] == sum(1 for i in model if i % 7 == 0)
    check("spark update")

    # 4. Delta Spark's own UPDATE on top of our DVs
    spark.sql(f"UPDATE delta.`{path}` SET n = n - 1 WHERE id % 5 = 0")
    for i, r in model.items():
        if i % 5 == 0:
            r["n"] -= 1
    table.update_incremental()
    check("Delta Spark update")

    # 5. rows moving to other partitions
    m = table.update({"part": "part + 10"}, "id < 50")
    for i in range(50):
        model[i]["part"] += 10
    assert m["num_updated_rows"] == 50
    check("partition move")

    # 6. CASE over every row, then a delete
    table.update({"s": "CASE WHEN n > 5000 THEN 'big' WHEN part >= 10 THEN 'moved' ELSE s END"})
    for r in model.values():
        if r["n"] > 5000:
            r["s"] = "big"
        elif r["part"] >= 10:
            r["s"] = "moved"
    table.delete("id IN (1, 2, 3, 2999)")
    for i in (1, 2, 3, 2999):
        del model[i]
    check("CASE on every row, then delete")

    # the history shows our UPDATEs with Delta Spark's metric names
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    ours = [h for h in history if h["operation"] == "UPDATE" and "deltadv" in h["engineInfo"]]
    theirs = [h for h in history if h["operation"] == "UPDATE" and "deltadv" not in h["engineInfo"]]
    assert len(ours) == 5 and len(theirs) == 1
    assert set(theirs[0]["operationMetrics"]) <= set(ours[0]["operationMetrics"])
    assert ours[-1]["operationMetrics"]["numUpdatedRows"] == "300"

    # deltalake's DV-aware scan agrees (its to_pyarrow_table refuses DV tables)
    import deltalake

    rows = sorted_rows(pa.table(deltalake.DeltaTable(path).scan().read_all()).to_pylist())
    assert rows == _expect(model)


@pytest.mark.parametrize(
    ("updates", "predicate", "kind", "message"),
    [
        ({"nope": "1"}, None, ValueError, 'UPDATE sets column "nope", which is not in the table'),
        ({"s": "nope || 'x'"}, None, ValueError, "column nope is not in the table"),
        ({"s": "'x'"}, "nope = 1", ValueError, "column nope is not in the table"),
        (
            {"id": "s"},
            None,
            ValueError,
            "cannot assign s (of type string) to column id",
        ),
        ({"n": "CAST(s AS INT)"}, "id = 3", ValueError, "cannot cast a value of type string"),
        ({"n": "n + 2147483647"}, "id = 3", ValueError, "Overflow"),
        ({"n": "CAST(n / (id - 3) AS INT)"}, "id = 3", ValueError, "DIVIDE_BY_ZERO"),
        (
            {"id": "NULL"},
            "id = 3",
            ValueError,
            "NOT NULL constraint violated for column: id",
        ),
        ({"s": "s LIKE 'x'"}, None, deltadv.UnsupportedPredicateError, "LIKE is not supported"),
        ({"n": "d + 1"}, None, ValueError, "not in the table"),
    ],
)
def test_bad_updates_are_clear_errors_and_change_nothing(
    tmp_path: Path, updates: dict[str, str], predicate: str | None, kind: type, message: str
) -> None:
    table = small_table(tmp_path)
    root = tmp_path / "t"
    before = table_files(root)
    with pytest.raises(kind, match=message.replace("(", r"\(").replace(")", r"\)")):
        table.update(updates, predicate)
    assert table.version() == 0
    assert deltadv.DeltaTable(str(root)).version() == 0
    assert table_files(root) == before, "files written by a failed UPDATE must be removed"


def test_update_values_follow_spark_semantics(tmp_path: Path) -> None:
    table = small_table(tmp_path)
    m = table.update(
        {
            "s": "concat(s, ':', CAST(n * 2 AS STRING))",
            "n": "CAST(n / 4 AS INT)",
        },
        "id >= 8 OR id = n - 0",
    )
    # every row matches (id = n); n / 4 is a double, cast truncates toward zero
    assert m["num_updated_rows"] == 10
    got = {r["id"]: (r["s"], r["n"]) for r in table.to_pyarrow_table().to_pylist()}
    assert got == {i: (f"v{i}:{i * 2}", int(i / 4)) for i in range(10)}
    # nothing matches: nothing is committed
    m = table.update({"n": "0"}, "id > 100")
    assert m["version"] is None and table.version() == 1


def test_concurrent_updates_and_deletes_of_one_file(tmp_path: Path) -> None:
    """Two writers on the same version: different rows of one file both commit
    (the later one rebased onto the earlier one's DV); the same row conflicts and
    the loser commits nothing."""
    small_table(tmp_path)
    path = str(tmp_path / "t")
    a = deltadv.DeltaTable(path)
    b = deltadv.DeltaTable(path)
    c = deltadv.DeltaTable(path)
    a.update({"s": "'a'"}, "id = 1")
    m = b.delete("id = 2")
    assert m["version"] == 2 and m["rebases"] == 1
    before = table_files(tmp_path / "t")
    with pytest.raises(deltadv.CommitConflictError):
        c.update({"s": "'c'"}, "id = 1")
    assert deltadv.DeltaTable(path).version() == 2
    assert table_files(tmp_path / "t") == before, "the loser's data file must be removed"
    got = {r["id"]: r["s"] for r in deltadv.DeltaTable(path).to_pyarrow_table().to_pylist()}
    assert got == {i: ("a" if i == 1 else f"v{i}") for i in range(10) if i != 2}


def test_update_on_a_table_without_dvs(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_table(
        str(root), pa.table({"id": pa.array(range(6), pa.int64())}), enable_deletion_vectors=False
    )
    table = deltadv.DeltaTable(str(root))
    with pytest.raises(deltadv.DeltaDVError, match="does not allow deletion vectors"):
        table.update({"id": "id + 100"}, "id < 2")
    m = table.update({"id": "id + 100"}, "id < 2", allow_copy_on_write=True)
    assert m["num_updated_rows"] == 2 and m["num_copied_rows"] == 4
    got = sorted(table.to_pyarrow_table()["id"].to_pylist())
    assert got == [2, 3, 4, 5, 100, 101]
    assert not table.deletion_vectors()


def test_change_task_is_picklable_and_hides_credentials(tmp_path: Path) -> None:
    import pickle

    table = small_table(tmp_path)
    task = table.change_task(table.files())
    again = pickle.loads(pickle.dumps(task))
    assert again.task == task.task
    secret = deltadv.ChangeTask(task.table_uri, task.task, {"aws_secret_access_key": "XYZ"})
    assert "XYZ" not in repr(secret) and "<hidden>" in repr(secret)
    assert "XYZ" not in task.task
    assert os.path.basename(table.files()[0]) in json.loads(task.task)["targets"][0]["path"]


def test_copy_on_write_update_keeps_rows_an_old_dv_deleted(
    delta_spark: Any, tmp_path: Path
) -> None:
    """A table whose DVs were turned off after some rows got DVs: the copy-on-write
    rewrite must leave those rows deleted."""
    root = tmp_path / "t"
    table = write_table(str(root), pa.table({"id": pa.array(range(8), pa.int64())}))
    table.delete("id = 1")
    delta_spark.sql(
        f"ALTER TABLE delta.`{root}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')"
    )
    table = deltadv.DeltaTable(str(root))
    m = table.update({"id": "id + 100"}, "id = 2", allow_copy_on_write=True)
    assert m["num_updated_rows"] == 1
    want = [0, 3, 4, 5, 6, 7, 102]
    assert sorted(table.to_pyarrow_table()["id"].to_pylist()) == want
    rows = delta_spark.read.format("delta").load(str(root)).collect()
    assert sorted(r["id"] for r in rows) == want
