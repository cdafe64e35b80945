"""Fixtures for the real-client suites (the broker is the plugin's `tidelog_module_broker`, one per module;
topics come from its `create_topic`): the compiled Java driver and the kcat binary."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.java_drivers import compile_driver

ROOT = Path(__file__).resolve().parents[2]
JAVA_SRC = ROOT / "tests" / "java" / "TidelogClient.java"
CACHE = Path(os.environ.get("TIDELOG_CACHE_DIR", ROOT / ".cache"))
JAR_DIR = CACHE / "java"
# Small heap, serial GC and C1 only: the JVM shares 2 cores with the broker and the other suites.
JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx512m", "-Xshare:auto"]


class JavaClient:
    """Runs tests/java/TidelogClient.java subcommands and parses their JSON-lines output."""

    def __init__(self, classpath: str) -> None:
        self.classpath = classpath

    def run(self, *args: str, timeout: float = 240) -> list[dict[str, Any]]:
        cmd = ["java", *JVM_FLAGS, "-cp", self.classpath, "TidelogClient", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode != 0:
            raise AssertionError(
                f"java {args[0]} exited {proc.returncode}: {lines[-1:] or ''}\n{proc.stderr[-3000:]}"
            )
        return lines


@pytest.fixture(scope="session")
def java_client() -> JavaClient:
    if not (shutil.which("java") and shutil.which("javac")):
        pytest.skip("Java 17 (java and javac) is not installed; `make test` checks for it")
    jars = ["kafka-clients.jar", "slf4j-api.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar"]
    if not all((JAR_DIR / j).is_file() for j in jars):
        # Idempotent: downloads the wheel once into .cache/ and extracts the jars.
        subprocess.run([str(ROOT / "scripts" / "fetch_java_client.sh")], check=True, timeout=900)
    classes = compile_driver(JAVA_SRC, "java-classes")
    classpath = os.pathsep.join([str(classes), *(str(JAR_DIR / j) for j in jars)])
    return JavaClient(classpath)


@pytest.fixture(scope="session")
def kcat() -> str:
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        pytest.skip("kcat is not installed (apt-get install kcat); `make test` checks for it")
    return path
