"""Layering rules checked on the source (issue 11): every write to the Delta log
goes through the Rust core, so no Python module names a file under ``_delta_log``."""

from __future__ import annotations

import ast
import re
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


# --- no generic object write in the bindings --------------------------------------------

#: Name fragments of a generic "store these bytes there" function.
_WRITE_WORDS = ("put", "upload", "write_object", "write_bytes", "store_bytes", "save")
#: Parameter names that mean "a location" and "raw bytes".
_PATH_PARAMS = {"path", "key", "location", "object_path", "name", "dest", "destination"}
_BYTES_PARAMS = {"data", "bytes", "payload", "body", "content", "buf", "buffer", "value"}


def _signature_params(obj: object) -> set[str]:
    import inspect

    try:
        return set(inspect.signature(obj).parameters)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return set()


def _object_writers(module: object) -> list[str]:
    """Callables of ``module`` (functions, and methods of its classes) that look
    like a generic object write: a write-ish name, or a location parameter next
    to a raw-bytes parameter."""
    import inspect

    found = []
    candidates: list[tuple[str, object]] = []
    for name, obj in vars(module).items():
        if inspect.isclass(obj):
            candidates += [
                (f"{name}.{m}", getattr(obj, m)) for m in vars(obj) if callable(getattr(obj, m))
            ]
        elif callable(obj):
            candidates.append((name, obj))
    for name, obj in candidates:
        short = name.rsplit(".", 1)[-1].lower()
        params = _signature_params(obj)
        if any(w in short for w in _WRITE_WORDS) or (
            params & _PATH_PARAMS and params & _BYTES_PARAMS
        ):
            found.append(name)
    return found


def test_core_has_no_generic_object_write() -> None:
    from deltadv import _core

    # the signatures of the native functions are visible to the check
    assert {"table_uri", "data"} <= _signature_params(_core.write_files)
    assert _object_writers(_core) == []


def test_the_object_write_check_would_catch_put_object() -> None:
    """Not vacuous: the old binding's shape, and some variants, are flagged."""
    import types

    fake = types.ModuleType("fake_core")

    def put_object(
        table_uri: str,
        storage_options: dict[str, str],
        path: str,
        data: bytes,
        if_absent: bool = False,
    ) -> bool:
        return True

    def store(table_uri: str, key: str, payload: bytes) -> None:
        return None

    def write_table(
        table_uri: str, storage_options: dict[str, str], data: object, mode: str = "error"
    ) -> int:
        return 0

    fake.put_object = put_object  # type: ignore[attr-defined]
    fake.store = store  # type: ignore[attr-defined]
    fake.write_table = write_table  # type: ignore[attr-defined]
    assert sorted(_object_writers(fake)) == ["put_object", "store"]


# --- no Python module writes data or log files ------------------------------------------

#: Calls that write parquet (or any dataset) files.
_FILE_WRITERS = {
    "write_table",
    "write_to_dataset",
    "write_dataset",
    "ParquetWriter",
    "write_parquet",
}


