"""TransactionCoordinator on real logs with a ManualClock: the state machine and its errors, the records it
leaves in __transaction_state, markers and the LSO, timeouts, id expiry, pending group offsets, and recovery
of a transaction a crash left prepared."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tidelog.clock import ManualClock
from tidelog.coordinator.group import GROUP_METADATA_TOPIC_NAME, OffsetAndMetadata
from tidelog.coordinator.transaction import records as rec
from tidelog.coordinator.transaction.fault_hooks import TxnFaultPoint
from tidelog.coordinator.transaction.metadata import TransactionState
from tidelog.protocol.errors import ErrorCode as E
from tidelog.storage import TopicPartition

from .txn_node import Node

COMMIT_KEY = b"\x00\x00\x00\x01"
ABORT_KEY = b"\x00\x00\x00\x00"
T0 = 1_700_000_000_000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def node(tmp_path: Path, clock: ManualClock) -> Iterator[Node]:
    n = Node(tmp_path, clock)
    n.create_topic("t", 3)
    yield n
    n.close()


TPS = [TopicPartition("t", 0), TopicPartition("t", 2)]


def begin(node: Node, tid: str = "tx", timeout: int = 60_000) -> tuple[int, int]:
    r = node.txn.handle_init_producer_id(tid, timeout)
    assert r.error == E.NONE
    assert node.txn.handle_add_partitions(tid, r.producer_id, r.producer_epoch, TPS) == E.NONE
    for i, tp in enumerate(TPS):
        node.produce(tp.topic, tp.partition, r.producer_id, r.producer_epoch, 0, [b"v%d" % i, b"w%d" % i])
    return r.producer_id, r.producer_epoch


def states_written(node: Node, tid: str) -> list[str]:
    out = []
    for key, value in node.state_records(tid):
        assert rec.decode_key(key) == tid
        out.append("tombstone" if value is None else TransactionState(rec.decode_value(value).transaction_status)
                   .state_name)
    return out


def test_commit_writes_prepare_markers_complete_and_releases_lso(node: Node) -> None:
    pid, epoch = begin(node)
    assert node.log("t", 0).last_stable_offset == 0  # the open transaction holds the LSO
    assert node.txn.handle_end_txn("tx", pid, epoch, True) == E.NONE
    for tp in TPS:
        batches = node.batches(tp.topic, tp.partition)
        assert batches[-1] == (True, pid, epoch, [COMMIT_KEY])
        assert len(batches) == 2
        lg = node.log(tp.topic, tp.partition)
        assert lg.last_stable_offset == lg.log_end_offset == 3
    assert node.batches("t", 1) == []  # not in the transaction: no marker
    assert states_written(node, "tx") == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    value = rec.decode_value(node.state_records("tx")[2][1] or b"")
    assert value.transaction_partitions == {"t": [0, 2]} and value.transaction_start_timestamp_ms == T0
    # a retried commit succeeds, an abort now is an invalid transition
    assert node.txn.handle_end_txn("tx", pid, epoch, True) == E.NONE
    assert node.txn.handle_end_txn("tx", pid, epoch, False) == E.INVALID_TXN_STATE


def test_abort_writes_abort_markers_and_txnindex(node: Node) -> None:
    pid, epoch = begin(node)
    assert node.txn.handle_end_txn("tx", pid, epoch, False) == E.NONE
    lg = node.log("t", 0)
    assert node.batches("t", 0)[-1] == (True, pid, epoch, [ABORT_KEY])
    aborted = lg.collect_aborted_transactions(0, lg.log_end_offset)
    assert [(a.producer_id, a.first_offset) for a in aborted] == [(pid, 0)]
    assert states_written(node, "tx")[-2:] == ["PrepareAbort", "CompleteAbort"]


def test_producer_errors(node: Node) -> None:
    assert node.txn.handle_init_producer_id("tx", 0).error == E.INVALID_TRANSACTION_TIMEOUT
    assert node.txn.handle_init_producer_id("tx", 900_001).error == E.INVALID_TRANSACTION_TIMEOUT
    r = node.txn.handle_init_producer_id("tx", 60_000)
    pid, epoch = r.producer_id, r.producer_epoch
    assert node.txn.handle_end_txn("tx", pid, epoch, True) == E.INVALID_TXN_STATE  # nothing begun
    assert node.txn.handle_end_txn("other", pid, epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert node.txn.handle_add_partitions("tx", pid + 1, epoch, TPS) == E.INVALID_PRODUCER_ID_MAPPING
    assert node.txn.handle_add_partitions("tx", pid, epoch + 1, TPS) == E.PRODUCER_FENCED
    assert node.txn.describe("nope")[0] == E.TRANSACTIONAL_ID_NOT_FOUND
    # KIP-890 part 1: a transactional batch to a partition outside the transaction
    assert node.txn.verify_transactional_produce(TopicPartition("t", 0), pid, epoch) == E.INVALID_TXN_STATE
    assert node.txn.handle_add_partitions("tx", pid, epoch, TPS) == E.NONE
    assert node.txn.verify_transactional_produce(TopicPartition("t", 0), pid, epoch) == E.NONE
    assert node.txn.verify_transactional_produce(TopicPartition("t", 1), pid, epoch) == E.INVALID_TXN_STATE


def test_second_producer_fences_first_and_aborts_its_transaction(node: Node) -> None:
    pid, epoch = begin(node)
    r = node.txn.handle_init_producer_id("tx", 60_000)
    # the open transaction was aborted with a bumped (fencing) epoch, then the new producer got the next one
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, pid, epoch + 2)
    assert node.batches("t", 0)[-1] == (True, pid, epoch + 1, [ABORT_KEY])
    assert node.log("t", 0).last_stable_offset == node.log("t", 0).log_end_offset
    assert node.txn.handle_end_txn("tx", pid, epoch, True) == E.PRODUCER_FENCED
    # KIP-360: the new producer asks for a bump with its id/epoch; a stale pair is fenced
    assert node.txn.handle_init_producer_id("tx", 60_000, pid, epoch).error == E.PRODUCER_FENCED
    bumped = node.txn.handle_init_producer_id("tx", 60_000, pid, epoch + 2)
    assert (bumped.error, bumped.producer_epoch) == (E.NONE, epoch + 3)
    retried = node.txn.handle_init_producer_id("tx", 60_000, pid, epoch + 2)  # the same request again
    assert (retried.error, retried.producer_epoch) == (E.NONE, epoch + 3)


def test_exhausted_epoch_rolls_over_to_a_new_producer_id(node: Node) -> None:
    r = node.txn.handle_init_producer_id("tx", 60_000)
    meta = node.txn.state.get("tx")
    assert meta is not None
    meta.producer_epoch = 32_766
    again = node.txn.handle_init_producer_id("tx", 60_000)
    assert again.error == E.NONE and again.producer_id != r.producer_id and again.producer_epoch == 0


def test_timed_out_transaction_is_aborted_and_producer_fenced(node: Node, clock: ManualClock) -> None:
    pid, epoch = begin(node, timeout=10_000)
    clock.advance(9_999)
    node.txn.run_periodic_tasks()
    assert node.txn.state.get("tx").state is TransactionState.ONGOING  # type: ignore[union-attr]
    assert node.log("t", 0).last_stable_offset == 0
    clock.advance(1)
    node.txn.run_periodic_tasks()
    meta = node.txn.state.get("tx")
    assert meta is not None and meta.state is TransactionState.COMPLETE_ABORT and meta.producer_epoch == epoch + 1
    assert node.batches("t", 2)[-1] == (True, pid, epoch + 1, [ABORT_KEY])
    assert node.log("t", 0).last_stable_offset == node.log("t", 0).log_end_offset
    assert node.txn.handle_end_txn("tx", pid, epoch, True) == E.PRODUCER_FENCED
    assert node.txn.aborted_timed_out == 1


def test_idle_transactional_ids_expire(tmp_path: Path, clock: ManualClock) -> None:
    node = Node(tmp_path, clock, {"transactional.id.expiration.ms": "60000",
                                  "transaction.remove.expired.transaction.cleanup.interval.ms": "1000"})
    try:
        node.txn.handle_init_producer_id("idle", 30_000)
        clock.advance(59_000)
        node.txn.run_periodic_tasks()
        assert node.txn.state.get("idle") is not None
        clock.advance(2_000)
        node.txn.run_periodic_tasks()
        assert node.txn.state.get("idle") is None
        assert states_written(node, "idle") == ["Empty", "tombstone"]
    finally:
        node.close()


class Crash(Exception):
    pass


class RaiseAt:
    def __init__(self, point: TxnFaultPoint) -> None:
        self.point = point

    def at(self, point: object, subject: object = None) -> None:
        if point == self.point:
            raise Crash(str(point))


@pytest.mark.parametrize("point", list(TxnFaultPoint))
@pytest.mark.parametrize("commit", [True, False])
def test_restart_completes_a_transaction_left_at_each_step(tmp_path: Path, clock: ManualClock,
                                                          point: TxnFaultPoint, commit: bool) -> None:
    node = Node(tmp_path, clock, fault_hooks=RaiseAt(point))
    node.create_topic("t", 3)
    pid, epoch = begin(node)
    with pytest.raises(Crash):
        node.txn.handle_end_txn("tx", pid, epoch, commit)
    node.close()
    node = Node(tmp_path, clock)
    try:
        meta = node.txn.state.get("tx")
        assert meta is not None
        if point is TxnFaultPoint.BEFORE_PREPARE:
            # nothing was written: the transaction is still open; the producer's retry ends it
            assert meta.state is TransactionState.ONGOING
            assert node.txn.handle_end_txn("tx", pid, epoch, commit) == E.NONE
        want = TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT
        assert node.txn.state.get("tx").state is want  # type: ignore[union-attr]
        for tp in TPS:
            lg = node.log(tp.topic, tp.partition)
            markers = [b for b in node.batches(tp.topic, tp.partition) if b[0]]
            assert markers and all(m[3] == [COMMIT_KEY if commit else ABORT_KEY] for m in markers)
            assert lg.last_stable_offset == lg.log_end_offset
        # the id keeps working: a new transaction
        assert node.txn.handle_add_partitions("tx", pid, epoch, TPS) == E.NONE
        assert node.txn.handle_end_txn("tx", pid, epoch, True) == E.NONE
    finally:
        node.close()


def test_txn_offsets_pending_until_commit_dropped_on_abort_and_replayed(tmp_path: Path, clock: ManualClock) -> None:
    node = Node(tmp_path, clock)
    node.create_topic("t", 3)
    tp = TopicPartition("t", 1)
    try:
        for commit, offset in ((False, 5), (True, 7)):
            r = node.txn.handle_init_producer_id("tx", 60_000)
            node.groups.manager.store.ensure_topic()
            offsets_tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, node.groups.partition_for("g"))
            assert node.txn.handle_add_partitions("tx", r.producer_id, r.producer_epoch, [offsets_tp]) == E.NONE
            om = OffsetAndMetadata(offset, -1, "", clock.milliseconds())
            assert node.groups.txn_commit_offsets("g", r.producer_id, r.producer_epoch, "", None, -1, {tp: om}) \
                == {tp: E.NONE}
            assert node.groups.fetch_offsets("g", [tp])[1][tp] is None  # pending: invisible
            assert node.groups.has_pending_txn_offsets("g", tp)
            assert node.txn.handle_end_txn("tx", r.producer_id, r.producer_epoch, commit) == E.NONE
            got = node.groups.fetch_offsets("g", [tp])[1][tp]
            assert (got.offset if got else None) == (offset if commit else None)
        # KIP-447: a member id / generation the group does not have is fenced
        assert node.groups.txn_commit_offsets("g", r.producer_id, r.producer_epoch, "zombie", None, 3,
                                              {tp: om}) == {tp: E.UNKNOWN_MEMBER_ID}
        assert node.groups.txn_commit_offsets("g", r.producer_id, r.producer_epoch, "", None, 3,
                                              {tp: om}) == {tp: E.ILLEGAL_GENERATION}
        # an open transaction's offsets at restart stay pending, then commit
        r = node.txn.handle_init_producer_id("tx", 60_000)
        assert node.txn.handle_add_partitions("tx", r.producer_id, r.producer_epoch, [offsets_tp]) == E.NONE
        node.groups.txn_commit_offsets("g", r.producer_id, r.producer_epoch, "", None, -1,
                                       {tp: OffsetAndMetadata(9, -1, "", clock.milliseconds())})
    finally:
        node.close()
    node = Node(tmp_path, clock)
    try:
        assert node.groups.fetch_offsets("g", [tp])[1][tp].offset == 7  # type: ignore[union-attr]
        assert node.groups.has_pending_txn_offsets("g", tp)
        assert node.txn.handle_end_txn("tx", r.producer_id, r.producer_epoch, True) == E.NONE
        assert node.groups.fetch_offsets("g", [tp])[1][tp].offset == 9  # type: ignore[union-attr]
    finally:
        node.close()
    node = Node(tmp_path, clock)  # and the committed value is what a replay finds
    try:
        assert node.groups.fetch_offsets("g", [tp])[1][tp].offset == 9  # type: ignore[union-attr]
        assert not node.groups.has_pending_txn_offsets("g", tp)
    finally:
        node.close()


def test_list_and_describe(node: Node, clock: ManualClock) -> None:
    pid, _ = begin(node, "a")
    node.txn.handle_init_producer_id("b", 60_000)
    clock.advance(5_000)
    error, unknown, found = node.txn.list_transactions(["Ongoing", "Bogus"], [])
    assert (error, unknown, [m.transactional_id for m in found]) == (E.NONE, ["Bogus"], ["a"])
    assert [m.transactional_id for m in node.txn.list_transactions([], [], 4_000)[2]] == ["a"]
    assert node.txn.list_transactions([], [], 6_000)[2] == []
    assert sorted(m.transactional_id for m in node.txn.list_transactions([], [])[2]) == ["a", "b"]
    error, meta = node.txn.describe("a")
    assert error == E.NONE and meta is not None and meta.producer_id == pid and meta.topics() == {"t": [0, 2]}
    producers = node.log("t", 0).active_producers()
    assert [(p.producer_id, p.current_txn_start_offset) for p in producers] == [(pid, 0)]


def test_a_failed_marker_keeps_the_transaction_prepared_until_retried(tmp_path: Path, clock: ManualClock) -> None:
    """A marker that cannot be written (here: the partition's log is closed, as after a disk failure) leaves
    the id in PrepareCommit: its requests get CONCURRENT_TRANSACTIONS, DescribeTransactions shows only the
    partition still waiting; a restart completes it."""
    node = Node(tmp_path, clock)
    node.create_topic("t", 3)
    try:
        pid, epoch = begin(node)
        node.log("t", 2).close()
        assert node.txn.handle_end_txn("tx", pid, epoch, True) == E.NONE  # Kafka answers after the prepare
        meta = node.txn.state.get("tx")
        assert meta is not None and meta.state is TransactionState.PREPARE_COMMIT
        assert meta.partitions == {TopicPartition("t", 2)}
        assert node.txn.handle_add_partitions("tx", pid, epoch, TPS) == E.CONCURRENT_TRANSACTIONS
        assert node.txn.handle_end_txn("tx", pid, epoch, True) == E.CONCURRENT_TRANSACTIONS
        assert node.txn.handle_end_txn("tx", pid, epoch, False) == E.INVALID_TXN_STATE
        assert node.txn.handle_init_producer_id("tx", 60_000).error == E.CONCURRENT_TRANSACTIONS
        assert node.txn.timer.deadline(("markers", "tx")) == clock.milliseconds() + 10_000  # the retry's key
        clock.advance(10_000)  # transaction.abort.timed.out.transaction.cleanup.interval.ms
        node.txn.run_periodic_tasks()  # the retry fails again while the log stays closed, and is scheduled again
        assert node.txn.timer.deadline(("markers", "tx")) == clock.milliseconds() + 10_000
        assert node.txn.state.get("tx").state is TransactionState.PREPARE_COMMIT  # type: ignore[union-attr]
    finally:
        node.close()
    node = Node(tmp_path, clock)
    try:
        assert node.txn.state.get("tx").state is TransactionState.COMPLETE_COMMIT  # type: ignore[union-attr]
        assert node.batches("t", 2)[-1] == (True, pid, epoch, [COMMIT_KEY])
        assert node.log("t", 2).last_stable_offset == node.log("t", 2).log_end_offset
    finally:
        node.close()


def test_produce_check_after_the_producer_was_fenced(node: Node, clock: ManualClock) -> None:
    pid, epoch = begin(node, timeout=1_000)
    clock.advance(1_000)
    node.txn.run_periodic_tasks()  # aborted with the epoch bumped
    assert node.txn.verify_transactional_produce(TPS[0], pid, epoch) == E.INVALID_PRODUCER_EPOCH
