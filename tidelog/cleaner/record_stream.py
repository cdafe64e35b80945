"""A batch's records section as runs of whole records, for the cleaner: a compressed batch is inflated as a bounded
stream (protocol/inflaters.py, the stream the produce path's record walk reads), so a cleaning pass holds one
window of it at a time, never the whole inflated batch (Kafka's cleaner too reads a compressed batch through
DefaultRecordBatch's streaming iterator over CompressionType.wrapForInput).

A section that inflates to at most `WINDOW` bytes comes as one run, as records.decompress would have given it. A
larger one comes as runs of the whole records the window holds (a record longer than the window is held whole:
the cleaner hashes its key and may keep it). The C cleaner core (_cleaner_core.c) splits a stream the same way.

Malformed input raises CorruptRecordError where the whole-section scan would: a record running past the section,
records left over after RecordsCount, or a codec error (inflaters.CorruptPayloadError).
"""

from __future__ import annotations

from collections.abc import Iterator

from tidelog.protocol.inflaters import Inflater, inflater, lz4_whole
from tidelog.protocol.record_batch import HEADER_SIZE, RecordBatchHeader
from tidelog.protocol.records import LZ4, NONE, CorruptRecordError, Record, decode_records

WINDOW = 1024 * 1024  # inflated bytes held at a time (the C core's window is set to the same: set_window)
READ = 64 * 1024  # bytes pulled from the inflater per read
# The cleaner reads what the log already holds: no decompression limit (the produce path's bounds a bomb).
_UNBOUNDED = 1 << 62


def stream_inflater(codec: int, payload: bytes | memoryview) -> bytes | Inflater:
    """The cleaner's bounded stream over a compressed records section (the C core calls it too), or the whole
    section as bytes when one call inflates it within the window: an LZ4 frame goes through inflaters.lz4_whole
    first, as on the produce path's fast lane (per small batch the stream object cost the C core ~20% of its
    records/s on 100-byte LZ4 records)."""
    if codec == LZ4:
        whole = lz4_whole(payload, WINDOW)
        if whole is not None:
            return whole
    return inflater(codec, payload, _UNBOUNDED, zlib_header=True)


def varint(data: bytes, p: int) -> tuple[int, int]:
    """The zig-zag varint at `p` (a record's length, a field); IndexError when `data` ends inside it."""
    value = shift = 0
    while True:
        b = data[p]
        p += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), p
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint too long")


class _Window:
    """Unread inflated bytes `data[pos:]` over an Inflater."""

    __slots__ = ("src", "data", "pos", "eof")

    def __init__(self, src: Inflater) -> None:
        self.src = src
        self.data = b""
        self.pos = 0
        self.eof = False

    def pull(self, want: int) -> None:
        """Hold at least `want` unread bytes, unless the stream ends first."""
        parts = [self.data[self.pos:]]
        have = len(parts[0])
        while have < want and not self.eof:
            chunk = self.src.read(max(READ, want - have))
            if not chunk:
                self.eof = True
                break
            parts.append(chunk)
            have += len(chunk)
        self.data = b"".join(parts)
        self.pos = 0

    def whole_records(self, left: int) -> tuple[int, int, int]:
        """(start, end, n): the run of at most `left` whole records at the window's start; n == 0 with `end` the
        bytes needed to complete the first one."""
        data, start = self.data, self.pos
        p, limit, n = start, len(data), 0
        while n < left:
            try:
                length, q = varint(data, p)
            except IndexError:
                return (start, p, n) if n else (start, p + 10, 0)
            if length < 0:
                raise CorruptRecordError("record length runs past the batch")
            if q + length > limit:
                return (start, p, n) if n else (start, q + length, 0)
            p = q + length
            n += 1
        return start, p, n


def record_sections(buf: bytes | bytearray | memoryview, pos: int,
                    header: RecordBatchHeader) -> Iterator[tuple[bytes | memoryview, int]]:
    """(data, n) for the batch at buf[pos]: `data` holds exactly `n` whole records; the runs together are the
    batch's records section, RecordsCount records and nothing after them."""
    count = max(header.records_count, 0)
    body = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    if header.compression == NONE:
        yield body, count
        return
    src = stream_inflater(header.compression, body)
    if isinstance(src, bytes):
        yield src, count
        return
    window = _Window(src)
    window.pull(WINDOW + 1)
    if window.eof:  # the whole section fits the window: one run, as records.decompress gives it
        yield window.data, count
        return
    left = count
    while left:
        start, end, n = window.whole_records(left)
        if n:
            window.pos = end
            left -= n
            yield window.data[start:end], n
            continue
        if window.eof:
            raise CorruptRecordError("record truncated")
        window.pull(max(end - start, WINDOW))
    if len(window.data) > window.pos or (not window.eof and window.src.read(1)):
        raise CorruptRecordError("bytes left after the last record")


def iter_batch_records(buf: bytes | bytearray | memoryview, pos: int, header: RecordBatchHeader) -> Iterator[Record]:
    """records.iter_records over a bounded stream: the decoded records of the batch at buf[pos]."""
    for data, n in record_sections(buf, pos, header):
        yield from decode_records(data, n, header)
