"""The share-partition state machine (KIP-932; Kafka's SharePartition) on hand-made batch headers: whole-batch
acquisition, delivery counts and their limit, lock expiry, release on session close, acknowledgement checks
(all or none), the SPSO advance, the in-flight limit, read_committed's aborted batches. The broker-level
behaviour over real sockets and clients is in test_share_groups.py."""

from __future__ import annotations

from tidelog.coordinator.share.share_partition import (
    ACCEPT,
    ACQUIRED,
    AVAILABLE,
    GAP,
    RECORD_LIMIT,
    REJECT,
    RELEASE,
    RENEW,
    AbortedRanges,
    AcknowledgementBatch,
    AcquiredRange,
    AcquireLimits,
    SharePartition,
    check_batches,
)
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.record_batch import RecordBatchHeader

TRANSACTIONAL, CONTROL = 0x10, 0x20


def batch(base: int, count: int, attributes: int = 0, producer_id: int = -1) -> RecordBatchHeader:
    return RecordBatchHeader(base, 100, 0, 2, 0, attributes, count - 1, 0, 0, producer_id, 0, 0, count)


def limits(max_records: int = 500, max_in_flight: int = 2000, lock_ms: int = 30_000, delivery_limit: int = 5,
           mode: int = 0) -> AcquireLimits:
    return AcquireLimits(max_records, max_in_flight, lock_ms, delivery_limit, mode)


def fresh(start: int = 0) -> SharePartition:
    return SharePartition("g", b"t" * 16, 0, start, start)


def ack(first: int, last: int, *types: int) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, tuple(types))


def test_whole_batches_are_acquired_past_max_records_unless_record_limit() -> None:
    batches = [batch(0, 3), batch(3, 3), batch(6, 3)]
    sp = fresh()
    assert sp.acquire("m1", batches, 9, 0, limits(max_records=4)) == [AcquiredRange(0, 5, 1)]
    assert (sp.start_offset, sp.end_offset) == (0, 6)
    exact = fresh()
    assert exact.acquire("m1", batches, 9, 0, limits(max_records=4, mode=RECORD_LIMIT)) == [AcquiredRange(0, 3, 1)]
    assert exact.end_offset == 6  # the batch is kept whole: offsets 4-5 available for the next acquisition
    assert {o: r.state for o, r in exact.records.items() if o >= 4} == {4: AVAILABLE, 5: AVAILABLE}
    assert exact.acquire("m2", batches, 9, 0, limits(max_records=4, mode=RECORD_LIMIT)) == [AcquiredRange(4, 7, 1)]


def test_nothing_at_or_past_the_upper_bound_is_acquired() -> None:
    sp = fresh()
    assert sp.acquire("m1", [batch(0, 2), batch(2, 2)], 2, 0, limits()) == [AcquiredRange(0, 1, 1)]
    assert sp.end_offset == 2


def test_a_record_held_by_one_member_is_not_given_to_another_until_released() -> None:
    sp = fresh()
    sp.acquire("m1", [batch(0, 2)], 2, 0, limits())
    assert sp.first_fetch_offset() == 2
    assert sp.acquire("m2", [batch(0, 2)], 2, 0, limits()) == []
    assert sp.acknowledge("m1", [ack(0, 1, RELEASE)], 5, 0, 30_000) == (ErrorCode.NONE, None)
    assert sp.first_fetch_offset() == 0
    assert sp.acquire("m2", [batch(0, 2)], 2, 0, limits()) == [AcquiredRange(0, 1, 2)]  # a second delivery


def test_acknowledgements_move_the_start_offset_over_done_records() -> None:
    sp = fresh()
    sp.acquire("m1", [batch(0, 4)], 4, 0, limits())
    assert sp.acknowledge("m1", [ack(1, 2, ACCEPT)], 5, 0, 30_000)[0] == ErrorCode.NONE
    assert sp.start_offset == 0  # offset 0 is still in flight
    assert sp.acknowledge("m1", [ack(0, 0, REJECT), ack(3, 3, GAP)], 5, 0, 30_000)[0] == ErrorCode.NONE
    assert (sp.start_offset, sp.records) == (4, {})


