"""Transactions through unmodified Python clients (confluent-kafka, kafka-python, aiokafka): commit and abort
across partitions, consume-transform-produce with sendOffsetsToTransaction, fencing by a second producer,
the LSO held by an open transaction and released by the timeout abort, KIP-890 part 1 on the wire."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tidelog.testing import BrokerHandle, KafkaWire

from .clients_lib import PARTITIONS, PER_TXN, check_outcome, read_all, values

OVERRIDES = {"group.initial.rebalance.delay.ms": 0, "transaction.state.log.num.partitions": 5,
             "offsets.topic.num.partitions": 5, "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200}
OUTCOMES = [True, False, True, False]
pytestmark = pytest.mark.tidelog(overrides=OVERRIDES)


def test_confluent_commit_and_abort(tidelog_module_broker: BrokerHandle) -> None:
    from confluent_kafka import Producer

    tidelog_module_broker.create_topic("txn-confluent", PARTITIONS)
    p = Producer({"bootstrap.servers": tidelog_module_broker.bootstrap, "transactional.id": "confluent-1", "linger.ms": 5})
    p.init_transactions(60)
    for t, commit in enumerate(OUTCOMES):
        p.begin_transaction()
        for i, v in enumerate(values("c", t)):
            p.produce("txn-confluent", value=v, partition=i % PARTITIONS)
        p.flush(60)  # abort_transaction would otherwise purge what is still queued
        p.commit_transaction(60) if commit else p.abort_transaction(60)
    check_outcome(tidelog_module_broker.bootstrap, "txn-confluent", "c", OUTCOMES)


def test_kafka_python_commit_and_abort(tidelog_module_broker: BrokerHandle) -> None:
    from kafka import KafkaProducer

    tidelog_module_broker.create_topic("txn-kafka-python", PARTITIONS)
    p = KafkaProducer(bootstrap_servers=tidelog_module_broker.bootstrap, transactional_id="kafka-python-1")
    try:
        p.init_transactions()
        for t, commit in enumerate(OUTCOMES):
            p.begin_transaction()
            futures = [p.send("txn-kafka-python", value=v, partition=i % PARTITIONS)
                       for i, v in enumerate(values("k", t))]
            p.flush(60)
            for f in futures:
                f.get(60)
            p.commit_transaction() if commit else p.abort_transaction()
    finally:
        p.close(10)
    check_outcome(tidelog_module_broker.bootstrap, "txn-kafka-python", "k", OUTCOMES)


def test_aiokafka_commit_and_abort(tidelog_module_broker: BrokerHandle) -> None:
    from aiokafka import AIOKafkaProducer

    tidelog_module_broker.create_topic("txn-aiokafka", PARTITIONS)

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=tidelog_module_broker.bootstrap, transactional_id="aiokafka-1")
        await p.start()
        try:
            for t, commit in enumerate(OUTCOMES):
                await p.begin_transaction()
                sent = [await p.send("txn-aiokafka", value=v, partition=i % PARTITIONS)
                        for i, v in enumerate(values("a", t))]
                await asyncio.gather(*sent)
                await (p.commit_transaction() if commit else p.abort_transaction())
        finally:
            await p.stop()

    asyncio.run(run())
    check_outcome(tidelog_module_broker.bootstrap, "txn-aiokafka", "a", OUTCOMES)


def _committed(bootstrap: str, group: str, topic: str) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)]
    finally:
        c.close()


def test_confluent_consume_transform_produce(tidelog_module_broker: BrokerHandle) -> None:
    """sendOffsetsToTransaction: an abort leaves the group's offsets, a commit moves them with the output;
    a restarted producer (same transactional id) continues exactly once."""
    from confluent_kafka import Consumer, Producer

    bs = tidelog_module_broker.bootstrap
    tidelog_module_broker.create_topic("ctp-in", PARTITIONS)
    tidelog_module_broker.create_topic("ctp-out", PARTITIONS)
    src = Producer({"bootstrap.servers": bs})
    for i in range(60):
        src.produce("ctp-in", value=b"in-%d" % i, partition=i % PARTITIONS)
    src.flush(60)

    def step(tid: str, commit: bool, max_records: int) -> int:
        consumer = Consumer({"bootstrap.servers": bs, "group.id": "ctp", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
        producer = Producer({"bootstrap.servers": bs, "transactional.id": tid})
        try:
            producer.init_transactions(60)
            consumer.subscribe(["ctp-in"])
            batch: list[Any] = []
            deadline = time.monotonic() + 60
            while len(batch) < max_records and time.monotonic() < deadline:
                batch.extend(m for m in consumer.consume(max_records - len(batch), 1.0) if not m.error())
            assert batch, "nothing consumed"
            producer.begin_transaction()
            for m in batch:
                producer.produce("ctp-out", value=b"out-" + m.value(), partition=m.partition())
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 60)
            producer.flush(60)
            producer.commit_transaction(60) if commit else producer.abort_transaction(60)
            return len(batch)
        finally:
            consumer.close()

    assert step("ctp-1", commit=False, max_records=20) > 0
    assert _committed(bs, "ctp", "ctp-in") == [-1001] * PARTITIONS  # no offsets after the abort
    assert read_all(bs, "ctp-out", "read_committed") == []
    done = 0
    while done < 60:
        # a new producer instance each time: restart; never ask for more than is left, or the step waits out
        # its whole deadline for records that do not exist
        done += step("ctp-1", commit=True, max_records=min(25, 60 - done))
    assert done == 60
    assert sorted(_committed(bs, "ctp", "ctp-in")) == [20, 20, 20]
    out = read_all(bs, "ctp-out", "read_committed")
    assert sorted(out) == sorted(b"out-in-%d" % i for i in range(60))  # exactly once


def test_second_producer_fences_the_first(tidelog_module_broker: BrokerHandle) -> None:
    from confluent_kafka import KafkaException, Producer

    bs = tidelog_module_broker.bootstrap
    tidelog_module_broker.create_topic("txn-fence", PARTITIONS)
    old = Producer({"bootstrap.servers": bs, "transactional.id": "fence-1"})
    old.init_transactions(60)
    old.begin_transaction()
    for i in range(PER_TXN):
        old.produce("txn-fence", value=b"old-%d" % i, partition=i % PARTITIONS)
    old.flush(60)
    new = Producer({"bootstrap.servers": bs, "transactional.id": "fence-1"})
    new.init_transactions(60)  # aborts the old producer's open transaction
    with pytest.raises(KafkaException) as raised:
        old.commit_transaction(60)
    assert raised.value.args[0].fatal()
    new.begin_transaction()
    new.produce("txn-fence", value=b"new", partition=0)
    new.commit_transaction(60)
    assert read_all(bs, "txn-fence", "read_committed") == [b"new"]
    assert len(read_all(bs, "txn-fence", "read_uncommitted")) == PER_TXN + 1


def _lso(bs: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": "lso", "isolation.level": "read_committed"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30, cached=False)[1]
    finally:
        c.close()


def test_open_transaction_holds_lso_until_commit_or_timeout(tidelog_module_broker: BrokerHandle) -> None:
    from confluent_kafka import Producer

    bs = tidelog_module_broker.bootstrap
    tidelog_module_broker.create_topic("txn-lso")
    plain = Producer({"bootstrap.servers": bs})
    plain.produce("txn-lso", value=b"before", partition=0)
    plain.flush(30)
    p = Producer({"bootstrap.servers": bs, "transactional.id": "lso-1"})
    p.init_transactions(60)
    p.begin_transaction()
    p.produce("txn-lso", value=b"in-txn", partition=0)
    p.flush(30)
    plain.produce("txn-lso", value=b"after", partition=0)
    plain.flush(30)
    assert _lso(bs, "txn-lso") == 1  # held at the transaction's first offset
    assert read_all(bs, "txn-lso", "read_committed", 1) == [b"before"]
    p.commit_transaction(60)
    assert _lso(bs, "txn-lso") == 4  # before, in-txn, after, marker
    assert read_all(bs, "txn-lso", "read_committed", 1) == [b"before", b"in-txn", b"after"]

    # a hung producer: its transaction is aborted (and the producer fenced) at transaction.timeout.ms
    hung = Producer({"bootstrap.servers": bs, "transactional.id": "lso-hung", "transaction.timeout.ms": 1500})
    hung.init_transactions(60)
    hung.begin_transaction()
    hung.produce("txn-lso", value=b"hung", partition=0)
    hung.flush(30)
    assert _lso(bs, "txn-lso") == 4
    deadline = time.monotonic() + 60
    while _lso(bs, "txn-lso") == 4:
        assert time.monotonic() < deadline, "the timed-out transaction was never aborted"
        time.sleep(0.2)
    assert _lso(bs, "txn-lso") == 6  # the hung record and its ABORT marker
    assert read_all(bs, "txn-lso", "read_committed", 1) == [b"before", b"in-txn", b"after"]
    meta = tidelog_module_broker.call(lambda: tidelog_module_broker.state.txn_coordinator.state.get("lso-hung"))
    assert meta.state.state_name == "CompleteAbort"


def test_transactional_produce_outside_the_transaction_is_refused(tidelog_module_broker: BrokerHandle) -> None:
    """KIP-890 part 1: a transactional batch to a partition not added to the transaction: INVALID_TXN_STATE."""
    from tidelog.protocol.messages import request_class
    from tidelog.protocol.records import Record, build_batch

    bs = tidelog_module_broker.bootstrap
    tidelog_module_broker.create_topic("txn-verify")
    with KafkaWire(bs) as wire:
        init = wire.request(22, 4, request_class(22)[4](transactional_id="verify-1", transaction_timeout_ms=60000,
                                                       producer_id=-1, producer_epoch=-1))
        assert init.error_code == 0
        batch = bytes(build_batch([Record(0, int(time.time() * 1000), b"k", b"v")], 0,
                                  producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                                  base_sequence=0, is_transactional=True))
        Req = request_class(0)[9]
        req = Req(transactional_id="verify-1", acks=-1, timeout_ms=30000, topic_data=[
            Req.TopicProduceData(name="txn-verify", partition_data=[
                Req.TopicProduceData.PartitionProduceData(index=0, records=batch)])])
        resp = wire.request(0, 9, req)
        assert resp.responses[0].partition_responses[0].error_code == 48  # INVALID_TXN_STATE
