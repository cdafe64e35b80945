"""ListConfigResources (key 74), v0-1: v0 was ListClientMetricsResources (KIP-714, client-metrics
subscriptions only); v1 (KIP-1142) lists every config resource the cluster knows, filtered by type."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import BROKER, BROKER_LOGGER, GROUP_CONFIGS, TOPIC
from tidelog.broker.client_metrics import CLIENT_METRICS
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import Op, authorize_cluster

API_KEY = 74
NOTES = """v0 was ListClientMetricsResources (KIP-714): CLIENT_METRICS subscriptions. v1 (KIP-1142): an empty
type list means every type; lists the groups with configs of their own (existing or not), the CLIENT_METRICS
subscriptions, this broker (BROKER_LOGGER and BROKER, by node id) and every topic, internal ones included. Needs
DESCRIBE_CONFIGS on the cluster"""
# ListConfigResourcesRequest.supportedResourceTypes: a new type takes a new version.
_SUPPORTED = {0: frozenset({CLIENT_METRICS}), 1: frozenset({TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP_CONFIGS})}


async def handle(ctx: RequestContext, request: Any) -> Any:
    response_cls = response_class(API_KEY)
    version = ctx.api_version

    def answer(error: ErrorCode, resources: list[tuple[str, int]]) -> Any:
        return response_cls[version](
            throttle_time_ms=0, error_code=int(error),
            config_resources=[response_cls.ConfigResource(resource_name=name, resource_type=kind)
                              for name, kind in resources])

    if not authorize_cluster(ctx, Op.DESCRIBE_CONFIGS):  # KafkaApis: DESCRIBE_CONFIGS on the cluster
        return answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    supported = _SUPPORTED[version]
    asked = frozenset(request.resource_types or []) if version >= 1 else frozenset()
    if asked - supported:
        return answer(ErrorCode.UNSUPPORTED_VERSION, [])
    types = asked or supported
    # Kafka's order (KafkaApis.handleListConfigResources): groups, client metrics, broker loggers, brokers, topics.
    broker = ctx.broker
    node = str(broker.node_id)
    resources: list[tuple[str, int]] = []
    if GROUP_CONFIGS in types:  # groups with configs of their own, existing or not (KIP-1142)
        resources += [(name, GROUP_CONFIGS) for name in broker.group_configs.group_ids()]
    if CLIENT_METRICS in types:
        resources += [(name, CLIENT_METRICS) for name in broker.client_metrics.names()]
    if BROKER_LOGGER in types:
        resources.append((node, BROKER_LOGGER))
    if BROKER in types:
        resources.append((node, BROKER))
    if TOPIC in types:
        resources += [(name, TOPIC) for name in broker.topics.names()]
    return answer(ErrorCode.NONE, resources)
