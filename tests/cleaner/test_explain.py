"""Every cleaning decision visible (issue 29, "done when" 4): each `blocked_by` state produced with a real client
against a real broker, reported alike by GET /api/cleaner, `tidelog cleaner status` and `tidelog cleaner explain`,
and cleared when its cause is."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka_helpers import alter_topic_config, consume_all

from tidelog.cleaner import status_cli
from tidelog.cleaner.explain import StatusSnapshots
from tidelog.clock import ManualClock
from tidelog.testing import BrokerHandle

BASE = {"metrics.port": 0, "log.cleaner.backoff.ms": 100}
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"}


def url(broker: BrokerHandle) -> str:
    return f"http://127.0.0.1:{broker.state.metrics.wait_http_port()}"


def row(broker: BrokerHandle, topic: str) -> dict[str, Any] | None:
    """Partition 0 of `topic` in GET /api/cleaner (None while the broker's snapshot predates the topic)."""
    body = json.loads(urllib.request.urlopen(f"{url(broker)}/api/cleaner", timeout=30).read())
    rows = [r for r in body if r["topic"] == topic and r["partition"] == 0]
    assert len(rows) <= 1, body
    return rows[0] if rows else None


def wait_row(broker: BrokerHandle, topic: str, cond: Callable[[dict[str, Any]], bool],
             timeout_s: float = 60.0) -> dict[str, Any]:
    """The partition's /api/cleaner object once `cond` holds (polled; fails with the last one seen)."""
    deadline = time.monotonic() + timeout_s
    while True:
        current = row(broker, topic)
        if current is not None and cond(current):
            return current
        assert time.monotonic() < deadline, f"condition never held; last: {current}"
        time.sleep(0.1)


def cleaned_to(broker: BrokerHandle, topic: str, reason: str) -> dict[str, Any]:
    """The partition's object once a pass has finished and it waits for `reason` (more passes may come first)."""
    return wait_row(broker, topic, lambda r: r["last_cleaned_ms"] is not None and r["blocked_by"] == reason)


def cli(*args: str) -> str:
    """`tidelog cleaner ARGS` in this process (the console script's own test is at the end)."""
    out = io.StringIO()
    assert status_cli.main(list(args), out) == 0
    return out.getvalue()


def assert_reported(broker: BrokerHandle, topic: str, reason: str, *phrases: str) -> dict[str, Any]:
    """/api/cleaner, `cleaner status` and `cleaner explain` all say `reason` for partition 0 of `topic`."""
    current = wait_row(broker, topic, lambda r: r["blocked_by"] == reason)
    status = [line.split() for line in cli("status", "--url", url(broker)).splitlines()]
    assert status[0][:8] == ["TOPIC", "PART", "DIRTY_RATIO", "CLEAN_BYTES", "DIRTY_BYTES", "FIRST_DIRTY",
                             "FIRST_UNCLEANABLE", "BLOCKED_BY"]
    mine = [cells for cells in status[1:] if cells[:2] == [topic, "0"]]
    assert len(mine) == 1 and mine[0][7] == reason, status
    sentences = [line for line in cli("explain", topic, "--url", url(broker)).splitlines()
                 if line.startswith(f"{topic}-0: ")]
    assert len(sentences) == 1
    sentence = sentences[0]
    for phrase in phrases:
        assert phrase in sentence, sentence
    return current


def produce(bootstrap: str, topic: str, keys: list[str], value: bytes = b"v", **kwargs: Any) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0, request_timeout_ms=60_000)
    try:
        return [producer.send(topic, key=k.encode(), value=value, partition=0, **kwargs).get(60).offset for k in keys]
    finally:
        producer.close(30)


def alter_broker(broker: BrokerHandle, configs: dict[str, str]) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=60_000)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, str(broker.state.node_id), configs=configs)])
    finally:
        admin.close()


# The tests that take `tidelog_module_broker` share one broker (a topic each); the others need a broker-wide
# setting, a clock or a data dir of their own.
pytestmark = pytest.mark.tidelog(overrides=BASE)


