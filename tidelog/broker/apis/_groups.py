"""Shared bits of the group API handlers."""

from __future__ import annotations

from tidelog.broker.context import RequestContext
from tidelog.coordinator.group import GroupCoordinator
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.acl_store import AclOperation
from tidelog.security.authorizer import GROUP, authorize


def check_group(ctx: RequestContext, op: AclOperation, group_id: str | None) -> None:
    """KafkaApis: the group APIs need `op` on the group, else GROUP_AUTHORIZATION_FAILED."""
    if not authorize(ctx, op, GROUP, group_id or ""):
        raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)


def coordinator(ctx: RequestContext) -> GroupCoordinator:
    groups = ctx.broker.groups
    if groups is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "group coordinator not running")
    return groups
