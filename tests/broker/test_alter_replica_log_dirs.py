"""AlterReplicaLogDirs (34) + DescribeLogDirs (35) across two log dirs: an online move with kafka-python
producing and consuming, Kafka's error codes, and a SIGKILL at every step of the move (`--crash-at`) leaving
exactly one complete copy in use after the restart, which finishes the move."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tidelog.protocol.messages import request_class
from tidelog.storage.fault_hooks import FaultPoint
from tidelog.testing import BrokerHandle, BrokerProcess, KafkaWire

TOPIC = "moving"


def alter(bootstrap: str, moves: dict[str, list[tuple[str, int]]], version: int = 2) -> dict[tuple[str, int], int]:
    Req = request_class(34)[version]
    D = Req.AlterReplicaLogDir
    T = D.AlterReplicaLogDirTopic
    dirs = [D(path=path, topics=[T(name=t, partitions=[p]) for t, p in tps]) for path, tps in moves.items()]
    with KafkaWire(bootstrap) as w:
        r = w.request(34, version, Req(dirs=dirs))
    return {(t.topic_name, p.partition_index): p.error_code for t in r.results for p in t.partitions}


def describe(bootstrap: str) -> dict[str, dict[tuple[str, int, bool], tuple[int, int]]]:
    Req = request_class(35)[4]
    with KafkaWire(bootstrap) as w:
        r = w.request(35, 4, Req(topics=None))
    assert r.error_code == 0
    return {d.log_dir: {(t.name, p.partition_index, p.is_future_key): (p.partition_size, p.offset_lag)
                        for t in d.topics for p in t.partitions} for d in r.results}


def produce(bootstrap: str, start: int, count: int, partition: int = 0) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20, enable_idempotence=True)
    try:
        for i in range(start, start + count):
            producer.send(TOPIC, value=b"v%06d" % i + b"x" * 200, partition=partition)
        producer.flush(60)
    finally:
        producer.close()


def consume_all(bootstrap: str, partition: int = 0) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    try:
        tp = TopicPartition(TOPIC, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        return [m.value[:7] for m in consumer]
    finally:
        consumer.close()


def create_topic(bootstrap: str, partitions: int = 2) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, partitions, 1, topic_configs={"segment.bytes": "20000"})])
    finally:
        admin.close()


def delete_records(bootstrap: str, before: int) -> None:
    from kafka import KafkaAdminClient, TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_records({TopicPartition(TOPIC, 0): before})
    finally:
        admin.close()


def wait_moved(bootstrap: str, target: str, partition: int = 0, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dirs = describe(bootstrap)
        if (TOPIC, partition, False) in dirs.get(target, {}):
            return
        time.sleep(0.1)
    raise AssertionError(f"{TOPIC}-{partition} not in {target}: {describe(bootstrap)}")


def partition_dirs(root: Path) -> dict[str, list[str]]:
    return {d.name: sorted(n for n in os.listdir(d) if n.startswith(TOPIC)) for d in sorted(root.iterdir())
            if d.is_dir()}


def expected(n: int) -> list[bytes]:
    return [b"v%06d" % i for i in range(n)]


def test_move_between_dirs_online(tmp_path: Path, tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    broker = tidelog_broker_factory(tmp_path / "unused", overrides={"log.dirs": f"{a},{b}"})
    broker.create_topic(TOPIC, 2, configs={"segment.bytes": "20000"})
    source = str(broker.state.log_manager.log_dir_of(_tp(0)))
    target = str(b) if source == str(a) else str(a)
    produce(broker.bootstrap, 0, 300)  # several closed segments
    assert alter(broker.bootstrap, {target: [(TOPIC, 0)]}) == {(TOPIC, 0): 0}
    produce(broker.bootstrap, 300, 100)  # during (and after) the move
    wait_moved(broker.bootstrap, target)
    dirs = describe(broker.bootstrap)
    assert (TOPIC, 0, False) not in dirs[source]
    assert not any(k[2] for d in dirs.values() for k in d)  # no future replica left
    assert dirs[target][(TOPIC, 0, False)][0] == broker.call(
        lambda: broker.state.log_manager.get_log(_tp(0)).size_in_bytes())
    produce(broker.bootstrap, 400, 50)
    assert consume_all(broker.bootstrap) == expected(450)
    on_disk = partition_dirs(tmp_path)
    assert f"{TOPIC}-0" not in on_disk[Path(source).name] and f"{TOPIC}-0" in on_disk[Path(target).name]
    assert not [n for names in on_disk.values() for n in names if n.endswith(("-future", "-delete"))]
    # moving to where it already is: nothing to do
    assert alter(broker.bootstrap, {target: [(TOPIC, 0)]}) == {(TOPIC, 0): 0}
    broker.restart()
    assert str(broker.state.log_manager.log_dir_of(_tp(0))) == target
    assert consume_all(broker.bootstrap) == expected(450)


def test_errors_as_kafka(tmp_path: Path, tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    broker = tidelog_broker_factory(tmp_path / "unused", overrides={"log.dirs": f"{a},{b}"})
    broker.create_topic(TOPIC, 2, configs={"segment.bytes": "20000"})
    got = alter(broker.bootstrap, {str(tmp_path / "nope"): [(TOPIC, 0)], str(b): [("no-such-topic", 0)]},
                version=1)
    assert got == {(TOPIC, 0): 57, ("no-such-topic", 0): 3}  # LOG_DIR_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION
    assert alter(broker.bootstrap, {str(b): [(TOPIC, 9)]}) == {(TOPIC, 9): 3}


def test_cluster_alter_is_authorized(tmp_path: Path, tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    overrides = {"log.dirs": f"{a},{b}",
                 "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    broker = tidelog_broker_factory(tmp_path / "unused", overrides=overrides, topics={TOPIC: 1})
    got = alter(broker.bootstrap, {str(b): [(TOPIC, 0)], str(tmp_path / "nope"): [("other", 1)]})
    assert got == {(TOPIC, 0): 31, ("other", 1): 31}  # CLUSTER_AUTHORIZATION_FAILED
    assert broker.state.log_manager.preferred_log_dirs() == {}  # nothing recorded, nothing moved


class HoldAt:
    """Fault hooks that hold the move's worker thread at one point until released."""

    def __init__(self, point: FaultPoint) -> None:
        self.point = point
        self.reached = threading.Event()
        self.release = threading.Event()

    def at(self, point: FaultPoint, subject: object = None) -> None:
        if point == self.point:
            self.reached.set()
            assert self.release.wait(60)


