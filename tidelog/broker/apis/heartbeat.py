"""Heartbeat (key 12) (Kafka's classic GroupCoordinator)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import check_group, coordinator, response_cls
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import Op

API_KEY = 12
NOTES = """classic groups; a classic member of a KIP-848 consumer group heartbeats through the consumer group"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    try:
        check_group(ctx, Op.READ, request.group_id)
        consumer = coordinator(ctx).consumer_groups
        if consumer is not None and consumer.is_consumer_group(request.group_id):
            # a classic member of a KIP-848 group (GroupMetadataManager.classicGroupHeartbeatToConsumerGroup)
            return response_cls(ctx)(throttle_time_ms=0, error_code=consumer.classic_members
                .heartbeat(request.group_id, request.member_id,
                           request.group_instance_id if ctx.api_version >= 3 else None, request.generation_id))
        error = coordinator(ctx).heartbeat(
            request.group_id, request.member_id,
            request.group_instance_id if ctx.api_version >= 3 else None, request.generation_id)
    except KafkaError as e:
        # GroupCoordinatorService.heartbeat: while the group is still loading it answers NONE blindly
        error = ErrorCode.NONE if e.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else e.code
    return response_cls(ctx)(throttle_time_ms=0, error_code=error)
