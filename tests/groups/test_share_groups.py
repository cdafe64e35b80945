"""Share groups (KIP-932) over real sockets: confluent-kafka's ShareConsumer (librdkafka 2.16) consuming,
acknowledging, releasing and rejecting; hand-built ShareGroupHeartbeat / ShareFetch / ShareAcknowledge for
Kafka's error codes, session epochs, the simple assignor's sharing, lock timeouts and the delivery limit on the
injected clock, a closed connection releasing its records, read_committed, and state surviving a restart."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from tests.broker.test_features import SAFE, update
from tidelog.clock import ManualClock
from tidelog.coordinator.share.share_partition import AVAILABLE
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

HEARTBEAT, FETCH, ACK = 76, 78, 79
E = ErrorCode
QUIET = {"log_level": 0}


def wait_until(cond: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def produce(broker: BrokerHandle, topic: str, count: int, partition: int = 0, **config: Any) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, **config, **QUIET})
    for i in range(count):
        p.produce(topic, value=f"{topic}-{partition}-{i}".encode(), partition=partition)
    assert p.flush(30) == 0


def earliest(broker: BrokerHandle, group: str, **more: str) -> None:
    """share.auto.offset.reset=earliest (and `more`) on the group, with the admin client as users set it."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    entries = [ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)]
    entries += [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
                for k, v in more.items()]
    for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                                  incremental_configs=entries)]).values():
        future.result(30)


def share_consumer(broker: BrokerHandle, group: str, mode: str = "implicit") -> ShareConsumer:
    return ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                          "share.acknowledgement.mode": mode, **QUIET})


def drain(consumers: list[ShareConsumer], want: int, seconds: float = 30, ack: Any = None) -> list[list[Any]]:
    got: list[list[Any]] = [[] for _ in consumers]
    deadline = time.monotonic() + seconds
    while sum(map(len, got)) < want and time.monotonic() < deadline:
        for i, c in enumerate(consumers):
            for m in c.poll(timeout=0.3):
                assert m.error() is None, m.error()
                got[i].append(m)
                if ack is not None:
                    c.acknowledge(m, ack)
    return got


# --- a real client ------------------------------------------------------------------------------------------


def test_two_share_consumers_split_one_partition_and_get_each_record_once(tidelog_module_broker: BrokerHandle) -> None:
    tidelog_module_broker.create_topic("sh-split", 1)
    group = "sh-split-g"
    earliest(tidelog_module_broker, group)
    produce(tidelog_module_broker, "sh-split", 200)
    a, b = share_consumer(tidelog_module_broker, group), share_consumer(tidelog_module_broker, group)
    try:
        a.subscribe(["sh-split"])
        b.subscribe(["sh-split"])
        got = drain([a, b], 200)
    finally:
        a.close()
        b.close()
    offsets = sorted(m.offset() for ms in got for m in ms)
    assert offsets == list(range(200))  # every record, none twice: both members share partition 0
    assert all(m.value() == f"sh-split-0-{m.offset()}".encode() for ms in got for m in ms)


def test_records_produced_before_the_group_starts_are_not_delivered_by_default(tidelog_module_broker: BrokerHandle) -> None:
    tidelog_module_broker.create_topic("sh-latest", 1)
    produce(tidelog_module_broker, "sh-latest", 5)
    c = share_consumer(tidelog_module_broker, "sh-latest-g")
    try:
        c.subscribe(["sh-latest"])
        assert drain([c], 1, seconds=3)[0] == []  # share.auto.offset.reset=latest: the start is the high watermark
        produce(tidelog_module_broker, "sh-latest", 3)
        assert sorted(m.offset() for m in drain([c], 3)[0]) == [5, 6, 7]
    finally:
        c.close()


def test_release_redelivers_and_reject_archives(tidelog_module_broker: BrokerHandle) -> None:
    tidelog_module_broker.create_topic("sh-ack", 1)
    group = "sh-ack-g"
    earliest(tidelog_module_broker, group)
    produce(tidelog_module_broker, "sh-ack", 4)
    c = share_consumer(tidelog_module_broker, group, "explicit")
    try:
        c.subscribe(["sh-ack"])
        first = drain([c], 4)[0]
        assert sorted(m.offset() for m in first) == [0, 1, 2, 3]
        for m in first:
            c.acknowledge(m, {0: AcknowledgeType.ACCEPT, 1: AcknowledgeType.RELEASE,
                              2: AcknowledgeType.REJECT, 3: AcknowledgeType.RELEASE}[m.offset()])
        c.commit_sync()
        again = drain([c], 2, ack=AcknowledgeType.ACCEPT)[0]
        c.commit_sync()
        assert sorted(m.offset() for m in again) == [1, 3]  # released ones only, delivered a second time
        assert drain([c], 1, seconds=2)[0] == []
    finally:
        c.close()
    sp = tidelog_module_broker.call(lambda: tidelog_module_broker.state.groups.share_groups.partitions[group])
    assert [(p.start_offset, p.records) for p in sp.values()] == [(4, {})]


# --- the protocol, by hand ------------------------------------------------------------------------------------


def heartbeat(wire: KafkaWire, group: str, member: str, epoch: int = 0, topics: list[str] | None = None,
              rack: str | None = None) -> Any:
    cls = request_class(HEARTBEAT)[1]
    return wire.request(HEARTBEAT, 1, cls(group_id=group, member_id=member, member_epoch=epoch, rack_id=rack,
                                          subscribed_topic_names=topics))


def share_fetch(wire: KafkaWire, group: str, member: str, epoch: int, partitions: dict[bytes, list[int]],
                acks: dict[tuple[bytes, int], list[tuple[int, int, list[int]]]] | None = None,
                max_records: int = 500, max_wait_ms: int = 0, forgotten: dict[bytes, list[int]] | None = None,
                version: int = 1) -> Any:
    cls = request_class(FETCH)[version]
    T = cls.FetchTopic
    P = T.FetchPartition
    acks = acks or {}
    keys = {t: set(ps) for t, ps in partitions.items()}
    for t, p in acks:
        keys.setdefault(t, set()).add(p)
    topics = [T(topic_id=uuid.UUID(bytes=t), partitions=[P(partition_index=p, partition_max_bytes=0,
              acknowledgement_batches=[P.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=k)
                                       for f, last, k in acks.get((t, p), [])]) for p in sorted(ps)])
              for t, ps in keys.items()]
    F = cls.ForgottenTopic
    fields: dict[str, Any] = dict(
        group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=max_wait_ms, min_bytes=1,
        max_bytes=1 << 20, max_records=max_records, batch_size=500, topics=topics,
        forgotten_topics_data=[F(topic_id=uuid.UUID(bytes=t), partitions=ps) for t, ps in (forgotten or {}).items()])
    if version >= 2:
        fields.update(share_acquire_mode=0, is_renew_ack=False)
    return wire.request(FETCH, version, cls(**fields))


def share_ack(wire: KafkaWire, group: str, member: str, epoch: int,
              acks: dict[tuple[bytes, int], list[tuple[int, int, list[int]]]]) -> Any:
    cls = request_class(ACK)[1]
    T = cls.AcknowledgeTopic
    P = T.AcknowledgePartition
    by_topic: dict[bytes, list[Any]] = {}
    for (t, p), batches in acks.items():
        by_topic.setdefault(t, []).append(P(partition_index=p, acknowledgement_batches=[
            P.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=k) for f, last, k in batches]))
    return wire.request(ACK, 1, cls(group_id=group, member_id=member, share_session_epoch=epoch,
                                    topics=[T(topic_id=uuid.UUID(bytes=t), partitions=ps) for t, ps in by_topic.items()]))


def acquired(response: Any) -> dict[int, list[tuple[int, int, int]]]:
    assert response.error_code == 0, response
    return {p.partition_index: [(r.first_offset, r.last_offset, r.delivery_count) for r in p.acquired_records]
            for t in response.responses for p in t.partitions if p.acquired_records}


def member() -> str:
    return str(uuid.uuid4())


def joined(wire: KafkaWire, group: str, topic: str) -> str:
    """A new member of `group` subscribed to `topic` (its share-partitions exist from then on)."""
    m = member()
    assert heartbeat(wire, group, m, topics=[topic]).error_code == 0
    return m


def test_heartbeat_errors_and_sharing(tidelog_module_broker: BrokerHandle) -> None:
    tidelog_module_broker.create_topic("sh-hb", 1)
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        assert (heartbeat(wire, "sh-hb-g", "").error_code, heartbeat(wire, "sh-hb-g", "").error_message) == (
            E.INVALID_REQUEST, "MemberId can't be empty.")
        r = heartbeat(wire, "sh-hb-g", member(), topics=None)
        assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, "SubscribedTopicNames must be set in first "
                                                                      "request.")
        assert heartbeat(wire, "sh-hb-g", member(), topics=["sh-hb"], rack="").error_code == E.INVALID_REQUEST
        assert heartbeat(wire, "sh-hb-g", member(), epoch=3).error_code == E.GROUP_ID_NOT_FOUND
        # three members, one partition: each gets it (ceil(3/1) members per partition)
        ids = [member() for _ in range(3)]
        joins = [heartbeat(wire, "sh-hb-g", m, topics=["sh-hb"]) for m in ids]
        assert [(j.error_code, j.member_epoch) for j in joins] == [(0, 1), (0, 2), (0, 3)]
        assert all([a.partitions for a in j.assignment.topic_partitions] == [[0]] for j in joins)
        final = [heartbeat(wire, "sh-hb-g", m, epoch=j.member_epoch) for m, j in zip(ids, joins, strict=True)]
        assert [f.member_epoch for f in final] == [3, 3, 3]
        assert [f.assignment for f in final] == [None, None, None]  # unchanged: not sent again
        assert heartbeat(wire, "sh-hb-g", ids[0], epoch=1).error_code == 0  # its previous epoch: tolerated
        assert heartbeat(wire, "sh-hb-g", ids[0], epoch=2).error_code == E.FENCED_MEMBER_EPOCH
        assert heartbeat(wire, "sh-hb-g", member(), epoch=1).error_code == E.UNKNOWN_MEMBER_ID
        left = heartbeat(wire, "sh-hb-g", ids[2], epoch=-1)
        assert (left.error_code, left.member_epoch) == (0, -1)
        assert heartbeat(wire, "sh-hb-g", ids[2], epoch=-1).error_code == E.UNKNOWN_MEMBER_ID


def test_share_session_epochs(tidelog_module_broker: BrokerHandle) -> None:
    topic_id = tidelog_module_broker.create_topic("sh-sess", 1)
    g = "sh-sess-g"
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        m = joined(wire, g, "sh-sess")
        assert share_fetch(wire, g, m, 1, {topic_id: [0]}).error_code == E.SHARE_SESSION_NOT_FOUND
        assert share_fetch(wire, g, m, 0, {topic_id: [0]}, acks={(topic_id, 0): [(0, 0, [1])]}).error_code == \
            E.INVALID_REQUEST
        assert share_fetch(wire, g, "", 0, {topic_id: [0]}).error_code == E.INVALID_REQUEST
        opened = share_fetch(wire, g, m, 0, {topic_id: [0]})
        assert opened.error_code == 0 and opened.acquisition_lock_timeout_ms == 30_000
        assert share_fetch(wire, g, m, 2, {}).error_code == E.INVALID_SHARE_SESSION_EPOCH
        assert share_fetch(wire, g, m, 1, {}).error_code == 0
        assert share_ack(wire, g, m, 0, {}).error_code == E.INVALID_SHARE_SESSION_EPOCH
        assert share_ack(wire, g, m, 2, {}).error_code == 0  # ShareAcknowledge moves the same epoch
        assert share_fetch(wire, g, m, 3, {}, forgotten={topic_id: [0]}).error_code == 0
        assert share_fetch(wire, g, m, -1, {}).error_code == 0
        assert share_fetch(wire, g, m, 5, {}).error_code == E.SHARE_SESSION_NOT_FOUND
        unknown = share_fetch(wire, g, member(), 0, {bytes(16): [0]})
        assert [(p.partition_index, p.error_code) for t in unknown.responses for p in t.partitions] == [
            (0, E.UNKNOWN_TOPIC_ID)]


def test_locks_time_out_on_the_clock_and_the_delivery_limit_archives(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    clock = ManualClock()
    handle = tidelog_broker_factory(tmp_path, clock=clock)
    topic_id = handle.create_topic("sh-lock", 1)
    earliest(handle, "sh-lock-g", share_delivery_count_limit="2")  # the group's own limit (KIP-1240)
    produce(handle, "sh-lock", 3)
    with KafkaWire(handle.bootstrap) as wa, KafkaWire(handle.bootstrap) as wb:
        a, b = joined(wa, "sh-lock-g", "sh-lock"), joined(wb, "sh-lock-g", "sh-lock")
        assert acquired(share_fetch(wa, "sh-lock-g", a, 0, {topic_id: [0]})) == {0: [(0, 2, 1)]}
        assert acquired(share_fetch(wb, "sh-lock-g", b, 0, {topic_id: [0]})) == {}  # all held by a
        clock.advance(30_000)  # share.record.lock.duration.ms
        assert acquired(share_fetch(wb, "sh-lock-g", b, 1, {})) == {0: [(0, 2, 2)]}
        # a's acknowledgement comes too late: b holds the records now
        late = share_ack(wa, "sh-lock-g", a, 1, {(topic_id, 0): [(0, 0, [1])]})
        assert [p.error_code for t in late.responses for p in t.partitions] == [E.INVALID_RECORD_STATE]
        clock.advance(30_000)
        # two deliveries were the limit: archived, nothing left to give
        assert acquired(share_fetch(wa, "sh-lock-g", a, 2, {})) == {}
        sp = handle.call(lambda: handle.state.groups.share_groups.partitions["sh-lock-g"])
        assert [(p.start_offset, p.records) for p in sp.values()] == [(3, {})]


def test_a_closed_connection_releases_its_records_without_counting_them(tidelog_module_broker: BrokerHandle) -> None:
    topic_id = tidelog_module_broker.create_topic("sh-conn", 1)
    earliest(tidelog_module_broker, "sh-conn-g")
    produce(tidelog_module_broker, "sh-conn", 2)
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        first = joined(wire, "sh-conn-g", "sh-conn")
        assert acquired(share_fetch(wire, "sh-conn-g", first, 0, {topic_id: [0]})) == {0: [(0, 1, 1)]}
    # the broker ends the session when it sees the close: the records are available again, undelivered
    wait_until(lambda: tidelog_module_broker.call(lambda: [
        (r.state, r.delivery_count) for p in tidelog_module_broker.state.groups.share_groups.partitions["sh-conn-g"].values()
        for r in p.records.values()]) == [(AVAILABLE, 0), (AVAILABLE, 0)])
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        m = joined(wire, "sh-conn-g", "sh-conn")
        assert acquired(share_fetch(wire, "sh-conn-g", m, 0, {topic_id: [0]})) == {0: [(0, 1, 1)]}
        # and a final fetch (epoch -1) with acknowledgements accepts them and closes the session
        done = share_fetch(wire, "sh-conn-g", m, -1, {}, acks={(topic_id, 0): [(0, 1, [1])]})
        assert [(p.acknowledge_error_code, p.acquired_records) for t in done.responses for p in t.partitions] == \
            [(0, [])]
    sp = tidelog_module_broker.call(lambda: tidelog_module_broker.state.groups.share_groups.partitions["sh-conn-g"])
    assert [(p.start_offset, p.records) for p in sp.values()] == [(2, {})]


def test_read_committed_skips_aborted_records_and_waits_for_open_transactions(tidelog_module_broker: BrokerHandle) -> None:
    topic_id = tidelog_module_broker.create_topic("sh-txn", 1)
    earliest(tidelog_module_broker, "sh-txn-g", share_isolation_level="read_committed")
    p = Producer({"bootstrap.servers": tidelog_module_broker.bootstrap, "transactional.id": "sh-txn-p", **QUIET})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("sh-txn", b"aborted", partition=0)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce("sh-txn", b"committed", partition=0)
    p.flush(30)
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        m = joined(wire, "sh-txn-g", "sh-txn")
        # offsets: 0 aborted record (archived at once), 1 abort marker (acquired: the client acknowledges it as a
        # GAP), 2 committed record, 3 commit marker; 2 is above the LSO while its transaction is open
        assert acquired(share_fetch(wire, "sh-txn-g", m, 0, {topic_id: [0]})) == {0: [(1, 1, 1)]}
        p.commit_transaction(30)
        assert acquired(share_fetch(wire, "sh-txn-g", m, 1, {})) == {0: [(2, 3, 1)]}


def test_acknowledged_state_survives_a_restart(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    handle = tidelog_broker_factory(tmp_path)
    topic_id = handle.create_topic("sh-restart", 1)
    earliest(handle, "sh-restart-g")
    produce(handle, "sh-restart", 4)
    with KafkaWire(handle.bootstrap) as wire:
        m = joined(wire, "sh-restart-g", "sh-restart")
        assert acquired(share_fetch(wire, "sh-restart-g", m, 0, {topic_id: [0]})) == {0: [(0, 3, 1)]}
        ok = share_ack(wire, "sh-restart-g", m, 1, {(topic_id, 0): [(0, 1, [1]), (2, 2, [2])]})
        assert [p.error_code for t in ok.responses for p in t.partitions] == [0]
    handle.restart()
    with KafkaWire(handle.bootstrap) as wire:
        again = joined(wire, "sh-restart-g", "sh-restart")
        assert acquired(share_fetch(wire, "sh-restart-g", again, 0, {topic_id: [0]})) == {0: [(2, 2, 2), (3, 3, 1)]}


def test_share_version_0_turns_share_groups_off(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    handle = tidelog_broker_factory(tmp_path)
    with KafkaWire(handle.bootstrap) as wire:
        handle.create_topic("sh-off", 1)
        assert update(wire, [("share.version", 0, SAFE)]).error_code == 0
        assert heartbeat(wire, "sh-off-g", member(), topics=["sh-off"]).error_code == E.UNSUPPORTED_VERSION
        assert share_fetch(wire, "sh-off-g", member(), 0, {}).error_code == E.UNSUPPORTED_VERSION
        assert share_ack(wire, "sh-off-g", member(), 1, {}).error_code == E.UNSUPPORTED_VERSION
        assert update(wire, [("share.version", 1, 1)]).error_code == 0
        assert heartbeat(wire, "sh-off-g", member(), topics=["sh-off"]).error_code == 0


def test_a_failed_state_write_answers_an_error_and_the_next_write_carries_it(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """The acknowledgement is answered UNKNOWN_SERVER_ERROR (Kafka's answer to a persister failure) and kept in
    memory (no rollback: the state is written off the loop, see ShareGroupCoordinator.acknowledge); the next
    write, here the shutdown's, puts it on disk."""
    handle = tidelog_broker_factory(tmp_path)
    topic_id = handle.create_topic("sh-write", 1)
    earliest(handle, "sh-write-g")
    produce(handle, "sh-write", 2)
    with KafkaWire(handle.bootstrap) as wire:
        m = joined(wire, "sh-write-g", "sh-write")
        assert acquired(share_fetch(wire, "sh-write-g", m, 0, {topic_id: [0]})) == {0: [(0, 1, 1)]}
        state = tmp_path / "tidelog-share-state.json"
        state.unlink()
        state.mkdir()  # the state file cannot be replaced now (a real OSError from the file system)
        failed = share_ack(wire, "sh-write-g", m, 1, {(topic_id, 0): [(0, 1, [1])]})
        assert [p.error_code for t in failed.responses for p in t.partitions] == [E.UNKNOWN_SERVER_ERROR]
        state.rmdir()
        # kept in memory: the start offset moved past them, so acknowledging them again does nothing (and writes)
        again = share_ack(wire, "sh-write-g", m, 2, {(topic_id, 0): [(0, 1, [1])]})
        assert [p.error_code for t in again.responses for p in t.partitions] == [E.NONE]
    handle.restart()
    with KafkaWire(handle.bootstrap) as wire:
        other = joined(wire, "sh-write-g", "sh-write")
        assert acquired(share_fetch(wire, "sh-write-g", other, 0, {topic_id: [0]})) == {}  # both done


def test_a_partition_in_error_does_not_end_the_long_poll(tidelog_module_broker: BrokerHandle) -> None:
    import threading

    topic_id = tidelog_module_broker.create_topic("sh-poll", 1)
    earliest(tidelog_module_broker, "sh-poll-g")
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        m = joined(wire, "sh-poll-g", "sh-poll")
        timer = threading.Timer(0.5, produce, (tidelog_module_broker, "sh-poll", 1))
        timer.start()
        try:
            # an unknown topic id in the session answers UNKNOWN_TOPIC_ID, and the wait goes on for the record
            got = share_fetch(wire, "sh-poll-g", m, 0, {topic_id: [0], bytes(range(16)): [0]}, max_wait_ms=20_000)
        finally:
            timer.join()
        errors = {p.partition_index: p.error_code for t in got.responses for p in t.partitions
                  if bytes(t.topic_id.bytes) != topic_id}
        assert errors == {0: E.UNKNOWN_TOPIC_ID}
        assert acquired(got) == {0: [(0, 0, 1)]}


def test_transactional_offsets_to_a_share_group_are_refused(tidelog_module_broker: BrokerHandle) -> None:
    from confluent_kafka import Consumer, KafkaException
    from confluent_kafka import TopicPartition as TP

    tidelog_module_broker.create_topic("sh-txoff", 1)
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        joined(wire, "sh-txoff-g", "sh-txoff")
    p = Producer({"bootstrap.servers": tidelog_module_broker.bootstrap, "transactional.id": "sh-txoff-p", **QUIET})
    p.init_transactions(30)
    p.begin_transaction()
    metadata = Consumer({"bootstrap.servers": tidelog_module_broker.bootstrap, "group.id": "sh-txoff-g", **QUIET})
    try:
        with pytest.raises(KafkaException) as raised:
            p.send_offsets_to_transaction([TP("sh-txoff", 0, 1)], metadata.consumer_group_metadata(), 30)
        assert "GROUP_ID_NOT_FOUND" in str(raised.value) or "group" in str(raised.value).lower()
    finally:
        metadata.close()
        p.abort_transaction(30)


# --- a waiting ShareFetch is woken when records become acquirable (Kafka's DelayedShareFetch completion) ----------

LONG_WAIT_MS = 30_000  # what the fetch would wait without a wake; each test's answer comes well before it


def parked(broker: BrokerHandle, count: int = 1) -> None:
    """Until `count` fetches wait in the purgatory (so the wake, not the first attempt, delivers the records)."""
    wait_until(lambda: broker.call(broker.state.purgatory.num_delayed) >= count)


def test_released_records_wake_a_waiting_share_fetch(tidelog_module_broker: BrokerHandle) -> None:
    topic_id = tidelog_module_broker.create_topic("sh-wake-rel", 1)
    group = "sh-wake-rel-g"
    earliest(tidelog_module_broker, group)
    produce(tidelog_module_broker, "sh-wake-rel", 3)
    with KafkaWire(tidelog_module_broker.bootstrap) as wa, KafkaWire(tidelog_module_broker.bootstrap) as wb:
        a, b = joined(wa, group, "sh-wake-rel"), joined(wb, group, "sh-wake-rel")
        assert acquired(share_fetch(wa, group, a, 0, {topic_id: [0]})) == {0: [(0, 2, 1)]}
        cls = request_class(FETCH)[1]
        waiting = cls(group_id=group, member_id=b, share_session_epoch=0, max_wait_ms=LONG_WAIT_MS, min_bytes=1,
                      max_bytes=1 << 20, max_records=500, batch_size=500, forgotten_topics_data=[],
                      topics=[cls.FetchTopic(topic_id=uuid.UUID(bytes=topic_id), partitions=[
                          cls.FetchTopic.FetchPartition(partition_index=0, partition_max_bytes=0,
                                                        acknowledgement_batches=[])])])
        started = time.monotonic()
        wb.send(FETCH, 1, waiting)
        parked(tidelog_module_broker)
        released = share_ack(wa, group, a, 1, {(topic_id, 0): [(0, 2, [2])]})  # RELEASE
        assert [p.error_code for t in released.responses for p in t.partitions] == [0]
        _, answer = wb.receive(FETCH, 1)
        waited = time.monotonic() - started
    assert acquired(answer) == {0: [(0, 2, 2)]}
    assert waited < LONG_WAIT_MS / 1000 / 2, f"answered after {waited:.1f} s: the release did not wake the fetch"


def test_a_lock_timeout_wakes_a_waiting_share_fetch(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    short_locks = {"group.share.min.record.lock.duration.ms": 1000, "group.share.record.lock.duration.ms": 1000}
    handle = tidelog_broker_factory(tmp_path, overrides=short_locks)
    _lock_timeout_wakes(handle)


def _lock_timeout_wakes(broker: BrokerHandle) -> None:
    topic_id = broker.create_topic("sh-wake-lock", 1)
    group = "sh-wake-lock-g"
    earliest(broker, group)
    produce(broker, "sh-wake-lock", 2)
    with KafkaWire(broker.bootstrap) as wa, KafkaWire(broker.bootstrap) as wb:
        a, b = joined(wa, group, "sh-wake-lock"), joined(wb, group, "sh-wake-lock")
        assert acquired(share_fetch(wa, group, a, 0, {topic_id: [0]})) == {0: [(0, 1, 1)]}
        started = time.monotonic()
        # b waits up to 30 s; a's lock times out after 1 s and b gets the records then
        answer = share_fetch(wb, group, b, 0, {topic_id: [0]}, max_wait_ms=LONG_WAIT_MS)
        waited = time.monotonic() - started
    assert acquired(answer) == {0: [(0, 1, 2)]}
    assert waited < LONG_WAIT_MS / 1000 / 2, f"answered after {waited:.1f} s: the lock timeout did not wake it"
