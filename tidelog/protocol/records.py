"""Record-level encode/decode of RecordBatch v2 (Kafka's DefaultRecordBatch and DefaultRecord) and the batch codecs.

The produce path does not decode records: the LogValidator walks them without decoding (protocol/record_walk.py).
This module is for the places that need records: recompression to the topic codec, the log cleaner (which decodes batches and rebuilds them keeping original offsets, producer fields and codec), and
tests.

Public API:
  * ``Record(offset, timestamp, key, value, headers)``: one decoded record (absolute offset and timestamp).
  * ``iter_records(buf, pos=0)``: the records of the batch starting at ``buf[pos]`` (decompressing if needed).
    With LogAppendTime every record reads as the batch's MaxTimestamp, as Kafka's DefaultRecordBatch does.
  * ``build_batch(records, base_offset, ...)``: encode records (absolute offsets/timestamps) into one batch
    with a correct CRC. Offsets are kept as given, so gaps survive (compaction).
  * Validation does not decode records: the LogValidator walks them (protocol/record_walk.py).
  * ``compress(codec, data, level)`` / ``decompress(codec, data)``: the codec payload formats Kafka uses.

Kafka-python's DefaultRecordBatchBuilder is not used for building: it cannot write control batches, the
timestamp type, the partition leader epoch, a base offset or a delete horizon, and it silently falls back to
no compression when compression does not shrink the data (Kafka keeps the codec).
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from tidelog.protocol import codec_libs
from tidelog.protocol.primitives import int64
from tidelog.protocol.record_batch import (
    COMPRESSION_MASK,
    CONTROL_FLAG,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    RecordBatchHeader,
    compute_crc,
    read_header,
)

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES: dict[str, int] = {"none": NONE, "uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY,
                               "lz4": LZ4, "zstd": ZSTD}
CREATE_TIME, LOG_APPEND_TIME = 0, 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size, which Kafka uses
_INT32 = struct.Struct(">i")

Header = tuple[str, bytes | None]


class CorruptRecordError(ValueError):
    """Records inside a batch could not be decoded (maps to CORRUPT_MESSAGE)."""


@dataclass(slots=True, frozen=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = field(default=())


# ---------------------------------------------------------------------------------------------- varints


def _zigzag_varint_into(out: bytearray, n: int) -> None:
    # zig-zag over 64 bits covers both varint and varlong: the encodings agree for int32 values
    v = (n << 1) ^ (n >> 63)
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    v = 0
    while True:
        try:
            b = buf[pos]
        except IndexError:
            raise CorruptRecordError("record truncated inside a varint") from None
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return (v >> 1) ^ -(v & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint too long")


# ---------------------------------------------------------------------------------------------- codecs


def codec_for_name(name: str) -> int:
    """Topic `compression.type` value (other than 'producer') -> attributes codec id."""
    return CODEC_NAMES[name]


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress a records payload the way Kafka's CompressionType does. `level` None = Kafka's default."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        # Kafka's GzipCompression default level is Deflater.DEFAULT_COMPRESSION (zlib level 6).
        return gzip.compress(bytes(data), compresslevel=6 if level is None or level < 0 else level)
    # The codec libraries are imported when first used (codec_libs): together 5-10 ms of a restart otherwise.
    if codec == SNAPPY:
        # xerial snappy-java stream framing: header, then blocks each with an int32 compressed length.
        out = bytearray(_XERIAL_HEADER)
        view = memoryview(data)
        for start in range(0, len(view), _XERIAL_BLOCK):
            block = bytes(codec_libs.snappy().compress_raw(view[start:start + _XERIAL_BLOCK]))
            out += _INT32.pack(len(block))
            out += block
        return bytes(out)
    if codec == LZ4:
        lz4_frame = codec_libs.lz4_frame()
        # KafkaLZ4BlockOutputStream: LZ4 frame, 64 KiB independent blocks, no content size/checksum.
        return bytes(lz4_frame.compress(
            bytes(data), compression_level=9 if level is None else level,
            block_size=lz4_frame.BLOCKSIZE_MAX64KB, block_linked=False,
            content_checksum=False, store_size=False,
        ))
    if codec == ZSTD:
        compressor = codec_libs.zstandard().ZstdCompressor(level=3 if level is None else level)
        return bytes(compressor.compress(bytes(data)))
    raise CorruptRecordError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return zlib.decompress(bytes(data), wbits=47)  # 32+15: gzip or zlib header
        if codec == SNAPPY:
            snappy = codec_libs.snappy()
            raw = bytes(data)
            if raw[:8] != _XERIAL_MAGIC:
                return bytes(snappy.decompress_raw(raw))
            out = bytearray()
            pos = 16
            while pos + 4 <= len(raw):
                (n,) = _INT32.unpack_from(raw, pos)
                pos += 4
                if n < 0 or pos + n > len(raw):
                    raise CorruptRecordError("truncated xerial snappy block")
                out += snappy.decompress_raw(raw[pos:pos + n])
                pos += n
            return bytes(out)
        if codec == LZ4:
            return bytes(codec_libs.lz4_frame().decompress(bytes(data)))
        if codec == ZSTD:
            # streaming frames (librdkafka, zstd-jni) may omit the content size: use a decompressobj
            return bytes(codec_libs.zstandard().ZstdDecompressor().decompressobj().decompress(bytes(data)))
    except CorruptRecordError:
        raise
    except Exception as exc:  # every codec library raises its own error types
        raise CorruptRecordError(f"cannot decompress codec {codec}: {exc}") from exc
    raise CorruptRecordError(f"unknown compression codec {codec}")


# ---------------------------------------------------------------------------------------------- decode


def records_payload(
    buf: bytes | bytearray | memoryview, pos: int = 0, header: RecordBatchHeader | None = None
) -> bytes | memoryview:
    """The uncompressed records bytes of the batch at `pos` (`header`: its already-parsed header)."""
    if header is None:
        header = read_header(buf, pos)
    body = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    if header.compression == NONE:
        return body
    return decompress(header.compression, body)


def iter_records(buf: bytes | bytearray | memoryview, pos: int = 0) -> Iterator[Record]:
    """Decode the records of the batch at `buf[pos]`. Raises CorruptRecordError on malformed records."""
    header = read_header(buf, pos)
    yield from decode_records(records_payload(buf, pos, header), header.records_count, header)


def decode_records(data: bytes | bytearray | memoryview, count: int, header: RecordBatchHeader) -> Iterator[Record]:
    """Decode `count` records that fill `data` exactly (all of a batch's records section, or a run of whole records
    of it), with `header`'s base offset and timestamps. Raises CorruptRecordError on malformed records."""
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append = header.is_log_append_time
    max_ts = header.max_timestamp
    p = 0
    end = len(data)
    for _ in range(count):
        length, p = _read_varint(data, p)
        start = p
        if length < 0 or start + length > end:
            raise CorruptRecordError("record length runs past the batch")
        p += 1  # record attributes: unused, always 0
        ts_delta, p = _read_varint(data, p)
        offset_delta, p = _read_varint(data, p)
        key_len, p = _read_varint(data, p)
        key = None
        if key_len >= 0:
            key = bytes(data[p:p + key_len])
            p += key_len
        value_len, p = _read_varint(data, p)
        value = None
        if value_len >= 0:
            value = bytes(data[p:p + value_len])
            p += value_len
        count, p = _read_varint(data, p)
        if count < 0:
            raise CorruptRecordError("negative header count")
        headers: list[Header] = []
        for _h in range(count):
            hk_len, p = _read_varint(data, p)
            if hk_len < 0:
                raise CorruptRecordError("null header key")
            hkey = bytes(data[p:p + hk_len]).decode("utf-8", errors="replace")
            p += hk_len
            hv_len, p = _read_varint(data, p)
            hval = None
            if hv_len >= 0:
                hval = bytes(data[p:p + hv_len])
                p += hv_len
            headers.append((hkey, hval))
        if p - start != length:
            raise CorruptRecordError("record length does not match its fields")
        # Java long arithmetic, as DefaultRecord.readFrom: a sum past the int64 range wraps around
        yield Record(base_offset + offset_delta, max_ts if log_append else int64(base_ts + ts_delta),
                     key, value, tuple(headers))
    if p != end:
        raise CorruptRecordError(f"{end - p} bytes left after the last record")


