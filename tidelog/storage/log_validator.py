"""What the leader checks and changes before an append (Kafka's LogValidator + the batch checks of
UnifiedLog.analyzeAndValidateRecords): docs/STORAGE.md "Validation".

Every record of every batch is walked (protocol/record_walk.py), as Kafka's LogValidator iterates them: record
lengths, varints, key/value/header bounds, header counts, RecordsCount against the records present. A compressed
batch is walked as a bounded stream (protocol/inflaters.py); nothing is kept of it unless it must be rebuilt.
Errors: a malformed record -> INVALID_RECORD (Kafka's InvalidRecordException); an undecodable compressed payload
-> CORRUPT_MESSAGE; codec ids 5-7 -> UNSUPPORTED_COMPRESSION_TYPE; a payload expanding past
`max_decompressed_bytes` -> INVALID_RECORD (Kafka trunk's max.decompressed.message.bytes answers the same).
Unused attribute bits (7-15 of a batch, the record attributes byte) are ignored, as Kafka ignores them.

Hot path: the common produced batch takes `_validate_fast` (header, CRC, inflating a compressed payload of at most
1 MiB whole, record walk, timestamp bounds and stamping in one C call, protocol/_record_walk.c `check_batch`),
which only ever accepts: anything else, valid or not, is validated again by the full path,
which alone answers errors. An uncompressed batch, or a batch already in the target codec with inner offsets 0..n-1,
is changed in place (BaseOffset and PartitionLeaderEpoch sit outside the CRC; MaxTimestamp and, for LogAppendTime,
the timestamp-type bit are rewritten with the CRC only when they change).

Divergences from Kafka, on purpose:
  * Bytes after the last complete batch are rejected with CORRUPT_MESSAGE (Kafka silently trims them).
  * An uncompressed batch whose inner offsets are not 0..n-1 is rebuilt (Kafka only rebuilds compressed ones).
  * A compressed batch expanding past 64 MiB is refused (Kafka 4.3 has no such bound).
  * Kafka answers UNKNOWN_SERVER_ERROR for codec ids 5-7 and for undecodable compressed payloads (an
    IllegalArgumentException / KafkaException it does not map); see the error choices above.
  * offset_of_max_timestamp is the *shallow* offset, the last offset of the batch holding the max
    timestamp, which is what Kafka >= 3.8 writes into the time index (docs/STORAGE.md "Segments and indexes").
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from tidelog.config.log_config import LONG_MAX, LogConfig
from tidelog.protocol import record_walk
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.inflaters import CorruptPayloadError, inflater, lz4_whole
from tidelog.protocol.primitives import int64
from tidelog.protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    RecordBatchHeader,
    crc_is_valid,
    read_header,
    set_base_offset,
    set_partition_leader_epoch,
    write_crc,
)
from tidelog.protocol.record_walk import DEFAULT_MAX_DECOMPRESSED_BYTES, RecordWalk, walk_batch
from tidelog.protocol.records import (
    CODEC_NAMES,
    CREATE_TIME,
    GZIP,
    LOG_APPEND_TIME,
    LZ4,
    ZSTD,
    CorruptRecordError,
    Record,
    build_batch,
    codec_for_name,
    iter_records,
)

Buffer = bytearray | memoryview  # a writable buffer holding the request's record batches
# A check of one produced record's key and value beyond Kafka's (Confluent's Schema ID Validation): the reason it is
# refused, or None. Given to `validate_records` by the broker for topics that ask for it.
RecordCheck = Callable[[bytes | None, bytes | None], str | None]

_ATTRS = struct.Struct(">h")
_INT64 = struct.Struct(">q")
NO_TIMESTAMP = -1
CURRENT_MAGIC = 2
_INT64_MIN = -(1 << 63)
FAST_INFLATE_BYTES = 1 << 20  # a compressed batch expanding to more is walked as a stream (the full path)


@dataclass(slots=True)
class ValidationResult:
    records: bytes | bytearray | memoryview  # the batch(es), base offsets/epoch/LogAppendTime/CRC already set
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
    headers: list[RecordBatchHeader] | None = None  # the batches' headers as written, when already at hand


def _invalid(msg: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_RECORD, msg)


def _record_errors_error(code: ErrorCode, errors: list[tuple[int, str]]) -> KafkaError:
    shown = "; ".join(f"record {i}: {m}" for i, m in errors[:3])
    exc = KafkaError(code, f"{len(errors)} record(s) rejected (first errors: {shown})")
    exc.record_errors = errors  # Produce v8+ returns them per partition
    return exc


def _parse_batches(buf: Buffer) -> list[tuple[int, RecordBatchHeader]]:
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


def _check_batch(buf: Buffer, pos: int, h: RecordBatchHeader, config: LogConfig, from_client: bool) -> None:
    # Order as in UnifiedLog.analyzeAndValidateRecords, then LogValidator.validateBatch.
    if from_client and h.base_offset != 0:
        raise _invalid(f"the base offset of a produced batch must be 0, not {h.base_offset}")
    if h.size > config.max_message_bytes:
        raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                         f"batch of {h.size} bytes exceeds max.message.bytes {config.max_message_bytes}")
    if not crc_is_valid(buf, pos, h):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record batch CRC mismatch")
    if h.compression > ZSTD:
        # Kafka's CompressionType.forId has no codec 5-7 (it fails there with an IllegalArgumentException, an
        # UNKNOWN_SERVER_ERROR); the error that names the problem, and that no client retries, is this one.
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec {h.compression}")
    if h.last_offset_delta < 0 or h.records_count <= 0 or h.last_offset_delta + 1 != h.records_count:
        raise _invalid(f"record count {h.records_count} does not match last offset delta {h.last_offset_delta}")
    if h.is_control and from_client:
        raise _invalid("clients may not write control batches")
    # Kafka checks this only for AppendOrigin.CLIENT: TxnOffsetCommit batches carry NO_SEQUENCE
    if from_client and h.producer_id >= 0 and h.base_sequence < 0 and not h.is_control:
        raise _invalid("a batch with a producer id must have a base sequence")
    if from_client and h.is_log_append_time:
        raise KafkaError(ErrorCode.INVALID_TIMESTAMP, "clients may not set the LogAppendTime timestamp type")


def _walk(buf: Buffer, pos: int, h: RecordBatchHeader, want_null_keys: bool, want_ts_deltas: bool,
          max_decompressed_bytes: int) -> RecordWalk:
    try:
        return walk_batch(buf, pos, h, want_null_keys=want_null_keys, want_ts_deltas=want_ts_deltas,
                          max_decompressed_bytes=max_decompressed_bytes)
    except CorruptPayloadError as exc:
        # Kafka surfaces a codec failure as a KafkaException (UNKNOWN_SERVER_ERROR); CORRUPT_MESSAGE says what
        # it is and is what a client can act on (docs/INTERNALS.md, "Rules").
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"compressed records cannot be decoded: {exc}") from None
    except CorruptRecordError as exc:  # InvalidRecordError, DecompressedSizeError
        raise _invalid(str(exc)) from None


def _record_errors(buf: Buffer, pos: int, h: RecordBatchHeader, walk: RecordWalk, config: LogConfig,
                   now_ms: int, check_ts: bool, max_decompressed_bytes: int) -> None:
    """Kafka's per-record checks (LogValidator.validateRecord): a null key on a compacted topic, then a CreateTime
    timestamp out of range. Raises INVALID_RECORD, or INVALID_TIMESTAMP when any error is a timestamp error,
    with every record's error in `record_errors` (Produce v8+)."""
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    lo, hi = now_ms - before, now_ms + after
    # the per-record pass when a bound may be crossed or a BaseTimestamp + TimestampDelta leaves int64 (it then
    # wraps, as in Kafka, and the wrapped timestamp is what is checked)
    ts_bad = (check_ts and not h.is_log_append_time and walk.count > 0
              and (h.base_timestamp + walk.min_ts_delta < max(lo, _INT64_MIN)
                   or h.base_timestamp + walk.max_ts_delta > min(hi, LONG_MAX)))
    if not walk.null_key_indexes and not ts_bad:
        return
    deltas = _walk(buf, pos, h, False, True, max_decompressed_bytes).ts_deltas if ts_bad else None
    null_keys = set(walk.null_key_indexes)
    errors: list[tuple[int, str]] = []
    code = ErrorCode.INVALID_RECORD
    for index in range(walk.count):
        if index in null_keys:
            errors.append((index, "Compacted topic cannot accept message without key."))
        elif deltas is not None:
            ts = int64(h.base_timestamp + deltas[index])
            # LogValidator.recordHasInvalidTimestamp, in Java long arithmetic (a difference may wrap too)
            diff = int64(now_ms - ts)
            if ts != NO_TIMESTAMP and (diff > before or int64(-diff) > after):
                code = ErrorCode.INVALID_TIMESTAMP
                errors.append((index, f"Timestamp {ts} of message with offset {index} is out of range. "
                                      f"The timestamp should be within [{int64(lo)}, {int64(hi)}]"))
    if errors:
        raise _record_errors_error(code, errors)


