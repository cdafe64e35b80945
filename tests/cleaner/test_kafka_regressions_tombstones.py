"""Tombstones removed too early (KAFKA-4545) or kept forever (KAFKA-8522): KIP-534's two passes. The first pass
that finds a tombstone (or a transaction marker with no data left) in the clean section stamps the batch with a
delete horizon of now + delete.retention.ms; a later pass at or after the horizon removes it. Record timestamps
and segment modification times play no part, and rewriting the batch never moves the horizon."""

from __future__ import annotations

from cleaner_env import COMPACT, Env, batch_headers, produce, read_all
from cleaner_impls import cleaner_impl  # noqa: F401 - every test on the C core and on pure Python
from regression_helpers import TxnProducer, all_batches

from tidelog.protocol.records import Record, build_batch

RETENTION = COMPACT.delete_retention_ms  # 1000 ms in these tests
DAY = 86_400_000


def more_dirty_data(log, n: int) -> None:  # noqa: ANN001
    """New dirty records and a roll, so the next round has something to clean (and recopies the clean part)."""
    produce(log, f"filler{n}", "f")
    log.roll()
    produce(log, f"tail{n}", "t")


def tombstone_header(log, key: bytes):  # noqa: ANN001, ANN201
    found = [h for h, records in all_batches(log) if any(r.key == key and r.value is None for r in records)]
    return found[0] if found else None


def test_kafka_4545_old_tombstone_is_kept_for_delete_retention_after_it_was_cleaned(env: Env) -> None:
    """KAFKA-4545: a tombstone whose own timestamp is older than delete.retention.ms must still be kept for
    delete.retention.ms after the pass that cleaned it, so a consumer catching up sees the delete (Kafka's
    testCleanTombstone)."""
    log = env.log()
    produce(log, "k", "value", ts=env.clock.milliseconds() + RETENTION + 10_000)  # 0, timestamp in the future
    log.roll()
    produce(log, "x", "x")
    assert env.cleaner.clean_once()
    produce(log, "k", None, ts=env.clock.milliseconds() - RETENTION - 10_000)  # 2, an old tombstone
    log.roll()
    produce(log, "y", "y")
    stamped_at = env.clock.milliseconds()
    assert env.cleaner.clean_once()
    tombstone = tombstone_header(log, b"k")
    assert tombstone is not None and tombstone.has_delete_horizon
    assert tombstone.delete_horizon_ms == stamped_at + RETENTION
    assert (2, b"k", None) in [(r.offset, r.key, r.value) for r in read_all(log)]

    env.clock.advance(RETENTION - 1)  # one ms before the horizon: still there after another pass
    more_dirty_data(log, 1)
    assert env.cleaner.clean_once()
    assert tombstone_header(log, b"k") is not None
    env.clock.advance(1)  # at the horizon: removed
    more_dirty_data(log, 2)
    assert env.cleaner.clean_once()
    assert tombstone_header(log, b"k") is None
    assert b"k" not in {r.key for r in read_all(log)}


def test_kafka_8522_rewriting_the_tombstone_batch_does_not_move_its_horizon(env: Env) -> None:
    """KAFKA-8522: with the legacy rule (horizon from the last clean segment's modification time) a tombstone in a
    segment every pass recopies was kept forever. Here the tombstone's batch is even rebuilt on later passes
    (its other record is superseded); its horizon stays the first one and the tombstone goes once it has passed."""
    log = env.log()
    ts = env.clock.milliseconds()
    produce(log, "gone", "v")  # 0
    log.append_as_leader(build_batch([Record(0, ts, b"gone", None), Record(1, ts, b"a", b"a1")], 0))  # 1-2
    log.roll()
    produce(log, "z", "z")
    first = env.clock.milliseconds()
    assert env.cleaner.clean_once()
    horizon = tombstone_header(log, b"gone").delete_horizon_ms
    assert horizon == first + RETENTION

    env.clock.advance(RETENTION // 2)
    produce(log, "a", "a2")  # supersedes the tombstone's batch mate: the batch is rebuilt
    log.roll()
    produce(log, "z2", "z")
    assert env.cleaner.clean_once()
    rebuilt = tombstone_header(log, b"gone")
    assert rebuilt is not None and rebuilt.records_count == 1
    assert rebuilt.delete_horizon_ms == horizon  # not now + delete.retention.ms
    for n in range(3):  # passes that recopy the segment keep it only until the horizon
        env.clock.advance(RETENTION // 4)
        more_dirty_data(log, n)
        assert env.cleaner.clean_once()
        present = tombstone_header(log, b"gone") is not None
        assert present == (env.clock.milliseconds() < horizon)
    assert env.clock.milliseconds() >= horizon and tombstone_header(log, b"gone") is None


def test_kafka_8522_markers_follow_the_same_two_passes(env: Env) -> None:
    """Transaction markers piggy-back on the tombstone horizon (KIP-534): stamped on the first pass that finds
    the transaction without data, removed on a pass at or after the horizon, never before."""
    log = env.log()
    producer = TxnProducer(log, 9)
    producer.send([("k", "aborted")])  # 0
    marker = producer.abort()          # 1
    log.roll()
    produce(log, "z", "z")
    env.clock.advance(DAY + 1)
    log.remove_expired_producers()     # the producer is gone: its emptied batch may go too
    assert env.cleaner.clean_once()    # the aborted data goes; the marker is not stamped yet
    more_dirty_data(log, 0)
    stamped_at = env.clock.milliseconds()
    assert env.cleaner.clean_once()    # no data left for the marker: stamped
    [header] = [h for h in batch_headers(log) if h.base_offset == marker]
    assert header.has_delete_horizon and header.delete_horizon_ms == stamped_at + RETENTION
    env.clock.advance(RETENTION - 1)
    more_dirty_data(log, 1)
    assert env.cleaner.clean_once()
    assert [h.base_offset for h in batch_headers(log) if h.is_control] == [marker]
    env.clock.advance(1)
    more_dirty_data(log, 2)
    assert env.cleaner.clean_once()
    assert [h for h in batch_headers(log) if h.is_control] == []
