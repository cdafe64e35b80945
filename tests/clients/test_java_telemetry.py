"""The Java client (3.9.1) against KIP-714: the admin creates a CLIENT_METRICS subscription and lists it as
kafka-client-metrics.sh does; a producer with telemetry on pushes metrics that appear on /metrics."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from typing import Any

import pytest

from tests.java_drivers import compile_driver
from tidelog.testing import BrokerHandle

from .conftest import JAR_DIR, JVM_FLAGS, ROOT

SRC = ROOT / "tests" / "java" / "ClientMetrics.java"
JARS = ["kafka-clients.jar", "slf4j-api.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar"]


def classpath() -> str:
    classes = compile_driver(SRC, "java-client-metrics")
    return os.pathsep.join([str(classes), *(str(JAR_DIR / j) for j in JARS)])


@pytest.mark.java
@pytest.mark.slow
@pytest.mark.tidelog(overrides={"metrics.port": 0}, topics={"java-telemetry": 1})
def test_java_producer_pushes_metrics(java_client: Any, tidelog_broker: BrokerHandle) -> None:
    del java_client  # the fixture checks java/javac and fetches the jars
    broker = tidelog_broker
    cmd = ["java", *JVM_FLAGS, "-cp", classpath(), "ClientMetrics", broker.bootstrap, "java-telemetry", "6000"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert "resource java-producers" in lines
    [instance] = [line.split(" ", 1)[1] for line in lines if line.startswith("instance ")]
    metrics = broker.state.metrics
    deadline = time.monotonic() + 30
    while metrics.http_port is None and time.monotonic() < deadline:
        time.sleep(0.1)
    body = urllib.request.urlopen(f"http://127.0.0.1:{metrics.http_port}/metrics", timeout=30).read().decode()
    pushed = [x for x in body.splitlines() if x.startswith("tidelog_client_org_apache_kafka_producer_")]
    assert pushed, "the Java producer pushed no metrics"
    assert all(f'client_instance_id="{instance}"' in x and 'client_id="java-telemetry"' in x for x in pushed)
