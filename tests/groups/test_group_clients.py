"""Two members of one group (same client library each time) split a 6-partition topic, see every record exactly
once, and when one leaves (LeaveGroup) or is killed (session timeout) the other takes over its partitions and
continues from the committed offsets. Java, kafka-python, confluent-kafka (librdkafka) and aiokafka."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from tests.groups.conftest import Member, java_cmd, produce, python_member
from tidelog.testing import BrokerHandle

PARTITIONS = 6
ALL = list(range(PARTITIONS))
BATCH = 60
_counter = itertools.count()


def start(kind: str, bootstrap: str, topic: str, group: str, request: pytest.FixtureRequest) -> Member:
    if kind.startswith("java"):
        classpath = request.getfixturevalue("java_classpath")
        extra = []
        if kind == "java-cooperative":
            # incremental (KIP-429) rebalancing: revocations happen in a follow-up rebalance
            extra = ["partition.assignment.strategy="
                     "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"]
        cmd = java_cmd(classpath, "member", bootstrap, topic, group, "400", "session.timeout.ms=6000",
                       "heartbeat.interval.ms=1000", "client.id=member-java", *extra)
    else:
        cmd = python_member(kind, bootstrap, topic, group)
    return Member(cmd, f"{kind}-{group}")


def values(records: list[tuple[int, int, str]]) -> list[str]:
    return [v for _, _, v in records]


@pytest.mark.parametrize("kind,departure", [
    ("kafka-python", "leave"), ("kafka-python", "kill"),
    ("confluent", "leave"), ("confluent", "kill"),
    ("aiokafka", "leave"), ("aiokafka", "kill"),
    ("java", "leave"), ("java", "kill"), ("java-cooperative", "leave"),
])
def test_two_members_split_and_take_over(kind: str, departure: str, tidelog_module_broker: BrokerHandle, members: list[Member],
                                         request: pytest.FixtureRequest) -> None:
    n = next(_counter)
    topic, group = f"split-{n}", f"group-{kind}-{departure}-{n}"
    bootstrap = tidelog_module_broker.bootstrap
    tidelog_module_broker.create_topic(topic, PARTITIONS)

    a = start(kind, bootstrap, topic, group, request)
    members.append(a)
    a.wait_for(lambda m: m.assignment == ALL, "member a owning every partition")
    b = start(kind, bootstrap, topic, group, request)
    members.append(b)

    def split(_: Member) -> bool:
        pa, pb = a.assignment or [], b.assignment or []
        return bool(pa) and bool(pb) and sorted(pa + pb) == ALL

    b.wait_for(split, "the two members splitting the partitions")
    a.wait_for(split, "the two members splitting the partitions")
    a_parts, b_parts = set(a.assignment or []), set(b.assignment or [])

    produce(tidelog_module_broker, topic, 0, BATCH, PARTITIONS)
    expected = {f"v-{i}" for i in range(BATCH)}
    b.wait_for(lambda _: len(a.records()) + len(b.records()) >= BATCH, "all records of the first batch")
    a.wait_for(lambda m: m.committed() == len(m.records()), "a committing what it consumed")
    b.wait_for(lambda m: m.committed() == len(m.records()), "b committing what it consumed")
    seen = values(a.records()) + values(b.records())
    assert Counter(seen) == Counter(expected), "every record exactly once across the two members"
    assert {p for p, _, _ in a.records()} <= a_parts and {p for p, _, _ in b.records()} <= b_parts
    assert a.records() and b.records()

    before = len(b.records())
    assigned_before = b.assignment_events()
    if departure == "leave":
        a.close()
    else:
        a.kill()
    b.wait_for(lambda m: m.assignment_events() > assigned_before and m.assignment == ALL,
               "the survivor taking over every partition")

    produce(tidelog_module_broker, topic, BATCH, BATCH, PARTITIONS)
    b.wait_for(lambda m: len(m.records()) >= before + BATCH, "the second batch")
    after = b.records()[before:]
    # continues exactly from the committed offsets: nothing re-delivered, nothing skipped
    assert Counter(values(after)) == Counter(f"v-{i}" for i in range(BATCH, 2 * BATCH))
    assert {p for p, _, _ in after} == set(ALL)
    b.close()
