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
| 8 | ConsumerGroupCurrentMemberAssignment (g, m)    | MemberEpoch, PreviousMemberEpoch, State, AssignedPartitions, PartitionsPendingRevocation (each [TopicId, Partitions, tagged 0: AssignmentEpochs]) |
| 16 | ConsumerGroupRegularExpression (g, regex)     | Topics, Version, Timestamp                         |

Values are `int16 version` + a flexible body (compact strings/arrays, uuid, tagged fields). A null value is a
tombstone. Key versions 9-15 and 17+ (share and streams groups) are not consumer-group records: skipped.

KIP-1251 (Kafka 4.3): each TopicPartitions of a current member assignment carries the tagged field 0
AssignmentEpochs (nullable []int32, aligned with Partitions): the member epoch at which each partition was assigned
to the member. A record written without it (before 4.3) reads as every partition assigned at max(MemberEpoch, 0),
as Kafka's Utils.assignmentFromTopicPartitions does (a short array leaves the rest at that default too).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from tidelog.coordinator.group.consumer.assignors import Assignment
from tidelog.coordinator.schema_io import RecordFormatError, SchemaReader, SchemaWriter

GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_ASSIGNMENT_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT = 6, 7, 8
REGULAR_EXPRESSION = 16
CONSUMER_GROUP_KEY_VERSIONS = frozenset({*range(3, 9), REGULAR_EXPRESSION})
_GROUP_ONLY = frozenset({GROUP_METADATA, PARTITION_METADATA, TARGET_ASSIGNMENT_METADATA})


ConsumerRecordError = RecordFormatError  # the name callers catch; one error for every internal-topic record


# ------------------------------------------------------------------------------------------------- keys
@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    record_type: int  # the key version: 3..8, 16
    group_id: str
    member_id: str | None = None  # the member id, or the regular expression of a key-16 record


def encode_key(key: ConsumerGroupKey) -> bytes:
    out = SchemaWriter()
    out.i16(key.record_type)
    out.string(key.group_id)
    if key.record_type not in _GROUP_ONLY:
        assert key.member_id is not None
        out.string(key.member_id)
    return out.to_bytes()


def decode_key(data: bytes) -> ConsumerGroupKey | None:
    """The key of a consumer-group record, or None for any other record type."""
    r = SchemaReader(data)
    version = r.i16()
    if version not in CONSUMER_GROUP_KEY_VERSIONS:
        return None
    group_id = r.required_string()
    member_id = None if version in _GROUP_ONLY else r.required_string()
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


AssignmentWithEpochs = dict[uuid.UUID, dict[int, int]]  # topic id -> partition -> assignment epoch (KIP-1251)


def with_epoch(assignment: Assignment, epoch: int) -> AssignmentWithEpochs:
    """Every partition of `assignment` assigned at `epoch`."""
    return {t: dict.fromkeys(ps, epoch) for t, ps in assignment.items() if ps}


def partitions_of(assignment: AssignmentWithEpochs) -> Assignment:
    """The partitions alone."""
    return {t: set(ps) for t, ps in assignment.items() if ps}


