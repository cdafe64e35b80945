"""DescribeTopicPartitions (key 75, KIP-966): Metadata's topic view with cursor pagination, as Kafka's
DescribeTopicPartitionsRequestHandler: topics sorted by name (all topics when none are named), at most
min(ResponsePartitionLimit, max.request.partition.size.limit) partitions per response, NextCursor pointing at
the first partition left out. One node: every partition's leader, replicas and ISR are this node; the
eligible-leader lists are empty."""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.broker.apis._shared import TOPIC_OPERATIONS, response_cls
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.security.authorizer import TOPIC, Op, authorized_names, authorized_operations, to_32_bit_field
from tidelog.storage import TopicPartition

API_KEY = 75
NOTES = """KIP-966: topics sorted by name, cursor pagination, at most min(ResponsePartitionLimit, 2000)
partitions per response; topic authorized operations as Metadata's"""

MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000  # Kafka's max.request.partition.size.limit default
OPERATIONS_OMITTED = -(2**31)
ZERO_UUID = uuid.UUID(int=0)
# Kafka fills in the authorized operations of every described topic (no include flag in v0)


def _limit(requested: int) -> int:
    """Kafka caps ResponsePartitionLimit at max.request.partition.size.limit (default 2000, not configurable
    here)."""
    cap = MAX_REQUEST_PARTITION_SIZE_LIMIT
    return max(1, min(requested, cap)) if requested > 0 else cap


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    T = cls.DescribeTopicPartitionsResponseTopic
    P = T.DescribeTopicPartitionsResponsePartition
    topics = ctx.broker.topics
    requested = [t.name for t in request.topics or []]
    names = sorted(set(requested)) if requested else sorted(topics.names())
    cursor = request.cursor
    start_partition = 0
    if cursor is not None:
        if requested and cursor.topic_name not in names:
            # Kafka throws InvalidRequestException ("topic list should contain the cursor topic"); the error
            # response (DescribeTopicPartitionsRequest.getErrorResponse) flags every requested topic.
            return cls(throttle_time_ms=0, next_cursor=None, topics=[
                T(error_code=ErrorCode.INVALID_REQUEST, name=n, topic_id=ZERO_UUID, is_internal=False,
                  partitions=[], topic_authorized_operations=OPERATIONS_OMITTED) for n in requested])
        names = [n for n in names if n >= cursor.topic_name]
        start_partition = max(0, cursor.partition_index)
    # KafkaApis: DESCRIBE per topic; named topics the principal may not describe answer
    # TOPIC_AUTHORIZATION_FAILED, "all topics" leaves them out
    visible = authorized_names(ctx, Op.DESCRIBE, TOPIC, set(names))
    if not requested:
        names = [n for n in names if n in visible]
    remaining = _limit(request.response_partition_limit)
    node = ctx.broker.node_id
    out: list[Any] = []
    next_cursor = None
    for name in names:
        info = topics.get(name)
        if info is not None and name not in visible:
            out.append(T(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=ZERO_UUID,
                         is_internal=False, partitions=[], topic_authorized_operations=OPERATIONS_OMITTED))
            continue
        if info is None:
            out.append(T(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=ZERO_UUID,
                         is_internal=False, partitions=[], topic_authorized_operations=OPERATIONS_OMITTED))
            continue
        first = start_partition if cursor is not None and name == cursor.topic_name else 0
        if remaining <= 0:
            next_cursor = cls.Cursor(topic_name=name, partition_index=first)
            break
        parts = []
        p = first
        while p < info.partitions and remaining > 0:
            lg = ctx.broker.log_manager.get_log(TopicPartition(name, p))
            parts.append(P(error_code=ErrorCode.NONE, partition_index=p, leader_id=node,
                           leader_epoch=lg.leader_epoch if lg is not None else 0, replica_nodes=[node],
                           isr_nodes=[node], eligible_leader_replicas=[], last_known_elr=[],
                           offline_replicas=[]))
            p += 1
            remaining -= 1
        out.append(T(error_code=ErrorCode.NONE, name=name, topic_id=uuid.UUID(bytes=bytes(info.topic_id)),
                     is_internal=bool(info.internal), partitions=parts,
                     topic_authorized_operations=to_32_bit_field(
                         authorized_operations(ctx, TOPIC, name, TOPIC_OPERATIONS))))
        if p < info.partitions:
            next_cursor = cls.Cursor(topic_name=name, partition_index=p)
            break
    return cls(throttle_time_ms=0, topics=out, next_cursor=next_cursor)
