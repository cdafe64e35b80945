"""The worked examples of docs/STORAGE.md and the issue's examples, on real logs."""

from __future__ import annotations

from pathlib import Path

from cleaner_env import COMPACT, Env, batch_headers, produce, read_all
from cleaner_impls import cleaner_impl  # noqa: F401 - autouse: the C cleaner core and the Python cleaner

from tidelog.protocol.records import GZIP, LZ4, SNAPPY, ZSTD, iter_records
from tidelog.storage import TopicPartition
from tidelog.storage.checkpoints import OffsetCheckpointFile


def latest(records) -> dict[bytes, tuple[int, bytes | None]]:  # noqa: ANN001
    return {r.key: (r.offset, r.value) for r in records}


def checkpoint(env: Env) -> dict[TopicPartition, int]:
    return OffsetCheckpointFile(Path(env.path) / "cleaner-offset-checkpoint").read()


def test_keys_a_b_a_c_b_a_c_keep_latest_offsets(env: Env) -> None:
    log = env.log()
    for key in "ABACBAC":
        produce(log, key, key.lower())
    log.roll()
    assert env.cleaner.clean_once()
    got = [(r.offset, r.key) for r in read_all(log)]
    assert got == [(4, b"B"), (5, b"A"), (6, b"C")]
    assert log.log_end_offset == 7  # not renumbered, nothing lost at the end
    assert checkpoint(env) == {TopicPartition("t", 0): 7}


def test_user_addresses_compact_to_offsets_3_4_6(env: Env) -> None:
    log = env.log("users")
    addresses = [("1001", "1 Main St"), ("1002", "2 Oak Ave"), ("1003", "3 Pine Rd"), ("1001", "10 Elm St"),
                 ("1002", "20 Birch Ln"), ("1003", "30 Cedar Ct"), ("1003", "31 Cedar Ct")]
    for user, address in addresses:
        produce(log, user, address)
    log.roll()
    assert env.cleaner.clean_once()
    got = [(r.offset, r.key, r.value) for r in read_all(log)]
    assert got == [(3, b"1001", b"10 Elm St"), (4, b"1002", b"20 Birch Ln"), (6, b"1003", b"31 Cedar Ct")]


def test_example_a_tombstone_removed_across_two_passes(env: Env) -> None:
    log = env.log()
    for key, value in [("K1", "a"), ("K2", "b"), ("K1", "c"), ("K3", "d")]:
        produce(log, key, value)
    log.roll()
    for key, value in [("K2", None), ("K4", "e"), ("K1", "f")]:
        produce(log, key, value)
    log.roll()
    produce(log, "K5", "g")
    t1 = env.clock.milliseconds()
    assert env.cleaner.clean_once()
    assert [(r.offset, r.key, r.value) for r in read_all(log)][:4] == [
        (3, b"K3", b"d"), (4, b"K2", None), (5, b"K4", b"e"), (6, b"K1", b"f")]
    tomb = next(h for h in batch_headers(log) if h.base_offset == 4)
    assert tomb.has_delete_horizon and tomb.delete_horizon_ms == t1 + 1000
    assert checkpoint(env)[TopicPartition("t", 0)] == 7
    # new appends, then a roll so segment 10 is active
    produce(log, "K1", "h")
    produce(log, "K6", "i")
    log.roll()
    produce(log, "K7", "j")
    env.clock.advance(1000)
    assert env.cleaner.clean_once()
    assert [r.offset for r in read_all(log)] == [3, 5, 7, 8, 9, 10]
    assert checkpoint(env)[TopicPartition("t", 0)] == 10


def test_tombstone_kept_before_horizon(env: Env) -> None:
    log = env.log()
    produce(log, "K", "v")
    produce(log, "K", None)
    produce(log, "X", "x")
    log.roll()
    produce(log, "Y", "y")
    assert env.cleaner.clean_once()
    log.roll()
    produce(log, "Z", "z")
    log.roll()
    produce(log, "W", "w")
    env.clock.advance(999)  # horizon not reached
    assert env.cleaner.clean_once()
    assert (1, b"K", None) in [(r.offset, r.key, r.value) for r in read_all(log)]


def test_example_b_map_fills(tmp_path: Path, clock) -> None:  # noqa: ANN001
    env = Env(tmp_path / "data", clock, memory=96)  # 4 slots x 0.9 -> 3 entries
    try:
        log = env.log()
        for i in range(5):
            produce(log, f"k{i}", "v")
        log.roll()
        for i in range(5, 10):
            produce(log, f"k{i}", "v")
        log.roll()
        produce(log, "k10", "v")
        assert env.cleaner.clean_once()
        assert checkpoint(env)[TopicPartition("t", 0)] == 3
        assert [r.offset for r in read_all(log)] == list(range(11))
        assert env.cleaner.clean_once()  # next round starts at 3
        assert checkpoint(env)[TopicPartition("t", 0)] == 6
    finally:
        env.close()


def test_compressed_batches_keep_their_codec(env: Env) -> None:
    from cleaner_env import produce_many

    log = env.log()
    for codec in (GZIP, SNAPPY, LZ4, ZSTD):
        produce_many(log, [(b"a", b"1"), (b"b", b"2"), (b"a", b"3")], compression=codec)
    log.roll()
    produce(log, "z", "z")
    assert env.cleaner.clean_once()
    kept = [h for h in batch_headers(log) if h.records_count > 0]
    # the last batch keeps a and b; earlier batches all superseded; the last one is zstd
    assert [(h.base_offset, h.compression, h.records_count) for h in kept] == [(9, ZSTD, 2), (12, 0, 1)]
    assert kept[0].last_offset == 11  # lastOffsetDelta kept
    assert latest(read_all(log)) == {b"a": (11, b"3"), b"b": (10, b"2"), b"z": (12, b"z")}


def test_null_keys_written_before_compaction_are_dropped(env: Env) -> None:
    from tidelog.config.log_config import LogConfig

    log = env.log(config=LogConfig(min_cleanable_dirty_ratio=0.01))  # delete policy accepts null keys
    produce(log, None, "anon")
    produce(log, "k", "v")
    log.roll()
    produce(log, "x", "x")
    log.update_config(COMPACT)
    assert env.cleaner.clean_once()
    assert [(r.offset, r.key) for r in read_all(log)] == [(1, b"k"), (2, b"x")]
    assert "1 invalid (null-key) records dropped" in env.cleaner.summaries[-1]


def test_offsets_and_record_fields_preserved(env: Env) -> None:
    from cleaner_env import produce_many

    log = env.log()
    produce_many(log, [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    produce(log, "b", "22")
    log.roll()
    produce(log, "z", "z")
    before = {h.base_offset: h for h in batch_headers(log)}
    assert env.cleaner.clean_once()
    after = {h.base_offset: h for h in batch_headers(log)}
    first = after[0]
    assert first.last_offset == before[0].last_offset and first.records_count == 2
    assert first.partition_leader_epoch == before[0].partition_leader_epoch
    seg = log.segments.first_segment
    data = seg.read_bytes(0, first.size)
    assert [(r.offset, r.key) for r in iter_records(data)] == [(0, b"a"), (2, b"c")]