def test_describe_log_dirs_shows_the_future_replica_while_moving(tmp_path: Path, tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    hooks = HoldAt(FaultPoint.ALTER_DIR_FUTURE_COPIED)
    broker = tidelog_broker_factory(tmp_path / "unused", overrides={"log.dirs": f"{a},{b}"}, fault_hooks=hooks)
    broker.create_topic(TOPIC, 2, configs={"segment.bytes": "20000"})
    source = str(broker.state.log_manager.log_dir_of(_tp(0)))
    target = str(b) if source == str(a) else str(a)
    produce(broker.bootstrap, 0, 300)
    assert alter(broker.bootstrap, {target: [(TOPIC, 0)]}) == {(TOPIC, 0): 0}
    assert hooks.reached.wait(60)
    try:
        dirs = describe(broker.bootstrap)
        assert (TOPIC, 0, False) in dirs[source] and (TOPIC, 0, False) not in dirs[target]
        # everything appended so far is copied; the swap waits
        assert dirs[target][(TOPIC, 0, True)] == (dirs[source][(TOPIC, 0, False)][0], 0)
        produce(broker.bootstrap, 300, 50)  # appends go on while the future replica is held back
        dirs = describe(broker.bootstrap)
        size, lag = dirs[target][(TOPIC, 0, True)]
        assert 0 < size < dirs[source][(TOPIC, 0, False)][0] and lag == 50
    finally:
        hooks.release.set()
    wait_moved(broker.bootstrap, target)
    assert not any(k[2] for d in describe(broker.bootstrap).values() for k in d)
    assert consume_all(broker.bootstrap) == expected(350)


def _tp(p: int) -> Any:
    from tidelog.storage import TopicPartition

    return TopicPartition(TOPIC, p)


@pytest.mark.slow
@pytest.mark.parametrize("step", [FaultPoint.ALTER_DIR_FUTURE_CREATED, FaultPoint.ALTER_DIR_FUTURE_COPIED,
                                  FaultPoint.ALTER_DIR_FUTURE_RENAMED, FaultPoint.ALTER_DIR_CURRENT_DELETED])
def test_crash_at_each_move_step(tmp_path: Path, step: FaultPoint) -> None:
    a, b = tmp_path / "data" / "a", tmp_path / "data" / "b"
    broker = BrokerProcess(tmp_path / "data" / "a", overrides={"log.dirs": f"{a},{b}", "log.segment.delete.delay.ms": 0},
                           args=["--crash-at", str(step)])
    broker.start()
    try:
        create_topic(broker.bootstrap, partitions=1)
        produce(broker.bootstrap, 0, 300)
        delete_records(broker.bootstrap, 5)  # a log start inside the first segment survives the move
        source = a if (a / f"{TOPIC}-0").is_dir() else b
        target = b if source == a else a
        assert alter(broker.bootstrap, {str(target): [(TOPIC, 0)]}) == {(TOPIC, 0): 0}
        assert broker.proc is not None
        assert broker.proc.wait(60) == 137  # died at the step
        on_disk = {str(p.relative_to(tmp_path / "data")) for d in (a, b) for p in d.iterdir()
                   if p.name.startswith(TOPIC)}
        if step in (FaultPoint.ALTER_DIR_FUTURE_CREATED, FaultPoint.ALTER_DIR_FUTURE_COPIED):
            assert any(n.endswith("-future") for n in on_disk) and f"{source.name}/{TOPIC}-0" in on_disk
        elif step == FaultPoint.ALTER_DIR_FUTURE_RENAMED:  # two normal-named copies: the preferred one wins
            assert {f"{source.name}/{TOPIC}-0", f"{target.name}/{TOPIC}-0"} <= on_disk
        else:
            assert f"{target.name}/{TOPIC}-0" in on_disk and any(n.endswith("-delete") for n in on_disk)
        broker.args = []
        broker.start()  # the restart completes (or redoes) the move
        wait_moved(broker.bootstrap, str(target))
        assert consume_all(broker.bootstrap) == expected(300)[5:]
        produce(broker.bootstrap, 300, 20)
        assert consume_all(broker.bootstrap) == expected(320)[5:]
        names = [n for d in (a, b) for n in os.listdir(d) if n.startswith(TOPIC)]
        assert names.count(f"{TOPIC}-0") == 1 and (target / f"{TOPIC}-0").is_dir()
        assert not any(n.endswith("-future") for n in names)
        deadline = time.monotonic() + 30  # a leftover `-delete` dir goes after file.delete.delay.ms (0 here)
        while any(n.endswith("-delete") for d in (a, b) for n in os.listdir(d)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(n.endswith("-delete") for d in (a, b) for n in os.listdir(d))
    finally:
        broker.kill()
