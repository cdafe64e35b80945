"""BrokerConfig: Kafka names and defaults, server.properties/env/override layering, validation, describe."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tidelog.config.broker_config import (
    BrokerConfig,
    ReadOnlyConfigError,
    UnknownConfigError,
    env_name,
    read_properties,
)
from tidelog.config.definitions import ConfigError, ConfigSource, ConfigType


def test_defaults_match_kafka_names() -> None:
    cfg = BrokerConfig.load()
    assert cfg.node_id == 1
    assert cfg.listeners == "PLAINTEXT://localhost:9092"
    assert cfg.advertised_listeners == cfg.listeners
    assert cfg.log_dirs == ["./data"]
    assert cfg.auto_create_topics_enable is True
    assert (cfg.num_partitions, cfg.default_replication_factor) == (1, 1)
    assert cfg.socket_request_max_bytes == 104_857_600
    assert cfg.message_max_bytes == 1_048_588
    assert cfg.delete_topic_enable is True
    assert cfg.offsets_topic_num_partitions == 50
    assert cfg.offsets_retention_minutes == 10_080
    assert cfg.group_initial_rebalance_delay_ms == 3000
    assert (cfg.group_min_session_timeout_ms, cfg.group_max_session_timeout_ms) == (6000, 1_800_000)
    assert cfg.transaction_max_timeout_ms == 900_000
    assert cfg.producer_id_expiration_ms == 86_400_000
    assert cfg.log_cleaner_enable is True and cfg.log_cleaner_threads == 1
    assert cfg.log_cleaner_dedupe_buffer_size == 134_217_728
    assert cfg.log_cleaner_io_buffer_size == 524_288
    assert cfg.log_cleaner_io_buffer_load_factor == 0.9
    assert cfg.log_cleaner_backoff_ms == 15_000
    assert cfg.log_retention_check_interval_ms == 300_000
    assert cfg.log_flush_on_append is False
    assert cfg.metrics_port == -1
    assert cfg.source("num.partitions") is ConfigSource.DEFAULT_CONFIG


def test_properties_file_env_and_overrides_layer(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(
        "# a comment\n! another\n\nnum.partitions=3\nlog.dirs = /a, /b\n"
        "message.max.bytes: 2000000\nlistener.security.protocol.map=PLAINTEXT:PLAINTEXT,\\\n  SSL:SSL\n"
        "default.replication.factor=1\n"
    )
    env = {env_name("num.partitions"): "4", env_name("log.cleaner.threads"): "2", "TIDELOG_NOT_A_CONFIG": "x"}
    cfg = BrokerConfig.load(str(props), env=env, overrides={"log.cleaner.threads": "3"})
    assert env_name("log.cleaner.io.buffer.size") == "TIDELOG_LOG_CLEANER_IO_BUFFER_SIZE"
    assert cfg.num_partitions == 4  # env beats file
    assert cfg.log_cleaner_threads == 3  # overrides beat env
    assert cfg.log_dirs == ["/a", "/b"]
    assert cfg.message_max_bytes == 2_000_000
    assert cfg.get("listener.security.protocol.map") == "PLAINTEXT:PLAINTEXT,SSL:SSL"
    assert cfg.source("num.partitions") is ConfigSource.STATIC_BROKER_CONFIG
    assert cfg.source("default.replication.factor") is ConfigSource.STATIC_BROKER_CONFIG
    assert cfg.source("delete.topic.enable") is ConfigSource.DEFAULT_CONFIG
    assert read_properties(props)["log.dirs"] == "/a, /b"


def test_log_dir_and_broker_id_aliases() -> None:
    cfg = BrokerConfig.load(overrides={"log.dir": "/x", "broker.id": "7"})
    assert cfg.log_dirs == ["/x"] and cfg.node_id == 7
    with pytest.raises(ConfigError):
        BrokerConfig.load(overrides={"node.id": "1", "broker.id": "2"})


def test_unknown_names_warn(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        cfg = BrokerConfig.load(overrides={"no.such.config": "1"})
    assert cfg.unknown == {"no.such.config": "1"}
    assert "no.such.config" in caplog.text


@pytest.mark.parametrize(
    "name,value",
    [
        ("num.partitions", "zero"),
        ("num.partitions", "0"),
        ("auto.create.topics.enable", "yes"),
        ("socket.request.max.bytes", "99999999999"),
        ("log.cleanup.policy", "compact,nope"),
        ("log.message.timestamp.type", "Sometime"),
        ("compression.type", "brotli"),
        ("listeners", "localhost:9092"),
        ("advertised.listeners", "PLAINTEXT://0.0.0.0:9092"),
        ("log.cleaner.min.cleanable.ratio", "1.5"),
    ],
)
def test_bad_values_raise(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(overrides={name: value})
    assert name.split(".")[0] in str(info.value)


def test_missing_properties_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        BrokerConfig.load(str(tmp_path / "absent.properties"))


def test_default_log_config_resolves_broker_synonyms() -> None:
    cfg = BrokerConfig.load(
        overrides={
            "log.retention.hours": "24",
            "log.roll.ms": "1000",
            "log.segment.bytes": "4096",
            "log.cleanup.policy": "compact",
            "message.max.bytes": "500",
            "log.cleaner.min.cleanable.ratio": "0.2",
            "log.flush.scheduler.interval.ms": "777",
        }
    )
    lc = cfg.default_log_config()
    assert lc.retention_ms == 86_400_000
    assert lc.segment_ms == 1000 and lc.segment_bytes == 4096
    assert lc.cleanup_policy == ("compact",) and lc.compact
    assert lc.max_message_bytes == 500
    assert lc.min_cleanable_dirty_ratio == 0.2
    assert lc.flush_ms == 777  # log.flush.interval.ms unset falls back to the scheduler interval
    # minutes beat hours, ms beats minutes; a negative retention is "forever"
    assert BrokerConfig.load(overrides={"log.retention.minutes": "2"}).default_log_config().retention_ms == 120_000
    forever = BrokerConfig.load(overrides={"log.retention.ms": "-5", "log.retention.minutes": "2"})
    assert forever.default_log_config().retention_ms == -1


def test_describe_broker_entries() -> None:
    cfg = BrokerConfig.load(overrides={"log.retention.hours": "24", "num.partitions": "2"})
    entries = {e.name: e for e in cfg.describe(include_synonyms=True, include_documentation=True)}
    assert entries["num.partitions"].value == "2"
    assert entries["num.partitions"].source is ConfigSource.STATIC_BROKER_CONFIG
    assert [(s.name, s.value, s.source) for s in entries["num.partitions"].synonyms] == [
        ("num.partitions", "2", ConfigSource.STATIC_BROKER_CONFIG),
        ("num.partitions", "1", ConfigSource.DEFAULT_CONFIG),
    ]
    assert entries["num.partitions"].read_only is True
    assert entries["num.partitions"].type is ConfigType.INT
    assert entries["log.cleaner.threads"].read_only is False  # dynamically updatable in Kafka
    assert entries["log.cleaner.io.max.bytes.per.second"].value == "1.7976931348623157E308"
    assert entries["log.cleanup.policy"].type is ConfigType.LIST
    assert entries["log.retention.ms"].value is None
    assert entries["auto.create.topics.enable"].value == "true"
    assert entries["auto.create.topics.enable"].documentation
    only = cfg.describe(names=["num.partitions"])
    assert [e.name for e in only] == ["num.partitions"] and only[0].synonyms == ()


def test_dynamic_layers() -> None:
    cfg = BrokerConfig.load(overrides={"log.cleaner.threads": "2"})
    cfg.set_dynamic(False, {"log.retention.ms": "1000", "log.cleaner.backoff.ms": "10"})
    cfg.set_dynamic(True, {"log.cleaner.backoff.ms": "20"})
    assert cfg.log_cleaner_backoff_ms == 20
    assert cfg.source("log.cleaner.backoff.ms") is ConfigSource.DYNAMIC_BROKER_CONFIG
    assert cfg.source("log.retention.ms") is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert cfg.default_log_config().retention_ms == 1000
    default_entries = cfg.describe(per_broker=False, include_synonyms=True)
    assert {e.name for e in default_entries} == {"log.retention.ms", "log.cleaner.backoff.ms"}
    assert all(s.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG for e in default_entries for s in e.synonyms)
    with pytest.raises(ReadOnlyConfigError):
        cfg.set_dynamic(True, {"num.partitions": "3"})
    with pytest.raises(UnknownConfigError):
        cfg.set_dynamic(True, {"nope": "3"})
    with pytest.raises(ConfigError):
        cfg.set_dynamic(True, {"log.cleaner.threads": "5"})  # more than double the current 2
    assert cfg.log_cleaner_backoff_ms == 20  # failed updates leave the layer untouched
    cfg.set_dynamic(True, {})
    assert cfg.log_cleaner_backoff_ms == 10


def test_properties_syntax_like_java(tmp_path: Path) -> None:
    props = tmp_path / "p.properties"
    props.write_text("num.partitions 6\nlog.dir   :  /data/x\\:y\ncluster.id=abc\\u0041\nmetrics.port=\n")
    parsed = read_properties(props)
    assert parsed == {"num.partitions": "6", "log.dir": "/data/x:y", "cluster.id": "abcA", "metrics.port": ""}
    with pytest.raises(ConfigError):
        BrokerConfig.load(str(props))  # metrics.port= (empty) is not an int
