"""IncrementalAlterConfigs (key 44), v0-1: SET / DELETE / APPEND / SUBTRACT per config (KIP-339)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tidelog.broker.apis._shared import (
    BROKER,
    BROKER_LOGGER,
    GROUP_CONFIGS,
    LOG_LEVELS,
    ROOT_LOGGER,
    TOPIC,
    alter_resources,
    apply_broker_configs,
    apply_topic_overrides,
    check_broker_name,
    response_cls,
    topic_info,
)
from tidelog.broker.client_metrics import CLIENT_METRICS, INTERVAL_MS_CONFIG, MATCH_CONFIG, METRICS_CONFIG
from tidelog.broker.context import RequestContext
from tidelog.config.broker_defs import BROKER_CONFIG_DEFS
from tidelog.config.definitions import ConfigType, to_string
from tidelog.config.topic_config import TOPIC_CONFIG_DEFS, effective_values
from tidelog.coordinator.group.group_config import GROUP_CONFIG_DEFS
from tidelog.protocol.errors import ErrorCode, KafkaError

API_KEY = 44
NOTES = """SET, DELETE, APPEND, SUBTRACT (KIP-339); CLIENT_METRICS subscriptions (`metrics`, `interval.ms`
100–3600000, `match` (`KEY=regex` entries, KEY one of client_instance_id, client_id, client_software_name,
client_software_version, client_source_address, client_source_port); unknown name INVALID_REQUEST, bad value
INVALID_CONFIG), kept in `<first log dir>/tidelog-client-metrics.json`; deleting every config removes the
subscription. GROUP configs (KIP-848 GroupConfig: names, types and the group.consumer.min/max bounds checked as
Kafka does), kept in `<first log dir>/tidelog-group-configs.json`; consumer.session.timeout.ms and
consumer.heartbeat.interval.ms act on that consumer group, streams.session.timeout.ms, heartbeat.interval.ms and
num.standby.replicas on that streams group, the share.* ones are only kept"""

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


def apply_ops(
    current: dict[str, str],
    configs: Any,
    type_of: Callable[[str], ConfigType | None],
    base_value: Callable[[str], str | None],
    not_list_code: ErrorCode = ErrorCode.INVALID_CONFIG,
) -> dict[str, str]:
    """The new override set after the operations. `base_value(name)` is what APPEND/SUBTRACT start from when
    there is no override (Kafka uses the static-or-default value). APPEND/SUBTRACT on a non-list config is
    INVALID_CONFIG for topics (the controller's check) but INVALID_REQUEST for brokers (ConfigAdminManager)."""
    result = dict(current)
    for config in configs or []:
        op, name = config.config_operation, config.name
        if op not in _OP_NAMES:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown alter configs operation type {op}")
        if op == DELETE:
            result.pop(name, None)
            continue
        if config.value is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
        if op == SET:
            result[name] = config.value
            continue
        ctype = type_of(name)
        if ctype is None:
            continue  # unknown names fail validation of the new set with INVALID_CONFIG
        if ctype is not ConfigType.LIST:
            verb = "append" if op == APPEND else "subtract"
            raise KafkaError(not_list_code, f"Config value {verb} is not allowed for config key: {name}")
        base = result.get(name, base_value(name)) or ""
        items = [v.strip() for v in base.split(",") if v.strip()]
        changes = [v.strip() for v in config.value.split(",") if v.strip()]
        if op == APPEND:
            items.extend(v for v in changes if v not in items)
        else:
            items = [v for v in items if v not in changes]
        result[name] = ",".join(items)
    return result


def _alter_topic(ctx: RequestContext, resource: Any, validate_only: bool) -> None:
    name = resource.resource_name
    info = topic_info(ctx, name)  # raises INVALID_TOPIC_EXCEPTION or UNKNOWN_TOPIC_OR_PARTITION

    def base_value(config_name: str) -> str | None:
        definition = TOPIC_CONFIG_DEFS[config_name]
        return to_string(definition.type, effective_values({}, ctx.broker.config)[config_name])

    def type_of(config_name: str) -> ConfigType | None:
        definition = TOPIC_CONFIG_DEFS.get(config_name)
        return definition.type if definition else None

    new = apply_ops(info.overrides, resource.configs, type_of, base_value)
    apply_topic_overrides(ctx, name, new, validate_only)


def _alter_broker(ctx: RequestContext, resource: Any, validate_only: bool) -> None:
    per_broker = check_broker_name(ctx, resource.resource_name)
    config = ctx.broker.config

    def base_value(config_name: str) -> str | None:
        return to_string(BROKER_CONFIG_DEFS[config_name].type, config.get(config_name))

    def type_of(config_name: str) -> ConfigType | None:
        definition = BROKER_CONFIG_DEFS.get(config_name)
        return definition.type if definition else None

    new = apply_ops(config.dynamic_configs(per_broker), resource.configs, type_of, base_value,
                    ErrorCode.INVALID_REQUEST)
    apply_broker_configs(ctx, per_broker, new, validate_only, [c.name for c in resource.configs or []])


def _alter_loggers(ctx: RequestContext, resource: Any, validate_only: bool) -> None:
    check_broker_name(ctx, resource.resource_name, allow_default=False)
    changes: list[tuple[logging.Logger, int | None]] = []
    for config in resource.configs or []:
        known = config.name == ROOT_LOGGER or config.name in logging.root.manager.loggerDict
        if not known:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Logger {config.name} does not exist!")
        logger = logging.getLogger() if config.name == ROOT_LOGGER else logging.getLogger(config.name)
        if config.config_operation == SET:
            level = LOG_LEVELS.get((config.value or "").upper())
            if level is None:
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG,
                    f"Cannot set the log level of {config.name} to {config.value} as it is not a supported "
                    f"log level. Valid log4j levels are {', '.join(LOG_LEVELS)}",
                )
            changes.append((logger, level))
        elif config.config_operation == DELETE:
            if config.name == ROOT_LOGGER:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Removing the log level of the {ROOT_LOGGER} logger is not allowed")
            changes.append((logger, None))  # inherit from the root logger again
        else:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"{_OP_NAMES.get(config.config_operation, config.config_operation)} operation is not allowed "
                "for the BROKER_LOGGER resource",
            )
    if not validate_only:
        for logger, level in changes:
            logger.setLevel(logging.NOTSET if level is None else level)


