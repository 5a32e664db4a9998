"""The benchmarks' SparkSession: local[2] with Delta Spark, configured like the
tests' ``spark`` fixture (tests/python/conftest.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def make_session(app: str) -> Any:
    """A local[2] SparkSession named ``app`` with Delta Spark's jars from .cache/jars."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    jars = sorted((ROOT / ".cache" / "jars").glob("*.jar"))
    if not jars:
        sys.exit("FAIL: Delta Spark jars missing in .cache/jars: run scripts/setup.sh")
    session = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.jars", ",".join(str(j) for j in jars))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # Delta Spark replays its log in 50 partitions by default: slow on 2 cores.
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session
