"""Transactions v2 (KIP-890 part 2) on the wire, replaying what Kafka 4.x's Java producer sends when the broker
finalizes `transaction.version` 2 (TransactionManager): InitProducerId, Produce v12 without AddPartitionsToTxn,
TxnOffsetCommit v5 without AddOffsetsToTxn, EndTxn v5 and its epoch bump, retries of an end, an empty abort, a
timeout-driven abort, fencing by a new instance, producer id rollover on epoch exhaustion, and the broker-side
AddPartitionsToTxn v4/v5. Every answer is checked against Kafka's TransactionCoordinator.endTransaction (TV2) and
the partition leader's implicit add; a real read_committed consumer (confluent-kafka) reads what was committed."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tidelog.protocol.errors import ErrorCode as E
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

from .clients_lib import read_all
from .tv2_lib import (
    Producer,
    add_partitions_batched,
    committed_offset,
    end_txn_v5,
    init_v5,
    produce_v12,
    producer_epochs,
    txn_offset_commit,
)
from .wire_lib import add_partitions, end_txn

TOPIC = "tv2"
MAX_EPOCH = 32_767


pytestmark = pytest.mark.tidelog(overrides={"transaction.state.log.num.partitions": 4,
                                            "offsets.topic.num.partitions": 2}, topics={TOPIC: 2})


def txn_state(broker: Any, tid: str) -> Any:
    return broker.call(lambda: broker.state.txn_coordinator.state.get(tid).copy())


def test_a_new_data_dir_finalizes_transaction_version_2_and_serves_its_versions(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        cls = request_class(18)[4]
        resp = wire.request(18, 4, cls(client_software_name="tidelog-test", client_software_version="1"))
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in resp.finalized_features}
    supported = {f.name: (f.min_version, f.max_version) for f in resp.supported_features}
    assert finalized["transaction.version"] == (2, 2) and supported["transaction.version"] == (0, 2)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert ranges[24] == (0, 5) and ranges[26] == (0, 5) and ranges[28] == (0, 6)
    assert ranges[0][1] >= 12


def test_commit_and_abort_bump_the_epoch_each_time(tidelog_module_broker: BrokerHandle) -> None:
    """The Java TV2 producer's loop: Produce v12 enrols the partitions, TxnOffsetCommit v5 the group's offsets
    partition, EndTxn v5 answers epoch + 1 and the next transaction starts its sequences at 0 with it."""
    tid, group = "tv2-loop", "tv2-loop-group"
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        p0 = init_v5(wire, tid)
        for partition in (0, 1):
            assert produce_v12(wire, tid, p0, TOPIC, partition, [b"loop-c1", b"loop-c2"]).error_code == E.NONE
        assert txn_state(tidelog_module_broker, tid).state.state_name == "Ongoing"
        assert txn_offset_commit(wire, tid, p0, group, TOPIC, 0, 17) == E.NONE  # no AddOffsetsToTxn
        assert committed_offset(wire, group, TOPIC, 0) == (-1, E.UNSTABLE_OFFSET_COMMIT)
        meta = txn_state(tidelog_module_broker, tid)
        assert {(tp.topic, tp.partition) for tp in meta.partitions} >= {(TOPIC, 0), (TOPIC, 1)}
        assert meta.client_transaction_version == 2

        error, p1 = end_txn_v5(wire, tid, p0, commit=True)
        assert (error, p1) == (E.NONE, Producer(p0.producer_id, p0.epoch + 1))
        assert committed_offset(wire, group, TOPIC, 0) == (17, E.NONE)
        # the markers carry the bumped epoch (KIP-890 part 2): the partitions' producer state is at epoch + 1
        assert producer_epochs(wire, TOPIC, 0)[p0.producer_id] == p1.epoch
        # a retried EndTxn (the answer was lost) is answered the same producer id and epoch
        assert end_txn_v5(wire, tid, p0, commit=True) == (E.NONE, p1)
        assert end_txn_v5(wire, tid, p0, commit=False)[0] == E.INVALID_TXN_STATE  # a retry of the other kind

        # the next transaction, at the new epoch, sequences from 0 again; this one is aborted
        assert produce_v12(wire, tid, p1, TOPIC, 0, [b"loop-a1"]).error_code == E.NONE
        error, p2 = end_txn_v5(wire, tid, p1, commit=False)
        assert (error, p2) == (E.NONE, Producer(p0.producer_id, p0.epoch + 2))
        # the zombie of the first epoch is fenced by the partition's producer state
        assert produce_v12(wire, tid, p0, TOPIC, 1, [b"zombie"], seq=1).error_code == E.INVALID_PRODUCER_EPOCH
        assert end_txn_v5(wire, tid, Producer(p0.producer_id, p0.epoch - 1), commit=True)[0] == E.PRODUCER_FENCED
        # TxnOffsetCommit v5 of the zombie: the implicit add's PRODUCER_FENCED, as AddPartitionsToTxnManager maps it
        assert txn_offset_commit(wire, tid, p0, group, TOPIC, 0, 99) == E.INVALID_PRODUCER_EPOCH
        assert end_txn_v5(wire, tid, Producer(p0.producer_id + 1000, p2.epoch), commit=True)[0] == \
            E.INVALID_PRODUCER_ID_MAPPING
    assert sorted(v for v in read_all(tidelog_module_broker.bootstrap, TOPIC, "read_committed", 2) if v.startswith(b"loop")) == \
        [b"loop-c1", b"loop-c1", b"loop-c2", b"loop-c2"]
    uncommitted = read_all(tidelog_module_broker.bootstrap, TOPIC, "read_uncommitted", 2)
    assert b"loop-a1" in uncommitted and b"zombie" not in uncommitted


def test_an_abort_with_no_partition_bumps_the_epoch(tidelog_module_broker: BrokerHandle) -> None:
    """TV2 lets a producer abort when nothing was sent (Empty -> PrepareAbort -> CompleteAbort, no marker);
    committing nothing stays INVALID_TXN_STATE."""
    tid = "tv2-empty"
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        p0 = init_v5(wire, tid)
        assert end_txn_v5(wire, tid, p0, commit=True)[0] == E.INVALID_TXN_STATE
        error, p1 = end_txn_v5(wire, tid, p0, commit=False)
        assert (error, p1) == (E.NONE, Producer(p0.producer_id, p0.epoch + 1))
        assert txn_state(tidelog_module_broker, tid).state.state_name == "CompleteAbort"
        # again from CompleteAbort at the new epoch (not a retry): one more bump
        assert end_txn_v5(wire, tid, p1, commit=False) == (E.NONE, Producer(p0.producer_id, p0.epoch + 2))


def test_a_new_instance_fences_the_old_one(tidelog_module_broker: BrokerHandle) -> None:
    """InitProducerId of a second instance aborts the first one's open TV2 transaction with a bumped epoch
    (its markers) and answers CONCURRENT_TRANSACTIONS; the retry bumps once more; the first instance's writes and
    EndTxn are refused."""
    tid = "tv2-fence"
    with KafkaWire(tidelog_module_broker.bootstrap) as old, KafkaWire(tidelog_module_broker.bootstrap) as new:
        a = init_v5(old, tid)
        assert produce_v12(old, tid, a, TOPIC, 0, [b"fence-old"]).error_code == E.NONE
        first = new.request(22, 5, request_class(22)[5](transactional_id=tid, transaction_timeout_ms=60000,
                                                         producer_id=-1, producer_epoch=-1))
        assert first.error_code == E.CONCURRENT_TRANSACTIONS  # the abort is under way: retry
        assert txn_state(tidelog_module_broker, tid).state.state_name == "CompleteAbort"
        assert txn_state(tidelog_module_broker, tid).producer_epoch == a.epoch + 1
        b = init_v5(new, tid)
        assert b == Producer(a.producer_id, a.epoch + 2)
        assert produce_v12(old, tid, a, TOPIC, 1, [b"fence-old-2"], seq=1).error_code == E.INVALID_PRODUCER_EPOCH
        assert end_txn_v5(old, tid, a, commit=True)[0] == E.PRODUCER_FENCED
        assert produce_v12(new, tid, b, TOPIC, 0, [b"fence-new"]).error_code == E.NONE
        assert end_txn_v5(new, tid, b, commit=True) == (E.NONE, Producer(b.producer_id, b.epoch + 1))
    visible = [v for v in read_all(tidelog_module_broker.bootstrap, TOPIC, "read_committed", 2) if v.startswith(b"fence")]
    assert visible == [b"fence-new"]


def test_a_timed_out_transaction_is_aborted_and_the_producer_carries_on(tidelog_module_broker: BrokerHandle) -> None:
    """The coordinator aborts a transaction older than its timeout with a bumped epoch; the producer's next
    write is refused, and its abort (at the epoch it holds) is answered as a retry with the epoch to continue."""
    tid = "tv2-timeout"
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        p0 = init_v5(wire, tid, timeout_ms=500)
        assert produce_v12(wire, tid, p0, TOPIC, 1, [b"timeout-hung"]).error_code == E.NONE
        deadline = time.monotonic() + 60
        while txn_state(tidelog_module_broker, tid).state.state_name != "CompleteAbort":
            assert time.monotonic() < deadline, "the timed-out transaction was never aborted"
            time.sleep(0.1)
        assert txn_state(tidelog_module_broker, tid).producer_epoch == p0.epoch + 1
        assert produce_v12(wire, tid, p0, TOPIC, 1, [b"timeout-late"], seq=1).error_code == \
            E.INVALID_PRODUCER_EPOCH
        assert end_txn_v5(wire, tid, p0, commit=True)[0] == E.INVALID_TXN_STATE
        error, p1 = end_txn_v5(wire, tid, p0, commit=False)
        assert (error, p1) == (E.NONE, Producer(p0.producer_id, p0.epoch + 1))
        assert produce_v12(wire, tid, p1, TOPIC, 1, [b"timeout-next"]).error_code == E.NONE
        assert end_txn_v5(wire, tid, p1, commit=True)[0] == E.NONE
    visible = [v for v in read_all(tidelog_module_broker.bootstrap, TOPIC, "read_committed", 2) if v.startswith(b"timeout")]
    assert visible == [b"timeout-next"]


def test_epoch_exhaustion_rolls_over_to_a_new_producer_id(tidelog_module_broker: BrokerHandle) -> None:
    """At epoch Short.MaxValue - 1 the end of a transaction takes a new producer id (epoch 0), answered to the
    client; the end's retry with the old id is answered the same; the old id is then unknown to the transaction."""
    tid = "tv2-exhaust"
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        p = init_v5(wire, tid)

        def near_the_end() -> None:  # 32,765 InitProducerId calls would take too long: start the id near the end
            coordinator = tidelog_module_broker.state.txn_coordinator
            meta = coordinator.state.get(tid).copy()
            meta.producer_epoch = MAX_EPOCH - 2
            assert coordinator.state.append_transaction_to_log(meta) == E.NONE

        tidelog_module_broker.call(near_the_end)
        p = Producer(p.producer_id, MAX_EPOCH - 2)
        assert produce_v12(wire, tid, p, TOPIC, 0, [b"exhaust-1"]).error_code == E.NONE
        error, p = end_txn_v5(wire, tid, p, commit=True)
        assert (error, p.epoch) == (E.NONE, MAX_EPOCH - 1)
        assert produce_v12(wire, tid, p, TOPIC, 0, [b"exhaust-2"]).error_code == E.NONE
        error, rolled = end_txn_v5(wire, tid, p, commit=True)
        assert error == E.NONE and rolled.producer_id != p.producer_id and rolled.epoch == 0
        assert producer_epochs(wire, TOPIC, 0)[p.producer_id] == MAX_EPOCH  # the last marker of the old id
        assert end_txn_v5(wire, tid, p, commit=True) == (E.NONE, rolled)  # retried across the rollover
        assert produce_v12(wire, tid, p, TOPIC, 0, [b"exhaust-old"], seq=1).error_code == \
            E.INVALID_PRODUCER_ID_MAPPING
        assert produce_v12(wire, tid, rolled, TOPIC, 0, [b"exhaust-3"]).error_code == E.NONE
        assert end_txn_v5(wire, tid, rolled, commit=True) == (E.NONE, Producer(rolled.producer_id, 1))
    visible = [v for v in read_all(tidelog_module_broker.bootstrap, TOPIC, "read_committed", 2) if v.startswith(b"exhaust")]
    assert sorted(visible) == [b"exhaust-1", b"exhaust-2", b"exhaust-3"]


