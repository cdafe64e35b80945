"""ConsumerGroupHeartbeat (key 68, KIP-848): join, heartbeat, reconcile and leave of `group.protocol=consumer`
members; the logic is tidelog.coordinator.group.consumer.coordinator (Kafka's GroupMetadataManager)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import (
    check_group,
    consumer_groups,
    consumer_protocol_enabled,
    coordinator,
    response_cls,
)
from tidelog.broker.context import RequestContext
from tidelog.coordinator.group.consumer.errors import HeartbeatError
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import Op

API_KEY = 68
NOTES = """KIP-848 consumer groups (`coordinator/group/consumer_*.py`): member/group/assignment epochs,
uniform and range server assignors (`group.consumer.assignors`), incremental revocation,
`group.consumer.session.timeout.ms` / `heartbeat.interval.ms`, records in `__consumer_offsets` in Kafka's
formats (key versions 3–8); empty classic/consumer groups convert; classic consumers join live consumer groups
(JoinGroup/SyncGroup/Heartbeat/LeaveGroup routed to the consumer group, Kafka 4's mixed groups);
`SubscribedTopicRegex` (v1) resolved on the broker (key-16 records). a live classic group whose members use
the consumer embedded protocol is upgraded when a consumer-protocol member joins (convertToConsumerGroup;
otherwise GROUP_ID_NOT_FOUND). A consumer group whose last consumer-protocol member leaves while classic
members remain becomes a classic group again (convertToClassicGroup). Codec written from Kafka's JSON schemas
(`protocol/schemas/`, kafka-python 3.0.12 lacks it); UNSUPPORTED_VERSION while `group.version` is 0; a share
group's id: GROUP_ID_NOT_FOUND"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    if not consumer_protocol_enabled(ctx):  # KafkaApis.isConsumerGroupProtocolEnabled, checked first
        return cls(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION, error_message=None, member_id=None,
                   member_epoch=0, heartbeat_interval_ms=0, assignment=None)
    try:
        check_group(ctx, Op.READ, request.group_id)  # KafkaApis.handleConsumerGroupHeartbeat
        groups = consumer_groups(ctx)
        share = coordinator(ctx).share_groups
        streams = coordinator(ctx).streams_groups
        if (share is not None and share.is_share_group(request.group_id)) or \
                (streams is not None and streams.is_streams_group(request.group_id)):
            # the request is validated first (GroupCoordinatorService), then GroupMetadataManager.consumerGroup
            # finds a share group
            groups.validate(request)
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND,
                                 f"Group {request.group_id} is not a consumer group.")
        result = groups.heartbeat(request, ctx.client_id or "", "/" + ctx.client_host)
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
