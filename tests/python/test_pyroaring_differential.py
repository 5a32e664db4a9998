"""Differential test against CRoaring (pyroaring.BitMap64): our bytes decode there and
theirs decode here. Our layout is CRoaring's 64-bit portable format behind a 4-byte magic."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap64

from deltadv import DeletionVector
from deltadv.exceptions import CorruptDeletionVectorError

MAGIC = (1681511377).to_bytes(4, "little")
RNG = np.random.default_rng(20261122)


def _sets() -> dict[str, np.ndarray]:
    n = 1_000_000
    runs = np.concatenate([np.arange(s, s + 2_000) for s in range(0, n, 10_000)])
    return {
        "sparse": np.unique(RNG.integers(0, n, n // 1000)),
        "dense": np.flatnonzero(RNG.random(n) < 0.5),
        "runs": runs,
        "beyond-2^32": np.unique(RNG.integers(2**32, 2**32 * 5, 50_000)),
        "mixed-buckets": np.unique(
            np.concatenate([RNG.integers(0, 2**40, 1_000), np.arange(2**33, 2**33 + 70_000)])
        ),
        "empty": np.array([], dtype=np.int64),
    }


@pytest.mark.parametrize(("name", "rows"), list(_sets().items()))
@pytest.mark.parametrize("optimize_runs", [False, True])
def test_both_directions(name: str, rows: np.ndarray, optimize_runs: bool) -> None:
    rows = rows.astype(np.uint64)
    ours = DeletionVector(rows)
    theirs = BitMap64(rows.tolist())
    if optimize_runs:
        theirs.run_optimize()  # CRoaring then writes run containers, roaring-rs never does
    # Theirs -> ours.
    decoded = DeletionVector.deserialize(MAGIC + theirs.serialize())
    assert np.array_equal(decoded.to_numpy(), rows)
    # Ours -> theirs.
    data = ours.serialize()
    assert data[:4] == MAGIC
    back = BitMap64.deserialize(data[4:])
    assert back == theirs
    assert len(back) == len(rows)


@settings(max_examples=200)
@given(st.lists(st.integers(0, 2**36), max_size=500), st.booleans())
def test_random_sets(rows: list[int], optimize_runs: bool) -> None:
    theirs = BitMap64(rows)
    if optimize_runs:
        theirs.run_optimize()
    assert list(DeletionVector.deserialize(MAGIC + theirs.serialize())) == sorted(set(rows))
    assert BitMap64.deserialize(DeletionVector(rows).serialize()[4:]) == theirs


def _containers() -> dict[str, np.ndarray]:
    """Row sets that put each container kind (and mixes) in CRoaring's bytes."""
    key = 2**16
    dense = np.flatnonzero(RNG.random(4 * key) < 0.3)  # > 4096 per key: bitmap
    return {
        "array": np.unique(RNG.integers(0, 50 * key, 3_000)),
        "array-4096": np.arange(0, 4096 * 16, 16),  # the largest array container
        "bitmap-4097": np.arange(0, 4097 * 15, 15),  # the smallest bitmap container
        "bitmap": dense,
        "run": np.concatenate([np.arange(s, s + 700) for s in range(0, 20 * key, 3_000)]),
        "run-full-keys": np.arange(3 * key, 9 * key),
        "mixed": np.unique(
            np.concatenate(
                [
                    dense + 2**32,
                    np.arange(2**33, 2**33 + 5 * key),
                    RNG.integers(2**34, 2**34 + 9 * key, 500),
                    [0, 2**35 - 1],
                ]
            )
        ),
    }


@pytest.mark.parametrize(("name", "rows"), list(_containers().items()))
@pytest.mark.parametrize("optimize_runs", [False, True])
def test_to_numpy_from_croaring_bytes(name: str, rows: np.ndarray, optimize_runs: bool) -> None:
    """to_numpy decodes CRoaring's bytes (cookie 12346, or 12347 with run
    containers) to exactly pyroaring's own export."""
    rows = rows.astype(np.uint64)
    theirs = BitMap64(rows.tolist())
    if optimize_runs:
        theirs.run_optimize()
    data = MAGIC + theirs.serialize()
    dv = DeletionVector.deserialize(data)
    assert len(dv) == dv.cardinality == len(theirs)
    arr = dv.to_numpy()
    assert arr.dtype == np.uint64 and arr.flags.c_contiguous and arr.flags.writeable
    assert np.array_equal(arr, np.frombuffer(theirs.to_array(), dtype=np.uint64))
    assert np.array_equal(arr, rows)
    # The bitmap behind the same DV (built lazily) agrees too.
    assert dv == DeletionVector(rows)
    if len(rows):
        assert dv.min() == theirs.min() and dv.max() == theirs.max()
        assert int(rows[len(rows) // 2]) in dv


@pytest.mark.parametrize(("name", "rows"), list(_containers().items()))
def test_truncated_croaring_bytes_are_refused(name: str, rows: np.ndarray) -> None:
    theirs = BitMap64(rows.astype(np.uint64).tolist())
    theirs.run_optimize()
    data = MAGIC + theirs.serialize()
    cuts = sorted({1, 4, 11, 12, 13, 20, len(data) // 2, len(data) - 2, len(data) - 1})
    for cut in cuts:
        with pytest.raises(CorruptDeletionVectorError):
            DeletionVector.deserialize(data[:cut])
    with pytest.raises(CorruptDeletionVectorError, match="trailing"):
        DeletionVector.deserialize(data + b"\0")


@settings(max_examples=200)
@given(
    st.lists(
        st.one_of(
            st.integers(0, 2**36),
            st.tuples(st.integers(0, 2**34), st.integers(1, 70_000)),
        ),
        max_size=40,
    ),
    st.booleans(),
)
def test_random_sets_to_numpy(parts: list[int | tuple[int, int]], optimize_runs: bool) -> None:
    """Points and ranges (array, bitmap and run containers) decode to pyroaring's rows."""
    theirs = BitMap64()
    for part in parts:
        if isinstance(part, tuple):
            theirs.add_range(part[0], part[0] + part[1])
        else:
            theirs.add(part)
    if optimize_runs:
        theirs.run_optimize()
    arr = DeletionVector.deserialize(MAGIC + theirs.serialize()).to_numpy()
    assert np.array_equal(arr, np.frombuffer(theirs.to_array(), dtype=np.uint64))


@pytest.mark.parametrize("optimize_runs", [False, True])
def test_to_numpy_past_32_mib(optimize_runs: bool) -> None:
    """Outputs of 2^22 rows and more are allocated by numpy and filled in place."""
    theirs = BitMap64()
    theirs.add_range(7, 7 + 2**22)
    theirs.update(np.flatnonzero(RNG.random(2**20) < 0.5).astype(np.uint64) + 2**32)
    if optimize_runs:
        theirs.run_optimize()
    arr = DeletionVector.deserialize(MAGIC + theirs.serialize()).to_numpy()
    assert len(arr) >= 2**22 and arr.flags.owndata and arr.flags.writeable
    assert np.array_equal(arr, np.frombuffer(theirs.to_array(), dtype=np.uint64))
