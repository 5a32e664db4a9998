"""How a cluster's Python workers get deltadv, and the check that they have it.

deltadv's Spark functions run on the executors' Python workers, which import
deltadv while unpickling them. The workers get it one of two ways:

* installed in their Python environment (the interpreter of
  ``spark.pyspark.python`` / ``PYSPARK_PYTHON`` on every node), the same
  version as the client's;
* shipped from the client by :func:`ship`: this installed package (native module
  included) sent with ``spark.addArtifacts(..., archive=True)`` and unpacked as
  ``deltadv`` in the session's files folder, which Spark puts on the workers'
  ``sys.path`` before it unpickles a function.

:func:`require_workers` checks it before deltadv's first job in a session: one
small job (a function pickled by value, which imports deltadv on a worker and
reports its version, Python and platform), its success remembered for the
session. Without deltadv on the workers it raises :class:`WorkerImportError`,
which says what to do, instead of a ``ModuleNotFoundError`` deep in a Python
worker's traceback.
"""

from __future__ import annotations

import atexit
import platform
import shutil
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from deltadv.exceptions import WorkerImportError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The lowest CPython deltadv's native module loads in (an abi3 build for 3.10+).
MIN_PYTHON = (3, 10)

#: The folder name the shipped archive is unpacked as, on the workers' path.
PACKAGE = "deltadv"

_lock = threading.Lock()
#: Sessions whose workers imported deltadv (only successes are remembered).
_ready: set[str] = set()
#: Sessions deltadv was shipped to.
_shipped: set[str] = set()
_archive: list[Path] = []


def session_key(spark: SparkSession) -> str:
    """What a shipped package and a probe's success are remembered under: a Spark
    Connect session's id (each Connect session adds its own artifacts), else the
    application's id (a classic session adds them to the SparkContext)."""
    session_id = getattr(spark, "session_id", None)
    if isinstance(session_id, str) and session_id:
        return f"connect:{session_id}"
    return f"classic:{spark.conf.get('spark.app.id', None)}"


def ship(spark: SparkSession) -> None:
    """Send this client's deltadv (the installed package, native module included)
    to ``spark``'s cluster, so that its Python workers import it without deltadv
    installed there. Works on Spark Connect sessions and on classic sessions of
    PySpark 4 (``SparkSession.addArtifacts``; a classic PySpark 3.5 session raises
    :class:`~deltadv.exceptions.WorkerImportError` saying how else). The package
    is sent once per session (a second call does nothing).

    The package is zipped (without ``__pycache__``) and added with
    ``spark.addArtifacts(path + "#deltadv", archive=True)``: Spark unpacks it as
    ``deltadv`` in the session's files folder, which it puts on every Python
    worker's ``sys.path``, ahead of an installed deltadv. The workers need what
    deltadv imports (``pyarrow``) and a CPython >= 3.10 on the client's platform
    (the native module is built for it); one small job checks that they import
    the shipped package and raises :class:`~deltadv.exceptions.WorkerImportError`,
    saying why, if they do not."""
    key = session_key(spark)
    with _lock:
        if key in _shipped:
            return
        from pyspark import __version__ as pyspark_version

        if key.startswith("classic:") and int(pyspark_version.split(".")[0]) < 4:
            raise WorkerImportError(
                "deltadv.spark.ship needs SparkSession.addArtifacts, which classic sessions "
                "have from PySpark 4.0 (this is PySpark "
                f"{pyspark_version}; Spark Connect has it from 3.5): install deltadv in "
                "the workers' Python environment instead, or send a packed environment with "
                "spark.archives and spark.pyspark.python (PySpark's 'Python Package "
                "Management' guide)"
            )
        archive = _package_archive()
        spark.addArtifacts(f"{archive}#{PACKAGE}", archive=True)
        _shipped.add(key)
        _ready.discard(key)
    require_workers(spark)


