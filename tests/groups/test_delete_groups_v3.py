"""DeleteGroups v3 (Kafka 4.4: a per-group ErrorMessage in the response, null unless the failure carried a cause;
the request is unchanged) served end to end: advertised by ApiVersions, answered on the wire for an empty group,
a group with a member and an unknown one, and still served at the versions real admin clients negotiate."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

DELETE_GROUPS, OFFSET_COMMIT, JOIN_GROUP, API_VERSIONS = 42, 8, 11, 18


pytestmark = pytest.mark.tidelog(overrides={"group.initial.rebalance.delay.ms": 0}, topics={"dg-topic": 1})


def commit_offset(wire: KafkaWire, group: str) -> None:
    """An offset committed outside any generation: an Empty classic group holding it (a "simple" consumer)."""
    cls = request_class(OFFSET_COMMIT)[8]
    T = cls.OffsetCommitRequestTopic
    r = wire.request(OFFSET_COMMIT, 8, cls(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                           group_instance_id=None, topics=[T(name="dg-topic", partitions=[
                                               T.OffsetCommitRequestPartition(partition_index=0, committed_offset=5,
                                                                              committed_leader_epoch=-1,
                                                                              committed_metadata="")])]))
    assert r.topics[0].partitions[0].error_code == 0


def join(wire: KafkaWire, group: str) -> None:
    """A classic member that joins (and, with no rebalance delay, stays in the group while its session lasts)."""
    cls = request_class(JOIN_GROUP)[9]
    P = cls.JoinGroupRequestProtocol
    r = wire.request(JOIN_GROUP, 9, cls(group_id=group, session_timeout_ms=60_000, rebalance_timeout_ms=60_000,
                                        member_id="", group_instance_id="dg-static", protocol_type="consumer",
                                        protocols=[P(name="range", metadata=b"")], reason=None))
    assert r.error_code == 0, r


def delete_groups(wire: KafkaWire, version: int, groups: list[str]) -> dict[str, tuple[int, str | None]]:
    response = wire.request(DELETE_GROUPS, version, request_class(DELETE_GROUPS)[version](groups_names=groups))
    return {r.group_id: (r.error_code, getattr(r, "error_message", None)) for r in response.results}


def test_api_versions_advertises_delete_groups_v3(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        response = wire.request(API_VERSIONS, 3, request_class(API_VERSIONS)[3](client_software_name="t",
                                                                                 client_software_version="1"))
    [entry] = [k for k in response.api_keys if k.api_key == DELETE_GROUPS]
    assert (entry.min_version, entry.max_version) == (0, 3)


def test_delete_groups_v3_answers_each_group_with_its_error_and_message(tidelog_module_broker: BrokerHandle) -> None:
    empty, busy, unknown = (f"dg-{kind}-{uuid.uuid4().hex[:6]}" for kind in ("empty", "busy", "unknown"))
    with KafkaWire(tidelog_module_broker.bootstrap) as wire, KafkaWire(tidelog_module_broker.bootstrap) as member:
        commit_offset(wire, empty)
        join(member, busy)
        assert delete_groups(wire, 3, [empty, busy, unknown]) == {
            empty: (ErrorCode.NONE, None),
            busy: (ErrorCode.NON_EMPTY_GROUP, None),
            unknown: (ErrorCode.GROUP_ID_NOT_FOUND, None),
        }
        # deleted: its offsets went with it
        assert delete_groups(wire, 3, [empty]) == {empty: (ErrorCode.GROUP_ID_NOT_FOUND, None)}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_older_versions_are_still_served(tidelog_module_broker: BrokerHandle, version: int) -> None:
    group = f"dg-v{version}-{uuid.uuid4().hex[:6]}"
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        commit_offset(wire, group)
        assert delete_groups(wire, version, [group]) == {group: (ErrorCode.NONE, None)}


def test_confluent_admin_deletes_a_group(tidelog_module_broker: BrokerHandle) -> None:
    group = f"dg-ck-{uuid.uuid4().hex[:6]}"
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        commit_offset(wire, group)
    admin = AdminClient({"bootstrap.servers": tidelog_module_broker.bootstrap, "log_level": 0})
    admin.delete_consumer_groups([group], request_timeout=30)[group].result(30)
    listed = admin.list_consumer_groups(request_timeout=30).result(30)
    assert group not in {g.group_id for g in listed.valid if g.state != ConsumerGroupState.DEAD}
