"""KAFKA-7215 (KIP-346): a cleaner thread that dies must not fail silently. Kafka's thread dies and only the
DeadThreadCount gauge tells; tidelog logs it at ERROR, counts it in DeadThreadCount and starts a replacement
after log.cleaner.backoff.ms, which cleans the log the dead thread was working on."""

from __future__ import annotations

import errno
import logging
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from cleaner_env import Env, produce, read_all
from kafka_helpers import COMPACT_TOPIC_CONFIG, produce_keyed

from tidelog.cleaner.log_cleaner import CleanerConfig, LogCleaner
from tidelog.cleaner.metrics import LogCleanerCollector
from tidelog.storage import TopicPartition
from tidelog.storage.fault_hooks import FaultPoint
from tidelog.testing import BrokerHandle


class FailOnce:
    """FaultHooks: the first time a pass of `topic` reaches `point`, an I/O error escapes the cleaning code
    (as a failing cleaner-offset-checkpoint write would) and kills the thread running it."""

    def __init__(self, topic: str, point: FaultPoint = FaultPoint.BEFORE_CHECKPOINT) -> None:
        self.topic = topic
        self.point = point
        self.fired = threading.Event()

    def at(self, point: FaultPoint, subject: object = None) -> None:
        if point == self.point and getattr(subject, "topic", None) == self.topic and not self.fired.is_set():
            self.fired.set()
            raise OSError(errno.EIO, "injected: cleaner checkpoint write failed")


def wait_for(cond: Callable[[], bool], timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def dead_thread_gauge(cleaner: LogCleaner) -> float:
    """The value Prometheus scrapes for kafka.log:type=LogCleaner,name=DeadThreadCount."""
    for family in LogCleanerCollector(cleaner).collect():
        if family.name == "kafka_log_logcleaner_deadthreadcount":
            return float(family.samples[0].value)
    raise AssertionError("DeadThreadCount is not exported")


def dup_log(env: Env, topic: str) -> Any:
    log = env.log(topic)
    for i in range(20):
        produce(log, "same", f"v{i}")
    log.roll()
    produce(log, "tail", "t")
    return log


def cleaner_with(env: Env, hooks: Any, backoff_ms: int) -> LogCleaner:
    return LogCleaner(CleanerConfig(dedupe_buffer_size=1 << 20, backoff_ms=backoff_ms), [str(env.path)],
                      env.manager.all_logs, env.clock, checkpoint_store=env.manager, fault_hooks=hooks)


def test_kafka_7215_dead_thread_is_reported_counted_and_replaced(env: Env,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    hooks = FailOnce("doomed")
    log = dup_log(env, "doomed")
    cleaner = cleaner_with(env, hooks, backoff_ms=50)
    tp = TopicPartition("doomed", 0)
    caplog.set_level(logging.INFO, logger="tidelog.cleaner")
    cleaner.startup()
    try:
        (first,) = cleaner.threads
        # cleaned by the replacement, which then leaves the log (the checkpoint is written just before that)
        assert wait_for(lambda: tp in cleaner.manager.all_cleaner_checkpoints()
                        and cleaner.manager.cleaning_state(tp) is None)
        assert hooks.fired.is_set() and first.dead and not first.is_alive()
        assert cleaner.metrics()["DeadThreadCount"] == 1
        assert dead_thread_gauge(cleaner) == 1
        (replacement,) = cleaner.threads
        assert replacement is not first and replacement.is_alive() and replacement.name == first.name
        assert [r.offset for r in read_all(log)] == [19, 20]
    finally:
        cleaner.shutdown()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and "died" in r.getMessage()]
    assert len(errors) == 1 and errors[0].exc_info is not None  # one loud line, with the traceback
    assert "injected: cleaner checkpoint write failed" in caplog.text
    assert not first.is_alive() and not replacement.is_alive()


def test_kafka_7215_no_replacement_once_shutting_down(env: Env) -> None:
    """A thread that dies just before shutdown is counted, and shutdown does not wait for (or start) its
    replacement."""
    hooks = FailOnce("doomed")
    dup_log(env, "doomed")
    cleaner = cleaner_with(env, hooks, backoff_ms=600_000)  # the replacement would start in 10 minutes
    cleaner.startup()
    (first,) = cleaner.threads
    assert wait_for(lambda: hooks.fired.is_set() and cleaner.metrics()["DeadThreadCount"] == 1)
    cleaner.shutdown()
    assert not first.is_alive()
    assert cleaner.threads == []


def test_kafka_7215_dead_thread_count_on_the_broker_metrics_endpoint(caplog: pytest.LogCaptureFixture,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """The same through a running broker: a compacted topic written by a real client, the thread dies on its
    first pass, /metrics shows kafka_log_logcleaner_deadthreadcount 1, and the topic still gets compacted."""
    hooks = FailOnce("doomed-topic")
    caplog.set_level(logging.ERROR, logger="tidelog.cleaner")
    overrides = {"metrics.port": "0", "log.cleaner.backoff.ms": 100}
    broker = tidelog_broker_factory(overrides=overrides, fault_hooks=hooks)
    broker.create_topic("doomed-topic", configs=COMPACT_TOPIC_CONFIG)
    produce_keyed(broker.bootstrap, "doomed-topic", [(b"k%d" % (i % 3), b"v" * 50) for i in range(40)])
    cleaner = broker.state.cleaner
    tp = TopicPartition("doomed-topic", 0)
    assert wait_for(lambda: tp in cleaner.manager.all_cleaner_checkpoints())
    assert hooks.fired.is_set()
    port = broker.state.metrics.wait_http_port()
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60).read().decode()
    samples = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
               if line.startswith("kafka_log_logcleaner_")}
    assert samples["kafka_log_logcleaner_deadthreadcount"] == 1
    assert len(cleaner.threads) == 1 and cleaner.threads[0].is_alive()
    assert any("died" in r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
