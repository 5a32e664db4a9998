"""Dropping the deletionVectors feature and symlink manifests, against Delta Spark
4.4: our DROP FEATURE leaves the protocol Delta Spark's own leaves, Delta Spark and a
reader without DV support read the result, time travel before the drop still works;
our manifests list what Delta Spark's GENERATE lists."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import deltalake
import pytest

import deltadv
from tests.python.dml_tables import N, create_table, initial_model, sorted_rows


def delta_rows(spark: Any, path: str, version: int | None = None) -> list[tuple[Any, ...]]:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return sorted_rows([r.asDict() for r in reader.load(path).collect()])


def commit_infos(path: str) -> list[dict[str, Any]]:
    """commitInfo of every commit file, oldest first."""
    out = []
    for f in sorted(Path(path, "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            action = json.loads(line)
            if "commitInfo" in action:
                out.append(action["commitInfo"])
    return out


def test_drop_feature_matches_delta_spark(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    model = initial_model()
    for path in (ours, theirs):
        create_table(spark, path, mapped=False)
        deltadv.DeltaTable(path).delete("id < 100")
    model = {i: r for i, r in model.items() if i >= 100}
    before_drop = deltadv.DeltaTable(ours).version()
    assert deltadv.DeltaTable(ours).deletion_vectors()

    report = deltadv.DeltaTable(ours).disable_deletion_vectors()
    spark.sql(f"ALTER TABLE delta.`{theirs}` DROP FEATURE deletionVectors")

    want = sorted_rows(list(model.values()))
    ours_t, theirs_t = deltadv.DeltaTable(ours), deltadv.DeltaTable(theirs)
    # the same protocol as Delta Spark's own drop, and no DV left
    assert ours_t.protocol() == theirs_t.protocol()
    assert "deletionVectors" not in json.dumps(ours_t.protocol())
    assert not ours_t.deletion_vectors()
    assert ours_t.metadata()["configuration"].get("delta.enableDeletionVectors") is None
    # the operations Delta Spark records for its drop, in the same order
    ops = [c["operation"] for c in commit_infos(ours)][before_drop + 1 :]
    their_ops = [c["operation"] for c in commit_infos(theirs)][before_drop + 1 :]
    assert ops == their_ops, (ops, their_ops)
    assert report["version"] == ours_t.version()
    # Delta Spark reads it, a reader without DV support reads it, time travel works
    assert delta_rows(spark, ours) == want
    plain = deltalake.DeltaTable(ours).to_pyarrow_table().to_pylist()
    assert sorted_rows(plain) == want
    assert len(delta_rows(spark, ours, before_drop)) == N - 100
    assert sorted_rows(ours_t.to_pyarrow_table().to_pylist()) == want
    # the table is writable by Delta Spark afterwards (and writes no DV)
    spark.sql(f"DELETE FROM delta.`{ours}` WHERE id = 500")
    assert not deltadv.DeltaTable(ours).deletion_vectors()
    assert len(delta_rows(spark, ours)) == N - 101
    # dropping again: nothing to drop
    with pytest.raises(ValueError, match="DROP_FEATURE_NOT_PRESENT"):
        deltadv.DeltaTable(ours).disable_deletion_vectors()


def test_manifest_matches_delta_spark(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    path = str(tmp_path / "t")
    create_table(spark, path, mapped=False)
    table = deltadv.DeltaTable(path)
    table.delete("id < 10")
    version = table.version()
    with pytest.raises(deltadv.DeltaProtocolError, match="DELETION_VECTORS"):
        table.generate_symlink_manifest()
    assert table.version() == version
    assert not Path(path, "_symlink_format_manifest").exists()
    table.purge()
    ours = table.generate_symlink_manifest()
    root = Path(path, "_symlink_format_manifest")
    got = {str(p.relative_to(root)): sorted(p.read_text().split()) for p in root.rglob("manifest")}
    assert sorted(got) == sorted(ours["manifests"][i].split("/", 1)[1] for i in range(3))
    # Delta Spark's GENERATE over the same version writes the same manifests
    shutil.rmtree(root)
    spark.sql(f"GENERATE symlink_format_manifest FOR TABLE delta.`{path}`")
    theirs = {
        str(p.relative_to(root)): sorted(p.read_text().split()) for p in root.rglob("manifest")
    }
    assert got == theirs
    assert sum(len(v) for v in got.values()) == len(table.files())
