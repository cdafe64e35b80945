"""Raw requests of a transactions-v2 producer (KIP-890 part 2), in the order Kafka 4.x's Java TransactionManager
sends them when the broker finalizes `transaction.version` 2: InitProducerId v5, transactional Produce v12 with no
AddPartitionsToTxn, TxnOffsetCommit v5 with no AddOffsetsToTxn, EndTxn v5 (whose answer carries the producer id
and epoch of the next transaction)."""

from __future__ import annotations

import time
import uuid
from typing import Any, NamedTuple

from tests.broker.broker_testlib import PRODUCE, produce_request
from tidelog.protocol.messages import request_class
from tidelog.protocol.records import Record, build_batch
from tidelog.testing import KafkaWire

from .wire_lib import init

ADD_PARTITIONS, END_TXN, TXN_OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_PRODUCERS = 24, 26, 28, 9, 61


class Producer(NamedTuple):
    """The producer id and epoch a TV2 client holds."""

    producer_id: int
    epoch: int


def init_v5(wire: KafkaWire, tid: str, timeout_ms: int = 60000) -> Producer:
    resp = init(wire, tid, version=5, timeout_ms=timeout_ms)
    return Producer(resp.producer_id, resp.producer_epoch)


def produce_v12(wire: KafkaWire, tid: str, p: Producer, topic: str, partition: int, values: list[bytes],
                seq: int = 0, version: int = 12) -> Any:
    """One transactional batch; the partition's answer."""
    now = int(time.time() * 1000)
    batch = bytes(build_batch([Record(i, now, None, v) for i, v in enumerate(values)], 0,
                              producer_id=p.producer_id, producer_epoch=p.epoch, base_sequence=seq,
                              is_transactional=True))
    response = wire.request(PRODUCE, version, produce_request(topic, partition, batch, version=version,
                                                              transactional_id=tid))
    [topic_response] = response.responses
    [partition_response] = topic_response.partition_responses
    return partition_response


def end_txn_v5(wire: KafkaWire, tid: str, p: Producer, commit: bool) -> tuple[int, Producer]:
    """(error code, the producer id and epoch answered)."""
    resp = wire.request(END_TXN, 5, request_class(END_TXN)[5](
        transactional_id=tid, producer_id=p.producer_id, producer_epoch=p.epoch, committed=commit))
    return resp.error_code, Producer(resp.producer_id, resp.producer_epoch)


def txn_offset_commit(wire: KafkaWire, tid: str, p: Producer, group: str, topic: str, partition: int, offset: int,
                      version: int = 5) -> int:
    Req = request_class(TXN_OFFSET_COMMIT)[version]
    T = Req.TxnOffsetCommitRequestTopic
    resp = wire.request(TXN_OFFSET_COMMIT, version, Req(
        transactional_id=tid, group_id=group, producer_id=p.producer_id, producer_epoch=p.epoch, generation_id=-1,
        member_id="", group_instance_id=None, topics=[T(name=topic, partitions=[T.TxnOffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="")])]))
    return int(resp.topics[0].partitions[0].error_code)


def txn_offset_commit_v6(wire: KafkaWire, tid: str, p: Producer, group: str,
                         offsets: list[tuple[uuid.UUID, list[tuple[int, int]]]]) -> list[tuple[uuid.UUID, dict[int, int]]]:
    """TxnOffsetCommit v6 (KIP-1319), each topic by id with its (partition, offset) pairs: per response topic,
    (the topic id it echoes, partition -> error)."""
    Req = request_class(TXN_OFFSET_COMMIT)[6]
    T = Req.TxnOffsetCommitRequestTopic
    P = T.TxnOffsetCommitRequestPartition
    resp = wire.request(TXN_OFFSET_COMMIT, 6, Req(
        transactional_id=tid, group_id=group, producer_id=p.producer_id, producer_epoch=p.epoch, generation_id=-1,
        member_id="", group_instance_id=None, topics=[
            T(topic_id=topic_id, partitions=[P(partition_index=i, committed_offset=o, committed_leader_epoch=-1,
                                               committed_metadata="v6") for i, o in parts])
            for topic_id, parts in offsets]))
    return [(t.topic_id, {q.partition_index: q.error_code for q in t.partitions}) for t in resp.topics]


def committed_offset(wire: KafkaWire, group: str, topic: str, partition: int) -> tuple[int, int]:
    """OffsetFetch v7 with require_stable: (offset, error)."""
    F = request_class(OFFSET_FETCH)[7]
    out = wire.request(OFFSET_FETCH, 7, F(group_id=group, require_stable=True, topics=[
        F.OffsetFetchRequestTopic(name=topic, partition_indexes=[partition])]))
    p = out.topics[0].partitions[0]
    return p.committed_offset, p.error_code


def add_partitions_batched(wire: KafkaWire, version: int, tid: str, p: Producer, topic: str, parts: list[int],
                           verify_only: bool) -> tuple[int, dict[int, int]]:
    """AddPartitionsToTxn v4+ (the partition leader's form): (top-level error, partition -> error)."""
    Req = request_class(ADD_PARTITIONS)[version]
    Txn = Req.AddPartitionsToTxnTransaction
    resp = wire.request(ADD_PARTITIONS, version, Req(transactions=[Txn(
        transactional_id=tid, producer_id=p.producer_id, producer_epoch=p.epoch, verify_only=verify_only,
        topics=[Req.AddPartitionsToTxnTopic(name=topic, partitions=parts)])]))
    errors = {r.partition_index: r.partition_error_code
              for t in resp.results_by_transaction for topic_result in t.topic_results
              for r in topic_result.results_by_partition}
    return resp.error_code, errors


def producer_epochs(wire: KafkaWire, topic: str, partition: int) -> dict[int, int]:
    """DescribeProducers: producer id -> the epoch of its last batch (data or marker) in the partition."""
    D = request_class(DESCRIBE_PRODUCERS)[0]
    resp = wire.request(DESCRIBE_PRODUCERS, 0, D(topics=[D.TopicRequest(name=topic, partition_indexes=[partition])]))
    [part] = resp.topics[0].partitions
    return {a.producer_id: a.producer_epoch for a in part.active_producers}
