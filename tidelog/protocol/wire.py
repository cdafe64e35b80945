"""Primitive readers and writers of Kafka's wire types for the hand-written hot-path codecs (Produce requests,
Fetch responses): classic and flexible (compact, KIP-482) encodings, reading straight from a memoryview so
record bytes are sliced, never copied.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from tidelog.protocol.messages import response_class
from tidelog.protocol.primitives import Buffer, VarintError
from tidelog.protocol.primitives import read_uvarint as _read_uvarint
from tidelog.protocol.primitives import write_uvarint as _write_uvarint

if TYPE_CHECKING:
    from tidelog.protocol.file_records import FileRecords

# One piece of a response frame as the connection writes it: bytes, or a FileRecords slice of a segment file
# (a Fetch response's records), which broker/frame_stream.py sends with sendfile. `bytes(piece)` reads a slice.
Piece: TypeAlias = "bytes | memoryview | FileRecords"

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
EMPTY_TAGGED_FIELDS = b"\x00"
# Kafka 4.4's generated readers (MessageUtil.MAX_ARRAY_LENGTH, MAX_TAGGED_FIELD_COUNT): an array or a tagged-field
# section claiming more is refused before anything is allocated for it, and the connection closes.
MAX_ARRAY_LENGTH = 1_000_000
MAX_TAGGED_FIELD_COUNT = 10_000


class WireError(ValueError):
    """Bytes that do not parse as the expected message (the connection is closed, as Kafka does)."""


def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    if pos < len(buf) and buf[pos] < 0x80:
        return buf[pos], pos + 1  # one byte: lengths below 128, the common case
    try:
        return _read_uvarint(buf, pos)
    except VarintError as exc:
        raise WireError(str(exc)) from exc


def write_uvarint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    _write_uvarint(out, value)
    return bytes(out)


def skip_tagged_fields(buf: Buffer, pos: int) -> int:
    """Skip a tagged-field section (unknown tags are ignored, as Kafka does)."""
    count, pos = read_uvarint(buf, pos)
    check_tagged_field_count(count, len(buf) - pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise WireError("truncated tagged field")
    return pos


def check_array_length(n: int, remaining: int) -> None:
    """Kafka's generated readers' checks on an array's count, in their order: every element takes at least one
    byte (a forged count cannot make us loop), then the 4.4 cap."""
    if n > remaining:
        raise WireError(f"array length {n} exceeds the {remaining} bytes remaining")
    if n > MAX_ARRAY_LENGTH:
        raise WireError(f"array length {n} exceeds the maximum of {MAX_ARRAY_LENGTH}")


def check_tagged_field_count(count: int, remaining: int) -> None:
    """Kafka's generated readers' checks on a tagged-field count: at most one per remaining byte, then the 4.4 cap."""
    if count > remaining:
        raise WireError(f"{count} tagged fields exceed the {remaining} bytes remaining")
    if count > MAX_TAGGED_FIELD_COUNT:
        raise WireError(f"{count} tagged fields exceed the maximum of {MAX_TAGGED_FIELD_COUNT}")


def read_int16(buf: memoryview, pos: int) -> tuple[int, int]:
    if pos + 2 > len(buf):
        raise WireError("truncated int16")
    return INT16.unpack_from(buf, pos)[0], pos + 2


def read_int32(buf: memoryview, pos: int) -> tuple[int, int]:
    if pos + 4 > len(buf):
        raise WireError("truncated int32")
    return INT32.unpack_from(buf, pos)[0], pos + 4


def read_string(buf: memoryview, pos: int, flexible: bool) -> tuple[str | None, int]:
    """STRING / NULLABLE_STRING (INT16 length) or COMPACT_(NULLABLE_)STRING (UVARINT length + 1)."""
    if flexible:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        n, pos = read_int16(buf, pos)
    if n < 0:
        if n != -1:
            raise WireError(f"bad string length {n}")
        return None, pos
    end = pos + n
    if end > len(buf):
        raise WireError("truncated string")
    try:
        return str(buf[pos:end], "utf-8"), end
    except UnicodeDecodeError as exc:
        raise WireError("string is not UTF-8") from exc


def read_bytes_view(buf: memoryview, pos: int, flexible: bool) -> tuple[memoryview | None, int]:
    """(COMPACT_)NULLABLE_BYTES / RECORDS as a view of `buf` (no copy)."""
    if flexible:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        n, pos = read_int32(buf, pos)
    if n < 0:
        if n != -1:
            raise WireError(f"bad bytes length {n}")
        return None, pos
    end = pos + n
    if end > len(buf):
        raise WireError("truncated bytes")
    return buf[pos:end], end


def read_array_length(buf: memoryview, pos: int, flexible: bool, nullable: bool = False) -> tuple[int, int]:
    """ARRAY (INT32 count) or COMPACT_ARRAY (UVARINT count + 1). A null array of a non-nullable field is
    refused, as Kafka's generated readers do ("non-nullable field was serialized as null"); a nullable one
    reads as empty."""
    if flexible:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        n, pos = read_int32(buf, pos)
    if n < -1 or (n == -1 and not nullable):
        raise WireError(f"bad array length {n}" if n < -1 else "non-nullable array was serialized as null")
    check_array_length(n, len(buf) - pos)
    return max(n, 0), pos


def string_bytes(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    raw = value.encode("utf-8")
    return (write_uvarint(len(raw) + 1) if flexible else INT16.pack(len(raw))) + raw


def array_length_bytes(n: int, flexible: bool) -> bytes:
    return write_uvarint(n + 1) if flexible else INT32.pack(n)


def bytes_length_bytes(n: int, flexible: bool) -> bytes:
    """Length prefix of (COMPACT_)NULLABLE_BYTES / RECORDS; n = -1 for null."""
    return write_uvarint(n + 1) if flexible else INT32.pack(n)


class EncodedResponse:
    """A response the hot path encodes by hand (Produce, Fetch). The connection frames it as it frames a
    kafka-python response (`encode`, `flexible_version_q`, `error_code`), but writes `pieces()` as they are.
    Subclasses keep their fields as plain attributes until `pieces()`, so the broker's client quotas can still
    set `throttle_time_ms` (and empty a throttled Fetch) as they do on kafka-python objects."""

    flexible = False
    error_code: int | None = None

    def pieces(self) -> Sequence[Piece]:
        raise NotImplementedError

    def encode(self, version: int | None = None) -> bytes:
        return b"".join(p if isinstance(p, (bytes, memoryview)) else bytes(p) for p in self.pieces())

    def flexible_version_q(self, version: int | None = None) -> bool:
        return self.flexible

    def decoded(self, api_key: int, version: int) -> Any:
        """The same response as a kafka-python object (for code that edits responses: the test fault
        injector). Costs a full decode, so never on the serving path."""
        response = response_class(api_key)[version].decode(self.encode(), version=version)
        response._header = None  # kafka-python's decode leaves it unset, and encode() reads it
        return response
