"""SASL/OAUTHBEARER with Kafka's unsecured JWS validator, end to end: librdkafka's built-in unsecured token
builder (`sasl.oauthbearer.config`), kafka-python with a token provider and the Java client's
OAuthBearerLoginModule produce and consume over SASL_SSL and SASL_PLAINTEXT; the token's `sub` is the principal
the authorizer sees; an expired token or one lacking `unsecuredValidatorRequiredScope` is refused as Kafka's
OAuthBearerSaslServer refuses it (SASL_AUTHENTICATION_FAILED), with one log line that holds no token."""

from __future__ import annotations

import base64
import json
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tidelog.clock import Clock
from tidelog.testing import SecureBrokerHandle, run_secure_broker

from .conftest import JAR_DIR, JavaClient
from .round_trips import confluent_round_trip, kafka_python_round_trip

COUNT = 10
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
JACKSON = ["jackson-core.jar", "jackson-databind.jar", "jackson-annotations.jar"]
LISTENERS = ["SASL_SSL", "SASL_PLAINTEXT"]


def jaas(**options: str) -> str:
    return f"{MODULE} required " + " ".join(f'{k}="{v}"' for k, v in options.items()) + ";"


@pytest.fixture(scope="module")
def oauth() -> Iterator[SecureBrokerHandle]:
    with run_secure_broker(mechanisms=("OAUTHBEARER", "SCRAM-SHA-512")) as handle:
        yield handle


@pytest.fixture(scope="module")
def scoped() -> Iterator[SecureBrokerHandle]:
    """unsecuredValidatorRequiredScope=kafka on both SASL listeners, set as Kafka sets it: the listener-prefixed
    `listener.name.<listener>.oauthbearer.sasl.jaas.config`."""
    overrides = {f"listener.name.{name}.oauthbearer.sasl.jaas.config": jaas(unsecuredValidatorRequiredScope="kafka")
                 for name in ("sasl_ssl", "sasl_plaintext")}
    with run_secure_broker(mechanisms=("OAUTHBEARER", "SCRAM-SHA-512"), overrides=overrides) as handle:
        yield handle


@pytest.fixture()
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO)
    return caplog


def b64url(doc: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=").decode()


def unsecured_jws(sub: str = "alice", lifetime_s: float = 3600, **claims: Any) -> str:
    """An unsecured JWS as Kafka's OAuthBearerUnsecuredLoginCallbackHandler builds it (alg none, no signature)."""
    now = int(time.time())  # whole seconds, as clients write it: a rounded-up fraction could be "issued in the future"
    return f'{b64url({"alg": "none"})}.{b64url({"sub": sub, "iat": now, "exp": now + lifetime_s, **claims})}.'


def ck_config(b: SecureBrokerHandle, listener: str, oauth_config: str) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": b.listeners[listener], "security.protocol": listener,
                            "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.config": oauth_config,
                            "enable.sasl.oauthbearer.unsecure.jwt": True}
    if listener == "SASL_SSL":
        conf["ssl.ca.location"] = str(b.ca.ca_pem)
    return conf


def kp_config(b: SecureBrokerHandle, listener: str, token: str) -> dict[str, Any]:
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        def token(self) -> str:
            return token

    conf: dict[str, Any] = {"bootstrap_servers": b.listeners[listener], "security_protocol": listener,
                            "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": Provider()}
    if listener == "SASL_SSL":
        conf["ssl_cafile"] = str(b.ca.ca_pem)
    return conf


def values(topic: str) -> list[bytes]:
    return [f"{topic}-{i}".encode() for i in range(COUNT)]


def ck_round_trip(conf: dict[str, Any], topic: str) -> list[bytes]:
    return confluent_round_trip(conf, topic, values(topic))


def ck_auth_error(conf: dict[str, Any]) -> Any:
    """The first error a librdkafka producer reports when its authentication is refused."""
    from confluent_kafka import Producer

    errors: list[Any] = []
    producer = Producer({**conf, "error_cb": errors.append, "message.timeout.ms": 5000})
    producer.produce("never", b"x")
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    producer.purge()
    producer.flush(5)
    assert errors, "librdkafka reported no error"
    return errors[0]


def auth_failure_lines(caplog: pytest.LogCaptureFixture, wait: bool = True) -> list[str]:
    """The broker's close lines for refused OAUTHBEARER logins (logged once the answer is written, so the client
    may see its error first)."""
    deadline = time.monotonic() + 10
    while True:
        lines = [r.getMessage() for r in caplog.records
                 if r.getMessage().startswith("Closing connection") and "OAUTHBEARER" in r.getMessage()]
        if lines or not wait or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def assert_no_token_logged(caplog: pytest.LogCaptureFixture, *tokens: str) -> None:
    for record in caplog.records:
        text = record.getMessage() + (record.exc_text or "")
        # every JWS starts with base64url('{"'): no token, header or claims part may reach a log line
        assert "eyJ" not in text, text
        assert not any(t and t in text for t in tokens), text


# --- round trips ---


