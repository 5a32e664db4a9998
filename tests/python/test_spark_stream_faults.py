"""Faults in a streaming pipeline (issue 27 point 4): a deltadv source -> deltadv sink
query whose driver is SIGKILLed during micro-batches and restarted from its
checkpoint.

The query (``stream_fault_driver.py``, a classic local[2] PySpark driver in its
own process group) streams a DV table (created by Delta Spark, a DELETE writing a
deletion vector before the query starts) with ``skipChangeCommits`` into a deltadv
table, with a processing-time trigger of 0. While it runs, the test appends to the
source (deltadv appends, and deltadv DELETEs writing DVs that the stream skips) and
SIGKILLs the driver's process group (JVM and Python workers with it) at seeded
random points inside micro-batches, then restarts it from the checkpoint. Where a
kill lands is read from what the query leaves on disk, never from a hook: the
offsets file of batch N written (planned), data files of the sink not in its log
(written, not committed), the sink's commit carrying ``txn`` version N while
Spark's commit file N is missing (committed, not recorded: the restart replays
batch N and the sink must skip it). The first kills take those three phases in a
seeded order, later ones one at random; a kill that lands after Spark recorded
the batch (a window of milliseconds after the sink's commit) is tried again on a
later batch, twice at most; ``DELTADV_STREAM_KILLS`` sets how many
(default 3), ``DELTADV_STREAM_SEED`` the seed. Finally the feeder stops and a
``Trigger.AvailableNow`` run drains the stream.

Checked against Delta Spark: the sink holds every source row exactly once (the
rows Delta Spark reads from the source at the version the query started at, plus
Delta Spark's own streaming read from the next version with ``skipChangeCommits``,
which is also the row model of what the test wrote); Delta Spark reads every
version of the sink, each with the rows its history says were written up to it;
each sink commit is a ``STREAMING UPDATE`` carrying one ``txn`` whose appId is the
query's id and whose versions are the batch ids 0, 1, 2, ... each once.
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from functools import reduce
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from deltadv import DeltaTable
from deltadv.write import write_table
from tests.python.dml_tables import delta_history, delta_rows

DRIVER = Path(__file__).with_name("stream_fault_driver.py")
KILLS = int(os.environ.get("DELTADV_STREAM_KILLS", "3"))
SEED = int(os.environ.get("DELTADV_STREAM_SEED", "27"))
PHASES = ("planned", "written", "committed")
APPEND_ROWS = 8  # rows per feeder append
FEED_EVERY = 1.0  # seconds between feeder commits
POLL = 0.002
MISSES = 2  # kills per phase that may land between batches before the test fails


def _package_path() -> str:
    import deltadv

    return str(Path(deltadv.__file__).resolve().parents[1])


class Driver:
    """stream_fault_driver.py in its own process group; RESULT lines through a queue."""

    def __init__(self, tmp: Path, cfg: dict[str, Any], name: str) -> None:
        config = tmp / f"{name}.json"
        config.write_text(json.dumps(cfg))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([_package_path(), str(Path(__file__).parents[2])])
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        env["PYSPARK_PYTHON"] = sys.executable
        env["PYSPARK_DRIVER_PYTHON"] = sys.executable
        self.stderr = tmp / f"{name}.stderr"
        self._err = open(self.stderr, "w")
        self.proc = subprocess.Popen(
            [sys.executable, str(DRIVER), str(config)],
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            env=env,
            start_new_session=True,  # its own process group: the JVM and workers too
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

    def next(self, step: str, timeout: float = 180) -> dict[str, Any]:
        try:
            got = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no {step!r} after {timeout} s:\n{self.tail()}") from None
        assert got is not None, f"driver ended before {step!r}:\n{self.tail()}"
        assert got["step"] == step, f"{got}\n{self.tail()}"
        return got

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole process group (driver, its JVM, the Python workers)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self._err.close()

    def close(self, timeout: float = 120) -> None:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        self.kill()


class Progress:
    """What the query left on disk: Spark's offsets and commits files in the
    checkpoint, and the sink's log and data files."""

    def __init__(self, checkpoint: Path, sink: Path) -> None:
        self.checkpoint = checkpoint
        self.sink = sink
        self.read_commits: set[str] = set()
        self.referenced: set[str] = set()
        self.txns: dict[int, str] = {}  # batch id -> the sink commit's file name

    def _batches(self, kind: str) -> set[int]:
        try:
            names = os.listdir(self.checkpoint / kind)
        except FileNotFoundError:
            return set()
        return {int(n) for n in names if n.isdigit()}

    def planned(self) -> set[int]:
        return self._batches("offsets")

    def recorded(self) -> set[int]:
        return self._batches("commits")

    def in_flight(self) -> int | None:
        """The batch planned and not recorded by Spark, if any."""
        open_ = self.planned() - self.recorded()
        return max(open_) if open_ else None

    def scan_log(self) -> None:
        log = self.sink / "_delta_log"
        try:
            names = sorted(n for n in os.listdir(log) if n.endswith(".json"))
        except FileNotFoundError:
            return
        for name in names:
            if name in self.read_commits:
                continue
            try:
                lines = (log / name).read_text().splitlines()
            except FileNotFoundError:
                continue
            for line in lines:
                action = json.loads(line)
                if "add" in action:
                    self.referenced.add(action["add"]["path"])
                if "txn" in action:
                    self.txns[int(action["txn"]["version"])] = name
            self.read_commits.add(name)

    def data_files(self) -> set[str]:
        try:
            return {n for n in os.listdir(self.sink) if n.endswith(".parquet")}
        except FileNotFoundError:
            return set()

    def unreferenced(self) -> set[str]:
        self.scan_log()
        return self.data_files() - self.referenced


