"""`tidelog group ...` against a real broker: a group consuming with kafka-python (classic protocol) and one
consuming with librdkafka's KIP-848 protocol are shown with their members and lag; offsets are reset only once
the group is empty, and the reset is what OffsetFetch (kafka-python's list_group_offsets) then answers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.commands.conftest import tidelog, tidelog_json, unique
from tidelog.testing import BrokerHandle

# no initial rebalance delay (Kafka's default 3 s) and KIP-848 heartbeats every 0.5 s: the groups form at once
OVERRIDES = {"group.initial.rebalance.delay.ms": 0, "group.consumer.heartbeat.interval.ms": 500,
             "group.consumer.min.heartbeat.interval.ms": 500}


pytestmark = pytest.mark.tidelog(overrides=OVERRIDES)


@pytest.fixture
def admin(tidelog_module_broker: BrokerHandle) -> Iterator[Any]:
    from kafka import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=tidelog_module_broker.bootstrap)
    yield client
    client.close()


def _produce(broker: BrokerHandle, topic: str, per_partition: int, partitions: int) -> None:
    """Record i (its value "i") to partition i % partitions."""
    for p in range(partitions):
        broker.produce(topic, [b"%d" % i for i in range(per_partition * partitions) if i % partitions == p], partition=p)


def _committed(admin: Any, group: str) -> dict[tuple[str, int], int]:
    return {(tp.topic, tp.partition): meta.offset for tp, meta in admin.list_group_offsets({group: None})[group].items()}


def _poll(consumer: Any, count: int) -> int:
    got = 0
    deadline = time.monotonic() + 60
    while got < count and time.monotonic() < deadline:
        got += sum(len(r) for r in consumer.poll(timeout_ms=200, max_records=count - got).values())
    return got


def test_describe_shows_lag_falling_to_zero_and_reset_needs_an_empty_group(tidelog_module_broker: BrokerHandle, admin: Any) -> None:
    from kafka import KafkaConsumer

    bootstrap = tidelog_module_broker.bootstrap
    topic, group = unique("cli-lag"), unique("cli-lag-group")
    tidelog_module_broker.create_topic(topic, {"partitions": 2, "configs": {}})
    _produce(tidelog_module_broker, topic, 5, 2)
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id="lag-client",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        assert _poll(consumer, 3) == 3
        consumer.commit()
        committed = _committed(admin, group)

        listed = {g["group"]: g for g in tidelog_json("group", "list", bootstrap=bootstrap)}
        assert listed[group]["state"] == "Stable" and listed[group]["type"] == "classic"

        [described] = tidelog_json("group", "describe", group, bootstrap=bootstrap)
        assert (described["state"], described["type"], described["protocol"]) == ("Stable", "classic", "range")
        [member] = described["members"]
        assert member["client_id"] == "lag-client"
        assert sorted(p for a in member["assignments"] for p in a["partitions"]) == [0, 1]
        rows = {(o["topic"], o["partition"]): o for o in described["offsets"]}
        assert set(rows) == set(committed) == {(topic, 0), (topic, 1)}  # the commit covers both positions
        for tp, row in rows.items():
            assert (row["current_offset"], row["log_end_offset"], row["lag"]) == (committed[tp], 5, 5 - committed[tp])
            assert row["member_id"] == member["member_id"]
        assert described["total_lag"] == 10 - sum(committed.values()) == 7

        refused = tidelog("group", "reset-offsets", group, "--all-topics", "--to-earliest", "--execute",
                          bootstrap=bootstrap)
        assert refused.returncode == 1
        assert "is Stable" in refused.stderr and len(refused.stderr.splitlines()) == 1
        assert _committed(admin, group) == committed

        assert _poll(consumer, 7) == 7
        consumer.commit()
        [caught_up] = tidelog_json("group", "describe", group, bootstrap=bootstrap)
        assert caught_up["total_lag"] == 0
        assert [o["lag"] for o in caught_up["offsets"]] == [0, 0]
    finally:
        consumer.close()

    dry = tidelog("group", "reset-offsets", group, "--all-topics", "--to-earliest", bootstrap=bootstrap)
    assert dry.returncode == 0, dry.stderr
    assert [line.split() for line in dry.stdout.splitlines()[1:3]] == [
        [group, topic, "0", "5", "0"], [group, topic, "1", "5", "0"]]
    assert "dry run" in dry.stdout
    assert _committed(admin, group) == {(topic, 0): 5, (topic, 1): 5}  # a dry run commits nothing

    reset = tidelog_json("group", "reset-offsets", group, "--all-topics", "--to-earliest", "--execute",
                         bootstrap=bootstrap)
    assert reset["executed"] and [r["new_offset"] for r in reset["partitions"]] == [0, 0]
    assert _committed(admin, group) == {(topic, 0): 0, (topic, 1): 0}

    tidelog_json("group", "reset-offsets", group, "--topic", f"{topic}:1", "--to-offset", "99", "--execute",
                 bootstrap=bootstrap)  # clamped to the log end offset, as kafka-consumer-groups does
    assert _committed(admin, group) == {(topic, 0): 0, (topic, 1): 5}
    tidelog_json("group", "reset-offsets", group, "--topic", topic, "--to-datetime", "2001-09-09T01:46:40Z",
                 "--execute", bootstrap=bootstrap)  # every record is younger: back to the first
    assert _committed(admin, group) == {(topic, 0): 0, (topic, 1): 0}

    deleted = tidelog_json("group", "delete", group, bootstrap=bootstrap)
    assert deleted == [{"group": group, "error": None}]
    assert group not in [g["group_id"] for g in admin.list_groups()]


def test_consume_as_a_group_commits_its_offsets(tidelog_module_broker: BrokerHandle, admin: Any) -> None:
    bootstrap = tidelog_module_broker.bootstrap
    topic, group = unique("cli-group-consume"), unique("cli-group")
    tidelog_module_broker.create_topic(topic, {"partitions": 1, "configs": {}})
    _produce(tidelog_module_broker, topic, 3, 1)
    out = tidelog("consume", topic, "-g", group, "--from-beginning", "-n", "2", bootstrap=bootstrap)
    assert (out.returncode, out.stdout.splitlines()) == (0, ["0", "1"]), out.stderr
    # OffsetFetch: the group committed the position after the two records it printed
    assert _committed(admin, group) == {(topic, 0): 2}


def test_describe_a_kip848_consumer_group(tidelog_module_broker: BrokerHandle) -> None:
    """librdkafka with group.protocol=consumer: DescribeGroups says "not a classic group", the command asks
    ConsumerGroupDescribe instead."""
    from confluent_kafka import Consumer

    bootstrap = tidelog_module_broker.bootstrap
    topic, group = unique("cli-848"), unique("cli-848-group")
    tidelog_module_broker.create_topic(topic, {"partitions": 2, "configs": {}})
    _produce(tidelog_module_broker, topic, 2, 2)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                         "client.id": "rdkafka-848", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    try:
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 4 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            seen += msg is not None and msg.error() is None
        assert seen == 4
        consumer.commit(asynchronous=False)
        [described] = tidelog_json("group", "describe", group, bootstrap=bootstrap)
    finally:
        consumer.close()
    assert (described["type"], described["state"]) == ("consumer", "Stable")
    [member] = described["members"]
    assert member["client_id"] == "rdkafka-848"
    assert sorted(p for a in member["assignments"] for p in a["partitions"]) == [0, 1]
    assert [(o["partition"], o["current_offset"], o["lag"]) for o in described["offsets"]] == [(0, 2, 0), (1, 2, 0)]


def test_describe_a_share_group(tidelog_module_broker: BrokerHandle) -> None:
    """librdkafka's ShareConsumer (KIP-932): described through ShareGroupDescribe, its share-partition's start
    offset (DescribeShareGroupOffsets) moving past the records it acknowledged; reset-offsets refuses it."""
    from confluent_kafka import ShareConsumer
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    bootstrap = tidelog_module_broker.bootstrap
    topic, group = unique("cli-share"), unique("cli-share-group")
    tidelog_module_broker.create_topic(topic, {"partitions": 1, "configs": {}})
    _produce(tidelog_module_broker, topic, 4, 1)
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    config_admin = AdminClient({"bootstrap.servers": bootstrap})  # a handle outlives its futures
    for future in config_admin.incremental_alter_configs(
            [ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])]).values():
        future.result(30)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "rdkafka-share"})
    consumer.subscribe([topic])
    try:
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 4 and time.monotonic() < deadline:
            seen += sum(m.error() is None for m in consumer.poll(timeout=0.3))
        assert seen == 4
        consumer.commit_sync()  # accepts the four records: the share-partition starts after them
        [described] = tidelog_json("group", "describe", group, bootstrap=bootstrap)
        refused = tidelog("group", "reset-offsets", group, "--all-topics", "--to-earliest", bootstrap=bootstrap)
    finally:
        consumer.close()
    assert (described["type"], described["state"]) == ("share", "Stable")
    [member] = described["members"]
    assert member["client_id"] == "rdkafka-share"
    assert [a["partitions"] for a in member["assignments"]] == [[0]]
    assert [(o["partition"], o["current_offset"], o["log_end_offset"], o["lag"]) for o in described["offsets"]] == \
        [(0, 4, 4, 0)]
    assert refused.returncode == 1 and "share group" in refused.stderr
