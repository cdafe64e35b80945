"""Produce (key 0) v3-13 request decoder and response encoder, by hand: the generic kafka-python codec copies
every partition's record bytes out of the request; this one hands out views of the request frame, so a batch
goes from the receive buffer through validation to the segment write without an extra copy.

Field layout: Kafka's ProduceRequest.json / ProduceResponse.json (flexible from v9: compact lengths and
tagged fields, KIP-482). Tagged fields in requests are skipped (none are defined up to v13). v12 is v11 on the
wire (KIP-890 part 2 only changes what a transactional client may rely on); v13 names topics by id (KIP-516)
in the request and the response.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from tidelog.accelerators import load
from tidelog.protocol.wire import (
    EMPTY_TAGGED_FIELDS,
    INT32,
    EncodedResponse,
    WireError,
    array_length_bytes,
    read_array_length,
    read_bytes_view,
    read_string,
    skip_tagged_fields,
    string_bytes,
)

FLEXIBLE_MIN_VERSION = 9
TOPIC_ID_MIN_VERSION = 13
MAX_VERSION = 13
_ACKS_TIMEOUT = struct.Struct(">hi")
# index, error_code, base_offset, log_append_time_ms (v2+), log_start_offset (v5+)
_PARTITION_V5 = struct.Struct(">ihqqq")


class PartitionProduceData:
    __slots__ = ("index", "records")  # not a NamedTuple: `index` would shadow tuple.index

    def __init__(self, index: int, records: memoryview | None) -> None:
        self.index = index
        self.records = records  # a view of the request frame


class TopicProduceData:
    __slots__ = ("name", "topic_id", "partition_data")

    def __init__(self, name: str | None, partition_data: list[PartitionProduceData],
                 topic_id: uuid.UUID | None = None) -> None:
        self.name = name  # v3-12; from v13 None until the handler resolves `topic_id`
        self.topic_id = topic_id  # v13+
        self.partition_data = partition_data


class ProduceRequestData:
    """The fields tidelog uses, named as kafka-python's ProduceRequest (handlers and the test fault injector,
    which replaces `topic_data`, read either)."""

    __slots__ = ("transactional_id", "acks", "timeout_ms", "topic_data")

    def __init__(self, transactional_id: str | None, acks: int, timeout_ms: int,
                 topic_data: list[TopicProduceData]) -> None:
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.topic_data = topic_data


def decode_produce_request(frame: memoryview, pos: int, version: int) -> ProduceRequestData:
    """Decode a Produce request body starting at `pos` (after the request header). Raises WireError.
    The C accelerator (`_produce_codec.decode`) gives the same objects and errors when it is built."""
    if _accel is not None:
        return _accel.decode(frame, pos, version)  # type: ignore[no-any-return]
    return _decode_python(frame, pos, version)


def _decode_python(frame: memoryview, pos: int, version: int) -> ProduceRequestData:
    if not 3 <= version <= MAX_VERSION:
        raise WireError(f"Produce v{version} is not decoded here")
    flexible = version >= FLEXIBLE_MIN_VERSION
    by_id = version >= TOPIC_ID_MIN_VERSION
    end = len(frame)
    transactional_id, pos = read_string(frame, pos, flexible)
    if pos + 6 > end:
        raise WireError("truncated Produce request")
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(frame, pos)
    pos += 6
    n_topics, pos = read_array_length(frame, pos, flexible)  # TopicData, PartitionData: non-nullable
    topics: list[TopicProduceData] = []
    for _ in range(n_topics):
        topic_id: uuid.UUID | None = None
        if by_id:
            if pos + 16 > end:
                raise WireError("truncated topic id")
            topic_id, name = uuid.UUID(bytes=bytes(frame[pos:pos + 16])), None
            pos += 16
        else:
            name, pos = read_string(frame, pos, flexible)
            if name is None:
                raise WireError("null topic name")
        n_parts, pos = read_array_length(frame, pos, flexible)
        parts: list[PartitionProduceData] = []
        for _ in range(n_parts):
            # index INT32 then RECORDS; a one-byte tagged-field count of 0 is the flexible common case
            if pos + 4 > end:
                raise WireError("truncated partition index")
            (index,) = INT32.unpack_from(frame, pos)
            records, pos = read_bytes_view(frame, pos + 4, flexible)
            if flexible:
                if pos < end and frame[pos] == 0:
                    pos += 1
                else:
                    pos = skip_tagged_fields(frame, pos)
            parts.append(PartitionProduceData(index, records))
        if flexible:
            pos = skip_tagged_fields(frame, pos)
        topics.append(TopicProduceData(name, parts, topic_id))
    if flexible:
        pos = skip_tagged_fields(frame, pos)
    return ProduceRequestData(transactional_id, acks, timeout_ms, topics)


class PartitionProduceResponse:
    __slots__ = ("index", "error_code", "base_offset", "log_append_time_ms", "log_start_offset", "record_errors",
                 "error_message")

    def __init__(self, index: int, error_code: int, base_offset: int, log_append_time_ms: int,
                 log_start_offset: int, record_errors: list[tuple[int, str | None]] | list[tuple[int, str]],
                 error_message: str | None) -> None:
        self.index = index
        self.error_code = error_code
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self.log_start_offset = log_start_offset
        self.record_errors = record_errors
        self.error_message = error_message


def encode_produce_response(version: int, responses: list[tuple[str | bytes, list[PartitionProduceResponse]]],
                            throttle_time_ms: int = 0) -> bytes:
    """The response body (no header) for Produce v3-13: topics are (name, partitions) up to v12 and (16-byte
    topic id, partitions) from v13. current_leader / node_endpoints (v10+ tagged fields) are left out, which is
    their default. Encoded by the C accelerator when it is built (the same bytes)."""
    if _accel is not None:
        return _accel.encode(version, responses, throttle_time_ms)  # type: ignore[no-any-return]
    return _encode_python(version, responses, throttle_time_ms)


def _encode_python(version: int, responses: list[tuple[str | bytes, list[PartitionProduceResponse]]],
                   throttle_time_ms: int = 0) -> bytes:
    flexible = version >= FLEXIBLE_MIN_VERSION
    by_id = version >= TOPIC_ID_MIN_VERSION
    out: list[bytes] = [array_length_bytes(len(responses), flexible)]
    append = out.append
    for key, partitions in responses:
        if by_id:
            assert isinstance(key, bytes) and len(key) == 16
            append(key)
        else:
            assert isinstance(key, str)
            append(string_bytes(key, flexible))
        append(array_length_bytes(len(partitions), flexible))
        for p in partitions:
            if version >= 5:
                append(_PARTITION_V5.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms,
                                          p.log_start_offset))
            else:
                append(_PARTITION_V5.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms, 0)[:-8])
            if version >= 8:
                append(array_length_bytes(len(p.record_errors), flexible))
                for batch_index, message in p.record_errors:
                    append(INT32.pack(batch_index))
                    append(string_bytes(message, flexible))
                    if flexible:
                        append(EMPTY_TAGGED_FIELDS)
                append(string_bytes(p.error_message, flexible))
            if flexible:
                append(EMPTY_TAGGED_FIELDS)
        if flexible:
            append(EMPTY_TAGGED_FIELDS)
    append(INT32.pack(throttle_time_ms))
    if flexible:
        append(EMPTY_TAGGED_FIELDS)
    return b"".join(out)


class ProduceResponseData(EncodedResponse):
    """A Produce response, encoded when the connection writes it (after the quotas set throttle_time_ms)."""

    def __init__(self, version: int, responses: list[tuple[str | bytes, list[PartitionProduceResponse]]]) -> None:
        self.version = version
        self.responses = responses
        self.throttle_time_ms = 0
        self.flexible = version >= FLEXIBLE_MIN_VERSION

    def pieces(self) -> list[bytes | memoryview]:
        return [encode_produce_response(self.version, self.responses, self.throttle_time_ms)]


def _load_accelerator() -> Any:
    """The optional C codec (setup.py builds it when a compiler is there), bound to these classes; None without
    it. TIDELOG_PURE_PYTHON=1 keeps the Python codec (the tests compare the two)."""
    codec = load("tidelog.protocol._produce_codec")
    if codec is not None:
        codec.bind(PartitionProduceData, TopicProduceData, ProduceRequestData, uuid.UUID, WireError)
    return codec


_accel = _load_accelerator()
