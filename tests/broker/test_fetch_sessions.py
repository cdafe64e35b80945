"""Incremental fetch sessions (KIP-227) over a real socket: creation, incremental answers carrying only
partitions with news, forgotten topics, topic ids, errors, eviction, close, and the FetchSessionCache
metrics on the Prometheus endpoint; then real consumers (kafka-python) fetching through sessions."""

from __future__ import annotations

import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from broker_testlib import FETCH, batch, produce, topic_id

from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR = 70, 71, 106


pytestmark = pytest.mark.tidelog(overrides={"max.incremental.fetch.session.cache.slots": "3"})


@pytest.fixture(scope="module", autouse=True)
def metrics_endpoint(tidelog_module_broker: BrokerHandle) -> None:
    tidelog_module_broker.state.metrics.start(port=0)


@pytest.fixture
def client(tidelog_module_broker: BrokerHandle) -> Iterator[KafkaWire]:
    with KafkaWire(tidelog_module_broker.bootstrap, timeout=120) as c:
        yield c


def request(partitions: list[tuple[Any, int, int]], *, version: int = 12, session_id: int = 0,
            epoch: int = 0, forgotten: list[tuple[Any, list[int]]] | None = None) -> Any:
    cls = request_class(FETCH)[version]
    T = cls.FetchTopic
    P = T.FetchPartition
    F = cls.ForgottenTopic
    topics: list[Any] = []
    for key, partition, offset in partitions:
        if not topics or topics[-1][0] != key:
            topics.append((key, []))
        topics[-1][1].append(P(partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                               last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20))
    by_id = version >= 13
    return cls(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=50 << 20, isolation_level=0,
               session_id=session_id, session_epoch=epoch,
               topics=[T(topic_id=k, partitions=ps) if by_id else T(topic=k, partitions=ps) for k, ps in topics],
               forgotten_topics_data=[F(topic_id=k, partitions=ps) if by_id else F(topic=k, partitions=ps)
                                      for k, ps in forgotten or []], rack_id="")


def fetch(client: KafkaWire, parts: list[tuple[Any, int, int]], version: int = 12, **kw: Any) -> Any:
    return client.request(FETCH, version, request(parts, version=version, **kw))


def answered(response: Any, by_id: bool = False) -> dict[tuple[Any, int], Any]:
    return {(t.topic_id if by_id else t.topic, p.partition_index): p
            for t in response.responses for p in t.partitions}


def metric(broker: BrokerHandle, name: str) -> float:
    port = broker.state.metrics.wait_http_port()
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not exported")


