"""Layering rules checked on the source (issue 11): every write to the Delta log
goes through the Rust core, so no Python module names a file under ``_delta_log``."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "deltadv"


def _code_strings(tree: ast.AST) -> list[str]:
    """String constants in code (docstrings left out), f-string parts included."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_no_python_module_names_a_log_file() -> None:
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) > 5, modules
    offenders = {
        m.name: s
        for m in modules
        for s in _code_strings(ast.parse(m.read_text()))
        if "_delta_log" in s
    }
    assert not offenders, f"Python code names _delta_log files: {offenders}"


def test_the_check_sees_a_log_path_in_code() -> None:
    """The check above is not vacuous: it finds such a string in code, not in docs."""
    code = 'def f(v):\n    """About _delta_log."""\n    return f"_delta_log/{v:020}.json"\n'
    assert any("_delta_log" in s for s in _code_strings(ast.parse(code)))
    assert not any("_delta_log" in s for s in _code_strings(ast.parse('"""_delta_log"""\n')))
