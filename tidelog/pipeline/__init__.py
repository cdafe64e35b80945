"""PySpark data source `tidelog`: Spark's Kafka connector options and schema over the Kafka protocol.

    from tidelog.pipeline import register
    register(spark)
    df = spark.read.format("tidelog").option("kafka.bootstrap.servers", "localhost:9092") \
        .option("subscribe", "events").load()

Needs the optional extra: pip install 'tidelog[spark]'. See docs/PIPELINE.md.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FORMAT", "TidelogDataSource", "register"]

FORMAT = "tidelog"


def register(spark: Any) -> None:
    """Make format("tidelog") available in this SparkSession."""
    # optional: the source needs pyspark (the [spark] extra)
    from tidelog.pipeline.source import TidelogDataSource

    spark.dataSource.register(TidelogDataSource)


def __getattr__(name: str) -> Any:
    # Lazy: `import pipeline` (e.g. for option parsing) must work without pyspark installed.
    if name == "TidelogDataSource":
        from tidelog.pipeline.source import TidelogDataSource

        return TidelogDataSource
    raise AttributeError(name)
