"""Arguments checked by type at the public boundary.

:func:`check_arg` raises a :class:`TypeError` naming the argument, the type the
signature (and the ``.pyi`` stubs) promise, and the type given -- so a wrong
argument fails where it is passed, not later as a wrong result (e.g. a dict
given for a ``bool`` flag, which is truthy, or a string for a list of columns,
which iterates as characters). ``bool`` is never taken for ``int`` or
``float`` (although Python makes it an ``int``), unless ``bool`` is expected.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["check_arg", "check_args", "check_str_list"]


def _name(t: type | tuple[type, ...] | None) -> str:
    if t is None:
        return "None"
    if isinstance(t, tuple):
        return " | ".join(_name(x) for x in t)
    return t.__name__


def check_arg(
    name: str, value: Any, expected: type | tuple[type, ...], *, optional: bool = False
) -> Any:
    """``value`` if it is an instance of ``expected`` (or None with ``optional``);
    else TypeError: ``"<name> must be <expected>, not <type>: <value>"``."""
    if value is None and optional:
        return value
    types = expected if isinstance(expected, tuple) else (expected,)
    ok = isinstance(value, types)
    if ok and isinstance(value, bool) and bool not in types:
        ok = False  # True is an int to Python, never a number or a version here
    if not ok:
        want = _name(types) + (" | None" if optional else "")
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        raise TypeError(f"{name} must be {want}, not {type(value).__name__}: {shown}")
    return value


def check_args(
    spec: Mapping[str, tuple[Any, type | tuple[type, ...], bool]], *, where: str = ""
) -> None:
    """Check several arguments: ``{name: (value, expected, optional)}``; the
    message names ``where`` (the function) first when given."""
    for name, (value, expected, optional) in spec.items():
        try:
            check_arg(name, value, expected, optional=optional)
        except TypeError as e:
            raise TypeError(f"{where}: {e}" if where else str(e)) from None


def check_str_list(name: str, value: Any, *, optional: bool = True) -> list[str] | None:
    """A list (or tuple) of strings, e.g. column names; a bare string is refused
    (it would iterate as characters)."""
    if value is None and optional:
        return None
    check_arg(name, value, (list, tuple))
    for item in value:
        if not isinstance(item, str):
            raise TypeError(
                f"{name} must be a list of str, not one holding {type(item).__name__}: {item!r}"
            )
    return list(value)
