"""Property test: for any sequence of appends, reads find the batch holding each offset, indexes are valid,
and a crash-restart (full recovery) rebuilds byte-identical indexes and the same log."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_testlib import TS, batch_offsets, client_batch, open_log

from tidelog.clock import ManualClock
from tidelog.config.log_config import LogConfig

appends = st.lists(
    st.tuples(st.integers(1, 5), st.integers(0, 150), st.integers(-50, 500)),  # records, value size, ts step
    min_size=1,
    max_size=40,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(appends, st.integers(64, 600), st.integers(1200, 4000))
def test_reads_indexes_and_recovery(plan: list[tuple[int, int, int]], interval: int, segment_bytes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        clock = ManualClock()
        config = LogConfig(index_interval_bytes=interval, segment_bytes=segment_bytes)
        lg = open_log(root, clock, config)
        ranges = []
        ts = TS
        for n, size, step in plan:
            ts += step
            info = lg.append_as_leader(client_batch(n, ts=ts, value=b"x" * size))
            ranges.append((info.first_offset, info.last_offset))
        leo = lg.log_end_offset
        for first, last in ranges:
            for offset in (first, last):
                assert batch_offsets(lg.read(offset, 1, leo, True)) == [(first, last)]
        for segment in lg.segments:
            positions = {p: h for p, h in segment.batches()}
            for n in range(segment.offset_index.entries):
                off, pos = segment.offset_index.entry(n)
                assert positions[pos].last_offset == off
                assert all(h.last_offset < off for p, h in positions.items() if p < pos)
        before = {s.base_offset: _indexes(s) for s in lg.segments}
        active_base = lg.active_segment.base_offset
        final = (lg.active_segment.max_timestamp_so_far, lg.active_segment.offset_of_max_timestamp_so_far)
        lg.close_handlers()  # crash
        again = open_log(root, clock, config, had_clean_shutdown=False)
        assert again.log_end_offset == leo
        assert [s.base_offset for s in again.segments] == sorted(before)
        for segment in again.segments:
            offsets, times = before[segment.base_offset]
            if segment.base_offset == active_base and final[0] >= 0 and (not times or final[0] > times[-1][0]):
                times = times + [final]  # recovery writes the final entry a roll or close would have
            assert _indexes(segment) == (offsets, times)
        for first, last in ranges:
            assert batch_offsets(again.read(first, 1, leo, True)) == [(first, last)]
        again.close()


def _indexes(segment) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:  # noqa: ANN001
    offsets = [segment.offset_index.entry(n) for n in range(segment.offset_index.entries)]
    times = [segment.time_index.entry(n) for n in range(segment.time_index.entries)]
    return offsets, times
