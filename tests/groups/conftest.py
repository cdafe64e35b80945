"""Fixtures for the consumer-group client suites: the module's broker (`tidelog_module_broker`) with no initial
rebalance delay, member processes (Python clients via tests/groups/member.py, Java via
tests/java/GroupClient.java), a produce helper."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.java_drivers import compile_driver
from tidelog.testing import BrokerHandle

ROOT = Path(__file__).resolve().parents[2]
MEMBER_SCRIPT = Path(__file__).with_name("member.py")
JAVA_SRC = ROOT / "tests" / "java" / "GroupClient.java"
CACHE = Path(os.environ.get("TIDELOG_CACHE_DIR", ROOT / ".cache"))
JAR_DIR = CACHE / "java"
JARS = ["kafka-clients.jar", "slf4j-api.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar"]
JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-Xshare:auto"]
GROUP_OVERRIDES = {"group.initial.rebalance.delay.ms": 0}
WAIT_S = 180.0  # generous: the machine is small and shared


@pytest.fixture(scope="module")
def tidelog_broker_overrides() -> dict[str, Any]:
    """The settings of `tidelog_module_broker` in these suites."""
    return GROUP_OVERRIDES


def produce(broker: BrokerHandle, topic: str, start: int, count: int, partitions: int) -> None:
    """Record i: key "k-i", value "v-i" to partition i % partitions (one batch per partition, acks=all)."""
    for p in range(partitions):
        broker.produce(topic, [(b"k-%d" % i, b"v-%d" % i) for i in range(start, start + count) if i % partitions == p],
                       partition=p)


class Member:
    """A group member process printing JSON lines (assigned / record / commit / closed)."""

    def __init__(self, cmd: list[str], name: str) -> None:
        self.name = name
        self.events: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     text=True, cwd=ROOT)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            event["t"] = time.monotonic()  # when it was seen: orders records across members
            with self._cond:
                self.events.append(event)
                self._cond.notify_all()
        with self._cond:
            self.events.append({"exited": True})
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[Member], bool], what: str, timeout: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0 or (self.events and "exited" in self.events[-1] and not predicate(self)):
                    raise AssertionError(f"{self.name}: timed out waiting for {what}; last events "
                                         f"{self.events[-5:]}; stderr: {self.stderr()[-2000:]}")
                self._cond.wait(min(left, 1.0))

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()

    @property
    def assignment(self) -> list[int] | None:
        with self._cond:
            for e in reversed(self.events):
                if "assigned" in e:
                    return list(e["assigned"])
        return None

    def assignment_events(self) -> int:
        with self._cond:
            return sum(1 for e in self.events if "assigned" in e)

    def records(self) -> list[tuple[int, int, str]]:
        with self._cond:
            return [(e["p"], e["o"], e["v"]) for e in self.events if "v" in e]

    def timed_records(self) -> list[tuple[float, int, int, str]]:
        """(seen at, partition, offset, value) per record, in the order this member read them."""
        with self._cond:
            return [(e["t"], e["p"], e["o"], e["v"]) for e in self.events if "v" in e]

    def committed(self) -> int:
        with self._cond:
            return sum(e["commit"] for e in self.events if "commit" in e)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("close\n")
            self.proc.stdin.flush()
        self.wait_for(lambda m: any("closed" in e for e in m.events), "clean close")
        self.proc.wait(timeout=WAIT_S)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=60)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=60)
        self._stderr.close()


@pytest.fixture(scope="session")
def java_classpath() -> str:
    if not (shutil.which("java") and shutil.which("javac")):
        pytest.skip("Java 17 (java and javac) is not installed")
    if not all((JAR_DIR / j).is_file() for j in JARS):
        script = ROOT / "scripts" / "fetch_java_client.sh"
        if not script.is_file():
            pytest.skip("Kafka Java client jars are not available")
        subprocess.run([str(script)], check=True, timeout=900)
    classes = compile_driver(JAVA_SRC, "java-groups")
    return os.pathsep.join([str(classes), *(str(JAR_DIR / j) for j in JARS)])


def java_cmd(classpath: str, *args: str) -> list[str]:
    return ["java", *JVM_FLAGS, "-cp", classpath, "GroupClient", *args]


def run_java(classpath: str, *args: str, timeout: float = 240) -> list[dict[str, Any]]:
    proc = subprocess.run(java_cmd(classpath, *args), capture_output=True, text=True, timeout=timeout)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        raise AssertionError(f"GroupClient {args[0]} exited {proc.returncode}: {lines[-3:]}\n{proc.stderr[-3000:]}")
    return lines


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for m in started:
        m.stop()


def python_member(client: str, bootstrap: str, topic: str, group: str, seconds: int = 400) -> list[str]:
    return [sys.executable, str(MEMBER_SCRIPT), client, bootstrap, topic, group, str(seconds)]
