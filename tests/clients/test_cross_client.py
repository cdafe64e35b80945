"""Records written by one client read back by the others (catches a broker that only round-trips bytes a
particular client wrote the way it reads them)."""

from __future__ import annotations

import asyncio

import pytest

from . import test_aiokafka, test_confluent, test_kafka_python
from .conftest import JavaClient
from .records import PARTITIONS, assert_records, base_timestamp, expected
from .test_java import java_consume

COUNT = 6000


@pytest.mark.java
def test_java_written_read_by_python_clients(tidelog_module_broker, java_client: JavaClient) -> None:
    topic = "cross-java-snappy"
    tidelog_module_broker.create_topic(topic, PARTITIONS)
    base_ts = base_timestamp()
    out = java_client.run(
        "produce", tidelog_module_broker.bootstrap, topic, str(COUNT), str(PARTITIONS), "snappy", str(base_ts)
    )
    assert out[-1]["acked"] == COUNT
    want = expected("snappy", base_ts, COUNT)
    assert_records(test_kafka_python.consume(tidelog_module_broker.bootstrap, topic, COUNT), want)
    assert_records(test_confluent.consume(tidelog_module_broker.bootstrap, topic, COUNT), want)
    assert_records(asyncio.run(test_aiokafka.consume(tidelog_module_broker.bootstrap, topic, COUNT)), want)


@pytest.mark.java
def test_python_written_read_by_java(tidelog_module_broker, java_client: JavaClient) -> None:
    topic = "cross-kafka-python-zstd"
    tidelog_module_broker.create_topic(topic, PARTITIONS)
    base_ts = base_timestamp()
    test_kafka_python.produce(tidelog_module_broker.bootstrap, topic, "zstd", base_ts, COUNT)
    want = expected("zstd", base_ts, COUNT)
    assert_records(java_consume(java_client, tidelog_module_broker.bootstrap, topic, COUNT), want)
    assert_records(test_confluent.consume(tidelog_module_broker.bootstrap, topic, COUNT), want)


def test_confluent_written_read_by_kafka_python_and_aiokafka(tidelog_module_broker) -> None:
    topic = "cross-confluent-lz4"
    tidelog_module_broker.create_topic(topic, PARTITIONS)
    base_ts = base_timestamp()
    test_confluent.produce(tidelog_module_broker.bootstrap, topic, "lz4", base_ts, COUNT)
    want = expected("lz4", base_ts, COUNT)
    assert_records(test_kafka_python.consume(tidelog_module_broker.bootstrap, topic, COUNT), want)
    assert_records(asyncio.run(test_aiokafka.consume(tidelog_module_broker.bootstrap, topic, COUNT)), want)
