"""DeletionVector: construction, set operations, serialization."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import deltadv
from deltadv import DeletionVector

SPEC_ROWS = [3, 4, 7, 11, 18, 29]
SPEC_INLINE = "^Bg9^0rr910000000000iXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"
MAX_ROW = (2**31 - 1) * 2**32 + 2**32 - 1


@pytest.mark.parametrize(
    "rows",
    [
        SPEC_ROWS,
        [*reversed(SPEC_ROWS), 3, 3],
        set(SPEC_ROWS),
        np.array(SPEC_ROWS, dtype=np.uint64),
        np.array(SPEC_ROWS, dtype=np.int32),
        np.array(SPEC_ROWS[::-1], dtype=np.int64),
        pa.array(SPEC_ROWS, type=pa.int64()),
        pa.chunked_array([[3, 4, 7], [11, 18, 29]]),
        (r for r in SPEC_ROWS),
    ],
    ids=["list", "unsorted-dups", "set", "u64", "i32", "i64", "arrow", "chunked", "gen"],
)
def test_builds_from_many_inputs(rows: object) -> None:
    dv = DeletionVector(rows)
    assert list(dv) == SPEC_ROWS
    assert dv.cardinality == len(dv) == 6
    assert dv == DeletionVector(SPEC_ROWS)


def test_range_fast_path_and_queries() -> None:
    dv = DeletionVector(range(10, 1_000_010))
    assert dv.cardinality == 1_000_000
    assert 10 in dv and 1_000_009 in dv
    assert 9 not in dv and 1_000_010 not in dv and -1 not in dv and "x" not in dv
    assert dv.min() == 10 and dv.max() == 1_000_009
    arr = dv.to_numpy()
    assert arr.dtype == np.uint64 and arr.shape == (1_000_000,)
    assert np.array_equal(arr, np.arange(10, 1_000_010, dtype=np.uint64))
    assert not DeletionVector() and DeletionVector().min() is None


def test_large_to_numpy_of_a_built_set() -> None:
    # 4M+ rows of a set built in memory are written straight into numpy's array;
    # they span 32-bit buckets and mix runs with scattered rows
    rows = np.concatenate(
        [
            np.arange(0, 3_000_000, 3, dtype=np.uint64),
            np.arange(2**32, 2**32 + 3_500_000, dtype=np.uint64),
        ]
    )
    dv = DeletionVector(rows)
    assert dv.cardinality == len(rows) > 1 << 22
    arr = dv.to_numpy()
    assert arr.dtype == np.uint64 and np.array_equal(arr, rows)


def test_set_operations() -> None:
    a = DeletionVector([1, 2, 3, 2**40])
    b = DeletionVector([3, 4])
    assert list(a.union(b)) == [1, 2, 3, 4, 2**40] == list(a | [3, 4])
    assert list(a.difference(b)) == [1, 2, 2**40] == list(a - b)
    assert list(a & range(0, 3)) == [1, 2]


@pytest.mark.parametrize(
    "bad", [[-1], [1, -5], np.array([-2]), ["a"], [1.5], np.array([1.0, 2.0]), [MAX_ROW + 1]]
)
def test_bad_rows_are_value_errors(bad: object) -> None:
    with pytest.raises((ValueError, OverflowError)):
        DeletionVector(bad)


def test_largest_row_index_round_trips() -> None:
    dv = DeletionVector([0, MAX_ROW])
    assert DeletionVector.deserialize(dv.serialize()) == dv


def test_spec_inline_vector() -> None:
    desc = DeletionVector(SPEC_ROWS).to_inline_descriptor()
    assert desc.storage_type == "i"
    assert desc.path_or_inline_dv == SPEC_INLINE
    assert desc.size_in_bytes == 44 and desc.cardinality == 6 and desc.offset is None
    assert desc.unique_id == "i" + SPEC_INLINE
    assert list(desc.read("/unused")) == SPEC_ROWS


def test_protocol_md_native_example() -> None:
    raw = deltadv.z85_decode("wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", 40)
    assert list(DeletionVector.deserialize(raw)) == SPEC_ROWS


def test_pickle_round_trip() -> None:
    dv = DeletionVector([5, 2**35])
    assert pickle.loads(pickle.dumps(dv)) == dv


rows_strategy = st.lists(
    st.one_of(st.integers(0, 200_000), st.integers(0, 2**36), st.integers(0, MAX_ROW)),
    max_size=300,
)


@given(rows_strategy)
def test_serialize_round_trip(rows: list[int]) -> None:
    dv = DeletionVector(rows)
    assert list(DeletionVector.deserialize(dv.serialize())) == sorted(set(rows))


@given(st.binary(max_size=64))
def test_z85_round_trip(data: bytes) -> None:
    text = deltadv.z85_encode(data)
    assert len(text) == -(-len(data) // 4) * 5
    assert deltadv.z85_decode(text, len(data)) == data


def test_z85_every_length() -> None:
    for n in range(65):
        data = bytes((i * 53 + 7) % 256 for i in range(n))
        assert deltadv.z85_decode(deltadv.z85_encode(data), n) == data
