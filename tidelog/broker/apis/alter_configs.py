"""AlterConfigs (key 33), v0-2: the legacy API that *replaces* a resource's whole override set.

Also holds the validation/apply helpers IncrementalAlterConfigs shares.
"""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import (
    BROKER,
    BROKER_LOGGER,
    GROUP_CONFIGS,
    TOPIC,
    alter_resources,
    apply_broker_configs,
    apply_topic_overrides,
    check_broker_name,
    response_cls,
)
from tidelog.broker.client_metrics import CLIENT_METRICS
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError

API_KEY = 33
NOTES = """replaces the whole override set of the resource, as Kafka: TOPIC, BROKER, CLIENT_METRICS and GROUP
(BROKER_LOGGER only through IncrementalAlterConfigs)"""


def _null_check(config: Any) -> str:
    if config.value is None:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {config.name}")
    return str(config.value)


def _alter_one(ctx: RequestContext, resource: Any, validate_only: bool) -> None:
    values = {c.name: _null_check(c) for c in resource.configs or []}
    if resource.resource_type == TOPIC:
        apply_topic_overrides(ctx, resource.resource_name, values, validate_only)
    elif resource.resource_type == BROKER:
        per_broker = check_broker_name(ctx, resource.resource_name)
        apply_broker_configs(ctx, per_broker, values, validate_only, values)
    elif resource.resource_type == CLIENT_METRICS:
        ctx.broker.client_metrics.set_configs(resource.resource_name or "", values, validate_only)
    elif resource.resource_type == GROUP_CONFIGS:
        ctx.broker.group_configs.set_overrides(resource.resource_name or "", values, validate_only)
    elif resource.resource_type == BROKER_LOGGER:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, "AlterConfigs is deprecated and does not support the resource type BROKER_LOGGER"
        )
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {resource.resource_type}")


async def handle(ctx: RequestContext, request: Any) -> Any:
    results = alter_resources(ctx, request, _alter_one)
    return response_cls(ctx)(throttle_time_ms=0, responses=results)
