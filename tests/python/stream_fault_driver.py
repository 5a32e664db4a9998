"""Driver program for tests/python/test_spark_stream_faults.py: a classic local[2]
SparkSession (deltadv registered, no Delta Spark jars: the query is deltadv on both
sides) running ``spark.readStream.format("deltadv")`` into
``writeStream.format("deltadv")`` with a checkpoint. Run as a script with one
argument, a JSON file: {"source": ..., "sink": ..., "checkpoint": ...,
"available_now": bool, "max_files": int, "local_dir": ...}. Prints
``RESULT <json>`` lines: ``started`` (the query id) and, for an AvailableNow run,
``done``. Without AvailableNow it streams until killed (its own process: the
test SIGKILLs its process group, JVM and Python workers included)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from pyspark.sql import SparkSession

from deltadv.spark.datasource import register_data_source


def emit(step: str, **values: Any) -> None:
    print("RESULT " + json.dumps({"step": step, **values}, default=str), flush=True)


def main(cfg: dict[str, Any]) -> None:
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("deltadv-stream-faults")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", cfg["local_dir"])
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register_data_source(spark)
    reader = (
        spark.readStream.format("deltadv")
        .option("skipChangeCommits", "true")
        .option("maxFilesPerTrigger", str(cfg["max_files"]))
    )
    writer = reader.load(cfg["source"]).writeStream.format("deltadv")
    writer = writer.option("checkpointLocation", cfg["checkpoint"]).outputMode("append")
    if cfg["available_now"]:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="0 seconds")
    query = writer.start(cfg["sink"])
    emit("started", id=str(query.id), pid=os.getpid())
    query.awaitTermination()
    emit("done", id=str(query.id), batch=(query.lastProgress or {}).get("batchId"))
    spark.stop()


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        main(json.load(f))
