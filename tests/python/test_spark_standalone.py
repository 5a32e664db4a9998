"""deltadv's Spark DML on a real standalone cluster (tests/python/cluster.py: a master
and two workers on 127.0.0.1, each executor its own JVM with its own Python workers)
against a table on the S3 server (moto). The driver is a subprocess
(tests/python/standalone_driver.py), as a process holds one SparkContext and this
one holds the local oracle's. Tables are created by Delta Spark locally and
uploaded; after the cluster's commits the driver downloads the table and Delta
Spark 4.4 (local) reads every version of that copy, row for row against a model
of the operations computed here. (Delta Spark cannot reach moto itself: the
project's jars hold no hadoop-aws/s3a.) The same operations run again through
Spark Connect: a Connect server whose master is the cluster
(`cluster.connect_server`) and a Connect client as the driver subprocess; its
tables equal the classic run's at every version.

Faults: a worker's JVM and its executor's JVM are SIGKILLed while that executor
runs a DELETE task and, after the worker is restarted, a MERGE task; the job
completes on the surviving worker or fails with an error, and every version of
the table reads as the model says (nothing lost, nothing resurrected)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.python.cluster import Cluster, connect_server, package_path, standalone_cluster
from tests.python.s3server import client, s3_server, storage_options, upload_dir

BUCKET = "cluster"
DRIVER = Path(__file__).with_name("standalone_driver.py")
Rows = dict[int, tuple[int, str]]  # id -> (k, s)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with standalone_cluster(tmp_path_factory.mktemp("standalone-logs")) as c:
        yield c


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    with s3_server() as endpoint:
        client(endpoint).create_bucket(Bucket=BUCKET)
        yield endpoint


def create_table(spark: Any, path: Path, rows: int, endpoint: str, prefix: str) -> Rows:
    """A DV table written by Delta Spark (4 files, VACUUM retention 0), uploaded."""
    (
        spark.range(0, rows, numPartitions=4)
        .selectExpr("id", "id % 10 AS k", "concat('s', id) AS s")
        .write.format("delta")
        .option("delta.enableDeletionVectors", "true")
        .option("delta.deletedFileRetentionDuration", "interval 0 hours")
        .save(str(path))
    )
    upload_dir(endpoint, BUCKET, path, prefix)
    return {i: (i % 10, f"s{i}") for i in range(rows)}


def deleted(rows: Rows) -> Rows:
    return {i: v for i, v in rows.items() if i % 7 != 0}


def merged(rows: Rows) -> Rows:
    """The MERGE of standalone_driver.run_merge: source ids 0, 2, ..., 199998."""
    out = {i: (k, f"m{i}" if i % 2 == 0 else s) for i, (k, s) in rows.items()}
    for i in range(0, 200_000, 2):
        if i not in rows and i % 100 == 0:
            out[i] = (i % 10, f"m{i}")
    return out


def as_sorted(rows: Rows) -> list[tuple[int, int, str]]:
    return sorted((i, k, s) for i, (k, s) in rows.items())


def oracle_rows(spark: Any, path: Path, version: int) -> list[tuple[int, int, str]]:
    """Delta Spark's read of `path` at `version`. Not `versionAsOf`: the tables keep
    deleted files 0 hours (for VACUUM), so Delta Spark refuses to time travel; it
    reads the latest version of a view of the table whose log ends at `version`."""
    view = path.parent / f"{path.name}@v{version}"
    if not view.exists():
        (view / "_delta_log").mkdir(parents=True)
        for entry in path.iterdir():
            if entry.name != "_delta_log":
                (view / entry.name).symlink_to(entry)
        for entry in (path / "_delta_log").iterdir():
            head = entry.name.split(".")[0]
            if head.isdigit() and int(head) <= version and entry.suffix == ".json":
                (view / "_delta_log" / entry.name).symlink_to(entry)
    df = spark.read.format("delta").load(str(view))
    return sorted((r.id, r.k, r.s) for r in df.collect())


def latest_version(path: Path) -> int:
    return max(int(p.stem) for p in (path / "_delta_log").glob("*.json"))


def check_versions(
    spark: Any, path: Path, states: list[tuple[int, Rows]], upto: int | None = None
) -> list[list[tuple[int, int, str]]]:
    """Every version of the copy at `path` read by Delta Spark equals the state of
    the last step committed at or before it (`states`: (version, rows), ascending);
    returns the reads, by version."""
    last = latest_version(path) if upto is None else upto
    reads = []
    for v in range(last + 1):
        want = [rows for at, rows in states if at <= v][-1]
        reads.append(oracle_rows(spark, path, v))
        assert reads[-1] == as_sorted(want), f"version {v} of {path}"
    return reads


class Driver:
    """standalone_driver.py in a subprocess; its RESULT lines through a queue."""

    def __init__(self, cluster: Cluster, tmp: Path, cfg: dict[str, Any]) -> None:
        cfg = {"conf": cluster.driver_conf(), **cfg}
        cfg["conf"]["spark.local.dir"] = str(tmp / "driver-local")
        (tmp / "driver.json").write_text(json.dumps(cfg))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([package_path(), str(Path(__file__).parents[2])])
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        env["PYSPARK_PYTHON"] = sys.executable
        if cfg.get("remote"):  # PySpark's functions build Connect columns
            env["SPARK_CONNECT_MODE_ENABLED"] = "1"
        self.stderr = tmp / "driver.stderr"
        self._err = open(self.stderr, "w")
        self.proc = subprocess.Popen(
            [sys.executable, str(DRIVER), str(tmp / "driver.json")],
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            if line.startswith("RESULT "):
                self.lines.put(json.loads(line[len("RESULT ") :]))
        self.lines.put(None)

    def tail(self) -> str:
        return self.stderr.read_text()[-4000:]

    def next(self, step: str, timeout: float = 300) -> dict[str, Any]:
        try:
            got = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no {step!r} after {timeout} s:\n{self.tail()}") from None
        assert got is not None, f"driver ended before {step!r}:\n{self.tail()}"
        assert got["step"] == step, f"{got}\n{self.tail()}"
        return got

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._err.close()


def run_ops(
    spark: Any, cluster: Cluster, s3: str, tmp: Path, remote: str | None = None
) -> dict[str, Any]:
    """The driver's "ops" steps on a new table (classic, or a Connect client of
    `remote`), checked against the row model; Delta Spark reads every version of
    the downloaded copy. Returns the steps' results and those reads."""
    start = time.monotonic()
    v0 = create_table(spark, tmp / "source", 4000, s3, tmp.name)
    cfg = {
        "mode": "ops",
        "uri": f"s3://{BUCKET}/{tmp.name}",
        "storage_options": storage_options(s3),
        "copy_dir": str(tmp / "copy"),
        "remote": remote,
    }
    driver = Driver(cluster, tmp, cfg)
    steps: dict[str, dict[str, Any]] = {}
    try:
        read = steps["read"] = driver.next("read")
        if remote is None:
            assert read["executors"] == 2
        assert read["driver"] not in read["pids"]
        # the Python workers run under both workers' executors
        assert {cluster.worker_of(p) for p in read["pids"]} == {0, 1}, read
        assert read["ids"] == sorted(i for i in v0 if i % 10 == 3 and i > 1000)

        states = [(0, v0)]
        delete = steps["delete"] = driver.next("delete")
        v1 = deleted(v0)
        assert delete["metrics"]["num_deleted_rows"] == len(v0) - len(v1)
        states.append((delete["version"], v1))

        update = steps["update"] = driver.next("update")
        v2 = {i: (k, s + "-u" if i % 5 == 1 else s) for i, (k, s) in v1.items()}
        assert update["metrics"]["num_updated_rows"] == sum(i % 5 == 1 for i in v1)
        states.append((update["version"], v2))

        merge = steps["merge"] = driver.next("merge")
        v3 = merged(v2)
        assert merge["metrics"]["num_target_rows_inserted"] == len(v3) - len(v2)
        assert merge["metrics"]["num_target_rows_updated"] == sum(i % 2 == 0 for i in v2)
        states.append((merge["version"], v3))

        optimize = steps["optimize"] = driver.next("optimize")
        assert optimize["version"] == merge["version"] + 1, optimize
        assert optimize["metrics"]["num_added_files"] >= 1, optimize

        append = steps["append"] = driver.next("append")
        v5 = {**v3, **{i: (i % 10, f"a{i}") for i in range(300_000, 300_100)}}
        states.append((append["version"], v5))

        df_write = steps["df_write"] = driver.next("df_write")
        v6 = {**v5, **{i: (i % 10, f"w{i}") for i in range(400_000, 400_100)}}
        states.append((df_write["version"], v6))

        vacuum = steps["vacuum"] = driver.next("vacuum")
        assert vacuum["deleted"], "VACUUM with retention 0 deleted nothing"
    finally:
        driver.close()
    assert driver.proc.returncode == 0, driver.tail()
    # DELETE, UPDATE, MERGE, OPTIMIZE, write_table, df.write: one commit each
    assert [at for at, _ in states] == [0, 1, 2, 3, 5, 6]
    versions = check_versions(spark, tmp / "copy" / "before_vacuum", states)
    after = tmp / "copy" / "after_vacuum"
    assert latest_version(after) == vacuum["version"]
    assert oracle_rows(spark, after, vacuum["version"]) == as_sorted(v6)
    print(f"standalone ops ({remote or 'classic'}): {time.monotonic() - start:.1f} s")
    return {"steps": steps, "versions": versions}


