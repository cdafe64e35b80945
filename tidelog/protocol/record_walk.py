"""Walk every record of a RecordBatch v2 without decoding keys, values or headers (Kafka's LogValidator reads
every record of a produced batch: DefaultRecordBatch's record iterators over DefaultRecord.readFrom).

Each record must parse exactly as DefaultRecord.readFrom parses it: a varint length, then attributes, a varlong
timestamp delta, varint offset delta, key and value (varint length, -1 or any negative = null), a varint header
count (0 <= count <= bytes left), each header a non-negative key length, its bytes, and a value length; the fields
must end exactly at the declared length, and after RecordsCount records nothing may remain. Any violation raises
`InvalidRecordError` (Kafka's InvalidRecordException: INVALID_RECORD).

A compressed batch is walked as a bounded stream (protocol/inflaters.py): records are parsed chunk by chunk and a
large key or value is skipped without holding it, so memory stays at one chunk plus one ordinary record whatever the
payload expands to.

The uncompressed loop is the produce hot path: one function, varints decoded inline with one- and two-byte fast
paths, no per-record allocation; an optional C accelerator (_record_walk.c, built by setup.py) runs the same walk
about 50x faster and is used when present (TIDELOG_PURE_PYTHON=1 forces the Python walk).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tidelog.accelerators import load
from tidelog.protocol.inflaters import Inflater, inflater
from tidelog.protocol.record_batch import HEADER_SIZE, RecordBatchHeader
from tidelog.protocol.records import NONE, CorruptRecordError

CHUNK = 64 * 1024  # decompressed bytes pulled at a time
BIG_RECORD = 1024 * 1024  # records longer than this are skipped field by field instead of buffered whole
DEFAULT_MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


_accelerator = load("tidelog.protocol._record_walk")  # None: the Python walk
_c_walk: Callable[..., tuple[int, int, int, int, bool, str | None]] | None = getattr(_accelerator, "walk", None)
# check_batch(buf, next_offset, leader_epoch, now_ms, max_message_bytes, segment_bytes, target_codec, compact,
# ts_lo, ts_hi, log_append_time, inflate, inflate_cap) -> the stamped header's fields, or None: the whole
# fast-lane check of one batch in one call (header, CRC, inflating a compressed one through `inflate`, record
# walk, timestamps, stamping); see _record_walk.c.
check_batch: Callable[..., tuple[int, ...] | None] | None = getattr(_accelerator, "check_batch", None)
if _accelerator is not None and check_batch is not None:
    from tidelog.protocol import crc as _crc

    _accelerator.set_crc(_crc.crc32c)


class InvalidRecordError(CorruptRecordError):
    """A record does not parse (Kafka: InvalidRecordException -> INVALID_RECORD)."""


@dataclass(slots=True)
class RecordWalk:
    """What the validator needs of a batch's records."""

    count: int = 0
    min_ts_delta: int = 0
    max_ts_delta: int = 0
    offsets_in_order: bool = True  # offset deltas are exactly 0..count-1
    null_key_indexes: list[int] = field(default_factory=list)  # filled only when asked for
    ts_deltas: list[int] | None = None  # every record's timestamp delta, only when asked for
    decompressed_bytes: int = 0


def _varint(data: bytes | bytearray | memoryview, p: int, end: int, max_bytes: int) -> tuple[int, int]:
    """Slow path of a zig-zag varint at `p` (varint: 5 bytes max, varlong: 10, as Kafka's ByteUtils). Raises
    IndexError when `end` comes first: the caller decides between "need more" and "premature end"."""
    value = shift = 0
    for _ in range(max_bytes):
        if p >= end:
            raise IndexError
        b = data[p]
        p += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            value &= 0xFFFFFFFFFFFFFFFF  # bits past 64 are dropped, as Java's long arithmetic drops them
            value = (value >> 1) ^ -(value & 1)
            if max_bytes == 5 and not _INT32_MIN <= value <= _INT32_MAX:
                raise InvalidRecordError("varint does not fit an int32")
            return value, p
        shift += 7
    raise InvalidRecordError("varint is too long")


