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

from tidelog.testing import SecureBrokerHandle, run_secure_broker

from .conftest import JAR_DIR, JavaClient

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
    now = time.time()
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
    from confluent_kafka import Consumer, Producer

    producer = Producer(conf)
    for v in values(topic):
        producer.produce(topic, v)
    assert producer.flush(60) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < COUNT and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    consumer.close()
    return got


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


def auth_failure_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.getMessage().startswith("Closing connection") and "OAUTHBEARER" in r.getMessage()]


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
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"kp-oauth-{listener.lower().replace('_', '-')}"
    conf = kp_config(oauth, listener, unsecured_jws("alice", scope=["kafka"]))
    producer = KafkaProducer(**conf)
    for v in values(topic):
        producer.send(topic, v)
    producer.flush(60)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest",
                             consumer_timeout_ms=30_000, **conf)
    got = []
    for m in consumer:
        got.append(m.value)
        if len(got) == COUNT:
            break
    consumer.close()
    assert got == values(topic)


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
