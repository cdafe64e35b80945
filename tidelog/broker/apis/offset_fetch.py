"""OffsetFetch (key 9): one group (v1-7) or several (v8+) (Kafka's GroupMetadataManager)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from tidelog.broker.apis._shared import coordinator
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.storage import TopicPartition

API_KEY = 9


def _fetch(ctx: RequestContext, group_id: str, topics: list[Any] | None
           ) -> tuple[int, list[tuple[str, list[tuple[int, int, int, str]]]]]:
    """(group error, [(topic, [(partition, offset, leader_epoch, metadata)])]) in request order."""
    partitions = None
    if topics is not None:
        partitions = [TopicPartition(t.name, i) for t in topics for i in t.partition_indexes or []]
    try:
        error, offsets = coordinator(ctx).fetch_offsets(group_id, partitions)
    except KafkaError as e:
        return e.code, []
    by_topic: dict[str, list[tuple[int, int, int, str]]] = defaultdict(list)
    for tp, om in offsets.items():
        if om is None:
            by_topic[tp.topic].append((tp.partition, -1, -1, ""))
        else:
            by_topic[tp.topic].append((tp.partition, om.offset, om.leader_epoch, om.metadata))
    return error, list(by_topic.items())


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    cls = response_class(API_KEY)[version]
    if version >= 8:
        groups = []
        G = cls.OffsetFetchResponseGroup
        for g in request.groups or []:
            error, topics = _fetch(ctx, g.group_id, g.topics)
            groups.append(G(group_id=g.group_id, error_code=error, topics=[
                G.OffsetFetchResponseTopics(name=name, partitions=[
                    G.OffsetFetchResponseTopics.OffsetFetchResponsePartitions(
                        partition_index=p, committed_offset=off, committed_leader_epoch=epoch, metadata=meta,
                        error_code=ErrorCode.NONE)
                    for p, off, epoch, meta in parts])
                for name, parts in topics]))
        return cls(throttle_time_ms=0, groups=groups)
    # v1 has no "all partitions" form: null topics only mean that from v2
    error, topics = _fetch(ctx, request.group_id, request.topics if version >= 2 else request.topics or [])
    T = cls.OffsetFetchResponseTopic
    return cls(throttle_time_ms=0, error_code=error, topics=[
        T(name=name, partitions=[
            T.OffsetFetchResponsePartition(partition_index=p, committed_offset=off, committed_leader_epoch=epoch,
                                           metadata=meta, error_code=ErrorCode.NONE if version >= 2 else error)
            for p, off, epoch, meta in parts])
        for name, parts in topics])