def _checked_records(buf: Buffer, pos: int, record_check: RecordCheck) -> None:
    """`record_check` on every record of the batch; any refusal refuses the whole batch with INVALID_RECORD and
    each refused record's index and reason in `record_errors`, as LogValidator answers its own record errors."""
    try:
        errors = [(index, reason) for index, record in enumerate(iter_records(buf, pos))
                  if (reason := record_check(record.key, record.value)) is not None]
    except CorruptRecordError as exc:
        raise _invalid(str(exc)) from None
    if errors:
        raise _record_errors_error(ErrorCode.INVALID_RECORD, errors)


def _records_max_timestamp(buf: Buffer, pos: int, h: RecordBatchHeader, walk: RecordWalk,
                           max_decompressed_bytes: int) -> int:
    """The largest record timestamp. A BaseTimestamp + TimestampDelta past the int64 range wraps around as in
    Kafka (Java long arithmetic), so the largest is then found record by record."""
    low, high = h.base_timestamp + walk.min_ts_delta, h.base_timestamp + walk.max_ts_delta
    if _INT64_MIN <= low and high <= LONG_MAX:
        return high
    deltas = _walk(buf, pos, h, False, True, max_decompressed_bytes).ts_deltas or []
    return max(int64(h.base_timestamp + delta) for delta in deltas)


