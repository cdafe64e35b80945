"""ListPartitionReassignments (key 46, KIP-455): a single node never has a reassignment in progress, so the
answer is always the empty list (for named partitions too, as Kafka lists only ongoing ones)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import response_cls
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.security.authorizer import Op, authorize_cluster

API_KEY = 46
NOTES = """always empty: nothing is ever being reassigned"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    if not authorize_cluster(ctx, Op.DESCRIBE):
        return cls(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None,
                   topics=[])
    return cls(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, topics=[])
