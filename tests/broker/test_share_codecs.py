"""The KIP-932 share-group codecs (tidelog/protocol/share.py, schemas in tidelog/protocol/schemas/): every request and
response of ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch (78), ShareAcknowledge (79),
DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92), at each version Kafka 4.3
serves, round-trips with a non-default value in every field (nullable fields once set, once null); and hand-built wire
bytes decode to the fields they spell and re-encode to the same bytes, so a field out of order fails."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest

from tidelog.protocol import share
from tidelog.protocol.messages import request_class, response_class

SERVED = {76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2), 90: (0, 1), 91: (0, 0), 92: (0, 0)}  # Kafka 4.3's ApiVersions

T1 = uuid.UUID("6f1c2a4e-0b5d-4c8e-9a77-1d2e3f405162")
T2 = uuid.UUID("a0b1c2d3-e4f5-4617-8899-aabbccddeeff")
RECORDS = bytes(range(61)) + b"\xff" * 7  # opaque to the codec: a record batch's bytes in practice

LEADER = {"leader_id": 3, "leader_epoch": 9}
NODES = [{"node_id": 3, "host": "broker-3", "port": 9093, "rack": "rack-c"},
         {"node_id": 4, "host": "broker-4", "port": 9094, "rack": "rack-d"}]
ACKS = [{"first_offset": 10, "last_offset": 14, "acknowledge_types": [1, 2, 3, 4, 0]},
        {"first_offset": 20, "last_offset": 20, "acknowledge_types": [1]}]

# Every field of every version, none at its default (a field a version lacks is dropped when building that version).
VALUES: dict[str, dict[str, Any]] = {
    "ShareGroupHeartbeatRequest": {
        "group_id": "sg-1", "member_id": "m-abc", "member_epoch": 7, "rack_id": "rack-a",
        "subscribed_topic_names": ["orders", "payments"]},
    "ShareGroupHeartbeatResponse": {
        "throttle_time_ms": 11, "error_code": 25, "error_message": "unknown member", "member_id": "m-abc",
        "member_epoch": 8, "heartbeat_interval_ms": 5000,
        "assignment": {"topic_partitions": [{"topic_id": T1, "partitions": [0, 2]},
                                            {"topic_id": T2, "partitions": [1]}]}},
    "ShareGroupDescribeRequest": {"group_ids": ["sg-1", "sg-2"], "include_authorized_operations": True},
    "ShareGroupDescribeResponse": {"throttle_time_ms": 12, "groups": [{
        "error_code": 69, "error_message": "group", "group_id": "sg-1", "group_state": "Stable", "group_epoch": 4,
        "assignment_epoch": 3, "assignor_name": "simple",
        "members": [{"member_id": "m-1", "rack_id": "r1", "member_epoch": 4, "client_id": "c-1",
                     "client_host": "/10.0.0.1", "subscribed_topic_names": ["orders", "payments"],
                     "assignment": {"topic_partitions": [{"topic_id": T1, "topic_name": "orders",
                                                          "partitions": [0, 1]}]}}],
        "authorized_operations": 0x5F0}]},
    "ShareFetchRequest": {
        "group_id": "sg-1", "member_id": "m-abc", "share_session_epoch": 3, "max_wait_ms": 500, "min_bytes": 1,
        "max_bytes": 1 << 20, "max_records": 200, "batch_size": 50, "share_acquire_mode": 1, "is_renew_ack": True,
        "topics": [{"topic_id": T1, "partitions": [{"partition_index": 2, "acknowledgement_batches": ACKS},
                                                   {"partition_index": 5, "acknowledgement_batches": ACKS[1:]}]}],
        "forgotten_topics_data": [{"topic_id": T2, "partitions": [5, 6]}]},
    "ShareFetchResponse": {
        "throttle_time_ms": 13, "error_code": 87, "error_message": "top", "acquisition_lock_timeout_ms": 30000,
        "responses": [{"topic_id": T1, "partitions": [{
            "partition_index": 2, "error_code": 6, "error_message": "not leader", "acknowledge_error_code": 56,
            "acknowledge_error_message": "ack failed", "current_leader": LEADER, "records": RECORDS,
            "acquired_records": [{"first_offset": 10, "last_offset": 19, "delivery_count": 2},
                                 {"first_offset": 25, "last_offset": 25, "delivery_count": 5}]}]}],
        "node_endpoints": NODES},
    "ShareAcknowledgeRequest": {
        "group_id": "sg-1", "member_id": "m-abc", "share_session_epoch": 4, "is_renew_ack": True,
        "topics": [{"topic_id": T1, "partitions": [{"partition_index": 2, "acknowledgement_batches": ACKS}]},
                   {"topic_id": T2, "partitions": [{"partition_index": 1, "acknowledgement_batches": ACKS[:1]}]}]},
    "ShareAcknowledgeResponse": {
        "throttle_time_ms": 14, "error_code": 87, "error_message": "top", "acquisition_lock_timeout_ms": 15000,
        "responses": [{"topic_id": T1, "partitions": [{"partition_index": 2, "error_code": 6,
                                                       "error_message": "not leader", "current_leader": LEADER}]}],
        "node_endpoints": NODES},
    "DescribeShareGroupOffsetsRequest": {"groups": [
        {"group_id": "sg-1", "topics": [{"topic_name": "orders", "partitions": [0, 1]}]},
        {"group_id": "sg-2", "topics": [{"topic_name": "payments", "partitions": [3]},
                                        {"topic_name": "orders", "partitions": [2]}]}]},
    "DescribeShareGroupOffsetsResponse": {"throttle_time_ms": 15, "groups": [{
        "group_id": "sg-1", "topics": [{"topic_name": "orders", "topic_id": T1, "partitions": [
            {"partition_index": 1, "start_offset": 120, "leader_epoch": 6, "lag": 42, "error_code": 3,
             "error_message": "unknown partition"}]}],
        "error_code": 16, "error_message": "not coordinator"}]},
    "AlterShareGroupOffsetsRequest": {"group_id": "sg-1", "topics": [
        {"topic_name": "orders", "partitions": [{"partition_index": 1, "start_offset": 77},
                                                {"partition_index": 4, "start_offset": 5}]}]},
    "AlterShareGroupOffsetsResponse": {
        "throttle_time_ms": 16, "error_code": 68, "error_message": "non-empty group", "responses": [
            {"topic_name": "orders", "topic_id": T1, "partitions": [{"partition_index": 1, "error_code": 3,
                                                                     "error_message": "no such partition"}]}]},
    "DeleteShareGroupOffsetsRequest": {"group_id": "sg-1", "topics": [{"topic_name": "orders"},
                                                                      {"topic_name": "payments"}]},
    "DeleteShareGroupOffsetsResponse": {
        "throttle_time_ms": 17, "error_code": 68, "error_message": "non-empty group", "responses": [
            {"topic_name": "orders", "topic_id": T1, "error_code": 3, "error_message": "no such topic"}]},
}


def build(cls: Any, values: dict[str, Any], version: int, check_defaults: bool = True) -> Any:
    """`cls` at `version` from `values` (nested dicts/lists become the schema's data classes). Every field the version
    has must be in `values` and, unless null, differ from its default."""
    fields = cls._struct.fields
    kwargs = {}
    for name, value in values.items():
        field = fields[name]
        if not field.for_version_q(version):
            continue
        if value is not None and field.is_struct_array():
            value = [build(field.data_class, item, version, check_defaults) for item in value]
        elif value is not None and field.is_struct():
            value = build(field.data_class, value, version, check_defaults)
        elif check_defaults and value is not None:
            assert value != field.default, (cls.__name__, name)
        kwargs[name] = value
    assert set(kwargs) == {f.name for f in fields.values() if f.for_version_q(version)}, cls.__name__
    return cls(version=version, **kwargs)


def plain(obj: Any, version: int) -> Any:
    """A decoded message as nested dicts of the fields its version has (records as bytes)."""
    if isinstance(obj, list):
        return [plain(item, version) for item in obj]
    if isinstance(obj, memoryview):
        return obj.tobytes()
    if not hasattr(obj, "_struct"):
        return obj
    return {f.name: plain(getattr(obj, f.name), version) for f in obj._struct.fields.values() if f.for_version_q(version)}


def in_version(cls: Any, values: dict[str, Any], version: int) -> dict[str, Any]:
    out = {}
    for name, value in values.items():
        field = cls._struct.fields[name]
        if not field.for_version_q(version):
            continue
        if value is not None and field.is_struct_array():
            value = [in_version(field.data_class, item, version) for item in value]
        elif value is not None and field.is_struct():
            value = in_version(field.data_class, value, version)
        out[name] = value
    return out


def nulled(cls: Any, values: dict[str, Any], version: int) -> dict[str, Any]:
    """`values` with each field nullable at `version` (at any depth) set to null."""
    out = {}
    for name, value in values.items():
        field = cls._struct.fields[name]
        if field.for_version_q(version) and field.nullable_for_version_q(version):
            value = None
        elif field.is_struct_array():
            value = [nulled(field.data_class, item, version) for item in value]
        elif field.is_struct():
            value = nulled(field.data_class, value, version)
        out[name] = value
    return out


def message_class(api_key: int, side: str) -> Any:
    return (request_class if side == "request" else response_class)(api_key)


def has_nullable(api_key: int, side: str, version: int) -> bool:
    cls = message_class(api_key, side)
    values = in_version(cls, VALUES[cls.__name__], version)
    return nulled(cls, values, version) != values


# (api key, side, version, "set": nullable fields set | "nulls": nullable fields null, where the version has any)
CASES = [(api_key, side, version, variant)
         for api_key, (low, high) in SERVED.items() for side in ("request", "response")
         for version in range(low, high + 1) for variant in ("set", "nulls")
         if variant == "set" or has_nullable(api_key, side, version)]


@pytest.mark.parametrize(("api_key", "side", "version", "variant"), CASES,
                         ids=[f"{k}-{s}-v{v}-{n}" for k, s, v, n in CASES])
def test_round_trip(api_key: int, side: str, version: int, variant: str) -> None:
    cls = message_class(api_key, side)
    values = VALUES[cls.__name__]
    if variant == "nulls":
        values = nulled(cls, values, version)
    message = build(cls, values, version, check_defaults=variant == "set")
    data = message.encode(version=version)
    # the schema walk (tidelog's encode_response for a message's first sends) writes the same bytes
    assert message._struct.encode(message, version=version, compact=True, tagged=True) == data
    decoded = cls.decode(data, version=version)
    assert decoded == message
    assert plain(decoded, version) == in_version(cls, values, version)
    assert plain(cls[version].decode(data), version) == in_version(cls, values, version)


def test_served_versions_resolve_through_messages() -> None:
    fetch: Any = share.ShareFetchRequest
    acknowledge: Any = share.ShareAcknowledgeResponse
    assert request_class(78)[2] is fetch[2]
    assert response_class(79)[1] is acknowledge[1]
    names = {76: "ShareGroupHeartbeat", 77: "ShareGroupDescribe", 78: "ShareFetch", 79: "ShareAcknowledge",
             90: "DescribeShareGroupOffsets", 91: "AlterShareGroupOffsets", 92: "DeleteShareGroupOffsets"}
    for api_key, (low, high) in SERVED.items():
        for side in ("request", "response"):
            cls = message_class(api_key, side)
            assert cls is getattr(share, names[api_key] + side.title())
            assert cls.API_KEY == api_key and cls.type == side
            assert cls.valid_versions == (low, high)  # Kafka's: v0 of 76-79 was removed in 4.1
            assert cls.flexible_version_q(high)
            assert cls[high].__name__ == f"{cls.__name__}_v{high}"
            with pytest.raises(ValueError):
                cls[high + 1]


# Hand-built wire bytes: Kafka's flexible encodings (compact strings/arrays are length+1 varints, null = 0; every struct
# ends with its tagged-field count, 0 here; a nullable struct has an int8 -1/1 marker).
def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def uvarint(n: int) -> bytes:
    out = b""
    while n >= 0x80:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def s(value: str | None) -> bytes:
    return b"\x00" if value is None else uvarint(len(value.encode()) + 1) + value.encode()


def arr(items: list[bytes] | None) -> bytes:
    return b"\x00" if items is None else uvarint(len(items) + 1) + b"".join(items)


TAGS = b"\x00"
TRUE = b"\x01"


def acks_wire(batches: list[tuple[int, int, list[int]]]) -> bytes:
    return arr([i64(first) + i64(last) + arr([i8(t) for t in types]) + TAGS for first, last, types in batches])


WIRE: list[tuple[int, str, int, bytes, dict[str, Any]]] = [
    (76, "response", 1,
     i32(11) + i16(25) + s("unknown member") + s("m-abc") + i32(8) + i32(5000)
     + TRUE + arr([T1.bytes + arr([i32(0), i32(2)]) + TAGS]) + TAGS + TAGS,
     {"throttle_time_ms": 11, "error_code": 25, "error_message": "unknown member", "member_id": "m-abc",
      "member_epoch": 8, "heartbeat_interval_ms": 5000,
      "assignment": {"topic_partitions": [{"topic_id": T1, "partitions": [0, 2]}]}}),
    (76, "request", 1,
     s("sg-1") + s("m-abc") + i32(0) + s(None) + arr([s("orders")]) + TAGS,
     {"group_id": "sg-1", "member_id": "m-abc", "member_epoch": 0, "rack_id": None,
      "subscribed_topic_names": ["orders"]}),
    (77, "response", 1,
     i32(12) + arr([i16(0) + s(None) + s("sg-1") + s("Stable") + i32(4) + i32(3) + s("simple")
                    + arr([s("m-1") + s("r1") + i32(4) + s("c-1") + s("/10.0.0.1") + arr([s("orders")])
                           + arr([T1.bytes + s("orders") + arr([i32(1)]) + TAGS]) + TAGS + TAGS])
                    + i32(0x5F0) + TAGS]) + TAGS,
     {"throttle_time_ms": 12, "groups": [{
         "error_code": 0, "error_message": None, "group_id": "sg-1", "group_state": "Stable", "group_epoch": 4,
         "assignment_epoch": 3, "assignor_name": "simple",
         "members": [{"member_id": "m-1", "rack_id": "r1", "member_epoch": 4, "client_id": "c-1",
                      "client_host": "/10.0.0.1", "subscribed_topic_names": ["orders"],
                      "assignment": {"topic_partitions": [{"topic_id": T1, "topic_name": "orders",
                                                           "partitions": [1]}]}}],
         "authorized_operations": 0x5F0}]}),
    (78, "request", 2,
     s("sg-1") + s("m-abc") + i32(3) + i32(500) + i32(1) + i32(1 << 20) + i32(200) + i32(50) + i8(1) + TRUE
     + arr([T1.bytes + arr([i32(2) + acks_wire([(10, 14, [1, 4])]) + TAGS]) + TAGS])
     + arr([T2.bytes + arr([i32(5), i32(6)]) + TAGS]) + TAGS,
     {"group_id": "sg-1", "member_id": "m-abc", "share_session_epoch": 3, "max_wait_ms": 500, "min_bytes": 1,
      "max_bytes": 1 << 20, "max_records": 200, "batch_size": 50, "share_acquire_mode": 1, "is_renew_ack": True,
      "topics": [{"topic_id": T1, "partitions": [{"partition_index": 2, "acknowledgement_batches": [
          {"first_offset": 10, "last_offset": 14, "acknowledge_types": [1, 4]}]}]}],
      "forgotten_topics_data": [{"topic_id": T2, "partitions": [5, 6]}]}),
    (78, "request", 1,  # no ShareAcquireMode / IsRenewAck; no PartitionMaxBytes (v0 only)
     s(None) + s(None) + i32(-1) + i32(500) + i32(1) + i32(1 << 20) + i32(200) + i32(50)
     + arr([T1.bytes + arr([i32(2) + acks_wire([]) + TAGS]) + TAGS]) + arr([]) + TAGS,
     {"group_id": None, "member_id": None, "share_session_epoch": -1, "max_wait_ms": 500, "min_bytes": 1,
      "max_bytes": 1 << 20, "max_records": 200, "batch_size": 50,
      "topics": [{"topic_id": T1, "partitions": [{"partition_index": 2, "acknowledgement_batches": []}]}],
      "forgotten_topics_data": []}),
    (78, "response", 2,
     i32(13) + i16(0) + s(None) + i32(30000)
     + arr([T1.bytes + arr([i32(2) + i16(6) + s("not leader") + i16(56) + s("ack failed")
                            + i32(3) + i32(9) + TAGS + uvarint(len(RECORDS) + 1) + RECORDS
                            + arr([i64(10) + i64(19) + i16(2) + TAGS]) + TAGS]) + TAGS])
     + arr([i32(3) + s("broker-3") + i32(9093) + s(None) + TAGS]) + TAGS,
     {"throttle_time_ms": 13, "error_code": 0, "error_message": None, "acquisition_lock_timeout_ms": 30000,
      "responses": [{"topic_id": T1, "partitions": [{
          "partition_index": 2, "error_code": 6, "error_message": "not leader", "acknowledge_error_code": 56,
          "acknowledge_error_message": "ack failed", "current_leader": LEADER, "records": RECORDS,
          "acquired_records": [{"first_offset": 10, "last_offset": 19, "delivery_count": 2}]}]}],
      "node_endpoints": [{"node_id": 3, "host": "broker-3", "port": 9093, "rack": None}]}),
    (79, "request", 2,
     s("sg-1") + s("m-abc") + i32(4) + TRUE
     + arr([T2.bytes + arr([i32(0) + acks_wire([(7, 9, [4]), (11, 12, [2, 3])]) + TAGS]) + TAGS]) + TAGS,
     {"group_id": "sg-1", "member_id": "m-abc", "share_session_epoch": 4, "is_renew_ack": True,
      "topics": [{"topic_id": T2, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
          {"first_offset": 7, "last_offset": 9, "acknowledge_types": [4]},
          {"first_offset": 11, "last_offset": 12, "acknowledge_types": [2, 3]}]}]}]}),
    (79, "response", 2,
     i32(14) + i16(0) + s(None) + i32(15000)
     + arr([T1.bytes + arr([i32(2) + i16(6) + s("not leader") + i32(3) + i32(9) + TAGS + TAGS]) + TAGS])
     + arr([i32(3) + s("broker-3") + i32(9093) + s("rack-c") + TAGS]) + TAGS,
     {"throttle_time_ms": 14, "error_code": 0, "error_message": None, "acquisition_lock_timeout_ms": 15000,
      "responses": [{"topic_id": T1, "partitions": [{"partition_index": 2, "error_code": 6,
                                                     "error_message": "not leader", "current_leader": LEADER}]}],
      "node_endpoints": [NODES[0]]}),
    (90, "request", 1,
     arr([s("sg-1") + arr(None) + TAGS, s("sg-2") + arr([s("orders") + arr([i32(0), i32(3)]) + TAGS]) + TAGS]) + TAGS,
     {"groups": [{"group_id": "sg-1", "topics": None},
                 {"group_id": "sg-2", "topics": [{"topic_name": "orders", "partitions": [0, 3]}]}]}),
    (90, "response", 1,
     i32(15) + arr([s("sg-1") + arr([s("orders") + T1.bytes
                                     + arr([i32(1) + i64(120) + i32(6) + i64(42) + i16(0) + s(None) + TAGS])
                                     + TAGS]) + i16(16) + s("not coordinator") + TAGS]) + TAGS,
     {"throttle_time_ms": 15, "groups": [{
         "group_id": "sg-1", "topics": [{"topic_name": "orders", "topic_id": T1, "partitions": [
             {"partition_index": 1, "start_offset": 120, "leader_epoch": 6, "lag": 42, "error_code": 0,
              "error_message": None}]}],
         "error_code": 16, "error_message": "not coordinator"}]}),
    (90, "response", 0,  # no Lag
     i32(15) + arr([s("sg-1") + arr([s("orders") + T1.bytes
                                     + arr([i32(1) + i64(120) + i32(6) + i16(0) + s(None) + TAGS])
                                     + TAGS]) + i16(0) + s(None) + TAGS]) + TAGS,
     {"throttle_time_ms": 15, "groups": [{
         "group_id": "sg-1", "topics": [{"topic_name": "orders", "topic_id": T1, "partitions": [
             {"partition_index": 1, "start_offset": 120, "leader_epoch": 6, "error_code": 0,
              "error_message": None}]}],
         "error_code": 0, "error_message": None}]}),
    (91, "request", 0,
     s("sg-1") + arr([s("orders") + arr([i32(1) + i64(77) + TAGS, i32(4) + i64(5) + TAGS]) + TAGS]) + TAGS,
     {"group_id": "sg-1", "topics": [{"topic_name": "orders", "partitions": [
         {"partition_index": 1, "start_offset": 77}, {"partition_index": 4, "start_offset": 5}]}]}),
    (91, "response", 0,
     i32(16) + i16(0) + s(None)
     + arr([s("orders") + T1.bytes + arr([i32(1) + i16(3) + s("no such partition") + TAGS]) + TAGS]) + TAGS,
     {"throttle_time_ms": 16, "error_code": 0, "error_message": None, "responses": [
         {"topic_name": "orders", "topic_id": T1, "partitions": [
             {"partition_index": 1, "error_code": 3, "error_message": "no such partition"}]}]}),
    (92, "request", 0,
     s("sg-1") + arr([s("orders") + TAGS, s("payments") + TAGS]) + TAGS,
     {"group_id": "sg-1", "topics": [{"topic_name": "orders"}, {"topic_name": "payments"}]}),
    (92, "response", 0,
     i32(17) + i16(68) + s("non-empty group") + arr([s("orders") + T1.bytes + i16(3) + s(None) + TAGS]) + TAGS,
     {"throttle_time_ms": 17, "error_code": 68, "error_message": "non-empty group", "responses": [
         {"topic_name": "orders", "topic_id": T1, "error_code": 3, "error_message": None}]}),
]


@pytest.mark.parametrize(("api_key", "side", "version", "data", "expected"), WIRE,
                         ids=[f"{k}-{s}-v{v}" for k, s, v, _, _ in WIRE])
def test_hand_built_bytes(api_key: int, side: str, version: int, data: bytes, expected: dict[str, Any]) -> None:
    cls = message_class(api_key, side)
    assert plain(cls.decode(data, version=version), version) == expected
    assert build(cls, expected, version, check_defaults=False).encode(version=version) == data


def test_every_api_has_hand_built_bytes() -> None:
    assert {k for k, *_ in WIRE} == set(SERVED)
