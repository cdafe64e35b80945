"""Bad authentication is refused with Kafka's errors, the connection closes with one log line that holds no
secret, and the broker keeps serving everyone else. Raw-wire tests (KafkaWire) check the exact protocol; real
clients check what users see."""

from __future__ import annotations

import logging
import socket
import struct
import time
from typing import Any

import pytest

from tidelog.clock import ManualClock
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.testing import KafkaWire, SecureBrokerHandle, run_secure_broker

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA, API_VERSIONS = 17, 36, 3, 18
SECRETS = ("alice-secret", "admin-secret", "wrong-password-123")


def handshake(wire: KafkaWire, mechanism: str, version: int = 1) -> Any:
    return wire.request(SASL_HANDSHAKE, version, request_class(SASL_HANDSHAKE)[version](mechanism=mechanism))


def authenticate(wire: KafkaWire, token: bytes, version: int = 2) -> Any:
    return wire.request(SASL_AUTHENTICATE, version, request_class(SASL_AUTHENTICATE)[version](auth_bytes=token))


def metadata(wire: KafkaWire) -> Any:
    return wire.request(METADATA, 1, request_class(METADATA)[1](topics=[]))


def plain_login(bootstrap: str, user: str, password: str) -> KafkaWire:
    wire = KafkaWire(bootstrap)
    assert handshake(wire, "PLAIN").error_code == ErrorCode.NONE
    response = authenticate(wire, f"\0{user}\0{password}".encode())
    assert response.error_code == ErrorCode.NONE, response.error_message
    return wire


def connection_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("Closing connection")]


def assert_no_secret(caplog: pytest.LogCaptureFixture) -> None:
    for record in caplog.records:
        text = record.getMessage() + (record.exc_text or "")
        assert not any(s in text for s in SECRETS), text


@pytest.fixture()
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO)
    return caplog


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong-password-123"), ("mallory", "alice-secret")])
def test_plain_wrong_password_or_unknown_user(secure: SecureBrokerHandle, logs: pytest.LogCaptureFixture,
                                              user: str, password: str) -> None:
    bootstrap = secure.listeners["SASL_PLAINTEXT"]
    with KafkaWire(bootstrap) as wire:
        assert handshake(wire, "PLAIN").mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        response = authenticate(wire, f"\0{user}\0{password}".encode())
        assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert response.error_message == "Authentication failed: Invalid username or password"
        assert wire.is_closed()
    lines = [line for line in connection_lines(logs) if "failed authentication" in line]
    assert len(lines) == 1
    assert_no_secret(logs)
    with plain_login(bootstrap, "alice", "alice-secret") as wire:  # others are still served
        assert metadata(wire).brokers


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_wrong_password_and_unknown_user(secure: SecureBrokerHandle, logs: pytest.LogCaptureFixture,
                                               mechanism: str) -> None:
    import scramp

    for user, password in (("alice", "wrong-password-123"), ("mallory", "x")):
        with KafkaWire(secure.listeners["SASL_PLAINTEXT"]) as wire:
            assert handshake(wire, mechanism).error_code == ErrorCode.NONE
            client = scramp.ScramClient([mechanism], user, password)
            first = authenticate(wire, client.get_client_first().encode())
            if first.error_code == ErrorCode.NONE:
                client.set_server_first(first.auth_bytes.decode())
                final = authenticate(wire, client.get_client_final().encode())
            else:
                final = first  # unknown user: refused at the first message, as Kafka's ScramSaslServer
            assert final.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert final.error_message == "Authentication failed: Invalid user credentials"
            assert wire.is_closed()
    assert_no_secret(logs)


def test_real_clients_see_authentication_errors(secure: SecureBrokerHandle, logs: pytest.LogCaptureFixture) -> None:
    from confluent_kafka import Producer
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError as KafkaPythonError

    conf = secure.confluent_config("SASL_SSL", "SCRAM-SHA-512")
    conf["sasl.password"] = "wrong-password-123"
    errors: list[str] = []
    producer = Producer({**conf, "error_cb": lambda err: errors.append(err.str()), "reconnect.backoff.ms": 1000})
    for _ in range(40):
        producer.poll(0.25)
        if errors:
            break
    del producer  # librdkafka keeps retrying until the handle is destroyed
    assert any("Authentication failed: Invalid user credentials" in e for e in errors), errors
    kp = secure.kafka_python_config("SASL_SSL", "PLAIN")
    kp["sasl_plain_password"] = "wrong-password-123"
    # kafka-python 3 retries a refused login until its bootstrap timeout (30 s by default), then gives up
    with pytest.raises(KafkaPythonError):
        KafkaAdminClient(request_timeout_ms=10_000, bootstrap_timeout_ms=3_000, **kp)
    assert_no_secret(logs)


def test_mechanism_not_enabled(tmp_path: Any, logs: pytest.LogCaptureFixture) -> None:
    overrides = {"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512"}
    with run_secure_broker(tmp_path, overrides=overrides) as b, KafkaWire(b.listeners["SASL_PLAINTEXT"]) as wire:
        response = handshake(wire, "PLAIN")
        assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert response.mechanisms == ["SCRAM-SHA-512"]
        assert wire.is_closed()
        assert any("UNSUPPORTED_SASL_MECHANISM" in line for line in connection_lines(logs))


