"""FindCoordinator (key 10): this single node coordinates every group and transactional id.

v0-3 carry one key and answer one node; v4+ batch `coordinator_keys` and answer one entry per key
(docs/PROTOCOL.md). A group lookup creates `__consumer_offsets` first, a transaction lookup
`__transaction_state`, as Kafka does. v5 only adds the TRANSACTION_ABORTABLE error; v6 adds the share key type
(KIP-932), which this node, without share groups, answers as Kafka's KafkaApis.getCoordinator does when
`__share_group_state` does not exist.
"""

from __future__ import annotations

import base64
import binascii
import logging
from typing import Any

from tidelog.broker.context import RequestContext
from tidelog.broker.topics import GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import GROUP, TRANSACTIONAL_ID, Op, authorize

log = logging.getLogger(__name__)

API_KEY = 10
NOTES = """this node for group and transaction keys; v4+ batched; creates `__consumer_offsets` on the first
group lookup, `__transaction_state` on the first transaction (key type 1) lookup; share keys (type 2, v6+,
KIP-932): COORDINATOR_NOT_AVAILABLE as Kafka without a share coordinator, INVALID_REQUEST for a malformed
`group:topicId:partition` key or below v6"""

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
KEY_TYPE_SHARE = 2
SHARE_MIN_VERSION = 6


def _valid_share_key(key: str) -> bool:
    """Kafka's SharePartitionKey.validate: "groupId:topicId:partition" with a non-empty group id, a base64 topic
    id and a non-negative partition (the group id may itself hold colons)."""
    parts = key.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        return False
    try:
        raw = base64.urlsafe_b64decode(parts[1] + "==")
        partition = int(parts[2])
    except (ValueError, binascii.Error):
        return False
    return len(raw) == 16 and len(parts[1]) == 22 and partition >= 0


def _lookup(ctx: RequestContext, key: str | None, key_type: int) -> tuple[ErrorCode, str | None]:
    if key is None:
        return ErrorCode.INVALID_REQUEST, "coordinator key must not be null"
    # KafkaApis.handleFindCoordinatorRequest: DESCRIBE on the group / transactional id
    if key_type == KEY_TYPE_GROUP and not authorize(ctx, Op.DESCRIBE, GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    if key_type == KEY_TYPE_TRANSACTION and not authorize(ctx, Op.DESCRIBE, TRANSACTIONAL_ID, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
    if key_type == KEY_TYPE_SHARE:
        if ctx.api_version < SHARE_MIN_VERSION or not _valid_share_key(key):
            return ErrorCode.INVALID_REQUEST, None
        # No share coordinator (share groups are not served): Kafka answers COORDINATOR_NOT_AVAILABLE.
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
    if key_type in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION) and not ctx.broker.services.loaded:
        # Kafka's FindCoordinator does not wait for the coordinator's load: it names the partition's leader when
        # the topic exists (JoinGroup & co then answer COORDINATOR_LOAD_IN_PROGRESS), else COORDINATOR_NOT_AVAILABLE
        internal = GROUP_METADATA_TOPIC_NAME if key_type == KEY_TYPE_GROUP else TRANSACTION_STATE_TOPIC_NAME
        if ctx.broker.topics.get(internal) is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the coordinator is loading"
        return ErrorCode.NONE, None
    if key_type == KEY_TYPE_GROUP:
        try:
            ctx.broker.groups.ensure_offsets_topic()
        except KafkaError as e:
            log.warning("cannot create __consumer_offsets: %s", e)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, str(e)
        return ErrorCode.NONE, None
    if key_type == KEY_TYPE_TRANSACTION:
        error = ctx.broker.txn_coordinator.ensure_topic()  # creates __transaction_state, as Kafka does on the first lookup
        return error, None if error == ErrorCode.NONE else "cannot create __transaction_state"
    return ErrorCode.INVALID_REQUEST, f"unsupported key type {key_type}"


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    cls = response_class(API_KEY)[version]
    broker = ctx.broker
    host, port = broker.advertised_endpoint(ctx.listener)  # the endpoint of the listener asked (as Metadata)
    key_type = request.key_type if version >= 1 else KEY_TYPE_GROUP
    if version >= 4:
        coordinators = []
        for key in request.coordinator_keys or []:
            error, message = _lookup(ctx, key, key_type)
            ok = error == ErrorCode.NONE
            coordinators.append(cls.Coordinator(
                key=key, node_id=broker.node_id if ok else -1, host=host if ok else "",
                port=port if ok else -1, error_code=error, error_message=message))
        return cls(throttle_time_ms=0, coordinators=coordinators)
    error, message = _lookup(ctx, request.key, key_type)
    ok = error == ErrorCode.NONE
    fields: dict[str, Any] = {
        "error_code": error, "node_id": broker.node_id if ok else -1,
        "host": host if ok else "", "port": port if ok else -1,
    }
    if version >= 1:
        fields.update(throttle_time_ms=0, error_message=message)
    return cls(**fields)
