"""Kafka 4.4's decoder caps for the requests kafka-python decodes: an array of more than 1,000,000 elements or a
tagged-field section of more than 10,000 fields is refused (MessageUtil.MAX_ARRAY_LENGTH / MAX_TAGGED_FIELD_COUNT in
the readers Kafka's MessageDataGenerator writes), after the older check that a count cannot exceed the bytes left.
RequestContext.parseRequest turns the reader's error into an InvalidRequestException and the SocketServer closes the
connection; `check_limits` raises WireError so the connection closes here too.

kafka-python's compiled decoder builds each element as it reads it, so a forged count would cost memory for every
element the frame holds (a 100 MB frame of one-byte elements: tens of millions of objects). `check_limits` walks
the frame's shape by the request's schema without building anything, and only for bodies over
MAX_TAGGED_FIELD_COUNT bytes: a smaller body cannot exceed either cap, since every element and every tagged field
takes at least one byte.
"""

from __future__ import annotations

from typing import Any

from tidelog.protocol.primitives import Buffer
from tidelog.protocol.wire import (
    INT16,
    INT32,
    MAX_TAGGED_FIELD_COUNT,
    WireError,
    check_array_length,
    read_uvarint,
    skip_tagged_fields,
)

# a body shorter than this holds neither more than MAX_TAGGED_FIELD_COUNT tagged fields nor a longer array
WALK_ABOVE = MAX_TAGGED_FIELD_COUNT

_VARIABLE = {"string": 2, "bytes": 4, "records": 4}  # type -> width of its classic (non-compact) length prefix


def check_limits(struct: Any, version: int, flexible: bool, buf: Buffer, pos: int) -> None:
    """Raise WireError if the request body at `pos` (after the header) holds an array or a tagged-field section
    over Kafka's caps, or counts that cannot fit in it. No-op for bodies too short to exceed a cap."""
    if len(buf) - pos <= WALK_ABOVE:
        return
    _walk_struct(struct, version, flexible, buf, pos, len(buf))


def _walk_struct(struct: Any, version: int, flexible: bool, buf: Buffer, pos: int, end: int) -> int:
    for field in struct.untagged_fields(version):
        pos = _walk_field(field, version, flexible, buf, pos, end)
    if flexible:
        pos = skip_tagged_fields(buf, pos)  # the count checks; a known tag's value is skipped, not walked
    return pos


def _walk_field(field: Any, version: int, flexible: bool, buf: Buffer, pos: int, end: int) -> int:
    if field.is_array():
        n, pos = _read_length(buf, pos, end, flexible, 4)
        if n < 0:
            return pos  # null: check_nulls refuses it where the schema does not allow it
        check_array_length(n, end - pos)
        element = field.array_of
        if field.is_struct_array():
            for _ in range(n):
                pos = _walk_struct(element, version, flexible, buf, pos, end)
            return pos
        size = _fixed_size(element)
        if size is not None:
            return _advance(pos, n * size, end)
        for _ in range(n):
            pos = _walk_simple(element, flexible, buf, pos, end)
        return pos
    if field.is_struct():
        if field.nullable_for_version_q(version):  # int8 marker: -1 null, 1 present
            marker = _advance(pos, 1, end)
            if buf[pos] == 0xFF:
                return marker
            pos = marker
        return _walk_struct(field, version, flexible, buf, pos, end)
    return _walk_simple(field, flexible, buf, pos, end)


def _walk_simple(field: Any, flexible: bool, buf: Buffer, pos: int, end: int) -> int:
    size = _fixed_size(field)
    if size is not None:
        return _advance(pos, size, end)
    width = _VARIABLE.get(field.type_str)
    if width is None:
        raise WireError(f"no wire size known for type {field.type_str!r}")
    n, pos = _read_length(buf, pos, end, flexible, width)
    return pos if n < 0 else _advance(pos, n, end)


def _fixed_size(field: Any) -> int | None:
    size = getattr(getattr(field, "_type", None), "size", None)
    return size if isinstance(size, int) else None


def _read_length(buf: Buffer, pos: int, end: int, flexible: bool, width: int) -> tuple[int, int]:
    if flexible:
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    after = _advance(pos, width, end)
    codec = INT16 if width == 2 else INT32
    return codec.unpack_from(buf, pos)[0], after


def _advance(pos: int, n: int, end: int) -> int:
    pos += n
    if pos > end:
        raise WireError("truncated request")
    return pos
