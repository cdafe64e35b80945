"""DeleteTopics (key 20), v1-6: by name (all versions) or by topic id (v6). Deletion is synchronous. A topic's
partitions are spent from the controller mutation quota (strict from v5, KIP-599)."""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.broker.apis._shared import request_mutation_quota
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import TOPIC, Op, authorize

API_KEY = 20
NOTES = """by name, or by topic id (v6); synchronous"""

_ZERO = uuid.UUID(int=0)


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    response_cls = response_class(API_KEY)
    result_cls = response_cls.DeletableTopicResult
    topics = ctx.broker.topics
    if version >= 6:
        wanted = [(t.name, t.topic_id if t.topic_id not in (None, _ZERO) else None) for t in request.topics or []]
    else:
        wanted = [(name, None) for name in request.topic_names or []]
    quota = request_mutation_quota(ctx, strict_since=5)
    results: list[Any] = []
    for name, topic_id in wanted:
        result = result_cls(name=name, error_code=0)
        if version >= 5:
            result.error_message = None
        if version >= 6:
            result.topic_id = topic_id or _ZERO
        try:
            if name is not None and topic_id is not None:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id.")
            if topic_id is not None:
                info = topics.by_id(topic_id.bytes)
                if info is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, "Topic id not found.")
                result.name = info.name
                name = info.name
            if name is None:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Topic name or topic id is required.")
            if not authorize(ctx, Op.DELETE, TOPIC, name):  # KafkaApis.handleDeleteTopicsRequest
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            existing = topics.get(name)
            if existing is not None and ctx.broker.config.delete_topic_enable:
                quota.record(existing.partitions)  # ReplicationControlManager.deleteTopic
            info = topics.delete_topic(name)
            if version >= 6:
                result.topic_id = uuid.UUID(bytes=info.topic_id)
        except KafkaError as exc:
            result.error_code = int(exc.code)
            if version >= 5:
                result.error_message = exc.message
        results.append(result)
    return response_cls[version](throttle_time_ms=0, responses=results)
