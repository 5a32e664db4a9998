"""DELETE with deletion vectors, without Spark: the two-step life of seed 000,
row-level concurrency (rebase), conflicts, fault injection and bad input.

Expected rows come from how the tables were generated (ids are consecutive per
file), never from deltadv's own output; other readers (deltalake) check what we
write."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

import deltadv
from deltadv import CommitConflictError, DeltaDVError, DeltaTable
from deltadv._core import _set_fault_points
from deltadv._sample import make_table

ROWS = 1000


def _ids(t: DeltaTable) -> list[int]:
    return sorted(t.to_pyarrow(["id"])["id"].to_pylist())


def _commit(root: Path, version: int) -> list[dict[str, Any]]:
    text = (root / "_delta_log" / f"{version:020}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _paths(root: Path) -> list[str]:
    return [a["add"]["path"] for a in _commit(root, 0) if "add" in a]


@pytest.fixture
def table(tmp_path: Path) -> Path:
    root = tmp_path / "t"
    make_table(root, files=2, rows_per_file=ROWS, deleted={})
    return root


def test_seed_000_two_step_life(table: Path) -> None:
    file_a, file_b = _paths(table)
    t = DeltaTable(str(table))
    m = t.delete_rows({file_a: [24, 42]})
    assert m["version"] == 1 and m["num_deleted_rows"] == 2
    assert m["num_deletion_vectors_added"] == 1 and m["num_removed_files"] == 0
    actions = _commit(table, 1)
    assert actions[0]["commitInfo"]["operation"] == "DELETE"
    removes = [a["remove"] for a in actions if "remove" in a]
    adds = [a["add"] for a in actions if "add" in a]
    assert [(r["path"], r.get("deletionVector")) for r in removes] == [(file_a, None)]
    assert [a["path"] for a in adds] == [file_a]
    dv1 = adds[0]["deletionVector"]
    assert dv1["storageType"] == "u" and dv1["cardinality"] == 2
    assert json.loads(adds[0]["stats"])["tightBounds"] is False
    assert json.loads(adds[0]["stats"])["numRecords"] == ROWS
    assert sorted(t.deletion_vectors()[file_a]) == [24, 42]
    assert _ids(t) == [i for i in range(2 * ROWS) if i not in (24, 42)]

    m = t.delete_rows({file_a: range(300, 801)})
    assert m["version"] == 2 and m["num_deleted_rows"] == 501
    assert m["num_deletion_vectors_updated"] == 1
    actions = _commit(table, 2)
    removes = [a["remove"] for a in actions if "remove" in a]
    adds = [a["add"] for a in actions if "add" in a]
    assert [(r["path"], r["deletionVector"]) for r in removes] == [(file_a, dv1)]
    dv2 = adds[0]["deletionVector"]
    assert dv2["cardinality"] == 503 and dv2["pathOrInlineDv"] != dv1["pathOrInlineDv"]
    assert sorted(t.deletion_vectors()[file_a]) == [24, 42, *range(300, 801)]
    gone = {24, 42, *range(300, 801)}
    assert _ids(t) == [i for i in range(2 * ROWS) if i not in gone]
    assert t.count() == 2 * ROWS - 503
    # file_b untouched throughout
    assert file_b not in t.deletion_vectors()


def test_other_readers_see_our_deletes(table: Path) -> None:
    import deltalake
    import polars as pl

    t = DeltaTable(str(table))
    t.delete("id < 10 OR id IN (500, 1500) OR id >= 1990")
    expected = [i for i in range(2 * ROWS) if not (i < 10 or i in (500, 1500) or i >= 1990)]
    dl = deltalake.DeltaTable(str(table)).scan(columns=["id"]).read_all()
    assert sorted(dl["id"].to_pylist()) == expected
    assert sorted(pl.read_delta(str(table))["id"].to_list()) == expected


def test_delete_with_pyarrow_expression_and_inline_dvs(table: Path) -> None:
    t = DeltaTable(str(table))
    m = t.delete((pc.field("id") < 20) | (pc.field("id") >= 1990), inline_threshold=1024)
    assert m["num_deleted_rows"] == 30 and m["num_dv_files_written"] == 0
    adds = [a["add"] for a in _commit(table, 1) if "add" in a]
    assert {a["deletionVector"]["storageType"] for a in adds} == {"i"}
    assert _ids(t) == list(range(20, 1990))
    assert not list(table.glob("deletion_vector_*.bin"))


def test_whole_files_are_removed_and_repeat_deletes_are_noops(table: Path) -> None:
    t = DeltaTable(str(table))
    m = t.delete("id < 1000")  # all of file_a
    assert m["num_removed_files"] == 1 and m["num_deleted_rows"] == 1000
    assert [list(a) for a in _commit(table, 1)][1:] == [["remove"]]
    m = t.delete("id < 1000")
    assert m["version"] is None and m["num_deleted_rows"] == 0
    assert t.version() == 1
    m = t.delete()
    assert m["num_removed_files"] == 1 and t.count() == 0


def test_two_writers_on_the_same_file_both_win(table: Path) -> None:
    """Row-level concurrency: the second writer rebases its DV on the first's."""
    file_a, _ = _paths(table)
    first = DeltaTable(str(table))
    second = DeltaTable(str(table))  # same read version
    first.delete_rows({file_a: [1, 2, 3]})
    m = second.delete_rows({file_a: [3, 4, 5]})
    assert m["version"] == 2 and m["rebases"] == 1 and m["attempts"] == 2
    assert m["num_deleted_rows"] == 2  # row 3 was already gone
    assert sorted(DeltaTable(str(table)).deletion_vectors()[file_a]) == [1, 2, 3, 4, 5]


