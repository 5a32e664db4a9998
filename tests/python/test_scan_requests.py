"""What a scan asks the store for (issue 28, points 5 and 6), by request counts.

A file's deletion vector is fetched when the file comes into the scan's read-ahead,
with those of the other files of its window of ``prefetch_files`` files (one GET per
DV file the window touches), not all of the table's before the first batch;
``count()`` and ``dv_stats()`` fetch none (cardinalities come from the log); the
reads of scan tasks count in the table that made them. ``limit`` / ``offset`` return
exactly the rows of the unlimited ordered scan they name and open no file past
those needed.

The tables: data files written by deltadv's writer, one row group each, whose DVs
(rows 0 and 7 of each file deleted) are spread over several DV files, each holding
the DVs of a run of consecutive files; and one where Delta Spark wrote the DVs.
"""

from __future__ import annotations

import gc
import json
import pickle
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from deltadv import DeletionVector, DeltaTable, num_threads, write_deletion_vectors
from deltadv.write import commit_files, write_files, write_table

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("value", pa.string())])
FILES, ROWS = 40, 50
DELETED = [0, 7]
LIVE = ROWS - len(DELETED)


def _spread_table(root: Path, files: int, rows: int, per_dv_file: int) -> list[int]:
    """`files` data files of `rows` rows (ids consecutive across files), rows
    DELETED of each deleted by a DV, the DVs of each run of `per_dv_file`
    consecutive files in one DV file. Returns each file's DV file number."""

    def batches() -> Iterator[pa.RecordBatch]:
        for f in range(files):
            ids = pa.array(range(f * rows, (f + 1) * rows), pa.int64())
            yield pa.record_batch([ids, pa.array([f"v{i}" for i in ids.to_pylist()])], SCHEMA)

    adds = write_files(str(root), batches(), schema=SCHEMA, rows_per_file=rows)
    assert len(adds) == files
    dv_file_of = []
    for start in range(0, files, per_dv_file):
        group = adds[start : start + per_dv_file]
        descriptors = write_deletion_vectors(str(root), [DeletionVector(DELETED) for _ in group])
        for add, d in zip(group, descriptors, strict=True):
            add["deletionVector"] = d.to_json()
            stats = json.loads(add["stats"])
            stats["tightBounds"] = False
            add["stats"] = json.dumps(stats)
            dv_file_of.append(start // per_dv_file)
    commit_files(str(root), adds, schema=SCHEMA)
    dv_files = list((root).glob("deletion_vector_*.bin"))
    assert len(dv_files) == len(set(dv_file_of)), dv_files
    return dv_file_of


def _live_ids(files: int = FILES, rows: int = ROWS) -> list[int]:
    return [i for i in range(files * rows) if i % rows not in DELETED]


@pytest.fixture
def spread(tmp_path: Path) -> tuple[Path, list[int]]:
    """40 files of 50 rows, the DVs of each 4 consecutive files in one DV file."""
    root = tmp_path / "spread"
    return root, _spread_table(root, FILES, ROWS, per_dv_file=4)


def _opened(prefetch: int, files: int = FILES) -> tuple[int, int]:
    """(files read, files opened) by a scan stopped after its first batch (files
    of one row group each): the read-ahead window of num_threads() + 1 pieces, one
    file each, and `prefetch` - 1 files opened (footer, DVs) ahead of them."""
    window = num_threads() + 1
    return min(window, files), min(window + prefetch - 1, files)


def _delta(t: DeltaTable, before: dict[str, int]) -> tuple[int, int]:
    """(data and other GETs, DV GETs) made since `before`."""
    after = t.request_counts()
    dv = after["dv_gets"] - before["dv_gets"]
    return after["gets"] - before["gets"] - dv, dv


def _windows_dv_files(dv_file_of: list[int], prefetch: int) -> int:
    """GETs of DV files a full scan makes: per window of `prefetch` files, one
    per DV file its files' DVs are in."""
    return sum(len(set(dv_file_of[i : i + prefetch])) for i in range(0, len(dv_file_of), prefetch))


# --- DVs fetched as their files are read ------------------------------------------


@pytest.mark.parametrize("prefetch", [4, 2])
def test_first_batch_fetches_the_dvs_of_the_window_only(
    spread: tuple[Path, list[int]], prefetch: int
) -> None:
    root, dv_file_of = spread
    t = DeltaTable(str(root))
    before = t.request_counts()
    reader = t.scan(prefetch_files=prefetch)
    first = reader.read_next_batch()
    time.sleep(0.3)  # read-ahead tasks get every chance to run further
    data, dv = _delta(t, before)
    del reader
    assert first.column("id").to_pylist() == _live_ids()[:LIVE]
    # A footer a file opened, and a row group a file read; a GET per DV file of
    # each window of `prefetch` files whose first file was opened (the table has
    # 10 DV files, of 4 files each).
    read, opened = _opened(prefetch)
    assert data == read + opened, (data, read, opened)
    windows = range(0, opened, prefetch)
    assert dv == sum(len(set(dv_file_of[w : w + prefetch])) for w in windows), dv
    if opened + prefetch <= FILES - 4:
        assert dv < len(set(dv_file_of)), dv


@pytest.mark.parametrize(("per_dv_file", "prefetch"), [(4, 4), (4, 2), (3, 4), (10, 3)])
def test_a_full_scan_fetches_each_dv_file_once_per_window(
    tmp_path: Path, per_dv_file: int, prefetch: int
) -> None:
    dv_file_of = _spread_table(tmp_path / "t", FILES, ROWS, per_dv_file)
    t = DeltaTable(str(tmp_path / "t"))
    before = t.request_counts()
    got = t.scan(prefetch_files=prefetch).read_all()
    data, dv = _delta(t, before)
    assert got.column("id").to_pylist() == _live_ids()
    assert dv == _windows_dv_files(dv_file_of, prefetch) < FILES, dv
    assert data == 2 * FILES  # a footer and a row group each


def test_count_and_dv_stats_fetch_nothing(spread: tuple[Path, list[int]]) -> None:
    root, _ = spread
    t = DeltaTable(str(root))
    before = t.request_counts()
    assert t.count() == FILES * LIVE
    stats = t.dv_stats()
    assert stats.column("deleted_rows").to_pylist() == [len(DELETED)] * FILES
    assert t.request_counts() == before


def test_scan_task_reads_count_in_the_table(spread: tuple[Path, list[int]]) -> None:
    root, _ = spread
    t = DeltaTable(str(root))
    tasks = t.scan_tasks()
    before = t.request_counts()
    ids = tasks[5].read().read_all().column("id").to_pylist()
    assert ids == [5 * ROWS + r for r in range(ROWS) if r not in DELETED]
    data, dv = _delta(t, before)
    assert (data, dv) == (2, 1)  # footer, row group; its DV
    # A copy (as pickled to a Spark executor) counts where it is read: not here.
    copy = pickle.loads(pickle.dumps(tasks[6]))
    before = t.request_counts()
    assert copy.read().read_all().num_rows == LIVE
    assert t.request_counts() == before


def test_change_feed_task_reads_count_in_the_table(tmp_path: Path) -> None:
    uri = str(tmp_path / "cdf")
    data = pa.table({"id": pa.array(range(100), pa.int64())})
    write_table(uri, data, configuration={"delta.enableChangeDataFeed": "true"})
    t = DeltaTable(uri)
    t.delete("id < 10")  # a DV: the deleted rows are read back by a change task
    _, changes = t.cdf_tasks(starting_version=1)
    before = t.request_counts()
    rows = sum(task.read().read_all().num_rows for task in changes)
    assert rows == 10
    data_gets, dv_gets = _delta(t, before)
    assert (data_gets, dv_gets) == (2, 1)  # footer, row group; the new DV
    # load_cdf plans the same tasks (the log's GETs, as cdf_tasks makes them),
    # then reads them through one store that counts in the table
    before = t.request_counts()
    t.cdf_tasks(starting_version=1)
    planning, _ = _delta(t, before)
    before = t.request_counts()
    assert t.load_cdf(starting_version=1).read_all().num_rows == 10
    assert _delta(t, before) == (planning + 2, 1)


# --- limit and offset ---------------------------------------------------------------

FILTERS: list[str | None] = [None, "id >= 120 AND value != 'v130'"]


def _expected(filter: str | None) -> list[int]:
    live = _live_ids()
    if filter is None:
        return live
    return [i for i in live if i >= 120 and i != 130]


@pytest.mark.parametrize("filter", FILTERS)
@pytest.mark.parametrize(
    ("offset", "limit"),
    [
        (0, 0),
        (0, 1),
        (0, 5),
        (0, LIVE),
        (0, LIVE + 1),
        (0, 3 * LIVE + 7),
        (0, FILES * LIVE + 100),
        (3, 5),
        (LIVE, 4),
        (LIVE - 2, 10),
        (10 * LIVE + 3, 100),
        (FILES * LIVE - 1, 5),
        (FILES * LIVE + 9, 5),
        (7, None),
    ],
)
def test_limit_and_offset_are_a_slice_of_the_ordered_scan(
    spread: tuple[Path, list[int]], filter: str | None, offset: int, limit: int | None
) -> None:
    root, _ = spread
    t = DeltaTable(str(root))
    everything = t.scan(filter=filter).read_all().column("id").to_pylist()
    assert everything == _expected(filter)  # the ordered scan, checked on its own
    end = None if limit is None else offset + limit
    want = everything[offset:end]
    got = t.scan(filter=filter, limit=limit, offset=offset).read_all()
    assert got.column("id").to_pylist() == want
    assert got.schema == t.scan_schema()
    table = t.to_pyarrow_table(filter=filter, limit=limit, offset=offset)
    assert table.column("id").to_pylist() == want


def test_limit_without_filter_reads_only_the_files_it_needs(
    spread: tuple[Path, list[int]],
) -> None:
    root, _ = spread
    t = DeltaTable(str(root))
    for offset, limit, files in [
        (0, 5, 1),  # the first file holds the 5 rows
        (0, LIVE + 1, 2),
        (10 * LIVE + 3, 5, 1),  # files 0-9 skipped by their row counts in the log
        (10 * LIVE - 1, 2, 2),
    ]:
        before = t.request_counts()
        got = t.scan(limit=limit, offset=offset).read_all().column("id").to_pylist()
        assert got == _live_ids()[offset : offset + limit]
        data, dv = _delta(t, before)
        # Per file: a footer and a row group; one DV file (files of a window of 4
        # share one) -- whatever the read-ahead.
        assert (data, dv) == (2 * files, 1), (offset, limit, data, dv)


def test_limit_with_filter_stops_opening_files(spread: tuple[Path, list[int]]) -> None:
    root, _ = spread
    t = DeltaTable(str(root))
    before = t.request_counts()
    got = t.scan(filter="id >= 0", limit=5, prefetch_files=2).read_all()
    time.sleep(0.3)
    assert got.column("id").to_pylist() == _live_ids()[:5]
    data, dv = _delta(t, before)
    # Rows the log cannot count (a filter): the scan stops once it has them (all
    # in file 0); the read-ahead opened no more than a scan stopped there does.
    read, opened = _opened(2)
    assert data <= read + opened, (data, read, opened)
    assert dv <= (opened + 1) // 2, dv
    full_before = t.request_counts()
    t.scan(filter="id >= 0", prefetch_files=2).read_all()
    assert _delta(t, full_before)[0] == 2 * FILES


def test_limit_zero_reads_no_file(spread: tuple[Path, list[int]]) -> None:
    root, _ = spread
    t = DeltaTable(str(root))
    before = t.request_counts()
    for filter in FILTERS:
        reader = t.scan(["value"], filter=filter, limit=0)
        assert reader.schema == pa.schema([pa.field("value", pa.string())])
        assert reader.read_all().num_rows == 0
    assert t.request_counts() == before


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"limit": -1}, ValueError),
        ({"offset": -3}, ValueError),
        ({"limit": True}, TypeError),
        ({"offset": False}, TypeError),
        ({"limit": 1.5}, TypeError),
        ({"limit": "5"}, TypeError),
        ({"offset": None}, TypeError),
    ],
)
def test_limit_and_offset_must_be_counts(
    spread: tuple[Path, list[int]], kwargs: dict[str, Any], error: type[Exception]
) -> None:
    t = DeltaTable(str(spread[0]))
    name = next(iter(kwargs))
    with pytest.raises(error, match=name):
        t.scan(**kwargs)
    with pytest.raises(error, match=name):
        t.to_pyarrow_table(**kwargs)


