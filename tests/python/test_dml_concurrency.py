"""Concurrent row-level DML: 5 processes against one table, on local disk and on a
real S3 server, each running 12 rounds of DELETE, UPDATE, matched-only MERGE and
upserting MERGE (WHEN NOT MATCHED INSERT) on rows only it owns, spread over every
data file. All writers start each round together, on the same version, so their
commits race and rebase each other's deletion vectors. Writers on different rows
of the same file all commit; an upserting MERGE reads the whole table, so it may
lose to a concurrent commit that added files only where one of their rows has one
of its source keys, which never happens here, so no operation raises.

The expected table comes from a model of the operations (each writer's act on its
own rows, so their order across writers does not matter): the final table must
equal it row for row, every operation's metrics must match the model's counts, the
versions must be gap-free with exactly one commit per successful operation, and a
conflict must commit nothing. A second shape (4 writers, 16,000 rows in 4 files, 6
operations each: UPDATEs of 25 ids, DELETEs of 15, upserts of 20 matched ids and 5
new keys) runs the same way. Small tests pin the conflict rules on one process:
UPDATE and MERGE of the same row (the later fails, nothing committed), an upserting
MERGE over concurrent new rows with other keys (it commits) and with one of its
keys (it fails, nothing committed). A replaceWhere overwrite racing appends (two
threads, 12 rounds) commits over appends of rows outside its predicate and raises
ConcurrentAppend only over one of a row it matches."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from deltadv import CommitConflictError, DeltaTable
from deltadv.write import write_table

WRITERS = 5
ROUNDS = 12
FILES = 4
ROWS = 500  # per file; writer w owns the ids i % WRITERS == w: 100 rows of every file
NEW_BASE = 100_000  # writer w inserts new ids NEW_BASE + w * 1000 + round * 10 + j
NEW_PER_UPSERT = 10
OPS = ("delete", "update", "merge", "upsert")

#: id -> (val, tag)
State = dict[int, tuple[int, str]]


def _initial() -> State:
    return {i: (i * 10, "v") for i in range(FILES * ROWS)}


def _write_initial(root: Path, rows_per_file: int = ROWS, files: int = FILES) -> None:
    ids = list(range(files * rows_per_file))
    data = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "val": pa.array([i * 10 for i in ids], pa.int64()),
            "tag": pa.array(["v"] * len(ids), pa.string()),
        }
    )
    write_table(str(root), data, rows_per_file=rows_per_file)


def _op(writer: int, round_: int) -> str:
    """Writers cycle over the four kinds out of step: in every round, each kind
    runs in some writer while the others run the other kinds."""
    return OPS[(round_ + writer) % len(OPS)]


def _own(writer: int, pick: Any) -> list[int]:
    """The writer's ids of the initial table whose k = id // WRITERS passes `pick`."""
    return [i for i in range(FILES * ROWS) if i % WRITERS == writer and pick(i // WRITERS)]


def _new_ids(writer: int, round_: int) -> list[int]:
    """New ids the writer's upsert of `round_` inserts (none in other rounds)."""
    if _op(writer, round_) != "upsert":
        return []
    base = NEW_BASE + writer * 1000 + round_ * 10
    return list(range(base, base + NEW_PER_UPSERT))


def _earlier_new(writer: int, round_: int) -> list[int]:
    return [i for r in range(round_) for i in _new_ids(writer, r)]


def _plan(writer: int, round_: int) -> dict[str, Any]:
    """The operation writer `writer` runs in round `round_`, as data: its kind and
    its target ids or source rows. Targets include rows earlier rounds changed,
    deleted (then nothing matches them, or an upsert inserts them again) or
    inserted (rows in files written by this run)."""
    r, kind = round_, _op(writer, round_)
    earlier = _earlier_new(writer, r)
    if kind == "delete":
        ids = _own(writer, lambda k: k % ROUNDS == r) + [i for i in earlier if i % 3 == 0]
        return {"kind": kind, "ids": ids}
    if kind == "update":
        ids = _own(writer, lambda k: k % 5 == r % 5) + earlier
        return {"kind": kind, "ids": ids, "tag": f"u{r}"}
    if kind == "merge":  # matched only: update some rows, delete others
        old = _own(writer, lambda k: k % 7 == r % 7)
        rows = [(i, (i // WRITERS // 7) % 3 == 0) for i in old]
        rows += [(i, i % 2 == 1) for i in earlier]
        return {
            "kind": kind,
            "ids": [i for i, _ in rows],
            "delete": [d for _, d in rows],
            "inc": r + 1,
            "tag": f"m{r}",
        }
    # upsert: existing rows (some deleted earlier: inserted again), this round's
    # new ids, and the new ids of earlier upserts (matched, unless deleted since)
    ids = _own(writer, lambda k: k % 9 == r % 9) + _new_ids(writer, r) + earlier
    return {"kind": kind, "ids": ids, "val": 1000 + r, "tag": f"i{r}"}


# The second shape: 4 writers, 4 files of 4,000 rows; writer w owns id % 4 == w.
WRITERS_2, ROUNDS_2, FILES_2, ROWS_2 = 4, 6, 4, 4000


def _initial_2() -> State:
    return {i: (i * 10, "v") for i in range(FILES_2 * ROWS_2)}


def _plan_2(writer: int, round_: int) -> dict[str, Any]:
    """UPDATE (25 ids), DELETE (15 ids) or upsert (20 matched ids + 5 new keys), in
    turn, on ids of the writer's spread over all four files, none used twice."""
    kind = ("update", "delete", "upsert")[(writer + round_) % 3]
    own = [i for i in range(FILES_2 * ROWS_2) if i % WRITERS_2 == writer]
    # every 37th own id from an offset per round: all files, no id in two rounds
    picked = own[round_::37]
    if kind == "update":
        return {"kind": kind, "ids": picked[:25], "tag": f"u{round_}"}
    if kind == "delete":
        return {"kind": kind, "ids": picked[:15]}
    new = [NEW_BASE + writer * 1000 + round_ * 10 + j for j in range(5)]
    return {"kind": kind, "ids": picked[:20] + new, "val": 1000 + round_, "tag": f"i{round_}"}


#: name -> (writers, rounds, plan, initial state)
SHAPES = {
    "mixed": (WRITERS, ROUNDS, _plan, _initial),
    "three_kinds": (WRITERS_2, ROUNDS_2, _plan_2, _initial_2),
}


def _apply(state: State, plan: dict[str, Any]) -> dict[str, int]:
    """Apply one operation to the model; returns the counts its metrics must show."""
    kind, ids = plan["kind"], plan["ids"]
    assert len(set(ids)) == len(ids), "a plan names each row once"
    if kind == "delete":
        hit = [i for i in ids if i in state]
        for i in hit:
            del state[i]
        return {"deleted": len(hit)}
    if kind == "update":
        hit = [i for i in ids if i in state]
        for i in hit:
            state[i] = (state[i][0] + 1, plan["tag"])
        return {"updated": len(hit)}
    if kind == "merge":
        counts = {"updated": 0, "deleted": 0, "inserted": 0}
        for i, drop in zip(ids, plan["delete"], strict=True):
            if i not in state:
                continue
            if drop:
                del state[i]
                counts["deleted"] += 1
            else:
                state[i] = (state[i][0] + plan["inc"], plan["tag"])
                counts["updated"] += 1
        return counts
    counts = {"updated": 0, "deleted": 0, "inserted": 0}
    for i in ids:
        if i in state:
            state[i] = (state[i][0] + plan["val"], plan["tag"])
            counts["updated"] += 1
        else:
            state[i] = (plan["val"], plan["tag"])
            counts["inserted"] += 1
    return counts


def _execute(uri: str, options: dict[str, str], plan: dict[str, Any]) -> dict[str, Any]:
    """Run one planned operation on a freshly opened table; returns its metrics."""
    table = DeltaTable(uri, storage_options=options)
    kind, ids = plan["kind"], plan["ids"]
    in_list = ", ".join(map(str, ids))
    if kind == "delete":
        return table.delete(f"id IN ({in_list})")
    if kind == "update":
        return table.update({"val": "val + 1", "tag": f"'{plan['tag']}'"}, f"id IN ({in_list})")
    if kind == "merge":
        source = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "inc": pa.array([plan["inc"]] * len(ids), pa.int64()),
                "del": pa.array(plan["delete"], pa.bool_()),
                "tag": pa.array([plan["tag"]] * len(ids), pa.string()),
            }
        )
        return (
            table.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_delete("s.del")
            .when_matched_update({"val": "t.val + s.inc", "tag": "s.tag"})
            .execute()
        )
    source = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "val": pa.array([plan["val"]] * len(ids), pa.int64()),
            "tag": pa.array([plan["tag"]] * len(ids), pa.string()),
        }
    )
    return (
        table.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update({"val": "t.val + s.val", "tag": "s.tag"})
        .when_not_matched_insert_all()
        .execute()
    )


def _counts(kind: str, m: dict[str, Any]) -> dict[str, int]:
    """The counts of an operation's metrics, as `_apply` returns them."""
    if kind == "delete":
        return {"deleted": m["num_deleted_rows"]}
    if kind == "update":
        return {"updated": m["num_updated_rows"]}
    return {
        "updated": m["num_target_rows_updated"],
        "deleted": m["num_target_rows_deleted"],
        "inserted": m["num_target_rows_inserted"],
    }


def _writer(
    uri: str, options: dict[str, str], shape: str, writer: int, start: Any, out: Any
) -> None:
    """Run the writer's rounds, each begun together with the other writers; report
    every operation that committed (round, version, counts, attempts, rebases)
    and the error that stopped it, if any."""
    _, rounds, plan_of, _ = SHAPES[shape]
    done: list[dict[str, Any]] = []
    try:
        for r in range(rounds):
            start.wait(timeout=300)
            plan = plan_of(writer, r)
            # Writers touch disjoint rows: a CommitConflictError is an error
            # (reported below), for the upsert too.
            m = _execute(uri, options, plan)
            done.append(
                {
                    "round": r,
                    "kind": plan["kind"],
                    "version": m["version"],
                    "counts": _counts(plan["kind"], m),
                    "attempts": m["attempts"],
                    "rebases": m["rebases"],
                }
            )
        out.put((writer, done, None))
    except Exception as e:  # reported to the parent, which fails the test
        start.abort()  # the others stop waiting for this writer
        out.put((writer, done, repr(e)))


def _run(uri: str, options: dict[str, str], shape: str = "mixed") -> None:
    writers, rounds, plan_of, initial = SHAPES[shape]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start = ctx.Barrier(writers)
    procs = [
        ctx.Process(target=_writer, args=(uri, options, shape, w, start, out))
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    results = sorted(out.get(timeout=600) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    errors = [(w, e) for w, _, e in results if e is not None]
    assert not errors, errors

    # The model: each writer's successful operations in order, on its own rows.
    expected = initial()
    versions = []
    kinds = {k: 0 for k in {plan_of(w, r)["kind"] for w in range(writers) for r in range(rounds)}}
    for w, done, _ in results:
        assert [d["round"] for d in done] == list(range(rounds))
        for d in done:
            plan = plan_of(w, d["round"])
            assert d["kind"] == plan["kind"]
            counts = _apply(expected, plan)
            assert d["counts"] == counts, (w, d)
            assert sum(counts.values()) > 0, "every planned operation changes rows"
            assert d["version"] is not None, (w, d)
            versions.append(d["version"])
            kinds[d["kind"]] += 1
    assert all(kinds.values()), kinds

    # One commit per successful operation, gap-free, of the right kinds.
    t = DeltaTable(uri, storage_options=options)
    assert sorted(versions) == list(range(1, writers * rounds + 1))
    assert t.version() == writers * rounds
    history = t.history()
    assert sorted(h["version"] for h in history) == list(range(t.version() + 1))
    operations = {h["version"]: h.get("operation") for h in history}
    assert all(
        operations[v] in {"DELETE", "UPDATE", "MERGE", "WRITE"} for v in range(1, t.version() + 1)
    ), operations
    by_version = {d["version"]: d["kind"] for _, done, _ in results for d in done}
    names = {"delete": "DELETE", "update": "UPDATE", "merge": "MERGE", "upsert": "MERGE"}
    assert {v: names[k] for v, k in by_version.items()} == {
        v: op for v, op in operations.items() if v > 0
    }

    # Row for row: no row lost, none doubled, every value as the model says.
    rows = t.to_pyarrow_table().to_pylist()
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "a row is doubled"
    got = {r["id"]: (r["val"], r["tag"]) for r in rows}
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    wrong = sorted(i for i in set(got) & set(expected) if got[i] != expected[i])
    assert not missing and not extra and not wrong, (
        f"missing {missing[:10]}, extra {extra[:10]}, "
        f"wrong {[(i, got[i], expected[i]) for i in wrong[:10]]}"
    )
    assert t.count() == len(expected)
    # The writers raced: some commits were rebased over concurrent DV changes.
    assert sum(d["rebases"] for _, done, _ in results for d in done) > 0


def test_three_kinds_on_shared_files_never_conflict(tmp_path: Path) -> None:
    """4 writers started together, 6 operations each (UPDATE 25 ids, DELETE 15,
    upsert 20 matched + 5 new keys) on one 16,000-row table of 4 files they all
    share: every operation commits at once, none raises CommitConflictError."""
    root = tmp_path / "t"
    _write_initial(root, rows_per_file=ROWS_2, files=FILES_2)
    assert len(DeltaTable(str(root)).files()) == FILES_2
    _run(str(root), {}, "three_kinds")


@pytest.fixture
def table(tmp_path: Path) -> Path:
    root = tmp_path / "t"
    _write_initial(root)
    assert len(DeltaTable(str(root)).files()) == FILES
    return root


@pytest.mark.parametrize("storage", ["local", "s3"])
def test_mixed_dml_writers(table: Path, storage: str) -> None:
    if storage == "local":
        _run(str(table), {})
        return
    from tests.python.s3server import client, s3_server, storage_options, upload_dir

    with s3_server() as endpoint:
        client(endpoint).create_bucket(Bucket="dml")
        upload_dir(endpoint, "dml", table, "t")
        _run("s3://dml/t", storage_options(endpoint))


def _files(root: Path) -> set[str]:
    """Data and DV files (everything outside the log)."""
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and "_delta_log" not in p.parts
    }


def _rows(path: str) -> State:
    return {r["id"]: (r["val"], r["tag"]) for r in DeltaTable(path).to_pyarrow_table().to_pylist()}


def _update(table: DeltaTable, i: int, tag: str) -> dict[str, Any]:
    return table.update({"val": "val + 1", "tag": f"'{tag}'"}, f"id = {i}")


def _merge(table: DeltaTable, i: int, tag: str) -> dict[str, Any]:
    source = pa.table({"id": pa.array([i], pa.int64()), "inc": [5], "tag": [tag]})
    return (
        table.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update({"val": "t.val + s.inc", "tag": "s.tag"})
        .execute()
    )


@pytest.mark.parametrize("first", ["update", "merge"])
def test_same_row_update_and_merge_conflict(tmp_path: Path, first: str) -> None:
    """Three writers on version 0 of a table whose rows 0-9 are one file: the first
    changes row 7, the second row 8 of the same file (it commits, rebased), the
    third row 7 again: it raises CommitConflictError and commits nothing."""
    root = tmp_path / "t"
    _write_initial(root, rows_per_file=10, files=2)
    path = str(root)
    a, b, c = (DeltaTable(path) for _ in range(3))
    ops = {"update": (_update, 1), "merge": (_merge, 5)}
    one, one_inc = ops[first]
    two, two_inc = ops["merge" if first == "update" else "update"]

    m = one(a, 7, "a")
    assert m["version"] == 1
    m = two(b, 8, "b")
    assert m["version"] == 2 and m["rebases"] == 1
    before = _files(root)
    with pytest.raises(CommitConflictError):
        two(c, 7, "c")
    assert DeltaTable(path).version() == 2
    assert _files(root) == before, "the loser's files must be removed"
    expected = {i: (i * 10, "v") for i in range(20)}
    expected[7] = (70 + one_inc, "a")
    expected[8] = (80 + two_inc, "b")
    assert _rows(path) == expected


def _upsert(table: DeltaTable, ids: list[int], tag: str) -> dict[str, Any]:
    source = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "val": pa.array([3] * len(ids), pa.int64()),
            "tag": [tag] * len(ids),
        }
    )
    return (
        table.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update({"val": "t.val + s.val", "tag": "s.tag"})
        .when_not_matched_insert_all()
        .execute()
    )


