"""MERGE from Python: :class:`TableMerger`, deltalake's builder over the Rust core.

``DeltaTable.merge(source, predicate, ...)`` returns a :class:`TableMerger`;
each ``when_*`` call adds a clause (evaluated in the order added within its
kind: the first whose condition holds acts), and :meth:`TableMerger.execute`
runs the whole MERGE in the Rust core: the source is streamed (a chunk of at
most ``source_chunk_bytes`` at a time), joined with the table, the old copies
of changed rows are marked in their files' DVs (one DV file), new and inserted
rows go to new data files, and one commit records it all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

#: One clause as the core takes it: (kind, action, condition, assignments).
Clause = tuple[str, str, str | None, list[tuple[str, str]]]
_Clause = Clause

#: What runs a built MERGE: ``run(source, predicate, clauses, source_alias,
#: target_alias, options)`` -> metrics (:class:`deltadv.DeltaTable` hands in its
#: own, so this module needs nothing of the table's).
MergeRunner = Callable[[Any, str, list[Clause], str, str, dict[str, Any]], dict[str, Any]]


def _arrow_source(source: Any) -> Any:
    """``source`` as something with ``__arrow_c_stream__`` (pandas converted)."""
    if hasattr(source, "__arrow_c_stream__"):
        return source
    module = type(source).__module__
    if module.startswith("pandas"):
        return pa.Table.from_pandas(source, preserve_index=False)
    if isinstance(source, pa.RecordBatch):
        return pa.Table.from_batches([source])
    raise TypeError(
        "a MERGE source must be Arrow data (a pyarrow Table, RecordBatch or "
        "RecordBatchReader, a polars or pandas DataFrame, or anything with "
        f"__arrow_c_stream__), not {type(source).__name__}"
    )


def _assignments(updates: Mapping[str, str], what: str) -> list[tuple[str, str]]:
    if not isinstance(updates, Mapping) or not updates:
        raise ValueError(f"{what} needs a non-empty mapping of column -> SQL value")
    out = []
    for column, value in updates.items():
        if not isinstance(column, str) or not isinstance(value, str):
            raise TypeError(
                f"{what}: column names and values must be str (SQL), got {column!r}: {value!r}"
            )
        out.append((column, value))
    return out


def _condition(predicate: str | None) -> str | None:
    if predicate is not None and not isinstance(predicate, str):
        raise TypeError(f"a clause predicate must be SQL text (str), not {predicate!r}")
    return predicate


class TableMerger:
    """A MERGE being built; see :meth:`deltadv.DeltaTable.merge`.

    Expressions are SQL in deltadv's grammar over two relations: target columns
    as ``<target_alias>.col``, source columns as ``<source_alias>.col``, a bare
    name when only one side has it. Clause methods return ``self`` for chaining.
    """

    def __init__(
        self,
        run: MergeRunner,
        table_uri: str,
        source: Any,
        predicate: str,
        source_alias: str,
        target_alias: str,
        options: dict[str, Any],
    ) -> None:
        if not isinstance(predicate, str) or not predicate.strip():
            raise ValueError("a MERGE needs a predicate (SQL text such as 't.id = s.id')")
        self._run = run
        self._table_uri = table_uri
        self._source: Any = _arrow_source(source)
        self._predicate = predicate
        self._source_alias = source_alias
        self._target_alias = target_alias
        self._options = options
        self._clauses: list[_Clause] = []

    def _add(
        self,
        kind: str,
        action: str,
        predicate: str | None,
        assignments: list[tuple[str, str]] | None = None,
    ) -> TableMerger:
        self._clauses.append((kind, action, _condition(predicate), assignments or []))
        return self

    def when_matched_update(
        self, updates: Mapping[str, str], predicate: str | None = None
    ) -> TableMerger:
        """``WHEN MATCHED [AND predicate] THEN UPDATE SET col = value, ...``"""
        return self._add("matched", "update", predicate, _assignments(updates, "UPDATE"))

    def when_matched_update_all(self, predicate: str | None = None) -> TableMerger:
        """``WHEN MATCHED [AND predicate] THEN UPDATE SET *``: every target column
        the source has (by name); source columns the table lacks are ignored."""
        return self._add("matched", "update_all", predicate)

    def when_matched_delete(self, predicate: str | None = None) -> TableMerger:
        """``WHEN MATCHED [AND predicate] THEN DELETE``"""
        return self._add("matched", "delete", predicate)

    def when_not_matched_insert(
        self, updates: Mapping[str, str], predicate: str | None = None
    ) -> TableMerger:
        """``WHEN NOT MATCHED [AND predicate] THEN INSERT (cols) VALUES (values)``;
        values may refer to source columns only; other columns are NULL."""
        return self._add("not_matched", "insert", predicate, _assignments(updates, "INSERT"))

    def when_not_matched_insert_all(self, predicate: str | None = None) -> TableMerger:
        """``WHEN NOT MATCHED [AND predicate] THEN INSERT *``"""
        return self._add("not_matched", "insert_all", predicate)

    def when_not_matched_by_source_update(
        self, updates: Mapping[str, str], predicate: str | None = None
    ) -> TableMerger:
        """``WHEN NOT MATCHED BY SOURCE [AND predicate] THEN UPDATE SET ...``;
        target columns only."""
        return self._add(
            "not_matched_by_source", "update", predicate, _assignments(updates, "UPDATE")
        )

    def when_not_matched_by_source_delete(self, predicate: str | None = None) -> TableMerger:
        """``WHEN NOT MATCHED BY SOURCE [AND predicate] THEN DELETE``"""
        return self._add("not_matched_by_source", "delete", predicate)

    def execute(self) -> dict[str, Any]:
        """Run the MERGE; one commit (none when nothing changes). Returns Delta
        Spark's MERGE metrics in snake_case (``num_target_rows_updated``,
        ``num_target_rows_inserted``, ``num_target_deletion_vectors_added``,
        ``num_source_rows``, ...) plus ``version``; the table object moves to the
        new version. A source is consumed once: a merger runs once."""
        if self._source is None:
            raise RuntimeError("this MERGE already ran (its source was consumed)")
        source, self._source = self._source, None
        return self._run(
            source,
            self._predicate,
            self._clauses,
            self._source_alias,
            self._target_alias,
            self._options,
        )

    def __repr__(self) -> str:
        return (
            f"TableMerger({self._table_uri!r}, predicate={self._predicate!r}, "
            f"clauses={len(self._clauses)})"
        )
