"""Group APIs on the wire with raw requests (kafka-python's message classes over a plain socket): every
FindCoordinator layout, OffsetCommit/OffsetFetch across versions (multi-group v8, metadata round-trip), the
internal __consumer_offsets topic in Metadata and closed to client writes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tidelog.config.definitions import LONG_MAX
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire


class Conn(KafkaWire):
    """tidelog.testing.KafkaWire, with the request given as its fields."""

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        return self.request(api_key, version, request_class(api_key)[version](**fields))


@pytest.fixture
def conn(tidelog_module_broker: BrokerHandle) -> Iterator[Conn]:
    with Conn(tidelog_module_broker.bootstrap, client_id="test") as c:
        yield c


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_find_coordinator_every_version(version: int, conn: Conn, tidelog_module_broker: BrokerHandle) -> None:
    if version >= 4:
        resp = conn.call(10, version, key_type=0, coordinator_keys=["g1", "g2"])
        assert [(c.key, c.error_code, c.node_id, c.port) for c in resp.coordinators] == [
            ("g1", 0, tidelog_module_broker.state.node_id, tidelog_module_broker.port),
            ("g2", 0, tidelog_module_broker.state.node_id, tidelog_module_broker.port)]
        txn = conn.call(10, version, key_type=1, coordinator_keys=["t1"])
        assert txn.coordinators[0].error_code == 0
    else:
        fields: dict[str, Any] = {"key": "g1"}
        if version >= 1:
            fields["key_type"] = 0
        resp = conn.call(10, version, **fields)
        assert (resp.error_code, resp.node_id, resp.host, resp.port) == (
            0, tidelog_module_broker.state.node_id, tidelog_module_broker.host, tidelog_module_broker.port)
    assert tidelog_module_broker.state.topics.get("__consumer_offsets").internal


def _commit(conn: Conn, version: int, group: str, topic: str, offsets: dict[int, tuple[int, str]],
            retention_ms: int = -1) -> Any:
    C = request_class(8)
    T = C.OffsetCommitRequestTopic
    fields: dict[str, Any] = {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
        "topics": [T(name=topic, partitions=[T.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=o, committed_leader_epoch=0, committed_metadata=m)
            for p, (o, m) in offsets.items()])]}
    if version <= 4:
        fields["retention_time_ms"] = retention_ms
    if version >= 7:
        fields["group_instance_id"] = None
    return conn.call(8, version, **fields)


@pytest.mark.parametrize("version", [2, 3, 5, 7, 8, 9])
def test_offset_commit_and_fetch_round_trip(version: int, conn: Conn, tidelog_module_broker: BrokerHandle) -> None:
    topic, group = f"wire-commit-{version}", f"wire-group-{version}"
    tidelog_module_broker.create_topic(topic, 2)
    resp = _commit(conn, version, group, topic, {0: (11, "meta-0"), 1: (22, "")})
    assert [(p.partition_index, p.error_code) for t in resp.topics for p in t.partitions] == [(0, 0), (1, 0)]
    bad = _commit(conn, version, group, "no-such-topic", {0: (1, "")})
    assert bad.topics[0].partitions[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    big = _commit(conn, version, group, topic, {0: (1, "x" * 5000)})
    assert big.topics[0].partitions[0].error_code == 12  # OFFSET_METADATA_TOO_LARGE
    fetch_version = min(version, 7)
    F = request_class(9)
    fields: dict[str, Any] = {"group_id": group, "topics": [F.OffsetFetchRequestTopic(name=topic,
                                                                                       partition_indexes=[0, 1, 5])]}
    if fetch_version >= 7:
        fields["require_stable"] = True
    got = conn.call(9, fetch_version, **fields)
    parts = {p.partition_index: (p.committed_offset, p.metadata, p.error_code) for t in got.topics
             for p in t.partitions}
    assert parts == {0: (11, "meta-0", 0), 1: (22, "", 0), 5: (-1, "", 0)}
    if fetch_version >= 5 and version >= 6:  # the commit carries a leader epoch from v6
        assert {p.committed_leader_epoch for t in got.topics for p in t.partitions} == {0, -1}
    everything = conn.call(9, fetch_version, group_id=group, topics=None,
                           **({"require_stable": False} if fetch_version >= 7 else {}))
    assert {(t.name, p.partition_index, p.committed_offset) for t in everything.topics for p in t.partitions} == \
        {(topic, 0, 11), (topic, 1, 22)}


def test_offset_commit_retention_time_expires_as_kafka_computes_it(conn: Conn, tidelog_module_broker: BrokerHandle) -> None:
    """OffsetCommit v2-4's retention_time_ms (Kafka's OffsetMetadataManager.expireTimestampMs): -1 keeps the
    broker's offsets.retention.minutes; anything else expires at now + retention in Java's long arithmetic, so
    a negative one, or Long.MAX_VALUE (the sum wraps), has already expired at the next retention check. None is
    a handler failure: a fuzzed Long.MAX_VALUE once closed the connection with a traceback."""
    topic, group = "wire-retention", "wire-retention-group"
    tidelog_module_broker.create_topic(topic, 4)
    for partition, retention in enumerate((-1, 3_600_000, -5, LONG_MAX)):
        resp = _commit(conn, 3, group, topic, {partition: (10 + partition, "")}, retention_ms=retention)
        assert resp.topics[0].partitions[0].error_code == 0

    def committed() -> dict[int, int]:
        F = request_class(9)
        got = conn.call(9, 3, group_id=group, topics=[F.OffsetFetchRequestTopic(name=topic,
                                                                               partition_indexes=[0, 1, 2, 3])])
        return {p.partition_index: p.committed_offset for t in got.topics for p in t.partitions}

    assert committed() == {0: 10, 1: 11, 2: 12, 3: 13}  # the same connection: nothing closed it
    assert tidelog_module_broker.call(tidelog_module_broker.state.groups.manager.cleanup_expired_offsets) == 2
    assert committed() == {0: 10, 1: 11, 2: -1, 3: -1}


def test_offset_fetch_v8_multi_group(conn: Conn, tidelog_module_broker: BrokerHandle) -> None:
    topic = "wire-multi"
    tidelog_module_broker.create_topic(topic)
    _commit(conn, 8, "multi-a", topic, {0: (5, "a")})
    _commit(conn, 8, "multi-b", topic, {0: (7, "b")})
    F = request_class(9)
    G = F.OffsetFetchRequestGroup
    resp = conn.call(9, 8, require_stable=True, groups=[
        G(group_id="multi-a", topics=None),
        G(group_id="multi-b", topics=[G.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])]),
        G(group_id="multi-none", topics=[G.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])])])
    got = {g.group_id: [(p.committed_offset, p.metadata) for t in g.topics for p in t.partitions]
           for g in resp.groups}
    assert got == {"multi-a": [(5, "a")], "multi-b": [(7, "b")], "multi-none": [(-1, "")]}


def test_offsets_topic_is_internal_and_refuses_client_writes(conn: Conn, tidelog_module_broker: BrokerHandle) -> None:
    conn.call(10, 0, key="anything")  # creates __consumer_offsets
    md = conn.call(3, 1, topics=[request_class(3).MetadataRequestTopic(name="__consumer_offsets")])
    (topic,) = md.topics
    assert topic.error_code == 0 and topic.is_internal and len(topic.partitions) == 50
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    b.append(0, timestamp=0, key=b"k", value=b"v", headers=[])
    P = request_class(0)
    T = P.TopicProduceData
    resp = conn.call(0, 8, transactional_id=None, acks=1, timeout_ms=10000, topic_data=[
        T(name="__consumer_offsets", partition_data=[T.PartitionProduceData(index=0, records=bytes(b.build()))])])
    assert resp.responses[0].partition_responses[0].error_code == 17  # INVALID_TOPIC_EXCEPTION


def test_join_group_v0_to_v9_single_member(conn: Conn, tidelog_module_broker: BrokerHandle) -> None:
    J = request_class(11)
    for version in range(10):
        group = f"wire-join-{version}"
        fields: dict[str, Any] = {"group_id": group, "session_timeout_ms": 10000, "member_id": "",
                                  "protocol_type": "consumer",
                                  "protocols": [J.JoinGroupRequestProtocol(name="range", metadata=b"m")]}
        if version >= 1:
            fields["rebalance_timeout_ms"] = 10000
        if version >= 5:
            fields["group_instance_id"] = None
        resp = conn.call(11, version, **fields)
        if version >= 4:
            assert resp.error_code == 79 and resp.member_id  # MEMBER_ID_REQUIRED
            fields["member_id"] = resp.member_id
            resp = conn.call(11, version, **fields)
        assert resp.error_code == 0 and resp.generation_id == 1 and resp.leader == resp.member_id
        assert resp.protocol_name == "range" and [m.metadata for m in resp.members] == [b"m"]
        sync = conn.call(14, min(version, 5), group_id=group, generation_id=1, member_id=resp.member_id,
                         assignments=[request_class(14).SyncGroupRequestAssignment(member_id=resp.member_id,
                                                                                   assignment=b"A")],
                         **({"group_instance_id": None} if version >= 3 else {}))
        assert sync.error_code == 0 and sync.assignment == b"A"
        hb = conn.call(12, min(version, 4), group_id=group, generation_id=1, member_id=resp.member_id)
        assert hb.error_code == 0
        leave_v = min(version, 5)
        if leave_v >= 3:
            L = request_class(13)
            left = conn.call(13, leave_v, group_id=group, members=[
                L.MemberIdentity(member_id=resp.member_id, group_instance_id=None),
                L.MemberIdentity(member_id="ghost", group_instance_id=None)])
            assert left.error_code == 0 and [m.error_code for m in left.members] == [0, 25]
        else:
            assert conn.call(13, leave_v, group_id=group, member_id=resp.member_id).error_code == 0
        listed = conn.call(16, 4, states_filter=["empty"])
        assert group in {g.group_id for g in listed.groups}


def test_offset_delete(conn: Conn, tidelog_module_broker: BrokerHandle) -> None:
    topic = "wire-offset-delete"
    tidelog_module_broker.create_topic(topic, 2)
    _commit(conn, 8, "od-group", topic, {0: (5, ""), 1: (6, "")})
    D = request_class(47)
    T = D.OffsetDeleteRequestTopic
    resp = conn.call(47, 0, group_id="od-group", topics=[
        T(name=topic, partitions=[T.OffsetDeleteRequestPartition(partition_index=0)])])
    assert resp.error_code == 0 and resp.topics[0].partitions[0].error_code == 0
    got = conn.call(9, 7, group_id="od-group", topics=None, require_stable=False)
    assert [(p.partition_index, p.committed_offset) for t in got.topics for p in t.partitions] == [(1, 6)]
    missing = conn.call(47, 0, group_id="od-missing", topics=[
        T(name=topic, partitions=[T.OffsetDeleteRequestPartition(partition_index=0)])])
    assert missing.error_code == 69  # GROUP_ID_NOT_FOUND
