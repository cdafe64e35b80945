"""Java AdminClient 3.9.1 against the Kafka 4.3 parity work (issue #15): describeFeatures / updateFeatures /
describeMetadataQuorum get a 4.3 single-node KRaft cluster's answers, listOffsets with the tiered-storage specs
(ListOffsets v8/v9) answers as a node without tiered storage, and the client-quota admin calls round-trip."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest

from tests.java_drivers import compile_driver

from .conftest import JVM_FLAGS, ROOT, JavaClient

pytestmark = pytest.mark.java

SOURCE = ROOT / "tests" / "java" / "ParityAdmin.java"


@pytest.fixture(scope="module")
def parity_admin(java_client: JavaClient) -> str:
    """The compiled ParityAdmin driver's classpath (java_client has fetched the jars)."""
    classes = compile_driver(SOURCE, "java-parity-classes")
    return os.pathsep.join([str(classes), java_client.classpath])


def run(classpath: str, *args: str) -> dict[str, dict[str, Any]]:
    proc = subprocess.run(["java", *JVM_FLAGS, "-cp", classpath, "ParityAdmin", *args],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {d["step"]: d for d in (json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{"))}


def test_java_admin_features_and_quorum(tidelog_module_broker: Any, parity_admin: str) -> None:
    steps = run(parity_admin, "features", tidelog_module_broker.bootstrap)
    described = steps["describe_features"]
    assert described["supported"] == {"metadata.version": [7, 30], "kraft.version": [0, 1], "group.version": [0, 1],
                                      "eligible.leader.replicas.version": [0, 1], "share.version": [0, 1],
                                      "streams.version": [0, 1], "transaction.version": [0, 2]}
    assert described["finalized"] == {"metadata.version": [30, 30], "kraft.version": [1, 1],
                                      "group.version": [1, 1], "eligible.leader.replicas.version": [1, 1],
                                      "share.version": [1, 1], "streams.version": [1, 1],
                                      "transaction.version": [2, 2]}
    assert described["epoch"] >= 0
    too_new = steps["update_too_new"]["error"]
    assert too_new["class"] == "InvalidUpdateVersionException"
    assert "only supports versions" in too_new["message"]
    assert steps["update_same"]["error"] is None

    quorum = steps["quorum"]
    assert (quorum["leader_id"], quorum["leader_epoch"], quorum["observers"]) == (1, 1, 0)
    [voter] = quorum["voters"]
    assert voter["id"] == 1 and voter["leo"] == quorum["high_watermark"] >= 0
    assert voter["last_fetch"] > 0 and voter["last_caught_up"] == voter["last_fetch"]
    assert voter["directory"] != "AAAAAAAAAAAAAAAAAAAAAA"
    assert list(quorum["nodes"]) == ["1"] and str(tidelog_module_broker.port) in quorum["nodes"]["1"]


def test_java_admin_tiered_offset_specs(tidelog_module_broker: Any, parity_admin: str) -> None:
    from kafka import KafkaProducer

    tidelog_module_broker.create_topic("java-tiered-specs")
    producer = KafkaProducer(bootstrap_servers=tidelog_module_broker.bootstrap)
    for i in range(4):
        producer.send("java-tiered-specs", b"v%d" % i, partition=0)
    producer.flush()
    producer.close()
    offsets = run(parity_admin, "offsets", tidelog_module_broker.bootstrap, "java-tiered-specs")["offsets"]
    assert offsets["earliest"][0] == 0 and offsets["earliest_local"][0] == 0  # no tiered storage: log start
    assert offsets["latest_tiered"][0] == -1  # nothing tiered
    assert offsets["latest"][0] == 4


def test_java_admin_client_quotas(tidelog_module_broker: Any, parity_admin: str) -> None:
    steps = run(parity_admin, "quotas", tidelog_module_broker.bootstrap)
    assert steps["after_validate_only"]["quotas"] == []
    alice = [{"client-id": "app", "user": "alice"}, {"consumer_byte_rate": 2048.0, "producer_byte_rate": 1024.0}]
    default_client = [{"client-id": None}, {"request_percentage": 50.0}]
    assert sorted(steps["after_alter"]["quotas"], key=str) == sorted([alice, default_client], key=str)
    assert steps["exact"]["quotas"] == [alice]
    assert steps["unknown_key"]["error"]["class"] == "InvalidRequestException"
    after = steps["after_remove"]["quotas"]
    assert [{"client-id": "app", "user": "alice"}, {"consumer_byte_rate": 2048.0}] in after
