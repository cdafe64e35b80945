"""Topic config definitions (Kafka 3.9 `LogConfig`), override validation, resolution and DescribeConfigs entries.

Effective value of a topic config: the topic override if any, else the broker synonym chain (dynamic per-broker
> dynamic default > static > default per name; among names the most specific set one wins, e.g.
log.retention.ms > log.retention.minutes > log.retention.hours), else the topic default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelog.config.broker_defs import COMPRESSION_TYPES, TIMESTAMP_TYPES, broker_synonyms
from tidelog.config.definitions import (
    LONG_MAX,
    ConfigError,
    ConfigSource,
    ConfigType,
    at_least,
    between,
    list_of,
    one_of,
    parse_value,
    to_string,
)
from tidelog.config.log_config import LogConfig

if TYPE_CHECKING:
    from tidelog.config.broker_config import BrokerConfig
    from tidelog.config.config_entries import ConfigEntry

B = ConfigType.BOOLEAN
S = ConfigType.STRING
I = ConfigType.INT  # noqa: E741
L = ConfigType.LONG
D = ConfigType.DOUBLE
LI = ConfigType.LIST


class UnknownTopicConfigError(ConfigError):
    """Answered with INVALID_CONFIG, like Kafka's "Unknown topic config name"."""


def _gzip_level(name: str, value: int) -> None:
    if value != -1:
        between(1, 9)(name, value)


def _throttled_replicas(name: str, value: list[str]) -> None:
    # Kafka's ThrottledReplicaListValidator: "*" alone, or "partition:broker" pairs.
    if value == ["*"] or not value:
        return
    for item in value:
        partition, _, broker = item.partition(":")
        if not (partition.strip().isdigit() and broker.strip().isdigit()):
            raise ConfigError(
                f"Invalid value {','.join(value)} for configuration {name}: must be the literal '*' "
                "or a list of replicas in the format [PartitionId]:[BrokerId],..."
            )


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    """One topic config: its type, default and the broker configs that feed the default."""

    name: str
    type: ConfigType
    default: Any
    # Broker names feeding the default with the factor to convert each to this config's unit, most
    # specific first (Kafka's LogConfig.TopicConfigSynonyms + DynamicBrokerConfig.brokerConfigSynonyms).
    synonyms: tuple[tuple[str, int], ...] = ()
    validator: Any = None
    doc: str = ""

    def parse(self, raw: Any) -> Any:
        value = parse_value(self.name, self.type, raw)
        if self.validator is not None and value is not None:
            self.validator(self.name, value)
        return value


HOUR_MS = 3_600_000
_STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."
TOPIC_NAME_STRATEGY = _STRATEGY_PACKAGE + "TopicNameStrategy"
RECORD_NAME_STRATEGY = _STRATEGY_PACKAGE + "RecordNameStrategy"
TOPIC_RECORD_NAME_STRATEGY = _STRATEGY_PACKAGE + "TopicRecordNameStrategy"
SUBJECT_NAME_STRATEGIES = (TOPIC_NAME_STRATEGY, RECORD_NAME_STRATEGY, TOPIC_RECORD_NAME_STRATEGY)

