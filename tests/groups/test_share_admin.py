"""Share-group administration (KIP-932) over real sockets: ShareGroupDescribe, DescribeShareGroupOffsets,
AlterShareGroupOffsets and DeleteShareGroupOffsets by hand (confluent-kafka 2.16's AdminClient has none of them),
and what the other group APIs answer for a share group's id, with confluent-kafka's AdminClient where it has the
API (ListConsumerGroups, DescribeConsumerGroups, Alter/ListConsumerGroupOffsets, DeleteConsumerGroups) and by hand
for Kafka's exact codes. Share groups are created with hand-built ShareGroupHeartbeat v1 requests."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaException, Producer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tests.broker.test_features import SAFE, update
from tests.groups.test_share_groups import heartbeat
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire, SecureBrokerHandle, run_secure_broker

E = ErrorCode
HEARTBEAT, SHARE_FETCH, SHARE_ACK, DESCRIBE, DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 76, 78, 79, 77, 90, 91, 92
QUIET = {"log_level": 0}
INT_MIN = -(2**31)
ZERO = None  # the zero UUID (Kafka's Uuid.ZERO_UUID) as kafka-python decodes it
ACCEPT = 1


@pytest.fixture
def wire(tidelog_module_broker: BrokerHandle) -> Iterator[KafkaWire]:
    with KafkaWire(tidelog_module_broker.bootstrap, client_id="share-admin") as w:
        yield w


def admin(broker: BrokerHandle) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})


def create_topic(wire: KafkaWire, name: str, partitions: int) -> uuid.UUID:
    cls = request_class(19)
    t = cls.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])
    r = wire.request(19, 7, cls[7](topics=[t], timeout_ms=30000, validate_only=False))
    assert r.topics[0].error_code == 0, r
    return uuid.UUID(str(r.topics[0].topic_id))


def produce(broker: BrokerHandle, topic: str, counts: dict[int, int]) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, **QUIET})
    for partition, count in counts.items():
        for i in range(count):
            p.produce(topic, value=b"v%d" % i, partition=partition)
    assert p.flush(30) == 0


# --- hand-built requests ---------------------------------------------------------------------------------------


def join(wire: KafkaWire, group: str, topics: list[str]) -> tuple[str, int]:
    """A new member (its client-chosen UUID) subscribed to `topics`: (member id, member epoch)."""
    member = str(uuid.uuid4())
    r = heartbeat(wire, group, member, topics=topics)
    assert r.error_code == 0, r
    return member, r.member_epoch


def leave(wire: KafkaWire, group: str, member: str) -> None:
    r = heartbeat(wire, group, member, epoch=-1)
    assert (r.error_code, r.member_epoch) == (0, -1), r


def describe(wire: KafkaWire, *groups: str, ops: bool = False) -> list[Any]:
    cls = request_class(DESCRIBE)[1]
    return list(wire.request(DESCRIBE, 1, cls(group_ids=list(groups), include_authorized_operations=ops)).groups)


def describe_offsets(wire: KafkaWire, group: str, topics: dict[str, list[int]] | None = None,
                     version: int = 1) -> Any:
    cls = request_class(DESCRIBE_OFFSETS)[version]
    G = cls.DescribeShareGroupOffsetsRequestGroup
    wanted = None if topics is None else [G.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
                                          for t, ps in topics.items()]
    response = wire.request(DESCRIBE_OFFSETS, version, cls(groups=[G(group_id=group, topics=wanted)]))
    assert len(response.groups) == 1 and response.groups[0].group_id == group
    return response.groups[0]


def offsets(group: Any) -> dict[tuple[str, int], tuple[int, int, int]]:
    """(topic, partition) -> (start offset, lag, error) of a DescribeShareGroupOffsets group (v1)."""
    return {(t.topic_name, p.partition_index): (p.start_offset, p.lag, p.error_code)
            for t in group.topics for p in t.partitions}


def alter(wire: KafkaWire, group: str, topics: dict[str, dict[int, int]]) -> Any:
    cls = request_class(ALTER_OFFSETS)[0]
    T = cls.AlterShareGroupOffsetsRequestTopic
    return wire.request(ALTER_OFFSETS, 0, cls(group_id=group, topics=[
        T(topic_name=t, partitions=[T.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o)
                                    for p, o in ps.items()]) for t, ps in topics.items()]))


def altered(response: Any) -> list[tuple[str, int, int]]:
    assert response.error_code == 0, response
    return [(t.topic_name, p.partition_index, p.error_code) for t in response.responses for p in t.partitions]


def delete_offsets(wire: KafkaWire, group: str, *topics: str) -> Any:
    cls = request_class(DELETE_OFFSETS)[0]
    return wire.request(DELETE_OFFSETS, 0, cls(group_id=group, topics=[
        cls.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics]))


def list_groups(wire: KafkaWire, states: list[str] | None = None, types: list[str] | None = None) -> dict[str, Any]:
    cls = request_class(16)[5]
    r = wire.request(16, 5, cls(states_filter=states or [], types_filter=types or []))
    assert r.error_code == 0
    return {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in r.groups}


def share_fetch(wire: KafkaWire, group: str, member: str, epoch: int, topic_id: uuid.UUID, partition: int,
                acks: list[tuple[int, int]] | None = None) -> Any:
    """ShareFetch v1 of one partition; `acks`: (first, last) ranges to ACCEPT."""
    cls = request_class(SHARE_FETCH)[1]
    T = cls.FetchTopic
    P = T.FetchPartition
    batches = [P.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=[ACCEPT])
               for f, last in acks or []]
    r = wire.request(SHARE_FETCH, 1, cls(
        group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
        max_records=500, batch_size=500, forgotten_topics_data=[],
        topics=[T(topic_id=topic_id, partitions=[P(partition_index=partition, partition_max_bytes=0,
                                                   acknowledgement_batches=batches)])]))
    assert r.error_code == 0, r
    return r


# --- ShareGroupDescribe -----------------------------------------------------------------------------------------


def test_describe_shows_members_with_their_assignment_and_empty_after_they_leave(wire: KafkaWire) -> None:
    topic_id = create_topic(wire, "sa-desc", 3)
    group = "sa-desc-g"
    a, _ = join(wire, group, ["sa-desc"])
    b, _ = join(wire, group, ["sa-desc"])
    for m in (a, b):  # each member takes the assignment epoch (2) on its next heartbeat
        assert heartbeat(wire, group, m, epoch=1 if m == a else 2).member_epoch == 2
    [g] = describe(wire, group)
    assert (g.error_code, g.group_id, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (
        0, group, "Stable", 2, 2, "simple")
    assert g.authorized_operations == INT_MIN  # not asked for
    members = {m.member_id: m for m in g.members}
    assert set(members) == {a, b}
    assigned: list[int] = []
    for m in members.values():
        assert (m.member_epoch, m.client_id, m.client_host, m.rack_id, m.subscribed_topic_names) == (
            2, "share-admin", "/127.0.0.1", None, ["sa-desc"])
        [tp] = m.assignment.topic_partitions
        assert (tp.topic_id, tp.topic_name) == (topic_id, "sa-desc")
        assigned += tp.partitions
    assert sorted(assigned) == [0, 1, 2]  # three partitions split over two members, none twice
    # READ, DELETE and DESCRIBE (Kafka's bitfield, 1 << 3 | 1 << 6 | 1 << 8) when asked, without an authorizer
    assert describe(wire, group, ops=True)[0].authorized_operations == 328
    leave(wire, group, a)
    leave(wire, group, b)
    [g] = describe(wire, group)
    assert (g.error_code, g.group_state, g.group_epoch, g.members) == (0, "Empty", 4, [])


def test_describe_errors(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    create_topic(wire, "sa-desc-err", 1)
    # a simple classic group: an admin client's offset commit creates it
    client = admin(tidelog_module_broker)  # a client must outlive its futures
    done = client.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("sa-classic", [CKTopicPartition("sa-desc-err", 0, 1)])])
    assert done["sa-classic"].result(30).topic_partitions[0].error is None
    described = describe(wire, "sa-missing", "sa-classic", "")
    assert [(g.group_id, g.error_code, g.error_message, g.members) for g in described] == [
        ("sa-missing", E.GROUP_ID_NOT_FOUND, "Share group sa-missing not found.", []),
        ("sa-classic", E.GROUP_ID_NOT_FOUND, "Group sa-classic is not a share group.", []),
        ("", E.INVALID_GROUP_ID, None, [])]
    # and a share group cannot take the classic group's id
    assert heartbeat(wire, "sa-classic", str(uuid.uuid4()), topics=["sa-desc-err"]).error_code == \
        E.GROUP_ID_NOT_FOUND


# --- ListGroups -------------------------------------------------------------------------------------------------


def test_list_groups_shows_share_groups_with_their_type_and_state(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    create_topic(wire, "sa-list", 1)
    join(wire, "sa-list-stable", ["sa-list"])
    gone, _ = join(wire, "sa-list-empty", ["sa-list"])
    leave(wire, "sa-list-empty", gone)
    listed = list_groups(wire)
    assert listed["sa-list-stable"] == ("share", "Stable", "share")
    assert listed["sa-list-empty"] == ("share", "Empty", "share")
    shares = list_groups(wire, types=["share"])
    assert {"sa-list-stable", "sa-list-empty"} <= set(shares)
    assert {t for _, _, t in shares.values()} == {"share"}
    assert not {"sa-list-stable", "sa-list-empty"} & set(list_groups(wire, types=["classic", "consumer"]))
    empty = list_groups(wire, states=["EMPTY"], types=["SHARE"])  # both filters ignore case
    assert "sa-list-empty" in empty and "sa-list-stable" not in empty
    assert "sa-list-stable" in list_groups(wire, states=["stable"])
    # confluent-kafka's ListConsumerGroups asks for consumer and classic groups only
    client = admin(tidelog_module_broker)
    listing = client.list_consumer_groups().result(30)
    assert not {"sa-list-stable", "sa-list-empty"} & {g.group_id for g in listing.valid}


# --- Describe/Alter/DeleteShareGroupOffsets --------------------------------------------------------------------


def test_offsets_described_altered_consumed_and_deleted(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    topic_id = create_topic(wire, "sa-off", 2)
    produce(tidelog_module_broker, "sa-off", {0: 10, 1: 4})
    group = "sa-off-g"
    # before anything: no group, so no partitions; named ones are -1 (no error), an unknown topic has no id
    assert describe_offsets(wire, group).topics == []
    before = describe_offsets(wire, group, {"sa-off": [0, 1, 7], "sa-nope": [0]})
    assert offsets(before) == {("sa-off", 0): (-1, -1, 0), ("sa-off", 1): (-1, -1, 0), ("sa-off", 7): (-1, -1, 0),
                               ("sa-nope", 0): (-1, -1, 0)}
    assert [(t.topic_name, t.topic_id) for t in before.topics] == [("sa-off", topic_id), ("sa-nope", ZERO)]
    assert describe_offsets(wire, group, {}).topics == []  # an empty list asks for nothing
    # AlterShareGroupOffsets creates the empty share group; refused topics come first
    response = alter(wire, group, {"sa-off": {0: 3, 1: 1, 5: 0}, "sa-nope": {0: 0}})
    assert altered(response) == [("sa-nope", 0, E.UNKNOWN_TOPIC_OR_PARTITION), ("sa-off", 0, 0), ("sa-off", 1, 0),
                                 ("sa-off", 5, E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert [t.topic_id for t in response.responses] == [ZERO, topic_id]
    assert describe(wire, group)[0].group_state == "Empty"
    # Lag = high watermark - start offset (nothing past the start is done yet)
    assert offsets(describe_offsets(wire, group)) == {("sa-off", 0): (3, 7, 0), ("sa-off", 1): (1, 3, 0)}
    v0 = describe_offsets(wire, group, {"sa-off": [0]}, version=0)
    assert [(p.start_offset, p.leader_epoch, p.error_code) for t in v0.topics for p in t.partitions] == [(3, 0, 0)]
    # a member consumes from the altered start; while it is in the group the offsets cannot change
    member, epoch = join(wire, group, ["sa-off"])
    got = share_fetch(wire, group, member, 0, topic_id, 0)
    assert [(r.first_offset, r.last_offset) for t in got.responses for p in t.partitions
            for r in p.acquired_records] == [(3, 9)]
    share_fetch(wire, group, member, 1, topic_id, 0, acks=[(3, 4), (6, 6)])  # 5 stays acquired
    # start 5; 6 is done past it (DeliveryCompleteCount 1): lag 10 - 5 - 1
    assert offsets(describe_offsets(wire, group, {"sa-off": [0]})) == {("sa-off", 0): (5, 4, 0)}
    refused = alter(wire, group, {"sa-off": {0: 0}})
    assert (refused.error_code, refused.responses) == (E.NON_EMPTY_GROUP, [])
    assert delete_offsets(wire, group, "sa-off").error_code == E.NON_EMPTY_GROUP
    leave(wire, group, member)
    assert describe(wire, group)[0].group_state == "Empty"
    # alter again: fresh state at the new offset, nothing in flight
    assert altered(alter(wire, group, {"sa-off": {0: 8}})) == [("sa-off", 0, 0)]
    assert offsets(describe_offsets(wire, group, {"sa-off": [0]})) == {("sa-off", 0): (8, 2, 0)}
    # DeleteShareGroupOffsets drops the topic's state; unknown topics and topics without state are errors
    deleted = delete_offsets(wire, group, "sa-off", "sa-nope")
    assert deleted.error_code == 0
    assert [(t.topic_name, t.topic_id, t.error_code, t.error_message) for t in deleted.responses] == [
        ("sa-nope", ZERO, E.UNKNOWN_TOPIC_OR_PARTITION, "The topic does not exist."),
        ("sa-off", topic_id, 0, None)]
    again = delete_offsets(wire, group, "sa-off")
    assert [(t.error_code, t.error_message) for t in again.responses] == [
        (E.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete.")]
    assert describe_offsets(wire, group).topics == []
    assert offsets(describe_offsets(wire, group, {"sa-off": [0]})) == {("sa-off", 0): (-1, -1, 0)}


def test_offsets_group_errors(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    create_topic(wire, "sa-offerr", 1)
    client = admin(tidelog_module_broker)
    done = client.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("sa-offerr-classic", [CKTopicPartition("sa-offerr", 0, 1)])])
    assert done["sa-offerr-classic"].result(30).topic_partitions[0].error is None
    r = alter(wire, "sa-offerr-classic", {"sa-offerr": {0: 0}})
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, "Group sa-offerr-classic is not a share group.")
    assert alter(wire, "", {"sa-offerr": {0: 0}}).error_code == E.INVALID_GROUP_ID
    r = delete_offsets(wire, "sa-offerr-missing", "sa-offerr")
    assert (r.error_code, r.error_message, r.responses) == (
        E.GROUP_ID_NOT_FOUND, "Share group sa-offerr-missing not found.", [])
    assert delete_offsets(wire, "sa-offerr-classic", "sa-offerr").error_code == E.GROUP_ID_NOT_FOUND
    # describing the offsets of a group that is not a share group is no error: there are none
    assert describe_offsets(wire, "sa-offerr-classic").topics == []
    assert offsets(describe_offsets(wire, "sa-offerr-classic", {"sa-offerr": [0]})) == {
        ("sa-offerr", 0): (-1, -1, 0)}


# --- DeleteGroups -----------------------------------------------------------------------------------------------


def test_delete_groups_refuses_a_share_group_with_members_then_deletes_it(tidelog_module_broker: BrokerHandle,
                                                                          wire: KafkaWire) -> None:
    create_topic(wire, "sa-del", 1)
    group = "sa-del-g"
    assert altered(alter(wire, group, {"sa-del": {0: 0}})) == [("sa-del", 0, 0)]
    member, _ = join(wire, group, ["sa-del"])
    client = admin(tidelog_module_broker)
    with pytest.raises(KafkaException) as refused:
        client.delete_consumer_groups([group])[group].result(30)
    assert refused.value.args[0].code() == E.NON_EMPTY_GROUP
    assert describe(wire, group)[0].error_code == 0
    leave(wire, group, member)
    assert client.delete_consumer_groups([group])[group].result(30) is None
    assert describe(wire, group)[0].error_code == E.GROUP_ID_NOT_FOUND
    assert group not in list_groups(wire)
    assert describe_offsets(wire, group).topics == []  # its share-partition state went with it
    # raw: a second delete finds nothing
    cls = request_class(42)[2]
    r = wire.request(42, 2, cls(groups_names=[group]))
    assert [(x.group_id, x.error_code) for x in r.results] == [(group, E.GROUP_ID_NOT_FOUND)]


# --- the other group APIs on a share group's id -----------------------------------------------------------------


def test_other_group_apis_refuse_a_share_group_id(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    create_topic(wire, "sa-x", 1)
    group = "sa-x-g"
    member, _ = join(wire, group, ["sa-x"])
    client = admin(tidelog_module_broker)

    # DescribeGroups: Dead; v6+ with GROUP_ID_NOT_FOUND
    dg = request_class(15)
    [v6] = wire.request(15, 6, dg[6](groups=[group], include_authorized_operations=False)).groups
    assert (v6.error_code, v6.error_message, v6.group_state, v6.members) == (
        E.GROUP_ID_NOT_FOUND, f"Group {group} is not a classic group.", "Dead", [])
    [v5] = wire.request(15, 5, dg[5](groups=[group], include_authorized_operations=False)).groups
    assert (v5.error_code, v5.group_state) == (0, "Dead")
    # confluent-kafka: ConsumerGroupDescribe says not found, so it falls back to DescribeGroups: Dead
    assert client.describe_consumer_groups([group])[group].result(30).state == ConsumerGroupState.DEAD

    # OffsetCommit: GROUP_ID_NOT_FOUND, also for the admin client's "simple" commit (generation -1)
    result = client.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [CKTopicPartition("sa-x", 0, 5)])])[group].result(30)
    assert [tp.error.code() for tp in result.topic_partitions] == [E.GROUP_ID_NOT_FOUND]
    oc = request_class(8)[8]
    T = oc.OffsetCommitRequestTopic
    r = wire.request(8, 8, oc(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                              group_instance_id=None, topics=[T(name="sa-x", partitions=[
                                  T.OffsetCommitRequestPartition(partition_index=0, committed_offset=5,
                                                                 committed_leader_epoch=-1,
                                                                 committed_metadata="")])]))
    assert [p.error_code for t in r.topics for p in t.partitions] == [E.GROUP_ID_NOT_FOUND]

    # OffsetFetch: no error, no offsets
    fetched = client.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [CKTopicPartition("sa-x", 0)])])[group].result(30)
    assert [(tp.offset, tp.error) for tp in fetched.topic_partitions] == [(-1001, None)]  # librdkafka's "none"
    of = request_class(9)[8]
    G = of.OffsetFetchRequestGroup
    r = wire.request(9, 8, of(require_stable=False, groups=[
        G(group_id=group, topics=[G.OffsetFetchRequestTopics(name="sa-x", partition_indexes=[0])]),
        G(group_id=group, topics=None)]))
    assert [(g.error_code, [(p.committed_offset, p.error_code) for t in g.topics for p in t.partitions])
            for g in r.groups] == [(0, [(-1, 0)]), (0, [])]

    # OffsetDelete: GROUP_ID_NOT_FOUND
    od = request_class(47)[0]
    r = wire.request(47, 0, od(group_id=group, topics=[od.OffsetDeleteRequestTopic(
        name="sa-x", partitions=[od.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0)])]))
    assert (r.error_code, r.topics) == (E.GROUP_ID_NOT_FOUND, [])

    # ConsumerGroupHeartbeat: the request is validated first, then the group is not a consumer group
    hb = request_class(68)[0]

    def consumer_heartbeat(rebalance_timeout_ms: int) -> Any:
        return wire.request(68, 0, hb(group_id=group, member_id="", member_epoch=0, instance_id=None, rack_id=None,
                                      rebalance_timeout_ms=rebalance_timeout_ms, subscribed_topic_names=["sa-x"],
                                      server_assignor=None, topic_partitions=[]))

    r = consumer_heartbeat(300_000)
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, f"Group {group} is not a consumer group.")
    assert consumer_heartbeat(-1).error_code == E.INVALID_REQUEST

    # classic JoinGroup: INCONSISTENT_GROUP_PROTOCOL (after the session timeout check)
    jg = request_class(11)[9]

    def join_classic(session_timeout_ms: int) -> Any:
        return wire.request(11, 9, jg(group_id=group, session_timeout_ms=session_timeout_ms,
                                      rebalance_timeout_ms=30_000, member_id="", group_instance_id=None,
                                      protocol_type="consumer", reason=None, protocols=[
                                          jg.JoinGroupRequestProtocol(name="range", metadata=b"")]))

    r = join_classic(30_000)
    assert (r.error_code, r.member_id, r.generation_id) == (E.INCONSISTENT_GROUP_PROTOCOL, "", -1)
    assert join_classic(1).error_code == E.INVALID_SESSION_TIMEOUT

    # none of it touched the share group
    [g] = describe(wire, group)
    assert (g.error_code, g.group_state, [m.member_id for m in g.members]) == (0, "Stable", [member])
    assert list_groups(wire)[group] == ("share", "Stable", "share")


# --- share.version 0 --------------------------------------------------------------------------------------------


def test_share_version_0_answers_unsupported_version(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    handle = tidelog_broker_factory(tmp_path)
    with KafkaWire(handle.bootstrap) as wire:
        create_topic(wire, "sa-off0", 1)
        assert altered(alter(wire, "sa-off0-g", {"sa-off0": {0: 0}})) == [("sa-off0", 0, 0)]
        assert update(wire, [("share.version", 0, SAFE)]).error_code == 0
        versions = wire.request(18, 3, request_class(18)[3](client_software_name="t", client_software_version="1"))
        advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert [advertised[k] for k in (77, 90, 91, 92)] == [(1, 1), (0, 1), (0, 0), (0, 0)]  # still listed
        assert [(g.group_id, g.error_code) for g in describe(wire, "sa-off0-g", "other")] == [
            ("sa-off0-g", E.UNSUPPORTED_VERSION), ("other", E.UNSUPPORTED_VERSION)]
        g = describe_offsets(wire, "sa-off0-g")
        assert (g.error_code, g.topics) == (E.UNSUPPORTED_VERSION, [])
        assert alter(wire, "sa-off0-g", {"sa-off0": {0: 1}}).error_code == E.UNSUPPORTED_VERSION
        assert delete_offsets(wire, "sa-off0-g", "sa-off0").error_code == E.UNSUPPORTED_VERSION
        assert update(wire, [("share.version", 1, 1)]).error_code == 0
        assert offsets(describe_offsets(wire, "sa-off0-g")) == {("sa-off0", 0): (0, 0, 0)}  # kept meanwhile


# --- ACLs -------------------------------------------------------------------------------------------------------

USERS = {"alice": "alice-secret", "admin": "admin-secret"}


@pytest.fixture(scope="module")
def secure() -> Iterator[SecureBrokerHandle]:
    with run_secure_broker(users=USERS, authorizer=True, super_users=["User:admin"]) as handle:
        yield handle


def sasl_wire(b: SecureBrokerHandle, user: str) -> KafkaWire:
    w = KafkaWire(b.listeners["SASL_PLAINTEXT"], client_id="share-admin")
    assert w.request(17, 1, request_class(17)[1](mechanism="PLAIN")).error_code == 0
    auth = f"\0{user}\0{USERS[user]}".encode()
    assert w.request(36, 2, request_class(36)[2](auth_bytes=auth)).error_code == 0
    return w


def allow(b: SecureBrokerHandle, *acls: tuple[ResourceType, str, AclOperation]) -> None:
    client = AdminClient(b.confluent_config("SASL_PLAINTEXT", "PLAIN", user="admin"))
    bindings = [AclBinding(rtype, name, ResourcePatternType.LITERAL, "User:alice", "*", op, AclPermissionType.ALLOW)
                for rtype, name, op in acls]
    for future in client.create_acls(bindings, request_timeout=30).values():
        future.result(30)


def test_acls(secure: SecureBrokerHandle) -> None:
    group = "sa-acl-g"
    with sasl_wire(secure, "admin") as root, sasl_wire(secure, "alice") as alice:
        open_id, secret_id = create_topic(root, "sa-acl-open", 1), create_topic(root, "sa-acl-secret", 1)
        assert altered(alter(root, group, {"sa-acl-open": {0: 0}, "sa-acl-secret": {0: 0}})) == [
            ("sa-acl-open", 0, 0), ("sa-acl-secret", 0, 0)]
        # no ACL at all: every group-level check fails
        assert [(g.error_code, g.members) for g in describe(alice, group)] == [(E.GROUP_AUTHORIZATION_FAILED, [])]
        assert describe_offsets(alice, group).error_code == E.GROUP_AUTHORIZATION_FAILED
        assert alter(alice, group, {"sa-acl-open": {0: 1}}).error_code == E.GROUP_AUTHORIZATION_FAILED
        assert delete_offsets(alice, group, "sa-acl-open").error_code == E.GROUP_AUTHORIZATION_FAILED
        allow(secure, *[(ResourceType.GROUP, group, op) for op in (AclOperation.DESCRIBE, AclOperation.READ,
                                                                    AclOperation.DELETE)],
              (ResourceType.TOPIC, "sa-acl-open", AclOperation.READ))  # READ implies DESCRIBE
        # offsets: a named topic alice may not DESCRIBE fails per partition; null Topics leaves it out
        named = describe_offsets(alice, group, {"sa-acl-open": [0], "sa-acl-secret": [0]})
        assert offsets(named) == {("sa-acl-open", 0): (0, 0, 0),
                                  ("sa-acl-secret", 0): (-1, -1, E.TOPIC_AUTHORIZATION_FAILED)}
        assert [t.topic_id for t in named.topics] == [open_id, ZERO]
        assert offsets(describe_offsets(alice, group)) == {("sa-acl-open", 0): (0, 0, 0)}
        assert offsets(describe_offsets(root, group)) == {("sa-acl-open", 0): (0, 0, 0),
                                                          ("sa-acl-secret", 0): (0, 0, 0)}
        # alter and delete need READ on each topic
        assert altered(alter(alice, group, {"sa-acl-secret": {0: 1}, "sa-acl-open": {0: 1}})) == [
            ("sa-acl-secret", 0, E.TOPIC_AUTHORIZATION_FAILED), ("sa-acl-open", 0, 0)]
        deleted = delete_offsets(alice, group, "sa-acl-secret")
        assert [(t.topic_name, t.error_code) for t in deleted.responses] == [
            ("sa-acl-secret", E.TOPIC_AUTHORIZATION_FAILED)]
        assert offsets(describe_offsets(root, group)) == {("sa-acl-open", 0): (1, 0, 0),
                                                          ("sa-acl-secret", 0): (0, 0, 0)}
        # a member assigned a topic alice may not DESCRIBE hides the whole group from her
        member, _ = join(root, group, ["sa-acl-open", "sa-acl-secret"])
        [g] = describe(alice, group)
        assert (g.error_code, g.members) == (E.TOPIC_AUTHORIZATION_FAILED, [])
        [g] = describe(root, group)
        assert (g.error_code, [m.member_id for m in g.members]) == (0, [member])
        assert {tp.topic_id for tp in g.members[0].assignment.topic_partitions} == {open_id, secret_id}


def delete_records(wire: KafkaWire, topic: str, partition: int, offset: int) -> None:
    cls = request_class(21)[2]
    T = cls.DeleteRecordsTopic
    r = wire.request(21, 2, cls(topics=[T(name=topic, partitions=[
        T.DeleteRecordsPartition(partition_index=partition, offset=offset)])], timeout_ms=30_000))
    assert r.topics[0].partitions[0].error_code == 0, r


def test_lag_is_the_persisted_summary_before_and_after_a_restart(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """Lag = high watermark - StartOffset - DeliveryCompleteCount, both from the state as last written (Kafka's
    ReadShareGroupStateSummary): a start offset the partition moved in memory only (the log start passed it) does
    not mix with a count taken from memory, and a restart reads the same summary back."""
    group = "sa-lag-g"
    handle = tidelog_broker_factory(tmp_path)
    with KafkaWire(handle.bootstrap) as w:
        topic_id = create_topic(w, "sa-lag", 1)
        assert altered(alter(w, group, {"sa-lag": {0: 0}})) == [("sa-lag", 0, 0)]
        produce(handle, "sa-lag", {0: 10})
        member, _ = join(w, group, ["sa-lag"])
        got = share_fetch(w, group, member, 0, topic_id, 0)
        assert [(r.first_offset, r.last_offset) for t in got.responses for p in t.partitions
                for r in p.acquired_records] == [(0, 9)]
        share_fetch(w, group, member, 1, topic_id, 0, acks=[(0, 1), (3, 3)])  # written: start 2, offset 3 done
        assert offsets(describe_offsets(w, group, {"sa-lag": [0]})) == {("sa-lag", 0): (2, 7, 0)}  # 10 - 2 - 1
        # the log start passes offsets 2-4: the next fetch moves the partition's start in memory, writes nothing
        delete_records(w, "sa-lag", 0, 5)
        share_fetch(w, group, member, 2, topic_id, 0)
        assert offsets(describe_offsets(w, group, {"sa-lag": [0]})) == {("sa-lag", 0): (2, 7, 0)}
    handle.restart()
    with KafkaWire(handle.bootstrap) as w:
        assert offsets(describe_offsets(w, group, {"sa-lag": [0]})) == {("sa-lag", 0): (5, 5, 0)}
        # 5-6 accepted now, 7-9 still in flight
        member, _ = join(w, group, ["sa-lag"])
        got = share_fetch(w, group, member, 0, topic_id, 0)
        assert [(r.first_offset, r.last_offset) for t in got.responses for p in t.partitions
                for r in p.acquired_records] == [(5, 9)]
        share_fetch(w, group, member, 1, topic_id, 0, acks=[(5, 6)])
        assert offsets(describe_offsets(w, group, {"sa-lag": [0]})) == {("sa-lag", 0): (7, 3, 0)}
