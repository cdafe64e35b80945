"""Kafka's known cleaner bugs around segments and offsets, as regression tests on real logs (each cites its
KAFKA issue). Logs with offset holes are written on disk segment by segment, as a log copied from a Kafka broker
that compacted it (or a follower of one) has them, then opened by the LogManager."""

from __future__ import annotations

import random

from cleaner_env import COMPACT, Env, produce, read_all
from cleaner_impls import cleaner_impl  # noqa: F401 - every test on the C core and on pure Python
from regression_helpers import TxnProducer, read_committed, write_segments

from tidelog.cleaner.cleaner import group_segments_by_size
from tidelog.protocol.records import ZSTD, Record, build_batch
from tidelog.storage import TopicPartition

INT32_MAX = 0x7FFFFFFF
SPAN = INT32_MAX + 1  # 2^31 offsets: the most one segment's relative offsets can cover


def keyed(offsets: range | list[int], key: bytes | None = None) -> list[tuple[int, bytes]]:
    return [(o, key if key is not None else b"k%d" % o) for o in offsets]


def assert_segments_within_int32(log) -> None:  # noqa: ANN001
    for segment in log.segments:
        assert segment.read_next_offset() - 1 - segment.base_offset <= INT32_MAX, segment


def test_kafka_8764_cleaning_moves_past_offset_holes(env: Env) -> None:
    """KAFKA-8764: a dirty section ending in an offset hole (records missing before the next segment's base)
    must not leave the first dirty offset in the hole, or the same log is picked again forever
    (Kafka's testCleaningBeyondMissingOffsets)."""
    log = write_segments(env, env.log("hole"), [(0, keyed(range(10))), (11, keyed([11]))])
    assert env.cleaner.clean_once()
    assert env.cleaner.manager.all_cleaner_checkpoints()[TopicPartition("hole", 0)] == 11 == log.active_segment.base_offset
    assert not env.cleaner.clean_once()  # nothing left to clean: no endless loop over the hole

    log = write_segments(env, env.log("holes"),
                         [(0, keyed(range(10))), (15, keyed(range(15, 25))), (30, keyed([30]))])
    assert env.cleaner.clean_once()
    assert env.cleaner.manager.all_cleaner_checkpoints()[TopicPartition("holes", 0)] == 30
    assert not env.cleaner.clean_once()
    assert [r.offset for r in read_all(log)] == [*range(10), *range(15, 25), 30]


def test_kafka_8764_superseded_records_across_a_hole(env: Env) -> None:
    """The same with keys that repeat across the hole: the older copies go, the offsets stay."""
    log = write_segments(env, env.log("hole-keys"),
                         [(0, keyed(range(5), b"same")), (9, keyed(range(9, 12), b"same")), (20, keyed([20]))])
    assert env.cleaner.clean_once()
    assert [r.offset for r in read_all(log)] == [11, 20]
    assert not env.cleaner.clean_once()


def test_kafka_12889_empty_segments_every_2_31_offsets_are_merged(env: Env) -> None:
    """KAFKA-12889: segments 2^31 offsets apart cannot share a group, but once cleaning has emptied them an empty
    segment must join the group before it, or one empty segment per 2^31 offsets stays forever and is recopied
    on every pass (Kafka's testSegmentGroupingWithSparseOffsetsAndEmptySegments)."""
    key = b"key"
    segments = [(i * SPAN, keyed([i * SPAN, (i + 1) * SPAN - 1], key)) for i in range(3)]
    log = write_segments(env, env.log("sparse"), [*segments, (3 * SPAN, keyed([3 * SPAN], b"last"))])
    active = log.active_segment.base_offset
    groups = group_segments_by_size(log.segments.values(0, active), INT32_MAX, INT32_MAX, active)
    assert len(groups) == 3  # not empty yet: no two of them fit one segment's relative offsets

    assert env.cleaner.clean_once()
    sizes = [s.size for s in log.segments]
    assert sizes[:2] == [0, 0] and len(sizes) == 4  # the two oldest are now empty
    assert_segments_within_int32(log)

    # the next pass (new dirty data) merges the empty segments into one
    produce(log, "other", "o")
    log.roll()
    produce(log, "tail", "t")
    before = [s.base_offset for s in log.segments]
    assert env.cleaner.clean_once()
    assert [s.base_offset for s in log.segments] == [before[0], *before[2:]]
    assert [s.size for s in log.segments].count(0) == 1
    assert_segments_within_int32(log)
    assert [(r.offset, r.key) for r in read_all(log)] == [(3 * SPAN - 1, key), (3 * SPAN, b"last"),
                                                          (3 * SPAN + 1, b"other"), (3 * SPAN + 2, b"tail")]


