"""Option parsing for the `tidelog` data source, with the names, defaults and validation rules of Spark's Kafka
connector (spark-sql-kafka-0-10: KafkaSourceProvider, KafkaSourceOptions), so a pipeline switches between the two
by changing format(...).

Pure Python: no pyspark and no kafka-python import, so the rules are unit-testable on their own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

# Kafka's ListOffsets sentinels, which the connector also uses inside its offset JSON.
EARLIEST = -2
LATEST = -1


class TopicPartition(NamedTuple):
    """Same shape (and tuple equality) as kafka.structs.TopicPartition and storage.TopicPartition."""

    topic: str
    partition: int


class OptionError(ValueError):
    """A bad option; Spark's connector raises IllegalArgumentException for the same cases."""


# Consumer settings the connector owns itself (KafkaSourceProvider.validateGeneralOptions): a user value would
# break its offset tracking, so it rejects them rather than silently ignoring them.
_SOURCE_FORBIDDEN = {
    "auto.offset.reset": "Set startingOffsets / endingOffsets instead; offsets are managed by the source.",
    "key.deserializer": "Keys are always returned as binary; cast or use DataFrame operations.",
    "value.deserializer": "Values are always returned as binary; cast or use DataFrame operations.",
    "enable.auto.commit": "The source does not commit offsets to Kafka; progress is in the checkpoint.",
    "interceptor.classes": "Interceptors are not supported by the source.",
}
_SINK_FORBIDDEN = {
    "key.serializer": "Keys are written from the binary or string `key` column.",
    "value.serializer": "Values are written from the binary or string `value` column.",
}

_STRATEGIES = ("assign", "subscribe", "subscribepattern")


@dataclass(frozen=True)
class OffsetSpec:
    """An unresolved start or end position (KafkaOffsetRangeLimit and its cases)."""

    kind: str  # "earliest" | "latest" | "specific" | "timestamp" | "global_timestamp"
    offsets: dict[TopicPartition, int] = field(default_factory=dict)  # "specific": offset or EARLIEST/LATEST
    timestamps: dict[TopicPartition, int] = field(default_factory=dict)  # "timestamp"
    timestamp: int | None = None  # "global_timestamp"
    # What to do when no offset has a timestamp >= the asked one (startingOffsetsByTimestampStrategy):
    # "error" fails the query, "latest" uses the end offset.
    strategy: str = "error"


@dataclass(frozen=True)
class Subscription:
    """Which topic-partitions to read: exactly one of assign / subscribe / subscribePattern."""

    kind: str  # "assign" | "subscribe" | "subscribePattern"
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            # Java's Pattern.matcher(topic).matches() is a whole-string match.
            return re.fullmatch(self.pattern or "", topic) is not None
        return any(tp.topic == topic for tp in self.assigned)


@dataclass(frozen=True)
class SourceOptions:
    kafka_params: dict[str, str]  # Java client config names, "kafka." stripped
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None  # batch only
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    fetch_offset_num_retries: int
    fetch_offset_retry_interval_ms: int
    max_offsets_per_trigger: int | None
    min_partitions: int | None


@dataclass(frozen=True)
class SinkOptions:
    kafka_params: dict[str, str]
    topic: str | None


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    """Spark data source options are case-insensitive; the connector lower-cases them the same way."""
    return {str(k).lower(): str(v) for k, v in options.items()}


