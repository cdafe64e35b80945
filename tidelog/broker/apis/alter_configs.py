"""AlterConfigs (key 33), v0-2: the legacy API that *replaces* a resource's whole override set.

Also holds the validation/apply helpers IncrementalAlterConfigs shares.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from tidelog.broker.apis.describe_configs import BROKER, BROKER_LOGGER, TOPIC, check_broker_name, topic_info
from tidelog.broker.context import RequestContext
from tidelog.config.broker_config import ReadOnlyConfigError, UnknownConfigError
from tidelog.config.definitions import ConfigError
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import check_config_resource

API_KEY = 33
MIN_VERSION = 0
MAX_VERSION = 2


def check_duplicate_keys(configs: Any) -> None:
    names = [c.name for c in configs or []]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")


def apply_topic_overrides(ctx: RequestContext, name: str, overrides: Mapping[str, str], validate_only: bool) -> None:
    topics = ctx.broker.topics
    topic_info(ctx, name)
    topics.check_overrides(name, overrides)
    if not validate_only:
        topics.set_overrides(name, dict(overrides))


def apply_broker_configs(ctx: RequestContext, per_broker: bool, values: Mapping[str, str], validate_only: bool) -> None:
    """Kafka accepts only dynamically updatable broker configs; a static one is INVALID_REQUEST
    (ConfigAdminManager turns the ConfigException into InvalidRequestException)."""
    try:
        ctx.broker.config.validate_dynamic(values)
        if not validate_only:
            ctx.broker.topics.set_broker_configs(per_broker, values)
    except UnknownConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    except ReadOnlyConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None
    except ConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid config value for resource: {exc}") from None


def alter_resources(
    ctx: RequestContext, request: Any, alter_one: Callable[[RequestContext, Any, bool], None]
) -> list[Any]:
    """Run `alter_one` per resource; build AlterConfigsResourceResponse entries (same shape in both APIs)."""
    result_cls = response_class(ctx.api_key).AlterConfigsResourceResponse
    counts = Counter((r.resource_type, r.resource_name) for r in request.resources)
    validate_only = bool(request.validate_only)
    results: list[Any] = []
    for resource in request.resources:
        result = result_cls(
            error_code=0, error_message=None, resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )
        try:
            if counts[(resource.resource_type, resource.resource_name)] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            check_config_resource(ctx, resource.resource_type, resource.resource_name or "", alter=True)
            check_duplicate_keys(resource.configs)
            alter_one(ctx, resource, validate_only)
        except KafkaError as exc:
            result.error_code, result.error_message = int(exc.code), exc.message
        results.append(result)
    return results


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
        apply_broker_configs(ctx, per_broker, values, validate_only)
    elif resource.resource_type == BROKER_LOGGER:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, "AlterConfigs is deprecated and does not support the resource type BROKER_LOGGER"
        )
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {resource.resource_type}")


async def handle(ctx: RequestContext, request: Any) -> Any:
    results = alter_resources(ctx, request, _alter_one)
    return response_class(API_KEY)[ctx.api_version](throttle_time_ms=0, responses=results)
