"""Scans are streams: batches are decoded as they are pulled, a bounded number
of files ahead; a reader dropped early stops reading; an error met mid-stream is
raised by the read that meets it, as deltadv's own exception type; row groups a
deletion vector empties are never fetched."""

from __future__ import annotations

import gc
import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from deltadv import DeltaTable, num_threads
from deltadv._sample import make_table

FILES, ROWS = 12, 1000


def _gets(t: DeltaTable) -> int:
    return t.request_counts()["gets"]


def _ids_without(deleted: dict[int, list[int]], rows: int = ROWS, files: int = FILES) -> list[int]:
    gone = {f * rows + r for f, rs in deleted.items() for r in rs}
    return [i for i in range(files * rows) if i not in gone]


@pytest.fixture
def many_files(tmp_path: Path) -> tuple[Path, dict[int, list[int]]]:
    deleted = {1: [0, 5, 999], 7: list(range(0, ROWS, 2))}
    make_table(tmp_path / "t", files=FILES, rows_per_file=ROWS, deleted=deleted)
    return tmp_path / "t", deleted


@pytest.mark.parametrize("prefetch", [1, 3])
def test_scan_reads_files_only_as_they_are_pulled(
    many_files: tuple[Path, dict[int, list[int]]], prefetch: int
) -> None:
    root, deleted = many_files
    t = DeltaTable(str(root))
    before = _gets(t)
    reader = t.scan(prefetch_files=prefetch)
    first = reader.read_next_batch()
    assert first.num_rows > 0
    time.sleep(0.3)  # read-ahead tasks get every chance to run further
    early = _gets(t) - before
    # The read-ahead window of num_threads() + 1 pieces (here one file each: its
    # footer, its one row group), and the footers of the `prefetch` - 1 files
    # opened ahead of it; the others are not touched until the consumer gets to
    # them. The DVs (files 1 and 7, in one DV file) are fetched a window of
    # `prefetch` files at a time, when its first file is opened: one GET per
    # such window holding a file with a DV.
    window = num_threads() + 1
    opened = min(window + prefetch - 1, FILES)
    dv_windows = {f // prefetch for f in deleted if f // prefetch * prefetch < opened}
    assert early == len(dv_windows) + min(window, FILES) + opened, early
    rest = reader.read_all()
    full = _gets(t) - before
    assert full >= 1 + 2 * FILES
    ids = first.column("id").to_pylist() + rest.column("id").to_pylist()
    assert ids == _ids_without(deleted)


def test_a_dropped_reader_stops_reading(many_files: tuple[Path, dict[int, list[int]]]) -> None:
    root, _ = many_files
    t = DeltaTable(str(root))
    before = _gets(t)
    reader = t.scan(prefetch_files=2)
    reader.read_next_batch()
    del reader
    gc.collect()
    time.sleep(0.3)
    after_drop = _gets(t) - before
    time.sleep(0.3)
    assert _gets(t) - before == after_drop  # nothing reads on behind our back
    assert after_drop < 1 + 2 * FILES


@pytest.mark.parametrize("prefetch", [1, 3, 64])
def test_prefetch_depth_does_not_change_rows_or_order(
    many_files: tuple[Path, dict[int, list[int]]], prefetch: int
) -> None:
    root, deleted = many_files
    table = DeltaTable(str(root)).scan(prefetch_files=prefetch).read_all()
    assert table.column("id").to_pylist() == _ids_without(deleted)


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_prefetch_must_be_a_positive_integer(
    many_files: tuple[Path, dict[int, list[int]]], bad: object
) -> None:
    with pytest.raises(ValueError, match="prefetch_files"):
        DeltaTable(str(many_files[0])).scan(prefetch_files=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("batch_size", [1, 7, 1000, 65_536])
def test_batch_size_sets_the_rows_of_each_batch(
    many_files: tuple[Path, dict[int, list[int]]], batch_size: int
) -> None:
    """No batch holds more than ``batch_size`` rows, and the rows and their order
    are the scan's, whatever the size (DVs applied)."""
    root, deleted = many_files
    batches = list(DeltaTable(str(root)).scan(batch_size=batch_size))
    assert max(b.num_rows for b in batches) <= batch_size
    ids = [i for b in batches for i in b.column("id").to_pylist()]
    assert ids == _ids_without(deleted)
    if batch_size == 1:
        assert len(batches) == len(ids)


@pytest.mark.parametrize(("bad", "error"), [(0, ValueError), (-1, ValueError), (True, TypeError)])
def test_batch_size_must_be_a_positive_integer(
    many_files: tuple[Path, dict[int, list[int]]], bad: object, error: type
) -> None:
    with pytest.raises(error, match="batch_size"):
        DeltaTable(str(many_files[0])).scan(batch_size=bad)  # type: ignore[arg-type]


def test_missing_file_mid_stream_raises_file_not_found(
    many_files: tuple[Path, dict[int, list[int]]],
) -> None:
    root, _ = many_files
    t = DeltaTable(str(root))
    victim = sorted(t.files())[FILES // 2]
    (root / victim).unlink()
    reader = t.scan(prefetch_files=1)
    got = 0
    with pytest.raises(FileNotFoundError, match=victim.split("/")[-1]):
        for batch in reader:
            got += batch.num_rows
    assert got > 0  # the files before it were streamed first


def test_scan_task_read_is_a_stream(many_files: tuple[Path, dict[int, list[int]]]) -> None:
    root, deleted = many_files
    t = DeltaTable(str(root))
    tasks = t.scan_tasks()
    reader = tasks[7].read()
    assert isinstance(reader, pa.RecordBatchReader)
    ids = reader.read_all().column("id").to_pylist()
    assert ids == [7 * ROWS + r for r in range(ROWS) if r not in set(deleted[7])]


@pytest.mark.parametrize("batch_size", [1, 7, 100_000])
def test_scan_task_read_batch_size(
    many_files: tuple[Path, dict[int, list[int]]], batch_size: int
) -> None:
    """``ScanTask.read(batch_size=)`` bounds each batch (the Spark tasks' hand-off
    size); the rows are the task's, in order, DVs applied."""
    root, deleted = many_files
    task = DeltaTable(str(root)).scan_tasks()[7]
    batches = list(task.read(batch_size=batch_size))
    assert max(b.num_rows for b in batches) <= batch_size
    ids = [i for b in batches for i in b.column("id").to_pylist()]
    assert ids == [7 * ROWS + r for r in range(ROWS) if r not in set(deleted[7])]
    for bad, error in [(0, ValueError), (-1, ValueError), (True, TypeError), ("8", TypeError)]:
        with pytest.raises(error, match="batch_size"):
            task.read(batch_size=bad)  # type: ignore[arg-type]


def _row_group_table(root: Path, deleted_rows: list[int]) -> DeltaTable:
    make_table(root, files=1, rows_per_file=4000, deleted={0: deleted_rows}, row_group_size=1000)
    return DeltaTable(str(root))


def test_row_groups_a_dv_empties_are_not_fetched(tmp_path: Path) -> None:
    # Same file shape, same number of deleted rows: in one, all of row groups 1
    # and 2 are deleted; in the other, the deletes are spread over every group.
    emptied = _row_group_table(tmp_path / "emptied", list(range(1000, 3000)))
    spread = _row_group_table(tmp_path / "spread", list(range(0, 4000, 2)))

    def scan_gets(t: DeltaTable) -> tuple[int, list[int]]:
        before = _gets(t)
        ids = t.scan().read_all().column("id").to_pylist()
        return _gets(t) - before, ids

    gets_emptied, ids_emptied = scan_gets(emptied)
    gets_spread, ids_spread = scan_gets(spread)
    assert ids_emptied == list(range(0, 1000)) + list(range(3000, 4000))
    assert ids_spread == list(range(1, 4000, 2))
    # One GET per row group read (its column chunks, coalesced): two fewer.
    assert gets_emptied == gets_spread - 2, (gets_emptied, gets_spread)


def test_pages_a_dv_empties_are_not_fetched(tmp_path: Path) -> None:
    # One file, one row group of 100k rows, plain-encoded (no dictionary page
    # that every read needs) in ~4k-row pages, with an offset index.
    import json

    import pyarrow.parquet as pq

    from deltadv.write import commit_files

    n = 100_000
    root = tmp_path / "t"
    root.mkdir()
    ids = pa.array(range(n), pa.int64())
    data = pa.table({"id": ids, "x": pa.array([i * 0.5 for i in range(n)])})
    pq.write_table(
        data,
        root / "part-0.parquet",
        row_group_size=n,
        use_dictionary=False,
        data_page_size=32 * 1024,
        write_page_index=True,
    )
    add = {
        "path": "part-0.parquet",
        "size": (root / "part-0.parquet").stat().st_size,
        "partitionValues": {},
        "modificationTime": 0,
        "dataChange": True,
        "stats": json.dumps({"numRecords": n}),
    }
    commit_files(str(root), [add], schema=data.schema)
    t = DeltaTable(str(root))

    def scan_bytes() -> tuple[int, list[int]]:
        before = t.request_counts()["bytes_read"]
        got = t.scan().read_all().column("id").to_pylist()
        return t.request_counts()["bytes_read"] - before, got

    whole, got = scan_bytes()
    assert got == list(range(n))
    t.delete("id >= 20000 AND id < 60000")  # 40% of the rows, one run
    emptied, got = scan_bytes()
    assert got == list(range(20_000)) + list(range(60_000, n))
    # Nearly two fifths of the column data are not fetched (the DV, the offset
    # index and the pages the run starts and ends in cost a little).
    assert emptied < 0.7 * whole, (emptied, whole)


def test_long_runs_skipped_short_runs_masked(tmp_path: Path) -> None:
    """Runs of >= 1,024 deleted rows are skipped by the parquet reader, shorter
    ones dropped per batch by a keep-mask: every mix (runs of 1,023 / 1,024 /
    4,000 rows, runs across row-group and batch boundaries, scattered rows, a
    whole row group) gives exactly the live rows, each with its own physical
    row index, with and without the row-index column."""
    n, rg = 50_000, 12_000
    f0 = [
        *range(1000, 5000),  # long
        *range(8190, 8195),  # short, across the first 8,192-row batch's end
        *range(11_990, 12_010),  # short, across a row-group boundary
        *range(20_000, 21_024),  # exactly 1,024
        *range(23_500, 24_600),  # long, across a row-group boundary
        *range(30_000, 31_023),  # 1,023: masked
        *range(40_000, 50_000, 7),  # scattered
        49_999,
    ]
    f1 = [0, 1, *range(12_000, 24_000), *range(30_001, 48_000, 3)]  # a whole row group
    deleted = {0: sorted(set(f0)), 1: f1}
    make_table(tmp_path / "t", files=2, rows_per_file=n, deleted=deleted, row_group_size=rg)
    t = DeltaTable(str(tmp_path / "t"))
    want = _ids_without(deleted, rows=n, files=2)
    assert t.scan(["id"]).read_all().column("id").to_pylist() == want
    got = t.scan_with_row_index(["id", "value"]).read_all()
    assert got.column("id").to_pylist() == want
    assert got.column("value").to_pylist() == [f"v{i}" for i in want]
    assert got.column("_row_index").to_pylist() == [i % n for i in want]
    # Each batch's rows and indexes stay aligned too (not only the whole).
    for batch in t.scan_with_row_index(["id"]):
        ids = batch.column("id").to_pylist()
        assert batch.column("_row_index").to_pylist() == [i % n for i in ids]


def test_masked_strings_in_every_encoding(tmp_path: Path) -> None:
    """Where the keep-mask drops rows, string columns are decoded as dictionary
    keys (every page dictionary-encoded) or as views (plain pages, or a
    dictionary that overflowed mid-chunk) and cast back: each kind gives the
    live rows' exact values, nulls included, typed ``string``."""
    import pyarrow.parquet as pq

    import deltadv
    from deltadv.write import commit_files

    n = 30_000
    ids = list(range(n))
    data = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            # few distinct values and nulls: dictionary pages only
            "d": pa.array([None if i % 11 == 0 else f"d{i % 7}" for i in ids], pa.string()),
            # never dictionary-encoded
            "p": pa.array([None if i % 13 == 0 else f"plain-{i}" for i in ids], pa.string()),
            # a dictionary that outgrows its limit: dictionary pages, then plain
            "f": pa.array([f"fallback-value-{i:08d}" for i in ids], pa.string()),
        }
    )
    root = tmp_path / "t"
    root.mkdir()
    name = "part-00000-strings.parquet"
    pq.write_table(
        data,
        root / name,
        row_group_size=12_000,
        use_dictionary=["d", "f"],
        dictionary_pagesize_limit=8192,
        data_page_size=4096,
    )
    chunks = pq.ParquetFile(root / name).metadata.row_group(0)
    encodings = {
        chunks.column(c).path_in_schema: set(chunks.column(c).encodings) for c in (1, 2, 3)
    }
    # (the chunk's list names the dictionary page's PLAIN too: "f" is told
    # from "d" by its data, 23-byte distinct strings overflowing 8 KiB)
    assert "RLE_DICTIONARY" in encodings["d"], encodings
    assert "RLE_DICTIONARY" not in encodings["p"], encodings
    assert "RLE_DICTIONARY" in encodings["f"], encodings

    # short runs (masked, not skipped) in every row group, one long run
    deleted = sorted({*range(0, n, 5), *range(3, n, 17), *range(15_000, 17_500)})
    (dv,) = deltadv.write_deletion_vectors(str(root), [deltadv.DeletionVector(deleted)])
    add = {
        "path": name,
        "partitionValues": {},
        "size": (root / name).stat().st_size,
        "modificationTime": 0,
        "dataChange": True,
        "stats": json.dumps({"numRecords": n}),
        "deletionVector": dv.to_json(),
    }
    commit_files(str(root), [add], schema=data.schema)

    live = sorted(set(ids) - set(deleted))
    want = data.take(pa.array(live))
    got = DeltaTable(str(root)).scan(["id", "d", "p", "f"]).read_all()
    assert got.schema == want.schema
    assert got.equals(want)
    # and batch by batch, with the row index beside the values
    for batch in DeltaTable(str(root)).scan_with_row_index(["d", "p", "f"]):
        rows = batch.column("_row_index").to_pylist()
        assert batch.column("d").to_pylist() == data.column("d").take(rows).to_pylist()
        assert batch.column("p").to_pylist() == data.column("p").take(rows).to_pylist()
        assert batch.column("f").to_pylist() == data.column("f").take(rows).to_pylist()


def _in_subprocess(root: Path, env: dict[str, str], code: str) -> Any:
    """Run ``code`` in a fresh interpreter whose environment adds ``env``, with
    ``root`` as ``ROOT`` and json and deltadv imported: a fresh runtime, sized by
    ``DELTADV_NUM_THREADS`` from the start. Its finished process (rc 0 asserted)."""
    import os
    import subprocess
    import sys

    prelude = f"import json, deltadv\nROOT = {str(root)!r}\n"
    done = subprocess.run(
        [sys.executable, "-c", prelude + code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def _scan_in_subprocess(root: Path, env: dict[str, str], code: str) -> Any:
    """:func:`_in_subprocess` of ``code``, which prints one JSON line: its value."""
    return json.loads(_in_subprocess(root, env, code).stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("threads", [1, 4])
def test_threads_and_order_do_not_change_the_rows(tmp_path: Path, threads: int) -> None:
    # 12 files of 4 row groups each, DVs in several files, one file all deleted:
    # in order, the rows are those of the table in file order; unordered, the
    # same rows (as a multiset); ScanTask.read likewise.
    rows = 2000
    deleted = {
        1: [0, 5, 999, 1000, 1001],
        4: list(range(0, rows)),
        7: list(range(0, rows, 2)),
        9: list(range(480, 1530)),
    }
    make_table(tmp_path / "t", files=FILES, rows_per_file=rows, deleted=deleted, row_group_size=500)
    got = _scan_in_subprocess(
        tmp_path / "t",
        {"DELTADV_NUM_THREADS": str(threads)},
        "t = deltadv.DeltaTable(ROOT)\n"
        "ordered = t.scan().read_all().column('id').to_pylist()\n"
        "unordered = t.scan(ordered=False).read_all().column('id').to_pylist()\n"
        "task = [x for x in t.scan_tasks() if x.deleted_rows == 1050][0]\n"
        "task_ids = task.read().read_all().column('id').to_pylist()\n"
        "task_unordered = task.read(ordered=False).read_all().column('id').to_pylist()\n"
        "print(json.dumps([deltadv.num_threads(), ordered, unordered, task_ids, task_unordered]))",
    )
    n, ordered, unordered, task_ids, task_unordered = got
    want = _ids_without(deleted, rows=rows)
    assert n == threads
    assert ordered == want
    assert sorted(unordered) == want and len(unordered) == len(want)
    file9 = [9 * rows + r for r in range(rows) if not 480 <= r < 1530]
    assert task_ids == file9
    assert sorted(task_unordered) == file9


def test_num_threads_setting(tmp_path: Path) -> None:
    make_table(tmp_path / "t", files=2, rows_per_file=10, deleted={})
    got = _scan_in_subprocess(
        tmp_path / "t",
        {"DELTADV_NUM_THREADS": "3"},
        "from_env = deltadv.num_threads()\n"
        "deltadv.set_num_threads(2)\n"  # before the runtime exists: any number
        "deltadv.set_num_threads(5)\n"
        "rows = deltadv.DeltaTable(ROOT).to_pyarrow_table().num_rows\n"  # built with 5
        "deltadv.set_num_threads(1)\n"  # fewer: taken at once
        "fewer = deltadv.num_threads()\n"
        "rows_1 = deltadv.DeltaTable(ROOT).to_pyarrow_table().num_rows\n"
        "try:\n"
        "    deltadv.set_num_threads(6)\n"
        "    more = 'accepted'\n"
        "except ValueError as e:\n"
        "    more = str(e)\n"
        "print(json.dumps([from_env, rows, fewer, rows_1, more, deltadv.num_threads()]))",
    )
    from_env, rows, fewer, rows_1, more, after = got
    assert from_env == 3
    assert (rows, fewer, rows_1) == (20, 1, 20)
    assert "5 worker threads" in more and "DELTADV_NUM_THREADS=6" in more, more
    assert after == 1  # a refused setting changes nothing


def _jemalloc_arenas(root: Path, threads: int, code: str) -> int:
    """The arenas jemalloc has at the exit of a fresh interpreter that ran
    ``code`` with ``threads`` threads (its statistics, printed as JSON)."""
    import re

    done = _in_subprocess(
        root,
        {
            "DELTADV_NUM_THREADS": str(threads),
            # the extension's jemalloc (symbols prefixed _rjem_) reads this
            "_RJEM_MALLOC_CONF": "stats_print:true,stats_print_opts:J,narenas:8",
        },
        code,
    )
    counts = re.findall(r'"arenas":\{"narenas":(\d+)', done.stderr)
    assert len(counts) == 1, done.stderr[-2000:]
    return int(counts[0])


def test_runtime_threads_share_allocator_arenas(tmp_path: Path) -> None:
    # jemalloc's automatic arenas (8 here) and its arena for huge allocations,
    # then one arena per 4 threads of deltadv's runtime (src/python/alloc.rs):
    # an arena per thread kept ~30 MB a thread at 16 threads (issue 28).
    make_table(tmp_path / "t", files=3, rows_per_file=1000, deleted={1: [3, 4]})
    scan = "assert deltadv.DeltaTable(ROOT).to_pyarrow_table().num_rows == 2998"
    before = _jemalloc_arenas(tmp_path / "t", 16, "pass")  # no runtime yet
    assert _jemalloc_arenas(tmp_path / "t", 1, scan) == before + 1
    assert _jemalloc_arenas(tmp_path / "t", 8, scan) == before + 2
    assert _jemalloc_arenas(tmp_path / "t", 16, scan) == before + 4


@pytest.mark.parametrize("bad", [0, -2])
def test_num_threads_must_be_positive(bad: int) -> None:
    import deltadv

    before = deltadv.num_threads()
    with pytest.raises(ValueError, match="at least 1"):
        deltadv.set_num_threads(bad)
    assert deltadv.num_threads() == before


def _as_views(t: pa.DataType) -> pa.DataType:
    """``t`` with its strings and binaries, at any depth, as views."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pa.string_view()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return pa.binary_view()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_as_views(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_as_views(t.key_type), _as_views(t.item_type))
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_as_views(t.value_type)))
    return t


@pytest.mark.parametrize("column_mapping", ["none", "name"])
def test_strings_as_views(tmp_path: Path, column_mapping: str) -> None:
    """``string_view=True`` returns every string and binary (partition values,
    struct fields, list items, map keys and values) as views, with the values
    of the plain read, with and without deletion vectors, filters on string
    columns (compared as views, or through an expression), limits and the
    metadata columns (which keep their types)."""
    from deltadv.write import write_table

    n = 3000
    data = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "part": pa.array([f"p{i % 3}" for i in range(n)]),
            "s": pa.array([None if i % 11 == 0 else f"name-{i % 97}" for i in range(n)]),
            "long": pa.array([f"a string longer than twelve bytes {i}" for i in range(n)]),
            "b": pa.array([bytes([65 + i % 26]) * (i % 20) for i in range(n)], pa.binary()),
            "st": pa.array(
                [{"x": f"x{i % 5}", "y": i} for i in range(n)],
                pa.struct([("x", pa.string()), ("y", pa.int64())]),
            ),
            "l": pa.array([[f"e{i % 4}", "f"] for i in range(n)], pa.list_(pa.string())),
            "m": pa.array(
                [[(f"k{i % 2}", f"v{i}")] for i in range(n)], pa.map_(pa.string(), pa.string())
            ),
        }
    )
    config = {"delta.columnMapping.mode": column_mapping} if column_mapping != "none" else {}
    path = str(tmp_path / "t")
    write_table(
        path,
        data,
        partition_by=["part"],
        configuration=config,
        rows_per_file=400,
        row_group_rows=100,
    )
    table = DeltaTable(path)
    # DVs: a long deleted run, scattered single rows
    table.delete("(id >= 100 AND id < 330) OR s = 'name-3' OR id IN (5, 1201, 2999)")
    table = DeltaTable(path)
    views = pa.schema([f.with_type(_as_views(f.type)) for f in table.schema()])

    def check(**kwargs: Any) -> None:
        plain = table.scan(**kwargs).read_all()
        got = table.scan(string_view=True, **kwargs).read_all()
        want_schema = pa.schema(
            [f.with_type(_as_views(f.type)) if f.name in views.names else f for f in plain.schema]
        )
        assert got.schema == want_schema, got.schema
        assert got.num_rows == plain.num_rows > 0
        assert got.cast(plain.schema).equals(plain)

    check()
    check(columns=["s", "id"])
    check(filter="s >= 'name-5' AND part IN ('p0', 'p2')")
    check(filter="st.x = 'x1' OR s IS NULL")
    check(filter="s || 'z' = 'name-8z' OR CAST(b AS STRING) = 'EEEE'")  # expressions
    check(columns=["long", "b"], filter="long > 'a string longer than twelve bytes 2'", limit=50)
    whole = table.to_pyarrow_table(string_view=True)
    assert whole.schema == views
    assert whole.cast(table.schema()).equals(table.to_pyarrow_table())


def test_read_ahead_bytes_is_checked_and_keeps_rows(
    many_files: tuple[Path, dict[int, list[int]]],
) -> None:
    root, deleted = many_files
    t = DeltaTable(str(root))
    for budget in (1, 1 << 20, 256 << 20):
        ids = t.scan(read_ahead_bytes=budget).read_all().column("id").to_pylist()
        assert ids == _ids_without(deleted)
    for bad in (0, -5):
        with pytest.raises(ValueError, match="read_ahead_bytes"):
            t.scan(read_ahead_bytes=bad)
    for wrong in (1.5, True, "1"):
        with pytest.raises(TypeError, match="read_ahead_bytes"):
            t.scan(read_ahead_bytes=wrong)  # type: ignore[arg-type]


def _log_with_files(root: Path, files: int) -> None:
    """A table whose one commit adds ``files`` files (not written: the log is
    what the test reads), each with numRecords in its stats."""
    log = root / "_delta_log"
    log.mkdir(parents=True)
    schema = {
        "type": "struct",
        "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}],
    }
    lines = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "00000000-0000-0000-0000-000000000001",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {},
                "createdTime": 1,
            }
        },
    ]
    lines += [
        {
            "add": {
                "path": f"part-{k:05d}.parquet",
                "partitionValues": {},
                "size": 100 + k,
                "modificationTime": 1,
                "dataChange": True,
                "stats": json.dumps({"numRecords": k % 7 + 1}),
            }
        }
        for k in range(files)
    ]
    (log / "00000000000000000000.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def test_cpu_threads_work_in_a_forked_child(tmp_path: Path) -> None:
    # get_add_actions of 10,000 files at 2 threads parses two ranges on
    # deltadv's CPU pool, one batch each; a child forked after that (as
    # Spark forks its Python workers) gets a pool of its own and the same
    # table (the parent's pool threads do not exist there: no hang).
    _log_with_files(tmp_path / "t", 10_000)
    got = _scan_in_subprocess(
        tmp_path / "t",
        {"DELTADV_NUM_THREADS": "2"},
        "import os, signal, warnings\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "a = deltadv.DeltaTable(ROOT).get_add_actions()\n"
        "r, w = os.pipe()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    signal.alarm(60)\n"
        "    b = deltadv.DeltaTable(ROOT).get_add_actions()\n"
        "    out = [b.num_rows, b.equals(a), b.column('path').num_chunks]\n"
        "    os.write(w, json.dumps(out).encode())\n"
        "    os._exit(0)\n"
        "os.close(w)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "child = json.loads(os.read(r, 1000) or b'null')\n"
        "records = sum(a.column('num_records').to_pylist())\n"
        "print(json.dumps([a.num_rows, a.column('path').num_chunks, records, status, child]))",
    )
    rows, chunks, records, status, child = got
    assert (rows, chunks) == (10_000, 2)
    assert records == sum(k % 7 + 1 for k in range(10_000))
    assert status == 0 and child == [10_000, True, 2]


def test_get_add_actions_does_not_import_pandas(tmp_path: Path) -> None:
    # pa.table() of a stream imports pandas first where it is installed
    # (~0.3 s in a fresh process): get_add_actions reads the stream instead.
    pytest.importorskip("pandas")
    _log_with_files(tmp_path / "t", 50)
    got = _scan_in_subprocess(
        tmp_path / "t",
        {},
        "import sys\n"
        "a = deltadv.DeltaTable(ROOT).get_add_actions()\n"
        "print(json.dumps([a.num_rows, 'pandas' in sys.modules]))",
    )
    assert got == [50, False]
