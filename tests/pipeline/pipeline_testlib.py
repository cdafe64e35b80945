"""Helpers shared by the pipeline tests (a plain module: conftest.py holds only fixtures)."""

from __future__ import annotations

from typing import Any

import pytest


def spark_or_skip() -> Any:
    """Skip the calling module only when pyspark is not importable."""
    return pytest.importorskip("pyspark", reason="pyspark is not installed: pip install '.[test,spark]'")


def create_topic(bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60_000)
    try:
        admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, topic_configs=config or {})],
            timeout_ms=60_000,
        )
    finally:
        admin.close()


def consume_all(bootstrap: str, topic: str, timeout_s: float = 120) -> list[Any]:
    """Every record of `topic` up to its current end offsets, through kafka-python (the independent reader)."""
    import time

    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        consumer.seek_to_beginning(*tps)
        records: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"timed out consuming {topic}"
            for batch in consumer.poll(timeout_ms=1000).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()
