"""InitProducerId (key 22): idempotent producers get a fresh id; transactional ones go to the transaction
coordinator (new id, or the epoch bumped and an open transaction of the previous incarnation aborted;
KIP-360 id/epoch from v3). v6 (KIP-939 two-phase commit) is not offered.
"""

from __future__ import annotations

import logging
from typing import Any

from tidelog.broker.apis._shared import for_version, txn_coordinator
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import (
    TOPIC,
    TRANSACTIONAL_ID,
    Op,
    authorize,
    authorize_by_resource_type,
    authorize_cluster,
)

log = logging.getLogger(__name__)

API_KEY = 22
NOTES = """idempotent producers get a fresh id; a transactional id gets a new id or its epoch bumped, an open
transaction of the previous producer is aborted (fenced); KIP-360 id/epoch from v3. v6 (KIP-939 2PC) not
offered"""
PRODUCER_FENCED_SINCE = 4


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    cls = response_class(API_KEY)[version]

    def answer(error: int, producer_id: int = -1, epoch: int = -1) -> Any:
        return cls(throttle_time_ms=0, error_code=for_version(error, version, PRODUCER_FENCED_SINCE),
                   producer_id=producer_id, producer_epoch=epoch)

    transactional_id = request.transactional_id
    if transactional_id is not None:
        if transactional_id == "":
            return answer(ErrorCode.INVALID_REQUEST)
        if not authorize(ctx, Op.WRITE, TRANSACTIONAL_ID, transactional_id):  # KafkaApis.handleInitProducerIdRequest
            return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        try:
            coordinator = txn_coordinator(ctx)
        except KafkaError as e:
            return answer(e.code)
        expected_id = request.producer_id if version >= 3 else -1
        expected_epoch = request.producer_epoch if version >= 3 else -1
        try:
            result = coordinator.handle_init_producer_id(transactional_id, request.transaction_timeout_ms,
                                                         expected_id, expected_epoch)
        except (OSError, RuntimeError) as e:  # producer id block could not be reserved
            log.error("cannot allocate a producer id: %s", e)
            return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return answer(result.error, result.producer_id, result.producer_epoch)
    if not (authorize_cluster(ctx, Op.IDEMPOTENT_WRITE) or authorize_by_resource_type(ctx, Op.WRITE, TOPIC)):
        return answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)  # KIP-679: idempotence needs a WRITE on some topic
    manager = ctx.broker.producer_ids
    if manager is None:
        return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    try:
        producer_id = manager.generate_producer_id()
    except (OSError, RuntimeError) as e:
        log.error("cannot allocate a producer id: %s", e)
        return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return answer(ErrorCode.NONE, producer_id, 0)
