"""Topic configs: definitions, override validation, LogConfig resolution and DescribeConfigs entries."""

from __future__ import annotations

import pytest

from tidelog.config.broker_config import BrokerConfig
from tidelog.config.definitions import ConfigError, ConfigSource, ConfigType
from tidelog.config.topic_config import (
    TOPIC_CONFIG_DEFS,
    UnknownTopicConfigError,
    describe,
    log_config,
    parse_overrides,
)


def test_every_log_config_field_has_a_topic_config() -> None:
    from tidelog.config.log_config import LogConfig

    names = {n.replace(".", "_") for n in TOPIC_CONFIG_DEFS}
    assert set(LogConfig.field_names()) <= names


def test_defaults_give_the_default_log_config() -> None:
    from tidelog.config.log_config import LogConfig

    assert log_config({}, BrokerConfig.load()) == LogConfig()
    assert log_config({}, None) == LogConfig()


def test_overrides_beat_broker_synonyms() -> None:
    broker = BrokerConfig.load(overrides={"log.cleanup.policy": "compact", "log.segment.bytes": "2048"})
    lc = log_config({"cleanup.policy": "compact,delete", "retention.ms": "1000", "max.message.bytes": "10"}, broker)
    assert lc.cleanup_policy == ("compact", "delete") and lc.compact and lc.delete
    assert lc.retention_ms == 1000 and lc.max_message_bytes == 10
    assert lc.segment_bytes == 2048  # from log.segment.bytes
    assert log_config({"message.timestamp.type": "LogAppendTime"}, broker).log_append_time


@pytest.mark.parametrize(
    "overrides",
    [
        {"cleanup.policy": "compact,shred"},
        {"compression.type": "brotli"},
        {"message.timestamp.type": "createtime"},
        {"min.cleanable.dirty.ratio": "1.1"},
        {"segment.bytes": "10"},
        {"segment.ms": "0"},
        {"retention.ms": "-2"},
        {"max.message.bytes": "big"},
        {"min.insync.replicas": "0"},
        {"compression.gzip.level": "0"},
        {"compression.lz4.level": "18"},
        {"preallocate": "maybe"},
        {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
        {"leader.replication.throttled.replicas": "a:b"},
        {"retention.ms": None},
    ],
)
def test_bad_overrides_are_config_errors(overrides: dict[str, str | None]) -> None:
    with pytest.raises(ConfigError):
        parse_overrides(overrides)


def test_unknown_override_name() -> None:
    with pytest.raises(UnknownTopicConfigError, match="Unknown topic config name: retention.hours"):
        parse_overrides({"retention.hours": "1"})


def test_good_overrides_parse() -> None:
    parsed = parse_overrides(
        {"cleanup.policy": " compact , delete ", "preallocate": "TRUE", "leader.replication.throttled.replicas": "*"}
    )
    assert parsed["cleanup.policy"] == ["compact", "delete"]
    assert parsed["preallocate"] is True


def _entries(overrides: dict[str, str], broker: BrokerConfig) -> dict[str, object]:
    return {e.name: e for e in describe(overrides, broker, include_synonyms=True)}


def test_describe_sources_and_synonyms() -> None:
    broker = BrokerConfig.load(overrides={"log.segment.bytes": "2048"})
    entries = _entries({"cleanup.policy": "compact"}, broker)
    assert len(entries) == len(TOPIC_CONFIG_DEFS) >= 30

    policy = entries["cleanup.policy"]
    assert (policy.value, policy.source, policy.read_only) == ("compact", ConfigSource.TOPIC_CONFIG, False)
    assert [(s.name, s.value, s.source) for s in policy.synonyms] == [
        ("cleanup.policy", "compact", ConfigSource.TOPIC_CONFIG),
        ("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG),
    ]
    assert policy.type is ConfigType.LIST

    seg = entries["segment.bytes"]
    assert (seg.value, seg.source) == ("2048", ConfigSource.STATIC_BROKER_CONFIG)
    assert [(s.name, s.source) for s in seg.synonyms] == [
        ("log.segment.bytes", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.segment.bytes", ConfigSource.DEFAULT_CONFIG),
    ]

    ratio = entries["min.cleanable.dirty.ratio"]
    assert (ratio.value, ratio.source, ratio.type) == ("0.5", ConfigSource.DEFAULT_CONFIG, ConfigType.DOUBLE)
    assert [(s.name, s.value) for s in ratio.synonyms] == [("log.cleaner.min.cleanable.ratio", "0.5")]

    # Kafka quirk: only the hours default feeds retention.ms / segment.ms, so the synonym list is empty.
    assert entries["retention.ms"].value == "604800000"
    assert entries["retention.ms"].synonyms == ()
    assert entries["retention.ms"].source is ConfigSource.DEFAULT_CONFIG
    assert entries["segment.ms"].synonyms == ()
    assert entries["max.message.bytes"].synonyms[0].name == "message.max.bytes"
    assert entries["remote.storage.enable"].synonyms == ()


def test_describe_retention_ms_with_broker_ms_setting() -> None:
    broker = BrokerConfig.load(overrides={"log.retention.ms": "5000"})
    entry = _entries({}, broker)["retention.ms"]
    assert (entry.value, entry.source) == ("5000", ConfigSource.STATIC_BROKER_CONFIG)
    assert [(s.name, s.value) for s in entry.synonyms] == [("log.retention.ms", "5000"), ("log.retention.hours", "168")]


def test_describe_filters_names_and_hides_synonyms() -> None:
    entries = describe({"retention.ms": "1"}, BrokerConfig.load(), include_synonyms=False, names=["retention.ms"])
    assert [(e.name, e.value, e.source, tuple(e.synonyms)) for e in entries] == [
        ("retention.ms", "1", ConfigSource.TOPIC_CONFIG, ())
    ]
