"""Each fault of the test handle against kafka-python: retried, reported once, delayed, survived, kept."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tidelog.testing import BrokerHandle

pytestmark = pytest.mark.tidelog(topics={"orders": 2})


def producer(broker: BrokerHandle, **config: Any) -> Any:
    from kafka import KafkaProducer

    return KafkaProducer(bootstrap_servers=broker.bootstrap, **{"retry_backoff_ms": 50, "request_timeout_ms": 30_000,
                                                                **config})


def consume(broker: BrokerHandle, topic: str, count: int, **config: Any) -> list[Any]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", **config)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(2)])
        return poll(consumer, count)
    finally:
        consumer.close()


def poll(consumer: Any, count: int, timeout: float = 60.0) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(200).values():
            got.extend(records)
    return got


def test_retriable_produce_errors_are_retried(tidelog_broker: BrokerHandle) -> None:
    tidelog_broker.inject_errors("Produce", ["NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT"], topic="orders")
    p = producer(tidelog_broker, retries=5)
    try:
        assert p.send("orders", key=b"k", value=b"v", partition=0).get(60).offset == 0
    finally:
        p.close()
    assert tidelog_broker.faults.pending_errors("Produce") == 0
    assert [(r.key, r.value) for r in tidelog_broker.records("orders")] == [(b"k", b"v")]  # written once


def test_non_retriable_produce_error_reaches_the_application_once(tidelog_broker: BrokerHandle) -> None:
    from kafka.errors import InvalidTimestampError

    tidelog_broker.inject_errors("Produce", ["INVALID_TIMESTAMP"])
    p = producer(tidelog_broker, retries=5, enable_idempotence=False)
    errors: list[Exception] = []
    try:
        future = p.send("orders", b"rejected", partition=0).add_errback(errors.append)
        with pytest.raises(InvalidTimestampError):
            future.get(60)
        assert p.send("orders", b"accepted", partition=0).get(60).offset == 0  # not retried: next one is fine
    finally:
        p.close()
    assert len(errors) == 1
    assert [r.value for r in tidelog_broker.records("orders")] == [b"accepted"]


def test_fetch_and_commit_errors_are_retried_by_the_consumer(tidelog_broker: BrokerHandle) -> None:
    p = producer(tidelog_broker)
    for i in range(4):
        p.send("orders", b"%d" % i, partition=i % 2)
    p.flush(60)
    p.close()
    tidelog_broker.inject_errors("Fetch", ["NOT_LEADER_OR_FOLLOWER", "UNKNOWN_LEADER_EPOCH"])
    tidelog_broker.inject_errors("OffsetCommit", ["COORDINATOR_LOAD_IN_PROGRESS"])
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=tidelog_broker.bootstrap, group_id="g", auto_offset_reset="earliest",
                             enable_auto_commit=False, retry_backoff_ms=50)
    try:
        consumer.assign([TopicPartition("orders", 0), TopicPartition("orders", 1)])
        assert sorted(r.value for r in poll(consumer, 4)) == [b"0", b"1", b"2", b"3"]
        consumer.commit()  # the first OffsetCommit is answered with the retriable error, then retried
    finally:
        consumer.close()
    assert tidelog_broker.faults.pending_errors("Fetch") == 0
    assert tidelog_broker.faults.pending_errors("OffsetCommit") == 0
    assert tidelog_broker.committed_offsets("g") == {("orders", 0): 2, ("orders", 1): 2}


def test_latency_is_observed(tidelog_broker: BrokerHandle) -> None:
    p = producer(tidelog_broker)
    try:
        p.send("orders", b"warm", partition=0).get(60)
        tidelog_broker.set_latency(400, "Produce")
        started = time.monotonic()
        p.send("orders", b"slow", partition=0).get(60)
        assert time.monotonic() - started >= 0.4
    finally:
        p.close()


def test_pause_and_resume_are_survived(tidelog_broker: BrokerHandle) -> None:
    p = producer(tidelog_broker, retries=1_000, reconnect_backoff_max_ms=200)
    try:
        p.send("orders", b"before", partition=0).get(60)
        tidelog_broker.pause()
        future = p.send("orders", b"while-paused", partition=0)
        time.sleep(1.0)
        assert not future.is_done
        tidelog_broker.resume()
        assert future.get(60).offset == 1
    finally:
        p.close()
    assert [r.value for r in tidelog_broker.records("orders", 0)] == [b"before", b"while-paused"]


def test_producer_times_out_while_paused(tidelog_broker: BrokerHandle) -> None:
    from kafka.errors import KafkaTimeoutError

    p = producer(tidelog_broker, request_timeout_ms=1_000, delivery_timeout_ms=2_000, linger_ms=0)
    try:
        p.send("orders", b"before", partition=0).get(60)
        tidelog_broker.pause()
        with pytest.raises(KafkaTimeoutError):
            p.send("orders", b"lost", partition=0).get(60)
    finally:
        tidelog_broker.resume()
        p.close()


def test_consumer_survives_dropped_connections(tidelog_broker: BrokerHandle) -> None:
    from kafka import KafkaConsumer, TopicPartition

    p = producer(tidelog_broker)
    consumer = KafkaConsumer(bootstrap_servers=tidelog_broker.bootstrap, auto_offset_reset="earliest",
                             reconnect_backoff_max_ms=200)
    try:
        consumer.assign([TopicPartition("orders", 0)])
        p.send("orders", b"one", partition=0).get(60)
        assert [r.value for r in poll(consumer, 1)] == [b"one"]
        assert tidelog_broker.drop_connections() >= 2  # the producer's and the consumer's
        p.send("orders", b"two", partition=0).get(60)
        assert [r.value for r in poll(consumer, 1)] == [b"two"]
    finally:
        consumer.close()
        p.close()


def test_restart_keeps_every_acknowledged_record(tidelog_broker: BrokerHandle) -> None:
    p = producer(tidelog_broker, retries=1_000, reconnect_backoff_max_ms=200)
    acked: list[tuple[int, int]] = []
    stop = threading.Event()

    def produce_forever() -> None:
        i = 0
        while not stop.is_set():
            md = p.send("orders", b"%d" % i, partition=i % 2).get(60)
            acked.append((md.partition, md.offset))
            i += 1

    writer = threading.Thread(target=produce_forever)
    writer.start()
    try:
        while len(acked) < 20:
            time.sleep(0.01)
        tidelog_broker.restart()
        count = len(acked)
        while len(acked) < count + 20:  # the producer carries on against the restarted broker
            time.sleep(0.01)
    finally:
        stop.set()
        writer.join(60)
        p.close()
    stored = {(r.partition, r.offset) for r in tidelog_broker.records("orders")}
    assert set(acked) <= stored
    got = consume(tidelog_broker, "orders", len(acked))
    assert {(r.partition, r.offset) for r in got} >= set(acked)
