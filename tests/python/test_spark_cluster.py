"""One read and one UPDATE in local-cluster[2,1,1024]: two executor JVMs with their
own Python workers, so scan and change tasks really are serialized to other
processes, which write the UPDATE's files. Runs in a subprocess because a process
holds one SparkContext (the session's local[2] one)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from deltadv import spark as dspark
    s = (SparkSession.builder.master("local-cluster[2,1,1024]")
         .config("spark.ui.enabled", "false").config("spark.executor.memory", "512m")
         .getOrCreate())
    try:
        df = dspark.read(s, sys.argv[1])
        ids = sorted(r.id for r in df.collect())
        pids = df.rdd.mapPartitions(lambda _: [os.getpid()]).collect()
        executors = s.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
        target = sys.argv[2]
        dspark.write_table(s.range(0, 200, numPartitions=2), target)
        m = dspark.DeltaTable.forPath(s, target).update("id % 2 = 0", {"id": "id + 1000"})
        updated = sorted(r.id for r in dspark.read(s, target).collect())
        print("RESULT " + json.dumps({"ids": ids, "pids": sorted(set(pids)),
                                      "driver": os.getpid(), "executors": executors,
                                      "updated": updated, "metrics": m}))
    finally:
        s.stop()
    """
)


def test_read_on_a_local_cluster(golden: Path, tmp_path: Path) -> None:
    script = tmp_path / "cluster_read.py"
    script.write_text(SCRIPT)
    table = golden / "delta/kernel-defaults/basic-dv-with-checkpoint"
    out = subprocess.run(
        [sys.executable, str(script), str(table), str(tmp_path / "updated")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line, f"no result; stderr tail:\n{out.stderr[-3000:]}"
    result = json.loads(line[len("RESULT ") :])
    assert result["executors"] == 2
    assert result["driver"] not in result["pids"]
    assert result["ids"] == [i for i in range(500) if i % 11 != 0]  # the source's rule
    # the UPDATE, its files written by the executors
    assert result["updated"] == sorted(i + 1000 if i % 2 == 0 else i for i in range(200))
    assert result["metrics"]["num_updated_rows"] == 100
    assert result["metrics"]["num_deletion_vectors_added"] == 2
