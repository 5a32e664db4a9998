"""MERGE with deletion vectors (Python and Spark APIs), checked against Delta Spark:
every version deltadv writes is read back by Delta Spark row for row, Delta
Spark's own MERGE runs on top of ours, and deltalake's DV-aware scan reads the
result. Expected rows come from a model that applies each statement's meaning to
plain Python dicts, never from deltadv's output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltadv
from deltadv import spark as dspark
from deltadv.spark.merge import _estimated_bytes
from tests.python.dml_tables import (
    N,
    Row,
    create_table,
    initial_model,
    small_table,
    sorted_rows,
    table_files,
)


def _source(rows: list[Row]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r["id"] for r in rows], pa.int64()),
            "part": pa.array([r["part"] for r in rows], pa.int64()),
            "s": pa.array([r["s"] for r in rows], pa.string()),
            "n": pa.array([r["n"] for r in rows], pa.int64()),
        }
    )


@pytest.mark.parametrize("mapped", [False, True], ids=["plain", "column-mapped"])
def test_merge_rounds_read_back_by_delta_spark(
    delta_spark: Any, tmp_path: Path, mapped: bool
) -> None:
    spark = delta_spark
    path = str(tmp_path / "t")
    create_table(spark, path, mapped)
    model = initial_model()
    table = deltadv.DeltaTable(path)

    def check(step: str) -> None:
        want = sorted_rows(list(model.values()))
        got = sorted_rows([r.asDict() for r in spark.read.format("delta").load(path).collect()])
        assert got == want, step
        assert sorted_rows(deltadv.DeltaTable(path).to_pyarrow_table().to_pylist()) == want, step

    # 1. Python upsert: 200 existing rows updated, 50 new rows inserted
    src = [{"id": i, "part": i % 3, "s": f"u{i}", "n": -i} for i in range(1000, 1200)]
    src += [{"id": i, "part": i % 3, "s": f"new{i}", "n": i} for i in range(N, N + 50)]
    m = (
        table.merge(_source(src), "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    for r in src:
        model[r["id"]] = dict(r)
    assert m["num_target_rows_updated"] == 200 and m["num_target_rows_inserted"] == 50
    assert m["num_source_rows"] == 250 and m["num_target_rows_copied"] == 0
    assert m["num_target_deletion_vectors_added"] == 3  # one file per partition touched
    check("python upsert")

    # 2. Python, clauses in order: conditional delete, update with an expression,
    #    conditional insert, and NOT MATCHED BY SOURCE on a slice of the table
    src = [{"id": i, "part": 0, "s": "del" if i % 2 else "keep", "n": i} for i in range(0, 100)]
    src += [{"id": i, "part": 1, "s": "ins", "n": i} for i in range(N + 100, N + 110)]
    m = (
        table.merge(_source(src), "target.id = source.id")
        .when_matched_delete("source.s = 'del'")
        .when_matched_update({"n": "target.n + source.n * 10", "s": "target.s || '+'"})
        .when_not_matched_insert({"id": "id", "part": "part", "s": "s"}, f"source.n >= {N + 105}")
        .when_not_matched_by_source_update({"s": "'nmbs'"}, "target.id BETWEEN 2000 AND 2019")
        .execute()
    )
    for r in src:
        i = r["id"]
        if i in model:
            if r["s"] == "del":
                del model[i]
            else:
                model[i]["n"] += r["n"] * 10
                model[i]["s"] += "+"
        elif r["n"] >= N + 105:
            model[i] = {"id": i, "part": r["part"], "s": r["s"], "n": None}
    for i in range(2000, 2020):
        model[i]["s"] = "nmbs"
    assert m["num_target_rows_matched_deleted"] == 50
    assert m["num_target_rows_matched_updated"] == 50
    assert m["num_target_rows_not_matched_by_source_updated"] == 20
    assert m["num_target_rows_inserted"] == 5
    check("python clauses")

    # 3. Spark: the join in Spark, values in Spark SQL
    from pyspark.sql import functions as F

    sdf = spark.range(500, 700).selectExpr(
        "id", "id % 3 AS part", "concat('sp', id) AS s", "id * 2 AS n"
    )
    dt = dspark.DeltaTable.forPath(spark, path)
    m = (
        dt.alias("t")
        .merge(sdf.alias("s"), "t.id = s.id")
        .whenMatchedUpdate("s.id % 5 = 0", {"s": "upper(s.s)", "n": F.col("s.n") + 1})
        .whenMatchedDelete("s.id % 7 = 0")
        .whenNotMatchedInsertAll()
        .execute()
    )
    for i in range(500, 700):
        if i % 5 == 0:
            model[i]["s"] = f"SP{i}"
            model[i]["n"] = i * 2 + 1
        elif i % 7 == 0:
            del model[i]
    assert m["num_target_rows_updated"] == 40
    assert m["num_target_rows_deleted"] == sum(1 for i in range(500, 700) if i % 7 == 0 and i % 5)
    check("spark merge")

    # 4. Delta Spark's own MERGE on top of our DVs
    spark.range(2500, 2600).selectExpr("id", "'ds' AS s").createOrReplaceTempView("ds_src")
    spark.sql(
        f"MERGE INTO delta.`{path}` t USING ds_src s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET t.s = s.s"
    )
    for i in range(2500, 2600):
        model[i]["s"] = "ds"
    table.update_incremental()
    check("Delta Spark merge")

    # 5. rows moving to another partition, and an insert-only MERGE (no DV)
    table.merge(_source([]), "t.id = s.id", "s", "t").when_matched_delete().execute()
    src = [{"id": i, "part": 7, "s": "moved", "n": 0} for i in range(1000, 1010)]
    table.merge(_source(src), "t.id = s.id", "s", "t").when_matched_update_all().execute()
    for r in src:
        model[r["id"]] = dict(r)
    dvs_before = {p: d.cardinality for p, d in table.deletion_vectors().items()}
    src = [{"id": i, "part": 2, "s": "only", "n": 1} for i in range(1000, 1010)]
    src += [{"id": i, "part": 2, "s": "only", "n": 1} for i in range(N + 500, N + 520)]
    m = table.merge(_source(src), "t.id = s.id", "s", "t").when_not_matched_insert_all().execute()
    for r in src[10:]:
        model[r["id"]] = dict(r)
    assert m["num_target_rows_inserted"] == 20
    assert m["num_target_deletion_vectors_added"] == 0
    assert {p: d.cardinality for p, d in table.deletion_vectors().items()} == dvs_before
    check("partition move, insert-only")

    # the history shows our MERGEs with (at least) Delta Spark's metric names
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    ours = [h for h in history if h["operation"] == "MERGE" and "deltadv" in h["engineInfo"]]
    theirs = [h for h in history if h["operation"] == "MERGE" and "deltadv" not in h["engineInfo"]]
    assert len(ours) == 5 and len(theirs) == 1
    for h in ours:
        assert set(theirs[0]["operationMetrics"]) <= set(h["operationMetrics"])
        assert set(theirs[0]["operationParameters"]) <= set(h["operationParameters"])
    assert '"actionType":"delete"' in ours[-2]["operationParameters"]["matchedPredicates"]

    import deltalake

    rows = sorted_rows(pa.table(deltalake.DeltaTable(path).scan().read_all()).to_pylist())
    assert rows == sorted_rows(list(model.values()))


def _state(table: deltadv.DeltaTable) -> dict[int, tuple[Any, Any]]:
    return {r["id"]: (r["s"], r["n"]) for r in table.to_pyarrow_table().to_pylist()}


SRC = pa.table({"id": pa.array([1, 2, 20], pa.int64()), "s": ["a", "b", "c"], "x": [1, 2, 3]})


@pytest.mark.parametrize(
    ("predicate", "clauses", "source", "message"),
    [
        ("t.nope = s.id", [("update_all", None)], SRC, "t.nope, which is not a target column"),
        ("t.id = nope", [("update_all", None)], SRC, "neither a target column"),
        ("t.id = s.id", [("update", {"nope": "1"})], SRC, 'sets column "nope", which is not'),
        ("t.id = s.id", [("update", {"n": "s.s"})], SRC, r"cannot assign s.s \(of type string\)"),
        ("t.id = s.id", [("update", {"id": "NULL"})], SRC, "NOT NULL constraint violated"),
        ("t.id = s.id", [("insert", {"s": "s.s"})], SRC, "NOT NULL constraint violated"),
        ("t.id > s.id", [("update_all", None)], SRC, "needs its condition to equate"),
        ("id = s.id", [("update_all", None)], SRC, "AMBIGUOUS_REFERENCE"),
        ("t.id = s.id", [("insert", {"id": "t.id"})], SRC, "refers to a target column"),
        (
            "t.id = s.id",
            [("update", {"n": "CAST(n / (t.id - 1) AS INT)"})],
            SRC,
            "DIVIDE_BY_ZERO",
        ),
        (
            "t.id = s.id",
            [("update_all", None)],
            pa.table({"id": pa.array([3, 3], pa.int64()), "s": ["x", "y"]}),
            "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE.*t.id = 3",
        ),
        (
            "t.id = s.id",
            [("delete", None), ("update_all", "s.x = 1")],
            SRC,
            "NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION",
        ),
        ("t.id = s.id", [], SRC, "at least one WHEN clause"),
    ],
)
def test_bad_merges_are_clear_errors_and_change_nothing(
    tmp_path: Path,
    predicate: str,
    clauses: list[tuple[str, Any]],
    source: pa.Table,
    message: str,
) -> None:
    table = small_table(tmp_path)
    root = tmp_path / "t"
    before = table_files(root)
    merger = table.merge(source, predicate, "s", "t")
    for action, arg in clauses:
        if action == "update_all":
            merger.when_matched_update_all(arg)
        elif action == "update":
            merger.when_matched_update(arg)
        elif action == "delete":
            merger.when_matched_delete(arg)
        elif action == "insert":
            merger.when_not_matched_insert(arg)
    with pytest.raises(ValueError, match=message):
        merger.execute()
    assert table.version() == 0
    assert deltadv.DeltaTable(str(root)).version() == 0
    assert table_files(root) == before, "files written by a failed MERGE must be removed"


def test_merge_semantics(tmp_path: Path) -> None:
    table = small_table(tmp_path)
    # NULL keys never match; a narrower key type is widened; large strings work
    src = pa.table(
        {
            "id": pa.array([1, None, 30], pa.int32()),
            "s": pa.array(["one", "null", "thirty"], pa.large_string()),
        }
    )
    m = (
        table.merge(src, "t.id = s.id", "s", "t")
        .when_matched_update({"s": "s.s"})
        .when_not_matched_insert({"id": "CASE WHEN s.id IS NULL THEN -1 ELSE s.id END", "s": "s.s"})
        .execute()
    )
    assert m["num_target_rows_updated"] == 1 and m["num_target_rows_inserted"] == 2
    want = {i: (f"v{i}", i) for i in range(10)}
    want[1] = ("one", 1)
    want[-1] = ("null", None)
    want[30] = ("thirty", None)
    assert _state(table) == want

    # several source rows deleting one target row: fine under one unconditional DELETE
    src = pa.table({"id": pa.array([2, 2, 3], pa.int64())})
    m = table.merge(src, "t.id = s.id", "s", "t").when_matched_delete().execute()
    assert m["num_target_rows_deleted"] == 2
    del want[2], want[3]
    assert _state(table) == want

    # a source of many small batches read in chunks (one pass per chunk), with NOT
    # MATCHED BY SOURCE applied once over the whole source
    batches = [
        pa.record_batch({"id": pa.array([i], pa.int64()), "s": [f"c{i}"]}) for i in range(4, 40)
    ]
    reader = pa.RecordBatchReader.from_batches(batches[0].schema, iter(batches))
    m = (
        table.merge(reader, "t.id = s.id", "s", "t", source_chunk_bytes=1)
        .when_matched_update({"s": "s.s"})
        .when_not_matched_insert({"id": "s.id", "s": "s.s"}, "s.id > 35")
        .when_not_matched_by_source_delete()
        .execute()
    )
    assert m["num_source_rows"] == 36
    kept = {i: (f"c{i}", i) for i in range(4, 10)} | {30: ("c30", None)}
    kept |= {i: (f"c{i}", None) for i in range(36, 40)}
    assert _state(table) == kept
    assert m["num_target_rows_not_matched_by_source_deleted"] == 3  # -1, 0, 1

    # duplicate matches across chunks are found too
    batches = [pa.record_batch({"id": pa.array([5], pa.int64())}) for _ in range(2)]
    reader = pa.RecordBatchReader.from_batches(batches[0].schema, iter(batches))
    merger = table.merge(reader, "t.id = s.id", "s", "t", source_chunk_bytes=1)
    with pytest.raises(ValueError, match="MULTIPLE_SOURCE_ROW"):
        merger.when_matched_update({"n": "0"}).execute()
    # a merger runs once; nothing to change commits nothing
    with pytest.raises(RuntimeError, match="already ran"):
        merger.execute()
    v = table.version()
    m = table.merge(SRC, "t.id = s.id AND s.x > 100", "s", "t").when_matched_delete().execute()
    assert m["version"] is None and table.version() == v


def test_merge_sources_polars_pandas(tmp_path: Path) -> None:
    pl = pytest.importorskip("polars")
    pd = pytest.importorskip("pandas")
    table = small_table(tmp_path)
    table.merge(
        pl.DataFrame({"id": [1], "s": ["pl"]}), "t.id = s.id", "s", "t"
    ).when_matched_update({"s": "s.s"}).execute()
    table.merge(
        pd.DataFrame({"id": [2], "s": ["pd"]}), "t.id = s.id", "s", "t"
    ).when_matched_update({"s": "s.s"}).execute()
    got = _state(table)
    assert got[1][0] == "pl" and got[2][0] == "pd"
    with pytest.raises(TypeError, match="must be Arrow data"):
        table.merge([1, 2], "t.id = s.id")


def test_concurrent_merges_on_one_file(tmp_path: Path) -> None:
    """Matched-only MERGEs on the same version: different rows of one file both
    commit (rebased); the same row conflicts and the loser commits nothing."""
    small_table(tmp_path)
    path = str(tmp_path / "t")
    a, b, c = (deltadv.DeltaTable(path) for _ in range(3))

    def upsert(t: deltadv.DeltaTable, i: int, s: str) -> dict[str, Any]:
        src = pa.table({"id": pa.array([i], pa.int64()), "s": [s]})
        return t.merge(src, "t.id = s.id", "s", "t").when_matched_update({"s": "s.s"}).execute()

    upsert(a, 1, "a")
    m = upsert(b, 2, "b")
    assert m["version"] == 2 and m["rebases"] == 1
    before = table_files(tmp_path / "t")
    with pytest.raises(deltadv.CommitConflictError):
        upsert(c, 1, "c")
    assert deltadv.DeltaTable(path).version() == 2
    assert table_files(tmp_path / "t") == before
    got = {i: s for i, (s, _) in _state(deltadv.DeltaTable(path)).items()}
    assert got == {i: {1: "a", 2: "b"}.get(i, f"v{i}") for i in range(10)}


def test_spark_merge_duplicate_match_names_the_row(delta_spark: Any, tmp_path: Path) -> None:
    small_table(tmp_path)
    path = str(tmp_path / "t")
    src = delta_spark.createDataFrame([(4, "x"), (4, "y")], "id long, s string")
    dt = dspark.DeltaTable.forPath(delta_spark, path)
    with pytest.raises(ValueError, match=r"MULTIPLE_SOURCE_ROW.*'id': 4"):
        dt.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdateAll().execute()
    assert deltadv.DeltaTable(path).version() == 0
    # insert-only from Spark writes no DV
    m = (
        dt.alias("t")
        .merge(src.alias("s").limit(1), "t.id = s.id")
        .whenNotMatchedInsert(values={"id": "s.id + 100", "s": "s.s"})
        .execute()
    )
    assert m["num_target_rows_inserted"] == 0 and m["version"] is None
    src2 = delta_spark.createDataFrame([(50, "z")], "id long, s string")
    m = dt.merge(src2, "target.id = 50").whenNotMatchedInsertAll().execute()
    assert m["num_target_rows_inserted"] == 1
    assert m["num_target_deletion_vectors_added"] == 0
    assert not deltadv.DeltaTable(path).deletion_vectors()


@pytest.mark.parametrize("broadcast", [True, False], ids=["broadcast-source", "sort-merge"])
def test_spark_merge_all_clause_kinds(delta_spark: Any, tmp_path: Path, broadcast: bool) -> None:
    """Every kind of clause from Spark, with the source broadcast (the table
    streamed past it) and with broadcasting off (one sort-merge outer join)."""
    spark = delta_spark
    small_table(tmp_path)
    path = str(tmp_path / "t")
    dt = dspark.DeltaTable.forPath(spark, path)
    src = spark.createDataFrame([(i, "m") for i in range(5, 15)], "id long, s string")
    key = "spark.sql.autoBroadcastJoinThreshold"
    old = spark.conf.get(key)
    spark.conf.set(key, "10485760" if broadcast else "-1")
    # The broadcast path needs Spark's size estimate of the source (it once read
    # as None on every source, so that path was never taken).
    assert isinstance(_estimated_bytes(src), int)
    try:
        m = (
            dt.alias("t")
            .merge(src.alias("s"), "t.id = s.id")
            .whenMatchedDelete("s.id = 5")
            .whenMatchedUpdate(set={"s": "s.s", "n": "t.n + 100"})
            .whenNotMatchedInsert("s.id < 12", {"id": "s.id", "s": "upper(s.s)", "n": "0"})
            .execute()
        )
        assert m["num_target_rows_matched_deleted"] == 1
        assert m["num_target_rows_matched_updated"] == 4
        assert m["num_target_rows_inserted"] == 2
        m = (
            dt.alias("t")
            .merge(src.alias("s"), "t.id = s.id")
            .whenMatchedUpdateAll("t.id > 100")
            .whenNotMatchedBySourceDelete("t.id < 2")
            .whenNotMatchedBySourceUpdate(set={"n": "-1"})
            .execute()
        )
        assert m["num_target_rows_not_matched_by_source_deleted"] == 2
        assert m["num_target_rows_not_matched_by_source_updated"] == 3
    finally:
        spark.conf.set(key, old)
    want = {i: ("m", i + 100) for i in range(6, 10)}
    want |= {i: ("M", 0) for i in (10, 11)}
    want |= {i: (f"v{i}", -1) for i in (2, 3, 4)}
    got = {r["id"]: (r["s"], r["n"]) for r in spark.read.format("delta").load(path).collect()}
    assert got == want


def test_merge_schema_evolution(delta_spark: Any, tmp_path: Path) -> None:
    table = small_table(tmp_path)
    path = str(tmp_path / "t")
    src = pa.table(
        {
            "id": pa.array([1, 20], pa.int64()),
            "s": ["one", "twenty"],
            "extra": pa.array([1.5, 2.5], pa.float64()),
        }
    )
    # without schema evolution, a new source column is ignored
    table.merge(src, "t.id = s.id", "s", "t").when_matched_update_all().execute()
    assert table.schema().names == ["id", "s", "n"]
    # with it, the column is added in the MERGE's own commit
    m = (
        table.merge(src, "t.id = s.id", "s", "t", merge_schema=True)
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    assert m["version"] == 2 and table.schema().names == ["id", "s", "n", "extra"]
    want = {i: (f"v{i}", i, None) for i in range(10)}
    want[1] = ("one", 1, 1.5)
    want[20] = ("twenty", None, 2.5)
    rows = delta_spark.read.format("delta").load(path).collect()
    assert {r["id"]: (r["s"], r["n"], r["extra"]) for r in rows} == want
    got = table.to_pyarrow_table().to_pylist()
    assert {r["id"]: (r["s"], r["n"], r["extra"]) for r in got} == want


def test_spark_merge_with_schema_evolution(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    small_table(tmp_path)
    path = str(tmp_path / "t")
    src = spark.createDataFrame(
        [(2, "two", "x"), (30, "thirty", "y")], "id long, s string, tag string"
    )
    dt = dspark.DeltaTable.forPath(spark, path)
    m = (
        dt.alias("t")
        .merge(src.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .withSchemaEvolution()
        .execute()
    )
    assert m["num_target_rows_updated"] == 1 and m["num_target_rows_inserted"] == 1
    df = spark.read.format("delta").load(path)
    assert df.columns == ["id", "s", "n", "tag"]
    got = {r["id"]: (r["s"], r["n"], r["tag"]) for r in df.collect()}
    want = {i: (f"v{i}", i, None) for i in range(10)}
    want[2] = ("two", 2, "x")
    want[30] = ("thirty", None, "y")
    assert got == want
