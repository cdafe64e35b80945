"""`tidelog topic ...` and `tidelog cluster info` against a real broker, cross-checked with kafka-python's admin
client; a wrong bootstrap address fails in one line with exit code 1."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.commands.conftest import tidelog, tidelog_json, unique
from tidelog.storage import TopicPartition
from tidelog.testing import BrokerHandle, free_port


@pytest.fixture
def admin(tidelog_session_broker: BrokerHandle) -> Iterator[Any]:
    from kafka import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=tidelog_session_broker.bootstrap)
    yield client
    client.close()


def test_create_orders_compacted_then_describe_shows_the_config(tidelog_broker: BrokerHandle) -> None:
    """The issue's example, as a user types it (text output), then the same as JSON."""
    created = tidelog("topic", "create", "orders", "--partitions", "3", "-c", "cleanup.policy=compact",
                      bootstrap=tidelog_broker.bootstrap)
    assert created.returncode == 0, created.stderr
    assert created.stdout.split() == ["TOPIC", "STATUS", "orders", "OK"]

    text = tidelog("topic", "describe", "orders", bootstrap=tidelog_broker.bootstrap)
    assert text.returncode == 0, text.stderr
    assert ["cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG"] in [line.split() for line in text.stdout.splitlines()]

    [described] = tidelog_json("topic", "describe", "orders", bootstrap=tidelog_broker.bootstrap)
    assert described["name"] == "orders"
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    assert all(p["log_start_offset"] == 0 and p["high_watermark"] == 0 for p in described["partitions"])
    configs = {c["name"]: c for c in described["configs"]}
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["cleanup.policy"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["retention.ms"]["source"] == "DEFAULT_CONFIG"
    # the broker applied it to the partitions' logs, not only to its DescribeConfigs answer
    logs = [tidelog_broker.state.log_manager.get_log(TopicPartition("orders", p)) for p in range(3)]
    assert all(log is not None and log.config.compact for log in logs)


def test_list_alter_and_delete_topics(tidelog_session_broker: BrokerHandle, admin: Any) -> None:
    from kafka.admin import ConfigResource

    bootstrap = tidelog_session_broker.bootstrap
    topic = unique("cli-topic")
    assert tidelog_json("topic", "create", topic, "-p", "2", bootstrap=bootstrap)[0]["error"] is None
    assert len(admin.describe_topics([topic])[0]["partitions"]) == 2

    again = tidelog_json("topic", "create", topic, bootstrap=bootstrap, expect_rc=1)
    assert again[0]["error"] == "TOPIC_ALREADY_EXISTS"

    listed = {t["name"]: t for t in tidelog_json("topic", "list", bootstrap=bootstrap)}
    assert listed[topic] == {"name": topic, "partitions": 2, "replicas": 1, "internal": False}

    altered = tidelog_json("topic", "alter-config", topic, "--set", "retention.ms=3600000", "--set",
                           "cleanup.policy=compact,delete", bootstrap=bootstrap)
    assert altered[0]["error"] is None
    configs = admin.describe_configs([ConfigResource("TOPIC", topic)])["topic"][topic]
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["cleanup.policy"]["value"] == "compact,delete"

    reset = tidelog_json("topic", "alter-config", topic, "--delete", "retention.ms", bootstrap=bootstrap)
    assert reset[0]["error"] is None
    configs = admin.describe_configs([ConfigResource("TOPIC", topic)])["topic"][topic]
    assert "retention.ms" not in configs  # only modified configs by default: back to the default

    bad = tidelog_json("topic", "alter-config", topic, "--set", "no.such.config=1", bootstrap=bootstrap,
                       expect_rc=1)
    assert bad[0]["error"] == "INVALID_CONFIG"

    deleted = tidelog_json("topic", "delete", topic, bootstrap=bootstrap)
    assert deleted == [{"name": topic, "error": None, "message": None}]
    assert topic not in admin.list_topics()
    gone = tidelog("topic", "delete", topic, bootstrap=bootstrap)
    assert gone.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in gone.stdout


def test_cluster_info(tidelog_session_broker: BrokerHandle) -> None:
    info = tidelog_json("cluster", "info", bootstrap=tidelog_session_broker.bootstrap)
    assert info["cluster_id"] == tidelog_session_broker.state.cluster_id
    assert [b["node_id"] for b in info["brokers"]] == [tidelog_session_broker.state.node_id]
    assert info["brokers"][0]["port"] == tidelog_session_broker.port
    assert info["features"]["metadata.version"]["finalized_level"] >= 1


def test_a_wrong_bootstrap_address_is_one_line_and_exit_code_1() -> None:
    closed = f"127.0.0.1:{free_port()}"
    for command in (["topic", "list"], ["consume", "orders", "-e"]):
        out = tidelog(*command, bootstrap=closed)
        assert out.returncode == 1
        assert out.stdout == ""
        assert len(out.stderr.splitlines()) == 1, out.stderr
        assert f"cannot connect to a broker at {closed}" in out.stderr
    # the address comes from TIDELOG_BOOTSTRAP when -b is not given
    out = tidelog("cluster", "info", env={"TIDELOG_BOOTSTRAP": closed})
    assert (out.returncode, out.stderr.count("\n")) == (1, 1)
    assert closed in out.stderr and "Traceback" not in out.stderr
