"""SIGKILL-equivalent crashes of a broker process at each step of EndTxn (`tidelog serve --crash-at <point>`
with the coordinator's fault points): after the restart read_committed shows exactly the committed transactions, the
LSO moves on, and the transactional id works again."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidelog.coordinator.transaction.fault_hooks import TxnFaultPoint
from tidelog.testing import BrokerProcess

from .clients_lib import PARTITIONS, PER_TXN, create_topic, end_offsets, read_all, values

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("point", list(TxnFaultPoint))
def test_crash_during_commit(tmp_path: Path, point: TxnFaultPoint) -> None:
    from confluent_kafka import KafkaException, Producer

    broker = BrokerProcess(tmp_path / "data", args=["--crash-at", str(point)],
                           overrides={"transaction.state.log.num.partitions": 3})
    try:
        broker.start()
        bs = broker.bootstrap
        create_topic(bs, "crash")
        p = Producer({"bootstrap.servers": bs, "transactional.id": "crash-tx", "message.timeout.ms": 20000})
        p.init_transactions(60)
        p.begin_transaction()
        for i, v in enumerate(values("t1", 0)):
            p.produce("crash", value=v, partition=i % PARTITIONS)
        p.flush(60)
        with pytest.raises(KafkaException):
            p.commit_transaction(5)  # the broker dies at `point` while ending it
        assert broker.proc is not None and broker.proc.wait(30) == 137
        del p
        broker.args = []
        broker.start()

        committed = [] if point is TxnFaultPoint.BEFORE_PREPARE else values("t1", 0)
        if point is not TxnFaultPoint.BEFORE_PREPARE:
            # the coordinator completed the prepared commit while loading: markers are in, the LSO moved on
            assert sorted(read_all(bs, "crash", "read_committed")) == sorted(committed)
        fresh = Producer({"bootstrap.servers": bs, "transactional.id": "crash-tx"})
        fresh.init_transactions(60)  # fences the old producer; aborts the transaction if still open
        fresh.begin_transaction()
        for i, v in enumerate(values("t2", 0)):
            fresh.produce("crash", value=v, partition=i % PARTITIONS)
        fresh.commit_transaction(60)
        assert sorted(read_all(bs, "crash", "read_committed")) == sorted(committed + values("t2", 0))
        assert sorted(read_all(bs, "crash", "read_uncommitted")) == sorted(values("t1", 0) + values("t2", 0))
        # each partition: 10 + 10 records and one marker per transaction (a marker written before the crash
        # may be written again while completing, as Kafka resends markers after a coordinator failover)
        ends = end_offsets(bs, "crash")
        assert all(2 * (PER_TXN // PARTITIONS) + 2 <= e <= 2 * (PER_TXN // PARTITIONS) + 3 for e in ends)
    finally:
        broker.stop()