def _wait(what: str, cond: Any, timeout: float = 180) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(POLL)


def _kill_in_batch(
    driver: Driver,
    progress: Progress,
    phase: str,
    after: int,
    rng: random.Random,
    timeout: float = 240,
) -> dict[str, Any]:
    """Wait for a micro-batch after batch ``after`` to reach ``phase`` and SIGKILL
    the driver there; the batch and where the kill landed, read from the disk
    afterwards."""
    deadline = time.monotonic() + timeout
    while True:
        assert driver.alive(), f"the driver died by itself:\n{driver.tail()}"
        assert time.monotonic() < deadline, f"no micro-batch reached {phase!r}:\n{driver.tail()}"
        batch = progress.in_flight()
        if batch is None or batch <= after:
            time.sleep(POLL)
            continue
        stale = progress.unreferenced()  # left by an attempt killed earlier
        if phase == "planned":
            time.sleep(rng.uniform(0, 0.15))
            break
        # Follow this batch until it reaches the phase, or is done (then the next).
        hit = False
        while batch not in progress.recorded() and driver.alive():
            if phase == "written" and progress.unreferenced() - stale:
                hit = True
                break
            if phase == "committed":
                progress.scan_log()
                if batch in progress.txns:
                    hit = True
                    break
            time.sleep(POLL)
        if hit:
            break
    driver.kill()
    progress.scan_log()
    batch = max(progress.planned())
    landed = (
        "between batches"
        if batch in progress.recorded()
        else "committed"
        if batch in progress.txns
        else "written"
        if progress.unreferenced() - stale
        else "planned"
    )
    return {"phase": phase, "batch": batch, "landed": landed}


