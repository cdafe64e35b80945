"""Java AdminClient 3.9.1 under a controller_mutation_rate quota (KIP-599, Kafka's ControllerMutationQuotaManager):
createTopics (CreateTopics v7, strict) gets ThrottlingQuotaExceededException for the topic beyond the token
bucket, and with retryOnQuotaViolation (the default) the client retries it to success; an unquota'd client-id
beside it creates freely."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest

from tests.java_drivers import compile_driver
from tidelog.testing import BrokerHandle, KafkaWire

from .conftest import JVM_FLAGS, ROOT, JavaClient

SOURCE = ROOT / "tests" / "java" / "MutationQuotaAdmin.java"


@pytest.fixture(scope="module")
def mutation_admin(java_client: JavaClient) -> str:
    classes = compile_driver(SOURCE, "java-mutation-quota-classes")
    return os.pathsep.join([str(classes), java_client.classpath])


# 2 samples of 1 s: a burst of quota * 2 partitions.
pytestmark = [pytest.mark.java, pytest.mark.tidelog(overrides={"quota.window.num": 2, "quota.window.size.seconds": 1})]


def set_mutation_rate(bootstrap: str, client_id: str, rate: float) -> None:
    with KafkaWire(bootstrap) as wire:
        wire.alter_client_quota("client-id", client_id, "controller_mutation_rate", rate)


def run(classpath: str, *args: str) -> dict[str, dict[str, Any]]:
    proc = subprocess.run(["java", *JVM_FLAGS, "-cp", classpath, "MutationQuotaAdmin", *args],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {d["step"]: d for d in (json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{"))}


def test_java_admin_create_topics_under_a_mutation_quota(tidelog_module_broker: BrokerHandle, mutation_admin: str) -> None:
    bootstrap = tidelog_module_broker.bootstrap
    set_mutation_rate(bootstrap, "java-mutator", 1.0)  # 1 partition/s, a burst of 2
    steps = run(mutation_admin, "strict", bootstrap, "java-mutator", "jmq")
    strict = steps["strict"]["topics"]
    # a (1 partition) and b (2) fit while the bucket is not below zero (b takes it to -1); c is refused
    assert strict["jmq-a"] == {"error": None} and strict["jmq-b"] == {"error": None}
    refused = strict["jmq-c"]
    assert refused["error"] == "ThrottlingQuotaExceededException", refused
    assert refused["message"] == "The throttling quota has been exceeded."
    assert 0 < refused["throttle_time_ms"] <= 1000
    # retryOnQuotaViolation: four 1-partition topics cannot all pass a bucket of at most 2 tokens (the 4th meets
    # it below zero), so one is refused on the first try; the client retries it after its throttle time
    assert steps["retry"]["topics"] == {f"jmq-{t}": {"error": None} for t in "defg"}
    topics = tidelog_module_broker.state.topics
    assert all(topics.get(f"jmq-{t}") is not None for t in "abdefg") and topics.get("jmq-c") is None
    mutation = tidelog_module_broker.state.quotas.mutation
    # the broker muted the client for the mutation quota: for c, and for the first try of d..g
    assert mutation.throttle_count[("", "java-mutator")] >= 2

    # beside it, an unquota'd client-id creates 30 partitions at once and is never throttled
    free = run(mutation_admin, "many", bootstrap, "java-free", "jfree", "10")["many"]["topics"]
    assert free == {f"jfree-{i}": {"error": None} for i in range(10)}
    assert ("", "java-free") not in mutation.throttle_count
