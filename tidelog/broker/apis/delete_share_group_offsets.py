"""DeleteShareGroupOffsets (key 92, KIP-932): drop an empty share group's state for whole topics, so a later
subscriber starts them again from `share.auto.offset.reset` (Kafka's KafkaApis.handleDeleteShareGroupOffsetsRequest
and GroupCoordinatorShard.initiateDeleteShareGroupOffsets, then the persister's deleteState)."""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.broker.apis._shared import response_cls, share_groups
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import GROUP, TOPIC, Op, authorize, authorized_names

API_KEY = 92
NOTES = """GROUP DELETE, then TOPIC READ per topic (TOPIC_AUTHORIZATION_FAILED); top-level INVALID_GROUP_ID,
GROUP_ID_NOT_FOUND (missing, or not a share group), NON_EMPTY_GROUP (members); per topic UNKNOWN_TOPIC_OR_PARTITION
for an unknown topic or one without state ("There is no offset information to delete."); otherwise the state of
every partition of the topic is deleted (written before the answer). UNSUPPORTED_VERSION while `share.version`
is 0; a failed state write: UNKNOWN_SERVER_ERROR, the change kept in memory (Kafka reverts it) and retried"""

ZERO_UUID = uuid.UUID(int=0)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    T = cls.DeleteShareGroupOffsetsResponseTopic
    group_id = request.group_id or ""

    def failed(code: int, message: str | None) -> Any:
        return cls(throttle_time_ms=0, error_code=code, error_message=message, responses=[])

    try:
        groups = share_groups(ctx)
    except KafkaError as e:
        return failed(e.code, e.message)
    if not authorize(ctx, Op.DELETE, GROUP, group_id):
        return failed(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    names = [t.topic_name for t in request.topics or []]
    readable = authorized_names(ctx, Op.READ, TOPIC, set(names))
    # KafkaApis: the topics the caller may not READ come first, then the coordinator's errors, then the deleted
    refused = [T(topic_name=n, topic_id=ZERO_UUID, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                 error_message="Not authorized to read the topic.") for n in names if n not in readable]
    if not group_id:
        return failed(ErrorCode.INVALID_GROUP_ID, "The group id is empty.")
    group = groups.describe(group_id)
    if group is None:
        return failed(ErrorCode.GROUP_ID_NOT_FOUND,
                      f"Group {group_id} is not a share group." if groups.other_group_type(group_id)
                      else f"Share group {group_id} not found.")
    if group.members:
        return failed(ErrorCode.NON_EMPTY_GROUP, "The share group has members.")
    errors: list[Any] = []
    deleted: list[Any] = []
    for name in names:
        if name not in readable:
            continue
        info = ctx.broker.topics.get(name)
        if info is None:
            errors.append(T(topic_name=name, topic_id=ZERO_UUID, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            error_message="The topic does not exist."))
        elif not groups.delete_topic_state(group_id, bytes(info.topic_id)):
            errors.append(T(topic_name=name, topic_id=ZERO_UUID, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            error_message="There is no offset information to delete."))
        else:
            deleted.append(T(topic_name=name, topic_id=uuid.UUID(bytes=bytes(info.topic_id)),
                             error_code=ErrorCode.NONE, error_message=None))
    if deleted:
        try:
            await groups.durable()  # on disk before the answer
        except KafkaError as e:
            return failed(e.code, e.message)
    return cls(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
               responses=refused + errors + deleted)
