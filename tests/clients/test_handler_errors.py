"""Kafka's error policy seen by real clients (issue 30): an exception inside the broker's CreateTopics,
DescribeConfigs, OffsetCommit or JoinGroup handler reaches confluent-kafka (librdkafka) and the Java client as
UNKNOWN_SERVER_ERROR, on a connection that stays open: the same client's next request succeeds, and the broker
closes no connection."""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.java_drivers import compile_driver
from tidelog.testing import BrokerHandle

from .conftest import JAR_DIR, JVM_FLAGS, ROOT

pytestmark = pytest.mark.tidelog(topics={"orders": 1})

APIS = ("CreateTopics", "DescribeConfigs", "OffsetCommit", "JoinGroup")


class _Closings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Closing connection"):
            self.lines.append(record.getMessage())


@pytest.fixture
def closings() -> Iterator[_Closings]:
    handler = _Closings()
    logger = logging.getLogger("tidelog")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def _failed_with_unknown_server_error(call: Any) -> None:
    with pytest.raises(KafkaException) as failed:
        call()
    assert failed.value.args[0].code() == KafkaError.UNKNOWN, failed.value.args[0]


def test_confluent_kafka_sees_unknown_server_error(tidelog_broker: BrokerHandle, closings: _Closings) -> None:
    admin = AdminClient({"bootstrap.servers": tidelog_broker.bootstrap})
    tidelog_broker.inject_handler_exceptions("CreateTopics")
    new = [NewTopic("orders-new", 1, 1)]
    _failed_with_unknown_server_error(lambda: admin.create_topics(new)["orders-new"].result(30))
    admin.create_topics(new)["orders-new"].result(30)  # the same client, its connection kept

    tidelog_broker.inject_handler_exceptions("DescribeConfigs")
    resource = ConfigResource("topic", "orders")
    _failed_with_unknown_server_error(lambda: admin.describe_configs([resource])[resource].result(30))
    assert admin.describe_configs([resource])[resource].result(30)["cleanup.policy"].value == "delete"

    consumer = Consumer({"bootstrap.servers": tidelog_broker.bootstrap, "group.id": "handler-errors",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        offsets = [CkTopicPartition("orders", 0, 0)]
        consumer.assign(offsets)
        tidelog_broker.inject_handler_exceptions("OffsetCommit")
        _failed_with_unknown_server_error(lambda: consumer.commit(offsets=offsets, asynchronous=False))
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()

    # JoinGroup: librdkafka reports the failed join as a consumer error event, then joins again.
    tidelog_broker.inject_handler_exceptions("JoinGroup")
    consumer = Consumer({"bootstrap.servers": tidelog_broker.bootstrap, "group.id": "handler-errors-join",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["orders"])
        errors = []
        deadline = time.monotonic() + 60
        while not consumer.assignment() and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error():
                errors.append(msg.error())
        assert consumer.assignment(), "the consumer never joined after the failed JoinGroup"
        assert [e.code() for e in errors] == [KafkaError.UNKNOWN], errors
        assert tidelog_broker.faults.pending_handler_exceptions("JoinGroup") == 0
    finally:
        consumer.close()
    assert not closings.lines, closings.lines


@pytest.mark.java
def test_java_client_sees_unknown_server_error(tidelog_broker: BrokerHandle, closings: _Closings,
                                               java_client: Any) -> None:
    del java_client  # the fixture checks java/javac and fetches the jars
    classes = compile_driver(ROOT / "tests" / "java" / "HandlerErrors.java", "java-handler-errors")
    jars = ["kafka-clients.jar", "slf4j-api.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar"]
    classpath = os.pathsep.join([str(classes), *(str(JAR_DIR / j) for j in jars)])
    for api in APIS:
        tidelog_broker.inject_handler_exceptions(api)
    proc = subprocess.run(["java", *JVM_FLAGS, "-cp", classpath, "HandlerErrors", tidelog_broker.bootstrap,
                           "orders"], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    outcome = {}
    for line in proc.stdout.splitlines():
        step, attempt, result = line.split(" ", 2)
        outcome[(step, attempt)] = result
    assert outcome[("create_topics", "first")].startswith("UnknownServerException"), outcome
    assert outcome[("describe_configs", "first")].startswith("UnknownServerException"), outcome
    # The consumer's commit and join handlers raise KafkaException naming the error (ConsumerCoordinator).
    for step in ("offset_commit", "join_group"):
        assert "The server experienced an unexpected error" in outcome[(step, "first")], outcome
    for step in ("create_topics", "describe_configs", "offset_commit", "join_group"):
        assert outcome[(step, "second")] == "ok", outcome
    for api in APIS:
        assert tidelog_broker.faults.pending_handler_exceptions(api) == 0
    assert not closings.lines, closings.lines