_DEFS = [
    TopicConfigDef("cleanup.policy", LI, ["delete"], (("log.cleanup.policy", 1),), list_of("compact", "delete"),
                   "delete: drop old segments; compact: keep the latest record per key."),
    TopicConfigDef("compression.type", S, "producer", (("compression.type", 1),), one_of(*COMPRESSION_TYPES),
                   "Codec of stored batches; producer keeps the producer's codec."),
    TopicConfigDef("compression.gzip.level", I, -1, (("compression.gzip.level", 1),), _gzip_level,
                   "gzip level when compression.type is gzip."),
    TopicConfigDef("compression.lz4.level", I, 9, (("compression.lz4.level", 1),), between(1, 17),
                   "lz4 level when compression.type is lz4."),
    TopicConfigDef("compression.zstd.level", I, 3, (("compression.zstd.level", 1),), between(-131_072, 22),
                   "zstd level when compression.type is zstd."),
    # Confluent Server's broker-side Schema ID Validation (TopicNameStrategy): see broker/schema_validation.py
    TopicConfigDef("confluent.key.schema.validation", B, False, (), None,
                   "Refuse records whose key lacks a schema id registered under <topic>-key (registry on)."),
    TopicConfigDef("confluent.key.subject.name.strategy", S, TOPIC_NAME_STRATEGY, (),
                   one_of(*SUBJECT_NAME_STRATEGIES),
                   "The subject a key's schema id must be registered under (Schema ID Validation)."),
    TopicConfigDef("confluent.value.schema.validation", B, False, (), None,
                   "Refuse records whose value lacks a schema id registered under <topic>-value (registry on)."),
    TopicConfigDef("confluent.value.subject.name.strategy", S, TOPIC_NAME_STRATEGY, (),
                   one_of(*SUBJECT_NAME_STRATEGIES),
                   "The subject a value's schema id must be registered under (Schema ID Validation)."),
    TopicConfigDef("delete.retention.ms", L, 86_400_000, (("log.cleaner.delete.retention.ms", 1),), at_least(0),
                   "How long tombstones stay readable after compaction."),
    TopicConfigDef("file.delete.delay.ms", L, 60_000, (("log.segment.delete.delay.ms", 1),), at_least(0),
                   "Delay before a deleted segment's files are removed."),
    TopicConfigDef("flush.messages", L, LONG_MAX, (("log.flush.interval.messages", 1),), at_least(1),
                   "Force an fsync after this many messages."),
    TopicConfigDef("flush.ms", L, LONG_MAX,
                   (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)), at_least(0),
                   "Force an fsync after this many ms."),
    TopicConfigDef("follower.replication.throttled.replicas", LI, [], (), _throttled_replicas,
                   "Replicas throttled on the follower side (unused on one node)."),
    TopicConfigDef("index.interval.bytes", I, 4096, (("log.index.interval.bytes", 1),), at_least(0),
                   "Bytes between offset index entries."),
    TopicConfigDef("leader.replication.throttled.replicas", LI, [], (), _throttled_replicas,
                   "Replicas throttled on the leader side (unused on one node)."),
    TopicConfigDef("local.retention.bytes", L, -2, (("log.local.retention.bytes", 1),), at_least(-2),
                   "Local retention with tiered storage (-2 = retention.bytes)."),
    TopicConfigDef("local.retention.ms", L, -2, (("log.local.retention.ms", 1),), at_least(-2),
                   "Local retention with tiered storage (-2 = retention.ms)."),
    TopicConfigDef("max.compaction.lag.ms", L, LONG_MAX, (("log.cleaner.max.compaction.lag.ms", 1),),
                   at_least(1), "Longest a record may stay uncompacted."),
    TopicConfigDef("max.message.bytes", I, 1_048_588, (("message.max.bytes", 1),), at_least(0),
                   "Largest record batch accepted."),
    TopicConfigDef("message.downconversion.enable", B, True, (("log.message.downconversion.enable", 1),), None,
                   "Down-convert for old fetchers (no-op here)."),
    TopicConfigDef("message.format.version", S, "3.0-IV1", (("log.message.format.version", 1),), None,
                   "Ignored: message format v2 is always used."),
    TopicConfigDef("message.timestamp.after.max.ms", L, LONG_MAX,
                   (("log.message.timestamp.after.max.ms", 1),), at_least(0),
                   "How far a CreateTime timestamp may be ahead of the broker's clock."),
    TopicConfigDef("message.timestamp.before.max.ms", L, LONG_MAX,
                   (("log.message.timestamp.before.max.ms", 1),), at_least(0),
                   "How far a CreateTime timestamp may be behind the broker's clock."),
    TopicConfigDef("message.timestamp.difference.max.ms", L, LONG_MAX,
                   (("log.message.timestamp.difference.max.ms", 1),), at_least(0),
                   "Deprecated: both before and after limits at once."),
    TopicConfigDef("message.timestamp.type", S, "CreateTime", (("log.message.timestamp.type", 1),),
                   one_of(*TIMESTAMP_TYPES), "CreateTime keeps the producer's timestamp; LogAppendTime stamps it."),
    TopicConfigDef("min.cleanable.dirty.ratio", D, 0.5, (("log.cleaner.min.cleanable.ratio", 1),), between(0, 1),
                   "Dirty share of the log that makes it eligible for compaction."),
    TopicConfigDef("min.compaction.lag.ms", L, 0, (("log.cleaner.min.compaction.lag.ms", 1),), at_least(0),
                   "Shortest a record stays uncompacted."),
    TopicConfigDef("min.insync.replicas", I, 1, (("min.insync.replicas", 1),), at_least(1),
                   "Replicas that must acknowledge an acks=all write."),
    TopicConfigDef("preallocate", B, False, (("log.preallocate", 1),), None, "Preallocate segment files."),
    TopicConfigDef("remote.log.copy.disable", B, False, (), None, "Tiered storage: stop copying (unused)."),
    TopicConfigDef("remote.log.delete.on.disable", B, False, (), None, "Tiered storage: delete on disable (unused)."),
    TopicConfigDef("remote.storage.enable", B, False, (), None, "Tiered storage (not supported)."),
    TopicConfigDef("retention.bytes", L, -1, (("log.retention.bytes", 1),), None,
                   "Largest size a partition keeps before deleting old segments (-1 = no limit)."),
    TopicConfigDef("retention.ms", L, 604_800_000,
                   (("log.retention.ms", 1), ("log.retention.minutes", 60_000), ("log.retention.hours", HOUR_MS)),
                   at_least(-1), "How long segments are kept (-1 = forever)."),
    TopicConfigDef("segment.bytes", I, 1_073_741_824, (("log.segment.bytes", 1),), at_least(14),
                   "Size at which a segment is rolled."),
    TopicConfigDef("segment.index.bytes", I, 10_485_760, (("log.index.size.max.bytes", 1),), at_least(4),
                   "Size of the offset and time indexes."),
    TopicConfigDef("segment.jitter.ms", L, 0,
                   (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", HOUR_MS)), at_least(0),
                   "Random jitter subtracted from segment.ms."),
    TopicConfigDef("segment.ms", L, 604_800_000, (("log.roll.ms", 1), ("log.roll.hours", HOUR_MS)), at_least(1),
                   "Age at which a segment is rolled."),
    TopicConfigDef("unclean.leader.election.enable", B, False, (("unclean.leader.election.enable", 1),), None,
                   "Allow out-of-sync replicas to lead (no-op on one node)."),
]