def test_request_before_authentication_is_illegal_sasl_state(secure: SecureBrokerHandle,
                                                              logs: pytest.LogCaptureFixture) -> None:
    bootstrap = secure.listeners["SASL_PLAINTEXT"]
    with KafkaWire(bootstrap) as wire:
        # ApiVersions is allowed first (KIP-152), Metadata is not: closed without a response
        assert wire.request(API_VERSIONS, 3, request_class(API_VERSIONS)[3](
            client_software_name="t", client_software_version="1")).error_code == 0
        wire.send(METADATA, 1, request_class(METADATA)[1](topics=[]))
        assert wire.is_closed()
    assert any("ILLEGAL_SASL_STATE" in line for line in connection_lines(logs))
    with KafkaWire(bootstrap) as wire:  # SaslAuthenticate before SaslHandshake
        response = authenticate(wire, b"\0alice\0alice-secret")
        assert response.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert wire.is_closed()
    with KafkaWire(bootstrap) as wire:  # a second handshake in the middle of an exchange
        assert handshake(wire, "SCRAM-SHA-256").error_code == ErrorCode.NONE
        assert handshake(wire, "PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert wire.is_closed()
    with plain_login(bootstrap, "alice", "alice-secret") as wire:
        assert metadata(wire).brokers
        # after success, SASL requests are illegal (no re-authentication without connections.max.reauth.ms)
        assert handshake(wire, "PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_v0_handshake_then_raw_tokens(secure: SecureBrokerHandle) -> None:
    """Clients before KIP-152: SaslHandshake v0, then the token as a bare size-prefixed frame."""
    bootstrap = secure.listeners["SASL_PLAINTEXT"]
    with KafkaWire(bootstrap) as wire:
        assert handshake(wire, "PLAIN", version=0).error_code == ErrorCode.NONE
        token = b"\0alice\0alice-secret"
        wire.sock.sendall(struct.pack(">i", len(token)) + token)
        assert wire.read_frame() == b""  # PLAIN's empty challenge, unframed
        assert metadata(wire).brokers
    with KafkaWire(bootstrap) as wire:
        assert handshake(wire, "PLAIN", version=0).error_code == ErrorCode.NONE
        token = b"\0alice\0wrong-password-123"
        wire.sock.sendall(struct.pack(">i", len(token)) + token)
        assert wire.is_closed()


def test_plaintext_client_on_tls_port(secure: SecureBrokerHandle, logs: pytest.LogCaptureFixture) -> None:
    for listener in ("SSL", "SASL_SSL"):
        with KafkaWire(secure.listeners[listener]) as wire:
            wire.send(API_VERSIONS, 0, request_class(API_VERSIONS)[0]())
            assert wire.is_closed()
    for _ in range(100):  # the line is logged by the handshake's waiter, just after the close
        lines = [line for line in connection_lines(logs) if "TLS handshake failed" in line]
        if len(lines) >= 2:
            break
        time.sleep(0.05)
    assert len(lines) == 2, lines
    from confluent_kafka.admin import AdminClient

    assert AdminClient(secure.confluent_config("SASL_SSL", "PLAIN")).list_topics(timeout=30).brokers


def test_tls_client_on_plaintext_port_is_closed(secure: SecureBrokerHandle) -> None:
    import ssl

    host, port = secure.listeners["SASL_PLAINTEXT"].split(":")
    ctx = ssl.create_default_context(cafile=str(secure.ca.ca_pem))
    with socket.create_connection((host, int(port)), timeout=30) as raw, pytest.raises((ssl.SSLError, OSError)):
        ctx.wrap_socket(raw, server_hostname="localhost")


def test_reauthentication_kip_368(tmp_path: Any, logs: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    with run_secure_broker(tmp_path, clock=clock, overrides={"connections.max.reauth.ms": 60_000}) as b:
        bootstrap = b.listeners["SASL_PLAINTEXT"]
        with KafkaWire(bootstrap) as wire:
            assert handshake(wire, "PLAIN").error_code == ErrorCode.NONE
            response = authenticate(wire, b"\0alice\0alice-secret", version=1)
            assert response.session_lifetime_ms == 60_000
            assert metadata(wire).brokers
            clock.advance(30_000)  # re-authenticate within the lifetime: renewed
            assert handshake(wire, "PLAIN").error_code == ErrorCode.NONE
            assert authenticate(wire, b"\0alice\0alice-secret", version=1).session_lifetime_ms == 60_000
            clock.advance(59_000)
            assert metadata(wire).brokers
            clock.advance(2_000)  # expired: the next request closes the connection
            wire.send(METADATA, 1, request_class(METADATA)[1](topics=[]))
            assert wire.is_closed()
        assert any("expired" in line for line in connection_lines(logs))
        with KafkaWire(bootstrap) as wire:  # re-authenticating as someone else is refused
            assert handshake(wire, "PLAIN").error_code == ErrorCode.NONE
            authenticate(wire, b"\0alice\0alice-secret", version=1)
            assert handshake(wire, "PLAIN").error_code == ErrorCode.NONE
            assert authenticate(wire, b"\0admin\0admin-secret", version=1).error_code == \
                ErrorCode.SASL_AUTHENTICATION_FAILED
            assert wire.is_closed()