def require_workers(spark: SparkSession) -> None:
    """Raise :class:`~deltadv.exceptions.WorkerImportError` unless ``spark``'s
    Python workers import deltadv, the client's version: one small job the first
    time in a session (only a success is remembered, so a session that fails can
    :func:`ship` and go on)."""
    key = session_key(spark)
    if key in _ready:
        return
    (report,) = (
        spark.range(0, 1, 1, 1)
        .mapInArrow(_probe(), "version string, python string, platform string, error string")
        .collect()
    )
    problem = _problem(report.asDict(), shipped=key in _shipped)
    if problem is not None:
        raise WorkerImportError(problem)
    with _lock:
        _ready.add(key)


def _probe() -> Any:
    """The probe's mapInArrow body. A nested function, so cloudpickle sends it by
    value (its code, not a reference to this module): the worker runs it without
    deltadv, and it imports deltadv itself."""

    def probe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import importlib
        import os
        import platform
        import sys

        for _ in batches:
            pass
        importlib.invalidate_caches()  # a package shipped after this worker started
        version = error = ""
        try:
            import deltadv

            version = f"{deltadv.__version__} at {os.path.dirname(deltadv.__file__)}"
        except Exception as e:  # ImportError, or a native module that does not load
            error = f"{type(e).__name__}: {e}"
        python = f"{sys.version_info[0]}.{sys.version_info[1]} {sys.executable}"
        where = f"{sys.platform} {platform.machine()}"
        yield pa.RecordBatch.from_pylist(
            [{"version": version, "python": python, "platform": where, "error": error}]
        )

    return probe


def _problem(report: dict[str, str], *, shipped: bool) -> str | None:
    """What is wrong with the workers the probe reported on, or None. Where a
    shipped deltadv does not import, a Python older than the native module's
    floor or another platform than the client's is named as the cause."""
    import deltadv

    version = deltadv.__version__
    major, minor = (int(p) for p in report["python"].split(" ", 1)[0].split("."))
    here = f"{sys.platform} {platform.machine()}"
    if report["error"] and shipped and (major, minor) < MIN_PYTHON:
        return (
            f"deltadv.spark.ship: the Spark workers run Python {major}.{minor} "
            f"({report['python']}); deltadv's native module needs CPython >= "
            f"{MIN_PYTHON[0]}.{MIN_PYTHON[1]}: point spark.pyspark.python at a newer one"
        )
    if report["error"] and shipped and report["platform"] != here:
        return (
            f"deltadv.spark.ship: the Spark workers run on {report['platform']}, this "
            f"client's deltadv is built for {here}: install deltadv in the workers' "
            "Python environment instead"
        )
    if report["error"]:
        how = (
            "after deltadv.spark.ship(spark)"
            if shipped
            else "install deltadv in the workers' Python environment (spark.pyspark.python "
            "/ PYSPARK_PYTHON on every node), or call deltadv.spark.ship(spark) to send this "
            "client's deltadv to the session"
        )
        return (
            f"the Spark cluster's Python workers cannot import deltadv "
            f"({report['error']}; worker Python {report['python']}, {report['platform']}): "
            + (f"it failed {how}" if shipped else how)
        )
    if report["version"].split(" ", 1)[0] != version:
        return (
            f"the Spark cluster's Python workers import deltadv {report['version']}, "
            f"this client runs deltadv {version}: install the same version in the "
            "workers' Python environment, or call deltadv.spark.ship(spark)"
        )
    return None


def _package_archive() -> Path:
    """This installed deltadv package zipped (once per process): its files under
    the archive's root, ``__pycache__`` left out, fixed timestamps (the same
    bytes each time)."""
    if _archive:
        return _archive[0]
    import deltadv

    package = Path(deltadv.__file__).resolve().parent
    folder = Path(tempfile.mkdtemp(prefix="deltadv-ship-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / f"deltadv-{deltadv.__version__}.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for file in sorted(package.rglob("*")):
            relative = file.relative_to(package)
            if "__pycache__" in relative.parts or not file.is_file():
                continue
            info = zipfile.ZipInfo(relative.as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (file.stat().st_mode & 0o777) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            with file.open("rb") as source, archive.open(info, "w") as target:
                shutil.copyfileobj(source, target, 1 << 20)
    _archive.append(path)
    return path


__all__ = ["MIN_PYTHON", "require_workers", "ship"]
