"""A Spark standalone cluster on 127.0.0.1 for tests: one master and two workers,
each a JVM started from the jars shipped in the pyspark package (its `sbin` holds
no start-master.sh, so the classes are launched directly). Every executor is a
JVM of its own, launched by its worker, with Python workers running this
interpreter and this checkout's package (`PYTHONPATH` in the workers' env).

`standalone_cluster()` yields a `Cluster`; anything that speaks to a master URL
(a classic driver, a Spark Connect server started with `--master`) can use it.
Logs (master, workers, executors' stdout/stderr under `work/`) stay in `log_dir`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise RuntimeError("no java on PATH and no JAVA_HOME: PySpark needs Java 17+")
    return found


def package_path() -> str:
    """The directory holding the `deltadv` package under test."""
    import deltadv

    return str(Path(deltadv.__file__).resolve().parents[1])


@dataclass
class Cluster:
    master_url: str
    web_url: str
    log_dir: Path
    env: dict[str, str]
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)  # all, for teardown

    def state(self) -> dict[str, Any]:
        """The master's JSON status page (workers, their state, running apps)."""
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as r:
            return json.loads(r.read())  # type: ignore[no-any-return]

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.state()["workers"] if w["state"] == "ALIVE"]

    def executor_pids(self, worker: subprocess.Popen[bytes]) -> list[int]:
        """Executor JVMs launched by this worker (its child processes)."""
        out = subprocess.run(
            ["ps", "-o", "pid=", "--ppid", str(worker.pid)],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        return [int(p) for p in out.split()]

    def kill_worker(self, index: int) -> list[int]:
        """SIGKILL worker `index`'s executor JVMs and then the worker JVM itself;
        returns the executor pids killed."""
        worker = self.workers[index]
        pids = self.executor_pids(worker)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=30)
        return pids

    def worker_of(self, pid: int) -> int | None:
        """Index of the worker whose process tree holds `pid` (an executor's
        Python worker, say), or None."""
        pids = {w.pid: i for i, w in enumerate(self.workers) if w.poll() is None}
        while pid > 1:
            if pid in pids:
                return pids[pid]
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                return None
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        return None

    def start_worker(self, index: int) -> None:
        """(Re)start worker `index` (1 core, 1 GiB); the caller waits for it with
        `wait_workers`."""
        work = self.log_dir / f"worker-{index}"
        work.mkdir(exist_ok=True)
        args = [
            "org.apache.spark.deploy.worker.Worker",
            self.master_url,
            "--host",
            "127.0.0.1",
            "--cores",
            "1",
            "--memory",
            "1g",
            "--webui-port",
            str(_free_port()),
            "--work-dir",
            str(work),
        ]
        log = self.log_dir / f"worker-{index}.{len(self.procs)}.log"
        proc = _start(args, log, self.env)
        self.procs.append(proc)
        if index < len(self.workers):
            self.workers[index] = proc
        else:
            self.workers.append(proc)

    def restart_dead_workers(self) -> None:
        """Start again every worker whose JVM has exited (killed by a fault test),
        and wait until all are registered."""
        for index, worker in enumerate(self.workers):
            if worker.poll() is not None:
                self.start_worker(index)
        self.wait_workers(len(self.workers))

    def wait_workers(self, count: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while True:
            dead = [p.args[4] for p in self.procs if p.poll() not in (None, -signal.SIGKILL)]
            if dead:
                raise RuntimeError(f"{dead[0]} exited; logs in {self.log_dir}")
            try:
                if len(self.alive_workers()) >= count:
                    return
            except (OSError, ValueError):  # not up yet, or an empty page while it starts
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{count} workers not registered with {self.master_url} "
                    f"after {timeout:.0f} s; logs in {self.log_dir}"
                )
            time.sleep(0.5)

    def driver_conf(self) -> dict[str, str]:
        """Settings a driver on this cluster needs: small executors, this
        interpreter and this checkout's package in the executors' Python workers."""
        return {
            "spark.master": self.master_url,
            "spark.executor.memory": "512m",
            "spark.executor.cores": "1",
            "spark.cores.max": "2",
            "spark.pyspark.python": sys.executable,
            "spark.executorEnv.PYTHONPATH": package_path(),
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.shuffle.partitions": "4",
        }


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    cp = f"{spark_home() / 'conf'}:{spark_home() / 'jars'}/*"
    with open(log, "wb") as out:
        return subprocess.Popen(
            [java(), "-Xmx256m", "-cp", cp, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # a SIGINT to pytest does not hit the JVMs first
        )


@contextmanager
def standalone_cluster(log_dir: Path, workers: int = 2, timeout: float = 120) -> Iterator[Cluster]:
    """Start a master and `workers` workers (1 core, 1 GiB each) on 127.0.0.1;
    yield once all are registered ALIVE; kill every process on exit, failure
    included."""
    log_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(
        {
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(log_dir),
            # what bin/load-spark-env.sh sets: without it the executor launcher
            # looks for a source build's launcher/target/scala-* directory
            "SPARK_SCALA_VERSION": "2.13",
            "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join(
                p for p in [package_path(), env.get("PYTHONPATH", "")] if p
            ),
        }
    )
    port, web = _free_port(), _free_port()
    cluster = Cluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web}", log_dir, env)
    try:
        master = [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(web),
        ]
        cluster.procs.append(_start(master, log_dir / "master.log", env))
        for i in range(workers):
            cluster.start_worker(i)
        cluster.wait_workers(workers, timeout)
        yield cluster
    finally:
        for p in reversed(cluster.procs):
            # a worker's executors first (children of its JVM)
            for pid in cluster.executor_pids(p) if p.poll() is None else []:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if p.poll() is None:
                p.kill()
            p.wait(timeout=30)


@contextmanager
def connect_server(cluster: Cluster, local_dir: Path, timeout: float = 180) -> Iterator[str]:
    """A Spark Connect server (``SparkConnectServer`` through pyspark's
    ``bin/spark-submit``, as Spark's ``start-connect-server.sh`` runs it: the
    launcher adds the JVM module options Arrow needs) whose master is `cluster`, with
    `cluster.driver_conf()`; yields its ``sc://`` URL once its application holds
    both executors' cores. Its Python planning workers (Python data sources) and
    the executors' run this interpreter with this checkout's package. The server
    is stopped on exit, so its cores go back to the master."""
    port = _free_port()
    conf = {
        **cluster.driver_conf(),
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.local.dir": str(local_dir),
    }
    name = f"deltadv-connect-{port}"
    args = [str(spark_home() / "bin" / "spark-submit"), "--driver-memory", "768m", "--class"]
    args += ["org.apache.spark.sql.connect.service.SparkConnectServer", "--name", name]
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    args.append("spark-internal")  # no application jar: the class is in Spark's jars
    log = cluster.log_dir / f"connect-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, env=cluster.env, start_new_session=True
        )
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"Connect server exited; log {log}")
            try:
                apps = [a for a in cluster.state()["activeapps"] if a["name"] == name]
                if apps and apps[0]["cores"] >= 2:
                    with socket.create_connection(("127.0.0.1", port), timeout=2):
                        break
            except (OSError, ValueError):  # not up yet, or an empty page while it starts
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"Connect server not serving with 2 cores after {timeout:.0f} s; log {log}"
                )
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
        # the master frees the application's cores (for a later driver)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if not [a for a in cluster.state()["activeapps"] if a["name"] == name]:
                    break
            except (OSError, ValueError):  # not up yet, or an empty page while it starts
                pass
            time.sleep(0.5)
