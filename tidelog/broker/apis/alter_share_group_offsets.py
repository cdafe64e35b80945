"""AlterShareGroupOffsets (key 91, KIP-932): set the start offset of an empty share group's partitions (Kafka's
KafkaApis.handleAlterShareGroupOffsetsRequest and GroupMetadataManager.alterShareGroupOffsets, then the
persister's initializeState: fresh state at the given offset)."""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.broker.apis._shared import response_cls, share_groups
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import GROUP, TOPIC, Op, authorize, authorized_names

API_KEY = 91
NOTES = """GROUP READ, then TOPIC READ per topic (TOPIC_AUTHORIZATION_FAILED per partition); unknown topic or
partition UNKNOWN_TOPIC_OR_PARTITION per partition; creates the share group when missing; top-level
INVALID_GROUP_ID (empty id), GROUP_ID_NOT_FOUND (a classic or consumer group has the id), NON_EMPTY_GROUP (members);
each valid partition gets fresh state (nothing in flight) at the given offset, not checked against the log, written
before the answer; -1 leaves the start to `share.auto.offset.reset` at the next fetch. UNSUPPORTED_VERSION while `share.version` is 0;
a failed state write: UNKNOWN_SERVER_ERROR, the change kept in memory (Kafka reverts it) and retried"""

ZERO_UUID = uuid.UUID(int=0)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    T = cls.AlterShareGroupOffsetsResponseTopic
    P = T.AlterShareGroupOffsetsResponsePartition
    group_id = request.group_id or ""

    def failed(code: int, message: str | None) -> Any:
        return cls(throttle_time_ms=0, error_code=code, error_message=message, responses=[])

    try:
        groups = share_groups(ctx)
    except KafkaError as e:
        return failed(e.code, e.message)
    if not authorize(ctx, Op.READ, GROUP, group_id):
        return failed(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    topics = ctx.broker.topics
    requested = list(request.topics or [])
    readable = authorized_names(ctx, Op.READ, TOPIC, {t.topic_name for t in requested})
    # KafkaApis: the topics refused before the coordinator come first in the answer
    refused: list[Any] = []
    allowed: list[Any] = []
    for t in requested:
        info = topics.get(t.topic_name)
        if t.topic_name in readable and info is not None:
            allowed.append((t, info))
            continue
        code = ErrorCode.TOPIC_AUTHORIZATION_FAILED if t.topic_name not in readable \
            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        message = "Not authorized to read the topic." if code == ErrorCode.TOPIC_AUTHORIZATION_FAILED \
            else "The topic does not exist."
        refused.append(T(topic_name=t.topic_name,
                         topic_id=ZERO_UUID if info is None else uuid.UUID(bytes=bytes(info.topic_id)),
                         partitions=[P(partition_index=p.partition_index, error_code=code, error_message=message)
                                     for p in t.partitions or []]))
    if not group_id:
        return failed(ErrorCode.INVALID_GROUP_ID, "The group id is empty.")
    group = groups.describe(group_id)
    if group is None and groups.other_group_type(group_id):
        return failed(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
    if group is not None and group.members:
        return failed(ErrorCode.NON_EMPTY_GROUP, "The share group has members.")
    offsets: dict[tuple[bytes, int], int] = {}
    answered: list[Any] = []
    for t, info in allowed:
        topic_id = bytes(info.topic_id)
        partitions = []
        for p in t.partitions or []:
            if 0 <= p.partition_index < info.partitions:
                offsets[(topic_id, p.partition_index)] = p.start_offset
                partitions.append(P(partition_index=p.partition_index, error_code=ErrorCode.NONE,
                                    error_message=None))
            else:
                partitions.append(P(partition_index=p.partition_index,
                                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                    error_message="The partition does not exist."))
        answered.append(T(topic_name=info.name, topic_id=uuid.UUID(bytes=topic_id), partitions=partitions))
    if offsets:
        groups.alter_start_offsets(group_id, offsets)
        try:
            await groups.durable()  # on disk before the answer, as Kafka's initializeState
        except KafkaError as e:
            return failed(e.code, e.message)
    return cls(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, responses=refused + answered)