def test_kafka_6264_groups_never_span_more_than_2_31_offsets(env: Env) -> None:
    """KAFKA-6264 (and KAFKA-5413): the cleaned segment of a group holds relative offsets in an int32, so segments
    whose offsets together span more than 2^31 are never grouped, judged by the next segment's base offset
    (a sparse index says nothing of the last offset). Kafka's testSegmentGroupingWithSparseOffsets."""
    first = keyed(range(5))
    second = keyed([INT32_MAX - 1, INT32_MAX, INT32_MAX + 1])  # last offset - 0 > INT32_MAX
    third = keyed([INT32_MAX + 5, INT32_MAX + 6])
    log = write_segments(env, env.log("overflow"),
                         [(0, first), (INT32_MAX - 1, second), (INT32_MAX + 5, third), (INT32_MAX + 10,
                                                                                         keyed([INT32_MAX + 10]))])
    active = log.active_segment.base_offset
    groups = group_segments_by_size(log.segments.values(0, active), INT32_MAX, INT32_MAX, active)
    assert [[s.base_offset for s in g] for g in groups] == [[0], [INT32_MAX - 1, INT32_MAX + 5]]
    assert env.cleaner.clean_once()
    tp = TopicPartition("overflow", 0)
    assert not env.cleaner.manager.is_uncleanable(tp)
    assert_segments_within_int32(log)
    expected = [o for o, _ in first + second + third] + [INT32_MAX + 10]
    assert [r.offset for r in read_all(log)] == expected
    env.restart()  # the cleaned segments load again (an overflowed one would fail recovery's offset check)
    assert [r.offset for r in read_all(env.log("overflow", log.config))] == expected


def _letters(n: int, seed: int) -> bytes:
    rng = random.Random(seed)
    return bytes(rng.choice(b"abcdefghij") for _ in range(n))


def test_kafka_20036_cleaned_output_larger_than_its_source(env: Env) -> None:
    """KAFKA-20036 (the 2026 follow-up of KAFKA-6264): a rebuilt batch is recompressed at its codec's default
    level (MemoryRecords.filterTo), so a group that fits segment.bytes can clean into more bytes than it read.
    The pass must still write every retained record whole into valid segments, and the transaction index entry of
    a retained aborted transaction must land in the segment holding its marker (Kafka's follow-up, PR 23301:
    entries went to the wrong segment once a cleaned segment was rolled). Kafka's own trigger, a cleaned segment
    growing past 2 GiB, is out of a test's reach; tidelog never rolls within a group, so such a pass would fail
    (offset-index positions are int32) and mark the partition uncleanable."""
    config = COMPACT.with_values(segment_bytes=3600)
    log = env.log("grows", config)
    ts = env.clock.milliseconds()
    latest: dict[bytes, bytes] = {}
    for n in range(6):
        # seven big records compressed at zstd level 19 and one small one the next batch supersedes: the
        # rebuilt batch (level 3) is larger than the original
        records = [Record(i, ts, b"k%d-%d" % (n, i), _letters(400, 10 * n + i)) for i in range(7)]
        records.append(Record(7, ts, b"dup", b"%d" % n))
        log.append_as_leader(build_batch(records, 0, compression=ZSTD, compression_level=19))
        latest.update({r.key: r.value for r in records})
        if n == 3:
            aborting = TxnProducer(log, 77)  # stays active: its emptied batch and its marker are retained
            aborting.send([("x", "aborted")])
            aborting.abort()
    log.roll()
    produce(log, "tail", "t")
    latest[b"tail"] = b"t"
    source_sizes = {s.base_offset: s.size for s in log.segments}
    assert len(source_sizes) >= 3
    assert env.cleaner.clean_once()
    assert not env.cleaner.manager.is_uncleanable(TopicPartition("grows", 0))
    grown = [s for s in log.segments if s.base_offset in source_sizes and s.size > source_sizes[s.base_offset]]
    assert grown  # the scenario really cleans into more bytes than it read
    assert {k: v for _, k, v in read_committed(log)} == latest
    for segment in log.segments:
        last_offsets = {h.last_offset for _, h in segment.batches()}
        for txn in segment.txn_index.all_aborted_txns():
            assert txn.last_offset in last_offsets, (segment, txn)
    assert [(t.producer_id, t.first_offset) for t in log.collect_aborted_transactions(0, log.log_end_offset)] == [
        (77, 32)]
    assert_segments_within_int32(log)
    env.restart()  # and the grown segments load again
    assert {k: v for _, k, v in read_committed(env.log("grows", config))} == latest
