"""Differential test against CRoaring (pyroaring.BitMap64): our bytes decode there and
theirs decode here. Our layout is CRoaring's 64-bit portable format behind a 4-byte magic."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap64

from deltadv import DeletionVector

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
