"""Bad input closes only the offending connection (with one log line); the broker keeps serving others."""

from __future__ import annotations

import logging
import socket
import struct
from collections.abc import Callable

import pytest

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire


def api_versions_v0() -> object:
    return request_class(18)[0]()


def assert_still_serving(broker: BrokerHandle) -> None:
    """A second, fresh client gets answers."""
    with KafkaWire(broker.bootstrap) as wire:
        assert wire.request(18, 3, request_class(18)[3](client_software_name="second",
                                                         client_software_version="1")).error_code == 0
        assert wire.request(3, 1, request_class(3)[1](topics=None)).controller_id == broker.state.node_id


def raw(broker: BrokerHandle) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=60)
    return sock


def assert_closed(sock: socket.socket) -> None:
    sock.settimeout(60)
    try:
        assert sock.recv(1) == b""
    except ConnectionResetError:
        pass


def test_frame_larger_than_socket_request_max_bytes(tidelog_broker_factory: Callable[..., BrokerHandle],
                                                     caplog: pytest.LogCaptureFixture) -> None:
    broker = tidelog_broker_factory(overrides={"socket.request.max.bytes": "1000"})
    with caplog.at_level(logging.WARNING, logger="tidelog.broker.connection"), raw(broker) as sock:
        sock.sendall(struct.pack(">i", 1001) + b"\x00" * 64)
        assert_closed(sock)
    assert any("socket.request.max.bytes" in r.getMessage() for r in caplog.records)
    assert_still_serving(broker)


def test_negative_size(tidelog_module_broker: BrokerHandle) -> None:
    with raw(tidelog_module_broker) as sock:
        sock.sendall(struct.pack(">i", -5))
        assert_closed(sock)
    assert_still_serving(tidelog_module_broker)


def test_truncated_frame_then_disconnect(tidelog_module_broker: BrokerHandle) -> None:
    with raw(tidelog_module_broker) as sock:
        sock.sendall(struct.pack(">i", 100) + b"\x00\x12\x00\x00")
    assert_still_serving(tidelog_module_broker)


@pytest.mark.parametrize("payload", [b"\x00\x12", b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x50abc",
                                     b"\x00\x12\x00\x00\x00\x00\x00\x01\xff\xf0"])
def test_garbage_header(tidelog_module_broker: BrokerHandle, payload: bytes) -> None:
    """Shorter than a header / client_id longer than the frame / negative client_id length."""
    with raw(tidelog_module_broker) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        assert_closed(sock)
    assert_still_serving(tidelog_module_broker)


