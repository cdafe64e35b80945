"""Static members (KIP-345) of a classic group rejoining with an unknown member id, on the wire, as Kafka 4.3's
coordinator answers them: GroupMetadataManager.updateStaticMemberThenRebalanceOrCompleteJoin with
ClassicGroup.replaceStaticMember. In a Stable group only a change of the group's selected protocol
(ClassicGroup.selectProtocol) starts a rebalance; changed metadata bytes alone do not. The answer then carries
the new member id and the current generation; from JoinGroup v9 (KIP-814, KAFKA-13435) the leader gets the
members and skip_assignment, before v9 the response names the leader as it was before the rejoin. In
CompletingRebalance the rejoin always rebalances; in PreparingRebalance it waits for the others. The replaced
member id is fenced either way.

Two raw connections stand for the two members ("a", the leader, and "b"), so a parked JoinGroup or SyncGroup of
one can wait while the other acts."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tidelog.protocol.errors import ErrorCode as E
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

J = request_class(11)
S = request_class(14)
BOTH = ("range", "roundrobin")
_groups = itertools.count()


class Conn(KafkaWire):
    """One member's connection: requests as fields, and a send/receive split for calls that park."""

    def join_send(self, group: str, instance: str, member_id: str = "", version: int = 9,
                  protocols: tuple[str, ...] = BOTH, meta: bytes = b"m") -> None:
        fields: dict[str, Any] = dict(
            group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id=member_id,
            group_instance_id=instance, protocol_type="consumer",
            protocols=[J.JoinGroupRequestProtocol(name=n, metadata=meta + b"/" + n.encode()) for n in protocols])
        if version >= 8:
            fields["reason"] = None
        self._join_version = version
        self.send(11, version, J[version](**fields))

    def join_receive(self) -> Any:
        return self.receive(11, self._join_version)[1]

    def join(self, *args: Any, **kw: Any) -> Any:
        self.join_send(*args, **kw)
        return self.join_receive()

    def sync_send(self, group: str, generation: int, member_id: str, instance: str,
                  assignments: dict[str, bytes] | None = None) -> None:
        self.send(14, 5, S[5](group_id=group, generation_id=generation, member_id=member_id,
                              group_instance_id=instance, protocol_type="consumer", protocol_name=None,
                              assignments=[S.SyncGroupRequestAssignment(member_id=m, assignment=a)
                                           for m, a in (assignments or {}).items()]))

    def sync_receive(self) -> Any:
        return self.receive(14, 5)[1]

    def sync(self, *args: Any, **kw: Any) -> Any:
        self.sync_send(*args, **kw)
        return self.sync_receive()

    def heartbeat(self, group: str, generation: int, member_id: str, instance: str) -> int:
        return int(self.request(12, 4, request_class(12)[4](group_id=group, generation_id=generation,
                                                            member_id=member_id,
                                                            group_instance_id=instance)).error_code)


@dataclass
class Pair:
    group: str
    a: Conn
    b: Conn
    a_id: str
    b_id: str
    generation: int


@pytest.fixture
def conns(tidelog_module_broker: BrokerHandle) -> Iterator[tuple[Conn, Conn, Conn]]:
    with Conn(tidelog_module_broker.bootstrap, client_id="a") as a, Conn(tidelog_module_broker.bootstrap, client_id="b") as b, \
            Conn(tidelog_module_broker.bootstrap, client_id="b2") as b2:
        yield a, b, b2


def wait_until(broker: Any, group: str, predicate: Callable[[Any], bool]) -> None:
    """Until the broker has processed a request sent on another connection (the group shows its effect)."""
    deadline = time.monotonic() + 30
    while not broker.call(lambda: predicate(broker.state.groups.groups[group])):
        assert time.monotonic() < deadline, f"group {group} never reached the awaited state"
        time.sleep(0.01)


def preparing(g: Any) -> bool:
    return g.state.value == "PreparingRebalance"  # type: ignore[no-any-return]


