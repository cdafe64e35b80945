"""KIP-1071 streams groups over a real socket with hand-built StreamsGroupHeartbeat / StreamsGroupDescribe requests
(no client available here speaks `group.protocol=streams`): a topology whose internal topics the coordinator
creates, tasks assigned and handed over across epochs by Kafka's sticky task assignor rules (one active owner
per task, standbys on other processes, an active task reaches its new owner only after the old one revoked it),
offset commits by member epoch, describe / ListGroups / DescribeGroups, session expiry on the injected clock, a
topology update, Kafka's errors and statuses (v1's MISSING_CLIENT_TAGS), API key 93, and a restart."""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tidelog.clock import ManualClock
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

HB, DESCRIBE, UPDATE = 88, 89, 93
E = ErrorCode
STALE_TOPOLOGY, MISSING_SOURCE_TOPICS, MISSING_INTERNAL_TOPICS, ASSIGNMENT_DELAYED, MISSING_CLIENT_TAGS = 0, 1, 3, 5, 6
CLOCK = ManualClock()
NO_DELAY = {"group.streams.initial.rebalance.delay.ms": 0}


pytestmark = pytest.mark.tidelog(clock=CLOCK, overrides={"group.streams.num.standby.replicas": 1,
                                                          "group.streams.initial.rebalance.delay.ms": 0,
                                                          "group.streams.rack.aware.assignment.tags": "zone"})


@pytest.fixture
def wire(tidelog_module_broker: BrokerHandle) -> Iterator[KafkaWire]:
    with KafkaWire(tidelog_module_broker.bootstrap, client_id="wire-streams") as w:
        yield w


def create_topic(wire: KafkaWire, name: str, partitions: int) -> None:
    cls = request_class(19)
    t = cls.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])
    r = wire.request(19, 7, cls[7](topics=[t], timeout_ms=30000, validate_only=False))
    assert r.topics[0].error_code in (0, E.TOPIC_ALREADY_EXISTS)


def topology(app: str, source: str, epoch: int = 1) -> Any:
    """Two subtopologies: 0 reads `source` into a store and writes a repartition topic that 1 reads and
    aggregates (partition counts left to the coordinator, as Kafka Streams sends them)."""
    T = request_class(HB)[1].Topology
    S = T.Subtopology
    Info = S.TopicInfo
    return T(epoch=epoch, subtopologies=[
        S(subtopology_id="0", source_topics=[source], source_topic_regex=[],
          state_changelog_topics=[Info(name=f"{app}-store-changelog", partitions=0, replication_factor=0, topic_configs=[])],
          repartition_sink_topics=[f"{app}-rep"], repartition_source_topics=[], copartition_groups=[]),
        S(subtopology_id="1", source_topics=[], source_topic_regex=[],
          state_changelog_topics=[Info(name=f"{app}-agg-changelog", partitions=0, replication_factor=0, topic_configs=[])],
          repartition_sink_topics=[],
          repartition_source_topics=[Info(name=f"{app}-rep", partitions=0, replication_factor=0, topic_configs=[])],
          copartition_groups=[])])


Tasks = dict[str, list[int]]


def hb(wire: KafkaWire, group: str, member: str, epoch: int, *, process: str = "p", topo: Any = None,
       active: Tasks | None = None, standby: Tasks | None = None, tags: dict[str, str] | None = None,
       version: int = 1, endpoint_epoch: int = -1, endpoint: tuple[str, int] | None = None) -> Any:
    cls = request_class(HB)[version]

    def ids(ts: Tasks | None) -> list[Any] | None:
        return None if ts is None else [cls.TaskIds(subtopology_id=s, partitions=p) for s, p in ts.items()]
    joining = epoch == 0
    if active is not None or standby is not None:  # the client sends the three lists together, or none
        active, standby = active or {}, standby or {}
    return wire.request(HB, version, cls(
        group_id=group, member_id=member, member_epoch=epoch, endpoint_information_epoch=endpoint_epoch,
        instance_id=None, rack_id=None, rebalance_timeout_ms=30_000 if joining else -1, topology=topo,
        active_tasks=[] if joining else ids(active), standby_tasks=[] if joining else ids(standby),
        warmup_tasks=[] if joining or active is not None else None, process_id=process if joining else None,
        user_endpoint=None if endpoint is None else cls.Endpoint(host=endpoint[0], port=endpoint[1]),
        client_tags=None if tags is None else [cls.KeyValue(key=k, value=v) for k, v in tags.items()],
        task_offsets=None, task_end_offsets=None, shutdown_application=False))


