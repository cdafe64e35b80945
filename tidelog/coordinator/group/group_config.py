"""Dynamic group configs (KIP-848; Kafka's GroupConfig and GroupConfigManager): a group's own settings, set with
(Incremental)AlterConfigs on a GROUP resource, shown by DescribeConfigs, listed by ListConfigResources and kept in
`<first log dir>/tidelog-group-configs.json`. A group may have configs before it exists or after it is deleted
(KIP-1142). consumer.session.timeout.ms and consumer.heartbeat.interval.ms apply to that consumer-protocol
group's members, the share.* ones to that share group (tidelog.coordinator.share); streams.session.timeout.ms,
streams.heartbeat.interval.ms and streams.num.standby.replicas to that streams group (coordinator/group/streams);
the other streams.* ones are validated and kept as Kafka keeps them."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from tidelog.config.definitions import ConfigType
from tidelog.coordinator.java_duration import DURATION
from tidelog.metadata.files import GROUP_CONFIGS
from tidelog.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"
SHARE_DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"  # KIP-1240 (Kafka 4.3)
SHARE_PARTITION_MAX_RECORD_LOCKS = "share.partition.max.record.locks"  # KIP-1240 (Kafka 4.3)
STREAMS_SESSION_TIMEOUT_MS = "streams.session.timeout.ms"
STREAMS_HEARTBEAT_INTERVAL_MS = "streams.heartbeat.interval.ms"
STREAMS_NUM_STANDBY_REPLICAS = "streams.num.standby.replicas"
STREAMS_INITIAL_REBALANCE_DELAY_MS = "streams.initial.rebalance.delay.ms"


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    type: ConfigType
    default: int | str  # Kafka's default; the consumer.* ones follow the broker's group.consumer.* configs
    at_least: int | None
    doc: str


# GroupConfig's ConfigDef, in its order.
GROUP_CONFIG_DEFS: dict[str, GroupConfigDef] = {d.name: d for d in (
    GroupConfigDef(CONSUMER_SESSION_TIMEOUT_MS, ConfigType.INT, 45_000, 1,
                   "How long a member of this consumer group may go without a heartbeat before it is removed."),
    GroupConfigDef(CONSUMER_HEARTBEAT_INTERVAL_MS, ConfigType.INT, 5_000, 1,
                   "How often the members of this consumer group are told to heartbeat."),
    GroupConfigDef(SHARE_SESSION_TIMEOUT_MS, ConfigType.INT, 45_000, 1, "Session timeout of share-group members."),
    GroupConfigDef(SHARE_HEARTBEAT_INTERVAL_MS, ConfigType.INT, 5_000, 1, "Heartbeat interval of share-group members."),
    GroupConfigDef(SHARE_RECORD_LOCK_DURATION_MS, ConfigType.INT, 30_000, 1000,
                   "How long a share-group member holds the records it was given."),
    GroupConfigDef(SHARE_AUTO_OFFSET_RESET, ConfigType.STRING, "latest", None,
                   "Where a share group starts reading a partition: earliest, latest or by_duration:<ISO-8601>."),
    GroupConfigDef(SHARE_ISOLATION_LEVEL, ConfigType.STRING, "read_uncommitted", None,
                   "Whether a share group reads aborted transactional records: read_committed or read_uncommitted."),
    GroupConfigDef(SHARE_DELIVERY_COUNT_LIMIT, ConfigType.INT, 5, 2,
                   "Deliveries of a record to this share group before it is archived."),
    GroupConfigDef(SHARE_PARTITION_MAX_RECORD_LOCKS, ConfigType.INT, 2000, 100,
                   "Most in-flight records of one share-partition of this group."),
    GroupConfigDef(STREAMS_SESSION_TIMEOUT_MS, ConfigType.INT, 45_000, 1, "Session timeout of streams-group members."),
    GroupConfigDef(STREAMS_HEARTBEAT_INTERVAL_MS, ConfigType.INT, 5_000, 1,
                   "Heartbeat interval of streams-group members."),
    GroupConfigDef(STREAMS_NUM_STANDBY_REPLICAS, ConfigType.INT, 0, 0, "Standby replicas of each streams task."),
    GroupConfigDef(STREAMS_INITIAL_REBALANCE_DELAY_MS, ConfigType.INT, 3_000, 0,
                   "How long a new streams group waits for more members before its first assignment."),
)}

# Bounds GroupConfig.validateValues checks that are not broker configs here: Kafka's defaults (GroupCoordinatorConfig,
# ShareGroupConfig). The consumer and share session, heartbeat and record-lock bounds are broker configs (_bounds).
_FIXED_BOUNDS = {
    SHARE_DELIVERY_COUNT_LIMIT: ("group.share.min.delivery.count.limit", 2, "group.share.max.delivery.count.limit", 10),
    SHARE_PARTITION_MAX_RECORD_LOCKS: ("group.share.min.partition.max.record.locks", 100,
                                       "group.share.max.partition.max.record.locks", 10_000),
    STREAMS_SESSION_TIMEOUT_MS: ("group.streams.min.session.timeout.ms", 45_000,
                                 "group.streams.max.session.timeout.ms", 60_000),
    STREAMS_HEARTBEAT_INTERVAL_MS: ("group.streams.min.heartbeat.interval.ms", 5_000,
                                    "group.streams.max.heartbeat.interval.ms", 15_000),
}
_MAX_STANDBY_REPLICAS = ("group.streams.max.standby.replicas", 2)
_SESSION_OVER_HEARTBEAT = ((CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
                           (SHARE_SESSION_TIMEOUT_MS, SHARE_HEARTBEAT_INTERVAL_MS),
                           (STREAMS_SESSION_TIMEOUT_MS, STREAMS_HEARTBEAT_INTERVAL_MS))
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, message)


def _parse_int(name: str, value: str) -> int:
    try:
        parsed = int(value.strip())
    except ValueError:
        raise _invalid(f"Invalid value {value} for configuration {name}: Not a number of type INT") from None
    if not _INT_MIN <= parsed <= _INT_MAX:
        raise _invalid(f"Invalid value {value} for configuration {name}: Not a number of type INT")
    return parsed


def _valid_auto_offset_reset(value: str) -> bool:
    """ShareGroupAutoOffsetResetStrategy.fromString: earliest, latest or by_duration:<non-negative duration>."""
    kind, _, duration = value.strip().lower().partition(":")
    if kind in ("earliest", "latest"):
        return not duration
    if kind != "by_duration" or not duration:
        return False
    match = DURATION.fullmatch(duration.strip())
    if match is None or match.group(3) == "T" or not any(match.group(i) for i in (2, 4, 5, 6)):
        return False  # Duration.parse needs at least one part, and a T with none after it is no part
    seconds = Decimal(f"{match.group(6) or 0}.{match.group(7) or 0}")  # the fraction takes the seconds' sign
    total = int(match.group(2) or 0) * 86400 + int(match.group(4) or 0) * 3600 + int(match.group(5) or 0) * 60 + seconds
    return (-total if match.group(1) == "-" else total) >= 0


def parse_value(name: str, value: str) -> int | str:
    """A config's value as GroupConfig's ConfigDef parses it; INVALID_CONFIG for a name it does not define or a
    value it refuses."""
    definition = GROUP_CONFIG_DEFS.get(name)
    if definition is None:
        raise _invalid(f"Unknown group config name: {name}")
    if definition.type == ConfigType.INT:
        parsed = _parse_int(name, value)
        if definition.at_least is not None and parsed < definition.at_least:
            raise _invalid(f"Invalid value {parsed} for configuration {name}: Value must be at least "
                           f"{definition.at_least}")
        return parsed
    if name == SHARE_AUTO_OFFSET_RESET and not _valid_auto_offset_reset(value):
        raise _invalid(f"Invalid value `{value}` for configuration {name}. The value must be either 'earliest', "
                       "'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")
    if name == SHARE_ISOLATION_LEVEL and value.strip() not in ("read_committed", "read_uncommitted"):
        raise _invalid(f"Invalid value {value} for configuration {name}: String must be one of: "
                       "read_committed, read_uncommitted")
    return value.strip()


class GroupConfigManager:
    """Every group's own configs (Kafka's GroupConfigManager), with the broker's group.consumer.* settings as
    the consumer defaults and bounds. Used on the event loop only (the config APIs and the group coordinator)."""

    def __init__(self, log_dir: Path | None, broker_config: Any) -> None:
        self.log_dir = log_dir  # None: kept in memory only
        self._broker = broker_config
        self._configs: dict[str, dict[str, str]] = {}
        self._load()

    def _load(self) -> None:
        if self.log_dir is None:
            return
        saved = GROUP_CONFIGS.read(self.log_dir, lambda document: {
            str(group): {str(k): str(v) for k, v in configs.items()}
            for group, configs in document.get("groups", {}).items()})
        for group_id, configs in (saved or {}).items():
            try:  # only values set_overrides validated are written; a hand edit may still break one
                self._configs[group_id] = self.validate(configs)
            except KafkaError as exc:
                log.warning("ignoring the configs of group %s in %s: %s", group_id,
                            GROUP_CONFIGS.path(self.log_dir), exc.message)

    def _save(self) -> None:
        if self.log_dir is not None:
            GROUP_CONFIGS.write(self.log_dir, {"groups": self._configs})

    def _broker_int(self, name: str, default: int) -> int:
        try:
            value = self._broker.get(name)
        except (KeyError, AttributeError):
            return default
        return default if value is None else int(value)

    def defaults(self) -> dict[str, int | str]:
        """Every config's value for a group that sets none (GroupCoordinatorConfig.extractGroupConfigMap)."""
        values = {name: d.default for name, d in GROUP_CONFIG_DEFS.items()}
        values[CONSUMER_SESSION_TIMEOUT_MS] = self._broker_int("group.consumer.session.timeout.ms", 45_000)
        values[CONSUMER_HEARTBEAT_INTERVAL_MS] = self._broker_int("group.consumer.heartbeat.interval.ms", 5_000)
        values[SHARE_SESSION_TIMEOUT_MS] = self._broker_int("group.share.session.timeout.ms", 45_000)
        values[SHARE_HEARTBEAT_INTERVAL_MS] = self._broker_int("group.share.heartbeat.interval.ms", 5_000)
        values[SHARE_RECORD_LOCK_DURATION_MS] = self._broker_int("group.share.record.lock.duration.ms", 30_000)
        values[SHARE_DELIVERY_COUNT_LIMIT] = self._broker_int("group.share.delivery.count.limit", 5)
        values[SHARE_PARTITION_MAX_RECORD_LOCKS] = self._broker_int("group.share.partition.max.record.locks", 2000)
        return values

    # --- what the APIs see ---

    def group_ids(self) -> list[str]:
        return sorted(self._configs)

    def overrides(self, group_id: str) -> dict[str, str]:
        return dict(self._configs.get(group_id, {}))

    def values(self, group_id: str) -> dict[str, int | str]:
        """The group's effective configs: its own over the defaults."""
        values = self.defaults()
        for name, value in self._configs.get(group_id, {}).items():
            values[name] = parse_value(name, value)
        return values

    def set_overrides(self, group_id: str, configs: dict[str, str], validate_only: bool = False) -> None:
        """The group's new config set (empty removes the group's entry), validated as GroupConfigManager.validate
        does; raises KafkaError with Kafka's code and changes nothing then."""
        if not group_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
        parsed = self.validate(configs)
        if validate_only:
            return
        if parsed:
            self._configs[group_id] = parsed
        else:
            self._configs.pop(group_id, None)
        self._save()

    def validate(self, configs: dict[str, str]) -> dict[str, str]:
        """GroupConfig.validate over the broker's consumer defaults plus `configs`: names, types, lower bounds,
        then each kind's bounds and session timeout above heartbeat interval. `configs` as parsed (trimmed)."""
        parsed = {name: parse_value(name, value) for name, value in configs.items()}
        values = {**self.defaults(), **parsed}
        for name, (min_name, lowest, max_name, highest) in self._bounds().items():
            current = int(values[name])
            if current < lowest:
                raise _invalid(f"{name} must be greater than or equal to {min_name}")
            if current > highest:
                raise _invalid(f"{name} must be less than or equal to {max_name}")
        if int(values[STREAMS_NUM_STANDBY_REPLICAS]) > _MAX_STANDBY_REPLICAS[1]:
            raise _invalid(f"{STREAMS_NUM_STANDBY_REPLICAS} must be less than or equal to {_MAX_STANDBY_REPLICAS[0]}")
        for session, heartbeat in _SESSION_OVER_HEARTBEAT:
            if int(values[session]) <= int(values[heartbeat]):
                raise _invalid(f"{session} must be greater than {heartbeat}")
        return {name: str(value) for name, value in parsed.items()}

    def _bounds(self) -> dict[str, tuple[str, int, str, int]]:
        """Each bounded config's (min name, min, max name, max): the consumer and share ones from the broker's
        config."""
        configured = {
            CONSUMER_SESSION_TIMEOUT_MS: ("group.consumer.min.session.timeout.ms", 45_000,
                                          "group.consumer.max.session.timeout.ms", 60_000),
            CONSUMER_HEARTBEAT_INTERVAL_MS: ("group.consumer.min.heartbeat.interval.ms", 5_000,
                                             "group.consumer.max.heartbeat.interval.ms", 15_000),
            SHARE_SESSION_TIMEOUT_MS: ("group.share.min.session.timeout.ms", 45_000,
                                       "group.share.max.session.timeout.ms", 60_000),
            SHARE_HEARTBEAT_INTERVAL_MS: ("group.share.min.heartbeat.interval.ms", 5_000,
                                          "group.share.max.heartbeat.interval.ms", 15_000),
            SHARE_RECORD_LOCK_DURATION_MS: ("group.share.min.record.lock.duration.ms", 15_000,
                                            "group.share.max.record.lock.duration.ms", 60_000),
        }
        resolved = {name: (lo_name, self._broker_int(lo_name, lo), hi_name, self._broker_int(hi_name, hi))
                    for name, (lo_name, lo, hi_name, hi) in configured.items()}
        return {**resolved, **_FIXED_BOUNDS}

    # --- what the consumer group coordinator asks ---

    def consumer_session_timeout_ms(self, group_id: str, default: int) -> int:
        own = self._configs.get(group_id)
        return int(own[CONSUMER_SESSION_TIMEOUT_MS]) if own and CONSUMER_SESSION_TIMEOUT_MS in own else default

    def consumer_heartbeat_interval_ms(self, group_id: str, default: int) -> int:
        own = self._configs.get(group_id)
        return int(own[CONSUMER_HEARTBEAT_INTERVAL_MS]) if own and CONSUMER_HEARTBEAT_INTERVAL_MS in own else default


def create_group_config_manager(broker_config: Any, log_dir: Path) -> GroupConfigManager:
    return GroupConfigManager(log_dir, broker_config)
