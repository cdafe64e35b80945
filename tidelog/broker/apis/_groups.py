"""Shared bits of the group API handlers."""

from __future__ import annotations

from tidelog.broker.context import RequestContext
from tidelog.coordinator.group import GroupCoordinator
from tidelog.protocol.errors import ErrorCode, KafkaError


def coordinator(ctx: RequestContext) -> GroupCoordinator:
    groups = ctx.broker.groups
    if groups is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "group coordinator not running")
    return groups
