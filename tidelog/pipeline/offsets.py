"""Driver-side offset reading: which partitions a subscription covers and where they start and end.

The counterpart of the connector's KafkaOffsetReader. It needs only Metadata and ListOffsets, both through
kafka-python's KafkaConsumer (no group), so it works against any Kafka cluster as well as tidelog.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from kafka.structs import TopicPartition as KafkaTP

from tidelog.pipeline.client import new_consumer
from tidelog.pipeline.options import EARLIEST, LATEST, OffsetSpec, SourceOptions, Subscription, TopicPartition

log = logging.getLogger(__name__)
T = TypeVar("T")


class DataLossError(RuntimeError):
    """Data the query should have read is gone (retention, deleted partitions, a recreated topic)."""


def report_data_loss(fail_on_data_loss: bool, message: str) -> None:
    """The connector's reportDataLoss: fail, or warn and carry on, depending on failOnDataLoss."""
    if fail_on_data_loss:
        raise DataLossError(
            f"{message}. Some data may have been lost because they are not available in Kafka any more; either "
            "the data was aged out by Kafka or the topic may have been deleted before all the data in the topic "
            "was processed. If you don't want your streaming query to fail on such cases, set the source option "
            '"failOnDataLoss" to "false".'
        )
    log.warning("%s. Some data may have been lost. Set failOnDataLoss=true to fail the query instead.", message)


class OffsetReader:
    """Lazily holds one KafkaConsumer; never pickled (Spark ships readers to executors)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._consumer: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "_consumer": None}

    @property
    def consumer(self) -> Any:
        if self._consumer is None:
            self._consumer = new_consumer(self.options.kafka_params)
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _retry(self, what: str, fn: Callable[[], T]) -> T:
        # fetchOffset.numRetries / fetchOffset.retryIntervalMs, as the connector retries offset lookups.
        attempts = self.options.fetch_offset_num_retries
        for attempt in range(1, attempts + 1):
            try:
                return fn()
            except Exception as exc:  # noqa: BLE001 - kafka-python raises many error types; retried then re-raised
                if attempt == attempts:
                    raise
                log.warning("%s failed (attempt %d of %d): %s", what, attempt, attempts, exc)
                self.close()
                time.sleep(self.options.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")

    def partitions(self) -> list[TopicPartition]:
        """The topic-partitions the subscription covers right now (new partitions and topics included)."""
        sub: Subscription = self.options.subscription
        if sub.kind == "assign":
            return list(sub.assigned)

        def discover() -> list[TopicPartition]:
            consumer = self.consumer
            topics = consumer.topics()  # a fresh Metadata request; internal topics already left out
            if sub.kind == "subscribe":
                wanted = list(sub.topics)
            else:
                # Like the Java consumer (exclude.internal.topics=true), patterns never match internal topics.
                wanted = sorted(t for t in topics if sub.matches(t))
            return sorted(
                TopicPartition(t, p) for t in wanted for p in (consumer.partitions_for_topic(t) or ())
            )

        return self._retry("Metadata", discover)

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets(tps, "beginning_offsets")

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets(tps, "end_offsets")

    def _list_offsets(self, tps: Iterable[TopicPartition], method: str) -> dict[TopicPartition, int]:
        wanted = [KafkaTP(*tp) for tp in tps]
        if not wanted:
            return {}

        def fetch() -> dict[TopicPartition, int]:
            found = getattr(self.consumer, method)(wanted)
            return {TopicPartition(tp.topic, tp.partition): int(off) for tp, off in found.items()}

        return self._retry("ListOffsets", fetch)

    def for_timestamps(self, timestamps: Mapping[TopicPartition, int], strategy: str) -> dict[TopicPartition, int]:
        """First offset whose timestamp is >= the given one; with none, fail ("error") or use latest."""
        if not timestamps:
            return {}

        def fetch() -> dict[TopicPartition, Any]:
            found = self.consumer.offsets_for_times({KafkaTP(*tp): ts for tp, ts in timestamps.items()})
            return {TopicPartition(tp.topic, tp.partition): found.get(tp) for tp in found}

        found = self._retry("ListOffsets", fetch)
        missing = [tp for tp in timestamps if found.get(tp) is None]
        if missing and strategy == "error":
            raise DataLossError(
                f"No offset matched the timestamp for partitions {missing}; set "
                '"startingOffsetsByTimestampStrategy" to "latest" to start those at the latest offset.'
            )
        result = {tp: int(found[tp].offset) for tp in timestamps if found.get(tp) is not None}
        result.update(self.latest(missing))
        return result

    def resolve(self, spec: OffsetSpec, tps: list[TopicPartition], what: str) -> dict[TopicPartition, int]:
        """Concrete offsets for `spec` over `tps` (KafkaOffsetReader.fetchPartitionOffsets semantics)."""
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind == "global_timestamp":
            assert spec.timestamp is not None
            return self.for_timestamps({tp: spec.timestamp for tp in tps}, spec.strategy)
        given = spec.offsets if spec.kind == "specific" else spec.timestamps
        if set(given) != set(tps):
            # The connector asserts the same: specific offsets must name every subscribed partition.
            raise ValueError(
                f"If {what} contains specific offsets, you must specify all TopicPartitions. Use -1 for latest, "
                f"-2 for earliest. Specified: {sorted(given)} Assigned: {sorted(tps)}"
            )
        if spec.kind == "timestamp":
            return self.for_timestamps(given, spec.strategy)
        result = dict(given)
        result.update(self.earliest([tp for tp, off in given.items() if off == EARLIEST]))
        result.update(self.latest([tp for tp, off in given.items() if off == LATEST]))
        return result