TOPIC_CONFIG_DEFS: dict[str, TopicConfigDef] = {d.name: d for d in _DEFS}


def parse_overrides(overrides: Mapping[str, str | None]) -> dict[str, Any]:
    """Parse and validate topic overrides; raise UnknownTopicConfigError/ConfigError (-> INVALID_CONFIG)."""
    parsed: dict[str, Any] = {}
    for name, raw in overrides.items():
        definition = TOPIC_CONFIG_DEFS.get(name)
        if definition is None:
            raise UnknownTopicConfigError(f"Unknown topic config name: {name}")
        if raw is None:
            raise ConfigError(f"Null value not supported for topic configs: {name}")
        parsed[name] = definition.parse(raw)
    lag_min = parsed.get("min.compaction.lag.ms")
    lag_max = parsed.get("max.compaction.lag.ms")
    if lag_min is not None and lag_max is not None and lag_min > lag_max:
        raise ConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({lag_min}) > max.compaction.lag.ms ({lag_max})"
        )
    return parsed


def validate_overrides(overrides: Mapping[str, str | None]) -> None:
    parse_overrides(overrides)


def _broker_default(definition: TopicConfigDef, broker: BrokerConfig | None) -> tuple[Any, bool]:
    """(value, whether a broker name supplied it)."""
    if broker is not None:
        for synonym, factor in definition.synonyms:
            value = broker.raw_value(synonym)
            if value is not None:
                if factor != 1:
                    value = value * factor
                return value, True
    return definition.default, False


def effective_values(overrides: Mapping[str, str | None], broker: BrokerConfig | None) -> dict[str, Any]:
    """Every topic config's effective typed value."""
    parsed = parse_overrides(overrides)
    values: dict[str, Any] = {}
    for name, definition in TOPIC_CONFIG_DEFS.items():
        values[name] = parsed[name] if name in parsed else _broker_default(definition, broker)[0]
    if values["retention.ms"] < 0:
        values["retention.ms"] = -1  # Kafka maps any negative retention to "forever" (-1)
    # KIP-937: the deprecated difference limit still applies to a side that was not configured on its own.
    diff = values["message.timestamp.difference.max.ms"]
    if diff != LONG_MAX:
        for side in ("message.timestamp.before.max.ms", "message.timestamp.after.max.ms"):
            if side not in parsed and values[side] == LONG_MAX:
                values[side] = diff
    return values


def log_config(overrides: Mapping[str, str | None], broker_config: BrokerConfig | None) -> LogConfig:
    """The resolved LogConfig for a topic with `overrides` on a broker configured by `broker_config`."""
    values = effective_values(overrides, broker_config)
    fields = set(LogConfig.field_names())
    kwargs: dict[str, Any] = {}
    for name, value in values.items():
        attr = name.replace(".", "_")
        if attr in fields:
            kwargs[attr] = tuple(value) if isinstance(value, list) else value
    return LogConfig(**kwargs)


def describe(
    overrides: Mapping[str, str | None],
    broker_config: BrokerConfig | None,
    include_synonyms: bool = False,
    names: list[str] | None = None,
    include_documentation: bool = False,
) -> list[ConfigEntry]:
    """DescribeConfigs TOPIC entries, following Kafka's ConfigHelper.createTopicConfigEntry."""
    # lazy for start-up time: imported when DescribeConfigs is first served
    from tidelog.config.config_entries import ConfigEntry, ConfigSynonym

    values = effective_values(overrides, broker_config)
    wanted = set(names) if names else None
    entries: list[ConfigEntry] = []
    for name in sorted(TOPIC_CONFIG_DEFS):
        if wanted is not None and name not in wanted:
            continue
        definition = TOPIC_CONFIG_DEFS[name]
        value = to_string(definition.type, values[name])
        chain: list[ConfigSynonym] = []
        if name in overrides:
            chain.append(ConfigSynonym(name, value, ConfigSource.TOPIC_CONFIG))
        if definition.synonyms and broker_config is not None:
            first = definition.synonyms[0][0]
            chain.extend(broker_config.synonyms(first, broker_synonyms(first)))
        entries.append(
            ConfigEntry(
                name=name,
                value=value,
                source=chain[0].source if chain else ConfigSource.DEFAULT_CONFIG,
                synonyms=tuple(chain) if include_synonyms else (),
                type=definition.type,
                read_only=False,
                sensitive=False,
                documentation=definition.doc if include_documentation else None,
            )
        )
    return entries
