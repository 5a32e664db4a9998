"""One conformance suite for every store deltadv reads and writes: local disk,
memory://, S3 (moto_server), Azure Blob (Azurite) and GCS (fake-gcs-server), the
servers real HTTP servers on 127.0.0.1 started here. Every case runs the same
steps on each store: write a table, DELETE with deletion vectors, read back,
travel to version 0, count the GETs of loading the DVs, race two DELETEs on one
version (put-if-absent commits: the loser retries on top, nothing is
overwritten), and run concurrent writers with no lost commit. Expected rows come
from the input data, never from deltadv's output."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pytest

from deltadv import DeletionVectorDescriptor, DeltaTable
from deltadv.write import write_table
from tests.python import s3server, store_servers

CONTAINER = "conformance"
ROWS = 1000
ROWS_PER_FILE = 250


@dataclass
class Store:
    """Where the tables of one store go: `uri(name)` and its storage options."""

    kind: str
    base: str
    options: dict[str, str] = field(default_factory=dict)
    #: The object keys under a prefix of the container, listed by the server's
    #: own API (not through deltadv); None for memory://, which has no other view.
    listing: Callable[[str], list[str]] | None = None

    def uri(self, name: str) -> str:
        return f"{self.base}/{name}-{uuid.uuid4().hex[:8]}"

    def keys(self, uri: str) -> list[str]:
        """The table's files (relative to its root), as the store itself lists them."""
        assert self.listing is not None
        prefix = uri.removeprefix(self.base).strip("/") + "/"
        return sorted(k.removeprefix(prefix) for k in self.listing(prefix))


@pytest.fixture(scope="session")
def s3_store() -> Iterator[Store]:
    with s3server.s3_server() as endpoint:
        s3 = s3server.client(endpoint)
        s3.create_bucket(Bucket=CONTAINER)

        def listing(prefix: str) -> list[str]:
            pages = s3.get_paginator("list_objects_v2").paginate(Bucket=CONTAINER, Prefix=prefix)
            return [o["Key"] for page in pages for o in page.get("Contents", [])]

        yield Store("s3", f"s3://{CONTAINER}", s3server.storage_options(endpoint), listing)


@pytest.fixture(scope="session")
def azure_store() -> Iterator[Store]:
    with store_servers.azurite_server() as endpoint:
        store_servers.azure_create_container(endpoint, CONTAINER)
        yield Store(
            "azure",
            f"az://{CONTAINER}",
            store_servers.azure_storage_options(endpoint),
            lambda prefix: store_servers.azure_list(endpoint, CONTAINER, prefix),
        )


@pytest.fixture(scope="session")
def gcs_store() -> Iterator[Store]:
    with store_servers.gcs_server() as base:
        store_servers.gcs_create_bucket(base, CONTAINER)
        yield Store(
            "gcs",
            f"gs://{CONTAINER}",
            store_servers.gcs_storage_options(base),
            lambda prefix: store_servers.gcs_list(base, CONTAINER, prefix),
        )