class Feeder(threading.Thread):
    """Appends APPEND_ROWS rows to the source every FEED_EVERY seconds (deltadv
    write_table) and every fourth round DELETEs one earlier row (a DV commit,
    which the stream skips); records every row it appended."""

    def __init__(self, source: Path, start: int) -> None:
        super().__init__(daemon=True)
        self.source = source
        self.next_id = start
        self.rows: list[tuple[int, str]] = []
        self.stop_event = threading.Event()
        self.running = threading.Event()  # cleared: paused (while the driver restarts)
        self.running.set()
        self.error: BaseException | None = None
        self.deletes = 0

    def run(self) -> None:
        try:
            round_ = 0
            while not self.stop_event.is_set():
                self.running.wait()
                ids = list(range(self.next_id, self.next_id + APPEND_ROWS))
                self.next_id += APPEND_ROWS
                rows = [(i, f"f{i}") for i in ids]
                data = pa.table(
                    {"id": pa.array(ids, pa.int64()), "v": pa.array([r[1] for r in rows])}
                )
                write_table(str(self.source), data, mode="append")
                self.rows += rows
                round_ += 1
                if round_ % 4 == 0:
                    DeltaTable(str(self.source)).delete(f"id = {ids[0] - APPEND_ROWS}")
                    self.deletes += 1
                self.stop_event.wait(FEED_EVERY)
        except BaseException as e:  # reported by the test
            self.error = e

    def stop(self) -> None:
        self.stop_event.set()
        self.running.set()
        self.join(60)
        assert self.error is None, repr(self.error)


def _txns(sink: Path) -> list[tuple[int, list[tuple[str, int]]]]:
    """Per sink commit (by version): its txn actions (appId, version)."""
    out = []
    for commit in sorted((sink / "_delta_log").glob("*.json")):
        txns = [
            (a["txn"]["appId"], int(a["txn"]["version"]))
            for a in map(json.loads, commit.read_text().splitlines())
            if "txn" in a
        ]
        out.append((int(commit.stem), txns))
    return out


