"""__consumer_offsets keys/values against Kafka's schemas, decoded here with plain struct reads (independent of
tidelog.coordinator.group.records), plus decoding of bytes laid out by hand the way Kafka writes them."""

from __future__ import annotations

import struct

import pytest

from tidelog.coordinator.group import records as rec


def _str(data: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = struct.unpack_from(">h", data, pos)
    pos += 2
    if n < 0:
        return None, pos
    return data[pos : pos + n].decode(), pos + n


def _kstr(s: str | None) -> bytes:
    if s is None:
        return b"\xff\xff"
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def test_offset_commit_key_is_kafka_v1() -> None:
    data = rec.encode_offset_commit_key(rec.OffsetCommitKey("grp", "topic-a", 7))
    assert data == b"\x00\x01" + _kstr("grp") + _kstr("topic-a") + struct.pack(">i", 7)


def test_offset_commit_value_v3_layout() -> None:
    data = rec.encode_offset_commit_value(rec.OffsetCommitValue(123456789012, 5, "meta", 1_700_000_000_123))
    (version, offset, epoch) = struct.unpack_from(">hqi", data, 0)
    metadata, pos = _str(data, 14)
    (commit_ts,) = struct.unpack_from(">q", data, pos)
    assert (version, offset, epoch, metadata, commit_ts) == (3, 123456789012, 5, "meta", 1_700_000_000_123)
    assert pos + 8 == len(data)


def test_offset_commit_value_v1_with_expire_timestamp() -> None:
    data = rec.encode_offset_commit_value(rec.OffsetCommitValue(9, -1, "", 1000, 5000))
    (version, offset) = struct.unpack_from(">hq", data, 0)
    metadata, pos = _str(data, 10)
    assert (version, offset, metadata) == (1, 9, "")
    assert struct.unpack_from(">qq", data, pos) == (1000, 5000)
    back = rec.decode_offset_commit_value(data)
    assert (back.offset, back.commit_timestamp, back.expire_timestamp) == (9, 1000, 5000)


def test_group_metadata_value_v3_layout_round_trip() -> None:
    value = rec.GroupMetadataValue("consumer", 4, "range", "m-1", 1_700_000_000_000, [
        rec.MemberValue("m-1", None, "client", "/10.0.0.1", 300000, 45000, b"\x00\x01sub", b"\x00\x01asg"),
        rec.MemberValue("i-2-x", "i-2", "client2", "/10.0.0.2", 60000, 10000, b"", b""),
    ])
    data = rec.encode_group_metadata_value(value)
    (version,) = struct.unpack_from(">h", data, 0)
    protocol_type, pos = _str(data, 2)
    (generation,) = struct.unpack_from(">i", data, pos)
    protocol, pos = _str(data, pos + 4)
    leader, pos = _str(data, pos)
    (state_ts, count) = struct.unpack_from(">qi", data, pos)
    pos += 12
    assert (version, protocol_type, generation, protocol, leader, state_ts, count) == \
        (3, "consumer", 4, "range", "m-1", 1_700_000_000_000, 2)
    member_id, pos = _str(data, pos)
    instance_id, pos = _str(data, pos)
    client_id, pos = _str(data, pos)
    host, pos = _str(data, pos)
    (rebalance, session, sub_len) = struct.unpack_from(">iii", data, pos)
    pos += 12
    assert (member_id, instance_id, client_id, host, rebalance, session) == \
        ("m-1", None, "client", "/10.0.0.1", 300000, 45000)
    assert data[pos : pos + sub_len] == b"\x00\x01sub"
    assert rec.decode_group_metadata_value(data) == value


def test_decode_group_metadata_value_v0_and_v1_written_by_old_kafka() -> None:
    member_v0 = _kstr("m") + _kstr("c") + _kstr("h") + struct.pack(">i", 10000) + \
        struct.pack(">i", 1) + b"S" + struct.pack(">i", 1) + b"A"
    v0 = b"\x00\x00" + _kstr("consumer") + struct.pack(">i", 2) + _kstr("range") + _kstr("m") + \
        struct.pack(">i", 1) + member_v0
    g = rec.decode_group_metadata_value(v0)
    assert g.members[0].session_timeout == g.members[0].rebalance_timeout == 10000
    assert g.members[0].subscription == b"S" and g.members[0].assignment == b"A"
    empty_v1 = b"\x00\x01" + _kstr("") + struct.pack(">i", 0) + _kstr(None) + _kstr(None) + struct.pack(">i", 0)
    g1 = rec.decode_group_metadata_value(empty_v1)
    assert (g1.protocol_type, g1.protocol, g1.leader, g1.members) == ("", None, None, [])


def test_decode_flexible_v4_offset_value() -> None:
    # v4: compact string metadata (len+1 varint) and a trailing empty tagged-field section
    v4 = struct.pack(">hqi", 4, 77, 2) + bytes([3]) + b"md" + struct.pack(">q", 1234) + b"\x00"
    v = rec.decode_offset_commit_value(v4)
    assert (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp) == (77, 2, "md", 1234)


def test_keys_decode_and_new_protocol_keys_are_skipped() -> None:
    assert rec.decode_key(b"\x00\x00" + _kstr("g") + _kstr("t") + struct.pack(">i", 3)) == \
        rec.OffsetCommitKey("g", "t", 3)
    assert rec.decode_key(b"\x00\x02" + _kstr("g")) == rec.GroupMetadataKey("g")
    assert rec.decode_key(b"\x00\x03" + _kstr("g")) is None        # KIP-848 ConsumerGroupMetadataKey
    with pytest.raises(rec.RecordFormatError):
        rec.decode_key(b"\x00\x01\x00\x05ab")
    with pytest.raises(rec.RecordFormatError):
        rec.decode_offset_commit_value(b"\x00\x09")