def init_transactional(wire: KafkaWire, tid: str) -> Any:
    """InitProducerId, retried as clients do while the transaction coordinator loads."""
    cls = request_class(22)[4]
    for _ in range(100):
        r = wire.request(22, 4, cls(transactional_id=tid, transaction_timeout_ms=60000, producer_id=-1,
                                    producer_epoch=-1))
        if r.error_code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE,
                                E.CONCURRENT_TRANSACTIONS):
            break
        time.sleep(0.05)
    assert r.error_code == 0, r
    return r


def tasks(ids: Any) -> Tasks | None:
    return None if ids is None else {t.subtopology_id: sorted(t.partitions) for t in ids if t.partitions}


def codes(r: Any) -> list[int]:
    return [s.status_code for s in r.status or []]


def describe(wire: KafkaWire, group: str, version: int = 1, description: bool = False) -> Any:
    cls = request_class(DESCRIBE)[version]
    fields: dict[str, Any] = {"group_ids": [group], "include_authorized_operations": True}
    if version >= 1:
        fields["include_topology_description"] = description
    return wire.request(DESCRIBE, version, cls(**fields)).groups[0]


def flat(ts: Tasks | None) -> set[tuple[str, int]]:
    return {(s, p) for s, ps in (ts or {}).items() for p in ps}


def settle(wire: KafkaWire, group: str, member: str, r: Any) -> tuple[Tasks, Tasks]:
    """Heartbeat as a client does (reporting what it owns) until the group is Stable; checks on the way that
    the member never holds a task as active and standby at once. Its (active, standby) tasks at the end."""
    active, standby = tasks(r.active_tasks) or {}, tasks(r.standby_tasks) or {}
    for _ in range(5):
        r = hb(wire, group, member, r.member_epoch, active=active, standby=standby)
        assert r.error_code == 0, r
        if r.active_tasks is not None:
            active, standby = tasks(r.active_tasks) or {}, tasks(r.standby_tasks) or {}
        assert not flat(active) & flat(standby)
        if describe(wire, group).group_state == "Stable":
            return active, standby
    raise AssertionError(f"{group} did not become Stable")


ALL = {(s, p) for s in ("0", "1") for p in range(4)}
ZONE = {"zone": "z1"}