def validate_records(records: bytes | bytearray | memoryview, config: LogConfig, next_offset: int,
                     leader_epoch: int, now_ms: int, from_client: bool = True,
                     max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
                     record_check: RecordCheck | None = None) -> ValidationResult:
    """Validate `records` and assign offsets from `next_offset`. Raises KafkaError; never returns partial work.
    `max_decompressed_bytes` bounds what one compressed batch may expand to (a decompression bomb).
    `record_check` (a client's batch only) refuses records beyond Kafka's checks; such a batch takes the full path,
    where the records are decoded."""
    # A request's records arrive as a writable view of its frame (broker/frame_stream.py): offsets, epoch and
    # timestamps are set in place there, with no copy. Read-only input (bytes) is copied once.
    buf = records if isinstance(records, memoryview) and not records.readonly else bytearray(records)
    if not buf:
        raise _invalid("produce request has no record batch")
    if not from_client:
        record_check = None
    if record_check is None and from_client and record_walk.check_batch is not None:
        fast = _validate_fast(buf, config, next_offset, leader_epoch, now_ms, max_decompressed_bytes)
        if fast is not None:
            return fast
    batches = _parse_batches(buf)
    if from_client and len(batches) != 1:
        raise _invalid("a produce request must carry exactly one record batch per partition")

    log_append = config.log_append_time
    append_time = now_ms if log_append else NO_TIMESTAMP
    check_ts = not log_append and (config.message_timestamp_before_max_ms < LONG_MAX
                                   or config.message_timestamp_after_max_ms < LONG_MAX)
    target_name = config.compression_type
    out_parts: list[bytearray | memoryview] | None = None  # set once any batch is rebuilt
    offset = next_offset
    max_ts = NO_TIMESTAMP
    offset_of_max_ts = -1
    record_count = 0

    for index, (pos, h) in enumerate(batches):
        _check_batch(buf, pos, h, config, from_client)
        # Every record of every batch is walked, as Kafka's LogValidator iterates them (DefaultRecord.readFrom).
        walk = _walk(buf, pos, h, config.compact and not h.is_control, False, max_decompressed_bytes)
        _record_errors(buf, pos, h, walk, config, now_ms, check_ts, max_decompressed_bytes)
        if record_check is not None and not h.is_control:
            _checked_records(buf, pos, record_check)
        target = h.compression if target_name == "producer" else codec_for_name(target_name)
        # Markers are never recompressed (Kafka writes them uncompressed whatever the topic says). Kafka rebuilds a
        # compressed batch whose inner offsets are not 0..n-1; doing the same for an uncompressed one (Kafka
        # leaves it) keeps compacted logs readable by every client.
        rebuild = (target != h.compression and not h.is_control) or not walk.offsets_in_order

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
            if h.is_log_append_time or walk.count == 0:
                records_max = h.max_timestamp
            else:
                records_max = _records_max_timestamp(buf, pos, h, walk, max_decompressed_bytes)
            batch_max_ts = _stamp_timestamps(buf, pos, h, log_append, now_ms, records_max)
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


