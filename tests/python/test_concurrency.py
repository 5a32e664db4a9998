"""Concurrent DELETEs: 8 writer processes, each deleting its own keys 25 times
(many in the same data files) against one table, on local disk and on a real S3
server. Every targeted row is gone, every other row is still there, and the
versions are gap-free (put-if-absent commits with row-level rebase)."""

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


def _targets(writer: int, round_: int) -> list[int]:
    """Writer w, round r deletes the ids i with i % 8 == w and (i // 8) % 50 == r:
    disjoint across writers and rounds, spread over every file, half the table."""
    return [
        i
        for i in range(FILES * ROWS)
        if i % WRITERS == writer and (i // WRITERS) % (2 * ROUNDS) == round_
    ]


def _writer(uri: str, options: dict[str, str], writer: int, out: Any) -> None:
    try:
        for r in range(ROUNDS):
            ids = _targets(writer, r)
            DeltaTable(uri, storage_options=options).delete(f"id IN ({', '.join(map(str, ids))})")
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
    assert t.version() == WRITERS * ROUNDS
    history = t.history()
    assert sorted(h["version"] for h in history) == list(range(WRITERS * ROUNDS + 1))
    assert all(h.get("operation") == "DELETE" for h in history if h["version"] > 0)
    targeted = {i for w in range(WRITERS) for r in range(ROUNDS) for i in _targets(w, r)}
    assert 0 < len(targeted) < FILES * ROWS
    expected = [i for i in range(FILES * ROWS) if i not in targeted]
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
