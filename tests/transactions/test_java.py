"""Transactions through the Apache Kafka Java client 3.9.1 (tests/java/TxnClient.java): commit/abort across
partitions, consume-transform-produce with sendOffsetsToTransaction across producer restarts, fencing, and
the Admin client's listTransactions / describeTransactions / describeProducers."""

from __future__ import annotations

import pytest

from tidelog.testing import BrokerHandle

from .clients_lib import PARTITIONS, check_outcome, read_all
from .conftest import TxnJava

OVERRIDES = {"group.initial.rebalance.delay.ms": 0, "transaction.state.log.num.partitions": 5,
             "offsets.topic.num.partitions": 5}


pytestmark = [pytest.mark.java, pytest.mark.tidelog(overrides=OVERRIDES)]


def test_java_commit_and_abort(tidelog_module_broker: BrokerHandle, txn_java: TxnJava) -> None:
    tidelog_module_broker.create_topic("java-txn", PARTITIONS)
    assert txn_java.run("txn", tidelog_module_broker.bootstrap, "java-txn", "java-1", "CACA") == [{"done": 4}]
    check_outcome(tidelog_module_broker.bootstrap, "java-txn", "j", [True, False, True, False])


def _committed(bootstrap: str, group: str, topic: str) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)]
    finally:
        c.close()


@pytest.mark.slow
def test_java_consume_transform_produce_exactly_once(tidelog_module_broker: BrokerHandle, txn_java: TxnJava) -> None:
    from confluent_kafka import Producer

    bs = tidelog_module_broker.bootstrap
    tidelog_module_broker.create_topic("jctp-in", PARTITIONS)
    tidelog_module_broker.create_topic("jctp-out", PARTITIONS)
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


def test_java_second_producer_fences_the_first(tidelog_module_broker: BrokerHandle, txn_java: TxnJava) -> None:
    tidelog_module_broker.create_topic("java-fence", PARTITIONS)
    out = txn_java.run("fence", tidelog_module_broker.bootstrap, "java-fence", "java-fence-1")
    assert out == [{"old_commit_error": "ProducerFencedException"}]
    assert read_all(tidelog_module_broker.bootstrap, "java-fence", "read_committed") == [b"new"]
    assert len(read_all(tidelog_module_broker.bootstrap, "java-fence", "read_uncommitted")) == 31


def test_java_admin_lists_and_describes_transactions_and_producers(tidelog_module_broker: BrokerHandle, txn_java: TxnJava) -> None:
    tidelog_module_broker.create_topic("java-admin-txn", PARTITIONS)
    out = txn_java.run("admin", tidelog_module_broker.bootstrap, "java-admin-txn", "java-admin-1")
    listed = {tid: (pid, state) for tid, pid, state in out[0]["listed"]}
    opened, producers, committed = out[1]["open"], out[2]["producers"], out[3]["committed"]
    assert listed["java-admin-1"] == (opened["producer_id"], "Ongoing")
    assert opened["state"] == "Ongoing" and opened["started"] and opened["timeout_ms"] == 60000
    assert opened["partitions"] == ["java-admin-txn-0", "java-admin-txn-1"]
    # the producer on partition 0: its id/epoch, sequence 0, and its open transaction starting at offset 0
    assert producers == [[opened["producer_id"], opened["epoch"], 0, 0]]
    assert committed["state"] == "CompleteCommit" and committed["partitions"] == []