def test_delete_of_a_file_removed_meanwhile_is_a_conflict(table: Path) -> None:
    file_a, _ = _paths(table)
    stale = DeltaTable(str(table))
    DeltaTable(str(table)).delete("id < 1000")  # removes file_a
    with pytest.raises(CommitConflictError, match="removed by a concurrent commit"):
        stale.delete_rows({file_a: [7]})
    assert DeltaTable(str(table)).version() == 1
    assert not (table / "_delta_log" / f"{2:020}.json").exists()


@pytest.fixture
def fail_at() -> Iterator[Any]:
    yield _set_fault_points
    _set_fault_points("")


@pytest.mark.parametrize("point", ["dv_write", "commit_put"])
def test_failure_before_commit_leaves_the_table_unchanged(
    table: Path, fail_at: Any, point: str
) -> None:
    t = DeltaTable(str(table))
    fail_at(point)
    with pytest.raises(OSError, match="fault injected"):
        t.delete("id < 10")
    fail_at("")
    again = DeltaTable(str(table))
    assert again.version() == 0
    assert _ids(again) == list(range(2 * ROWS))
    # a retry after the failure works; an orphan DV file may remain for VACUUM
    again.delete("id < 10")
    assert _ids(DeltaTable(str(table))) == list(range(10, 2 * ROWS))


def test_failure_after_commit_keeps_the_commit(table: Path, fail_at: Any) -> None:
    t = DeltaTable(str(table))
    fail_at("after_commit")
    with pytest.raises(OSError, match="fault injected"):
        t.delete("id < 10")
    fail_at("")
    again = DeltaTable(str(table))
    assert again.version() == 1
    assert _ids(again) == list(range(10, 2 * ROWS))


def test_bad_input_is_a_clear_error_and_changes_nothing(table: Path, tmp_path: Path) -> None:
    t = DeltaTable(str(table))
    with pytest.raises(ValueError, match="nope"):
        t.delete("nope = 1")
    with pytest.raises(ValueError, match="out of range"):
        t.delete_rows({_paths(table)[0]: [ROWS]})
    with pytest.raises(FileNotFoundError, match="not a live data file"):
        t.delete_rows({"missing.parquet": [1]})
    assert DeltaTable(str(table)).version() == 0
    # a table whose protocol does not allow DVs
    plain = tmp_path / "plain"
    make_table(plain, files=1, rows_per_file=10, deleted={})
    log = plain / "_delta_log" / f"{0:020}.json"
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    lines[0] = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
    log.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    with pytest.raises(DeltaDVError, match="does not allow deletion vectors"):
        DeltaTable(str(plain)).delete("id = 1")
    assert DeltaTable(str(plain)).version() == 0
    assert deltadv.DeltaTable(str(plain)).count() == 10


