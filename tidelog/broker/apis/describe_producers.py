"""DescribeProducers (key 61, KIP-664): the active producers of each partition, read from its producer
state (Kafka's ReplicaManager.activeProducerState)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import response_class
from tidelog.storage import TopicPartition

API_KEY = 61


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY)[ctx.api_version]
    T = cls.TopicResponse
    P = T.PartitionResponse
    S = P.ProducerState
    topics = []
    for topic in request.topics or []:
        parts = []
        for index in topic.partition_indexes or []:
            lg = ctx.broker.topics.log(TopicPartition(topic.name, index))
            if lg is None:
                parts.append(P(partition_index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                               error_message=None, active_producers=[]))
                continue
            producers = [S(producer_id=e.producer_id, producer_epoch=e.producer_epoch, last_sequence=e.last_seq,
                           last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                           current_txn_start_offset=e.current_txn_first_offset)
                         for e in sorted(lg.active_producers(), key=lambda e: e.producer_id)]
            parts.append(P(partition_index=index, error_code=ErrorCode.NONE, error_message=None,
                           active_producers=producers))
        topics.append(T(name=topic.name, partitions=parts))
    return cls(throttle_time_ms=0, topics=topics)
