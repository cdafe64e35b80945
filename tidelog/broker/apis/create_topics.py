"""CreateTopics (key 19), v2-7: Kafka's ControllerApis/ReplicationControlManager rules on one broker. Each
valid topic spends its partitions from the controller mutation quota (strict from v6, KIP-599)."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from tidelog.broker.apis._shared import MAX_PARTITIONS_PER_BATCH, request_mutation_quota
from tidelog.broker.context import RequestContext
from tidelog.config import topic_config
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import TOPIC, Op, authorize_cluster, authorized_names

API_KEY = 19
NOTES = """replication factor > 1 refused (INVALID_REPLICATION_FACTOR); validate_only honoured"""



def _requested_partitions(ctx: RequestContext, request: Any) -> int:
    total = 0
    for topic in request.topics or []:
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions == -1:
            total += ctx.broker.config.num_partitions
        elif topic.num_partitions > 0:
            total += topic.num_partitions
    return total


def _check_assignments(ctx: RequestContext, topic: Any) -> int:
    """A manual assignment needs both counts at -1; partitions 0..n-1, each on exactly this broker."""
    if topic.num_partitions != -1 or topic.replication_factor != -1:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            "Both numPartitions or replicationFactor and replicasAssignments were set. "
            "Both cannot be used at the same time.",
        )
    indexes = sorted(a.partition_index for a in topic.assignments or [])
    if indexes != list(range(len(indexes))):
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Partitions should be a consecutive 0-based integer sequence, but got {indexes}.",
        )
    for assignment in topic.assignments or []:
        brokers = list(assignment.broker_ids or [])
        if not brokers:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes an empty replica list for partition "
                f"{assignment.partition_index}.",
            )
        if len(set(brokers)) != len(brokers):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {brokers[0]} more than once.",
            )
        for broker_id in brokers:
            if broker_id != ctx.broker.node_id:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker {broker_id}, but no such broker is registered.",
                )
    return len(indexes)


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    response_cls = response_class(API_KEY)
    result_cls = response_cls.CreatableTopicResult
    config_cls = result_cls.CreatableTopicConfigs
    topics = ctx.broker.topics
    validate_only = bool(request.validate_only)
    counts = Counter(t.name for t in request.topics or [])
    too_many = _requested_partitions(ctx, request) > MAX_PARTITIONS_PER_BATCH
    results: list[Any] = []
    seen: set[str] = set()
    # KafkaApis.handleCreateTopicsRequest: CREATE on the cluster, else CREATE per topic
    creatable = None if authorize_cluster(ctx, Op.CREATE) else authorized_names(
        ctx, Op.CREATE, TOPIC, [t.name for t in request.topics or []])
    quota = request_mutation_quota(ctx, strict_since=6)
    for topic in request.topics or []:
        name = topic.name
        if name in seen:
            continue
        seen.add(name)
        result = result_cls(name=name, error_code=0, error_message=None)
        if version >= 5:
            result.num_partitions, result.replication_factor, result.configs = -1, -1, []
        if version >= 7:
            result.topic_id = uuid.UUID(int=0)
        try:
            if creatable is not None and name not in creatable:
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            if too_many:
                raise KafkaError(ErrorCode.POLICY_VIOLATION, "Excessively large number of partitions per request.")
            if counts[name] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            partitions, replication = topic.num_partitions, topic.replication_factor
            if topic.assignments:
                partitions, replication = _check_assignments(ctx, topic), 1
            overrides: dict[str, str | None] = {}
            for config in topic.configs or []:
                overrides[config.name] = config.value
            if quota.bounded:
                # ReplicationControlManager.createTopic: the quota is spent once the topic is valid (validate_only
                # too); a strict quota refuses it with THROTTLING_QUOTA_EXCEEDED.
                checked = topics.create_topic(name, partitions, replication, overrides, validate_only=True)
                quota.record(checked.partitions)
            info = topics.create_topic(name, partitions, replication, overrides, validate_only=validate_only)
        except KafkaError as exc:
            result.error_code, result.error_message = int(exc.code), exc.message
            results.append(result)
            continue
        if version >= 5:
            result.num_partitions = info.partitions
            result.replication_factor = info.replication_factor
            result.configs = [
                config_cls(
                    name=entry.name,
                    value=entry.value,
                    read_only=entry.read_only,
                    config_source=int(entry.source),
                    is_sensitive=entry.sensitive,
                )
                for entry in topic_config.describe(info.overrides, ctx.broker.config)
            ]
        if version >= 7 and not validate_only:
            result.topic_id = uuid.UUID(bytes=info.topic_id)
        results.append(result)
    return response_cls[version](throttle_time_ms=0, topics=results)
