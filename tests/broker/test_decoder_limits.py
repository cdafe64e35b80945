"""Kafka 4.4's decoder caps (MessageUtil.MAX_ARRAY_LENGTH = 1,000,000 elements, MAX_TAGGED_FIELD_COUNT = 10,000):
a request over either is refused as Kafka's generated readers refuse it, which closes the connection (the
InvalidRequestException of RequestContext.parseRequest), without building the claimed elements; the broker keeps
serving. Hand-written decoders (Produce in C and Python, Metadata) and kafka-python-decoded APIs alike."""

from __future__ import annotations

import struct
import tracemalloc

import pytest

from tests.accelerators import require_built
from tidelog.protocol import produce_codec
from tidelog.protocol.messages import request_class
from tidelog.protocol.request_limits import check_limits
from tidelog.protocol.wire import MAX_ARRAY_LENGTH, MAX_TAGGED_FIELD_COUNT, WireError, write_uvarint
from tidelog.testing import BrokerHandle, KafkaWire

DESCRIBE_GROUPS = 15
PRODUCE = 0
METADATA = 3


def _uvarint(n: int) -> bytes:
    return write_uvarint(n)


def _tags(count: int) -> bytes:
    """A tagged-field section of `count` empty unknown tags (two bytes each below tag 128, three above)."""
    return _uvarint(count) + b"".join(_uvarint(tag) + b"\x00" for tag in range(count))


def _describe_groups_v5(groups: int, tags: int = 0) -> bytes:
    """DescribeGroups v5 body (flexible): `groups` empty group ids, include_authorized_operations, tags."""
    return _uvarint(groups + 1) + b"\x01" * groups + b"\x00" + _tags(tags)


def _describe_groups_v0(groups: int) -> bytes:
    """DescribeGroups v0 body (classic): an INT32 count, then `groups` empty INT16-length strings."""
    return struct.pack(">i", groups) + b"\x00\x00" * groups


def _assert_serving(broker: BrokerHandle) -> None:
    with KafkaWire(broker.bootstrap) as wire:
        response = wire.request(DESCRIBE_GROUPS, 5, _describe_groups_v5(2))
        # v5 answers an unknown group as Dead, without an error: decoded and served
        assert [(g.error_code, g.group_state) for g in response.groups] == [(0, "Dead"), (0, "Dead")]


@pytest.mark.parametrize("body", [_describe_groups_v5(MAX_ARRAY_LENGTH + 1), _describe_groups_v0(MAX_ARRAY_LENGTH + 1)],
                         ids=["compact", "classic"])
def test_array_over_the_cap_closes_the_connection(tidelog_module_broker: BrokerHandle, body: bytes) -> None:
    version = 5 if body[0] != 0 else 0
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        wire.send(DESCRIBE_GROUPS, version, body)
        assert wire.is_closed()
    _assert_serving(tidelog_module_broker)


def test_array_over_the_cap_is_refused_without_building_it(tidelog_module_broker: BrokerHandle) -> None:
    """Three million one-byte elements: kafka-python would build a list of three million entries (24 MB of
    pointers alone); the refusal allocates about the frame's own size."""
    body = _describe_groups_v5(3 * MAX_ARRAY_LENGTH)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        with KafkaWire(tidelog_module_broker.bootstrap) as wire:
            wire.send(DESCRIBE_GROUPS, 5, body)
            assert wire.is_closed()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * len(body), f"peak {peak} bytes traced for a {len(body)}-byte frame"
    _assert_serving(tidelog_module_broker)


