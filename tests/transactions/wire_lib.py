"""Transactions over raw requests (tidelog.testing.KafkaWire): InitProducerId, AddPartitionsToTxn, EndTxn,
transactional and idempotent Produce, and a read_committed consumer's filtering of a Fetch response."""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from tests.broker.broker_testlib import PRODUCE, produce_request
from tidelog.protocol.errors import ErrorCode as E
from tidelog.protocol.messages import request_class
from tidelog.protocol.record_batch import iter_batches
from tidelog.protocol.records import Record, build_batch, iter_records
from tidelog.testing import KafkaWire

INIT_PRODUCER_ID, ADD_PARTITIONS, END_TXN = 22, 24, 26
RETRIABLE = {E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.CONCURRENT_TRANSACTIONS}


def init(wire: KafkaWire, tid: str | None, version: int = 4, timeout_ms: int = 60000) -> Any:
    """InitProducerId for a transactional id (or, with None, an idempotent producer); asserts success. Retried,
    as clients do, while the coordinator loads (a broker just started) or completes the previous transaction."""
    deadline = time.monotonic() + 60
    while True:
        resp = wire.request(INIT_PRODUCER_ID, version, request_class(INIT_PRODUCER_ID)[version](
            transactional_id=tid, transaction_timeout_ms=timeout_ms, producer_id=-1, producer_epoch=-1))
        if resp.error_code not in RETRIABLE or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert resp.error_code == 0, f"InitProducerId {tid}: error {resp.error_code}"
    return resp


def add_partitions(wire: KafkaWire, tid: str, pid: int, epoch: int, topic: str, parts: list[int],
                   version: int = 3) -> dict[tuple[str, int], int]:
    Req = request_class(ADD_PARTITIONS)[version]
    resp = wire.request(ADD_PARTITIONS, version, Req(
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[Req.AddPartitionsToTxnTopic(name=topic, partitions=parts)]))
    return {(t.name, p.partition_index): p.partition_error_code
            for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}


def end_txn(wire: KafkaWire, tid: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    return int(wire.request(END_TXN, version, request_class(END_TXN)[version](
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit)).error_code)


def produce_records(wire: KafkaWire, topic: str, partition: int, records: Sequence[tuple[bytes | None, bytes | None]],
                    timestamp: int, pid: int, epoch: int, seq: int, transactional_id: str | None = None) -> Any:
    """One idempotent (or, with a transactional id, transactional) batch over Produce v9: the partition response."""
    batch = bytes(build_batch([Record(i, timestamp, k, v) for i, (k, v) in enumerate(records)], 0,
                              producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                              is_transactional=transactional_id is not None))
    response = wire.request(PRODUCE, 9, produce_request(topic, partition, batch, transactional_id=transactional_id))
    [topic_response] = response.responses
    [partition_response] = topic_response.partition_responses
    return partition_response


class Consumed(NamedTuple):
    records: list[tuple[int, bytes | None, bytes | None]]  # (offset, key, value) delivered to the application
    markers: list[tuple[int, int, bool]]  # (offset, producer id, commit) of the control batches read
    next_offset: int  # the consumer's position afterwards


def consume(data: bytes | None, fetch_offset: int, aborted: Sequence[tuple[int, int]] | None,
            read_committed: bool) -> Consumed:
    """What a Kafka consumer delivers from one partition's Fetch answer (Kafka's CompletedFetch.nextFetchedRecord):
    complete batches only, records before the fetch offset skipped; under read_committed the aborted transactions
    (producer id, first offset) are taken in first-offset order as each batch's last offset reaches them, a
    transactional batch of a producer among them is skipped, and that producer's ABORT marker ends it."""
    pending = sorted(aborted or [], key=lambda t: t[1])
    aborted_pids: set[int] = set()
    out: list[tuple[int, bytes | None, bytes | None]] = []
    markers: list[tuple[int, int, bool]] = []
    position = fetch_offset
    buf = data or b""
    for pos, header in iter_batches(buf):
        position = max(position, header.next_offset)
        control = None
        control_records = list(iter_records(buf, pos)) if header.is_control else []
        if control_records:  # the cleaner may leave a control batch empty: it is no marker (containsAbortMarker)
            control = struct.unpack(">hh", control_records[0].key or b"")[1] == 1  # type 1 = COMMIT, 0 = ABORT
            markers.append((header.base_offset, header.producer_id, control))
        if read_committed and header.has_producer_id:
            while pending and pending[0][1] <= header.last_offset:
                aborted_pids.add(pending.pop(0)[0])
            if control is False:
                aborted_pids.discard(header.producer_id)
            elif header.is_transactional and header.producer_id in aborted_pids:
                continue
        if header.is_control:
            continue
        out.extend((r.offset, r.key, r.value) for r in iter_records(buf, pos) if r.offset >= fetch_offset)
    return Consumed(out, markers, position)
