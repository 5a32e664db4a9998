"""Input that used to kill the process (stack overflow, failed allocation, a read
that never ends) or read the wrong file: each is now a clear Python exception.

The crashing inputs run in a child interpreter, so a regression fails this test
instead of killing pytest; the child prints the exception it caught."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from deltadv import DeletionVector, DeltaTable
from deltadv._sample import make_table
from tests.python.s3server import client, s3_server, storage_options, upload_dir

ROWS = 100


def _in_child(code: str, timeout: float = 120) -> str:
    """Run `code` in a fresh interpreter; return its stdout (it must exit 0)."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, (
        f"child died with {proc.returncode} (negative: signal)\n"
        f"stdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-2000:]}"
    )
    return proc.stdout


def _caught(code: str, timeout: float = 120) -> tuple[str, str]:
    """Run `code` (which must raise) in a child; the exception's class and message."""
    out = _in_child(
        "import json, sys\n"
        "try:\n" + textwrap.indent(textwrap.dedent(code), "    ") + "\n"
        "except Exception as e:\n"
        "    print(json.dumps([type(e).__name__, [c.__name__ for c in type(e).__mro__],"
        " str(e)[:2000]]))\n"
        "else:\n"
        "    print(json.dumps(['no exception', [], '']))\n",
        timeout,
    )
    name, mro, message = json.loads(out.strip().splitlines()[-1])
    assert name != "no exception", code
    return ",".join(mro), message


def _table(tmp_path: Path, deleted: dict[int, list[int]] | None = None) -> Path:
    root = tmp_path / "t"
    make_table(root, files=2, rows_per_file=ROWS, deleted=deleted or {})
    return root


def _commit(root: Path, version: int = 0) -> list[dict[str, Any]]:
    text = (root / "_delta_log" / f"{version:020}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _rewrite_commit(root: Path, actions: list[dict[str, Any]], version: int = 0) -> None:
    log = root / "_delta_log" / f"{version:020}.json"
    log.write_text("".join(json.dumps(a) + "\n" for a in actions))


# --- predicates ---------------------------------------------------------------

DEEP_PREDICATES = {
    "nots": "'NOT ' * 100_000 + 'id = 1'",
    "parens": "'(' * 200_000 + 'id = 1' + ')' * 200_000",
    "not_parens": "'NOT (' * 100_000 + 'id = 1' + ')' * 100_000",
}


@pytest.mark.parametrize("text", DEEP_PREDICATES.values(), ids=DEEP_PREDICATES.keys())
@pytest.mark.parametrize("call", ["to_pyarrow(filter=p)", "delete(p)", "scan_tasks(filter=p)"])
def test_deeply_nested_predicate_is_a_value_error(tmp_path: Path, text: str, call: str) -> None:
    root = _table(tmp_path)
    mro, message = _caught(
        f"""
        from deltadv import DeltaTable
        p = {text}
        DeltaTable({str(root)!r}).{call}
        """
    )
    assert "ValueError" in mro, mro
    assert "predicate nested deeper than 128 levels" in message, message
    assert len(message) < 1000  # quotes a prefix of the text, not 600 KB of it
    # nothing was committed
    assert DeltaTable(str(root)).version() == 0


def test_nesting_up_to_the_limit_still_works(tmp_path: Path) -> None:
    root = _table(tmp_path)
    t = DeltaTable(str(root))
    even_nots = "NOT " * 128 + "id < 5"
    assert sorted(t.to_pyarrow(["id"], filter=even_nots)["id"].to_pylist()) == [0, 1, 2, 3, 4]
    parens = "(" * 128 + "id >= 195" + ")" * 128
    assert sorted(t.to_pyarrow(["id"], filter=parens)["id"].to_pylist()) == list(range(195, 200))


# --- schema JSON -----------------------------------------------------------------


@pytest.mark.parametrize("levels", [1_000, 100_000])
@pytest.mark.parametrize("kind", ["struct", "array"])
def test_deeply_nested_schema_is_an_error(tmp_path: Path, kind: str, levels: int) -> None:
    root = _table(tmp_path)
    if kind == "array":
        opening, closing = '{"type":"array","elementType":', ',"containsNull":true}'
    else:
        opening = '{"type":"struct","fields":[{"name":"s","type":'
        closing = ',"nullable":true,"metadata":{}}]}'
    nested = opening * levels + '"long"' + closing * levels
    schema = (
        '{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},'
        f'{{"name":"deep","type":{nested},"nullable":true,"metadata":{{}}}}]}}'
    )
    actions = _commit(root)
    for a in actions:
        if "metaData" in a:
            a["metaData"]["schemaString"] = schema
    _rewrite_commit(root, actions)
    mro, message = _caught(f"from deltadv import DeltaTable\nDeltaTable({str(root)!r})")
    assert "DeltaDVError" in mro, mro
    assert "invalid schema" in message and "recursion limit exceeded" in message, message


# --- row sets sized by input -------------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "words"),
    [
        ("range(0, 2**62)", "needs 70368744177664 bitmap containers"),
        ("range(0, 2**62, 2)", "at most 67108864 are accepted in one range with a step"),
        ("range(2**62, 0, -1)", "bitmap containers"),
        ("range(0, 2**70)", "exceeds the largest storable row index"),
        ("range(-5, 10)", "row indexes must be >= 0, found -5"),
        ("range(0, 2**200)", "out of the 128-bit integer range"),
    ],
)
def test_huge_ranges_are_refused_before_allocating(rows: str, words: str) -> None:
    for ctor in ("DeletionVector({})", "DeletionVector([1]).union({})"):
        mro, message = _caught(f"from deltadv import DeletionVector\n{ctor.format(rows)}")
        assert "ValueError" in mro, (rows, mro)
        assert words in message, (rows, message)


