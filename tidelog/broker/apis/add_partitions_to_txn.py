"""AddPartitionsToTxn (key 24): the client versions 0-3 (one transaction). v4+ (KIP-890 broker-to-coordinator
verification, batched transactions) is what a partition leader sends its coordinator; on one node the
Produce handler asks the coordinator directly, so those versions are not offered.
"""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import add_partitions_errors, for_version, txn_coordinator
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import KafkaError
from tidelog.protocol.messages import response_class
from tidelog.storage import TopicPartition

API_KEY = 24
NOTES = """the client versions; v4+ (broker-to-coordinator verification, KIP-890) is not needed on one node:
Produce asks the coordinator directly. WRITE on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), WRITE per topic (TOPIC_AUTHORIZATION_FAILED,
before UNKNOWN_TOPIC_OR_PARTITION; internal topics never authorized when an authorizer is set); any failure
leaves the rest OPERATION_NOT_ATTEMPTED"""
PRODUCER_FENCED_SINCE = 2


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    cls = response_class(API_KEY)[version]
    requested = [(t.name, list(t.partitions or [])) for t in request.v3_and_below_topics or []]
    wanted = [TopicPartition(name, p) for name, partitions in requested for p in partitions]
    # authorization and unknown partitions: Kafka adds nothing when one fails (the others OPERATION_NOT_ATTEMPTED)
    failed = add_partitions_errors(ctx, request.v3_and_below_transactional_id, wanted)
    if failed is not None:
        result = failed
    else:
        try:
            error = txn_coordinator(ctx).handle_add_partitions(
                request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch, wanted)
        except KafkaError as e:
            error = e.code
        result = dict.fromkeys(wanted, for_version(error, version, PRODUCER_FENCED_SINCE))
    T = cls.AddPartitionsToTxnTopicResult
    P = T.AddPartitionsToTxnPartitionResult
    return cls(throttle_time_ms=0, results_by_topic_v3_and_below=[
        T(name=name, results_by_partition=[P(partition_index=p, partition_error_code=result[TopicPartition(name, p)])
                                           for p in partitions])
        for name, partitions in requested])
