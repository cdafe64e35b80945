"""ApiVersions (key 18) v0-5 and Metadata (key 3) v0-13 request decoders and response encoders, by hand: both
are on the start-up path (a client's first two requests), where building kafka-python's schema classes for them
cost 10-14 ms of a ~110 ms start. Field layout: Kafka's ApiVersionsRequest.json / ApiVersionsResponse.json
(flexible from v3, KIP-511; the response header stays v0 even then, so a client can read the error of a version
it does not speak; v5 adds the request's ClusterId and NodeId, KIP-1242, and leaves the response as v4) and
MetadataRequest.json / MetadataResponse.json (flexible from v9, KIP-482; topic ids from v10, KIP-516). Tagged
fields in requests are skipped (none are defined); ApiVersions v3+ responses write their
tagged fields (supported features, finalized features and their epoch, zk migration readiness) only when they
differ from their defaults, as kafka-python's encoder does, so both write the same bytes.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from tidelog.protocol.wire import (
    EMPTY_TAGGED_FIELDS,
    INT16,
    INT32,
    INT64,
    EncodedResponse,
    WireError,
    array_length_bytes,
    check_array_length,
    read_int32,
    read_string,
    read_uvarint,
    skip_tagged_fields,
    string_bytes,
    write_uvarint,
)

API_VERSIONS_FLEXIBLE_MIN_VERSION = 3
API_VERSIONS_MAX_VERSION = 5
API_VERSIONS_CLUSTER_CHECK_MIN_VERSION = 5  # KIP-1242: the request names the cluster and node it means
METADATA_FLEXIBLE_MIN_VERSION = 9
METADATA_TOPIC_ID_MIN_VERSION = 10
METADATA_MAX_VERSION = 13
# Kafka's "not requested" authorized-operations bitfield (KIP-430): INT32_MIN, written unsigned.
AUTHORIZED_OPERATIONS_OMITTED = 0x80000000

_API_VERSION = struct.Struct(">hhh")
_FEATURE_RANGE = struct.Struct(">hh")
_BROKER_PORT = INT32
_PARTITION_V0 = struct.Struct(">hii")  # error_code, partition_index, leader_id
_PARTITION_V7 = struct.Struct(">hiii")  # ... leader_epoch
_UINT32 = struct.Struct(">I")
_ZERO_UUID_BYTES = bytes(16)


# --- ApiVersions ---------------------------------------------------------------------------------------------

class ApiVersionsRequestData:
    """The fields of an ApiVersions request, named as kafka-python's (None below v3, which has no body). From v5
    (KIP-1242) ClusterId (nullable, default null) and NodeId (int32, default -1): the cluster and node the client
    means to reach; below v5 they keep those defaults."""

    __slots__ = ("client_software_name", "client_software_version", "cluster_id", "node_id")

    def __init__(self, client_software_name: str | None, client_software_version: str | None,
                 cluster_id: str | None = None, node_id: int = -1) -> None:
        self.client_software_name = client_software_name
        self.client_software_version = client_software_version
        self.cluster_id = cluster_id
        self.node_id = node_id


def decode_api_versions_request(frame: memoryview, pos: int, version: int) -> ApiVersionsRequestData:
    """Decode an ApiVersions request body starting at `pos` (after the request header). Raises WireError."""
    if not 0 <= version <= API_VERSIONS_MAX_VERSION:
        raise WireError(f"ApiVersions v{version} is not decoded here")
    if version < API_VERSIONS_FLEXIBLE_MIN_VERSION:
        return ApiVersionsRequestData(None, None)
    name, pos = read_string(frame, pos, True)
    software_version, pos = read_string(frame, pos, True)
    if name is None or software_version is None:
        raise WireError("non-nullable field client_software_name/version was serialized as null")
    cluster_id: str | None = None
    node_id = -1
    if version >= API_VERSIONS_CLUSTER_CHECK_MIN_VERSION:
        cluster_id, pos = read_string(frame, pos, True)
        node_id, pos = read_int32(frame, pos)
    skip_tagged_fields(frame, pos)
    return ApiVersionsRequestData(name, software_version, cluster_id, node_id)


class ApiVersion(NamedTuple):
    api_key: int
    min_version: int
    max_version: int


class SupportedFeatureKey(NamedTuple):
    name: str
    min_version: int
    max_version: int


class FinalizedFeatureKey(NamedTuple):
    name: str
    max_version_level: int
    min_version_level: int


def _tagged_field(tag: int, payload: bytes) -> bytes:
    return write_uvarint(tag) + write_uvarint(len(payload)) + payload


def _features(entries: Sequence[tuple[str, int, int]]) -> bytes:
    """A tagged array of features: compact, each entry with its own (empty) tagged fields."""
    out = [array_length_bytes(len(entries), True)]
    for name, a, b in entries:
        out.append(string_bytes(name, True))
        out.append(_FEATURE_RANGE.pack(a, b))
        out.append(EMPTY_TAGGED_FIELDS)
    return b"".join(out)


class ApiVersionsResponseData(EncodedResponse):
    """An ApiVersions response at `version`, encoded when the connection writes it (after the quotas set
    throttle_time_ms). Its header is always v0 (KIP-511), so `flexible` stays False even when the body (v3+) is
    encoded flexibly."""

    flexible = False

    def __init__(self, version: int, error_code: int, api_keys: Sequence[ApiVersion],
                 throttle_time_ms: int = 0, supported_features: Sequence[SupportedFeatureKey] = (),
                 finalized_features_epoch: int = -1, finalized_features: Sequence[FinalizedFeatureKey] = (),
                 zk_migration_ready: bool = False) -> None:
        self.version = version
        self.error_code = error_code
        self.api_keys = api_keys
        self.throttle_time_ms = throttle_time_ms
        self.supported_features = supported_features
        self.finalized_features_epoch = finalized_features_epoch
        self.finalized_features = finalized_features
        self.zk_migration_ready = zk_migration_ready

    def pieces(self) -> list[bytes]:
        return [self.body()]

    def body(self) -> bytes:
        version = self.version
        flexible = version >= API_VERSIONS_FLEXIBLE_MIN_VERSION
        out = [INT16.pack(self.error_code), array_length_bytes(len(self.api_keys), flexible)]
        append = out.append
        pack = _API_VERSION.pack
        for api_key, lo, hi in self.api_keys:
            append(pack(api_key, lo, hi))
            if flexible:
                append(EMPTY_TAGGED_FIELDS)
        if version >= 1:
            append(INT32.pack(self.throttle_time_ms))
        if flexible:
            tags: list[bytes] = []
            if self.supported_features:
                tags.append(_tagged_field(0, _features(self.supported_features)))
            if self.finalized_features_epoch != -1:
                tags.append(_tagged_field(1, INT64.pack(self.finalized_features_epoch)))
            if self.finalized_features:
                tags.append(_tagged_field(2, _features(self.finalized_features)))
            if self.zk_migration_ready:
                tags.append(_tagged_field(3, b"\x01"))
            append(write_uvarint(len(tags)))
            out.extend(tags)
        return b"".join(out)


# --- Metadata ------------------------------------------------------------------------------------------------

class MetadataRequestTopic:
    __slots__ = ("topic_id", "name")

    def __init__(self, topic_id: uuid.UUID | None, name: str | None) -> None:
        self.topic_id = topic_id  # v10+; None for the zero id and below v10 (as kafka-python decodes it)
        self.name = name  # null only from v10 (a topic named by id)


class MetadataRequestData:
    """The fields of a Metadata request, named as kafka-python's; a field a version lacks has kafka-python's
    default (auto-creation allowed, no authorized operations)."""

    __slots__ = ("topics", "allow_auto_topic_creation", "include_cluster_authorized_operations",
                 "include_topic_authorized_operations")

    def __init__(self, topics: list[MetadataRequestTopic] | None, allow_auto_topic_creation: bool = True,
                 include_cluster_authorized_operations: bool = False,
                 include_topic_authorized_operations: bool = False) -> None:
        self.topics = topics  # None: all topics (v1+)
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.include_cluster_authorized_operations = include_cluster_authorized_operations
        self.include_topic_authorized_operations = include_topic_authorized_operations


def _read_bool(frame: memoryview, pos: int) -> tuple[bool, int]:
    if pos >= len(frame):
        raise WireError("truncated boolean")
    return frame[pos] != 0, pos + 1


def decode_metadata_request(frame: memoryview, pos: int, version: int) -> MetadataRequestData:
    """Decode a Metadata request body starting at `pos` (after the request header). Raises WireError."""
    if not 0 <= version <= METADATA_MAX_VERSION:
        raise WireError(f"Metadata v{version} is not decoded here")
    flexible = version >= METADATA_FLEXIBLE_MIN_VERSION
    by_id = version >= METADATA_TOPIC_ID_MIN_VERSION
    end = len(frame)
    if flexible:
        n, pos = read_uvarint(frame, pos)
        n -= 1
    else:
        n, pos = read_int32(frame, pos)
    topics: list[MetadataRequestTopic] | None
    if n < 0:
        if n != -1 or version == 0:  # null: all topics, from v1 (v0 asks for all with an empty array)
            raise WireError(f"bad array length {n}" if n != -1 else "non-nullable array was serialized as null")
        topics = None
    else:
        check_array_length(n, end - pos)
        topics = []
        for _ in range(n):
            topic_id: uuid.UUID | None = None
            if by_id:
                if pos + 16 > end:
                    raise WireError("truncated topic id")
                raw = bytes(frame[pos:pos + 16])
                pos += 16
                if raw != _ZERO_UUID_BYTES:
                    topic_id = uuid.UUID(bytes=raw)
            name, pos = read_string(frame, pos, flexible)
            if name is None and not by_id:
                raise WireError("non-nullable field topics.name was serialized as null")
            if flexible:
                pos = skip_tagged_fields(frame, pos)
            topics.append(MetadataRequestTopic(topic_id, name))
    request = MetadataRequestData(topics)
    if version >= 4:
        request.allow_auto_topic_creation, pos = _read_bool(frame, pos)
    if version >= 8:
        if version <= 10:
            request.include_cluster_authorized_operations, pos = _read_bool(frame, pos)
        request.include_topic_authorized_operations, pos = _read_bool(frame, pos)
    if flexible:
        skip_tagged_fields(frame, pos)
    return request


class MetadataResponseBroker:
    __slots__ = ("node_id", "host", "port", "rack")

    def __init__(self, node_id: int, host: str, port: int, rack: str | None = None) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.rack = rack


class MetadataResponsePartition:
    __slots__ = ("error_code", "partition_index", "leader_id", "leader_epoch", "replica_nodes", "isr_nodes",
                 "offline_replicas")

    def __init__(self, error_code: int, partition_index: int, leader_id: int, leader_epoch: int,
                 replica_nodes: Sequence[int], isr_nodes: Sequence[int], offline_replicas: Sequence[int]) -> None:
        self.error_code = error_code
        self.partition_index = partition_index
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.replica_nodes = replica_nodes
        self.isr_nodes = isr_nodes
        self.offline_replicas = offline_replicas


class MetadataResponseTopic:
    __slots__ = ("error_code", "name", "topic_id", "is_internal", "partitions", "authorized_operations")

    def __init__(self, error_code: int, name: str | None, topic_id: uuid.UUID | None, is_internal: bool,
                 partitions: list[MetadataResponsePartition],
                 authorized_operations: Iterable[int] | None = None) -> None:
        self.error_code = error_code
        self.name = name
        self.topic_id = topic_id  # None writes the zero id
        self.is_internal = is_internal
        self.partitions = partitions
        self.authorized_operations = authorized_operations  # AclOperation codes; None: not requested


def _bitfield(operations: Iterable[int] | None) -> bytes:
    """kafka-python's bitfield: the set bits of the operations' codes; None is INT32_MIN ("not requested")."""
    if operations is None:
        return _UINT32.pack(AUTHORIZED_OPERATIONS_OMITTED)
    value = 0
    for op in operations:
        if not 0 <= op < 32:
            raise ValueError(f"authorized operation {op} does not fit a 32-bit field")
        value |= 1 << op
    return _UINT32.pack(value)


def _int32_array(values: Sequence[int], flexible: bool) -> bytes:
    return array_length_bytes(len(values), flexible) + struct.pack(f">{len(values)}i", *values)


class MetadataResponseData(EncodedResponse):
    """A Metadata response at `version`, encoded when the connection writes it (after the quotas set
    throttle_time_ms). `authorized_operations` is the cluster's (v8-10); `error_code` the top-level one (v13+;
    0 below, as kafka-python's default)."""

    def __init__(self, version: int, brokers: list[MetadataResponseBroker], topics: list[MetadataResponseTopic],
                 controller_id: int = -1, cluster_id: str | None = None, throttle_time_ms: int = 0,
                 authorized_operations: Iterable[int] | None = None, error_code: int = 0) -> None:
        self.version = version
        self.flexible = version >= METADATA_FLEXIBLE_MIN_VERSION
        self.brokers = brokers
        self.topics = topics
        self.controller_id = controller_id
        self.cluster_id = cluster_id
        self.throttle_time_ms = throttle_time_ms
        self.authorized_operations = authorized_operations
        self.error_code = error_code

    def pieces(self) -> list[bytes]:
        return [self.body()]

    def body(self) -> bytes:
        v = self.version
        flexible = self.flexible
        out: list[bytes] = []
        append = out.append
        if v >= 3:
            append(INT32.pack(self.throttle_time_ms))
        append(array_length_bytes(len(self.brokers), flexible))
        for b in self.brokers:
            append(INT32.pack(b.node_id))
            append(string_bytes(b.host, flexible))
            append(_BROKER_PORT.pack(b.port))
            if v >= 1:
                append(string_bytes(b.rack, flexible))
            if flexible:
                append(EMPTY_TAGGED_FIELDS)
        if v >= 2:
            append(string_bytes(self.cluster_id, flexible))
        if v >= 1:
            append(INT32.pack(self.controller_id))
        append(array_length_bytes(len(self.topics), flexible))
        for t in self.topics:
            append(INT16.pack(t.error_code))
            append(string_bytes(t.name, flexible))
            if v >= METADATA_TOPIC_ID_MIN_VERSION:
                append(_ZERO_UUID_BYTES if t.topic_id is None else t.topic_id.bytes)
            if v >= 1:
                append(b"\x01" if t.is_internal else b"\x00")
            append(array_length_bytes(len(t.partitions), flexible))
            for p in t.partitions:
                if v >= 7:
                    append(_PARTITION_V7.pack(p.error_code, p.partition_index, p.leader_id, p.leader_epoch))
                else:
                    append(_PARTITION_V0.pack(p.error_code, p.partition_index, p.leader_id))
                append(_int32_array(p.replica_nodes, flexible))
                append(_int32_array(p.isr_nodes, flexible))
                if v >= 5:
                    append(_int32_array(p.offline_replicas, flexible))
                if flexible:
                    append(EMPTY_TAGGED_FIELDS)
            if v >= 8:
                append(_bitfield(t.authorized_operations))
            if flexible:
                append(EMPTY_TAGGED_FIELDS)
        if 8 <= v <= 10:
            append(_bitfield(self.authorized_operations))
        if v >= 13:
            append(INT16.pack(self.error_code))
        if flexible:
            append(EMPTY_TAGGED_FIELDS)
        return b"".join(out)
