"""KIP-714 client telemetry end to end: subscriptions through IncrementalAlterConfigs on CLIENT_METRICS,
GetTelemetrySubscriptions / PushTelemetry errors on the wire, librdkafka pushing metrics to /metrics."""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tidelog.protocol.messages import request_class
from tidelog.protocol.records import GZIP, compress
from tidelog.testing import BrokerHandle, KafkaWire

CLIENT_METRICS = 16
SET, APPEND = 0, 2


def call(wire: KafkaWire, key: int, version: int, request: Any) -> Any:
    wire.send(key, version, request)
    return wire.receive(key, version)[1]


def alter(wire: KafkaWire, name: str, configs: dict[str, str], op: int = SET) -> Any:
    req = request_class(44)
    resource = req.AlterConfigsResource(
        resource_type=CLIENT_METRICS, resource_name=name,
        configs=[req.AlterConfigsResource.AlterableConfig(name=k, config_operation=op, value=v)
                 for k, v in configs.items()])
    response = call(wire, 44, 1, req[1](resources=[resource], validate_only=False))
    return response.responses[0]


def get_subs(wire: KafkaWire, instance: uuid.UUID | None) -> Any:
    return call(wire, 71, 0, request_class(71)[0](client_instance_id=instance))


def push(wire: KafkaWire, instance: uuid.UUID | None, sub_id: int, payload: bytes = b"", codec: int = 0,
         terminating: bool = False) -> int:
    req = request_class(72)[0](client_instance_id=instance, subscription_id=sub_id, terminating=terminating,
                               compression_type=codec, metrics=payload)
    return int(call(wire, 72, 0, req).error_code)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _ld(field: int, body: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(body)) + body


def otlp_gauge(name: str, value: float) -> bytes:
    """A MetricsData with one gauge data point (as_double), written with the protobuf wire format."""
    import struct

    kv = _ld(1, b"node_id") + _ld(2, _ld(1, b"1"))
    point = _varint(4 << 3 | 1) + struct.pack("<d", value) + _ld(7, kv)
    metric = _ld(1, name.encode()) + _ld(5, _ld(1, point))
    return _ld(1, _ld(2, _ld(2, metric)))


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    import base64

    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def scrape(broker: Any) -> str:
    port = broker.state.metrics.wait_http_port()
    return str(urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode())