def test_upsert_merge_rebased_over_concurrent_new_rows(tmp_path: Path) -> None:
    """An upserting MERGE reads the whole table, so files a concurrent commit added
    matter to it only where one of their rows matches its source keys: a concurrent
    UPDATE of another row (a new file holding row 7) and a concurrent upsert of other
    keys (new files holding rows 9 and 60) do not stop it; it commits on top of both,
    rebased, and every row is as the three operations in any order make it."""
    root = tmp_path / "t"
    _write_initial(root, rows_per_file=10, files=2)
    path = str(root)
    a, b, c = (DeltaTable(path) for _ in range(3))
    assert _update(a, 7, "a")["version"] == 1
    m = _upsert(c, [9, 60], "c")
    assert m["version"] == 2
    m = _upsert(b, [8, 50], "u")
    assert m["version"] == 3
    # one lost race, two winners checked (each a rebase), then version 3
    assert m["attempts"] == 2 and m["rebases"] == 2
    assert (m["num_target_rows_updated"], m["num_target_rows_inserted"]) == (1, 1)
    expected = {i: (i * 10, "v") for i in range(20)}
    expected.update({7: (71, "a"), 8: (83, "u"), 9: (93, "c"), 60: (3, "c"), 50: (3, "u")})
    assert _rows(path) == expected


