"""Reads of a segment's `.log` through its own fd (retention, the cleaner, ListOffsets by timestamp, recovery)
against a segment closed by another thread meanwhile: SegmentClosedError, never the bytes of whatever file the
kernel has since given the same fd number."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.storage.storage_testlib import TS, client_batch, open_log
from tidelog.clock import ManualClock
from tidelog.storage.log_segment import LogSegment, SegmentClosedError


def _segment_of_three_big_batches(tmp_path: Path) -> LogSegment:
    log = open_log(tmp_path, ManualClock(TS))
    for i in range(3):  # ~40 KiB each: the third lies beyond the first 64 KiB chunk batches() reads
        log.append_as_leader(client_batch(value=bytes([i]) * 40_000))
    return log.active_segment


def _reuse_fd_number(fd: int, tmp_path: Path) -> int:
    """Another file, opened on exactly `fd` (what the next open() after a close does in a busy process)."""
    other = tmp_path / "other"
    other.write_bytes(b"\xff" * 200_000)
    opened = os.open(other, os.O_RDONLY)
    if opened != fd:  # (the lowest free number: usually `fd` itself)
        os.dup2(opened, fd)
        os.close(opened)
    return fd


def test_a_batch_scan_over_a_segment_closed_meanwhile_stops_with_segment_closed(tmp_path: Path) -> None:
    segment = _segment_of_three_big_batches(tmp_path)
    fd = segment._fd
    scan = segment.batches()
    assert [next(scan)[1].base_offset, next(scan)[1].base_offset] == [0, 1]  # both from the first chunk read
    segment.close()
    reused = _reuse_fd_number(fd, tmp_path)
    try:
        with pytest.raises(SegmentClosedError):
            next(scan)  # the third batch needs a new read: through the closed segment, not the other file
        with pytest.raises(SegmentClosedError):
            segment.read_bytes(0, 100)
    finally:
        os.close(reused)


def test_reads_of_an_open_segment_are_unchanged(tmp_path: Path) -> None:
    segment = _segment_of_three_big_batches(tmp_path)
    headers = [h for _, h in segment.batches()]
    assert [h.base_offset for h in headers] == [0, 1, 2]
    position = headers[0].size + headers[1].size
    data = segment.read_bytes(position, headers[2].size)
    assert len(data) == headers[2].size and b"\x02" * 40_000 in data
    segment.close()
