"""Broker configs against Kafka 4.3 (issue #15): AlterConfigs / IncrementalAlterConfigs on the BROKER resource
accept every config of Kafka's dynamic broker config set (DynamicBrokerConfig.AllDynamicConfigs), storing and
reporting the ones tidelog does not act on, with Kafka's refusals (static configs, bare SSL store settings,
per-broker settings at the cluster default); and DescribeConfigs' read-only / sensitive / source / synonyms
columns for every broker config tidelog defines match a table derived from Kafka's definitions.

The tables are written out here, independently of tidelog/config/broker_defs.py, from Kafka's
DynamicBrokerConfig.AllDynamicConfigs (SslConfigs.RECONFIGURABLE_CONFIGS, LogCleaner.RECONFIGURABLE_CONFIGS,
DynamicLogConfig = ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS values, DynamicThreadPool,
metric.reporters, DynamicListenerConfig, SocketServer, DynamicProducerStateManagerConfig, DynamicRemoteLogConfig,
DynamicReplicationConfig, config.providers, the group/share coordinator cached-buffer configs) and from the
PASSWORD-typed configs of KafkaConfig.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tidelog.config.broker_defs import BROKER_CONFIG_DEFS
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

BROKER = 4
SET = 0
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5

SSL_STORE = {"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
             "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
             "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates"}
LISTENER = {"listeners", "listener.security.protocol.map", "principal.builder.class", "ssl.protocol",
            "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols", "ssl.keymanager.algorithm",
            "ssl.trustmanager.algorithm", "ssl.endpoint.identification.algorithm",
            "ssl.secure.random.implementation", "ssl.client.auth", "ssl.engine.factory.class",
            "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
            "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd", "sasl.kerberos.ticket.renew.window.factor",
            "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.min.time.before.relogin",
            "sasl.kerberos.principal.to.local.rules", "sasl.login.refresh.window.factor",
            "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds",
            "sasl.login.refresh.buffer.seconds", "max.connections", "max.connection.creation.rate",
            "num.network.threads"}
CLUSTER_LEVEL_LISTENER = {"max.connections", "max.connection.creation.rate", "num.network.threads"}
KAFKA_43_DYNAMIC = SSL_STORE | LISTENER | {
    # LogCleaner
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "message.max.bytes", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
    # DynamicLogConfig: the first broker synonym of each topic config
    "log.segment.bytes", "log.roll.ms", "log.roll.jitter.ms", "log.index.size.max.bytes",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.retention.bytes", "log.retention.ms",
    "log.index.interval.bytes", "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms", "log.segment.delete.delay.ms", "log.cleaner.min.cleanable.ratio",
    "log.cleanup.policy", "unclean.leader.election.enable", "min.insync.replicas", "compression.type",
    "compression.gzip.level", "compression.lz4.level", "compression.zstd.level", "log.preallocate",
    "log.message.format.version", "log.message.timestamp.type", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms", "log.local.retention.ms", "log.local.retention.bytes",
    # DynamicThreadPool, metrics, SocketServer, producer state, remote log, replication, providers, coordinators
    "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads",
    "metric.reporters", "max.connections.per.ip", "max.connections.per.ip.overrides",
    "producer.id.expiration.ms", "transaction.partition.verification.enable",
    "remote.log.index.file.cache.total.size.bytes", "remote.fetch.max.wait.ms",
    "remote.log.manager.copy.max.bytes.per.second", "remote.log.manager.fetch.max.bytes.per.second",
    "remote.list.offsets.request.timeout.ms", "remote.log.manager.copier.thread.pool.size",
    "remote.log.manager.expiration.thread.pool.size", "remote.log.manager.follower.thread.pool.size",
    "remote.log.reader.threads", "follower.fetch.last.tiered.offset.enable", "config.providers",
    "group.coordinator.cached.buffer.max.bytes", "share.coordinator.cached.buffer.max.bytes",
}
KAFKA_PASSWORDS = {"ssl.keystore.password", "ssl.key.password", "ssl.truststore.password",
                   "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
                   "sasl.jaas.config"}
# Configs tidelog defines that Kafka 4.3 does not (tidelog's own, or removed from Kafka in 4.0 and kept here for
# clients of 3.9). They are described as tidelog defines them.
TIDELOG_ONLY = {
    "log.flush.on.append": "tidelog: fsync every append",
    "log.cleaner.thread.nice": "tidelog: cleaner threads' niceness",
    "metrics.port": "tidelog: Prometheus endpoint", "metrics.host": "tidelog: Prometheus endpoint",
    "console.enable": "tidelog: web console", "console.read.only": "tidelog: web console",
    "schema.registry.port": "tidelog: Schema Registry", "schema.registry.host": "tidelog: Schema Registry",
    "cluster.id": "tidelog: cluster id for a new log dir (Kafka: kafka-storage format)",
    "log.message.timestamp.difference.max.ms": "removed in Kafka 4.0 (KIP-937)",
    "log.message.downconversion.enable": "removed in Kafka 4.0 (KIP-724)",
}
# Synonym groups (DynamicBrokerConfig.brokerConfigSynonyms)
SYNONYMS = {"log.roll.ms": ["log.roll.ms", "log.roll.hours"],
            "log.retention.ms": ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
            "log.flush.interval.ms": ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]}

# A value each config accepts (its default where that is not null)
SAMPLE = {"listeners": "PLAINTEXT://127.0.0.1:0", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
          "log.roll.ms": "3600000", "log.roll.jitter.ms": "0", "log.flush.interval.ms": "1000",
          "log.retention.ms": "604800000", "ssl.keystore.location": "/tmp/ks.jks",
          "ssl.truststore.location": "/tmp/ts.jks", "ssl.provider": "SunJSSE",
          "ssl.secure.random.implementation": "SHA1PRNG", "sasl.kerberos.service.name": "kafka",
          "ssl.engine.factory.class": "org.example.Factory", "max.connections.per.ip.overrides": "127.0.0.1:100",
          "config.providers": "file", "metric.reporters": "org.apache.kafka.common.metrics.JmxReporter"}


def sample(name: str) -> str:
    if name in SAMPLE:
        return SAMPLE[name]
    definition = BROKER_CONFIG_DEFS[name]
    if definition.type.name == "PASSWORD":
        return "s3cret"
    from tidelog.config.definitions import to_string

    value = to_string(definition.type, definition.default)
    assert value is not None, name
    return value


pytestmark = pytest.mark.tidelog(overrides={"log.retention.hours": 100})


def describe(wire: KafkaWire, name: str = "1", keys: list[str] | None = None) -> dict[str, Any]:
    cls = request_class(32)
    req = cls[4](resources=[cls.DescribeConfigsResource(resource_type=BROKER, resource_name=name,
                                                        configuration_keys=keys)],
                 include_synonyms=True, include_documentation=False)
    [result] = wire.request(32, 4, req).results
    assert result.error_code == 0, result.error_message
    return {c.name: c for c in result.configs}


def incremental(wire: KafkaWire, configs: dict[str, str], name: str = "1",
                validate_only: bool = False) -> tuple[int, str | None]:
    cls = request_class(44)
    res = cls.AlterConfigsResource
    req = cls[1](resources=[res(resource_type=BROKER, resource_name=name, configs=[
        res.AlterableConfig(name=n, config_operation=SET, value=v) for n, v in configs.items()])],
        validate_only=validate_only)
    [r] = wire.request(44, 1, req).responses
    return r.error_code, r.error_message


def alter(wire: KafkaWire, configs: dict[str, str], name: str = "1") -> tuple[int, str | None]:
    cls = request_class(33)
    res = cls.AlterConfigsResource
    req = cls[2](resources=[res(resource_type=BROKER, resource_name=name, configs=[
        res.AlterableConfig(name=n, value=v) for n, v in configs.items()])], validate_only=False)
    [r] = wire.request(33, 2, req).responses
    return r.error_code, r.error_message


def test_read_only_and_sensitive_columns_match_kafka_43(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        described = describe(wire)
    assert set(described) >= set(BROKER_CONFIG_DEFS)
    wrong = {}
    for name in sorted(BROKER_CONFIG_DEFS):
        entry = described[name]
        want_read_only = name not in KAFKA_43_DYNAMIC and name not in TIDELOG_ONLY
        want_sensitive = name in KAFKA_PASSWORDS
        if name in TIDELOG_ONLY:
            want_read_only = entry.read_only  # tidelog's own choice, reported below
        if (entry.read_only, entry.is_sensitive) != (want_read_only, want_sensitive):
            wrong[name] = ((entry.read_only, entry.is_sensitive), (want_read_only, want_sensitive))
        if want_sensitive:
            assert entry.value is None, name
    assert not wrong, f"(read_only, sensitive) got vs Kafka 4.3: {wrong}"
    # every Kafka 4.3 dynamic config is defined (so AlterConfigs accepts it)
    assert KAFKA_43_DYNAMIC <= set(BROKER_CONFIG_DEFS)


def test_source_and_synonyms_follow_the_layers(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        before = describe(wire)
        # default
        assert (before["num.io.threads"].config_source, [(s.name, s.source) for s in before["num.io.threads"].synonyms]) \
            == (DEFAULT, [("num.io.threads", DEFAULT)])
        # only log.retention.hours is set: Kafka's configSynonyms drops the synonyms before the described name,
        # so log.retention.ms reads as a null default and log.retention.hours carries the static value
        retention = before["log.retention.ms"]
        assert (retention.config_source, retention.value, retention.synonyms) == (DEFAULT, None, [])
        hours = before["log.retention.hours"]
        assert (hours.config_source, hours.value) == (STATIC, "100")
        assert [(s.name, s.value, s.source) for s in hours.synonyms] == [("log.retention.hours", "100", STATIC),
                                                                          ("log.retention.hours", "168", DEFAULT)]
        assert incremental(wire, {"log.retention.ms": "7200000"}) == (0, None)
        assert incremental(wire, {"background.threads": "12"}, name="") == (0, None)
        after = describe(wire)
        retention = after["log.retention.ms"]
        assert retention.config_source == DYNAMIC_BROKER and retention.value == "7200000"
        assert [(s.name, s.source) for s in retention.synonyms][:2] == [("log.retention.ms", DYNAMIC_BROKER),
                                                                         ("log.retention.hours", STATIC)]
        background = after["background.threads"]
        assert (background.value, background.config_source) == ("12", DYNAMIC_DEFAULT)
        assert [(s.name, s.value, s.source) for s in background.synonyms] == \
            [("background.threads", "12", DYNAMIC_DEFAULT), ("background.threads", "10", DEFAULT)]
        default_level = describe(wire, "")
        # only the cluster-default dynamic configs: KIP-966 put min.insync.replicas there at the first start
        assert set(default_level) == {"background.threads", "min.insync.replicas"}
        # an unset ms config whose group has only a defaulted hours (or scheduler) synonym: no synonyms, null
        for name, group in SYNONYMS.items():
            if name == "log.retention.ms":
                continue
            assert (after[name].value, after[name].synonyms) == (None, []), name
            fallback = after[group[-1]]
            assert [(s.name, s.source) for s in fallback.synonyms] == [(group[-1], DEFAULT)], group


def test_every_kafka_43_dynamic_config_is_accepted_stored_and_reported(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    values = {}
    # With eligible leader replicas enabled (a new 4.3 cluster) a broker-level min.insync.replicas is refused, so
    # this one goes to the cluster level (tests/broker/test_elr_group_version.py)
    for name in sorted(KAFKA_43_DYNAMIC - {"min.insync.replicas"}):
        key = f"listener.name.plaintext.{name}" if name in SSL_STORE else name
        values[key] = sample(name)
    handle = tidelog_broker_factory(tmp_path)
    with KafkaWire(handle.bootstrap) as wire:
        assert incremental(wire, values, validate_only=True) == (0, None)
        assert incremental(wire, values) == (0, None)
        described = describe(wire)
        for key, value in values.items():
            entry = described[key]
            assert entry.config_source == DYNAMIC_BROKER, key
            assert entry.value == (None if entry.is_sensitive else value), key
        # a listener-prefixed entry has its base config as synonym, and (ConfigHelper) reads as read-only
        prefixed = described["listener.name.plaintext.ssl.keystore.type"]
        assert [(s.name, s.value, s.source) for s in prefixed.synonyms] == [
            ("listener.name.plaintext.ssl.keystore.type", "JKS", DYNAMIC_BROKER), ("ssl.keystore.type", "JKS", DEFAULT)]
        assert prefixed.read_only
        assert described["listener.name.plaintext.ssl.keystore.password"].value is None
    # stored durably
    handle.restart()
    with KafkaWire(handle.bootstrap) as wire:
        described = describe(wire, keys=["background.threads", "sasl.kerberos.min.time.before.relogin"])
        assert {n: (c.value, c.config_source) for n, c in described.items()} == {
            "background.threads": ("10", DYNAMIC_BROKER),
            "sasl.kerberos.min.time.before.relogin": ("60000", DYNAMIC_BROKER)}


@pytest.mark.parametrize(("configs", "name", "message"), [
    ({"log.dirs": "/x"}, "1", "Cannot update these configs dynamically: log.dirs"),
    ({"ssl.keystore.location": "/x"}, "1",
     "These security configs can be dynamically updated only per-listener using the listener prefix"),
    ({"sasl.kerberos.min.time.before.relogin": "1000"}, "",
     "Cannot update these configs at default cluster level, broker id must be specified"),
    ({"listener.name.plaintext.ssl.keystore.location": "/x"}, "",
     "Cannot update these configs at default cluster level, broker id must be specified"),
    ({"background.threads": "50"}, "1",
     "Dynamic thread count update validation failed for background.threads=50, value should not be greater "
     "than double the current value"),
    ({"num.io.threads": "3"}, "1",
     "Dynamic thread count update validation failed for num.io.threads=3, value should be at least half the "
     "current value 8"),
    ({"ssl.client.auth": "sometimes"}, "1", "ssl.client.auth"),
])
def test_refusals_are_kafkas(tidelog_module_broker: BrokerHandle, configs: dict[str, str], name: str, message: str) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        for call in (incremental, alter):
            code, text = call(wire, configs, name=name)
            assert code == ErrorCode.INVALID_REQUEST and text is not None and message in text, (call, text)


def test_cluster_level_listener_configs_may_be_cluster_defaults(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        assert incremental(wire, {"max.connections": "1000", "listener.name.plaintext.max.connections": "50"},
                           name="") == (0, None)
        assert describe(wire, "")["max.connections"].value == "1000"