def test_active_segment_then_cleaned(tidelog_module_broker: BrokerHandle) -> None:
    """The classic example: keys A B A C B A C all sit in the active segment; once it rolls they are cleaned to
    B A C, and what then waits is one record under min.cleanable.dirty.ratio."""
    tidelog_module_broker.create_topic("colors", configs={"cleanup.policy": "compact"})
    produce(tidelog_module_broker.bootstrap, "colors", list("ABACBAC"))
    held = assert_reported(tidelog_module_broker, "colors", "active_segment", "offsets 0-6 wait in the active segment",
                           "segment.bytes=1073741824")
    assert (held["first_dirty_offset"], held["first_uncleanable_offset"], held["log_end_offset"]) == (0, 0, 7)
    assert held["clean_bytes"] == held["cleanable_bytes"] == 0 and held["dirty_bytes"] > 0
    assert held["dirty_ratio"] == 0.0 and held["blocked_until_ms"] is None and held["last_cleaning"] is None
    # the release: a compacted log rolls at segment.ms after its first batch, on the next append
    alter_topic_config(tidelog_module_broker.bootstrap, "colors", {"cleanup.policy": "compact", "segment.ms": "100"})
    produce(tidelog_module_broker.bootstrap, "colors", ["D"], timestamp_ms=int(time.time() * 1000) + 5_000)
    after = cleaned_to(tidelog_module_broker, "colors", "below_min_dirty_ratio")

    assert (after["first_dirty_offset"], after["first_uncleanable_offset"]) == (7, 7)
    assert after["last_cleaning"]["records_read"] == 7 and after["last_cleaning"]["records_retained"] == 3
    assert after["last_cleaning"]["bytes_written"] < after["last_cleaning"]["bytes_read"]
    assert_reported(tidelog_module_broker, "colors", "below_min_dirty_ratio", "is not above min.cleanable.dirty.ratio 0.5")
    assert [(k, o) for o, k, _ in consume_all(tidelog_module_broker.bootstrap, "colors")] == [
        (b"B", 4), (b"A", 5), (b"C", 6), (b"D", 7)]


