"""DeletionVectorDescriptor: JSON, validation, paths, reading DV files."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltadv import DeletionVector, DeletionVectorDescriptor, write_deletion_vectors


def test_spec_uuid_path() -> None:
    d = DeletionVectorDescriptor("u", "ab^-aqEH.-t@S}K{vb[*k^", 36, 2, offset=4)
    assert d.unique_id == "uab^-aqEH.-t@S}K{vb[*k^@4"
    assert d.absolute_path("s3://bucket/table/") == (
        "s3://bucket/table/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    )


def test_json_round_trip_from_dict_and_text() -> None:
    js = {
        "storageType": "u",
        "pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA",
        "offset": 1,
        "sizeInBytes": 36,
        "cardinality": 2,
    }
    d = DeletionVectorDescriptor.from_json(js)
    assert d.to_json() == js
    assert (
        DeletionVectorDescriptor.from_json(
            '{"storageType":"u","pathOrInlineDv":'
            '"vBn[lx{q8@P<9BNH/isA","offset":1,'
            '"sizeInBytes":36,"cardinality":2}'
        )
        == d
    )
    assert hash(d) == hash(DeletionVectorDescriptor.from_json(js))


@pytest.mark.parametrize(
    "js",
    [
        {"storageType": "x", "pathOrInlineDv": "a", "sizeInBytes": 1, "cardinality": 1},
        {"storageType": "u", "pathOrInlineDv": "short", "sizeInBytes": 1, "cardinality": 1},
        {"storageType": "i", "pathOrInlineDv": "abcde", "sizeInBytes": 44, "cardinality": 1},
        {"storageType": "i", "pathOrInlineDv": 'ab"de', "sizeInBytes": 4, "cardinality": 1},
        {
            "storageType": "p",
            "pathOrInlineDv": "relative/x.bin",
            "sizeInBytes": 1,
            "cardinality": 1,
        },
        {
            "storageType": "u",
            "pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA",
            "sizeInBytes": -1,
            "cardinality": 1,
        },
        {"storageType": "u", "pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA"},
        "not json",
    ],
)
def test_invalid_descriptors_are_value_errors(js: object) -> None:
    with pytest.raises(ValueError):
        DeletionVectorDescriptor.from_json(js)


def test_write_then_read_many_dvs_in_one_file(tmp_path: Path) -> None:
    dvs = [DeletionVector(range(i, 100_000, 7 + i)) for i in range(5)] + [DeletionVector([2**33])]
    descriptors = write_deletion_vectors(str(tmp_path), dvs, prefix="r7")
    files = {d.absolute_path(str(tmp_path)) for d in descriptors}
    assert len(files) == 1, "all DVs packed into one file"
    (path,) = files
    assert Path(path).parent.name == "r7" and Path(path).name.startswith("deletion_vector_")
    assert descriptors[0].offset == 1
    assert [d.offset for d in descriptors] == sorted(d.offset for d in descriptors)
    for dv, d in zip(dvs, descriptors, strict=True):
        assert d.storage_type == "u" and d.cardinality == dv.cardinality
        assert d.max_row_index == dv.max()
        assert d.read(str(tmp_path)) == dv


def test_missing_dv_file_is_file_not_found(tmp_path: Path) -> None:
    d = DeletionVectorDescriptor("u", "vBn[lx{q8@P<9BNH/isA", 36, 2, offset=1)
    with pytest.raises(FileNotFoundError):
        d.read(str(tmp_path))
