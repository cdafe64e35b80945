"""OffsetDelete (key 47): drop committed offsets of topics the group no longer subscribes to (§3.8)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import check_group, coordinator, response_cls
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import TOPIC, Op, authorized_names
from tidelog.storage import TopicPartition

API_KEY = 47
NOTES = """drops committed offsets of topics the group no longer subscribes to; DELETE on the group, READ per
topic (TOPIC_AUTHORIZATION_FAILED); a share group's id: GROUP_ID_NOT_FOUND; a live streams group's source topics:
GROUP_SUBSCRIBED_TO_TOPIC"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    T = cls.OffsetDeleteResponseTopic
    requested = [(t.name, [p.partition_index for p in t.partitions or []]) for t in request.topics or []]
    partitions = [TopicPartition(name, i) for name, idx in requested for i in idx]
    # KafkaApis.handleOffsetDeleteRequest: DELETE on the group, READ per topic
    readable = authorized_names(ctx, Op.READ, TOPIC, [name for name, _ in requested])
    denied = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in partitions if tp.topic not in readable}
    try:
        check_group(ctx, Op.DELETE, request.group_id)
        share = coordinator(ctx).share_groups
        if share is not None and share.is_share_group(request.group_id):  # ShareGroup.validateOffsetDelete
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {request.group_id} is not a consumer group.")
        streams = coordinator(ctx).streams_groups
        subscribed = streams.subscribed_topics(request.group_id) if streams is not None else set()
        busy = {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if tp.topic in subscribed}
        error, errors = coordinator(ctx).delete_offsets(request.group_id,
                                                        [tp for tp in partitions if tp not in denied and tp not in busy])
        errors = {**errors, **busy, **denied}
    except KafkaError as e:
        error, errors = e.code, {}
    if error != ErrorCode.NONE:
        return cls(throttle_time_ms=0, error_code=error, topics=[])
    return cls(throttle_time_ms=0, error_code=ErrorCode.NONE, topics=[
        T(name=name, partitions=[T.OffsetDeleteResponsePartition(
            partition_index=i, error_code=errors.get(TopicPartition(name, i), ErrorCode.NONE)) for i in idx])
        for name, idx in requested])
