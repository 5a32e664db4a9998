"""Concurrent writers: 8 processes against one table, on local disk and on a real S3
server, each deleting its own keys 25 times (many in the same data files) and
appending rows of its own every few rounds, then deleting some of what it appended.
Every targeted row is gone (none comes back), every other row is there once, and the
versions are gap-free (one Rust transaction per commit: put-if-absent, blind appends
never conflict, row-level rebase of DVs)."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path
from typing import Any

import pytest

from deltadv import DeltaTable
from deltadv._sample import make_table

WRITERS = 8
ROUNDS = 25
FILES = 4
ROWS = 500  # per file: every file is touched by every writer
APPEND_EVERY = 5  # rounds; an append of APPENDED rows, and next round half of them go
APPENDED = 10


def _targets(writer: int, round_: int) -> list[int]:
    """Writer w, round r deletes the ids i with i % 8 == w and (i // 8) % 50 == r:
    disjoint across writers and rounds, spread over every file, half the table."""
    return [
        i
        for i in range(FILES * ROWS)
        if i % WRITERS == writer and (i // WRITERS) % (2 * ROUNDS) == round_
    ]


def _appended(writer: int, round_: int) -> list[int]:
    """Ids writer w appends in round r (every APPEND_EVERY rounds): above the table's."""
    if round_ % APPEND_EVERY:
        return []
    base = 100_000 + (writer * ROUNDS + round_) * APPENDED
    return list(range(base, base + APPENDED))


def _append_deleted(writer: int, round_: int) -> list[int]:
    """The appended ids writer w deletes in round r: the even ones of its append
    one round earlier."""
    return [i for i in _appended(writer, round_ - 1) if i % 2 == 0] if round_ else []


def _writer(uri: str, options: dict[str, str], writer: int, out: Any) -> None:
    import pyarrow as pa

    from deltadv.write import write_table

    try:
        for r in range(ROUNDS):
            ids = _targets(writer, r) + _append_deleted(writer, r)
            DeltaTable(uri, storage_options=options).delete(f"id IN ({', '.join(map(str, ids))})")
            new = _appended(writer, r)
            if new:
                data = pa.table({"id": pa.array(new, pa.int64()), "value": [f"v{i}" for i in new]})
                write_table(uri, data, mode="append", storage_options=options)
        out.put((writer, None))
    except Exception as e:  # reported to the parent, which fails the test
        out.put((writer, repr(e)))


def _run(uri: str, options: dict[str, str]) -> None:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(uri, options, w, out)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    errors = [r for r in results if r[1] is not None]
    assert not errors, errors
    t = DeltaTable(uri, storage_options=options)
    appends = sum(1 for w in range(WRITERS) for r in range(ROUNDS) if _appended(w, r))
    assert t.version() == WRITERS * ROUNDS + appends
    history = t.history()
    assert sorted(h["version"] for h in history) == list(range(t.version() + 1))
    operations = [h.get("operation") for h in history if h["version"] > 0]
    assert operations.count("DELETE") == WRITERS * ROUNDS
    assert operations.count("WRITE") == appends
    assert all(h["isBlindAppend"] for h in history if h.get("operation") == "WRITE")
    targeted = {i for w in range(WRITERS) for r in range(ROUNDS) for i in _targets(w, r)}
    assert 0 < len(targeted) < FILES * ROWS
    added = {i for w in range(WRITERS) for r in range(ROUNDS) for i in _appended(w, r)}
    dropped = {i for w in range(WRITERS) for r in range(ROUNDS) for i in _append_deleted(w, r)}
    assert added and dropped and dropped < added
    expected = sorted([i for i in range(FILES * ROWS) if i not in targeted] + list(added - dropped))
    assert sorted(t.to_pyarrow(["id"])["id"].to_pylist()) == expected
    assert t.count() == len(expected)


@pytest.fixture
def table(tmp_path: Path) -> Path:
    root = tmp_path / "t"
    make_table(root, files=FILES, rows_per_file=ROWS, deleted={})
    return root


def test_eight_writers_local_disk(table: Path) -> None:
    _run(str(table), {})


def test_eight_writers_s3(table: Path) -> None:
    from tests.python.s3server import client, s3_server, storage_options, upload_dir

    with s3_server() as endpoint:
        client(endpoint).create_bucket(Bucket="conc")
        upload_dir(endpoint, "conc", table, "t")
        _run("s3://conc/t", storage_options(endpoint))
