"""DeleteRecords (key 21), v0-2: move a partition's log start offset forward (Kafka's UnifiedLog.deleteRecords).

Offset -1 means "up to the high watermark". A log whose cleanup.policy lacks `delete` answers POLICY_VIOLATION;
an offset above the HW answers OFFSET_OUT_OF_RANGE. The segments wholly below the new start are deleted at once.
"""

from __future__ import annotations

import logging
from typing import Any

from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import TOPIC, Op, authorized_names
from tidelog.storage import TopicPartition
from tidelog.storage.retention import delete_records

API_KEY = 21
NOTES = """moves the log start offset; POLICY_VIOLATION on compact-only topics"""

logger = logging.getLogger(__name__)


def _delete_one(ctx: RequestContext, topic: str, partition: int, offset: int) -> tuple[int, int]:
    """(low watermark, error code) of one partition."""
    info = ctx.broker.topics.get(topic)
    log = ctx.broker.topics.log(TopicPartition(topic, partition)) if info is not None else None
    if info is None or log is None:
        return -1, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if info.internal:
        # Kafka's ReplicaManager refuses client deletions on internal topics.
        return -1, int(ErrorCode.INVALID_TOPIC_EXCEPTION)
    try:
        return delete_records(log, offset), 0
    except KafkaError as exc:
        return -1, int(exc.code)
    except OSError as exc:
        logger.error("DeleteRecords on %s-%d failed: %s", topic, partition, exc)
        return -1, int(ErrorCode.KAFKA_STORAGE_ERROR)


async def handle(ctx: RequestContext, request: Any) -> Any:
    response_cls = response_class(API_KEY)
    topic_cls = response_cls.DeleteRecordsTopicResult
    partition_cls = topic_cls.DeleteRecordsPartitionResult
    topics = []
    deletable = authorized_names(ctx, Op.DELETE, TOPIC, [t.name for t in request.topics or []])
    for topic in request.topics or []:
        partitions = []
        for p in topic.partitions or []:
            if topic.name not in deletable:  # KafkaApis.handleDeleteRecordsRequest: DELETE per topic
                low_watermark, error = -1, int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            else:
                low_watermark, error = _delete_one(ctx, topic.name, p.partition_index, p.offset)
            partitions.append(partition_cls(partition_index=p.partition_index, low_watermark=low_watermark,
                                            error_code=error))
        topics.append(topic_cls(name=topic.name, partitions=partitions))
    return response_cls[ctx.api_version](throttle_time_ms=0, topics=topics)
