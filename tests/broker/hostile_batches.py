"""Hostile record batches for the produce path, each with a correct CRC so only a record walk can tell, and the
error Kafka's LogValidator gives for it (issue #10, "integrity").

`HOSTILE` lists (name, batch bytes, expected error code). Built lazily: some payloads take a moment to compress.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

import lz4.frame
import zstandard

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.record_batch import CRC_OFFSET, HEADER_SIZE, LOG_OVERHEAD, compute_crc
from tidelog.protocol.records import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress, encode_record

TS = 1_700_000_000_000
CODECS = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
_HEADER = struct.Struct(">qiibIhiqqqhii")


def raw_batch(payload: bytes, count: int, attributes: int = 0, last_offset_delta: int | None = None) -> bytes:
    """A v2 batch around `payload` (already compressed as `attributes` says) with a correct CRC."""
    size = HEADER_SIZE + len(payload)
    out = bytearray(size)
    lod = count - 1 if last_offset_delta is None else last_offset_delta
    _HEADER.pack_into(out, 0, 0, size - LOG_OVERHEAD, -1, 2, 0, attributes, lod, TS, TS + max(count - 1, 0),
                      -1, -1, -1, count)
    out[HEADER_SIZE:] = payload
    struct.pack_into(">I", out, CRC_OFFSET, compute_crc(out, 0, size))
    return bytes(out)


def overflowing_batch(base_ts: int, deltas: list[int]) -> bytes:
    """An uncompressed v2 batch with BaseTimestamp `base_ts` and one record per timestamp delta (correct CRC; the
    client's MaxTimestamp is set to the base, which the broker rewrites): a sum past the int64 range wraps."""
    payload = b"".join(bytes(encode_record(i, d, b"k%d" % i, b"v%d" % i, [])) for i, d in enumerate(deltas))
    size = HEADER_SIZE + len(payload)
    out = bytearray(size)
    _HEADER.pack_into(out, 0, 0, size - LOG_OVERHEAD, -1, 2, 0, 0, len(deltas) - 1, base_ts, base_ts, -1, -1, -1,
                      len(deltas))
    out[HEADER_SIZE:] = payload
    struct.pack_into(">I", out, CRC_OFFSET, compute_crc(out, 0, size))
    return bytes(out)


def records(n: int, value: bytes = b"value") -> bytes:
    return b"".join(bytes(encode_record(i, i, b"key-%d" % i, value, [("h", b"x")])) for i in range(n))


def with_codec(codec: int, payload: bytes, count: int, **kw: int) -> bytes:
    return raw_batch(compress(codec, payload) if codec else payload, count, codec | kw.pop("attributes", 0), **kw)


def _varint(n: int) -> bytes:
    v = (n << 1) ^ (n >> 63)
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _record(fields: bytes) -> bytes:
    return _varint(len(fields)) + fields


# Records whose inner fields are broken (each a whole records payload of `count` records)
def broken_records() -> dict[str, tuple[bytes, int]]:
    good = records(2)
    key_past_end = _record(b"\x00\x00\x00" + _varint(500) + b"k" + _varint(1) + b"v\x00")
    too_long_varint = _record(b"\x00\x00" + b"\xff" * 6 + b"\x01" + _varint(-1) + _varint(-1) + b"\x00")
    negative_headers = _record(b"\x00\x00\x00" + _varint(-1) + _varint(-1) + _varint(-3))
    null_header_key = _record(b"\x00\x00\x00" + _varint(-1) + _varint(-1) + _varint(1) + _varint(-1) + _varint(-1))
    fields = b"\x00\x00\x00" + _varint(1) + b"k" + _varint(1) + b"v\x00"
    length_too_long = _varint(len(fields) + 1) + fields + b"\x00"
    return {
        "key-length-past-record": (good + key_past_end, 3),
        "varint-too-long": (good + too_long_varint, 3),
        "negative-header-count": (good + negative_headers, 3),
        "null-header-key": (good + null_header_key, 3),
        "record-length-mismatch": (good + length_too_long, 3),
        "count-above-records": (good, 3),
        "records-after-count": (good + records(1), 2),
        "zero-length-record": (good + b"\x00", 3),
    }


def _bomb_payload(codec: int, value_len: int, trailing_zeros: int = 0) -> bytes:
    """One record whose value is `value_len` zero bytes (then `trailing_zeros` more), compressed as a stream
    so the expanded size is never allocated here either."""
    head = _varint(len(b"\x00\x00\x00" + _varint(1) + b"k") + len(_varint(value_len)) + value_len + 1)
    head += b"\x00\x00\x00" + _varint(1) + b"k" + _varint(value_len)
    tail = b"\x00" * 1  # the header count; the zeros after it are what a bomb's extra output looks like
    chunk = b"\x00" * (1 << 20)
    total = value_len + trailing_zeros
    if codec == GZIP:
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        parts = [c.compress(head)]
        parts += [c.compress(chunk) for _ in range(total >> 20)]
        parts += [c.compress(b"\x00" * (total & 0xFFFFF) + tail), c.flush()]
    elif codec == ZSTD:
        z = zstandard.ZstdCompressor(level=3).compressobj()
        parts = [z.compress(head)] + [z.compress(chunk) for _ in range(total >> 20)]
        parts += [z.compress(b"\x00" * (total & 0xFFFFF) + tail), z.flush()]
    elif codec == LZ4:
        f = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False)
        parts = [f.begin(), f.compress(head)] + [f.compress(chunk) for _ in range(total >> 20)]
        parts += [f.compress(b"\x00" * (total & 0xFFFFF) + tail), f.flush()]
    else:
        raise ValueError(codec)
    return b"".join(parts)


