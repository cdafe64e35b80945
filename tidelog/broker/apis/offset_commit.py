"""OffsetCommit (key 8) (Kafka's GroupMetadataManager). Served from v2 (Kafka 4.0 removed v0-1). v10 names topics
by id (KIP-848): an unknown id answers UNKNOWN_TOPIC_ID for each of its partitions, as KafkaApis does."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import coordinator, topic_by_id
from tidelog.broker.context import RequestContext
from tidelog.config.definitions import LONG_MAX
from tidelog.coordinator.group import OffsetAndMetadata
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import GROUP, TOPIC, Op, authorize
from tidelog.storage import TopicPartition

API_KEY = 8
NOTES = """classic groups; simple (generation −1) commits for `assign()` users; v10 names topics by id
(unknown id: UNKNOWN_TOPIC_ID per partition); KIP-848 groups: member epoch as generation (STALE_MEMBER_EPOCH,
UNKNOWN_MEMBER_ID; v9+ for consumer-protocol members, classic members of a consumer group: ILLEGAL_GENERATION);
a consumer-protocol member's older epoch is accepted when every partition is one it holds since that epoch or before
(KIP-1251 assignment epochs), else STALE_MEMBER_EPOCH for the request; a share group's id: GROUP_ID_NOT_FOUND"""


def _partition_exists(ctx: RequestContext, tp: TopicPartition) -> bool:
    info = ctx.broker.topics.get(tp.topic)
    return info is not None and 0 <= tp.partition < info.partitions


def _name_for_id(ctx: RequestContext, topic_id: Any) -> str | None:
    info = topic_by_id(ctx, topic_id)
    return None if info is None else info.name


def _expire_timestamp(now: int, retention: int | None) -> int:
    """When an offset committed with OffsetCommit v2-4's retention_time_ms expires (Kafka's
    OffsetMetadataManager.expireTimestampMs): -1 asks for the broker's offsets.retention.minutes (no explicit
    expiry, -1 here too); any other value expires it at now + retention in Java's 64-bit arithmetic, so a
    negative retention, or one that wraps past Long.MAX_VALUE, is an expiry already passed: 0 here, which the
    next retention check removes as Kafka's does."""
    if retention is None or retention == -1:
        return -1
    expire = now + retention
    return expire if 0 <= expire <= LONG_MAX else 0  # past Long.MAX_VALUE Java's sum wraps to a negative time


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    cls = response_class(API_KEY)[version]
    now = ctx.broker.clock.milliseconds()
    expire = _expire_timestamp(now, request.retention_time_ms if 2 <= version <= 4 else -1)
    order: list[tuple[str, list[int]]] = []
    errors: dict[TopicPartition, int] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    # KafkaApis.handleOffsetCommitRequest: READ on the group, then READ per topic
    group_ok = authorize(ctx, Op.READ, GROUP, request.group_id or "")
    ids: dict[str, Any] = {}  # v10: the name each entry was resolved to -> the topic id asked for
    for index, topic in enumerate(request.topics or []):
        name = topic.name if version < 10 else _name_for_id(ctx, topic.topic_id)
        unknown_id = name is None
        if name is None:
            name = f"\0unknown-{index}"  # keeps this entry's partitions apart from every real topic
        if version >= 10:
            ids[name] = topic.topic_id
        order.append((name, [p.partition_index for p in topic.partitions or []]))
        readable = group_ok and (unknown_id or authorize(ctx, Op.READ, TOPIC, name))
        for p in topic.partitions or []:
            tp = TopicPartition(name, p.partition_index)
            if not group_ok:
                errors[tp] = ErrorCode.GROUP_AUTHORIZATION_FAILED
                continue
            if not readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if unknown_id:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            if not _partition_exists(ctx, tp):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            epoch = p.committed_leader_epoch if version >= 6 else -1
            offsets[tp] = OffsetAndMetadata(p.committed_offset, -1 if epoch is None else epoch,
                                            p.committed_metadata or "", now, expire)
    try:
        consumer = coordinator(ctx).consumer_groups if offsets else None
        share = coordinator(ctx).share_groups if offsets else None
    except KafkaError as e:  # COORDINATOR_LOAD_IN_PROGRESS for every partition while the coordinator loads
        errors.update(dict.fromkeys(offsets, e.code))
        offsets, consumer, share = {}, None, None
    if share is not None and share.is_share_group(request.group_id):
        # ShareGroup.validateOffsetCommit: "Group X is not a consumer group.", at every version
        errors.update(dict.fromkeys(offsets, ErrorCode.GROUP_ID_NOT_FOUND))
        offsets = {}
    streams = coordinator(ctx).streams_groups if offsets else None
    if streams is not None and streams.is_streams_group(request.group_id):
        # KIP-1071 group: StreamsGroup.validateOffsetCommit (the member epoch, OffsetCommit v9+)
        errors.update(streams.commit_offsets(request.group_id, request.member_id or "",
                                             request.generation_id_or_member_epoch, version, offsets))
    elif consumer is not None and consumer.is_consumer_group(request.group_id):
        # KIP-848 group: the member epoch is validated as the generation (ConsumerGroup.validateOffsetCommit)
        errors.update(consumer.commit_offsets(request.group_id, request.member_id or "",
                                              request.generation_id_or_member_epoch, version, offsets))
    elif offsets:
        try:
            errors.update(coordinator(ctx).commit_offsets(
                request.group_id, request.member_id or "",
                request.group_instance_id if version >= 7 else None,
                request.generation_id_or_member_epoch, offsets,
                unknown_group_error=ErrorCode.GROUP_ID_NOT_FOUND if version >= 9 else ErrorCode.ILLEGAL_GENERATION,
            ))
        except KafkaError as e:
            errors.update(dict.fromkeys(offsets, e.code))
    topics = []
    for name, partitions in order:
        topics.append(cls.OffsetCommitResponseTopic(name=name, topic_id=ids.get(name), partitions=[
            cls.OffsetCommitResponseTopic.OffsetCommitResponsePartition(
                partition_index=i, error_code=errors.get(TopicPartition(name, i), ErrorCode.NONE))
            for i in partitions]))
    return cls(throttle_time_ms=0, topics=topics)
