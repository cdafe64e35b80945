"""ListOffsets and OffsetForLeaderEpoch over real sockets, plus the real clients' offset lookups."""

from __future__ import annotations

from typing import Any

import pytest
from broker_testlib import (
    LIST_OFFSETS,
    OFFSET_FOR_LEADER_EPOCH,
    TS,
    batch,
    produce,
)

from tidelog.protocol.messages import request_class
from tidelog.protocol.records import Record, build_batch
from tidelog.testing import BrokerHandle, KafkaWire


def list_offsets(client: KafkaWire, topic: str, queries: list[tuple[int, int]], version: int = 7,
                 isolation_level: int = 0, current_leader_epoch: int = -1, replica_id: int = -1) -> list[Any]:
    """queries: (partition, timestamp). Returns the partition responses."""
    cls = request_class(LIST_OFFSETS)[version]
    T = cls.ListOffsetsTopic
    request = cls(replica_id=replica_id, isolation_level=isolation_level, topics=[T(name=topic, partitions=[
        T.ListOffsetsPartition(partition_index=p, current_leader_epoch=current_leader_epoch, timestamp=ts)
        for p, ts in queries])])
    response = client.request(LIST_OFFSETS, version, request)
    return [p for t in response.topics for p in t.partitions]


def one(client: KafkaWire, topic: str, ts: int, **kw: Any) -> tuple[int, int, int]:
    [p] = list_offsets(client, topic, [(0, ts)], **kw)
    return p.error_code, p.timestamp, p.offset


@pytest.fixture(scope="module")
def filled(tidelog_module_broker: BrokerHandle) -> str:
    """Offsets 0-2 at TS+0..2, 3-5 at TS+10..12 except offset 4 at TS+50 (the max), 6-7 at TS+20..21."""
    client = KafkaWire(tidelog_module_broker.bootstrap)
    try:
        tidelog_module_broker.create_topic("lo")
        produce(client, "lo", batch(3, ts=TS))
        recs = [Record(0, TS + 10, b"k", b"a"), Record(1, TS + 50, b"k", b"b"), Record(2, TS + 12, b"k", b"c")]
        produce(client, "lo", bytes(build_batch(recs, 0, compression=2)))
        produce(client, "lo", batch(2, ts=TS + 20))
    finally:
        client.close()
    return "lo"


def test_latest_and_earliest(client: KafkaWire, filled: str) -> None:
    assert one(client, filled, -1) == (0, -1, 8)
    assert one(client, filled, -2) == (0, -1, 0)
    assert one(client, filled, -1, version=1) == (0, -1, 8)
    assert one(client, filled, -1, isolation_level=1) == (0, -1, 8)  # LSO == HW without open transactions


def test_timestamp_lookup(client: KafkaWire, filled: str) -> None:
    assert one(client, filled, TS) == (0, TS, 0)
    assert one(client, filled, TS + 1) == (0, TS + 1, 1)
    assert one(client, filled, TS + 3) == (0, TS + 10, 3)  # first record with timestamp >= target
    assert one(client, filled, TS + 11) == (0, TS + 50, 4)  # record order, not timestamp order
    assert one(client, filled, TS + 13) == (0, TS + 50, 4)
    assert one(client, filled, TS + 51) == (0, -1, -1)  # nothing that late: (-1, -1) and no error


def test_max_timestamp_needs_v7(client: KafkaWire, filled: str) -> None:
    assert one(client, filled, -3) == (0, TS + 50, 4)
    assert one(client, filled, -3, version=6)[0] == 35  # UNSUPPORTED_VERSION
    assert one(client, filled, -4)[0] == 35  # earliest-local needs v8
    assert one(client, filled, -7)[0] == 35


def test_leader_epoch_in_v4_plus(client: KafkaWire, filled: str) -> None:
    [p] = list_offsets(client, filled, [(0, TS + 3)], version=4)
    assert (p.offset, p.leader_epoch) == (3, 0)
    [p] = list_offsets(client, filled, [(0, -1)], version=4, current_leader_epoch=0)
    assert (p.error_code, p.offset, p.leader_epoch) == (0, 8, 0)
    [p] = list_offsets(client, filled, [(0, -1)], version=4, current_leader_epoch=9)
    assert p.error_code == 75  # UNKNOWN_LEADER_EPOCH


def test_empty_topic_unknown_partition_and_duplicates(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("lo-empty", 2)
    assert one(client, "lo-empty", -1) == (0, -1, 0)
    assert one(client, "lo-empty", -2) == (0, -1, 0)
    assert one(client, "lo-empty", -3) == (0, -1, -1)
    assert one(client, "lo-empty", TS) == (0, -1, -1)
    [p] = list_offsets(client, "lo-empty", [(7, -1)])
    assert p.error_code == 3
    assert one(client, "nope", -1)[0] == 3
    a, b, c = list_offsets(client, "lo-empty", [(0, -1), (0, -2), (1, -1)])
    assert (a.error_code, b.error_code, c.error_code) == (42, 42, 0)  # INVALID_REQUEST for the repeated one


def offset_for_leader_epoch(client: KafkaWire, topic: str, partition: int, epoch: int, version: int = 4,
                            current_leader_epoch: int = -1) -> Any:
    cls = request_class(OFFSET_FOR_LEADER_EPOCH)[version]
    T = cls.OffsetForLeaderTopic
    request = cls(replica_id=-1, topics=[T(topic=topic, partitions=[T.OffsetForLeaderPartition(
        partition=partition, current_leader_epoch=current_leader_epoch, leader_epoch=epoch)])])
    response = client.request(OFFSET_FOR_LEADER_EPOCH, version, request)
    [t] = response.topics
    [p] = t.partitions
    return p


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch(tidelog_module_broker: BrokerHandle, client: KafkaWire, filled: str, version: int) -> None:
    p = offset_for_leader_epoch(client, filled, 0, 0, version)
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 8)
    p = offset_for_leader_epoch(client, filled, 0, 5, version)
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, -1, -1)
    p = offset_for_leader_epoch(client, filled, 0, 0, version, current_leader_epoch=2)
    assert p.error_code == 75
    assert offset_for_leader_epoch(client, "no-such", 0, 0, version).error_code == 3
    tidelog_module_broker.create_topic(f"ofle-empty-{version}")
    p = offset_for_leader_epoch(client, f"ofle-empty-{version}", 0, 0, version)
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 0)


def test_real_clients_offset_lookups(tidelog_module_broker: BrokerHandle, filled: str) -> None:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=tidelog_module_broker.bootstrap)
    tp = TopicPartition(filled, 0)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 8}
        found = consumer.offsets_for_times({tp: TS + 3})[tp]
        assert (found.offset, found.timestamp) == (3, TS + 10)
        assert consumer.offsets_for_times({tp: TS + 999})[tp] is None
    finally:
        consumer.close()
    confluent_kafka = pytest.importorskip("confluent_kafka")
    c = confluent_kafka.Consumer({"bootstrap.servers": tidelog_module_broker.bootstrap, "group.id": "lo-reader"})
    try:
        assert c.get_watermark_offsets(confluent_kafka.TopicPartition(filled, 0), timeout=60) == (0, 8)
        [r] = c.offsets_for_times([confluent_kafka.TopicPartition(filled, 0, TS + 11)], timeout=60)
        assert r.offset == 4
    finally:
        c.close()
