"""Choosing what to clean (docs/STORAGE.md): lags, the active segment, the filthiest log, states."""

from __future__ import annotations

import threading

import pytest
from cleaner_env import COMPACT, Env, produce, read_all

from tidelog.cleaner.cleaner import LogCleaningAbortedError
from tidelog.cleaner.manager import PAUSED, cleanable_offsets
from tidelog.storage import TopicPartition


def dup_log(env: Env, name: str, dups: int, uniques: int = 1, config=COMPACT):  # noqa: ANN001, ANN201
    log = env.log(name, config)
    for i in range(dups):
        produce(log, "same", f"v{i}")
    for i in range(uniques):
        produce(log, f"u{i}", "x")
    log.roll()
    produce(log, "tail", "t")
    return log


def test_active_segment_is_never_cleaned(env: Env) -> None:
    log = env.log()
    for i in range(10):
        produce(log, "k", str(i))  # all in the active segment
    assert not env.cleaner.clean_once()
    assert len(read_all(log)) == 10
    offsets = cleanable_offsets(log, None, env.clock.milliseconds())
    assert offsets.first_uncleanable_dirty_offset == 0


def test_min_compaction_lag_keeps_young_records(env: Env) -> None:
    log = dup_log(env, "lag", 5, config=COMPACT.with_values(min_compaction_lag_ms=60_000))
    assert not env.cleaner.clean_once()  # records are younger than the lag
    assert len(read_all(log)) == 7
    env.clock.advance(60_001)
    assert env.cleaner.clean_once()
    assert [r.offset for r in read_all(log)] == [4, 5, 6]


def test_max_compaction_lag_forces_cleaning_below_the_ratio(env: Env) -> None:
    log = dup_log(env, "m", 20, uniques=20, config=COMPACT)
    assert env.cleaner.clean_once()  # first pass: everything dirty
    # a small dirty tail: ratio far below 0.9
    produce(log, "same", "new")
    log.roll()
    produce(log, "tail", "t2")
    log.update_config(COMPACT.with_values(min_cleanable_dirty_ratio=0.9, max_compaction_lag_ms=60_000))
    assert not env.cleaner.clean_once()
    env.clock.advance(120_000)
    assert env.cleaner.clean_once()
    assert env.cleaner.metrics()["max-compaction-delay-secs"] >= 59
    values = {r.key: r.value for r in read_all(log)}
    assert values[b"same"] == b"new"


def test_filthiest_log_goes_first(env: Env) -> None:
    a = dup_log(env, "a", 2, uniques=8)  # 20% of records superseded
    b = dup_log(env, "b", 9, uniques=1)  # 80%
    c = dup_log(env, "c", 5, uniques=5)
    del a, b, c
    order = []
    for _ in range(3):
        chosen = env.cleaner.manager.grab_filthiest_compacted_log()
        assert chosen is not None
        order.append(chosen.topic_partition.topic)
        env.cleaner.manager.done_cleaning(chosen.topic_partition, env.path, chosen.first_uncleanable_offset)
    # all three are 100% dirty before their first cleaning: ties; after one pass, nothing is dirty
    assert sorted(order) == ["a", "b", "c"]
    assert env.cleaner.manager.grab_filthiest_compacted_log() is None


def test_filthiest_by_dirty_ratio(env: Env) -> None:
    logs = {name: dup_log(env, name, 4, uniques=4) for name in ("low", "high")}
    assert env.cleaner.clean_once() and env.cleaner.clean_once()
    # "high" gets a big new dirty section, "low" a small one
    for i in range(40):
        produce(logs["high"], f"h{i}", "x" * 50)
    produce(logs["low"], "l", "x")
    for log in logs.values():
        log.roll()
        produce(log, "tail", "t")
    chosen = env.cleaner.manager.grab_filthiest_compacted_log()
    assert chosen is not None and chosen.topic_partition.topic == "high"
    assert env.cleaner.metrics()["max-dirty-percent"] == int(100 * chosen.cleanable_ratio)


