"""Issue #10 item 1 on the wire: every kind of invalid batch, sent through a raw socket (KafkaWire) and through a
real client where one can be made to send it, gets Kafka's error; nothing of it becomes visible, and a following
valid produce + consume + ListOffsets-by-timestamp on the same partition works (no poisoned partition)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from broker_testlib import LIST_OFFSETS, TS, batch, produce
from hostile_batches import CODECS, hostile, unused_attribute_bits

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.protocol.records import compress
from tidelog.testing import BrokerHandle, KafkaWire

CASES = hostile()


@pytest.fixture(scope="module")
def topic(tidelog_module_broker: BrokerHandle) -> str:
    name = f"hostile-{uuid.uuid4().hex[:8]}"
    tidelog_module_broker.create_topic(name)
    return name


def list_offset_for_timestamp(client: KafkaWire, topic: str, timestamp: int) -> tuple[int, int, int]:
    cls = request_class(LIST_OFFSETS)[7]
    T = cls.ListOffsetsTopic
    req = cls(replica_id=-1, isolation_level=0, topics=[
        T(name=topic, partitions=[T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                         timestamp=timestamp)])])
    [t] = client.request(LIST_OFFSETS, 7, req).topics
    [p] = t.partitions
    return p.error_code, p.timestamp, p.offset


def consume_all(bootstrap: str, topic: str) -> list[Any]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=5_000,
                             request_timeout_ms=60_000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        return list(consumer)
    finally:
        consumer.close()


@pytest.mark.parametrize(("name", "build", "code"), CASES, ids=[c[0] for c in CASES])
def test_hostile_batch_over_the_wire(client: KafkaWire, topic: str, name: str, build: Callable[[], bytes],
                                     code: ErrorCode) -> None:
    r = produce(client, topic, build())
    assert r.error_code == code, f"{name}: {r}"
    assert r.base_offset == -1 and r.record_errors == []  # a batch-level error: no per-record errors


def test_partition_is_not_poisoned_after_every_hostile_batch(tidelog_module_broker: BrokerHandle, client: KafkaWire, topic: str) -> None:
    for _name, build, _code in CASES:  # whatever ran before (or alone): send them all once more
        assert produce(client, topic, build()).error_code != 0
    end = list_offset_for_timestamp(client, topic, -1)[2]
    assert end == 0, "a refused batch consumed offsets"
    assert produce(client, topic, batch(3, ts=TS)).error_code == 0
    for codec in CODECS.values():  # unused attribute bits: accepted, as Kafka ignores them
        assert produce(client, topic, unused_attribute_bits(codec)).error_code == 0

    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=tidelog_module_broker.bootstrap, compression_type="gzip",
                             request_timeout_ms=60_000)
    try:
        producer.send(topic, key=b"real", value=b"client", partition=0, timestamp_ms=TS + 100).get(timeout=60)
    finally:
        producer.close()
    got = consume_all(tidelog_module_broker.bootstrap, topic)
    assert [m.offset for m in got] == list(range(19))
    assert [m.value for m in got[:3]] == [b"v0", b"v1", b"v2"]
    assert got[-1].value == b"client"
    assert list_offset_for_timestamp(client, topic, TS + 1) == (0, TS + 1, 1)
    assert list_offset_for_timestamp(client, topic, TS + 100) == (0, TS + 100, 18)


@pytest.fixture
def broken_codec(request: pytest.FixtureRequest) -> Iterator[str]:
    """Make kafka-python's producer emit a garbage (gzip) or truncated (lz4) payload: a real client's bytes."""
    import kafka.record.default_records as dr

    codec = request.param
    attr = {"gzip": "gzip_encode", "lz4": "lz4_encode"}[codec]
    original = getattr(dr, attr)
    if codec == "gzip":
        setattr(dr, attr, lambda data, *a, **kw: b"\x1f\x8b not really gzip " + bytes(data[:20]))
    else:
        setattr(dr, attr, lambda data, *a, **kw: compress(3, bytes(data))[:-9])
    try:
        yield codec
    finally:
        setattr(dr, attr, original)


@pytest.mark.parametrize("broken_codec", ["gzip", "lz4"], indirect=True)
def test_real_client_sending_a_broken_payload_gets_corrupt_message(tidelog_module_broker: BrokerHandle, client: KafkaWire,
                                                                    broken_codec: str) -> None:
    from kafka import KafkaProducer
    from kafka.errors import CorruptRecordError, KafkaError

    name = f"broken-{broken_codec}-{uuid.uuid4().hex[:6]}"
    tidelog_module_broker.create_topic(name)
    producer = KafkaProducer(bootstrap_servers=tidelog_module_broker.bootstrap, compression_type=broken_codec, retries=0,
                             request_timeout_ms=60_000)
    try:
        with pytest.raises(KafkaError) as info:
            producer.send(name, value=b"x" * 200, partition=0).get(timeout=60)
    finally:
        producer.close()
    assert isinstance(info.value, CorruptRecordError), info.value
    assert produce(client, name, batch(2)).error_code == 0
    assert [m.offset for m in consume_all(tidelog_module_broker.bootstrap, name)] == [0, 1]
