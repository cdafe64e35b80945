"""Real clients read compacted topics from offset 0 after the broker's cleaner threads ran
(issue 4 "done when" 5): kafka-python and the Java client 3.9.1; __consumer_offsets is compacted too."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata
from kafka_helpers import COMPACT_TOPIC_CONFIG, consume_all, latest_per_key, produce_keyed

from tidelog.testing import BrokerHandle

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from clients.conftest import JavaClient, java_client  # noqa: E402, F401  (the session fixture)

OVERRIDES = {"log.cleaner.backoff.ms": 100, "offsets.topic.segment.bytes": 1024, "offsets.topic.num.partitions": 1}


pytestmark = pytest.mark.tidelog(overrides=OVERRIDES)


def compacted_topic(broker: Any, name: str, tombstones: bool) -> dict[bytes, bytes]:
    """Create and fill a compacted topic; wait until reading from 0 gives exactly one record per live key.
    Returns the expected latest value per live key."""
    broker.create_topic(name, configs=COMPACT_TOPIC_CONFIG)
    records: list[tuple[bytes, bytes | None]] = [(f"k{i % 10}".encode(), f"v{i}".encode()) for i in range(80)]
    if tombstones:
        records += [(b"k3", None), (b"k4", None)]
    # unique keys at the end: the active segment (never cleaned) holds nothing superseded
    records += [(f"tail{i}".encode(), b"t") for i in range(15)]
    produced = produce_keyed(broker.bootstrap, name, records)
    latest = latest_per_key(produced)
    live = {k: v for k, (_, v) in latest.items() if v is not None}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        got = consume_all(broker.bootstrap, name)
        if [k for _, k, v in got if v is not None] == sorted(live, key=lambda k: latest[k][0]):
            break
        time.sleep(0.3)
    return live


def test_kafka_python_reads_latest_value_per_key(tidelog_module_broker: BrokerHandle) -> None:
    live = compacted_topic(tidelog_module_broker, "compacted-py", tombstones=True)
    got = consume_all(tidelog_module_broker.bootstrap, "compacted-py")
    values = [(k, v) for _, k, v in got if v is not None]
    assert dict(values) == live
    assert len(values) == len(live)  # exactly one record per live key
    assert any(s for s in tidelog_module_broker.state.cleaner.summaries if "compacted-py-0" in s)


@pytest.mark.java
def test_java_client_reads_latest_value_per_key(tidelog_module_broker: BrokerHandle, java_client: JavaClient) -> None:  # noqa: F811
    live = compacted_topic(tidelog_module_broker, "compacted-java", tombstones=False)
    lines = java_client.run("consume", tidelog_module_broker.bootstrap, "compacted-java", str(len(live)), "1")
    assert lines[-1] == {"done": len(live)}
    got = {bytes.fromhex(d["k"]): bytes.fromhex(d["v"]) for d in lines[:-1]}
    assert got == live
    offsets = [d["o"] for d in lines[:-1]]
    assert offsets == sorted(offsets) and offsets[0] > 0  # gaps from compaction, offsets not renumbered


def test_consumer_offsets_is_compacted(tidelog_module_broker: BrokerHandle) -> None:
    tidelog_module_broker.create_topic("plain")
    consumer = KafkaConsumer(bootstrap_servers=tidelog_module_broker.bootstrap, group_id="compaction-group",
                             enable_auto_commit=False, request_timeout_ms=60_000)
    tp = TopicPartition("plain", 0)
    try:
        for i in range(60):
            consumer.commit({tp: OffsetAndMetadata(i, "", -1)})
    finally:
        consumer.close()
    log = tidelog_module_broker.state.log_manager.get_log(TopicPartition("__consumer_offsets", 0))
    assert log is not None and log.config.compact
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if any("__consumer_offsets-0" in s for s in tidelog_module_broker.state.cleaner.summaries):
            break
        time.sleep(0.2)
    assert any("__consumer_offsets-0" in s for s in tidelog_module_broker.state.cleaner.summaries)
    records = sum(h.records_count for s in log.segments for _, h in s.batches())
    assert records < 60
    checker = KafkaConsumer(bootstrap_servers=tidelog_module_broker.bootstrap, group_id="compaction-group",
                            enable_auto_commit=False, request_timeout_ms=60_000)
    try:
        assert checker.committed(tp) == 59
    finally:
        checker.close()


def test_cleaner_metrics_on_the_prometheus_endpoint(tidelog_module_broker: BrokerHandle) -> None:
    import urllib.request

    compacted_topic(tidelog_module_broker, "compacted-metrics", tombstones=False)
    metrics = tidelog_module_broker.state.metrics
    deadline = time.monotonic() + 60
    while metrics.registry is None and time.monotonic() < deadline:
        time.sleep(0.1)  # the registry is created by the server's warm-up thread
    if metrics.http_port is None:
        tidelog_module_broker.call(lambda: metrics.start(0))
    body = urllib.request.urlopen(f"http://127.0.0.1:{metrics.http_port}/metrics", timeout=30).read().decode()
    for name in ("kafka_log_logcleaner_max_buffer_utilization_percent", "kafka_log_logcleaner_cleaner_recopy_percent",
                 "kafka_log_logcleaner_max_clean_time_secs", "kafka_log_logcleaner_max_compaction_delay_secs",
                 "kafka_log_logcleaner_deadthreadcount", "kafka_log_logcleanermanager_max_dirty_percent",
                 "kafka_log_logcleanermanager_uncleanable_partitions_count"):
        assert name in body, name
    recopy = metrics.sample("kafka_log_logcleaner_cleaner_recopy_percent")
    assert recopy is not None and 0 < recopy < 100  # the last pass wrote less than it read
    assert metrics.sample("kafka_log_logcleaner_deadthreadcount") == 0


def test_describe_configs_reports_cleaner_settings(tidelog_module_broker: BrokerHandle) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource

    tidelog_module_broker.create_topic("described", configs=COMPACT_TOPIC_CONFIG)
    admin = AdminClient({"bootstrap.servers": tidelog_module_broker.bootstrap})
    topic_res = ConfigResource("topic", "described")
    broker_res = ConfigResource("broker", str(tidelog_module_broker.state.node_id))
    futures = admin.describe_configs([topic_res, broker_res], request_timeout=60)
    topic_configs = {name: entry.value for name, entry in futures[topic_res].result(timeout=90).items()}
    broker_configs = {name: entry.value for name, entry in futures[broker_res].result(timeout=90).items()}
    for key in ("cleanup.policy", "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "max.compaction.lag.ms",
                "delete.retention.ms", "segment.bytes", "retention.ms", "retention.bytes", "file.delete.delay.ms"):
        assert key in topic_configs, key
    assert topic_configs["cleanup.policy"] == "compact"
    assert topic_configs["min.cleanable.dirty.ratio"] == "0.01"
    for key in ("log.cleaner.enable", "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
                "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size", "log.cleaner.backoff.ms",
                "log.cleaner.io.max.bytes.per.second", "log.retention.check.interval.ms"):
        assert key in broker_configs, key
    assert broker_configs["log.cleaner.backoff.ms"] == "100"


def test_delete_records_moves_earliest_offset(tidelog_module_broker: BrokerHandle) -> None:
    from kafka import KafkaAdminClient
    from kafka.errors import PolicyViolationError

    tidelog_module_broker.create_topic("deletable", configs={"segment.bytes": "1024"})
    produce_keyed(tidelog_module_broker.bootstrap, "deletable", [(f"k{i}".encode(), b"v" * 50) for i in range(40)])
    tp = TopicPartition("deletable", 0)
    admin = KafkaAdminClient(bootstrap_servers=tidelog_module_broker.bootstrap, request_timeout_ms=60_000)
    try:
        result = admin.delete_records({tp: 25})
        low = result[tp]["low_watermark"] if isinstance(result[tp], dict) else result[tp]
        assert low == 25
        tidelog_module_broker.create_topic("compact-only", configs=COMPACT_TOPIC_CONFIG)
        produce_keyed(tidelog_module_broker.bootstrap, "compact-only", [(b"a", b"1")])
        with pytest.raises(PolicyViolationError):
            admin.delete_records({TopicPartition("compact-only", 0): 1})
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=tidelog_module_broker.bootstrap, request_timeout_ms=60_000)
    try:
        assert consumer.beginning_offsets([tp])[tp] == 25  # ListOffsets earliest follows the log start
    finally:
        consumer.close()
    log = tidelog_module_broker.state.log_manager.get_log(tp)
    assert log.segments.first_segment.base_offset <= 25 < (log.segments.values()[1].base_offset
                                                           if len(log.segments) > 1 else log.log_end_offset + 1)
    assert [r[0] for r in consume_all(tidelog_module_broker.bootstrap, "deletable", from_beginning=True)][0] == 25
