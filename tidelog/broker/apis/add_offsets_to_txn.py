"""AddOffsetsToTxn (key 25): adds the group's `__consumer_offsets` partition to the transaction, so its
TxnOffsetCommit records get the transaction's marker. v4 only adds the TRANSACTION_ABORTABLE error code
(never sent here). A transactions-v2 producer (KIP-890 part 2) skips it: TxnOffsetCommit v5 adds the partition.
"""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import check_transactional_id, for_version, txn_coordinator
from tidelog.broker.apis._shared import coordinator as group_coordinator
from tidelog.broker.context import RequestContext
from tidelog.coordinator.group import GROUP_METADATA_TOPIC_NAME
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.storage import TopicPartition

API_KEY = 25
NOTES = """adds the group's `__consumer_offsets` partition; WRITE on the transactional id, then READ on the
group (GROUP_AUTHORIZATION_FAILED); a TV2 producer skips it (TxnOffsetCommit v5 adds the partition)"""
PRODUCER_FENCED_SINCE = 2


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    cls = response_class(API_KEY)[version]
    # KafkaApis.handleAddOffsetsToTxnRequest: WRITE on the transactional id, then READ on the group
    denied = check_transactional_id(ctx, request.transactional_id, request.group_id or "")
    if denied != ErrorCode.NONE:
        return cls(throttle_time_ms=0, error_code=denied)
    try:
        groups = group_coordinator(ctx)
        groups.ensure_offsets_topic()  # the offsets partition must exist to take the marker
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, groups.partition_for(request.group_id))
        error = txn_coordinator(ctx).handle_add_partitions(request.transactional_id, request.producer_id,
                                                           request.producer_epoch, [tp])
    except KafkaError as e:
        error = e.code
    return cls(throttle_time_ms=0, error_code=for_version(error, version, PRODUCER_FENCED_SINCE))