def _oracle(spark: Any, source: Path, start_version: int, checkpoint: Path) -> list[Any]:
    """Delta Spark's rows of the stream: the source at ``start_version`` and
    Delta Spark's own streaming read of the commits after it (skipChangeCommits)."""
    rows = (
        spark.read.format("delta").option("versionAsOf", start_version).load(str(source)).collect()
    )
    out = [tuple(r) for r in rows]
    q = (
        spark.readStream.format("delta")
        .option("startingVersion", str(start_version + 1))
        .option("skipChangeCommits", "true")
        .load(str(source))
        .writeStream.format("memory")
        .queryName("stream_faults_oracle")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(180)
    assert q.exception() is None, q.exception()
    out += [tuple(r) for r in spark.table("stream_faults_oracle").collect()]
    return sorted(out, key=repr)


def test_driver_killed_during_micro_batches_rows_exactly_once(
    delta_spark: Any, tmp_path: Path
) -> None:
    spark = delta_spark
    rng = random.Random(SEED)
    source, sink, cp = tmp_path / "source", tmp_path / "sink", tmp_path / "cp"
    spark.sql(
        f"CREATE TABLE delta.`{source}` (id BIGINT, v STRING) USING delta "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    spark.range(0, 40, 1, 2).selectExpr("id", "concat('r', id) AS v").write.format("delta").mode(
        "append"
    ).save(str(source))
    spark.sql(f"DELETE FROM delta.`{source}` WHERE id % 10 = 0")  # a DV
    start_version = DeltaTable(str(source)).version()
    assert DeltaTable(str(source)).deletion_vectors(), "the source holds no DV"
    model = [(i, f"r{i}") for i in range(40) if i % 10]

    cfg = {
        "source": str(source),
        "sink": str(sink),
        "checkpoint": str(cp),
        "max_files": 2,
        "local_dir": str(tmp_path / "local"),
        "available_now": False,
    }
    progress = Progress(cp, sink)
    phases = list(PHASES)
    rng.shuffle(phases)
    phases += [rng.choice(PHASES) for _ in range(max(0, KILLS - len(PHASES)))]
    phases = phases[:KILLS]
    kills: list[dict[str, Any]] = []
    ids: set[str] = set()
    feeder = Feeder(source, 1000)
    t0 = time.monotonic()
    try:
        runs = 0
        for phase in phases:
            # A kill that lands after Spark recorded the batch (the sink commit
            # is followed by Spark's commit file within milliseconds) is a kill
            # between batches: the phase is tried again, on a later batch.
            for _ in range(MISSES + 1):
                # A restarted query first replays the batch it was killed in.
                after = max(progress.planned(), default=-1)
                driver = Driver(tmp_path, cfg, f"driver{runs}")
                runs += 1
                try:
                    ids.add(driver.next("started")["id"])
                    feeder.running.set()
                    if feeder.ident is None:  # batch 0 is the snapshot; then the source grows
                        _wait("batch 0", lambda: 0 in progress.recorded())
                        feeder.start()
                        after = 0
                    kills.append(_kill_in_batch(driver, progress, phase, after, rng))
                finally:
                    driver.kill()
                feeder.running.clear()  # no backlog piles up while the JVM restarts
                print(f"{time.monotonic() - t0:.0f} s: kill {kills[-1]}")
                if kills[-1]["landed"] != "between batches":
                    break
    finally:
        if feeder.ident is not None:  # started
            feeder.stop()
    # (admission limits may change on a restart: the backlog in one or two batches)
    drain = Driver(tmp_path, {**cfg, "available_now": True, "max_files": 1000}, "drain")
    try:
        ids.add(drain.next("started")["id"])
        done = drain.next("done", timeout=300)
    finally:
        drain.close()
    print(f"{time.monotonic() - t0:.0f} s: drained; feeder deletes: {feeder.deletes}")

    # One query throughout: restarts from the checkpoint keep its id.
    assert len(ids) == 1, ids
    (query_id,) = ids
    assert done["id"] == query_id
    # The kills landed inside micro-batches (Spark had not recorded the batch):
    # in the phase aimed at, or (a batch that ran through meanwhile) a later one.
    inside = [k for k in kills if k["landed"] != "between batches"]
    assert len(inside) == len(phases), kills
    for kill in inside:
        assert PHASES.index(kill["landed"]) >= PHASES.index(kill["phase"]), kills

    model += feeder.rows
    expected = _oracle(spark, source, start_version, tmp_path / "oracle_cp")
    assert expected == sorted(model, key=repr)  # Delta Spark's stream = what was written
    assert feeder.deletes >= 1 and len(feeder.rows) > 0
    got = delta_rows(spark, sink)
    assert len(got) == len(set(got)), "a row landed twice"
    assert got == expected

    # Every sink commit: one txn of the query, versions the batch ids in order.
    batches = progress.recorded()
    txns = _txns(sink)
    assert [t for _, t in txns] == [[(query_id, b)] for b in range(len(txns))]
    # (Spark keeps the last 100 commit files of the checkpoint)
    assert max(batches) == len(txns) - 1 and batches <= set(range(len(txns)))
    assert DeltaTable(str(sink)).transaction_version(query_id) == len(txns) - 1
    history = delta_history(spark, sink)
    assert [(v, op, p["queryId"], p["epochId"]) for v, op, p in history] == [
        (v, "STREAMING UPDATE", query_id, str(v)) for v in range(len(txns))
    ]
    # Delta Spark reads every version of the sink, with the rows its history
    # says were written up to it.
    written = [
        int(dict(r["operationMetrics"]).get("numOutputRows", "0"))
        for r in sorted(
            spark.sql(f"DESCRIBE HISTORY delta.`{sink}`").collect(), key=lambda r: r["version"]
        )
    ]
    from pyspark.sql import functions as F

    frames = [
        spark.read.format("delta")
        .option("versionAsOf", v)
        .load(str(sink))
        .groupBy()
        .count()
        .withColumn("v", F.lit(v))
        for v in range(len(txns))
    ]
    counts = {r["v"]: r["count"] for r in reduce(lambda a, b: a.unionByName(b), frames).collect()}
    assert counts == {v: sum(written[: v + 1]) for v in range(len(txns))}, written
    print(f"{time.monotonic() - t0:.0f} s: {len(txns)} versions checked")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q", "-s"]))
