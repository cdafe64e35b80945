"""The plain Produce path (dispatch._plain_produce -> apis/produce.handle_plain), over real sockets: it answers
exactly what the generic dispatch answers, and when it hands a request over (nothing it may answer alone) it has
appended nothing, so no batch is ever written twice."""

from __future__ import annotations

from typing import Any

import pytest
from broker_testlib import PRODUCE, batch

from tidelog.broker.apis import produce as produce_api
from tidelog.broker.apis.produce import handle_plain
from tidelog.protocol.messages import request_class
from tidelog.protocol.records import ZSTD
from tidelog.storage import TopicPartition
from tidelog.testing import BrokerHandle, KafkaWire

VERSIONS = (3, 7, 8, 9, 12)  # non-flexible and flexible, around zstd (v7)


def _request(topic: str, partitions: list[tuple[int, bytes | None]], version: int, acks: int = -1) -> Any:
    cls = request_class(PRODUCE)[version]
    T = cls.TopicProduceData
    return cls(transactional_id=None, acks=acks, timeout_ms=30_000,
               topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=i, records=r)
                                                         for i, r in partitions])])


def _answers(response: Any) -> list[tuple[int, int, int, int]]:
    """(partition, error code, base offset, log start offset) of each partition answer."""
    return [(p.index, p.error_code, p.base_offset, getattr(p, "log_start_offset", -1))
            for t in response.responses for p in t.partition_responses]


def _corrupt(data: bytes) -> bytes:
    bad = bytearray(data)
    bad[-1] ^= 0xFF  # the CRC no longer matches
    return bytes(bad)


def _exchange(broker: BrokerHandle, topic: str, version: int) -> list[list[tuple[int, int, int, int]]]:
    """A series of requests of every outcome the plain path answers itself (good batches, a corrupt one, a
    partition out of range beside a good one, zstd, acks=1), each partition's answers."""
    requests = [
        _request(topic, [(0, batch(3)), (1, batch(2))], version),
        _request(topic, [(0, _corrupt(batch(1))), (1, batch(1))], version),
        _request(topic, [(1, batch(2)), (7, batch(1))], version),  # 7: no such partition
        _request(topic, [(0, batch(2, compression=ZSTD))], version),
        _request(topic, [(1, batch(1))], version, acks=1),
    ]
    with KafkaWire(broker.bootstrap) as wire:
        return [_answers(wire.request(PRODUCE, version, r)) for r in requests]


def test_plain_and_generic_dispatch_answer_alike(tidelog_broker: BrokerHandle,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The same requests to two topics, the second with a fault injected on another API, which sends every
    request (Produce too) through the generic dispatch: identical answers, offsets included. A counter on
    handle_plain (the real function, called through) shows which path answered."""
    answered = [0]

    def counted(*args: Any) -> Any:
        out = handle_plain(*args)
        answered[0] += out is not None
        return out

    monkeypatch.setattr(produce_api, "handle_plain", counted)
    for version in VERSIONS:
        tidelog_broker.create_topic(f"plain-{version}", 2)
        tidelog_broker.create_topic(f"generic-{version}", 2)
        answered[0] = 0
        plain = _exchange(tidelog_broker, f"plain-{version}", version)
        # all but the request naming a missing partition, and zstd before v7
        assert answered[0] == (3 if version < 7 else 4), f"v{version}"
        tidelog_broker.faults.set_latency(1, api="DescribeGroups")
        try:
            answered[0] = 0
            generic = _exchange(tidelog_broker, f"generic-{version}", version)
            assert answered[0] == 0
        finally:
            tidelog_broker.faults.clear()
        assert plain == generic, f"v{version}"
        zstd = plain[3][0][1]
        assert zstd == (0 if version >= 7 else 76)  # UNSUPPORTED_COMPRESSION_TYPE before v7 (KIP-110)
        assert plain[1][0][1] == 2 and plain[2][1][1] == 3  # CORRUPT_MESSAGE; UNKNOWN_TOPIC_OR_PARTITION


def test_a_request_handed_over_writes_each_batch_once(tidelog_broker: BrokerHandle) -> None:
    """A request the plain path cannot answer alone (here its second partition does not exist) is checked whole
    before anything is appended: the generic path then appends the first partition's batch, once."""
    tidelog_broker.create_topic("handed-over")
    with KafkaWire(tidelog_broker.bootstrap) as wire:
        first = _answers(wire.request(PRODUCE, 9, _request("handed-over", [(0, batch(2)), (3, batch(1))], 9)))
        second = _answers(wire.request(PRODUCE, 9, _request("handed-over", [(0, batch(1))], 9)))
    assert [(i, e, o) for i, e, o, _ in first] == [(0, 0, 0), (3, 3, -1)]
    assert [(i, e, o) for i, e, o, _ in second] == [(0, 0, 2)]  # offsets 0-1 were written once
    log = tidelog_broker.state.topics.log(TopicPartition("handed-over", 0))
    assert log is not None and log.log_end_offset == 3


def test_an_append_the_flush_policy_fsyncs_is_answered_after_its_fsync(tidelog_broker: BrokerHandle) -> None:
    """flush.messages=1: the plain path hands the appends it made to the deferred fsync, as `handle` does, and
    answers once the records are durable and visible."""
    tidelog_broker.create_topic("flushed", 1, configs={"flush.messages": "1"})
    with KafkaWire(tidelog_broker.bootstrap) as wire:
        answers = [_answers(wire.request(PRODUCE, 9, _request("flushed", [(0, batch(1))], 9))) for _ in range(3)]
    assert [a[0][:3] for a in answers] == [(0, 0, 0), (0, 0, 1), (0, 0, 2)]
    log = tidelog_broker.state.topics.log(TopicPartition("flushed", 0))
    assert log is not None and log.high_watermark == 3