def kafka_params(options: Mapping[str, str], forbidden: Mapping[str, str]) -> dict[str, str]:
    """Options prefixed `kafka.` are client configs (Java names). The bootstrap servers are mandatory."""
    params: dict[str, str] = {}
    for key, value in options.items():
        if key.startswith("kafka."):
            name = key[len("kafka.") :]
            if name in forbidden:
                raise OptionError(f"Kafka option '{name}' is not supported. {forbidden[name]}")
            params[name] = value
    if not params.get("bootstrap.servers"):
        raise OptionError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer/producer"
        )
    return params


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    given = [k for k in _STRATEGIES if k in options]
    if len(given) > 1:
        raise OptionError(
            f"Only one of the following options can be specified for Kafka source: assign, subscribe, "
            f"subscribePattern. Given: {', '.join(given)}"
        )
    if not given:
        raise OptionError(
            "One of the following options must be specified for Kafka source: assign, subscribe, "
            "subscribePattern. See the docs for more details."
        )
    value = options[given[0]].strip()
    if given[0] == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError(f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'")
        return Subscription("subscribe", topics=topics)
    if given[0] == "subscribepattern":
        if not value:
            raise OptionError("Pattern to subscribe is empty as specified value for option 'subscribePattern'")
        try:
            re.compile(value)
        except re.error as exc:
            raise OptionError(f"Invalid subscribePattern '{value}': {exc}") from exc
        return Subscription("subscribePattern", pattern=value)
    return Subscription("assign", assigned=tuple(_parse_assign(value)))


def _parse_assign(value: str) -> list[TopicPartition]:
    bad = OptionError(f"""Expected e.g. {{"topicA":[0,1],"topicB":[0,1]}}, got {value}""")
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise bad from exc
    if not isinstance(parsed, dict):
        raise bad
    tps: list[TopicPartition] = []
    for topic, parts in parsed.items():
        if not isinstance(parts, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in parts):
            raise bad
        tps.extend(TopicPartition(topic, p) for p in parts)
    if not tps:
        raise OptionError(f"No topicpartitions to assign as specified value for option 'assign' is '{value}'")
    return sorted(set(tps))


def _parse_partition_json(value: str, what: str) -> dict[TopicPartition, int]:
    bad = OptionError(f"""Expected e.g. {{"topicA":{{"0":23,"1":-1}},"topicB":{{"0":-2}}}}, got {value} for {what}""")
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise bad from exc
    if not isinstance(parsed, dict):
        raise bad
    result: dict[TopicPartition, int] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise bad
        for part, offset in parts.items():
            try:
                result[TopicPartition(topic, int(part))] = int(offset)
            except (TypeError, ValueError) as exc:
                raise bad from exc
    return result


def parse_offset_spec(
    options: Mapping[str, str], prefix: str, default: str, streaming: bool
) -> OffsetSpec:
    """Resolve startingX / endingX with the connector's precedence: the global timestamp option, then the
    per-partition timestamp JSON, then the offsets option (KafkaSourceProvider.getKafkaOffsetRangeLimit)."""
    strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"startingOffsetsByTimestampStrategy must be 'error' or 'latest', got '{strategy}'")
    if prefix == "ending":
        # Kafka's connector: an ending timestamp that matches no record means "latest".
        strategy = "latest"
    global_ts = options.get(f"{prefix}timestamp")
    if global_ts is not None:
        try:
            return OffsetSpec("global_timestamp", timestamp=int(global_ts.strip()), strategy=strategy)
        except ValueError as exc:
            raise OptionError(f"{prefix}Timestamp must be a number of milliseconds, got '{global_ts}'") from exc
    by_ts = options.get(f"{prefix}offsetsbytimestamp")
    if by_ts is not None:
        return OffsetSpec(
            "timestamp", timestamps=_parse_partition_json(by_ts, f"{prefix}OffsetsByTimestamp"), strategy=strategy
        )
    value = options.get(f"{prefix}offsets", default).strip()
    if value.lower() in ("earliest", "latest"):
        spec = OffsetSpec(value.lower())
    else:
        spec = OffsetSpec("specific", offsets=_parse_partition_json(value, f"{prefix}Offsets"))
    _validate_offset_spec(spec, prefix, streaming)
    return spec


def _validate_offset_spec(spec: OffsetSpec, prefix: str, streaming: bool) -> None:
    # The batch rules of KafkaSourceProvider.validateBatchOptions: a batch must start before "latest" and must
    # not end at "earliest", or the range is empty by construction.
    if streaming:
        return
    if prefix == "starting":
        if spec.kind == "latest" or LATEST in spec.offsets.values():
            raise OptionError("starting offset can't be latest for batch queries on Kafka")
    elif spec.kind == "earliest" or EARLIEST in spec.offsets.values():
        raise OptionError("ending offset can't be earliest for batch queries on Kafka")


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    value = options.get(key)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise OptionError(f"Option '{key}' must be true or false, got '{value}'")
    return lowered == "true"


def _positive_int(options: Mapping[str, str], key: str, default: int | None) -> int | None:
    value = options.get(key)
    if value is None:
        return default
    try:
        number = int(value.strip())
    except ValueError as exc:
        raise OptionError(f"Option '{key}' must be a positive integer, got '{value}'") from exc
    if number <= 0:
        raise OptionError(f"Option '{key}' must be a positive integer, got '{value}'")
    return number


def parse_source_options(raw: Mapping[str, Any], streaming: bool) -> SourceOptions:
    options = lower_keys(raw)
    if streaming and any(k.startswith("ending") for k in options):
        # KafkaSourceProvider.validateStreamOptions: a stream has no end.
        raise OptionError("Ending offsets / timestamps are not valid in streaming queries")
    params = kafka_params(options, _SOURCE_FORBIDDEN)
    starting = parse_offset_spec(options, "starting", "latest" if streaming else "earliest", streaming)
    ending = None if streaming else parse_offset_spec(options, "ending", "latest", streaming)
    return SourceOptions(
        kafka_params=params,
        subscription=parse_subscription(options),
        starting=starting,
        ending=ending,
        fail_on_data_loss=_bool(options, "failondataloss", True),
        include_headers=_bool(options, "includeheaders", False),
        poll_timeout_ms=_positive_int(options, "kafkaconsumer.polltimeoutms", 120_000) or 120_000,
        fetch_offset_num_retries=_positive_int(options, "fetchoffset.numretries", 3) or 3,
        fetch_offset_retry_interval_ms=_positive_int(options, "fetchoffset.retryintervalms", 10) or 10,
        max_offsets_per_trigger=_positive_int(options, "maxoffsetspertrigger", None),
        min_partitions=_positive_int(options, "minpartitions", None),
    )


def parse_sink_options(raw: Mapping[str, Any]) -> SinkOptions:
    options = lower_keys(raw)
    topic = options.get("topic")
    return SinkOptions(kafka_params=kafka_params(options, _SINK_FORBIDDEN), topic=topic.strip() if topic else None)


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The connector's offset JSON ({"topic": {"0": 42}}), ordered so equal offsets serialise identically."""
    result: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return result


def offsets_from_json(value: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {TopicPartition(t, int(p)): int(o) for t, parts in value.items() for p, o in parts.items()}
