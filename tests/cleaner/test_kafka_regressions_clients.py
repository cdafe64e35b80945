"""The transaction regressions through a running broker and real clients: confluent-kafka's transactional
producer writes a compacted topic (user keys equal to the control-record keys, KAFKA-14055; transactions spanning
segments and cleaning groups, KAFKA-8351), the broker's cleaner threads compact it, and a read_committed consumer
still sees exactly the committed records: nothing aborted, nothing lost."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka_helpers import COMPACT_TOPIC_CONFIG
from regression_helpers import ABORT_KEY, COMMIT_KEY, all_batches

from tidelog.storage import TopicPartition
from tidelog.testing import BrokerHandle

OVERRIDES = {"log.cleaner.backoff.ms": 100, "transaction.state.log.num.partitions": 1,
             "offsets.topic.num.partitions": 1, "group.initial.rebalance.delay.ms": 0}


pytestmark = pytest.mark.tidelog(overrides=OVERRIDES)


def transaction(producer: Any, topic: str, records: list[tuple[bytes, bytes]], commit: bool) -> None:
    producer.begin_transaction()
    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0)
        producer.flush(60)  # one record per batch: segments (1024 bytes) roll inside the transaction
    producer.commit_transaction(60) if commit else producer.abort_transaction(60)


def read_committed(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer
    from confluent_kafka import TopicPartition as CTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    out = []
    try:
        consumer.assign([CTopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is None:
                continue
            if message.error():
                assert message.error().code() == -191, message.error()  # _PARTITION_EOF: read to the end
                return out
            out.append((message.offset(), message.key(), message.value()))
        raise AssertionError(f"no end of partition after {len(out)} records")
    finally:
        consumer.close()


def test_transactions_through_a_compacted_topic_with_real_clients(tidelog_module_broker: BrokerHandle) -> None:
    from confluent_kafka import Producer

    topic = "txn-compacted"
    tidelog_module_broker.create_topic(topic, configs=COMPACT_TOPIC_CONFIG)  # segment.bytes 1024: many segments and groups
    aborter = Producer({"bootstrap.servers": tidelog_module_broker.bootstrap, "transactional.id": "aborter", "linger.ms": 0})
    committer = Producer({"bootstrap.servers": tidelog_module_broker.bootstrap, "transactional.id": "committer", "linger.ms": 0})
    aborter.init_transactions(60)
    committer.init_transactions(60)

    transaction(aborter, topic, [(b"a", b"aborted-first")], commit=False)
    # KAFKA-8351: each transaction spans several segments (and so several cleaning groups)
    transaction(aborter, topic, [(b"k%d" % (i % 7), b"aborted-%d" % i + b"x" * 80) for i in range(40)], commit=False)
    transaction(committer, topic, [(b"k%d" % (i % 7), b"committed-%d" % i + b"x" * 80) for i in range(40)],
                commit=True)
    transaction(aborter, topic, [(b"k%d" % i, b"aborted-last") for i in range(3)], commit=False)
    # KAFKA-14055: later committed user records whose keys are the ABORT and COMMIT control keys, so the offset
    # map holds those keys at offsets above every marker
    transaction(committer, topic, [(ABORT_KEY, b"user-abort-key"), (COMMIT_KEY, b"user-commit-key")], commit=True)
    end_of_transactions = tidelog_module_broker.state.log_manager.get_log(TopicPartition(topic, 0)).log_end_offset
    plain = Producer({"bootstrap.servers": tidelog_module_broker.bootstrap, "linger.ms": 0})
    for i in range(30):  # unique keys, so the transactions are all in closed, cleanable segments
        plain.produce(topic, key=b"tail%d" % i, value=b"t" * 60, partition=0)
        plain.flush(60)

    tp = TopicPartition(topic, 0)
    cleaner = tidelog_module_broker.state.cleaner
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if cleaner.manager.all_cleaner_checkpoints().get(tp, 0) > end_of_transactions:
            break
        time.sleep(0.1)
    assert cleaner.manager.all_cleaner_checkpoints().get(tp, 0) > end_of_transactions
    assert not cleaner.manager.is_uncleanable(tp)

    got = read_committed(tidelog_module_broker.bootstrap, topic)
    values = {key: value for _, key, value in got}
    assert not [v for v in values.values() if v.startswith(b"aborted")]
    assert values[ABORT_KEY] == b"user-abort-key" and values[COMMIT_KEY] == b"user-commit-key"
    assert {k: values[b"k%d" % k] for k in range(7)} == {
        k: b"committed-%d" % max(i for i in range(40) if i % 7 == k) + b"x" * 80 for k in range(7)}
    assert len(got) == len(values)  # compacted: one record per key
    # the aborter is still active: the last of its aborted batches is kept (emptied), and so is its marker
    log = tidelog_module_broker.state.log_manager.get_log(tp)
    batches = all_batches(log)
    aborter_data = [h for h, _ in batches if not h.is_control and h.is_transactional and h.records_count == 0]
    markers = [(h.base_offset, records[0].key) for h, records in batches if h.is_control and records]
    assert aborter_data and any(key == ABORT_KEY and offset > aborter_data[-1].last_offset
                                for offset, key in markers)
    aborter.flush(10)
    committer.flush(10)