@pytest.mark.parametrize("version", [4, 5])
def test_add_partitions_v4_v5_verify_and_add(tidelog_module_broker: BrokerHandle, version: int) -> None:
    """The partition leader's AddPartitionsToTxn: VerifyOnly answers TRANSACTION_ABORTABLE for a partition not
    in the transaction; without it the partitions join as TV2, so EndTxn v5 bumps; an unknown partition fails
    the transaction's others with OPERATION_NOT_ATTEMPTED."""
    tid = f"tv2-apt-{version}"
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        p = init_v5(wire, tid)
        assert add_partitions_batched(wire, version, tid, p, TOPIC, [0], verify_only=True) == \
            (0, {0: E.TRANSACTION_ABORTABLE})
        assert add_partitions_batched(wire, version, tid, p, TOPIC, [0, 9], verify_only=False) == \
            (0, {0: E.OPERATION_NOT_ATTEMPTED, 9: E.UNKNOWN_TOPIC_OR_PARTITION})
        assert add_partitions_batched(wire, version, tid, p, TOPIC, [0], verify_only=False) == (0, {0: E.NONE})
        assert add_partitions_batched(wire, version, tid, p, TOPIC, [0, 1], verify_only=True) == \
            (0, {0: E.NONE, 1: E.TRANSACTION_ABORTABLE})
        stale = Producer(p.producer_id, p.epoch - 1)
        assert add_partitions_batched(wire, version, tid, stale, TOPIC, [0], verify_only=True) == \
            (0, {0: E.PRODUCER_FENCED})
        assert end_txn_v5(wire, tid, p, commit=False) == (E.NONE, Producer(p.producer_id, p.epoch + 1))


