"""ShareGroupDescribe (key 77, KIP-932): share groups with their epochs, the `simple` assignor and each member's
subscription and assignment (Kafka's GroupMetadataManager.shareGroupDescribe and KafkaApis)."""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.broker.apis._shared import GROUP_OPERATIONS, response_cls, share_groups
from tidelog.broker.context import RequestContext
from tidelog.coordinator.share.share_group import ASSIGNOR_NAME, Assignment, ShareGroup
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import (
    GROUP,
    TOPIC,
    Op,
    authorize,
    authorized_names,
    authorized_operations,
    to_32_bit_field,
)

API_KEY = 77
NOTES = """v1 (v0 was 4.0's early access): GroupState `Empty`/`Stable`, group and assignment epochs, assignor
`simple`, each member's client id and host, rack, subscribed topic names and assignment (ids and names; deleted
topics left out); GROUP DESCRIBE per group; a missing or non-share group is GROUP_ID_NOT_FOUND with Kafka's
message; a group with a member assigned a topic the caller may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED with no
members; UNSUPPORTED_VERSION for every group while `share.version` is 0"""

OPERATIONS_OMITTED = -(2**31)


def _assignment(ctx: RequestContext, cls: Any, assigned: Assignment) -> tuple[Any, set[str]]:
    """The member's Assignment and the names of its topics (ShareGroupMember.asShareGroupDescribeMember: a topic
    no longer in the metadata is left out)."""
    A = cls.DescribedGroup.Member.Assignment
    parts, names = [], set()
    for topic_id, ps in sorted(assigned.items()):
        info = ctx.broker.topics.by_id(topic_id)
        if info is None or not ps:
            continue
        names.add(info.name)
        parts.append(A.TopicPartitions(topic_id=uuid.UUID(bytes=topic_id), topic_name=info.name,
                                       partitions=sorted(ps)))
    return A(topic_partitions=parts), names


def _described(ctx: RequestContext, cls: Any, group: ShareGroup, include_ops: bool) -> Any:
    D = cls.DescribedGroup
    members, topics = [], set()
    for m in group.members.values():
        assignment, names = _assignment(ctx, cls, m.assigned)
        topics |= names
        members.append(D.Member(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                                client_id=m.client_id, client_host=m.client_host,
                                subscribed_topic_names=list(m.subscribed), assignment=assignment))
    if len(authorized_names(ctx, Op.DESCRIBE, TOPIC, topics)) < len(topics):
        # KafkaApis.handleShareGroupDescribe: clients may not see topics they cannot DESCRIBE
        return D(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                 error_message="The group has assigned topics the client is not authorized to describe.",
                 group_id=group.group_id, group_state="", group_epoch=0, assignment_epoch=0, assignor_name="",
                 members=[], authorized_operations=OPERATIONS_OMITTED)
    ops = to_32_bit_field(authorized_operations(ctx, GROUP, group.group_id, GROUP_OPERATIONS)) \
        if include_ops else OPERATIONS_OMITTED
    return D(error_code=ErrorCode.NONE, error_message=None, group_id=group.group_id, group_state=group.state,
             group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch, assignor_name=ASSIGNOR_NAME,
             members=members, authorized_operations=ops)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    D = cls.DescribedGroup

    def error(group_id: str, code: int, message: str | None = None) -> Any:
        return D(error_code=code, error_message=message, group_id=group_id, group_state="", group_epoch=0,
                 assignment_epoch=0, assignor_name="", members=[], authorized_operations=OPERATIONS_OMITTED)

    group_ids = list(request.group_ids or [])
    try:
        groups = share_groups(ctx)
    except KafkaError as e:  # ShareGroupDescribeRequest.getErrorResponse: the code for each group, no message
        return cls(throttle_time_ms=0, groups=[error(g, e.code) for g in group_ids])
    # KafkaApis: the groups the caller may not DESCRIBE come first, then the coordinator's answers
    denied = [g for g in group_ids if not authorize(ctx, Op.DESCRIBE, GROUP, g)]
    out = [error(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in denied]
    include_ops = bool(request.include_authorized_operations)
    for group_id in group_ids:
        if group_id in denied:
            continue
        if not group_id:
            out.append(error("", ErrorCode.INVALID_GROUP_ID))
            continue
        group = groups.describe(group_id)
        if group is None:
            message = f"Group {group_id} is not a share group." if groups.other_group_type(group_id) \
                else f"Share group {group_id} not found."
            out.append(error(group_id, ErrorCode.GROUP_ID_NOT_FOUND, message))
            continue
        out.append(_described(ctx, cls, group, include_ops))
    return cls(throttle_time_ms=0, groups=out)
