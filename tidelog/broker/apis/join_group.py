"""JoinGroup (key 11): parked until the rebalance completes (Kafka's classic GroupCoordinator)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import check_group, coordinator
from tidelog.broker.context import RequestContext
from tidelog.coordinator.group.classic.member import JoinResult
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import Op

API_KEY = 11
NOTES = """v0 kept for librdkafka's feature checks (KAFKA-19444); a classic consumer joining a live KIP-848
group becomes its member (answered at once, no leader); a share or streams group's id: INCONSISTENT_GROUP_PROTOCOL"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    try:
        check_group(ctx, Op.READ, request.group_id)
        groups = coordinator(ctx)
        args = dict(
            group_id=request.group_id,
            member_id=request.member_id or "",
            group_instance_id=request.group_instance_id if version >= 5 else None,
            client_id=ctx.client_id or "",
            client_host=ctx.client_host,
            session_timeout_ms=request.session_timeout_ms,
            # v0 has no rebalance timeout: Kafka uses the session timeout for it
            rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=[(p.name or "", bytes(p.metadata or b"")) for p in request.protocols or []],
            # KIP-394: v4+ dynamic members must first obtain a member id
            require_known_member_id=version >= 4 and not (version >= 5 and request.group_instance_id),
        )
        share, streams = groups.share_groups, groups.streams_groups
        other_type = (share is not None and share.is_share_group(request.group_id)) or \
            (streams is not None and streams.is_streams_group(request.group_id))
        if other_type and \
                groups.config.group_min_session_timeout_ms <= request.session_timeout_ms \
                <= groups.config.group_max_session_timeout_ms:
            # GroupMetadataManager.classicGroupJoin: the id is a share or streams group's (after the session timeout)
            return build_response(version, JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ""))
        consumer = groups.consumer_groups
        if consumer is not None and consumer.is_consumer_group(request.group_id):
            # GroupMetadataManager.classicGroupJoin: a live consumer group takes the classic member in; an empty
            # one becomes a classic group first
            if not consumer.groups[request.group_id].is_empty():
                return build_response(version, consumer.classic_members.join(
                    args["group_id"], args["member_id"], args["group_instance_id"], args["client_id"],
                    "/" + ctx.client_host, args["session_timeout_ms"], args["rebalance_timeout_ms"],
                    args["protocol_type"], args["protocols"], args["require_known_member_id"]))
            error = consumer.before_classic_join(request.group_id, request.protocol_type)
            if error != ErrorCode.NONE:
                raise KafkaError(ErrorCode(error))
        result = await groups.join_group(**args, supports_skip_assignment=version >= 9)
    except KafkaError as e:
        result = JoinResult(e.code, request.member_id or "")
    return build_response(version, result)


def build_response(version: int, result: JoinResult) -> Any:
    cls = response_class(API_KEY)[version]
    ok = result.error == ErrorCode.NONE
    protocol_name = result.protocol_name if ok else None
    if version < 7 and protocol_name is None:
        protocol_name = ""  # non-nullable before v7
    members = [cls.JoinGroupResponseMember(member_id=mid, group_instance_id=iid, metadata=meta)
               for mid, iid, meta in result.members]
    return cls(
        throttle_time_ms=0,
        error_code=result.error,
        generation_id=result.generation_id if ok else -1,
        protocol_type=result.protocol_type if ok else None,
        protocol_name=protocol_name,
        leader=result.leader_id if ok else "",
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=members,
    )
