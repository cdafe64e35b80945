"""Bad input closes only the offending connection (with one log line); the broker keeps serving others."""

from __future__ import annotations

import logging
import socket
import struct
from collections.abc import Callable

import pytest

from protocol.errors import ErrorCode
from protocol.messages import request_class
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
    with caplog.at_level(logging.WARNING, logger="broker.connection"), raw(broker) as sock:
        sock.sendall(struct.pack(">i", 1001) + b"\x00" * 64)
        assert_closed(sock)
    assert any("socket.request.max.bytes" in r.getMessage() for r in caplog.records)
    assert_still_serving(broker)


def test_negative_size(tidelog_broker: BrokerHandle) -> None:
    with raw(tidelog_broker) as sock:
        sock.sendall(struct.pack(">i", -5))
        assert_closed(sock)
    assert_still_serving(tidelog_broker)


def test_truncated_frame_then_disconnect(tidelog_broker: BrokerHandle) -> None:
    with raw(tidelog_broker) as sock:
        sock.sendall(struct.pack(">i", 100) + b"\x00\x12\x00\x00")
    assert_still_serving(tidelog_broker)


@pytest.mark.parametrize("payload", [b"\x00\x12", b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x50abc",
                                     b"\x00\x12\x00\x00\x00\x00\x00\x01\xff\xf0"])
def test_garbage_header(tidelog_broker: BrokerHandle, payload: bytes) -> None:
    """Shorter than a header / client_id longer than the frame / negative client_id length."""
    with raw(tidelog_broker) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        assert_closed(sock)
    assert_still_serving(tidelog_broker)


def test_unknown_api_key(tidelog_broker: BrokerHandle, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="broker.connection"), KafkaWire(tidelog_broker.bootstrap) as wire:
        wire.sock.sendall(wire.frame(999, 0, b""))
        assert wire.is_closed()
    assert any("unknown api key 999" in r.getMessage() for r in caplog.records)
    assert_still_serving(tidelog_broker)


def test_unsupported_version(tidelog_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_broker.bootstrap) as wire:
        wire.sock.sendall(wire.frame(3, 13, request_class(3)[13](topics=None, allow_auto_topic_creation=False,
                                                                 include_topic_authorized_operations=False)))
        assert wire.is_closed()
    assert_still_serving(tidelog_broker)


def test_produce_v0_is_advertised_but_not_served(tidelog_broker: BrokerHandle) -> None:
    from broker.server import default_registry

    produce = default_registry().module(0)
    if produce is None or produce.MIN_VERSION == 0:
        pytest.skip("Produce not registered, or serving v0")
    with KafkaWire(tidelog_broker.bootstrap) as wire:
        wire.sock.sendall(wire.frame(0, 0, request_class(0)[0](acks=1, timeout_ms=1000, topic_data=[])))
        assert wire.is_closed()
    assert_still_serving(tidelog_broker)


def test_undecodable_body(tidelog_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_broker.bootstrap) as wire:
        # Metadata v1 whose topic array claims 5 entries but carries none.
        wire.sock.sendall(wire.frame(3, 1, struct.pack(">i", 5)))
        assert wire.is_closed()
    assert_still_serving(tidelog_broker)


def test_half_closed_socket_still_gets_its_response(tidelog_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_broker.bootstrap) as wire:
        correlation_id = wire.send(18, 0, api_versions_v0())
        wire.sock.shutdown(socket.SHUT_WR)
        got, response = wire.receive(18, 0)
        assert got == correlation_id and response.error_code == ErrorCode.NONE
        assert wire.is_closed()
    assert_still_serving(tidelog_broker)


def test_pipelined_requests_answered_in_order(tidelog_broker: BrokerHandle) -> None:
    versions = [0, 3, 1, 4, 2]
    with KafkaWire(tidelog_broker.bootstrap) as wire:
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


def test_many_connections_and_abrupt_resets(tidelog_broker: BrokerHandle) -> None:
    for _ in range(20):
        sock = raw(tidelog_broker)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST on close
        sock.sendall(struct.pack(">i", 10))
        sock.close()
    assert_still_serving(tidelog_broker)


def test_idle_connection_is_closed(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    broker = tidelog_broker_factory(overrides={"connections.max.idle.ms": "1000"})
    with KafkaWire(broker.bootstrap) as wire:
        assert wire.request(18, 0, api_versions_v0()).error_code == 0
        assert wire.is_closed(timeout=60)  # closed by the broker once idle, long before the timeout
    assert_still_serving(broker)
