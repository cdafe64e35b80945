"""TopicManager on a real LogManager and real directories: create/delete/grow topics, overrides reaching the
Log objects, name rules, persistence in tidelog-topics.json and reconciliation with partition dirs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidelog.broker.topics import TOPICS_FILE, TopicManager, uuid_to_str
from tidelog.clock import ManualClock
from tidelog.config.broker_config import BrokerConfig
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.storage import TopicPartition
from tidelog.storage.log_manager import LogManager


class Node:
    """A broker's storage + topics, restartable on the same directory."""

    def __init__(self, data: Path, **overrides: str) -> None:
        self.data = data
        self.overrides = {"log.dirs": str(data), **overrides}
        self.start()

    def start(self) -> None:
        self.config = BrokerConfig.load(overrides=self.overrides)
        self.logs = LogManager(self.config.log_dirs, self.config.default_log_config(), ManualClock())
        self.topics = TopicManager(self.config, self.logs)
        self.logs.startup()
        self.topics.startup()

    def stop(self) -> None:
        self.logs.shutdown()

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path / "data")
    yield n
    n.stop()


def code_of(fn, *args, **kwargs) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        fn(*args, **kwargs)
    return info.value.code


def test_create_makes_logs_with_topic_config(node: Node) -> None:
    info = node.topics.create_topic("orders", 3, 1, {"cleanup.policy": "compact", "segment.bytes": "4096"})
    assert info.partitions == 3 and len(info.topic_id) == 16 and info.topic_id != bytes(16)
    for p in range(3):
        lg = node.topics.log(TopicPartition("orders", p))
        assert lg is not None and lg.topic_id == info.topic_id
        assert lg.config.compact and lg.config.segment_bytes == 4096
        assert (node.data / f"orders-{p}" / "partition.metadata").is_file()
    assert node.topics.log(TopicPartition("orders", 3)) is None
    assert node.topics.by_id(info.topic_id) is info
    assert node.topics.names() == ["orders"]


def test_defaults_and_validate_only(node: Node) -> None:
    info = node.topics.create_topic("dry", -1, -1, validate_only=True)
    assert info.partitions == 1
    assert node.topics.get("dry") is None and not (node.data / "dry-0").exists()


