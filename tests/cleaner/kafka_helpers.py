"""kafka-python helpers shared by the cleaner's broker-level tests."""

from __future__ import annotations

import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

COMPACT_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": "1024",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "86400000",
}


def create_topic(bootstrap: str, name: str, config: dict[str, str]) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60_000)
    try:
        admin.create_topics([NewTopic(name, 1, 1, topic_configs=config)], timeout_ms=60_000)
    finally:
        admin.close()


def alter_topic_config(bootstrap: str, name: str, config: dict[str, str]) -> None:
    """AlterConfigs: replaces the topic's whole override set."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60_000)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs=config)])
    finally:
        admin.close()


def produce_keyed(bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None]]) -> dict[int, tuple]:
    """One record per batch (flush after each); returns offset -> (key, value)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0, request_timeout_ms=60_000)
    out = {}
    try:
        for key, value in records:
            meta = producer.send(topic, key=key, value=value, partition=0).get(timeout=60)
            out[meta.offset] = (key, value)
    finally:
        producer.close(timeout=30)
    return out


def consume_all(bootstrap: str, topic: str, timeout_s: float = 90.0,
                from_beginning: bool = False) -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every record from offset 0 (or the log start) up to the current end."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, request_timeout_ms=60_000,
                             auto_offset_reset="earliest")
    tp = TopicPartition(topic, 0)
    try:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        if from_beginning:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, 0)
        out = []
        deadline = time.monotonic() + timeout_s
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                out.extend((r.offset, r.key, r.value) for r in records)
        assert consumer.position(tp) >= end, f"only reached {consumer.position(tp)} of {end}"
        return out
    finally:
        consumer.close()


def latest_per_key(produced: dict[int, tuple]) -> dict[bytes, tuple[int, bytes | None]]:
    out: dict[bytes, tuple[int, bytes | None]] = {}
    for offset in sorted(produced):
        key, value = produced[offset]
        out[key] = (offset, value)
    return out
