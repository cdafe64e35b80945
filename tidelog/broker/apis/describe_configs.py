"""DescribeConfigs (key 32), v1-4: TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS and GROUP resources (Kafka's
ConfigHelper)."""

from __future__ import annotations

import logging
from typing import Any

from tidelog.broker.apis._shared import (
    BROKER,
    BROKER_LOGGER,
    GROUP_CONFIGS,
    LOG_LEVELS,
    ROOT_LOGGER,
    TOPIC,
    check_broker_name,
    topic_info,
)
from tidelog.broker.client_metrics import (
    CLIENT_METRICS,
    DEFAULT_INTERVAL_MS,
    INTERVAL_MS_CONFIG,
    MATCH_CONFIG,
    METRICS_CONFIG,
    split_list,
)
from tidelog.broker.context import RequestContext
from tidelog.config import topic_config
from tidelog.config.config_entries import ConfigEntry, ConfigSynonym
from tidelog.config.definitions import ConfigSource, ConfigType
from tidelog.coordinator.group.group_config import GROUP_CONFIG_DEFS
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import check_config_resource

API_KEY = 32
NOTES = """TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS (all three configs of any subscription name, as Kafka
4.1+: stored ones with source CLIENT_METRICS_CONFIG, the rest DEFAULT_CONFIG); synonyms and sources as Kafka's
ConfigHelper. GROUP (KIP-848 group configs: all eleven of any group name, its own with source GROUP_CONFIG)"""


_LEVEL_NAMES = {v: k for k, v in LOG_LEVELS.items()}


def _logger_entries(names: list[str] | None) -> list[ConfigEntry]:
    loggers = {ROOT_LOGGER: logging.getLogger()}
    for logger_name, logger in logging.root.manager.loggerDict.items():
        if isinstance(logger, logging.Logger):
            loggers[logger_name] = logger
    entries = []
    for logger_name in sorted(loggers):
        if names and logger_name not in names:
            continue
        level = loggers[logger_name].getEffectiveLevel()
        entries.append(
            ConfigEntry(logger_name, _LEVEL_NAMES.get(level, logging.getLevelName(level)),
                        ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, type=ConfigType.STRING)
        )
    return entries


# ClientMetricsConfigs' configs: type, default as DescribeConfigs shows it, documentation.
_CLIENT_METRICS_DEFS = {
    METRICS_CONFIG: (ConfigType.LIST, "", "Prefixes of the metric names matching clients push ('*': every metric)."),
    INTERVAL_MS_CONFIG: (ConfigType.INT, str(DEFAULT_INTERVAL_MS), "How often matching clients push, in ms."),
    MATCH_CONFIG: (ConfigType.LIST, "", "Which clients the subscription selects: key=regex entries (none: all)."),
}


def _client_metrics_entries(ctx: RequestContext, name: str, keys: list[str] | None, include_synonyms: bool,
                            include_doc: bool) -> list[ConfigEntry]:
    """ConfigHelper since Kafka 4.1 (KAFKA-17516): every client-metrics config of the subscription, known or not;
    a stored one has source CLIENT_METRICS_CONFIG (and itself as synonym), the rest their DEFAULT_CONFIG value."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty")
    stored = ctx.broker.client_metrics.configs(name)
    entries = []
    for key, (kind, default, doc) in _CLIENT_METRICS_DEFS.items():
        if keys and key not in keys:
            continue
        if key in stored:  # as ConfigDef.convertToString gives the parsed value back
            raw = stored[key]
            value = ",".join(split_list(raw)) if kind == ConfigType.LIST else str(int(raw))
            source = ConfigSource.CLIENT_METRICS_CONFIG
            synonyms = (ConfigSynonym(key, value, source),) if include_synonyms else ()
        else:
            value, source, synonyms = default, ConfigSource.DEFAULT_CONFIG, ()
        entries.append(ConfigEntry(key, value, source, synonyms, type=kind, documentation=doc if include_doc else None))
    return entries


def _group_entries(ctx: RequestContext, name: str, keys: list[str] | None, include_synonyms: bool,
                   include_doc: bool) -> list[ConfigEntry]:
    """ConfigHelper.createGroupConfigEntry: every group config, whether or not the group exists; the group's own
    with source GROUP_CONFIG, the rest DEFAULT_CONFIG (the consumer ones following the broker's); each entry is
    its own one synonym."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
    manager = ctx.broker.group_configs
    own, values = manager.overrides(name), manager.values(name)
    entries = []
    for key, definition in GROUP_CONFIG_DEFS.items():
        if keys and key not in keys:
            continue
        value = str(values[key])
        source = ConfigSource.GROUP_CONFIG if key in own else ConfigSource.DEFAULT_CONFIG
        synonyms = (ConfigSynonym(key, value, source),) if include_synonyms else ()
        entries.append(ConfigEntry(key, value, source, synonyms, type=definition.type,
                                   documentation=definition.doc if include_doc else None))
    return entries


def _entries(ctx: RequestContext, resource: Any, include_synonyms: bool, include_doc: bool) -> list[ConfigEntry]:
    keys = list(resource.configuration_keys) if resource.configuration_keys else None
    if resource.resource_type == TOPIC:
        info = topic_info(ctx, resource.resource_name)
        return topic_config.describe(info.overrides, ctx.broker.config, include_synonyms, keys, include_doc)
    if resource.resource_type == BROKER:
        per_broker = check_broker_name(ctx, resource.resource_name)
        return ctx.broker.config.describe(per_broker, keys, include_synonyms, include_doc)
    if resource.resource_type == BROKER_LOGGER:
        check_broker_name(ctx, resource.resource_name, allow_default=False)
        return _logger_entries(keys)
    if resource.resource_type == CLIENT_METRICS:
        return _client_metrics_entries(ctx, resource.resource_name or "", keys, include_synonyms, include_doc)
    if resource.resource_type == GROUP_CONFIGS:
        return _group_entries(ctx, resource.resource_name or "", keys, include_synonyms, include_doc)
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {resource.resource_type}")


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    response_cls = response_class(API_KEY)
    result_cls = response_cls.DescribeConfigsResult
    entry_cls = result_cls.DescribeConfigsResourceResult
    synonym_cls = entry_cls.DescribeConfigsSynonym
    include_synonyms = bool(request.include_synonyms)
    include_doc = version >= 3 and bool(request.include_documentation)
    results: list[Any] = []
    for resource in request.resources or []:
        result = result_cls(
            error_code=0, error_message=None, resource_type=resource.resource_type,
            resource_name=resource.resource_name, configs=[],
        )
        try:
            check_config_resource(ctx, resource.resource_type, resource.resource_name or "", alter=False)
            entries = _entries(ctx, resource, include_synonyms, include_doc)
        except KafkaError as exc:
            result.error_code, result.error_message = int(exc.code), exc.message
            results.append(result)
            continue
        for entry in entries:
            fields: dict[str, Any] = dict(
                name=entry.name,
                value=entry.value,
                read_only=entry.read_only,
                config_source=int(entry.source),
                is_sensitive=entry.sensitive,
                synonyms=[synonym_cls(name=s.name, value=s.value, source=int(s.source)) for s in entry.synonyms],
            )
            if version >= 3:
                fields["config_type"] = int(entry.type)
                fields["documentation"] = entry.documentation
            result.configs.append(entry_cls(**fields))
        results.append(result)
    return response_cls[version](throttle_time_ms=0, results=results)