@pytest.mark.parametrize("winner", ["insert", "update"])
def test_upsert_merge_conflicts_on_a_concurrent_row_with_its_key(
    tmp_path: Path, winner: str
) -> None:
    """Two writers on version 0 whose operations meet on one key: a concurrent
    upsert that inserted key 50 (or an UPDATE that rewrote row 8 into a new file)
    holds a row the second upsert would have matched, so the second raises
    CommitConflictError (Delta Spark's ConcurrentAppendException) and commits
    nothing; redone on the new version it matches the row."""
    root = tmp_path / "t"
    _write_initial(root, rows_per_file=10, files=2)
    path = str(root)
    a, b = DeltaTable(path), DeltaTable(path)
    if winner == "insert":
        assert _upsert(a, [50], "a")["version"] == 1
    else:
        assert _update(a, 8, "a")["version"] == 1
    before = _files(root)
    with pytest.raises(CommitConflictError, match="ConcurrentAppend"):
        _upsert(b, [8, 50], "b")
    assert DeltaTable(path).version() == 1
    assert _files(root) == before, "the loser's files must be removed"
    m = _upsert(DeltaTable(path), [8, 50], "b")
    assert m["version"] == 2
    expected = {i: (i * 10, "v") for i in range(20)}
    if winner == "insert":
        expected.update({8: (83, "b"), 50: (6, "b")})
        assert (m["num_target_rows_updated"], m["num_target_rows_inserted"]) == (2, 0)
    else:
        expected.update({8: (84, "b"), 50: (3, "b")})
        assert (m["num_target_rows_updated"], m["num_target_rows_inserted"]) == (1, 1)
    assert _rows(path) == expected


