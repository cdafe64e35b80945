"""Metadata and DescribeCluster over real sockets and real clients (docs/PROTOCOL.md)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

METADATA = 3
DESCRIBE_CLUSTER = 60
OMITTED = None  # kafka-python decodes INT32_MIN ("not requested") as None
TOPIC_OPS = {3, 4, 5, 6, 7, 8, 10, 11}  # 3576
CLUSTER_OPS = {5, 7, 8, 9, 10, 11, 12}  # 8096


def metadata_request(version: int, names: list[str] | None, allow_create: bool = True,
                     topic_ops: bool = False, cluster_ops: bool = False, ids: list[uuid.UUID] | None = None) -> Any:
    cls = request_class(METADATA)
    topics: list[Any] | None
    if names is None and ids is None:
        topics = None
    else:
        topics = [cls.MetadataRequestTopic(name=n, topic_id=uuid.UUID(int=0)) for n in names or []]
        topics += [cls.MetadataRequestTopic(name=None, topic_id=i) for i in ids or []]
    fields: dict[str, Any] = {"topics": topics}
    if version >= 4:
        fields["allow_auto_topic_creation"] = allow_create
    if version >= 8:
        fields["include_topic_authorized_operations"] = topic_ops
    if 8 <= version <= 10:
        fields["include_cluster_authorized_operations"] = cluster_ops
    return cls[version](**fields)


def metadata(broker: BrokerHandle, version: int, names: list[str] | None, **kw: Any) -> Any:
    with KafkaWire(broker.bootstrap) as wire:
        return wire.request(METADATA, version, metadata_request(version, names, **kw))


def by_name(response: Any) -> dict[str, Any]:
    return {t.name: t for t in response.topics}


def create(broker: BrokerHandle, name: str, partitions: int = 1) -> Any:
    return broker.call(lambda: broker.state.topics.create_topic(name, partitions, 1, {}))


@pytest.mark.parametrize("version", [0, 1, 4, 7, 9, 10, 12])
def test_broker_and_partitions(tidelog_broker: BrokerHandle, version: int) -> None:
    create(tidelog_broker, "orders", 3)
    response = metadata(tidelog_broker, version, ["orders"])
    node = tidelog_broker.state.node_id
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(node, "127.0.0.1", tidelog_broker.port)]
    if version >= 1:
        assert response.controller_id == node
    if version >= 2:
        assert response.cluster_id == tidelog_broker.state.cluster_id and len(response.cluster_id) == 22
    topic = by_name(response)["orders"]
    assert topic.error_code == ErrorCode.NONE
    assert sorted(p.partition_index for p in topic.partitions) == [0, 1, 2]
    for p in topic.partitions:
        assert (p.error_code, p.leader_id, p.replica_nodes, p.isr_nodes) == (0, node, [node], [node])
        if version >= 7:
            assert p.leader_epoch == 0
    if version >= 10:
        assert topic.topic_id.bytes == tidelog_broker.state.topics.get("orders").topic_id
        assert topic.topic_id.int != 0


def test_all_topics_and_no_topics(tidelog_broker: BrokerHandle) -> None:
    create(tidelog_broker, "a")
    create(tidelog_broker, "b")
    assert set(by_name(metadata(tidelog_broker, 0, []))) == {"a", "b"}  # v0: empty list = all
    assert set(by_name(metadata(tidelog_broker, 1, None))) == {"a", "b"}  # v1+: null = all
    assert metadata(tidelog_broker, 1, []).topics == []  # v1+: empty = none
    assert set(by_name(metadata(tidelog_broker, 12, None))) == {"a", "b"}


@pytest.mark.parametrize("version", [1, 3, 4, 9, 12])
def test_auto_create_when_allowed(tidelog_broker: BrokerHandle, version: int) -> None:
    topic = by_name(metadata(tidelog_broker, version, ["fresh"]))["fresh"]
    assert topic.error_code == ErrorCode.NONE
    assert len(topic.partitions) == 1  # num.partitions
    assert tidelog_broker.state.topics.get("fresh") is not None


def test_request_flag_false_does_not_create(tidelog_broker: BrokerHandle) -> None:
    topic = by_name(metadata(tidelog_broker, 9, ["nope"], allow_create=False))["nope"]
    assert topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and topic.partitions == []
    assert tidelog_broker.state.topics.get("nope") is None


def test_all_topics_request_never_creates(tidelog_broker: BrokerHandle) -> None:
    metadata(tidelog_broker, 9, None, allow_create=True)
    assert tidelog_broker.state.topics.names() == []


def test_broker_option_off_does_not_create(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    broker = tidelog_broker_factory(overrides={"auto.create.topics.enable": "false"})
    for version in (1, 4, 12):  # v0-3 imply allow_auto_topic_creation=true, still refused
        topic = by_name(metadata(broker, version, ["off"]))["off"]
        assert topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.state.topics.get("off") is None


def test_auto_create_uses_num_partitions(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    broker = tidelog_broker_factory(overrides={"num.partitions": "4"})
    assert len(by_name(metadata(broker, 9, ["four"]))["four"].partitions) == 4


@pytest.mark.parametrize("name", ["bad/name", "..", "x" * 250, "spaced name"])
def test_invalid_names(tidelog_broker: BrokerHandle, name: str) -> None:
    topic = by_name(metadata(tidelog_broker, 9, [name]))[name]
    assert topic.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert tidelog_broker.state.topics.names() == []


def test_internal_topic_flag(tidelog_broker: BrokerHandle) -> None:
    topic = by_name(metadata(tidelog_broker, 9, ["__consumer_offsets"]))["__consumer_offsets"]
    assert topic.error_code == ErrorCode.NONE and topic.is_internal is True
    assert len(topic.partitions) == tidelog_broker.state.config.offsets_topic_num_partitions
    create(tidelog_broker, "plain")
    assert by_name(metadata(tidelog_broker, 1, ["plain"]))["plain"].is_internal is False


def test_lookup_by_topic_id_v12(tidelog_broker: BrokerHandle) -> None:
    info = create(tidelog_broker, "by-id", 2)
    known = uuid.UUID(bytes=info.topic_id)
    unknown = uuid.uuid4()
    response = metadata(tidelog_broker, 12, None, ids=[known, unknown])
    found = {t.topic_id: t for t in response.topics}
    assert found[known].name == "by-id" and found[known].error_code == 0 and len(found[known].partitions) == 2
    assert found[unknown].error_code == ErrorCode.UNKNOWN_TOPIC_ID and found[unknown].name is None


def test_authorized_operations(tidelog_broker: BrokerHandle) -> None:
    create(tidelog_broker, "ops")
    plain = metadata(tidelog_broker, 8, ["ops"])
    assert by_name(plain)["ops"].authorized_operations == OMITTED
    assert plain.authorized_operations == OMITTED
    asked = metadata(tidelog_broker, 10, ["ops"], topic_ops=True, cluster_ops=True)
    assert by_name(asked)["ops"].authorized_operations == TOPIC_OPS
    assert asked.authorized_operations == CLUSTER_OPS


def test_duplicate_names_answered_once(tidelog_broker: BrokerHandle) -> None:
    create(tidelog_broker, "dup")
    assert [t.name for t in metadata(tidelog_broker, 9, ["dup", "dup"]).topics] == ["dup"]


def test_cluster_id_is_stable_across_restarts(tmp_path: Any,
                                              tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    broker = tidelog_broker_factory(log_dir=tmp_path / "d")
    cluster_id = metadata(broker, 2, None).cluster_id
    broker.restart()  # a clean shutdown and a new start on the same log dir
    assert metadata(broker, 2, None).cluster_id == cluster_id


# --- DescribeCluster ---

@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster(tidelog_broker: BrokerHandle, version: int) -> None:
    cls = request_class(DESCRIBE_CLUSTER)[version]
    fields: dict[str, Any] = {"include_cluster_authorized_operations": True}
    if version >= 1:
        fields["endpoint_type"] = 1
    with KafkaWire(tidelog_broker.bootstrap) as wire:
        response = wire.request(DESCRIBE_CLUSTER, version, cls(**fields))
    state = tidelog_broker.state
    assert response.error_code == 0
    assert response.cluster_id == state.cluster_id and response.controller_id == state.node_id
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(state.node_id, "127.0.0.1",
                                                                         tidelog_broker.port)]
    assert response.authorized_operations == CLUSTER_OPS


def test_describe_cluster_controller_endpoint_mismatch(tidelog_broker: BrokerHandle) -> None:
    cls = request_class(DESCRIBE_CLUSTER)[1]
    with KafkaWire(tidelog_broker.bootstrap) as wire:
        response = wire.request(DESCRIBE_CLUSTER, 1, cls(include_cluster_authorized_operations=False,
                                                         endpoint_type=2))
    assert response.error_code == 114  # MISMATCHED_ENDPOINT_TYPE


# --- real clients ---

@pytest.mark.kcat
def test_kcat_lists_metadata(tidelog_broker: BrokerHandle) -> None:
    create(tidelog_broker, "kcat-topic", 2)
    out = subprocess.run(["kcat", "-b", tidelog_broker.bootstrap, "-L", "-m", "60"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"broker 1 at 127.0.0.1:{tidelog_broker.port} (controller)" in out.stdout
    assert 'topic "kcat-topic" with 2 partitions' in out.stdout
    assert "partition 1, leader 1, replicas: 1, isrs: 1" in out.stdout


def test_confluent_lists_topics(tidelog_broker: BrokerHandle) -> None:
    from confluent_kafka.admin import AdminClient

    create(tidelog_broker, "ck")
    md = AdminClient({"bootstrap.servers": tidelog_broker.bootstrap}).list_topics(timeout=60)
    assert "ck" in md.topics and md.cluster_id == tidelog_broker.state.cluster_id
    assert md.controller_id == 1 and list(md.brokers) == [1]


def test_kafka_python_lists_topics_and_describes_cluster(tidelog_broker: BrokerHandle) -> None:
    from kafka import KafkaAdminClient

    create(tidelog_broker, "kp")
    admin = KafkaAdminClient(bootstrap_servers=tidelog_broker.bootstrap, request_timeout_ms=60000)
    try:
        assert "kp" in admin.list_topics()
        cluster = admin.describe_cluster()
        assert cluster["cluster_id"] == tidelog_broker.state.cluster_id and cluster["controller_id"] == 1
    finally:
        admin.close()


def test_kafka_python_producer_auto_creates(tidelog_broker: BrokerHandle) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=tidelog_broker.bootstrap, request_timeout_ms=60000,
                             max_block_ms=60000)
    try:
        assert producer.partitions_for("kp-auto") == {0}
        assert tidelog_broker.state.topics.get("kp-auto") is not None
    finally:
        producer.close()


def test_aiokafka_lists_topics(tidelog_broker: BrokerHandle) -> None:
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient

    create(tidelog_broker, "aio")

    async def run() -> list[str]:
        admin = AIOKafkaAdminClient(bootstrap_servers=tidelog_broker.bootstrap, request_timeout_ms=60000)
        await admin.start()
        try:
            return list(await admin.list_topics())
        finally:
            await admin.close()

    assert "aio" in asyncio.run(run())


def test_each_listener_advertises_its_own_endpoint(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """Kafka answers Metadata with the advertised endpoint of the listener the request came in on (the
    usual docker setup: INTERNAL for containers, EXTERNAL for the host)."""
    broker = tidelog_broker_factory(overrides={
        "listeners": "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        "advertised.listeners": "PLAINTEXT://127.0.0.1:0,EXTERNAL://broker.example:19092",
    })
    external_port = broker.server.ports["EXTERNAL"]
    assert external_port not in (0, broker.port)
    internal = metadata(broker, 1, None)
    assert [(b.host, b.port) for b in internal.brokers] == [("127.0.0.1", broker.port)]
    with KafkaWire(f"127.0.0.1:{external_port}") as wire:
        external = wire.request(METADATA, 1, metadata_request(1, None))
        cluster = wire.request(DESCRIBE_CLUSTER, 0, request_class(DESCRIBE_CLUSTER)[0](
            include_cluster_authorized_operations=False))
    assert [(b.host, b.port) for b in external.brokers] == [("broker.example", 19092)]
    assert [(b.host, b.port) for b in cluster.brokers] == [("broker.example", 19092)]
