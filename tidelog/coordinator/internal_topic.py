"""Replaying an internal topic (`__consumer_offsets`, `__transaction_state`) from the log start of every
partition to its high watermark, as Kafka's coordinators do when they load (CoordinatorLoaderImpl)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, NamedTuple

from tidelog.protocol.record_batch import RecordBatchHeader, iter_batches
from tidelog.storage import TopicPartition

log = logging.getLogger(__name__)

_READ_CHUNK = 1 << 20


class StoredBatch(NamedTuple):
    """One batch as read: its bytes start at `data[pos]`. Records below `fetch_offset` (the offset the read
    started at, inside a batch that began earlier) were replayed already and must be skipped."""

    partition: int
    data: bytes
    pos: int
    header: RecordBatchHeader
    fetch_offset: int


def iter_stored_batches(topics: Any, topic: str, num_partitions: int) -> Iterator[StoredBatch]:
    """Every batch of partitions 0..num_partitions-1 of `topic`, in offset order, up to the high watermark."""
    for partition in range(num_partitions):
        log_ = topics.log(TopicPartition(topic, partition))
        if log_ is None:
            continue
        offset, end = log_.log_start_offset, log_.high_watermark
        while offset < end:
            data = bytes(log_.read(offset, _READ_CHUNK, end, True))
            next_offset = offset
            for pos, header in iter_batches(data):
                next_offset = max(next_offset, header.next_offset)
                yield StoredBatch(partition, data, pos, header, offset)
            if next_offset <= offset:
                log.warning("cannot make progress loading %s-%d at %d", topic, partition, offset)
                break
            offset = next_offset
