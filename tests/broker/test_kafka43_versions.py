"""The versions brought to Kafka 4.3's ranges (issue #15), over the raw wire, one test per new version's change:
ListOffsets 8-11, Metadata 13, OffsetCommit/OffsetFetch 10 (topic ids), FindCoordinator 5-6, DescribeGroups 6,
DescribeCluster 2. Each is checked against the field or error that version adds (Kafka's message JSON)."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import pytest
from broker_testlib import (
    FIND_COORDINATOR,
    LIST_OFFSETS,
    METADATA,
    TS,
    batch,
    produce,
    topic_id,
)

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS, DESCRIBE_CLUSTER, DELETE_RECORDS = 8, 9, 15, 60, 21
COORDINATOR_NOT_AVAILABLE = 15
GROUP_ID_NOT_FOUND = 69
UNKNOWN_TOPIC_ID = 100


@pytest.fixture(scope="module")
def topic(tidelog_module_broker: BrokerHandle) -> str:
    """`v43`: offsets 0-4 at TS..TS+4, then the log start moved to 2 by DeleteRecords."""
    tidelog_module_broker.create_topic("v43")
    with KafkaWire(tidelog_module_broker.bootstrap) as client:
        produce(client, "v43", batch(5, ts=TS))
        cls = request_class(DELETE_RECORDS)[2]
        T = cls.DeleteRecordsTopic
        response = client.request(DELETE_RECORDS, 2, cls(timeout_ms=30_000, topics=[
            T(name="v43", partitions=[T.DeleteRecordsPartition(partition_index=0, offset=2)])]))
        assert response.topics[0].partitions[0].low_watermark == 2
    return "v43"


def list_offsets(client: KafkaWire, name: str, ts: int, version: int) -> Any:
    cls = request_class(LIST_OFFSETS)[version]
    T = cls.ListOffsetsTopic
    request = cls(replica_id=-1, isolation_level=0, timeout_ms=5_000, topics=[T(name=name, partitions=[
        T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=ts)])])
    [p] = client.request(LIST_OFFSETS, version, request).topics[0].partitions
    return p


@pytest.mark.parametrize("version", [8, 9, 10, 11])
def test_list_offsets_earliest_local_is_the_log_start_without_tiered_storage(client: KafkaWire, topic: str,
                                                                            version: int) -> None:
    p = list_offsets(client, topic, -4, version)
    assert (p.error_code, p.timestamp, p.offset, p.leader_epoch) == (0, -1, 2, 0)
    # the other specs still answer as before at the new versions
    assert list_offsets(client, topic, -2, version).offset == 2
    assert list_offsets(client, topic, -1, version).offset == 5
    assert list_offsets(client, topic, -3, version).offset == 4
    assert list_offsets(client, topic, TS + 3, version).offset == 3


@pytest.mark.parametrize("version", [9, 10, 11])
def test_list_offsets_latest_tiered_has_no_offset_without_tiered_storage(client: KafkaWire, topic: str,
                                                                          version: int) -> None:
    p = list_offsets(client, topic, -5, version)
    assert (p.error_code, p.timestamp, p.offset, p.leader_epoch) == (0, -1, -1, -1)


def test_list_offsets_earliest_pending_upload_needs_v11(client: KafkaWire, topic: str) -> None:
    p = list_offsets(client, topic, -6, 11)
    assert (p.error_code, p.timestamp, p.offset, p.leader_epoch) == (0, -1, -1, -1)
    assert list_offsets(client, topic, -6, 10).error_code == ErrorCode.UNSUPPORTED_VERSION
    assert list_offsets(client, topic, -5, 8).error_code == ErrorCode.UNSUPPORTED_VERSION
    assert list_offsets(client, topic, -4, 7).error_code == ErrorCode.UNSUPPORTED_VERSION


def test_metadata_v13_has_a_top_level_error_code(client: KafkaWire, topic: str) -> None:
    cls = request_class(METADATA)[13]
    response = client.request(METADATA, 13, cls(topics=[cls.MetadataRequestTopic(topic_id=None, name=topic)],
                                                allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False))
    assert response.error_code == ErrorCode.NONE
    [t] = response.topics
    assert t.name == topic and t.error_code == 0 and t.topic_id != uuid.UUID(int=0)


def commit_v10(client: KafkaWire, group: str, tid: uuid.UUID, offset: int) -> Any:
    cls = request_class(OFFSET_COMMIT)[10]
    T = cls.OffsetCommitRequestTopic
    return client.request(OFFSET_COMMIT, 10, cls(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[T(topic_id=tid, partitions=[T.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="m")])]))


def fetch_v(client: KafkaWire, version: int, group: str, topics: list[tuple[Any, list[int]]] | None) -> Any:
    cls = request_class(OFFSET_FETCH)[version]
    G = cls.OffsetFetchRequestGroup
    T = G.OffsetFetchRequestTopics
    key = "topic_id" if version >= 10 else "name"
    wanted = None if topics is None else [T(**{key: k}, partition_indexes=ps) for k, ps in topics]
    [g] = client.request(OFFSET_FETCH, version, cls(groups=[G(group_id=group, member_id=None, member_epoch=-1,
                                                                 topics=wanted)], require_stable=False)).groups
    return g


def test_offset_commit_and_fetch_v10_name_topics_by_id(client: KafkaWire, topic: str) -> None:
    tid = topic_id(client, topic)
    [t] = commit_v10(client, "g-v10", tid, 3).topics
    assert t.topic_id == tid and [(p.partition_index, p.error_code) for p in t.partitions] == [(0, 0)]
    g = fetch_v(client, 10, "g-v10", [(tid, [0])])
    assert g.error_code == 0
    [ft] = g.topics
    assert ft.topic_id == tid
    assert [(p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in ft.partitions] == \
        [(0, 3, "m", 0)]
    # the same offset by name at v9, and the all-topics form at v10 names it by id
    [named] = fetch_v(client, 9, "g-v10", [(topic, [0])]).topics
    assert named.name == topic and named.partitions[0].committed_offset == 3
    [every] = fetch_v(client, 10, "g-v10", None).topics
    assert every.topic_id == tid and every.partitions[0].committed_offset == 3


def test_offset_commit_and_fetch_v10_unknown_topic_id(client: KafkaWire, topic: str) -> None:
    stranger = uuid.uuid4()
    [t] = commit_v10(client, "g-v10-unknown", stranger, 1).topics
    assert t.topic_id == stranger and t.partitions[0].error_code == UNKNOWN_TOPIC_ID
    g = fetch_v(client, 10, "g-v10-unknown", [(stranger, [0, 1])])
    [ft] = g.topics
    assert ft.topic_id == stranger
    assert [(p.partition_index, p.committed_offset, p.error_code) for p in ft.partitions] == \
        [(0, -1, UNKNOWN_TOPIC_ID), (1, -1, UNKNOWN_TOPIC_ID)]


def find_coordinator(client: KafkaWire, version: int, key_type: int, key: str) -> Any:
    cls = request_class(FIND_COORDINATOR)[version]
    [c] = client.request(FIND_COORDINATOR, version, cls(key_type=key_type, coordinator_keys=[key])).coordinators
    return c


def test_find_coordinator_v5_v6_groups_and_share_keys(client: KafkaWire, tidelog_module_broker: BrokerHandle) -> None:
    for version in (5, 6):
        c = find_coordinator(client, version, 0, "some-group")
        assert (c.error_code, c.node_id, c.key) == (0, 1, "some-group")
    valid = "s:g:" + base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=") + ":3"
    # v6 share keys: no share coordinator on this node, as Kafka without __share_group_state
    c = find_coordinator(client, 6, 2, valid)
    assert (c.error_code, c.node_id, c.host, c.port) == (COORDINATOR_NOT_AVAILABLE, -1, "", -1)
    assert find_coordinator(client, 6, 2, "sg:not-a-topic-id:0").error_code == ErrorCode.INVALID_REQUEST
    assert find_coordinator(client, 6, 2, valid[:-2] + ":-1").error_code == ErrorCode.INVALID_REQUEST
    assert find_coordinator(client, 6, 2, "no-colons").error_code == ErrorCode.INVALID_REQUEST
    assert find_coordinator(client, 5, 2, valid).error_code == ErrorCode.INVALID_REQUEST  # share needs v6


def describe_group(client: KafkaWire, version: int, group: str) -> Any:
    cls = request_class(DESCRIBE_GROUPS)[version]
    [g] = client.request(DESCRIBE_GROUPS, version, cls(groups=[group], include_authorized_operations=False)).groups
    return g


def test_describe_groups_v6_unknown_group_is_group_id_not_found(client: KafkaWire) -> None:
    g = describe_group(client, 6, "nobody-here")
    assert (g.error_code, g.group_state, g.error_message) == (GROUP_ID_NOT_FOUND, "Dead",
                                                               "Group nobody-here not found.")
    old = describe_group(client, 5, "nobody-here")
    assert (old.error_code, old.group_state) == (0, "Dead")


@pytest.mark.parametrize("include_fenced", [False, True])
def test_describe_cluster_v2_reports_this_node_unfenced(client: KafkaWire, include_fenced: bool) -> None:
    cls = request_class(DESCRIBE_CLUSTER)[2]
    response = client.request(DESCRIBE_CLUSTER, 2, cls(include_cluster_authorized_operations=False,
                                                       endpoint_type=1, include_fenced_brokers=include_fenced))
    assert response.error_code == 0 and response.endpoint_type == 1
    [b] = response.brokers
    assert (b.broker_id, b.is_fenced) == (1, False)