def test_acknowledgements_are_all_or_none_and_only_by_the_holder() -> None:
    sp = fresh()
    sp.acquire("m1", [batch(0, 4)], 4, 0, limits())
    code, message = sp.acknowledge("m2", [ack(0, 0, ACCEPT)], 5, 0, 30_000)
    assert code == ErrorCode.INVALID_RECORD_STATE and message is not None and "owner" in message
    # the first batch is fine, the second names an offset acknowledged already: nothing is applied
    assert sp.acknowledge("m1", [ack(3, 3, ACCEPT)], 5, 0, 30_000)[0] == ErrorCode.NONE
    assert sp.acknowledge("m1", [ack(0, 1, ACCEPT), ack(3, 3, ACCEPT)], 5, 0, 30_000)[0] == \
        ErrorCode.INVALID_RECORD_STATE
    assert {o: r.state for o, r in sp.records.items()} == {0: ACQUIRED, 1: ACQUIRED, 2: ACQUIRED}
    assert sp.acknowledge("m1", [ack(0, 9, ACCEPT)], 5, 0, 30_000)[0] == ErrorCode.INVALID_REQUEST  # past the end
    # a range below the start offset is done already: skipped
    assert sp.acknowledge("m1", [ack(0, 2, ACCEPT)], 5, 0, 30_000)[0] == ErrorCode.NONE
    assert sp.acknowledge("m1", [ack(0, 3, ACCEPT)], 5, 0, 30_000)[0] == ErrorCode.NONE


def test_per_offset_types_and_batch_checks() -> None:
    sp = fresh()
    sp.acquire("m1", [batch(0, 3)], 3, 0, limits())
    assert sp.acknowledge("m1", [ack(0, 2, ACCEPT, RELEASE, REJECT)], 5, 0, 30_000)[0] == ErrorCode.NONE
    assert {o: r.state for o, r in sp.records.items()} == {1: AVAILABLE}
    assert check_batches([ack(2, 1, ACCEPT)], False) is not None
    assert check_batches([ack(0, 1, ACCEPT), ack(1, 2, ACCEPT)], False) is not None  # overlapping
    assert check_batches([ack(0, 2, ACCEPT, ACCEPT)], False) is not None  # two types for three offsets
    assert check_batches([ack(0, 0)], False) is not None
    assert check_batches([ack(0, 0, RENEW)], False) is not None  # RENEW only in a renew acknowledgement
    assert check_batches([ack(0, 0, RENEW)], True) is None
    assert check_batches([ack(0, 0, 9)], True) is not None


def test_locks_time_out_and_the_delivery_limit_archives() -> None:
    sp = fresh()
    for delivery in range(1, 4):
        now = delivery * 1000
        assert sp.acquire("m1", [batch(0, 1)], 1, now, limits(lock_ms=500, delivery_limit=3)) == \
            [AcquiredRange(0, 0, delivery)]
        assert not sp.expire_locks(now + 499, 3)
        assert sp.expire_locks(now + 500, 3)
    assert (sp.records, sp.start_offset) == ({}, 1)  # the third timeout reached the limit: archived


def test_renew_restarts_the_lock_without_counting_a_delivery() -> None:
    sp = fresh()
    sp.acquire("m1", [batch(0, 1)], 1, 0, limits(lock_ms=1000))
    assert sp.acknowledge("m1", [ack(0, 0, RENEW)], 5, 900, 1000)[0] == ErrorCode.NONE
    assert not sp.expire_locks(1500, 5)
    assert sp.records[0].delivery_count == 1 and sp.records[0].state == ACQUIRED
    assert sp.expire_locks(1900, 5)


def test_a_closed_session_releases_without_counting_the_delivery() -> None:
    sp = fresh()
    sp.acquire("m1", [batch(0, 2)], 2, 0, limits())
    sp.acquire("m2", [batch(2, 1)], 3, 0, limits())
    assert sp.release_member("m1")
    assert {o: (r.state, r.delivery_count) for o, r in sp.records.items()} == {
        0: (AVAILABLE, 0), 1: (AVAILABLE, 0), 2: (ACQUIRED, 1)}
    assert not sp.release_member("m1")


def test_the_in_flight_limit_stops_new_records_but_not_redeliveries() -> None:
    sp = fresh()
    assert sp.acquire("m1", [batch(0, 3), batch(3, 3)], 6, 0, limits(max_in_flight=3)) == [AcquiredRange(0, 2, 1)]
    assert not sp.can_acquire(3)
    assert sp.acquire("m1", [batch(3, 3)], 6, 0, limits(max_in_flight=3)) == []
    sp.acknowledge("m1", [ack(1, 1, RELEASE)], 5, 0, 30_000)
    assert sp.can_acquire(3)
    assert sp.acquire("m2", [batch(0, 3), batch(3, 3)], 6, 0, limits(max_in_flight=3)) == [AcquiredRange(1, 1, 2)]


