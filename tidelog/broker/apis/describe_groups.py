"""DescribeGroups (key 15) (Kafka's GroupCoordinator), v0-6. Metadata and assignments are shown only when Stable."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import check_group, coordinator
from tidelog.broker.context import RequestContext
from tidelog.coordinator.group import GroupState
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import GROUP, Op, authorized_operations

API_KEY = 15
NOTES = """an unknown group is Dead; v6 adds GROUP_ID_NOT_FOUND and `error_message` for it (KIP-1043); a
KIP-848, streams or share group is described the same way ("is not a classic group"); v3+ authorized operations: the
principal's allowed ones with an authorizer (INT32_MIN on GROUP_AUTHORIZATION_FAILED, as Kafka),
READ/DELETE/DESCRIBE without one"""

# kafka-python encodes the bitfield from a set of AclOperation codes; None is INT32_MIN ("not requested").
AUTHORIZED_OPERATIONS_OMITTED = None
GROUP_OPERATIONS = frozenset({3, 6, 8})  # READ, DELETE, DESCRIBE (= 328): all a group allows without an authorizer


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    cls = response_class(API_KEY)[version]
    D = cls.DescribedGroup
    want_ops = version >= 3 and bool(request.include_authorized_operations)
    described = []
    for group_id in request.groups or []:
        ops = authorized_operations(ctx, GROUP, group_id, GROUP_OPERATIONS) if want_ops \
            else AUTHORIZED_OPERATIONS_OMITTED
        try:
            check_group(ctx, Op.DESCRIBE, group_id)
            group = coordinator(ctx).describe_group(group_id)
        except KafkaError as e:
            denied = e.code == ErrorCode.GROUP_AUTHORIZATION_FAILED  # Kafka's groupError leaves the default
            described.append(D(error_code=e.code, group_id=group_id, group_state="", protocol_type="",
                               protocol_data="", members=[],
                               authorized_operations=AUTHORIZED_OPERATIONS_OMITTED if denied else ops))
            continue
        consumer = coordinator(ctx).consumer_groups
        share = coordinator(ctx).share_groups
        streams = coordinator(ctx).streams_groups
        not_classic = (consumer is not None and consumer.is_consumer_group(group_id)) or \
            (share is not None and share.is_share_group(group_id)) or \
            (streams is not None and streams.is_streams_group(group_id))
        if group is None or not_classic:
            # Kafka's GroupMetadataManager.describeGroups: an unknown group, or one that is not classic, is Dead;
            # v0-5 with no error, v6+ with GROUP_ID_NOT_FOUND and the exception's message (KIP-1043).
            missing = version >= 6
            message = f"Group {group_id} is not a classic group." if not_classic else f"Group {group_id} not found."
            described.append(D(error_code=ErrorCode.GROUP_ID_NOT_FOUND if missing else ErrorCode.NONE,
                               error_message=message if missing else None,
                               group_id=group_id, group_state=GroupState.DEAD.value,
                               protocol_type="", protocol_data="", members=[], authorized_operations=ops))
            continue
        stable = group.is_(GroupState.STABLE)
        protocol = group.protocol_name if stable and group.protocol_name else ""
        members = [D.DescribedGroupMember(
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host, member_metadata=m.metadata(protocol) if stable else b"",
            member_assignment=m.assignment if stable else b"") for m in group.members.values()]
        described.append(D(error_code=ErrorCode.NONE, group_id=group_id, group_state=group.state.value,
                           protocol_type=group.protocol_type or "", protocol_data=protocol, members=members,
                           authorized_operations=ops))
    return cls(throttle_time_ms=0, groups=described)
