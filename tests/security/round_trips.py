"""Produce-then-consume round trips with real clients, shared by the security client tests: each sends the values
it is given and returns what a consumer group read back (the caller compares)."""

from __future__ import annotations

import time
from typing import Any


def confluent_round_trip(conf: dict[str, Any], topic: str, sent: list[bytes]) -> list[bytes]:
    from confluent_kafka import Consumer, Producer

    producer = Producer(conf)
    for v in sent:
        producer.produce(topic, v)
    assert producer.flush(60) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 120
    while len(got) < len(sent) and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    consumer.close()
    return got


def kafka_python_round_trip(conf: dict[str, Any], topic: str, sent: list[bytes]) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(**conf)
    for v in sent:
        producer.send(topic, v)
    producer.flush(60)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest",
                             consumer_timeout_ms=30_000, **conf)
    got: list[bytes] = []
    for m in consumer:
        got.append(m.value)
        if len(got) == len(sent):
            break
    consumer.close()
    return got
