"""confluent-kafka (librdkafka): 20,000 keyed records with headers per codec, read back exactly."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from .records import (
    CODECS,
    COUNT,
    PARTITIONS,
    Rec,
    assert_round_trip,
    headers,
    key,
    normalize_headers,
    value,
)


def produce(bootstrap: str, topic: str, codec: str, base_ts: int, count: int = COUNT) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "compression.type": codec,
            "linger.ms": 20,
            "batch.size": 262144,
            "request.timeout.ms": 60000,
        }
    )
    errors: list[str] = []
    placed: dict[int, tuple[int, int]] = {}

    def on_delivery(err, msg) -> None:  # noqa: ANN001 - librdkafka callback signature
        if err is not None:
            errors.append(str(err))
        else:
            placed[int(msg.key()[4:])] = (msg.partition(), msg.offset())

    for i in range(count):
        while True:
            try:
                producer.produce(
                    topic,
                    key=key(i),
                    value=value(i),
                    headers=list(headers(i, codec)),
                    partition=i % PARTITIONS,
                    timestamp=base_ts + i,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(180) == 0, "messages still in flight after flush"
    assert not errors, errors[:3]
    assert placed == {i: (i % PARTITIONS, i // PARTITIONS) for i in range(count)}


def consume(bootstrap: str, topic: str, count: int = COUNT, partitions: int = PARTITIONS) -> list[Rec]:
    # group.id is mandatory for librdkafka consumers; assign() uses no group membership.
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"unused-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    got: list[Rec] = []
    try:
        consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + 180
        while len(got) < count and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=5000, timeout=1.0):
                if m.error() is not None:
                    raise KafkaException(m.error())
                ts_type, ts = m.timestamp()
                assert ts_type == TIMESTAMP_CREATE_TIME
                got.append(
                    Rec(m.partition(), m.offset(), ts, m.key(), m.value(), normalize_headers(m.headers()))
                )
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(tidelog_module_broker, codec: str) -> None:
    assert_round_trip(tidelog_module_broker, f"confluent-{codec}", codec, produce, consume)
