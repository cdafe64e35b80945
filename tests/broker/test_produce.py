"""Produce over real sockets: raw requests encoded with kafka-python's message classes, and real clients.

Every validation error is seen on the wire, and the broker keeps serving other clients afterwards.
"""

from __future__ import annotations

import struct
import time
import uuid
from typing import Any

import pytest
from broker_testlib import (
    FETCH,
    FIND_COORDINATOR,
    PRODUCE,
    TS,
    batch,
    create_topic,
    produce,
    produce_request,
    topic_id,
)

from tidelog.protocol.messages import request_class
from tidelog.protocol.record_batch import write_crc
from tidelog.protocol.records import Record, build_batch
from tidelog.testing import BrokerHandle, KafkaWire


def assert_still_serving(bootstrap: str) -> None:
    """A second, independent client can produce and read back after the error."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    name = f"alive-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name)
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=60_000)
    try:
        meta = producer.send(name, key=b"a", value=b"still-serving").get(timeout=60)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=30_000)
    try:
        tp = TopicPartition(name, 0)
        consumer.assign([tp])
        consumer.seek(tp, meta.offset)
        assert next(iter(consumer)).value == b"still-serving"
    finally:
        consumer.close()


# --------------------------------------------------------------------------------------------- success


@pytest.mark.parametrize("version", [3, 5, 7, 8, 9, 11, 12])
def test_raw_produce_assigns_offsets_per_version(tidelog_module_broker: BrokerHandle, client: KafkaWire, version: int) -> None:
    name = f"p-v{version}"
    tidelog_module_broker.create_topic(name)
    first = produce(client, name, batch(3), version=version)
    second = produce(client, name, batch(2), version=version)
    assert (first.error_code, first.base_offset) == (0, 0)
    assert (second.error_code, second.base_offset) == (0, 3)
    assert second.log_append_time_ms == -1
    if version >= 5:
        assert second.log_start_offset == 0
    if version >= 8:
        assert second.record_errors == [] and second.error_message is None


def produce_by_id(client: KafkaWire, topics: list[tuple[uuid.UUID, int, bytes | None]], acks: int = -1) -> Any:
    """Produce v13 (KIP-516): topics named by id, one entry per (topic id, partition, records)."""
    cls = request_class(PRODUCE)[13]
    T = cls.TopicProduceData
    return client.request(PRODUCE, 13, cls(transactional_id=None, acks=acks, timeout_ms=30_000, topic_data=[
        T(topic_id=tid, partition_data=[T.PartitionProduceData(index=partition, records=records)])
        for tid, partition, records in topics]))


def test_produce_13_names_topics_by_id_and_refuses_unknown_ids(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("p-v13", 2)
    tid = topic_id(client, "p-v13")
    assert produce(client, "p-v13", batch(2), version=12).base_offset == 0  # v12: v11 on the wire
    stranger = uuid.uuid4()
    response = produce_by_id(client, [(tid, 0, batch(3)), (stranger, 0, batch(1)), (tid, 5, batch(1))])
    got = [(t.topic_id, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
           for t in response.responses]
    assert got == [(tid, [(0, 0, 2)]), (stranger, [(0, 100, -1)]),  # UNKNOWN_TOPIC_ID
                   (tid, [(5, 3, -1)])]  # UNKNOWN_TOPIC_OR_PARTITION: the id is known, the partition is not
    assert produce_by_id(client, [(uuid.UUID(int=0), 0, batch(1))]).responses[0].partition_responses[0] \
        .error_code == 100
    # the records landed under the topic's name: a Fetch by name reads all five
    cls = request_class(FETCH)[12]
    T = cls.FetchTopic
    fetched = client.request(FETCH, 12, cls(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                             isolation_level=0, session_id=0, session_epoch=-1, topics=[
        T(topic="p-v13", partitions=[T.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                      last_fetched_epoch=-1, log_start_offset=-1,
                                                      partition_max_bytes=1 << 20)])],
        forgotten_topics_data=[], rack_id=""))
    assert fetched.responses[0].partitions[0].high_watermark == 5


def test_produce_13_acks_zero_to_an_unknown_id_closes_the_connection(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        cls = request_class(PRODUCE)[13]
        T = cls.TopicProduceData
        wire.send(PRODUCE, 13, cls(transactional_id=None, acks=0, timeout_ms=1000, topic_data=[
            T(topic_id=uuid.uuid4(), partition_data=[T.PartitionProduceData(index=0, records=batch(1))])]))
        assert wire.is_closed()  # KafkaApis: a failed acks=0 Produce closes the channel
    assert_still_serving(tidelog_module_broker.bootstrap)


def test_log_append_time_topic_reports_broker_time(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("lat", 1, configs={"message.timestamp.type": "LogAppendTime"})
    r = produce(client, "lat", batch(2, ts=1000))
    assert r.error_code == 0 and r.log_append_time_ms > TS  # broker wall clock, not the client's 1000


def test_kafka_python_producer_round_trip(tidelog_module_broker: BrokerHandle) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    tidelog_module_broker.create_topic("kp", 2)
    producer = KafkaProducer(bootstrap_servers=tidelog_module_broker.bootstrap, compression_type="lz4", linger_ms=20)
    futures = [producer.send("kp", key=b"key%d" % i, value=b"value%d" % i, partition=i % 2,
                             headers=[("h", b"%d" % i)]) for i in range(20)]
    offsets = sorted((f.get(timeout=60).partition, f.get(timeout=60).offset) for f in futures)
    producer.close()
    assert offsets == sorted([(0, i) for i in range(10)] + [(1, i) for i in range(10)])
    consumer = KafkaConsumer(bootstrap_servers=tidelog_module_broker.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=30_000)
    consumer.assign([TopicPartition("kp", 0), TopicPartition("kp", 1)])
    got = []
    for message in consumer:
        got.append((message.key, message.value, message.headers))
        if len(got) == 20:
            break
    consumer.close()
    assert sorted(got) == sorted((b"key%d" % i, b"value%d" % i, [("h", b"%d" % i)]) for i in range(20))


def test_acks_zero_sends_no_response(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("acks0")
    client.send(PRODUCE, 9, produce_request("acks0", 0, batch(1), acks=0))
    # The next response on this connection answers the *next* request: acks=0 got none.
    cid = client.send(PRODUCE, 9, produce_request("acks0", 0, batch(1), acks=1))
    got, response = client.receive(PRODUCE, 9)
    assert got == cid
    assert response.responses[0].partition_responses[0].base_offset == 1  # the acks=0 batch took offset 0


# --------------------------------------------------------------------------------------------- errors


def test_invalid_required_acks(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("acks2")
    assert produce(client, "acks2", batch(), acks=2).error_code == 21  # INVALID_REQUIRED_ACKS
    assert produce(client, "acks2", batch(), acks=1).base_offset == 0  # nothing was written


def test_unknown_topic_and_partition(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("known")
    assert produce(client, "no-such-topic", batch()).error_code == 3
    assert produce(client, "known", batch(), partition=1).error_code == 3
    assert produce(client, "known", batch(), partition=-1).error_code == 3


def test_errors_are_per_partition(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("mixed", 2)
    cls = request_class(PRODUCE)[9]
    T = cls.TopicProduceData
    P = T.PartitionProduceData
    bad = bytearray(batch(1))
    bad[-1] ^= 1
    request = cls(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[
        T(name="mixed", partition_data=[P(index=0, records=bytes(bad)), P(index=1, records=batch(2))]),
        T(name="mixed-missing", partition_data=[P(index=0, records=batch(1))])])
    response = client.request(PRODUCE, 9, request)
    got = [(t.name, p.index, p.error_code, p.base_offset) for t in response.responses
           for p in t.partition_responses]
    assert got == [("mixed", 0, 2, -1), ("mixed", 1, 0, 0), ("mixed-missing", 0, 3, -1)]


def test_internal_topic_rejects_client_writes(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    find = request_class(FIND_COORDINATOR)[0]
    client.request(FIND_COORDINATOR, 0, find(key="g-internal"))  # makes the coordinator create __consumer_offsets
    deadline = time.monotonic() + 30
    r = produce(client, "__consumer_offsets", batch())
    while r.error_code == 3 and time.monotonic() < deadline:  # UNKNOWN_TOPIC_OR_PARTITION until it exists
        time.sleep(0.05)
        r = produce(client, "__consumer_offsets", batch())
    assert r.error_code == 17  # INVALID_TOPIC_EXCEPTION: clients never write an internal topic


def test_zstd_needs_produce_v7(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("zstd")
    assert produce(client, "zstd", batch(2, compression=4), version=6).error_code == 76
    ok = produce(client, "zstd", batch(2, compression=4), version=7)
    assert (ok.error_code, ok.base_offset) == (0, 0)


def test_corrupt_batch(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("corrupt")
    data = bytearray(batch(2))
    data[-1] ^= 0x55
    assert produce(client, "corrupt", bytes(data)).error_code == 2  # CORRUPT_MESSAGE
    assert produce(client, "corrupt", batch(2)[:50]).error_code == 2
    assert produce(client, "corrupt", batch(1)).base_offset == 0
    assert_still_serving(tidelog_module_broker.bootstrap)


def test_size_limits(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("small-msg", 1, configs={"max.message.bytes": "500"})
    tidelog_module_broker.create_topic("small-seg", 1, configs={"segment.bytes": "400"})
    big = batch(20, value=b"x" * 40)
    assert produce(client, "small-msg", big).error_code == 10  # MESSAGE_TOO_LARGE
    assert produce(client, "small-seg", big).error_code == 18  # RECORD_LIST_TOO_LARGE
    assert produce(client, "small-msg", batch(1)).error_code == 0


def test_invalid_records(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("invalid")
    two = batch(1) + batch(1)
    assert produce(client, "invalid", two).error_code == 87  # more than one batch
    control = bytearray(batch(1))
    struct.pack_into(">h", control, 21, 0x30)  # control + transactional from a client
    struct.pack_into(">q", control, 43, 1)
    write_crc(control, 0, len(control))
    assert produce(client, "invalid", bytes(control)).error_code == 87
    assert produce(client, "invalid", None).error_code == 87
    assert produce(client, "invalid", batch(1)).base_offset == 0


def test_null_key_on_compacted_topic_reports_record_errors(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("compacted", 1, configs={"cleanup.policy": "compact"})
    recs = [Record(0, TS, b"a", b"1"), Record(1, TS, None, b"2"), Record(2, TS, b"c", b"3")]
    r = produce(client, "compacted", bytes(build_batch(recs, 0)), version=9)
    assert r.error_code == 87
    assert [e.batch_index for e in r.record_errors] == [1]
    assert r.error_message
    old = produce(client, "compacted", bytes(build_batch(recs, 0)), version=7)
    assert old.error_code == 87  # before v8 there is no room for record errors, the code alone
    assert_still_serving(tidelog_module_broker.bootstrap)


def test_timestamp_out_of_range(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("ts-bound", 1, configs={"message.timestamp.before.max.ms": "3600000"})
    r = produce(client, "ts-bound", batch(2, ts=1000))  # 1970
    assert r.error_code == 32  # INVALID_TIMESTAMP
    assert [e.batch_index for e in r.record_errors] == [0, 1]
    import time

    assert produce(client, "ts-bound", batch(1, ts=int(time.time() * 1000))).error_code == 0


def test_min_insync_replicas_with_acks_all(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("minisr", 1, configs={"min.insync.replicas": "2"})
    assert produce(client, "minisr", batch(), acks=-1).error_code == 19  # NOT_ENOUGH_REPLICAS
    assert produce(client, "minisr", batch(), acks=1).error_code == 0


def test_real_client_sees_invalid_record(tidelog_module_broker: BrokerHandle) -> None:
    """librdkafka's producer gets INVALID_RECORD for a null key on a compacted topic."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    tidelog_module_broker.create_topic("compacted-rdk", 1, configs={"cleanup.policy": "compact"})
    producer = confluent_kafka.Producer({"bootstrap.servers": tidelog_module_broker.bootstrap, "retries": 0,
                                         "message.timeout.ms": 60_000})
    reports: list[Any] = []
    producer.produce("compacted-rdk", value=b"no key", on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(60) == 0
    producer.produce("compacted-rdk", key=b"k", value=b"keyed", on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(60) == 0
    assert reports[0] is not None and reports[0].code() == confluent_kafka.KafkaError.INVALID_RECORD
    assert reports[1] is None  # the same producer carries on
    assert_still_serving(tidelog_module_broker.bootstrap)
