"""deltadv's expression tree in its JSON form (a dict), built from Python values.

The tree is documented once, in the Rust crate's ``expr`` module. This module
is its one Python builder: :mod:`deltadv.spark.datasource` turns Spark's pushed
filters into it, and :class:`deltadv.DeltaTable` turns deltalake-style
partition filters (``[("part", "=", "a"), ("year", "in", ["2024"])]``) into it.
Values keep their exact type and value: nothing is rendered as SQL text.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Sequence
from typing import Any

__all__ = [
    "Expression",
    "UnsupportedValue",
    "column",
    "conjunction",
    "literal",
    "partition_filter_tree",
]

#: An expression tree in its JSON form.
Expression = dict[str, Any]

#: Comparison operators of the tree.
COMPARISONS = ("=", "!=", "<", "<=", ">", ">=", "<=>")


class UnsupportedValue(ValueError):
    """A value (or column reference) the expression tree cannot hold."""


def column(path: Sequence[str] | str) -> Expression:
    """A column reference: a top-level name, or the path of a nested field."""
    parts = [path] if isinstance(path, str) else list(path)
    if not parts:
        raise UnsupportedValue("empty column reference")
    return {"column": parts}


def _date(d: dt.date) -> str:
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"


def _time(t: dt.datetime) -> str:
    s = f"{_date(t)} {t.hour:02d}:{t.minute:02d}:{t.second:02d}"
    return s + (f".{t.microsecond:06d}" if t.microsecond else "")


def literal(value: object) -> Expression:
    """A Python value as a literal node, exactly; :class:`UnsupportedValue` for
    what has none.

    Timezone-aware datetimes are ``timestamp`` literals (in UTC), naive ones
    ``timestamp_ntz``. Numbers travel as text: ints and Decimals as their exact
    digits, floats as the shortest text that round-trips (``nan``, ``inf`` and
    ``-inf`` included).
    """
    lit: object
    if value is None:
        lit = "null"
    elif isinstance(value, bool):  # before int: bool is an int
        lit = {"bool": value}
    elif isinstance(value, int):
        lit = {"number": str(value)}
    elif isinstance(value, float):
        lit = {"double": repr(value)}
    elif isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise UnsupportedValue(f"non-finite decimal {value!r}")
        lit = {"number": format(value, "f")}
    elif isinstance(value, str):
        lit = {"string": value}
    elif isinstance(value, (bytes, bytearray)):
        lit = {"binary": bytes(value).hex()}
    elif isinstance(value, dt.datetime):  # before date: datetime is a date
        if value.tzinfo is None or value.utcoffset() is None:
            lit = {"timestamp_ntz": _time(value)}
        else:
            try:
                utc = value.astimezone(dt.timezone.utc)
            except OverflowError:  # within a day of year 1 or 9999
                raise UnsupportedValue(f"timestamp {value!r} out of range in UTC") from None
            lit = {"timestamp": _time(utc) + "Z"}
    elif isinstance(value, dt.date):
        lit = {"date": _date(value)}
    else:
        raise UnsupportedValue(f"no literal for {type(value).__name__} values")
    return {"literal": lit}


def conjunction(parts: Sequence[Expression]) -> Expression | None:
    """The AND of ``parts`` (None when there are none; the part itself for one)."""
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return {"and": list(parts)}


def partition_filter_tree(filters: Sequence[tuple[str, str, Any]]) -> Expression | None:
    """deltalake's partition filters -- ``(column, op, value)`` tuples, ANDed, with
    ``op`` one of ``= != < <= > >= in not in`` -- as one expression tree (None
    for an empty list). ValueError for a malformed filter."""
    parts: list[Expression] = []
    for item in filters:
        if not (isinstance(item, tuple | list) and len(item) == 3):
            raise ValueError(
                f"a partition filter is (column, op, value), e.g. ('part', '=', 'a'); not {item!r}"
            )
        name, op, value = item
        op = str(op).strip().lower()
        if op in ("in", "not in"):
            if isinstance(value, str) or not isinstance(value, Sequence):
                raise ValueError(f"{op!r} takes a list of values, not {value!r}")
            node: Expression = {"in": {"value": column(name), "list": [literal(v) for v in value]}}
            parts.append({"not": node} if op == "not in" else node)
        elif op in ("=", "!=", "<", "<=", ">", ">="):
            parts.append({"cmp": {"op": op, "left": column(name), "right": literal(value)}})
        else:
            raise ValueError(f"unknown partition filter operator {op!r}")
    return conjunction(parts)
