"""Reads and writes `__consumer_offsets` (Kafka's `GroupMetadataManager` storage side).

Writes are small, uncompressed, non-idempotent RecordBatch v2 batches appended through `Log.append_as_leader`
on the event loop; loading reads every partition from its log start and replays the records in offset order.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, NamedTuple, Protocol

from tidelog.clock import Clock
from tidelog.coordinator.group.config import GroupCoordinatorConfig
from tidelog.coordinator.internal_topic import iter_stored_batches
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.records import Record, iter_records
from tidelog.protocol.records import build_batch as records_build_batch
from tidelog.storage import TopicPartition

log = logging.getLogger(__name__)

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % offsets.topic.num.partitions` (abs(MIN_VALUE) is 0 there)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


class StoredRecord(NamedTuple):
    """One record of `__consumer_offsets` as replayed. `producer_id` >= 0 marks a TxnOffsetCommit record
    (a transactional batch); a COMMIT/ABORT marker of that producer comes as `control` True/False with an
    empty key."""

    partition: int
    key: bytes
    value: bytes | None
    producer_id: int = -1
    control: bool | None = None


class OffsetsStore(Protocol):
    num_partitions: int

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]], producer_id: int = -1,
               producer_epoch: int = -1) -> None: ...

    def load(self) -> Iterator[StoredRecord]: ...

    def ensure_topic(self) -> None: ...


def build_batch(records: list[tuple[bytes, bytes | None]], timestamp_ms: int, producer_id: int = -1,
                producer_epoch: int = -1) -> bytes:
    """One uncompressed RecordBatch v2 (offsets from 0; the log assigns the real ones). With a producer id
    it is a transactional batch of that producer (Kafka writes TxnOffsetCommit records that way)."""
    return bytes(records_build_batch([Record(i, timestamp_ms, key, value) for i, (key, value) in enumerate(records)],
                                     0, producer_id=producer_id, producer_epoch=producer_epoch,
                                     is_transactional=producer_id >= 0))


def _is_commit_marker(data: bytes, pos: int) -> bool:
    """A control batch's record key is (version INT16, type INT16); type 1 is COMMIT, 0 ABORT."""
    for record in iter_records(data, pos):
        key = record.key or b""
        return len(key) >= 4 and int.from_bytes(key[2:4], "big") == 1
    return False


class TopicOffsetsStore:
    """`__consumer_offsets` on the broker's own logs, created on first use (Kafka's Topic.isInternal)."""

    def __init__(self, topics: Any, config: GroupCoordinatorConfig, clock: Clock) -> None:
        self._topics = topics
        self._config = config
        self._clock = clock
        self.num_partitions = config.offsets_topic_num_partitions

    def ensure_topic(self) -> None:
        info = self._topics.get(GROUP_METADATA_TOPIC_NAME)
        if info is None:
            # TopicManager gives it the configs Kafka's coordinator uses (compacted, offsets.topic.segment.bytes).
            info = self._topics.ensure_internal_topic(GROUP_METADATA_TOPIC_NAME,
                                                      self._config.offsets_topic_num_partitions)
        # An existing topic decides the partition count (Kafka reads it from metadata too).
        self.num_partitions = info.partitions

    def exists(self) -> bool:
        return self._topics.get(GROUP_METADATA_TOPIC_NAME) is not None

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]], producer_id: int = -1,
               producer_epoch: int = -1) -> None:
        self.ensure_topic()
        log_ = self._topics.log(TopicPartition(GROUP_METADATA_TOPIC_NAME, partition))
        if log_ is None:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "offsets topic partition missing")
        # from_client=False: the coordinator's own write (Kafka's AppendOrigin.COORDINATOR)
        log_.append_as_leader(build_batch(records, self._clock.milliseconds(), producer_id, producer_epoch),
                              from_client=False)

    def load(self) -> Iterator[StoredRecord]:
        info = self._topics.get(GROUP_METADATA_TOPIC_NAME)
        if info is None:
            return
        self.num_partitions = info.partitions
        for batch in iter_stored_batches(self._topics, GROUP_METADATA_TOPIC_NAME, info.partitions):
            header, partition = batch.header, batch.partition
            if header.is_control:
                if header.producer_id >= 0 and header.base_offset >= batch.fetch_offset:
                    yield StoredRecord(partition, b"", None, header.producer_id,
                                       _is_commit_marker(batch.data, batch.pos))
                continue
            txn_pid = header.producer_id if header.is_transactional else -1
            for record in iter_records(batch.data, batch.pos):
                if record.offset < batch.fetch_offset or record.key is None:
                    continue  # before the fetch offset, or keyless (Kafka never writes it)
                yield StoredRecord(partition, record.key, record.value, txn_pid)
