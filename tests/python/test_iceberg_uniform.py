"""Iceberg v3 metadata of deltadv tables with deletion vectors (UniForm), read by
an independent Iceberg reader, pyiceberg 0.12 (it reads whole Puffin files and
applies each blob to the data file its ``referenced-data-file`` names).

After each deltadv write, ``sync_iceberg()`` mirrors the latest version; then every
Iceberg snapshot so far (time travel by snapshot id) must read exactly the rows of
the Delta version its summary names (``delta-version``), as deltadv's own time
travel reads them."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable

import deltadv
from deltadv.write import write_table

CONFIG = {"delta.columnMapping.mode": "name"}
UTC = dt.timezone.utc


def _latest(path: str) -> StaticTable:
    hint = (Path(path) / "metadata" / "version-hint.text").read_text().strip()
    return StaticTable.from_metadata(str(Path(path) / "metadata" / f"v{hint}.metadata.json"))


def _key(row: dict[str, Any]) -> tuple[str, ...]:
    return tuple(f"{k}={row[k]!r}" for k in sorted(row))


def _norm(v: Any) -> Any:
    return v.astimezone(UTC) if isinstance(v, dt.datetime) and v.tzinfo else v


def _sorted(table: pa.Table) -> list[dict[str, Any]]:
    rows = [{k: _norm(v) for k, v in r.items()} for r in table.to_pylist()]
    return sorted(rows, key=_key)


def _duckdb() -> Any:
    """DuckDB 1.4.4 with the iceberg and avro extensions of the ``duckdb-ext-*``
    wheels (their ``duckdb_ext/extensions`` folder is DuckDB's extension_directory
    layout): nothing is downloaded."""
    import importlib.util

    duckdb = pytest.importorskip("duckdb")
    spec = importlib.util.find_spec("duckdb_ext")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("duckdb-ext-iceberg is not installed")
    ext_dir = Path(next(iter(spec.submodule_search_locations))) / "extensions"
    con = duckdb.connect()
    con.execute(f"SET extension_directory = '{ext_dir}'")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET TimeZone = 'UTC'")
    con.execute("LOAD avro")
    con.execute("LOAD iceberg")
    return con


def _delta_rows(path: str, version: int, columns: list[str]) -> list[dict[str, Any]]:
    return _sorted(deltadv.DeltaTable(path, version=version).to_pyarrow_table().select(columns))


def _check_all_snapshots(path: str) -> int:
    """Every Iceberg snapshot reads the rows of its Delta version, in pyiceberg
    and in DuckDB; returns how many snapshots were checked."""
    table = _latest(path)
    columns = [f.name for f in table.schema().fields]
    snapshots = table.metadata.snapshots
    con = _duckdb()  # in the test extra: a missing one skips the test, never passes it
    select = ", ".join(f'"{c}"' for c in columns)
    for snap in snapshots:
        version = int(snap.summary["delta-version"])
        want = _delta_rows(path, version, columns)
        got = _sorted(table.scan(snapshot_id=snap.snapshot_id).to_arrow().select(columns))
        assert got == want, f"pyiceberg: snapshot {snap.snapshot_id} (Delta version {version})"
        duck = con.execute(
            f"SELECT {select} FROM iceberg_scan(?, snapshot_from_id => ?)",
            [table.metadata_location, snap.snapshot_id],
        ).fetch_arrow_table()
        where = f"snapshot {snap.snapshot_id} (Delta version {version})"
        assert _sorted(duck) == want, f"DuckDB: {where}"
    return len(snapshots)


def _sync(path: str) -> dict[str, Any]:
    report = deltadv.DeltaTable(path).sync_iceberg()
    assert report["delta_version"] == deltadv.DeltaTable(path).version()
    return report


def _data(ids: range, part: str | None = None) -> pa.Table:
    base = dt.datetime(2024, 1, 1, tzinfo=UTC)
    cols: dict[str, Any] = {
        "id": pa.array(list(ids), pa.int64()),
        "s": pa.array([f"s{i}" for i in ids], pa.string()),
        # sub-millisecond parts: Delta's stats keep milliseconds only
        "ts": pa.array(
            [base + dt.timedelta(seconds=i, microseconds=999) for i in ids],
            pa.timestamp("us", tz="UTC"),
        ),
    }
    if part is not None:
        cols["p"] = pa.array([part] * len(ids), pa.string())
    return pa.table(cols)


def test_unpartitioned_appends_and_deletes(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_table(path, _data(range(40)), configuration=CONFIG, rows_per_file=10)
    first = _sync(path)
    assert first["previous_delta_version"] is None
    assert first["added_data_files"] == 4 and first["added_dvs"] == 0
    meta = json.loads((tmp_path / "t" / "metadata" / "v1.metadata.json").read_text())
    assert meta["format-version"] == 3
    assert meta["properties"]["delta-version"] == "0"
    assert meta["next-row-id"] >= 40
    assert [f["id"] for f in meta["schemas"][0]["fields"]] == [1, 2, 3]

    table = deltadv.DeltaTable(path)
    table.delete("id in (0, 7, 14, 21, 28, 35)")  # every file: four DVs in one DV file
    dvs = table.deletion_vectors()
    assert len(dvs) == 4
    second = _sync(path)
    assert second["added_dvs"] == 4 and second["added_data_files"] == 0
    assert second["manifests_reused"] == 1  # the data manifest
    puffins = [f for f in second["files_written"] if f.endswith(".puffin")]
    assert len(puffins) == 1
    assert (tmp_path / "t" / puffins[0]).read_bytes()[:4] == b"PFA1"

    write_table(path, _data(range(100, 110)), mode="append")
    third = _sync(path)
    assert third["added_data_files"] == 1 and third["added_dvs"] == 0
    assert third["manifests_reused"] == 2 and third["manifests_written"] == 1

    # removes the first file (every row deleted), extends the second's DV, adds one
    deltadv.DeltaTable(path).delete("id < 15 or id = 105")
    fourth = _sync(path)
    # the Puffin file of the second sync held the changed files' blobs: the other
    # two move with them, so no live Puffin file keeps a stale blob
    assert fourth["removed_data_files"] == 1
    assert fourth["removed_dvs"] == 4 and fourth["added_dvs"] == 4
    assert _check_all_snapshots(path) == 4
    # nothing new: nothing written
    again = _sync(path)
    assert again["snapshot_id"] is None and again["files_written"] == []


def test_partitioned_with_skipped_versions_and_restore(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_table(
        path,
        pa.concat_tables([_data(range(0, 20), "a"), _data(range(20, 30), "b")]),
        configuration=CONFIG,
        partition_by=["p"],
        rows_per_file=5,
    )
    _sync(path)
    table = deltadv.DeltaTable(path)
    table.delete("id in (1, 2, 21)")
    table.delete("id in (3, 22)")
    write_table(path, _data(range(30, 35), "c"), mode="append")
    report = _sync(path)  # three Delta versions in one sync
    assert report["previous_delta_version"] == 0 and report["delta_version"] == 3
    deltadv.DeltaTable(path).restore(1)  # DVs shrink back to version 1's
    _sync(path)
    deltadv.DeltaTable(path).delete("p = 'b' and id > 25")
    _sync(path)
    assert _check_all_snapshots(path) == 4
    # partition pruning by the identity spec
    latest = _latest(path)
    got = latest.scan(row_filter="p == 'b'").to_arrow()
    assert sorted(got["id"].to_pylist()) == [20, 22, 23, 24, 25]  # 22 is back after the restore


def test_timestamp_bounds_cover_truncated_stats(tmp_path: Path) -> None:
    """Delta's stats hold milliseconds; the Iceberg upper bound is widened so a
    filter on the exact maximum does not prune the file holding it."""
    path = str(tmp_path / "t")
    write_table(path, _data(range(10)), configuration=CONFIG, rows_per_file=5)
    _sync(path)
    latest = _latest(path)
    exact = dt.datetime(2024, 1, 1, 0, 0, 4, 999, tzinfo=UTC)
    got = latest.scan(row_filter=f"ts == '{exact.isoformat()}'").to_arrow()
    assert got["id"].to_pylist() == [4]
    got = latest.scan(row_filter="id >= 7").to_arrow()
    assert sorted(got["id"].to_pylist()) == [7, 8, 9]


def test_refuses_tables_without_column_mapping(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_table(path, _data(range(3)))
    with pytest.raises(deltadv.DeltaProtocolError, match="column mapping"):
        deltadv.DeltaTable(path).sync_iceberg()
    assert not (tmp_path / "t" / "metadata").exists()


def _typed(ids: range, day: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "n": pa.array([i % 5 for i in ids], pa.int32()),
            "x": pa.array([i / 4 for i in ids], pa.float64()),
            "b": pa.array([i % 2 == 0 for i in ids], pa.bool_()),
            "d": pa.array([dt.date(2024, 1, day)] * len(ids), pa.date32()),
        }
    )


def _base_row_ids(path: str) -> dict[str, int]:
    """``baseRowId`` of every add in the log, by path."""
    out = {}
    for commit in sorted((Path(path) / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            add = json.loads(line).get("add")
            if add and "baseRowId" in add:
                out[add["path"]] = add["baseRowId"]
    return out


def test_row_tracking_dml_and_maintenance(tmp_path: Path) -> None:
    """UPDATE, MERGE, PURGE and OPTIMIZE on a row-tracking table partitioned by a
    date: each mirrored, every snapshot read as its Delta version; data files carry
    Delta's baseRowId as first_row_id."""
    path = str(tmp_path / "t")
    config = {**CONFIG, "delta.enableRowTracking": "true"}
    data = pa.concat_tables([_typed(range(0, 12), 1), _typed(range(12, 20), 2)])
    write_table(path, data, configuration=config, partition_by=["d"], rows_per_file=4)
    _sync(path)
    table = deltadv.DeltaTable(path)
    table.update({"n": "n + 100"}, "id in (1, 13)")
    _sync(path)
    src = pa.table({"id": pa.array([2, 14, 50], pa.int64()), "x": pa.array([9.5, 9.5, 9.5])})
    (
        deltadv.DeltaTable(path)
        .merge(src, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update({"x": "s.x"})
        .when_not_matched_insert(
            {"id": "s.id", "n": "0", "x": "s.x", "b": "true", "d": "DATE'2024-01-03'"}
        )
        .execute()
    )
    _sync(path)
    deltadv.DeltaTable(path).delete("id in (5, 6)")
    _sync(path)
    deltadv.DeltaTable(path).purge()
    _sync(path)
    deltadv.DeltaTable(path).optimize()
    report = _sync(path)
    assert report["added_dvs"] == 0
    assert _check_all_snapshots(path) == 6

    latest = _latest(path)
    meta = json.loads(Path(latest.metadata_location.removeprefix("file://")).read_text())
    assert meta["partition-specs"][-1]["fields"][0]["transform"] == "identity"
    bases = _base_row_ids(path)
    snapshot = latest.current_snapshot()
    assert snapshot is not None
    # DuckDB's avro reader reads the manifests (pyiceberg's DataFile has no
    # first_row_id attribute)
    con = _duckdb()
    firsts = {}
    for manifest in snapshot.manifests(latest.io):
        rows = con.execute(
            "SELECT data_file.file_path, data_file.first_row_id, data_file.content "
            "FROM read_avro(?) WHERE status <> 2",
            [manifest.manifest_path.removeprefix("file://")],
        ).fetchall()
        firsts.update({p: first for p, first, content in rows if content == 0})
    assert firsts
    for location, first in firsts.items():
        rel = location.split("/t/", 1)[1]
        assert first == bases[rel], rel
    assert meta["next-row-id"] > max(bases.values())


@pytest.mark.parametrize(
    ("seed", "uniform"), [(1, False), (2, False), (3, False), (4, True), (5, True)]
)
def test_random_write_sequences(tmp_path: Path, seed: int, uniform: bool) -> None:
    """Random appends, DELETEs (several DVs per DV file), UPDATEs, RESTOREs, PURGE
    and OPTIMIZE, partitioned or not, synced after a random subset of the versions
    (``uniform``: every commit mirrored by itself, the syncs find nothing to do):
    every Iceberg snapshot reads its Delta version, in pyiceberg and DuckDB."""
    import random

    rng = random.Random(seed)
    config = {**CONFIG, **UNIFORM} if uniform else CONFIG
    path = str(tmp_path / "t")
    partitioned = seed % 2 == 1
    next_id = 30

    def batch(start: int, n: int) -> pa.Table:
        parts = [rng.choice("abc") for _ in range(n)] if partitioned else None
        t = _data(range(start, start + n))
        return t.append_column("p", pa.array(parts, pa.string())) if parts else t

    write_table(
        path,
        batch(0, 30),
        configuration=config,
        partition_by=["p"] if partitioned else None,
        rows_per_file=6,
    )
    _sync(path)
    for _ in range(8):
        table = deltadv.DeltaTable(path)
        op = rng.choice(["append", "delete", "delete", "update", "restore", "purge", "optimize"])
        if op == "append":
            write_table(path, batch(next_id, rng.randint(1, 8)), mode="append", rows_per_file=4)
            next_id += 8
        elif op == "delete":
            ids = sorted(rng.sample(range(next_id), 5))
            table.delete(f"id in ({', '.join(map(str, ids))})")
        elif op == "update":
            ids = sorted(rng.sample(range(next_id), 3))
            table.update({"s": "'u'"}, f"id in ({', '.join(map(str, ids))})")
        elif op == "restore" and table.version() > 1:
            table.restore(rng.randint(0, table.version() - 1))
        elif op == "purge":
            table.purge()
        elif op == "optimize":
            table.optimize()
        if rng.random() < 0.6:
            report = _sync(path)
            assert not uniform or report["snapshot_id"] is None
    _sync(path)
    checked = _check_all_snapshots(path)
    assert checked == deltadv.DeltaTable(path).version() + 1 if uniform else checked >= 2


def test_cli_sync_iceberg(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from deltadv.cli import main

    path = str(tmp_path / "t")
    write_table(path, _data(range(5)), configuration=CONFIG)
    assert main(["sync-iceberg", path, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["delta_version"] == 0 and out["metadata_version"] == 1
    assert "metadata/v1.metadata.json" in out["files_written"]
    assert main(["sync-iceberg", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["snapshot_id"] is None
    assert _check_all_snapshots(path) == 1


UNIFORM = {
    "delta.enableIcebergCompatV3": "true",
    "delta.universalFormat.enabledFormats": "iceberg",
}


def _mirrored_version(path: str) -> int:
    return int(_latest(path).metadata.properties["delta-version"])


def test_uniform_tables_mirror_every_commit(tmp_path: Path) -> None:
    """With ``delta.universalFormat.enabledFormats=iceberg`` every deltadv commit
    (create, append, DELETE, UPDATE, MERGE, PURGE, OPTIMIZE, RESTORE) leaves an
    Iceberg snapshot of its version, with no ``sync_iceberg`` call; every snapshot
    reads its Delta version."""
    path = str(tmp_path / "t")
    write_table(
        path, _data(range(30), "a"), configuration=UNIFORM, partition_by=["p"], rows_per_file=6
    )
    assert _mirrored_version(path) == 0
    write_table(path, _data(range(30, 40), "b"), mode="append")
    assert _mirrored_version(path) == 1
    table = deltadv.DeltaTable(path)
    results = [table.delete("id in (1, 8, 33)")]
    results.append(table.update({"s": "'u'"}, "id in (2, 34)"))
    src = pa.table({"id": pa.array([3, 90], pa.int64()), "s": pa.array(["m", "n"])})
    results.append(
        table.merge(src, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update({"s": "s.s"})
        .when_not_matched_insert(
            {"id": "s.id", "s": "s.s", "ts": "TIMESTAMP'2024-01-01 00:00:00'", "p": "'c'"}
        )
        .execute()
    )
    results.append(table.purge())
    results.append(table.delete("id = 4"))
    results.append(table.optimize())
    results.append(table.restore(3))
    for r in results:
        assert r["iceberg_error"] is None, r
    latest = deltadv.DeltaTable(path).version()
    assert latest == 8
    assert _mirrored_version(path) == latest
    # one snapshot per Delta version, in order, each read as its version
    table_meta = _latest(path).metadata
    assert [int(s.summary["delta-version"]) for s in table_meta.snapshots] == list(range(9))
    assert _check_all_snapshots(path) == 9
    assert _sync(path)["snapshot_id"] is None  # already up to date


def test_a_failed_mirror_never_fails_the_commit(tmp_path: Path) -> None:
    """A mirror that fails leaves the Delta commit standing, says why in the
    metrics, and the next commit catches up from the last mirrored version."""
    from deltadv._core import _set_fault_points

    path = str(tmp_path / "t")
    write_table(path, _data(range(20)), configuration=UNIFORM, rows_per_file=5)
    table = deltadv.DeltaTable(path)
    _set_fault_points("iceberg_sync")
    try:
        r = table.delete("id = 3")
    finally:
        _set_fault_points("")
    assert r["version"] == 1 and r["num_deleted_rows"] == 1
    assert "iceberg_sync" in r["iceberg_error"]
    assert _mirrored_version(path) == 0  # not mirrored
    assert deltadv.DeltaTable(path).to_pyarrow_table().num_rows == 19
    r = deltadv.DeltaTable(path).delete("id = 11")
    assert r["iceberg_error"] is None
    assert _mirrored_version(path) == 2
    assert _check_all_snapshots(path) == 2  # versions 0 and 2

    # metadata that does not parse: the commit stands, the error names the file,
    # and an explicit sync raises it
    hint = (tmp_path / "t" / "metadata" / "version-hint.text").read_text().strip()
    (tmp_path / "t" / "metadata" / f"v{hint}.metadata.json").write_text("{")
    r = deltadv.DeltaTable(path).delete("id = 12")
    assert r["version"] == 3
    assert f"v{hint}.metadata.json" in r["iceberg_error"]
    with pytest.raises(deltadv.CorruptLogError, match=f"v{hint}.metadata.json"):
        deltadv.DeltaTable(path).sync_iceberg()


def test_enabling_uniform_on_an_existing_table(tmp_path: Path) -> None:
    """``set_table_properties`` turns UniForm Iceberg on for an IcebergCompatV3
    table: that commit converts the current snapshot once (DVs included), and the
    commits after it are mirrored."""
    path = str(tmp_path / "t")
    v3 = {"delta.enableIcebergCompatV3": "true"}
    write_table(path, _data(range(24)), configuration=v3, rows_per_file=6)
    table = deltadv.DeltaTable(path)
    table.delete("id in (0, 6, 12)")
    assert not (tmp_path / "t" / "metadata").exists()
    r = table.set_table_properties({"delta.universalformat.enabledformats": "iceberg"})
    assert r["version"] == 2 and r["iceberg_error"] is None
    assert r["iceberg_snapshot_id"] is not None
    assert table.version() == 2
    conf = table.metadata()["configuration"]
    assert conf["delta.universalFormat.enabledFormats"] == "iceberg"
    meta = _latest(path).metadata
    assert len(meta.snapshots) == 1 and meta.properties["delta-version"] == "2"
    assert meta.snapshots[0].snapshot_id == r["iceberg_snapshot_id"]
    # setting it again commits nothing
    assert (
        table.set_table_properties({"delta.universalFormat.enabledFormats": "iceberg"})["version"]
        is None
    )
    table.delete("id = 1")
    table.set_table_properties({"owner": "ops", "delta.checkpointInterval": "20"})
    assert _mirrored_version(path) == 4
    assert _check_all_snapshots(path) == 3
    last = json.loads(
        (tmp_path / "t" / "_delta_log" / f"{4:020d}.json").read_text().splitlines()[0]
    )
    info = last["commitInfo"]
    assert info["operation"] == "SET TBLPROPERTIES"
    assert json.loads(info["operationParameters"]["properties"]) == {
        "delta.checkpointInterval": "20",
        "owner": "ops",
    }


def test_uniform_settings_that_cannot_work_are_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "plain")
    write_table(path, _data(range(5)), configuration=CONFIG)
    table = deltadv.DeltaTable(path)
    with pytest.raises(ValueError, match=r"delta\.enableIcebergCompatV3"):
        table.set_table_properties({"delta.universalFormat.enabledFormats": "iceberg"})
    with pytest.raises(deltadv.DeltaProtocolError, match="Hudi"):
        table.set_table_properties({"delta.universalFormat.enabledFormats": "hudi"})
    with pytest.raises(ValueError, match="parquet"):
        table.set_table_properties({"delta.universalFormat.enabledFormats": "parquet"})
    with pytest.raises(deltadv.DeltaProtocolError, match="only when it creates"):
        table.set_table_properties({"delta.enableIcebergCompatV3": "true"})
    with pytest.raises(ValueError, match="not a Delta table property"):
        table.set_table_properties({"delta.noSuchProperty": "1"})
    with pytest.raises(ValueError, match="checkpointInterval"):
        table.set_table_properties({"delta.checkpointInterval": "0"})
    with pytest.raises(TypeError):
        table.set_table_properties({"delta.checkpointInterval": 5})  # type: ignore[dict-item]
    assert table.version() == 0  # nothing committed
    with pytest.raises(ValueError, match=r"delta\.enableIcebergCompatV3"):
        write_table(
            str(tmp_path / "new"),
            _data(range(5)),
            configuration={"delta.universalFormat.enabledFormats": "iceberg"},
        )
    assert not (tmp_path / "new" / "_delta_log").exists()


def _metadata_files(path: str) -> set[str]:
    root = Path(path)
    return {str(p.relative_to(root)) for p in (root / "metadata").iterdir()}


def _age(path: str, days: float) -> None:
    """Make every file under the table root look ``days`` old (VACUUM goes by
    modification time)."""
    import os
    import time

    old = time.time() - days * 86400
    for p in Path(path).rglob("*"):
        if p.is_file():
            os.utime(p, (old, old))


def test_vacuum_keeps_the_files_of_live_iceberg_snapshots(tmp_path: Path) -> None:
    """Within the retention every Iceberg snapshot stays readable: VACUUM keeps the
    metadata/ files they read however old the files look (``version-hint.text``
    too) and takes only orphans."""
    path = str(tmp_path / "t")
    write_table(path, _data(range(30)), configuration=UNIFORM, rows_per_file=6)
    table = deltadv.DeltaTable(path)
    table.delete("id in (1, 2)")
    table.delete("id in (7, 20)")
    table.purge()
    before = _metadata_files(path)
    (tmp_path / "t" / "metadata" / "orphan-m1.avro").write_bytes(b"x")
    _age(path, 30)  # files: a month old; snapshots: now (inside the retention)
    report = table.vacuum_report(dry_run=False)
    assert report["iceberg_snapshots_expired"] == 0
    assert "metadata/orphan-m1.avro" in report["files"]
    assert not [f for f in report["files"] if f in before]
    assert before <= _metadata_files(path)
    n = _check_all_snapshots(path)
    assert n == 6  # versions 0-3 and VACUUM START/END


def test_vacuum_expires_old_iceberg_snapshots(tmp_path: Path) -> None:
    """Past the retention, Iceberg snapshots but the current one expire with the
    data files VACUUM takes, and their manifest lists, manifests, Puffin files and
    metadata files go; the current snapshot still reads the latest version."""
    path = str(tmp_path / "t")
    write_table(path, _data(range(30)), configuration=UNIFORM, rows_per_file=6)
    table = deltadv.DeltaTable(path)
    table.delete("id in (1, 2)")
    table.delete("id in (3, 25)")
    table.purge()  # the files with DVs are rewritten: old ones become tombstones
    assert len(_latest(path).metadata.snapshots) == 4
    dry = table.vacuum_report(retention_hours=0, enforce_retention_duration=False)
    assert dry["iceberg_snapshots_expired"] == 3
    assert len(_latest(path).metadata.snapshots) == 4  # a dry run writes nothing
    report = table.vacuum_report(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert report["iceberg_snapshots_expired"] == 3
    assert set(dry["files"]) <= set(report["files"])
    doomed = [f for f in report["files"] if f.startswith("metadata/")]
    assert any(f.endswith(".puffin") for f in doomed)
    assert any(f.startswith("metadata/snap-") for f in doomed)
    assert "metadata/version-hint.text" not in doomed
    meta = _latest(path).metadata
    # the current snapshot before VACUUM, then VACUUM START's and END's
    assert [int(s.summary["delta-version"]) for s in meta.snapshots] == [3, 4, 5]
    assert _check_all_snapshots(path) == 3
    # every file the live snapshots name exists; nothing else older is left
    latest = _latest(path)
    for snap in latest.metadata.snapshots:
        assert Path(snap.manifest_list.removeprefix("file://")).exists()
        for m in snap.manifests(latest.io):
            assert Path(m.manifest_path.removeprefix("file://")).exists()


def test_vacuum_leaves_unreadable_iceberg_metadata_alone(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_table(path, _data(range(10)), configuration=UNIFORM, rows_per_file=5)
    deltadv.DeltaTable(path).delete("id = 1")
    hint = (tmp_path / "t" / "metadata" / "version-hint.text").read_text().strip()
    (tmp_path / "t" / "metadata" / f"v{hint}.metadata.json").write_text("{")
    before = _metadata_files(path)
    _age(path, 30)
    table = deltadv.DeltaTable(path)
    report = table.vacuum_report(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert not [f for f in report["files"] if f.startswith("metadata/")]
    assert before <= _metadata_files(path)


def test_many_first_dvs_keep_every_dv(tmp_path: Path) -> None:
    """Twenty DELETEs, each the first DV of another file of a UniForm table: each
    commit's mirror adds a delete manifest without reading the others, until there
    are too many and they are merged; every snapshot reads its Delta version."""
    path = str(tmp_path / "t")
    write_table(path, _data(range(100)), configuration=UNIFORM, rows_per_file=4)
    table = deltadv.DeltaTable(path)
    for i in range(20):
        assert table.delete(f"id = {i * 4 + 1}")["iceberg_error"] is None
    latest = _latest(path)
    snapshot = latest.current_snapshot()
    assert snapshot is not None
    deletes = [m for m in snapshot.manifests(latest.io) if m.content == 1]
    assert 1 <= len(deletes) <= 8
    assert _check_all_snapshots(path) == 21