def test_no_subscription_means_an_empty_subscription(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    broker = tidelog_broker_factory()
    with KafkaWire(broker.bootstrap) as wire:
        response = get_subs(wire, None)
        assert response.error_code == 0
        assert response.client_instance_id is not None and response.client_instance_id.int != 0
        assert response.requested_metrics == []
        assert response.push_interval_ms == 300_000
        assert response.telemetry_max_bytes == 1024 * 1024
        assert response.delta_temporality is True
        assert sorted(response.accepted_compression_types) == [1, 2, 3, 4]
        # a second, immediate request for the same instance is too early
        again = get_subs(wire, response.client_instance_id)
        assert again.error_code == 89  # THROTTLING_QUOTA_EXCEEDED


def test_subscription_config_validation_and_describe(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    broker = tidelog_broker_factory()
    with KafkaWire(broker.bootstrap) as wire:
        assert alter(wire, "s1", {"interval.ms": "50"}).error_code == 40  # INVALID_CONFIG: below 100
        assert alter(wire, "s1", {"match": "bogus_key=x"}).error_code == 40
        assert alter(wire, "s1", {"match": "client_id=("}).error_code == 40
        assert alter(wire, "s1", {"nonsense": "1"}).error_code == 42  # INVALID_REQUEST
        assert alter(wire, "", {"metrics": "*"}).error_code == 42
        assert alter(wire, "s1", {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"}).error_code == 0
        assert alter(wire, "s1", {"metrics": "org.apache.kafka.consumer."}, op=APPEND).error_code == 0
        req = request_class(32)
        describe = call(wire, 32, 4, req[4](resources=[req.DescribeConfigsResource(
            resource_type=CLIENT_METRICS, resource_name="s1", configuration_keys=None)],
            include_synonyms=False, include_documentation=False))
        # Kafka 4.1+ (KAFKA-17516): every config, set ones CLIENT_METRICS_CONFIG (7), the rest DEFAULT_CONFIG (5)
        configs = {c.name: (c.value, c.config_source, c.config_type) for c in describe.results[0].configs}
        assert configs == {"interval.ms": ("1000", 7, 3),
                           "metrics": ("org.apache.kafka.producer.,org.apache.kafka.consumer.", 7, 7),
                           "match": ("", 5, 7)}
        unknown = call(wire, 32, 4, req[4](resources=[req.DescribeConfigsResource(
            resource_type=CLIENT_METRICS, resource_name="nobody", configuration_keys=["interval.ms", "match"])],
            include_synonyms=True, include_documentation=True)).results[0]
        assert unknown.error_code == 0
        assert [(c.name, c.value, c.config_source, c.synonyms) for c in unknown.configs] == [
            ("interval.ms", "300000", 5, []), ("match", "", 5, [])]
        assert unknown.configs[0].documentation == "How often matching clients push, in ms."
        synonyms = call(wire, 32, 4, req[4](resources=[req.DescribeConfigsResource(
            resource_type=CLIENT_METRICS, resource_name="s1", configuration_keys=["interval.ms"])],
            include_synonyms=True, include_documentation=False)).results[0].configs[0].synonyms
        assert [(s.name, s.value, s.source) for s in synonyms] == [("interval.ms", "1000", 7)]
        listed = call(wire, 74, 1, request_class(74)[1](resource_types=[CLIENT_METRICS]))
        assert [(r.resource_name, r.resource_type) for r in listed.config_resources] == [("s1", CLIENT_METRICS)]
        v0 = call(wire, 74, 0, request_class(74)[0]())
        assert [r.resource_name for r in v0.config_resources] == ["s1"]


def test_push_errors_and_metrics_on_prometheus(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    broker = tidelog_broker_factory(overrides={"metrics.port": 0})
    with KafkaWire(broker.bootstrap, client_id="wire-1") as wire:
        assert alter(wire, "all", {"metrics": "*", "interval.ms": "100000"}).error_code == 0
        sub = get_subs(wire, None)
        instance, sub_id = sub.client_instance_id, sub.subscription_id
        assert sub.requested_metrics == [""] and sub.push_interval_ms == 100_000
        assert push(wire, None, sub_id) == 42  # INVALID_REQUEST: zero instance id
        assert push(wire, instance, sub_id + 1) == 117  # UNKNOWN_SUBSCRIPTION_ID
        payload = compress(GZIP, otlp_gauge("org.apache.kafka.producer.record.queue.time.avg", 2.5))
        assert push(wire, instance, sub_id, payload, codec=GZIP) == 0
        assert push(wire, instance, sub_id, payload, codec=GZIP) == 89  # too early: THROTTLING_QUOTA_EXCEEDED
        body = scrape(broker)
        line = [x for x in body.splitlines()
                if x.startswith("tidelog_client_org_apache_kafka_producer_record_queue_time_avg{")]
        assert line and f'client_instance_id="{kafka_uuid(instance)}"' in line[0] and 'client_id="wire-1"' in line[0]
        assert 'node_id="1"' in line[0] and line[0].endswith(" 2.5")
        # unsupported codec (checked after the push-interval check, as Kafka does): a fresh instance
        fresh = get_subs(wire, None)
        assert push(wire, fresh.client_instance_id, fresh.subscription_id, codec=9) == 76
        # after UNSUPPORTED_COMPRESSION_TYPE the client may ask for its subscription again at once
        assert get_subs(wire, fresh.client_instance_id).error_code == 0
        # undecodable payload (not gzip): INVALID_RECORD
        bad = get_subs(wire, None)
        assert push(wire, bad.client_instance_id, bad.subscription_id, b"not gzip", codec=GZIP) == 87
        # too large: a fresh instance, payload over telemetry.max.bytes
        other = get_subs(wire, None)
        big = b"\x00" * (other.telemetry_max_bytes + 1)
        assert push(wire, other.client_instance_id, other.subscription_id, big) == 118  # TELEMETRY_TOO_LARGE
        # a terminating push is accepted even when early; any push after it is INVALID_REQUEST
        assert push(wire, instance, sub_id, terminating=True) == 0
        assert push(wire, instance, sub_id) == 42
        # a changed subscription changes the id: the old one is stale
        third = get_subs(wire, None)
        assert alter(wire, "all", {"interval.ms": "200000"}).error_code == 0
        assert push(wire, third.client_instance_id, third.subscription_id) == 117
        renewed = get_subs(wire, third.client_instance_id)
        assert renewed.error_code == 0 and renewed.subscription_id != third.subscription_id
        assert renewed.push_interval_ms == 200_000


def test_subscription_survives_restart(tmp_path: Any, tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    broker = tidelog_broker_factory(str(tmp_path))
    with KafkaWire(broker.bootstrap) as wire:
        assert alter(wire, "keep", {"metrics": "org.apache.kafka.", "match": "client_id=app-.*"}).error_code == 0
    broker.restart()
    with KafkaWire(broker.bootstrap, client_id="app-7") as wire:
        listed = call(wire, 74, 1, request_class(74)[1](resource_types=[CLIENT_METRICS]))
        assert [r.resource_name for r in listed.config_resources] == ["keep"]
        assert get_subs(wire, None).requested_metrics == ["org.apache.kafka."]
    broker.restart()
    with KafkaWire(broker.bootstrap, client_id="other") as wire:
        assert get_subs(wire, None).requested_metrics == []  # `match` selects by client id


@pytest.mark.slow
def test_librdkafka_pushes_metrics_to_prometheus(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    assert confluent_kafka.libversion()[1] >= 0x020500FF  # KIP-714 since librdkafka 2.5

    broker = tidelog_broker_factory(overrides={"metrics.port": 0}, topics={"t": 1})
    with KafkaWire(broker.bootstrap) as wire:
        created = alter(wire, "producers", {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"})
        assert created.error_code == 0
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "client.id": "rdk-telemetry"})
    deadline = time.monotonic() + 60
    found: list[str] = []
    while time.monotonic() < deadline and not found:
        producer.produce("t", b"v")
        producer.poll(0.2)
        found = [x for x in scrape(broker).splitlines()
                 if x.startswith("tidelog_client_org_apache_kafka_producer_") and 'client_id="rdk-telemetry"' in x]
    producer.flush(10)
    assert found, "librdkafka pushed no metrics"
    assert any("client_instance_id=" in x for x in found)


def test_delta_sums_accumulate_as_counters(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    from tidelog.clock import ManualClock

    from .test_otlp import otlp_sum

    clock = ManualClock()
    broker = tidelog_broker_factory(overrides={"metrics.port": 0}, clock=clock)
    with KafkaWire(broker.bootstrap) as wire:
        assert alter(wire, "sums", {"metrics": "org.apache.kafka.", "interval.ms": "1000"}).error_code == 0
        sub = get_subs(wire, None)
        payload = otlp_sum("org.apache.kafka.producer.record.send.total", 5, 1, True)
        assert push(wire, sub.client_instance_id, sub.subscription_id, payload) == 0
        clock.advance(1000)
        assert push(wire, sub.client_instance_id, sub.subscription_id, payload) == 0
        ignored = otlp_sum("other.metric", 1, 1, True)  # not under the requested prefix
        clock.advance(1000)
        assert push(wire, sub.client_instance_id, sub.subscription_id, ignored) == 0
        body = scrape(broker)
        assert "# TYPE tidelog_client_org_apache_kafka_producer_record_send_total counter" in body
        [line] = [x for x in body.splitlines() if x.startswith("tidelog_client_org_apache_kafka_producer_record_send")]
        assert line.endswith(" 10.0")
        assert "tidelog_client_other_metric" not in body


def _introduce(wire: KafkaWire, name: str, version: str) -> None:
    """ApiVersions v3: the client names its software (KIP-511), as every KIP-714 client does first."""
    answer = call(wire, 18, 3, request_class(18)[3](client_software_name=name, client_software_version=version))
    assert answer.error_code == 0


def test_match_on_client_software_and_source_port(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """`match` selects on what the client said in ApiVersions and on its source port (ClientMetricsInstanceMetadata)."""
    broker = tidelog_broker_factory()
    with KafkaWire(broker.bootstrap) as admin:
        assert alter(admin, "by-software", {"metrics": "org.apache.kafka.producer.",
                                            "match": "client_software_name=probe-app,"
                                                     "client_software_version=1\\..*"}).error_code == 0
    with KafkaWire(broker.bootstrap) as wire:
        _introduce(wire, "probe-app", "1.4.0")
        assert get_subs(wire, None).requested_metrics == ["org.apache.kafka.producer."]
    with KafkaWire(broker.bootstrap) as wire:
        _introduce(wire, "probe-app", "2.0.0")
        assert get_subs(wire, None).requested_metrics == []  # version does not match
    with KafkaWire(broker.bootstrap) as wire:
        assert get_subs(wire, None).requested_metrics == []  # never named its software
    with KafkaWire(broker.bootstrap) as wire:
        port = wire.sock.getsockname()[1]
        with KafkaWire(broker.bootstrap) as admin:
            assert alter(admin, "by-port", {"metrics": "org.apache.kafka.consumer.",
                                            "match": f"client_source_port={port}"}).error_code == 0
        assert get_subs(wire, None).requested_metrics == ["org.apache.kafka.consumer."]
