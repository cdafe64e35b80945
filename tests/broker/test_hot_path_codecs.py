"""The hand-written Produce request decoder and Produce/Fetch response encoders (tidelog/protocol/
produce_codec.py, fetch_codec.py) against kafka-python's schema-driven codecs, every served version: what one
side writes the other reads back field for field."""

from __future__ import annotations

import uuid

import pytest

from tests.accelerators import require_built
from tidelog.broker.apis import API_TABLE
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.fetch_codec import FetchPartitionResponse, encode_fetch_response
from tidelog.protocol.messages import request_class, response_class
from tidelog.protocol.produce_codec import (
    PartitionProduceResponse,
    decode_produce_request,
    encode_produce_response,
)
from tidelog.protocol.wire import WireError


@pytest.fixture(autouse=True, params=["c", "python"])
def codec_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs on the C Produce codec (when built) and on the pure-Python one."""
    from tidelog.protocol import frame, produce_codec

    if request.param == "python":
        monkeypatch.setattr(produce_codec, "_accel", None)
        monkeypatch.setattr(frame, "_accel", None)
    else:
        require_built(produce_codec._accel is not None, "the C Produce codec")
    return str(request.param)


# Every version the API table serves: a range widened in tidelog/broker/apis/__init__.py must be decodable here.
SERVED = {int(e.key): range(e.min_version, e.max_version + 1) for e in API_TABLE}
PRODUCE_VERSIONS = SERVED[ApiKey.PRODUCE]
FETCH_VERSIONS = SERVED[ApiKey.FETCH]

BATCH_A = bytes(range(256)) * 3
BATCH_B = b"\x01" * 70
ALPHA_ID = uuid.UUID("0b1e6a3c-2f4d-4e5a-9b8c-7d6e5f4a3b2c")
BETA_ID = uuid.UUID("f0e1d2c3-b4a5-4697-8899-aabbccddeeff")


def kafka_python_produce_request(version: int) -> bytes:
    cls = request_class(0)[version]
    T = cls.TopicProduceData
    P = T.PartitionProduceData
    alpha = {"topic_id": ALPHA_ID} if version >= 13 else {"name": "alpha"}
    beta = {"topic_id": BETA_ID} if version >= 13 else {"name": "beta"}
    request = cls(transactional_id="txn-é" if version % 2 else None, acks=-1, timeout_ms=1234, topic_data=[
        T(**alpha, partition_data=[P(index=0, records=BATCH_A), P(index=3, records=None)]),
        T(**beta, partition_data=[P(index=7, records=BATCH_B)]),
    ])
    return bytes(request.encode(version=version))


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_request_decodes_as_kafka_python_encodes_it(version: int) -> None:
    frame = memoryview(b"HEAD" + kafka_python_produce_request(version))
    request = decode_produce_request(frame, 4, version)
    assert request.transactional_id == ("txn-é" if version % 2 else None)
    assert (request.acks, request.timeout_ms) == (-1, 1234)
    keys = [(t.name, t.topic_id) for t in request.topic_data]
    assert keys == ([(None, ALPHA_ID), (None, BETA_ID)] if version >= 13 else [("alpha", None), ("beta", None)])
    assert [[(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data]
            for t in request.topic_data] == [[(0, BATCH_A), (3, None)], [(7, BATCH_B)]]
    records = request.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is frame.obj  # a view of the frame, not a copy


@pytest.mark.parametrize("version", [3, 8, 9, 11, 12, 13])
def test_truncated_or_forged_produce_requests_raise_wire_error(version: int) -> None:
    body = kafka_python_produce_request(version)
    for cut in (1, 5, 12, len(body) // 2, len(body) - 1):
        with pytest.raises(WireError):
            decode_produce_request(memoryview(body[:cut]), 0, version)
    if version < 9:
        # a forged topic count (after transactional id, acks, timeout) is refused, not looped over
        at = 2 + (len("txn-é".encode()) if version % 2 else 0) + 6
        forged = bytearray(body)
        forged[at:at + 4] = (10**9).to_bytes(4, "big")
        with pytest.raises(WireError):
            decode_produce_request(memoryview(bytes(forged)), 0, version)


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_response_reads_back_with_kafka_python(version: int) -> None:
    by_id = version >= 13
    responses: list[tuple[str | bytes, list[PartitionProduceResponse]]] = [
        (ALPHA_ID.bytes if by_id else "alpha",
         [PartitionProduceResponse(0, 0, 42, -1, 7, [], None),
          PartitionProduceResponse(3, 87, -1, -1, -1, [(2, "bad key"), (5, None)], "rejected")]),
        (BETA_ID.bytes if by_id else "beta", []),
    ]
    body = encode_produce_response(version, responses, throttle_time_ms=9)
    decoded = response_class(0)[version].decode(body, version=version)
    assert decoded.throttle_time_ms == 9
    got = [(t.topic_id.bytes if by_id else t.name, [(p.index, p.error_code, p.base_offset, p.log_append_time_ms,
                      p.log_start_offset if version >= 5 else -1,
                      [(e.batch_index, e.batch_index_error_message) for e in (p.record_errors or [])]
                      if version >= 8 else [],
                      p.error_message if version >= 8 else None) for p in t.partition_responses])
           for t in decoded.responses]
    want = [(name, [(p.index, p.error_code, p.base_offset, p.log_append_time_ms,
                     p.log_start_offset if version >= 5 else -1,
                     p.record_errors if version >= 8 else [],
                     p.error_message if version >= 8 else None) for p in parts]) for name, parts in responses]
    assert got == want


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_response_reads_back_with_kafka_python(version: int) -> None:
    topic_id = uuid.uuid4()
    key: str | bytes = topic_id.bytes if version >= 13 else "orders"
    partitions = [
        FetchPartitionResponse(0, 0, 100, 90, 5, None, memoryview(BATCH_A)[10:200]),
        FetchPartitionResponse(1, 0, 50, 40, 0, [(1001, 12), (1002, 30)], b""),
        FetchPartitionResponse(2, 1, -1, -1, -1, None, None),
        FetchPartitionResponse(4, 0, 3, 3, 0, [], BATCH_B),
    ]
    pieces = encode_fetch_response(version, 0, 0, [(key, partitions)], throttle_time_ms=3)
    assert any(p is partitions[0].records for p in pieces)  # the records are written as they are
    body = b"".join(pieces)
    decoded = response_class(1)[version].decode(body, version=version)
    assert decoded.throttle_time_ms == 3
    if version >= 7:
        assert (decoded.error_code, decoded.session_id) == (0, 0)
    (topic,) = decoded.responses
    assert (topic.topic_id == topic_id) if version >= 13 else (topic.topic == "orders")
    got = []
    for p in topic.partitions:
        aborted = p.aborted_transactions
        got.append((p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                    p.log_start_offset if version >= 5 else None,
                    None if aborted is None else [(a.producer_id, a.first_offset) for a in aborted],
                    None if p.records is None else bytes(p.records)))
    want = [(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
             p.log_start_offset if version >= 5 else None, p.aborted_transactions,
             None if p.records is None else bytes(p.records)) for p in partitions]
    assert got == want
    if version >= 11:
        assert all(p.preferred_read_replica == -1 for p in topic.partitions)


def test_crc_module_is_the_crc32c_packages_function() -> None:
    import crc32c as package

    from tidelog.protocol.crc import crc32c

    for data in (b"", b"123456789", bytes(range(256)) * 40, memoryview(BATCH_A)[3:700]):
        assert crc32c(data) == package.crc32c(data)
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