def _validate_fast(buf: Buffer, config: LogConfig, next_offset: int, leader_epoch: int, now_ms: int,
                   max_decompressed_bytes: int) -> ValidationResult | None:
    """The common produce append in one pass: one valid batch kept as it is (no rebuild), checked and stamped by
    one C call (`_record_walk.check_batch`: header, CRC, a compressed payload expanding to at most
    FAST_INFLATE_BYTES inflated whole by `_inflate_small`, the record walk, timestamp bounds, then BaseOffset,
    epoch and MaxTimestamp/CRC in place) — the checks of _check_batch and _record_errors. None for anything else,
    valid or not: the full path then validates again, as a bounded stream, and owns every error answer."""
    check = record_walk.check_batch
    if check is None:
        return None
    target = config.compression_type
    target_codec = -1 if target == "producer" else CODEC_NAMES.get(target, -2)
    log_append = config.log_append_time
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    if not log_append and (before < LONG_MAX or after < LONG_MAX):
        lo, hi = max(now_ms - before, _INT64_MIN), min(now_ms + after, LONG_MAX)
    else:
        lo, hi = _INT64_MIN, LONG_MAX
    fields = check(buf, next_offset, leader_epoch, now_ms, config.max_message_bytes, config.segment_bytes,
                   target_codec, config.compact, lo, hi, log_append, _inflate_small,
                   min(FAST_INFLATE_BYTES, max_decompressed_bytes))
    if fields is None:
        return None
    written = RecordBatchHeader(*fields)
    last = next_offset + written.records_count - 1
    return ValidationResult(buf, next_offset, last, written.max_timestamp, last,
                            now_ms if log_append else NO_TIMESTAMP, written.producer_id, written.producer_epoch,
                            written.base_sequence, written.last_sequence,
                            bool(written.attributes & TRANSACTIONAL_FLAG), written.records_count, [written])


def _inflate_small(codec: int, payload: memoryview, cap: int) -> bytes | None:
    """The whole decompressed payload when it is at most `cap` bytes, else None; None too for a payload that does
    not decode (the full path answers it)."""
    if codec == LZ4:
        return lz4_whole(payload, cap)
    parts: list[bytes] = []
    total = 0
    try:
        source = inflater(codec, payload, cap)
        while chunk := source.read(cap):
            parts.append(chunk)
            total += len(chunk)
    except CorruptRecordError:  # CorruptPayloadError, DecompressedSizeError
        return None
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _stamp_timestamps(buf: Buffer, pos: int, h: RecordBatchHeader, log_append: bool, now_ms: int,
                      records_max: int) -> int:
    """Set MaxTimestamp and the timestamp-type bit in place; recompute the CRC only if either changed."""
    attrs = h.attributes
    if log_append:
        new_attrs, new_max = attrs | TIMESTAMP_TYPE_MASK, now_ms
    else:
        # CreateTime topic: the attributes stay as they are (a client's LogAppendTime bit was already
        # rejected; the broker's own writes keep theirs, as Kafka's in-place path does). MaxTimestamp becomes the
        # largest record timestamp, as Kafka's in-place path sets it.
        new_attrs, new_max = attrs, records_max
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
