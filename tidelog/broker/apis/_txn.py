"""Shared bits of the transaction API handlers."""

from __future__ import annotations

from tidelog.broker.context import RequestContext
from tidelog.coordinator.transaction import TransactionCoordinator
from tidelog.protocol.errors import ErrorCode, KafkaError


def txn_coordinator(ctx: RequestContext) -> TransactionCoordinator:
    coordinator = ctx.broker.txn_coordinator
    if coordinator is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "transaction coordinator not running")
    return coordinator


def for_version(error: int, version: int, fenced_since: int) -> int:
    """KIP-588: PRODUCER_FENCED only for request versions that know it; older ones get INVALID_PRODUCER_EPOCH."""
    if error == ErrorCode.PRODUCER_FENCED and version < fenced_since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error
