"""AlterPartitionReassignments (key 45, KIP-455) on one node, with the checks of Kafka's
ReplicationControlManager.alterPartitionReassignments: a target of exactly this node is a completed no-op,
any other broker id is not registered (INVALID_REPLICA_ASSIGNMENT), a cancellation (null replicas) finds no
reassignment in progress (NO_REASSIGNMENT_IN_PROGRESS)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import response_cls
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.security.authorizer import Op, authorize_cluster

API_KEY = 45
NOTES = """a target of exactly this node is a no-op (NONE); any other broker id INVALID_REPLICA_ASSIGNMENT
("no such broker is registered"); cancelling NO_REASSIGNMENT_IN_PROGRESS"""

NO_REASSIGNMENT_IN_PROGRESS = 85


def _check(ctx: RequestContext, topic: str, partition: int, replicas: list[int] | None,
           allow_rf_change: bool) -> tuple[int, str | None]:
    info = ctx.broker.topics.get(topic)
    if info is None or not 0 <= partition < info.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
    if replicas is None:
        return NO_REASSIGNMENT_IN_PROGRESS, None
    node = ctx.broker.node_id
    if not replicas:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
    if len(set(replicas)) != len(replicas):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
            f"The manual partition assignment includes the broker {replicas} more than once.")
    for broker_id in replicas:
        if broker_id < 0:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                f"The manual partition assignment includes an invalid broker id {broker_id}.")
        if broker_id != node:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                f"The manual partition assignment includes broker {broker_id}, but no such broker is registered.")
    if not allow_rf_change and len(replicas) != 1:  # KIP-860
        return ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 1 to " + str(len(replicas))
    return ErrorCode.NONE, None  # the target is the current assignment: nothing to move


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    T = cls.ReassignableTopicResponse
    P = T.ReassignablePartitionResponse
    allow = bool(getattr(request, "allow_replication_factor_change", True)) if ctx.api_version >= 1 else True
    responses = []
    if not authorize_cluster(ctx, Op.ALTER):  # KafkaApis.handleAlterPartitionReassignmentsRequest
        denied: dict[str, Any] = {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                  "error_message": None, "responses": []}
        if ctx.api_version >= 1:
            denied["allow_replication_factor_change"] = allow
        return cls(**denied)
    for topic in request.topics or []:
        parts = []
        for p in topic.partitions or []:
            code, message = _check(ctx, topic.name, p.partition_index, p.replicas, allow)
            parts.append(P(partition_index=p.partition_index, error_code=code, error_message=message))
        responses.append(T(name=topic.name, partitions=parts))
    fields: dict[str, Any] = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                              "responses": responses}
    if ctx.api_version >= 1:
        fields["allow_replication_factor_change"] = allow
    return cls(**fields)