def _parquet_writes(tree: ast.AST) -> list[str]:
    """Imports of pyarrow's parquet/dataset writers and calls of file writers on
    modules (``pq.write_table(...)``, ``pyarrow.parquet.ParquetWriter(...)``)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name in ("pyarrow.parquet", "pyarrow.dataset")]
        elif isinstance(node, ast.ImportFrom) and node.module in (
            "pyarrow.parquet",
            "pyarrow.dataset",
        ):
            out.append(node.module)
        elif isinstance(node, ast.ImportFrom) and node.module == "pyarrow":
            out += [a.name for a in node.names if a.name in ("parquet", "dataset")]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target = node.func.value
            on_module = isinstance(target, ast.Name) and target.id in ("pq", "ds", "pa", "pyarrow")
            if node.func.attr in _FILE_WRITERS and on_module:
                out.append(f"{target.id}.{node.func.attr}")  # type: ignore[union-attr]
    return out


def test_no_python_module_writes_parquet_files() -> None:
    offenders = {
        m.name: found
        for m in sorted(PACKAGE.glob("*.py"))
        if (found := _parquet_writes(ast.parse(m.read_text())))
    }
    assert not offenders, f"Python code writes parquet files itself: {offenders}"


def test_the_parquet_check_sees_a_writer() -> None:
    code = "import pyarrow.parquet as pq\npq.write_table(t, 'x.parquet')\n"
    assert _parquet_writes(ast.parse(code)) == ["pyarrow.parquet", "pq.write_table"]
    assert _parquet_writes(ast.parse("from pyarrow import parquet\n")) == ["parquet"]
    # deltadv's own write_table (through the Rust core) is not a file writer
    assert (
        _parquet_writes(ast.parse("from deltadv.write import write_table\nwrite_table(u, d)\n"))
        == []
    )


# Spark glue: plain Python over the public API. The package ``deltadv.spark``
# (every module under python/deltadv/spark) is the glue; its own modules, private
# ones included (``deltadv.spark._tasks``), are its own; everything else it uses
# of deltadv must be public.
GLUE = tuple(sorted(p.relative_to(PACKAGE).as_posix() for p in (PACKAGE / "spark").glob("*.py")))
GLUE_OWN_PREFIX = "deltadv.spark"
#: PySpark's handles on the JVM (py4j) and the SparkContext: none of them exists
#: on Spark Connect, so python/deltadv uses none (issue 26): settings come from
#: ``spark.conf``, plans from ``explain``, task rows from ``spark.range``.
JVM_HANDLES = frozenset({"_jdf", "_jsparkSession", "_jvm", "_jsc", "_jc", "sparkContext"})
#: Exceptions, (module, function) -> handles: none left (the DELETE/UPDATE
#: condition's SQL for the history comes from public API on both sessions).
JVM_ALLOWED: dict[tuple[str, str], set[str]] = {}


def _is_glue_own(module: str) -> bool:
    return module == GLUE_OWN_PREFIX or module.startswith(GLUE_OWN_PREFIX + ".")


def _private_uses(source: str) -> list[str]:
    """Private deltadv names a module imports or private attributes it touches
    (``x._raw``, ``dt._table``, ``from deltadv._core import ...``, ``from
    deltadv.write import _f``): a ``_`` attribute of any object but ``self`` or
    ``cls`` (dunders and PySpark's JVM handles apart)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("deltadv"):
            module = node.module or ""
            if _is_glue_own(module):
                continue
            if any(p.startswith("_") for p in module.split(".")):
                found.append(module)
            found += [f"{module}.{a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("deltadv._")]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if node.attr.startswith("__") and node.attr.endswith("__"):
                continue
            if node.attr in JVM_HANDLES:
                continue  # checked by test_no_jvm_handles_in_deltadv
            found.append(f".{node.attr}")
    return found


def test_spark_glue_uses_only_the_public_api() -> None:
    assert {"spark/__init__.py", "spark/read.py", "spark/dml.py", "spark/merge.py"} <= set(GLUE)
    for name in GLUE:
        source = (PACKAGE / name).read_text()
        assert _private_uses(source) == [], name


#: polars glue (issue 28): plain Python over the public API, like the Spark glue.
POLARS_GLUE = "polars.py"


def test_polars_glue_uses_only_the_public_api() -> None:
    source = (PACKAGE / POLARS_GLUE).read_text()
    assert "from deltadv.table import DeltaTable" in source  # the check reads the real module
    assert _private_uses(source) == []


def test_the_public_api_check_sees_private_uses() -> None:
    bad = (
        "from deltadv._core import prepare_delete\n"
        "from deltadv.write import _create\n"
        "import deltadv._core\n"
        "def f(t):\n    return t._raw.add_actions()\n"
    )
    assert _private_uses(bad) == [
        "deltadv._core",
        "deltadv.write._create",
        "deltadv._core",
        "._raw",
    ]
    assert _private_uses("from deltadv.spark._tasks import pack\n") == []
    # another object's private attribute (the old MERGE builder's ``dt._table``)
    assert _private_uses("def f(dt):\n    return dt._table.version()\n") == ["._table"]
    # its own attributes and dunders are fine (JVM handles: test_no_jvm_handles_in_deltadv)
    ok = "def f(self, df):\n    return self._x, df.__class__, df._jdf\n"
    assert _private_uses(ok) == []


def _jvm_uses(source: str) -> list[tuple[str, str]]:
    """(function, handle) for each JVM handle ``source`` touches (``x._jdf``,
    ``spark.sparkContext``, ...) and each import of py4j; function "" at module level."""
    found: list[tuple[str, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Attribute) and node.attr in JVM_HANDLES:
            found.append((function, node.attr))
        elif isinstance(node, ast.Import):
            found.extend((function, "py4j") for a in node.names if a.name.split(".")[0] == "py4j")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "py4j":
            found.append((function, "py4j"))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(source), "")
    return found


def test_no_jvm_handles_in_deltadv() -> None:
    """Spark Connect everywhere (issue 26): no SparkContext, py4j or JVM handle in
    python/deltadv."""
    modules = sorted(PACKAGE.rglob("*.py"))
    assert any(m.name == "_tasks.py" for m in modules)
    seen: set[tuple[str, str]] = set()
    for path in modules:
        name = path.relative_to(PACKAGE).as_posix()
        for function, handle in _jvm_uses(path.read_text()):
            allowed = JVM_ALLOWED.get((name, function), set())
            assert handle in allowed, f"{name}: {function or '<module>'} uses {handle}"
            seen.add((name, function))
    assert seen == set(JVM_ALLOWED), "a stale allowance"


def test_the_jvm_check_sees_handles() -> None:
    bad = (
        "import py4j.java_gateway\n"
        "def f(spark, df):\n"
        "    return spark.sparkContext.defaultParallelism, df._jdf, spark._jsparkSession\n"
        "x = spark._jvm\n"
    )
    assert _jvm_uses(bad) == [
        ("", "py4j"),
        ("f", "sparkContext"),
        ("f", "_jdf"),
        ("f", "_jsparkSession"),
        ("", "_jvm"),
    ]
    assert _jvm_uses("def f(spark):\n    return spark.conf.get('spark.master')\n") == []


# --- no import cycle in python/deltadv ------------------------------------------------


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.AST, module: str, known: set[str]) -> set[str]:
    """The deltadv modules ``module`` imports anywhere in ``tree``: at module level,
    under ``TYPE_CHECKING`` and inside functions alike. ``from pkg import name``
    imports ``pkg.name`` when that is a module, else ``pkg`` (the name is in its
    ``__init__``)."""
    out: set[str] = set()
    is_package = (PACKAGE.parent / module.replace(".", "/")).is_dir()
    here = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: against the importing module's package
                parent = here[: len(here) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            for a in node.names:
                target = f"{base}.{a.name}"
                if target in known:
                    out.add(target)
                elif base in known:
                    out.add(base)
    out.discard(module)
    return out


def _import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    known = set(sources)
    return {m: _imports(ast.parse(s), m, known) for m, s in sources.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path that returns to its start) per strongly connected
    group of modules that import each other, directly or not."""
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                found.append([*path[path.index(n) :], n])
            elif n not in state:
                visit(n)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return found


def test_no_import_cycle_in_the_package() -> None:
    sources = {_module_name(p): p.read_text() for p in sorted(PACKAGE.rglob("*.py"))}
    # the native module (imports no Python module of deltadv at import time)
    sources["deltadv._core"] = ""
    assert {"deltadv", "deltadv.table", "deltadv.spark", "deltadv.spark.merge"} <= set(sources)
    graph = _import_graph(sources)
    # the check sees the package's real edges, lazy ones included
    assert "deltadv.spark.datasource" in graph["deltadv.spark.read"]
    assert "deltadv.merge" in graph["deltadv.table"]
    assert _cycles(graph) == [], _cycles(graph)


def test_the_cycle_check_sees_lazy_and_type_only_imports() -> None:
    """Not vacuous: the two circles deltadv had (``spark.py`` <-> ``_spark_merge.py``
    through an import inside a function, ``table.py`` <-> ``merge.py`` through one
    under TYPE_CHECKING) are found; one-way imports are not cycles."""
    sources = {
        "deltadv": "",
        "deltadv.spark": "def merge():\n    from deltadv._spark_merge import B\n",
        "deltadv._spark_merge": "from deltadv.spark import DeltaTable\n",
        "deltadv.table": "def merge():\n    from deltadv.merge import TableMerger\n",
        "deltadv.merge": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from deltadv.table import DeltaTable\n"
        ),
        "deltadv.write": "from deltadv import _core\nfrom deltadv.table import DeltaTable\n",
    }
    cycles = _cycles(_import_graph(sources))
    assert sorted(sorted(set(c)) for c in cycles) == [
        ["deltadv._spark_merge", "deltadv.spark"],
        ["deltadv.merge", "deltadv.table"],
    ]
    del sources["deltadv.merge"]
    assert len(_cycles(_import_graph(sources))) == 1


# --- no Python module parses task JSON ----------------------------------------------


def _json_parses(tree: ast.AST) -> list[str]:
    """Calls of ``json.loads`` / ``json.load`` (any alias of the json module)."""
    aliases = {"json"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {a.asname or a.name for a in node.names if a.name == "json"}
    return [
        f"{node.func.value.id}.{node.func.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("loads", "load")
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in aliases
    ]


#: Modules that parse JSON which is not a task's: ``write.py`` returns add actions
#: as dicts (its public API), the Spark MERGE and write_table read back JSON their
#: own executor code wrote, ``_sample.py`` edits stats of a sample table.
#: spark/datasource.py: the ``partitionBy`` option given as a JSON list.
#: polars.py: a polars predicate in polars' own JSON form (``Expr.meta.serialize``).
JSON_READERS = {
    "write.py",
    "spark/merge.py",
    "spark/dml.py",
    "spark/datasource.py",
    "_sample.py",
    "polars.py",
}


def test_no_python_module_parses_task_json() -> None:
    """Task JSON is read by the Rust core (``ScanTask.path``, ``.row_groups``,
    ``ChangeTask.paths``, ``CompactTask.paths``...): no other module parses JSON,
    and the ones above never touch a task's (``.json``/``.task``) text."""
    for p in sorted(PACKAGE.rglob("*.py")):
        name = p.relative_to(PACKAGE).as_posix()
        source = p.read_text()
        tree = ast.parse(source)
        if name not in JSON_READERS:
            assert _json_parses(tree) == [], name
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _json_parses(ast.Module([ast.Expr(node)], [])):
                arg = ast.unparse(node.args[0]) if node.args else ""
                assert not arg.endswith((".json", ".task")), (name, arg)


def test_the_json_check_sees_a_parse() -> None:
    code = "import json as j\ndef f(t):\n    return j.loads(t.json)['path']\n"
    assert _json_parses(ast.parse(code)) == ["j.loads"]
    assert _json_parses(ast.parse("import json\njson.dumps({})\n")) == []


# --- Rust layering: tokio and object_store only in io, delta.* keys in one file ---------

SRC = Path(__file__).resolve().parents[2] / "src"

#: Files outside ``src/io`` still allowed to name tokio or object_store: none (a
#: file that needs an object path or a task uses ``crate::io``'s helpers).
RUNTIME_ALLOWED: set[str] = set()
#: Where the runtime and the object store may be named.
RUNTIME_HOMES = ("io/",)

#: Comments, string and char literals: what a source check must not read as code.
_RUST_NON_CODE = re.compile(
    r"//[^\n]*"  # line and doc comments
    r"|/\*.*?\*/"  # block comments
    r'|r(#*)".*?"\1'  # raw strings
    r'|b?"(?:\\.|[^"\\])*"'  # strings
    r"|b?'(?:\\.|[^'\\])'",  # char literals
    re.S,
)
_RUNTIME_NAME = re.compile(r"\b(tokio|object_store)\b")


def _rust_code(source: str) -> str:
    """``source`` with comments and literals blanked (line numbers kept)."""
    return _RUST_NON_CODE.sub(lambda m: "\n" * m.group(0).count("\n"), source)


def _runtime_mentions(source: str) -> list[tuple[int, str]]:
    """(line, name) of each tokio / object_store path or ``use`` in Rust code."""
    code = _rust_code(source)
    return [(code.count("\n", 0, m.start()) + 1, m.group(1)) for m in _RUNTIME_NAME.finditer(code)]


def _rust_files() -> dict[str, str]:
    files = {p.relative_to(SRC).as_posix(): p.read_text() for p in sorted(SRC.rglob("*.rs"))}
    assert len(files) > 40, sorted(files)
    return files


def test_tokio_and_object_store_only_in_io() -> None:
    files = _rust_files()
    assert RUNTIME_ALLOWED <= set(files), "a stale allowance: the file is gone"
    offenders = {
        name: _runtime_mentions(source)
        for name, source in files.items()
        if not name.startswith(RUNTIME_HOMES) and name not in RUNTIME_ALLOWED
    }
    offenders = {name: found for name, found in offenders.items() if found}
    assert not offenders, f"tokio/object_store named outside src/io (use crate::io): {offenders}"
    # the homes do use them, so the scan reads what it should
    assert _runtime_mentions(files["io/runtime.rs"])


def test_the_runtime_check_sees_paths_not_comments() -> None:
    """The check above is not vacuous: it finds uses and paths, not prose or strings."""
    code = (
        "use tokio::sync::Semaphore;\n"
        "// tokio is not named here\n"
        'const S: &str = "object_store::path";\n'
        "/* object_store\n   nor here */\n"
        "fn f() -> object_store::path::Path { todo!() }\n"
        "async fn g() { tokio::time::sleep(d).await }\n"
    )
    assert _runtime_mentions(code) == [(1, "tokio"), (6, "object_store"), (7, "tokio")]
    assert _runtime_mentions('/// Uses tokio.\nlet q = \'"\'; let s = "tokio";\n') == []


#: The one file that spells ``delta.*`` keys (table properties, column metadata,
#: domains); every other module imports them from it.
PROPERTIES_HOME = "log/features/properties.rs"
_DELTA_KEY = re.compile(r'"delta\.')


def _non_test_code(source: str) -> str:
    """The part of a Rust file before its ``#[cfg(test)]`` module."""
    return source.split("#[cfg(test)]", 1)[0]


def test_delta_keys_are_spelled_only_in_properties() -> None:
    files = _rust_files()
    offenders = {
        name: len(_DELTA_KEY.findall(_non_test_code(source)))
        for name, source in files.items()
        if name != PROPERTIES_HOME
    }
    offenders = {name: n for name, n in offenders.items() if n}
    assert not offenders, f"delta.* keys spelled outside {PROPERTIES_HOME}: {offenders}"
    assert len(_DELTA_KEY.findall(files[PROPERTIES_HOME])) > 20


def test_the_key_check_sees_a_key_outside_tests() -> None:
    """The check above is not vacuous: a key in code counts, one in tests does not."""
    code = (
        'const K: &str = "delta.appendOnly";\n#[cfg(test)]\nmod t { const T: &str = "delta.x"; }\n'
    )
    assert _DELTA_KEY.findall(_non_test_code(code)) == ['"delta.']


# --- no import loop among the log modules ------------------------------------------------

_LOG_REF = re.compile(r"\b(crate::log|super(?:::super)*)((?:::\w+)+)")


def _module_path(file: str) -> tuple[str, ...]:
    """``log/features/mod.rs`` -> (log, features); ``log/cdf.rs`` -> (log, cdf)."""
    parts = file.removesuffix(".rs").split("/")
    return tuple(parts[:-1] if parts[-1] == "mod" else parts)


def _log_edges(files: dict[str, str]) -> dict[str, set[str]]:
    """File -> the log files its code (tests apart) refers to, leaving out its own
    parent and children (a folder module and its files are one unit there)."""
    by_module = {_module_path(f): f for f in files}
    edges: dict[str, set[str]] = {f: set() for f in files}
    for file, source in files.items():
        here = _module_path(file)
        for m in _LOG_REF.finditer(_rust_code(_non_test_code(source))):
            head, tail = m.group(1), m.group(2).split("::")[1:]
            if head == "crate::log":
                target = ("log", *tail)
            else:
                up = head.count("super")
                target = (*here[:-up], *tail)
            while target and target not in by_module:
                target = target[:-1]
            related = target[: len(here)] == here or here[: len(target)] == target
            if target and not related:
                edges[file].add(by_module[target])
    return edges


def _a_cycle(edges: dict[str, set[str]]) -> list[str]:
    """One import cycle (its files, the first repeated at the end), or []."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_log_modules_import_each_other_without_a_loop() -> None:
    files = {name: source for name, source in _rust_files().items() if name.startswith("log/")}
    edges = _log_edges(files)
    assert _a_cycle(edges) == []
    # the key home is below everything that reads keys
    assert "log/features/properties.rs" in edges["log/features/mod.rs"] | edges["log/cdf.rs"]
    assert not edges["log/features/properties.rs"] - {"log/actions.rs", "log/interval.rs"}


def test_the_loop_check_sees_a_loop() -> None:
    """The check above is not vacuous: features -> cdf -> features is found; a
    folder module using its own files (and they it) is not a loop."""
    files = {
        "log/features/mod.rs": "use super::cdf::X;\npub use properties::K;\n",
        "log/features/properties.rs": "use super::reader_features;\n",
        "log/cdf.rs": "fn f() { super::features::property_is_true(m, K) }\n",
        "log/actions.rs": "// crate::log::cdf in a comment\n",
    }
    edges = _log_edges(files)
    assert edges["log/cdf.rs"] == {"log/features/mod.rs"}
    assert edges["log/actions.rs"] == set()
    assert _a_cycle(edges) == ["log/cdf.rs", "log/features/mod.rs", "log/cdf.rs"]
    files["log/cdf.rs"] = "use crate::log::features::properties::K;\n"
    assert _a_cycle(_log_edges(files)) == []
