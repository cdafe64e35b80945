"""Runtime behaviour inside a running broker: the retention task, policy switches and dynamic
log.cleaner.* changes (issue 4: config per topic and broker-wide; changes take effect at runtime)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType
from kafka_helpers import COMPACT_TOPIC_CONFIG, produce_keyed

from tidelog.storage import TopicPartition
from tidelog.storage.fault_hooks import FaultPoint
from tidelog.testing import BrokerHandle

HOUR = 3_600_000


pytestmark = pytest.mark.tidelog(overrides={"log.cleaner.backoff.ms": 100, "log.retention.check.interval.ms": 200})


def produce_old(bootstrap: str, topic: str, n: int, age_ms: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        ts = int(time.time() * 1000) - age_ms
        for i in range(n):
            producer.send(topic, key=f"k{i}".encode(), value=b"x" * 100, partition=0, timestamp_ms=ts).get(60)
    finally:
        producer.close()


def wait_for(cond: Any, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def test_retention_task_deletes_expired_segments(tidelog_module_broker: BrokerHandle) -> None:
    tidelog_module_broker.create_topic("expiring", configs={"segment.bytes": "1024", "retention.ms": str(HOUR)})
    produce_old(tidelog_module_broker.bootstrap, "expiring", 30, age_ms=2 * HOUR)
    log = tidelog_module_broker.state.log_manager.get_log(TopicPartition("expiring", 0))
    assert wait_for(lambda: log.log_start_offset > 0)
    assert log.log_start_offset == log.segments.first_segment.base_offset  # whole segments only


def test_policy_switch_at_runtime(tidelog_module_broker: BrokerHandle) -> None:
    tidelog_module_broker.create_topic("switch", configs={"segment.bytes": "1024", "retention.ms": str(HOUR),
                                              "cleanup.policy": "compact"})
    produce_old(tidelog_module_broker.bootstrap, "switch", 30, age_ms=2 * HOUR)
    log = tidelog_module_broker.state.log_manager.get_log(TopicPartition("switch", 0))
    tidelog_module_broker.state.log_manager.retention.cleanup_logs()  # a retention pass skips a compact-only log
    assert log.log_start_offset == 0
    tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.set_overrides("switch", {
        "segment.bytes": "1024", "retention.ms": str(HOUR), "cleanup.policy": "compact,delete"}))
    assert wait_for(lambda: log.log_start_offset > 0)  # now from the cleaner threads (§3.1 step 3)


def test_dynamic_cleaner_threads(tidelog_module_broker: BrokerHandle) -> None:
    cleaner = tidelog_module_broker.state.cleaner
    assert len(cleaner.threads) == 1
    tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.set_broker_configs(False, {"log.cleaner.threads": "2"}))
    assert wait_for(lambda: len(cleaner.threads) == 2 and all(t.is_alive() for t in cleaner.threads))
    assert cleaner.config.num_threads == 2


class HoldPass:
    """FaultHooks: a pass over `topic` stops just before its checkpoint write until the test releases it, so a
    cleaner thread stays busy for as long as the test needs."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.reached = threading.Event()
        self.release = threading.Event()

    def at(self, point: FaultPoint, subject: object = None) -> None:
        if point == FaultPoint.BEFORE_CHECKPOINT and getattr(subject, "topic", None) == self.topic:
            self.reached.set()
            self.release.wait(120)


