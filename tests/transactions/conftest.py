"""The compiled Java transaction driver (tests/java/TxnClient.java), built like the other Java drivers."""

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
JAVA_SRC = ROOT / "tests" / "java" / "TxnClient.java"
CACHE = Path(os.environ.get("TIDELOG_CACHE_DIR", ROOT / ".cache"))
JAR_DIR = CACHE / "java"
JARS = ["kafka-clients.jar", "slf4j-api.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar"]
JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-Xshare:auto"]


class TxnJava:
    def __init__(self, classpath: str) -> None:
        self.classpath = classpath

    def run(self, *args: str, timeout: float = 240) -> list[dict[str, Any]]:
        cmd = ["java", *JVM_FLAGS, "-cp", self.classpath, "TxnClient", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode != 0:
            raise AssertionError(f"java {args[0]} exited {proc.returncode}: {lines[-1:]}\n{proc.stderr[-3000:]}")
        return lines


@pytest.fixture(scope="session")
def txn_java() -> TxnJava:
    if not (shutil.which("java") and shutil.which("javac")):
        pytest.skip("Java 17 (java and javac) is not installed; `make test` checks for it")
    if not all((JAR_DIR / j).is_file() for j in JARS):
        subprocess.run([str(ROOT / "scripts" / "fetch_java_client.sh")], check=True, timeout=900)
    classes = compile_driver(JAVA_SRC, "java-txn-classes")
    return TxnJava(os.pathsep.join([str(classes), *(str(JAR_DIR / j) for j in JARS)]))
