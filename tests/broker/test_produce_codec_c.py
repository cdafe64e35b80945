"""The C Produce codec (tidelog/protocol/_produce_codec.c) against the pure-Python one it accelerates: request
decoding, request headers and response encoding give the same objects, bytes and errors on valid input and on
mutated (flipped, cut, extended) frames of every served version."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.accelerators import require_built
from tests.broker.test_hot_path_codecs import PRODUCE_VERSIONS, kafka_python_produce_request
from tidelog.protocol import frame as frame_module
from tidelog.protocol import produce_codec
from tidelog.protocol.frame import ProtocolError, RequestHeader
from tidelog.protocol.produce_codec import PartitionProduceResponse, ProduceRequestData


@pytest.fixture(autouse=True)
def _built() -> None:
    require_built(produce_codec._accel is not None, "the C Produce codec")


def _shape(request: ProduceRequestData) -> Any:
    return (request.transactional_id, request.acks, request.timeout_ms,
            [(t.name, t.topic_id, [(p.index, None if p.records is None else (bytes(p.records), p.records.readonly))
                                   for p in t.partition_data]) for t in request.topic_data])


def _outcome(fn: Any, *args: Any) -> Any:
    try:
        return "ok", fn(*args)
    except Exception as exc:  # noqa: BLE001 - the two implementations must fail alike (type and message)
        return "error", type(exc), str(exc)


def _decode_both(data: bytearray, pos: int, version: int) -> None:
    c = _outcome(produce_codec._accel.decode, memoryview(bytearray(data)), pos, version)
    py = _outcome(produce_codec._decode_python, memoryview(bytearray(data)), pos, version)
    if c[0] == "ok" and py[0] == "ok":
        assert type(c[1]) is ProduceRequestData
        assert _shape(c[1]) == _shape(py[1])
    else:
        assert c == py


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_valid_requests_decode_alike(version: int) -> None:
    body = bytearray(b"HEAD" + kafka_python_produce_request(version))
    _decode_both(body, 4, version)
    request = produce_codec._accel.decode(memoryview(body), 4, version)
    records = request.topic_data[0].partition_data[0].records
    assert records.obj is body and not records.readonly  # a writable view of the frame, as LogValidator needs


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(version=st.sampled_from(list(PRODUCE_VERSIONS)), data=st.data())
def test_mutated_requests_decode_alike(version: int, data: st.DataObject) -> None:
    body = bytearray(kafka_python_produce_request(version))
    kind = data.draw(st.sampled_from(["flip", "cut", "extend", "pos"]))
    pos = 0
    if kind == "flip":
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(body) - 1))
            body[i] = data.draw(st.integers(0, 255))
    elif kind == "cut":
        del body[data.draw(st.integers(0, len(body) - 1)):]
    elif kind == "extend":
        body += data.draw(st.binary(min_size=1, max_size=8))
    else:
        pos = data.draw(st.integers(0, len(body) + 2))
    _decode_both(body, pos, data.draw(st.sampled_from([version, version, 2, 14])))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40))
def test_headers_parse_alike(raw: bytes) -> None:
    c = _outcome(frame_module._accel.header, memoryview(raw))
    py = _outcome(frame_module._parse_request_header_python, memoryview(raw))
    assert c == py
    if c[0] == "ok":
        assert type(c[1]) is RequestHeader


def test_header_errors() -> None:
    with pytest.raises(ProtocolError, match="not UTF-8") as info:
        frame_module._accel.header(b"\x00\x00\x00\x09\x00\x00\x00\x01\x00\x02\xff\xfe")
    assert isinstance(info.value.__cause__, UnicodeDecodeError)
    with pytest.raises(ProtocolError, match="shorter than a request header"):
        frame_module._accel.header(b"\x00")


_partitions = st.lists(st.builds(
    PartitionProduceResponse, index=st.integers(0, 2**31 - 1), error_code=st.integers(-1, 120),
    base_offset=st.integers(-1, 2**63 - 1), log_append_time_ms=st.integers(-1, 2**62),
    log_start_offset=st.integers(-1, 2**62),
    record_errors=st.lists(st.tuples(st.integers(0, 1000), st.none() | st.text(max_size=20)), max_size=3),
    error_message=st.none() | st.text(max_size=30)), max_size=3)


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(list(PRODUCE_VERSIONS)), throttle=st.integers(0, 2**31 - 1),
       topics=st.lists(st.tuples(st.text(max_size=12), _partitions), max_size=3))
def test_responses_encode_alike(version: int, throttle: int, topics: list[tuple[str, list[Any]]]) -> None:
    responses: list[Any] = ([(uuid.uuid5(uuid.NAMESPACE_DNS, name).bytes, parts) for name, parts in topics]
                            if version >= 13 else topics)
    assert (produce_codec._accel.encode(version, responses, throttle)
            == produce_codec._encode_python(version, responses, throttle))
