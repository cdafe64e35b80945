"""KIP-848 consumer groups over a real socket with hand-built ConsumerGroupHeartbeat requests: epochs,
incremental revocation (a partition reaches its new owner only after the old one revoked it), Kafka's error
codes, ConsumerGroupDescribe / ListGroups / DescribeGroups / DeleteGroups, member-epoch offset commits,
classic <-> consumer conversions, session expiry on the injected clock, and the group surviving a restart."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tidelog.clock import ManualClock
from tidelog.coordinator.group.consumer import records as cr
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

HB, DESCRIBE = 68, 69
E = ErrorCode


@pytest.fixture
def wire(tidelog_module_broker: BrokerHandle) -> Iterator[KafkaWire]:
    with KafkaWire(tidelog_module_broker.bootstrap, client_id="wire-848") as w:
        yield w


def create_topic(wire: KafkaWire, name: str, partitions: int) -> uuid.UUID:
    cls = request_class(19)
    t = cls.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])
    r = wire.request(19, 7, cls[7](topics=[t], timeout_ms=30000, validate_only=False))
    assert r.topics[0].error_code in (0, E.TOPIC_ALREADY_EXISTS)
    return uuid.UUID(str(r.topics[0].topic_id)) if r.topics[0].error_code == 0 else uuid.UUID(int=0)


def heartbeat(wire: KafkaWire, group: str, member_id: str = "", epoch: int = 0, topics: list[str] | None = None,
              owned: dict[uuid.UUID, list[int]] | None = None, assignor: str | None = None,
              rebalance_timeout_ms: int | None = None, instance_id: str | None = None, version: int = 0,
              regex: str | None = None) -> Any:
    cls = request_class(HB)[version]
    T = cls.TopicPartitions
    fields: dict[str, Any] = dict(
        group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance_id, rack_id=None,
        rebalance_timeout_ms=rebalance_timeout_ms if rebalance_timeout_ms is not None else (300000 if epoch == 0 else -1),
        subscribed_topic_names=topics, server_assignor=assignor,
        topic_partitions=None if owned is None else [T(topic_id=t, partitions=sorted(ps)) for t, ps in owned.items()])
    if version >= 1:
        fields["subscribed_topic_regex"] = regex
    return wire.request(HB, version, cls(**fields))


def parts(response: Any) -> dict[uuid.UUID, list[int]] | None:
    if response.assignment is None:
        return None
    return {tp.topic_id: sorted(tp.partitions) for tp in response.assignment.topic_partitions}


def join(wire: KafkaWire, group: str, topics: list[str], **kw: Any) -> Any:
    r = heartbeat(wire, group, epoch=0, topics=topics, owned={}, **kw)
    assert r.error_code == 0, r
    return r


def describe(wire: KafkaWire, *groups: str) -> list[Any]:
    cls = request_class(DESCRIBE)[0]
    return list(wire.request(DESCRIBE, 0, cls(group_ids=list(groups), include_authorized_operations=True)).groups)


def test_incremental_revocation_hands_partitions_over_only_after_release(wire: KafkaWire) -> None:
    tid = create_topic(wire, "rev", 6)
    group = "rev-group"
    a = join(wire, group, ["rev"])
    assert a.member_epoch == 1 and parts(a) == {tid: [0, 1, 2, 3, 4, 5]}
    b = join(wire, group, ["rev"])
    # the group epoch moved to 2; b's share is still owned by a, so b gets nothing yet
    assert b.member_epoch == 2 and parts(b) == {}
    # a learns it must revoke three partitions; it stays at epoch 1 until it confirms
    a2 = heartbeat(wire, group, a.member_id, 1, owned={tid: [0, 1, 2, 3, 4, 5]})
    kept = parts(a2)[tid]
    assert a2.member_epoch == 1 and len(kept) == 3
    b2 = heartbeat(wire, group, b.member_id, 2, owned={})
    assert b2.error_code == 0 and parts(b2) in (None, {})  # still held by a
    [state] = describe(wire, group)
    assert state.group_state == "Reconciling" and state.group_epoch == 2 and state.assignment_epoch == 2
    # a confirms (owns only what it keeps): it moves to epoch 2; the released partitions go to b
    a3 = heartbeat(wire, group, a.member_id, 1, owned={tid: kept})
    assert a3.error_code == 0 and a3.member_epoch == 2
    b3 = heartbeat(wire, group, b.member_id, 2, owned={})
    assert sorted(parts(b3)[tid] + kept) == [0, 1, 2, 3, 4, 5] and not set(parts(b3)[tid]) & set(kept)
    b4 = heartbeat(wire, group, b.member_id, 2, owned=parts(b3))
    assert b4.error_code == 0
    [state] = describe(wire, group)
    assert state.group_state == "Stable" and state.assignor_name == "uniform"
    members = {m.member_id: m for m in state.members}
    assert {tp.topic_name for m in members.values() for tp in m.assignment.topic_partitions} == {"rev"}
    assert members[a.member_id].member_epoch == members[b.member_id].member_epoch == 2
    assert members[a.member_id].client_id == "wire-848"
    # a leaves: b is assigned everything once it heartbeats
    left = heartbeat(wire, group, a.member_id, -1)
    assert left.error_code == 0 and left.member_epoch == -1
    b5 = heartbeat(wire, group, b.member_id, 2, owned=parts(b3))
    assert b5.member_epoch == 3 and parts(b5) == {tid: [0, 1, 2, 3, 4, 5]}


def test_heartbeat_errors(wire: KafkaWire) -> None:
    create_topic(wire, "errs", 2)
    group = "errs-group"
    a = join(wire, group, ["errs"])
    assert heartbeat(wire, group, a.member_id, a.member_epoch + 5, owned={}).error_code == E.FENCED_MEMBER_EPOCH
    assert heartbeat(wire, group, "nobody", 1, owned={}).error_code == E.UNKNOWN_MEMBER_ID
    assert heartbeat(wire, "no-such-group", "m", 3).error_code == E.GROUP_ID_NOT_FOUND
    bad = heartbeat(wire, group, epoch=0, topics=None, owned={})
    assert bad.error_code == E.INVALID_REQUEST and bad.error_message == (
        "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    assert heartbeat(wire, group, epoch=0, topics=["errs"], owned=None).error_code == E.INVALID_REQUEST
    assert heartbeat(wire, "", epoch=0, topics=["errs"], owned={}).error_code == E.INVALID_REQUEST
    assert heartbeat(wire, group, a.member_id, -7).error_code == E.INVALID_REQUEST
    assert heartbeat(wire, group, epoch=0, topics=["errs"], owned={}, assignor="sticky").error_code == \
        E.UNSUPPORTED_ASSIGNOR
    regex = heartbeat(wire, group, epoch=0, topics=["errs"], owned={}, version=1)
    assert regex.error_code == 0  # v1 with no regex joins like v0
    heartbeat(wire, group, regex.member_id, -1)
    heartbeat(wire, group, a.member_id, -1)


def test_range_assignor_gives_contiguous_ranges(wire: KafkaWire) -> None:
    tid = create_topic(wire, "ranged", 5)
    group = "range-group"
    a = join(wire, group, ["ranged"], assignor="range")
    b = join(wire, group, ["ranged"], assignor="range")
    heartbeat(wire, group, a.member_id, 1, owned=parts(a))
    [state] = describe(wire, group)
    assert state.assignor_name == "range"
    targets = sorted(sorted(p for tp in m.target_assignment.topic_partitions for p in tp.partitions)
                     for m in state.members)
    assert targets == [[0, 1, 2], [3, 4]]
    for m in (a, b):
        heartbeat(wire, group, m.member_id, -1)
    del tid


def test_admin_views_and_offsets(wire: KafkaWire) -> None:
    tid = create_topic(wire, "adm", 2)
    group = "adm-group"
    a = join(wire, group, ["adm"])
    # ListGroups v5: the type filter separates consumer and classic groups
    lg = request_class(16)[5]
    listed = {g.group_id: g for g in wire.request(16, 5, lg(states_filter=[], types_filter=["consumer"])).groups}
    assert listed[group].group_type == "consumer" and listed[group].protocol_type == "consumer"
    assert listed[group].group_state in ("Stable", "Reconciling")
    classic_only = wire.request(16, 5, lg(states_filter=[], types_filter=["classic"])).groups
    assert group not in {g.group_id for g in classic_only}
    # DescribeGroups (classic API) describes a consumer group as Dead, as Kafka does for v0-5
    dg = request_class(15)[5]
    [d] = wire.request(15, 5, dg(groups=[group], include_authorized_operations=False)).groups
    assert d.error_code == 0 and d.group_state == "Dead"
    # OffsetCommit v9 with the member epoch as generation
    oc = request_class(8)[9]
    T = oc.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition

    def commit(member_id: str, epoch: int, offset: int) -> int:
        req = oc(group_id=group, generation_id_or_member_epoch=epoch, member_id=member_id, group_instance_id=None,
                 topics=[T(name="adm", partitions=[P(partition_index=0, committed_offset=offset,
                                                     committed_leader_epoch=-1, committed_metadata="m")])])
        return int(wire.request(8, 9, req).topics[0].partitions[0].error_code)

    assert commit(a.member_id, a.member_epoch, 7) == 0
    assert commit(a.member_id, a.member_epoch + 1, 8) == E.STALE_MEMBER_EPOCH
    assert commit("stranger", 1, 8) == E.UNKNOWN_MEMBER_ID
    assert commit("stranger", -1, 8) == E.UNKNOWN_MEMBER_ID  # epoch -1 commits only while the group is empty
    of = request_class(9)[8]
    G = of.OffsetFetchRequestGroup
    fetched = wire.request(9, 8, of(groups=[G(group_id=group, topics=None)], require_stable=False))
    offsets = {(t.name, p.partition_index): p.committed_offset for t in fetched.groups[0].topics for p in t.partitions}
    assert offsets == {("adm", 0): 7}
    # a classic member may not join a live consumer group
    jg = request_class(11)[9]

    def classic_join(protocol_type: str) -> int:
        req = jg(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                 group_instance_id=None, protocol_type=protocol_type, reason=None,
                 protocols=[jg.JoinGroupRequestProtocol(name="range", metadata=b"")])
        return int(wire.request(11, 9, req).error_code)

    # a classic consumer joins the live consumer group (after KIP-394's member id round trip); another
    # protocol type cannot
    assert classic_join("consumer") == E.MEMBER_ID_REQUIRED
    assert classic_join("connect") == E.INCONSISTENT_GROUP_PROTOCOL
    # DeleteGroups refuses a live group, deletes an empty one with its offsets
    dl = request_class(42)[2]
    assert wire.request(42, 2, dl(groups_names=[group])).results[0].error_code == E.NON_EMPTY_GROUP
    heartbeat(wire, group, a.member_id, -1)
    [state] = describe(wire, group)
    assert state.group_state == "Empty"
    assert wire.request(42, 2, dl(groups_names=[group])).results[0].error_code == 0
    [gone] = describe(wire, group)
    assert gone.error_code == E.GROUP_ID_NOT_FOUND
    del tid


def test_epoch_minus_one_commits_to_an_empty_consumer_group_whatever_member_id(wire: KafkaWire) -> None:
    """ConsumerGroup.validateOffsetCommit: with member epoch -1 and no member left, any member id commits (an
    assign()-only librdkafka consumer names one of its own)."""
    create_topic(wire, "emp", 1)
    a = join(wire, "emp-group", ["emp"])
    assert heartbeat(wire, "emp-group", a.member_id, -1).error_code == 0  # leaves: the group stays, empty
    oc = request_class(8)[9]
    T = oc.OffsetCommitRequestTopic
    req = oc(group_id="emp-group", generation_id_or_member_epoch=-1, member_id="self-made-id", group_instance_id=None,
             topics=[T(name="emp", partitions=[T.OffsetCommitRequestPartition(
                 partition_index=0, committed_offset=3, committed_leader_epoch=-1, committed_metadata="")])])
    assert wire.request(8, 9, req).topics[0].partitions[0].error_code == 0


def test_classic_and_consumer_groups_convert_when_empty(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    create_topic(wire, "conv", 1)
    group = "conv-group"
    a = join(wire, group, ["conv"])
    heartbeat(wire, group, a.member_id, -1)
    # an empty consumer group becomes classic on a classic JoinGroup (v3: no member id round trip)
    jg = request_class(11)[3]
    req = jg(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
             protocol_type="connect", protocols=[jg.JoinGroupRequestProtocol(name="default", metadata=b"")])
    joined = wire.request(11, 3, req)
    assert joined.error_code == 0 and joined.generation_id == 1
    assert not tidelog_module_broker.call(lambda: tidelog_module_broker.state.groups.consumer_groups.is_consumer_group(group))
    [classic_view] = describe(wire, group)
    assert classic_view.error_code == E.GROUP_ID_NOT_FOUND and "not a consumer group" in classic_view.error_message
    # a live classic group that does not speak the consumer embedded protocol cannot be upgraded
    assert heartbeat(wire, group, epoch=0, topics=["conv"], owned={}).error_code == E.GROUP_ID_NOT_FOUND
    lv = request_class(13)[3]
    wire.request(13, 3, lv(group_id=group, members=[lv.MemberIdentity(member_id=joined.member_id,
                                                                       group_instance_id=None)]))
    # the empty classic group becomes a consumer group again
    b = join(wire, group, ["conv"])
    assert b.error_code == 0 and tidelog_module_broker.call(lambda: tidelog_module_broker.state.groups.consumer_groups.is_consumer_group(group))
    heartbeat(wire, group, b.member_id, -1)


def test_session_expiry_on_the_injected_clock(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    clock = ManualClock()
    b = tidelog_broker_factory(log_dir=tmp_path, clock=clock,
                    overrides={"group.consumer.session.timeout.ms": "45000"})
    with KafkaWire(b.bootstrap) as w:
        tid = create_topic(w, "exp", 2)
        a = join(w, "exp-group", ["exp"])
        c = join(w, "exp-group", ["exp"])
        cg = b.state.groups.consumer_groups
        clock.advance(30_000)
        heartbeat(w, "exp-group", c.member_id, c.member_epoch, owned={})  # c keeps its session alive
        clock.advance(20_000)  # a: 50 s without a heartbeat
        b.call(cg.check_expirations)
        assert b.call(lambda: sorted(cg.groups["exp-group"].members)) == [c.member_id]
        assert b.call(lambda: cg.groups["exp-group"].group_epoch) == 3
        assert heartbeat(w, "exp-group", a.member_id, a.member_epoch, owned={}).error_code == E.UNKNOWN_MEMBER_ID
        r = heartbeat(w, "exp-group", c.member_id, c.member_epoch, owned={})
        assert r.member_epoch == 3 and parts(r) == {tid: [0, 1]}


def test_group_survives_restart(tmp_path: Path, tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    b = tidelog_broker_factory(log_dir=tmp_path)
    with KafkaWire(b.bootstrap) as w:
        tid = create_topic(w, "persist", 4)
        a = join(w, "persist-group", ["persist"], assignor="range")
        c = join(w, "persist-group", ["persist"], assignor="range")
        a2 = heartbeat(w, "persist-group", a.member_id, 1, owned=parts(a))
        a3 = heartbeat(w, "persist-group", a.member_id, 1, owned=parts(a2))
        c2 = heartbeat(w, "persist-group", c.member_id, 2, owned={})
        before = describe(w, "persist-group")[0]
        key_versions = b.call(lambda: sorted({cr.decode_key(r.key).record_type  # type: ignore[union-attr]
                                              for r in b.state.groups.manager.store.load()
                                              if r.key and cr.decode_key(r.key) is not None}))
        assert key_versions == [3, 4, 5, 6, 7, 8]
    b.restart()
    with KafkaWire(b.bootstrap) as w:
        after = describe(w, "persist-group")[0]
        assert (after.group_epoch, after.assignment_epoch, after.assignor_name) == (
            before.group_epoch, before.assignment_epoch, "range")

        def view(g: Any) -> dict[str, Any]:
            return {m.member_id: (m.member_epoch, m.subscribed_topic_names,
                                  sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions),
                                  sorted(p for tp in m.target_assignment.topic_partitions for p in tp.partitions))
                    for m in g.members}

        assert view(after) == view(before)
        # the members carry on at their epochs, no rejoin needed
        assert heartbeat(w, "persist-group", a.member_id, a3.member_epoch, owned=parts(a3) or parts(a2)).error_code == 0
        assert heartbeat(w, "persist-group", c.member_id, c2.member_epoch, owned={}).error_code == 0
    del tid


def test_records_round_trip() -> None:
    key = cr.ConsumerGroupKey(cr.CURRENT_MEMBER_ASSIGNMENT, "g", "m")
    raw = cr.encode_key(key)
    assert raw == b"\x00\x08\x00\x01g\x00\x01m" and cr.decode_key(raw) == key
    assert cr.decode_key(cr.encode_key(cr.ConsumerGroupKey(cr.GROUP_METADATA, "g"))) == cr.ConsumerGroupKey(3, "g")
    assert cr.decode_key(b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x00") is None  # an offset commit key
    t = uuid.uuid4()
    v = cr.CurrentAssignmentValue(5, 4, 1, {t: {1: 5, 2: 3}}, {t: {3: 2}})
    assert cr.decode_current_assignment(cr.encode_current_assignment(v)) == v
    assert cr.encode_epoch(7) == b"\x00\x00\x00\x00\x00\x07\x00"  # version 0, Epoch, no tagged fields
    m = cr.MemberMetadataValue("i", None, "cid", "/h", ["a", "b"], None, 300000, "uniform")
    assert cr.decode_member_metadata(cr.encode_member_metadata(m)) == m
    meta = [cr.TopicMetadata(t, "a", 3)]
    assert cr.decode_partition_metadata(cr.encode_partition_metadata(meta)) == meta
    assert cr.decode_target_member(cr.encode_target_member({t: {0}})) == {t: {0}}


def test_new_partitions_bump_the_group_epoch(wire: KafkaWire) -> None:
    tid = create_topic(wire, "grow", 2)
    a = join(wire, "grow-group", ["grow"])
    assert parts(a) == {tid: [0, 1]} and a.member_epoch == 1
    cp = request_class(37)[3]
    r = wire.request(37, 3, cp(topics=[cp.CreatePartitionsTopic(name="grow", count=4, assignments=None)],
                                timeout_ms=30000, validate_only=False))
    assert r.results[0].error_code == 0
    grown = heartbeat(wire, "grow-group", a.member_id, 1, owned=parts(a))
    assert grown.member_epoch == 2 and parts(grown) == {tid: [0, 1, 2, 3]}
    heartbeat(wire, "grow-group", a.member_id, -1)


def test_offset_fetch_v9_checks_the_member_epoch(wire: KafkaWire) -> None:
    create_topic(wire, "ofv9", 1)
    a = join(wire, "ofv9-group", ["ofv9"])
    of = request_class(9)[9]
    G = of.OffsetFetchRequestGroup

    def fetch(member_id: str | None, epoch: int) -> int:
        req = of(groups=[G(group_id="ofv9-group", member_id=member_id, member_epoch=epoch, topics=None)],
                 require_stable=True)
        return int(wire.request(9, 9, req).groups[0].error_code)

    assert fetch(a.member_id, a.member_epoch) == 0
    assert fetch(None, -1) == 0  # admin clients
    assert fetch(a.member_id, a.member_epoch + 1) == E.STALE_MEMBER_EPOCH
    assert fetch("stranger", 1) == E.UNKNOWN_MEMBER_ID
    heartbeat(wire, "ofv9-group", a.member_id, -1)


def test_static_member_rejoins_with_a_new_member_id(wire: KafkaWire) -> None:
    tid = create_topic(wire, "static", 2)
    a = join(wire, "static-group", ["static"], instance_id="inst-1")
    # a second process with the same instance id while the first is alive
    assert heartbeat(wire, "static-group", epoch=0, topics=["static"], owned={}, instance_id="inst-1").error_code \
        == E.UNRELEASED_INSTANCE_ID
    gone = heartbeat(wire, "static-group", a.member_id, -2, instance_id="inst-1")
    assert gone.error_code == 0 and gone.member_epoch == -2
    b = heartbeat(wire, "static-group", epoch=0, topics=["static"], owned={}, instance_id="inst-1")
    assert b.error_code == 0 and b.member_id != a.member_id and parts(b) == {tid: [0, 1]}
    [state] = describe(wire, "static-group")
    assert [(m.member_id, m.instance_id) for m in state.members] == [(b.member_id, "inst-1")]
    assert heartbeat(wire, "static-group", a.member_id, 1, owned={}, instance_id="inst-1").error_code == \
        E.FENCED_INSTANCE_ID
    heartbeat(wire, "static-group", b.member_id, -1, instance_id="inst-1")


def test_rebalance_timeout_fences_a_member_that_does_not_revoke(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    clock = ManualClock()
    b = tidelog_broker_factory(log_dir=tmp_path, clock=clock)
    with KafkaWire(b.bootstrap) as w:
        tid = create_topic(w, "slow", 4)
        a = join(w, "slow-group", ["slow"], rebalance_timeout_ms=10_000)
        c = join(w, "slow-group", ["slow"], rebalance_timeout_ms=10_000)
        told = heartbeat(w, "slow-group", a.member_id, 1, owned={tid: [0, 1, 2, 3]})
        assert told.member_epoch == 1 and len(parts(told)[tid]) == 2  # must revoke two partitions
        cg = b.state.groups.consumer_groups
        clock.advance(5_000)
        heartbeat(w, "slow-group", c.member_id, c.member_epoch, owned={})
        heartbeat(w, "slow-group", a.member_id, 1, owned={tid: [0, 1, 2, 3]})  # alive, but still holding all
        clock.advance(6_000)  # 11 s since it was asked to revoke
        b.call(cg.check_expirations)
        assert b.call(lambda: sorted(cg.groups["slow-group"].members)) == [c.member_id]
        r = heartbeat(w, "slow-group", c.member_id, c.member_epoch, owned={})
        assert parts(r) == {tid: [0, 1, 2, 3]}


def test_consumer_protocol_can_be_disabled(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    b = tidelog_broker_factory(overrides={"group.coordinator.rebalance.protocols": "classic"})
    with KafkaWire(b.bootstrap) as w:
        create_topic(w, "off", 1)
        # KafkaApis answers UNSUPPORTED_VERSION when the consumer rebalance protocol is not enabled
        assert heartbeat(w, "off-group", epoch=0, topics=["off"], owned={}).error_code == E.UNSUPPORTED_VERSION


def test_regex_subscription(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    a_id, b_id = create_topic(wire, "rx-a", 1), create_topic(wire, "rx-b", 2)
    create_topic(wire, "other-rx-a", 1)
    r = heartbeat(wire, "rx-group", epoch=0, topics=[], owned={}, version=1, regex="rx-.*")
    assert r.error_code == 0 and parts(r) == {a_id: [0], b_id: [0, 1]}
    c_id = create_topic(wire, "rx-c", 1)
    grown = heartbeat(wire, "rx-group", r.member_id, r.member_epoch, owned=parts(r), version=1)
    assert grown.member_epoch == r.member_epoch + 1 and parts(grown) == {a_id: [0], b_id: [0, 1], c_id: [0]}
    [state] = describe(wire, "rx-group")
    assert state.members[0].subscribed_topic_regex == "rx-.*"
    resolved = tidelog_module_broker.call(lambda: tidelog_module_broker.state.groups.consumer_groups.groups["rx-group"].resolved_regexes)
    assert resolved == {"rx-.*": ["rx-a", "rx-b", "rx-c"]}
    bad = heartbeat(wire, "rx-group", epoch=0, topics=[], owned={}, version=1, regex="rx-(")
    assert bad.error_code == 128  # INVALID_REGULAR_EXPRESSION
    heartbeat(wire, "rx-group", r.member_id, -1, version=1)
    assert tidelog_module_broker.call(lambda: tidelog_module_broker.state.groups.consumer_groups.groups["rx-group"].resolved_regexes) == {}


def subscription(topics: list[str], owned: dict[str, list[int]] | None = None) -> bytes:
    """ConsumerProtocolSubscription v1 (what a classic consumer puts in JoinGroup)."""
    import struct

    out = struct.pack(">hi", 1, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    out += struct.pack(">i", -1)  # no user data
    owned = owned or {}
    out += struct.pack(">i", len(owned))
    for t, ps in owned.items():
        out += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(ps))
        out += b"".join(struct.pack(">i", p) for p in ps)
    return out


def test_classic_member_in_a_consumer_group(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    from tidelog.coordinator.group.consumer.classic_members import parse_subscription

    create_topic(wire, "mixed-wire", 4)
    group = "mixed-wire-group"
    modern = join(wire, group, ["mixed-wire"])
    jg = request_class(11)[5]

    def classic_join(member_id: str, owned: dict[str, list[int]] | None = None) -> Any:
        req = jg(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id=member_id,
                 group_instance_id=None, protocol_type="consumer",
                 protocols=[jg.JoinGroupRequestProtocol(name="range", metadata=subscription(["mixed-wire"], owned))])
        return wire.request(11, 5, req)

    first = classic_join("")
    assert first.error_code == E.MEMBER_ID_REQUIRED
    joined = classic_join(first.member_id)
    # no leader, nothing to assign: the generation is the member epoch, the protocol the member's first one
    assert joined.error_code == 0 and joined.leader == "" and joined.members == []
    assert (joined.protocol_name, joined.generation_id) == ("range", 2)
    sg = request_class(14)[5]

    def sync(generation: int) -> Any:
        return wire.request(14, 5, sg(group_id=group, generation_id=generation, member_id=first.member_id,
                                      group_instance_id=None, protocol_type="consumer", protocol_name="range",
                                      assignments=[]))

    assert sync(7).error_code == E.ILLEGAL_GENERATION
    synced = sync(2)
    assert synced.error_code == 0
    hb = request_class(12)[4]

    def classic_heartbeat(generation: int) -> int:
        return int(wire.request(12, 4, hb(group_id=group, generation_id=generation, member_id=first.member_id,
                                          group_instance_id=None)).error_code)

    # the partitions it should get are still owned by the consumer-protocol member: it is told to rejoin
    # once they are released
    owned_by_modern = parts(heartbeat(wire, group, modern.member_id, 1, owned=parts(modern)))
    heartbeat(wire, group, modern.member_id, 1, owned=owned_by_modern)
    assert classic_heartbeat(2) == E.REBALANCE_IN_PROGRESS
    rejoined = classic_join(first.member_id)
    assert rejoined.generation_id == 2
    assignment = sync(2).assignment
    assert assignment[:2] == b"\x00\x01" and b"mixed-wire" in assignment  # ConsumerProtocolAssignment v1
    assert classic_heartbeat(2) == 0
    assert classic_heartbeat(1) == E.ILLEGAL_GENERATION
    [state] = describe(wire, group)
    got = sorted(p for m in state.members for tp in m.assignment.topic_partitions for p in tp.partitions)
    assert got == [0, 1, 2, 3] and state.group_state == "Stable"
    classic = tidelog_module_broker.call(lambda: tidelog_module_broker.state.groups.consumer_groups.groups[group].members[first.member_id].classic)
    assert classic is not None and classic.session_timeout_ms == 10000
    assert parse_subscription(classic.supported_protocols[0][1]).topics == ["mixed-wire"]
    lv = request_class(13)[3]
    left = wire.request(13, 3, lv(group_id=group, members=[lv.MemberIdentity(member_id=first.member_id,
                                                                            group_instance_id=None)]))
    assert left.error_code == 0 and left.members[0].error_code == 0
    assert tidelog_module_broker.call(lambda: sorted(tidelog_module_broker.state.groups.consumer_groups.groups[group].members)) == [modern.member_id]
    heartbeat(wire, group, modern.member_id, -1)


def test_classic_member_metadata_record_round_trip() -> None:
    m = cr.MemberMetadataValue(None, None, "c", "/h", ["t"], None, 10000, None, (6000, [("range", b"\x00\x01")]))
    raw = cr.encode_member_metadata(m)
    assert cr.decode_member_metadata(raw) == m
    plain = cr.MemberMetadataValue(None, None, "c", "/h", ["t"], None, 10000, None)
    assert cr.encode_member_metadata(plain).endswith(b"\x00") and cr.decode_member_metadata(
        cr.encode_member_metadata(plain)).classic is None


@pytest.mark.parametrize(("api_key", "version", "body"), [
    (HB, 0, b"\x02g\x01"),  # ConsumerGroupHeartbeat cut after the member id
    (HB, 1, b"\xff\xff\xff"),
    (DESCRIBE, 0, b"\x05"),  # an array length with no elements
    (1, 12, b"\x00\x00"),  # Fetch: session fields missing
])
def test_undecodable_bodies_close_the_connection(tidelog_module_broker: BrokerHandle, api_key: int, version: int,
                                                 body: bytes) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as w:
        w.sock.sendall(w.frame(api_key, version, body))
        assert w.is_closed()
    with KafkaWire(tidelog_module_broker.bootstrap) as w:  # the broker keeps serving
        assert describe(w, "anything")[0].error_code == E.GROUP_ID_NOT_FOUND


def test_owned_partitions_of_the_zero_topic_id_are_answered_not_a_handler_failure(wire: KafkaWire) -> None:
    """An owned-partitions entry with the all-zero topic id (which the request codec reads as no id) is an
    unknown topic to the group, not a TypeError (found by the API fuzz)."""
    create_topic(wire, "zero-id", 1)
    member = join(wire, "zero-id-group", ["zero-id"])
    response = heartbeat(wire, "zero-id-group", epoch=0, topics=["zero-id"], owned={uuid.UUID(int=0): [0]})
    assert response.error_code == E.INVALID_REQUEST  # a (re-)join must own nothing: answered, not a crash
    alive = heartbeat(wire, "zero-id-group", member.member_id, member.member_epoch, owned={uuid.UUID(int=0): [0]})
    assert alive.error_code == 0, alive
    heartbeat(wire, "zero-id-group", member.member_id, -1)
