"""Public arguments are checked by type at the boundary (issue 24): a clear
TypeError naming the argument, the expected and the given type, where the
stubs promise a type -- never a silently wrong result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltadv
from deltadv.typecheck import check_arg, check_str_list
from deltadv.write import write_table


def _table(tmp_path: Path) -> str:
    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": list(range(10)), "part": [i % 2 for i in range(10)]}))
    return path


def test_check_arg_names_argument_expected_and_actual() -> None:
    with pytest.raises(TypeError, match=r"limit must be int \| None, not str: 'x'"):
        check_arg("limit", "x", int, optional=True)
    with pytest.raises(TypeError, match="version must be int, not bool"):
        check_arg("version", True, int)
    assert check_arg("flag", True, bool) is True
    assert check_arg("n", None, int, optional=True) is None
    with pytest.raises(TypeError, match=r"columns must be list \| tuple, not str"):
        check_str_list("columns", "id")
    with pytest.raises(TypeError, match="list of str, not one holding int"):
        check_str_list("columns", ["id", 1])


def test_spark_read_refuses_a_dict_for_change_data_feed() -> None:
    """The issue's example: a dict for ``change_data_feed`` used to read the feed
    from version 0; it raises before any Spark work (no session needed)."""
    pytest.importorskip("pyspark")
    from deltadv import spark as dspark

    with pytest.raises(TypeError, match=r"change_data_feed must be bool, not dict"):
        dspark.read(None, "/nowhere", change_data_feed={"starting_version": 2})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"starting_version must be int \| None, not str"):
        dspark.read(None, "/nowhere", change_data_feed=True, starting_version="2")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="columns must be list"):
        dspark.read(None, "/nowhere", columns="id")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="table_uri must be str"):
        dspark.read(None, 3)  # type: ignore[arg-type]


def test_spark_delta_table_checks_its_arguments() -> None:
    pytest.importorskip("pyspark")
    from deltadv import spark as dspark

    with pytest.raises(TypeError, match="table_uri must be str"):
        dspark.DeltaTable.forPath(None, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="storage_options must be Mapping"):
        dspark.DeltaTable(None, "/x", storage_options=["a"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t: t.scan_tasks(columns="id"), "columns must be list"),
        (lambda t: t.scan_tasks(split_size="1"), r"split_size must be int \| None, not str"),
        (lambda t: t.scan_tasks(with_metadata={"a": 1}), "with_metadata must be bool, not dict"),
        (lambda t: t.history(limit="2"), r"limit must be int \| None, not str"),
        (lambda t: t.cdf_tasks(predicate=1), r"predicate must be str \| None, not int"),
        (lambda t: t.merge(pa.table({"id": [1]}), 5), "predicate must be str, not int"),
        (lambda t: t.optimize(partition_filters=5), "partition_filters must be"),
    ],
)
def test_delta_table_checks_its_arguments(tmp_path: Path, call: Any, message: str) -> None:
    t = deltadv.DeltaTable(_table(tmp_path))
    with pytest.raises(TypeError, match=message):
        call(t)


def test_delta_table_constructor_checks(tmp_path: Path) -> None:
    path = _table(tmp_path)
    with pytest.raises(TypeError, match=r"version must be int \| None, not str"):
        deltadv.DeltaTable(path, version="0")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="table_uri must be str"):
        deltadv.DeltaTable(3)  # type: ignore[arg-type]
    assert deltadv.DeltaTable(Path(path)).version() == 0


def test_native_options_refuse_unknown_keywords_and_wrong_types(tmp_path: Path) -> None:
    """The bindings take long option lists as keywords, checked by name and type."""
    from deltadv import _core

    raw = _core.RawDeltaTable(_table(tmp_path))
    with pytest.raises(TypeError, match=r"unexpected keyword argument .nope."):
        raw.scan_tasks(nope=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"argument .split_size."):
        raw.scan_tasks(split_size="x")  # type: ignore[typeddict-item]
    assert len(raw.scan_tasks(split_size=1 << 20)) >= 1
