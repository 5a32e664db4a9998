"""Filters in scans: partition pruning, stats-based file skipping and row-group
pruning never drop a matching row, and DVs still hit the right rows (physical row
indexes) when row groups are skipped or files are split into several tasks.

Expected rows are computed here from how the data was generated, not from deltadv."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltadv
from deltadv._sample import make_table

ROWS = 10_000  # per file
GROUP = 1_000  # rows per row group: 10 row groups per file
DELETED = {0: [3, 1500, 5001, 9999], 1: list(range(0, 10_000, 7)), 2: []}


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("filtered") / "t"
    make_table(root, files=3, rows_per_file=ROWS, deleted=DELETED, row_group_size=GROUP)
    return root


def _live_ids() -> list[int]:
    out = []
    for f in range(3):
        gone = set(DELETED.get(f, []))
        out += [f * ROWS + r for r in range(ROWS) if r not in gone]
    return out


def _ids(t: pa.Table) -> list[int]:
    return sorted(t["id"].to_pylist())


CASES = [
    ("id >= 5000 AND id < 6000", lambda i: 5000 <= i < 6000),
    ("id > 9998 AND id <= 10002", lambda i: 9998 < i <= 10002),
    (
        "id IN (3, 4, 1500, 1501, 25000, 29999, 40000)",
        lambda i: i in {3, 4, 1500, 1501, 25000, 29999, 40000},
    ),
    ("NOT (id < 29000)", lambda i: i >= 29000),
    ("id BETWEEN 15000 AND 15010 OR id = 7", lambda i: 15000 <= i <= 15010 or i == 7),
    ("id <> 5 AND id < 10", lambda i: i < 10 and i != 5),
    ("id IS NULL", lambda i: False),
    ("id IS NOT NULL AND id >= 29990", lambda i: i >= 29990),
    ("value = 'v5002'", lambda i: i == 5002),
    ("value >= 'v29995'", lambda i: f"v{i}" >= "v29995"),
    ("5000 > id AND id > 4990", lambda i: 4990 < i < 5000),
]


@pytest.mark.parametrize(("text", "keep"), CASES, ids=[c[0] for c in CASES])
def test_filter_returns_exactly_the_matching_live_rows(table: Path, text: str, keep: Any) -> None:
    t = deltadv.DeltaTable(str(table))
    got = t.to_pyarrow(filter=text)
    assert _ids(got) == [i for i in _live_ids() if keep(i)]
    # values line up with ids (no row shifted by the DV or by skipped row groups)
    assert all(
        v == f"v{i}" for i, v in zip(got["id"].to_pylist(), got["value"].to_pylist(), strict=True)
    )


def test_filter_column_need_not_be_projected(table: Path) -> None:
    got = deltadv.DeltaTable(str(table)).to_pyarrow(columns=["value"], filter="id >= 29995")
    assert got.column_names == ["value"]
    assert sorted(got["value"].to_pylist()) == [f"v{i}" for i in range(29995, 30000)]


def test_pruning_skips_files_and_row_groups(table: Path) -> None:
    everything = deltadv.DeltaTable(str(table))
    everything.to_pyarrow()
    all_gets = everything.request_counts()["gets"]
    narrow = deltadv.DeltaTable(str(table))
    before = narrow.request_counts()["gets"]
    assert _ids(narrow.to_pyarrow(filter="id >= 25000 AND id < 25100")) == list(range(25000, 25100))
    gets = narrow.request_counts()["gets"] - before
    # one file of three (stats), one row group of ten (parquet stats): far fewer reads
    assert gets < all_gets / 3, (gets, all_gets)
    tasks = everything.scan_tasks(filter="id >= 25000 AND id < 25100")
    assert [json.loads(t.json)["path"] for t in tasks] == [_paths(table)[2]]


def _paths(table: Path) -> list[str]:
    commit = (table / "_delta_log" / f"{0:020}.json").read_text().splitlines()
    return [json.loads(line)["add"]["path"] for line in commit if '"add"' in line]


def test_split_tasks_by_row_groups_keep_physical_row_indexes(table: Path) -> None:
    t = deltadv.DeltaTable(str(table))

    def rg_bytes(path: str) -> int:
        rg = pq.ParquetFile(table / path).metadata.row_group(0)
        return sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))

    size = max(rg_bytes(p) for p in _paths(table))
    tasks = t.scan_tasks(split_size=size * 3)
    assert len(tasks) > 3, "files larger than the split size become several tasks"
    groups: dict[str, list[int]] = {}
    for task in tasks:
        spec = json.loads(task.json)
        groups.setdefault(spec["path"], []).extend(spec["row_groups"])
    assert all(sorted(g) == list(range(10)) for g in groups.values()), groups
    ids = sorted(i for task in tasks for i in task.read().read_all()["id"].to_pylist())
    assert ids == _live_ids()
    # split and filtered: row groups ruled out are not planned at all
    narrow = t.scan_tasks(filter="id >= 5000 AND id < 5500", split_size=size)
    assert len(narrow) == 1 and json.loads(narrow[0].json)["row_groups"] == [5]
    rows = narrow[0].read().read_all()
    assert _ids(rows) == [i for i in range(5000, 5500) if i != 5001]


def test_tasks_pickle_with_their_filter(table: Path) -> None:
    import pickle

    tasks = deltadv.DeltaTable(str(table)).scan_tasks(filter="id < 20")
    assert len(tasks) == 1
    again = pickle.loads(pickle.dumps(tasks[0]))
    assert _ids(again.read().read_all()) == [i for i in range(20) if i != 3]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope = 1", "nope"),
        ("id = 'abc'", "does not convert"),
        ("id = ", "cannot parse predicate"),
        ("id % 7 = 0", "cannot parse predicate"),
    ],
)
def test_bad_filters_are_clear_errors(table: Path, text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        deltadv.DeltaTable(str(table)).to_pyarrow(filter=text)


def test_partitions_and_typed_literals(tmp_path: Path) -> None:
    """A partitioned table with date/decimal/timestamp columns written by pyarrow
    and a hand-written log: partition pruning and typed comparisons."""
    import datetime as dt
    import decimal

    root = tmp_path / "p"
    (root / "_delta_log").mkdir(parents=True)
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "day", "type": "date", "nullable": True, "metadata": {}},
            {"name": "amount", "type": "decimal(10,2)", "nullable": True, "metadata": {}},
            {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}},
            {"name": "region", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
    actions: list[dict[str, Any]] = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "x",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": ["region"],
                "configuration": {},
            }
        },
    ]
    expected = []
    for n, region in enumerate(["eu", "us", None]):
        ids = list(range(n * 100, n * 100 + 100))
        data = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in ids]),
                "amount": pa.array([decimal.Decimal(i) / 4 for i in ids], pa.decimal128(10, 2)),
                "ts": pa.array(
                    [
                        dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(hours=i)
                        for i in ids
                    ],
                    pa.timestamp("us", tz="UTC"),
                ),
            }
        )
        name = f"region={region or '__HIVE_DEFAULT_PARTITION__'}/part-{n}.parquet"
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(data, root / name, row_group_size=25)
        actions.append(
            {
                "add": {
                    "path": name,
                    "partitionValues": {"region": region},
                    "size": (root / name).stat().st_size,
                    "modificationTime": 0,
                    "dataChange": True,
                    "stats": json.dumps({"numRecords": 100}),
                }
            }
        )
        expected += [(i, region) for i in ids]
    (root / "_delta_log" / f"{0:020}.json").write_text("\n".join(json.dumps(a) for a in actions))
    t = deltadv.DeltaTable(str(root))

    def ids(text: str) -> list[int]:
        return _ids(t.to_pyarrow(filter=text))

    assert ids("region = 'us'") == list(range(100, 200))
    assert ids("region IS NULL") == list(range(200, 300))
    assert ids("region <> 'us'") == list(range(0, 100))  # NULL <> 'us' is not true
    assert ids("region IN ('eu', 'nope')") == list(range(0, 100))
    assert ids("day = DATE '2024-01-03'") == [2]
    assert ids("day >= '2024-10-26'") == list(range(299, 300))
    assert ids("amount > 74.5") == list(range(299, 300))
    assert ids("amount = 12.25") == [49]
    assert ids("ts >= TIMESTAMP '2024-01-13 10:00:00'") == list(range(298, 300))
    assert ids("ts < '2024-01-01T02:00:00Z'") == [0, 1]
    assert len(t.scan_tasks(filter="region = 'us'")) == 1
    assert len(t.scan_tasks(filter="region IS NULL OR region = 'eu'")) == 2
