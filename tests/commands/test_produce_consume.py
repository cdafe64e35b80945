"""`tidelog produce` and `tidelog consume` against a real broker: records produced by the command are read by
confluent-kafka, records produced by kafka-python are printed by the command (format strings, JSON lines, start
positions, -n, -e)."""

from __future__ import annotations

import os
import pty
import selectors
import subprocess
import time
from typing import Any

from tests.commands.conftest import command, json_lines, tidelog, unique
from tidelog.testing import BrokerHandle


def _read_with_confluent(bootstrap: str, topic: str, count: int) -> list[Any]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("verify"), "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen = []
    try:
        for _ in range(300):
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen.append(msg)
            if len(seen) >= count:
                break
    finally:
        consumer.close()
    return sorted(seen, key=lambda m: (m.partition(), m.offset()))


def test_produced_records_reach_another_client(tidelog_session_broker: BrokerHandle) -> None:
    bootstrap = tidelog_session_broker.bootstrap
    topic = unique("cli-produce")
    tidelog_session_broker.create_topic(topic, {"partitions": 1, "configs": {}})
    lines = "user-1:hello\nuser-2:wörld\nno-key-here\n"
    out = tidelog("produce", topic, "-K", ":", "-H", "source=cli", "-H", "trace=42", "--format", "json",
                  "-z", "lz4", bootstrap=bootstrap, stdin=lines)
    assert out.returncode == 0, out.stderr
    acks = json_lines(out.stdout)
    assert [(a["topic"], a["partition"], a["offset"]) for a in acks] == [(topic, 0, 0), (topic, 0, 1), (topic, 0, 2)]
    # -v values, a fixed key, and -Z: the empty value is a tombstone
    out = tidelog("produce", topic, "-k", "user-1", "-v", "bye", "-v", "", "-Z", bootstrap=bootstrap)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("Produced to partition 0 at offset 3")

    seen = _read_with_confluent(bootstrap, topic, 5)
    assert [(m.key(), m.value()) for m in seen] == [
        (b"user-1", b"hello"), (b"user-2", "wörld".encode()), (None, b"no-key-here"), (b"user-1", b"bye"),
        (b"user-1", None)]
    assert seen[0].headers() == [("source", b"cli"), ("trace", b"42")]
    assert seen[3].headers() is None


def test_consume_formats_and_start_positions(tidelog_session_broker: BrokerHandle) -> None:
    from kafka import KafkaProducer

    bootstrap = tidelog_session_broker.bootstrap
    topic = unique("cli-consume")
    tidelog_session_broker.create_topic(topic, {"partitions": 2, "configs": {}})
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(4):  # partition 0: offsets 0-3, timestamps 1000..4000
        producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0, timestamp_ms=1000 * (i + 1),
                      headers=[("n", b"%d" % i)])
    producer.send(topic, value=b"\xff\x00binary", partition=1, timestamp_ms=5000)
    producer.flush()
    producer.close()

    out = tidelog("consume", topic, "--from-beginning", "-e", "-p", "0",
                  "-f", r"%t|%p|%o|%k|%v|%h|%T|%K|%S\n", bootstrap=bootstrap)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"{topic}|0|{i}|k{i}|v{i}|n={i}|{1000 * (i + 1)}|2|2" for i in range(4)]

    records = json_lines(tidelog("consume", topic, "--from-beginning", "-e", "--format", "json",
                                 bootstrap=bootstrap).stdout)
    assert sorted((r["partition"], r["offset"]) for r in records) == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    first = next(r for r in records if (r["partition"], r["offset"]) == (0, 0))
    assert first == {"topic": topic, "partition": 0, "offset": 0, "timestamp": 1000, "timestamp_type": "CreateTime",
                     "key": "k0", "value": "v0", "headers": [{"key": "n", "value": "0"}]}
    binary = next(r for r in records if r["partition"] == 1)
    assert (binary["key"], binary["value"], binary["value_encoding"]) == (None, "/wBiaW5hcnk=", "base64")

    def values(*args: str) -> list[str]:
        result = tidelog("consume", topic, "-p", "0", *args, bootstrap=bootstrap)
        assert result.returncode == 0, result.stderr
        return result.stdout.splitlines()

    assert values("--timestamp", "2500", "-e") == ["v2", "v3"]   # first record at or after 2500 ms
    assert values("-o", "-1", "-e") == ["v3"]                     # one before the end
    assert values("-o", "1", "-n", "2") == ["v1", "v2"]           # from offset 1, two records


def _read_terminal(fd: int, until: bytes, seconds: float) -> bytes:
    """What the child wrote to its terminal (`fd`: the pty's master side), up to `until` or its exit."""
    data = b""
    deadline = time.monotonic() + seconds
    # A selector, not select(): late in a full run this process holds more than FD_SETSIZE (1024) descriptors.
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while until not in data and time.monotonic() < deadline:
            if selector.select(0.2):
                try:
                    chunk = os.read(fd, 4096)
                except OSError:  # EIO: the child has exited and closed the terminal
                    break
                if not chunk:
                    break
                data += chunk
    return data


def test_a_wait_shows_a_spinner_when_stderr_is_a_terminal(tidelog_session_broker: BrokerHandle) -> None:
    """Only a terminal gets the progress spinner (the other tests' stderr is a pipe: it stays empty); it is
    cleared from its line once the first record arrives."""
    from kafka import KafkaProducer

    bootstrap = tidelog_session_broker.bootstrap
    topic = unique("cli-spinner")
    tidelog_session_broker.create_topic(topic, {"partitions": 1, "configs": {}})
    master, slave = pty.openpty()
    cmd, env = command("consume", topic, "-n", "1", bootstrap=bootstrap)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    try:
        shown = _read_terminal(master, b"waiting for records", 60)
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        producer.send(topic, value=b"arrived")
        producer.close()
        stdout, _ = proc.communicate(timeout=60)
        shown += _read_terminal(master, b"\x00", 5)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert (proc.returncode, stdout) == (0, b"arrived\n")
    assert b"waiting for records" in shown
    assert shown.endswith(b"\r\x1b[K")  # the spinner's line is cleared

    quiet = tidelog("consume", topic, "--from-beginning", "-e", bootstrap=bootstrap)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "arrived\n", "")