@pytest.mark.parametrize("appended", ["outside", "inside"])
def test_replace_where_against_concurrent_appends(tmp_path: Path, appended: str) -> None:
    """Two writers, started together each round: a replaceWhere overwrite of
    ``id < 10`` and an append, on a Serializable table (so even a blind append is
    in a reader's way). The overwrite's read set is its predicate: an append of
    rows outside it never makes it raise (it commits on top, rebased: at least
    one round must show the race, an overwrite data file older than the append's
    commit while the overwrite committed after it);
    an append of a row it matches, committed first, makes it raise
    CommitConflictError (ConcurrentAppend, as Delta Spark) and commit nothing.
    Either way the table is what the committed operations in log order make it."""
    root = tmp_path / "t"
    path = str(root)
    ids = list(range(20))
    write_table(
        path,
        pa.table({"id": pa.array(ids, pa.int64()), "val": pa.array([0] * 20, pa.int64())}),
        configuration={"delta.isolationLevel": "Serializable"},
        rows_per_file=10,
    )
    expected = {i: 0 for i in ids}
    rounds, conflicts, rebased = 12, 0, 0
    for r in range(1, rounds + 1):
        new_id = 1000 + r if appended == "outside" else -r
        before = DeltaTable(path).version()
        results = _replace_where_round(path, r, new_id)
        assert results["append"] == "ok"
        history = {h["version"]: h for h in DeltaTable(path).history() if h["version"] > before}
        writes = sorted(history)
        ops = {v: history[v]["operationParameters"]["mode"] for v in writes}
        if appended == "outside":
            assert results["overwrite"] == "ok", results["overwrite"]
        if results["overwrite"] != "ok":
            assert "ConcurrentAppend" in str(results["overwrite"]), results["overwrite"]
            assert list(ops.values()) == ["Append"]
            conflicts += 1
        else:
            assert sorted(ops.values()) == ["Append", "Overwrite"]
            over = next(v for v in writes if ops[v] == "Overwrite")
            app = next(v for v in writes if ops[v] == "Append")
            if _raced(root, over, app):
                rebased += 1
                # an overwrite that read the table before a matching append landed
                # may not commit after it
                assert appended == "outside", (over, app)
        # the table as the committed operations, in log order, make it
        for v in writes:
            if ops[v] == "Overwrite":
                expected = {k: x for k, x in expected.items() if k >= 10}
                expected.update({i: r for i in range(10)})
            else:
                expected[new_id] = -r
        assert _rows_by_id(path) == expected
    if appended == "outside":
        assert rebased >= 1, "no round raced: the test did not test anything"
    else:
        assert conflicts >= 1, "no round raced: the test did not test anything"


