"""ApiVersions negotiation (KIP-35, KIP-511) over real sockets, with each client's first version."""

from __future__ import annotations

import struct
import subprocess
from typing import Any

import pytest

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

API_VERSIONS = 18


def api_versions(version: int, name: str | None = None, software_version: str | None = None) -> Any:
    cls = request_class(API_VERSIONS)[version]
    if version >= 3:
        return cls(client_software_name=name, client_software_version=software_version)
    return cls()


def ranges(response: Any) -> dict[int, tuple[int, int]]:
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


@pytest.mark.parametrize(
    ("version", "name", "software_version"),
    [
        (4, "apache-kafka-java", "3.9.0"),  # Java 3.9 opens with v4
        (3, "librdkafka", "2.0.2"),  # librdkafka 2.x
        (4, "kafka-python", "3.0.12"),
        (2, None, None),  # kafkajs
        (1, None, None),
        (0, None, None),  # aiokafka
    ],
)
def test_each_client_first_version_is_answered(tidelog_module_broker: BrokerHandle, version: int, name: str | None,
                                               software_version: str | None) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        response = wire.request(API_VERSIONS, version, api_versions(version, name, software_version))
    assert response.error_code == ErrorCode.NONE
    advertised = ranges(response)
    assert advertised[API_VERSIONS] == (0, 5)
    assert advertised[3] == (0, 13)  # Metadata
    assert advertised[60] == (0, 2)  # DescribeCluster
    if version >= 3:  # KIP-584 feature levels: tests/broker/test_features.py
        assert {f.name for f in response.finalized_features} == {
            "metadata.version", "kraft.version", "group.version", "eligible.leader.replicas.version",
            "share.version", "streams.version", "transaction.version"}
        assert response.finalized_features_epoch >= 0


def test_advertised_ranges_follow_the_api_table(tidelog_module_broker: BrokerHandle) -> None:
    import importlib

    from tidelog.broker.apis import API_TABLE

    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        response = wire.request(API_VERSIONS, 4, api_versions(4, "apache-kafka-java", "3.9.0"))
    advertised = ranges(response)
    assert set(advertised) == {int(e.key) for e in API_TABLE}
    for entry in API_TABLE:
        low = entry.min_version if entry.advertised_min is None else entry.advertised_min
        assert advertised[entry.key] == (low, entry.max_version)
        module = importlib.import_module(f"tidelog.broker.apis.{entry.module}")
        assert module.API_KEY == entry.key
        # every served version has a kafka-python schema to decode it with
        assert len(request_class(entry.key)) > entry.max_version
    assert advertised[0][0] == 0  # Produce advertises 0 (KAFKA-18659) so old librdkafka keeps compression on


def test_flexible_response_uses_header_v0(tidelog_module_broker: BrokerHandle) -> None:
    """KIP-511: a header-v1 tagged byte here breaks librdkafka ("Protocol parse failure for ApiVersion v3")."""
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        wire.send(API_VERSIONS, 3, api_versions(3, "librdkafka", "2.0.2"))
        data = wire.read_frame()
    correlation_id, error_code, count = struct.unpack_from(">ihB", data, 0)
    assert correlation_id == wire.correlation_id
    assert error_code == 0
    assert count >= 2  # compact array length + 1, straight after the error code


def test_too_new_version_gets_v0_error_body_and_connection_stays(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        # v6 does not exist: the body layout is unknown, so send something arbitrary after a v2 header.
        wire.sock.sendall(wire.frame(API_VERSIONS, 6, b"\x0bkafka-java\x063.9.9\x00"))
        correlation_id, response = wire.receive(API_VERSIONS, 0)
        assert correlation_id == wire.correlation_id
        assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert ranges(response) == {API_VERSIONS: (0, 5)}
        # The client retries with the max we reported, on the same connection.
        retry = wire.request(API_VERSIONS, 4, api_versions(4, "apache-kafka-java", "3.9.0"))
        assert retry.error_code == ErrorCode.NONE and len(retry.api_keys) > 3


@pytest.mark.parametrize(("name", "software_version"), [("bad name!", "1.0"), ("java", "-1.0"), ("", "1")])
def test_invalid_software_name_is_invalid_request(tidelog_module_broker: BrokerHandle, name: str,
                                                  software_version: str) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        wire.send(API_VERSIONS, 3, api_versions(3, name, software_version))
        # Kafka encodes this error in the request's version (v3, empty api_keys); kafka-python's decoder
        # would assume v0 for any error, so check the bytes: header v0, error, empty compact array.
        data = wire.read_frame()
        correlation_id, error_code, count = struct.unpack_from(">ihB", data, 0)
        assert (correlation_id, error_code, count) == (wire.correlation_id, ErrorCode.INVALID_REQUEST, 1)
        # librdkafka falls back to v0 on the same connection.
        assert wire.request(API_VERSIONS, 0, api_versions(0)).error_code == ErrorCode.NONE


def test_null_client_id_is_accepted(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap, client_id=None) as wire:
        assert wire.request(API_VERSIONS, 2, api_versions(2)).error_code == ErrorCode.NONE


@pytest.mark.kcat
def test_kcat_negotiates_v3(tidelog_module_broker: BrokerHandle) -> None:
    out = subprocess.run(["kcat", "-b", tidelog_module_broker.bootstrap, "-L", "-d", "protocol", "-m", "30"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "ApiVersionRequest (v3)" in out.stderr or "ApiVersion" in out.stderr
    assert "parse failure" not in out.stderr.lower()
    assert "broker 1 at" in out.stdout


def test_kafka_python_infers_a_release_with_idempotence(tidelog_module_broker: BrokerHandle) -> None:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=tidelog_module_broker.bootstrap, request_timeout_ms=60000)
    try:
        # kafka-python 3 guesses the broker release from the advertised ranges and turns idempotence
        # off below 0.11 (docs/PROTOCOL.md); ours must read as a modern release.
        assert admin._client.check_version(timeout_ms=60000) >= (3, 0)
    finally:
        admin.close()
