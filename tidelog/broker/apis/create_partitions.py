"""CreatePartitions (key 37), v0-3: grow a topic's partition count. The partitions added are spent from the
controller mutation quota (strict from v3, KIP-599)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tidelog.broker.apis._shared import MAX_PARTITIONS_PER_BATCH, request_mutation_quota
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import TOPIC, Op, authorize

API_KEY = 37
NOTES = """grows a topic's partition count; ALTER per topic (TOPIC_AUTHORIZATION_FAILED), a duplicate topic
INVALID_REQUEST, replica assignments naming another broker INVALID_REPLICA_ASSIGNMENT"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    response_cls = response_class(API_KEY)
    result_cls = response_cls.CreatePartitionsTopicResult
    topics = ctx.broker.topics
    validate_only = bool(request.validate_only)
    counts = Counter(t.name for t in request.topics or [])
    quota = request_mutation_quota(ctx, strict_since=3)
    results: list[Any] = []
    seen: set[str] = set()
    for topic in request.topics or []:
        if topic.name in seen:
            continue
        seen.add(topic.name)
        result = result_cls(name=topic.name, error_code=0, error_message=None)
        try:
            if counts[topic.name] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
            if not authorize(ctx, Op.ALTER, TOPIC, topic.name):  # KafkaApis.handleCreatePartitionsRequest
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "The topic authorization is failed.")
            info = topics.check_create_partitions(topic.name, topic.count)
            if topic.count - info.partitions > MAX_PARTITIONS_PER_BATCH:
                raise KafkaError(ErrorCode.POLICY_VIOLATION, "Excessively large number of partitions per request.")
            added = topic.count - info.partitions
            if topic.assignments is not None and len(topic.assignments) != added:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Attempted to add {added} additional partition(s), but only "
                    f"{len(topic.assignments)} assignment(s) were specified.",
                )
            quota.record(added)  # ReplicationControlManager.createPartitions: before the replicas are checked
            if topic.assignments is not None:
                for assignment in topic.assignments:
                    if list(assignment.broker_ids or []) != [ctx.broker.node_id]:
                        raise KafkaError(
                            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                            f"The manual partition assignment {list(assignment.broker_ids or [])} names brokers "
                            f"other than the only registered broker {ctx.broker.node_id}.",
                        )
            topics.create_partitions(topic.name, topic.count, validate_only=validate_only)
        except KafkaError as exc:
            result.error_code, result.error_message = int(exc.code), exc.message
        results.append(result)
    return response_cls[version](throttle_time_ms=0, results=results)
