"""Each fault of the test handle against confluent-kafka (librdkafka): retried, reported once, delayed,
survived, kept."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tidelog.testing import BrokerHandle

pytestmark = pytest.mark.tidelog(topics={"orders": 2})


def producer(broker: BrokerHandle, **config: Any) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": broker.bootstrap, "retry.backoff.ms": 50, "linger.ms": 0,
                     "reconnect.backoff.max.ms": 200, **config})


def deliver(p: Any, topic: str, value: bytes, partition: int = 0, timeout: float = 60.0) -> list[Any]:
    """Produce one record and wait for its delivery reports: [(error, message)]."""
    reports: list[Any] = []
    p.produce(topic, value, partition=partition, on_delivery=lambda err, msg: reports.append((err, msg)))
    deadline = time.monotonic() + timeout
    while not reports and time.monotonic() < deadline:
        p.poll(0.1)
    p.flush(5)  # any further (duplicate) report for the same record would arrive here
    return reports


def consumer(broker: BrokerHandle, **config: Any) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "reconnect.backoff.max.ms": 200, **config})


def poll(c: Any, count: int, timeout: float = 60.0) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is not None and not msg.error():
            got.append(msg)
    return got


def test_retriable_produce_errors_are_retried(tidelog_broker: BrokerHandle) -> None:
    tidelog_broker.inject_errors("Produce", ["NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT"])
    p = producer(tidelog_broker)
    [(err, msg)] = deliver(p, "orders", b"v")
    assert err is None and msg.offset() == 0
    assert tidelog_broker.faults.pending_errors("Produce") == 0
    assert [r.value for r in tidelog_broker.records("orders")] == [b"v"]


def test_non_retriable_produce_error_reaches_the_application_once(tidelog_broker: BrokerHandle) -> None:
    from confluent_kafka import KafkaError

    tidelog_broker.inject_errors("Produce", ["INVALID_TIMESTAMP"])
    p = producer(tidelog_broker)
    [(err, _msg)] = deliver(p, "orders", b"rejected")
    assert err is not None and err.code() == KafkaError.INVALID_TIMESTAMP
    [(err, msg)] = deliver(p, "orders", b"accepted")
    assert err is None and msg.offset() == 0
    assert [r.value for r in tidelog_broker.records("orders")] == [b"accepted"]


def test_fetch_and_commit_errors_are_retried_by_the_consumer(tidelog_broker: BrokerHandle) -> None:
    from confluent_kafka import TopicPartition

    p = producer(tidelog_broker)
    for i in range(4):
        p.produce("orders", b"%d" % i, partition=i % 2)
    assert p.flush(60) == 0
    tidelog_broker.inject_errors("Fetch", ["NOT_LEADER_OR_FOLLOWER", "UNKNOWN_LEADER_EPOCH"])
    tidelog_broker.inject_errors("OffsetCommit", ["COORDINATOR_LOAD_IN_PROGRESS"])
    c = consumer(tidelog_broker)
    try:
        c.assign([TopicPartition("orders", 0, 0), TopicPartition("orders", 1, 0)])
        assert sorted(m.value() for m in poll(c, 4)) == [b"0", b"1", b"2", b"3"]
        c.commit(asynchronous=False)  # answered with the retriable error first, then retried
    finally:
        c.close()
    assert tidelog_broker.faults.pending_errors("Fetch") == 0
    assert tidelog_broker.faults.pending_errors("OffsetCommit") == 0
    assert tidelog_broker.committed_offsets("g") == {("orders", 0): 2, ("orders", 1): 2}


def test_latency_is_observed(tidelog_broker: BrokerHandle) -> None:
    p = producer(tidelog_broker)
    assert deliver(p, "orders", b"warm")[0][0] is None
    tidelog_broker.set_latency(400, "Produce")
    started = time.monotonic()
    assert deliver(p, "orders", b"slow")[0][0] is None
    assert time.monotonic() - started >= 0.4


def test_pause_and_resume_are_survived(tidelog_broker: BrokerHandle) -> None:
    p = producer(tidelog_broker)
    assert deliver(p, "orders", b"before")[0][0] is None
    tidelog_broker.pause()
    reports: list[Any] = []
    p.produce("orders", b"while-paused", partition=0, on_delivery=lambda err, msg: reports.append((err, msg)))
    p.poll(1.0)
    assert reports == []
    tidelog_broker.resume()
    assert p.flush(60) == 0
    [(err, msg)] = reports
    assert err is None and msg.offset() == 1
    assert [r.value for r in tidelog_broker.records("orders", 0)] == [b"before", b"while-paused"]


def test_producer_times_out_while_paused(tidelog_broker: BrokerHandle) -> None:
    from confluent_kafka import KafkaError

    p = producer(tidelog_broker, **{"message.timeout.ms": 1_500})
    assert deliver(p, "orders", b"before")[0][0] is None
    tidelog_broker.pause()
    try:
        [(err, _msg)] = deliver(p, "orders", b"lost")
        assert err.code() == KafkaError._MSG_TIMED_OUT
    finally:
        tidelog_broker.resume()


def test_consumer_survives_dropped_connections(tidelog_broker: BrokerHandle) -> None:
    from confluent_kafka import TopicPartition

    p = producer(tidelog_broker)
    c = consumer(tidelog_broker)
    try:
        c.assign([TopicPartition("orders", 0, 0)])
        assert deliver(p, "orders", b"one")[0][0] is None
        assert [m.value() for m in poll(c, 1)] == [b"one"]
        assert tidelog_broker.drop_connections() >= 2
        assert deliver(p, "orders", b"two")[0][0] is None
        assert [m.value() for m in poll(c, 1)] == [b"two"]
    finally:
        c.close()


def test_restart_keeps_every_acknowledged_record(tidelog_broker: BrokerHandle) -> None:
    from confluent_kafka import TopicPartition

    p = producer(tidelog_broker, **{"enable.idempotence": True})
    acked: list[tuple[int, int]] = []
    stop = threading.Event()

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((msg.partition(), msg.offset()))

    def produce_forever() -> None:
        i = 0
        while not stop.is_set():
            p.produce("orders", b"%d" % i, partition=i % 2, on_delivery=on_delivery)
            p.poll(0.005)
            i += 1

    writer = threading.Thread(target=produce_forever)
    writer.start()
    try:
        while len(acked) < 20:
            time.sleep(0.01)
        tidelog_broker.restart()
        count = len(acked)
        while len(acked) < count + 20:
            time.sleep(0.01)
    finally:
        stop.set()
        writer.join(60)
        p.flush(60)
    stored = {(r.partition, r.offset) for r in tidelog_broker.records("orders")}
    assert set(acked) <= stored
    c = consumer(tidelog_broker)
    try:
        c.assign([TopicPartition("orders", 0, 0), TopicPartition("orders", 1, 0)])
        got = {(m.partition(), m.offset()) for m in poll(c, len(stored))}
    finally:
        c.close()
    assert got >= set(acked)
