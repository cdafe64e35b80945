"""A lean pass over the records of a batch for the cleaner: (offset, key, value-is-null) only.

The map build and the keep/drop decision need nothing else, so this skips timestamps, values and headers by
jumping over each record's length instead of decoding them (record_stream.iter_batch_records decodes everything,
for the batches the cleaner has to rebuild)."""

from __future__ import annotations

from collections.abc import Iterator

from tidelog.cleaner.record_stream import record_sections
from tidelog.cleaner.record_stream import varint as _varint
from tidelog.protocol.record_batch import RecordBatchHeader
from tidelog.protocol.records import CorruptRecordError


def scan_records(
    buf: bytes | bytearray | memoryview, pos: int, header: RecordBatchHeader
) -> Iterator[tuple[int, bytes | None, bool]]:
    """Yield (offset, key or None, value is null) for each record of the batch at buf[pos] (a compressed one read
    from a bounded stream: record_stream)."""
    base = header.base_offset
    for data, count in record_sections(buf, pos, header):
        if isinstance(data, memoryview):
            data = data.tobytes()  # indexing bytes is much faster than indexing a memoryview
        yield from _scan(data, count, base)


def _scan(data: bytes, count: int, base: int) -> Iterator[tuple[int, bytes | None, bool]]:
    """The records of one run of whole records (record_stream.record_sections)."""
    end = len(data)
    p = 0
    try:
        for _ in range(count):
            b = data[p]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), p + 1
            elif data[p + 1] < 0x80:  # records of 64 B - 8 KiB: a two-byte length, inlined
                v = (b & 0x7F) | (data[p + 1] << 7)
                length, p = (v >> 1) ^ -(v & 1), p + 2
            else:
                length, p = _varint(data, p)
            start = p
            if length < 0 or start + length > end:
                raise CorruptRecordError("record length runs past the batch")
            p += 1  # attributes
            b = data[p]
            if b < 0x80:  # timestamp delta: skipped
                p += 1
            else:
                _, p = _varint(data, p)
            b = data[p]
            if b < 0x80:
                offset_delta, p = (b >> 1) ^ -(b & 1), p + 1
            elif data[p + 1] < 0x80:
                v = (b & 0x7F) | (data[p + 1] << 7)
                offset_delta, p = (v >> 1) ^ -(v & 1), p + 2
            else:
                offset_delta, p = _varint(data, p)
            b = data[p]
            if b < 0x80:
                key_len, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                key_len, p = _varint(data, p)
            if key_len >= 0:
                key = data[p : p + key_len]
                p += key_len
            else:
                key = None
            value_is_null = data[p] == 0x01  # varint -1
            yield base + offset_delta, key, value_is_null
            p = start + length
    except IndexError:
        raise CorruptRecordError("record truncated") from None
    if p != end:
        raise CorruptRecordError(f"{end - p} bytes left after the last record")
