"""Admin flows through real clients: kafka-python's KafkaAdminClient and confluent-kafka's (librdkafka)
AdminClient create topics with configs, describe configs (names, defaults, sources, synonyms), alter, add
partitions and delete; error codes map to the clients' exceptions; topic ids and configs survive a restart."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from tidelog.testing import BrokerHandle

TIMEOUT = 60


@pytest.fixture
def kp_admin(tidelog_module_broker: BrokerHandle) -> Iterator[object]:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=tidelog_module_broker.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    yield admin
    admin.close()


@pytest.fixture
def ck_admin(tidelog_module_broker: BrokerHandle) -> object:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": tidelog_module_broker.bootstrap})


# --- kafka-python ---


def test_kafka_python_create_describe_alter_delete(tidelog_module_broker: BrokerHandle, kp_admin) -> None:
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, NewPartitions

    result = kp_admin.create_topics(
        {"kp-topic": {"num_partitions": 2, "replication_factor": 1,
                      "configs": {"cleanup.policy": "compact", "retention.ms": "3600000"}}}
    )
    created = result["topics"][0]
    assert (created["name"], created["error_code"], created["num_partitions"]) == ("kp-topic", 0, 2)
    assert created["configs"]["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"

    resource = ConfigResource(ConfigResourceType.TOPIC, "kp-topic")
    everything = kp_admin.describe_configs([resource], include_synonyms=True, config_filter="all")
    configs = everything["topic"]["kp-topic"]
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["segment.bytes"]["value"] == "1073741824"
    assert configs["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    assert configs["segment.bytes"]["synonyms"] == [
        {"name": "log.segment.bytes", "value": "1073741824", "source": "DEFAULT_CONFIG"}
    ]
    modified = kp_admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-topic")])
    assert set(modified["topic"]["kp-topic"]) == {"cleanup.policy", "retention.ms"}

    altered = kp_admin.alter_configs([ConfigResource(
        ConfigResourceType.TOPIC, "kp-topic",
        {"retention.ms": (AlterConfigOp.DELETE, None), "segment.ms": "60000"})])
    assert altered["topic"]["kp-topic"] == "OK"
    info = tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.get("kp-topic"))
    assert info.overrides == {"cleanup.policy": "compact", "segment.ms": "60000"}

    kp_admin.create_partitions({"kp-topic": NewPartitions(total_count=5)})
    assert tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.get("kp-topic").partitions) == 5
    described = kp_admin.describe_topics(["kp-topic"])[0]
    assert len(described["partitions"]) == 5

    kp_admin.delete_topics(["kp-topic"])
    assert "kp-topic" not in kp_admin.list_topics()


def test_kafka_python_errors(tidelog_module_broker: BrokerHandle, kp_admin) -> None:
    from kafka.admin import NewPartitions
    from kafka.errors import (
        InvalidConfigurationError,
        InvalidPartitionsError,
        InvalidReplicationFactorError,
        InvalidTopicError,
        TopicAlreadyExistsError,
        UnknownTopicOrPartitionError,
    )

    kp_admin.create_topics({"kp-dup": {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(TopicAlreadyExistsError):
        kp_admin.create_topics({"kp-dup": {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(InvalidReplicationFactorError):
        kp_admin.create_topics({"kp-rf": {"num_partitions": 1, "replication_factor": 3}})
    with pytest.raises(InvalidConfigurationError):
        kp_admin.create_topics({"kp-cfg": {"num_partitions": 1, "replication_factor": 1,
                                           "configs": {"cleanup.policy": "sometimes"}}})
    with pytest.raises(InvalidTopicError):
        kp_admin.create_topics({"kp/bad": {"num_partitions": 1, "replication_factor": 1}})
    kp_admin.create_topics({"kp.col": {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(InvalidTopicError):
        kp_admin.create_topics({"kp_col": {"num_partitions": 1, "replication_factor": 1}})  # '.' vs '_' collision
    with pytest.raises(InvalidPartitionsError):
        kp_admin.create_partitions({"kp-dup": NewPartitions(total_count=1)})
    with pytest.raises(UnknownTopicOrPartitionError):
        kp_admin.delete_topics(["kp-never"])
    names = set(kp_admin.list_topics())
    assert "kp-dup" in names and not names & {"kp-rf", "kp-cfg", "kp/bad", "kp_col"}


def test_kafka_python_delete_by_topic_id(tidelog_module_broker: BrokerHandle, kp_admin) -> None:
    created = kp_admin.create_topics({"kp-by-id": {"num_partitions": 1, "replication_factor": 1}})
    topic_id = created["topics"][0]["topic_id"]
    assert topic_id and uuid.UUID(str(topic_id)).int != 0
    kp_admin.delete_topics([uuid.UUID(str(topic_id))])
    assert tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.get("kp-by-id")) is None


# --- confluent-kafka (librdkafka) ---


def test_confluent_create_describe_alter_delete(tidelog_module_broker: BrokerHandle, ck_admin) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        NewPartitions,
        NewTopic,
    )

    futures = ck_admin.create_topics(
        [NewTopic("ck-topic", num_partitions=2, replication_factor=1,
                  config={"cleanup.policy": "compact", "max.message.bytes": "2000000"})],
        request_timeout=TIMEOUT,
    )
    futures["ck-topic"].result(timeout=TIMEOUT)

    resource = ConfigResource(ConfigResource.Type.TOPIC, "ck-topic")
    configs = ck_admin.describe_configs([resource], request_timeout=TIMEOUT)[resource].result(timeout=TIMEOUT)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["max.message.bytes"].value == "2000000"
    assert configs["delete.retention.ms"].value == "86400000"
    assert configs["delete.retention.ms"].is_default
    assert configs["min.cleanable.dirty.ratio"].value == "0.5"
    assert not any(c.is_read_only for c in configs.values())

    alter = ConfigResource(ConfigResource.Type.TOPIC, "ck-topic", incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    ck_admin.incremental_alter_configs([alter], request_timeout=TIMEOUT)[alter].result(timeout=TIMEOUT)
    info = tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.get("ck-topic"))
    assert info.overrides == {"cleanup.policy": "compact", "retention.ms": "7200000"}

    ck_admin.create_partitions([NewPartitions("ck-topic", 3)], request_timeout=TIMEOUT)["ck-topic"].result(
        timeout=TIMEOUT)
    assert tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.get("ck-topic").partitions) == 3
    with pytest.raises(KafkaException) as info_exc:
        ck_admin.create_partitions([NewPartitions("ck-topic", 2)], request_timeout=TIMEOUT)["ck-topic"].result(
            timeout=TIMEOUT)
    assert info_exc.value.args[0].name() == "INVALID_PARTITIONS"

    broker_resource = ConfigResource(ConfigResource.Type.BROKER, str(tidelog_module_broker.state.node_id))
    broker_configs = ck_admin.describe_configs([broker_resource], request_timeout=TIMEOUT)[broker_resource].result(
        timeout=TIMEOUT)
    assert broker_configs["num.partitions"].value == "1"
    assert broker_configs["log.cleaner.threads"].value == "1"

    ck_admin.delete_topics(["ck-topic"], request_timeout=TIMEOUT)["ck-topic"].result(timeout=TIMEOUT)
    assert "ck-topic" not in ck_admin.list_topics(timeout=TIMEOUT).topics


@pytest.mark.parametrize(
    "topic,error",
    [
        (("ck-rf", 1, 2, {}), "INVALID_REPLICATION_FACTOR"),
        (("ck-cfg", 1, 1, {"no.such": "1"}), "INVALID_CONFIG"),
        (("ck bad name", 1, 1, {}), "TOPIC_EXCEPTION"),
        (("ck-value", 1, 1, {"segment.ms": "0"}), "INVALID_CONFIG"),
    ],
)
def test_confluent_create_errors(ck_admin, topic: tuple, error: str) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    name, partitions, rf, config = topic
    with pytest.raises(KafkaException) as info:
        future = ck_admin.create_topics([NewTopic(name, partitions, rf, config=config)], request_timeout=TIMEOUT)
        future[name].result(timeout=TIMEOUT)
    assert info.value.args[0].name() == error


def test_confluent_already_exists(ck_admin) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    ck_admin.create_topics([NewTopic("ck-exists", 1, 1)], request_timeout=TIMEOUT)["ck-exists"].result(TIMEOUT)
    with pytest.raises(KafkaException) as info:
        ck_admin.create_topics([NewTopic("ck-exists", 1, 1)], request_timeout=TIMEOUT)["ck-exists"].result(TIMEOUT)
    assert info.value.args[0].name() == "TOPIC_ALREADY_EXISTS"


# --- restart ---


def test_topic_ids_and_configs_survive_restart(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    b = tidelog_broker_factory()
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        created = admin.create_topics({"durable": {"num_partitions": 3, "replication_factor": 1,
                                                   "configs": {"cleanup.policy": "compact"}}})
        topic_id = created["topics"][0]["topic_id"]
        admin.create_topics({"doomed": {"num_partitions": 1, "replication_factor": 1}})
        admin.delete_topics(["doomed"])
    finally:
        admin.close()
    b.restart()  # a clean shutdown and a start on the same log dir
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        described = admin.describe_topics(["durable"])[0]
        assert len(described["partitions"]) == 3
        assert uuid.UUID(str(described["topic_id"])) == uuid.UUID(str(topic_id))
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "durable")])
        assert configs["topic"]["durable"]["cleanup.policy"]["value"] == "compact"
        assert "doomed" not in admin.list_topics()
        log_config = b.call(lambda: b.state.topics.log(
            __import__("tidelog.storage").storage.TopicPartition("durable", 2)).config)
        assert log_config.compact
    finally:
        admin.close()


def test_kafka_python_list_config_resources(tidelog_module_broker: BrokerHandle, kp_admin) -> None:
    """ListConfigResources v1 (KIP-1142) as KafkaApis.handleListConfigResources answers it: no types means every
    type (client-metrics subscriptions, this broker as BROKER and BROKER_LOGGER, every topic, internal ones
    too); a type list filters; v0 (ListClientMetricsResources) lists client metrics only; a type the version
    does not know is UNSUPPORTED_VERSION."""
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
    from kafka.errors import UnsupportedVersionError

    from tidelog.protocol.messages import request_class
    from tidelog.testing import KafkaWire

    kp_admin.create_topics({"lcr-topic": {"num_partitions": 1, "replication_factor": 1}})
    kp_admin.alter_configs([ConfigResource(
        ConfigResourceType.CLIENT_METRICS, "lcr-metrics",
        {"metrics": (AlterConfigOp.SET, "org.apache.kafka.producer.")})])
    node = str(tidelog_module_broker.call(lambda: tidelog_module_broker.state.node_id))
    topics = tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.names())
    assert "lcr-topic" in topics

    everything = kp_admin.list_config_resources()
    assert everything == {"client_metrics": ["lcr-metrics"], "broker_logger": [node], "broker": [node],
                          "topic": topics}
    assert kp_admin.list_config_resources(["TOPIC", "BROKER"]) == {"broker": [node], "topic": topics}
    assert kp_admin.list_config_resources(["GROUP"]) == {}
    with pytest.raises(UnsupportedVersionError):
        kp_admin.list_config_resources([ConfigResourceType.UNKNOWN])

    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        v0 = wire.request(74, 0, request_class(74)[0]())
    assert (v0.error_code, [(r.resource_name, r.resource_type) for r in v0.config_resources]) == (
        0, [("lcr-metrics", int(ConfigResourceType.CLIENT_METRICS))])
