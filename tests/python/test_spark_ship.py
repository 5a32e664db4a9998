"""deltadv onto a cluster's Python workers (issue 26 point 2): a Spark Connect
server whose Python workers run a bare interpreter (a venv with pyarrow only, no
deltadv, no pandas; PySpark reaches the workers through Spark's own
PYTHONPATH). Without ``deltadv.spark.ship`` a read fails with deltadv's
``WorkerImportError`` saying what to do (on the Connect session and on the
server's classic one); after ``ship(spark)`` read with a filter, DELETE, MERGE
and ``format("deltadv")`` work, the workers import the shipped package, and the
table holds what the input data and the operations say (computed with pyarrow,
read back with deltadv's local reader and by the classic session after its own
``ship``).

The server runs in the client's subprocess (its own JVM, started as PySpark
starts a local Connect server: a classic context with the Connect plugin, then a
Connect session to it), with ``PYSPARK_PYTHON`` pointing at the bare venv and no
``PYTHONPATH`` leading to deltadv."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from deltadv import DeltaTable
from deltadv.write import write_table

ROOT = Path(__file__).resolve().parents[2]
N = 300

#: What the bare workers get: the client's pyarrow (mapInArrow needs it, and deltadv).
REQUIREMENTS = [f"pyarrow=={pa.__version__}"]


@pytest.fixture(scope="module")
def bare_python() -> Path:
    """A venv's interpreter with ``REQUIREMENTS`` only, kept in
    ``.cache/venv-spark-worker-<key>`` (key: the requirements and this Python),
    made once (about 20 s) and reused; the Python version is the client's, as
    Spark requires of its workers."""
    key = hashlib.sha256(json.dumps([REQUIREMENTS, sys.version]).encode()).hexdigest()[:12]
    venv = ROOT / ".cache" / f"venv-spark-worker-{key}"
    python = venv / "bin" / "python"
    if not python.exists():
        staging = venv.with_name(f"{venv.name}.tmp-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        made = subprocess.run(
            f"{sys.executable} -m venv {staging} && {staging}/bin/python -m pip install -q "
            f"--disable-pip-version-check {' '.join(REQUIREMENTS)}",
            shell=True,
            capture_output=True,
            text=True,
        )
        if made.returncode != 0:
            message = f"cannot make the bare worker venv: {made.stderr[-2000:]}"
            if os.environ.get("CI") == "true":
                pytest.fail(message)
            pytest.skip(message)
        try:
            staging.rename(venv)  # atomic: a concurrent run may have made it first
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    return python


CLIENT = """
import json, os, socket, sys

args = json.loads(sys.stdin.read())
sys.path.insert(0, args["package"])
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
from pyspark.sql import SparkSession

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
classic = (
    SparkSession.builder.master("local[2]")
    .config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
    .config("spark.connect.grpc.binding.address", "127.0.0.1")
    .config("spark.connect.grpc.binding.port", str(port))
    .config("spark.pyspark.python", args["worker_python"])
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .getOrCreate()
)
classic.sparkContext.setLogLevel("ERROR")

from deltadv import spark as dspark
from deltadv.exceptions import WorkerImportError

path = args["path"]
out = {}
# the server's classic session, before anything is shipped: the same error
try:
    dspark.read(classic, path).count()
except WorkerImportError as e:
    out["classic_unshipped"] = str(e)

# a Connect session to it
os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
from pyspark.sql.connect.session import SparkSession as ConnectSession

spark = ConnectSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()
try:
    dspark.read(spark, path).count()
except WorkerImportError as e:
    out["unshipped"] = str(e)
dspark.ship(spark)
dspark.ship(spark)  # once per session


def where(batches):  # by value (this script is __main__): where the worker's deltadv is
    import pyarrow as pa

    import deltadv

    for _ in batches:
        pass
    yield pa.RecordBatch.from_pylist([{"file": deltadv.__file__}])


out["worker_deltadv"] = spark.range(1).mapInArrow(where, "file string").first()["file"]
read = dspark.read(spark, path, filter="id % 7 = 0").select("id", "s").collect()
out["read"] = sorted([r["id"], r["s"]] for r in read)
dt = dspark.DeltaTable.forPath(spark, path)
out["delete"] = dt.delete("id % 5 = 0")
source = spark.createDataFrame(args["source"], "id bigint, s string")
out["merge"] = (
    dt.alias("t")
    .merge(source.alias("src"), "t.id = src.id")
    .whenMatchedUpdate(set={"s": "src.s"})
    .whenNotMatchedInsert(values={"id": "src.id", "part": "src.id % 3", "s": "src.s"})
    .execute()
)
dspark.register(spark)
out["format"] = spark.read.format("deltadv").load(path).filter("part = 1").count()