def stable_pair(a: Conn, b: Conn, group: str, broker: Any, b_protocols: tuple[str, ...] = BOTH) -> Pair:
    """A Stable group: static members "a" (the leader, assigned b"A") and "b" (assigned b"B")."""
    first = a.join(group, "a")
    assert first.error_code == 0 and first.leader == first.member_id
    assert a.sync(group, first.generation_id, first.member_id, "a", {first.member_id: b"A0"}).error_code == 0
    b.join_send(group, "b", protocols=b_protocols)             # parks: the group rebalances for it
    wait_until(broker, group, preparing)
    again = a.join(group, "a", first.member_id)                # the leader rejoins and completes the generation
    joined = b.join_receive()
    assert again.error_code == joined.error_code == 0 and again.generation_id == joined.generation_id
    gen = again.generation_id
    b.sync_send(group, gen, joined.member_id, "b")
    assert a.sync(group, gen, first.member_id, "a", {first.member_id: b"A", joined.member_id: b"B"}
                  ).assignment == b"A"
    assert b.sync_receive().assignment == b"B"
    return Pair(group, a, b, first.member_id, joined.member_id, gen)


def broker_group(broker: Any, group: str) -> Any:
    return broker.state.groups.groups[group]


def group_view(broker: Any, group: str) -> tuple[str, int, str | None, dict[str, str], dict[str, bytes]]:
    """(state, generation, leader, instance id -> member id, member id -> metadata of the selected protocol)."""
    def read() -> Any:
        g = broker.state.groups.groups[group]
        return (g.state.value, g.generation_id, g.leader_id, dict(g.static_members),
                {m.member_id: m.metadata(g.protocol_name or "") for m in g.members.values()})
    return broker.call(read)  # type: ignore[no-any-return]


def members_of(resp: Any) -> dict[str, tuple[str | None, bytes]]:
    return {m.member_id: (m.group_instance_id, bytes(m.metadata)) for m in resp.members}


# ------------------------------------------------------------------------------------------------ Stable group
@pytest.mark.parametrize("version", [5, 9])
@pytest.mark.parametrize("meta", [b"m", b"changed"], ids=["same-metadata", "changed-metadata"])
def test_follower_rejoin_in_stable_group_keeps_generation_and_assignment(
        version: int, meta: bytes, conns: tuple[Conn, Conn, Conn], tidelog_module_broker: BrokerHandle) -> None:
    """updateStaticMemberThenRebalanceOrCompleteJoin, Stable, selected protocol unchanged: the follower is
    answered at once, with no members and skip_assignment false in either response branch."""
    a, b, b2 = conns
    p = stable_pair(a, b, f"static-follower-{next(_groups)}", tidelog_module_broker)
    resp = b2.join(p.group, "b", version=version, meta=meta)
    assert resp.error_code == 0 and resp.member_id != p.b_id and resp.member_id.startswith("b-")
    assert (resp.generation_id, resp.protocol_name, resp.leader) == (p.generation, "range", p.a_id)
    assert resp.members == [] and not resp.skip_assignment
    assert group_view(tidelog_module_broker, p.group) == (
        "Stable", p.generation, p.a_id, {"a": p.a_id, "b": resp.member_id},
        {p.a_id: b"m/range", resp.member_id: meta + b"/range"})
    # the replaced member id is fenced (ClassicGroup.replaceStaticMember); the new one syncs to the old assignment
    assert b.heartbeat(p.group, p.generation, p.b_id, "b") == E.FENCED_INSTANCE_ID
    assert b2.sync(p.group, p.generation, resp.member_id, "b").assignment == b"B"
    assert a.heartbeat(p.group, p.generation, p.a_id, "a") == E.NONE  # nobody was asked to rejoin