# ---------------------------------------------------------------------------------------------- encode


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                  headers: Iterable[Header] = ()) -> bytearray:
    body = bytearray(b"\x00")
    _zigzag_varint_into(body, timestamp_delta)
    _zigzag_varint_into(body, offset_delta)
    for blob in (key, value):
        if blob is None:
            body.append(0x01)  # varint -1
        else:
            _zigzag_varint_into(body, len(blob))
            body += blob
    hdrs = list(headers)
    _zigzag_varint_into(body, len(hdrs))
    for hkey, hval in hdrs:
        kb = hkey.encode("utf-8")
        _zigzag_varint_into(body, len(kb))
        body += kb
        if hval is None:
            body.append(0x01)
        else:
            _zigzag_varint_into(body, len(hval))
            body += hval
    out = bytearray()
    _zigzag_varint_into(out, len(body))
    out += body
    return out


def build_batch(
    records: Iterable[Record],
    base_offset: int,
    *,
    compression: int = NONE,
    compression_level: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    timestamp_type: int = CREATE_TIME,
    log_append_time: int = NO_TIMESTAMP,
    delete_horizon_ms: int = NO_TIMESTAMP,
    last_offset_delta: int | None = None,
) -> bytearray:
    """One RecordBatch v2 holding `records` (absolute offsets >= base_offset, kept as given).

    * BaseTimestamp = `delete_horizon_ms` when >= 0 (and attribute bit 6 set, KIP-534), else the first
      record's timestamp, else -1 for an empty batch.
    * MaxTimestamp = `log_append_time` for timestamp_type LOG_APPEND_TIME, else the largest record timestamp.
    * LastOffsetDelta = `last_offset_delta` if given (the cleaner keeps a batch's original last offset for
      producer state), else last record offset - base_offset (0 for an empty batch).
    """
    recs = list(records)
    if delete_horizon_ms >= 0:
        base_ts = delete_horizon_ms
    else:
        base_ts = recs[0].timestamp if recs else NO_TIMESTAMP
    ts_origin = base_ts if base_ts != NO_TIMESTAMP else 0
    payload = bytearray()
    max_ts = NO_TIMESTAMP
    for rec in recs:
        if rec.timestamp > max_ts:
            max_ts = rec.timestamp
        # the delta in Java long arithmetic (MemoryRecordsBuilder): a wrapped timestamp reads back as it was
        payload += encode_record(rec.offset - base_offset, int64(rec.timestamp - ts_origin), rec.key, rec.value,
                                 rec.headers)
    if timestamp_type == LOG_APPEND_TIME:
        max_ts = log_append_time
    if last_offset_delta is None:
        last_offset_delta = recs[-1].offset - base_offset if recs else 0
    body = compress(compression, payload, compression_level) if compression != NONE else payload
    attributes = compression & COMPRESSION_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG
    if is_control:
        attributes |= CONTROL_FLAG
    if delete_horizon_ms >= 0:
        attributes |= DELETE_HORIZON_FLAG
    size = HEADER_SIZE + len(body)
    out = bytearray(size)
    _HEADER.pack_into(out, 0, base_offset, size - LOG_OVERHEAD, partition_leader_epoch, 2, 0, attributes,
                      last_offset_delta, base_ts, max_ts, producer_id, producer_epoch, base_sequence,
                      len(recs))
    out[HEADER_SIZE:] = body
    struct.pack_into(">I", out, CRC_OFFSET, compute_crc(out, 0, size))
    return out
