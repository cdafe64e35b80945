"""Streaming job: per-key aggregates of the update stream, with a checkpoint so restarts resume exactly.

    python -m tidelog.pipeline.examples.aggregates --bootstrap localhost:9092 --topic customer-balances \\
        --checkpoint agg-checkpoint/ --output customer-aggregates.parquet [--available-now]

For each customer: how many updates and deletions it had, the sum of the balances it was ever given, and the
sequence number of its latest update. The aggregation state and the consumed offsets live in the checkpoint:
stop the job, produce more, start it again and only the new records are processed.
"""

from __future__ import annotations

import argparse
from typing import Any

from tidelog.pipeline.examples.session import FORMATS, build_session
from tidelog.pipeline.examples.updates import VALUE_SCHEMA


def aggregates(stream: Any) -> Any:
    # optional: pyspark (the [spark] extra); updates.py runs without it
    from pyspark.sql import functions as F

    parsed = stream.select(
        F.col("key").cast("string").alias("key"),
        F.col("value").isNull().alias("deleted"),
        F.from_json(F.col("value").cast("string"), VALUE_SCHEMA).alias("v"),
    )
    return parsed.groupBy("key").agg(
        F.count(F.when(~F.col("deleted"), 1)).alias("updates"),
        F.count(F.when(F.col("deleted"), 1)).alias("deletes"),
        F.coalesce(F.sum("v.balance"), F.lit(0)).alias("balance_total"),
        F.max("v.seq").alias("last_seq"),
    )


def start(
    spark: Any,
    fmt: str,
    bootstrap: str,
    topic: str,
    checkpoint: str,
    output: str,
    available_now: bool = False,
    max_offsets_per_trigger: int | None = None,
) -> Any:
    """Start the query; returns the StreamingQuery. Each micro-batch replaces the Parquet table with the full,
    updated aggregate table (output mode complete)."""
    reader = (
        spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))

    def publish(batch: Any, batch_id: int) -> None:
        batch.write.mode("overwrite").parquet(output)

    writer = (
        aggregates(reader.load())
        .writeStream.outputMode("complete")
        .option("checkpointLocation", checkpoint)
        .foreachBatch(publish)
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="5 seconds")
    return writer.start()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--topic", default="customer-balances")
    parser.add_argument("--checkpoint", default="customer-aggregates.checkpoint")
    parser.add_argument("--output", default="customer-aggregates.parquet")
    parser.add_argument("--format", choices=FORMATS, default="tidelog")
    parser.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    args = parser.parse_args(argv)
    spark = build_session("tidelog-aggregates", args.format)
    try:
        query = start(spark, args.format, args.bootstrap, args.topic, args.checkpoint, args.output,
                      args.available_now, args.max_offsets_per_trigger)
        query.awaitTermination()
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
