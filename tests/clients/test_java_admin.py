"""Java AdminClient 3.9.1: create a topic with configs, describe them back with Kafka's names, defaults and
sources, alter one incrementally, list offsets (earliest / latest / by timestamp / max timestamp), add
partitions, delete the topic."""

from __future__ import annotations

import pytest

from .conftest import JavaClient

pytestmark = pytest.mark.java

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"  # Uuid.ZERO_UUID.toString()


def test_admin_flow(tidelog_module_broker, java_client: JavaClient) -> None:
    steps = {d["step"]: d for d in java_client.run("admin", tidelog_module_broker.bootstrap, "java-admin")}

    created = steps["create"]
    assert created["partitions"] == 2 and created["replication_factor"] == 1
    assert created["topic_id"] != ZERO_UUID

    configs = steps["describe"]["configs"]
    # Every topic config is described, not only the overrides (Kafka's ConfigHelper).
    assert len(configs) >= 25, sorted(configs)
    for name, want in (
        ("cleanup.policy", "compact"),
        ("retention.ms", "3600000"),
        ("max.message.bytes", "2000000"),
    ):
        entry = configs[name]
        assert (entry["value"], entry["source"], entry["default"]) == (want, "DYNAMIC_TOPIC_CONFIG", False), (
            name
        )
        assert entry["synonyms"][0] == [name, want, "DYNAMIC_TOPIC_CONFIG"]
    for name, default, broker_name in (
        ("delete.retention.ms", "86400000", "log.cleaner.delete.retention.ms"),
        ("min.cleanable.dirty.ratio", "0.5", "log.cleaner.min.cleanable.ratio"),
    ):
        entry = configs[name]
        assert (entry["value"], entry["source"], entry["default"]) == (default, "DEFAULT_CONFIG", True), name
        assert [broker_name, default, "DEFAULT_CONFIG"] in entry["synonyms"], entry
    # KIP-966: a new 4.3 cluster has a cluster-level min.insync.replicas, so topics inherit it from that level
    entry = configs["min.insync.replicas"]
    assert (entry["value"], entry["source"], entry["default"]) == ("1", "DYNAMIC_DEFAULT_BROKER_CONFIG", False)
    assert entry["synonyms"] == [["min.insync.replicas", "1", "DYNAMIC_DEFAULT_BROKER_CONFIG"],
                                 ["min.insync.replicas", "1", "DEFAULT_CONFIG"]], entry
    assert not any(e["read_only"] or e["sensitive"] for e in configs.values())

    after = steps["describe_after_alter"]["configs"]
    assert (after["retention.ms"]["value"], after["retention.ms"]["source"]) == (
        "7200000",
        "DYNAMIC_TOPIC_CONFIG",
    )
    # DELETE drops the override: the broker-level value comes back (message.max.bytes, Kafka default 1048588).
    assert after["max.message.bytes"]["source"] != "DYNAMIC_TOPIC_CONFIG"
    assert after["max.message.bytes"]["value"] == "1048588"
    assert after["cleanup.policy"]["value"] == "compact"  # untouched by the incremental alter

    lo = steps["list_offsets"]
    base = lo["base_ts"]
    # 30 records in partition 0 with timestamps base + i * 1000; partition 1 is empty.
    assert [p[0] for p in lo["earliest"]] == [0, 0]
    assert [p[0] for p in lo["latest"]] == [30, 0]
    assert lo["for_ts"][0] == [11, base + 11_000]  # first record with timestamp >= base + 10500
    assert lo["for_ts"][1][0] == -1
    assert lo["for_ts_past_end"][0][0] == -1
    assert lo["max_ts"][0] == [29, base + 29_000]

    assert steps["create_partitions"]["partitions"] == 4
    assert steps["create_partitions"]["topic_id"] == created["topic_id"]
    assert steps["delete"] == {"step": "delete", "still_listed": False}
