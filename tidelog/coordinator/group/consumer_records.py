"""`__consumer_offsets` records of KIP-848 consumer groups, in Kafka's formats (group-coordinator's
ConsumerGroup*Key/Value schemas).

Keys are `int16 version` + non-flexible fields; the version names the record type:

| key version | record                                   | value (version 0, flexible)                       |
|---|---|---|
| 3 | ConsumerGroupMetadata (group)                  | Epoch                                              |
| 4 | ConsumerGroupPartitionMetadata (group)         | Topics [TopicId, TopicName, NumPartitions, PartitionMetadata []] |
| 5 | ConsumerGroupMemberMetadata (group, member)    | InstanceId, RackId, ClientId, ClientHost, SubscribedTopicNames, SubscribedTopicRegex, RebalanceTimeoutMs, ServerAssignor (+ tagged ClassicMemberMetadata) |
| 6 | ConsumerGroupTargetAssignmentMetadata (group)  | AssignmentEpoch                                    |
| 7 | ConsumerGroupTargetAssignmentMember (g, m)     | TopicPartitions [TopicId, Partitions]              |
| 8 | ConsumerGroupCurrentMemberAssignment (g, m)    | MemberEpoch, PreviousMemberEpoch, State, AssignedPartitions, PartitionsPendingRevocation |
| 16 | ConsumerGroupRegularExpression (g, regex)     | Topics, Version, Timestamp                         |

Values are `int16 version` + a flexible body (compact strings/arrays, uuid, tagged fields). A null value is a
tombstone. Key versions 9-15 and 17+ (share and streams groups) are not consumer-group records: skipped.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from tidelog.coordinator.group.assignors import Assignment

GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_ASSIGNMENT_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT = 6, 7, 8
REGULAR_EXPRESSION = 16
CONSUMER_GROUP_KEY_VERSIONS = frozenset({*range(3, 9), REGULAR_EXPRESSION})
_GROUP_ONLY = frozenset({GROUP_METADATA, PARTITION_METADATA, TARGET_ASSIGNMENT_METADATA})


class ConsumerRecordError(ValueError):
    pass


# ------------------------------------------------------------------------------------------------ codec
class _Out:
    def __init__(self) -> None:
        self.buf = bytearray()

    def i8(self, v: int) -> None:
        self.buf += struct.pack(">b", v)

    def i16(self, v: int) -> None:
        self.buf += struct.pack(">h", v)

    def i32(self, v: int) -> None:
        self.buf += struct.pack(">i", v)

    def i64(self, v: int) -> None:
        self.buf += struct.pack(">q", v)

    def uvarint(self, v: int) -> None:
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)

    def string(self, v: str) -> None:  # non-flexible (keys)
        data = v.encode()
        self.i16(len(data))
        self.buf += data

    def cstring(self, v: str | None) -> None:  # compact, nullable
        if v is None:
            self.uvarint(0)
            return
        data = v.encode()
        self.uvarint(len(data) + 1)
        self.buf += data

    def cbytes(self, v: bytes) -> None:
        self.uvarint(len(v) + 1)
        self.buf += v

    def alen(self, n: int) -> None:
        self.uvarint(n + 1)

    def uuid(self, v: uuid.UUID) -> None:
        self.buf += v.bytes

    def no_tags(self) -> None:
        self.uvarint(0)


class _In:
    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ConsumerRecordError("truncated record")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i8(self) -> int:
        return int(struct.unpack(">b", self._take(1))[0])

    def i16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def i32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def i64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise ConsumerRecordError("varint too long")

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            raise ConsumerRecordError("null string in key")
        return self._take(n).decode()

    def cstring(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._take(n - 1).decode()

    def cbytes(self) -> bytes:
        n = self.uvarint()
        return b"" if n == 0 else self._take(n - 1)

    def alen(self) -> int:
        n = self.uvarint()
        return 0 if n == 0 else n - 1

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16))

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


# ------------------------------------------------------------------------------------------------- keys
@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    record_type: int  # the key version: 3..8, 16
    group_id: str
    member_id: str | None = None  # the member id, or the regular expression of a key-16 record


def encode_key(key: ConsumerGroupKey) -> bytes:
    out = _Out()
    out.i16(key.record_type)
    out.string(key.group_id)
    if key.record_type not in _GROUP_ONLY:
        assert key.member_id is not None
        out.string(key.member_id)
    return bytes(out.buf)


def decode_key(data: bytes) -> ConsumerGroupKey | None:
    """The key of a consumer-group record, or None for any other record type."""
    r = _In(data)
    version = r.i16()
    if version not in CONSUMER_GROUP_KEY_VERSIONS:
        return None
    group_id = r.string()
    member_id = None if version in _GROUP_ONLY else r.string()
    return ConsumerGroupKey(version, group_id, member_id)


# ----------------------------------------------------------------------------------------------- values
@dataclass(slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    num_partitions: int


@dataclass(slots=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    # tagged field 0, ClassicMemberMetadata: (SessionTimeoutMs, SupportedProtocols [(Name, Metadata)])
    classic: tuple[int, list[tuple[str, bytes]]] | None = None


@dataclass(slots=True)
class RegularExpressionValue:
    topics: list[str]
    version: int  # Kafka: the metadata image offset of the resolution; here a counter
    timestamp: int


@dataclass(slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)


def _write_partitions(out: _Out, assignment: Assignment) -> None:
    items = sorted(((t, sorted(ps)) for t, ps in assignment.items() if ps), key=lambda kv: str(kv[0]))
    out.alen(len(items))
    for topic_id, parts in items:
        out.uuid(topic_id)
        out.alen(len(parts))
        for p in parts:
            out.i32(p)
        out.no_tags()


def _read_partitions(r: _In) -> Assignment:
    result: Assignment = {}
    for _ in range(r.alen()):
        topic_id = r.uuid()
        result[topic_id] = {r.i32() for _ in range(r.alen())}
        r.skip_tags()
    return result


def _value(version_body: _Out) -> bytes:
    version_body.no_tags()
    return bytes(version_body.buf)


def _start() -> _Out:
    out = _Out()
    out.i16(0)  # every value schema is at version 0
    return out


def _open(data: bytes) -> _In:
    r = _In(data)
    version = r.i16()
    if version != 0:
        raise ConsumerRecordError(f"unknown value version {version}")
    return r


def encode_epoch(epoch: int) -> bytes:
    """ConsumerGroupMetadataValue and ConsumerGroupTargetAssignmentMetadataValue (one int32 each)."""
    out = _start()
    out.i32(epoch)
    return _value(out)


def decode_epoch(data: bytes) -> int:
    return _open(data).i32()


def encode_partition_metadata(topics: list[TopicMetadata]) -> bytes:
    out = _start()
    out.alen(len(topics))
    for t in sorted(topics, key=lambda t: t.name):
        out.uuid(t.topic_id)
        out.cstring(t.name)
        out.i32(t.num_partitions)
        out.alen(0)  # PartitionMetadata: no rack information on one node
        out.no_tags()
    return _value(out)


def decode_partition_metadata(data: bytes) -> list[TopicMetadata]:
    r = _open(data)
    topics = []
    for _ in range(r.alen()):
        topic_id, name, n = r.uuid(), r.cstring(), r.i32()
        for _ in range(r.alen()):  # PartitionMetadata [Partition, Racks []string]
            r.i32()
            for _ in range(r.alen()):
                r.cstring()
            r.skip_tags()
        r.skip_tags()
        topics.append(TopicMetadata(topic_id, name or "", n))
    return topics


def encode_member_metadata(v: MemberMetadataValue) -> bytes:
    out = _start()
    out.cstring(v.instance_id)
    out.cstring(v.rack_id)
    out.cstring(v.client_id)
    out.cstring(v.client_host)
    out.alen(len(v.subscribed_topic_names))
    for name in v.subscribed_topic_names:
        out.cstring(name)
    out.cstring(v.subscribed_topic_regex)
    out.i32(v.rebalance_timeout_ms)
    out.cstring(v.server_assignor)
    if v.classic is None:
        return _value(out)  # no ClassicMemberMetadata: a consumer-protocol member
    tagged = _Out()
    tagged.i32(v.classic[0])
    tagged.alen(len(v.classic[1]))
    for name, metadata in v.classic[1]:
        tagged.cstring(name)
        tagged.cbytes(metadata)
        tagged.no_tags()
    tagged.no_tags()
    out.uvarint(1)  # one tagged field
    out.uvarint(0)  # tag 0
    out.uvarint(len(tagged.buf))
    out.buf += tagged.buf
    return bytes(out.buf)


def decode_member_metadata(data: bytes) -> MemberMetadataValue:
    r = _open(data)
    instance_id, rack_id = r.cstring(), r.cstring()
    client_id, client_host = r.cstring() or "", r.cstring() or ""
    topics = [r.cstring() or "" for _ in range(r.alen())]
    regex = r.cstring()
    rebalance_timeout = r.i32()
    assignor = r.cstring()
    classic = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        body = r._take(size)
        if tag == 0:
            t = _In(body)
            session_timeout = t.i32()
            protocols = []
            for _ in range(t.alen()):
                name, metadata = t.cstring() or "", t.cbytes()
                t.skip_tags()
                protocols.append((name, metadata))
            classic = (session_timeout, protocols)
    return MemberMetadataValue(instance_id, rack_id, client_id, client_host, topics, regex, rebalance_timeout,
                               assignor, classic)


def encode_target_member(assignment: Assignment) -> bytes:
    out = _start()
    _write_partitions(out, assignment)
    return _value(out)


def decode_target_member(data: bytes) -> Assignment:
    r = _open(data)
    result = _read_partitions(r)
    r.skip_tags()
    return result


def encode_current_assignment(v: CurrentAssignmentValue) -> bytes:
    out = _start()
    out.i32(v.member_epoch)
    out.i32(v.previous_member_epoch)
    out.i8(v.state)
    _write_partitions(out, v.assigned)
    _write_partitions(out, v.pending_revocation)
    return _value(out)


def decode_current_assignment(data: bytes) -> CurrentAssignmentValue:
    r = _open(data)
    epoch, previous, state = r.i32(), r.i32(), r.i8()
    assigned = _read_partitions(r)
    pending = _read_partitions(r)
    r.skip_tags()
    return CurrentAssignmentValue(epoch, previous, state, assigned, pending)


def encode_regular_expression(v: RegularExpressionValue) -> bytes:
    out = _start()
    out.alen(len(v.topics))
    for t in v.topics:
        out.cstring(t)
    out.i64(v.version)
    out.i64(v.timestamp)
    return _value(out)


def decode_regular_expression(data: bytes) -> RegularExpressionValue:
    r = _open(data)
    topics = [r.cstring() or "" for _ in range(r.alen())]
    version, timestamp = r.i64(), r.i64()
    r.skip_tags()
    return RegularExpressionValue(topics, version, timestamp)
