"""EndTxn (key 26): commit or abort (PrepareCommit/PrepareAbort, markers on every partition,
CompleteCommit/CompleteAbort). v5 is transactions v2 (KIP-890 part 2): the epoch is bumped at every end, rolled
over to a new producer id when exhausted, and the answer carries the producer id and epoch to continue with.
"""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import check_transactional_id, for_version, txn_coordinator
from tidelog.broker.context import RequestContext
from tidelog.coordinator.transaction.coordinator import EndTxnResult
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class

API_KEY = 26
NOTES = """PrepareCommit/PrepareAbort, one marker per partition, CompleteCommit/CompleteAbort; WRITE on the
transactional id; v5 is KIP-890 part 2 (TV2): epoch bump at every end, producer id rollover on exhaustion, the
new ProducerId/ProducerEpoch answered, an abort with no partition allowed"""
PRODUCER_FENCED_SINCE = 2
TV2_SINCE = 5  # Kafka's TransactionVersion.transactionVersionForEndTxn


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    error = check_transactional_id(ctx, request.transactional_id)  # KafkaApis.handleEndTxnRequest: WRITE
    result = EndTxnResult(error)
    try:
        if error == ErrorCode.NONE:
            result = txn_coordinator(ctx).end_transaction(
                request.transactional_id, request.producer_id, request.producer_epoch, bool(request.committed),
                2 if version >= TV2_SINCE else 0)
    except KafkaError as e:
        result = EndTxnResult(e.code)
    cls = response_class(API_KEY)[version]
    error_code = for_version(result.error, version, PRODUCER_FENCED_SINCE)
    if version >= TV2_SINCE:
        return cls(throttle_time_ms=0, error_code=error_code, producer_id=result.producer_id,
                   producer_epoch=result.producer_epoch)
    return cls(throttle_time_ms=0, error_code=error_code)