def test_two_members_tasks_handed_over_then_session_expiry_and_topology_update(tidelog_module_broker: BrokerHandle,
                                                                               wire: KafkaWire) -> None:
    create_topic(wire, "st-in", 4)
    g = "app1"
    # A joins: the internal topics are created (repartition and changelogs: one partition per task)
    a = hb(wire, g, "A", 0, process="pa", topo=topology(g, "st-in"), tags=ZONE)
    assert (a.error_code, a.member_id, a.member_epoch) == (0, "A", 1)
    assert MISSING_INTERNAL_TOPICS in codes(a) and a.acceptable_recovery_lag == 10_000
    assert not a.topology_description_required
    topics = tidelog_module_broker.state.topics
    assert [topics.get(f"{g}-{n}").partitions for n in ("rep", "store-changelog", "agg-changelog")] == [4, 4, 4]
    assert topics.get(f"{g}-store-changelog").overrides.get("cleanup.policy") == "compact"
    a = hb(wire, g, "A", 1, active={})
    assert (a.member_epoch, a.status, flat(tasks(a.active_tasks))) == (2, None, ALL)
    assert tasks(a.standby_tasks) == {}  # one process: no standby anywhere else
    # B joins from another process: the target splits the tasks, but A still owns them all
    b = hb(wire, g, "B", 0, process="pb", topo=topology(g, "st-in"), tags=ZONE)
    assert (b.member_epoch, flat(tasks(b.active_tasks))) == (3, set())
    group = tidelog_module_broker.call(lambda: tidelog_module_broker.state.groups.streams_groups.groups[g])
    target_a, target_b = group.target["A"], group.target["B"]
    actives_a = {(s, p) for s, ps in target_a.active.items() for p in ps}
    actives_b = {(s, p) for s, ps in target_b.active.items() for p in ps}
    assert actives_a | actives_b == ALL and not actives_a & actives_b and len(actives_a) == len(actives_b) == 4
    # every task has one standby, on the other process (Kafka's sticky assignor with one standby replica)
    assert {(s, p) for s, ps in target_b.standby.items() for p in ps} == actives_a
    assert {(s, p) for s, ps in target_a.standby.items() for p in ps} == actives_b
    assert flat(tasks(b.standby_tasks)) == actives_a
    # A must revoke first: it keeps its epoch and the tasks the target leaves it
    a = hb(wire, g, "A", 2, active=tasks(a.active_tasks))
    assert (a.member_epoch, flat(tasks(a.active_tasks))) == (2, actives_a)
    assert hb(wire, g, "B", 3, active={}).active_tasks is None  # nothing released yet: nothing new to send
    tasks_of_a = tasks(a.active_tasks)
    a = hb(wire, g, "A", 2, active=tasks_of_a)  # revoked: A moves to epoch 3
    # its tasks did not change (nothing sent); a standby is not placed on the process that held the task active
    # until the group saw it go
    assert (a.member_epoch, a.active_tasks, a.standby_tasks) == (3, None, None)
    a = hb(wire, g, "A", 3, active=tasks_of_a)
    assert (flat(tasks(a.active_tasks)), flat(tasks(a.standby_tasks))) == (actives_a, actives_b)
    b = hb(wire, g, "B", 3, active={})
    assert (b.member_epoch, flat(tasks(b.active_tasks))) == (3, actives_b)
    d = describe(wire, g, description=True)
    assert (d.error_code, d.group_state, d.group_epoch, d.assignment_epoch) == (0, "Stable", 3, 3)
    assert (d.assignor_name, d.topology_description_status, d.topology_description) == ("sticky", 1, None)
    assert [(s.subtopology_id, [(t.name, t.partitions) for t in s.repartition_source_topics])
            for s in d.topology.subtopologies] == [("0", []), ("1", [(f"{g}-rep", 4)])]
    assert {m.member_id: (m.member_epoch, m.process_id, flat(tasks(m.assignment.active_tasks)))
            for m in d.members} == {"A": (3, "pa", actives_a), "B": (3, "pb", actives_b)}
    assert all(tasks(m.assignment.active_tasks) == tasks(m.target_assignment.active_tasks) for m in d.members)
    # offsets are committed by member epoch (StreamsGroup.validateOffsetCommit)
    oc = request_class(8)[9]
    def commit(epoch: int) -> int:
        T = oc.OffsetCommitRequestTopic
        r = wire.request(8, 9, oc(group_id=g, generation_id_or_member_epoch=epoch, member_id="B",
                                  group_instance_id=None, retention_time_ms=-1, topics=[T(name="st-in", partitions=[
                                      T.OffsetCommitRequestPartition(partition_index=0, committed_offset=42,
                                                                     committed_leader_epoch=-1,
                                                                     committed_metadata="")])]))
        return int(r.topics[0].partitions[0].error_code)
    assert (commit(3), commit(2)) == (0, E.STALE_MEMBER_EPOCH)
    of = request_class(9)[9]
    r = wire.request(9, 9, of(groups=[of.OffsetFetchRequestGroup(group_id=g, member_id="B", member_epoch=3,
                                                                 topics=None)], require_stable=False))
    assert [(t.name, p.partition_index, p.committed_offset) for t in r.groups[0].topics for p in t.partitions] \
        == [("st-in", 0, 42)]
    # Kafka Streams' exactly-once commits: TxnOffsetCommit checked against the member (StreamsGroup
    # .validateOffsetCommit, transactional)
    producer = init_transactional(wire, "app1-txn")
    add = request_class(25)[3]
    assert wire.request(25, 3, add(transactional_id="app1-txn", producer_id=producer.producer_id,
                                   producer_epoch=producer.producer_epoch, group_id=g)).error_code == 0
    tc = request_class(28)[3]
    def txn_commit(member: str, epoch: int) -> int:
        T = tc.TxnOffsetCommitRequestTopic
        r = wire.request(28, 3, tc(transactional_id="app1-txn", group_id=g, producer_id=producer.producer_id,
                                   producer_epoch=producer.producer_epoch, generation_id=epoch, member_id=member,
                                   group_instance_id=None, topics=[T(name="st-in", partitions=[
                                       T.TxnOffsetCommitRequestPartition(partition_index=1, committed_offset=7,
                                                                         committed_leader_epoch=-1,
                                                                         committed_metadata="")])]))
        return int(r.topics[0].partitions[0].error_code)
    assert (txn_commit("B", 2), txn_commit("Z", 3), txn_commit("B", 3)) == \
        (E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID, 0)
    et = request_class(26)[3]
    assert wire.request(26, 3, et(transactional_id="app1-txn", producer_id=producer.producer_id,
                                  producer_epoch=producer.producer_epoch, committed=True)).error_code == 0
    # OffsetDelete of a source topic of the running application is refused; ConsumerGroupDescribe names the type
    od = request_class(47)[0]
    r = wire.request(47, 0, od(group_id=g, topics=[od.OffsetDeleteRequestTopic(
        name="st-in", partitions=[od.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0)])]))
    assert (r.error_code, r.topics[0].partitions[0].error_code) == (0, E.GROUP_SUBSCRIBED_TO_TOPIC)
    cgd = request_class(69)[0]
    r = wire.request(69, 0, cgd(group_ids=[g], include_authorized_operations=False)).groups[0]
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, f"Group {g} is not a consumer group.")
    # ListGroups shows the streams type, DescribeGroups does not describe it, DeleteGroups refuses a live one
    lg = request_class(16)[5]
    listed = wire.request(16, 5, lg(states_filter=[], types_filter=["streams"])).groups
    assert [(x.group_id, x.group_state, x.group_type, x.protocol_type) for x in listed] == \
        [(g, "Stable", "streams", "streams")]
    dg = request_class(15)[6]
    old = wire.request(15, 6, dg(groups=[g], include_authorized_operations=False)).groups[0]
    assert (old.error_code, old.group_state) == (E.GROUP_ID_NOT_FOUND, "Dead")
    dl = request_class(42)[2]
    assert wire.request(42, 2, dl(groups_names=[g])).results[0].error_code == E.NON_EMPTY_GROUP
    # A's session runs out on the injected clock; B, still heartbeating, takes over every task
    CLOCK.advance(30_000)
    hb(wire, g, "B", 3, active=tasks(b.active_tasks))
    CLOCK.advance(20_000)
    tidelog_module_broker.call(tidelog_module_broker.state.groups.streams_groups.check_expirations)
    assert hb(wire, g, "A", 3, active={}).error_code == E.UNKNOWN_MEMBER_ID
    b = hb(wire, g, "B", 3, active=tasks(b.active_tasks))
    # B drops its standbys of A's tasks; their active copies come once the group saw them go from B's process
    assert (b.member_epoch, flat(tasks(b.active_tasks)), flat(tasks(b.standby_tasks))) == (4, actives_b, set())
    b = hb(wire, g, "B", 4, active=tasks(b.active_tasks))
    assert (b.member_epoch, flat(tasks(b.active_tasks)), b.standby_tasks) == (4, ALL, [])
    # a topology update is refused, as Kafka refuses it; a member with an older topology epoch joins, stale
    r = hb(wire, g, "C", 0, process="pc", topo=topology(g, "st-in", epoch=2), tags=ZONE)
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, "Topology updates are not supported yet.")
    c = hb(wire, g, "C", 0, process="pc", topo=topology(g, "st-in", epoch=0), tags=ZONE)
    assert c.error_code == 0 and codes(c)[0] == STALE_TOPOLOGY and describe(wire, g).topology.epoch == 1
    assert c.status[0].status_detail == "The member's topology epoch 0 is behind the group's topology epoch 1."
    # B leaves; C (once B's tasks are released) owns them all
    left = hb(wire, g, "B", -1)
    assert (left.error_code, left.member_epoch) == (0, -1)
    # C first gives up its standbys (no process holds a task as active and standby), then takes every task
    assert flat(tasks(c.standby_tasks))
    owned_active, owned_standby = settle(wire, g, "C", c)
    assert flat(owned_active) == ALL and flat(owned_standby) == set()
    assert [m.member_id for m in describe(wire, g).members] == ["C"]


