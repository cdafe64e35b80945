"""OffsetForLeaderEpoch (key 23): the end offset of a leader epoch, for KIP-320 position validation
(docs/PROTOCOL.md). The current-leader-epoch fencing check it shares with Fetch and ListOffsets is in _shared.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from tidelog.broker.apis._shared import check_leader_epoch, response_cls
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.security.authorizer import TOPIC, Op, authorized_names
from tidelog.storage import TopicPartition

if TYPE_CHECKING:
    from tidelog.storage.log import Log

log = logging.getLogger(__name__)

API_KEY = 23
NOTES = """one leader epoch (0); v2 kept for librdkafka"""

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1




def end_offset_for_epoch(log_obj: Log, epoch: int) -> tuple[int, int]:
    """(epoch, end offset): the largest epoch <= `epoch` and where the next one starts, or LEO for the
    latest epoch; (-1, -1) when unknown."""
    found = log_obj.end_offset_for_epoch(epoch)
    if found[0] == UNDEFINED_EPOCH and epoch == log_obj.leader_epoch:
        # Kafka assigns the leader epoch at LEO when a partition becomes leader, so the current epoch is
        # always known even before the first append; an empty epoch cache here means exactly that.
        return log_obj.leader_epoch, log_obj.log_end_offset
    return found


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    T = cls.OffsetForLeaderTopicResult
    P = T.EpochEndOffset
    topics = []
    describable = authorized_names(ctx, Op.DESCRIBE, TOPIC, [t.topic for t in request.topics or []])
    for topic in request.topics or []:
        partitions = []
        for p in topic.partitions or []:
            error = ErrorCode.NONE
            epoch, end_offset = UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            log_obj = ctx.broker.topics.log(TopicPartition(topic.topic, p.partition))
            if topic.topic not in describable:  # KafkaApis.handleOffsetForLeaderEpochRequest
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif log_obj is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                error = check_leader_epoch(log_obj, p.current_leader_epoch)
                if error == ErrorCode.NONE:
                    try:
                        epoch, end_offset = end_offset_for_epoch(log_obj, p.leader_epoch)
                    except Exception:  # answer this partition, keep the connection
                        log.exception("OffsetForLeaderEpoch for %s-%d failed", topic.topic, p.partition)
                        error = ErrorCode.UNKNOWN_SERVER_ERROR
            partitions.append(P(error_code=error, partition=p.partition, leader_epoch=epoch,
                                end_offset=end_offset))
        topics.append(T(topic=topic.topic, partitions=partitions))
    return cls(throttle_time_ms=0, topics=topics)
