"""Idempotent producer: producer id allocation (unique across restarts), and per-partition sequence checks on
real logs - first through Log.append_as_leader, then with raw Produce requests over a socket to a real broker,
including across a broker restart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tidelog.broker.producer_ids import ProducerIdManager
from tidelog.clock import ManualClock
from tidelog.config.broker_config import BrokerConfig
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.storage import TopicPartition
from tidelog.storage.log_manager import LogManager
from tidelog.testing import BrokerHandle, KafkaWire


def build_batch(producer_id: int, epoch: int, base_sequence: int, values: list[bytes],
                timestamp: int = 1_700_000_000_000) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=producer_id,
                                  producer_epoch=epoch, base_sequence=base_sequence, batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=timestamp, key=None, value=v, headers=[])
    return bytes(b.build())


# ------------------------------------------------------------------------------------------ producer ids
def test_producer_ids_unique_across_restarts(tmp_path: Path) -> None:
    first = ProducerIdManager(tmp_path, block_size=3)
    ids = [first.generate_producer_id() for _ in range(5)]
    assert ids == [0, 1, 2, 3, 4]
    second = ProducerIdManager(tmp_path, block_size=3)       # "restart": the unused rest of block 2 is skipped
    more = [second.generate_producer_id() for _ in range(4)]
    assert more == [6, 7, 8, 9] and not set(more) & set(ids)
    third = ProducerIdManager(tmp_path, block_size=3)
    assert third.generate_producer_id() == 12


def test_damaged_producer_id_state_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "tidelog-producer-ids.json").write_text("{not json")
    with pytest.raises(RuntimeError):
        ProducerIdManager(tmp_path)


# ------------------------------------------------------------------------------ sequence checks on a Log
class LogNode:
    def __init__(self, data_dir: Path, clock: ManualClock) -> None:
        config = BrokerConfig({"log.dirs": str(data_dir)})
        self.manager = LogManager(list(config.log_dirs), config.default_log_config(), clock)
        self.manager.startup()
        self.config = config

    def log(self) -> Any:
        return self.manager.get_or_create_log(TopicPartition("idem", 0), self.config.default_log_config(),
                                              b"\x01" * 16)


def test_duplicate_and_out_of_order_on_log_across_restart(tmp_path: Path) -> None:
    clock = ManualClock()
    node = LogNode(tmp_path, clock)
    log = node.log()
    first = log.append_as_leader(build_batch(1000, 0, 0, [b"a", b"b"]))
    second = log.append_as_leader(build_batch(1000, 0, 2, [b"c"]))
    assert (first.first_offset, second.first_offset) == (0, 2)
    dup = log.append_as_leader(build_batch(1000, 0, 0, [b"a", b"b"]))
    assert dup.first_offset == 0 and dup.last_offset == 1 and log.log_end_offset == 3
    with pytest.raises(KafkaError) as gap:
        log.append_as_leader(build_batch(1000, 0, 5, [b"x"]))
    assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    node.manager.shutdown()

    node = LogNode(tmp_path, clock)
    log = node.log()
    again = log.append_as_leader(build_batch(1000, 0, 2, [b"c"]))
    assert again.first_offset == 2 and log.log_end_offset == 3, "duplicate after restart must not re-append"
    with pytest.raises(KafkaError) as gap2:
        log.append_as_leader(build_batch(1000, 0, 7, [b"y"]))
    assert gap2.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    # a bumped epoch must restart at sequence 0; afterwards the old epoch is fenced
    with pytest.raises(KafkaError) as bad_new_epoch:
        log.append_as_leader(build_batch(1000, 1, 5, [b"z"]))
    assert bad_new_epoch.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append_as_leader(build_batch(1000, 1, 0, [b"e1"])).first_offset == 3
    with pytest.raises(KafkaError) as fenced:
        log.append_as_leader(build_batch(1000, 0, 3, [b"old"]))
    assert fenced.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    node.manager.shutdown()


# ----------------------------------------------------------------------------- raw Produce over a socket
def _produce(bootstrap: str, topic: str, batch: bytes, version: int = 8) -> tuple[int, int]:
    from tidelog.protocol.messages import request_class

    req_cls = request_class(0)[version]
    T = req_cls.TopicProduceData
    req = req_cls(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=batch)])])
    with KafkaWire(bootstrap, client_id="idem-test") as wire:
        resp = wire.request(0, version, req)
    p = resp.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def test_raw_produce_replay_and_gap_across_restart(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic


    pid = 4242
    b = tidelog_broker_factory(log_dir=tmp_path)
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    admin.create_topics([NewTopic("idem", 1, 1)])
    admin.close()
    assert _produce(b.bootstrap, "idem", build_batch(pid, 0, 0, [b"r0", b"r1"])) == (0, 0)
    assert _produce(b.bootstrap, "idem", build_batch(pid, 0, 2, [b"r2"])) == (0, 2)
    # the same request again: acknowledged with the original offset, not appended
    assert _produce(b.bootstrap, "idem", build_batch(pid, 0, 2, [b"r2"])) == (0, 2)
    err, _ = _produce(b.bootstrap, "idem", build_batch(pid, 0, 9, [b"gap"]))
    assert err == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _produce(b.bootstrap, "idem", build_batch(pid, 0, 3, [b"r3"])) == (0, 3)
    b.restart()
    assert _produce(b.bootstrap, "idem", build_batch(pid, 0, 3, [b"r3"])) == (0, 3)
    err, _ = _produce(b.bootstrap, "idem", build_batch(pid, 0, 6, [b"gap"]))
    assert err == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _produce(b.bootstrap, "idem", build_batch(pid, 0, 4, [b"r4"])) == (0, 4)
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000, enable_auto_commit=False)
    consumer.assign([KafkaTopicPartition("idem", 0)])
    values = [m.value for m in consumer]
    consumer.close()
    assert values == [b"r0", b"r1", b"r2", b"r3", b"r4"]


def test_init_producer_id_over_the_wire_is_unique_across_restart(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:

    def init(bootstrap: str, transactional_id: str | None = None, version: int = 4) -> tuple[int, int, int]:
        from tidelog.protocol.messages import request_class

        req = request_class(22)[version](transactional_id=transactional_id, transaction_timeout_ms=60000,
                                         producer_id=-1, producer_epoch=-1)
        with KafkaWire(bootstrap, client_id="test") as wire:
            resp = wire.request(22, version, req)
        return resp.error_code, resp.producer_id, resp.producer_epoch

    b = tidelog_broker_factory(log_dir=tmp_path)
    first = [init(b.bootstrap) for _ in range(3)]
    assert all(err == 0 and epoch == 0 for err, _, epoch in first)
    assert len({pid for _, pid, _ in first}) == 3
    # a transactional id gets its producer id from the same blocks (the transaction coordinator)
    err, txn_pid, txn_epoch = init(b.bootstrap, "txn-1")
    assert (err, txn_epoch) == (0, 0) and txn_pid not in {pid for _, pid, _ in first}
    assert init(b.bootstrap, "")[0] == ErrorCode.INVALID_REQUEST
    b.restart()
    again = [init(b.bootstrap, version=0) for _ in range(2)]
    assert not {pid for _, pid, _ in again} & {pid for _, pid, _ in first}


def test_idempotent_producers_of_every_python_client(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """librdkafka, kafka-python and aiokafka with idempotence on: InitProducerId, then sequenced batches, each
    client with its own producer id."""
    import asyncio

    from aiokafka import AIOKafkaProducer
    from confluent_kafka import Producer
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    from tidelog.protocol.record_batch import iter_batches

    b = tidelog_broker_factory(log_dir=tmp_path)
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    admin.create_topics([NewTopic(name, 1, 1) for name in ("idem-rd", "idem-kp", "idem-aio")])
    admin.close()
    rd = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True})
    for i in range(50):
        rd.produce("idem-rd", value=b"%d" % i, partition=0)
    assert rd.flush(60) == 0
    kp = KafkaProducer(bootstrap_servers=b.bootstrap, enable_idempotence=True, acks="all")
    for i in range(50):
        kp.send("idem-kp", value=b"%d" % i, partition=0)
    kp.flush(60)
    kp.close()

    async def aio() -> None:
        p = AIOKafkaProducer(bootstrap_servers=b.bootstrap, enable_idempotence=True)
        await p.start()
        try:
            for i in range(50):
                await p.send_and_wait("idem-aio", b"%d" % i, partition=0)
        finally:
            await p.stop()

    asyncio.run(aio())

    pids = {}
    for topic in ("idem-rd", "idem-kp", "idem-aio"):
        data = b.call(lambda t=topic: b.state.topics.log(TopicPartition(t, 0)).read(0, 1 << 20, 1 << 62, True))
        headers = [h for _, h in iter_batches(data)]
        assert sum(h.records_count for h in headers) == 50
        assert len({h.producer_id for h in headers}) == 1 and headers[0].producer_id >= 0
        # sequences are contiguous from 0
        seq = 0
        for h in headers:
            assert h.base_sequence == seq
            seq += h.last_offset_delta + 1
        pids[topic] = headers[0].producer_id
    assert len(set(pids.values())) == 3


def test_sequence_rules_on_log(tmp_path: Path) -> None:
    """Kafka 3.9 rules (Kafka's ProducerStateManager): any of the last 5 batches is a duplicate; an unknown producer
    may start at any sequence; sequences wrap after INT32_MAX."""
    node = LogNode(tmp_path, ManualClock())
    log = node.log()
    firsts = [log.append_as_leader(build_batch(7, 0, i * 2, [b"x", b"y"])).first_offset for i in range(6)]
    assert firsts == [0, 2, 4, 6, 8, 10]
    # batches 1..5 are retained: replaying batch 2 answers its original offset
    dup = log.append_as_leader(build_batch(7, 0, 4, [b"x", b"y"]))
    assert (dup.first_offset, dup.last_offset) == (4, 5) and log.log_end_offset == 12
    # batch 0 is no longer retained: replaying it is out of order, not a duplicate
    with pytest.raises(KafkaError) as evicted:
        log.append_as_leader(build_batch(7, 0, 0, [b"x", b"y"]))
    assert evicted.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    # an unknown producer id is accepted at any sequence (no UNKNOWN_PRODUCER_ID on Produce since Kafka 2.5)
    assert log.append_as_leader(build_batch(8, 3, 1234, [b"z"])).first_offset == 12
    assert log.append_as_leader(build_batch(8, 3, 1235, [b"z"])).first_offset == 13
    # wrap-around: after INT32_MAX the next sequence is 0
    assert log.append_as_leader(build_batch(9, 0, 2_147_483_646, [b"a", b"b"])).first_offset == 14
    assert log.append_as_leader(build_batch(9, 0, 0, [b"c"])).first_offset == 16
    node.manager.shutdown()
