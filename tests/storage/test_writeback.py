"""Writeback started while the cleaner writes a `.cleaned` segment (storage/writeback.py): LogSegment.start_writeback
queues each MiB appended since its last call, so the fsync before the swap waits only for the tail. The call is
real (sync_file_range on the segment's fd); the spy only records its ranges."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_testlib import client_batch

from tidelog.clock import ManualClock
from tidelog.config.log_config import LogConfig
from tidelog.protocol.record_batch import read_header
from tidelog.storage import writeback
from tidelog.storage.log_segment import LogSegment

BATCH = bytes(client_batch(60, value=b"x" * 1000))  # ~61 KiB


@pytest.fixture
def ranges(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    calls: list[tuple[int, int]] = []
    real = writeback.start

    def recording(fd: int, offset: int, length: int) -> None:
        calls.append((offset, length))
        real(fd, offset, length)

    monkeypatch.setattr(writeback, "start", recording)
    return calls


def append(segment: LogSegment, offset: int) -> int:
    """Append BATCH renumbered from `offset`; the next offset."""
    header = read_header(BATCH, 0)
    batch = bytearray(BATCH)
    batch[0:8] = offset.to_bytes(8, "big")
    last = offset + header.last_offset_delta
    segment.append(last, header.max_timestamp, last, batch)
    return last + 1


def test_writeback_is_queued_a_mib_at_a_time_and_restarts_below_a_truncation(
    tmp_path: Path, ranges: list[tuple[int, int]]
) -> None:
    segment = LogSegment.open(tmp_path, 0, LogConfig(), ManualClock(), file_suffix=".cleaned")
    try:
        offset = 0
        while segment.size < (1 << 20) - len(BATCH):
            offset = append(segment, offset)
            segment.start_writeback()
        assert ranges == []  # under a MiB: nothing queued yet
        while not ranges:
            offset = append(segment, offset)
            segment.start_writeback()
        assert ranges == [(0, segment.size)]
        queued = segment.size
        cut = segment.truncate_to(offset // 2)
        assert cut > 0 and segment.size < queued
        while len(ranges) == 1:
            offset = append(segment, segment.read_next_offset())
            segment.start_writeback()
        start, length = ranges[1]
        assert start < queued  # from the truncated end, not from the bytes that are gone
        assert start + length == segment.size and length >= 1 << 20
        segment.flush()
        expected = Path(segment.log_path).read_bytes()
        assert len(expected) == segment.size  # the hint changed no byte: the file is what was appended
    finally:
        segment.close()


def test_start_ignores_a_closed_descriptor() -> None:
    writeback.start(-1, 0, 1 << 20)  # EBADF: the fsync that follows would report a real failure
