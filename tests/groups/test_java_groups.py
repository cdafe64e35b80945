"""Java client (3.9.1) against the group coordinator: an idempotent producer with default settings, consumers
that commit and resume exactly at the committed offsets (also across a broker restart), and AdminClient
listing/describing/deleting groups while kcat runs as a balanced consumer."""

from __future__ import annotations

import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.groups.conftest import GROUP_OVERRIDES, Member, java_cmd, produce, run_java
from tidelog.protocol.record_batch import iter_batches
from tidelog.storage import TopicPartition
from tidelog.testing import BrokerHandle

pytestmark = pytest.mark.java


def consumed(lines: list[dict[str, Any]]) -> list[tuple[int, int, str]]:
    return [(e["p"], e["o"], e["v"]) for e in lines if "v" in e]


def test_java_consumers_resume_at_committed_offsets_across_restart(tmp_path: Path, java_classpath: str,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    topic, group, partitions = "resume", "java-resume", 3
    b = tidelog_broker_factory(log_dir=tmp_path, overrides=GROUP_OVERRIDES)
    b.create_topic(topic, partitions)
    # default producer settings: enable.idempotence=true, acks=all (InitProducerId, sequence numbers)
    assert run_java(java_classpath, "produce", b.bootstrap, topic, str(partitions), "0", "30")[-1] == \
        {"acked": 30, "error": None}
    for p in range(partitions):
        data = b.call(lambda p=p: b.state.topics.log(TopicPartition(topic, p)).read(0, 1 << 20, 1 << 62, True))
        headers = [h for _, h in iter_batches(data)]
        assert headers and all(h.producer_id >= 0 and h.base_sequence >= 0 for h in headers)
    first = consumed(run_java(java_classpath, "consume", b.bootstrap, topic, group, "10"))
    second = consumed(run_java(java_classpath, "consume", b.bootstrap, topic, group, "10"))
    before = b.call(lambda: {tp: om.offset for tp, om in b.state.groups.groups[group].offsets.items()})
    b.restart()
    after = b.call(lambda: {tp: om.offset for tp, om in b.state.groups.groups[group].offsets.items()})
    assert after == before
    described = run_java(java_classpath, "groups", b.bootstrap, group)
    offsets = {e["p"]: (e["offset"], e["metadata"]) for e in described if "offset_topic" in e}
    assert {p: o for p, (o, _) in offsets.items()} == {tp.partition: o for tp, o in before.items()}
    assert all(meta == f"java-meta-{o - 1}" for o, meta in offsets.values())  # committed metadata round-trips
    third = consumed(run_java(java_classpath, "consume", b.bootstrap, topic, group, "10"))
    everything = first + second + third
    assert sorted(v for _, _, v in everything) == sorted(f"v-{i}" for i in range(30))
    # each consumer starts every partition exactly where the previous one committed
    for earlier, later in ((first, second), (first + second, third)):
        for p in range(partitions):
            done = [o for q, o, _ in earlier if q == p]
            nxt = [o for q, o, _ in later if q == p]
            if nxt:
                assert min(nxt) == (max(done) + 1 if done else 0)


def test_kcat_balanced_consumer_and_java_admin(tidelog_module_broker: BrokerHandle, java_classpath: str) -> None:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.skip("kcat is not installed")
    bootstrap, topic, group = tidelog_module_broker.bootstrap, "kcat-balanced", "kcat-group"
    tidelog_module_broker.create_topic(topic, 6)
    produce(tidelog_module_broker, topic, 0, 60, 6)
    # -u: unbuffered output, so records show up while kcat keeps running as a group member
    proc = subprocess.Popen([kcat, "-b", bootstrap, "-G", group, "-u", "-o", "beginning", "-f", "%p %o %s\n",
                             "-X", "auto.commit.interval.ms=200", topic],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines_q: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines_q.put(line)

    threading.Thread(target=pump, daemon=True).start()
    try:
        seen: list[str] = []
        deadline = time.monotonic() + 180
        while len(seen) < 60 and time.monotonic() < deadline:
            try:
                seen.append(lines_q.get(timeout=1).split()[2])
            except queue.Empty:
                continue
        assert sorted(seen) == sorted(f"v-{i}" for i in range(60))
        lines = run_java(java_classpath, "groups", bootstrap, group)
        listed = {e["listed"]: e for e in lines if "listed" in e}
        assert group in listed and listed[group]["simple"] is False
        desc = next(e for e in lines if "group" in e)
        assert desc["state"] == "Stable" and desc["coordinator"] == tidelog_module_broker.state.node_id
        assert len(desc["members"]) == 1 and desc["members"][0]["partitions"] == list(range(6))
        assert desc["members"][0]["client"] == "rdkafka" and desc["assignor"] in ("range", "roundrobin")
        # a group with a member cannot be deleted
        assert run_java(java_classpath, "delete", bootstrap, group)[-1] == {"error": "GroupNotEmptyException"}
    finally:
        proc.terminate()  # kcat closes its consumer: final commit + LeaveGroup
        proc.wait(timeout=60)
    lines = run_java(java_classpath, "groups", bootstrap, group)
    desc = next(e for e in lines if "group" in e)
    assert desc["state"] == "Empty" and desc["members"] == []
    offsets = {e["p"]: e["offset"] for e in lines if "offset_topic" in e}
    assert offsets == dict.fromkeys(range(6), 10)
    assert run_java(java_classpath, "delete", bootstrap, group)[-1] == {"deleted": group}
    lines = run_java(java_classpath, "groups", bootstrap, group)
    assert group not in {e["listed"] for e in lines if "listed" in e}
    assert next(e for e in lines if "group" in e)["state"] == "Dead"


def test_java_static_member_restart_keeps_assignment_without_rebalance(tidelog_module_broker: BrokerHandle, members: list[Member],
                                                                       java_classpath: str) -> None:
    bootstrap, topic, group = tidelog_module_broker.bootstrap, "static-topic", "java-static"
    tidelog_module_broker.create_topic(topic, 3)

    def start() -> Member:
        m = Member(java_cmd(java_classpath, "member", bootstrap, topic, group, "300", "group.instance.id=inst-1",
                            "session.timeout.ms=60000"), "java-static")
        members.append(m)
        m.wait_for(lambda m: m.assignment == [0, 1, 2], "the static member's assignment")
        return m

    def state() -> tuple[str, int, list[str], dict[str, str]]:
        g = tidelog_module_broker.state.groups.groups[group]
        return g.state.value, g.generation_id, list(g.members), dict(g.static_members)

    first = start()
    status, generation, member_ids, static = tidelog_module_broker.call(state)
    assert status == "Stable" and len(member_ids) == 1 and static == {"inst-1": member_ids[0]}
    first.close()  # a static member does not send LeaveGroup: the group keeps it until its session times out
    assert tidelog_module_broker.call(state) == (status, generation, member_ids, static)
    second = start()
    status2, generation2, member_ids2, static2 = tidelog_module_broker.call(state)
    assert (status2, generation2) == ("Stable", generation), "rejoin of a known static member: no rebalance"
    assert len(member_ids2) == 1 and member_ids2 != member_ids and static2 == {"inst-1": member_ids2[0]}
    second.close()
