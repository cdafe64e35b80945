"""EndTxn (key 26): commit or abort (PrepareCommit/PrepareAbort, markers on every partition,
CompleteCommit/CompleteAbort). v5 (KIP-890 part 2: epoch bump per transaction) is not offered.
"""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import check_transactional_id, for_version, txn_coordinator
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class

API_KEY = 26
NOTES = """PrepareCommit/PrepareAbort, one marker per partition, CompleteCommit/CompleteAbort; WRITE on the
transactional id; v5 (KIP-890 part 2 epoch bump per transaction) not offered"""
PRODUCER_FENCED_SINCE = 2


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    error = check_transactional_id(ctx, request.transactional_id)  # KafkaApis.handleEndTxnRequest: WRITE
    try:
        if error == ErrorCode.NONE:
            error = txn_coordinator(ctx).handle_end_txn(request.transactional_id, request.producer_id,
                                                        request.producer_epoch, bool(request.committed))
    except KafkaError as e:
        error = e.code
    return response_class(API_KEY)[version](throttle_time_ms=0,
                                            error_code=for_version(error, version, PRODUCER_FENCED_SINCE))
