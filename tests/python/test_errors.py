"""Corrupt DV bytes raise CorruptDeletionVectorError with where/expected/actual."""

from __future__ import annotations

from pathlib import Path

import pytest

import deltadv
from deltadv import (
    CorruptDeletionVectorError,
    DeletionVector,
    DeletionVectorDescriptor,
    DeltaDVError,
)


def _table(tmp_path: Path) -> tuple[DeletionVectorDescriptor, Path]:
    (d,) = deltadv.write_deletion_vectors(str(tmp_path), [DeletionVector([1, 5, 9])])
    return d, Path(d.absolute_path(str(tmp_path)) or "")


def test_hierarchy() -> None:
    assert issubclass(CorruptDeletionVectorError, DeltaDVError)
    assert issubclass(DeltaDVError, Exception)


@pytest.mark.parametrize(
    ("mutate", "words"),
    [
        (lambda b: b"\x02" + b[1:], ["format version", "expected 1, found 2"]),
        (lambda b: b[:4] + bytes([b[4] ^ 1]) + b[5:], ["dataSize", "at byte 1"]),
        (lambda b: b[:-6] + bytes([b[-6] ^ 0x10]) + b[-5:], ["CRC-32", "stored", "computed"]),
        (lambda b: b[:-2], ["truncated"]),
        (lambda b: b"", ["format version"]),
    ],
    ids=["version", "size", "crc", "truncated", "empty"],
)
def test_corrupt_file(tmp_path: Path, mutate, words: list[str]) -> None:  # type: ignore[no-untyped-def]
    d, path = _table(tmp_path)
    path.write_bytes(mutate(path.read_bytes()))
    with pytest.raises(CorruptDeletionVectorError) as err:
        d.read(str(tmp_path))
    message = str(err.value)
    assert path.name in message and "offset 1" in message
    for word in words:
        assert word in message


def test_cardinality_mismatch(tmp_path: Path) -> None:
    d, _ = _table(tmp_path)
    js = d.to_json() | {"cardinality": 4}
    with pytest.raises(CorruptDeletionVectorError, match=r"cardinality.*expected 4.*found 3"):
        DeletionVectorDescriptor.from_json(js).read(str(tmp_path))


def test_huge_size_on_small_file_fails_fast(tmp_path: Path) -> None:
    d, _ = _table(tmp_path)
    js = d.to_json() | {"sizeInBytes": 2**31 - 1}
    with pytest.raises(CorruptDeletionVectorError, match="truncated"):
        DeletionVectorDescriptor.from_json(js).read(str(tmp_path))


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00\x01\x02\x03",
        b"\xd1\xd3\x39\x64" + b"\xff" * 8,
        b"\xd1\xd3\x39\x64\x01" + b"\x00" * 7,
    ],
)
def test_bad_bitmap_bytes(data: bytes) -> None:
    with pytest.raises(CorruptDeletionVectorError):
        DeletionVector.deserialize(data)


def test_inline_group_overflow_is_corrupt() -> None:
    d = DeletionVectorDescriptor("i", "%%%%%", 4, 1)
    with pytest.raises(CorruptDeletionVectorError, match="inline deletion vector"):
        d.read("/unused")


def test_z85_bad_character_is_value_error() -> None:
    with pytest.raises(ValueError, match="character 2"):
        deltadv.z85_decode('ab"de', 4)