@pytest.mark.parametrize("meta", [b"m", b"changed"], ids=["same-metadata", "changed-metadata"])
def test_leader_rejoin_v9_gets_members_and_skip_assignment(meta: bytes, conns: tuple[Conn, Conn, Conn],
                                                           tidelog_module_broker: BrokerHandle) -> None:
    """JoinGroupRequest.supportsSkippingAssignment (v9+): the new leader id is the leader, it receives every
    member's current metadata and skip_assignment, so it syncs without computing an assignment."""
    a, b, a2 = conns
    p = stable_pair(a, b, f"static-leader-v9-{next(_groups)}", tidelog_module_broker)
    resp = a2.join(p.group, "a", version=9, meta=meta)
    new_id = resp.member_id
    assert resp.error_code == 0 and new_id != p.a_id and resp.leader == new_id and resp.skip_assignment
    assert (resp.generation_id, resp.protocol_name) == (p.generation, "range")
    assert members_of(resp) == {new_id: ("a", meta + b"/range"), p.b_id: ("b", b"m/range")}
    assert group_view(tidelog_module_broker, p.group)[:4] == ("Stable", p.generation, new_id, {"a": new_id, "b": p.b_id})
    assert a.heartbeat(p.group, p.generation, p.a_id, "a") == E.FENCED_INSTANCE_ID
    assert a2.sync(p.group, p.generation, new_id, "a", {}).assignment == b"A"
    assert b.heartbeat(p.group, p.generation, p.b_id, "b") == E.NONE
    assert b.sync(p.group, p.generation, p.b_id, "b").assignment == b"B"


@pytest.mark.parametrize("meta", [b"m", b"changed"], ids=["same-metadata", "changed-metadata"])
def test_leader_rejoin_before_v9_is_told_the_old_leader(meta: bytes, conns: tuple[Conn, Conn, Conn],
                                                        tidelog_module_broker: BrokerHandle) -> None:
    """Before v9 the response carries the leader as it was before the replacement (`currentLeader`), so the
    restarted leader acts as a follower; the group itself moves the leadership to the new member id."""
    a, b, a2 = conns
    p = stable_pair(a, b, f"static-leader-v5-{next(_groups)}", tidelog_module_broker)
    resp = a2.join(p.group, "a", version=5, meta=meta)
    new_id = resp.member_id
    assert resp.error_code == 0 and new_id != p.a_id and resp.leader == p.a_id
    assert (resp.generation_id, resp.protocol_name, resp.members) == (p.generation, "range", [])
    assert group_view(tidelog_module_broker, p.group)[:4] == ("Stable", p.generation, new_id, {"a": new_id, "b": p.b_id})
    assert a2.sync(p.group, p.generation, new_id, "a").assignment == b"A"
    assert b.heartbeat(p.group, p.generation, p.b_id, "b") == E.NONE


@pytest.mark.parametrize("who", ["leader", "follower"])
def test_rejoin_keeps_a_tied_protocol_vote(who: str, conns: tuple[Conn, Conn, Conn], tidelog_module_broker: BrokerHandle) -> None:
    """"a" prefers range, "b" roundrobin: the vote is a tie, and the group runs range. A restart with the same
    preferences leaves ClassicGroup.selectProtocol's answer as it was, so Kafka does not rebalance."""
    a, b, new = conns
    p = stable_pair(a, b, f"static-tie-{who}-{next(_groups)}", tidelog_module_broker, b_protocols=BOTH[::-1])
    assert tidelog_module_broker.call(lambda: broker_group(tidelog_module_broker, p.group).protocol_name) == "range"
    instance, protocols = ("a", BOTH) if who == "leader" else ("b", BOTH[::-1])
    resp = new.join(p.group, instance, protocols=protocols)
    assert resp.error_code == 0 and (resp.generation_id, resp.protocol_name) == (p.generation, "range")
    assert group_view(tidelog_module_broker, p.group)[:2] == ("Stable", p.generation)


def test_rejoin_whose_group_record_cannot_be_stored_is_reverted(conns: tuple[Conn, Conn, Conn],
                                                                 tidelog_module_broker: BrokerHandle) -> None:
    """The Stable branch's append fails (here the group record outgrows __consumer_offsets' max.message.bytes,
    which GroupMetadataManager.appendGroupMetadataErrorToResponseError turns into UNKNOWN_SERVER_ERROR): the
    static member goes back to its old member id and metadata, and the answer has no member id."""
    a, b, b2 = conns
    p = stable_pair(a, b, f"static-store-fails-{next(_groups)}", tidelog_module_broker)
    before = group_view(tidelog_module_broker, p.group)
    resp = b2.join(p.group, "b", meta=b"x" * 1_100_000)
    assert (resp.error_code, resp.member_id) == (E.UNKNOWN_SERVER_ERROR, "")
    assert group_view(tidelog_module_broker, p.group) == before
    assert b.heartbeat(p.group, p.generation, p.b_id, "b") == E.NONE
    assert b.sync(p.group, p.generation, p.b_id, "b").assignment == b"B"