def test_ranges_within_the_limits() -> None:
    assert len(DeletionVector(range(0, 2**32))) == 2**32
    assert len(DeletionVector(range(2**40, 2**40 + 5))) == 5
    assert list(DeletionVector(range(10, 0, -3))) == [1, 4, 7, 10]
    assert list(DeletionVector(range(0, 2**40, 2**37))) == [i * 2**37 for i in range(8)]
    assert len(DeletionVector(range(5, 5))) == 0
    # strided numpy arrays are read through their strides (they were read as empty)
    import numpy as np

    a = np.arange(20, dtype=np.uint64)[::3]
    assert list(DeletionVector(a)) == list(range(0, 20, 3))
    assert list(DeletionVector(np.arange(20, dtype=np.int64)[::-4])) == [3, 7, 11, 15, 19]


def test_to_numpy_of_a_huge_set_is_a_memory_error() -> None:
    # 2**38 rows (4 KiB of bitmap) would be 2 TiB as an array.
    mro, message = _caught(
        """
        from deltadv import DeletionVector
        dv = DeletionVector(range(0, 2**32))
        for i in range(1, 64):
            dv = dv | range(i * 2**32, (i + 1) * 2**32)
        assert len(dv) == 2**38
        dv.to_numpy()
        """
    )
    assert "MemoryError" in mro, mro
    assert "cannot allocate 274877906944 row indexes" in message, message


def test_delete_rows_with_huge_or_out_of_range_rows(tmp_path: Path) -> None:
    root = _table(tmp_path)
    path = _commit(root)[-1]["add"]["path"]
    mro, message = _caught(
        f"""
        from deltadv import DeltaTable
        DeltaTable({str(root)!r}).delete_rows({{{path!r}: range(0, 2**62)}})
        """
    )
    assert "ValueError" in mro and "bitmap containers" in message, (mro, message)
    t = DeltaTable(str(root))
    # within the range limit but past the file's rows: refused against numRecords
    with pytest.raises(ValueError, match=f"{ROWS}"):
        t.delete_rows({path: range(ROWS - 1, 2**32)})
    assert t.version() == 0
    assert t.count() == 2 * ROWS


# --- files outside the table, or not files ------------------------------------------


def test_fifo_dv_file_is_refused_not_read_forever(tmp_path: Path) -> None:
    root = _table(tmp_path, deleted={0: [1, 2, 3]})
    (dv_file,) = root.glob("deletion_vector_*.bin")
    dv_file.unlink()
    os.mkfifo(dv_file)
    mro, message = _caught(
        f"from deltadv import DeltaTable\nDeltaTable({str(root)!r}).to_pyarrow()", timeout=60
    )
    assert "OSError" in mro, mro
    assert str(dv_file) in message and "not a regular file (a FIFO)" in message, message


