"""Shared bits of the group API handlers."""

from __future__ import annotations

from tidelog.broker.context import RequestContext
from tidelog.coordinator.group import GroupCoordinator
from tidelog.coordinator.group.consumer_coordinator import ConsumerGroupCoordinator
from tidelog.protocol.errors import ErrorCode, KafkaError


def coordinator(ctx: RequestContext) -> GroupCoordinator:
    groups = ctx.broker.groups
    if groups is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "group coordinator not running")
    return groups


def consumer_groups(ctx: RequestContext) -> ConsumerGroupCoordinator:
    """The KIP-848 coordinator; COORDINATOR_NOT_AVAILABLE without one, UNSUPPORTED_VERSION when
    `group.coordinator.rebalance.protocols` leaves out "consumer"."""
    groups = coordinator(ctx).consumer_groups
    if groups is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "consumer group coordinator not running")
    if not groups.enabled:
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "The consumer group protocol is not enabled")
    result: ConsumerGroupCoordinator = groups
    return result
