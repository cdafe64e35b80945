"""Keys and values of `__transaction_state` records in Kafka's schemas (Kafka's `TransactionLog`).

Key: INT16 version 0, then TransactionLogKey v0 (`TransactionalId: string`). Value: INT16 version, then
TransactionLogValue v0 (classic encoding) or v1 (flexible: compact strings/arrays, tagged fields
PreviousProducerId (0), NextProducerId (1), ClientTransactionVersion (2)). Kafka writes v0 unless the
transaction uses transaction version 2 (KIP-890 part 2), which this node does not offer, so we write v0 and
read both. A tombstone (null value) removes an expired transactional id.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

KEY_VERSION = 0
VALUE_VERSION = 0

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value that does not parse in any known schema version."""


@dataclass(slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    # topic -> partition ids; None is what Kafka writes for an Empty transaction
    transaction_partitions: dict[str, list[int]] | None
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    previous_producer_id: int = -1       # v1 tagged
    next_producer_id: int = -1           # v1 tagged
    client_transaction_version: int = 0  # v1 tagged
    version: int = VALUE_VERSION
    unknown_tags: dict[int, bytes] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------ writing
def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _string(s: str, flexible: bool) -> bytes:
    raw = s.encode()
    return (_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def _array_len(n: int | None, flexible: bool) -> bytes:
    if flexible:
        return _uvarint(0 if n is None else n + 1)
    return _I32.pack(-1 if n is None else n)


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id, False)


def encode_value(value: TransactionLogValue) -> bytes:
    v = value.version
    if v not in (0, 1):
        raise RecordFormatError(f"unknown TransactionLogValue version {v}")
    flex = v >= 1
    out = bytearray(_I16.pack(v))
    out += _I64.pack(value.producer_id)
    out += _I16.pack(value.producer_epoch)
    out += _I32.pack(value.transaction_timeout_ms)
    out += _I8.pack(value.transaction_status)
    parts = value.transaction_partitions
    out += _array_len(None if parts is None else len(parts), flex)
    for topic, ids in (parts or {}).items():
        out += _string(topic, flex)
        out += _array_len(len(ids), flex)
        for pid in ids:
            out += _I32.pack(pid)
        if flex:
            out += _uvarint(0)  # no tagged fields in PartitionsSchema
    out += _I64.pack(value.transaction_last_update_timestamp_ms)
    out += _I64.pack(value.transaction_start_timestamp_ms)
    if flex:
        tags: list[tuple[int, bytes]] = []
        if value.previous_producer_id != -1:
            tags.append((0, _I64.pack(value.previous_producer_id)))
        if value.next_producer_id != -1:
            tags.append((1, _I64.pack(value.next_producer_id)))
        if value.client_transaction_version != 0:
            tags.append((2, _I16.pack(value.client_transaction_version)))
        tags.extend(value.unknown_tags.items())
        tags.sort()
        out += _uvarint(len(tags))
        for tag, data in tags:
            out += _uvarint(tag) + _uvarint(len(data)) + data
    return bytes(out)


# ------------------------------------------------------------------------------------------------ reading
class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError("truncated record")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, s: struct.Struct) -> int:
        return int(s.unpack(self.take(s.size))[0])

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self.take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise RecordFormatError("varint too long")

    def string(self, flexible: bool) -> str:
        n = self.uvarint() - 1 if flexible else self.unpack(_I16)
        if n < 0:
            raise RecordFormatError("null string where Kafka's schema forbids it")
        try:
            return self.take(n).decode()
        except UnicodeDecodeError as e:
            raise RecordFormatError(str(e)) from e

    def array_len(self, flexible: bool) -> int:
        return self.uvarint() - 1 if flexible else self.unpack(_I32)

    def tagged_fields(self) -> dict[int, bytes]:
        return {self.uvarint(): self.take(self.uvarint()) for _ in range(self.uvarint())}


def decode_key(data: bytes) -> str:
    r = _Reader(data)
    version = r.unpack(_I16)
    if version != KEY_VERSION:
        raise RecordFormatError(f"unknown TransactionLogKey version {version}")
    return r.string(False)


def decode_value(data: bytes) -> TransactionLogValue:
    r = _Reader(data)
    version = r.unpack(_I16)
    if version not in (0, 1):
        raise RecordFormatError(f"unknown TransactionLogValue version {version}")
    flex = version >= 1
    producer_id = r.unpack(_I64)
    producer_epoch = r.unpack(_I16)
    timeout = r.unpack(_I32)
    status = r.unpack(_I8)
    n = r.array_len(flex)
    partitions: dict[str, list[int]] | None = None
    if n >= 0:
        partitions = {}
        for _ in range(n):
            topic = r.string(flex)
            count = r.array_len(flex)
            partitions.setdefault(topic, []).extend(r.unpack(_I32) for _ in range(max(count, 0)))
            if flex:
                r.tagged_fields()
    last_update = r.unpack(_I64)
    start = r.unpack(_I64)
    value = TransactionLogValue(producer_id, producer_epoch, timeout, status, partitions, last_update, start,
                                version=version)
    if flex:
        for tag, raw in r.tagged_fields().items():
            if tag == 0 and len(raw) == 8:
                value.previous_producer_id = _I64.unpack(raw)[0]
            elif tag == 1 and len(raw) == 8:
                value.next_producer_id = _I64.unpack(raw)[0]
            elif tag == 2 and len(raw) == 2:
                value.client_transaction_version = _I16.unpack(raw)[0]
            else:
                value.unknown_tags[tag] = raw
    return value
