"""Durability across restarts, against a broker running as a separate process (tidelog.testing.BrokerProcess).

* SIGKILL while a producer sends with acks=all: after restarting on the same log dir every acknowledged
  record is there at its acknowledged offset (an ack means the batch reached the log; the page cache survives
  a process kill, as in Kafka with its default flush settings).
* A clean stop keeps every topic, config override, topic id, the cluster id and every record.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicCollection
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from tidelog.testing import BrokerProcess

PARTITIONS = 3


@pytest.fixture
def broker_process(tmp_path: Path) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(log_dir=str(tmp_path / "data")).start()
    try:
        yield proc
    finally:
        proc.stop()


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
    client = admin(bootstrap)  # must outlive the future: a destroyed handle fails it
    fut = client.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        request_timeout=60,
    )
    fut[name].result(timeout=90)


def read_all(bootstrap: str, topic: str, partitions: int) -> dict[tuple[int, int], bytes]:
    """Every record of the topic up to the current high watermarks, keyed by (partition, offset)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "crash-check", "enable.auto.commit": False}
    )
    records: dict[tuple[int, int], bytes] = {}
    try:
        ends = {}
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(CkTopicPartition(topic, p), timeout=60)
            ends[p] = high
        consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        want = sum(ends.values())
        deadline = time.monotonic() + 180
        while len(records) < want and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=5000, timeout=1.0):
                if m.error() is not None:
                    raise KafkaException(m.error())
                records[(m.partition(), m.offset())] = m.value()
        assert len(records) == want, f"read {len(records)} of {want} records below the high watermarks"
    finally:
        consumer.close()
    return records


def test_sigkill_keeps_every_acknowledged_record(broker_process: BrokerProcess) -> None:
    topic = "crash"
    create_topic(broker_process.bootstrap, topic, PARTITIONS, {"retention.ms": "-1"})
    before = describe(broker_process.bootstrap, [topic])
    acked: dict[tuple[int, int], bytes] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def on_delivery(err, msg) -> None:  # noqa: ANN001 - librdkafka callback signature
        if err is None:
            with lock:
                acked[(msg.partition(), msg.offset())] = msg.value()

    producer = Producer(
        {
            "bootstrap.servers": broker_process.bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 5000,  # give up on unacknowledged records quickly once the broker is gone
            "reconnect.backoff.max.ms": 500,
        }
    )

    sent = [0]

    def send_loop() -> None:
        while not stop.is_set():
            i = sent[0]
            try:
                producer.produce(
                    topic, key=str(i).encode(), value=f"value-{i}".encode(), on_delivery=on_delivery
                )
                sent[0] = i + 1
            except BufferError:  # local queue full: serve delivery reports so it drains
                producer.poll(0.01)
            if i % 100 == 0:
                producer.poll(0)

    sender = threading.Thread(target=send_loop, daemon=True)
    sender.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with lock:
            if len(acked) >= 5000:
                break
        time.sleep(0.05)
    broker_process.kill()  # SIGKILL mid-stream: the producer is still sending
    with lock:
        acked_at_kill = len(acked)
    sent_at_kill = sent[0]
    time.sleep(0.5)  # keep sending into the dead broker for a moment
    stop.set()
    sender.join(timeout=30)
    producer.flush(15)  # unacknowledged records time out (message.timeout.ms) and are simply not counted
    producer.purge()
    with lock:
        snapshot = dict(acked)
    assert acked_at_kill >= 5000, "producer never got going"
    assert sent_at_kill > acked_at_kill, "the kill did not happen while records were in flight"

    broker_process.restart()
    assert describe(broker_process.bootstrap, [topic]) == before  # topic id, partitions, overrides
    stored = read_all(broker_process.bootstrap, topic, PARTITIONS)
    missing = {pos: v for pos, v in snapshot.items() if stored.get(pos) != v}
    assert not missing, (
        f"{len(missing)} acknowledged records lost or changed, e.g. {list(missing.items())[:3]}"
    )

    # The log continues after the recovered end: a new record gets the next offset.
    p = Producer({"bootstrap.servers": broker_process.bootstrap, "acks": "all"})
    offsets: list[int] = []
    p.produce(topic, value=b"after-restart", partition=0, on_delivery=lambda e, m: offsets.append(m.offset()))
    assert p.flush(60) == 0
    assert offsets == [max(o for (part, o) in stored if part == 0) + 1]


def describe(bootstrap: str, topics: list[str]) -> dict[str, tuple[str, int, dict[str, str]]]:
    """topic -> (topic id, partition count, overrides), as a client sees them."""
    a = admin(bootstrap)
    out = {}
    descs = a.describe_topics(TopicCollection(topics))
    for name in topics:
        d = descs[name].result(timeout=60)
        res = ConfigResource("topic", name)
        entries = a.describe_configs([res])[res].result(timeout=60)
        # librdkafka hands back the source as a plain int here (1 = TOPIC_CONFIG / DYNAMIC_TOPIC_CONFIG).
        topic_source = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        overrides = {
            k: e.value for k, e in entries.items() if getattr(e.source, "value", e.source) == topic_source
        }
        out[name] = (str(d.topic_id), len(d.partitions), overrides)
    return out


def test_clean_restart_keeps_topics_configs_ids_and_records(broker_process: BrokerProcess) -> None:
    bootstrap = broker_process.bootstrap
    create_topic(bootstrap, "keep-a", PARTITIONS, {"cleanup.policy": "compact", "retention.ms": "123456789"})
    create_topic(bootstrap, "keep-b", 1, {"max.message.bytes": "2000000"})
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "compression.type": "zstd"})
    for i in range(3000):
        producer.produce("keep-a", key=f"k{i}".encode(), value=f"a-{i}".encode(), partition=i % PARTITIONS)
        producer.produce("keep-b", key=f"k{i}".encode(), value=f"b-{i}".encode(), headers=[("h", b"x")])
        producer.poll(0)
    assert producer.flush(120) == 0

    before = describe(bootstrap, ["keep-a", "keep-b"])
    assert before["keep-a"][1:] == (PARTITIONS, {"cleanup.policy": "compact", "retention.ms": "123456789"})
    assert before["keep-b"][1:] == (1, {"max.message.bytes": "2000000"})
    cluster_id = admin(bootstrap).list_topics(timeout=60).cluster_id
    records_a = read_all(bootstrap, "keep-a", PARTITIONS)
    records_b = read_all(bootstrap, "keep-b", 1)
    assert len(records_a) == len(records_b) == 3000

    broker_process.stop()
    broker_process.restart()
    bootstrap = broker_process.bootstrap

    assert describe(bootstrap, ["keep-a", "keep-b"]) == before
    assert admin(bootstrap).list_topics(timeout=60).cluster_id == cluster_id
    assert read_all(bootstrap, "keep-a", PARTITIONS) == records_a
    assert read_all(bootstrap, "keep-b", 1) == records_b