@pytest.mark.parametrize("listener", LISTENERS)
def test_confluent_kafka_unsecured_token_round_trip(oauth: SecureBrokerHandle, listener: str) -> None:
    topic = f"ck-oauth-{listener.lower().replace('_', '-')}"
    conf = ck_config(oauth, listener, "principal=alice scope=kafka,audit lifeSeconds=600 extension_traceId=t1")
    assert ck_round_trip(conf, topic) == values(topic)


@pytest.mark.parametrize("listener", LISTENERS)
def test_kafka_python_token_provider_round_trip(oauth: SecureBrokerHandle, listener: str) -> None:
    topic = f"kp-oauth-{listener.lower().replace('_', '-')}"
    conf = kp_config(oauth, listener, unsecured_jws("alice", scope=["kafka"]))
    assert kafka_python_round_trip(conf, topic, values(topic)) == values(topic)


@pytest.fixture(scope="session")
def java_oauth(java_client: JavaClient) -> JavaClient:
    """The Java client driver with Jackson on the class path (OAuthBearerUnsecuredJws parses with it)."""
    if not all((JAR_DIR / j).is_file() for j in JACKSON):
        import subprocess
        from pathlib import Path

        root = Path(__file__).resolve().parents[2]
        subprocess.run([str(root / "scripts" / "fetch_java_client.sh")], check=True, timeout=900)
    return JavaClient(os.pathsep.join([java_client.classpath, *(str(JAR_DIR / j) for j in JACKSON)]))


@pytest.mark.slow
@pytest.mark.java
@pytest.mark.parametrize("listener", LISTENERS)
def test_java_unsecured_login_module_round_trip(oauth: SecureBrokerHandle, java_oauth: JavaClient,
                                                listener: str) -> None:
    props = {"security.protocol": listener, "sasl.mechanism": "OAUTHBEARER",
             "sasl.jaas.config": jaas(unsecuredLoginStringClaim_sub="alice")}
    if listener == "SASL_SSL":
        props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(oauth.ca.ca_pem)})
    extra = [f"{k}={v}" for k, v in props.items()]
    bootstrap = oauth.listeners[listener]
    topic = f"java-oauth-{listener.lower().replace('_', '-')}"
    out = java_oauth.run("produce", bootstrap, topic, str(COUNT), "1", "none", "1700000000000", *extra)
    assert out[-1] == {"acked": COUNT, "misplaced": 0, "error": None}
    lines = java_oauth.run("consume", bootstrap, topic, str(COUNT), "1", *extra)
    assert lines[-1] == {"done": COUNT}
    assert [d["o"] for d in lines[:-1]] == list(range(COUNT))


# --- the principal the authorizer sees ---


def test_authorizer_sees_the_token_subject() -> None:
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    with run_secure_broker(mechanisms=("OAUTHBEARER", "SCRAM-SHA-512"), authorizer=True,
                           super_users=["User:admin"]) as b:
        admin = AdminClient(b.confluent_config("SASL_PLAINTEXT", "SCRAM-SHA-512", user="admin"))
        admin.create_topics([NewTopic("payments", 1, 1)])["payments"].result(30)

        def produce_as(principal: str) -> Any:
            reports: list[Any] = []
            producer = Producer({**ck_config(b, "SASL_SSL", f"principal={principal}"),
                                 "message.timeout.ms": 20_000, "retries": 0})
            producer.produce("payments", b"paid", on_delivery=lambda err, _msg: reports.append(err))
            producer.flush(30)
            assert len(reports) == 1
            return reports[0]

        err = produce_as("alice")
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        acl = AclBinding(ResourceType.TOPIC, "payments", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.WRITE, AclPermissionType.ALLOW)
        for fut in admin.create_acls([acl], request_timeout=30).values():
            fut.result(30)
        assert produce_as("alice") is None  # User:alice, the token's sub, now holds WRITE
        err = produce_as("mallory")  # another sub is still refused: the ACL names the token's principal
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert [r.value for r in b.broker.records("payments")] == [b"paid"]


# --- refused tokens ---


class ClockAhead(Clock):
    """The broker's wall clock two hours ahead of the client's: a token the client thinks good has expired."""

    def milliseconds(self) -> int:
        return super().milliseconds() + 2 * 3600 * 1000


@pytest.fixture(scope="module")
def ahead() -> Iterator[SecureBrokerHandle]:
    with run_secure_broker(mechanisms=("OAUTHBEARER", "SCRAM-SHA-512"), clock=ClockAhead()) as handle:
        yield handle


@pytest.mark.parametrize("listener", LISTENERS)
def test_expired_token_is_refused_and_others_are_served(ahead: SecureBrokerHandle, logs: pytest.LogCaptureFixture,
                                                        listener: str) -> None:
    from confluent_kafka import KafkaError

    err = ck_auth_error(ck_config(ahead, listener, "principal=alice lifeSeconds=3600"))
    assert err.code() == KafkaError._AUTHENTICATION
    assert '{"status":"invalid_token"}' in err.str()  # what Kafka's OAuthBearerSaslServer tells the client
    lines = auth_failure_lines(logs)
    assert lines and all("the token has expired" in line for line in lines)
    assert_no_token_logged(logs)
    topic = f"after-expired-{listener.lower().replace('_', '-')}"
    assert ck_round_trip(ck_config(ahead, listener, f"principal=alice lifeSeconds={3 * 3600}"), topic) == values(
        topic)
    assert ck_round_trip(ahead.confluent_config(listener, "SCRAM-SHA-512"), topic + "-scram") == values(
        topic + "-scram")


