"""Log appends, layout, index entry rules, rolls and reads on real files (docs/STORAGE.md)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from storage_testlib import TS, batch_offsets, client_batch, open_log, segment_files

from tidelog.clock import ManualClock
from tidelog.config.log_config import LogConfig
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.record_batch import iter_batches, read_header
from tidelog.storage.log_segment import RollParams


def test_first_append_layout_and_offsets(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock)
    info = lg.append_as_leader(client_batch(3))
    assert (info.first_offset, info.last_offset, info.log_append_time, info.duplicate) == (0, 2, -1, False)
    info2 = lg.append_as_leader(client_batch(2))
    assert (info2.first_offset, info2.last_offset) == (3, 4)
    assert lg.log_end_offset == lg.high_watermark == lg.last_stable_offset == 5
    part = tmp_path / "orders-0"
    assert segment_files(part) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "00000000000000000000.snapshot",
    ] or segment_files(part) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
    ]
    assert not (part / "00000000000000000000.txnindex").exists()
    # Indexes are preallocated to segment.index.bytes (rounded down to whole entries).
    assert (part / "00000000000000000000.index").stat().st_size == 10485760
    assert (part / "00000000000000000000.timeindex").stat().st_size == 10485760 // 12 * 12
    data = (part / "00000000000000000000.log").read_bytes()
    assert batch_offsets(data) == [(0, 2), (3, 4)]
    assert read_header(data).partition_leader_epoch == 0
    assert (part / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"


def test_index_entry_rule(tmp_path: Path, clock: ManualClock) -> None:
    """An entry (last offset of the append, its position) once more than index.interval.bytes were
    written since the last entry; the first batch never gets one."""
    config = LogConfig(index_interval_bytes=150)
    lg = open_log(tmp_path, clock, config)
    sizes = []
    for i in range(8):
        batch = client_batch(2, ts=TS + i * 10, ts_step=1)
        sizes.append(len(batch))
        lg.append_as_leader(batch)
    positions = [sum(sizes[:i]) for i in range(8)]
    expected = []
    since = 0
    for i in range(8):
        if since > 150:
            expected.append((2 * i + 1, positions[i]))
            since = 0
        since += sizes[i]
    seg = lg.active_segment
    got = [seg.offset_index.entry(n) for n in range(seg.offset_index.entries)]
    assert got == expected and expected
    # Time-index entries go with them: (largest timestamp so far, last offset of the batch holding it).
    times = [seg.time_index.entry(n) for n in range(seg.time_index.entries)]
    assert times == [(TS + (off // 2) * 10 + 1, off) for off, _ in expected]
    lg.close()
    idx = (tmp_path / "orders-0" / "00000000000000000000.index").read_bytes()
    assert idx == b"".join(struct.pack(">ii", off, pos) for off, pos in expected)
    tidx = (tmp_path / "orders-0" / "00000000000000000000.timeindex").read_bytes()
    # Clean close trims to the used size and adds the final entry (largest timestamp, its batch's last offset).
    final = (TS + 7 * 10 + 1, 15)
    assert tidx == b"".join(struct.pack(">qi", ts, off) for ts, off in times + [final])


def test_roll_on_segment_bytes(tmp_path: Path, clock: ManualClock) -> None:
    batch = client_batch(1)
    config = LogConfig(segment_bytes=len(batch) * 3)
    lg = open_log(tmp_path, clock, config)
    for _ in range(7):
        lg.append_as_leader(client_batch(1))
    assert [s.base_offset for s in lg.segments] == [0, 3, 6]
    part = tmp_path / "orders-0"
    names = segment_files(part)
    for base in ("00000000000000000000", "00000000000000000003", "00000000000000000006"):
        assert f"{base}.log" in names
    # Rolled segments' indexes are trimmed; the active one stays preallocated.
    assert (part / "00000000000000000000.index").stat().st_size == 0
    assert (part / "00000000000000000000.timeindex").stat().st_size == 12  # final entry
    assert (part / "00000000000000000006.index").stat().st_size == 10485760
    # equal timestamps: the first batch holding the largest one keeps it
    assert (part / "00000000000000000000.timeindex").read_bytes() == struct.pack(">qi", TS, 0)
    # Producer snapshots are written at each roll, named by the new base offset.
    assert "00000000000000000003.snapshot" in names and "00000000000000000006.snapshot" in names
    # The old segment was flushed: recovery point moved to the new base.
    assert lg.recovery_point == 6


def test_roll_on_segment_ms_uses_record_time(tmp_path: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_ms=1000)
    lg = open_log(tmp_path, clock, config)
    lg.append_as_leader(client_batch(1, ts=TS))
    lg.append_as_leader(client_batch(1, ts=TS + 1000))  # waited exactly segment.ms: no roll
    assert len(lg.segments) == 1
    lg.append_as_leader(client_batch(1, ts=TS + 1001))
    assert [s.base_offset for s in lg.segments] == [0, 2]


def test_roll_on_segment_ms_wall_clock_without_timestamps(tmp_path: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_ms=1000)
    lg = open_log(tmp_path, clock, config)
    lg.append_as_leader(client_batch(1, ts=-1))
    clock.advance(1000)
    lg.append_as_leader(client_batch(1, ts=-1))
    assert len(lg.segments) == 1
    clock.advance(1)
    lg.append_as_leader(client_batch(1, ts=-1))
    assert [s.base_offset for s in lg.segments] == [0, 2]


def test_roll_on_segment_ms_with_jitter(tmp_path: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_ms=1000, segment_jitter_ms=500)
    lg = open_log(tmp_path, clock, config)
    lg.roll()  # the rolled-in segment draws its jitter
    jitter = lg.active_segment.roll_jitter_ms
    assert 0 <= jitter < 500
    lg.append_as_leader(client_batch(1, ts=TS))
    lg.append_as_leader(client_batch(1, ts=TS + 1000 - jitter))
    assert len(lg.segments) == 1
    lg.append_as_leader(client_batch(1, ts=TS + 1001 - jitter))
    assert len(lg.segments) == 2


def test_roll_when_time_index_full(tmp_path: Path, clock: ManualClock) -> None:
    # 40 bytes: offset index holds 5 entries, time index 3 (full at 2, one slot kept for the final entry).
    config = LogConfig(segment_index_bytes=40, index_interval_bytes=1)
    lg = open_log(tmp_path, clock, config)
    for i in range(4):
        lg.append_as_leader(client_batch(1, ts=TS + i))
    assert [s.base_offset for s in lg.segments] == [0, 3]


def test_roll_when_offset_index_full(tmp_path: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_index_bytes=40, index_interval_bytes=1)
    lg = open_log(tmp_path, clock, config)
    for _ in range(7):
        lg.append_as_leader(client_batch(1, ts=TS))  # same timestamp: one time-index entry only
    assert [s.base_offset for s in lg.segments] == [0, 6]
    first = lg.segments.first_segment
    assert first is not None and first.offset_index.entries == 5


def test_roll_on_relative_offset_overflow(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock)
    seg = lg.active_segment
    params = dict(max_segment_ms=10**12, max_segment_bytes=10**9, max_timestamp_in_messages=TS,
                  messages_size=100, now=clock.milliseconds())
    assert not seg.should_roll(RollParams(max_offset_in_messages=2**31 - 1, **params))
    assert seg.should_roll(RollParams(max_offset_in_messages=2**31, **params))
    with pytest.raises(ValueError):
        seg.append(2**31, TS, 2**31, client_batch(1))


def test_read_returns_whole_batch_containing_offset(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock)
    sizes = [len(client_batch(5)) for _ in range(3)]
    for _ in range(3):
        lg.append_as_leader(client_batch(5))
    data = lg.read(7, 10**6, lg.high_watermark, False)
    assert batch_offsets(data) == [(5, 9), (10, 14)]
    # max_bytes cuts the slice (partial trailing batch is the client's to discard)
    assert len(lg.read(7, sizes[0] + 10, lg.high_watermark, False)) == sizes[0] + 10
    # min_one_batch returns the first batch whole even when larger than max_bytes
    assert batch_offsets(lg.read(7, 10, lg.high_watermark, True)) == [(5, 9)]
    assert lg.read(7, 10, lg.high_watermark, False) == (lg.read(7, 10**6, lg.high_watermark, False))[:10]
    assert lg.read(7, 0, lg.high_watermark, False) == b""
    # the upper bound stops at the batch starting there
    assert batch_offsets(lg.read(0, 10**6, 10, False)) == [(0, 4), (5, 9)]
    assert lg.read(10, 10**6, 10, False) == b""
    assert lg.read(15, 10**6, 15, True) == b""  # at LEO: empty, no error
    for bad in (16, -1):
        with pytest.raises(KafkaError) as e:
            lg.read(bad, 100, 15, True)
        assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_read_across_segments_and_index(tmp_path: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_bytes=2000, index_interval_bytes=100)
    lg = open_log(tmp_path, clock, config)
    for i in range(60):
        lg.append_as_leader(client_batch(2, value=b"x" * (i % 7)))
    assert len(lg.segments) > 2
    for offset in range(0, 120, 7):
        data = lg.read(offset, 1, lg.high_watermark, True)
        (base, last), = batch_offsets(data)
        assert base <= offset <= last
    # A read never crosses a segment boundary: it ends with the segment.
    second = lg.segments.values()[1]
    data = lg.read(second.base_offset - 1, 10**6, lg.high_watermark, False)
    assert batch_offsets(data)[-1][1] == second.base_offset - 1


def test_read_skips_compaction_gap_into_next_segment(tmp_path: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_bytes=len(client_batch(1)) * 5)
    lg = open_log(tmp_path, clock, config)
    for _ in range(12):
        lg.append_as_leader(client_batch(1))
    first = lg.segments.first_segment
    assert first is not None and first.base_offset == 0
    # Cleaner-style output for segment 0 keeping only the batch at offset 1.
    pos_sizes = [(p, h.size, h) for p, h in first.batches()]
    pos, size, h = pos_sizes[1]
    cleaned = lg.new_cleaned_segment(0)
    cleaned.append(h.last_offset, h.max_timestamp, h.last_offset, first.read_bytes(pos, size))
    cleaned.on_became_inactive_segment()
    cleaned.flush()
    lg.replace_segments([cleaned], [first])
    assert batch_offsets(lg.read(0, 10**6, lg.high_watermark, False))[0] == (1, 1)
    # Offset 3 was compacted away: the read continues into the next segment.
    assert batch_offsets(lg.read(3, 10**6, lg.high_watermark, False))[0] == (5, 5)
    assert lg.read(3, 10**6, 5, False) == b""  # ... but not past the upper bound


def test_log_append_time(tmp_path: Path, clock: ManualClock) -> None:
    config = LogConfig(message_timestamp_type="LogAppendTime")
    lg = open_log(tmp_path, clock, config)
    info = lg.append_as_leader(client_batch(2))
    assert info.log_append_time == clock.milliseconds()
    (pos, h), = list(iter_batches(lg.read(0, 10**6, 2, False)))
    assert h.is_log_append_time and h.max_timestamp == clock.milliseconds()


def test_timestamp_lookup(tmp_path: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_bytes=len(client_batch(3, ts_step=100)) * 2, index_interval_bytes=1)
    lg = open_log(tmp_path, clock, config)
    for i in range(6):
        lg.append_as_leader(client_batch(3, ts=TS + i * 1000, ts_step=100))  # records at +0, +100, +200
    assert len(lg.segments) == 3
    assert lg.fetch_offset_for_timestamp(TS) == (TS, 0, 0)
    assert lg.fetch_offset_for_timestamp(TS + 150) == (TS + 200, 2, 0)
    assert lg.fetch_offset_for_timestamp(TS + 201) == (TS + 1000, 3, 0)
    assert lg.fetch_offset_for_timestamp(TS + 4050) == (TS + 4100, 13, 0)
    assert lg.fetch_offset_for_timestamp(TS + 5200) == (TS + 5200, 17, 0)
    assert lg.fetch_offset_for_timestamp(TS + 5201) is None
    assert lg.fetch_offset_for_timestamp(-1) == (-1, 18, 0)
    assert lg.fetch_offset_for_timestamp(-2) == (-1, 0, 0)
    assert lg.fetch_offset_for_timestamp(-3) == (TS + 5200, 17, 0)
    assert lg.max_timestamp_offset() == (TS + 5200, 17, 0)
    assert lg.fetch_offset_for_timestamp(-5) is None


def test_max_timestamp_is_first_record_holding_it(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock)
    lg.append_as_leader(client_batch(3, ts=TS, ts_step=10))
    from tidelog.protocol.records import Record, build_batch

    # out-of-order timestamps: the max (TS+500) is at offset delta 1 of the second batch
    lg.append_as_leader(build_batch([Record(0, TS + 5, b"k", b"v"), Record(1, TS + 500, b"k", b"v"),
                                     Record(2, TS + 7, b"k", b"v")], 0))
    lg.append_as_leader(client_batch(1, ts=TS + 20))
    assert lg.fetch_offset_for_timestamp(-3) == (TS + 500, 4, 0)
    assert lg.fetch_offset_for_timestamp(TS + 21) == (TS + 500, 4, 0)


def test_end_offset_for_epoch_and_epoch_entries(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock)
    lg.append_as_leader(client_batch(2), leader_epoch=0)
    lg.append_as_leader(client_batch(2), leader_epoch=3)
    lg.append_as_leader(client_batch(2), leader_epoch=3)
    assert (lg.dir / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 2\n"
    assert lg.end_offset_for_epoch(0) == (0, 2)
    assert lg.end_offset_for_epoch(2) == (0, 2)
    assert lg.end_offset_for_epoch(3) == (3, 6)
    assert lg.end_offset_for_epoch(4) == (-1, -1)


def test_flush_policy(tmp_path: Path, clock: ManualClock) -> None:
    lazy = open_log(tmp_path / "a", clock)
    lazy.append_as_leader(client_batch(1))
    assert lazy.recovery_point == 0  # page cache, like Kafka's defaults
    eager = open_log(tmp_path / "b", clock, LogConfig(flush_messages=2))
    eager.append_as_leader(client_batch(1))
    assert eager.recovery_point == 0
    eager.append_as_leader(client_batch(1))
    assert eager.recovery_point == 2
    timed = open_log(tmp_path / "c", clock, LogConfig(flush_ms=1000))
    timed.append_as_leader(client_batch(1))
    assert timed.recovery_point == 0
    clock.advance(1000)
    timed.flush_if_due()
    assert timed.recovery_point == 1
    synced = open_log(tmp_path / "d", clock, flush_on_append=True)
    synced.append_as_leader(client_batch(1))
    assert os.path.getsize(synced.dir / "00000000000000000000.log") == len(client_batch(1))


def test_append_listener_called(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock)
    seen: list[int] = []
    lg.add_append_listener(lambda log_: seen.append(log_.log_end_offset))
    lg.append_as_leader(client_batch(2))
    assert seen == [2]


def test_validation_error_consumes_no_offset(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock)
    bad = client_batch(2)
    bad[30] ^= 0xFF  # breaks the CRC
    with pytest.raises(KafkaError) as e:
        lg.append_as_leader(bad)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE
    assert lg.log_end_offset == 0 and lg.active_segment.size == 0
    assert lg.append_as_leader(client_batch(1)).first_offset == 0


def test_preallocate_log_trimmed_on_roll_and_recovered(tmp_path: Path, clock: ManualClock) -> None:
    size = len(client_batch(1))
    config = LogConfig(preallocate=True, segment_bytes=size * 3)
    lg = open_log(tmp_path, clock, config)
    first = lg.active_segment.log_path
    assert first.stat().st_size == size * 3  # full length up front
    lg.append_as_leader(client_batch(1))
    assert batch_offsets(lg.read(0, 10**6, 1, False)) == [(0, 0)]  # the zero fill is never read
    for _ in range(3):
        lg.append_as_leader(client_batch(1))
    assert first.stat().st_size == size * 3 and len(lg.segments) == 2
    active = lg.active_segment.log_path
    assert active.stat().st_size == size * 3
    lg.close_handlers()  # crash: the active file still carries its zero fill
    again = open_log(tmp_path, clock, config, had_clean_shutdown=False)
    assert again.log_end_offset == 4 and active.stat().st_size == size
