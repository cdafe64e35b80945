"""The member check of a transactional offset commit, shared by the consumer (KIP-848) and streams (KIP-1071) group
coordinators: Kafka's ConsumerGroup and StreamsGroup.validateOffsetCommit with isTransactional."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.errors import ErrorCode


def txn_offset_commit_error(group: Any, member_id: str, instance_id: str | None, member_epoch: int) -> ErrorCode:
    """No member fields, or an empty group, need no member; else the member must exist (UNKNOWN_MEMBER_ID) at that
    epoch (ILLEGAL_GENERATION). `group` has `members` (id -> member with `member_epoch`) and `is_empty()`."""
    anonymous = member_epoch == -1 and not member_id and instance_id is None
    if anonymous or (member_epoch < 0 and group.is_empty()):
        return ErrorCode.NONE
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member_epoch != member.member_epoch:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE
