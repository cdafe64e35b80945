"""Groups and offsets survive a restart through __consumer_offsets on real logs; the records on disk are decoded
here from the raw .log files with a minimal RecordBatch v2 reader of our own (independent of broker code)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tidelog.broker.topics import TopicManager
from tidelog.clock import ManualClock
from tidelog.config.broker_config import BrokerConfig
from tidelog.coordinator.group import (
    GROUP_METADATA_TOPIC_NAME,
    GroupCoordinator,
    GroupCoordinatorConfig,
    GroupState,
    OffsetAndMetadata,
    TopicOffsetsStore,
)
from tidelog.coordinator.group.store import partition_for
from tidelog.storage import TopicPartition
from tidelog.storage.log_manager import LogManager

PARTITIONS = 3


class Node:
    """A real LogManager + TopicManager + coordinator on a directory, restartable."""

    def __init__(self, data_dir: Path, clock: ManualClock) -> None:
        self.config = BrokerConfig({"log.dirs": str(data_dir), "offsets.topic.num.partitions": str(PARTITIONS),
                                    "group.initial.rebalance.delay.ms": "0"})
        self.clock = clock
        self.log_manager = LogManager(list(self.config.log_dirs), self.config.default_log_config(), clock)
        self.log_manager.startup()
        self.topics = TopicManager(self.config, self.log_manager)
        self.topics.startup()
        gc = GroupCoordinatorConfig.from_broker_config(self.config)
        self.coordinator = GroupCoordinator(clock, gc, TopicOffsetsStore(self.topics, gc, clock))
        self.coordinator.startup()

    def close(self) -> None:
        self.coordinator.shutdown()
        self.log_manager.shutdown()


# --------------------------------------------------------------- independent RecordBatch v2 reader (test-only)
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = raw = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def raw_records(log_dir: Path) -> Iterator[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) from every uncompressed batch in the partition's .log files."""
    for seg in sorted(log_dir.glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            base_offset, length = struct.unpack_from(">qi", data, pos)
            attributes = struct.unpack_from(">h", data, pos + 21)[0]
            assert data[pos + 16] == 2 and attributes & 0x07 == 0
            (count,) = struct.unpack_from(">i", data, pos + 57)
            rpos = pos + 61
            for _ in range(count):
                _, rpos = _varint(data, rpos)          # length
                rpos += 1                              # attributes
                _, rpos = _varint(data, rpos)          # timestamp delta
                delta, rpos = _varint(data, rpos)
                klen, rpos = _varint(data, rpos)
                key = data[rpos : rpos + klen]
                rpos += klen
                vlen, rpos = _varint(data, rpos)
                value = None if vlen < 0 else data[rpos : rpos + vlen]
                rpos += max(vlen, 0)
                headers, rpos = _varint(data, rpos)
                assert headers == 0
                yield base_offset + delta, key, value
            pos += 12 + length


def _s(data: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = struct.unpack_from(">h", data, pos)
    return (None, pos + 2) if n < 0 else (data[pos + 2 : pos + 2 + n].decode(), pos + 2 + n)


def decode_offsets(log_dir: Path) -> dict[tuple[str, str, int], tuple[int, int, str] | None]:
    """Latest offset commit per (group, topic, partition) as Kafka's OffsetCommitKey v1 / value v3 define it."""
    out: dict[tuple[str, str, int], tuple[int, int, str] | None] = {}
    for _, key, value in raw_records(log_dir):
        (kv,) = struct.unpack_from(">h", key, 0)
        if kv not in (0, 1):
            continue
        group, p = _s(key, 2)
        topic, p = _s(key, p)
        (partition,) = struct.unpack_from(">i", key, p)
        k = (str(group), str(topic), partition)
        if value is None:
            out[k] = None
            continue
        version, offset, epoch = struct.unpack_from(">hqi", value, 0)
        assert version == 3
        metadata, _ = _s(value, 14)
        out[k] = (offset, epoch, str(metadata))
    return out


def snapshot(coord: GroupCoordinator) -> dict[str, Any]:
    return {
        gid: (g.state, g.generation_id, g.protocol_type, g.protocol_name, g.leader_id,
              [(m.member_id, m.group_instance_id, m.client_id, m.session_timeout_ms, m.rebalance_timeout_ms,
                m.metadata(g.protocol_name or ""), m.assignment) for m in g.members.values()],
              {tp: (om.offset, om.leader_epoch, om.metadata) for tp, om in g.offsets.items()})
        for gid, g in coord.groups.items()
    }


def test_groups_and_offsets_survive_restart(tmp_path: Path) -> None:
    clock = ManualClock()
    tp0, tp1 = TopicPartition("orders", 0), TopicPartition("orders", 1)

    async def populate(node: Node) -> None:
        coord = node.coordinator
        a = await coord.join_group("g1", "", None, "client-a", "/127.0.0.1", 10000, 60000, "consumer",
                                   [("range", b"\x00\x01sub-a")])
        b_task = asyncio.ensure_future(coord.join_group("g1", "", "static-b", "client-b", "/127.0.0.2", 12000,
                                                        60000, "consumer", [("range", b"\x00\x01sub-b")]))
        await asyncio.sleep(0)
        await coord.join_group("g1", a.member_id, None, "client-a", "/127.0.0.1", 10000, 60000, "consumer",
                               [("range", b"\x00\x01sub-a")])
        b = await b_task
        b_sync = asyncio.ensure_future(coord.sync_group("g1", 2, b.member_id, "static-b", None, None, {}))
        await coord.sync_group("g1", 2, a.member_id, None, None, None,
                               {a.member_id: b"assign-a", b.member_id: b"assign-b"})
        await b_sync
        now = clock.milliseconds()
        assert coord.commit_offsets("g1", a.member_id, None, 2, {
            tp0: OffsetAndMetadata(10, 0, "first", now)}) == {tp0: 0}
        assert coord.commit_offsets("g1", a.member_id, None, 2, {
            tp0: OffsetAndMetadata(15, 1, "second", now), tp1: OffsetAndMetadata(3, -1, "", now)}) == \
            {tp0: 0, tp1: 0}
        coord.commit_offsets("simple", "", None, -1, {tp1: OffsetAndMetadata(99, -1, "s", now)})
        coord.commit_offsets("gone", "", None, -1, {tp1: OffsetAndMetadata(1, -1, "", now)})
        assert coord.delete_groups(["gone"]) == {"gone": 0}

    node = Node(tmp_path, clock)
    asyncio.run(populate(node))
    before = snapshot(node.coordinator)
    assert before["g1"][0] is GroupState.STABLE and "gone" not in before
    node.close()

    # the records on disk, decoded independently
    log_dir = tmp_path / f"{GROUP_METADATA_TOPIC_NAME}-{partition_for('g1', PARTITIONS)}"
    offsets = decode_offsets(log_dir)
    assert offsets[("g1", "orders", 0)] == (15, 1, "second")
    assert offsets[("g1", "orders", 1)] == (3, -1, "")
    gone_dir = tmp_path / f"{GROUP_METADATA_TOPIC_NAME}-{partition_for('gone', PARTITIONS)}"
    assert decode_offsets(gone_dir)[("gone", "orders", 1)] is None       # tombstone

    restarted = Node(tmp_path, clock)
    try:
        assert snapshot(restarted.coordinator) == before
        # the restored group keeps working: members heartbeat at the stored generation
        g1 = restarted.coordinator.groups["g1"]
        for member_id in list(g1.members):
            assert restarted.coordinator.heartbeat("g1", member_id, g1.members[member_id].group_instance_id,
                                                   2) == 0
    finally:
        restarted.close()


def test_empty_group_offsets_expire_with_tombstones_across_restart(tmp_path: Path) -> None:
    clock = ManualClock()
    node = Node(tmp_path, clock)
    tp = TopicPartition("t", 0)
    node.coordinator.config = GroupCoordinatorConfig(offsets_retention_minutes=1, offsets_topic_num_partitions=3)
    node.coordinator.manager.config = node.coordinator.config
    node.coordinator.commit_offsets("old", "", None, -1, {tp: OffsetAndMetadata(5, -1, "", clock.milliseconds())})
    clock.advance(30_000)
    node.coordinator.commit_offsets("young", "", None, -1,
                                    {tp: OffsetAndMetadata(6, -1, "", clock.milliseconds())})
    clock.advance(31_000)
    assert node.coordinator.manager.cleanup_expired_offsets() == 1
    assert "old" not in node.coordinator.groups and "young" in node.coordinator.groups
    node.close()
    restarted = Node(tmp_path, clock)
    try:
        assert set(restarted.coordinator.groups) == {"young"}
        assert restarted.coordinator.fetch_offsets("young", [tp])[1][tp].offset == 6  # type: ignore[union-attr]
    finally:
        restarted.close()


def test_committed_offsets_survive_broker_sigkill(tmp_path: Path) -> None:
    """Unclean shutdown: a SIGKILLed broker recovers __consumer_offsets and serves the same commits."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    from tests.broker.broker_testlib import create_topic
    from tidelog.testing import BrokerProcess

    broker = BrokerProcess(tmp_path / "data", overrides={"group.initial.rebalance.delay.ms": 0})
    broker.start()
    try:
        create_topic(broker.bootstrap, "crashy", 3)  # a broker process: over the wire

        def consumer() -> Any:
            return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "crash-group",
                             "enable.auto.commit": False})

        c = consumer()
        c.commit(offsets=[CTP("crashy", p, 100 + p) for p in range(3)], asynchronous=False)
        c.close()
        broker.restart(kill=True)
        c = consumer()
        got = c.committed([CTP("crashy", p) for p in range(3)], timeout=60)
        c.close()
        assert [(tp.partition, tp.offset) for tp in got] == [(0, 100), (1, 101), (2, 102)]
    finally:
        broker.kill()
