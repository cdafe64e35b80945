"""Kafka's known cleaner bugs around transactions, as regression tests on real logs (each cites its KAFKA issue;
the scenarios follow Kafka's LogCleanerTest)."""

from __future__ import annotations

from pathlib import Path

from cleaner_env import COMPACT, Env, produce
from cleaner_impls import cleaner_impl  # noqa: F401 - every test on the C core and on pure Python
from regression_helpers import (
    ABORT_KEY,
    COMMIT_KEY,
    TxnProducer,
    all_batches,
    last_offsets_per_batch,
    offsets_in_log,
    read_committed,
)

from tidelog.cleaner.cleaner import group_segments_by_size
from tidelog.cleaner.log_cleaner import CleanerConfig, LogCleaner
from tidelog.clock import ManualClock
from tidelog.storage import TopicPartition

DAY = 86_400_000


def aborted_values_visible(log) -> list[bytes | None]:  # noqa: ANN001
    return [v for _, _, v in read_committed(log) if v is not None and v.startswith(b"aborted")]


def markers(log) -> dict[int, bytes]:  # noqa: ANN001
    """Control batches on disk: offset -> key of their record."""
    return {h.base_offset: records[0].key for h, records in all_batches(log) if h.is_control and records}


def batches_of(log, producer_id: int) -> list[int]:  # noqa: ANN001
    return [h.base_offset for h, _ in all_batches(log) if h.producer_id == producer_id and not h.is_control]


def test_kafka_13727_partial_pass_keeps_aborted_transactions_of_the_uncleaned_part(tmp_path: Path,
                                                                                  clock: ManualClock) -> None:
    """KAFKA-13727: a pass whose offset map fills mid-segment copies the rest of the segment too; the cleaned
    segment's transaction index must keep the aborted transactions of that uncleaned part, or their data becomes
    committed and their markers go while the data stays (Kafka's testMultiPassSegmentCleaningWithAbortedTransactions)."""
    env = Env(tmp_path / "data", clock, memory=24 * 4)  # 4 slots: 3 keys fit in the map
    try:
        log = env.log()
        p1, p2 = TxnProducer(log, 1), TxnProducer(log, 2)
        p1.send([("1", "c1"), ("2", "c1")])            # 0-1
        p2.send([("2", "c2"), ("3", "c2")])            # 2-3
        p1.send([("3", "c1"), ("4", "c1")])            # 4-5: the map is full, the first pass ends at 4
        p1.commit()                                    # 6
        p2.commit()                                    # 7
        p1.send([("2", "aborted1"), ("3", "aborted1")])  # 8-9
        p1.abort()                                     # 10
        p2.send([("4", "aborted2"), ("5", "aborted2")])  # 11-12
        p1.send([("5", "c1"), ("6", "c1")])            # 13-14
        p1.commit()                                    # 15
        p2.abort()                                     # 16
        p2.send([("6", "c2"), ("7", "c2")])            # 17-18
        p2.commit()                                    # 19
        log.roll()
        produce(log, "tail", "t")                      # 20, active segment
        assert [(t.producer_id, t.first_offset, t.last_offset) for t in
                log.collect_aborted_transactions(0, log.log_end_offset)] == [(1, 8, 10), (2, 11, 16)]
        tp = TopicPartition("t", 0)
        checkpoints = []
        for _ in range(6):
            if not env.cleaner.clean_once():
                break
            checkpoints.append(env.cleaner.manager.all_cleaner_checkpoints()[tp])
            assert aborted_values_visible(log) == []
            # an ABORT marker stays as long as a batch of its transaction is in the log
            if batches_of(log, 1) and any(8 <= o <= 9 for o in batches_of(log, 1)):
                assert 10 in markers(log)
            if any(o == 11 for o in batches_of(log, 2)):
                assert 16 in markers(log)
            # and every aborted batch still in the log is covered by the transaction index
            aborted_left = {o for o in (8, 11) if o in batches_of(log, 1) + batches_of(log, 2)
                            and any(h.base_offset == o and h.records_count for h, _ in all_batches(log))}
            listed = {t.first_offset for t in log.collect_aborted_transactions(0, log.log_end_offset)}
            assert aborted_left <= listed
        assert checkpoints[0] == 4 and len(checkpoints) > 1  # the first pass was partial: the aborted data after it
        assert checkpoints[-1] == 20
        committed = {k: v for _, k, v in read_committed(log)}
        assert committed == {b"1": b"c1", b"2": b"c2", b"3": b"c1", b"4": b"c1", b"5": b"c1", b"6": b"c2",
                             b"7": b"c2", b"tail": b"t"}
    finally:
        env.close()


