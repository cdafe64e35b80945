"""DescribeCluster (key 60, KIP-700): this broker as the only broker and the controller. v1 endpoint type
(KIP-919), v2 `include_fenced_brokers` / `is_fenced` (KIP-1073): this node is registered and never fenced, so the
flag changes nothing."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import CLUSTER_OPERATIONS
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import cluster_authorized_operations

API_KEY = 60
NOTES = """v2 `include_fenced_brokers`: this node is never fenced (`is_fenced` false); cluster authorized
operations as Metadata's"""

BROKER_ENDPOINT = 1  # EndpointType.BROKER; 2 = CONTROLLER


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY)
    v = ctx.api_version
    broker = ctx.broker
    host, port = broker.advertised_endpoint(ctx.listener)
    error: int = ErrorCode.NONE
    message: str | None = None
    if v >= 1 and request.endpoint_type != BROKER_ENDPOINT:
        # Kafka: asking a broker listener for controller endpoints is MISMATCHED_ENDPOINT_TYPE (114).
        error, message = 114, "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
    fields: dict[str, Any] = {
        "throttle_time_ms": 0,
        "error_code": error,
        "error_message": message,
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "brokers": [] if error else [cls.DescribeClusterBroker(
            broker_id=broker.node_id, host=host, port=port, rack=None, is_fenced=False)],
        "authorized_operations": cluster_authorized_operations(ctx, CLUSTER_OPERATIONS)
        if request.include_cluster_authorized_operations else None,
    }
    if v >= 1:
        fields["endpoint_type"] = BROKER_ENDPOINT
    return cls[v](**fields)