# ship on the classic session too (back in classic mode). In local mode both
# sessions' archives land in the SparkContext's files folder, so this read
# would work without it: it only shows that ship runs on a classic session.
del os.environ["SPARK_CONNECT_MODE_ENABLED"]
dspark.ship(classic)
read = dspark.read(classic, path, filter="id % 7 = 0").select("id", "s").collect()
out["classic_read"] = sorted([r["id"], r["s"]] for r in read)
print(json.dumps(out, default=str))
"""


def test_ship_to_workers_without_deltadv(bare_python: Path, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    data = pa.table(
        {
            "id": pa.array(range(N), pa.int64()),
            "part": pa.array([i % 3 for i in range(N)], pa.int64()),
            "s": [f"v{i}" for i in range(N)],
        }
    )
    write_table(path, data, partition_by=["part"])
    source = [[i, f"n{i}"] for i in range(N - 10, N + 20)]

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_DRIVER_PYTHON")}
    env["PYSPARK_PYTHON"] = str(bare_python)  # what a Connect server's workers run
    args = {
        "package": str(ROOT / "python"),
        "worker_python": str(bare_python),
        "path": path,
        "source": source,
    }
    done = subprocess.run(
        [sys.executable, "-c", CLIENT],
        input=json.dumps(args),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-6000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])

    # (a) without ship: deltadv's error, saying what to do (classic and Connect)
    for message in (out.get("classic_unshipped", ""), out.get("unshipped", "")):
        assert "cannot import deltadv" in message, out
        assert "No module named 'deltadv'" in message
        assert "install deltadv in the workers' Python environment" in message
        assert "deltadv.spark.ship(spark)" in message
        assert str(bare_python) in message
    # (b) after ship: the workers import the shipped copy, not this checkout
    worker_file = Path(out["worker_deltadv"])
    assert worker_file.name == "__init__.py" and worker_file.parent.name == "deltadv"
    assert not worker_file.is_relative_to(ROOT), worker_file

    # expected values from the input data, with pyarrow
    def rows(table: pa.Table) -> dict[int, tuple[int, str]]:
        return {r["id"]: (r["part"], r["s"]) for r in table.to_pylist()}

    def multiple_of(k: int) -> pa.ChunkedArray:
        ids = data.column("id")
        return pc.equal(pc.subtract(ids, pc.multiply(pc.divide(ids, k), k)), 0)

    sevens = rows(data.filter(multiple_of(7)))
    assert out["read"] == sorted([i, s] for i, (_, s) in sevens.items())
    remaining = data.filter(pc.invert(multiple_of(5)))
    assert out["delete"]["num_deleted_rows"] == N - remaining.num_rows
    assert out["delete"]["num_deletion_vectors_added"] > 0

    expected = rows(remaining)
    updated = inserted = 0
    for i, s in source:
        if i in expected:
            expected[i] = (expected[i][0], s)
            updated += 1
        else:
            expected[i] = (i % 3, s)
            inserted += 1
    assert out["merge"]["num_target_rows_updated"] == updated > 0
    assert out["merge"]["num_target_rows_inserted"] == inserted > 0
    assert out["format"] == len([i for i, (p, _) in expected.items() if p == 1])
    assert out["classic_read"] == sorted([i, s] for i, (_, s) in expected.items() if i % 7 == 0)

    # deltadv's local reader: the table holds exactly that
    got = DeltaTable(path).to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["part"], r["s"]) for r in got) == sorted(
        (i, p, s) for i, (p, s) in expected.items()
    )
    history = [h["operation"] for h in DeltaTable(path).history()]
    assert history[:2] == ["MERGE", "DELETE"]


#: The probe's reports (HERE: this machine's platform) and what the error says.
PROBLEMS = [
    (
        {"python": "3.9 /py", "platform": "HERE", "error": "ImportError: x"},
        True,
        "run Python 3.9 (3.9 /py); deltadv's native module needs CPython >= 3.10",
    ),
    (
        {"python": "3.11 /py", "platform": "plan9 mips", "error": "ImportError: x"},
        True,
        "run on plan9 mips, this client's deltadv is built for HERE",
    ),
    (
        {"python": "3.11 /py", "platform": "HERE", "error": "ImportError: x"},
        True,
        "cannot import deltadv (ImportError: x; worker Python 3.11 /py, HERE): it failed after",
    ),
    (
        {"python": "3.11 /py", "platform": "HERE", "error": "", "version": "0.0.1 at /x"},
        False,
        "import deltadv 0.0.1 at /x, this client runs deltadv",
    ),
]


@pytest.mark.parametrize(("report", "shipped", "expected"), PROBLEMS)
def test_worker_problems_say_what_is_wrong(
    report: dict[str, str], shipped: bool, expected: str
) -> None:
    """The probe's report turned into WorkerImportError's message (no Spark): a
    Python too old for the abi3 module, another platform, an import that fails
    after ship, another deltadv version on the workers; nothing for healthy ones."""
    import platform

    import deltadv
    from deltadv.spark.workers import _problem

    here = f"{sys.platform} {platform.machine()}"
    report = {"version": "", **report, "platform": report["platform"].replace("HERE", here)}
    assert expected.replace("HERE", here) in (_problem(report, shipped=shipped) or "")
    healthy = {"python": "3.11 /py", "platform": here, "error": ""}
    assert _problem({**healthy, "version": f"{deltadv.__version__} at /x"}, shipped=True) is None


def test_ship_on_classic_pyspark_3_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A classic session of PySpark 3.5 has no addArtifacts: ship says what to do
    instead, before packing or sending anything (no Spark: a stand-in session)."""
    import pyspark

    from deltadv.exceptions import WorkerImportError
    from deltadv.spark import ship

    class Conf:
        def get(self, key: str, default: Any = None) -> Any:
            return "local-1" if key == "spark.app.id" else default

    class ClassicSession:
        conf = Conf()

        def addArtifacts(self, *paths: str, **kinds: bool) -> None:
            raise AssertionError("nothing is sent")

    monkeypatch.setattr(pyspark, "__version__", "3.5.7")
    with pytest.raises(WorkerImportError, match=r"classic sessions have from PySpark 4\.0") as e:
        ship(ClassicSession())  # type: ignore[arg-type]
    assert "install deltadv in the workers' Python environment" in str(e.value)
    assert "PySpark 3.5.7" in str(e.value)