@pytest.mark.parametrize("listener", LISTENERS)
def test_token_without_required_scope_is_refused(scoped: SecureBrokerHandle, logs: pytest.LogCaptureFixture,
                                                 listener: str) -> None:
    from confluent_kafka import KafkaError

    err = ck_auth_error(ck_config(scoped, listener, "principal=alice scope=audit,metrics"))
    assert err.code() == KafkaError._AUTHENTICATION
    assert "insufficient_scope" in err.str()
    lines = auth_failure_lines(logs)
    assert lines and all("required scope" in line for line in lines)
    assert_no_token_logged(logs)
    topic = f"scoped-{listener.lower().replace('_', '-')}"
    assert ck_round_trip(ck_config(scoped, listener, "principal=alice scope=audit,kafka"), topic) == values(topic)
    # SCRAM users of the same listener are unaffected
    assert ck_round_trip(scoped.confluent_config(listener, "SCRAM-SHA-512"), topic + "-scram") == values(
        topic + "-scram")


def test_error_challenge_then_failure_on_the_wire(scoped: SecureBrokerHandle, logs: pytest.LogCaptureFixture) -> None:
    """The exact exchange of Kafka's OAuthBearerSaslServer (RFC 7628 3.2.2) in SaslAuthenticate and, for
    SaslHandshake v0 clients, in bare frames: error challenge, client %x01, failure, close."""
    import struct

    from tidelog.protocol.errors import ErrorCode
    from tidelog.protocol.messages import request_class
    from tidelog.testing import KafkaWire

    token = unsecured_jws("alice", scope=["audit"])
    first = f"n,,\x01auth=Bearer {token}\x01\x01".encode()
    with KafkaWire(scoped.listeners["SASL_PLAINTEXT"]) as wire:
        assert wire.request(17, 1, request_class(17)[1](mechanism="OAUTHBEARER")).error_code == ErrorCode.NONE
        challenge = wire.request(36, 2, request_class(36)[2](auth_bytes=first))
        assert (challenge.error_code, challenge.auth_bytes) == (
            ErrorCode.NONE, b'{"status":"insufficient_scope", "scope":"[kafka]"}')
        failure = wire.request(36, 2, request_class(36)[2](auth_bytes=b"\x01"))
        assert failure.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert failure.error_message == '{"status":"insufficient_scope", "scope":"[kafka]"}'
        assert wire.is_closed()
    with KafkaWire(scoped.listeners["SASL_PLAINTEXT"]) as wire:
        assert wire.request(17, 0, request_class(17)[0](mechanism="OAUTHBEARER")).error_code == ErrorCode.NONE
        wire.sock.sendall(struct.pack(">i", len(first)) + first)
        assert wire.read_frame() == b'{"status":"insufficient_scope", "scope":"[kafka]"}'
        wire.sock.sendall(struct.pack(">i", 1) + b"\x01")
        assert wire.is_closed()
    lines = auth_failure_lines(logs)
    assert len(lines) == 2 and all("lacks the required scope ['kafka']" in line for line in lines)
    assert_no_token_logged(logs, token)


# --- KIP-368 re-authentication ---


def test_librdkafka_reauthenticates_before_the_session_ends(logs: pytest.LogCaptureFixture) -> None:
    from confluent_kafka import Producer

    client_log = logging.getLogger("test.librdkafka.reauth")
    logs.set_level(logging.DEBUG, logger=client_log.name)  # librdkafka's debug lines arrive at DEBUG
    with run_secure_broker(mechanisms=("OAUTHBEARER",), overrides={"connections.max.reauth.ms": 1500}) as b:
        producer = Producer({**ck_config(b, "SASL_PLAINTEXT", "principal=alice"), "debug": "security,broker",
                             "logger": client_log})
        for i in range(4):  # spans several session lifetimes on the same connection
            producer.produce("reauth", f"r{i}".encode())
            assert producer.flush(30) == 0
            time.sleep(1.0)
        producer.flush(5)
        assert [r.value for r in b.broker.records("reauth")] == [f"r{i}".encode() for i in range(4)]
    client_lines = [r.getMessage() for r in logs.records if r.name == client_log.name]
    assert any("Received session lifetime 1500 ms from broker" in line for line in client_lines)
    assert sum("Received REAUTH op" in line for line in client_lines) >= 2
    # the broker closes a connection whose session ended without re-authentication (KIP-368): none was closed
    assert not [r for r in logs.records if "did not re-authenticate" in r.getMessage()]
    assert not auth_failure_lines(logs, wait=False)