def _alter_client_metrics(ctx: RequestContext, resource: Any, validate_only: bool) -> None:
    # ClientMetricsConfigs: `metrics` and `match` are lists (APPEND/SUBTRACT allowed), `interval.ms` an int
    manager = ctx.broker.client_metrics
    name = resource.resource_name or ""

    def type_of(config_name: str) -> ConfigType | None:
        if config_name in (METRICS_CONFIG, MATCH_CONFIG):
            return ConfigType.LIST
        return ConfigType.INT if config_name == INTERVAL_MS_CONFIG else None

    new = apply_ops(manager.configs(name), resource.configs, type_of, lambda _name: "", ErrorCode.INVALID_REQUEST)
    manager.set_configs(name, new, validate_only)


def _alter_group(ctx: RequestContext, resource: Any, validate_only: bool) -> None:
    # GroupConfig has no list configs: APPEND/SUBTRACT are INVALID_CONFIG, as the controller answers for topics
    def type_of(config_name: str) -> ConfigType | None:
        definition = GROUP_CONFIG_DEFS.get(config_name)
        return definition.type if definition else None

    manager = ctx.broker.group_configs
    name = resource.resource_name or ""
    new = apply_ops(manager.overrides(name), resource.configs, type_of, lambda _name: None)
    manager.set_overrides(name, new, validate_only)


def _alter_one(ctx: RequestContext, resource: Any, validate_only: bool) -> None:
    if resource.resource_type == CLIENT_METRICS:
        _alter_client_metrics(ctx, resource, validate_only)
    elif resource.resource_type == GROUP_CONFIGS:
        _alter_group(ctx, resource, validate_only)
    elif resource.resource_type == TOPIC:
        _alter_topic(ctx, resource, validate_only)
    elif resource.resource_type == BROKER:
        _alter_broker(ctx, resource, validate_only)
    elif resource.resource_type == BROKER_LOGGER:
        _alter_loggers(ctx, resource, validate_only)
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {resource.resource_type}")


async def handle(ctx: RequestContext, request: Any) -> Any:
    results = alter_resources(ctx, request, _alter_one)
    return response_cls(ctx)(throttle_time_ms=0, responses=results)
