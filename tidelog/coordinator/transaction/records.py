"""Keys and values of `__transaction_state` records in Kafka's schemas (Kafka's `TransactionLog`).

Key: INT16 version 0, then TransactionLogKey v0 (`TransactionalId: string`). Value: INT16 version, then
TransactionLogValue v0 (classic encoding) or v1 (flexible: compact strings/arrays, tagged fields
PreviousProducerId (0), NextProducerId (1), ClientTransactionVersion (2)). As Kafka, v1 is written once the
finalized `transaction.version` is at least 1 (TransactionVersion.transactionLogValueVersion), v0 below; both are
read, and tags this node does not know are kept. A tombstone (null value) removes an expired transactional id.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from tidelog.coordinator.schema_io import RecordFormatError as RecordFormatError  # callers catch it from here
from tidelog.coordinator.schema_io import SchemaReader, SchemaWriter

KEY_VERSION = 0
VALUE_VERSION = 0

_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")


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
def encode_key(transactional_id: str) -> bytes:
    w = SchemaWriter()
    w.i16(KEY_VERSION)
    w.string(transactional_id)
    return w.to_bytes()


def encode_value(value: TransactionLogValue) -> bytes:
    v = value.version
    if v not in (0, 1):
        raise RecordFormatError(f"unknown TransactionLogValue version {v}")
    flex = v >= 1
    w = SchemaWriter()
    w.i16(v)
    w.i64(value.producer_id)
    w.i16(value.producer_epoch)
    w.i32(value.transaction_timeout_ms)
    w.i8(value.transaction_status)
    parts = value.transaction_partitions
    w.array_len(None if parts is None else len(parts), flex)
    for topic, ids in (parts or {}).items():
        w.string(topic, flex)
        w.array_len(len(ids), flex)
        for pid in ids:
            w.i32(pid)
        if flex:
            w.no_tags()  # no tagged fields in PartitionsSchema
    w.i64(value.transaction_last_update_timestamp_ms)
    w.i64(value.transaction_start_timestamp_ms)
    if flex:
        tags: list[tuple[int, bytes]] = []
        if value.previous_producer_id != -1:
            tags.append((0, _I64.pack(value.previous_producer_id)))
        if value.next_producer_id != -1:
            tags.append((1, _I64.pack(value.next_producer_id)))
        if value.client_transaction_version != 0:
            tags.append((2, _I16.pack(value.client_transaction_version)))
        tags.extend(value.unknown_tags.items())
        w.tagged_fields(tags)
    return w.to_bytes()


# ------------------------------------------------------------------------------------------------ reading
def decode_key(data: bytes) -> str:
    r = SchemaReader(data)
    version = r.i16()
    if version != KEY_VERSION:
        raise RecordFormatError(f"unknown TransactionLogKey version {version}")
    return r.required_string()


def decode_value(data: bytes) -> TransactionLogValue:
    r = SchemaReader(data)
    version = r.i16()
    if version not in (0, 1):
        raise RecordFormatError(f"unknown TransactionLogValue version {version}")
    flex = version >= 1
    producer_id = r.i64()
    producer_epoch = r.i16()
    timeout = r.i32()
    status = r.i8()
    n = r.array_len(flex)
    partitions: dict[str, list[int]] | None = None
    if n >= 0:
        partitions = {}
        for _ in range(n):
            topic = r.required_string(flex)
            count = r.array_len(flex)
            partitions.setdefault(topic, []).extend(r.i32() for _ in range(max(count, 0)))
            if flex:
                r.skip_tags()
    last_update = r.i64()
    start = r.i64()
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