def walk_uncompressed(data: bytes | bytearray | memoryview, pos: int, end: int, index: int, count: int, walk: RecordWalk,
                      want_null_keys: bool, partial: bool) -> tuple[int, int]:
    """Walk records `index..count-1` laid out in data[pos:end]; return (position, index) after the last complete
    record. With `partial`, stop at a record that is not complete yet (the caller fetches more); otherwise that is
    a premature end. Updates `walk` (timestamp delta range, order, null keys). Runs the C accelerator when it
    was built (and no per-record timestamp list is wanted), else `_walk_py`: both give the same answers."""
    if _c_walk is None or walk.ts_deltas is not None:
        return _walk_py(data, pos, end, index, count, walk, want_null_keys, partial)
    pos, index, walk.min_ts_delta, walk.max_ts_delta, walk.offsets_in_order, error = _c_walk(
        data, pos, end, index, count, want_null_keys, partial, walk.min_ts_delta, walk.max_ts_delta,
        walk.offsets_in_order, walk.null_key_indexes)
    if error is not None:
        raise InvalidRecordError(error)
    if index < count and not partial:
        raise InvalidRecordError("Incorrect declared batch size, premature EOF reached")
    return pos, index


def _walk_py(data: bytes | bytearray | memoryview, pos: int, end: int, index: int, count: int, walk: RecordWalk,
             want_null_keys: bool, partial: bool) -> tuple[int, int]:
    lo, hi, in_order = walk.min_ts_delta, walk.max_ts_delta, walk.offsets_in_order
    if index == 0:
        lo, hi = _INT64_MAX, _INT64_MIN
    ts_list = walk.ts_deltas
    null_keys = walk.null_key_indexes
    varint = _varint
    try:
        while index < count:
            # Length
            if pos >= end:
                break
            b = data[pos]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), pos + 1
            else:
                try:
                    length, p = varint(data, pos, end, 5)
                except IndexError:
                    break  # the length itself is cut: "need more", or a premature end below
            if length <= 0:
                raise InvalidRecordError(f"record {index} has an invalid length {length}")
            rend = p + length
            if rend > end:
                break
            p += 1  # attributes: unused (Kafka ignores them)
            # TimestampDelta (varlong)
            b = data[p]
            if b < 0x80:
                d, p = (b >> 1) ^ -(b & 1), p + 1
            elif (c := data[p + 1]) < 0x80:  # two bytes: deltas and lengths up to 8191
                b = (b & 0x7F) | (c << 7)
                d, p = (b >> 1) ^ -(b & 1), p + 2
            else:
                d, p = varint(data, p, rend, 10)
            if d < lo:
                lo = d
            if d > hi:
                hi = d
            if ts_list is not None:
                ts_list.append(d)
            # OffsetDelta
            b = data[p]
            if b < 0x80:
                d, p = (b >> 1) ^ -(b & 1), p + 1
            elif (c := data[p + 1]) < 0x80:  # two bytes: deltas and lengths up to 8191
                b = (b & 0x7F) | (c << 7)
                d, p = (b >> 1) ^ -(b & 1), p + 2
            else:
                d, p = varint(data, p, rend, 5)
            if d != index:
                in_order = False
            # Key
            b = data[p]
            if b < 0x80:
                n, p = (b >> 1) ^ -(b & 1), p + 1
            elif (c := data[p + 1]) < 0x80:  # two bytes: deltas and lengths up to 8191
                b = (b & 0x7F) | (c << 7)
                n, p = (b >> 1) ^ -(b & 1), p + 2
            else:
                n, p = varint(data, p, rend, 5)
            if n >= 0:
                p += n
            elif want_null_keys:
                null_keys.append(index)
            # Value
            b = data[p]
            if b < 0x80:
                n, p = (b >> 1) ^ -(b & 1), p + 1
            elif (c := data[p + 1]) < 0x80:  # two bytes: deltas and lengths up to 8191
                b = (b & 0x7F) | (c << 7)
                n, p = (b >> 1) ^ -(b & 1), p + 2
            else:
                n, p = varint(data, p, rend, 5)
            if n > 0:
                p += n
            # Headers
            b = data[p]
            if b < 0x80:
                n, p = (b >> 1) ^ -(b & 1), p + 1
            elif (c := data[p + 1]) < 0x80:  # two bytes: deltas and lengths up to 8191
                b = (b & 0x7F) | (c << 7)
                n, p = (b >> 1) ^ -(b & 1), p + 2
            else:
                n, p = varint(data, p, rend, 5)
            if n:
                if n < 0 or n > rend - p:
                    raise InvalidRecordError(f"record {index} has an invalid header count {n}")
                for _ in range(n):
                    b = data[p]
                    if b < 0x80:
                        k, p = (b >> 1) ^ -(b & 1), p + 1
                    elif (c := data[p + 1]) < 0x80:  # two bytes: deltas and lengths up to 8191
                        b = (b & 0x7F) | (c << 7)
                        k, p = (b >> 1) ^ -(b & 1), p + 2
                    else:
                        k, p = varint(data, p, rend, 5)
                    if k < 0:
                        raise InvalidRecordError(f"record {index} has a header with a negative key size {k}")
                    p += k
                    b = data[p]
                    if b < 0x80:
                        k, p = (b >> 1) ^ -(b & 1), p + 1
                    elif (c := data[p + 1]) < 0x80:  # two bytes: deltas and lengths up to 8191
                        b = (b & 0x7F) | (c << 7)
                        k, p = (b >> 1) ^ -(b & 1), p + 2
                    else:
                        k, p = varint(data, p, rend, 5)
                    if k > 0:
                        p += k
            if p != rend:
                raise InvalidRecordError(
                    f"record {index}: expected to read {length} bytes in record payload, but read {p - (rend - length)}")
            pos = rend
            index += 1
    except IndexError:
        # a field ran past the end of the data: past the record's own length too, since rend <= end
        raise InvalidRecordError(f"record {index} runs past its declared length") from None
    walk.min_ts_delta, walk.max_ts_delta, walk.offsets_in_order = lo, hi, in_order
    if index < count and not partial:
        raise InvalidRecordError("Incorrect declared batch size, premature EOF reached")
    return pos, index


