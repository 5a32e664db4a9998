"""Liquid clustering (CLUSTER BY), checked against Delta Spark 4.4: deltadv's
DELETE, UPDATE, MERGE and appends on clustered tables Delta Spark created, tables
deltadv creates with ``cluster_by`` (compared with Delta Spark's CREATE ... CLUSTER
BY log), and deltadv's clustering OPTIMIZE (rows kept, DVs purged, tight file
ranges, incremental). Expected rows come from a model of the statements; file
ranges are read from the log's stats."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltadv
from deltadv.write import write_table

Row = tuple[int, int, int, str]


def _spark_rows(spark: Any, path: str) -> list[Row]:
    df = spark.read.format("delta").load(path)
    return sorted((r.id, r.k, r.g, r.s) for r in df.collect())


def _commits(path: str) -> list[list[dict[str, Any]]]:
    log = Path(path) / "_delta_log"
    return [
        [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        for f in sorted(log.glob("*.json"))
    ]


def _live_adds(path: str) -> dict[str, dict[str, Any]]:
    """Live add actions by path, replayed from the JSON log (no checkpoints here)."""
    live: dict[str, dict[str, Any]] = {}
    for commit in _commits(path):
        for action in commit:
            if "add" in action:
                live[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    return live


def _mean_box(path: str, columns: list[str], domain: dict[str, tuple[int, int]]) -> float:
    """Mean over live files of the volume of their min/max box on `columns`,
    each side normalised by the column's whole range: ~1 for files that each
    span the whole table, small for tight disjoint files."""
    boxes = []
    for add in _live_adds(path).values():
        stats = json.loads(add["stats"])
        volume = 1.0
        for c in columns:
            lo, hi = domain[c]
            volume *= (stats["maxValues"][c] - stats["minValues"][c]) / (hi - lo)
        boxes.append(volume)
    return sum(boxes) / len(boxes)


def _clustering_domains(path: str) -> list[tuple[int, dict[str, Any]]]:
    return [
        (v, json.loads(a["domainMetadata"]["configuration"]))
        for v, commit in enumerate(_commits(path))
        for a in commit
        if "domainMetadata" in a and a["domainMetadata"]["domain"] == "delta.clustering"
    ]


def _data(rows: list[Row]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "k": pa.array([r[1] for r in rows], pa.int64()),
            "g": pa.array([r[2] for r in rows], pa.int64()),
            "s": pa.array([r[3] for r in rows], pa.string()),
        }
    )


def _random_rows(start: int, n: int, seed: int) -> list[Row]:
    rnd = random.Random(seed)
    return [(i, rnd.randrange(1000), rnd.randrange(1000), f"s{i}") for i in range(start, start + n)]


def test_dml_on_a_delta_spark_clustered_table(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "t")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, k BIGINT, g BIGINT, s STRING) USING delta "
        "CLUSTER BY (k, g) TBLPROPERTIES ('delta.enableDeletionVectors'='true')"
    )
    first = _random_rows(0, 300, 1)
    spark.createDataFrame(first, "id BIGINT, k BIGINT, g BIGINT, s STRING").write.format(
        "delta"
    ).mode("append").save(path)
    spark.sql(f"OPTIMIZE delta.`{path}`")  # some files clustered by Delta Spark
    model = {r[0]: r for r in first}
    table = deltadv.DeltaTable(path)

    def check(step: str) -> None:
        assert _spark_rows(spark, path) == sorted(model.values()), step

    more = _random_rows(300, 100, 2)
    write_table(path, _data(more), mode="append")
    model.update({r[0]: r for r in more})
    check("append")
    table.update_incremental()
    table.delete("k < 100")
    model = {i: r for i, r in model.items() if not r[1] < 100}
    check("delete")
    table.update({"s": "'upd'"}, "g >= 900")
    model = {i: (r if r[2] < 900 else (r[0], r[1], r[2], "upd")) for i, r in model.items()}
    check("update")
    src = [(5, 1, 1, "m5"), (10_000, 2, 2, "new")]
    (
        table.merge(_data(src), "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    for r in src:
        model[r[0]] = r
    check("merge")

    # the domain stays as Delta Spark wrote it, once, in version 0
    assert _clustering_domains(path) == [
        (0, {"clusteringColumns": [["k"], ["g"]], "domainName": "delta.clustering"})
    ]
    # files of deltadv's plain writes are unmarked, as Delta Spark's appends
    versions = _commits(path)
    for commit in versions[3:]:
        for a in commit:
            if "add" in a and a["add"]["dataChange"] and "deletionVector" not in a["add"]:
                assert "clusteringProvider" not in a["add"], a
    # every version reads back in Delta Spark
    for v in range(len(versions)):
        spark.read.format("delta").option("versionAsOf", v).load(path).count()
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
    assert detail.clusteringColumns == ["k", "g"]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert len(history) == len(versions)
    # Delta Spark's own OPTIMIZE and DML on top
    spark.sql(f"OPTIMIZE delta.`{path}`")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 7")
    model.pop(7, None)
    check("Delta Spark on top")


def test_cluster_by_on_create_as_delta_spark(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    ours = str(tmp_path / "ours")
    theirs = str(tmp_path / "theirs")
    spark.sql(
        f"CREATE TABLE delta.`{theirs}` (id BIGINT, k BIGINT, g BIGINT, s STRING) USING delta "
        "CLUSTER BY (k, g) TBLPROPERTIES ('delta.enableDeletionVectors'='true')"
    )
    rows = _random_rows(0, 200, 3)
    write_table(ours, _data(rows), cluster_by=["k", "g"])
    (ours_v0,) = _commits(ours)[:1]
    theirs_v0 = _commits(theirs)[0]

    def domain(commit: list[dict[str, Any]]) -> dict[str, Any]:
        (d,) = [a["domainMetadata"] for a in commit if "domainMetadata" in a]
        return {**d, "configuration": json.loads(d["configuration"])}

    def protocol(commit: list[dict[str, Any]]) -> dict[str, Any]:
        (p,) = [a["protocol"] for a in commit if "protocol" in a]
        return {**p, "writerFeatures": sorted(p["writerFeatures"])}

    assert domain(ours_v0) == domain(theirs_v0)
    assert protocol(ours_v0) == protocol(theirs_v0)
    (info,) = [a["commitInfo"] for a in ours_v0 if "commitInfo" in a]
    assert info["operationParameters"]["clusterBy"] == '["k","g"]'
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{ours}`").collect()[0]
    assert detail.clusteringColumns == ["k", "g"]
    assert _spark_rows(spark, ours) == sorted(rows)
    # Delta Spark writes and clusters it
    spark.sql(f"INSERT INTO delta.`{ours}` VALUES (1000, 1, 2, 'x')")
    spark.sql(f"OPTIMIZE delta.`{ours}`")
    assert _spark_rows(spark, ours) == sorted([*rows, (1000, 1, 2, "x")])

    # refused as Delta Spark refuses
    with pytest.raises(ValueError, match="cannot both"):
        write_table(str(tmp_path / "p"), _data(rows), partition_by=["g"], cluster_by=["k"])
    with pytest.raises(ValueError, match="not in the schema"):
        write_table(str(tmp_path / "q"), _data(rows), cluster_by=["nope"])
    assert not (tmp_path / "p" / "_delta_log").exists()
    with pytest.raises(ValueError, match="clustering columns"):
        write_table(ours, _data(rows), mode="append", cluster_by=["g"])


@pytest.mark.parametrize("creator", ["deltadv", "delta_spark"])
def test_optimize_clusters_purges_and_is_incremental(
    delta_spark: Any, tmp_path: Path, creator: str
) -> None:
    spark = delta_spark
    path = str(tmp_path / "t")
    batches = [_random_rows(i * 1000, 1000, 10 + i) for i in range(8)]
    if creator == "deltadv":
        write_table(path, _data(batches[0]), cluster_by=["k", "g"])
    else:
        spark.sql(
            f"CREATE TABLE delta.`{path}` (id BIGINT, k BIGINT, g BIGINT, s STRING) "
            "USING delta CLUSTER BY (k, g) "
            "TBLPROPERTIES ('delta.enableDeletionVectors'='true')"
        )
        write_table(path, _data(batches[0]), mode="append")
    for b in batches[1:]:
        write_table(path, _data(b), mode="append")
    model = {r[0]: r for b in batches for r in b}
    table = deltadv.DeltaTable(path)
    doomed = [i for i in model if i % 10 == 3]
    table.delete(f"id IN ({', '.join(map(str, doomed))})")  # 10% deleted, with DVs
    model = {i: r for i, r in model.items() if i % 10 != 3}
    assert any("deletionVector" in a for a in _live_adds(path).values())
    domain = {"k": (0, 999), "g": (0, 999)}
    before = _mean_box(path, ["k", "g"], domain)

    table.update_incremental()
    metrics = table.optimize(target_size=24 * 1024)
    assert metrics["num_removed_files"] == 8
    assert metrics["num_deletion_vectors_removed"] == 8
    live = _live_adds(path)
    assert len(live) >= 4, len(live)
    assert all("deletionVector" not in a for a in live.values())
    assert all(a["clusteringProvider"] == "liquid" for a in live.values())
    assert len({a["tags"]["ZCUBE_ID"] for a in live.values()}) == 1
    after = _mean_box(path, ["k", "g"], domain)
    assert after < 0.3 * before, (before, after)
    (info,) = [a["commitInfo"] for a in _commits(path)[-1] if "commitInfo" in a]
    assert info["operation"] == "OPTIMIZE"
    assert info["operationParameters"] == {
        "predicate": "[]",
        "zOrderBy": "[]",
        "clusterBy": '["k","g"]',
        "auto": False,
        "isFull": False,
    }
    assert _spark_rows(spark, path) == sorted(model.values())

    # incremental: nothing new, nothing rewritten
    version = table.version()
    table.update_incremental()
    assert table.optimize(target_size=24 * 1024)["version"] is None
    table.update_incremental()
    assert table.version() == version
    # new files: reclustered together with the partial ZCube
    write_table(path, _data(_random_rows(50_000, 500, 99)), mode="append")
    table.update_incremental()
    metrics = table.optimize(target_size=24 * 1024)
    assert metrics["num_removed_files"] == len(live) + 1
    model.update({r[0]: r for r in _random_rows(50_000, 500, 99)})
    assert _spark_rows(spark, path) == sorted(model.values())
    spark.sql(f"OPTIMIZE delta.`{path}`")
    spark.sql(f"UPDATE delta.`{path}` SET s = 'z' WHERE id = 1")
    model[1] = (*model[1][:3], "z")
    assert _spark_rows(spark, path) == sorted(model.values())


def _last_commit_info(path: str) -> dict[str, Any]:
    (info,) = [a["commitInfo"] for a in _commits(path)[-1] if "commitInfo" in a]
    return info


def _removed_paths(path: str) -> set[str]:
    return {a["remove"]["path"] for a in _commits(path)[-1] if "remove" in a}


def test_optimize_full_reclusters_after_the_columns_changed(
    delta_spark: Any, tmp_path: Path
) -> None:
    """Delta Spark clusters by k, then ALTER ... CLUSTER BY (g) and one more
    append; on two copies, deltadv's OPTIMIZE and OPTIMIZE FULL against Delta
    Spark's: the same files rewritten (plain: only the new append; FULL: every
    file), the same operationParameters, the same rows, and every file then
    clustered by g."""
    import shutil

    spark = delta_spark
    base = str(tmp_path / "base")
    spark.sql(
        f"CREATE TABLE delta.`{base}` (id BIGINT, k BIGINT, g BIGINT, s STRING) USING delta "
        "CLUSTER BY (k)"
    )
    batches = [_random_rows(i * 500, 500, 40 + i) for i in range(4)]
    for b in batches[:3]:
        write_table(base, _data(b), mode="append")
    spark.sql(f"OPTIMIZE delta.`{base}`")  # one ZCube clustered by k
    spark.sql(f"ALTER TABLE delta.`{base}` CLUSTER BY (g)")
    write_table(base, _data(batches[3]), mode="append")
    model = sorted(r for b in batches for r in b)
    by_k = {p for p, a in _live_adds(base).items() if "clusteringProvider" in a}
    unclustered = set(_live_adds(base)) - by_k
    assert by_k and len(unclustered) == 1
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    shutil.copytree(base, ours)
    shutil.copytree(base, theirs)
    table = deltadv.DeltaTable(ours)

    # plain OPTIMIZE: the files clustered by k are left alone, in both
    table.optimize()
    spark.sql(f"OPTIMIZE delta.`{theirs}`")
    assert _removed_paths(ours) == _removed_paths(theirs) == unclustered
    for path in (ours, theirs):
        assert by_k <= set(_live_adds(path))
    assert (
        _last_commit_info(ours)["operationParameters"]
        == (_last_commit_info(theirs)["operationParameters"])
    )

    # FULL: every file reclustered by g
    table.update_incremental()
    before = {path: set(_live_adds(path)) for path in (ours, theirs)}
    metrics = table.optimize(full=True)
    spark.sql(f"OPTIMIZE delta.`{theirs}` FULL")
    for path in (ours, theirs):
        assert _removed_paths(path) == before[path], path
        live = _live_adds(path).values()
        assert {a["tags"]["ZCUBE_ZORDER_BY"] for a in live} == {'["g"]'}, path
        assert len({a["tags"]["ZCUBE_ID"] for a in live}) == 1, path
        assert all(a["clusteringProvider"] == "liquid" for a in live), path
        assert _spark_rows(spark, path) == model, path
    assert metrics["num_removed_files"] == len(before[ours])
    params = _last_commit_info(ours)["operationParameters"]
    assert params == _last_commit_info(theirs)["operationParameters"]
    assert params["isFull"] is True and params["clusterBy"] == '["g"]'

    # once clustered by the current columns, FULL is a plain OPTIMIZE: nothing to do
    table.update_incremental()
    version = table.version()
    assert table.optimize(full=True)["version"] is None
    spark.sql(f"OPTIMIZE delta.`{theirs}` FULL")
    for path in (ours, theirs):
        assert len(_commits(path)) == version + 1, path
    # Delta Spark writes on top of ours
    spark.sql(f"DELETE FROM delta.`{ours}` WHERE id < 10")
    assert _spark_rows(spark, ours) == [r for r in model if r[0] >= 10]


def test_optimize_full_is_refused_on_a_table_that_is_not_clustered(
    delta_spark: Any, tmp_path: Path
) -> None:
    path = str(tmp_path / "t")
    write_table(path, _data(_random_rows(0, 50, 5)))
    with pytest.raises(Exception, match="DELTA_OPTIMIZE_FULL_NOT_SUPPORTED"):
        delta_spark.sql(f"OPTIMIZE delta.`{path}` FULL")
    with pytest.raises(ValueError, match="DELTA_OPTIMIZE_FULL_NOT_SUPPORTED"):
        deltadv.DeltaTable(path).optimize(full=True)
    assert len(_commits(path)) == 1


def test_clustering_holds_at_most_its_memory_budget(delta_spark: Any, tmp_path: Path) -> None:
    """16 appends of 1,000 rows: with a memory budget of about two files'
    decoded rows, OPTIMIZE clusters the run in groups, one after the other,
    each written as its own file (all one ZCube) of at most the budget's rows
    plus one batch; with the default budget one group holds every row. Delta
    Spark reads both, row for row."""
    import shutil

    spark = delta_spark
    small, whole = str(tmp_path / "small"), str(tmp_path / "whole")
    batches = [_random_rows(i * 1000, 1000, 60 + i) for i in range(16)]
    write_table(small, _data(batches[0]), cluster_by=["k", "g"])
    for b in batches[1:]:
        write_table(small, _data(b), mode="append")
    shutil.copytree(small, whole)
    model = sorted(r for b in batches for r in b)
    one_file = _data(batches[0]).nbytes
    deltadv.DeltaTable(small).optimize(memory_budget=2 * one_file)
    deltadv.DeltaTable(whole).optimize()

    def rows_per_file(path: str) -> list[int]:
        live = _live_adds(path).values()
        assert len({a["tags"]["ZCUBE_ID"] for a in live}) == 1
        return sorted(json.loads(a["stats"])["numRecords"] for a in live)

    grouped = rows_per_file(small)
    # a group closes once its decoded rows reach the budget (~2 files): at
    # most the budget plus one batch (one file here)
    assert len(grouped) >= 5 and max(grouped) <= 3000, grouped
    assert rows_per_file(whole) == [16_000]
    for path in (small, whole):
        assert _spark_rows(spark, path) == model, path
    # one ZCube: incremental OPTIMIZE leaves it alone
    table = deltadv.DeltaTable(small)
    assert table.optimize(memory_budget=2 * one_file)["version"] is None
    with pytest.raises(ValueError, match="memory_budget"):
        table.optimize(memory_budget=0)
