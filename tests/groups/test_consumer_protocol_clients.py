"""KIP-848 (`group.protocol=consumer`) with real clients: librdkafka (confluent-kafka) and the Java client
3.9.1. Two members split a topic, a third joins and one leaves while the others keep consuming, every record
is seen exactly once, and after a broker restart a new member resumes exactly at the committed offsets."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.groups.conftest import WAIT_S, Member, java_cmd, produce, python_member
from tidelog.testing import BrokerHandle

PARTITIONS = 6
# a short heartbeat interval so reassignments settle in seconds (Kafka's default is 5 s)
OVERRIDES = {"group.consumer.heartbeat.interval.ms": "500", "group.initial.rebalance.delay.ms": "0"}


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = WAIT_S, members: list[Member] = (),
               broker: object = None, group: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{situation(members, broker, group)}")
        time.sleep(0.2)


def situation(members: list[Member], broker: object, group: str) -> str:
    """What each member last said and how the broker sees the group: the story of a timeout."""
    lines = []
    for i, m in enumerate(members, 1):
        lines.append(f"m{i}: exit={m.proc.poll()} assignment={m.assignment} records={len(m.records())} "
                     f"last={[{k: v for k, v in e.items() if k != 't'} for e in m.events[-4:]]} "
                     f"stderr={m.stderr()[-600:]!r}")
    if broker is not None and group:
        def view() -> str:
            cg = broker.state.groups.consumer_groups  # type: ignore[attr-defined]
            g = cg.groups.get(group)
            if g is None:
                return "no such consumer group"
            members_view = {mid[:8]: (m.member_epoch, m.state.value, {str(t)[:8]: sorted(p) for t, p in
                                                                      m.assigned.items()})
                            for mid, m in g.members.items()}
            return f"group epoch {g.group_epoch}, assignment epoch {g.assignment_epoch}, members {members_view}"
        try:
            lines.append(broker.call(view))  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - a diagnostic must not hide the timeout
            lines.append(f"broker view failed: {exc!r}")
    return "\n".join(lines)


def values(members: list[Member]) -> list[str]:
    return [v for m in members for _, _, v in m.records()]


def distinct(members: list[Member]) -> int:
    """How many different records `members` have read (a record read twice counts once)."""
    return len(set(values(members)))


def split(members: list[Member]) -> bool:
    """Every partition owned by exactly one of `members`, each owning some."""
    owned = [m.assignment or [] for m in members]
    flat = [p for ps in owned for p in ps]
    return all(owned) and sorted(flat) == list(range(PARTITIONS))


def rereads_not_from_start(members: list[Member]) -> list[str]:
    """Every later copy of a record read twice, unless the member that read it again had started that
    partition at offset 0. The Java client 3.9 resets a partition handed to it while its committed-offset
    fetch for earlier ones is in flight to auto.offset.reset (KAFKA-17674, fixed in the 4.0 client), so it
    re-reads from the log start although the broker holds the right committed offset. A broker that answered
    a stale committed offset instead would have a member start mid-partition, which this still reports."""
    copies: dict[tuple[int, int], list[tuple[float, int]]] = {}  # (p, o) -> [(seen at, stint start)]
    for m in members:
        last: dict[int, int] = {}
        stint: dict[int, int] = {}
        for t, p, o, _ in m.timed_records():
            if last.get(p, -2) + 1 != o:  # a new run of this partition: a new position
                stint[p] = o
            last[p] = o
            copies.setdefault((p, o), []).append((t, stint[p]))
    return [f"partition {p} offset {o} read again from a position at {start}"
            for (p, o), seen in copies.items() for _, start in sorted(seen)[1:] if start != 0]


def run_scenario(tidelog_broker_factory: Callable[..., BrokerHandle], tmp_path: Path,
                 start: Callable[[str, str, str], Member], started: list[Member], exactly_once: bool = True) -> None:
    topic, group = "kip848", "kip848-group"
    b = tidelog_broker_factory(log_dir=tmp_path, overrides=OVERRIDES)
    b.create_topic(topic, PARTITIONS)
    produce(b, topic, 0, 120, PARTITIONS)
    m1, m2 = start(b.bootstrap, topic, group), start(b.bootstrap, topic, group)
    started += [m1, m2]
    live = [m1, m2]
    wait_until(lambda: split([m1, m2]) and distinct([m1, m2]) >= 120, "two members splitting the topic",
               members=live, broker=b, group=group)
    cg = b.state.groups.consumer_groups
    assert b.call(lambda: cg.groups[group].state.value) in ("Stable", "Reconciling")
    m3 = start(b.bootstrap, topic, group)
    started.append(m3)
    live.append(m3)
    produce(b, topic, 120, 120, PARTITIONS)
    # the uniform assignor gives each of three members two partitions
    wait_until(lambda: split([m1, m2, m3]) and all(len(m.assignment or []) == 2 for m in (m1, m2, m3))
               and distinct([m1, m2, m3]) >= 240, "a third member taking its share", members=live, broker=b,
               group=group)
    m1.close()  # leaves (epoch -1); the others keep running and take over its partitions
    produce(b, topic, 240, 120, PARTITIONS)
    wait_until(lambda: split([m2, m3]) and distinct([m1, m2, m3]) >= 360, "the survivors taking over",
               members=live, broker=b, group=group)
    m2.close()
    m3.close()
    seen = values([m1, m2, m3])
    if exactly_once:
        assert sorted(seen) == sorted(f"v-{i}" for i in range(360)), "every record exactly once"
    else:
        assert set(seen) == {f"v-{i}" for i in range(360)}, "every record at least once"
        assert rereads_not_from_start([m1, m2, m3]) == []
    committed = b.call(lambda: {tp.partition: om.offset for tp, om in b.state.groups.groups[group].offsets.items()})
    assert committed == dict.fromkeys(range(PARTITIONS), 60)
    b.restart()
    cg = b.state.groups.consumer_groups
    assert b.call(lambda: cg.groups[group].state.value) == "Empty"
    assert b.call(lambda: cg.groups[group].group_epoch) >= 4  # joins and leaves moved the epoch
    produce(b, topic, 360, 60, PARTITIONS)
    m4 = start(b.bootstrap, topic, group)
    started.append(m4)
    wait_until(lambda: len(m4.records()) >= 60, "the new member reading from the committed offsets")
    time.sleep(1)
    m4.close()
    assert sorted(v for _, _, v in m4.records()) == sorted(f"v-{i}" for i in range(360, 420))


def test_librdkafka_consumer_protocol(tmp_path: Path, members: list[Member],
                                      tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    import confluent_kafka

    assert confluent_kafka.libversion()[1] >= 0x020A0000  # KIP-848 GA in librdkafka 2.10

    def start(bootstrap: str, topic: str, group: str) -> Member:
        return Member(python_member("confluent-consumer-protocol", bootstrap, topic, group), "librdkafka")

    run_scenario(tidelog_broker_factory, tmp_path, start, members)


@pytest.mark.java
def test_java_consumer_protocol(tmp_path: Path, java_classpath: str, members: list[Member],
                                tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    def start(bootstrap: str, topic: str, group: str) -> Member:
        return Member(java_cmd(java_classpath, "member", bootstrap, topic, group, "400", "group.protocol=consumer"),
                      "java")

    # the Java client 3.9 may re-read a partition from its start on a hand-over (KAFKA-17674): see
    # rereads_not_from_start; librdkafka above is held to exactly once
    run_scenario(tidelog_broker_factory, tmp_path, start, members, exactly_once=False)


def test_librdkafka_regex_subscription_is_resolved_by_the_broker(tidelog_module_broker: BrokerHandle) -> None:
    """librdkafka sends a `^...` subscription as SubscribedTopicRegex (KIP-848); the broker resolves it."""
    from confluent_kafka import Consumer

    bootstrap = tidelog_module_broker.bootstrap
    for name in ("rxl-a", "rxl-b", "zz-rxl"):
        tidelog_module_broker.create_topic(name, 2)
        produce(tidelog_module_broker, name, 0, 10, 2)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rxl-group", "group.protocol": "consumer",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["^rxl-.*"])
    seen: list[tuple[str, str]] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while len(seen) < 20 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                seen.append((msg.topic(), msg.value().decode()))
    finally:
        consumer.close()
    assert sorted(seen) == sorted((t, f"v-{i}") for t in ("rxl-a", "rxl-b") for i in range(10))


@pytest.mark.parametrize("classic_client", ["kafka-python", "confluent", "java"])
def test_classic_member_joins_a_consumer_group(classic_client: str, tidelog_module_broker: BrokerHandle, members: list[Member],
                                               request: pytest.FixtureRequest) -> None:
    """Kafka 4's mixed groups: a classic-protocol consumer joining a live KIP-848 group becomes one of its
    members; the server-side assignor splits the partitions between both kinds, and when the classic member
    leaves, the consumer-protocol member takes everything back. Every record is read once."""
    bootstrap = tidelog_module_broker.bootstrap
    topic, group = f"mixed-{classic_client}", f"mixed-{classic_client}-group"
    tidelog_module_broker.create_topic(topic, PARTITIONS)
    produce(tidelog_module_broker, topic, 0, 60, PARTITIONS)
    modern = Member(python_member("confluent-consumer-protocol", bootstrap, topic, group), "consumer-protocol")
    members.append(modern)
    wait_until(lambda: modern.assignment == list(range(PARTITIONS)) and len(modern.records()) >= 60,
               "the consumer-protocol member owning everything")
    if classic_client == "java":  # the Java client's classic protocol (range + cooperative-sticky offered)
        classpath = request.getfixturevalue("java_classpath")
        classic = Member(java_cmd(classpath, "member", bootstrap, topic, group, "400"), "java-classic")
    else:
        classic = Member(python_member(classic_client, bootstrap, topic, group), classic_client)
    members.append(classic)
    wait_until(lambda: split([modern, classic]) and len(modern.assignment or []) == 3, "a 3/3 split")
    produce(tidelog_module_broker, topic, 60, 60, PARTITIONS)
    wait_until(lambda: len(values([modern, classic])) >= 120, "records 60..119")
    cg = tidelog_module_broker.state.groups.consumer_groups
    kinds = tidelog_module_broker.call(
        lambda: sorted(m.classic is not None for m in cg.groups[group].members.values()))
    assert kinds == [False, True]
    classic.close()  # LeaveGroup
    produce(tidelog_module_broker, topic, 120, 60, PARTITIONS)
    wait_until(lambda: modern.assignment == list(range(PARTITIONS)) and len(values([modern, classic])) >= 180,
               "the consumer-protocol member taking everything back")
    modern.close()
    assert sorted(values([modern, classic])) == sorted(f"v-{i}" for i in range(180))


def test_live_classic_group_is_upgraded_when_a_consumer_protocol_member_joins(tidelog_module_broker: BrokerHandle,
                                                                             members: list[Member]) -> None:
    """convertToConsumerGroup: kafka-python classic members own the partitions; a librdkafka member with
    `group.protocol=consumer` joins, the group becomes a consumer group keeping the classic members and their
    partitions, then the partitions are split between them. Every record is read once."""
    bootstrap = tidelog_module_broker.bootstrap
    topic, group = "upgrade", "upgrade-group"
    tidelog_module_broker.create_topic(topic, PARTITIONS)
    produce(tidelog_module_broker, topic, 0, 60, PARTITIONS)
    classic = Member(python_member("kafka-python", bootstrap, topic, group), "classic")
    members.append(classic)
    wait_until(lambda: classic.assignment == list(range(PARTITIONS)) and len(classic.records()) >= 60,
               "the classic member owning everything")
    state = tidelog_module_broker.state
    assert not tidelog_module_broker.call(lambda: state.groups.consumer_groups.is_consumer_group(group))
    modern = Member(python_member("confluent-consumer-protocol", bootstrap, topic, group), "consumer-protocol")
    members.append(modern)
    wait_until(lambda: split([modern, classic]) and len(modern.assignment or []) == 3, "a 3/3 split")
    assert tidelog_module_broker.call(lambda: state.groups.consumer_groups.is_consumer_group(group))
    produce(tidelog_module_broker, topic, 60, 60, PARTITIONS)
    wait_until(lambda: len(values([modern, classic])) >= 120, "records 60..119")
    classic.close()
    modern.close()
    assert sorted(values([modern, classic])) == sorted(f"v-{i}" for i in range(120))


def test_consumer_group_downgrades_when_its_last_consumer_protocol_member_leaves(tidelog_module_broker: BrokerHandle,
                                                                                 members: list[Member]) -> None:
    """convertToClassicGroup: a librdkafka `group.protocol=consumer` member and a kafka-python classic member
    share a consumer group; when the consumer-protocol member leaves, the group becomes a classic group again
    and the classic member, after one classic rebalance, owns every partition. Every record is read once."""
    bootstrap = tidelog_module_broker.bootstrap
    topic, group = "downgrade", "downgrade-group"
    tidelog_module_broker.create_topic(topic, PARTITIONS)
    produce(tidelog_module_broker, topic, 0, 60, PARTITIONS)
    modern = Member(python_member("confluent-consumer-protocol", bootstrap, topic, group), "consumer-protocol")
    members.append(modern)
    wait_until(lambda: modern.assignment == list(range(PARTITIONS)) and len(modern.records()) >= 60,
               "the consumer-protocol member owning everything")
    classic = Member(python_member("kafka-python", bootstrap, topic, group), "classic")
    members.append(classic)
    wait_until(lambda: split([modern, classic]), "a split between both kinds")
    modern.close()
    state = tidelog_module_broker.state
    wait_until(lambda: not tidelog_module_broker.call(
        lambda: state.groups.consumer_groups.is_consumer_group(group)), "the downgrade")
    produce(tidelog_module_broker, topic, 60, 60, PARTITIONS)
    wait_until(lambda: classic.assignment == list(range(PARTITIONS)) and len(values([modern, classic])) >= 120,
               f"the classic member owning everything in the classic group ({classic.name})")
    classic_group = tidelog_module_broker.call(lambda: state.groups.groups[group])
    assert classic_group.protocol_type == "consumer" and classic_group.state.value == "Stable"
    classic.close()
    assert sorted(values([modern, classic])) == sorted(f"v-{i}" for i in range(120))


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_assign_only_consumer_commits_again_and_again(tidelog_module_broker: BrokerHandle, protocol: str) -> None:
    """A consumer that never subscribes commits with member epoch / generation -1 and, under librdkafka's
    consumer protocol, a member id of its own. Kafka accepts every such commit while the group is empty
    (ClassicGroup/ConsumerGroup.validateOffsetCommit); tidelog answered UNKNOWN_MEMBER_ID from the second
    on (confluent-kafka's test_consumer_topicpartition_metadata)."""
    from confluent_kafka import Consumer, TopicPartition

    bootstrap = tidelog_module_broker.bootstrap
    tidelog_module_broker.create_topic(f"assign-only-{protocol}", 1)
    group = f"assign-only-{protocol}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                         "enable.auto.commit": False})
    try:
        for offset in (1, 2, 5):
            committed = consumer.commit(offsets=[TopicPartition(f"assign-only-{protocol}", 0, offset)],
                                        asynchronous=False)
            assert committed is not None and committed[0].error is None and committed[0].offset == offset
        fetched = consumer.committed([TopicPartition(f"assign-only-{protocol}", 0)], timeout=30)
        assert fetched[0].offset == 5
    finally:
        consumer.close()


def test_transaction_sends_the_offsets_of_a_consumer_protocol_member(tidelog_module_broker: BrokerHandle) -> None:
    """send_offsets_to_transaction with a KIP-848 member's group metadata (its member id and epoch): the
    TxnOffsetCommit is validated by the consumer group (ConsumerGroup.validateOffsetCommit), not refused as
    an unknown classic member (confluent-kafka's test_send_offsets_committed_transaction, consumer protocol)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    bootstrap = tidelog_module_broker.bootstrap
    tidelog_module_broker.create_topic("eos-in", 1)
    tidelog_module_broker.create_topic("eos-out", 1)
    produce(tidelog_module_broker, "eos-in", 0, 10, 1)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-848", "group.protocol": "consumer",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "eos-848-tx"})
    try:
        consumer.subscribe(["eos-in"])
        seen = 0
        deadline = time.monotonic() + WAIT_S
        while seen < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                seen += 1
        assert seen == 10
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("eos-out", b"derived")
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        assert consumer.committed([TopicPartition("eos-in", 0)], timeout=30)[0].offset == 10
    finally:
        consumer.close()