def test_tagged_fields_over_the_cap_close_the_connection(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        wire.send(DESCRIBE_GROUPS, 5, _describe_groups_v5(1, tags=MAX_TAGGED_FIELD_COUNT + 1))
        assert wire.is_closed()
    _assert_serving(tidelog_module_broker)


def test_tagged_fields_at_the_cap_are_read(tidelog_module_broker: BrokerHandle) -> None:
    """10,000 unknown tags are allowed (Kafka keeps them as unknown tagged fields): the request is answered."""
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        response = wire.request(DESCRIBE_GROUPS, 5, _describe_groups_v5(1, tags=MAX_TAGGED_FIELD_COUNT))
        assert [(g.error_code, g.group_state) for g in response.groups] == [(0, "Dead")]


def test_request_header_tagged_fields_over_the_cap_close_the_connection(tidelog_module_broker: BrokerHandle) -> None:
    """Request header v2's tagged fields come before the body: the same cap, for every flexible API."""
    header = struct.pack(">hhih", METADATA, 12, 1, -1) + _tags(MAX_TAGGED_FIELD_COUNT + 1)
    body = _uvarint(0) + b"\x00\x00" + b"\x00"  # no topics, no auto-creation, no authorized operations, no tags
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        wire.sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        assert wire.is_closed()
    _assert_serving(tidelog_module_broker)


def test_metadata_topics_over_the_cap_close_the_connection(tidelog_module_broker: BrokerHandle) -> None:
    """Metadata's hand decoder: a v9 topic array of 1,000,001 entries (null-free: empty name, no tags)."""
    body = _uvarint(MAX_ARRAY_LENGTH + 2) + b"\x01\x00" * (MAX_ARRAY_LENGTH + 1) + b"\x00\x00\x00"
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        wire.send(METADATA, 9, body)
        assert wire.is_closed()
    _assert_serving(tidelog_module_broker)


def _produce_v9(partitions: int, tags: int = 0) -> bytes:
    """Produce v9 body: one topic whose partition array holds `partitions` entries of one byte each (which the
    cap refuses before reading them), or one valid-shaped empty partition followed by `tags` tagged fields."""
    head = b"\x00" + struct.pack(">hi", -1, 30_000) + _uvarint(2) + _uvarint(2) + b"t"
    if partitions > 1:
        return head + _uvarint(partitions + 1) + b"\x00" * partitions
    return head + _uvarint(2) + struct.pack(">i", 0) + b"\x00" + b"\x00" + b"\x00" + _tags(tags)


@pytest.mark.parametrize("body", [_produce_v9(MAX_ARRAY_LENGTH + 1), _produce_v9(1, tags=MAX_TAGGED_FIELD_COUNT + 1)],
                         ids=["partitions", "tagged-fields"])
def test_produce_over_the_cap_closes_the_connection(tidelog_module_broker: BrokerHandle, body: bytes) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        wire.send(PRODUCE, 9, body)
        assert wire.is_closed()
    _assert_serving(tidelog_module_broker)


@pytest.mark.parametrize("body", [_produce_v9(MAX_ARRAY_LENGTH + 1), _produce_v9(1, tags=MAX_TAGGED_FIELD_COUNT + 1),
                                  _produce_v9(MAX_ARRAY_LENGTH)],
                         ids=["partitions", "tagged-fields", "partitions-at-cap-truncated"])
def test_produce_codecs_agree_on_the_caps(body: bytes) -> None:
    """The C Produce decoder refuses what the Python one refuses, with the same message."""
    require_built(produce_codec._accel is not None, "the C Produce codec")
    outcomes = []
    for decode in (produce_codec._accel.decode, produce_codec._decode_python):
        with pytest.raises(WireError) as caught:
            decode(memoryview(bytearray(body)), 0, 9)
        outcomes.append(str(caught.value))
    assert outcomes[0] == outcomes[1]
    assert ("maximum" in outcomes[0]) == (body != _produce_v9(MAX_ARRAY_LENGTH)), outcomes[0]


def test_walker_boundary_on_a_schema() -> None:
    """check_limits at the cap and one over, on DescribeGroups v5's schema (no broker needed: a pure function)."""
    struct_v5 = request_class(DESCRIBE_GROUPS)[5]._struct
    check_limits(struct_v5, 5, True, _describe_groups_v5(MAX_ARRAY_LENGTH), 0)
    with pytest.raises(WireError, match="maximum"):
        check_limits(struct_v5, 5, True, _describe_groups_v5(MAX_ARRAY_LENGTH + 1), 0)
    with pytest.raises(WireError, match="remaining"):
        check_limits(struct_v5, 5, True, _uvarint(50_001) + b"\x01" * 20_000 + b"\x00\x00", 0)


def _offset_commit(version: int, partitions: int) -> tuple[object, bytes]:
    cls = request_class(8)[version]
    T = cls.OffsetCommitRequestTopic
    fields = dict(group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                  retention_time_ms=-1, topics=[T(name="t", partitions=[
                      T.OffsetCommitRequestPartition(partition_index=i, committed_offset=i, committed_leader_epoch=-1,
                                                     commit_timestamp=-1, committed_metadata="m" * (i % 5))
                      for i in range(partitions)])])
    request = cls(**{k: v for k, v in fields.items() if k in {f.name for f in cls._struct.untagged_fields(version)}})
    return cls, bytes(request.encode(version=version))


@pytest.mark.parametrize("version", [2, 7, 8, 9])
def test_the_walk_ends_where_a_valid_body_ends(version: int) -> None:
    """The schema walk reads a valid kafka-python-encoded body to its last byte (classic and flexible, nested
    struct arrays, nullable strings), so a large valid request is never refused by it."""
    from tidelog.protocol.request_limits import _walk_struct

    cls, body = _offset_commit(version, 3_000)
    assert len(body) > MAX_TAGGED_FIELD_COUNT
    flexible = bool(cls.flexible_version_q(version))
    assert _walk_struct(cls._struct, version, flexible, body, 0, len(body)) == len(body)
    check_limits(cls._struct, version, flexible, body, 0)
