"""Fixtures for the PySpark data source tests: one local[2] SparkSession per test session (Spark starts slowly),
the broker is the plugin's `tidelog_module_broker` (one per module); helpers produce and consume through kafka-python.

Only the Spark-backed tests skip, and only when pyspark is not importable (`pip install '.[test,spark]'`).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pipeline_testlib import spark_or_skip

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    spark_or_skip()
    from tidelog.pipeline import register

    # Executors' Python workers must import `pipeline` even when the project is not pip-installed, and must be
    # this interpreter (the venv with kafka-python). The JVM takes its environment when it starts, so the
    # variables are restored at once: later tests' subprocesses must not inherit them.
    saved = dict(os.environ)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only
    local_dir = tempfile.mkdtemp(prefix="tidelog-spark-")
    try:
        session = start_session(local_dir)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()
        shutil.rmtree(local_dir, ignore_errors=True)


def start_session(local_dir: str) -> Any:
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .appName("tidelog-pipeline-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "768m")
        .config("spark.local.dir", local_dir)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -Dlog4j2.level=WARN")
        .getOrCreate()
    )