def test_unknown_api_key(tidelog_module_broker: BrokerHandle, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tidelog.broker.connection"), KafkaWire(tidelog_module_broker.bootstrap) as wire:
        wire.sock.sendall(wire.frame(999, 0, b""))
        assert wire.is_closed()
    assert any("unknown api key 999" in r.getMessage() for r in caplog.records)
    assert_still_serving(tidelog_module_broker)


def test_unsupported_version(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        # Metadata v14 does not exist (Kafka 4.3 serves 0-13): the body layout is unknown, send a few bytes.
        wire.sock.sendall(wire.frame(3, 14, b"\x01\x00\x00\x00"))
        assert wire.is_closed()
    assert_still_serving(tidelog_module_broker)


def test_produce_v0_is_advertised_but_not_served(tidelog_module_broker: BrokerHandle) -> None:
    from tidelog.broker.apis import API_TABLE

    produce = next(e for e in API_TABLE if e.key == 0)
    assert produce.advertised_min == 0 < produce.min_version
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        wire.sock.sendall(wire.frame(0, 0, request_class(0)[0](acks=1, timeout_ms=1000, topic_data=[])))
        assert wire.is_closed()
    assert_still_serving(tidelog_module_broker)


def test_undecodable_body(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        # Metadata v1 whose topic array claims 5 entries but carries none.
        wire.sock.sendall(wire.frame(3, 1, struct.pack(">i", 5)))
        assert wire.is_closed()
    assert_still_serving(tidelog_module_broker)


def test_half_closed_socket_still_gets_its_response(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        correlation_id = wire.send(18, 0, api_versions_v0())
        wire.sock.shutdown(socket.SHUT_WR)
        got, response = wire.receive(18, 0)
        assert got == correlation_id and response.error_code == ErrorCode.NONE
        assert wire.is_closed()
    assert_still_serving(tidelog_module_broker)


def test_pipelined_requests_answered_in_order(tidelog_module_broker: BrokerHandle) -> None:
    versions = [0, 3, 1, 4, 2]
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        frames = b""
        for i, v in enumerate(versions):
            if i % 2:
                body = request_class(3)[v](topics=None, allow_auto_topic_creation=False) if v >= 4 else \
                    request_class(3)[v](topics=[] if v == 0 else None)
                frames += wire.frame(3, v, body, correlation_id=100 + i)
            else:
                args = {"client_software_name": "p", "client_software_version": "1"} if v >= 3 else {}
                frames += wire.frame(18, v, request_class(18)[v](**args), correlation_id=100 + i)
        wire.sock.sendall(frames)  # five requests in one write
        seen = []
        for i, v in enumerate(versions):
            got, response = wire.receive(3 if i % 2 else 18, v)
            seen.append(got)
            if not i % 2:
                assert response.error_code == 0
        assert seen == [100, 101, 102, 103, 104]


def test_many_connections_and_abrupt_resets(tidelog_module_broker: BrokerHandle) -> None:
    for _ in range(20):
        sock = raw(tidelog_module_broker)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST on close
        sock.sendall(struct.pack(">i", 10))
        sock.close()
    assert_still_serving(tidelog_module_broker)


def test_idle_connection_is_closed(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    broker = tidelog_broker_factory(overrides={"connections.max.idle.ms": "1000"})
    with KafkaWire(broker.bootstrap) as wire:
        assert wire.request(18, 0, api_versions_v0()).error_code == 0
        assert wire.is_closed(timeout=60)  # closed by the broker once idle, long before the timeout
    assert_still_serving(broker)


# --------------------------------------------------------------------------- acks=0 produce (CloseConnection)


def produce_frame(wire: KafkaWire, topic: str, records: bytes, acks: int) -> bytes:
    cls = request_class(0)[9]
    data = cls.TopicProduceData
    return wire.frame(0, 9, cls(transactional_id=None, acks=acks, timeout_ms=30_000, topic_data=[
        data(name=topic, partition_data=[data.PartitionProduceData(index=0, records=records)])]))


def a_batch(n: int) -> bytes:
    from tidelog.protocol.records import Record, build_batch

    return bytes(build_batch([Record(i, 1_700_000_000_000 + i, b"k", b"v%d" % i) for i in range(n)], 0))


def log_end_offset(broker: BrokerHandle, topic: str) -> int:
    from tidelog.storage import TopicPartition

    return int(broker.call(lambda: broker.state.topics.log(TopicPartition(topic, 0)).log_end_offset))


def test_failed_acks_zero_produce_closes_the_connection(tidelog_module_broker: BrokerHandle,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """Kafka closes the channel of an acks=0 Produce that failed (its only way to tell the client): one log
    line without a traceback; nothing is appended; other clients are unaffected."""
    broker = tidelog_module_broker
    broker.call(lambda: broker.state.topics.create_topic("acks0-bad", 1, 1, {}))
    corrupt = bytearray(a_batch(2))
    corrupt[-1] ^= 0x55  # CRC mismatch: CORRUPT_MESSAGE
    with caplog.at_level(logging.INFO, logger="tidelog.broker.connection"), KafkaWire(broker.bootstrap) as wire:
        wire.sock.sendall(produce_frame(wire, "acks0-bad", bytes(corrupt), acks=0))
        assert wire.is_closed()
    closing = [r for r in caplog.records if r.name == "tidelog.broker.connection" and "acks=0" in r.getMessage()]
    assert len(closing) == 1 and closing[0].exc_info is None
    assert "acks0-bad-0: CORRUPT_MESSAGE" in closing[0].getMessage()
    assert log_end_offset(broker, "acks0-bad") == 0
    assert_still_serving(broker)


def test_acks_zero_produce_to_unknown_topic_closes_the_connection(tidelog_broker_factory: Callable[
        ..., BrokerHandle]) -> None:
    broker = tidelog_broker_factory(overrides={"auto.create.topics.enable": "false"})
    with KafkaWire(broker.bootstrap) as wire:
        wire.sock.sendall(produce_frame(wire, "no-such-topic", a_batch(1), acks=0))
        assert wire.is_closed()
    assert_still_serving(broker)


def test_successful_acks_zero_produce_keeps_the_connection(tidelog_module_broker: BrokerHandle) -> None:
    broker = tidelog_module_broker
    broker.call(lambda: broker.state.topics.create_topic("acks0-good", 1, 1, {}))
    with KafkaWire(broker.bootstrap) as wire:
        wire.sock.sendall(produce_frame(wire, "acks0-good", a_batch(3), acks=0))
        wire.sock.sendall(produce_frame(wire, "acks0-good", a_batch(2), acks=0))
        # Requests are handled in order: once this is answered, both produces were handled, without closing.
        assert wire.request(18, 0, api_versions_v0()).error_code == 0
        assert log_end_offset(broker, "acks0-good") == 5
        assert wire.request(18, 0, api_versions_v0()).error_code == 0


# ------------------------------------------------------------------------- stalled and slow-reading clients


def test_size_prefix_then_stall_is_closed_when_idle(tidelog_broker_factory: Callable[..., BrokerHandle],
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """A client that announces a large request and then sends only part of it does not hold its connection
    (and the buffer) forever: no progress for connections.max.idle.ms closes it."""
    broker = tidelog_broker_factory(overrides={"connections.max.idle.ms": "1000"})
    with caplog.at_level(logging.INFO, logger="tidelog.broker.connection"), raw(broker) as sock:
        sock.sendall(struct.pack(">i", 50_000_000) + b"\x00\x03\x00\x01" + b"\x00" * 100)
        assert_closed(sock)
    closing = [r.getMessage() for r in caplog.records if r.name == "tidelog.broker.connection"]
    assert len(closing) == 1 and "connections.max.idle.ms" in closing[0], closing
    assert_still_serving(broker)


def test_client_that_never_reads_is_throttled_then_closed(tidelog_broker_factory: Callable[..., BrokerHandle],
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """Responses are written with backpressure: a client pipelining requests without reading the responses
    stops being read (its sends block), other clients are served meanwhile, and once it makes no progress for
    connections.max.idle.ms the connection is closed."""
    broker = tidelog_broker_factory(overrides={"connections.max.idle.ms": "2000"})
    caplog.set_level(logging.INFO, logger="tidelog.broker.connection")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", broker.port))
    wire = KafkaWire.__new__(KafkaWire)
    wire.sock, wire.client_id, wire.correlation_id = sock, "never-reads", 0
    chunk = b"".join(wire.frame(18, 0, api_versions_v0(), correlation_id=i) for i in range(1000))
    sent = 0
    limit = 200 * 1024 * 1024  # far more than every socket and transport buffer on the way can hold
    try:
        with pytest.raises((TimeoutError, ConnectionResetError, BrokenPipeError)):
            while sent < limit:
                sock.sendall(chunk)
                sent += len(chunk)
        assert sent < limit
        assert_still_serving(broker)
        sock.settimeout(60)
        with pytest.raises((EOFError, ConnectionResetError)):  # the responses it was sent, then the close
            while True:
                if not sock.recv(1 << 16):
                    raise EOFError
    finally:
        sock.close()
    assert_still_serving(broker)
    closing = [r.getMessage() for r in caplog.records if r.name == "tidelog.broker.connection"]
    assert len(closing) == 1 and "connections.max.idle.ms" in closing[0], closing  # one line, no traceback


# ---------------------------------------------------------------------------------- unencodable response


def test_unencodable_response_is_answered_with_the_error_response(
        caplog: pytest.LogCaptureFixture, tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """A handler that returns a response kafka-python cannot encode is a handler bug (Kafka's error policy): one
    error line with the traceback, the API's error response instead, the connection kept."""
    import types
    from typing import Any

    from tidelog.broker.apis import API_TABLE, ApiEntry
    from tidelog.broker.registry import ApiRegistry
    from tidelog.protocol.messages import response_class

    bad = types.ModuleType("unencodable_for_test")
    bad.API_KEY = 3  # type: ignore[attr-defined]

    async def handle(ctx: Any, request: Any) -> Any:
        return response_class(3)[ctx.api_version](brokers="not a list", controller_id=1, topics=[])

    bad.handle = handle  # type: ignore[attr-defined]
    table = [ApiEntry(3, "unencodable_for_test", 0, 12)] + [e for e in API_TABLE if e.key == 18]
    metadata = request_class(3)[1]
    b = tidelog_broker_factory(registry=ApiRegistry(table, modules={"unencodable_for_test": bad}))
    with caplog.at_level(logging.WARNING, logger="tidelog.broker.connection"), KafkaWire(b.bootstrap) as wire:
        response = wire.request(3, 1, metadata(topics=[metadata.MetadataRequestTopic(name="t")]))
        assert [(t.name, t.error_code) for t in response.topics] == [("t", -1)]
        assert wire.request(18, 0, api_versions_v0()).error_code == 0  # the same connection
    records = [r for r in caplog.records if r.name == "tidelog.broker.connection"]
    assert len(records) == 1, [r.getMessage() for r in records]
    assert "UNKNOWN_SERVER_ERROR" in records[0].getMessage() and "cannot encode" in repr(records[0].exc_info[1])


