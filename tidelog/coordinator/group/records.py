"""Keys and values of `__consumer_offsets` records, in Kafka's schemas (Kafka's GroupMetadataManager and its record schemas).

Every key and value starts with an INT16 schema version. Kafka's group coordinator writes OffsetCommitKey v1 with
OffsetCommitValue v3 (v1 when the commit carried an explicit retention, OffsetCommit v2-4), and GroupMetadataKey v2
with GroupMetadataValue v3. We read every classic version (values v0-v4; v4 of both values is flexible) so a log
written by Kafka itself loads too. Key versions 3+ belong to KIP-848 groups and are skipped by the loader.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tidelog.coordinator.schema_io import RecordFormatError as RecordFormatError  # callers catch it from here
from tidelog.coordinator.schema_io import SchemaReader, SchemaWriter

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3


# ------------------------------------------------------------------------------------------------- types
@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1          # only in value v1 (explicit retention)


@dataclass(slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberValue] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------- keys
def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    w = SchemaWriter()
    w.i16(OFFSET_COMMIT_KEY_VERSION)
    w.string(key.group)
    w.string(key.topic)
    w.i32(key.partition)
    return w.to_bytes()


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    w = SchemaWriter()
    w.i16(GROUP_METADATA_KEY_VERSION)
    w.string(key.group)
    return w.to_bytes()


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """The key, or None for KIP-848 record types (key versions 3+) this coordinator does not use."""
    r = SchemaReader(data)
    version = r.i16()
    if version in (0, 1):
        group, topic, partition = r.string(), r.string(), r.i32()
        if group is None or topic is None:
            raise RecordFormatError("null group or topic in offset key")
        return OffsetCommitKey(group, topic, partition)
    if version == 2:
        group = r.string()
        if group is None:
            raise RecordFormatError("null group in group metadata key")
        return GroupMetadataKey(group)
    if version < 0:
        raise RecordFormatError(f"bad key version {version}")
    return None


# ----------------------------------------------------------------------------------------------- values
def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    w = SchemaWriter()
    if value.expire_timestamp >= 0:
        # Kafka keeps v1 for commits that asked for their own retention (OffsetCommit v2-4 retention_time_ms).
        w.i16(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE)
        w.i64(value.offset)
        w.string(value.metadata)
        w.i64(value.commit_timestamp)
        w.i64(value.expire_timestamp)
    else:
        w.i16(OFFSET_COMMIT_VALUE_VERSION)
        w.i64(value.offset)
        w.i32(value.leader_epoch)
        w.string(value.metadata)
        w.i64(value.commit_timestamp)
    return w.to_bytes()


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    r = SchemaReader(data)
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown offset commit value version {version}")
    flexible = version >= 4
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string(flexible) or ""
    commit_timestamp = r.i64()
    expire_timestamp = r.i64() if version == 1 else -1
    if flexible:
        r.skip_tags()
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    w = SchemaWriter()
    w.i16(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type)
    w.i32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.i64(value.current_state_timestamp)
    w.i32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return w.to_bytes()


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = SchemaReader(data)
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown group metadata value version {version}")
    flex = version >= 4
    protocol_type = r.string(flex) or ""
    generation = r.i32()
    protocol = r.string(flex)
    leader = r.string(flex)
    state_ts = r.i64() if version >= 2 else -1
    members: list[MemberValue] = []
    for _ in range(max(0, r.array_len(flex))):
        member_id = r.string(flex) or ""
        instance_id = r.string(flex) if version >= 3 else None
        client_id = r.string(flex) or ""
        client_host = r.string(flex) or ""
        session_timeout_first = r.i32()
        if version >= 1:
            rebalance_timeout, session_timeout = session_timeout_first, r.i32()
        else:
            rebalance_timeout = session_timeout = session_timeout_first
        subscription = r.bytes_(flex) or b""
        assignment = r.bytes_(flex) or b""
        if flex:
            r.skip_tags()
        members.append(MemberValue(member_id, instance_id, client_id, client_host, rebalance_timeout,
                                   session_timeout, subscription, assignment))
    if flex:
        r.skip_tags()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, members)