@pytest.mark.parametrize(
    "name,partitions,rf,configs,code",
    [
        ("", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("..", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("bad/name", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("x" * 250, 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("ok", 0, 1, {}, ErrorCode.INVALID_PARTITIONS),
        ("ok", -2, 1, {}, ErrorCode.INVALID_PARTITIONS),
        ("ok", 1, 0, {}, ErrorCode.INVALID_REPLICATION_FACTOR),
        ("ok", 1, 3, {}, ErrorCode.INVALID_REPLICATION_FACTOR),
        ("ok", 1, 1, {"retention.hours": "1"}, ErrorCode.INVALID_CONFIG),
        ("ok", 1, 1, {"cleanup.policy": "shred"}, ErrorCode.INVALID_CONFIG),
    ],
)
def test_create_errors(node: Node, name: str, partitions: int, rf: int, configs: dict, code: ErrorCode) -> None:
    assert code_of(node.topics.create_topic, name, partitions, rf, configs) == code
    assert node.topics.names() == []


def test_exists_and_collision(node: Node) -> None:
    node.topics.create_topic("a.b", 1, 1)
    assert code_of(node.topics.create_topic, "a.b", 1, 1) == ErrorCode.TOPIC_ALREADY_EXISTS
    assert code_of(node.topics.create_topic, "a_b", 1, 1) == ErrorCode.INVALID_TOPIC_EXCEPTION
    node.topics.create_topic("a-b", 1, 1)  # '-' does not collide


def test_create_partitions(node: Node) -> None:
    info = node.topics.create_topic("grow", 1, 1, {"retention.ms": "1000"})
    assert code_of(node.topics.create_partitions, "grow", 1) == ErrorCode.INVALID_PARTITIONS
    assert code_of(node.topics.create_partitions, "nope", 4) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    node.topics.create_partitions("grow", 3)
    assert info.partitions == 3
    lg = node.topics.log(TopicPartition("grow", 2))
    assert lg is not None and lg.config.retention_ms == 1000 and lg.topic_id == info.topic_id
    assert code_of(node.topics.create_partitions, "grow", 2) == ErrorCode.INVALID_PARTITIONS


def test_overrides_update_logs_and_notify(node: Node) -> None:
    node.topics.create_topic("t", 2, 1)
    seen: list[str | None] = []
    node.topics.add_config_listener(seen.append)
    node.topics.set_overrides("t", {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1"})
    for p in range(2):
        cfg = node.topics.log(TopicPartition("t", p)).config
        assert cfg.compact and cfg.min_cleanable_dirty_ratio == 0.1
    assert node.topics.log_config("t").compact
    assert seen == ["t"]
    assert code_of(node.topics.set_overrides, "t", {"segment.ms": "0"}) == ErrorCode.INVALID_CONFIG
    assert node.topics.log(TopicPartition("t", 0)).config.compact  # unchanged after a rejected change
    node.topics.set_broker_configs(False, {"log.cleaner.min.compaction.lag.ms": "5000"})
    assert node.topics.log(TopicPartition("t", 1)).config.min_compaction_lag_ms == 5000
    assert seen == ["t", None]


def test_delete(node: Node) -> None:
    node.topics.create_topic("gone", 2, 1)
    node.topics.delete_topic("gone")
    assert node.topics.get("gone") is None
    assert node.logs.get_log(TopicPartition("gone", 0)) is None
    assert not (node.data / "gone-0").exists()
    assert code_of(node.topics.delete_topic, "gone") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    node.topics.create_topic("gone", 1, 1)  # the name is free again


def test_delete_disabled(tmp_path: Path) -> None:
    n = Node(tmp_path / "d", **{"delete.topic.enable": "false"})
    try:
        n.topics.create_topic("keep", 1, 1)
        assert code_of(n.topics.delete_topic, "keep") == ErrorCode.TOPIC_DELETION_DISABLED
    finally:
        n.stop()


def test_restart_keeps_ids_configs_and_dynamic_broker_configs(node: Node) -> None:
    info = node.topics.create_topic("kept", 2, 1, {"cleanup.policy": "compact"})
    node.topics.create_partitions("kept", 4)
    node.topics.set_broker_configs(True, {"log.cleaner.backoff.ms": "100"})
    node.topics.create_topic("dropped", 1, 1)
    node.topics.delete_topic("dropped")
    stored = json.loads((node.data / TOPICS_FILE).read_text())
    assert stored["topics"]["kept"]["topic_id"] == uuid_to_str(info.topic_id)
    node.restart()
    again = node.topics.get("kept")
    assert again is not None and again.topic_id == info.topic_id and again.partitions == 4
    assert again.overrides == {"cleanup.policy": "compact"}
    assert node.topics.log(TopicPartition("kept", 3)).config.compact
    assert node.topics.get("dropped") is None
    assert node.config.log_cleaner_backoff_ms == 100


def test_partition_dirs_without_stored_topics_are_adopted(node: Node) -> None:
    info = node.topics.create_topic("orphan", 2, 1)
    node.stop()
    (node.data / TOPICS_FILE).unlink()
    node.start()
    adopted = node.topics.get("orphan")
    assert adopted is not None and adopted.topic_id == info.topic_id and adopted.partitions == 2
    assert (node.data / TOPICS_FILE).is_file()


def test_corrupt_topics_file_does_not_crash(node: Node) -> None:
    info = node.topics.create_topic("survivor", 1, 1)
    node.stop()
    (node.data / TOPICS_FILE).write_text("{not json")
    node.start()
    assert node.topics.get("survivor").topic_id == info.topic_id
    assert (node.data / (TOPICS_FILE.removesuffix(".json") + ".json.corrupt")).is_file()


def test_internal_topic(node: Node) -> None:
    info = node.topics.ensure_internal_topic("__consumer_offsets", 3)
    assert info.internal and info.partitions == 3
    assert node.topics.log_config("__consumer_offsets").compact
    assert node.topics.ensure_internal_topic("__consumer_offsets", 50) is info


def test_invalid_stored_overrides_are_dropped(node: Node) -> None:
    node.topics.create_topic("edited", 1, 1, {"retention.ms": "1000", "cleanup.policy": "compact"})
    node.stop()
    path = node.data / TOPICS_FILE
    stored = json.loads(path.read_text())
    stored["topics"]["edited"]["configs"] = {"retention.ms": "soon", "cleanup.policy": "compact", "x.y": "1"}
    path.write_text(json.dumps(stored))
    node.start()
    assert node.topics.get("edited").overrides == {"cleanup.policy": "compact"}
    assert node.topics.log(TopicPartition("edited", 0)).config.compact
