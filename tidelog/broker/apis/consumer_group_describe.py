"""ConsumerGroupDescribe (key 69, KIP-848): consumer groups with epochs, assignor, and each member's current
and target assignment. Classic or unknown groups are GROUP_ID_NOT_FOUND (the Java admin then falls back to
DescribeGroups)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import (
    GROUP_OPERATIONS,
    consumer_groups,
    consumer_protocol_enabled,
    response_cls,
)
from tidelog.broker.context import RequestContext
from tidelog.coordinator.group.consumer.assignors import Assignment
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import GROUP, Op, authorize, authorized_operations, to_32_bit_field

API_KEY = 69
NOTES = """v1 MemberType (KIP-1099: 0 classic, 1 consumer); epochs, assignor, each member's current and target
assignment; classic or unknown groups GROUP_ID_NOT_FOUND (the Java admin then falls back to DescribeGroups);
authorized operations as DescribeGroups'. Own codec as for 68; UNSUPPORTED_VERSION for every group while
`group.version` is 0"""

OPERATIONS_OMITTED = -(2**31)
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1  # KIP-1099 MemberType


def _assignment(ctx: RequestContext, cls: Any, assignment: Assignment) -> Any:
    A = cls.DescribedGroup.Member.Assignment
    parts = []
    for topic_id, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])):
        if not ps:
            continue
        info = ctx.broker.topics.by_id(topic_id.bytes)
        parts.append(A.TopicPartitions(topic_id=topic_id, topic_name=info.name if info is not None else "",
                                       partitions=sorted(ps)))
    return A(topic_partitions=parts)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    D = cls.DescribedGroup
    out = []
    enabled = consumer_protocol_enabled(ctx)  # KafkaApis.isConsumerGroupProtocolEnabled, checked first
    for group_id in request.group_ids or []:
        def error(code: int, message: str | None, gid: str = group_id) -> Any:
            return D(error_code=code, error_message=message, group_id=gid, group_state="", group_epoch=0,
                     assignment_epoch=0, assignor_name="", members=[], authorized_operations=OPERATIONS_OMITTED)

        if not enabled:  # ConsumerGroupDescribeRequest.getErrorResponse: the error for each group named
            out.append(error(ErrorCode.UNSUPPORTED_VERSION, None))
            continue
        if not group_id:
            out.append(error(ErrorCode.INVALID_GROUP_ID, None))
            continue
        if not authorize(ctx, Op.DESCRIBE, GROUP, group_id):  # KafkaApis.handleConsumerGroupDescribe
            out.append(error(ErrorCode.GROUP_AUTHORIZATION_FAILED, None))
            continue
        try:
            coordinator = consumer_groups(ctx)
        except KafkaError as e:
            out.append(error(e.code, e.message))
            continue
        group = coordinator.describe(group_id)
        if group is None:
            classic = coordinator.classic.describe_group(group_id)
            streams = coordinator.classic.streams_groups
            other = (classic is not None and classic.protocol_type is not None) or \
                (streams is not None and streams.is_streams_group(group_id))
            message = f"Group {group_id} is not a consumer group." if other else f"Group {group_id} not found."
            out.append(error(ErrorCode.GROUP_ID_NOT_FOUND, message))
            continue
        members = [cls.DescribedGroup.Member(
            member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
            client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
            subscribed_topic_regex=m.subscribed_topic_regex, assignment=_assignment(ctx, cls, m.assigned_partitions()),
            target_assignment=_assignment(ctx, cls, group.target.get(m.member_id, {})),
            member_type=CLASSIC_MEMBER if m.classic is not None else CONSUMER_MEMBER)  # v1, KIP-1099
            for m in group.members.values()]
        ops = to_32_bit_field(authorized_operations(ctx, GROUP, group_id, GROUP_OPERATIONS)) \
            if request.include_authorized_operations else OPERATIONS_OMITTED
        out.append(D(error_code=ErrorCode.NONE, error_message=None, group_id=group_id,
                     group_state=group.state.value, group_epoch=group.group_epoch,
                     assignment_epoch=group.assignment_epoch, assignor_name=coordinator.assignor_name(group),
                     members=members, authorized_operations=ops))
    return cls(throttle_time_ms=0, groups=out)
