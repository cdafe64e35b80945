"""OffsetFetch (key 9): one group (v1-7) or several (v8+) (Kafka's GroupMetadataManager). v10 names topics by id
(KIP-848), as KafkaApis does: an unknown requested id answers UNKNOWN_TOPIC_ID per partition, and the "all
topics" form leaves out topics that no longer exist (no id to name them by)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

from tidelog.broker.apis._shared import coordinator, topic_id_bytes
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import GROUP, TOPIC, Op, authorize, authorized_names
from tidelog.storage import TopicPartition

API_KEY = 9
NOTES = """v8+ batched groups; v10 by topic id (unknown id: UNKNOWN_TOPIC_ID per partition; "all topics"
leaves out deleted topics); v9+ member id/epoch checked for KIP-848 groups (STALE_MEMBER_EPOCH,
UNKNOWN_MEMBER_ID)"""


Partition = tuple[int, int, int, str, int]  # (partition, offset, leader_epoch, metadata, error)


def _fetch(ctx: RequestContext, group_id: str, topics: list[Any] | None, require_stable: bool = False,
           member: tuple[str | None, int] | None = None) -> tuple[int, list[tuple[str, list[Partition]]]]:
    """(group error, [(topic, [partition entries])]) in request order. With `require_stable` (v7+, KIP-447) a
    partition with offsets pending in an open transaction answers UNSTABLE_OFFSET_COMMIT; the client retries.
    `member` (v9+): the member id and epoch a KIP-848 member fetches with (ConsumerGroup.validateOffsetFetch)."""
    # KafkaApis.handleOffsetFetchRequest: DESCRIBE on the group; DESCRIBE per topic (requested topics the
    # principal may not describe answer TOPIC_AUTHORIZATION_FAILED, "all topics" leaves them out)
    if not authorize(ctx, Op.DESCRIBE, GROUP, group_id or ""):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    try:
        consumer = coordinator(ctx).consumer_groups
    except KafkaError as e:  # COORDINATOR_LOAD_IN_PROGRESS while the coordinator loads
        return e.code, []
    if member is not None and consumer is not None:
        error = consumer.validate_offset_fetch(group_id, member[0], member[1])
        streams = coordinator(ctx).streams_groups
        if streams is not None and streams.is_streams_group(group_id):  # StreamsGroup.validateOffsetFetch
            error = streams.validate_offset_fetch(group_id, member[0], member[1])
        if error != ErrorCode.NONE:
            return error, []
    partitions = None
    denied: list[TopicPartition] = []
    if topics is not None:
        partitions = [TopicPartition(t.name, i) for t in topics for i in t.partition_indexes or []]
        describable = authorized_names(ctx, Op.DESCRIBE, TOPIC, {tp.topic for tp in partitions})
        denied = [tp for tp in partitions if tp.topic not in describable]
        partitions = [tp for tp in partitions if tp.topic in describable]
    try:
        groups = coordinator(ctx)
        error, offsets = groups.fetch_offsets(group_id, partitions)
    except KafkaError as e:
        return e.code, []
    if topics is None:
        describable = authorized_names(ctx, Op.DESCRIBE, TOPIC, {tp.topic for tp in offsets})
        offsets = {tp: om for tp, om in offsets.items() if tp.topic in describable}
    by_topic: dict[str, list[Partition]] = defaultdict(list)
    for tp, om in offsets.items():
        if require_stable and groups.has_pending_txn_offsets(group_id, tp):
            by_topic[tp.topic].append((tp.partition, -1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT))
        elif om is None:
            by_topic[tp.topic].append((tp.partition, -1, -1, "", ErrorCode.NONE))
        else:
            by_topic[tp.topic].append((tp.partition, om.offset, om.leader_epoch, om.metadata, ErrorCode.NONE))
    for tp in denied:
        by_topic[tp.topic].append((tp.partition, -1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    return error, list(by_topic.items())


_topic_id = topic_id_bytes


def _group_by_ids(ctx: RequestContext, group: Any, G: Any, require_stable: bool,
                  member: tuple[str | None, int] | None = None) -> Any:
    """One v10 group: topics named by id in the request and in the answer."""
    T = G.OffsetFetchResponseTopics
    P = T.OffsetFetchResponsePartitions
    topics = ctx.broker.topics
    known: list[Any] = []
    unknown: list[Any] = []
    if group.topics is not None:
        for t in group.topics:
            raw = _topic_id(t.topic_id)
            info = topics.by_id(raw) if any(raw) else None
            if info is None:
                unknown.append(t)
            else:
                known.append(SimpleNamespace(name=info.name, partition_indexes=t.partition_indexes))
    error, fetched = _fetch(ctx, group.group_id, None if group.topics is None else known, require_stable, member)
    answer = []
    for name, parts in fetched:
        info = topics.get(name)
        if info is None:
            continue  # a deleted topic's offsets: no id to report them under
        answer.append(T(topic_id=uuid.UUID(bytes=bytes(info.topic_id)), partitions=[
            P(partition_index=p, committed_offset=off, committed_leader_epoch=epoch, metadata=meta,
              error_code=perr) for p, off, epoch, meta, perr in parts]))
    for t in unknown:
        answer.append(T(topic_id=t.topic_id, partitions=[
            P(partition_index=i, committed_offset=-1, committed_leader_epoch=-1, metadata="",
              error_code=ErrorCode.UNKNOWN_TOPIC_ID) for i in t.partition_indexes or []]))
    return G(group_id=group.group_id, error_code=error, topics=answer if error == ErrorCode.NONE else [])


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    cls = response_class(API_KEY)[version]
    if version >= 8:
        groups = []
        G = cls.OffsetFetchResponseGroup
        for g in request.groups or []:
            member = (g.member_id, g.member_epoch) if version >= 9 else None
            if version >= 10:
                groups.append(_group_by_ids(ctx, g, G, bool(request.require_stable), member))
                continue
            error, topics = _fetch(ctx, g.group_id, g.topics, bool(request.require_stable), member)
            groups.append(G(group_id=g.group_id, error_code=error, topics=[
                G.OffsetFetchResponseTopics(name=name, partitions=[
                    G.OffsetFetchResponseTopics.OffsetFetchResponsePartitions(
                        partition_index=p, committed_offset=off, committed_leader_epoch=epoch, metadata=meta,
                        error_code=perr)
                    for p, off, epoch, meta, perr in parts])
                for name, parts in topics]))
        return cls(throttle_time_ms=0, groups=groups)
    # v1 has no "all partitions" form: null topics only mean that from v2
    error, topics = _fetch(ctx, request.group_id, request.topics if version >= 2 else request.topics or [],
                           version >= 7 and bool(request.require_stable))
    T = cls.OffsetFetchResponseTopic
    return cls(throttle_time_ms=0, error_code=error, topics=[
        T(name=name, partitions=[
            T.OffsetFetchResponsePartition(partition_index=p, committed_offset=off, committed_leader_epoch=epoch,
                                           metadata=meta, error_code=perr if version >= 2 or perr else error)
            for p, off, epoch, meta, perr in parts])
        for name, parts in topics])
