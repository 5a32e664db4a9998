"""polars glue: a lazy scan of a Delta table through polars' IO-plugin API.

``scan_delta`` is a drop-in for ``pl.scan_delta`` where the arguments apply
(``version`` as a number or a point in time, ``storage_options``), and reads
through deltadv: deletion vectors applied as files are read, column mapping,
partition values. :func:`read_delta` is the eager form (``pl.read_delta``).

What polars hands the source, and what is done with it:

* **projection** (``with_columns``): only those columns are read
  (``DeltaTable.scan(columns=...)``), plus the predicate's own;
* **predicate**: polars does not filter again the rows of a source that accepts
  a predicate, so the whole predicate is applied here. What maps to deltadv's
  expression tree -- a comparison of a column (or a struct field) with a
  literal of any type deltadv filters on, ``is_in``, ``is_between``,
  ``is_null``/``is_not_null``, ``eq_missing``/``ne_missing``, a boolean
  column, and ``&``/``|``/``~`` of those; of an AND, the parts that map, also
  inside an OR (see :func:`to_filter`) -- is handed to the scan, where it skips
  partitions, files and row groups and drops rows (its columns decoded first,
  the others only at the rows it keeps). A predicate that maps whole is
  the scan's alone (and ``n_rows`` the scan's limit); otherwise the whole
  predicate is then evaluated by polars on each batch, so what does not map
  (``pl.col("x") * 2 > 3``, string functions, two columns, ...) is applied too,
  with polars' semantics;
* **n_rows**: the scan stops after that many rows (after the predicate);
* **batch_size**: the rows of each frame: the scan's batches are gathered
  into frames of that size (and longer ones cut), without copying.

Strings and binaries are read as Arrow views (``DeltaTable.scan(...,
string_view=True)``), the layout polars keeps them in, so a frame takes them
without a copy.

The predicate is read from its JSON form (``Expr.meta.serialize(format="json")``;
written against polars 2.1): a node this module does not know is not pushed
down, so a polars version that spells a node differently loses pushdown, never
rows. Literals are evaluated by polars itself (the node deserialized and
selected), so their value and type are polars'; one whose JSON form does not
round-trip exactly (NaN and infinities are written as null) is not pushed down.

polars is an optional dependency: ``pip install 'deltadv[polars]'``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import inspect
import io
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

try:
    import polars as pl
except ImportError as error:  # pragma: no cover - exercised in a subprocess
    raise ImportError("deltadv.polars needs polars: pip install 'deltadv[polars]'") from error
import pyarrow as pa

from deltadv.exceptions import UnsupportedPredicateError
from deltadv.expressions import Expression, UnsupportedValue, column, conjunction, literal
from deltadv.table import DeltaTable
from deltadv.typecheck import check_arg, check_str_list

__all__ = ["polars_schema", "read_delta", "scan_delta", "to_filter"]

#: Rows per batch the scan decodes for a whole-table read (at most; fewer when
#: polars asks for smaller frames): 8x the scan's default, as
#: ``to_pyarrow_table`` decodes.
SCAN_BATCH_ROWS = 65_536

#: Rows per frame when polars gives no ``batch_size``.
DEFAULT_BATCH_ROWS = 100_000

#: Decoded bytes each piece of a file may hold ahead of polars in a whole-table
#: read (the scan's default is 4 MiB): row groups of up to about this size decode
#: in parallel ahead of a consumer that takes everything (4 files of 500k rows,
#: ``id, s``: 42 ms at 4 MiB, 28-33 ms at 16-64 MiB on 2 cores).
SCAN_READ_AHEAD_BYTES = 32 << 20

#: A Delta table to read: a path or URI, or an open :class:`deltadv.DeltaTable`.
Source = str | Path | DeltaTable


def scan_delta(
    source: Source,
    *,
    version: int | str | dt.datetime | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> pl.LazyFrame:
    """A lazy scan of the Delta table at ``source`` (deletion vectors applied),
    as ``pl.scan_delta`` gives it.

    ``version`` time-travels: a version number, or the latest commit at or
    before a point in time (``datetime``, naive = UTC, or ISO-8601 text).
    ``storage_options`` takes deltalake's keys (see :class:`deltadv.DeltaTable`).
    ``source`` may also be an open :class:`deltadv.DeltaTable`, read at the
    version it has loaded when the frame is collected (``version`` and
    ``storage_options`` must then be None).

    The table's log is read now (its schema is the frame's schema); data files
    are read when the frame is collected, with projection and predicate
    pushdown and an early stop for ``head``/``limit`` (see the module docs).
    """
    table = _open(source, version, storage_options)
    schema = polars_schema(table.schema())
    names = list(schema.names())

    def io_source(
        with_columns: list[str] | None,
        predicate: pl.Expr | None,
        n_rows: int | None,
        batch_size: int | None,
    ) -> Iterator[pl.DataFrame]:
        return _batches(table, names, schema, with_columns, predicate, n_rows, batch_size)

    from polars.io.plugins import register_io_source

    # the plan's label (polars >= 2.0; an older register_io_source has no such argument)
    label: dict[str, Any] = {
        "explain_name": "deltadv",
        "explain_detail": f"{table.table_uri} @ version {table.version()}",
    }
    accepted = inspect.signature(register_io_source).parameters
    return register_io_source(
        io_source,
        schema=schema,
        is_pure=True,
        **{k: v for k, v in label.items() if k in accepted},
    )


def read_delta(
    source: Source,
    *,
    version: int | str | dt.datetime | None = None,
    columns: list[str] | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> pl.DataFrame:
    """The Delta table at ``source`` (deletion vectors applied) as a polars
    DataFrame, as ``pl.read_delta`` reads it: ``columns`` (all when None) in
    that order; ``version`` and ``storage_options`` as in :func:`scan_delta`."""
    check_str_list("columns", columns)
    table = _open(source, version, storage_options)
    return _frame(table.to_pyarrow_table(columns, string_view=True))


def polars_schema(schema: pa.Schema) -> pl.Schema:
    """An Arrow schema as the polars schema of the frames ``pl.from_arrow`` makes
    of its batches."""
    # from no batches: pyarrow's schema.empty_table() imports pandas (0.3-0.5 s)
    return _frame(pa.Table.from_batches([], schema=schema)).schema


def to_filter(
    predicate: pl.Expr, schema: Mapping[str, Any], *, exact: bool = False
) -> Expression | None:
    """The part of a polars ``predicate`` that deltadv's scan can apply, as an
    expression tree (:mod:`deltadv.expressions`), or None when no part maps.

    Every row the predicate keeps is kept by the result, which may keep more
    (evaluate ``predicate`` on what it returns): of an AND, the parts that map
    are kept (at the top, and inside an OR: ``(a & f(x)) | b`` gives ``a | b``);
    an OR maps when all its operands do, a NOT when its operand maps whole.
    ``schema`` is the polars schema of the columns (names to dtypes): a
    literal is handed over only where it fits its column's type. With
    ``exact``, the tree of the whole predicate (the same rows), or None.
    """
    try:
        tree = json.loads(predicate.meta.serialize(format="json"))
    except Exception:  # an expression polars cannot serialize as JSON
        return None
    translator = _Translator(schema)
    try:
        if exact:
            return translator.tree(tree, exact=True)
        parts = [t for node in _conjuncts(tree) if (t := translator.tree(node)) is not None]
    except Exception:  # JSON of a shape this module does not expect: no pushdown
        return None
    return conjunction(parts)


# --- reading ---------------------------------------------------------------------------


def _open(
    source: Source,
    version: int | str | dt.datetime | None,
    storage_options: Mapping[str, str] | None,
) -> DeltaTable:
    if isinstance(source, DeltaTable):
        if version is not None or storage_options is not None:
            raise ValueError(
                "version and storage_options are for a table URI; an open DeltaTable "
                "is read at its loaded version (use its load_as_version)"
            )
        return source
    check_arg("source", source, (str, Path))
    check_arg("version", version, (int, str, dt.datetime), optional=True)
    check_arg("storage_options", storage_options, Mapping, optional=True)
    options = None if storage_options is None else dict(storage_options)
    if version is None or (isinstance(version, int) and not isinstance(version, bool)):
        return DeltaTable(str(source), version=version, storage_options=options)
    table = DeltaTable(str(source), storage_options=options)
    table.load_as_version(version)
    return table


def _frame(data: pa.Table | pa.RecordBatch) -> pl.DataFrame:
    frame = pl.from_arrow(data, rechunk=False)
    assert isinstance(frame, pl.DataFrame)  # a Table or RecordBatch gives a DataFrame
    return frame


def _gathered(reader: pa.RecordBatchReader, rows: int) -> Iterator[pa.Table]:
    """``reader``'s batches as tables of at least ``rows`` rows (the last one
    shorter), without copying."""
    pending: list[pa.RecordBatch] = []
    count = 0
    for batch in reader:
        pending.append(batch)
        count += batch.num_rows
        if count >= rows:
            yield pa.Table.from_batches(pending, reader.schema)
            pending, count = [], 0
    if pending:
        yield pa.Table.from_batches(pending, reader.schema)


def _batches(
    table: DeltaTable,
    names: list[str],
    schema: pl.Schema,
    with_columns: list[str] | None,
    predicate: pl.Expr | None,
    n_rows: int | None,
    batch_size: int | None,
) -> Iterator[pl.DataFrame]:
    """The frames of one collect: the projection and the predicate applied, at
    most ``n_rows`` rows, cut to ``batch_size``."""
    if n_rows == 0:
        return
    wanted = names if with_columns is None else list(with_columns)
    # batches are gathered into frames of about batch_size rows, so polars'
    # per-frame work (the filter) runs on few large frames; with n_rows, frame
    # by frame, to stop as soon as the rows are there
    rows = 1 if n_rows is not None else batch_size or DEFAULT_BATCH_ROWS
    # A whole scan decodes larger batches (fewer to decode, filter and hand
    # over); one for a few rows, the scan's own
    decode = None if n_rows is not None else min(rows, SCAN_BATCH_ROWS)
    ahead = None if n_rows is not None else SCAN_READ_AHEAD_BYTES

    def scan(read: list[str], tree: Expression | None, limit: int | None) -> pa.RecordBatchReader:
        # at most `limit` rows (no file beyond them opened); strings as views:
        # polars keeps them so, and takes them without a copy
        columns = None if read == names else read
        return table.scan(
            columns,
            tree,
            limit=limit,
            batch_size=decode,
            string_view=True,
            read_ahead_bytes=ahead,
        )

    reader = None
    exact = None if predicate is None else to_filter(predicate, schema, exact=True)
    if predicate is None or exact is not None:
        # no predicate, or one the scan applies whole: the scan's rows are the
        # answer (n_rows its limit)
        try:
            reader = scan(wanted, exact, n_rows)
            predicate = None
        except UnsupportedPredicateError:
            pass  # a literal deltadv refuses for its column (e.g. out of its range)
    read = list(wanted)
    if reader is None:
        assert predicate is not None
        # the predicate's part that maps narrows the scan, polars applies it whole
        read += [c for c in predicate.meta.root_names() if c in schema and c not in read]
        try:
            reader = scan(read, to_filter(predicate, schema), None)
        except UnsupportedPredicateError:
            reader = scan(read, None, None)
    left = n_rows
    try:
        for data in _gathered(reader, rows):
            frame = _frame(data)
            if predicate is not None:
                frame = frame.filter(predicate)
            if read != wanted:
                frame = frame.select(wanted)
            if left is not None:
                frame = frame.head(left)
                left -= frame.height
            if batch_size and frame.height > batch_size:
                yield from frame.iter_slices(batch_size)
            elif frame.height:
                yield frame
            if left == 0:
                break
    finally:
        reader.close()


# --- predicate translation -------------------------------------------------------------

#: polars' comparison operators (``Operator`` in its JSON) -> the tree's.
_COMPARISONS = {
    "Eq": "=",
    "NotEq": "!=",
    "Lt": "<",
    "LtEq": "<=",
    "Gt": ">",
    "GtEq": ">=",
    "EqValidity": "<=>",
}
#: The comparison with its sides swapped (``1 < x`` is ``x > 1``).
_FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<=", "<=>": "<=>"}
_AND = ("And", "LogicalAnd")
_OR = ("Or", "LogicalOr")
#: ``is_between``'s ``closed`` -> the operators of its two ends.
_BETWEEN = {"Both": (">=", "<="), "Left": (">=", "<"), "Right": (">", "<="), "None": (">", "<")}


def _conjuncts(node: Any) -> list[Any]:
    """``a & b & ...`` (binary ANDs, ``pl.all_horizontal``) as its parts."""
    binary = _one(node, "BinaryExpr")
    if isinstance(binary, dict) and binary.get("op") in _AND:
        return _conjuncts(binary.get("left")) + _conjuncts(binary.get("right"))
    function = _one(node, "Function")
    if isinstance(function, dict) and function.get("function") == {"Boolean": "AllHorizontal"}:
        return [part for child in function.get("input", []) for part in _conjuncts(child)]
    return [node]


def _one(node: Any, kind: str) -> Any:
    """The body of ``node`` when it is a ``{kind: body}`` node, else None."""
    if isinstance(node, dict) and len(node) == 1:
        return node.get(kind)
    return None


class _NotMapped(Exception):
    """A node (or a part of it) with no equivalent in deltadv's tree."""