@dataclass(slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: AssignmentWithEpochs = field(default_factory=dict)
    pending_revocation: AssignmentWithEpochs = field(default_factory=dict)


def _write_partitions(out: SchemaWriter, assignment: Assignment) -> None:
    items = sorted(((t, sorted(ps)) for t, ps in assignment.items() if ps), key=lambda kv: str(kv[0]))
    out.array_len(len(items), True)
    for topic_id, parts in items:
        out.uuid(topic_id)
        out.array_len(len(parts), True)
        for p in parts:
            out.i32(p)
        out.no_tags()


_ASSIGNMENT_EPOCHS_TAG = 0  # ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions.AssignmentEpochs


def _write_partitions_with_epochs(out: SchemaWriter, assignment: AssignmentWithEpochs) -> None:
    items = sorted(((t, sorted(ps.items())) for t, ps in assignment.items() if ps), key=lambda kv: str(kv[0]))
    out.array_len(len(items), True)
    for topic_id, parts in items:
        out.uuid(topic_id)
        out.array_len(len(parts), True)
        for p, _ in parts:
            out.i32(p)
        epochs = SchemaWriter()
        epochs.array_len(len(parts), True)
        for _, epoch in parts:
            epochs.i32(epoch)
        out.tagged_fields([(_ASSIGNMENT_EPOCHS_TAG, epochs.to_bytes())])


def _read_partitions_with_epochs(r: SchemaReader, default_epoch: int) -> AssignmentWithEpochs:
    """Partitions without (or with a short) AssignmentEpochs take `default_epoch`."""
    result: AssignmentWithEpochs = {}
    for _ in range(r.array_len(True)):
        topic_id = r.uuid()
        parts = [r.i32() for _ in range(r.array_len(True))]
        epochs: list[int] = []
        body = r.tagged_fields().get(_ASSIGNMENT_EPOCHS_TAG)
        if body is not None:
            t = SchemaReader(body)
            epochs = [t.i32() for _ in range(max(t.array_len(True), 0))]
        topic = result.setdefault(topic_id, {})
        for i, p in enumerate(parts):
            topic[p] = epochs[i] if i < len(epochs) else default_epoch
    return result


def _read_partitions(r: SchemaReader) -> Assignment:
    result: Assignment = {}
    for _ in range(r.array_len(True)):
        topic_id = r.uuid()
        result[topic_id] = {r.i32() for _ in range(r.array_len(True))}
        r.skip_tags()
    return result


def _value(version_body: SchemaWriter) -> bytes:
    version_body.no_tags()
    return version_body.to_bytes()


def _start() -> SchemaWriter:
    out = SchemaWriter()
    out.i16(0)  # every value schema is at version 0
    return out


def _open(data: bytes) -> SchemaReader:
    r = SchemaReader(data)
    version = r.i16()
    if version != 0:
        raise RecordFormatError(f"unknown value version {version}")
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
    out.array_len(len(topics), True)
    for t in sorted(topics, key=lambda t: t.name):
        out.uuid(t.topic_id)
        out.string(t.name, True)
        out.i32(t.num_partitions)
        out.array_len(0, True)  # PartitionMetadata: no rack information on one node
        out.no_tags()
    return _value(out)


def decode_partition_metadata(data: bytes) -> list[TopicMetadata]:
    r = _open(data)
    topics = []
    for _ in range(r.array_len(True)):
        topic_id, name, n = r.uuid(), r.string(True), r.i32()
        for _ in range(r.array_len(True)):  # PartitionMetadata [Partition, Racks []string]
            r.i32()
            for _ in range(r.array_len(True)):
                r.string(True)
            r.skip_tags()
        r.skip_tags()
        topics.append(TopicMetadata(topic_id, name or "", n))
    return topics


def encode_member_metadata(v: MemberMetadataValue) -> bytes:
    out = _start()
    out.string(v.instance_id, True)
    out.string(v.rack_id, True)
    out.string(v.client_id, True)
    out.string(v.client_host, True)
    out.array_len(len(v.subscribed_topic_names), True)
    for name in v.subscribed_topic_names:
        out.string(name, True)
    out.string(v.subscribed_topic_regex, True)
    out.i32(v.rebalance_timeout_ms)
    out.string(v.server_assignor, True)
    if v.classic is None:
        return _value(out)  # no ClassicMemberMetadata: a consumer-protocol member
    tagged = SchemaWriter()
    tagged.i32(v.classic[0])
    tagged.array_len(len(v.classic[1]), True)
    for name, metadata in v.classic[1]:
        tagged.string(name, True)
        tagged.bytes_(metadata, True)
        tagged.no_tags()
    tagged.no_tags()
    out.tagged_fields([(0, tagged.to_bytes())])
    return out.to_bytes()


def decode_member_metadata(data: bytes) -> MemberMetadataValue:
    r = _open(data)
    instance_id, rack_id = r.string(True), r.string(True)
    client_id, client_host = r.string(True) or "", r.string(True) or ""
    topics = [r.string(True) or "" for _ in range(r.array_len(True))]
    regex = r.string(True)
    rebalance_timeout = r.i32()
    assignor = r.string(True)
    classic = None
    body = r.tagged_fields().get(0)
    if body is not None:
        t = SchemaReader(body)
        session_timeout = t.i32()
        protocols = []
        for _ in range(t.array_len(True)):
            name, metadata = t.string(True) or "", t.bytes_(True) or b""
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
    _write_partitions_with_epochs(out, v.assigned)
    _write_partitions_with_epochs(out, v.pending_revocation)
    return _value(out)


def decode_current_assignment(data: bytes) -> CurrentAssignmentValue:
    r = _open(data)
    epoch, previous, state = r.i32(), r.i32(), r.i8()
    default_epoch = max(epoch, 0)  # a static member that left is at -2 (LEAVE_GROUP_STATIC_MEMBER_EPOCH)
    assigned = _read_partitions_with_epochs(r, default_epoch)
    pending = _read_partitions_with_epochs(r, default_epoch)
    r.skip_tags()
    return CurrentAssignmentValue(epoch, previous, state, assigned, pending)


def encode_regular_expression(v: RegularExpressionValue) -> bytes:
    out = _start()
    out.array_len(len(v.topics), True)
    for t in v.topics:
        out.string(t, True)
    out.i64(v.version)
    out.i64(v.timestamp)
    return _value(out)


def decode_regular_expression(data: bytes) -> RegularExpressionValue:
    r = _open(data)
    topics = [r.string(True) or "" for _ in range(r.array_len(True))]
    version, timestamp = r.i64(), r.i64()
    r.skip_tags()
    return RegularExpressionValue(topics, version, timestamp)
