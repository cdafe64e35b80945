"""TxnOffsetCommit (key 28): offsets committed as part of a transaction (sendOffsetsToTransaction). They are
written to `__consumer_offsets` in a transactional batch and stay pending until the transaction's marker;
v3+ carries the consumer's generation/member id so a zombie is fenced (KIP-447). v5 is transactions v2 (KIP-890
part 2): the group's `__consumer_offsets` partition joins the transaction here, so a TV2 producer sends no
AddOffsetsToTxn (Kafka's GroupCoordinator verification with `addPartition`). v6 (KIP-1319, Kafka 4.4) names each
topic by id, as OffsetCommit v10 does: an unknown id answers UNKNOWN_TOPIC_ID for its partitions and the response
echoes the id; at v0-5 a topic name this broker does not know answers UNKNOWN_TOPIC_OR_PARTITION (Kafka 4.4's
KafkaApis.handleTxnOffsetCommitRequest, KAFKA-20444 part 5, apache/kafka PR #22238).
"""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import (
    check_transactional_id,
    for_version,
    topic_by_id,
    txn_coordinator,
    unauthorized_topics,
)
from tidelog.broker.apis._shared import coordinator as group_coordinator
from tidelog.broker.context import RequestContext
from tidelog.coordinator.group import GROUP_METADATA_TOPIC_NAME, OffsetAndMetadata
from tidelog.coordinator.transaction.metadata import TV_2
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import Op
from tidelog.storage import TopicPartition

API_KEY = 28
NOTES = """offsets pending until the transaction's marker; v3+ generation/member fencing (KIP-447); WRITE on
the transactional id and READ on the group (each failing every partition), READ per topic (its partitions
TOPIC_AUTHORIZATION_FAILED, the others still committed); v5 (KIP-890 part 2) adds the group's offsets partition
to the transaction itself; v6 (KIP-1319) names topics by id (unknown id: UNKNOWN_TOPIC_ID per partition), an
unknown topic name below v6: UNKNOWN_TOPIC_OR_PARTITION"""
PRODUCER_FENCED_SINCE = 2
IMPLICIT_ADD_SINCE = 5  # TV2: the broker adds `__consumer_offsets` to the transaction (no AddOffsetsToTxn)
TOPIC_IDS_SINCE = 6  # KIP-1319: TopicId in place of Name, in the request and the response