def test_abort_and_pause_stops_a_pass(env: Env) -> None:
    log = dup_log(env, "p", 5)
    tp = TopicPartition("p", 0)
    env.cleaner.manager.abort_and_pause_cleaning(tp)
    assert env.cleaner.manager.cleaning_state(tp) == (PAUSED, 1)
    assert not env.cleaner.clean_once()  # paused logs are skipped
    env.cleaner.manager.resume_cleaning([tp])
    assert env.cleaner.manager.cleaning_state(tp) is None
    # an abort seen mid-pass: no checkpoint, .cleaned files removed
    chosen = env.cleaner.manager.grab_filthiest_compacted_log()
    assert chosen is not None
    waiter = threading.Thread(target=env.cleaner.manager.abort_and_pause_cleaning, args=(tp,))
    waiter.start()
    cleaner = env.cleaner._sync_thread.get_cleaner()
    for _ in range(1000):
        if env.cleaner.manager.cleaning_state(tp)[0] == "aborted":
            break
        threading.Event().wait(0.01)
    with pytest.raises(LogCleaningAbortedError):
        cleaner.clean(chosen)
    env.cleaner.manager.cleaning_aborted(tp)
    waiter.join(10)
    assert env.cleaner.manager.cleaning_state(tp) == (PAUSED, 1)
    assert not list(log.dir.glob("*.cleaned"))
    assert len(read_all(log)) == 7


def test_failure_marks_partition_uncleanable_and_others_continue(env: Env) -> None:
    bad = dup_log(env, "bad", 9)
    good = dup_log(env, "good", 5, uniques=5)
    # corrupt the bad log's first segment so the map build cannot read it
    seg = bad.segments.first_segment
    with open(seg.log_path, "r+b") as f:
        f.seek(8)
        f.write(b"\x7f\xff\xff\xff")  # absurd batch length
    for _ in range(3):
        env.cleaner.clean_once()
    assert env.cleaner.manager.is_uncleanable(TopicPartition("bad", 0))
    assert len(read_all(good)) == 7  # 5 dups -> 1, 5 uniques, tail
    counts = env.cleaner.uncleanable_metrics()
    assert sum(n for n, _ in counts.values()) == 1


def test_cleaner_threads_clean_in_the_background(env: Env) -> None:
    log = dup_log(env, "bg", 30)
    env.cleaner.startup()
    try:
        for _ in range(3000):
            if len(read_all(log)) == 3:
                break
            threading.Event().wait(0.01)
        assert [r.offset for r in read_all(log)] == [29, 30, 31]
    finally:
        env.cleaner.shutdown()
    assert not any(t.is_alive() for t in env.cleaner.threads)


def test_shutdown_interrupts_a_pass(env: Env) -> None:
    from tidelog.protocol.records import Record, build_batch

    log = env.log("big")
    ts = env.clock.milliseconds()
    for start in range(0, 40_000, 100):
        batch = build_batch([Record(i, ts, f"k{(start + i) % 5000}".encode(), b"v" * 100) for i in range(100)], 0)
        log.append_as_leader(batch)
    log.roll()
    produce(log, "tail", "t")
    tp = TopicPartition("big", 0)
    env.cleaner.startup()
    try:
        for _ in range(5000):
            if env.cleaner.manager.cleaning_state(tp) is not None:
                break
            threading.Event().wait(0.002)
    finally:
        env.cleaner.shutdown()  # returns once the thread noticed (abort check before every chunk)
    assert env.cleaner.threads == []
    assert not list(log.dir.glob("*.cleaned"))
    summaries = env.cleaner.summaries
    checkpoints = env.cleaner.manager.all_cleaner_checkpoints()
    # either the pass was interrupted (no checkpoint) or it had already finished completely
    assert (tp in checkpoints) == bool(summaries)
    assert env.cleaner.manager.cleaning_state(tp) is None or env.cleaner.manager.cleaning_state(tp)[0] == PAUSED


def test_invalid_checkpoint_is_reset_to_log_start(env: Env) -> None:
    from tidelog.storage.checkpoints import OffsetCheckpointFile

    log = dup_log(env, "reset", 5)
    checkpoint = OffsetCheckpointFile(env.path / "cleaner-offset-checkpoint")
    checkpoint.write({TopicPartition("reset", 0): 10_000})  # beyond the log end
    env.cleaner.manager.grab_filthiest_compacted_log()
    assert checkpoint.read()[TopicPartition("reset", 0)] in (log.log_start_offset, 0)
    env.cleaner.manager.done_cleaning(TopicPartition("reset", 0), env.path, 0)
    assert env.cleaner.clean_once()
    assert [r.offset for r in read_all(log)] == [4, 5, 6]