def test_dynamic_cleaner_change_never_waits_on_a_busy_thread_on_the_event_loop(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """A log.cleaner.* change restarts the threads, joining the old ones (Kafka's LogCleaner.reconfigure). The
    config listener runs on the event loop, so the restart runs on a thread of its own: the AlterConfigs path
    returns while a cleaner thread is still held inside its pass, and the change applies once the pass ends."""
    hooks = HoldPass("busy")
    broker = tidelog_broker_factory(overrides={"log.cleaner.backoff.ms": 100}, fault_hooks=hooks)
    broker.create_topic("busy", configs=COMPACT_TOPIC_CONFIG)
    produce_keyed(broker.bootstrap, "busy", [(b"k%d" % (i % 3), b"v" * 50) for i in range(60)])
    assert hooks.reached.wait(60)
    cleaner = broker.state.cleaner
    change = {"log.cleaner.io.max.bytes.per.second": "123456789"}
    try:
        # The thread is held until release: had the loop joined it, this call could not return.
        broker.call(lambda: broker.state.topics.set_broker_configs(False, change), timeout=30)
        assert not hooks.release.is_set() and cleaner.config.max_io_bytes_per_second != 123456789
    finally:
        hooks.release.set()
    assert wait_for(lambda: cleaner.config.max_io_bytes_per_second == 123456789
                    and len(cleaner.threads) == 1 and cleaner.threads[0].is_alive())



def thread_nice(native_id: int | None) -> int:
    assert native_id is not None
    return os.getpriority(os.PRIO_PROCESS, native_id)


def alter_broker(broker: BrokerHandle, configs: dict[str, str]) -> Any:
    """AlterConfigs on the broker resource from kafka-python's admin client: the resource's result (a KafkaError
    class or instance on failure)."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=60_000)
    try:
        response = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, str(broker.state.node_id),
                                                       configs=configs)])
    finally:
        admin.close()
    (results,) = response.values()
    (result,) = results.values()
    return result


def refused(result: Any) -> bool:
    """kafka-python gives "OK" for an accepted resource and the error's text for a refused one."""
    assert isinstance(result, str), result
    return result != "OK"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread niceness is Linux's")
def test_cleaner_threads_run_at_log_cleaner_thread_nice(tidelog_module_broker: BrokerHandle) -> None:
    """log.cleaner.thread.nice (tidelog's config): the cleaner threads run that much nicer than the broker, the
    event loop keeps the broker's priority, an AlterConfigs from a real client restarts them at a new value (0: the
    broker's own), a value outside 0-19 is refused, and the threads clean at any value."""
    broker = tidelog_module_broker
    cleaner = broker.state.cleaner
    base = os.getpriority(os.PRIO_PROCESS, os.getpid())
    loop_thread = broker.call(threading.get_native_id)
    assert wait_for(lambda: bool(cleaner.threads) and all(t.nice is not None for t in cleaner.threads))
    assert cleaner.config.thread_nice == 10  # the default
    assert {thread_nice(t.native_id) for t in cleaner.threads} == {min(19, base + 10)}
    assert thread_nice(loop_thread) == base

    old = set(cleaner.threads)
    assert not refused(alter_broker(broker, {"log.cleaner.thread.nice": "3"}))
    assert wait_for(lambda: cleaner.config.thread_nice == 3 and bool(cleaner.threads) and not old & set(
        cleaner.threads) and all(t.nice is not None for t in cleaner.threads))
    assert {thread_nice(t.native_id) for t in cleaner.threads} == {min(19, base + 3)}

    result = alter_broker(broker, {"log.cleaner.thread.nice": "20"})
    assert refused(result) and "log.cleaner.thread.nice" in result
    assert not refused(alter_broker(broker, {"log.cleaner.thread.nice": "0"}))
    assert wait_for(lambda: cleaner.config.thread_nice == 0 and bool(cleaner.threads) and all(
        t.is_alive() and thread_nice(t.native_id) == base for t in cleaner.threads))
    assert thread_nice(loop_thread) == base

    for nice in ("19", "0"):  # the threads clean at either end of the range
        assert not refused(alter_broker(broker, {"log.cleaner.thread.nice": nice}))
        assert wait_for(lambda n=int(nice): cleaner.config.thread_nice == n)
        topic = f"nice-{nice}"
        broker.create_topic(topic, configs=COMPACT_TOPIC_CONFIG)
        produce_keyed(broker.bootstrap, topic, [(f"k{i % 5}".encode(), b"v" * 200) for i in range(40)])
        assert wait_for(lambda t=topic: cleaner.history.get(TopicPartition(t, 0)) is not None)
