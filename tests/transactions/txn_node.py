"""A restartable node for coordinator tests: real LogManager, TopicManager, producer ids, group coordinator and
transaction coordinator on a directory, with a ManualClock. Transactional data is appended as a client's
Produce would (a transactional RecordBatch v2 through Log.append_as_leader)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tidelog.broker.producer_ids import ProducerIdManager
from tidelog.broker.topics import TopicManager
from tidelog.clock import ManualClock
from tidelog.config.broker_config import BrokerConfig
from tidelog.coordinator.group import GroupCoordinator, GroupCoordinatorConfig, TopicOffsetsStore
from tidelog.coordinator.transaction.config import TransactionConfig
from tidelog.coordinator.transaction.coordinator import TransactionCoordinator
from tidelog.coordinator.transaction.marker_channel import TransactionMarkerChannelManager
from tidelog.coordinator.transaction.state_manager import (
    TRANSACTION_STATE_TOPIC_NAME,
    TransactionStateManager,
)
from tidelog.protocol.record_batch import iter_batches
from tidelog.protocol.records import Record, build_batch, iter_records
from tidelog.storage import TopicPartition
from tidelog.storage.log import Log
from tidelog.storage.log_manager import LogManager

TXN_PARTITIONS = 3


class Node:
    def __init__(self, data_dir: Path, clock: ManualClock, overrides: dict[str, str] | None = None,
                 fault_hooks: Any = None) -> None:
        props = {"log.dirs": str(data_dir), "offsets.topic.num.partitions": "3",
                 "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
                 "transaction.state.log.segment.bytes": "1048576", "offsets.topic.segment.bytes": "1048576"}
        props.update(overrides or {})
        self.config = BrokerConfig(props)
        self.clock = clock
        self.log_manager = LogManager(list(self.config.log_dirs), self.config.default_log_config(), clock)
        self.log_manager.startup()
        self.topics = TopicManager(self.config, self.log_manager)
        self.topics.startup()
        gc = GroupCoordinatorConfig.from_broker_config(self.config)
        self.groups = GroupCoordinator(clock, gc, TopicOffsetsStore(self.topics, gc, clock))
        self.groups.startup()
        self.producer_ids = ProducerIdManager(data_dir)
        tc = TransactionConfig.from_broker_config(self.config)
        self.txn = TransactionCoordinator(
            TransactionStateManager(self.topics, tc, clock),
            TransactionMarkerChannelManager(self.topics, lambda: self.groups, clock),
            self.producer_ids.generate_producer_id, tc, clock, fault_hooks)
        self.txn.startup(schedule=False)

    def close(self) -> None:
        self.txn.shutdown()
        self.groups.shutdown()
        self.log_manager.shutdown()

    def create_topic(self, name: str, partitions: int) -> None:
        self.topics.create_topic(name, partitions, 1, {})

    def log(self, topic: str, partition: int) -> Log:
        log_ = self.topics.log(TopicPartition(topic, partition))
        assert log_ is not None
        return log_

    def produce(self, topic: str, partition: int, producer_id: int, epoch: int, seq: int, values: list[bytes],
                transactional: bool = True) -> int:
        """Append one batch as a producer would; returns its base offset."""
        now = self.clock.milliseconds()
        batch = build_batch([Record(i, now, b"k", v) for i, v in enumerate(values)], 0, producer_id=producer_id,
                            producer_epoch=epoch, base_sequence=seq, is_transactional=transactional)
        return self.log(topic, partition).append_as_leader(bytes(batch)).first_offset

    def batches(self, topic: str, partition: int) -> list[tuple[bool, int, int, list[bytes | None]]]:
        """(is_control, producer id, epoch, record keys or values) of every batch, in order."""
        log_ = self.log(topic, partition)
        data = bytes(log_.read(log_.log_start_offset, 1 << 22, log_.log_end_offset, True))
        out = []
        for pos, h in iter_batches(data):
            recs = [r.key if h.is_control else r.value for r in iter_records(data, pos)]
            out.append((h.is_control, h.producer_id, h.producer_epoch, recs))
        return out

    def state_records(self, transactional_id: str) -> list[tuple[bytes, bytes | None]]:
        p = self.txn.state.partition_for(transactional_id)
        log_ = self.log(TRANSACTION_STATE_TOPIC_NAME, p)
        data = bytes(log_.read(0, 1 << 22, log_.log_end_offset, True))
        return [(r.key, r.value) for pos, _ in iter_batches(data) for r in iter_records(data, pos)
                if r.key is not None]
