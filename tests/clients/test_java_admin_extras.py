"""The Java AdminClient (3.9.1) and kafka-python's admin against the admin APIs tools call beyond topics and
configs: describeLogDirs, describeProducers, listPartitionReassignments, alterPartitionReassignments,
electLeaders, describeTopics (paged DescribeTopicPartitions) and describeConsumerGroups of a KIP-848 group.
Each answer is what a single-node Kafka gives."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from tests.java_drivers import compile_driver
from tidelog.protocol.messages import request_class
from tidelog.storage import TopicPartition
from tidelog.testing import BrokerHandle, KafkaWire

from .conftest import JAR_DIR, JVM_FLAGS, ROOT

SRC = ROOT / "tests" / "java" / "AdminExtras.java"
JARS = ["kafka-clients.jar", "slf4j-api.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar"]


def classpath(java_client: Any) -> str:
    del java_client  # the fixture checks java/javac and fetches the jars
    classes = compile_driver(SRC, "java-admin-extras")
    return os.pathsep.join([str(classes), *(str(JAR_DIR / j) for j in JARS)])


def setup_topic(bootstrap: str, topic: str) -> None:
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 5, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    for i in range(5):
        producer.send(topic, value=b"x%d" % i, partition=0)
    producer.flush()
    producer.close()


def join_consumer_group(bootstrap: str, group: str, topic: str) -> str:
    cls = request_class(68)[0]
    with KafkaWire(bootstrap) as w:
        r = w.request(68, 0, cls(group_id=group, member_id="", member_epoch=0, instance_id=None, rack_id=None,
                                 rebalance_timeout_ms=60000, subscribed_topic_names=[topic], server_assignor=None,
                                 topic_partitions=[]))
        assert r.error_code == 0
        return str(r.member_id)


@pytest.mark.java
def test_java_admin_extras(tidelog_module_broker: Any, java_client: Any) -> None:
    topic, group = "admin-extras", "admin-extras-848"
    setup_topic(tidelog_module_broker.bootstrap, topic)
    member = join_consumer_group(tidelog_module_broker.bootstrap, group, topic)
    cmd = ["java", *JVM_FLAGS, "-cp", classpath(java_client), "AdminExtras", tidelog_module_broker.bootstrap, topic, group]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = {d["step"]: d for d in (json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{"))}
    [d] = steps["log_dirs"]["dirs"]
    assert d["path"] == str(tidelog_module_broker.state.log_manager.log_dirs[0]) and d["error"] is None
    assert d["total"] > 0 and 0 <= d["usable"] <= d["total"]
    size0 = tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.log(TopicPartition(topic, 0)).size_in_bytes())
    assert d["replicas"]["0"] == [size0, 0, False] and sorted(d["replicas"]) == ["0", "1", "2", "3", "4"]
    [producer] = steps["producers"]["producers"]
    assert producer["id"] >= 0 and producer["epoch"] == 0 and producer["last_sequence"] == 4
    assert producer["txn_start"] == -1
    assert steps["list_reassignments"]["count"] == 0
    # the target of only this node is a no-op; another broker id is not registered
    assert steps["alter_reassignments"] == {"step": "alter_reassignments", "p0": None,
                                            "p1": "InvalidReplicaAssignmentException"}
    assert steps["elect"]["p0"] == steps["elect"]["p1"] == "ElectionNotNeededException"
    assert steps["elect_all"]["count"] == 0
    described = steps["describe_topic"]
    node = tidelog_module_broker.state.node_id
    assert described["partitions"] == [[p, node, 1, 1] for p in range(5)] and described["internal"] is False
    cg = steps["consumer_group"]
    assert (cg["type"], cg["state"], cg["assignor"]) == ("Consumer", "Stable", "uniform")
    assert cg["members"] == [{"id": member, "partitions": [0, 1, 2, 3, 4]}]


def test_kafka_python_describe_log_dirs(tidelog_module_broker: Any) -> None:
    from kafka import KafkaAdminClient

    setup_topic(tidelog_module_broker.bootstrap, "kp-log-dirs")
    admin = KafkaAdminClient(bootstrap_servers=tidelog_module_broker.bootstrap)
    try:
        response = admin.describe_log_dirs()
    finally:
        admin.close()
    [per_broker] = response
    assert per_broker["broker"] == tidelog_module_broker.state.node_id
    [result] = per_broker["log_dirs"]
    assert result["error_code"] == 0 and result["log_dir"] == str(tidelog_module_broker.state.log_manager.log_dirs[0])
    assert 0 <= result["usable_bytes"] <= result["total_bytes"]
    topics = {t["name"]: {p["partition_index"]: p["partition_size"] for p in t["partitions"]} for t in result["topics"]}
    assert sorted(topics["kp-log-dirs"]) == [0, 1, 2, 3, 4]
    assert topics["kp-log-dirs"][0] == tidelog_module_broker.call(
        lambda: tidelog_module_broker.state.topics.log(TopicPartition("kp-log-dirs", 0)).size_in_bytes())


MOVE_SRC = ROOT / "tests" / "java" / "LogDirsMove.java"


def move_classpath(java_client: Any) -> str:
    del java_client
    classes = compile_driver(MOVE_SRC, "java-log-dirs-move")
    return os.pathsep.join([str(classes), *(str(JAR_DIR / j) for j in JARS)])


@pytest.mark.java
@pytest.mark.slow
def test_java_admin_moves_partition_between_log_dirs(tmp_path: Any, java_client: Any,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """alterReplicaLogDirs moves a partition online (kafka-python producing meanwhile); describeLogDirs and
    describeReplicaLogDirs show it in the new dir; every record reads back, also after a restart."""
    import threading

    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient, NewTopic


    topic = "java-moving"
    a, b = tmp_path / "a", tmp_path / "b"
    overrides = {"log.dirs": f"{a},{b}"}

    def produce(bootstrap: str, start: int, count: int) -> None:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20, enable_idempotence=True)
        for i in range(start, start + count):
            producer.send(topic, value=b"r%05d" % i + b"." * 300, partition=0)
            if i % 20 == 0:
                producer.flush(60)
        producer.flush(60)
        producer.close()

    def consume(bootstrap: str) -> list[bytes]:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
        consumer.assign([KTP(topic, 0)])
        consumer.seek_to_beginning(KTP(topic, 0))
        values = [m.value[:6] for m in consumer]
        consumer.close()
        return values

    broker = tidelog_broker_factory(tmp_path / "unused", overrides=overrides)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, 2, 1, topic_configs={"segment.bytes": "50000"})])
    admin.close()
    produce(broker.bootstrap, 0, 1000)
    source = broker.state.log_manager.log_dir_of(TopicPartition(topic, 0))
    target = str(b if source == a else a)
    during = threading.Thread(target=produce, args=(broker.bootstrap, 1000, 500))
    during.start()
    cmd = ["java", *JVM_FLAGS, "-cp", move_classpath(java_client), "LogDirsMove", broker.bootstrap, topic,
           target, str(tmp_path / "not-a-log-dir")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    during.join(120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = {d["step"]: d for d in (json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{"))}
    assert [r[0] for r in steps["before"]["dirs"][str(source)]].count(f"{topic}-0") == 1
    assert steps["alter"] == {"step": "alter", "p0": None, "p1": "LogDirNotFoundException"}
    assert steps["replica"]["current"] == target and steps["replica"]["future"] is None
    after = steps["after"]["dirs"]
    assert f"{topic}-0" in [r[0] for r in after[target]] and not any(r[2] for rs in after.values() for r in rs)
    assert f"{topic}-0" not in [r[0] for r in after[str(source)]]
    produce(broker.bootstrap, 1500, 100)  # after the move
    assert consume(broker.bootstrap) == [b"r%05d" % i for i in range(1600)]
    broker.restart()
    assert str(broker.state.log_manager.log_dir_of(TopicPartition(topic, 0))) == target
    assert consume(broker.bootstrap) == [b"r%05d" % i for i in range(1600)]