class _Stream:
    """A window over an Inflater's output: `buf[pos:]` is read but not yet walked."""

    __slots__ = ("src", "buf", "pos", "eof")

    def __init__(self, src: Inflater) -> None:
        self.src = src
        self.buf = b""
        self.pos = 0
        self.eof = False

    def fill(self, need: int) -> bool:
        """Make at least `need` unread bytes available; False if the stream ends first."""
        have = len(self.buf) - self.pos
        parts = [self.buf[self.pos:]] if have else []
        while have < need and not self.eof:
            chunk = self.src.read(max(CHUNK, need - have))
            if not chunk:
                self.eof = True
                break
            parts.append(chunk)
            have += len(chunk)
        self.buf = b"".join(parts)
        self.pos = 0
        return have >= need

    def varint(self, max_bytes: int) -> int:
        self.fill(max_bytes)
        try:
            value, self.pos = _varint(self.buf, self.pos, len(self.buf), max_bytes)
        except IndexError:
            raise InvalidRecordError("Incorrect declared batch size, premature EOF reached") from None
        return value

    def skip(self, n: int) -> None:
        while n > 0:
            if not self.fill(1):
                raise InvalidRecordError("Incorrect declared batch size, premature EOF reached")
            step = min(n, len(self.buf) - self.pos)
            self.pos += step
            n -= step

    @property
    def consumed(self) -> int:
        return self.src.produced - (len(self.buf) - self.pos)


