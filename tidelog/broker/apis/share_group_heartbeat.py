"""ShareGroupHeartbeat (key 76, KIP-932): join, heartbeat and leave of share-group members; the logic is
tidelog.coordinator.share.coordinator (Kafka's GroupMetadataManager.shareGroupHeartbeat)."""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.broker.apis._shared import check_group, response_cls, share_groups
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import TOPIC, Op, authorized_names

API_KEY = 76
NOTES = """KIP-932 share groups (`coordinator/share/`): client-chosen member ids, member and group epochs without
revocation, Kafka's `simple` assignor (a partition shared by ceil(members/partitions) members),
`share.session.timeout.ms` / `share.heartbeat.interval.ms` (group configs over `group.share.*`),
`group.share.max.size`; a subscribed partition is assignable at once (Kafka initializes its share state first and
assigns it a heartbeat later); members are not kept across a restart (they rejoin). UNSUPPORTED_VERSION while
`share.version` is 0. Own codec from Kafka's JSON schemas (`protocol/share.py`). A failed state write:
UNKNOWN_SERVER_ERROR, the change kept in memory (Kafka reverts it) and retried"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)

    def error(code: int, message: str | None) -> Any:
        return cls(throttle_time_ms=0, error_code=code, error_message=message, member_id=None, member_epoch=0,
                   heartbeat_interval_ms=0, assignment=None)

    try:
        groups = share_groups(ctx)
        check_group(ctx, Op.READ, request.group_id)  # KafkaApis.handleShareGroupHeartbeat
        subscribed = request.subscribed_topic_names
        if subscribed:
            # Topics the member may not DESCRIBE: TOPIC_AUTHORIZATION_FAILED, no message (KafkaApis)
            if len(authorized_names(ctx, Op.DESCRIBE, TOPIC, set(subscribed))) < len(set(subscribed)):
                return error(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
        result = groups.heartbeat(request.group_id or "", request.member_id or "", request.member_epoch,
                                  request.rack_id, subscribed, ctx.client_id or "", "/" + ctx.client_host)
        await groups.durable()  # the group and its epoch are on disk before the answer (written off the loop)
    except KafkaError as e:
        return error(e.code, e.message)
    assignment = None
    if result.assignment is not None:
        A = cls.Assignment
        assignment = A(topic_partitions=[A.TopicPartitions(topic_id=uuid.UUID(bytes=t), partitions=sorted(ps))
                                         for t, ps in sorted(result.assignment.items()) if ps])
    return cls(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, member_id=result.member_id,
               member_epoch=result.member_epoch, heartbeat_interval_ms=result.heartbeat_interval_ms,
               assignment=assignment)