def test_incremental_fetch_answers_only_partitions_with_news(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("inc", 3)
    produce(client, "inc", batch(2), partition=0)
    full = fetch(client, [("inc", 0, 0), ("inc", 1, 0), ("inc", 2, 0)], epoch=0)
    assert full.error_code == 0 and full.session_id != 0
    assert sorted(answered(full)) == [("inc", 0), ("inc", 1), ("inc", 2)]
    sid = full.session_id
    # nothing changed and the client's positions moved only on partition 0: an empty incremental answer
    quiet = fetch(client, [("inc", 0, 2)], session_id=sid, epoch=1)
    assert quiet.error_code == 0 and quiet.session_id == sid and answered(quiet) == {}
    produce(client, "inc", batch(3), partition=2)
    news = fetch(client, [], session_id=sid, epoch=2)
    [(key, part)] = answered(news).items()
    assert key == ("inc", 2) and part.high_watermark == 3 and len(part.records) > 0
    # the client moved its position on 2: it sends the new offset; HW unchanged and no records -> nothing
    again = fetch(client, [("inc", 2, 3)], session_id=sid, epoch=3)
    assert answered(again) == {}
    # wrong epoch, unknown session
    assert fetch(client, [], session_id=sid, epoch=9).error_code == INVALID_FETCH_SESSION_EPOCH
    assert fetch(client, [], session_id=sid + 1 if sid < 2**31 - 1 else 1, epoch=1).error_code in (
        FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH)
    # forgetting partition 2 and adding it back at offset 0: it is new to the session, so it is answered
    forgot = fetch(client, [], session_id=sid, epoch=4, forgotten=[("inc", [2])])
    assert answered(forgot) == {}
    back = fetch(client, [("inc", 2, 0)], session_id=sid, epoch=5)
    assert list(answered(back)) == [("inc", 2)]
    # closing the session (epoch -1) answers as a full sessionless fetch; the session is gone
    closed = fetch(client, [("inc", 0, 0)], session_id=sid, epoch=-1)
    assert closed.session_id == 0 and list(answered(closed)) == [("inc", 0)]
    assert fetch(client, [], session_id=sid, epoch=6).error_code == FETCH_SESSION_ID_NOT_FOUND


def test_log_start_offset_change_is_news(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    from kafka import KafkaAdminClient
    from kafka.structs import TopicPartition as KTP

    tidelog_module_broker.create_topic("lso-news")
    produce(client, "lso-news", batch(4))
    full = fetch(client, [("lso-news", 0, 4)], epoch=0)
    sid = full.session_id
    assert answered(fetch(client, [], session_id=sid, epoch=1)) == {}
    admin = KafkaAdminClient(bootstrap_servers=tidelog_module_broker.bootstrap)
    try:
        admin.delete_records({KTP("lso-news", 0): 2})
    finally:
        admin.close()
    [part] = answered(fetch(client, [], session_id=sid, epoch=2)).values()
    assert part.log_start_offset == 2 and len(part.records) == 0
    fetch(client, [], session_id=sid, epoch=-1)


def test_topic_id_sessions(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("ids", 2)
    tid = topic_id(client, "ids")
    ghost = uuid.uuid4()
    full = fetch(client, [(tid, 0, 0), (tid, 1, 0), (ghost, 0, 0)], version=13, epoch=0)
    sid = full.session_id
    assert sid != 0 and answered(full, by_id=True)[(ghost, 0)].error_code == 100
    produce(client, "ids", batch(1), partition=1)
    inc = answered(fetch(client, [], version=16, session_id=sid, epoch=1), by_id=True)
    # partition 1 has records, the unknown topic id keeps its error; partition 0 has nothing new
    assert set(inc) == {(tid, 1), (ghost, 0)} and inc[(ghost, 0)].error_code == 100
    inc = answered(fetch(client, [], version=16, session_id=sid, epoch=2, forgotten=[(ghost, [0])]), by_id=True)
    assert (ghost, 0) not in inc
    # a session created with topic ids cannot continue with topic names
    assert fetch(client, [], version=12, session_id=sid, epoch=3).error_code == FETCH_SESSION_TOPIC_ID_ERROR
    fetch(client, [], version=16, session_id=sid, epoch=-1)


def test_eviction_and_metrics(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    cache = tidelog_module_broker.state.fetch_sessions
    for sid in list(cache.sessions):
        tidelog_module_broker.call(lambda s=sid: cache.remove(s))
    evicted_before = metric(tidelog_module_broker, "tidelog_IncrementalFetchSessionEvictions_total")
    tidelog_module_broker.create_topic("evict", 4)
    sizes = [1, 2, 3]
    ids = [fetch(client, [("evict", p, 0) for p in range(n)], epoch=0).session_id for n in sizes]
    assert all(ids) and len(set(ids)) == 3
    assert metric(tidelog_module_broker, "tidelog_NumIncrementalFetchSessions") == 3
    assert metric(tidelog_module_broker, "tidelog_NumIncrementalFetchPartitionsCached") == 6
    # full cache, no stale session: a 1-partition newcomer is no more valuable than the smallest -> no session
    assert fetch(client, [("evict", 0, 0)], epoch=0).session_id == 0
    # a 4-partition newcomer evicts the smallest (1 partition)
    big = fetch(client, [("evict", p, 0) for p in range(4)], epoch=0).session_id
    assert big != 0
    assert fetch(client, [], session_id=ids[0], epoch=1).error_code == FETCH_SESSION_ID_NOT_FOUND
    assert fetch(client, [], session_id=ids[1], epoch=1).error_code == 0
    assert metric(tidelog_module_broker, "tidelog_IncrementalFetchSessionEvictions_total") == evicted_before + 1
    assert metric(tidelog_module_broker, "tidelog_NumIncrementalFetchPartitionsCached") == 2 + 3 + 4


def test_kafka_python_consumer_fetches_through_a_session(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    tidelog_module_broker.create_topic("kp-sess", 4)
    producer = KafkaProducer(bootstrap_servers=tidelog_module_broker.bootstrap)
    for i in range(400):
        producer.send("kp-sess", value=b"%d" % i, partition=i % 4)
    producer.flush()
    producer.close()
    cache = tidelog_module_broker.state.fetch_sessions
    consumer = KafkaConsumer("kp-sess", bootstrap_servers=tidelog_module_broker.bootstrap, group_id=None,
                             auto_offset_reset="earliest", fetch_max_wait_ms=50, consumer_timeout_ms=20_000)
    try:
        seen = set()
        epochs = []
        for message in consumer:
            seen.add(int(message.value))
            epochs.extend(s.epoch for s in cache.sessions.values() if s.size == 4)
            if len(seen) == 400:
                break
        assert seen == set(range(400))
        for _ in range(20):  # idle polls go on incrementally
            consumer.poll(timeout_ms=100)
        sessions = [s for s in cache.sessions.values() if s.size == 4]
        assert sessions and max(s.epoch for s in sessions) > 5
        assert metric(tidelog_module_broker, "tidelog_NumIncrementalFetchSessions") >= 1
    finally:
        consumer.close()
