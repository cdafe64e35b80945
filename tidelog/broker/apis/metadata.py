"""Metadata (key 3): this broker as the only broker and controller, every partition led by it.

Auto-creation follows Kafka's AutoTopicCreationManager: only explicitly named topics, only when the request allows it
(v4+ flag; always for v0-3) and auto.create.topics.enable is on. Kafka (KRaft) answers the first request with
UNKNOWN_TOPIC_OR_PARTITION while the creation is forwarded; a single node creates synchronously and returns
the topic with NONE, which every client accepts.

Hand-encoded and -decoded (protocol/metadata_codec.py): a client's first Metadata request is on the start-up path.
"""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.broker.apis._shared import CLUSTER_OPERATIONS, TOPIC_OPERATIONS
from tidelog.broker.context import RequestContext
from tidelog.broker.topics import GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME, validate_topic_name
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.metadata_codec import (
    MetadataResponseBroker,
    MetadataResponseData,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from tidelog.security.authorizer import (
    TOPIC,
    Op,
    authorize,
    authorize_cluster,
    authorized_names,
    authorized_operations,
    cluster_authorized_operations,
)
from tidelog.storage import TopicPartition

API_KEY = 3
NOTES = """this node is the only broker and the controller; auto-creation only of explicitly named topics,
synchronous (answers NONE at once); v13 top-level `error_code` (always NONE: REBOOTSTRAP_REQUIRED is never
needed); authorized operations (v8+, topic; v8–10, cluster) are the principal's allowed ones with an
authorizer (cluster: 0 without DESCRIBE on it), all applicable without one"""

INT32_MIN_OMITTED = None  # a None bitfield is written as INT32_MIN ("not requested", KIP-430)
ZERO_UUID = uuid.UUID(int=0)


def _uuid(raw: Any) -> uuid.UUID:
    if raw is None:
        return ZERO_UUID
    if isinstance(raw, uuid.UUID):
        return raw
    return uuid.UUID(bytes=bytes(raw))


def topic_entry(ctx: RequestContext, info: Any, include_ops: bool) -> MetadataResponseTopic:
    broker = ctx.broker
    node = broker.node_id
    partitions = []
    for p in range(info.partitions):
        lg = broker.log_manager.get_log(TopicPartition(info.name, p))
        epoch = lg.leader_epoch if lg is not None else 0
        partitions.append(MetadataResponsePartition(
            error_code=ErrorCode.NONE, partition_index=p, leader_id=node, leader_epoch=epoch,
            replica_nodes=[node], isr_nodes=[node], offline_replicas=[]))
    return MetadataResponseTopic(
        error_code=ErrorCode.NONE, name=info.name, topic_id=_uuid(info.topic_id), is_internal=bool(info.internal),
        partitions=partitions, authorized_operations=authorized_operations(ctx, TOPIC, info.name, TOPIC_OPERATIONS) if include_ops
        else INT32_MIN_OMITTED)


def error_entry(code: int, name: str | None, topic_id: uuid.UUID = ZERO_UUID) -> MetadataResponseTopic:
    return MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id, is_internal=False,
                                 partitions=[], authorized_operations=INT32_MIN_OMITTED)


def _auto_create(ctx: RequestContext, name: str) -> Any:
    """Create `name` as Kafka's AutoTopicCreationManager would; raises KafkaError."""
    broker = ctx.broker
    topics = broker.topics
    config = broker.config

    # Internal topics get their coordinator's settings, not num.partitions (Kafka: AutoTopicCreationManager).
    if name == GROUP_METADATA_TOPIC_NAME:
        return topics.ensure_internal_topic(name, config.offsets_topic_num_partitions)
    if name == TRANSACTION_STATE_TOPIC_NAME:
        return topics.ensure_internal_topic(name, config.transaction_state_log_num_partitions)
    return topics.create_topic(name, config.num_partitions, config.default_replication_factor, {})


async def handle(ctx: RequestContext, request: Any) -> MetadataResponseData:
    v = ctx.api_version
    broker = ctx.broker
    topics = broker.topics
    include_topic_ops = v >= 8 and bool(request.include_topic_authorized_operations)
    requested = request.topics
    entries: list[MetadataResponseTopic] = []
    if requested is None or (v == 0 and not requested):
        all_topics = list(topics.topics())
        describable = authorized_names(ctx, Op.DESCRIBE, TOPIC, [info.name for info in all_topics])
        entries = [topic_entry(ctx, info, include_topic_ops) for info in all_topics if info.name in describable]
    else:
        allow_create = v < 4 or bool(request.allow_auto_topic_creation)
        seen: set[Any] = set()
        for item in requested:
            name = item.name
            topic_id = _uuid(item.topic_id) if v >= 10 else ZERO_UUID
            key = name if name is not None else topic_id
            if key in seen:
                continue  # Kafka collects requested topics into a set
            seen.add(key)
            if name is None:
                info = topics.by_id(topic_id.bytes) if topic_id != ZERO_UUID else None
                if info is None:
                    entries.append(error_entry(ErrorCode.UNKNOWN_TOPIC_ID, None, topic_id))
                elif not authorize(ctx, Op.DESCRIBE, TOPIC, info.name):
                    entries.append(error_entry(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, topic_id))
                else:
                    entries.append(topic_entry(ctx, info, include_topic_ops))
                continue
            entries.append(_named_topic(ctx, name, allow_create, include_topic_ops))
    host, port = broker.advertised_endpoint(ctx.listener)
    # A field is written only in the versions that have it; v13's top-level error is NONE (KIP-1102: only
    # REBOOTSTRAP_REQUIRED uses it).
    response = MetadataResponseData(
        v, [MetadataResponseBroker(node_id=broker.node_id, host=host, port=port, rack=None)], entries,
        controller_id=broker.node_id, cluster_id=broker.cluster_id, throttle_time_ms=0, error_code=ErrorCode.NONE)
    if 8 <= v <= 10 and request.include_cluster_authorized_operations:
        response.authorized_operations = cluster_authorized_operations(ctx, CLUSTER_OPERATIONS)
    return response


def _named_topic(ctx: RequestContext, name: str, allow_create: bool, include_ops: bool) -> MetadataResponseTopic:
    topics = ctx.broker.topics
    # KafkaApis.getTopicMetadata: DESCRIBE to see a topic, CREATE (cluster or topic) to auto-create it
    if not authorize(ctx, Op.DESCRIBE, TOPIC, name):
        return error_entry(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name)
    info = topics.get(name)
    if info is not None:
        return topic_entry(ctx, info, include_ops)
    try:
        validate_topic_name(name)
    except KafkaError as exc:
        return error_entry(int(exc.code), name)
    if not (allow_create and ctx.broker.config.auto_create_topics_enable):
        return error_entry(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name)
    if not (authorize_cluster(ctx, Op.CREATE) or authorize(ctx, Op.CREATE, TOPIC, name)):
        return error_entry(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name)
    try:
        info = _auto_create(ctx, name)
    except KafkaError as exc:
        if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
            info = topics.get(name)
            if info is not None:
                return topic_entry(ctx, info, include_ops)
        # e.g. a name colliding with an existing one: Kafka reports it on the topic entry.
        return error_entry(int(exc.code), name)
    return topic_entry(ctx, info, include_ops)