def test_p_dv_naming_a_local_file_on_another_host_is_refused(tmp_path: Path) -> None:
    root = _table(tmp_path, deleted={0: [1, 2, 3]})
    _as_p_dv(root, lambda name: f"file://otherhost{root / name}")
    with pytest.raises(ValueError, match="is not in the table's store"):
        DeltaTable(str(root)).to_pyarrow()
    # the same file without a host is read
    _as_p_dv(root, lambda name: f"file://{root / name}")
    assert DeltaTable(str(root)).to_pyarrow().num_rows == 2 * ROWS - 3


def test_missing_dv_file_is_an_error_not_an_empty_dv(tmp_path: Path) -> None:
    root = _table(tmp_path, deleted={0: [1, 2, 3]})
    (dv_file,) = root.glob("deletion_vector_*.bin")
    dv_file.unlink()
    t = DeltaTable(str(root))
    with pytest.raises(FileNotFoundError, match=dv_file.name):
        t.to_pyarrow()
    # a DELETE touching that file must not write a DV without the old rows
    with pytest.raises(FileNotFoundError, match=dv_file.name):
        t.delete("id = 5")
    with pytest.raises(FileNotFoundError, match=dv_file.name):
        t.delete_rows({_commit(root)[-2]["add"]["path"]: [7]})
    assert DeltaTable(str(root)).version() == 0


def test_copy_on_write_of_an_absolute_path_writes_under_the_root(tmp_path: Path) -> None:
    root = _table(tmp_path)
    actions = _commit(root)
    actions[0] = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
    # the first file as an absolute file: URI (to a copy outside the table root)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    first = next(a["add"] for a in actions if "add" in a)
    (root / first["path"]).rename(outside / first["path"])
    first["path"] = (outside / first["path"]).as_uri()
    _rewrite_commit(root, actions)
    t = DeltaTable(str(root))
    assert t.count() == 2 * ROWS
    m = t.delete("id = 3", allow_copy_on_write=True)
    assert m["num_deleted_rows"] == 1 and m["num_added_files"] == 1
    (added,) = [a["add"] for a in _commit(root, 1) if "add" in a]
    assert "://" not in added["path"] and not added["path"].startswith("/")
    assert (root / added["path"]).is_file()
    assert list(outside.iterdir()) == [outside / Path(first["path"]).name]
    ids = sorted(DeltaTable(str(root)).to_pyarrow(["id"])["id"].to_pylist())
    assert ids == [i for i in range(2 * ROWS) if i != 3]


def _as_p_dv(root: Path, uri_of: Any) -> None:
    """Turn the table's `u` DVs into `p` DVs at `uri_of(DV file name)`."""
    (dv_file,) = root.glob("deletion_vector_*.bin")
    actions = _commit(root)
    for a in actions:
        dv = a.get("add", {}).get("deletionVector")
        if dv:
            dv["storageType"] = "p"
            dv["pathOrInlineDv"] = uri_of(dv_file.name)
    _rewrite_commit(root, actions)


def test_p_dv_in_another_bucket_is_refused_on_s3(tmp_path: Path) -> None:
    """The `p` DV names s3://other/t/X; the table is in s3://mine/t, which holds a
    file at the same key t/X. It used to be read from s3://mine."""
    root = _table(tmp_path, deleted={0: [1, 2, 3]})
    with s3_server() as endpoint:
        s3 = client(endpoint)
        for bucket in ("mine", "other"):
            s3.create_bucket(Bucket=bucket)
        opts = storage_options(endpoint)
        _as_p_dv(root, lambda name: f"s3://other/t/{name}")
        upload_dir(endpoint, "mine", root, "t")
        upload_dir(endpoint, "other", root, "t")
        t = DeltaTable("s3://mine/t", storage_options=opts)
        with pytest.raises(
            ValueError, match=r"s3://other/t/.* is not in the table's store s3://mine"
        ):
            t.to_pyarrow()
        with pytest.raises(ValueError, match="not in the table's store"):
            t.delete("id = 5")
        assert DeltaTable("s3://mine/t", storage_options=opts).version() == 0
        # The same DV as a `p` URI inside the table's bucket is read.
        _as_p_dv(root, lambda name: f"s3a://mine/t/{name}")
        s3.upload_file(
            str(root / "_delta_log" / f"{0:020}.json"), "mine", f"t/_delta_log/{0:020}.json"
        )
        t = DeltaTable("s3://mine/t", storage_options=opts)
        ids = sorted(t.to_pyarrow(["id"])["id"].to_pylist())
        assert ids == [i for i in range(2 * ROWS) if i not in (1, 2, 3)]