@pytest.fixture(params=["local", "memory", "s3", "azure", "gcs"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    kind = request.param
    if kind == "local":

        def listing(prefix: str) -> list[str]:
            return [
                p.relative_to(tmp_path).as_posix()
                for p in tmp_path.glob(f"{prefix}**/*")
                if p.is_file()
            ]

        return Store(kind, str(tmp_path), listing=listing)
    if kind == "memory":
        return Store(kind, f"memory://conformance-{uuid.uuid4().hex[:8]}")
    return request.getfixturevalue(f"{kind}_store")


def _data(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "value": [f"v{i}" for i in ids]})


def _write(store: Store, name: str) -> str:
    uri = store.uri(name)
    write_table(
        uri, _data(list(range(ROWS))), storage_options=store.options, rows_per_file=ROWS_PER_FILE
    )
    return uri


def _open(store: Store, uri: str, version: int | None = None) -> DeltaTable:
    return DeltaTable(uri, version=version, storage_options=store.options)


def _rows(table: DeltaTable) -> list[tuple[int, str]]:
    t = table.to_pyarrow()
    return sorted(zip(t["id"].to_pylist(), t["value"].to_pylist(), strict=True))


def _expected(ids: set[int] | range) -> list[tuple[int, str]]:
    return [(i, f"v{i}") for i in sorted(ids)]


def _dv_files(table: DeltaTable) -> set[str]:
    out = set()
    for row in table.get_add_actions().to_pylist():
        if row["dv_storage_type"] in ("u", "p"):
            d = DeletionVectorDescriptor(
                row["dv_storage_type"],
                row["dv_path_or_inline_dv"],
                row["dv_size_in_bytes"],
                row["dv_cardinality"],
                offset=row["dv_offset"],
            )
            out.add(d.absolute_path(""))
    return out


def test_write_delete_read_and_time_travel(store: Store) -> None:
    uri = _write(store, "rw")
    t = _open(store, uri)
    assert t.version() == 0
    assert len(t.files()) == ROWS // ROWS_PER_FILE
    assert _rows(t) == _expected(range(ROWS))

    gone = {i for i in range(ROWS) if i % 7 == 0}
    m = t.delete(f"id IN ({', '.join(map(str, sorted(gone)))})")
    assert m["version"] == 1 and m["num_deleted_rows"] == len(gone)
    assert m["num_deletion_vectors_added"] == ROWS // ROWS_PER_FILE
    assert m["num_removed_files"] == 0, "a DELETE with DVs rewrites no data file"

    fresh = _open(store, uri)
    assert fresh.version() == 1
    assert _rows(fresh) == _expected(set(range(ROWS)) - gone)
    assert fresh.count() == ROWS - len(gone)
    dvs = fresh.deletion_vectors()
    assert sorted(i for dv in dvs.values() for i in dv) == sorted(i % ROWS_PER_FILE for i in gone)

    old = _open(store, uri, version=0)
    assert _rows(old) == _expected(range(ROWS))
    assert old.deletion_vectors() == {}
    fresh.load_as_version(0)
    assert fresh.count() == ROWS


def test_loading_dvs_costs_one_get_per_dv_file(store: Store) -> None:
    """Two DELETEs write two DV files; loading every file's DV is one GET each."""
    uri = _write(store, "gets")
    t = _open(store, uri)
    t.delete(f"id < {ROWS_PER_FILE // 2}")  # half of file 0
    t.delete(f"id >= {ROWS - 10}")  # the last rows of file 3
    fresh = _open(store, uri)
    dv_files = _dv_files(fresh)
    assert len(dv_files) == 2
    before = fresh.request_counts()
    dvs = fresh.deletion_vectors()
    after = fresh.request_counts()
    assert after["gets"] - before["gets"] == len(dv_files)
    assert after["puts"] == before["puts"] and after["lists"] == before["lists"]
    assert sum(len(dv) for dv in dvs.values()) == ROWS_PER_FILE // 2 + 10


def test_racing_deletes_never_overwrite_a_commit(store: Store) -> None:
    """Two handles on version 0 delete different rows of one file: the first takes
    version 1; the second's put-if-absent of version 1 is refused, so it rebases on
    the winner and commits version 2. Both deletes stand (an overwritten commit
    would bring the first row back)."""
    uri = _write(store, "race")
    a, b = _open(store, uri), _open(store, uri)
    ma = a.delete("id = 7")
    mb = b.delete("id = 8")
    assert (ma["version"], ma["attempts"], ma["rebases"]) == (1, 1, 0)
    assert mb["version"] == 2 and mb["attempts"] == 2 and mb["rebases"] == 1
    t = _open(store, uri)
    assert t.version() == 2
    assert _rows(t) == _expected(set(range(ROWS)) - {7, 8})
    ops = {h["version"]: h.get("operation") for h in t.history()}
    assert ops == {0: "CREATE TABLE AS SELECT", 1: "DELETE", 2: "DELETE"}
    # Commit 1 is still the first writer's: reading version 1 shows row 8, not row 7.
    assert _rows(_open(store, uri, version=1)) == _expected(set(range(ROWS)) - {7})


WRITERS = 4
ROUNDS = 3


def test_concurrent_writers_lose_no_commit(store: Store) -> None:
    """WRITERS threads, ROUNDS rounds started together on one version: each deletes
    rows only it owns (spread over every file) and, in round 0, appends rows of its
    own. Every commit lands once, versions are gap-free, the rows are exactly the
    model's."""
    uri = _write(store, "writers")
    barrier = threading.Barrier(WRITERS)
    errors: list[str] = []

    def targets(w: int, r: int) -> list[int]:
        return [i for i in range(ROWS) if i % WRITERS == w and (i // WRITERS) % 10 == r]

    def appended(w: int) -> list[int]:
        return list(range(10_000 + w * 100, 10_000 + w * 100 + 5))

    def writer(w: int) -> None:
        try:
            for r in range(ROUNDS):
                barrier.wait(timeout=60)
                ids = ", ".join(map(str, targets(w, r)))
                _open(store, uri).delete(f"id IN ({ids})")
                if r == 0:
                    write_table(
                        uri, _data(appended(w)), mode="append", storage_options=store.options
                    )
        except Exception as e:  # reported by the main thread
            errors.append(f"writer {w}: {e!r}")
            barrier.abort()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not errors, errors
    t = _open(store, uri)
    commits = WRITERS * ROUNDS + WRITERS
    assert t.version() == commits
    history = t.history()
    assert sorted(h["version"] for h in history) == list(range(commits + 1))
    ops = [h.get("operation") for h in history if h["version"] > 0]
    assert ops.count("DELETE") == WRITERS * ROUNDS and ops.count("WRITE") == WRITERS
    gone = {i for w in range(WRITERS) for r in range(ROUNDS) for i in targets(w, r)}
    added = {i for w in range(WRITERS) for i in appended(w)}
    assert len(gone) == WRITERS * ROUNDS * (ROWS // WRITERS // 10)
    assert _rows(t) == _expected((set(range(ROWS)) - gone) | added)


def test_files_land_in_the_store(store: Store) -> None:
    """What deltadv wrote is in the store as the store itself lists it (not
    silently somewhere else): the commits, the data files and the DV file."""
    if store.listing is None:
        pytest.skip("memory:// has no view but deltadv's own")
    uri = _write(store, "where")
    t = _open(store, uri)
    t.delete("id = 3")
    keys = store.keys(uri)
    log = [k for k in keys if k.startswith("_delta_log/")]
    assert log == ["_delta_log/00000000000000000000.json", "_delta_log/00000000000000000001.json"]
    assert sorted(k for k in keys if k.endswith(".parquet")) == sorted(t.files())
    assert [k for k in keys if k.endswith(".bin")] == sorted(p.lstrip("/") for p in _dv_files(t))


def test_column_chunks_of_a_row_group_come_in_one_get(store: Store) -> None:
    """Reading two columns of a row group with a third between them: on object
    stores their chunks are fetched together (one GET per row group, as for one
    column); on a local disk, where a read costs no round trip, each chunk is
    read alone and the column between them is not read at all."""
    uri = store.uri("chunks")
    ids = list(range(ROWS))
    data = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "pad": [f"p{i:06}" for i in ids],
            "x": [i / 2 for i in ids],
        }
    )
    groups = 4
    write_table(uri, data, storage_options=store.options, row_group_rows=ROWS // groups)
    t = _open(store, uri)
    assert len(t.files()) == 1

    def scan_gets(columns: list[str]) -> int:
        before = t.request_counts()["gets"]
        got = t.scan(columns).read_all()
        assert got.column("id").to_pylist() == ids
        return t.request_counts()["gets"] - before

    one_column = scan_gets(["id"])
    two_columns = scan_gets(["id", "x"])
    assert scan_gets(["id", "x"]) == two_columns  # repeatable
    extra = 0 if store.kind != "local" else groups
    assert two_columns == one_column + extra, (one_column, two_columns)
