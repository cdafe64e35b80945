"""TransactionLogKey v0 / TransactionLogValue v0 and v1 against bytes laid out by hand from Kafka's schema
JSON (transaction-coordinator/src/main/resources/common/message/TransactionLog{Key,Value}.json)."""

from __future__ import annotations

import struct

import pytest

from tidelog.coordinator.transaction import records as rec


def test_key_v0_bytes() -> None:
    # version INT16 0, TransactionalId STRING (INT16 length + UTF-8)
    assert rec.encode_key("tx-é") == b"\x00\x00" + b"\x00\x05" + "tx-é".encode()
    assert rec.decode_key(b"\x00\x00\x00\x02ab") == "ab"


def _v0(status: int, partitions: list[tuple[str, list[int]]] | None) -> bytes:
    out = struct.pack(">hqhib", 0, 4242, 7, 60_000, status)
    if partitions is None:
        out += struct.pack(">i", -1)
    else:
        out += struct.pack(">i", len(partitions))
        for topic, ids in partitions:
            out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(ids))
            out += b"".join(struct.pack(">i", i) for i in ids)
    return out + struct.pack(">qq", 1_700_000_000_123, 1_700_000_000_000)


def test_value_v0_ongoing_bytes() -> None:
    value = rec.TransactionLogValue(4242, 7, 60_000, 1, {"orders": [0, 2], "b": [5]}, 1_700_000_000_123,
                                    1_700_000_000_000)
    expected = _v0(1, [("orders", [0, 2]), ("b", [5])])
    assert rec.encode_value(value) == expected
    back = rec.decode_value(expected)
    assert back.transaction_partitions == {"orders": [0, 2], "b": [5]}
    assert (back.producer_id, back.producer_epoch, back.transaction_timeout_ms, back.transaction_status) == \
        (4242, 7, 60_000, 1)
    assert (back.transaction_last_update_timestamp_ms, back.transaction_start_timestamp_ms) == \
        (1_700_000_000_123, 1_700_000_000_000)


def test_value_v0_empty_has_null_partitions() -> None:
    value = rec.TransactionLogValue(4242, 7, 60_000, 0, None, 1_700_000_000_123, 1_700_000_000_000)
    assert rec.encode_value(value) == _v0(0, None)
    assert rec.decode_value(_v0(0, None)).transaction_partitions is None


def test_value_v1_flexible_with_tagged_fields() -> None:
    # v1: compact array (N+1 varint), compact strings, per-struct tagged-field count, then the tagged fields
    # PreviousProducerId (tag 0, int64), NextProducerId (tag 1), ClientTransactionVersion (tag 2, int16)
    raw = struct.pack(">hqhib", 1, 4242, 7, 60_000, 2)
    raw += bytes([2])                                   # one topic
    raw += bytes([2]) + b"t" + bytes([3]) + struct.pack(">ii", 0, 1) + bytes([0])
    raw += struct.pack(">qq", 11, 10)
    raw += bytes([2]) + bytes([0, 8]) + struct.pack(">q", 99) + bytes([2, 2]) + struct.pack(">h", 2)
    value = rec.decode_value(raw)
    assert value.version == 1
    assert value.transaction_partitions == {"t": [0, 1]}
    assert value.previous_producer_id == 99 and value.next_producer_id == -1
    assert value.client_transaction_version == 2
    assert rec.encode_value(value) == raw


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x05", _v0(1, [("x", [1])])[:-3]])
def test_truncated_or_unknown_values_are_rejected(data: bytes) -> None:
    with pytest.raises(rec.RecordFormatError):
        rec.decode_value(data)
