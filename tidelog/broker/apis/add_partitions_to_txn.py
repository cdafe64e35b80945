"""AddPartitionsToTxn (key 24). v0-3 come from clients (one transaction). v4+ is the batched form a partition
leader sends its coordinator (KIP-890): CLUSTER_ACTION on the cluster, no per-topic or transactional-id ACLs,
each transaction either verified (VerifyOnly: is every partition already in it? KIP-890 part 1) or added to as
transactions v2 (KIP-890 part 2); v5 may answer TRANSACTION_ABORTABLE. On one node Produce and TxnOffsetCommit
ask the coordinator directly, but the request is served as Kafka serves it.
"""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import add_partitions_errors, for_version, txn_coordinator
from tidelog.broker.context import RequestContext
from tidelog.coordinator.transaction.metadata import TV_2
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import Op, authorize_cluster
from tidelog.storage import TopicPartition

API_KEY = 24
NOTES = """v0-3 from clients: WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
partition), WRITE per topic (TOPIC_AUTHORIZATION_FAILED, before UNKNOWN_TOPIC_OR_PARTITION; internal topics never
authorized when an authorizer is set); any failure leaves the rest OPERATION_NOT_ATTEMPTED. v4-5 the
broker-to-coordinator batch of KIP-890: CLUSTER_ACTION (else top-level CLUSTER_AUTHORIZATION_FAILED), VerifyOnly
answers NONE/TRANSACTION_ABORTABLE per partition, otherwise the partitions join the transaction as TV2"""
PRODUCER_FENCED_SINCE = 2
BATCHED_SINCE = 4  # Kafka's TransactionVersion.transactionVersionForAddPartitionsToTxn: v4+ is TV2


async def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version >= BATCHED_SINCE:
        return _handle_batched(ctx, request)
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
    return cls(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(cls, requested, result))


def _topic_results(cls: Any, requested: list[tuple[str, list[int]]], result: dict[TopicPartition, int]) -> list[Any]:
    T = cls.AddPartitionsToTxnTopicResult
    P = T.AddPartitionsToTxnPartitionResult
    return [T(name=name, results_by_partition=[
        P(partition_index=p, partition_error_code=result[TopicPartition(name, p)]) for p in partitions])
        for name, partitions in requested]


def _handle_batched(ctx: RequestContext, request: Any) -> Any:
    """KafkaApis.handleAddPartitionsToTxnRequest for v4+: one result per transaction."""
    cls = response_class(API_KEY)[ctx.api_version]
    if not authorize_cluster(ctx, Op.CLUSTER_ACTION):
        return cls(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results_by_transaction=[])
    topics = ctx.broker.topics
    results = []
    for txn in request.transactions or []:
        requested = [(t.name, list(t.partitions or [])) for t in txn.topics or []]
        wanted = [TopicPartition(name, p) for name, partitions in requested for p in partitions]
        unknown = {tp for tp in wanted if (info := topics.get(tp.topic)) is None
                   or not 0 <= tp.partition < info.partitions}
        result: dict[TopicPartition, int]
        if unknown:
            result = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                      for tp in wanted}
        else:
            try:
                coordinator = txn_coordinator(ctx)
                if txn.verify_only:
                    result = dict(coordinator.verify_partitions(txn.transactional_id, txn.producer_id,
                                                                txn.producer_epoch, wanted))
                else:
                    error = coordinator.handle_add_partitions(txn.transactional_id, txn.producer_id,
                                                              txn.producer_epoch, wanted, TV_2)
                    result = dict.fromkeys(wanted, error)
            except KafkaError as e:
                result = dict.fromkeys(wanted, e.code)
        results.append(cls.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                     topic_results=_topic_results(cls, requested, result)))
    return cls(throttle_time_ms=0, error_code=0, results_by_transaction=results)
