"""Aborted transactions, markers and producer state through cleaning (docs/STORAGE.md, Example C)."""

from __future__ import annotations

import struct

from cleaner_env import Env, batch_headers, produce, read_all
from cleaner_impls import cleaner_impl  # noqa: F401 - autouse: the C cleaner core and the Python cleaner

from tidelog.protocol.records import Record, build_batch

PID = 1000
DAY = 86_400_000


def txn_data(log, keys: list[str]) -> int:  # noqa: ANN001
    ts = log.clock.milliseconds()
    batch = build_batch([Record(i, ts, k.encode(), b"txn") for i, k in enumerate(keys)], 0, producer_id=PID,
                        producer_epoch=0, base_sequence=0, is_transactional=True)
    return log.append_as_leader(batch).first_offset


def marker(log, abort: bool) -> int:  # noqa: ANN001
    key = struct.pack(">hh", 0, 0 if abort else 1)
    value = struct.pack(">hi", 0, 7)
    batch = build_batch([Record(0, log.clock.milliseconds(), key, value)], 0, producer_id=PID, producer_epoch=0,
                        is_transactional=True, is_control=True)
    return log.append_as_leader(batch, from_client=False).first_offset


def dirty_and_roll(log, n: int) -> None:  # noqa: ANN001
    produce(log, f"filler{n}", "f")
    log.roll()
    produce(log, f"tail{n}", "t")


def headers_at(log, offset: int) -> list:  # noqa: ANN001
    return [h for h in batch_headers(log) if h.base_offset == offset]


def test_example_c_aborted_transaction_then_marker_removed(env: Env) -> None:
    log = env.log()
    produce(log, "plain", "p")          # 0
    assert txn_data(log, ["a", "b"]) == 1  # 1-2
    assert marker(log, abort=True) == 3  # ABORT
    log.roll()
    produce(log, "x", "x")  # active

    # Pass 1: aborted data discarded, but it is P's last data batch -> empty header; the marker stays.
    assert env.cleaner.clean_once()
    [data] = headers_at(log, 1)
    assert data.records_count == 0 and data.size == 61 and data.last_offset == 2 and data.producer_id == PID
    [mark] = headers_at(log, 3)
    assert mark.is_control and not mark.has_delete_horizon
    assert [r.key for r in read_all(log)] == [b"plain", b"x"]
    txns = [t for s in log.segments for t in s.txn_index.all_aborted_txns()]
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in txns] == [(PID, 1, 3)]

    # P expires: the next pass drops the header, the marker survives that pass.
    env.clock.advance(DAY + 1)
    log.remove_expired_producers()
    dirty_and_roll(log, 1)
    assert env.cleaner.clean_once()
    assert headers_at(log, 1) == []
    [mark] = headers_at(log, 3)
    assert not mark.has_delete_horizon

    # Next pass: the marker is discardable; it gets a delete horizon.
    dirty_and_roll(log, 2)
    now = env.clock.milliseconds()
    assert env.cleaner.clean_once()
    [mark] = headers_at(log, 3)
    assert mark.has_delete_horizon and mark.delete_horizon_ms == now + 1000

    # A pass at or after the horizon drops it.
    env.clock.advance(1000)
    dirty_and_roll(log, 3)
    assert env.cleaner.clean_once()
    assert headers_at(log, 3) == []


def test_committed_transaction_records_follow_key_rules(env: Env) -> None:
    log = env.log()
    txn_data(log, ["k", "j"])   # 0-1
    marker(log, abort=False)    # 2 COMMIT
    produce(log, "k", "newer")  # 3
    log.roll()
    produce(log, "z", "z")
    assert env.cleaner.clean_once()
    values = {r.key: r.value for r in read_all(log)}
    assert values == {b"j": b"txn", b"k": b"newer", b"z": b"z"}
    [mark] = headers_at(log, 2)  # committed data seen in this pass: the marker is kept
    assert mark.is_control


def test_last_batch_of_active_idempotent_producer_is_kept_empty(env: Env) -> None:
    log = env.log()
    ts = env.clock.milliseconds()
    batch = build_batch([Record(0, ts, b"k", b"old")], 0, producer_id=PID, producer_epoch=0, base_sequence=0)
    log.append_as_leader(batch)  # 0
    produce(log, "k", "new")    # 1 supersedes it
    log.roll()
    produce(log, "z", "z")
    assert env.cleaner.clean_once()
    [kept] = headers_at(log, 0)
    assert kept.records_count == 0 and kept.producer_id == PID and kept.base_sequence == 0
    assert [r.offset for r in read_all(log)] == [1, 2]


def test_aborted_records_do_not_supersede_committed_ones(env: Env) -> None:
    log = env.log()
    produce(log, "a", "committed")  # 0
    txn_data(log, ["a"])             # 1, aborted below
    marker(log, abort=True)          # 2
    log.roll()
    produce(log, "z", "z")
    assert env.cleaner.clean_once()
    values = {r.key: r.value for r in read_all(log) if r.offset != 1}
    assert values[b"a"] == b"committed"
    assert [h.records_count for h in headers_at(log, 1)] == [0]  # aborted data gone (header kept: P active)


