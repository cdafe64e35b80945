"""Helpers for the real-client transaction tests: reading a topic back with confluent-kafka in either isolation
level, end offsets, and the transactional write scenario every client runs."""

from __future__ import annotations

import time

PARTITIONS = 3
PER_TXN = 30  # records per transaction: 10 per partition


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=60)


def read_all(bootstrap: str, topic: str, isolation: str, partitions: int = PARTITIONS,
             timeout: float = 60.0) -> list[bytes]:
    """Every record value visible under `isolation`, read from offset 0 until end of each partition."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                  "isolation.level": isolation, "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[bytes] = []
        eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(eof) < partitions:
            assert time.monotonic() < deadline, f"read of {topic} timed out ({len(got)} records)"
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    eof.add(msg.partition())
                    continue
                raise AssertionError(msg.error())
            eof.discard(msg.partition())
            got.append(msg.value())
        return got
    finally:
        c.close()


def end_offsets(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)]
    finally:
        c.close()


def values(tag: str, txn: int) -> list[bytes]:
    return [f"{tag}-{txn}-{i}".encode() for i in range(PER_TXN)]


def check_outcome(bootstrap: str, topic: str, tag: str, outcomes: list[bool]) -> None:
    """After transactions with `outcomes` (True = committed) of PER_TXN records over all partitions:
    read_committed sees exactly the committed ones, read_uncommitted all, and every partition ends with
    its records plus one marker per transaction."""
    committed = sorted(v for t, ok in enumerate(outcomes) if ok for v in values(tag, t))
    everything = sorted(v for t in range(len(outcomes)) for v in values(tag, t))
    assert sorted(read_all(bootstrap, topic, "read_committed")) == committed
    assert sorted(read_all(bootstrap, topic, "read_uncommitted")) == everything
    per_partition = PER_TXN // PARTITIONS
    assert end_offsets(bootstrap, topic) == [len(outcomes) * (per_partition + 1)] * PARTITIONS


def record_partition(i: int) -> int:
    return i % PARTITIONS


