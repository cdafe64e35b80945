"""Transactions through the Apache Kafka Java client 3.9.1 (tests/java/TxnClient.java): commit/abort across
partitions, consume-transform-produce with sendOffsetsToTransaction across producer restarts, fencing, and
the Admin client's listTransactions / describeTransactions / describeProducers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tidelog.testing import run_broker

from .clients_lib import PARTITIONS, check_outcome, create_topic, read_all
from .conftest import TxnJava

pytestmark = pytest.mark.java

OVERRIDES = {"group.initial.rebalance.delay.ms": 0, "transaction.state.log.num.partitions": 5,
             "offsets.topic.num.partitions": 5}


@pytest.fixture(scope="module")
def broker() -> Iterator[Any]:
    with run_broker(overrides=OVERRIDES) as handle:
        yield handle


def test_java_commit_and_abort(broker: Any, txn_java: TxnJava) -> None:
    create_topic(broker.bootstrap, "java-txn")
    assert txn_java.run("txn", broker.bootstrap, "java-txn", "java-1", "CACA") == [{"done": 4}]
    check_outcome(broker.bootstrap, "java-txn", "j", [True, False, True, False])


def _committed(bootstrap: str, group: str, topic: str) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)]
    finally:
        c.close()


@pytest.mark.slow
def test_java_consume_transform_produce_exactly_once(broker: Any, txn_java: TxnJava) -> None:
    from confluent_kafka import Producer

    bs = broker.bootstrap
    create_topic(bs, "jctp-in")
    create_topic(bs, "jctp-out")
    src = Producer({"bootstrap.servers": bs})
    for i in range(45):
        src.produce("jctp-in", value=b"%d" % i, partition=i % PARTITIONS)
    src.flush(60)
    aborted = txn_java.run("ctp", bs, "jctp-in", "jctp-out", "jctp", "jctp-1", "45", "false")
    assert aborted[-1]["processed"] > 0
    assert _committed(bs, "jctp", "jctp-in") == [-1001] * PARTITIONS  # unchanged by the abort
    done = 0
    for _ in range(10):  # each run is a new JVM: a restarted producer with the same transactional id
        done += txn_java.run("ctp", bs, "jctp-in", "jctp-out", "jctp", "jctp-1", "20", "true")[-1]["processed"]
        if done >= 45:
            break
    assert done == 45
    assert _committed(bs, "jctp", "jctp-in") == [15] * PARTITIONS
    assert sorted(read_all(bs, "jctp-out", "read_committed")) == sorted(b"out-%d" % i for i in range(45))


def test_java_second_producer_fences_the_first(broker: Any, txn_java: TxnJava) -> None:
    create_topic(broker.bootstrap, "java-fence")
    out = txn_java.run("fence", broker.bootstrap, "java-fence", "java-fence-1")
    assert out == [{"old_commit_error": "ProducerFencedException"}]
    assert read_all(broker.bootstrap, "java-fence", "read_committed") == [b"new"]
    assert len(read_all(broker.bootstrap, "java-fence", "read_uncommitted")) == 31


def test_java_admin_lists_and_describes_transactions_and_producers(broker: Any, txn_java: TxnJava) -> None:
    create_topic(broker.bootstrap, "java-admin-txn")
    out = txn_java.run("admin", broker.bootstrap, "java-admin-txn", "java-admin-1")
    listed = {tid: (pid, state) for tid, pid, state in out[0]["listed"]}
    opened, producers, committed = out[1]["open"], out[2]["producers"], out[3]["committed"]
    assert listed["java-admin-1"] == (opened["producer_id"], "Ongoing")
    assert opened["state"] == "Ongoing" and opened["started"] and opened["timeout_ms"] == 60000
    assert opened["partitions"] == ["java-admin-txn-0", "java-admin-txn-1"]
    # the producer on partition 0: its id/epoch, sequence 0, and its open transaction starting at offset 0
    assert producers == [[opened["producer_id"], opened["epoch"], 0, 0]]
    assert committed["state"] == "CompleteCommit" and committed["partitions"] == []
