"""SyncGroup (key 14): followers wait for the leader's assignment (Kafka's classic GroupCoordinator)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import check_group, coordinator
from tidelog.broker.context import RequestContext
from tidelog.coordinator.group.classic.member import SyncResult
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import Op

API_KEY = 14
NOTES = """followers wait for the leader's assignment; a classic member of a KIP-848 consumer group syncs through
the consumer group"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    try:
        check_group(ctx, Op.READ, request.group_id)
        groups = coordinator(ctx)
        consumer = groups.consumer_groups
        if consumer is not None and consumer.is_consumer_group(request.group_id):
            result = consumer.classic_members.sync(
                request.group_id, request.member_id, request.group_instance_id if version >= 3 else None,
                request.generation_id, request.protocol_type if version >= 5 else None,
                request.protocol_name if version >= 5 else None)
        else:
            result = await groups.sync_group(
                group_id=request.group_id,
                generation_id=request.generation_id,
                member_id=request.member_id,
                group_instance_id=request.group_instance_id if version >= 3 else None,
                protocol_type=request.protocol_type if version >= 5 else None,
                protocol_name=request.protocol_name if version >= 5 else None,
                assignments={a.member_id: bytes(a.assignment or b"") for a in request.assignments or []},
            )
    except KafkaError as e:
        result = SyncResult(e.code)
    cls = response_class(API_KEY)[version]
    ok = result.error == ErrorCode.NONE
    return cls(throttle_time_ms=0, error_code=result.error,
               protocol_type=result.protocol_type if ok else None,
               protocol_name=result.protocol_name if ok else None,
               assignment=result.assignment if ok else b"")
