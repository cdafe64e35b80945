"""Fetch reads are zero-copy views of a segment's mmap (storage/log_segment.py read_view): the bytes a view
shows stay right while the segment grows, rolls, is deleted by retention, or is preallocated."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cleaner"))

from cleaner_env import Env, produce  # noqa: E402

from tidelog.clock import ManualClock  # noqa: E402
from tidelog.config.log_config import LogConfig  # noqa: E402
from tidelog.protocol.record_batch import iter_batches  # noqa: E402
from tidelog.protocol.records import iter_records  # noqa: E402
from tidelog.storage import log_segment  # noqa: E402
from tidelog.storage.retention import delete_old_segments  # noqa: E402

DELETE = LogConfig(retention_ms=10_000, segment_bytes=1024 * 1024, file_delete_delay_ms=1000)
UNBOUNDED = 2**62


@pytest.fixture
def env(tmp_path: Path) -> Env:
    e = Env(tmp_path / "data", ManualClock())
    yield e
    e.close()


def values(data: memoryview | bytes) -> list[bytes]:
    out = []
    for pos, header in iter_batches(data):
        out.extend(r.value for r in iter_records(memoryview(data)[pos : pos + header.size]))
    return out


def read(log, offset: int) -> memoryview | bytes:  # noqa: ANN001
    return log.read(offset, 1 << 20, UNBOUNDED, True)


def test_read_is_a_view_of_the_segment_mapping_and_survives_growth(env: Env) -> None:
    log = env.log(config=DELETE)
    produce(log, "a", "v0")
    first = read(log, 0)
    assert isinstance(first, memoryview)  # no copy: a slice of the mapping
    snapshot = bytes(first)
    segment = log.segments.floor_segment(0)
    assert len(segment._map) == segment.size  # mapped up to the appended data only
    for i in range(1, 20):
        produce(log, "a", f"v{i}")
    grown = read(log, 0)  # past the old mapping's end: a new, longer mapping
    assert values(grown) == [f"v{i}".encode() for i in range(20)]
    assert len(segment._map) == segment.size
    assert bytes(first) == snapshot  # the old view still reads the old mapping
    assert values(read(log, 19)) == [b"v19"]


def test_read_after_roll_and_while_retention_deletes_the_segment(env: Env) -> None:
    log = env.log(config=DELETE)
    for i in range(5):
        produce(log, f"k{i}", f"old{i}")
    view = read(log, 0)  # a "response" still holding a view of segment 0
    log.roll()
    env.clock.advance(20_000)
    for i in range(3):
        produce(log, f"k{i}", f"new{i}")
    assert values(read(log, 5)) == [b"new0", b"new1", b"new2"]
    assert delete_old_segments(log, env.clock.milliseconds()) == 1
    assert log.log_start_offset == 5
    env.clock.advance(1000)
    env.manager.run_scheduled_deletions()
    assert not any(p.name.startswith("00000000000000000000.log") for p in log.dir.iterdir())
    # the unlinked inode lives on behind the mapping: the view reads the right bytes, no SIGBUS
    assert values(view) == [f"old{i}".encode() for i in range(5)]
    assert values(read(log, 5)) == [b"new0", b"new1", b"new2"]


def test_preallocated_segment_maps_only_its_data(env: Env) -> None:
    log = env.log(config=LogConfig(segment_bytes=1024 * 1024, preallocate=True))
    produce(log, "a", "1")
    segment = log.segments.floor_segment(0)
    assert os.fstat(segment._fd).st_size == 1024 * 1024  # the file is longer than its data
    view = read(log, 0)
    assert len(view) == segment.size < 1024 * 1024
    assert len(segment._map) == segment.size
    produce(log, "b", "2")
    assert values(read(log, 0)) == [b"1", b"2"]
    log.roll()  # trims the file to its data; the mapping never covered more
    assert values(view) == [b"1"]
    assert values(read(log, 0)) == [b"1", b"2"]


def test_pread_fallback_returns_the_same_bytes(env: Env) -> None:
    log = env.log(config=DELETE)
    for i in range(4):
        produce(log, "k", f"v{i}")
    mapped = bytes(read(log, 1))
    env.manager.set_fetch_use_mmap(False)
    copied = read(log, 1)
    assert isinstance(copied, bytes)
    assert copied == mapped


def test_cached_mappings_are_bounded(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_segment, "MAX_MAPPED_SEGMENTS", 2)
    log = env.log(config=DELETE)
    for i in range(4):
        produce(log, "k", f"v{i}")
        log.roll()
    views = [read(log, i) for i in range(4)]
    mapped = [s for s in log.segments if s._map is not None]
    assert [s.base_offset for s in mapped] == [2, 3]  # the least recently read lost their mapping
    assert [values(v) for v in views] == [[f"v{i}".encode()] for i in range(4)]  # views stay valid
    assert values(read(log, 0)) == [b"v0"]  # remapped on demand
