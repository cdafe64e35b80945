"""The example pipeline (pipeline/examples) end to end: keyed updates and tombstones on a compacted topic, the
streaming per-key aggregates with a checkpoint across a restart, and the Parquet snapshot, which must equal the
latest value per key in the topic after the log cleaner compacted it (done-when 4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pipeline_testlib import consume_all, spark_or_skip

spark_or_skip()

from tidelog.pipeline.examples import aggregates, snapshot  # noqa: E402 - after the pyspark check
from tidelog.pipeline.examples.updates import create_compacted_topic, generate, latest_per_key, produce  # noqa: E402
from tidelog.storage import TopicPartition  # noqa: E402
from tidelog.testing import BrokerHandle  # noqa: E402

TOPIC = "customer-balances"
PARTITIONS = 3


# Spark starts slowly and shares 2 cores with the broker and other suites: generous per-test limits.
# No background cleaner threads: the test runs cleaner rounds itself (LogCleaner.clean_once), so what the
# streaming job sees before compaction is deterministic. A small dedupe buffer keeps the test's memory low.
pytestmark = [pytest.mark.timeout(900),
              pytest.mark.tidelog(overrides={"log.cleaner.enable": "false",
                                             "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024)})]


def expected_aggregates(records: list[tuple[str, bytes | None]]) -> dict[str, tuple[int, int, int, int | None]]:
    result: dict[str, list[Any]] = {}
    for key, value in records:
        agg = result.setdefault(key, [0, 0, 0, None])
        if value is None:
            agg[1] += 1
        else:
            v = json.loads(value)
            agg[0] += 1
            agg[2] += v["balance"]
            agg[3] = v["seq"] if agg[3] is None else max(agg[3], v["seq"])
    return {k: (a[0], a[1], a[2], a[3]) for k, a in result.items()}


def read_aggregates(spark: Any, path: Path) -> dict[str, tuple[int, int, int, int | None]]:
    return {
        r.key: (r.updates, r.deletes, r.balance_total, r.last_seq) for r in spark.read.parquet(str(path)).collect()
    }


def run_aggregates(spark: Any, broker: Any, tmp_path: Path) -> None:
    query = aggregates.start(
        spark, "tidelog", broker.bootstrap, TOPIC, str(tmp_path / "agg-checkpoint"), str(tmp_path / "agg"),
        available_now=True, max_offsets_per_trigger=2500,
    )
    query.awaitTermination(timeout=600)
    assert not query.isActive and query.exception() is None, query.exception()


def clean_until_done(broker: Any) -> int:
    rounds = 0
    while broker.state.cleaner.clean_once():
        rounds += 1
        assert rounds < 100, "the cleaner keeps finding dirty logs"
    return rounds


def test_example_pipeline(spark: Any, tidelog_module_broker: BrokerHandle, tmp_path: Path) -> None:
    create_compacted_topic(
        tidelog_module_broker.bootstrap, TOPIC, PARTITIONS,
        # Many small segments and no dirty-ratio threshold, so one cleaner round compacts nearly everything.
        {"segment.bytes": "32768", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"},
    )
    first = generate(keys=300, updates=6000, tombstone_every=9, seed=11)
    produce(tidelog_module_broker.bootstrap, TOPIC, first)

    # The streaming job: everything so far, in several micro-batches.
    run_aggregates(spark, tidelog_module_broker, tmp_path)
    assert read_aggregates(spark, tmp_path / "agg") == expected_aggregates(first)

    # Stopped; more updates arrive; the restarted job adds exactly those (nothing counted twice).
    second = generate(keys=400, updates=3000, tombstone_every=7, seed=12)
    produce(tidelog_module_broker.bootstrap, TOPIC, second)
    run_aggregates(spark, tidelog_module_broker, tmp_path)
    assert read_aggregates(spark, tmp_path / "agg") == expected_aggregates(first + second)

    # The log cleaner compacts the topic.
    assert clean_until_done(tidelog_module_broker) >= PARTITIONS
    remaining = consume_all(tidelog_module_broker.bootstrap, TOPIC)
    assert len(remaining) < len(first + second) // 2, "the cleaner did not compact the topic"
    logs = [tidelog_module_broker.state.log_manager.get_log(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)]
    assert sum(log.log_end_offset for log in logs) == len(first + second)  # offsets keep their gaps

    in_topic: dict[str, bytes | None] = {}
    for record in sorted(remaining, key=lambda r: (r.partition, r.offset)):
        in_topic[record.key.decode()] = record.value
    latest_in_topic = {k: v for k, v in in_topic.items() if v is not None}
    assert latest_in_topic == latest_per_key(first + second)

    # The batch job reads the compacted topic (offset gaps included) and materialises the snapshot.
    out = tmp_path / "snapshot"
    rows = snapshot.write_snapshot(spark, "tidelog", tidelog_module_broker.bootstrap, TOPIC, str(out))
    table = {r.key: r.value.encode() for r in spark.read.parquet(str(out)).collect()}
    assert rows == len(table)
    assert table == latest_in_topic
    deleted = {k for k, _ in first + second} - set(latest_in_topic)
    assert deleted and not deleted & set(table)  # tombstoned keys are absent
