"""Fetch over real sockets: long poll, KIP-74 sizing, whole batches, errors, topic ids, real consumers."""

from __future__ import annotations

import uuid

import pytest
from broker_testlib import (
    FETCH,
    TS,
    batch,
    fetch,
    fetch_request,
    partition_data,
    produce,
    topic_id,
)

from tidelog.protocol.record_batch import iter_batches
from tidelog.protocol.records import iter_records
from tidelog.storage import TopicPartition
from tidelog.testing import BrokerHandle, KafkaWire

# Longer than the `client` fixture's socket timeout (120 s): only a wake-up can answer a long poll in time.
LONG_POLL_MS = 600_000


def offsets(records: bytes) -> list[int]:
    return [r.offset for _, h in iter_batches(records) for r in iter_records(records, _)]


def test_round_trip_and_partition_fields(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("rt")
    produce(client, "rt", batch(3))
    produce(client, "rt", batch(2, compression=3, start=3))
    response = fetch(client, [("rt", 0, 0)])
    assert (response.error_code, response.session_id) == (0, 0)
    [p] = partition_data(response)
    assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (0, 5, 5, 0)
    assert p.preferred_read_replica == -1
    assert offsets(p.records) == [0, 1, 2, 3, 4]
    assert [r.value for _, h in iter_batches(p.records) for r in iter_records(p.records, _)][3] == b"v3"


def test_long_poll_is_woken_by_a_produce(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("lp")
    produce(client, "lp", batch(1))
    # Parked at the high watermark; a produce from another connection wakes it. LONG_POLL_MS outlasts the
    # client's 120 s socket timeout, so a fetch that only completes at its deadline fails the test.
    cid = client.send(FETCH, 12, fetch_request([("lp", 0, 1)], max_wait_ms=LONG_POLL_MS, min_bytes=1))
    producer = KafkaWire(tidelog_module_broker.bootstrap, "other")
    try:
        assert produce(producer, "lp", batch(1, value=b"wake")).base_offset == 1
    finally:
        producer.close()
    got, response = client.receive(FETCH, 12)
    assert got == cid
    [p] = partition_data(response)
    assert p.error_code == 0 and offsets(p.records) == [1]
    assert [r.value for r in iter_records(p.records)] == [b"wake0"]


def test_long_poll_on_several_partitions_wakes_on_any_and_leaves_nothing_parked(tidelog_module_broker: BrokerHandle,
                                                                               client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("lp2", 2)
    tidelog_module_broker.create_topic("lp2-other")
    cid = client.send(FETCH, 12, fetch_request([("lp2", 0, 0), ("lp2", 1, 0)], max_wait_ms=LONG_POLL_MS))
    other = KafkaWire(tidelog_module_broker.bootstrap, "other")
    try:
        produce(other, "lp2-other", batch(1))  # an append elsewhere does not complete the fetch...
        produce(other, "lp2", batch(1, value=b"second"), partition=1)  # ...one to a fetched partition does
    finally:
        other.close()
    got, response = client.receive(FETCH, 12)
    assert got == cid
    p0, p1 = partition_data(response)
    assert p0.records == b"" and [r.value for r in iter_records(p1.records)] == [b"second0"]
    assert tidelog_module_broker.call(tidelog_module_broker.state.purgatory.num_delayed) == 0


def test_short_wait_with_min_bytes_unmet_returns_empty(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("empty")
    [p] = partition_data(fetch(client, [("empty", 0, 0)], max_wait_ms=50, min_bytes=1))
    assert (p.error_code, p.records, p.high_watermark) == (0, b"", 0)
    produce(client, "empty", batch(1))
    # Some data but less than min_bytes: after max_wait the data there is is returned.
    [p] = partition_data(fetch(client, [("empty", 0, 0)], max_wait_ms=50, min_bytes=10_000_000))
    assert offsets(p.records) == [0]


def test_fetch_offset_inside_a_batch_returns_the_whole_batch(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("inside")
    produce(client, "inside", batch(5))
    produce(client, "inside", batch(5, start=5))
    [p] = partition_data(fetch(client, [("inside", 0, 3)]))
    assert offsets(p.records)[:5] == [0, 1, 2, 3, 4]  # starts at the batch's first byte; clients skip 0-2
    [p] = partition_data(fetch(client, [("inside", 0, 7)]))
    assert offsets(p.records) == [5, 6, 7, 8, 9]


def test_kip74_first_partition_gets_one_whole_batch(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("kip74", 3)
    for partition in range(3):
        produce(client, "kip74", batch(10, value=b"x" * 100), partition=partition)
        produce(client, "kip74", batch(10, value=b"y" * 100), partition=partition)
    size = len(batch(10, value=b"x" * 100))
    # Both limits far below one batch: the first partition still gets exactly its first whole batch,
    # the others nothing; every requested partition is listed.
    response = fetch(client, [("kip74", 0, 0), ("kip74", 1, 0), ("kip74", 2, 0)], max_bytes=10,
                     partition_max_bytes=10)
    p0, p1, p2 = partition_data(response)
    assert [p.partition_index for p in (p0, p1, p2)] == [0, 1, 2]
    assert len(p0.records) == size and offsets(p0.records) == list(range(10))
    assert p1.records == b"" and p2.records == b""
    assert p1.error_code == p2.error_code == 0 and p1.high_watermark == 20
    # An empty first partition does not consume the one-batch allowance.
    response = fetch(client, [("kip74", 0, 20), ("kip74", 1, 0)], max_bytes=10, partition_max_bytes=10)
    q0, q1 = partition_data(response)
    assert q0.records == b"" and offsets(q1.records) == list(range(10))
    # partition_max_bytes bounds each partition: a slice may end inside the second batch.
    response = fetch(client, [("kip74", 0, 0)], partition_max_bytes=size + 20)
    [r] = partition_data(response)
    assert len(r.records) == size + 20 and offsets(r.records) == list(range(10))


def test_offset_out_of_range(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("oor")
    produce(client, "oor", batch(2))
    [p] = partition_data(fetch(client, [("oor", 0, 3)]))
    assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (1, -1, -1, -1)
    [p] = partition_data(fetch(client, [("oor", 0, -1)]))
    assert p.error_code == 1
    [p] = partition_data(fetch(client, [("oor", 0, 2)]))  # == LEO: empty, no error
    assert (p.error_code, p.records) == (0, b"")


def test_unknown_topic_partition_and_errors_do_not_wait(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("known-f")
    response = fetch(client, [("known-f", 0, 0), ("known-f", 5, 0), ("missing-topic", 0, 0)],
                     max_wait_ms=LONG_POLL_MS, min_bytes=1)  # errors answer at once despite the long wait
    codes = [(p.partition_index, p.error_code) for p in partition_data(response)]
    assert codes == [(0, 0), (5, 3), (0, 3)]
    assert [t.topic for t in response.responses] == ["known-f", "missing-topic"]


def test_leader_epoch_checks(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("epochs")
    produce(client, "epochs", batch(1))
    [p] = partition_data(fetch(client, [("epochs", 0, 0)], current_leader_epoch=0))
    assert p.error_code == 0 and offsets(p.records) == [0]
    [p] = partition_data(fetch(client, [("epochs", 0, 0)], current_leader_epoch=3))
    assert p.error_code == 75  # UNKNOWN_LEADER_EPOCH: newer than the broker's
    log_obj = tidelog_module_broker.state.topics.log(TopicPartition("epochs", 0))
    tidelog_module_broker.call(lambda: setattr(log_obj, "leader_epoch", 4))  # as if leadership had moved on
    try:
        [p] = partition_data(fetch(client, [("epochs", 0, 0)], current_leader_epoch=3))
        assert p.error_code == 74  # FENCED_LEADER_EPOCH: the client's epoch is older
    finally:
        tidelog_module_broker.call(lambda: setattr(log_obj, "leader_epoch", 0))


def test_topic_ids_from_v13(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("by-id")
    produce(client, "by-id", batch(2))
    tid = topic_id(client, "by-id")
    assert tid != uuid.UUID(int=0)
    for version in (13, 15, 16):
        response = fetch(client, [(tid, 0, 0), (uuid.uuid4(), 0, 0)], version=version)
        assert len(response.responses) == 2 and response.responses[0].topic_id == tid
        ok, unknown = partition_data(response)
        assert ok.error_code == 0 and offsets(ok.records) == [0, 1]
        assert unknown.error_code == 100  # UNKNOWN_TOPIC_ID


def test_fetch_17_and_18_ignore_the_follower_tagged_fields(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    """v17 adds ReplicaDirectoryId (KIP-853), v18 HighWatermark (KIP-1166): tagged partition fields only a
    follower sets; the response is v16's, topics by id."""
    tidelog_module_broker.create_topic("v18")
    produce(client, "v18", batch(3))
    tid = topic_id(client, "v18")
    for version in (17, 18):
        request = fetch_request([(tid, 0, 1), (uuid.uuid4(), 0, 0)], version=version)
        for p in (p for t in request.topics for p in t.partitions):
            p.replica_directory_id = uuid.uuid4()
            if version >= 18:
                p.high_watermark = 2
        response = client.request(FETCH, version, request)
        assert response.error_code == 0 and [t.topic_id for t in response.responses][0] == tid
        ok, unknown = partition_data(response)
        assert (ok.error_code, ok.high_watermark, ok.last_stable_offset, ok.log_start_offset) == (0, 3, 3, 0)
        assert offsets(ok.records) == [0, 1, 2]  # the whole batch holding offset 1
        assert unknown.error_code == 100  # UNKNOWN_TOPIC_ID


def test_read_committed_reports_lso_and_empty_aborted_list(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("rc")
    produce(client, "rc", batch(2))
    [p] = partition_data(fetch(client, [("rc", 0, 0)], isolation_level=1))
    assert p.last_stable_offset == 2 and offsets(p.records) == [0, 1]
    assert p.aborted_transactions == []
    [p] = partition_data(fetch(client, [("rc", 0, 0)], isolation_level=0))
    assert p.aborted_transactions is None


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_old_versions(tidelog_module_broker: BrokerHandle, client: KafkaWire, version: int) -> None:
    name = f"old-{version}"
    tidelog_module_broker.create_topic(name)
    produce(client, name, batch(3))
    [p] = partition_data(fetch(client, [(name, 0, 1)], version=version))
    assert p.error_code == 0 and p.high_watermark == 3 and offsets(p.records) == [0, 1, 2]


def test_zstd_needs_fetch_v10(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("zstd-f")
    produce(client, "zstd-f", batch(2, compression=4))
    [p] = partition_data(fetch(client, [("zstd-f", 0, 0)], version=9))
    assert (p.error_code, p.records, p.high_watermark) == (76, b"", -1)  # UNSUPPORTED_COMPRESSION_TYPE
    [p] = partition_data(fetch(client, [("zstd-f", 0, 0)], version=10))
    assert p.error_code == 0 and offsets(p.records) == [0, 1]


def test_kafka_python_consumer_long_polls(tidelog_module_broker: BrokerHandle) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    tidelog_module_broker.create_topic("kpc")
    consumer = KafkaConsumer(bootstrap_servers=tidelog_module_broker.bootstrap, fetch_max_wait_ms=10_000,
                             consumer_timeout_ms=60_000, auto_offset_reset="earliest")
    consumer.assign([TopicPartition("kpc", 0)])
    assert consumer.poll(timeout_ms=200) == {}  # nothing there yet
    producer = KafkaProducer(bootstrap_servers=tidelog_module_broker.bootstrap)
    producer.send("kpc", value=b"late", timestamp_ms=TS).get(timeout=60)
    producer.close()
    message = next(iter(consumer))
    consumer.close()
    assert (message.offset, message.value, message.timestamp) == (0, b"late", TS)


def test_confluent_consumer_reads_every_codec(tidelog_module_broker: BrokerHandle) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    tidelog_module_broker.create_topic("codecs")
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        producer = confluent_kafka.Producer({"bootstrap.servers": tidelog_module_broker.bootstrap, "compression.type": codec,
                                             "linger.ms": 10})
        for i in range(10):
            producer.produce("codecs", key=codec.encode(), value=b"%s-%d" % (codec.encode(), i))
        assert producer.flush(60) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": tidelog_module_broker.bootstrap, "group.id": "codecs-reader",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition("codecs", 0, 0)])
    values = []
    for _ in range(600):
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
        if len(values) == 50:
            break
    consumer.close()
    assert len(values) == 50 and values[10] == b"gzip-0" and values[49] == b"zstd-9"
