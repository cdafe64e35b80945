"""TV1 clients on a broker that finalizes `transaction.version` 2, as on a Kafka 4.x cluster: confluent-kafka
(librdkafka), kafka-python and aiokafka speak the transaction protocol v1 (measured: EndTxn v0-3, AddPartitionsToTxn
v0-3, transactional Produce v7-10; the 3.9.1 Java client tops out at EndTxn v4 / Produce v11 and runs the
existing suite in test_java.py), so the coordinator keeps TV0's rules for them: the epoch stays the same from one
transaction to the next, the transaction records a client transaction version of 0, and read_committed shows the
committed transactions only. (Every other module of tests/transactions runs on a new data dir, hence with
`transaction.version` 2 finalized too.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

from .clients_lib import PARTITIONS, check_outcome, values

OUTCOMES = [True, False, True]


pytestmark = pytest.mark.tidelog(overrides={"transaction.state.log.num.partitions": 3,
                                            "offsets.topic.num.partitions": 3})


@pytest.fixture(scope="module", autouse=True)
def transaction_version_2(tidelog_module_broker: BrokerHandle) -> None:
    """The module's broker finalizes transaction.version 2 (what these TV1 clients meet)."""
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        resp = wire.request(18, 4, request_class(18)[4](client_software_name="t", client_software_version="1"))
    assert {f.name: f.max_version_level for f in resp.finalized_features}["transaction.version"] == 2


def epoch_and_version(broker: Any, tid: str) -> tuple[int, int, int]:
    """(producer id, epoch, client transaction version) the coordinator holds for `tid`."""
    meta = broker.call(lambda: broker.state.txn_coordinator.state.get(tid).copy())
    return meta.producer_id, meta.producer_epoch, meta.client_transaction_version


def test_confluent_kafka(tidelog_module_broker: BrokerHandle) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic, tid = "tv1-confluent", "tv1-confluent"
    tidelog_module_broker.create_topic(topic, PARTITIONS)
    p = Producer({"bootstrap.servers": tidelog_module_broker.bootstrap, "transactional.id": tid, "linger.ms": 5})
    c = Consumer({"bootstrap.servers": tidelog_module_broker.bootstrap, "group.id": "tv1-confluent-g"})
    p.init_transactions(60)
    seen = []
    for t, commit in enumerate(OUTCOMES):
        p.begin_transaction()
        for i, v in enumerate(values("cf", t)):
            p.produce(topic, value=v, partition=i % PARTITIONS)
        p.flush(60)
        p.send_offsets_to_transaction([TopicPartition(topic, 0, t + 1)], c.consumer_group_metadata(), 60)
        p.commit_transaction(60) if commit else p.abort_transaction(60)
        seen.append(epoch_and_version(tidelog_module_broker, tid))
    c.close()
    assert len(set(seen)) == 1 and seen[0][2] == 0  # no bump, TV0
    check_outcome(tidelog_module_broker.bootstrap, topic, "cf", OUTCOMES)


def test_kafka_python(tidelog_module_broker: BrokerHandle) -> None:
    from kafka import KafkaProducer
    from kafka.consumer.fetcher import OffsetAndMetadata
    from kafka.structs import TopicPartition

    topic, tid = "tv1-kafka-python", "tv1-kafka-python"
    tidelog_module_broker.create_topic(topic, PARTITIONS)
    p = KafkaProducer(bootstrap_servers=tidelog_module_broker.bootstrap, transactional_id=tid)
    seen = []
    try:
        p.init_transactions()
        for t, commit in enumerate(OUTCOMES):
            p.begin_transaction()
            futures = [p.send(topic, value=v, partition=i % PARTITIONS) for i, v in enumerate(values("kp", t))]
            p.flush(60)
            for f in futures:
                f.get(60)
            p.send_offsets_to_transaction({TopicPartition(topic, 0): OffsetAndMetadata(t + 1, "", -1)},
                                          "tv1-kafka-python-g")
            p.commit_transaction() if commit else p.abort_transaction()
            seen.append(epoch_and_version(tidelog_module_broker, tid))
    finally:
        p.close(10)
    assert len(set(seen)) == 1 and seen[0][2] == 0
    check_outcome(tidelog_module_broker.bootstrap, topic, "kp", OUTCOMES)


def test_aiokafka(tidelog_module_broker: BrokerHandle) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka import TopicPartition as AioTopicPartition

    topic, tid = "tv1-aiokafka", "tv1-aiokafka"
    tidelog_module_broker.create_topic(topic, PARTITIONS)
    seen = []

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=tidelog_module_broker.bootstrap, transactional_id=tid)
        await p.start()
        try:
            for t, commit in enumerate(OUTCOMES):
                await p.begin_transaction()
                for i, v in enumerate(values("ak", t)):
                    await p.send(topic, value=v, partition=i % PARTITIONS)
                await p.flush()
                await p.send_offsets_to_transaction({AioTopicPartition(topic, 0): t + 1}, "tv1-aiokafka-g")
                await (p.commit_transaction() if commit else p.abort_transaction())
                seen.append(epoch_and_version(tidelog_module_broker, tid))
        finally:
            await p.stop()

    asyncio.run(run())
    assert len(set(seen)) == 1 and seen[0][2] == 0
    check_outcome(tidelog_module_broker.bootstrap, topic, "ak", OUTCOMES)
