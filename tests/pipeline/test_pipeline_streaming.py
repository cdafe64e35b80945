"""Structured Streaming with spark.readStream.format("tidelog"): checkpointed offsets, exact resume after a
restart, new partitions, maxOffsetsPerTrigger and failOnDataLoss (done-when 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pipeline_testlib import create_topic, spark_or_skip

from tidelog.testing import BrokerHandle

spark_or_skip()
# Spark starts slowly and shares 2 cores with the broker and other suites: generous per-test limits.
pytestmark = pytest.mark.timeout(900)


def produce(bootstrap: str, topic: str, ids: range, partitions: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
    for i in ids:
        producer.send(topic, key=f"k{i}".encode(), value=f"id-{i}".encode(), partition=i % partitions)
    producer.flush()
    producer.close()


def stream(spark: Any, broker: Any, topic: str, **options: str) -> Any:
    reader = (
        spark.readStream.format("tidelog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load().selectExpr("CAST(value AS STRING) AS value", "partition", "offset")


def run_to_end(df: Any, out: Path, checkpoint: Path, available_now: bool = False) -> list[int]:
    """Run the query until it has processed everything available, stop it; the rows per micro-batch."""
    writer = df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint))
    if available_now:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination(timeout=600)
        assert not query.isActive, "the availableNow query did not finish"
    else:
        query = writer.start()
        query.processAllAvailable()
        query.stop()
    assert query.exception() is None, query.exception()
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def output(spark: Any, out: Path) -> list[tuple[str, int, int]]:
    return sorted((r.value, r.partition, r.offset) for r in spark.read.parquet(str(out)).collect())


def test_restart_resumes_exactly(spark: Any, tidelog_module_broker: BrokerHandle, tmp_path: Path) -> None:
    from kafka.admin import KafkaAdminClient, NewPartitions

    topic = "stream-resume"
    create_topic(tidelog_module_broker.bootstrap, topic, 3)
    produce(tidelog_module_broker.bootstrap, topic, range(0, 3000), 3)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    first = run_to_end(stream(spark, tidelog_module_broker, topic), out, checkpoint)
    assert sum(first) == 3000
    rows = output(spark, out)
    assert sorted(v for v, _, _ in rows) == sorted(f"id-{i}" for i in range(3000))

    # While the query is down: more records, and a fourth partition (read from its start after the restart).
    admin = KafkaAdminClient(bootstrap_servers=tidelog_module_broker.bootstrap)
    admin.create_partitions({topic: NewPartitions(total_count=4)})
    admin.close()
    produce(tidelog_module_broker.bootstrap, topic, range(3000, 4000), 4)

    second = run_to_end(stream(spark, tidelog_module_broker, topic), out, checkpoint)
    assert sum(second) == 1000  # only the new records
    rows = output(spark, out)
    assert len(rows) == len(set(rows)) == 4000  # nothing twice, nothing missing
    assert sorted(v for v, _, _ in rows) == sorted(f"id-{i}" for i in range(4000))
    assert {(p, o) for v, p, o in rows if v == "id-3003"} == {(3, 0)}

    # A restart with nothing new processes nothing.
    assert run_to_end(stream(spark, tidelog_module_broker, topic), out, checkpoint) == []


def test_available_now_respects_max_offsets_per_trigger(spark: Any, tidelog_module_broker: BrokerHandle, tmp_path: Path) -> None:
    topic = "stream-rate"
    create_topic(tidelog_module_broker.bootstrap, topic, 2)
    produce(tidelog_module_broker.bootstrap, topic, range(0, 2500), 2)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    batches = run_to_end(stream(spark, tidelog_module_broker, topic, maxOffsetsPerTrigger="1000"), out, checkpoint,
                         available_now=True)
    assert sum(batches) == 2500
    assert len(batches) >= 3 and max(batches) <= 1000
    rows = output(spark, out)
    assert len(rows) == len(set(rows)) == 2500


def test_latest_start_skips_existing_records(spark: Any, tidelog_module_broker: BrokerHandle, tmp_path: Path) -> None:
    topic = "stream-latest"
    create_topic(tidelog_module_broker.bootstrap, topic, 1)
    produce(tidelog_module_broker.bootstrap, topic, range(0, 100), 1)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    df = stream(spark, tidelog_module_broker, topic, startingOffsets="latest")
    assert run_to_end(df, out, checkpoint) == []  # the first run only fixes the start at the end offset
    produce(tidelog_module_broker.bootstrap, topic, range(100, 150), 1)
    run_to_end(stream(spark, tidelog_module_broker, topic, startingOffsets="latest"), out, checkpoint)
    assert sorted(o for _, _, o in output(spark, out)) == list(range(100, 150))


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_records_lost_to_retention(spark: Any, tidelog_module_broker: BrokerHandle, tmp_path: Path, fail_on_data_loss: bool) -> None:
    """Offsets the checkpoint still needs are deleted (DeleteRecords moves the log start, as retention does):
    failOnDataLoss=true fails the query, false skips to the new log start."""
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition

    topic = f"stream-loss-{str(fail_on_data_loss).lower()}"
    create_topic(tidelog_module_broker.bootstrap, topic, 1)
    produce(tidelog_module_broker.bootstrap, topic, range(0, 100), 1)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    opts = {"failOnDataLoss": str(fail_on_data_loss).lower()}
    assert sum(run_to_end(stream(spark, tidelog_module_broker, topic, **opts), out, checkpoint)) == 100

    produce(tidelog_module_broker.bootstrap, topic, range(100, 200), 1)
    admin = KafkaAdminClient(bootstrap_servers=tidelog_module_broker.bootstrap)
    admin.delete_records({TopicPartition(topic, 0): 150})
    admin.close()

    if fail_on_data_loss:
        with pytest.raises(Exception, match="failOnDataLoss"):
            run_to_end(stream(spark, tidelog_module_broker, topic, **opts), out, checkpoint)
    else:
        assert sum(run_to_end(stream(spark, tidelog_module_broker, topic, **opts), out, checkpoint)) == 50
        assert sorted(o for _, _, o in output(spark, out)) == list(range(0, 100)) + list(range(150, 200))


def test_pattern_picks_up_new_topics(spark: Any, tidelog_module_broker: BrokerHandle, tmp_path: Path) -> None:
    create_topic(tidelog_module_broker.bootstrap, "pattern-a", 1)
    produce(tidelog_module_broker.bootstrap, "pattern-a", range(0, 10), 1)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def df() -> Any:
        return (
            spark.readStream.format("tidelog")
            .option("kafka.bootstrap.servers", tidelog_module_broker.bootstrap)
            .option("subscribePattern", "pattern-.*")
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("topic", "CAST(value AS STRING) AS value")
        )

    assert sum(run_to_end(df(), out, checkpoint)) == 10
    create_topic(tidelog_module_broker.bootstrap, "pattern-b", 2)
    produce(tidelog_module_broker.bootstrap, "pattern-b", range(10, 15), 2)
    assert sum(run_to_end(df(), out, checkpoint)) == 5  # the new topic, from its beginning
    got = sorted((r.topic, r.value) for r in spark.read.parquet(str(out)).collect())
    assert got == sorted([("pattern-a", f"id-{i}") for i in range(10)] + [("pattern-b", f"id-{i}") for i in range(10, 15)])
