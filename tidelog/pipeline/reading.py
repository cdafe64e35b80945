"""Executor-side reading of one offset range of one topic-partition into rows of the connector's schema.

The counterpart of the connector's KafkaDataConsumer: seek to the start, poll until the end offset, skip offsets
that are invisible (compacted away, transaction markers) and treat offsets that fell below the log start
(retention) as data loss, which failOnDataLoss turns into a failure or a warning.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kafka.errors import OffsetOutOfRangeError
from kafka.structs import TopicPartition as KafkaTP

from tidelog.pipeline.client import new_consumer
from tidelog.pipeline.offsets import report_data_loss
from tidelog.pipeline.options import TopicPartition

log = logging.getLogger(__name__)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# One poll never blocks longer than this, so the end-of-range and data-loss checks run regularly.
_POLL_SLICE_MS = 1000


@dataclass(frozen=True)
class OffsetRange:
    """[from_offset, until_offset) of one topic-partition (the connector's KafkaOffsetRange)."""

    tp: TopicPartition
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def to_timestamp(millis: int) -> dt.datetime:
    # Exact (timedelta is integral): Spark's TimestampType has microsecond precision, Kafka has milliseconds.
    return _EPOCH + dt.timedelta(milliseconds=millis)


def to_row(record: Any, include_headers: bool) -> tuple[Any, ...]:
    row = (
        record.key,
        record.value,
        record.topic,
        record.partition,
        record.offset,
        to_timestamp(record.timestamp),
        record.timestamp_type,
    )
    if not include_headers:
        return row
    # The connector returns null, not an empty array, for a record without headers.
    headers = [(k, v) for k, v in record.headers] if record.headers else None
    return (*row, headers)


def read_rows(
    kafka_params: dict[str, str],
    offset_range: OffsetRange,
    include_headers: bool,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
) -> Iterator[tuple[Any, ...]]:
    """The range as tuples in the connector's column order."""
    for record in read_records(kafka_params, offset_range, fail_on_data_loss, poll_timeout_ms):
        yield to_row(record, include_headers)


def read_arrow(
    kafka_params: dict[str, str],
    offset_range: OffsetRange,
    schema: Any,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
    batch_rows: int = 8192,
) -> Iterator[Any]:
    """The range as pyarrow RecordBatches of `schema` (the Arrow form of the Spark schema): Spark takes them
    as they are, which spares the per-value conversion of tuples in the Python worker."""
    # optional: pyarrow comes with the [spark] extra
    import pyarrow as pa

    include_headers = "headers" in schema.names
    chunk: list[Any] = []

    def build() -> Any:
        micros = [r.timestamp * 1000 for r in chunk]
        columns = [
            pa.array([r.key for r in chunk], schema.field("key").type),
            pa.array([r.value for r in chunk], schema.field("value").type),
            pa.array([r.topic for r in chunk], schema.field("topic").type),
            pa.array([r.partition for r in chunk], schema.field("partition").type),
            pa.array([r.offset for r in chunk], schema.field("offset").type),
            pa.array(micros, pa.int64()).cast(schema.field("timestamp").type),
            pa.array([r.timestamp_type for r in chunk], schema.field("timestampType").type),
        ]
        if include_headers:
            headers = [[{"key": k, "value": v} for k, v in r.headers] if r.headers else None for r in chunk]
            columns.append(pa.array(headers, schema.field("headers").type))
        return pa.RecordBatch.from_arrays(columns, schema=schema)

    for record in read_records(kafka_params, offset_range, fail_on_data_loss, poll_timeout_ms):
        chunk.append(record)
        if len(chunk) >= batch_rows:
            yield build()
            chunk = []
    if chunk:
        yield build()


def read_records(
    kafka_params: dict[str, str],
    offset_range: OffsetRange,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
) -> Iterator[Any]:
    """kafka-python ConsumerRecords of the range, in offset order."""
    tp = offset_range.tp
    until = offset_range.until_offset
    offset = offset_range.from_offset
    if offset >= until:
        return
    ktp = KafkaTP(tp.topic, tp.partition)
    consumer = new_consumer(kafka_params)
    try:
        consumer.assign([ktp])
        consumer.seek(ktp, offset)
        last_progress = time.monotonic()
        while offset < until:
            try:
                polled = consumer.poll(timeout_ms=_POLL_SLICE_MS, max_records=5000)
            except OffsetOutOfRangeError:
                offset = _recover_out_of_range(consumer, ktp, tp, offset, until, fail_on_data_loss)
                if offset < until:
                    consumer.seek(ktp, offset)
                continue
            records = polled.get(ktp, ())
            for record in records:
                if record.offset < offset:
                    continue  # the broker returns whole batches; earlier records of the first one are skipped
                if record.offset >= until:
                    offset = until
                    break
                yield record
                offset = record.offset + 1
            if offset >= until:
                break
            # Compacted-away offsets and control batches advance the position without yielding records; they
            # are not data loss while still above the log start (the connector skips "invisible" offsets too).
            position = consumer.position(ktp)
            advanced = bool(records) or (position is not None and position > offset)
            if position is not None and position > offset:
                offset = min(position, until)
            if advanced:
                last_progress = time.monotonic()
                continue
            latest = consumer.end_offsets([ktp])[ktp]
            if latest <= offset:
                # The range was planned against an end offset that no longer exists (topic truncated or
                # recreated).
                report_data_loss(
                    fail_on_data_loss,
                    f"Cannot fetch offsets {offset} to {until} of {tp}: the latest available offset is {latest}",
                )
                return
            if (time.monotonic() - last_progress) * 1000 > poll_timeout_ms:
                raise TimeoutError(
                    f"Cannot fetch record for offset {offset} of {tp} in {poll_timeout_ms} milliseconds"
                )
    finally:
        consumer.close()


def _recover_out_of_range(
    consumer: Any, ktp: Any, tp: TopicPartition, offset: int, until: int, fail_on_data_loss: bool
) -> int:
    """The start of the range was removed by retention (or DeleteRecords): data loss from offset to the log
    start; the read continues from there when failOnDataLoss is false."""
    earliest = consumer.beginning_offsets([ktp])[ktp]
    latest = consumer.end_offsets([ktp])[ktp]
    if offset < earliest:
        report_data_loss(
            fail_on_data_loss,
            f"Cannot fetch offset {offset} of {tp}: the earliest available offset is {earliest}",
        )
        return int(min(earliest, until))
    if offset >= latest:
        report_data_loss(
            fail_on_data_loss,
            f"Cannot fetch offsets {offset} to {until} of {tp}: the latest available offset is {latest}",
        )
        return until
    return offset  # a transient race with retention; fetch again


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """minPartitions: split the biggest ranges so there are at least that many Spark partitions, each topic-
    partition in pieces proportional to its size (the connector's KafkaOffsetRangeCalculator)."""
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    result: list[OffsetRange] = []
    for r in ranges:
        parts = max(round(r.size / total * min_partitions), 1)
        step = r.size / parts
        bounds = [r.from_offset + int(step * i) for i in range(parts)] + [r.until_offset]
        result.extend(OffsetRange(r.tp, a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a)
    return result
