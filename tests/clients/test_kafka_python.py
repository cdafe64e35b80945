"""kafka-python 3.x: 20,000 keyed records with headers per codec to a 3-partition topic, read back exactly."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import TopicPartition

from .records import (
    CODECS,
    COUNT,
    PARTITIONS,
    Rec,
    assert_round_trip,
    headers,
    key,
    normalize_headers,
    stored_batches,
    value,
)

# kafka-python 3's default: idempotence on (InitProducerId, then sequenced batches), kept on purposely so this
# suite covers the producer as users run it.
IDEMPOTENCE = True


def produce(bootstrap: str, topic: str, codec: str, base_ts: int, count: int = COUNT) -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        compression_type=None if codec == "none" else codec,
        linger_ms=20,
        batch_size=131072,
        enable_idempotence=IDEMPOTENCE,
        request_timeout_ms=60000,
    )
    try:
        futures = [
            producer.send(
                topic,
                key=key(i),
                value=value(i),
                headers=list(headers(i, codec)),
                partition=i % PARTITIONS,
                timestamp_ms=base_ts + i,
            )
            for i in range(count)
        ]
        producer.flush(timeout=180)
        for i, fut in enumerate(futures):
            md = fut.get(timeout=60)
            assert (md.partition, md.offset) == (i % PARTITIONS, i // PARTITIONS)
    finally:
        producer.close(timeout=30)


def consume(bootstrap: str, topic: str, count: int = COUNT, partitions: int = PARTITIONS) -> list[Rec]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=5000,
    )
    got: list[Rec] = []
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + 180
        while len(got) < count and time.monotonic() < deadline:
            for recs in consumer.poll(timeout_ms=1000).values():
                for r in recs:
                    assert r.timestamp_type == 0, "CreateTime expected"
                    got.append(
                        Rec(r.partition, r.offset, r.timestamp, r.key, r.value, normalize_headers(r.headers))
                    )
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(tidelog_module_broker, codec: str) -> None:
    topic = f"kafka-python-{codec}"
    assert_round_trip(tidelog_module_broker, topic, codec, produce, consume)
    # Idempotent batches carry the producer id from InitProducerId and a sequence.
    assert all(h.producer_id >= 0 for h in stored_batches(tidelog_module_broker.log_dir, topic)) == IDEMPOTENCE
