"""The hand-written ApiVersions and Metadata codecs (tidelog/protocol/metadata_codec.py) against kafka-python's
schema-driven classes, every served version, from Hypothesis-generated field values: requests kafka-python encodes
decode to the same fields, responses encode to the same bytes (and frames, response header included), and bad
request bytes raise WireError only."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelog.broker.apis import API_TABLE
from tidelog.broker.dispatch import encode
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.messages import encode_response, request_class, response_class
from tidelog.protocol.metadata_codec import (
    ApiVersion,
    ApiVersionsResponseData,
    FinalizedFeatureKey,
    MetadataResponseBroker,
    MetadataResponseData,
    MetadataResponsePartition,
    MetadataResponseTopic,
    SupportedFeatureKey,
    decode_api_versions_request,
    decode_metadata_request,
)
from tidelog.protocol.wire import WireError

# Every version the API table serves: a range widened in tidelog/broker/apis/__init__.py must be handled here.
SERVED = {int(e.key): range(e.min_version, e.max_version + 1) for e in API_TABLE}
API_VERSIONS_VERSIONS = SERVED[ApiKey.API_VERSIONS]
METADATA_VERSIONS = SERVED[ApiKey.METADATA]

EXAMPLES = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
text = st.text(max_size=12)
uuids = st.one_of(st.none(), st.just(uuid.UUID(int=0)), st.uuids())
operations = st.one_of(st.none(), st.sets(st.integers(0, 31), max_size=6))
PREFIX = b"HDR"  # the decoders read from an offset into the frame, after the request header


def decode(decoder: Any, body: bytes, version: int) -> Any:
    return decoder(memoryview(PREFIX + body), len(PREFIX), version)


def test_every_served_version_is_covered() -> None:
    assert list(API_VERSIONS_VERSIONS) == list(range(0, 6))
    assert list(METADATA_VERSIONS) == list(range(0, 14))


# --- requests: kafka-python encodes, the hand decoder reads the same fields ----------------------------------

@pytest.mark.parametrize("version", API_VERSIONS_VERSIONS)
@EXAMPLES
@given(name=text, software_version=text, cluster_id=st.none() | text, node_id=st.integers(-(2**31), 2**31 - 1))
def test_api_versions_request_decodes_as_kafka_python_encodes_it(version: int, name: str, software_version: str,
                                                                 cluster_id: str | None, node_id: int) -> None:
    cls = request_class(ApiKey.API_VERSIONS)[version]
    fields: dict[str, Any] = {}
    if version >= 3:
        fields = {"client_software_name": name, "client_software_version": software_version}
    if version >= 5:  # KIP-1242
        fields.update(cluster_id=cluster_id, node_id=node_id)
    body = bytes(cls(**fields).encode(version=version))
    request = decode(decode_api_versions_request, body, version)
    if version >= 3:
        assert (request.client_software_name, request.client_software_version) == (name, software_version)
        theirs = cls.decode(body, version=version)
        assert (theirs.client_software_name, theirs.client_software_version) == (name, software_version)
        expected = (cluster_id, node_id) if version >= 5 else (None, -1)
        assert (request.cluster_id, request.node_id) == expected
    else:
        assert body == b""
        assert (request.client_software_name, request.client_software_version) == (None, None)


def metadata_request_fields(version: int) -> st.SearchStrategy[dict[str, Any]]:
    if version >= 10:
        topic = st.tuples(uuids, st.one_of(st.none(), text))
    else:
        topic = st.tuples(st.none(), text)
    topics: st.SearchStrategy[Any] = st.lists(topic, max_size=5)
    if version >= 1:
        topics = st.one_of(st.none(), topics)
    return st.fixed_dictionaries({
        "topics": topics,
        "allow_auto_topic_creation": st.booleans() if version >= 4 else st.just(True),
        "include_cluster_authorized_operations": st.booleans() if 8 <= version <= 10 else st.just(False),
        "include_topic_authorized_operations": st.booleans() if version >= 8 else st.just(False),
    })


def kafka_python_metadata_request(version: int, fields: dict[str, Any]) -> bytes:
    cls = request_class(ApiKey.METADATA)[version]
    T = cls.MetadataRequestTopic
    topics = fields["topics"]
    kwargs = dict(fields, topics=None if topics is None else [
        T(topic_id=topic_id, name=name) if version >= 10 else T(name=name) for topic_id, name in topics])
    return bytes(cls(**kwargs).encode(version=version))


@pytest.mark.parametrize("version", METADATA_VERSIONS)
@EXAMPLES
@given(data=st.data())
def test_metadata_request_decodes_as_kafka_python_encodes_it(version: int, data: st.DataObject) -> None:
    fields = data.draw(metadata_request_fields(version))
    body = kafka_python_metadata_request(version, fields)
    request = decode(decode_metadata_request, body, version)
    # The zero id reads as None, as kafka-python reads it (the handler takes either as "no id").
    expected = None if fields["topics"] is None else [
        (None if topic_id is None or topic_id.int == 0 else topic_id, name) for topic_id, name in fields["topics"]]
    got = None if request.topics is None else [(t.topic_id, t.name) for t in request.topics]
    assert got == expected
    for name in ("allow_auto_topic_creation", "include_cluster_authorized_operations",
                 "include_topic_authorized_operations"):
        assert getattr(request, name) is fields[name], name
    # and kafka-python reads the same bytes the same way (defaults of absent fields included)
    theirs = request_class(ApiKey.METADATA)[version].decode(body, version=version)
    assert (None if theirs.topics is None else [(t.topic_id if version >= 10 else None, t.name)
                                                 for t in theirs.topics]) == got
    for name in ("allow_auto_topic_creation", "include_cluster_authorized_operations",
                 "include_topic_authorized_operations"):
        assert bool(getattr(theirs, name)) is getattr(request, name), name


def test_metadata_v0_empty_topics_and_null_topics_from_v1() -> None:
    assert decode(decode_metadata_request, b"\x00\x00\x00\x00", 0).topics == []
    assert decode(decode_metadata_request, b"\xff\xff\xff\xff", 1).topics is None
    assert decode(decode_metadata_request, b"\x00\x01\x00\x00", 12).topics is None  # compact null array


# --- requests: bad bytes raise WireError, never anything else ------------------------------------------------

def decodes_or_wire_error(decoder: Any, body: bytes, version: int) -> None:
    try:
        decode(decoder, body, version)
    except WireError:
        pass


def assert_cut_and_flipped_bodies(decoder: Any, body: bytes, version: int, flip: tuple[int, int]) -> None:
    """Every strict prefix of a valid `body` lacks a byte the decoder needs (WireError); one byte of it flipped
    decodes or raises WireError, nothing else."""
    for cut in range(len(body)):
        with pytest.raises(WireError):
            decode(decoder, body[:cut], version)
    at, value = flip
    garbled = bytearray(body)
    garbled[at % len(garbled)] = value & 0xFF
    decodes_or_wire_error(decoder, bytes(garbled), version)


@pytest.mark.parametrize("version", API_VERSIONS_VERSIONS)
@EXAMPLES
@given(name=text, software_version=text, garbage=st.binary(max_size=40), flip=st.tuples(st.integers(0), int16))
def test_truncated_or_garbled_api_versions_requests_raise_wire_error(version: int, name: str,
                                                                     software_version: str, garbage: bytes,
                                                                     flip: tuple[int, int]) -> None:
    decodes_or_wire_error(decode_api_versions_request, garbage, version)
    if version < 3:
        return
    body = bytes(request_class(ApiKey.API_VERSIONS)[version](
        client_software_name=name, client_software_version=software_version).encode(version=version))
    assert_cut_and_flipped_bodies(decode_api_versions_request, body, version, flip)


@pytest.mark.parametrize("version", METADATA_VERSIONS)
@EXAMPLES
@given(data=st.data(), garbage=st.binary(max_size=60), flip=st.tuples(st.integers(0), int16))
def test_truncated_or_garbled_metadata_requests_raise_wire_error(version: int, data: st.DataObject,
                                                                 garbage: bytes, flip: tuple[int, int]) -> None:
    decodes_or_wire_error(decode_metadata_request, garbage, version)
    body = kafka_python_metadata_request(version, data.draw(metadata_request_fields(version)))
    assert_cut_and_flipped_bodies(decode_metadata_request, body, version, flip)


@pytest.mark.parametrize("version", [3, 4])
def test_null_client_software_strings_are_refused(version: int) -> None:
    for body in (b"\x00\x041.0\x00", b"\x06probe\x00\x00"):  # compact null name, then null version
        with pytest.raises(WireError, match="null"):
            decode(decode_api_versions_request, body, version)


def test_null_metadata_fields_are_refused_where_kafka_refuses_them() -> None:
    with pytest.raises(WireError, match="null"):  # v0: topics is not nullable
        decode(decode_metadata_request, b"\xff\xff\xff\xff", 0)
    with pytest.raises(WireError, match="null"):  # before v10 a topic name is not nullable
        decode(decode_metadata_request, b"\x00\x00\x00\x01\xff\xff", 1)
    with pytest.raises(WireError, match="null"):
        decode(decode_metadata_request, b"\x02\x00\x00\x01", 9)
    # from v10 a topic may be named by id alone
    topic_id = uuid.uuid4()
    request = decode(decode_metadata_request, b"\x02" + topic_id.bytes + b"\x00\x00\x01\x00\x00\x00", 10)
    assert [(t.topic_id, t.name) for t in request.topics] == [(topic_id, None)]


@pytest.mark.parametrize(("version", "body"), [
    (1, b"\x7f\xff\xff\xff"),  # a forged count: refused before any loop
    (1, b"\xff\xff\xff\xfe"),  # a negative count other than null
    (9, b"\xff\xff\xff\xff\x0f"),  # a compact count of 2**32 - 2
    (12, b"\x02" + bytes(16) + b"\x03\xff\xfe\x00\x00\x00"),  # a name that is not UTF-8
    (14, b"\x01\x00\x00\x00"),  # a version not served
    (-1, b""),
])
def test_forged_metadata_requests_raise_wire_error(version: int, body: bytes) -> None:
    with pytest.raises(WireError):
        decode(decode_metadata_request, body, version)


# --- responses: the same field values give kafka-python's bytes ----------------------------------------------

def frame(api_key: int, version: int, response: Any) -> tuple[bytes, int | None]:
    """The whole response frame as the connection writes it (size, header, body), and its metrics error code."""
    pieces, size, _name, error_code = encode(api_key, 7, version, response, "test")
    out = b"".join(bytes(p) for p in pieces)
    assert len(out) == size
    return out, error_code


api_version_entries = st.lists(st.tuples(int16, int16, int16), max_size=6)
features = st.lists(st.tuples(text, int16, int16), max_size=3)


@pytest.mark.parametrize("version", API_VERSIONS_VERSIONS)
@EXAMPLES
@given(error_code=int16, api_keys=api_version_entries, throttle_time_ms=int32, supported=features,
       epoch=st.one_of(st.just(-1), int64), finalized=features, zk_migration_ready=st.booleans())
def test_api_versions_response_encodes_as_kafka_python(version: int, error_code: int,
                                                       api_keys: list[tuple[int, int, int]], throttle_time_ms: int,
                                                       supported: list[tuple[str, int, int]], epoch: int,
                                                       finalized: list[tuple[str, int, int]],
                                                       zk_migration_ready: bool) -> None:
    cls = response_class(ApiKey.API_VERSIONS)
    fields: dict[str, Any] = {"error_code": error_code, "api_keys": [
        cls.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in api_keys]}
    if version >= 1:
        fields["throttle_time_ms"] = throttle_time_ms
    if version >= 3:
        fields.update(
            supported_features=[cls.SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
                                for n, lo, hi in supported],
            finalized_features_epoch=epoch,
            finalized_features=[cls.FinalizedFeatureKey(name=n, max_version_level=hi, min_version_level=lo)
                                for n, hi, lo in finalized],
            zk_migration_ready=zk_migration_ready)
    theirs = cls[version](**fields)
    ours = ApiVersionsResponseData(version, error_code, [ApiVersion(*e) for e in api_keys])
    # every field is set after construction too, as the quotas set throttle_time_ms: nothing is encoded early
    ours.throttle_time_ms = throttle_time_ms
    ours.supported_features = [SupportedFeatureKey(*f) for f in supported]
    ours.finalized_features_epoch = epoch
    ours.finalized_features = [FinalizedFeatureKey(*f) for f in finalized]
    ours.zk_migration_ready = zk_migration_ready
    expected = bytes(theirs.encode(version=version))
    assert ours.encode() == expected
    assert encode_response(theirs, version) == expected  # the schema walk the connection uses at first
    # header v0 at every version (KIP-511), the body flexible from v3: the same frame as kafka-python's object
    assert frame(ApiKey.API_VERSIONS, version, ours) == frame(ApiKey.API_VERSIONS, version, theirs)
    assert not ours.flexible


def test_api_versions_defaults_leave_the_tagged_fields_out() -> None:
    """kafka-python writes a tagged field only when it differs from its default: so do we (v3+: one 0 byte)."""
    assert ApiVersionsResponseData(3, 0, [ApiVersion(18, 0, 4)]).encode() == (
        b"\x00\x00" + b"\x02" + b"\x00\x12\x00\x00\x00\x04\x00" + b"\x00\x00\x00\x00" + b"\x00")
    response = ApiVersionsResponseData(4, 0, [], zk_migration_ready=True)
    assert response.encode().endswith(b"\x01\x03\x01\x01")  # one tagged field: tag 3, size 1, true


broker_entries = st.lists(st.tuples(int32, text, int32, st.one_of(st.none(), text)), min_size=1, max_size=3)
int32_lists = st.lists(int32, max_size=4)
partition_entries = st.lists(st.tuples(int16, int32, int32, int32, int32_lists, int32_lists, int32_lists),
                             max_size=3)
topic_entries = st.lists(st.tuples(int16, st.one_of(st.none(), text), uuids, st.booleans(), partition_entries,
                                   operations), max_size=4)


@pytest.mark.parametrize("version", METADATA_VERSIONS)
@EXAMPLES
@given(brokers=broker_entries, cluster_id=st.one_of(st.none(), text), controller_id=int32, topics=topic_entries,
       throttle_time_ms=int32, cluster_operations=operations, error_code=int16)
def test_metadata_response_encodes_as_kafka_python(version: int, brokers: list[Any], cluster_id: str | None,
                                                   controller_id: int, topics: list[Any], throttle_time_ms: int,
                                                   cluster_operations: set[int] | None, error_code: int) -> None:
    cls = response_class(ApiKey.METADATA)
    T = cls.MetadataResponseTopic
    P = T.MetadataResponsePartition
    B = cls.MetadataResponseBroker
    partition_fields = ("error_code", "partition_index", "leader_id", "leader_epoch", "replica_nodes", "isr_nodes",
                        "offline_replicas")
    topic_fields = ("error_code", "name", "topic_id", "is_internal")
    theirs = cls[version](
        throttle_time_ms=throttle_time_ms,
        brokers=[B(node_id=n, host=h, port=p, rack=r) for n, h, p, r in brokers],
        cluster_id=cluster_id, controller_id=controller_id,
        topics=[T(**dict(zip(topic_fields, t[:4], strict=True)),
                  partitions=[P(**dict(zip(partition_fields, p, strict=True))) for p in t[4]],
                  authorized_operations=t[5]) for t in topics],
        authorized_operations=cluster_operations, error_code=error_code)
    ours = MetadataResponseData(
        version, [MetadataResponseBroker(*b) for b in brokers],
        [MetadataResponseTopic(code, name, topic_id, internal, [MetadataResponsePartition(*p) for p in parts], ops)
         for code, name, topic_id, internal, parts, ops in topics],
        controller_id=controller_id, cluster_id=cluster_id, authorized_operations=cluster_operations,
        error_code=error_code)
    ours.throttle_time_ms = throttle_time_ms  # as the quotas set it, after the handler
    expected = bytes(theirs.encode(version=version))
    assert ours.encode() == expected
    assert encode_response(theirs, version) == expected
    assert ours.flexible is (version >= 9)
    assert frame(ApiKey.METADATA, version, ours) == frame(ApiKey.METADATA, version, theirs)


@pytest.mark.parametrize("version", [0, 8, 13])
def test_decoded_gives_back_the_kafka_python_response(version: int) -> None:
    """The fault injector edits responses as kafka-python objects (EncodedResponse.decoded)."""
    ours = MetadataResponseData(version, [MetadataResponseBroker(1, "localhost", 9092)], [
        MetadataResponseTopic(0, "alpha", uuid.UUID(int=9), False, [
            MetadataResponsePartition(0, 0, 1, 4, [1], [1], [])], {3, 4})], controller_id=1, cluster_id="c")
    theirs = ours.decoded(ApiKey.METADATA, version)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in theirs.topics] == [("alpha", [0])]
    assert bytes(theirs.encode(version=version)) == ours.encode()
    error = ApiVersionsResponseData(0, 35, [ApiVersion(18, 0, 4)]).decoded(ApiKey.API_VERSIONS, 0)
    assert (error.error_code, [tuple(k) for k in error.api_keys]) == (35, [(18, 0, 4)])