def _rows_by_id(path: str) -> dict[int, int]:
    t = DeltaTable(path).to_pyarrow_table()
    return dict(zip(t.column("id").to_pylist(), t.column("val").to_pylist(), strict=True))


def _replace_where_round(path: str, r: int, new_id: int) -> dict[str, Any]:
    """Round ``r``: a replaceWhere of ``id < 10`` (val ``r``) and an append of
    ``new_id`` (val ``-r``), released together; what each ended with."""
    import threading

    barrier = threading.Barrier(2)
    results: dict[str, Any] = {}

    def overwrite() -> None:
        data = pa.table(
            {"id": pa.array(range(10), pa.int64()), "val": pa.array([r] * 10, pa.int64())}
        )
        barrier.wait()
        try:
            write_table(path, data, mode="overwrite", predicate="id < 10")
            results["overwrite"] = "ok"
        except CommitConflictError as e:
            results["overwrite"] = e

    def append() -> None:
        data = pa.table({"id": pa.array([new_id], pa.int64()), "val": pa.array([-r], pa.int64())})
        barrier.wait()
        write_table(path, data, mode="append")
        results["append"] = "ok"

    threads = [threading.Thread(target=overwrite), threading.Thread(target=append)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _raced(root: Path, over: int, app: int) -> bool:
    """Whether the overwrite committed as ``over`` read the table before the
    append committed as ``app`` did: it committed later, yet wrote a data file
    (after loading its snapshot) before the append's commit file existed."""
    log = root / "_delta_log"
    lines = (log / f"{over:020d}.json").read_text().splitlines()
    adds = [json.loads(line)["add"]["path"] for line in lines if '"add"' in line]
    first = min((root / a).stat().st_mtime_ns for a in adds)
    return over > app and first < (log / f"{app:020d}.json").stat().st_mtime_ns