@pytest.mark.parametrize("who", ["leader", "follower"])
def test_rejoin_that_changes_the_selected_protocol_rebalances(who: str, conns: tuple[Conn, Conn, Conn],
                                                              tidelog_module_broker: BrokerHandle) -> None:
    """Stable, `group.selectProtocol()` differs from the current protocol: maybePrepareRebalanceOrCompleteJoin.
    Here the rejoining member supports only "roundrobin", so that is the only protocol every member has."""
    a, b, new = conns
    p = stable_pair(a, b, f"static-protocol-{who}-{next(_groups)}", tidelog_module_broker)
    instance, other, other_id, other_conn = (("a", "b", p.b_id, b) if who == "leader"
                                             else ("b", "a", p.a_id, a))
    new.join_send(p.group, instance, protocols=("roundrobin",))
    wait_until(tidelog_module_broker, p.group, preparing)
    assert other_conn.heartbeat(p.group, p.generation, other_id, other) == E.REBALANCE_IN_PROGRESS
    rejoined = other_conn.join(p.group, other, other_id)
    resp = new.join_receive()
    assert rejoined.error_code == resp.error_code == 0
    assert rejoined.generation_id == resp.generation_id == p.generation + 1
    assert resp.protocol_name == rejoined.protocol_name == "roundrobin"
    new_id = resp.member_id
    leader = new_id if who == "leader" else p.a_id  # the leadership moved with the replaced member id
    assert resp.leader == rejoined.leader == leader
    assert group_view(tidelog_module_broker, p.group)[:4] == ("CompletingRebalance", p.generation + 1, leader,
                                                    {instance: new_id, other: other_id})


# ----------------------------------------------------------------------------------- rebalancing group states
def test_rejoin_in_completing_rebalance_always_rebalances(conns: tuple[Conn, Conn, Conn], tidelog_module_broker: BrokerHandle) -> None:
    """CompletingRebalance: prepareRebalance even with the same metadata, since the leader may be assigning to
    the old member id. The old incarnation's parked SyncGroup is fenced."""
    a, b, b2 = conns
    group = f"static-completing-{next(_groups)}"
    first = a.join(group, "a")
    a.sync(group, first.generation_id, first.member_id, "a", {first.member_id: b"A0"})
    b.join_send(group, "b")
    wait_until(tidelog_module_broker, group, preparing)
    joined_a = a.join(group, "a", first.member_id)
    joined_b = b.join_receive()
    gen = joined_a.generation_id
    b.sync_send(group, gen, joined_b.member_id, "b")             # parks: the leader has not assigned yet
    wait_until(tidelog_module_broker, group, lambda g: g.state.value == "CompletingRebalance"
               and g.members[joined_b.member_id].is_awaiting_sync)
    b2.join_send(group, "b")                                    # "b" restarts with the very same metadata
    assert b.sync_receive().error_code == E.FENCED_INSTANCE_ID
    assert a.heartbeat(group, gen, first.member_id, "a") == E.REBALANCE_IN_PROGRESS
    again = a.join(group, "a", first.member_id)
    resp = b2.join_receive()
    assert again.error_code == resp.error_code == 0 and again.generation_id == resp.generation_id == gen + 1
    assert set(members_of(again)) == {first.member_id, resp.member_id} and resp.member_id != joined_b.member_id


def test_rejoin_in_preparing_rebalance_waits_for_the_join(conns: tuple[Conn, Conn, Conn],
                                                          tidelog_module_broker: BrokerHandle) -> None:
    """PreparingRebalance: the member is replaced, the old incarnation's parked JoinGroup is fenced and the new
    one is answered when the join phase completes (maybeCompleteJoinPhase)."""
    a, b, b2 = conns
    p = stable_pair(a, b, f"static-preparing-{next(_groups)}", tidelog_module_broker)
    b.join_send(p.group, "b", p.b_id, meta=b"changed")          # a follower's new metadata: PreparingRebalance
    wait_until(tidelog_module_broker, p.group, lambda g: preparing(g) and g.members[p.b_id].is_awaiting_join)
    b2.join_send(p.group, "b")                                  # "b" restarts while its old join waits
    assert b.join_receive().error_code == E.FENCED_INSTANCE_ID
    assert group_view(tidelog_module_broker, p.group)[0] == "PreparingRebalance"
    assert a.heartbeat(p.group, p.generation, p.a_id, "a") == E.REBALANCE_IN_PROGRESS
    done = a.join(p.group, "a", p.a_id)
    resp = b2.join_receive()
    assert done.error_code == resp.error_code == 0
    assert done.generation_id == resp.generation_id == p.generation + 1 and resp.member_id != p.b_id
    assert members_of(done) == {p.a_id: ("a", b"m/range"), resp.member_id: ("b", b"m/range")}


