"""Fetch reads copy segment bytes out of the page cache with os.pread (storage/log_segment.py read): the `.log`
files are never mapped (only the indexes are, as in Kafka), and a slice read earlier stays right while the
segment grows, rolls, is deleted by retention, or is preallocated."""

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


def mapped_paths() -> set[str]:
    with open("/proc/self/maps") as maps:
        return {line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6}


def test_read_copies_the_slice_and_never_maps_the_log(env: Env) -> None:
    log = env.log(config=DELETE)
    produce(log, "a", "v0")
    first = read(log, 0)
    assert isinstance(first, bytes)
    for i in range(1, 20):
        produce(log, "a", f"v{i}")
    grown = read(log, 0)
    assert values(grown) == [f"v{i}".encode() for i in range(20)]
    assert values(first) == [b"v0"]  # read before the appends: unchanged
    assert values(read(log, 19)) == [b"v19"]
    segment = log.segments.floor_segment(0)
    mapped = mapped_paths()
    assert str(segment.log_path) not in mapped  # the .log is read, not mapped
    assert str(segment.offset_index.path) in mapped  # the indexes are mapped, as in Kafka


def test_read_after_roll_and_while_retention_deletes_the_segment(env: Env) -> None:
    log = env.log(config=DELETE)
    for i in range(5):
        produce(log, f"k{i}", f"old{i}")
    data = read(log, 0)  # a "response" still holding the bytes of segment 0
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
    assert values(data) == [f"old{i}".encode() for i in range(5)]
    assert values(read(log, 5)) == [b"new0", b"new1", b"new2"]


def test_preallocated_segment_reads_only_its_data(env: Env) -> None:
    log = env.log(config=LogConfig(segment_bytes=1024 * 1024, preallocate=True))
    produce(log, "a", "1")
    segment = log.segments.floor_segment(0)
    assert os.fstat(segment._fd).st_size == 1024 * 1024  # the file is longer than its data
    data = read(log, 0)
    assert len(data) == segment.size < 1024 * 1024
    produce(log, "b", "2")
    assert values(read(log, 0)) == [b"1", b"2"]
    log.roll()  # trims the file to its data
    assert values(data) == [b"1"]
    assert values(read(log, 0)) == [b"1", b"2"]


def test_read_respects_max_bytes_and_the_upper_bound(env: Env) -> None:
    log = env.log(config=DELETE)
    for i in range(4):
        produce(log, "k", f"v{i}")
    one = log.read(0, 1, UNBOUNDED, True)  # min_one_batch: the first batch whole
    assert values(one) == [b"v0"]
    assert len(log.read(0, 1, UNBOUNDED, False)) == 1  # a cut-off slice, as Kafka returns (clients skip it)
    assert values(log.read(1, 1 << 20, 3, True)) == [b"v1", b"v2"]  # nothing at or after the bound
