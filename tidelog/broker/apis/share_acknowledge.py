"""ShareAcknowledge (key 79, KIP-932): a share-group member's acknowledgements outside a fetch, in its share
session (Kafka's KafkaApis.handleShareAcknowledgeRequest)."""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.broker.apis._shared import response_cls, share_member_request
from tidelog.broker.context import RequestContext
from tidelog.broker.share_acks import (
    Answer,
    PartitionKey,
    apply_acknowledgements,
    close_session,
    partition_acks,
)
from tidelog.broker.share_sessions import FINAL_EPOCH, INITIAL_EPOCH
from tidelog.protocol.errors import ErrorCode, KafkaError

API_KEY = 79
NOTES = """v1-2 (v2: renew acknowledgements, KIP-1222): epoch 0 is INVALID_SHARE_SESSION_EPOCH (a session is
opened by ShareFetch), -1 acknowledges and closes the session (its records are released); each partition's
acknowledgements all or none, persisted before the answer; a failed state write: UNKNOWN_SERVER_ERROR, the change
kept"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    v2 = ctx.api_version >= 2

    def respond(code: int, message: str | None, answers: dict[PartitionKey, Answer], lock_ms: int = 0) -> Any:
        T = cls.ShareAcknowledgeTopicResponse
        P = T.PartitionData
        by_topic: dict[bytes, list[Any]] = {}
        for (topic_id, partition), a in answers.items():
            by_topic.setdefault(topic_id, []).append(P(
                partition_index=partition, error_code=a.ack_error or 0, error_message=a.ack_message,
                current_leader=P.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)))
        fields: dict[str, Any] = dict(
            throttle_time_ms=0, error_code=code, error_message=message, node_endpoints=[],
            responses=[T(topic_id=uuid.UUID(bytes=t), partitions=ps) for t, ps in by_topic.items()])
        if v2:
            fields["acquisition_lock_timeout_ms"] = lock_ms
        return cls(**fields)

    try:
        groups = share_member_request(ctx, request)
    except KafkaError as e:
        return respond(e.code, e.message, {})
    epoch = request.share_session_epoch
    if epoch == INITIAL_EPOCH:
        return respond(ErrorCode.INVALID_SHARE_SESSION_EPOCH, None, {})
    found = ctx.broker.share_sessions.lookup(request.group_id, request.member_id, epoch)
    if isinstance(found, ErrorCode):
        return respond(found, None, {})
    if epoch != FINAL_EPOCH:
        found.advance()  # the same epoch counter as ShareFetch's
    answers: dict[PartitionKey, Answer] = {}
    renew = v2 and bool(request.is_renew_ack)
    await apply_acknowledgements(ctx, groups, request.group_id, request.member_id, partition_acks(request.topics or []),
                           renew, answers)
    if epoch == FINAL_EPOCH:
        await close_session(ctx, groups, found)
    return respond(ErrorCode.NONE, None, answers, groups.lock_duration_ms(request.group_id))