def test_errors_and_statuses(wire: KafkaWire) -> None:
    create_topic(wire, "st-err", 2)
    bad = topology("err1", "st-err")
    bad.subtopologies[0].state_changelog_topics[0].partitions = 3
    r = hb(wire, "err1", "m", 0, topo=bad)
    assert (r.error_code, r.error_message) == (E.STREAMS_INVALID_TOPOLOGY, "Changelog topic err1-store-changelog "
                                               "must have an undefined partition count, but it is set to 3.")
    regex = topology("err1", "st-err")
    regex.subtopologies[0].source_topic_regex = ["st-.*"]
    r = hb(wire, "err1", "m", 0, topo=regex)
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, "Regular expressions for source topics are not "
                                               "supported yet.")
    r = hb(wire, "err1", "m", 0, topo=None)
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, "Topology must be non-null when (re-)joining.")
    r = hb(wire, "err1", "m", 5, active={})
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, "Streams group err1 not found.")
    r = hb(wire, "err1", "m", 0, topo=topology("err1", "st-nope"), tags=ZONE)
    assert r.error_code == 0 and codes(r) == [MISSING_SOURCE_TOPICS]
    assert describe(wire, "err1").group_state == "NotReady"
    assert hb(wire, "err1", "other", 3, active={}).error_code == E.UNKNOWN_MEMBER_ID
    assert hb(wire, "err1", "m", 7, active={}).error_code == E.FENCED_MEMBER_EPOCH
    # the same topology epoch with another topology
    r = hb(wire, "err1", "m3", 0, topo=topology("err1", "st-err"))
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, "Topology updates are not supported yet.")
    # owned tasks the running topology does not have (throwIfRequestContainsInvalidTasks)
    ok = hb(wire, "own1", "o", 0, topo=topology("own1", "st-err"), tags=ZONE)
    ok = hb(wire, "own1", "o", ok.member_epoch, active={})
    r = hb(wire, "own1", "o", ok.member_epoch, active={"7": [0]})
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, "Subtopology 7 does not exist in the topology.")
    r = hb(wire, "own1", "o", ok.member_epoch, active={"0": [2]})
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, "Task 2 for subtopology 0 is invalid. Number of "
                                               "tasks for this subtopology: 2")
    # MISSING_CLIENT_TAGS (status 6) only for heartbeat v1+ clients
    create_topic(wire, "st-tags", 1)
    v1 = hb(wire, "tags1", "t1", 0, topo=topology("tags1", "st-tags"))
    v0 = hb(wire, "tags0", "t0", 0, topo=topology("tags0", "st-tags"), version=0)
    assert MISSING_CLIENT_TAGS in codes(v1) and MISSING_CLIENT_TAGS not in codes(v0)
    assert v0.acceptable_recovery_lag_legacy == 10_000
    # KIP-1331 push without a topology description plugin: UNSUPPORTED_VERSION, as Kafka without one
    u = request_class(UPDATE)[0]
    desc = u.TopologyDescription(subtopologies=[], global_stores=[])
    r = wire.request(UPDATE, 0, u(group_id="tags1", member_id="t1", topology_epoch=1, topology_description=desc))
    assert (r.error_code, r.error_message) == (E.UNSUPPORTED_VERSION, "The broker has no streams group topology "
                                               "description plugin configured.")
    # a consumer-protocol heartbeat to a streams group's id
    c = request_class(68)[0]
    r = wire.request(68, 0, c(group_id="tags1", member_id="", member_epoch=0, instance_id=None, rack_id=None,
                              rebalance_timeout_ms=1000, subscribed_topic_names=["st-tags"], server_assignor=None,
                              topic_partitions=[]))
    assert r.error_code == E.GROUP_ID_NOT_FOUND
    # a classic JoinGroup to it, and a streams heartbeat to a consumer group's id
    j = request_class(11)[9]
    r = wire.request(11, 9, j(group_id="tags1", session_timeout_ms=45000, rebalance_timeout_ms=1000, member_id="",
                              group_instance_id=None, protocol_type="consumer",
                              protocols=[j.JoinGroupRequestProtocol(name="range", metadata=b"")], reason=None))
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    cg = wire.request(68, 0, c(group_id="cg-not-streams", member_id="", member_epoch=0, instance_id=None,
                               rack_id=None, rebalance_timeout_ms=1000, subscribed_topic_names=["st-tags"],
                               server_assignor=None, topic_partitions=[]))
    assert cg.error_code == 0
    r = hb(wire, "cg-not-streams", "s", 0, topo=topology("cgs", "st-tags"))
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, "Group cg-not-streams is not a streams group.")


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced(tidelog_module_broker: BrokerHandle,
                                                                              wire: KafkaWire) -> None:
    create_topic(wire, "st-rto", 2)
    g = "rto"
    a = hb(wire, g, "A", 0, process="pa", topo=topology(g, "st-rto"), tags=ZONE)
    a = hb(wire, g, "A", a.member_epoch, active={})
    owned = tasks(a.active_tasks)
    assert len(flat(owned)) == 4
    b = hb(wire, g, "B", 0, process="pb", topo=topology(g, "st-rto"), tags=ZONE)
    a = hb(wire, g, "A", a.member_epoch, active=owned)  # asked to give two tasks up (rebalance timeout 30 s)
    assert len(flat(tasks(a.active_tasks))) == 2
    CLOCK.advance(20_000)
    hb(wire, g, "A", a.member_epoch, active=owned)  # still owns them all: its session lives on, the revocation not
    hb(wire, g, "B", b.member_epoch, active={})
    CLOCK.advance(11_000)
    tidelog_module_broker.call(tidelog_module_broker.state.groups.streams_groups.check_expirations)
    assert hb(wire, g, "A", a.member_epoch, active=owned).error_code == E.UNKNOWN_MEMBER_ID
    active, standby = settle(wire, g, "B", b)
    assert (flat(active), standby) == ({(s, p) for s in ("0", "1") for p in range(2)}, {})