# ---------------------------------------------------------------------------------------------- a real client
class StaticConsumer:
    """A confluent-kafka (librdkafka) consumer with group.instance.id, recording its rebalance callbacks."""

    def __init__(self, bootstrap: str, topic: str, group: str, instance: str) -> None:
        from confluent_kafka import Consumer

        self.events: list[tuple[str, list[int]]] = []
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": instance,
                                  "session.timeout.ms": 60000, "heartbeat.interval.ms": 1000,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        self.consumer.subscribe([topic], on_assign=self._on("assign"), on_revoke=self._on("revoke"))

    def _on(self, what: str) -> Callable[[Any, Any], None]:
        def record(_: Any, partitions: Any) -> None:
            self.events.append((what, sorted(tp.partition for tp in partitions)))
        return record

    @property
    def assignment(self) -> list[int] | None:
        assigned = [parts for what, parts in self.events if what == "assign"]
        return assigned[-1] if assigned else None


def poll_until(consumers: list[StaticConsumer], done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 120
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {[c.events for c in consumers]}"
        for c in consumers:
            c.consumer.poll(0.1)


@pytest.mark.parametrize("restarting", ["leader", "follower"])
def test_confluent_static_member_restart_keeps_group_stable(restarting: str, tidelog_module_broker: BrokerHandle) -> None:
    """librdkafka's 0102_static_group_rebalance in short: a static member that restarts (close without
    LeaveGroup, then a new consumer with the same group.instance.id) rejoins a Stable group. librdkafka speaks
    JoinGroup below v9, so a restarted leader is told the old leader id and syncs as a follower
    (updateStaticMemberThenRebalanceOrCompleteJoin): no rebalance, no callback on the other member, the same
    generation and the same assignment for the new incarnation."""
    topic, group = f"static-confluent-{restarting}", f"static-confluent-{restarting}"
    tidelog_module_broker.create_topic(topic, 4)
    members = {i: StaticConsumer(tidelog_module_broker.bootstrap, topic, group, i) for i in ("s1", "s2")}
    try:
        poll_until(list(members.values()), lambda: all(m.assignment for m in members.values())
                   and sorted(sum((m.assignment or [] for m in members.values()), [])) == [0, 1, 2, 3]
                   and group_view(tidelog_module_broker, group)[0] == "Stable", "a Stable group of two")
        state, generation, leader, static, _ = group_view(tidelog_module_broker, group)
        leader_instance = next(i for i, mid in static.items() if mid == leader)
        instance = leader_instance if restarting == "leader" else next(i for i in static if i != leader_instance)
        other = next(i for i in members if i != instance)
        before, other_events = members[instance].assignment, list(members[other].events)
        members[instance].consumer.close()  # a static member sends no LeaveGroup
        members[instance] = StaticConsumer(tidelog_module_broker.bootstrap, topic, group, instance)
        poll_until(list(members.values()), lambda: members[instance].assignment is not None, "the rejoin")
        assert members[instance].assignment == before
        state2, generation2, leader2, static2, _ = group_view(tidelog_module_broker, group)
        assert (state2, generation2) == ("Stable", generation), "the restart must not rebalance the group"
        assert static2[instance] != static[instance] and static2[other] == static[other]
        assert leader2 == static2[leader_instance]  # the leadership stays with the leader's instance
        for _ in range(10):  # a rebalance would reach the other member's callbacks within these polls
            members[other].consumer.poll(0.1)
        assert members[other].events == other_events
    finally:
        for m in members.values():
            m.consumer.close()
