"""Keys and values of `__consumer_offsets` records, in Kafka's schemas (Kafka's GroupMetadataManager and its record schemas).

Every key and value starts with an INT16 schema version. Kafka's group coordinator writes OffsetCommitKey v1 with
OffsetCommitValue v3 (v1 when the commit carried an explicit retention, OffsetCommit v2-4), and GroupMetadataKey v2
with GroupMetadataValue v3. We read every classic version (values v0-v4; v4 of both values is flexible) so a log
written by Kafka itself loads too. Key versions 3+ belong to KIP-848 groups and are skipped by the loader.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value that does not parse in any known schema version."""


# ----------------------------------------------------------------------------------------------- encoding
class _Writer:
    def __init__(self) -> None:
        self.buf = bytearray()

    def i16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def i32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def string(self, v: str | None) -> None:
        if v is None:
            self.i16(-1)
            return
        raw = v.encode()
        self.i16(len(raw))
        self.buf += raw

    def bytes_(self, v: bytes | None) -> None:
        if v is None:
            self.i32(-1)
            return
        self.i32(len(v))
        self.buf += v


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError("truncated record")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise RecordFormatError("varint too long")

    def string(self, flexible: bool = False) -> str | None:
        n = self.uvarint() - 1 if flexible else self.i16()
        return None if n < 0 else self._take(n).decode()

    def bytes_(self, flexible: bool = False) -> bytes | None:
        n = self.uvarint() - 1 if flexible else self.i32()
        return None if n < 0 else bytes(self._take(n))

    def array_len(self, flexible: bool = False) -> int:
        return self.uvarint() - 1 if flexible else self.i32()

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


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
    w = _Writer()
    w.i16(OFFSET_COMMIT_KEY_VERSION)
    w.string(key.group)
    w.string(key.topic)
    w.i32(key.partition)
    return bytes(w.buf)


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    w = _Writer()
    w.i16(GROUP_METADATA_KEY_VERSION)
    w.string(key.group)
    return bytes(w.buf)


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """The key, or None for KIP-848 record types (key versions 3+) this coordinator does not use."""
    r = _Reader(data)
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
    w = _Writer()
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
    return bytes(w.buf)


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    r = _Reader(data)
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
    w = _Writer()
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
    return bytes(w.buf)


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(data)
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
