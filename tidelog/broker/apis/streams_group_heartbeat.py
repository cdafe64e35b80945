"""StreamsGroupHeartbeat (key 88, KIP-1071): join, heartbeat, task reconciliation and leave of
`group.protocol=streams` members; the logic is tidelog.coordinator.group.streams (Kafka's GroupMetadataManager)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import check_group, response_cls, streams_groups
from tidelog.broker.context import RequestContext
from tidelog.coordinator.group.streams.coordinator import (
    ACCEPTABLE_RECOVERY_LAG,
    TASK_OFFSET_INTERVAL_MS,
    HeartbeatError,
)
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import TOPIC, Op, authorize, authorize_cluster

API_KEY = 88
NOTES = """KIP-1071 streams groups (`coordinator/group/streams/`): member, group, assignment and topology epochs;
the topology of the first member (or of a higher topology epoch) configured against the topics (missing source
topics, copartitioning, repartition and changelog partition counts; missing internal topics created, changelogs
compacted) with the status codes; Kafka's sticky task assignor (active and standby tasks on other processes,
`group.streams.num.standby.replicas` / `streams.num.standby.replicas`); revocation before reassignment;
`streams.session.timeout.ms` and the rebalance timeout on the coordinator's timer; shutdown requests; IQ
endpoints. v1 (Kafka 4.4): the int64 `AcceptableRecoveryLag`, `TopologyDescriptionRequired` (false: no topology
description plugin) and `MISSING_CLIENT_TAGS` when `group.streams.rack.aware.assignment.tags` names a tag the
member does not send. UNSUPPORTED_VERSION while `streams.version` is 0; a group id of another type:
GROUP_ID_NOT_FOUND; answered once the group state is on disk; a failed state write: UNKNOWN_SERVER_ERROR, the change
kept in memory (Kafka reverts it) and retried"""


def _task_ids(cls: Any, tasks: dict[str, set[int]]) -> list[Any]:
    return [cls.TaskIds(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(tasks.items()) if ps]


def _error(ctx: RequestContext, cls: Any, code: int, message: str | None) -> Any:
    lag = {"acceptable_recovery_lag": -1} if ctx.api_version >= 1 else {"acceptable_recovery_lag_legacy": 0}
    return cls(throttle_time_ms=0, error_code=code, error_message=message, member_id="", member_epoch=-1,
               heartbeat_interval_ms=0, task_offset_interval_ms=0, status=None, active_tasks=None,
               standby_tasks=None, warmup_tasks=None, topology_description_required=False,
               endpoint_information_epoch=0, partitions_by_user_endpoint=None, **lag)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    try:
        groups = streams_groups(ctx)  # KafkaApis.isStreamsGroupProtocolEnabled, checked first
        check_group(ctx, Op.READ, request.group_id)
        result = groups.heartbeat(request, ctx.api_version, ctx.client_id or "", "/" + ctx.client_host,
                                  may_create=lambda name: authorize_cluster(ctx, Op.CREATE)
                                  or authorize(ctx, Op.CREATE, TOPIC, name))  # KafkaApis: CREATE before creating
        await groups.durable()  # the state this answer shows is on disk (written off the loop)
    except HeartbeatError as e:
        return _error(ctx, cls, e.code, e.message)
    except KafkaError as e:
        return _error(ctx, cls, e.code, e.message)
    m = result.member
    send = result.send_tasks
    endpoints = None
    if result.endpoints is not None:
        E = cls.EndpointToPartitions
        endpoints = [E(user_endpoint=E.Endpoint(host=host, port=port),
                       active_partitions=[E.TopicPartition(topic=t, partitions=sorted(ps))
                                          for t, ps in sorted(active.items())],
                       standby_partitions=[E.TopicPartition(topic=t, partitions=sorted(ps))
                                           for t, ps in sorted(standby.items())])
                     for (host, port), active, standby in result.endpoints]
    lag = {"acceptable_recovery_lag": ACCEPTABLE_RECOVERY_LAG} if ctx.api_version >= 1 else \
        {"acceptable_recovery_lag_legacy": ACCEPTABLE_RECOVERY_LAG}
    return cls(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, member_id=m.member_id,
               member_epoch=m.member_epoch, heartbeat_interval_ms=result.heartbeat_interval_ms,
               task_offset_interval_ms=TASK_OFFSET_INTERVAL_MS,
               status=[cls.Status(status_code=code, status_detail=detail) for code, detail in result.status]
               if result.status else None,  # Kafka sends no list when no status holds
               active_tasks=_task_ids(cls, m.assigned.active) if send else None,
               standby_tasks=_task_ids(cls, m.assigned.standby) if send else None,
               warmup_tasks=_task_ids(cls, m.assigned.warmup) if send else None,
               topology_description_required=False, endpoint_information_epoch=result.endpoint_epoch,
               partitions_by_user_endpoint=endpoints, **lag)
