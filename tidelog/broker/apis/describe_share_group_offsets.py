"""DescribeShareGroupOffsets (key 90, KIP-932): each share-partition's start offset as last persisted, and (v1)
its lag (Kafka's KafkaApis.handleDescribeShareGroupOffsetsRequest, GroupCoordinatorService
.describeShareGroupOffsets / describeShareGroupAllOffsets)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from tidelog.broker.apis._shared import response_cls, share_groups
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import GROUP, TOPIC, Op, authorize, authorized_names
from tidelog.storage import TopicPartition

if TYPE_CHECKING:
    from tidelog.coordinator.share.coordinator import ShareGroupCoordinator

API_KEY = 90
NOTES = """StartOffset is the start offset as last persisted (-1 before the share-partition's first write, or for
an unknown topic, a partition out of range or one never initialized), LeaderEpoch the partition's (0 while
-1); null Topics: every partition the group has state for or its members subscribe to (topics the caller may not
DESCRIBE left out); named topics the caller may not DESCRIBE are TOPIC_AUTHORIZATION_FAILED per partition. v1
Lag = high watermark − StartOffset − DeliveryCompleteCount (records past the start already acknowledged or
archived; both as last written together, as Kafka's persisted summary), -1 while StartOffset is -1; Kafka reports -1 also between an AlterShareGroupOffsets and the
share-partition's next write (its DeliveryCompleteCount is unknown until then), tidelog the lag at once (0 for a
start past the high watermark). GROUP DESCRIBE per group; UNSUPPORTED_VERSION in each group while `share.version`
is 0"""

UNINITIALIZED = -1
DEFAULT_LEADER_EPOCH = 0  # PartitionFactory.DEFAULT_LEADER_EPOCH: what a never-written share-partition reports
ZERO_UUID = uuid.UUID(int=0)


def _summaries(groups: ShareGroupCoordinator, group_id: str) -> dict[tuple[bytes, int], tuple[int, int]]:
    """(topic id, partition) -> (persisted start offset, DeliveryCompleteCount) of the group's share-partitions
    (Kafka's ReadShareGroupStateSummary)."""
    return groups.state_summaries(group_id)


def _partition(ctx: RequestContext, P: Any, name: str, index: int, summary: tuple[int, int] | None) -> Any:
    log_obj = ctx.broker.topics.log(TopicPartition(name, index))
    if summary is None or summary[0] < 0 or log_obj is None:
        return P(partition_index=index, start_offset=UNINITIALIZED, leader_epoch=DEFAULT_LEADER_EPOCH,
                 lag=UNINITIALIZED, error_code=ErrorCode.NONE, error_message=None)
    start, done = summary
    return P(partition_index=index, start_offset=start, leader_epoch=log_obj.leader_epoch,
             lag=max(0, int(log_obj.high_watermark) - start - done), error_code=ErrorCode.NONE, error_message=None)


def _all_partitions(ctx: RequestContext, groups: ShareGroupCoordinator, group_id: str) -> dict[bytes, set[int]]:
    """Topics=null: the partitions the group has state for, and those of the topics its members subscribe to
    (Kafka's group coordinator initializes these at the subscription, with StartOffset -1)."""
    wanted: dict[bytes, set[int]] = {}
    for topic_id, partition in groups.start_offsets(group_id):
        wanted.setdefault(topic_id, set()).add(partition)
    group = groups.describe(group_id)
    for name in sorted(group.subscribed_topics()) if group is not None else []:
        info = ctx.broker.topics.get(name)
        if info is not None:
            wanted.setdefault(bytes(info.topic_id), set()).update(range(info.partitions))
    return wanted


def _group(ctx: RequestContext, cls: Any, groups: ShareGroupCoordinator, request_group: Any) -> Any:
    G = cls.DescribeShareGroupOffsetsResponseGroup
    T = G.DescribeShareGroupOffsetsResponseTopic
    P = T.DescribeShareGroupOffsetsResponsePartition
    group_id = request_group.group_id
    summaries = _summaries(groups, group_id)
    topics = ctx.broker.topics
    out: list[Any] = []
    if request_group.topics is None:
        named = {}
        for topic_id, partitions in _all_partitions(ctx, groups, group_id).items():
            info = topics.by_id(topic_id)
            if info is not None:  # a deleted topic has no name to report
                named[info.name] = (topic_id, partitions)
        visible = authorized_names(ctx, Op.DESCRIBE, TOPIC, named)  # the others are silently left out
        for name in sorted(visible):
            topic_id, partitions = named[name]
            out.append(T(topic_name=name, topic_id=uuid.UUID(bytes=topic_id), partitions=[
                _partition(ctx, P, name, p, summaries.get((topic_id, p))) for p in sorted(partitions)]))
        return G(group_id=group_id, topics=out, error_code=ErrorCode.NONE, error_message=None)
    requested = list(request_group.topics)
    visible = authorized_names(ctx, Op.DESCRIBE, TOPIC, {t.topic_name for t in requested})
    unknown: list[Any] = []
    denied: list[Any] = []
    for t in requested:
        indexes = list(t.partitions or [])
        if t.topic_name not in visible:
            denied.append(T(topic_name=t.topic_name, topic_id=ZERO_UUID, partitions=[
                P(partition_index=i, start_offset=UNINITIALIZED, leader_epoch=DEFAULT_LEADER_EPOCH,
                  lag=UNINITIALIZED, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                  error_message="Not authorized to describe the topic.") for i in indexes]))
            continue
        info = topics.get(t.topic_name)
        if info is None:
            # GroupCoordinatorService: no such topic is the absence of offsets, not an error
            unknown.append(T(topic_name=t.topic_name, topic_id=ZERO_UUID, partitions=[
                P(partition_index=i, start_offset=UNINITIALIZED, leader_epoch=DEFAULT_LEADER_EPOCH,
                  lag=UNINITIALIZED, error_code=ErrorCode.NONE, error_message=None) for i in indexes]))
            continue
        topic_id = bytes(info.topic_id)
        out.append(T(topic_name=info.name, topic_id=uuid.UUID(bytes=topic_id), partitions=[
            _partition(ctx, P, info.name, i, summaries.get((topic_id, i))) for i in indexes]))
    return G(group_id=group_id, topics=out + unknown + denied, error_code=ErrorCode.NONE, error_message=None)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    G = cls.DescribeShareGroupOffsetsResponseGroup
    out = []
    for request_group in request.groups or []:
        group_id = request_group.group_id
        try:
            groups = share_groups(ctx)
        except KafkaError as e:  # KafkaApis: UNSUPPORTED_VERSION in each group entry, no message
            out.append(G(group_id=group_id, topics=[], error_code=e.code, error_message=None))
            continue
        if not authorize(ctx, Op.DESCRIBE, GROUP, group_id):
            out.append(G(group_id=group_id, topics=[], error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                         error_message=None))
            continue
        if request_group.topics is not None and not request_group.topics:
            out.append(G(group_id=group_id, topics=[], error_code=ErrorCode.NONE, error_message=None))
            continue
        out.append(_group(ctx, cls, groups, request_group))
    return cls(throttle_time_ms=0, groups=out)
