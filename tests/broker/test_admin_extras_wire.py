"""DescribeLogDirs, DescribeProducers, List/AlterPartitionReassignments, ElectLeaders and
DescribeTopicPartitions over a real socket: Kafka's answers for a single node."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.storage import TopicPartition
from tidelog.testing import BrokerHandle, KafkaWire

ELECTION_NOT_NEEDED = 84
NO_REASSIGNMENT_IN_PROGRESS = 85


@pytest.fixture
def wire(tidelog_module_broker: BrokerHandle) -> Iterator[KafkaWire]:
    with KafkaWire(tidelog_module_broker.bootstrap) as w:
        yield w


def create(wire: KafkaWire, name: str, partitions: int) -> None:
    cls = request_class(19)
    t = cls.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])
    r = wire.request(19, 7, cls[7](topics=[t], timeout_ms=30000, validate_only=False))
    assert r.topics[0].error_code in (0, ErrorCode.TOPIC_ALREADY_EXISTS)


def produce(bootstrap: str, topic: str, partition: int, n: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    for i in range(n):
        producer.send(topic, value=b"v%d" % i, partition=partition)
    producer.flush()
    producer.close()


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_describe_log_dirs_reports_every_partition_and_its_size(tidelog_module_broker: BrokerHandle, wire: KafkaWire,
                                                                 version: int) -> None:
    create(wire, "dld", 3)
    produce(tidelog_module_broker.bootstrap, "dld", 1, 5)
    cls = request_class(35)
    everything = wire.request(35, version, cls[version](topics=None))
    assert len(everything.results) == 1
    result = everything.results[0]
    assert result.error_code == 0 and result.log_dir == str(tidelog_module_broker.state.log_manager.log_dirs[0])
    topics = {t.name: {p.partition_index: p for p in t.partitions} for t in result.topics}
    assert sorted(topics["dld"]) == [0, 1, 2]
    assert topics["dld"][1].partition_size == tidelog_module_broker.state.log_manager.get_log(TopicPartition("dld", 1)).size_in_bytes()
    assert topics["dld"][1].partition_size > 0 and topics["dld"][0].partition_size == 0
    assert all(p.offset_lag == 0 and not p.is_future_key for p in topics["dld"].values())
    if version >= 4:
        assert result.total_bytes > 0 and 0 <= result.usable_bytes <= result.total_bytes
    some = wire.request(35, version, cls[version](topics=[cls.DescribableLogDirTopic(topic="dld", partitions=[2])]))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in some.results[0].topics] == [("dld", [2])]


def test_describe_producers_lists_the_idempotent_producer(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    create(wire, "dprod", 2)
    produce(tidelog_module_broker.bootstrap, "dprod", 0, 5)
    cls = request_class(61)
    r = wire.request(61, 0, cls[0](topics=[cls.TopicRequest(name="dprod", partition_indexes=[0, 1, 7])]))
    parts = {p.partition_index: p for p in r.topics[0].partitions}
    assert parts[7].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert parts[1].error_code == 0 and parts[1].active_producers == []
    [state] = parts[0].active_producers
    assert state.producer_id >= 0 and state.producer_epoch == 0 and state.last_sequence == 4
    assert state.last_timestamp > 0 and state.current_txn_start_offset == -1


def test_list_partition_reassignments_is_empty(wire: KafkaWire) -> None:
    create(wire, "lpr", 1)
    cls = request_class(46)
    r = wire.request(46, 0, cls[0](timeout_ms=1000, topics=None))
    assert r.error_code == 0 and r.topics == []
    r = wire.request(46, 0, cls[0](timeout_ms=1000, topics=[cls.ListPartitionReassignmentsTopics(
        name="lpr", partition_indexes=[0])]))
    assert r.error_code == 0 and r.topics == []


@pytest.mark.parametrize("version", [0, 1])
def test_alter_partition_reassignments(tidelog_module_broker: BrokerHandle, wire: KafkaWire, version: int) -> None:
    create(wire, "apr", 2)
    node = tidelog_module_broker.state.node_id
    cls = request_class(45)
    T = cls.ReassignableTopic
    P = T.ReassignablePartition
    fields: dict[str, Any] = {"timeout_ms": 1000, "topics": [
        T(name="apr", partitions=[P(partition_index=0, replicas=[node]), P(partition_index=1, replicas=[node + 7]),
                                  P(partition_index=5, replicas=[node])]),
        T(name="apr-cancel", partitions=[P(partition_index=0, replicas=None)]),
    ]}
    if version >= 1:
        fields["allow_replication_factor_change"] = True
    r = wire.request(45, version, cls[version](**fields))
    assert r.error_code == 0
    got = {(t.name, p.partition_index): (p.error_code, p.error_message) for t in r.responses for p in t.partitions}
    assert got[("apr", 0)] == (0, None)
    assert got[("apr", 1)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "no such broker" in got[("apr", 1)][1]
    assert got[("apr", 5)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert got[("apr-cancel", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    r = wire.request(45, version, cls[version](**{**fields, "topics": [
        T(name="apr", partitions=[P(partition_index=0, replicas=None)])]}))
    assert r.responses[0].partitions[0].error_code == NO_REASSIGNMENT_IN_PROGRESS


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_is_never_needed(wire: KafkaWire, version: int) -> None:
    create(wire, "el", 2)
    cls = request_class(43)
    fields: dict[str, Any] = {"timeout_ms": 1000, "topic_partitions": [
        cls.TopicPartitions(topic="el", partitions=[0, 1, 9]), cls.TopicPartitions(topic="el-none", partitions=[0])]}
    if version >= 1:
        fields["election_type"] = 0
    r = wire.request(43, version, cls[version](**fields))
    got = {(t.topic, p.partition_id): p.error_code for t in r.replica_election_results for p in t.partition_result}
    assert got == {("el", 0): ELECTION_NOT_NEEDED, ("el", 1): ELECTION_NOT_NEEDED,
                   ("el", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ("el-none", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    r = wire.request(43, version, cls[version](**{**fields, "topic_partitions": None}))
    assert r.replica_election_results == []


def test_describe_topic_partitions_pages_with_a_cursor(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    create(wire, "dtp-a", 3)
    create(wire, "dtp-b", 4)
    cls = request_class(75)
    topics = [cls.TopicRequest(name=n) for n in ("dtp-b", "dtp-a", "dtp-missing")]
    seen: list[tuple[str, int]] = []
    cursor = None
    pages = 0
    while True:
        r = wire.request(75, 0, cls[0](topics=topics, response_partition_limit=2, cursor=cursor))
        pages += 1
        for t in r.topics:
            if t.name == "dtp-missing":
                assert t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and t.partitions == []
                continue
            assert t.error_code == 0 and t.topic_id != uuid.UUID(int=0)
            assert tidelog_module_broker.state.topics.get(t.name).topic_id == t.topic_id.bytes
            for p in t.partitions:
                assert p.leader_id == tidelog_module_broker.state.node_id and p.replica_nodes == p.isr_nodes == [p.leader_id]
                seen.append((t.name, p.partition_index))
            assert len(t.partitions) <= 2
        if r.next_cursor is None:
            break
        cursor = cls.Cursor(topic_name=r.next_cursor.topic_name, partition_index=r.next_cursor.partition_index)
        assert pages < 10
    assert seen == [("dtp-a", 0), ("dtp-a", 1), ("dtp-a", 2), ("dtp-b", 0), ("dtp-b", 1), ("dtp-b", 2), ("dtp-b", 3)]
    assert pages == 4
    everything = wire.request(75, 0, cls[0](topics=[], response_partition_limit=2000, cursor=None))
    names = [t.name for t in everything.topics]
    assert names == sorted(names) and {"dtp-a", "dtp-b"} <= set(names) and everything.next_cursor is None
    bad = wire.request(75, 0, cls[0](topics=topics, response_partition_limit=5,
                                     cursor=cls.Cursor(topic_name="zzz", partition_index=0)))
    assert {t.error_code for t in bad.topics} == {ErrorCode.INVALID_REQUEST}


def test_api_versions_advertises_the_admin_extras(wire: KafkaWire) -> None:
    r = wire.request(18, 3, request_class(18)[3](client_software_name="t", client_software_version="1"))
    ranges = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    assert ranges[35] == (1, 5) and ranges[61] == (0, 0) and ranges[46] == (0, 0)
    assert ranges[45] == (0, 1) and ranges[43] == (0, 2) and ranges[75] == (0, 0) and ranges[69] == (0, 1)