def test_checkpoint_every_ten_commits_is_read_back(table: Path) -> None:
    import deltalake

    t = DeltaTable(str(table))
    gone: set[int] = set()
    for k in range(10):
        ids = [k * 7, 1000 + k * 13]
        m = t.delete(f"id IN ({ids[0]}, {ids[1]})")
        gone |= set(ids)
        assert m["checkpointed"] == (m["version"] == 10), m
    log = table / "_delta_log"
    assert (log / f"{10:020}.checkpoint.parquet").is_file()
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == 10
    expected = [i for i in range(2 * ROWS) if i not in gone]
    # our reader starts from the checkpoint; so does deltalake
    for f in log.glob("0000000000000000000*.json"):
        f.unlink()  # commits 0..9: only the checkpoint can explain the table now
    assert _ids(DeltaTable(str(table))) == expected
    dl = deltalake.DeltaTable(str(table)).scan(columns=["id"]).read_all()
    assert sorted(dl["id"].to_pylist()) == expected


def test_copy_on_write_fallback_on_a_table_without_dvs(tmp_path: Path) -> None:
    import deltalake

    plain = tmp_path / "plain"
    make_table(plain, files=2, rows_per_file=ROWS, deleted={})
    log = plain / "_delta_log" / f"{0:020}.json"
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    lines[0] = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
    log.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    t = DeltaTable(str(plain))
    m = t.delete("id < 10 OR id = 1500", allow_copy_on_write=True)
    assert m["num_deleted_rows"] == 11 and m["num_removed_files"] == 2
    assert m["num_added_files"] == 2 and m["num_copied_rows"] == 2 * ROWS - 11
    actions = _commit(plain, 1)
    adds = [a["add"] for a in actions if "add" in a]
    assert all("deletionVector" not in a for a in adds)
    assert not list(plain.glob("deletion_vector_*.bin"))
    expected = [i for i in range(2 * ROWS) if not (i < 10 or i == 1500)]
    assert _ids(DeltaTable(str(plain))) == expected
    # a non-DV table is readable by deltalake's plain Arrow path
    other = deltalake.DeltaTable(str(plain)).to_pyarrow_table(columns=["id", "value"])
    assert sorted(other["id"].to_pylist()) == expected
    assert all(
        v == f"v{i}"
        for i, v in zip(other["id"].to_pylist(), other["value"].to_pylist(), strict=True)
    )


def test_dv_files_are_cut_at_the_target_size(table: Path) -> None:
    t = DeltaTable(str(table))
    m = t.delete("id IN (1, 2, 1001, 1002)", dv_file_target_size=1)
    assert m["num_deletion_vectors_added"] == 2 and m["num_dv_files_written"] == 2
    assert len(list(table.glob("deletion_vector_*.bin"))) == 2
    m = t.delete("id IN (3, 1003)")  # default target: both DVs share one file
    assert m["num_dv_files_written"] == 1
    assert _ids(t) == [i for i in range(2 * ROWS) if i not in (1, 2, 3, 1001, 1002, 1003)]


def test_commit_records_the_tables_isolation_level(tmp_path: Path) -> None:
    import pyarrow as pa

    from deltadv.write import write_table

    root = tmp_path / "s"
    config = {"delta.isolationLevel": "Serializable"}
    write_table(str(root), pa.table({"id": list(range(10))}), configuration=config)
    DeltaTable(str(root)).delete("id = 3")
    info = next(a["commitInfo"] for a in _commit(root, 1) if "commitInfo" in a)
    assert info["isolationLevel"] == "Serializable"
    assert info["readVersion"] == 0
    # an isolation level Delta does not define is refused, naming it
    bad = tmp_path / "b"
    write_table(str(bad), pa.table({"id": [1]}), configuration={"delta.isolationLevel": "Snap"})
    with pytest.raises(deltadv.DeltaProtocolError, match="Snap"):
        DeltaTable(str(bad)).delete("id = 1")
