"""Shared fixtures: the golden tables in ../shared/golden."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(os.environ.get("DELTADV_GOLDEN", ROOT.parent / "shared" / "golden"))


@pytest.fixture(scope="session")
def golden() -> Path:
    """The golden corpus; skipped with a reason where absent (a user's clone),
    a failure where DELTADV_REQUIRE_GOLDEN=1 (CI)."""
    if (GOLDEN / "dv_contents.json").is_file():
        return GOLDEN
    message = f"golden tables not found at {GOLDEN} (set DELTADV_GOLDEN to their path)"
    if os.environ.get("DELTADV_REQUIRE_GOLDEN") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def dv_contents(golden: Path) -> dict[str, Any]:
    return json.loads((golden / "dv_contents.json").read_text())["tables"]


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One local[2] SparkSession for the whole test session (~10 s to start). It
    logs events and keeps its local files in the test's temporary folders, so a
    test can look through them (tests/python/test_spark_secrets.py)."""
    import sys

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("deltadv-tests")
    jars = sorted((ROOT / ".cache" / "jars").glob("*.jar"))
    # DELTADV_NO_DELTA_SPARK=1: plain PySpark (scripts/check-spark-min.sh, whose
    # older PySpark cannot load Delta Spark 4.4's jars).
    if os.environ.get("DELTADV_NO_DELTA_SPARK") == "1":
        jars = []
    if jars:  # Delta Spark, the reference oracle (fetched by scripts/setup.sh)
        builder = (
            builder.config("spark.jars", ",".join(str(j) for j in jars))
            .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
            .config(
                "spark.sql.catalog.spark_catalog",
                "org.apache.spark.sql.delta.catalog.DeltaCatalog",
            )
        )
    session = (
        builder.config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.showConsoleProgress", "false")
        # Delta Spark replays its log in 50 partitions by default: slow on 2 cores.
        .config("spark.databricks.delta.snapshotPartitions", "2")
        # Delta Spark's VACUUM lists the table in this many tasks (default 10,000):
        # ~50 s a VACUUM on 2 cores, ~8 s with 4.
        .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "4")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.compress", "false")  # Spark 4 compresses by default
        .config("spark.eventLog.dir", str(tmp_path_factory.mktemp("spark-events")))
        .config("spark.local.dir", str(tmp_path_factory.mktemp("spark-local")))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def delta_spark(spark: Any) -> Any:
    """The session with Delta Spark loaded; a failure in CI if its jars are missing."""
    if os.environ.get("DELTADV_NO_DELTA_SPARK") == "1":
        pytest.fail("DELTADV_NO_DELTA_SPARK=1: this test needs Delta Spark")
    if not (ROOT / ".cache" / "jars").is_dir():
        message = "Delta Spark jars missing: run scripts/setup.sh (needs mvn)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return spark


@pytest.fixture(scope="session")
def spark_connect(delta_spark: Any) -> Any:
    """A Spark Connect server for the whole test session, inside the JVM of the
    classic ``delta_spark`` session (one JVM, one filesystem, Delta Spark loaded:
    the oracle reads what Connect clients write). Its value runs a Python script
    as a Connect client in a subprocess (PySpark's ``functions`` pick classic or
    Connect columns per process, so a client cannot share the classic session's
    process): ``run(script, **args)`` -> the script's stdout parsed as JSON; the
    script finds the session as ``spark`` and ``args`` as ``ARGS`` (read from
    its stdin: storage options stay off command lines)."""
    import json
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = delta_spark._jsc.sc()
    context.conf().set("spark.connect.grpc.binding.address", "127.0.0.1")
    context.conf().set("spark.connect.grpc.binding.port", str(port))
    service = delta_spark._jvm.org.apache.spark.sql.connect.service.SparkConnectService
    service.start(context)
    url = f"sc://127.0.0.1:{port}"
    prelude = (
        "import json, sys\n"
        "from pyspark.sql import SparkSession\n"
        f"spark = SparkSession.builder.remote({url!r}).getOrCreate()\n"
        "ARGS = json.loads(sys.stdin.read())\n"
    )

    def run(script: str, **args: Any) -> Any:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT / "python"), *filter(None, [env.get("PYTHONPATH")])]
        )
        env["SPARK_CONNECT_MODE_ENABLED"] = "1"
        done = subprocess.run(
            [sys.executable, "-c", prelude + script],
            input=json.dumps(args),
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-6000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    return run
