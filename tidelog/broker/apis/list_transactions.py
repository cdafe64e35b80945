"""ListTransactions (key 66, KIP-664): filter by state names and producer ids, v1 by duration (KIP-994),
v2 by a transactional id regular expression (Java's Pattern; Python's `re` agrees on the common subset)."""

from __future__ import annotations

import re
from typing import Any

from tidelog.broker.apis._shared import txn_coordinator
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import TRANSACTIONAL_ID, Op, authorized_names

API_KEY = 66
NOTES = """state and producer id filters, v1 duration (KIP-994), v2 transactional id pattern; lists only the
ids the principal may DESCRIBE"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    cls = response_class(API_KEY)[version]
    duration = request.duration_filter if version >= 1 else -1
    pattern = request.transactional_id_pattern if version >= 2 else None
    try:
        matcher = re.compile(pattern) if pattern else None
    except re.error:
        return cls(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, unknown_state_filters=[],
                   transaction_states=[])
    try:
        error, unknown, found = txn_coordinator(ctx).list_transactions(
            request.state_filters or [], request.producer_id_filters or [], duration)
    except KafkaError as e:
        error, unknown, found = e.code, [], []
    S = cls.TransactionState
    # KafkaApis.handleListTransactionsRequest: only the ids the principal may DESCRIBE
    describable = authorized_names(ctx, Op.DESCRIBE, TRANSACTIONAL_ID, [m.transactional_id for m in found])
    return cls(throttle_time_ms=0, error_code=error, unknown_state_filters=unknown, transaction_states=[
        S(transactional_id=m.transactional_id, producer_id=m.producer_id, transaction_state=m.state.state_name)
        for m in found if m.transactional_id in describable
        and (matcher is None or matcher.fullmatch(m.transactional_id))])
