"""The Java consumer (3.9.1) fetches through an incremental fetch session (KIP-227): while it consumes, the
broker's FetchSessionCache holds its session, whose epoch keeps advancing, and the Prometheus endpoint shows
Kafka's FetchSessionCache metrics."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from tests.groups.conftest import GROUP_OVERRIDES, Member, java_cmd, produce
from tidelog.testing import BrokerHandle

pytestmark = pytest.mark.java


def scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    wanted = ("tidelog_NumIncrementalFetchSessions ", "tidelog_NumIncrementalFetchPartitionsCached ",
              "tidelog_IncrementalFetchSessionEvictions_total ")
    return {line.split()[0]: float(line.split()[1]) for line in text.splitlines() if line.startswith(wanted)}


def test_java_consumer_uses_an_incremental_fetch_session(java_classpath: str, members: list[Member],
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    topic, group, partitions = "java-sessions", "java-sessions", 5
    b = tidelog_broker_factory(overrides=GROUP_OVERRIDES)
    b.state.metrics.start(port=0)
    b.create_topic(topic, partitions)
    produce(b, topic, 0, 50, partitions)
    member = Member(java_cmd(java_classpath, "member", b.bootstrap, topic, group, "300",
                             "fetch.max.wait.ms=100"), "java")
    members.append(member)
    member.wait_for(lambda m: len(m.records()) >= 50, "the first 50 records")
    produce(b, topic, 50, 50, partitions)
    member.wait_for(lambda m: len(m.records()) >= 100, "100 records")
    cache: Any = b.state.fetch_sessions
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        sessions = b.call(lambda: [(s.size, s.epoch) for s in cache.sessions.values()])
        if any(size == partitions and epoch > 10 for size, epoch in sessions):
            break
        time.sleep(0.2)
    assert any(size == partitions and epoch > 10 for size, epoch in sessions), sessions
    metrics = scrape(b.state.metrics.wait_http_port())
    assert metrics["tidelog_NumIncrementalFetchSessions"] >= 1
    assert metrics["tidelog_NumIncrementalFetchPartitionsCached"] >= partitions
    assert sorted(v for _, _, v in member.records()) == sorted(f"v-{i}" for i in range(100))
    member.close()
