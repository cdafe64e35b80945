"""DescribeConfigs entries (Kafka's DescribeConfigsResponseData DescribeConfigsResourceResult / DescribeConfigsSynonym),
built by `BrokerConfig.describe` and `topic_config.describe`; imported by them when DescribeConfigs is first served."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tidelog.config.definitions import ConfigSource, ConfigType


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    synonyms: Sequence[ConfigSynonym] = field(default_factory=tuple)
    type: ConfigType = ConfigType.UNKNOWN
    read_only: bool = False
    sensitive: bool = False
    documentation: str | None = None
