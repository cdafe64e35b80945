"""log.flush.on.append: the fsync of an acknowledged append runs off the event loop, per partition.

A fault hook (tidelog.storage.fault_hooks) blocks the fsync of one partition; a produce to another partition on
another connection must complete meanwhile, and the blocked partition is acknowledged (and readable) only once
its fsync is released."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from broker_testlib import FETCH, batch, produce

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.storage import TopicPartition
from tidelog.storage.fault_hooks import FaultPoint
from tidelog.testing import KafkaWire

SLOW = TopicPartition("slow-disk", 0)


class BlockFsync:
    """Blocks the first fsync of `tp` after `armed` is set, until `release` is set."""

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.armed = threading.Event()
        self.entered = threading.Event()
        self.release = threading.Event()

    def at(self, point: FaultPoint, subject: object = None) -> None:
        if point == FaultPoint.FSYNC and subject == self.tp and self.armed.is_set() and not self.entered.is_set():
            self.entered.set()
            self.release.wait(60)


@pytest.fixture
def slow_broker(tidelog_broker_factory: Callable[..., Any]) -> Iterator[tuple[Any, BlockFsync]]:
    hooks = BlockFsync(SLOW)
    yield tidelog_broker_factory(overrides={"log.flush.on.append": True}, fault_hooks=hooks), hooks
    hooks.release.set()


def fetch_count(client: KafkaWire, tp: TopicPartition) -> tuple[int, int]:
    """(high watermark, bytes returned) of a read_uncommitted fetch from offset 0."""
    cls = request_class(FETCH)[11]
    T = cls.FetchTopic
    req = cls(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
              session_epoch=-1, topics=[T(topic=tp.topic, partitions=[T.FetchPartition(
                  partition=tp.partition, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                  partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")
    [topic] = client.request(FETCH, 11, req).responses
    [part] = topic.partitions
    return part.high_watermark, len(part.records or b"")


def test_slow_fsync_of_one_partition_does_not_delay_another(slow_broker: tuple[Any, BlockFsync]) -> None:
    broker, hooks = slow_broker
    broker.create_topic(SLOW.topic)
    broker.create_topic("fast-disk")
    hooks.armed.set()
    slow_result: list[Any] = []
    with KafkaWire(broker.bootstrap) as slow_client, KafkaWire(broker.bootstrap) as fast_client, \
            KafkaWire(broker.bootstrap) as reader:
        slow_thread = threading.Thread(target=lambda: slow_result.append(produce(slow_client, SLOW.topic, batch(1))))
        slow_thread.start()
        assert hooks.entered.wait(60), "the slow partition's fsync was never reached"
        # The slow partition's fsync is blocked in the hook; another partition is served meanwhile.
        fast = produce(fast_client, "fast-disk", batch(1))
        assert fast.error_code == ErrorCode.NONE and fast.base_offset == 0
        assert not slow_result and not hooks.release.is_set()
        # Not acknowledged, not visible: the HW stays below the unsynced batch.
        assert fetch_count(reader, SLOW) == (0, 0)
        hooks.release.set()
        slow_thread.join(60)
        [slow] = slow_result
        assert slow.error_code == ErrorCode.NONE and slow.base_offset == 0
        hw, size = fetch_count(reader, SLOW)
        assert hw == 1 and size > 0
        lg = broker.state.log_manager.get_log(SLOW)
        assert lg.recovery_point == 1  # fsynced before the acknowledgement