def _topic_names(ctx: RequestContext, topics: list[Any], version: int) -> tuple[list[str], dict[str, int]]:
    """Each request topic's name (a placeholder for an id this broker does not know, which keeps its partitions
    apart from every real topic) and the topics that cannot be resolved, with their error: KafkaApis resolves a
    v6 id to its name (UNKNOWN_TOPIC_ID when it cannot) and, below v6, the name to its id
    (UNKNOWN_TOPIC_OR_PARTITION when it cannot)."""
    names: list[str] = []
    unresolved: dict[str, int] = {}
    for index, t in enumerate(topics):
        if version >= TOPIC_IDS_SINCE:
            info = topic_by_id(ctx, t.topic_id)
            if info is None:
                name = f"\0unknown-{index}"
                unresolved[name] = ErrorCode.UNKNOWN_TOPIC_ID
            else:
                name = info.name
        else:
            name = t.name
            if ctx.broker.topics.get(name) is None:
                unresolved[name] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        names.append(name)
    return names, unresolved


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    cls = response_class(API_KEY)[version]
    now = ctx.broker.clock.milliseconds()
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    order: list[tuple[str, Any, list[int]]] = []  # (name, topic id at v6, partition indexes) per request topic
    topics = request.topics or []
    names, unresolved = _topic_names(ctx, topics, version)
    # KafkaApis.handleTxnOffsetCommitRequest: WRITE on the transactional id, READ on the group (all partitions
    # fail), then per topic: an id it cannot resolve, READ on the topic (its partitions fail, the others are still
    # committed), a name it does not know
    denied = check_transactional_id(ctx, request.transactional_id, request.group_id or "")
    known = [name for name in names if unresolved.get(name) != ErrorCode.UNKNOWN_TOPIC_ID]
    unreadable = unauthorized_topics(ctx, Op.READ, known) if not denied else set()
    failed = {name: code for name, code in unresolved.items() if name not in unreadable}
    for name, t in zip(names, topics, strict=True):
        ids = []
        for p in t.partitions or []:
            ids.append(p.partition_index)
            if name in unreadable or name in failed:
                continue
            epoch = p.committed_leader_epoch if version >= 2 else -1
            offsets[TopicPartition(name, p.partition_index)] = OffsetAndMetadata(
                p.committed_offset, epoch, p.committed_metadata or "", now)
        order.append((name, t.topic_id if version >= TOPIC_IDS_SINCE else None, ids))
    results: dict[TopicPartition, int] = {}
    try:
        if denied:
            raise KafkaError(denied, None)
        if not offsets:
            raise KafkaError(ErrorCode.NONE, None)  # every topic unreadable: nothing reaches the coordinator
        error = ErrorCode.NONE
        if version >= IMPLICIT_ADD_SINCE:
            error = _add_offsets_partition(ctx, request)
        if error == ErrorCode.NONE:
            error = txn_coordinator(ctx).check_txn_offset_commit(request.transactional_id, request.producer_id,
                                                                 request.producer_epoch)
        share = group_coordinator(ctx).share_groups if error == ErrorCode.NONE else None
        if share is not None and share.is_share_group(request.group_id):
            error = ErrorCode.GROUP_ID_NOT_FOUND  # ShareGroup.validateOffsetCommit: "is not a consumer group"
        if error == ErrorCode.NONE:
            groups = group_coordinator(ctx)
            consumer, streams = groups.consumer_groups, groups.streams_groups
            # a KIP-848 or streams group validates the member epoch itself (ConsumerGroup / StreamsGroup
            # .validateOffsetCommit)
            target = consumer if consumer is not None and consumer.is_consumer_group(request.group_id) else \
                streams if streams is not None and streams.is_streams_group(request.group_id) else groups
            results = target.txn_commit_offsets(
                request.group_id, request.producer_id, request.producer_epoch,
                request.member_id if version >= 3 else "",
                request.group_instance_id if version >= 3 else None,
                request.generation_id if version >= 3 else -1, offsets)
        else:
            results = dict.fromkeys(offsets, error)
    except KafkaError as e:
        results = dict.fromkeys(offsets, e.code)
        results.update({TopicPartition(name, i): denied for name, _, ids in order for i in ids} if denied else {})
    if not denied:
        results.update({TopicPartition(name, i): ErrorCode.TOPIC_AUTHORIZATION_FAILED
                        for name, _, ids in order if name in unreadable for i in ids})
        results.update({TopicPartition(name, i): failed[name] for name, _, ids in order if name in failed
                        for i in ids})
    T = cls.TxnOffsetCommitResponseTopic
    P = T.TxnOffsetCommitResponsePartition
    return cls(throttle_time_ms=0, topics=[
        T(name=name if version < TOPIC_IDS_SINCE else None, topic_id=topic_id, partitions=[
            P(partition_index=i,
              error_code=for_version(results.get(TopicPartition(name, i), ErrorCode.NONE), version,
                                     PRODUCER_FENCED_SINCE))
            for i in ids])
        for name, topic_id, ids in order])


def _add_offsets_partition(ctx: RequestContext, request: Any) -> ErrorCode:
    """KIP-890 part 2: the group's `__consumer_offsets` partition joins the transaction as TV2 (what Kafka's
    GroupCoordinator asks of the transaction coordinator through AddPartitionsToTxnManager for v5+)."""
    groups = group_coordinator(ctx)
    groups.ensure_offsets_topic()  # the offsets partition must exist to take the marker
    tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, groups.partition_for(request.group_id))
    error = txn_coordinator(ctx).handle_add_partitions(request.transactional_id, request.producer_id,
                                                       request.producer_epoch, [tp], TV_2)
    # AddPartitionsToTxnManager answers a fenced epoch INVALID_PRODUCER_EPOCH (abortable for a TV2 producer)
    return ErrorCode.INVALID_PRODUCER_EPOCH if error == ErrorCode.PRODUCER_FENCED else error
