"""Transactions v2 across restarts: the `__transaction_state` records carry the TV2 fields (value v1: the client
transaction version, the previous and next producer ids) and a restarted coordinator continues at the bumped
epoch; a broker killed (exit 137, no shutdown) in the middle of an EndTxn v5 commit leaves read_committed seeing
all of the transaction or none of it; a data dir finalized before tidelog knew `transaction.version` keeps level 0
(no implicit add, v0 records) until UpdateFeatures raises it."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tidelog.broker.features import FILE_NAME
from tidelog.coordinator.transaction import records as rec
from tidelog.coordinator.transaction.fault_hooks import TxnFaultPoint
from tidelog.protocol.errors import ErrorCode as E
from tidelog.testing import BrokerHandle, BrokerProcess, KafkaWire

from .clients_lib import create_topic, read_all
from .tv2_lib import Producer, end_txn_v5, init_v5, produce_v12, txn_offset_commit

OVERRIDES = {"transaction.state.log.num.partitions": 2, "offsets.topic.num.partitions": 2}


def state_values(broker: Any, tid: str) -> list[rec.TransactionLogValue]:
    """Every `__transaction_state` value stored for `tid`, oldest first, decoded from the log."""
    manager = broker.state.txn_coordinator.state
    return broker.call(lambda: [rec.decode_value(v) for k, v in manager._records()
                                if v is not None and rec.decode_key(k) == tid])


def test_tv2_state_is_persisted_and_resumed_after_a_restart(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    tid = "tv2-restart"
    b = tidelog_broker_factory(tmp_path, overrides=OVERRIDES)
    with KafkaWire(b.bootstrap) as wire:
        create_topic(b.bootstrap, "tv2r", 2)
        p0 = init_v5(wire, tid)
        assert produce_v12(wire, tid, p0, "tv2r", 0, [b"first"]).error_code == E.NONE
        assert txn_offset_commit(wire, tid, p0, "tv2r-group", "tv2r", 0, 1) == E.NONE
        error, p1 = end_txn_v5(wire, tid, p0, commit=True)
        assert (error, p1) == (E.NONE, Producer(p0.producer_id, p0.epoch + 1))
        assert produce_v12(wire, tid, p1, "tv2r", 1, [b"second"]).error_code == E.NONE  # left open
        values = state_values(b, tid)
        # Empty (InitProducerId), Ongoing, Ongoing (offsets partition), PrepareCommit, CompleteCommit, Ongoing
        assert [v.transaction_status for v in values] == [0, 1, 1, 2, 4, 1]
        assert all(v.version == 1 for v in values)  # flexible layout: transaction.version >= 1
        prepare, complete, ongoing = values[3], values[4], values[5]
        assert (prepare.producer_epoch, prepare.client_transaction_version) == (p1.epoch, 2)
        assert (complete.producer_epoch, complete.next_producer_id) == (p1.epoch, -1)
        assert (ongoing.producer_epoch, ongoing.client_transaction_version) == (p1.epoch, 2)
    b.restart()
    with KafkaWire(b.bootstrap) as wire:
        meta = b.call(lambda: b.state.txn_coordinator.state.get(tid).copy())
        assert (meta.state.state_name, meta.producer_epoch, meta.client_transaction_version) == ("Ongoing", p1.epoch, 2)
        assert end_txn_v5(wire, tid, p0, commit=True)[0] == E.PRODUCER_FENCED  # Ongoing wants the current epoch
        assert produce_v12(wire, tid, p0, "tv2r", 1, [b"zombie"], seq=1).error_code == E.INVALID_PRODUCER_EPOCH
        assert end_txn_v5(wire, tid, p1, commit=True) == (E.NONE, Producer(p1.producer_id, p1.epoch + 1))
        assert sorted(read_all(b.bootstrap, "tv2r", "read_committed", 2)) == [b"first", b"second"]


@pytest.mark.slow
@pytest.mark.parametrize("point", [TxnFaultPoint.BEFORE_PREPARE, TxnFaultPoint.BETWEEN_MARKERS])
def test_kill_during_a_tv2_commit_is_all_or_nothing(tmp_path: Path, point: TxnFaultPoint) -> None:
    tid = f"tv2-crash-{point}"
    broker = BrokerProcess(tmp_path / "data", args=["--crash-at", str(point)], overrides=OVERRIDES)
    try:
        broker.start()
        create_topic(broker.bootstrap, "tv2c", 2)
        written = [b"crash-0", b"crash-1"]
        with KafkaWire(broker.bootstrap) as wire:
            p0 = init_v5(wire, tid)
            for partition, value in enumerate(written):
                assert produce_v12(wire, tid, p0, "tv2c", partition, [value]).error_code == E.NONE
            with contextlib.suppress(OSError, EOFError, ValueError):
                end_txn_v5(wire, tid, p0, commit=True)  # the broker dies at `point` while ending it
        assert broker.proc is not None and broker.proc.wait(30) == 137
        broker.args = []
        broker.start()
        committed = point is not TxnFaultPoint.BEFORE_PREPARE  # the prepare record decides
        assert sorted(read_all(broker.bootstrap, "tv2c", "read_committed", 2)) == (written if committed else [])
        with KafkaWire(broker.bootstrap) as wire:
            # the producer retries its EndTxn: answered (or, before the prepare, done now) with epoch + 1
            retriable = {E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS}
            deadline = time.monotonic() + 60
            while (answer := end_txn_v5(wire, tid, p0, commit=True))[0] in retriable and time.monotonic() < deadline:
                time.sleep(0.1)
            assert answer == (E.NONE, Producer(p0.producer_id, p0.epoch + 1))
        assert sorted(read_all(broker.bootstrap, "tv2c", "read_committed", 2)) == written
    finally:
        broker.stop()


def test_a_data_dir_from_before_transaction_version_keeps_level_0(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """The features file such a tidelog wrote has no transaction.version: TV0 until UpdateFeatures, so Produce v12
    does not add partitions and the state records stay v0; raised to 2, the implicit add works."""
    from tests.broker.test_features import api_versions, features, update

    (tmp_path / FILE_NAME).write_text(json.dumps({"version": 2, "epoch": 3, "finalized": {
        "metadata.version": 30, "kraft.version": 1, "group.version": 1, "eligible.leader.replicas.version": 1,
        "share.version": 1}}))
    b = tidelog_broker_factory(tmp_path, overrides=OVERRIDES)
    with KafkaWire(b.bootstrap) as wire:
        create_topic(b.bootstrap, "tv2old", 1)
        assert "transaction.version" not in features(api_versions(wire, 4))[1]
        p = init_v5(wire, "tv2-old")
        assert produce_v12(wire, "tv2-old", p, "tv2old", 0, [b"x"]).error_code == E.TRANSACTION_ABORTABLE
        assert [v.version for v in state_values(b, "tv2-old")] == [0]
        assert update(wire, [("transaction.version", 2, 1)]).error_code == 0
        assert features(api_versions(wire, 4))[1]["transaction.version"] == (2, 2)
        assert produce_v12(wire, "tv2-old", p, "tv2old", 0, [b"y"]).error_code == E.NONE
        assert end_txn_v5(wire, "tv2-old", p, commit=True) == (E.NONE, Producer(p.producer_id, p.epoch + 1))
        assert [v.version for v in state_values(b, "tv2-old")] == [0, 1, 1, 1]
        assert read_all(b.bootstrap, "tv2old", "read_committed", 1) == [b"y"]