def test_verification_of_older_produce_versions(tidelog_module_broker: BrokerHandle) -> None:
    """KIP-890 part 1 for a TV1 producer: a transactional batch for a partition outside its transaction is
    refused, TRANSACTION_ABORTABLE from Produce v11 and INVALID_TXN_STATE below; Produce v11 never adds."""
    tid = "tv2-verify"
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        p = init_v5(wire, tid)
        assert add_partitions(wire, tid, p.producer_id, p.epoch, TOPIC, [0]) == {(TOPIC, 0): E.NONE}
        assert produce_v12(wire, tid, p, TOPIC, 1, [b"v11"], version=11).error_code == E.TRANSACTION_ABORTABLE
        assert produce_v12(wire, tid, p, TOPIC, 1, [b"v10"], version=10).error_code == E.INVALID_TXN_STATE
        assert produce_v12(wire, tid, p, TOPIC, 0, [b"v11-in"], version=11).error_code == E.NONE
        # EndTxn v4 is TV0 even on this broker: the epoch stays (Kafka's transactionVersionForEndTxn)
        assert end_txn(wire, tid, p.producer_id, p.epoch, False, version=4) == E.NONE
        assert txn_state(tidelog_module_broker, tid).producer_epoch == p.epoch


def test_txn_offset_commit_v4_still_needs_add_offsets(tidelog_module_broker: BrokerHandle) -> None:
    """Only v5 adds the group's offsets partition; a v4 commit outside a transaction is INVALID_TXN_STATE."""
    tid = "tv2-offsets-v4"
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        p = init_v5(wire, tid)
        assert txn_offset_commit(wire, tid, p, "tv2-g4", TOPIC, 0, 5, version=4) == E.INVALID_TXN_STATE
        assert txn_offset_commit(wire, tid, p, "tv2-g4", TOPIC, 0, 5, version=5) == E.NONE
        assert end_txn_v5(wire, tid, p, commit=True)[0] == E.NONE
        assert committed_offset(wire, "tv2-g4", TOPIC, 0) == (5, E.NONE)