def _walk_big_record(s: _Stream, index: int, walk: RecordWalk, want_null_keys: bool) -> None:
    """One record too long to buffer: its fields are read from the stream and its bytes skipped."""
    length = s.varint(5)
    start = s.consumed
    s.skip(1)  # attributes
    d = s.varint(10)
    walk.min_ts_delta = min(walk.min_ts_delta, d) if index else d
    walk.max_ts_delta = max(walk.max_ts_delta, d) if index else d
    if walk.ts_deltas is not None:
        walk.ts_deltas.append(d)
    if s.varint(5) != index:
        walk.offsets_in_order = False
    n = s.varint(5)
    if n >= 0:
        s.skip(n)
    elif want_null_keys:
        walk.null_key_indexes.append(index)
    n = s.varint(5)
    if n > 0:
        s.skip(n)
    headers = s.varint(5)
    if headers < 0 or headers > length:
        raise InvalidRecordError(f"record {index} has an invalid header count {headers}")
    for _ in range(headers):
        k = s.varint(5)
        if k < 0:
            raise InvalidRecordError(f"record {index} has a header with a negative key size {k}")
        s.skip(k)
        k = s.varint(5)
        if k > 0:
            s.skip(k)
    if s.consumed - start != length:
        raise InvalidRecordError(f"record {index}: expected to read {length} bytes in record payload, "
                                 f"but read {s.consumed - start}")


def _walk_compressed(src: Inflater, count: int, walk: RecordWalk, want_null_keys: bool) -> None:
    s = _Stream(src)
    index = 0
    while index < count:
        s.pos, index = walk_uncompressed(s.buf, s.pos, len(s.buf), index, count, walk, want_null_keys, True)
        if index >= count:
            break
        # The record at s.pos is not complete in the window: how long is it?
        s.fill(5)
        if s.pos >= len(s.buf):
            raise InvalidRecordError("Incorrect declared batch size, premature EOF reached")
        try:
            length, p = _varint(s.buf, s.pos, len(s.buf), 5)
        except IndexError:
            raise InvalidRecordError("Incorrect declared batch size, premature EOF reached") from None
        if length <= 0:
            raise InvalidRecordError(f"record {index} has an invalid length {length}")
        need = p - s.pos + length
        if need > BIG_RECORD:
            _walk_big_record(s, index, walk, want_null_keys)
            index += 1
        elif not s.fill(need):
            raise InvalidRecordError("Incorrect declared batch size, premature EOF reached")
    # DefaultRecordBatch.RecordIterator: after RecordsCount records nothing may remain.
    if len(s.buf) > s.pos or s.fill(1):
        raise InvalidRecordError("Incorrect declared batch size, records still remaining in file")
    walk.decompressed_bytes = src.produced


def walk_batch(buf: bytes | bytearray | memoryview, pos: int, header: RecordBatchHeader, *, want_null_keys: bool = False,
               want_ts_deltas: bool = False,
               max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> RecordWalk:
    """Walk the records of the batch at `buf[pos]` (its codec already known to be 0..4). Raises
    InvalidRecordError, or inflaters.CorruptPayloadError / DecompressedSizeError for a compressed payload."""
    count = header.records_count
    if count < 0:
        raise InvalidRecordError(f"Found invalid record count {count} in magic v2 batch")
    walk = RecordWalk(ts_deltas=[] if want_ts_deltas else None)
    start, end = pos + HEADER_SIZE, pos + header.size
    if header.compression == NONE:
        p, index = walk_uncompressed(buf, start, end, 0, count, walk, want_null_keys, False)
        if p != end:
            raise InvalidRecordError("Incorrect declared batch size, records still remaining in file")
    else:
        _walk_compressed(inflater(header.compression, memoryview(buf)[start:end], max_decompressed_bytes),
                         count, walk, want_null_keys)
    walk.count = count
    if count == 0:
        walk.min_ts_delta = walk.max_ts_delta = 0
    return walk
