"""Byte reader and writer for the record schemas of Kafka's internal topics (`__consumer_offsets`,
`__transaction_state`), shared by every coordinator.

Those schemas are Kafka's generated message types: big-endian fixed-width integers, strings with an INT16
length (or, in flexible versions, a compact unsigned-varint length + 1), bytes with an INT32 length (compact
likewise), arrays with an INT32 count (compact: count + 1; -1 / 0 is null), 16-byte uuids, and a tagged-field
section closing every flexible struct. The unsigned varint is the protocol's one implementation
(`tidelog.protocol.primitives`). Anything that does not parse raises `RecordFormatError`.
"""

from __future__ import annotations

import struct
import uuid

from tidelog.protocol.primitives import VarintError, read_uvarint, write_uvarint

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value that does not parse in any known schema version."""


class SchemaWriter:
    """Appends fields to `buf`; `compact` selects the flexible-version encoding of a length."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def to_bytes(self) -> bytes:
        return bytes(self.buf)

    def i8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def i16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def i32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def uvarint(self, v: int) -> None:
        write_uvarint(self.buf, v)

    def raw(self, data: bytes | bytearray) -> None:
        self.buf += data

    def string(self, v: str | None, compact: bool = False) -> None:
        self.bytes_(None if v is None else v.encode(), compact, _I16)

    def bytes_(self, v: bytes | None, compact: bool = False, _length: struct.Struct = _I32) -> None:
        if compact:
            self.uvarint(0 if v is None else len(v) + 1)
        else:
            self.buf += _length.pack(-1 if v is None else len(v))
        if v is not None:
            self.buf += v

    def array_len(self, n: int | None, compact: bool = False) -> None:
        """The element count of an array; None writes a null array."""
        if compact:
            self.uvarint(0 if n is None else n + 1)
        else:
            self.i32(-1 if n is None else n)

    def uuid(self, v: uuid.UUID) -> None:
        self.buf += v.bytes

    def tagged_fields(self, fields: list[tuple[int, bytes]]) -> None:
        """A tagged-field section; Kafka writes the tags in ascending order."""
        self.uvarint(len(fields))
        for tag, data in sorted(fields):
            self.uvarint(tag)
            self.uvarint(len(data))
            self.buf += data

    def no_tags(self) -> None:
        """An empty tagged-field section."""
        self.uvarint(0)


class SchemaReader:
    """Reads fields from `data` from position 0 on; a short buffer raises `RecordFormatError`."""

    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError("truncated record")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def _unpack(self, s: struct.Struct) -> int:
        return int(s.unpack(self.take(s.size))[0])

    def i8(self) -> int:
        return self._unpack(_I8)

    def i16(self) -> int:
        return self._unpack(_I16)

    def i32(self) -> int:
        return self._unpack(_I32)

    def i64(self) -> int:
        return self._unpack(_I64)

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.data, self.pos)
        except VarintError as e:
            raise RecordFormatError(str(e)) from e
        return value

    def _length(self, compact: bool, fixed: struct.Struct) -> int:
        """A length or count; negative means null."""
        return self.uvarint() - 1 if compact else self._unpack(fixed)

    def string(self, compact: bool = False) -> str | None:
        n = self._length(compact, _I16)
        if n < 0:
            return None
        try:
            return self.take(n).decode()
        except UnicodeDecodeError as e:
            raise RecordFormatError(str(e)) from e

    def required_string(self, compact: bool = False) -> str:
        """A string field Kafka's schema declares non-nullable."""
        s = self.string(compact)
        if s is None:
            raise RecordFormatError("null string where Kafka's schema forbids it")
        return s

    def bytes_(self, compact: bool = False) -> bytes | None:
        n = self._length(compact, _I32)
        return None if n < 0 else self.take(n)

    def array_len(self, compact: bool = False) -> int:
        """The element count of an array; -1 for a null array."""
        return self._length(compact, _I32)

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def tagged_fields(self) -> dict[int, bytes]:
        """The tagged-field section as tag -> raw field bytes."""
        fields: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = self.take(self.uvarint())
        return fields

    def skip_tags(self) -> None:
        self.tagged_fields()