def test_a_tv2_marker_must_be_above_the_partitions_epoch(tidelog_module_broker: BrokerHandle) -> None:
    """KIP-1228: a TV2 marker carries the bumped epoch, so one at or below the producer's epoch in the partition
    is late or a duplicate and is refused INVALID_PRODUCER_EPOCH; a TV0 marker only may not be below it."""
    from tidelog.protocol.errors import KafkaError
    from tidelog.storage import TopicPartition

    tid = "tv2-late-marker"
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        p0 = init_v5(wire, tid)
        assert produce_v12(wire, tid, p0, TOPIC, 0, [b"late-marker"]).error_code == E.NONE
        _, p1 = end_txn_v5(wire, tid, p0, commit=True)
    log = tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.log(TopicPartition(TOPIC, 0)))

    def marker(epoch: int, version: int) -> Any:
        def write() -> Any:
            try:
                return log.append_control_marker(p0.producer_id, epoch, 0, True, transaction_version=version)
            except KafkaError as e:
                return e.code
        return tidelog_module_broker.call(write)

    assert marker(p1.epoch, 2) == E.INVALID_PRODUCER_EPOCH
    assert marker(p0.epoch, 2) == E.INVALID_PRODUCER_EPOCH
    assert marker(p0.epoch, 0) == E.INVALID_PRODUCER_EPOCH  # below the epoch: refused under either rule
    assert marker(p1.epoch, 0).first_offset >= 0  # the TV0 rule takes an equal epoch


