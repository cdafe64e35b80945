"""The pytest plugin as a user's project meets it: a separate `python -m pytest` run (so the warning filters,
xdist workers and pytest-asyncio are those of that session) over a small suite that uses every fixture, under
`-W error`, `filterwarnings = error`, `-n 2`, and pytest-asyncio. Its conftest records what was left behind at
the very end of the session (threads, listening ports, temporary directories) and the outer test checks it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = '''
import json, os, threading

import pytest

PORTS = []

# The last sessionfinish: every fixture is torn down, and an xdist worker has not yet told the controller it is
# done (at pytest_unconfigure the controller may already have exited, or killed a slow worker).
@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    threads = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    with open(os.path.join(os.environ["LEFTOVER_DIR"], worker + ".json"), "w") as f:
        json.dump({"threads": threads, "ports": PORTS}, f)
'''

USER_TESTS = '''
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition   # imported at collection, under -W error
from confluent_kafka import Producer

from conftest import PORTS


def test_function_broker_round_trip(tidelog_broker, tidelog_bootstrap):
    PORTS.append(tidelog_broker.port)
    p = KafkaProducer(bootstrap_servers=tidelog_bootstrap)
    p.send("t", key=b"k", value=b"v", headers=[("h", b"1")]).get(30)
    p.close()
    [r] = tidelog_broker.wait_for_records("t", 1)
    assert (r.key, r.value, r.headers, r.offset) == (b"k", b"v", (("h", b"1"),), 0)


@pytest.mark.tidelog(overrides={"auto.create.topics.enable": False}, topics={"orders": 3})
def test_marker_configures_the_broker(tidelog_broker):
    PORTS.append(tidelog_broker.port)
    assert tidelog_broker.state.topics.get("orders").partitions == 3
    assert tidelog_broker.state.topics.get("other") is None
    p = Producer({"bootstrap.servers": tidelog_broker.bootstrap})
    p.produce("orders", b"x", partition=2)
    assert p.flush(30) == 0
    assert [(r.partition, r.value) for r in tidelog_broker.records("orders")] == [(2, b"x")]


def test_injected_error_is_retried(tidelog_broker):
    PORTS.append(tidelog_broker.port)
    tidelog_broker.inject_errors("Produce", ["NOT_LEADER_OR_FOLLOWER"])
    p = KafkaProducer(bootstrap_servers=tidelog_broker.bootstrap, retry_backoff_ms=50)
    p.send("t", b"v").get(30)
    p.close()
    assert len(tidelog_broker.records("t")) == 1


def test_factory_and_restart(tidelog_broker_factory, tmp_path):
    # confluent-kafka across the restart: kafka-python 3.0 leaves the socket of a refused connect unclosed
    # (KafkaNetSocket.sock_connect), which -W error turns into a failure whenever it retries while the port is shut.
    b = tidelog_broker_factory(log_dir=tmp_path / "kept")
    PORTS.append(b.port)
    b.create_topic("r", 1)
    p = Producer({"bootstrap.servers": b.bootstrap, "reconnect.backoff.ms": 50})
    p.produce("r", b"1")
    assert p.flush(30) == 0
    b.restart()
    p.produce("r", b"2")
    assert p.flush(30) == 0
    assert [r.value for r in b.records("r")] == [b"1", b"2"]


@pytest.mark.tidelog(partitions=2)
def test_session_topic_one(tidelog_session_broker, tidelog_topic):
    PORTS.append(tidelog_session_broker.port)
    assert tidelog_session_broker.state.topics.get(tidelog_topic).partitions == 2
    tidelog_session_broker.inject_errors("Produce", ["NOT_LEADER_OR_FOLLOWER"] * 3)   # cleared at teardown
    p = KafkaProducer(bootstrap_servers=tidelog_session_broker.bootstrap, retry_backoff_ms=50)
    p.send(tidelog_topic, b"a", partition=1).get(30)
    p.close()


def test_session_topic_two(tidelog_session_broker, tidelog_topic):
    PORTS.append(tidelog_session_broker.port)
    assert not tidelog_session_broker.faults.armed
    assert tidelog_session_broker.records(tidelog_topic) == []   # a fresh topic per test
    c = KafkaConsumer(bootstrap_servers=tidelog_session_broker.bootstrap, group_id="grp",
                      enable_auto_commit=False)
    c.assign([TopicPartition(tidelog_topic, 0)])
    c.commit({TopicPartition(tidelog_topic, 0): __import__("kafka").OffsetAndMetadata(0, "", -1)})
    c.close()
    assert tidelog_session_broker.committed_offsets("grp") == {(tidelog_topic, 0): 0}
'''

ASYNC_TESTS = '''
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tidelog.testing import async_run_broker
from conftest import PORTS


@pytest.mark.asyncio
async def test_aiokafka_with_the_fixture(tidelog_broker):
    PORTS.append(tidelog_broker.port)
    p = AIOKafkaProducer(bootstrap_servers=tidelog_broker.bootstrap)
    await p.start()
    try:
        await p.send_and_wait("a", b"v")
    finally:
        await p.stop()
    assert [r.value for r in tidelog_broker.records("a")] == [b"v"]


@pytest.mark.asyncio
async def test_async_context_manager():
    async with async_run_broker(topics={"a": 1}) as broker:
        PORTS.append(broker.port)
        broker.inject_errors("Fetch", ["NOT_LEADER_OR_FOLLOWER"])
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await p.start()
        await p.send_and_wait("a", b"v")
        await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
        await c.start()
        try:
            c.assign([TopicPartition("a", 0)])
            assert (await c.getone()).value == b"v"
        finally:
            await c.stop()
'''


def run_suite(tmp_path: Path, *args: str, ini: str = "") -> tuple[subprocess.CompletedProcess[str], list[Any]]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (project / "test_user.py").write_text(textwrap.dedent(USER_TESTS))
    (project / "test_async.py").write_text(textwrap.dedent(ASYNC_TESTS))
    (project / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n" + ini)
    leftovers, temp = tmp_path / "leftovers", tmp_path / "tmp"
    leftovers.mkdir()
    temp.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(project)]), "LEFTOVER_DIR": str(leftovers),
           "TMPDIR": str(temp)}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "--basetemp", str(tmp_path / "basetemp"), *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    reports = [json.loads(p.read_text()) for p in sorted(leftovers.glob("*.json"))]
    assert not list(temp.iterdir()), "temporary broker directories left behind"
    for report in reports:
        # execnet's I/O thread belongs to xdist; nothing of ours (broker loop, warm-up, executor) may remain
        assert [t for t in report["threads"] if "execnet" not in t] == [], report["threads"]
        for port in set(report["ports"]):
            with pytest.raises(ConnectionRefusedError):  # nothing listens there any more
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
            with socket.socket() as s:  # and the port can be listened on again (closed connections linger)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", port))
                s.listen()
    return proc, reports


@pytest.mark.slow
def test_plugin_under_warnings_as_errors(tmp_path: Path) -> None:
    proc, reports = run_suite(tmp_path, "-W", "error")
    assert "8 passed" in proc.stdout and "warning" not in proc.stdout.lower()
    assert len(reports) == 1 and len(reports[0]["ports"]) == 8


@pytest.mark.slow
def test_plugin_with_filterwarnings_error_in_the_ini(tmp_path: Path) -> None:
    proc, _ = run_suite(tmp_path, ini="filterwarnings =\n    error\n")
    assert "8 passed" in proc.stdout


@pytest.mark.slow
def test_plugin_under_xdist_with_two_workers(tmp_path: Path) -> None:
    proc, reports = run_suite(tmp_path, "-W", "error", "-n", "2")
    assert "8 passed" in proc.stdout
    workers = [r for r in reports if r["ports"]]
    assert len(workers) == 2  # both workers ran broker tests, each with its own brokers
    assert len(reports) == 3  # the controller's report and one per worker


@pytest.mark.slow
def test_plugin_with_pytest_asyncio_auto_mode(tmp_path: Path) -> None:
    proc, _ = run_suite(tmp_path, "-W", "error", "test_async.py", ini="asyncio_mode = auto\n")
    assert "2 passed" in proc.stdout
