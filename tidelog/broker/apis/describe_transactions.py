"""DescribeTransactions (key 65, KIP-664): state, producer id/epoch, timeout, start time and partitions of
transactional ids (for a prepared transaction: the partitions still waiting for their marker)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import response_cls, txn_coordinator
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import TOPIC, TRANSACTIONAL_ID, Op, authorize, authorized_names

API_KEY = 65
NOTES = """state, producer id/epoch, timeout, start time, partitions (KIP-664); DESCRIBE per transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), only topics the principal may DESCRIBE listed"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    S = cls.TransactionState
    out = []
    for tid in request.transactional_ids or []:
        try:
            # KafkaApis.handleDescribeTransactionsRequest: DESCRIBE on the id, only describable topics shown
            if not authorize(ctx, Op.DESCRIBE, TRANSACTIONAL_ID, tid or ""):
                raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None)
            error, meta = txn_coordinator(ctx).describe(tid)
        except KafkaError as e:
            error, meta = e.code, None
        if meta is None:
            out.append(S(error_code=error, transactional_id=tid, transaction_state="", transaction_timeout_ms=0,
                         transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[]))
            continue
        topics = meta.topics()
        visible = authorized_names(ctx, Op.DESCRIBE, TOPIC, topics)
        out.append(S(error_code=error, transactional_id=tid, transaction_state=meta.state.state_name,
                     transaction_timeout_ms=meta.txn_timeout_ms,
                     transaction_start_time_ms=meta.txn_start_timestamp_ms, producer_id=meta.producer_id,
                     producer_epoch=meta.producer_epoch,
                     topics=[S.TopicData(topic=t, partitions=ids) for t, ids in topics.items() if t in visible]))
    return cls(throttle_time_ms=0, transaction_states=out)