# --- a table whose DVs Delta Spark wrote ----------------------------------------------


def test_delta_spark_dvs_fetched_by_window_and_limit(delta_spark: Any, tmp_path: Path) -> None:
    """Delta Spark writes 24 files, then deletes from every one (its DVs in DV
    files of its own making); deltadv's scan, limited or not, returns Spark's rows,
    and the first batch fetched fewer DV files than the table has."""
    path = str(tmp_path / "spark")
    (
        delta_spark.range(0, 2400)
        .repartition(24)
        .sortWithinPartitions("id")
        .write.format("delta")
        .option("delta.enableDeletionVectors", "true")
        .save(path)
    )
    delta_spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    delta_spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 10 = 3")
    spark_ids = sorted(r.id for r in delta_spark.read.format("delta").load(path).collect())
    t = DeltaTable(path)
    dvs = t.deletion_vectors()
    assert len(dvs) == 24
    full_before = t.request_counts()
    ordered = t.scan(prefetch_files=2).read_all().column("id").to_pylist()
    full_dv = _delta(t, full_before)[1]
    assert sorted(ordered) == spark_ids
    for offset, limit in [(0, 5), (150, 200), (len(ordered) - 3, 10)]:
        got = t.scan(limit=limit, offset=offset).read_all().column("id").to_pylist()
        assert got == ordered[offset : offset + limit]
    before = t.request_counts()
    reader = t.scan(prefetch_files=2)
    reader.read_next_batch()
    del reader
    gc.collect()
    time.sleep(0.3)
    _, first_dv = _delta(t, before)
    assert 1 <= first_dv <= full_dv
    assert first_dv < full_dv or num_threads() + 1 + 2 >= 24, (first_dv, full_dv)
