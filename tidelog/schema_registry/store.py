"""`_schemas` on the broker's own log (Confluent's KafkaStore, without a client): the registry appends its records
with `Log.append_as_leader` on the broker's event loop, and reads the topic back from its log start at start-up.

The topic is compacted and has `flush.messages=1`, so each append's fsync runs on the broker's append-flush
executor (`LogManager.flush_appended`) before the registry answers: a registration acknowledged is on disk,
the equivalent of Confluent's acks=all write. The broker's loop never waits on the disk; the registry's own
loop waits for the future.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

from tidelog.coordinator.internal_topic import iter_stored_batches
from tidelog.protocol.errors import KafkaError
from tidelog.protocol.records import Record, build_batch, iter_records
from tidelog.storage import TopicPartition

log = logging.getLogger(__name__)

TOPIC = "_schemas"  # Confluent's kafkastore.topic default
# Confluent creates it with one partition and cleanup.policy=compact; flush.messages=1 makes every append durable
TOPIC_CONFIGS = {"cleanup.policy": "compact", "flush.messages": "1"}


class StoreError(Exception):
    """The append failed (the broker is stopping, a disk error): HTTP 500, error_code 50001."""


class SchemasTopic:
    def __init__(self, broker: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._broker = broker  # BrokerState: topics, log_manager, clock
        self._loop = loop  # the broker's event loop: every append runs there

    def ensure_topic(self) -> None:
        """Create `_schemas` if it is missing (blocking: a worker thread calls it). An existing topic, e.g. one
        a Confluent registry wrote and whose directory was copied here, is used as it is."""
        if self._broker.topics.get(TOPIC) is None:
            self._broker.topics.create_topic(TOPIC, 1, 1, dict(TOPIC_CONFIGS))

    def read_all(self) -> Iterator[tuple[bytes, bytes | None]]:
        """Every keyed record from the log start to the high watermark, in offset order (blocking)."""
        info = self._broker.topics.get(TOPIC)
        if info is None:
            return
        for batch in iter_stored_batches(self._broker.topics, TOPIC, info.partitions):
            if batch.header.is_control:
                continue
            for record in iter_records(batch.data, batch.pos):
                if record.offset >= batch.fetch_offset and record.key is not None:
                    yield record.key, record.value

    async def append(self, records: list[tuple[bytes, bytes | None]]) -> int:
        """Append `records` as one batch and wait until it is durable; the base offset. Call from any loop
        but the broker's."""
        future = asyncio.run_coroutine_threadsafe(self._append_on_broker_loop(records), self._loop)
        try:
            return await asyncio.wrap_future(future)
        except (KafkaError, OSError) as e:
            raise StoreError(str(e)) from e

    async def _append_on_broker_loop(self, records: list[tuple[bytes, bytes | None]]) -> int:
        broker = self._broker
        log_ = broker.topics.log(TopicPartition(TOPIC, 0))
        if log_ is None:
            raise StoreError(f"{TOPIC} partition 0 is missing")
        now = broker.clock.milliseconds()
        batch = build_batch([Record(i, now, key, value) for i, (key, value) in enumerate(records)], 0)
        # from_client=False: the broker's own write, as a coordinator's (Kafka's AppendOrigin.COORDINATOR)
        info = log_.append_as_leader(batch, log_.leader_epoch, from_client=False, defer_flush=True)
        if info.flush_required:
            await broker.log_manager.flush_appended(log_, info)
        else:  # a `_schemas` without flush.messages=1 (e.g. one Confluent created): durable before the answer all the same
            await asyncio.to_thread(log_.flush_appended, info)
        return int(info.first_offset)
