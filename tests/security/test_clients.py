"""Real clients produce and consume over SASL_SSL (PLAIN, SCRAM-SHA-512), SSL with a client certificate and
SASL_PLAINTEXT (SCRAM-SHA-256): kafka-python, confluent-kafka, aiokafka, kcat and the Java client, against
certificates generated for the test (tidelog.testing.run_secure_broker)."""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any

import pytest

from tidelog.testing import SecureBrokerHandle

from .conftest import JavaClient
from .round_trips import confluent_round_trip, kafka_python_round_trip

COUNT = 20
# (listener, mechanism, client certificate): each security setting a user is likely to have.
SETTINGS = [
    ("SASL_SSL", "PLAIN", False),
    ("SASL_SSL", "SCRAM-SHA-512", False),
    ("SSL", None, True),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", False),
]
IDS = [f"{listener}-{mech or 'mtls'}" for listener, mech, _ in SETTINGS]


def _values(tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(COUNT)]


def _topic(client: str, listener: str, mech: str | None) -> str:
    return f"{client}-{listener}-{mech or 'mtls'}".lower().replace("_", "-")


@pytest.mark.parametrize(("listener", "mech", "cert"), SETTINGS, ids=IDS)
def test_confluent_kafka(secure: SecureBrokerHandle, listener: str, mech: str | None, cert: bool) -> None:
    conf = secure.confluent_config(listener, mech or "PLAIN", cert=secure.client_cert("ck") if cert else None)
    topic = _topic("ck", listener, mech)
    assert confluent_round_trip(conf, topic, _values(topic)) == _values(topic)


@pytest.mark.parametrize(("listener", "mech", "cert"), SETTINGS, ids=IDS)
def test_kafka_python(secure: SecureBrokerHandle, listener: str, mech: str | None, cert: bool) -> None:
    conf = secure.kafka_python_config(listener, mech or "PLAIN", cert=secure.client_cert("kp") if cert else None)
    topic = _topic("kp", listener, mech)
    assert kafka_python_round_trip(conf, topic, _values(topic)) == _values(topic)


@pytest.mark.parametrize(("listener", "mech", "cert"), SETTINGS, ids=IDS)
def test_aiokafka(secure: SecureBrokerHandle, listener: str, mech: str | None, cert: bool) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    conf: dict[str, Any] = secure.kafka_python_config(listener, mech or "PLAIN",
                                                      cert=secure.client_cert("aio") if cert else None)
    if "ssl_cafile" in conf:
        conf["ssl_context"] = create_ssl_context(cafile=conf.pop("ssl_cafile"), certfile=conf.pop("ssl_certfile", None),
                                                 keyfile=conf.pop("ssl_keyfile", None))
    topic = _topic("aio", listener, mech)

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            for v in _values(topic):
                await producer.send_and_wait(topic, v)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **conf)
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(60):
                async for m in consumer:
                    got.append(m.value)
                    if len(got) == COUNT:
                        break
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == _values(topic)


@pytest.mark.kcat
@pytest.mark.parametrize(("listener", "mech", "cert"), SETTINGS, ids=IDS)
def test_kcat(secure: SecureBrokerHandle, kcat: str, listener: str, mech: str | None, cert: bool) -> None:
    conf = secure.confluent_config(listener, mech or "PLAIN", cert=secure.client_cert("kcat") if cert else None)
    args = [a for k, v in conf.items() if k != "bootstrap.servers" for a in ("-X", f"{k}={v}")]
    bootstrap = conf["bootstrap.servers"]
    topic = _topic("kcat", listener, mech)
    lines = [v.decode() for v in _values(topic)]
    subprocess.run([kcat, "-P", "-b", bootstrap, "-t", topic, *args], input="\n".join(lines) + "\n", text=True,
                   check=True, timeout=120, capture_output=True)
    out = subprocess.run([kcat, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", *args], text=True,
                         check=True, timeout=120, capture_output=True).stdout
    assert out.splitlines() == lines


@pytest.mark.java
@pytest.mark.parametrize(("listener", "mech", "cert"), SETTINGS, ids=IDS)
def test_java(secure: SecureBrokerHandle, java_client: JavaClient, listener: str, mech: str | None,
              cert: bool) -> None:
    props = secure.java_properties(listener, mech or "PLAIN", cert=secure.client_cert("java") if cert else None)
    extra = [f"{k}={v}" for k, v in props.items() if k != "bootstrap.servers"]
    bootstrap = props["bootstrap.servers"]
    topic = _topic("java", listener, mech)
    out = java_client.run("produce", bootstrap, topic, str(COUNT), "1", "none", "1700000000000", *extra)
    assert out[-1] == {"acked": COUNT, "misplaced": 0, "error": None}
    lines = java_client.run("consume", bootstrap, topic, str(COUNT), "1", *extra)
    assert lines[-1] == {"done": COUNT}
    assert [d["o"] for d in lines[:-1]] == list(range(COUNT))
