"""Batch job: materialise the latest value per key of a compacted topic as a Parquet table.

    python -m tidelog.pipeline.examples.snapshot --bootstrap localhost:9092 --topic customer-balances --output snap/

The result is what the log cleaner converges to: one row per live key with its last value; keys whose last
record is a tombstone are absent. It is correct before, during and after compaction, because compaction only
removes records that a later record of the same key supersedes.
"""

from __future__ import annotations

import argparse
from typing import Any

from tidelog.pipeline.examples.session import FORMATS, build_session
from tidelog.pipeline.examples.updates import VALUE_SCHEMA


def latest_values(spark: Any, fmt: str, bootstrap: str, topic: str) -> Any:
    # optional: pyspark (the [spark] extra); updates.py runs without it
    from pyspark.sql import functions as F

    records = (
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    # The default partitioner sends every record of a key to one partition, so the highest offset of a key is
    # its latest record (the same order compaction uses).
    last = (
        records.select(
            F.col("key").cast("string").alias("key"),
            F.struct(
                F.col("offset"),
                F.col("partition"),
                F.col("timestamp"),
                F.col("value").cast("string").alias("value"),
            ).alias("rec"),
        )
        .groupBy("key")
        .agg(F.max_by("rec", "rec.offset").alias("last"))
    )
    return (
        last.where(F.col("last.value").isNotNull())  # tombstone: the key was deleted
        .select(
            "key",
            F.col("last.value").alias("value"),
            F.from_json(F.col("last.value"), VALUE_SCHEMA).getField("balance").alias("balance"),
            F.col("last.partition").alias("partition"),
            F.col("last.offset").alias("offset"),
            F.col("last.timestamp").alias("timestamp"),
        )
    )


def write_snapshot(spark: Any, fmt: str, bootstrap: str, topic: str, output: str) -> int:
    table = latest_values(spark, fmt, bootstrap, topic)
    table.write.mode("overwrite").parquet(output)
    return int(spark.read.parquet(output).count())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--topic", default="customer-balances")
    parser.add_argument("--output", default="customer-snapshot.parquet")
    parser.add_argument("--format", choices=FORMATS, default="tidelog")
    args = parser.parse_args(argv)
    spark = build_session("tidelog-snapshot", args.format)
    try:
        rows = write_snapshot(spark, args.format, args.bootstrap, args.topic, args.output)
        print(f"wrote {rows} live keys of {args.topic} to {args.output}")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
