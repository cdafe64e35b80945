"""Admin APIs over a real socket with hand-built requests: every served version of CreateTopics, DeleteTopics,
CreatePartitions, DescribeConfigs, AlterConfigs and IncrementalAlterConfigs, and their error codes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


pytestmark = pytest.mark.tidelog(overrides={"log.segment.bytes": "2097152"})


@pytest.fixture
def wire(tidelog_module_broker: BrokerHandle) -> Iterator[KafkaWire]:
    with KafkaWire(tidelog_module_broker.bootstrap) as w:
        yield w


def create_req(version: int, *topics: tuple[str, int, int, dict[str, str | None]], validate_only: bool = False,
               assignments: dict[int, list[int]] | None = None) -> Any:
    cls = request_class(19)
    topic_cls = cls.CreatableTopic
    return cls[version](
        topics=[
            topic_cls(
                name=name, num_partitions=n, replication_factor=rf,
                assignments=[topic_cls.CreatableReplicaAssignment(partition_index=p, broker_ids=b)
                             for p, b in (assignments or {}).items()],
                configs=[topic_cls.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
            )
            for name, n, rf, configs in topics
        ],
        timeout_ms=30000,
        validate_only=validate_only,
    )


def create(wire: KafkaWire, version: int, *topics: Any, **kw: Any) -> dict[str, Any]:
    response = wire.request(19, version, create_req(version, *topics, **kw))
    return {t.name: t for t in response.topics}


def describe(wire: KafkaWire, version: int, rtype: int, name: str, keys: list[str] | None = None,
             synonyms: bool = True, docs: bool = False) -> Any:
    cls = request_class(32)
    req = cls[version](
        resources=[cls.DescribeConfigsResource(resource_type=rtype, resource_name=name, configuration_keys=keys)],
        include_synonyms=synonyms, include_documentation=docs,
    )
    return wire.request(32, version, req).results[0]


def incremental(wire: KafkaWire, version: int, rtype: int, name: str, ops: list[tuple[str, int, str | None]],
                validate_only: bool = False) -> Any:
    cls = request_class(44)
    res = cls.AlterConfigsResource
    req = cls[version](
        resources=[res(resource_type=rtype, resource_name=name,
                       configs=[res.AlterableConfig(name=n, config_operation=o, value=v) for n, o, v in ops])],
        validate_only=validate_only,
    )
    return wire.request(44, version, req).responses[0]


def alter(wire: KafkaWire, version: int, rtype: int, name: str, configs: dict[str, str | None],
          validate_only: bool = False) -> Any:
    cls = request_class(33)
    res = cls.AlterConfigsResource
    req = cls[version](
        resources=[res(resource_type=rtype, resource_name=name,
                       configs=[res.AlterableConfig(name=n, value=v) for n, v in configs.items()])],
        validate_only=validate_only,
    )
    return wire.request(33, version, req).responses[0]


def overrides(broker: BrokerHandle, topic: str) -> dict[str, str]:
    return broker.call(lambda: dict(broker.state.topics.get(topic).overrides))


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topics_every_version(tidelog_module_broker: BrokerHandle, wire: KafkaWire, version: int) -> None:
    name = f"create-v{version}"
    result = create(wire, version, (name, 2, 1, {"cleanup.policy": "compact"}))[name]
    assert result.error_code == 0
    info = tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.get(name))
    assert info.partitions == 2 and info.overrides == {"cleanup.policy": "compact"}
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (2, 1)
        configs = {c.name: c for c in result.configs}
        assert (configs["cleanup.policy"].value, configs["cleanup.policy"].config_source) == ("compact", 1)
        assert (configs["segment.bytes"].value, configs["segment.bytes"].config_source) == ("2097152", 4)
        assert configs["retention.ms"].config_source == 5 and not configs["retention.ms"].read_only
    if version >= 7:
        assert result.topic_id == uuid.UUID(bytes=info.topic_id)
    again = create(wire, version, (name, 1, 1, {}))[name]
    assert again.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and again.error_message


def test_create_topics_defaults_and_validate_only(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    result = create(wire, 7, ("dry-run", -1, -1, {"retention.ms": "1000"}), validate_only=True)["dry-run"]
    assert result.error_code == 0 and result.num_partitions == 1 and result.replication_factor == 1
    assert {c.name: c.value for c in result.configs}["retention.ms"] == "1000"
    assert tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.get("dry-run")) is None
    result = create(wire, 7, ("defaults", -1, -1, {}))["defaults"]
    assert (result.error_code, result.num_partitions) == (0, 1)


@pytest.mark.parametrize(
    "topic,code",
    [
        (("bad name", 1, 1, {}), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (("x" * 250, 1, 1, {}), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (("rf3", 1, 3, {}), ErrorCode.INVALID_REPLICATION_FACTOR),
        (("rf0", 1, 0, {}), ErrorCode.INVALID_REPLICATION_FACTOR),
        (("p0", 0, 1, {}), ErrorCode.INVALID_PARTITIONS),
        (("unknown-config", 1, 1, {"no.such.config": "1"}), ErrorCode.INVALID_CONFIG),
        (("bad-value", 1, 1, {"min.cleanable.dirty.ratio": "2"}), ErrorCode.INVALID_CONFIG),
        (("null-value", 1, 1, {"retention.ms": None}), ErrorCode.INVALID_CONFIG),
    ],
)
def test_create_topics_errors(tidelog_module_broker: BrokerHandle, wire: KafkaWire, topic: tuple, code: ErrorCode) -> None:
    result = create(wire, 7, topic)[topic[0]]
    assert result.error_code == code, result
    assert result.error_message
    assert result.topic_id in (None, uuid.UUID(int=0))  # kafka-python decodes the zero uuid as None
    assert tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.get(topic[0])) is None


def test_create_topics_collision_duplicates_and_assignments(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    assert create(wire, 7, ("col.lide", 1, 1, {}))["col.lide"].error_code == 0
    assert create(wire, 7, ("col_lide", 1, 1, {}))["col_lide"].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    dup = create(wire, 7, ("twice", 1, 1, {}), ("twice", 1, 1, {}))
    assert dup["twice"].error_code == ErrorCode.INVALID_REQUEST
    node = tidelog_module_broker.state.node_id
    ok = create(wire, 7, ("manual", -1, -1, {}), assignments={0: [node], 1: [node]})["manual"]
    assert (ok.error_code, ok.num_partitions) == (0, 2)
    mixed = create(wire, 7, ("manual-mixed", 2, -1, {}), assignments={0: [node]})["manual-mixed"]
    assert mixed.error_code == ErrorCode.INVALID_REQUEST
    other = create(wire, 7, ("manual-other", -1, -1, {}), assignments={0: [node + 1]})["manual-other"]
    assert other.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    gap = create(wire, 7, ("manual-gap", -1, -1, {}), assignments={0: [node], 2: [node]})["manual-gap"]
    assert gap.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


@pytest.mark.parametrize("version", range(1, 7))
def test_delete_topics_by_name(tidelog_module_broker: BrokerHandle, wire: KafkaWire, version: int) -> None:
    name = f"delete-v{version}"
    assert create(wire, 7, (name, 1, 1, {}))[name].error_code == 0
    cls = request_class(20)
    if version >= 6:
        req = cls[version](topics=[cls.DeleteTopicState(name=name), cls.DeleteTopicState(name="never-was")],
                           timeout_ms=30000)
    else:
        req = cls[version](topic_names=[name, "never-was"], timeout_ms=30000)
    results = {r.name: r for r in wire.request(20, version, req).responses}
    assert results[name].error_code == 0
    assert results["never-was"].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.get(name)) is None


def test_delete_topics_by_id(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    created = create(wire, 7, ("delete-by-id", 2, 1, {}))["delete-by-id"]
    cls = request_class(20)
    unknown = uuid.uuid4()
    req = cls[6](topics=[cls.DeleteTopicState(name=None, topic_id=created.topic_id),
                         cls.DeleteTopicState(name=None, topic_id=unknown),
                         cls.DeleteTopicState(name="delete-by-id", topic_id=unknown)], timeout_ms=30000)
    results = wire.request(20, 6, req).responses
    assert (results[0].name, results[0].topic_id, results[0].error_code) == ("delete-by-id", created.topic_id, 0)
    assert results[1].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    assert results[2].error_code == ErrorCode.INVALID_REQUEST
    assert tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.get("delete-by-id")) is None


@pytest.mark.parametrize("version", range(0, 4))
def test_create_partitions(tidelog_module_broker: BrokerHandle, wire: KafkaWire, version: int) -> None:
    name = f"grow-v{version}"
    assert create(wire, 7, (name, 1, 1, {}))[name].error_code == 0
    cls = request_class(37)
    topic = cls.CreatePartitionsTopic

    def grow(count: int, topic_name: str = name, validate_only: bool = False,
             assignments: list[list[int]] | None = None) -> Any:
        assign = None if assignments is None else [topic.CreatePartitionsAssignment(broker_ids=b)
                                                   for b in assignments]
        req = cls[version](topics=[topic(name=topic_name, count=count, assignments=assign)], timeout_ms=30000,
                           validate_only=validate_only)
        return wire.request(37, version, req).results[0]

    assert grow(3, validate_only=True).error_code == 0
    assert tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.get(name).partitions) == 1
    assert grow(3).error_code == 0
    assert tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.get(name).partitions) == 3
    assert grow(2).error_code == ErrorCode.INVALID_PARTITIONS
    assert grow(3).error_code == ErrorCode.INVALID_PARTITIONS
    assert grow(5, topic_name="no-such-topic").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert grow(5, assignments=[[tidelog_module_broker.state.node_id]]).error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert grow(4, assignments=[[tidelog_module_broker.state.node_id]]).error_code == 0


@pytest.mark.parametrize("version", range(1, 5))
def test_describe_topic_configs(tidelog_module_broker: BrokerHandle, wire: KafkaWire, version: int) -> None:
    name = f"describe-v{version}"
    assert create(wire, 7, (name, 1, 1, {"retention.ms": "3600000"}))[name].error_code == 0
    result = describe(wire, version, TOPIC, name, docs=True)
    assert (result.error_code, result.resource_name) == (0, name)
    configs = {c.name: c for c in result.configs}
    assert len(configs) >= 30
    retention = configs["retention.ms"]
    assert (retention.value, retention.config_source, retention.read_only) == ("3600000", 1, False)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [("retention.ms", "3600000", 1)]
    seg = configs["segment.bytes"]
    assert (seg.value, seg.config_source) == ("2097152", 4)
    assert [(s.name, s.source) for s in seg.synonyms] == [("log.segment.bytes", 4), ("log.segment.bytes", 5)]
    policy = configs["cleanup.policy"]
    assert (policy.value, policy.config_source) == ("delete", 5)
    assert [(s.name, s.value, s.source) for s in policy.synonyms] == [("log.cleanup.policy", "delete", 5)]
    if version >= 3:
        assert policy.config_type == 7 and configs["segment.bytes"].config_type == 3
        assert configs["min.cleanable.dirty.ratio"].config_type == 6
        assert policy.documentation
    only = describe(wire, version, TOPIC, name, keys=["retention.ms"], synonyms=False)
    assert [(c.name, c.synonyms) for c in only.configs] == [("retention.ms", [])]


def test_describe_errors(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    assert describe(wire, 4, TOPIC, "no-such-topic").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert describe(wire, 4, TOPIC, "bad name!").error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert describe(wire, 4, BROKER, "99").error_code == ErrorCode.INVALID_REQUEST
    assert describe(wire, 4, 99, "x").error_code == ErrorCode.INVALID_REQUEST


def test_describe_broker_configs(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    result = describe(wire, 4, BROKER, str(tidelog_module_broker.state.node_id))
    assert result.error_code == 0
    configs = {c.name: c for c in result.configs}
    assert (configs["log.segment.bytes"].value, configs["log.segment.bytes"].config_source) == ("2097152", 4)
    assert configs["num.partitions"].value == "1" and configs["num.partitions"].config_source == 5
    assert configs["num.partitions"].read_only and not configs["log.cleaner.threads"].read_only
    assert configs["auto.create.topics.enable"].value == "true"
    assert configs["offsets.topic.num.partitions"].value == "50"
    assert configs["log.cleaner.dedupe.buffer.size"].value == "134217728"
    assert configs["listeners"].value.startswith("PLAINTEXT://127.0.0.1:")
    cluster = describe(wire, 4, BROKER, "")
    assert cluster.error_code == 0  # only KIP-966's cluster-level min.insync.replicas, written at the first start
    assert [(c.name, c.value, c.config_source) for c in cluster.configs] == [("min.insync.replicas", "1", 3)]
    loggers = describe(wire, 4, BROKER_LOGGER, str(tidelog_module_broker.state.node_id))
    assert loggers.error_code == 0 and "root" in {c.name for c in loggers.configs}


@pytest.mark.parametrize("version", range(0, 2))
def test_incremental_alter_topic(tidelog_module_broker: BrokerHandle, wire: KafkaWire, version: int) -> None:
    name = f"incr-v{version}"
    assert create(wire, 7, (name, 1, 1, {"max.message.bytes": "2000", "cleanup.policy": "compact"}))[name].error_code == 0
    ok = incremental(wire, version, TOPIC, name, [("retention.ms", SET, "7200000"), ("max.message.bytes", DELETE, None),
                                                  ("cleanup.policy", APPEND, "delete")])
    assert ok.error_code == 0 and ok.error_message is None
    assert overrides(tidelog_module_broker, name) == {"retention.ms": "7200000", "cleanup.policy": "compact,delete"}
    lg = tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.log_config(name))
    assert lg.retention_ms == 7_200_000 and lg.max_message_bytes == 1_048_588 and lg.compact and lg.delete
    assert incremental(wire, version, TOPIC, name, [("cleanup.policy", SUBTRACT, "compact")]).error_code == 0
    assert overrides(tidelog_module_broker, name)["cleanup.policy"] == "delete"
    # validate_only and errors leave the overrides alone
    assert incremental(wire, version, TOPIC, name, [("retention.ms", SET, "1")], validate_only=True).error_code == 0
    assert incremental(wire, version, TOPIC, name, [("retention.ms", APPEND, "1")]).error_code == ErrorCode.INVALID_CONFIG
    assert incremental(wire, version, TOPIC, name, [("nope", SET, "1")]).error_code == ErrorCode.INVALID_CONFIG
    assert incremental(wire, version, TOPIC, name, [("segment.ms", SET, "-5")]).error_code == ErrorCode.INVALID_CONFIG
    dup = incremental(wire, version, TOPIC, name, [("retention.ms", SET, "5"), ("retention.ms", DELETE, None)])
    assert dup.error_code == ErrorCode.INVALID_REQUEST
    assert incremental(wire, version, TOPIC, name, [("retention.ms", 9, "5")]).error_code == ErrorCode.INVALID_REQUEST
    assert overrides(tidelog_module_broker, name) == {"retention.ms": "7200000", "cleanup.policy": "delete"}
    assert incremental(wire, version, TOPIC, "missing-topic", [("retention.ms", SET, "1")]).error_code == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )


@pytest.mark.parametrize("version", range(0, 3))
def test_alter_configs_replaces_override_set(tidelog_module_broker: BrokerHandle, wire: KafkaWire, version: int) -> None:
    name = f"alter-v{version}"
    assert create(wire, 7, (name, 1, 1, {"retention.ms": "1000", "cleanup.policy": "compact"}))[name].error_code == 0
    assert alter(wire, version, TOPIC, name, {"segment.ms": "60000"}).error_code == 0
    assert overrides(tidelog_module_broker, name) == {"segment.ms": "60000"}
    assert alter(wire, version, TOPIC, name, {"segment.ms": "1"}, validate_only=True).error_code == 0
    assert alter(wire, version, TOPIC, name, {"segment.ms": "x"}).error_code == ErrorCode.INVALID_CONFIG
    assert alter(wire, version, TOPIC, name, {"segment.ms": None}).error_code == ErrorCode.INVALID_REQUEST
    assert overrides(tidelog_module_broker, name) == {"segment.ms": "60000"}
    assert alter(wire, version, TOPIC, "missing-topic", {}).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_broker_dynamic_configs(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    node = str(tidelog_module_broker.state.node_id)
    static = incremental(wire, 1, BROKER, node, [("num.partitions", SET, "3")])
    assert static.error_code == ErrorCode.INVALID_REQUEST
    assert alter(wire, 2, BROKER, node, {"num.partitions": "3"}).error_code == ErrorCode.INVALID_REQUEST
    assert incremental(wire, 1, BROKER, "42", [("log.cleaner.backoff.ms", SET, "5")]).error_code == (
        ErrorCode.INVALID_REQUEST
    )
    assert incremental(wire, 1, BROKER, node, [("log.cleaner.backoff.ms", SET, "5000")]).error_code == 0
    assert tidelog_module_broker.call(lambda: tidelog_module_broker.state.config.log_cleaner_backoff_ms) == 5000
    entry = {c.name: c for c in describe(wire, 4, BROKER, node).configs}["log.cleaner.backoff.ms"]
    assert (entry.value, entry.config_source) == ("5000", 2)
    assert [(s.source, s.value) for s in entry.synonyms] == [(2, "5000"), (5, "15000")]
    assert incremental(wire, 1, BROKER, "", [("log.retention.ms", SET, "86400000")]).error_code == 0
    cluster = describe(wire, 4, BROKER, "")
    assert [(c.name, c.value, c.config_source) for c in cluster.configs] == [("log.retention.ms", "86400000", 3),
                                                                             ("min.insync.replicas", "1", 3)]
    retention = {c.name: c for c in describe(wire, 4, TOPIC, "create-v7").configs}["retention.ms"]
    assert (retention.value, retention.config_source) == ("86400000", 3)
    assert incremental(wire, 1, BROKER, node, [("log.cleaner.backoff.ms", APPEND, "1")]).error_code == (
        ErrorCode.INVALID_REQUEST  # ConfigAdminManager: append on a non-list broker config
    )
    assert incremental(wire, 1, BROKER, node, [("log.cleanup.policy", APPEND, "compact")]).error_code == 0
    assert tidelog_module_broker.call(lambda: tidelog_module_broker.state.config.get("log.cleanup.policy")) == ["delete", "compact"]
    assert incremental(wire, 1, BROKER, node, [("log.cleanup.policy", DELETE, None)]).error_code == 0
    assert incremental(wire, 1, BROKER, node, [("log.cleaner.backoff.ms", DELETE, None)]).error_code == 0
    assert incremental(wire, 1, BROKER, "", [("log.retention.ms", DELETE, None)]).error_code == 0
    assert tidelog_module_broker.call(lambda: tidelog_module_broker.state.config.log_cleaner_backoff_ms) == 15000


def test_broker_logger_levels(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    node = str(tidelog_module_broker.state.node_id)
    assert incremental(wire, 1, BROKER_LOGGER, node, [("tidelog.broker.topics", SET, "DEBUG")]).error_code == 0
    levels = {c.name: c.value for c in describe(wire, 4, BROKER_LOGGER, node, keys=["tidelog.broker.topics"]).configs}
    assert levels == {"tidelog.broker.topics": "DEBUG"}
    assert incremental(wire, 1, BROKER_LOGGER, node, [("tidelog.broker.topics", SET, "LOUD")]).error_code == (
        ErrorCode.INVALID_CONFIG
    )
    assert incremental(wire, 1, BROKER_LOGGER, node, [("tidelog.broker.topics", DELETE, None)]).error_code == 0
    assert alter(wire, 2, BROKER_LOGGER, node, {"tidelog.broker.topics": "INFO"}).error_code == ErrorCode.INVALID_REQUEST


def test_duplicate_resources_are_refused(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    assert create(wire, 7, ("dup-res", 1, 1, {}))["dup-res"].error_code == 0
    cls = request_class(44)
    res = cls.AlterConfigsResource
    one = res(resource_type=TOPIC, resource_name="dup-res",
              configs=[res.AlterableConfig(name="retention.ms", config_operation=SET, value="5")])
    responses = wire.request(44, 1, cls[1](resources=[one, one], validate_only=False)).responses
    assert [r.error_code for r in responses] == [ErrorCode.INVALID_REQUEST] * 2
    assert overrides(tidelog_module_broker, "dup-res") == {}


def test_too_many_partitions_per_request(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    results = create(wire, 7, ("huge-a", 6000, 1, {}), ("huge-b", 6000, 1, {}))
    assert [r.error_code for r in results.values()] == [ErrorCode.POLICY_VIOLATION] * 2
    assert tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.get("huge-a")) is None
