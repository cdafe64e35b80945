"""The protocol's variable-length integers, in one place.

Two encodings share one wire shape (7 bits a byte, high bit = more follows): the *unsigned* varint of
flexible request/response versions (compact lengths, tagged fields; Kafka's ByteUtils.readUnsignedVarint)
and the *zig-zag signed* varint/varlong inside record batches (ByteUtils.readVarint/readVarlong). Mixing
them up is the classic bug, so each has its own name. Both raise `VarintError` on truncated or over-long
input; callers turn that into their own error (a closed connection, CORRUPT_MESSAGE, a corrupt segment).
"""

from __future__ import annotations

Buffer = bytes | bytearray | memoryview


class VarintError(ValueError):
    """A varint runs past the end of its buffer or beyond 64 bits."""


def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    """(value, position after it) of the unsigned varint at `pos` (at most 32 bits, as Kafka's)."""
    value = shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise VarintError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise VarintError("unsigned varint longer than 5 bytes")


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """(value, position after it) of the zig-zag signed varint/varlong at `pos` (up to 64 bits)."""
    value = shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise VarintError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise VarintError("varlong longer than 10 bytes")


def write_uvarint(out: bytearray, n: int) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def write_varint(out: bytearray, n: int) -> None:
    """Zig-zag over 64 bits: covers varint and varlong alike (their encodings agree for int32 values)."""
    write_uvarint(out, ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


def int64(n: int) -> int:
    """`n` as Java's 64-bit `long` arithmetic leaves it (two's-complement wrap-around): what Kafka computes for
    a record's BaseTimestamp + TimestampDelta (DefaultRecord.readFrom) and for its timestamp checks."""
    return ((n + 0x8000000000000000) & 0xFFFFFFFFFFFFFFFF) - 0x8000000000000000