def test_abort_marker_in_a_later_segment_still_aborts(env: Env) -> None:
    """An aborted transaction's `.txnindex` entry lives in the segment of its ABORT marker. The cleaner's lookup
    (Kafka's LocalLog.collectAbortedTransactions, read from each segment on) must reach it there, or it keeps the
    aborted records and lets them supersede committed values (KAFKA-8351's effect, issue 28)."""
    log = env.log()
    produce(log, "a", "committed")   # 0
    txn_data(log, ["a", "b"])         # 1-2, aborted below
    log.roll()
    produce(log, "c", "c")            # 3
    log.roll()
    assert marker(log, abort=True) == 4
    log.roll()
    produce(log, "z", "z")            # active
    assert env.cleaner.clean_once()
    live = {r.key: r.value for r in read_all(log) if r.offset not in (1, 2)}
    assert live[b"a"] == b"committed" and b"b" not in live
    assert [r.offset for r in read_all(log) if r.value == b"txn"] == []  # the aborted data is gone ...
    txns = [t for s in log.segments for t in s.txn_index.all_aborted_txns()]
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in txns] == [(PID, 1, 4)]  # ... its marker kept


def test_open_transaction_holds_back_cleaning(env: Env) -> None:
    log = env.log()
    produce(log, "k", "1")  # 0
    log.roll()
    txn_data(log, ["x"])    # 1: open transaction, LSO = 1
    produce(log, "k", "2")  # 2
    log.roll()
    produce(log, "tail", "t")
    assert log.last_stable_offset == 1
    chosen = env.cleaner.manager.grab_filthiest_compacted_log()
    assert chosen is not None and chosen.first_uncleanable_offset == 1  # the LSO's segment base
    env.cleaner.manager.done_cleaning(chosen.topic_partition, env.path, chosen.first_dirty_offset)
    marker(log, abort=False)  # 4: commit; the LSO moves to the HW
    log.roll()
    produce(log, "tail2", "t")
    assert env.cleaner.clean_once()
    values = {r.key: (r.offset, r.value) for r in read_all(log)}
    assert values[b"k"] == (2, b"2") and values[b"x"] == (1, b"txn")
    assert 0 not in {r.offset for r in read_all(log)}


def test_compacted_topic_with_transactions_and_tombstones(env: Env) -> None:
    """Issue #8 done-when 6: committed and aborted transactions and tombstones on a compacted log. After
    cleaning the aborted records are gone and the latest committed values stay; markers (and tombstones) survive
    the pass that stamps their delete horizon and go once delete.retention.ms (1 s here) has passed; a COMMIT
    marker whose transaction still has data stays (Kafka's CleanedTransactionMetadata)."""
    log = env.log()
    keep, gone, aborted = 2001, 2002, 2003

    def txn(pid: int, kvs: list[tuple[str, str]]) -> None:
        ts = env.clock.milliseconds()
        log.append_as_leader(build_batch([Record(i, ts, k.encode(), v.encode()) for i, (k, v) in enumerate(kvs)], 0,
                                         producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True))

    produce(log, "t", "to-be-deleted")            # 0
    txn(keep, [("a", "a-committed")])             # 1
    txn(gone, [("b", "b-old")])                   # 2
    txn(aborted, [("a", "a-aborted"), ("c", "c-aborted")])  # 3-4
    commit_keep = log.append_control_marker(keep, 0, 1, commit=True).first_offset       # 5
    commit_gone = log.append_control_marker(gone, 0, 1, commit=True).first_offset       # 6
    abort = log.append_control_marker(aborted, 0, 1, commit=False).first_offset         # 7
    produce(log, "b", "b-new")                    # 8 supersedes the committed b-old
    produce(log, "t", None)                       # 9 tombstone for t
    assert log.last_stable_offset == log.high_watermark == 10
    log.roll()
    produce(log, "tail", "x")

    def markers() -> dict[int, bool]:  # marker offset -> has a delete horizon
        return {h.base_offset: h.has_delete_horizon for h in batch_headers(log) if h.is_control}

    def latest() -> dict[bytes | None, bytes | None]:
        return {r.key: r.value for r in read_all(log)}

    assert env.cleaner.clean_once()
    values = latest()
    assert b"a-aborted" not in values.values() and b"c" not in values  # aborted records gone
    assert values[b"a"] == b"a-committed" and values[b"b"] == b"b-new" and values[b"t"] is None
    assert set(markers()) == {commit_keep, commit_gone, abort}  # every marker survives the first pass
    [tombstone] = headers_at(log, 9)
    assert tombstone.has_delete_horizon and tombstone.delete_horizon_ms == env.clock.milliseconds() + 1000

    # The transactional producers expire; passes go on until only horizons are left to wait for.
    env.clock.advance(DAY + 1)
    log.remove_expired_producers()
    for n in range(3):
        dirty_and_roll(log, n)
        assert env.cleaner.clean_once()
    stamped = markers()
    assert stamped[commit_gone] and stamped[abort]  # horizon set: data gone, still in the log
    assert not stamped[commit_keep]                 # its transaction's data (a) is still there
    assert b"t" not in latest()                     # the tombstone's horizon has passed

    env.clock.advance(999)  # just before the horizon: another pass keeps them
    dirty_and_roll(log, 8)
    assert env.cleaner.clean_once()
    assert set(markers()) == {commit_keep, commit_gone, abort}
    env.clock.advance(1)  # delete.retention.ms (1000) after the stamping pass
    dirty_and_roll(log, 9)
    assert env.cleaner.clean_once()
    assert set(markers()) == {commit_keep}
    values = latest()
    assert values[b"a"] == b"a-committed" and values[b"b"] == b"b-new"
    assert log.collect_aborted_transactions(0, log.log_end_offset) == []
