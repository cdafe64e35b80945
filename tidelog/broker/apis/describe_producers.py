"""DescribeProducers (key 61, KIP-664): the producers a partition's log tracks (id, epoch, last sequence and
timestamp, coordinator epoch, first offset of the open transaction) from `Log.active_producers()`."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import response_cls
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.security.authorizer import TOPIC, Op, authorize
from tidelog.storage import TopicPartition

API_KEY = 61
NOTES = """the producers each partition's log tracks (KIP-664); READ per topic (TOPIC_AUTHORIZATION_FAILED)"""
TOPIC_AUTHORIZATION_FAILED_MESSAGE = "Topic authorization failed."  # Kafka's ApiError(Errors) default


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    T = cls.TopicResponse
    P = T.PartitionResponse
    PS = P.ProducerState
    topics = ctx.broker.topics
    out = []
    for t in request.topics or []:
        parts = []
        if not authorize(ctx, Op.READ, TOPIC, t.name or ""):  # KafkaApis.handleDescribeProducersRequest
            out.append(T(name=t.name, partitions=[
                P(partition_index=i, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                  error_message=TOPIC_AUTHORIZATION_FAILED_MESSAGE, active_producers=[])
                for i in t.partition_indexes or []]))
            continue
        for index in t.partition_indexes or []:
            log_ = topics.log(TopicPartition(t.name, index)) if topics.get(t.name) is not None else None
            if log_ is None:
                parts.append(P(partition_index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                               error_message=None, active_producers=[]))
                continue
            parts.append(P(partition_index=index, error_code=ErrorCode.NONE, error_message=None, active_producers=[
                PS(producer_id=p.producer_id, producer_epoch=p.producer_epoch, last_sequence=p.last_sequence,
                   last_timestamp=p.last_timestamp, coordinator_epoch=p.coordinator_epoch,
                   current_txn_start_offset=p.current_txn_start_offset)
                for p in log_.active_producers()]))
        out.append(T(name=t.name, partitions=parts))
    return cls(throttle_time_ms=0, topics=out)