def test_the_in_flight_limit_splits_a_batch() -> None:
    sp = fresh()
    assert sp.acquire("m1", [batch(0, 5)], 5, 0, limits(max_in_flight=3)) == [AcquiredRange(0, 2, 1)]
    assert (sp.end_offset, sp.first_fetch_offset()) == (3, 3)
    sp.acknowledge("m1", [ack(0, 2, ACCEPT)], 5, 0, 30_000)
    assert sp.acquire("m1", [batch(0, 5)], 5, 0, limits(max_in_flight=3)) == [AcquiredRange(3, 4, 1)]


def test_markers_stay_in_the_ranges_and_aborted_batches_are_archived() -> None:
    sp = fresh()
    aborted = AbortedRanges(((7, 0, 2),))
    got = sp.acquire("m1", [batch(0, 2, TRANSACTIONAL, 7), batch(2, 1, TRANSACTIONAL | CONTROL, 7), batch(3, 2)],
                     5, 0, limits(), aborted)
    # the aborted transaction's records are done at once; its abort marker is acquired (the client GAPs it)
    assert got == [AcquiredRange(2, 4, 1)]
    assert sp.start_offset == 2 and sorted(sp.records) == [2, 3, 4]


def test_acquired_ranges_split_at_batches_once_batch_size_long() -> None:
    sp = fresh()
    got = sp.acquire("m1", [batch(0, 2), batch(2, 2), batch(4, 2)], 6, 0, limits(), None, batch_size=3)
    assert got == [AcquiredRange(0, 3, 1), AcquiredRange(4, 5, 1)]


def test_the_log_start_moving_past_the_start_offset_drops_those_records() -> None:
    sp = fresh()
    sp.acquire("m1", [batch(0, 4)], 4, 0, limits())
    assert sp.move_start(2)
    assert (sp.start_offset, sorted(sp.records)) == (2, [2, 3])
    assert not sp.move_start(1)


def test_available_offsets_compaction_removed_are_done() -> None:
    sp = fresh()
    sp.acquire("m1", [batch(0, 4)], 4, 0, limits())
    sp.acknowledge("m1", [ack(0, 3, RELEASE)], 5, 0, 30_000)
    # the log was compacted meanwhile: offsets 1 and 2 have no batch any more
    assert sp.acquire("m2", [batch(0, 1), batch(3, 1)], 4, 0, limits()) == [AcquiredRange(0, 0, 2), AcquiredRange(3, 3, 2)]
    assert sorted(sp.records) == [0, 3]
    assert sp.acknowledge("m2", [ack(0, 3, ACCEPT)], 5, 0, 30_000)[0] == ErrorCode.INVALID_RECORD_STATE  # 1-2 done
    assert sp.acknowledge("m2", [ack(0, 0, ACCEPT), ack(3, 3, ACCEPT)], 5, 0, 30_000)[0] == ErrorCode.NONE
    assert (sp.start_offset, sp.records) == (4, {})


def test_available_records_at_a_lowered_delivery_limit_are_archived() -> None:
    sp = fresh()
    sp.acquire("m1", [batch(0, 1)], 1, 0, limits())
    sp.acknowledge("m1", [ack(0, 0, RELEASE)], 5, 0, 30_000)
    sp.acquire("m1", [batch(0, 1)], 1, 0, limits())
    sp.acknowledge("m1", [ack(0, 0, RELEASE)], 5, 0, 30_000)  # two deliveries, available again
    assert sp.acquire("m1", [batch(0, 1)], 1, 0, limits(delivery_limit=2)) == []
    assert (sp.start_offset, sp.records) == (1, {})


def test_an_acknowledgement_range_reaching_below_the_start_offset() -> None:
    sp = fresh(1_000_000)
    sp.acquire("m1", [batch(1_000_000, 2)], 1_000_002, 0, limits())
    assert sp.acknowledge("m1", [ack(0, 1_000_001, ACCEPT)], 5, 0, 30_000) == (ErrorCode.NONE, None)
    assert (sp.start_offset, sp.records) == (1_000_002, {})
    other = fresh(10)
    other.acquire("m1", [batch(10, 3)], 13, 0, limits())
    # one type per offset of the whole range, the ones below the start included
    assert other.acknowledge("m1", [ack(8, 12, ACCEPT, ACCEPT, ACCEPT, RELEASE, REJECT)], 5, 0, 30_000)[0] == \
        ErrorCode.NONE
    assert {o: r.state for o, r in other.records.items()} == {11: AVAILABLE}
