"""ConsumerGroupHeartbeat (key 68, KIP-848): join, heartbeat, reconcile and leave of `group.protocol=consumer`
members; the logic is tidelog.coordinator.group.consumer_coordinator (Kafka's GroupMetadataManager)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import check_group, consumer_groups
from tidelog.broker.context import RequestContext
from tidelog.coordinator.group.consumer_coordinator import HeartbeatError
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import Op

API_KEY = 68


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY)[ctx.api_version]
    try:
        check_group(ctx, Op.READ, request.group_id)  # KafkaApis.handleConsumerGroupHeartbeat
        result = consumer_groups(ctx).heartbeat(request, ctx.client_id or "", "/" + ctx.client_host)
    except HeartbeatError as e:
        return cls(throttle_time_ms=0, error_code=e.code, error_message=e.message, member_id=None,
                   member_epoch=-1, heartbeat_interval_ms=0, assignment=None)
    except KafkaError as e:
        return cls(throttle_time_ms=0, error_code=e.code, error_message=e.message, member_id=None,
                   member_epoch=-1, heartbeat_interval_ms=0, assignment=None)
    assignment = None
    if result.assignment is not None:
        A = cls.Assignment
        assignment = A(topic_partitions=[A.TopicPartitions(topic_id=t, partitions=sorted(ps))
                                         for t, ps in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))
                                         if ps])
    return cls(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, member_id=result.member_id,
               member_epoch=result.member_epoch, heartbeat_interval_ms=result.heartbeat_interval_ms,
               assignment=assignment)