def test_min_compaction_lag_lifts_with_the_clock(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    clock = ManualClock(int(time.time() * 1000))
    broker = tidelog_broker_factory(overrides=BASE, clock=clock)
    broker.create_topic("lagged", configs={**COMPACT, "min.compaction.lag.ms": "60000"})
    before = int(time.time() * 1000)
    produce(broker.bootstrap, "lagged", [f"k{i % 4}" for i in range(40)])  # CreateTime: the real clock's
    produced = int(time.time() * 1000)
    held = assert_reported(broker, "lagged", "min_compaction_lag", "min.compaction.lag.ms=60000",
                           "(from segment 0)")
    assert held["first_dirty_offset"] == 0 and held["first_uncleanable_offset"] == 0
    # the first segment's newest record plus the lag
    assert before + 60_000 <= held["blocked_until_ms"] <= produced + 60_000
    clock.set(held["blocked_until_ms"] - 1)
    time.sleep(StatusSnapshots.MIN_INTERVAL_S)  # the next request computes afresh
    assert wait_row(broker, "lagged", lambda r: True)["blocked_by"] == "min_compaction_lag"
    clock.set(produced + 60_000)  # every segment is older than the lag now
    after = cleaned_to(broker, "lagged", "active_segment")
    assert after["first_dirty_offset"] > 0 and after["last_cleaning"]["records_retained"] < 40


def test_open_transaction_pins_the_last_stable_offset(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    from confluent_kafka import Producer

    overrides = {**BASE, "transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1}
    broker = tidelog_broker_factory(overrides=overrides)
    broker.create_topic("pinned", configs=COMPACT)
    txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "explain-1", "linger.ms": 0})
    txn.init_transactions(60)
    txn.begin_transaction()
    txn.produce("pinned", key=b"t", value=b"in-transaction", partition=0)
    txn.flush(60)
    produce(broker.bootstrap, "pinned", [f"k{i % 4}" for i in range(40)])  # rolls segments behind the txn
    held = assert_reported(broker, "pinned", "open_transaction", "open transaction of producer",
                           "pins the last stable offset at 0", "commits or aborts")
    assert held["first_uncleanable_offset"] == 0 and held["blocked_until_ms"] is None
    txn.commit_transaction(60)
    after = cleaned_to(broker, "pinned", "active_segment")
    assert after["first_dirty_offset"] > 0


def test_low_dirty_ratio(tidelog_module_broker: BrokerHandle) -> None:
    tidelog_module_broker.create_topic("calm", configs=COMPACT)
    produce(tidelog_module_broker.bootstrap, "calm", [f"u{i}" for i in range(40)])  # unique keys: cleaned, nothing removed
    first = cleaned_to(tidelog_module_broker, "calm", "active_segment")
    day = 86_400_000
    alter_topic_config(tidelog_module_broker.bootstrap, "calm", {**COMPACT, "min.cleanable.dirty.ratio": "0.9",
                                                  "max.compaction.lag.ms": str(day)})
    produce(tidelog_module_broker.bootstrap, "calm", [f"u{i}" for i in range(15)])  # rolls at least one more segment
    held = assert_reported(tidelog_module_broker, "calm", "below_min_dirty_ratio", "is not above min.cleanable.dirty.ratio 0.9",
                           "more dirty bytes", "max.compaction.lag.ms=86400000 forces a pass at")
    assert held["first_dirty_offset"] == first["first_dirty_offset"] > 0  # nothing cleaned since
    assert held["cleanable_bytes"] > 0 and held["first_uncleanable_offset"] > held["first_dirty_offset"]
    assert held["dirty_ratio"] < 0.9
    assert held["max_compaction_lag_due_ms"] is not None and held["blocked_until_ms"] == held["max_compaction_lag_due_ms"]
    assert abs(held["max_compaction_lag_due_ms"] - day - time.time() * 1000) < 600_000
    alter_topic_config(tidelog_module_broker.bootstrap, "calm", COMPACT)
    wait_row(tidelog_module_broker, "calm", lambda r: r["first_dirty_offset"] > held["first_dirty_offset"]
             and r["blocked_by"] == "active_segment")


def test_corrupt_segment_is_uncleanable_until_repaired_and_restarted(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    broker = tidelog_broker_factory(tmp_path / "data", overrides=BASE)
    broker.create_topic("damaged", configs={**COMPACT, "min.cleanable.dirty.ratio": "1"})
    produce(broker.bootstrap, "damaged", [f"k{i % 4}" for i in range(40)])
    assert_reported(broker, "damaged", "below_min_dirty_ratio", "min.cleanable.dirty.ratio=1 never triggers")
    segment = tmp_path / "data" / "damaged-0" / "00000000000000000000.log"
    original = segment.read_bytes()
    with open(segment, "r+b") as f:  # the first batch's length field: far past the end of the file
        f.seek(8)
        f.write((0x7FFFFFF0).to_bytes(4, "big"))
    alter_topic_config(broker.bootstrap, "damaged", COMPACT)
    held = assert_reported(broker, "damaged", "uncleanable", "marked uncleanable after a failed pass",
                           "until the broker restarts")
    assert held["last_cleaning"] is None
    assert "SegmentCorruptError" in held["explanation"]  # the cleaner's own failure, as it logged it
    with open(segment, "r+b") as f:
        f.seek(8)
        f.write(original[8:12])
    broker.restart()
    after = cleaned_to(broker, "damaged", "active_segment")
    assert after["first_dirty_offset"] > 0


def test_cleaner_disabled_until_enabled(tmp_path: Path, tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    broker = tidelog_broker_factory(tmp_path / "data", overrides={**BASE, "log.cleaner.enable": "false"})
    broker.create_topic("idle", configs=COMPACT)
    produce(broker.bootstrap, "idle", [f"k{i % 4}" for i in range(40)])
    held = assert_reported(broker, "idle", "cleaner_disabled", "log.cleaner.enable=false")
    assert held["cleanable_bytes"] > 0 and held["dirty_ratio"] > 0.01
    broker.restart(overrides={"log.cleaner.enable": "true"})  # BASE again: the cleaner's default, on
    after = cleaned_to(broker, "idle", "active_segment")
    assert after["first_dirty_offset"] > 0 and after["last_cleaning"]["records_retained"] < 40



def test_cleaner_backoff_until_the_threads_wake(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    broker = tidelog_broker_factory(overrides={**BASE, "log.cleaner.backoff.ms": 600_000})
    cleaner = broker.state.cleaner
    deadline = time.monotonic() + 60
    # the precondition: the thread's first round found nothing and it went to sleep
    while not (cleaner.threads and all(t.ident in cleaner.manager.idle_threads for t in cleaner.threads)):
        assert time.monotonic() < deadline, "the cleaner thread never finished its first round"
        time.sleep(0.05)
    broker.create_topic("sleepy", configs=COMPACT)
    produce(broker.bootstrap, "sleepy", [f"k{i % 4}" for i in range(40)])
    held = assert_reported(broker, "sleepy", "cleaner_backoff", "log.cleaner.backoff.ms=600000",
                           "eligible: dirty ratio")
    assert 0 < held["blocked_until_ms"] - time.time() * 1000 <= 600_000
    alter_broker(broker, {"log.cleaner.backoff.ms": "100"})  # restarts the threads
    after = cleaned_to(broker, "sleepy", "active_segment")
    assert after["first_dirty_offset"] > 0 and after["last_cleaning"]["records_retained"] < 40


def test_throttled_while_the_io_limit_holds(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    broker = tidelog_broker_factory(overrides={**BASE, "log.cleaner.io.max.bytes.per.second": 1})
    broker.create_topic("slow", configs=COMPACT)
    produce(broker.bootstrap, "slow", [f"k{i % 4}" for i in range(40)])
    # A pass within the throttle's first 300 ms window (Kafka's Throttler checks no sooner) may finish
    # unthrottled and leave nothing dirty; more records make more passes until one sleeps.
    deadline = time.monotonic() + 60
    while (current := row(broker, "slow")) is None or current["blocked_by"] != "throttled":
        assert time.monotonic() < deadline, f"never throttled; last: {current}"
        produce(broker.bootstrap, "slow", [f"k{i % 4}" for i in range(8)])
        time.sleep(0.2)
    held = assert_reported(broker, "slow", "throttled", "being cleaned, held back by",
                           "log.cleaner.io.max.bytes.per.second=1")
    assert held["blocked_until_ms"] > time.time() * 1000
    alter_broker(broker, {"log.cleaner.io.max.bytes.per.second": "1e12"})  # wakes and restarts the threads
    after = wait_row(broker, "slow", lambda r: r["last_cleaned_ms"] != held["last_cleaned_ms"]
                     and r["blocked_by"] == "active_segment")
    assert after["first_dirty_offset"] > 0 and after["last_cleaning"]["records_retained"] < 40


def test_prometheus_and_the_console_script(tidelog_module_broker: BrokerHandle) -> None:
    tidelog_module_broker.create_topic("scraped", configs={"cleanup.policy": "compact"})
    produce(tidelog_module_broker.bootstrap, "scraped", list("ABACBAC"))
    wait_row(tidelog_module_broker, "scraped", lambda r: r["blocked_by"] == "active_segment")
    text = urllib.request.urlopen(f"{url(tidelog_module_broker)}/metrics", timeout=30).read().decode()
    assert 'tidelog_cleaner_blocked_by{partition="0",reason="active_segment",topic="scraped"} 1.0' in text
    assert 'tidelog_cleaner_dirty_ratio{partition="0",topic="scraped"} 0.0' in text
    assert "kafka_log_logcleanermanager_max_dirty_percent" in text  # beside Kafka's aggregates
    admin = KafkaAdminClient(bootstrap_servers=tidelog_module_broker.bootstrap, request_timeout_ms=60_000)
    try:
        admin.create_topics([NewTopic("empty", 3, 1, topic_configs={"cleanup.policy": "compact"})], timeout_ms=60_000)
    finally:
        admin.close()
    assert_reported(tidelog_module_broker, "empty", "none", "nothing to clean")
    lines = cli("explain", "empty", "--url", url(tidelog_module_broker)).splitlines()  # one sentence per partition
    assert [line.split(":")[0] for line in lines] == ["empty-0", "empty-1", "empty-2"]
    assert all(line.endswith(": nothing to clean: the log is empty.") for line in lines), lines
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "tidelog", "cleaner", "explain", "scraped", "--url", url(tidelog_module_broker)],
                          capture_output=True, text=True, timeout=60, cwd=root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("scraped-0: offsets 0-6 wait in the active segment")
    missing = subprocess.run([sys.executable, "-m", "tidelog", "cleaner", "explain", "nope", "--url", url(tidelog_module_broker)],
                             capture_output=True, text=True, timeout=60, cwd=root)
    assert missing.returncode == 1 and "no compacted topic 'nope'" in missing.stderr