def test_kafka_14055_commit_marker_survives_a_user_key_equal_to_its_control_key(env: Env) -> None:
    """KAFKA-14055: control records are left out of the offset map, so a user record whose key equals a
    marker's control key must not remove that marker (Kafka's testCleaningWithKeysConflictingWithTxnMarkerKeys)."""
    log = env.log()
    p1, p2 = TxnProducer(log, 1), TxnProducer(log, 2)
    p1.send([("1", "one")])     # 0
    p1.commit()                 # 1
    p2.send([(COMMIT_KEY, "user value with the COMMIT key")])  # 2
    p2.commit()                 # 3
    log.roll()
    produce(log, "tail", "t")
    assert env.cleaner.clean_once()
    assert last_offsets_per_batch(log)[:4] == [0, 1, 2, 3]
    assert offsets_in_log(log)[:4] == [0, 1, 2, 3]
    assert markers(log) == {1: COMMIT_KEY, 3: COMMIT_KEY}


def test_kafka_14055_abort_marker_survives_a_later_user_key_equal_to_it(env: Env) -> None:
    """KAFKA-14055, ABORT side: the marker must stay while its transaction's (emptied) batch is in the log,
    whatever later user record carries the ABORT control key; the aborted data never becomes visible."""
    log = env.log()
    p1, p2 = TxnProducer(log, 1), TxnProducer(log, 2)
    p1.send([("a", "aborted")])                # 0
    abort = p1.abort()                         # 1
    p2.send([(ABORT_KEY, "user value with the ABORT key")])  # 2
    p2.commit()                                # 3
    log.roll()
    produce(log, "tail", "t")
    assert env.cleaner.clean_once()
    # p1 is still active: its last data batch stays as an empty header, so its ABORT marker must stay too
    assert [h.records_count for h, _ in all_batches(log) if h.base_offset == 0] == [0]
    assert markers(log)[abort] == ABORT_KEY
    assert aborted_values_visible(log) == []
    assert (2, ABORT_KEY, b"user value with the ABORT key") in read_committed(log)


def test_kafka_8351_transactions_spanning_segments_and_cleaning_groups(env: Env) -> None:
    """KAFKA-8351: the transaction state must carry over from one group of segments to the next within a pass,
    or a marker whose transaction began in an earlier group is taken for one without data (Kafka's
    testCleanWithTransactionsSpanningSegments). segment.bytes is small so every segment is a group of its own."""
    config = COMPACT.with_values(segment_bytes=400)
    log = env.log("spanning", config)
    p1, p2, p3 = TxnProducer(log, 1), TxnProducer(log, 2), TxnProducer(log, 3)
    p1.send([("1", "aborted1"), ("2", "aborted1")])
    p3.send([("2", "c3"), ("3", "c3")])
    p2.send([("3", "aborted2"), ("4", "aborted2")])
    log.roll()
    p2.send([("5", "aborted2"), ("6", "aborted2")])
    p3.send([("6", "c3"), ("7", "c3")])
    p1.send([("7", "aborted1"), ("8", "aborted1")])
    p2.abort()
    p3.send([("8", "c3"), ("9", "c3")])
    p3.commit()
    p1.send([("9", "aborted1"), ("10", "aborted1")])
    p1.abort()
    log.roll()
    produce(log, "tail", "t")
    groups = group_segments_by_size(log.segments.values(0, log.active_segment.base_offset), config.segment_bytes,
                                    config.segment_index_bytes, log.active_segment.base_offset)
    assert len(groups) >= 2  # the transactions of p1 and p2 cross a group boundary
    assert env.cleaner.clean_once()
    assert aborted_values_visible(log) == []
    assert {k: v for _, k, v in read_committed(log)} == {
        b"2": b"c3", b"3": b"c3", b"6": b"c3", b"7": b"c3", b"8": b"c3", b"9": b"c3", b"tail": b"t"}

    # more data from the aborted producers, then a second pass over everything
    p2.send([("11", "eleven")])
    p2.commit()
    p1.send([("12", "twelve")])
    p1.commit()
    log.roll()
    produce(log, "tail2", "t")
    assert env.cleaner.clean_once()
    assert aborted_values_visible(log) == []
    keys = sorted(int(k) for _, k, _ in read_committed(log) if k is not None and k.isdigit())
    assert keys == [2, 3, 6, 7, 8, 9, 11, 12]


