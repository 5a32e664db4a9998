"""``deltadv.MergePlan``: the MERGE rules the Spark MERGE takes from the Rust core
(the in-process MERGE uses the same Rust plan). Expected values are Delta Spark's
names and texts (``operationParameters`` as DESCRIBE HISTORY shows them, metric
names of its MERGE), not deltadv's own output."""

from __future__ import annotations

import json

import pytest

from deltadv import MergePlan

UPSERT = [
    ("matched", "delete", "s.deleted", []),
    ("matched", "update", None, [("t.v", "s.v"), ("ID", "s.id")]),
    ("not_matched", "insert_all", None, []),
]


def test_clause_order_rule_and_shapes_are_checked() -> None:
    with pytest.raises(ValueError, match=r"\[NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION\]"):
        MergePlan(
            "t.id = s.id",
            [("matched", "delete", None, []), ("matched", "update_all", "s.x > 1", [])],
        )
    with pytest.raises(ValueError, match="at least one WHEN clause"):
        MergePlan("t.id = s.id", [])
    with pytest.raises(ValueError, match="WHEN NOT MATCHED clause cannot Delete"):
        MergePlan("t.id = s.id", [("not_matched", "delete", None, [])])
    with pytest.raises(ValueError, match=r"MERGE clause \(matched, upsert\)"):
        MergePlan("t.id = s.id", [("matched", "upsert", None, [])])
    with pytest.raises(ValueError, match="needs at least one column to set"):
        MergePlan("t.id = s.id", [("matched", "update", None, [])])


def test_plan_answers_what_spark_needs() -> None:
    plan = MergePlan("t.id = s.id", UPSERT, target_alias="t", source_alias="s")
    assert [c[:2] for c in plan.clauses] == [
        ("matched", "delete"),
        ("matched", "update"),
        ("not_matched", "insert_all"),
    ]
    assert [plan.change(i) for i in range(3)] == ["delete", "update", "insert"]
    with pytest.raises(IndexError):
        plan.change(3)
    assert plan.reads_whole_table  # it inserts
    assert plan.writes_source_columns  # INSERT *
    assert not plan.deletes_duplicates_once
    only_delete = MergePlan("t.id = s.id", [("matched", "delete", None, [])])
    assert only_delete.deletes_duplicates_once and not only_delete.reads_whole_table


def test_assignments_resolve_names_and_star() -> None:
    plan = MergePlan("t.id = s.id", UPSERT, target_alias="t", source_alias="s")
    table, source = ["id", "v", "extra"], ["ID", "v", "deleted"]
    assert plan.assignments(1, table, source) == [("v", None, "s.v"), ("id", None, "s.id")]
    assert plan.assignments(2, table, source) == [("id", "ID", None), ("v", "v", None)]
    bad = MergePlan("t.id = s.id", [("matched", "update", None, [("nope", "1")])])
    with pytest.raises(ValueError, match=r'"nope", which is not in the target table'):
        bad.assignments(0, table, source)


def test_operation_parameters_and_metrics_as_delta_spark_names_them() -> None:
    plan = MergePlan("t.id = s.id", UPSERT, target_alias="t", source_alias="s")
    params = plan.operation_parameters()
    assert json.loads(params["predicate"]) == ["t.id = s.id"]
    assert json.loads(params["matchedPredicates"]) == [
        {"predicate": "s.deleted", "actionType": "delete"},
        {"actionType": "update"},
    ]
    assert json.loads(params["notMatchedPredicates"]) == [{"actionType": "insert"}]
    assert json.loads(params["notMatchedBySourcePredicates"]) == []
    metrics = plan.metrics([2, 3, 5], 9, materialize_source_ms=1, scan_ms=2, rewrite_ms=3)
    assert metrics == {
        "numSourceRows": 9,
        "numTargetRowsMatchedUpdated": 3,
        "numTargetRowsMatchedDeleted": 2,
        "numTargetRowsNotMatchedBySourceUpdated": 0,
        "numTargetRowsNotMatchedBySourceDeleted": 0,
        "materializeSourceTimeMs": 1,
        "scanTimeMs": 2,
        "rewriteTimeMs": 3,
    }


def test_duplicate_error_is_a_value_error_with_delta_class() -> None:
    plan = MergePlan("t.id = s.id", UPSERT)
    error = plan.duplicate_error("{'id': 4}; row 3 of a.parquet")
    assert isinstance(error, ValueError)
    assert str(error).startswith(f"[{MergePlan.DUPLICATE_MATCH_ERROR}]")
    assert "target row ({'id': 4}; row 3 of a.parquet)" in str(error)
