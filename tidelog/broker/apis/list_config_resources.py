"""ListConfigResources (key 74), v0-1: v0 was ListClientMetricsResources (KIP-714, client-metrics
subscriptions only); v1 (KIP-1142) filters by resource types. This broker lists CLIENT_METRICS resources;
other types it keeps no named config resources for are answered empty."""

from __future__ import annotations

from typing import Any

from tidelog.broker.client_metrics import CLIENT_METRICS
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import Op, authorize_cluster

API_KEY = 74
NOTES = """v0 was ListClientMetricsResources (KIP-714); v1 resource-type filter (KIP-1142). Lists the
CLIENT_METRICS subscriptions; other types (topics, groups, brokers) are not listed yet. Needs DESCRIBE_CONFIGS
on the cluster"""
_TOPIC, _BROKER, _BROKER_LOGGER, _GROUP = 2, 4, 8, 32


async def handle(ctx: RequestContext, request: Any) -> Any:
    response_cls = response_class(API_KEY)
    version = ctx.api_version
    if not authorize_cluster(ctx, Op.DESCRIBE_CONFIGS):  # KafkaApis: DESCRIBE_CONFIGS on the cluster
        return response_cls[version](throttle_time_ms=0, error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                                     config_resources=[])
    types = set(request.resource_types or []) if version >= 1 else {CLIENT_METRICS}
    known = {CLIENT_METRICS, _TOPIC, _BROKER, _BROKER_LOGGER, _GROUP}
    if types - known:
        return response_cls[version](throttle_time_ms=0, error_code=int(ErrorCode.UNSUPPORTED_VERSION),
                                     config_resources=[])
    resources = []
    if not types or CLIENT_METRICS in types:
        resources = [response_cls.ConfigResource(resource_name=name, resource_type=CLIENT_METRICS)
                     for name in ctx.broker.client_metrics.names()]
    return response_cls[version](throttle_time_ms=0, error_code=0, config_resources=resources)
