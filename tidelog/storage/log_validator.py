"""What the leader checks and changes before an append (Kafka's LogValidator + the batch checks of
UnifiedLog.analyzeAndValidateRecords): docs/STORAGE.md "Validation".

Hot path: an uncompressed batch, or a batch already in the target codec, is changed in place (BaseOffset and
PartitionLeaderEpoch sit outside the CRC; LogAppendTime rewrites MaxTimestamp + attributes + CRC, header
only). Records are decoded only when a feature needs them: null-key checks on compacted topics, finite
message.timestamp.before/after.max.ms bounds, or recompression to the topic's codec.

Divergences from Kafka, on purpose:
  * Kafka decodes every record (and, for a compressed batch, checks inner offsets are 0..n-1). Here a batch
    whose records are not otherwise needed is trusted beyond its header and CRC; the CRC still guards it
    against corruption in transit, and a well-formed client always writes inner offsets 0..n-1.
  * Bytes after the last complete batch are rejected with CORRUPT_MESSAGE (Kafka silently trims them).
  * offset_of_max_timestamp is the *shallow* offset, the last offset of the batch holding the max
    timestamp, which is what Kafka >= 3.8 writes into the time index (docs/STORAGE.md "Segments and indexes").
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tidelog.config.log_config import LONG_MAX, LogConfig
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    TIMESTAMP_TYPE_MASK,
    RecordBatchHeader,
    crc_is_valid,
    read_header,
    set_base_offset,
    set_partition_leader_epoch,
    write_crc,
)
from tidelog.protocol.records import (
    CREATE_TIME,
    GZIP,
    LOG_APPEND_TIME,
    LZ4,
    ZSTD,
    CorruptRecordError,
    Record,
    RecordSummary,
    build_batch,
    codec_for_name,
    iter_records,
    scan_records,
)

_ATTRS = struct.Struct(">h")
_INT64 = struct.Struct(">q")
NO_TIMESTAMP = -1
CURRENT_MAGIC = 2


@dataclass(slots=True)
class ValidationResult:
    records: bytes | bytearray  # the batch(es), base offsets/epoch/LogAppendTime/CRC already set
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless LogAppendTime
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    is_transactional: bool
    record_count: int


def _invalid(msg: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_RECORD, msg)


def _record_errors_error(code: ErrorCode, errors: list[tuple[int, str]]) -> KafkaError:
    shown = "; ".join(f"record {i}: {m}" for i, m in errors[:3])
    exc = KafkaError(code, f"{len(errors)} record(s) rejected (first errors: {shown})")
    exc.record_errors = errors  # Produce v8+ returns them per partition
    return exc


def _parse_batches(buf: bytearray) -> list[tuple[int, RecordBatchHeader]]:
    batches: list[tuple[int, RecordBatchHeader]] = []
    pos = 0
    end = len(buf)
    while pos < end:
        if end - pos < HEADER_SIZE:
            # The magic byte sits at offset 16 in every message format, so check it first when present.
            if end - pos > MAGIC_OFFSET and buf[pos + MAGIC_OFFSET] != CURRENT_MAGIC:
                raise _invalid(f"record batch magic {buf[pos + MAGIC_OFFSET]} is not 2")
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record batch is smaller than the 61-byte header")
        if buf[pos + MAGIC_OFFSET] != CURRENT_MAGIC:
            # Produce v3+ only carries magic 2 (ProduceRequest.validateRecords; Kafka 4 has no v0/v1 at all).
            raise _invalid(f"record batch magic {buf[pos + MAGIC_OFFSET]} is not 2")
        header = read_header(buf, pos)
        if header.length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > end:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record batch length is invalid or truncated")
        batches.append((pos, header))
        pos += header.size
    return batches


def _check_batch(buf: bytearray, pos: int, h: RecordBatchHeader, config: LogConfig, from_client: bool) -> None:
    # Order as in UnifiedLog.analyzeAndValidateRecords, then LogValidator.validateBatch.
    if from_client and h.base_offset != 0:
        raise _invalid(f"the base offset of a produced batch must be 0, not {h.base_offset}")
    if h.size > config.max_message_bytes:
        raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                         f"batch of {h.size} bytes exceeds max.message.bytes {config.max_message_bytes}")
    if not crc_is_valid(buf, pos, h):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record batch CRC mismatch")
    if h.last_offset_delta < 0 or h.records_count <= 0 or h.last_offset_delta + 1 != h.records_count:
        raise _invalid(f"record count {h.records_count} does not match last offset delta {h.last_offset_delta}")
    if h.is_control and from_client:
        raise _invalid("clients may not write control batches")
    # Kafka checks this only for AppendOrigin.CLIENT: TxnOffsetCommit batches carry NO_SEQUENCE
    if from_client and h.producer_id >= 0 and h.base_sequence < 0 and not h.is_control:
        raise _invalid("a batch with a producer id must have a base sequence")
    if from_client and h.is_log_append_time:
        raise KafkaError(ErrorCode.INVALID_TIMESTAMP, "clients may not set the LogAppendTime timestamp type")


def _record_errors(records: list[RecordSummary], config: LogConfig, now_ms: int, check_ts: bool,
                   is_control: bool) -> tuple[ErrorCode, list[tuple[int, str]]] | None:
    errors: list[tuple[int, str]] = []
    code = ErrorCode.INVALID_RECORD
    lo = now_ms - config.message_timestamp_before_max_ms
    hi = now_ms + config.message_timestamp_after_max_ms
    for index, rec in enumerate(records):
        if config.compact and rec.key_is_null and not is_control:
            errors.append((index, "Compacted topic cannot accept message without key."))
        elif check_ts and rec.timestamp != NO_TIMESTAMP and not lo <= rec.timestamp <= hi:
            # Kafka reports INVALID_TIMESTAMP when any record error is a timestamp error.
            code = ErrorCode.INVALID_TIMESTAMP
            errors.append((index, f"timestamp {rec.timestamp} is out of range [{lo}, {hi}]"))
    return (code, errors) if errors else None


def validate_records(records: bytes | bytearray | memoryview, config: LogConfig, next_offset: int,
                     leader_epoch: int, now_ms: int, from_client: bool = True) -> ValidationResult:
    """Validate `records` and assign offsets from `next_offset`. Raises KafkaError; never returns partial work."""
    buf = bytearray(records)
    if not buf:
        raise _invalid("produce request has no record batch")
    batches = _parse_batches(buf)
    if from_client and len(batches) != 1:
        raise _invalid("a produce request must carry exactly one record batch per partition")

    log_append = config.log_append_time
    append_time = now_ms if log_append else NO_TIMESTAMP
    check_ts = not log_append and (config.message_timestamp_before_max_ms < LONG_MAX
                                   or config.message_timestamp_after_max_ms < LONG_MAX)
    target_name = config.compression_type
    out_parts: list[bytearray] | None = None  # set once any batch is rebuilt
    offset = next_offset
    max_ts = NO_TIMESTAMP
    offset_of_max_ts = -1
    record_count = 0

    for index, (pos, h) in enumerate(batches):
        _check_batch(buf, pos, h, config, from_client)
        target = h.compression if target_name == "producer" else codec_for_name(target_name)
        # Markers are never recompressed (Kafka writes them uncompressed whatever the topic says).
        rebuild = target != h.compression and not h.is_control
        need_ts = check_ts and (config.message_timestamp_before_max_ms < LONG_MAX
                                or h.max_timestamp > now_ms + config.message_timestamp_after_max_ms)
        summaries: list[RecordSummary] | None = None
        if rebuild or need_ts or (config.compact and not h.is_control):
            try:
                summaries = scan_records(buf, pos)
            except CorruptRecordError as exc:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from exc
            problems = _record_errors(summaries, config, now_ms, need_ts, h.is_control)
            if problems:
                raise _record_errors_error(*problems)
            if any(r.offset_delta != i for i, r in enumerate(summaries)):
                # Kafka rebuilds a compressed batch whose inner offsets are not 0..n-1; doing the same for
                # an uncompressed one (Kafka leaves it) keeps compacted logs readable by every client.
                rebuild = True

        if rebuild:
            try:
                decoded = list(iter_records(buf, pos))
            except CorruptRecordError as exc:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from exc
            rebuilt = build_batch(
                [Record(offset + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(decoded)],
                offset, compression=target, compression_level=_level(config, target),
                producer_id=h.producer_id, producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                is_transactional=h.is_transactional, is_control=h.is_control,
                partition_leader_epoch=leader_epoch,
                timestamp_type=LOG_APPEND_TIME if log_append else CREATE_TIME, log_append_time=append_time,
            )
            if len(rebuilt) > config.max_message_bytes:
                raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                                 f"recompressed batch of {len(rebuilt)} bytes exceeds max.message.bytes")
            batch_max_ts = read_header(rebuilt, 0).max_timestamp
            count = len(decoded)
            if out_parts is None:
                out_parts = [buf[p:p + hh.size] for p, hh in batches[:index]]
            out_parts.append(rebuilt)
        else:
            count = h.last_offset_delta + 1
            set_base_offset(buf, pos, offset)
            set_partition_leader_epoch(buf, pos, leader_epoch)
            batch_max_ts = _stamp_timestamps(buf, pos, h, log_append, now_ms, summaries)
            if out_parts is not None:
                out_parts.append(buf[pos:pos + h.size])
        last = offset + count - 1
        if batch_max_ts > max_ts:
            max_ts, offset_of_max_ts = batch_max_ts, last
        offset = last + 1
        record_count += count

    result = buf if out_parts is None else bytearray().join(out_parts)
    if len(result) > config.segment_bytes:
        raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE,
                         f"append of {len(result)} bytes exceeds segment.bytes {config.segment_bytes}")
    first_h = batches[0][1]
    last_h = batches[-1][1]
    if offset_of_max_ts < 0:
        offset_of_max_ts = offset - 1
    return ValidationResult(
        records=result, first_offset=next_offset, last_offset=offset - 1,
        max_timestamp=max_ts, offset_of_max_timestamp=offset_of_max_ts, log_append_time=append_time,
        producer_id=first_h.producer_id, producer_epoch=first_h.producer_epoch,
        base_sequence=first_h.base_sequence, last_sequence=last_h.last_sequence,
        is_transactional=first_h.is_transactional, record_count=record_count,
    )


def _stamp_timestamps(buf: bytearray, pos: int, h: RecordBatchHeader, log_append: bool, now_ms: int,
                      summaries: list[RecordSummary] | None) -> int:
    """Set MaxTimestamp and the timestamp-type bit in place; recompute the CRC only if either changed."""
    attrs = h.attributes
    if log_append:
        new_attrs, new_max = attrs | TIMESTAMP_TYPE_MASK, now_ms
    else:
        # CreateTime topic: the attributes stay as they are (a client's LogAppendTime bit was already
        # rejected; the broker's own writes keep theirs, as Kafka's in-place path does).
        new_attrs = attrs
        # With the records at hand, correct a wrong MaxTimestamp as Kafka does; otherwise trust the header.
        new_max = (max((r.timestamp for r in summaries), default=NO_TIMESTAMP) if summaries
                   else h.max_timestamp)
    if new_attrs != attrs or new_max != h.max_timestamp:
        _ATTRS.pack_into(buf, pos + 21, new_attrs)
        _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, new_max)
        write_crc(buf, pos, h.size)
    return new_max


def _level(config: LogConfig, codec: int) -> int | None:
    if codec == GZIP:
        return config.compression_gzip_level
    if codec == LZ4:
        return config.compression_lz4_level
    if codec == ZSTD:
        return config.compression_zstd_level
    return None