class _Translator:
    """polars' JSON expression nodes -> deltadv's tree, for the columns of ``schema``."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema

    def tree(self, node: Any, exact: bool = False) -> Expression | None:
        """``node`` as a tree that holds for every row ``node`` holds for (it may
        hold for more: an AND keeps the parts that map) or, with ``exact``,
        for exactly those rows; None when there is none."""
        try:
            return self._predicate(node, exact)
        except (_NotMapped, UnsupportedValue):
            return None

    def _all(self, nodes: list[Any], exact: bool) -> Expression:
        """The AND of ``nodes``: of those that map, unless ``exact``."""
        if exact:
            return {"and": [self._predicate(n, exact) for n in nodes]}
        parts = [t for n in nodes if (t := self.tree(n)) is not None]
        if not parts:
            raise _NotMapped(nodes)
        return parts[0] if len(parts) == 1 else {"and": parts}

    def _predicate(self, node: Any, exact: bool) -> Expression:
        binary = _one(node, "BinaryExpr")
        if isinstance(binary, dict):
            op = binary.get("op")
            left, right = binary.get("left"), binary.get("right")
            if op in _AND:
                return self._all([left, right], exact)
            if op in _OR:
                return {"or": [self._predicate(left, exact), self._predicate(right, exact)]}
            if op in _COMPARISONS:
                return self._comparison(_COMPARISONS[op], left, right)
            if op == "NotEqValidity":
                return {"not": self._comparison("<=>", left, right)}
            raise _NotMapped(op)
        function = _one(node, "Function")
        if isinstance(function, dict):
            return self._function(function.get("function"), function.get("input") or [], exact)
        path, dtype = self._column(node)  # a boolean column as the predicate: its true rows
        if dtype != pl.Boolean:
            raise _NotMapped(node)
        return {"cmp": {"op": "=", "left": column(path), "right": literal(True)}}

    def _function(self, function: Any, inputs: list[Any], exact: bool) -> Expression:
        boolean = _one(function, "Boolean")
        if boolean == "Not" and len(inputs) == 1:
            # NOT of a weaker tree would be stronger: the operand must map exactly
            return {"not": self._predicate(inputs[0], True)}
        if boolean in ("IsNull", "IsNotNull") and len(inputs) == 1:
            null: Expression = {"is_null": column(self._column(inputs[0])[0])}
            return null if boolean == "IsNull" else {"not": null}
        if boolean == "AllHorizontal" and inputs:
            return self._all(inputs, exact)
        if boolean == "AnyHorizontal" and inputs:
            return {"or": [self._predicate(i, exact) for i in inputs]}
        is_in = _one(boolean, "IsIn")
        if isinstance(is_in, dict) and len(inputs) == 2:
            return self._is_in(is_in, inputs[0], inputs[1])
        between = _one(boolean, "IsBetween")
        if isinstance(between, dict) and len(inputs) == 3:
            ends = _BETWEEN.get(str(between.get("closed")))
            if ends is None:
                raise _NotMapped(between)
            low, high = ends
            return {
                "and": [
                    self._comparison(low, inputs[0], inputs[1]),
                    self._comparison(high, inputs[0], inputs[2]),
                ]
            }
        raise _NotMapped(function)

    def _is_in(self, options: dict[str, Any], value: Any, values: Any) -> Expression:
        path, dtype = self._column(value)
        items = self._value(values)
        if not isinstance(items, list) or not items:
            raise _NotMapped(values)
        # SQL's ``x IN (1, NULL)`` is NULL where polars' is false (NOT differs),
        # and ``nulls_equal`` matches a null value: neither is pushed down
        if options.get("nulls_equal") or any(v is None for v in items):
            raise _NotMapped(values)
        return {"in": {"value": column(path), "list": [_literal(dtype, v) for v in items]}}

    def _comparison(self, op: str, left: Any, right: Any) -> Expression:
        if _one(left, "Literal") is not None:
            left, right, op = right, left, _FLIPPED[op]
        path, dtype = self._column(left)
        value = self._value(right)
        if value is None and op != "<=>":
            raise _NotMapped(right)  # a comparison with NULL: polars handles it
        lit = {"literal": "null"} if value is None else _literal(dtype, value)
        return {"cmp": {"op": op, "left": column(path), "right": lit}}

    def _column(self, node: Any) -> tuple[list[str], Any]:
        """A column reference (a top-level column, a field of a struct column,
        an integer column cast to Float64 as polars casts it to compare it with
        a float): its path and the type it compares as."""
        name = _one(node, "Column")
        if isinstance(name, str):
            if name not in self.schema:
                raise _NotMapped(node)
            return [name], self.schema[name]
        function = _one(node, "Function")
        if isinstance(function, dict) and len(function.get("input") or []) == 1:
            field = _one(_one(function.get("function"), "StructExpr"), "FieldByName")
            path, dtype = self._column(function["input"][0])
            if isinstance(field, str) and isinstance(dtype, pl.Struct):
                fields = {f.name: f.dtype for f in dtype.fields}
                if field in fields:
                    return [*path, field], fields[field]
            raise _NotMapped(node)
        cast = _one(node, "Cast")
        if isinstance(cast, dict) and cast.get("dtype") == {"Literal": "Float64"}:
            # deltadv compares an integer with a double as doubles, as polars does here
            path, dtype = self._column(cast.get("expr"))
            if dtype.is_integer():
                return path, pl.Float64
        raise _NotMapped(node)

    def _value(self, node: Any) -> Any:
        """A literal node's value, evaluated by polars (a list for a list literal)."""
        body = _one(node, "Literal")
        if body is None:
            raise _NotMapped(node)
        for scalar in (_one(body, "Scalar"), _one(body, "Dyn")):
            # polars writes NaN and infinities as JSON null: not the value itself
            if isinstance(scalar, dict) and any(
                k.startswith("Float") and v is None for k, v in scalar.items()
            ):
                raise _NotMapped(node)
        try:
            expr = pl.Expr.deserialize(io.StringIO(json.dumps(node)), format="json")
        except Exception:
            raise _NotMapped(node) from None
        if json.loads(expr.meta.serialize(format="json")) != node:
            raise _NotMapped(node)  # the JSON form did not hold the literal exactly
        series = pl.select(expr).to_series()
        if series.len() != 1:
            raise _NotMapped(node)
        dtype = series.dtype
        if isinstance(dtype, pl.List | pl.Array):
            inner = series.explode()
            _check_precision(inner)
            return inner.to_list()
        _check_precision(series)
        return series.item()


