"""df.write / writeStream with format("tidelog"): rows land on the right topics and partitions and read back
identically through kafka-python (done-when 3)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pipeline_testlib import consume_all, create_topic, spark_or_skip

from tidelog.testing import BrokerHandle

spark_or_skip()
# Spark starts slowly and shares 2 cores with the broker and other suites: generous per-test limits.
pytestmark = pytest.mark.timeout(900)

SCHEMA = "topic string, partition int, key string, value binary, headers array<struct<key: string, value: binary>>"


def java_partition(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner for keyed records: toPositive(murmur2(key)) % numPartitions."""
    from kafka.partitioner.default import murmur2

    return (murmur2(key) & 0x7FFFFFFF) % partitions


def rows(n: int) -> list[tuple[Any, ...]]:
    out = []
    for i in range(n):
        topic = "write-a" if i % 2 else "write-b"
        partition = i % 3 if i < n // 2 else None  # explicit partition for the first half, partitioner after
        value = None if i % 97 == 0 else f"v{i}".encode()
        headers = [("i", str(i).encode()), ("tag", b"\x00\xff")] if i % 5 == 0 else None
        out.append((topic, partition, f"key-{i}", value, headers))
    return out


def write_df(spark: Any, broker: Any, df: Any, **options: str) -> None:
    writer = df.write.format("tidelog").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.mode("append").save()


def consumed(broker: Any, topic: str) -> Counter[tuple[Any, ...]]:
    return Counter(
        (r.partition, r.key, r.value, tuple(r.headers or ())) for r in consume_all(broker.bootstrap, topic)
    )


def test_batch_write_lands_on_topics_and_partitions(spark: Any, tidelog_module_broker: BrokerHandle) -> None:
    create_topic(tidelog_module_broker.bootstrap, "write-a", 3)
    create_topic(tidelog_module_broker.bootstrap, "write-b", 3)
    data = rows(600)
    write_df(spark, tidelog_module_broker, spark.createDataFrame(data, SCHEMA).repartition(2))
    for topic in ("write-a", "write-b"):
        want = Counter(
            (
                partition if partition is not None else java_partition(key.encode(), 3),
                key.encode(),
                value,
                tuple(headers or ()),
            )
            for t, partition, key, value, headers in data
            if t == topic
        )
        assert consumed(tidelog_module_broker, topic) == want


def test_topic_option_overrides_the_topic_column(spark: Any, tidelog_module_broker: BrokerHandle) -> None:
    create_topic(tidelog_module_broker.bootstrap, "write-override", 2)
    df = spark.createDataFrame([("elsewhere", f"k{i}", f"v{i}") for i in range(50)], "topic string, key string, value string")
    write_df(spark, tidelog_module_broker, df, topic="write-override")
    got = consumed(tidelog_module_broker, "write-override")
    assert sum(got.values()) == 50
    assert {(k, v) for _, k, v, _ in got} == {(f"k{i}".encode(), f"v{i}".encode()) for i in range(50)}


def test_bad_writes_are_rejected(spark: Any, tidelog_module_broker: BrokerHandle) -> None:
    no_topic = spark.createDataFrame([("k", "v")], "key string, value string")
    with pytest.raises(Exception, match="topic option required"):
        write_df(spark, tidelog_module_broker, no_topic)
    no_value = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        write_df(spark, tidelog_module_broker, no_value, topic="write-a")
    with pytest.raises(Exception, match="Overwrite not allowed"):
        no_topic.write.format("tidelog").option("kafka.bootstrap.servers", tidelog_module_broker.bootstrap).option(
            "topic", "write-a"
        ).mode("overwrite").save()
    null_topic = spark.createDataFrame([(None, "v")], "topic string, value string")
    with pytest.raises(Exception, match="null topic present"):
        write_df(spark, tidelog_module_broker, null_topic)


def test_streaming_sink_copies_a_topic(spark: Any, tidelog_module_broker: BrokerHandle, tmp_path: Path) -> None:
    from kafka import KafkaProducer

    create_topic(tidelog_module_broker.bootstrap, "copy-in", 2)
    create_topic(tidelog_module_broker.bootstrap, "copy-out", 2)
    producer = KafkaProducer(bootstrap_servers=tidelog_module_broker.bootstrap)
    for i in range(500):
        producer.send("copy-in", key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2,
                      headers=[("n", str(i).encode())])
    producer.flush()
    producer.close()

    source = (
        spark.readStream.format("tidelog")
        .option("kafka.bootstrap.servers", tidelog_module_broker.bootstrap)
        .option("subscribe", "copy-in")
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
        .select("key", "value", "partition", "headers")
    )
    query = (
        source.writeStream.format("tidelog")
        .option("kafka.bootstrap.servers", tidelog_module_broker.bootstrap)
        .option("topic", "copy-out")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(timeout=600)
    assert not query.isActive and query.exception() is None
    assert consumed(tidelog_module_broker, "copy-out") == consumed(tidelog_module_broker, "copy-in")