def test_kafka_8351_aborted_transaction_whose_marker_is_in_the_next_group(env: Env) -> None:
    """KAFKA-8351 (Kafka's testAbortedTransactionSpanningSegments): the data in one segment, its ABORT marker in
    the next, each its own group. The data is aborted (never visible), and the marker stays while the
    producer's emptied batch does."""
    log = env.log("span-abort", COMPACT.with_values(segment_bytes=100))
    producer = TxnProducer(log, 7)
    producer.send([("k", "aborted")])   # 0
    log.roll()
    abort = producer.abort()            # 1
    log.roll()
    produce(log, "tail", "t")
    for _ in range(2):
        env.cleaner.clean_once()
        assert aborted_values_visible(log) == []
        assert [(h.base_offset, h.records_count) for h, _ in all_batches(log) if h.producer_id == 7
                and not h.is_control] == [(0, 0)]
        assert abort in markers(log)
        env.clock.advance(DAY)  # past any delete horizon: the marker must still stay (its data is there)
        produce(log, "more", "m")
        log.roll()


def test_kafka_8351_committed_transaction_whose_marker_is_in_the_next_group(env: Env) -> None:
    """KAFKA-8351 (Kafka's testCommittedTransactionSpanningSegments): the committed record and its marker in
    two groups both stay through two passes past the delete horizon."""
    log = env.log("span-commit", COMPACT.with_values(segment_bytes=100))
    producer = TxnProducer(log, 8)
    producer.send([("k", "committed")])  # 0
    log.roll()
    commit = producer.commit()           # 1
    log.roll()
    produce(log, "tail", "t")
    for _ in range(2):
        env.cleaner.clean_once()
        assert (0, b"k", b"committed") in read_committed(log)
        assert commit in markers(log)
        env.clock.advance(DAY)
        produce(log, "more", "m")
        log.roll()


def test_kafka_6854_discarded_batches_do_not_grow_the_buffers(env: Env) -> None:
    """KAFKA-6854: a read chunk whose only batch is discarded (aborted data, a marker past its horizon) is
    progress, not a batch too big for the buffer. The I/O buffer here is exactly max.message.bytes (100), so
    any growth would fail the pass (Kafka's testDeletedBatchesWithNoMessagesRead)."""
    config = COMPACT.with_values(max_message_bytes=100, segment_bytes=1000)
    log = env.log("discards", config)
    cleaner = LogCleaner(CleanerConfig(dedupe_buffer_size=1 << 20, io_buffer_size=200, max_message_size=100,
                                       backoff_ms=50),
                         [str(env.path)], env.manager.all_logs, env.clock, checkpoint_store=env.manager)
    assert cleaner.new_cleaner(0).io_buffer_size == 100
    producer = TxnProducer(log, 1)
    producer.send([("1", "aborted")])  # 0
    producer.abort()                   # 1
    producer.send([("2", "old")])      # 2
    producer.send([("2", "new")])      # 3
    producer.commit()                  # 4
    log.roll()
    produce(log, "tail", "t")
    assert all(h.size <= 100 for h, _ in all_batches(log))
    assert cleaner.clean_once()
    tp = TopicPartition("discards", 0)
    assert not cleaner.manager.is_uncleanable(tp)
    assert [(o, k) for o, k, _ in read_committed(log)] == [(3, b"2"), (5, b"tail")]
    assert offsets_in_log(log)[:3] == [1, 3, 4]  # aborted data and the superseded record are gone
    # producer 1 expires; after the horizon the ABORT marker goes, the COMMIT marker stays with its data
    env.clock.advance(DAY + 1)
    log.remove_expired_producers()
    for n in range(3):
        produce(log, f"filler{n}", "f")
        log.roll()
        assert cleaner.clean_once()
        env.clock.advance(config.delete_retention_ms)
    assert not cleaner.manager.is_uncleanable(tp)
    assert [h.base_offset for h, _ in all_batches(log) if h.producer_id == 1] == [3, 4]
    assert offsets_in_log(log)[:2] == [3, 4]
