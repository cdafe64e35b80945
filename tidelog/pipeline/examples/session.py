"""SparkSession for the examples, reading Kafka either through `tidelog` or through Spark's own connector."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from tidelog.pipeline import register

ROOT = Path(__file__).resolve().parents[2]
FORMATS = ("tidelog", "kafka")


def kafka_connector_package() -> str:
    """The Maven coordinates of Spark's official connector matching the installed PySpark."""
    # optional: pyspark (the [spark] extra)
    import pyspark

    scala = "2.13"  # Spark 4 is built for Scala 2.13 only
    return f"org.apache.spark:spark-sql-kafka-0-10_{scala}:{pyspark.__version__}"


def build_session(app: str, fmt: str, master: str = "local[2]") -> Any:
    """format "tidelog" registers the Python data source; format "kafka" fetches spark-sql-kafka from Maven
    (the only difference a pipeline sees: same options, same schema)."""
    # optional: pyspark (the [spark] extra)
    from pyspark.sql import SparkSession

    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    # Python workers must import `pipeline` even when the project is used from a source checkout.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if fmt == "kafka":
        builder = builder.config("spark.jars.packages", kafka_connector_package())
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if fmt == "tidelog":
        register(spark)
    return spark