def _literal(dtype: Any, value: Any) -> Expression:
    if not _fits(dtype, value):
        raise _NotMapped(value)
    return literal(value)


def _check_precision(series: pl.Series) -> None:
    """Nanosecond datetimes beyond whole microseconds have no Python value."""
    dtype = series.dtype
    if isinstance(dtype, pl.Datetime) and dtype.time_unit == "ns":
        if ((series.to_physical().drop_nulls() % 1000) != 0).any():
            raise _NotMapped(series)


def _fits(dtype: Any, value: Any) -> bool:
    """Whether ``value`` compares with a column of polars ``dtype`` as it would in
    deltadv (Spark's rules): same kind of value, and for timestamps the same
    kind (with or without a time zone)."""
    if isinstance(value, bool):
        return dtype == pl.Boolean
    if isinstance(value, int):
        return dtype.is_integer() or dtype.is_float() or dtype.is_decimal()
    if isinstance(value, float):
        return dtype.is_float()
    if isinstance(value, decimal.Decimal):
        return dtype.is_decimal()
    if isinstance(value, str):
        return dtype == pl.String
    if isinstance(value, bytes):
        return dtype == pl.Binary
    if isinstance(value, dt.datetime):
        if not isinstance(dtype, pl.Datetime):
            return False
        return (dtype.time_zone is None) == (value.tzinfo is None)
    if isinstance(value, dt.date):
        return dtype == pl.Date
    return False