def test_a_producer_fenced_at_the_last_epoch_rolls_over_on_its_next_end(tidelog_module_broker: BrokerHandle) -> None:
    """A transaction timed out at epoch Short.MaxValue - 1 is aborted at Short.MaxValue (the fence never
    overflows); the producer's abort is a retry answered with that epoch, and its next end moves it to a new
    producer id at epoch 0 (endTransaction takes a next producer id whenever the epoch is exhausted)."""
    tid = "tv2-fenced-max"
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        p = init_v5(wire, tid, timeout_ms=500)

        def near_the_end() -> None:
            coordinator = tidelog_module_broker.state.txn_coordinator
            meta = coordinator.state.get(tid).copy()
            meta.producer_epoch = MAX_EPOCH - 1
            assert coordinator.state.append_transaction_to_log(meta) == E.NONE

        tidelog_module_broker.call(near_the_end)
        p = Producer(p.producer_id, MAX_EPOCH - 1)
        assert produce_v12(wire, tid, p, TOPIC, 1, [b"fenced-max"]).error_code == E.NONE
        deadline = time.monotonic() + 60
        while txn_state(tidelog_module_broker, tid).state.state_name != "CompleteAbort":
            assert time.monotonic() < deadline, "the timed-out transaction was never aborted"
            time.sleep(0.1)
        assert end_txn_v5(wire, tid, p, commit=False) == (E.NONE, Producer(p.producer_id, MAX_EPOCH))
        error, rolled = end_txn_v5(wire, tid, Producer(p.producer_id, MAX_EPOCH), commit=False)
        assert error == E.NONE and rolled.producer_id != p.producer_id and rolled.epoch == 0
    assert b"fenced-max" not in read_all(tidelog_module_broker.bootstrap, TOPIC, "read_committed", 2)