@pytest.fixture(scope="module")
def classic_ops(
    delta_spark: Any, cluster: Cluster, s3: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The ops run by a classic driver (one per module: the Connect test compares
    its run with this one)."""
    return run_ops(delta_spark, cluster, s3, tmp_path_factory.mktemp("ops-classic"))


def test_dml_on_the_standalone_cluster(classic_ops: dict[str, Any]) -> None:
    assert len(classic_ops["versions"]) == 7  # versions 0..6 read by Delta Spark


def kill_on_marker(cluster: Cluster, driver: Driver, marker: Path, timeout: float = 180) -> int:
    """Wait until an executor's Python worker leaves its pid in `marker`, then
    SIGKILL the executor JVMs and the JVM of the worker running it; its index."""
    deadline = time.monotonic() + timeout
    while True:
        for m in marker.iterdir():
            index = cluster.worker_of(int(m.name))
            if index is not None:
                killed = cluster.kill_worker(index)
                assert killed, f"worker {index} had no executor"
                return index
        assert driver.proc.poll() is None, f"driver ended:\n{driver.tail()}"
        assert time.monotonic() < deadline, f"no task started in {timeout} s:\n{driver.tail()}"
        time.sleep(0.1)


def outcome(result: dict[str, Any], before: int) -> bool:
    """Whether the step committed (one version more) or failed cleanly (none)."""
    if "error" in result:
        assert result["error"], result
        assert result["version"] == before, result
        return False
    assert result["version"] == before + 1, result
    return True


def test_worker_killed_during_delete_and_merge(
    delta_spark: Any, cluster: Cluster, s3: str, tmp_path: Path
) -> None:
    start = time.monotonic()
    v0 = create_table(delta_spark, tmp_path / "source", 2000, s3, "faults")
    markers = tmp_path / "markers"
    for d in ("delete", "merge"):
        (markers / d).mkdir(parents=True)
    driver = Driver(
        cluster,
        tmp_path,
        {
            "mode": "faults",
            "uri": f"s3://{BUCKET}/faults",
            "storage_options": storage_options(s3),
            "copy_dir": str(tmp_path / "copy"),
            "marker_dir": str(markers),
        },
    )
    try:
        driver.next("ready")
        killed = kill_on_marker(cluster, driver, markers / "delete")
        delete = driver.next("delete")
        states = [(0, v0)]
        version = 0
        if outcome(delete, version):
            version += 1
            states.append((version, deleted(v0)))
        cluster.start_worker(killed)
        cluster.wait_workers(2)
        (markers / "go").write_text("")
        assert driver.next("executors")["count"] == 2
        kill_on_marker(cluster, driver, markers / "merge")
        merge = driver.next("merge")
        if outcome(merge, version):
            version += 1
            states.append((version, merged(states[-1][1])))
    finally:
        driver.close()
    assert driver.proc.returncode == 0, driver.tail()
    print(f"faults: delete {delete}, merge {str(merge)[:300]}")
    copy = tmp_path / "copy" / "after"
    assert latest_version(copy) == version
    check_versions(delta_spark, copy, states)
    print(f"standalone faults test: {time.monotonic() - start:.1f} s")


def row_counts(metrics: dict[str, Any]) -> dict[str, Any]:
    """A step's row metrics (file counts and sizes follow random file names)."""
    return {k: v for k, v in metrics.items() if "rows" in k}


def test_dml_on_spark_connect_on_the_standalone_cluster(
    delta_spark: Any,
    cluster: Cluster,
    s3: str,
    classic_ops: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The same ops by a Connect client of a Connect server whose master is the
    cluster: every version checked against the model, and equal to the classic
    run's tables version by version (Delta Spark's reads) with the same row
    metrics."""
    tmp = tmp_path_factory.mktemp("ops-connect")
    cluster.restart_dead_workers()  # the fault test leaves one worker killed
    with connect_server(cluster, tmp / "server-local") as url:
        remote = run_ops(delta_spark, cluster, s3, tmp, remote=url)
    assert remote["versions"] == classic_ops["versions"]
    for step in ("delete", "update", "merge"):
        got, want = remote["steps"][step], classic_ops["steps"][step]
        assert row_counts(got["metrics"]) == row_counts(want["metrics"]), step
        assert got["version"] == want["version"], step
    for step in ("optimize", "append", "df_write", "vacuum"):
        assert remote["steps"][step]["version"] == classic_ops["steps"][step]["version"], step
