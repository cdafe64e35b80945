"""LeaveGroup (key 13): one member (v0-2) or a batch with per-member errors (v3+) (KIP-345)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import check_group, coordinator
from tidelog.broker.context import RequestContext
from tidelog.coordinator.group import LeaveMember
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import Op

API_KEY = 13
NOTES = """v3+ batched members"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    cls = response_class(API_KEY)[version]
    if version >= 3:
        leaving = [LeaveMember(m.member_id or "", m.group_instance_id) for m in request.members or []]
    else:
        leaving = [LeaveMember(request.member_id or "")]
    top: int
    errors: list[int]
    try:
        check_group(ctx, Op.READ, request.group_id)
        consumer = coordinator(ctx).consumer_groups
        if consumer is not None and consumer.is_consumer_group(request.group_id):
            top, errors = ErrorCode.NONE, consumer.classic_members.leave(request.group_id, leaving)
        else:
            top, errors = coordinator(ctx).leave_group(request.group_id, leaving)
    except KafkaError as e:
        top, errors = e.code, [int(ErrorCode.NONE)] * len(leaving)
    if version < 3:
        # a single member: its error is the response's error (Kafka's LeaveGroupResponse for v0-2)
        error = top if top != ErrorCode.NONE else (errors[0] if errors else ErrorCode.NONE)
        return cls(throttle_time_ms=0, error_code=error)
    members = [cls.MemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=err)
               for m, err in zip(leaving, errors, strict=True)]
    return cls(throttle_time_ms=0, error_code=top, members=members)