def test_standbys_only_for_stateful_subtopologies(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    """Kafka's StickyTaskAssignor gives standby replicas to the tasks of subtopologies with state only."""
    create_topic(wire, "st-stateless", 2)
    g = "stateless"
    stateless = topology(g, "st-stateless")
    stateless.subtopologies[1].state_changelog_topics = []  # subtopology 1 keeps no state
    a = hb(wire, g, "A", 0, process="pa", topo=stateless, tags=ZONE)
    a = hb(wire, g, "A", a.member_epoch, active={})
    hb(wire, g, "B", 0, process="pb", topo=stateless, tags=ZONE)
    group = tidelog_module_broker.call(lambda: tidelog_module_broker.state.groups.streams_groups.groups[g])
    standbys = {(s, p) for t in group.target.values() for s, ps in t.standby.items() for p in ps}
    actives = {(s, p) for t in group.target.values() for s, ps in t.active.items() for p in ps}
    assert actives == {(s, p) for s in ("0", "1") for p in range(2)}
    assert standbys == {("0", 0), ("0", 1)}
    # the group's own streams.num.standby.replicas (GROUP config, KIP-1071) takes over at the next heartbeat
    ia = request_class(44)[1]
    R = ia.AlterConfigsResource
    r = wire.request(44, 1, ia(resources=[R(resource_type=32, resource_name=g, configs=[R.AlterableConfig(
        name="streams.num.standby.replicas", config_operation=0, value="0")])], validate_only=False))
    assert r.responses[0].error_code == 0
    before = tidelog_module_broker.call(lambda: tidelog_module_broker.state.groups.streams_groups.groups[g].group_epoch)
    a = hb(wire, g, "A", a.member_epoch, active=tasks(a.active_tasks))
    group = tidelog_module_broker.call(lambda: tidelog_module_broker.state.groups.streams_groups.groups[g])
    assert group.group_epoch == before + 1 and not any(t.standby for t in group.target.values())


def test_group_survives_restart_and_is_deleted_when_empty(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    b = tidelog_broker_factory(log_dir=tmp_path, overrides=NO_DELAY)
    with KafkaWire(b.bootstrap) as w:
        create_topic(w, "st-keep", 2)
        r = hb(w, "keep", "K", 0, process="pk", topo=topology("keep", "st-keep"))
        r = hb(w, "keep", "K", r.member_epoch, active={})
        assert flat(tasks(r.active_tasks)) == {(s, p) for s in ("0", "1") for p in range(2)}
        before = describe(w, "keep")
    b.restart()
    with KafkaWire(b.bootstrap) as w:
        after = describe(w, "keep")
        assert (after.group_epoch, after.assignment_epoch, after.topology.epoch) == \
            (before.group_epoch, before.assignment_epoch, 1)
        assert [(m.member_id, m.member_epoch, tasks(m.assignment.active_tasks)) for m in after.members] == \
            [(m.member_id, m.member_epoch, tasks(m.assignment.active_tasks)) for m in before.members]
        again = hb(w, "keep", "K", r.member_epoch, active=tasks(r.active_tasks))
        assert (again.error_code, again.member_epoch) == (0, r.member_epoch)
        assert hb(w, "keep", "K", -1).error_code == 0
        dl = request_class(42)[2]
        assert w.request(42, 2, dl(groups_names=["keep"])).results[0].error_code == 0
        assert describe(w, "keep").error_code == E.GROUP_ID_NOT_FOUND


def test_initial_rebalance_delay_on_the_injected_clock(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """streams.initial.rebalance.delay.ms: members joining a new group get ASSIGNMENT_DELAYED and no tasks until
    the delay runs out on the coordinator's timer; then one assignment covers them all."""
    clock = ManualClock()
    b = tidelog_broker_factory(log_dir=tmp_path, clock=clock, overrides={"group.streams.initial.rebalance.delay.ms": 3000})
    with KafkaWire(b.bootstrap) as w:
        create_topic(w, "st-delay", 2)
        streams = b.state.groups.streams_groups
        a = hb(w, "delay", "A", 0, process="pa", topo=topology("delay", "st-delay"))
        a = hb(w, "delay", "A", a.member_epoch, active={})  # the internal topics exist now
        assert codes(a) == [ASSIGNMENT_DELAYED] and (a.member_epoch, tasks(a.active_tasks)) == (1, None)
        b2 = hb(w, "delay", "B", 0, process="pb", topo=topology("delay", "st-delay"))
        assert codes(b2) == [ASSIGNMENT_DELAYED] and flat(tasks(b2.active_tasks)) == set()
        assert describe(w, "delay").group_state == "Assigning"
        clock.advance(3000)
        b.call(streams.check_expirations)
        a = hb(w, "delay", "A", a.member_epoch, active={})
        b2 = hb(w, "delay", "B", b2.member_epoch, active={})
        assert a.status is None and a.member_epoch == b2.member_epoch == describe(w, "delay").assignment_epoch
        assert flat(tasks(a.active_tasks)) | flat(tasks(b2.active_tasks)) == \
            {(s, p) for s in ("0", "1") for p in range(2)}
        assert len(flat(tasks(a.active_tasks))) == len(flat(tasks(b2.active_tasks))) == 2


def test_streams_version_0_turns_the_protocol_off(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """KafkaApis.isStreamsGroupProtocolEnabled: with `streams.version` at 0 (a downgrade through UpdateFeatures)
    the streams APIs stay advertised and answer UNSUPPORTED_VERSION; raising it again serves them."""
    b = tidelog_broker_factory(log_dir=tmp_path, overrides=NO_DELAY)
    with KafkaWire(b.bootstrap) as w:
        create_topic(w, "st-feat", 1)
        cls = request_class(57)[1]

        def set_level(level: int) -> int:
            key = cls.FeatureUpdateKey(feature="streams.version", max_version_level=level, upgrade_type=2 if level == 0 else 1,
                                       allow_downgrade=level == 0)
            r = w.request(57, 1, cls(timeout_ms=30_000, feature_updates=[key], validate_only=False))
            return int(r.error_code or r.results[0].error_code)

        assert set_level(0) == 0
        assert hb(w, "feat", "f", 0, topo=topology("feat", "st-feat")).error_code == E.UNSUPPORTED_VERSION
        assert describe(w, "feat").error_code == E.UNSUPPORTED_VERSION
        assert set_level(1) == 0
        assert hb(w, "feat", "f", 0, topo=topology("feat", "st-feat")).error_code == 0
        v0 = describe(w, "feat", version=0)  # v0 carries none of v1's fields
        assert (v0.error_code, v0.group_id, [m.member_id for m in v0.members]) == (0, "feat", ["f"])


def test_a_topology_cannot_make_the_broker_create_more_partitions_than_one_create_topics_request(
        tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    """The internal topics a heartbeat has the broker create are capped as one CreateTopics request is (Kafka's
    MAX_PARTITIONS_PER_BATCH): a repartition topic asking for 2^31-1 partitions is not created, and the broker
    goes on answering."""
    create_topic(wire, "st-huge", 1)
    huge = topology("huge1", "st-huge")
    huge.subtopologies[1].repartition_source_topics[0].partitions = 2**31 - 1
    r = hb(wire, "huge1", "m", 0, topo=huge, tags=ZONE)
    assert r.error_code == 0
    assert hb(wire, "huge1", "m", r.member_epoch, active={}).error_code == 0  # the broker still answers
    assert tidelog_module_broker.state.topics.get("huge1-rep") is None
    assert describe(wire, "huge1").group_state == "NotReady"


def test_describe_v1_appends_its_fields_untagged_after_authorized_operations(wire: KafkaWire) -> None:
    """StreamsGroupDescribeResponse v1's additions, byte by byte at the end of a one-group answer: after
    AuthorizedOperations come TopologyDescription (a nullable struct: -1 for null), TopologyDescriptionStatus
    (int8) and AssignorName (compact string), none of them tagged (apache/kafka PR #22920's diff of the JSON:
    TopologyDescription nullable at 1+, TopologyDescriptionStatus int8 at 1+ with default 0; Kafka's streams
    cross-version system test: v0 has no AssignorName), then the group's and the response's empty tagged
    fields. Without a topology description plugin a requested description is NOT_STORED (1)."""
    create_topic(wire, "layout-in", 1)
    assert hb(wire, "layout-app", "m1", 0, topo=topology("layout-app", "layout-in"), tags=ZONE).error_code == 0
    tail = struct.pack(">i", -(2**31)) + b"\xff"  # authorized operations not asked for; no description
    for group, include, expected in [
        ("layout-app", True, tail + b"\x01" + b"\x07sticky" + b"\x00\x00"),  # NOT_STORED, the sticky assignor
        ("layout-app", False, tail + b"\x00" + b"\x07sticky" + b"\x00\x00"),  # NOT_REQUESTED
        ("no-such-app", True, tail + b"\x00" + b"\x00" + b"\x00\x00"),  # an error: both left at their defaults
    ]:
        cls = request_class(DESCRIBE)[1]
        wire.send(DESCRIBE, 1, cls(group_ids=[group], include_authorized_operations=False,
                                   include_topology_description=include))
        frame = wire.read_frame()
        assert frame.endswith(expected), (group, include, frame[-16:].hex())
        # v0 ends at AuthorizedOperations
        wire.send(DESCRIBE, 0, request_class(DESCRIBE)[0](group_ids=[group], include_authorized_operations=False))
        assert wire.read_frame().endswith(struct.pack(">i", -(2**31)) + b"\x00\x00")
