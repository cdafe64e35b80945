"""Batch reads with spark.read.format("tidelog") against an in-process broker (done-when 1)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from pipeline_testlib import create_topic, spark_or_skip

from tidelog.testing import BrokerHandle

spark_or_skip()
# Spark starts slowly and shares 2 cores with the broker and other suites: generous per-test limits.
pytestmark = pytest.mark.timeout(900)

TOPIC = "batch-50k"
PARTITIONS = 3
COUNT = 50_000
BASE_TS = 1_700_000_000_000


def record(i: int) -> tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]] | None, int]:
    """Record i goes to partition i % 3 at offset i // 3; some have null keys, values or headers."""
    key = None if i % 101 == 5 else f"k{i}".encode()
    value = None if i % 211 == 0 and key is not None else f"value-{i}-".encode() * (1 + i % 4)
    headers = [("seq", str(i).encode()), ("empty", b"")] if i % 3 == 1 else None
    return i % PARTITIONS, key, value, headers, BASE_TS + i


def expected_rows() -> dict[tuple[int, int], tuple[Any, ...]]:
    rows = {}
    for i in range(COUNT):
        partition, key, value, headers, ts = record(i)
        rows[(partition, i // PARTITIONS)] = (key, value, headers, ts)
    return rows


@pytest.fixture(scope="module")
def topic(tidelog_module_broker: BrokerHandle) -> Iterator[str]:
    from kafka import KafkaProducer

    create_topic(tidelog_module_broker.bootstrap, TOPIC, PARTITIONS)
    producer = KafkaProducer(bootstrap_servers=tidelog_module_broker.bootstrap, linger_ms=50, batch_size=256 * 1024)
    for i in range(COUNT):
        partition, key, value, headers, ts = record(i)
        producer.send(TOPIC, key=key, value=value, partition=partition, headers=headers, timestamp_ms=ts)
    producer.flush()
    producer.close()
    yield TOPIC


def load(spark: Any, broker: Any, **options: str) -> Any:
    reader = spark.read.format("tidelog").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def as_bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def test_full_read_yields_exactly_the_produced_records(spark: Any, tidelog_module_broker: BrokerHandle, topic: str) -> None:
    df = load(spark, tidelog_module_broker, subscribe=topic, includeHeaders="true")
    assert df.rdd.getNumPartitions() == PARTITIONS  # one Spark partition per topic-partition range
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"
    ]
    # toArrow: the 50,000 rows reach the test without Spark's slow per-Row conversion (collect is used below).
    rows = df.toArrow().to_pylist()
    assert len(rows) == COUNT
    want = expected_rows()
    got = {}
    for row in rows:
        assert row["topic"] == topic and row["timestampType"] == 0
        headers = None if row["headers"] is None else [(h["key"], h["value"]) for h in row["headers"]]
        millis = round(row["timestamp"].timestamp() * 1000)
        got[(row["partition"], row["offset"])] = (row["key"], row["value"], headers, millis)
    assert got == want


def test_offset_ranges_are_honoured(spark: Any, tidelog_module_broker: BrokerHandle, topic: str) -> None:
    per_partition = COUNT // PARTITIONS  # partition 0 holds one more record (COUNT % 3 == 2)
    starting = {topic: {"0": 100, "1": -2, "2": 5000}}
    ending = {topic: {"0": 250, "1": 40, "2": -1}}
    df = load(spark, tidelog_module_broker, subscribe=topic, startingOffsets=json.dumps(starting), endingOffsets=json.dumps(ending))
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    end2 = len([i for i in range(COUNT) if i % PARTITIONS == 2])
    want = (
        [(0, o) for o in range(100, 250)] + [(1, o) for o in range(0, 40)] + [(2, o) for o in range(5000, end2)]
    )
    assert got == want
    assert end2 in (per_partition, per_partition + 1)


def test_assign_and_values(spark: Any, tidelog_module_broker: BrokerHandle, topic: str) -> None:
    df = load(spark, tidelog_module_broker, assign=json.dumps({topic: [1]}), endingOffsets=json.dumps({topic: {"1": 10}}))
    rows = df.orderBy("offset").collect()
    want = [record(3 * o + 1) for o in range(10)]
    assert [(r.partition, r.offset) for r in rows] == [(1, o) for o in range(10)]
    assert [(as_bytes(r.key), as_bytes(r.value)) for r in rows] == [(w[1], w[2]) for w in want]


def test_starting_timestamp(spark: Any, tidelog_module_broker: BrokerHandle, topic: str) -> None:
    # Record i has timestamp BASE_TS + i, so the first offset with ts >= BASE_TS + 30_000 is i = 30_000 and up.
    df = load(spark, tidelog_module_broker, subscribePattern="batch-5.*", startingTimestamp=str(BASE_TS + 30_000))
    offsets = {p: [] for p in range(PARTITIONS)}
    for r in df.select("partition", "offset").collect():
        offsets[r.partition].append(r.offset)
    for p in range(PARTITIONS):
        first_i = next(i for i in range(30_000, COUNT) if i % PARTITIONS == p)
        assert min(offsets[p]) == first_i // PARTITIONS
        assert len(offsets[p]) == len([i for i in range(first_i, COUNT) if i % PARTITIONS == p])


def test_min_partitions_splits_ranges_without_changing_rows(spark: Any, tidelog_module_broker: BrokerHandle, topic: str) -> None:
    # Like the connector, minPartitions is a hint: each range gets round(share * minPartitions) pieces.
    df = load(spark, tidelog_module_broker, subscribe=topic, minPartitions="6", endingOffsets=json.dumps(
        {topic: {"0": 3000, "1": 3000, "2": 3000}}))
    assert df.rdd.getNumPartitions() == 6
    offsets = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert offsets == [(p, o) for p in range(PARTITIONS) for o in range(3000)]


def test_bad_options_fail_the_query(spark: Any, tidelog_module_broker: BrokerHandle, topic: str) -> None:
    with pytest.raises(Exception, match="starting offset can't be latest"):
        load(spark, tidelog_module_broker, subscribe=topic, startingOffsets="latest").collect()
    with pytest.raises(Exception, match="must specify all TopicPartitions"):
        load(spark, tidelog_module_broker, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 1}})).collect()


def test_timestamp_ranges_and_strategy(spark: Any, tidelog_module_broker: BrokerHandle, topic: str) -> None:
    # Per-partition start by timestamp, global end by timestamp: records i in [300, 600) (ts = BASE_TS + i).
    by_ts = {topic: {str(p): BASE_TS + 300 for p in range(PARTITIONS)}}
    df = load(spark, tidelog_module_broker, subscribe=topic, startingOffsetsByTimestamp=json.dumps(by_ts),
              endingTimestamp=str(BASE_TS + 600))
    got = sorted(r.partition + PARTITIONS * r.offset for r in df.select("partition", "offset").collect())
    assert got == list(range(300, 600))
    # A start timestamp after every record: "error" (the default) fails, "latest" reads nothing.
    future = str(BASE_TS + 10 * COUNT)
    with pytest.raises(Exception, match="No offset matched the timestamp"):
        load(spark, tidelog_module_broker, subscribe=topic, startingTimestamp=future).collect()
    empty = load(spark, tidelog_module_broker, subscribe=topic, startingTimestamp=future, startingOffsetsByTimestampStrategy="latest")
    assert empty.count() == 0
