"""The cleaner's segment swap and its crash recovery at every step (docs/STORAGE.md)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from storage_testlib import TOPIC_ID, TP, client_batch

from tidelog.clock import ManualClock
from tidelog.config.log_config import LogConfig
from tidelog.protocol.record_batch import iter_batches
from tidelog.storage.log import Log
from tidelog.storage.log_manager import LogManager
from tidelog.storage.log_segment import LogSegment

CONFIG = LogConfig(segment_bytes=len(client_batch(1)) * 5)
KEEP = (1, 3, 7)  # offsets the "cleaner" keeps from segments 0 and 5
ORIGINAL = list(range(12))
CLEANED = [1, 3, 7, 10, 11]


def _manager(root: Path, clock: ManualClock) -> LogManager:
    m = LogManager([str(root / "data")], CONFIG, clock)
    m.startup()
    return m


def _offsets(lg: Log) -> list[int]:
    out = []
    for segment in lg.segments:
        out += [h.base_offset for _, h in segment.batches()]
    return out


def _build(root: Path, clock: ManualClock) -> Path:
    """A log with segments 0 (0-4), 5 (5-9), 10 (10-11) and cleaner output for base 0 left as `.cleaned`."""
    m = _manager(root, clock)
    lg = m.get_or_create_log(TP, CONFIG, TOPIC_ID)
    for _ in range(12):
        lg.append_as_leader(client_batch(1))
    assert [s.base_offset for s in lg.segments] == [0, 5, 10]
    kept = []
    for segment in list(lg.segments)[:2]:
        for pos, h in segment.batches():
            if h.base_offset in KEEP:
                kept.append((h, segment.read_bytes(pos, h.size)))
    m.shutdown()
    part = root / "data" / "orders-0"
    cleaned = LogSegment.open(part, 0, CONFIG, clock, file_suffix=".cleaned")
    for h, data in kept:
        cleaned.append(h.last_offset, h.max_timestamp, h.last_offset, data)
    cleaned.on_became_inactive_segment()
    cleaned.flush()
    cleaned.close()
    return part


def _rename(part: Path, pattern: str, old: str, new: str) -> None:
    for path in part.glob(pattern):
        os.replace(path, path.with_name(path.name[: len(path.name) - len(old)] + new))


def step0(part: Path) -> None:
    """Crash after writing .cleaned: nothing else touched."""


def step1_partial(part: Path) -> None:
    _rename(part, "00000000000000000000.log.cleaned", ".cleaned", ".swap")


def step1_done(part: Path) -> None:
    _rename(part, "*.cleaned", ".cleaned", ".swap")


def step2_partial(part: Path) -> None:
    step1_done(part)
    for name in os.listdir(part):
        if name.startswith("00000000000000000000.") and not name.endswith((".swap", ".snapshot")):
            os.replace(part / name, part / (name + ".deleted"))


def step2_done(part: Path) -> None:
    step2_partial(part)
    for name in os.listdir(part):
        if name.startswith("00000000000000000005.") and not name.endswith(".deleted"):
            os.replace(part / name, part / (name + ".deleted"))


def step3_partial(part: Path) -> None:
    step2_done(part)
    _rename(part, "00000000000000000000.log.swap", ".swap", "")


@pytest.mark.parametrize(
    ("crash_state", "expected"),
    [
        (step0, ORIGINAL),
        (step1_partial, ORIGINAL),
        (step1_done, CLEANED),
        (step2_partial, CLEANED),
        (step2_done, CLEANED),
        (step3_partial, CLEANED),
    ],
)
def test_swap_crash_recovery(
    tmp_path: Path, clock: ManualClock, crash_state: Callable[[Path], None], expected: list[int]
) -> None:
    part = _build(tmp_path, clock)
    crash_state(part)
    m = _manager(tmp_path, clock)
    lg = m.get_log(TP)
    assert lg is not None
    assert _offsets(lg) == expected
    assert lg.log_end_offset == 12
    names = os.listdir(part)
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]
    if expected == CLEANED:
        assert [s.base_offset for s in lg.segments] == [0, 10]
        assert not [n for n in names if n.startswith("00000000000000000005.")]
    else:
        assert [s.base_offset for s in lg.segments] == [0, 5, 10]
    # Reads work over the result, including fetches landing in removed offsets.
    first = list(iter_batches(lg.read(2, 10**6, 12, False)))
    assert first[0][1].base_offset == (3 if expected == CLEANED else 2)
    m.shutdown()


def test_replace_segments_live(tmp_path: Path, clock: ManualClock) -> None:
    m = _manager(tmp_path, clock)
    lg = m.get_or_create_log(TP, CONFIG, TOPIC_ID)
    for _ in range(12):
        lg.append_as_leader(client_batch(1))
    old = list(lg.segments)[:2]
    cleaned = lg.new_cleaned_segment(0)
    for segment in old:
        for pos, h in segment.batches():
            if h.base_offset in KEEP:
                cleaned.append(h.last_offset, h.max_timestamp, h.last_offset, segment.read_bytes(pos, h.size))
    cleaned.on_became_inactive_segment()
    cleaned.flush()
    part = lg.dir
    assert (part / "00000000000000000000.log.cleaned").exists()
    assert (part / "00000000000000000005.snapshot").exists()
    lg.replace_segments([cleaned], old)
    assert [s.base_offset for s in lg.segments] == [0, 10]
    assert _offsets(lg) == CLEANED
    names = set(os.listdir(part))
    assert {"00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex"} <= names
    assert {"00000000000000000000.log.deleted", "00000000000000000005.log.deleted",
            "00000000000000000005.snapshot.deleted"} <= names
    assert not [n for n in names if n.endswith((".cleaned", ".swap"))]
    clock.advance(CONFIG.file_delete_delay_ms)
    m.run_scheduled_deletions()
    assert not [n for n in os.listdir(part) if n.endswith(".deleted")]
    m.shutdown()
    m2 = _manager(tmp_path, clock)
    lg2 = m2.get_log(TP)
    assert lg2 is not None and _offsets(lg2) == CLEANED and lg2.log_end_offset == 12
    m2.shutdown()