def bomb(codec: int, value_len: int, trailing_zeros: int = 0) -> bytes:
    return raw_batch(_bomb_payload(codec, value_len, trailing_zeros), 1, codec)


def hostile() -> list[tuple[str, Callable[[], bytes], ErrorCode]]:
    """(name, builder, Kafka's error) for every kind of invalid batch issue #10 names."""
    cases: list[tuple[str, Callable[[], bytes], ErrorCode]] = []
    payload = records(3)
    for name, codec in CODECS.items():
        if codec:
            cases.append((f"garbage-{name}", lambda c=codec: raw_batch(b"\xff" * 64 + records(2), 2, c),
                          ErrorCode.CORRUPT_MESSAGE))
            cases.append((f"truncated-{name}",
                          lambda c=codec: raw_batch(compress(c, payload * 50)[:-25], 150, c),
                          ErrorCode.CORRUPT_MESSAGE))
        for kind, (body, count) in broken_records().items():
            cases.append((f"{kind}-{name}", lambda c=codec, b=body, n=count: with_codec(c, b, n),
                          ErrorCode.INVALID_RECORD))
    for codec_id in (5, 6, 7):
        cases.append((f"codec-{codec_id}", lambda c=codec_id: raw_batch(records(2), 2, c),
                      ErrorCode.UNSUPPORTED_COMPRESSION_TYPE))
    # Decompression bombs: a record expanding past the 64 MiB bound, and one record followed by a flood
    for name, codec in (("gzip", GZIP), ("zstd", ZSTD), ("lz4", LZ4)):
        cases.append((f"bomb-{name}", lambda c=codec: bomb(c, 80 << 20), ErrorCode.INVALID_RECORD))
    cases.append(("bomb-trailing-zstd", lambda: bomb(ZSTD, 10, trailing_zeros=500 << 20), ErrorCode.INVALID_RECORD))
    return cases


def unused_attribute_bits(codec: int) -> bytes:
    """Bits 7-15 of the attributes are unused: Kafka ignores them (and so does every client's reader)."""
    return with_codec(codec, records(3), 3, attributes=0x7F80)
