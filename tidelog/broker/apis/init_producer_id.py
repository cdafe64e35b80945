"""InitProducerId (key 22) for idempotent producers (KIP-98, KIP-360).

Without a transactional id Kafka always allocates a fresh producer id with epoch 0 (the v3+ id/epoch fields
are ignored). Transactions are not implemented yet: a transactional InitProducerId is answered with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53). Every listed client treats that as fatal and non-retriable and
names the transactional id in the exception (Java: TransactionalIdAuthorizationException; librdkafka:
fatal error), so a transactional producer fails fast and clearly instead of retrying until max.block.ms
(COORDINATOR_NOT_AVAILABLE would be retried) or reporting a broker bug (UNKNOWN_SERVER_ERROR).
"""

from __future__ import annotations

import logging
from typing import Any

from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import response_class

log = logging.getLogger(__name__)

API_KEY = 22

TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY)[ctx.api_version]

    def answer(error: int, producer_id: int = -1, epoch: int = -1) -> Any:
        return cls(throttle_time_ms=0, error_code=error, producer_id=producer_id, producer_epoch=epoch)

    transactional_id = request.transactional_id
    if transactional_id is not None:
        if transactional_id == "":
            return answer(ErrorCode.INVALID_REQUEST)
        log.info("transactional InitProducerId for %r refused: transactions are not supported yet",
                 transactional_id)
        return answer(TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    manager = ctx.broker.producer_ids
    if manager is None:
        return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    try:
        producer_id = manager.generate_producer_id()
    except (OSError, RuntimeError) as e:
        log.error("cannot allocate a producer id: %s", e)
        return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return answer(ErrorCode.NONE, producer_id, 0)
