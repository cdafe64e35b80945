"""Details of the cleaning pass: grouping, buffer growth, mtimes, the checkpoint file's bytes (Kafka's LogCleaner.reconfigure)."""

from __future__ import annotations

import os
from pathlib import Path

from cleaner_env import COMPACT, Env, batch_headers, produce, produce_many, read_all
from cleaner_impls import cleaner_impl  # noqa: F401 - autouse: the C cleaner core and the Python cleaner

from tidelog.cleaner.cleaner import group_segments_by_size
from tidelog.cleaner.log_cleaner import CleanerConfig, LogCleaner


def test_groups_respect_segment_bytes(env: Env) -> None:
    log = env.log()
    for i in range(6):
        produce(log, f"k{i}", "x" * 200)
        log.roll()
    segments = log.segments.values()[:-1]
    size = segments[0].size
    groups = group_segments_by_size(segments, 2 * size, 10 * 1024 * 1024, log.log_end_offset)
    assert [len(g) for g in groups] == [2, 2, 2]
    groups = group_segments_by_size(segments, 10 * size, 10 * 1024 * 1024, log.log_end_offset)
    assert [len(g) for g in groups] == [6]
    # each group becomes one segment with the group's first base offset
    log.update_config(COMPACT.with_values(segment_bytes=3 * size))
    assert env.cleaner.clean_once()
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert [r.offset for r in read_all(log)] == list(range(6))


def test_checkpoint_file_bytes(env: Env) -> None:
    log = env.log("users-compacted")
    produce(log, "a", "1")
    produce(log, "a", "2")
    log.roll()
    assert env.cleaner.clean_once()
    assert (env.path / "cleaner-offset-checkpoint").read_text() == "0\n1\nusers-compacted 0 2\n"


def test_cleaned_segment_keeps_last_source_mtime(env: Env) -> None:
    log = env.log()
    produce(log, "a", "1")
    log.roll()
    produce(log, "a", "2")
    log.roll()
    produce(log, "z", "z")
    last_source = log.segments.values()[1]
    old = 1_600_000_000_000
    os.utime(last_source.log_path, ns=(old * 1_000_000, old * 1_000_000))
    assert env.cleaner.clean_once()
    cleaned = log.segments.first_segment
    assert os.stat(cleaned.log_path).st_mtime_ns // 1_000_000 == old
    assert os.stat(cleaned.offset_index.path).st_mtime_ns // 1_000_000 == old


def test_batches_larger_than_the_io_buffer(tmp_path: Path, clock) -> None:  # noqa: ANN001
    env = Env(tmp_path / "data", clock)
    try:
        env.cleaner = LogCleaner(CleanerConfig(io_buffer_size=256, dedupe_buffer_size=1024 * 1024),
                                 [str(env.path)], env.manager.all_logs, clock)
        log = env.log()
        produce_many(log, [(f"k{i}".encode(), b"v" * 500) for i in range(10)])  # one ~5 KB batch
        produce_many(log, [(b"k0", b"new")])
        log.roll()
        produce(log, "z", "z")
        assert env.cleaner.clean_once()  # the 128-byte read buffer grows to hold the batch
        values = {r.key: r.value for r in read_all(log)}
        assert values[b"k0"] == b"new" and len(values) == 11
        assert [h.records_count for h in batch_headers(log)] == [9, 1, 1]
    finally:
        env.close()
