"""The compiled cleaner core (protocol/_cleaner_core.c) against the pure-Python cleaner: the same logs cleaned by both
must give byte-identical segment files (.log, .index, .timeindex, .txnindex) after every pass, for every codec, with
tombstones, keyless records, headers, idempotent and transactional producers, control batches and horizons.

Without the core these tests skip on a developer machine and fail when CI=true (tests/accelerators.py)."""

from __future__ import annotations

import gzip
import hashlib
import random
import struct
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cleaner_env import Env

from tests.accelerators import require_built
from tidelog.cleaner import core, record_stream
from tidelog.cleaner.offset_map import SkimpyOffsetMap
from tidelog.cleaner.record_stream import stream_inflater
from tidelog.cleaner.stats import Throttler
from tidelog.clock import ManualClock
from tidelog.config.log_config import LogConfig
from tidelog.protocol import records as records_module
from tidelog.protocol.records import GZIP, LZ4, NONE, SNAPPY, ZSTD, Record, build_batch

SMALL_SEGMENTS = LogConfig(cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.01, delete_retention_ms=1000,
                           segment_bytes=6 * 1024)
# Written as a delete-policy topic (keyless records are refused by a compacted one), then switched to compact.
WRITE_CONFIG = LogConfig(cleanup_policy=("delete",), segment_bytes=6 * 1024, retention_ms=-1)
DAY = 86_400_000
CODECS = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}


@pytest.fixture
def c_core() -> object:
    require_built(core.accelerator is not None, "the C cleaner core")
    return core.accelerator


@pytest.fixture(autouse=True)
def gzip_without_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """gzip.compress stamps the wall-clock second into every rebuilt gzip batch; pin it so two runs compare."""
    fixed = types.SimpleNamespace(compress=lambda data, compresslevel: gzip.compress(data, compresslevel, mtime=0))
    monkeypatch.setattr(records_module, "gzip", fixed)


def _records(rng: random.Random, ts: int, n: int, keys: int) -> list[Record]:
    out = []
    for i in range(n):
        roll = rng.random()
        key = None if roll < 0.04 else f"key-{rng.randrange(keys)}".encode()
        value = None if rng.random() < 0.15 else rng.randbytes(rng.randrange(0, 300))
        headers: tuple[tuple[str, bytes | None], ...] = ()
        if rng.random() < 0.2:
            headers = (("trace", rng.randbytes(8)), ("empty", None))
        if rng.random() < 0.03:
            headers = (("clé", b"non-ascii key: the core hands the batch to Python"),)
        out.append(Record(i, ts + rng.randrange(-5, 50), key, value, headers))
    return out


def fill(env: Env, seed: int, codecs: list[int]) -> None:
    """A deterministic mixed log over several segments."""
    rng = random.Random(seed)
    log = env.log(config=WRITE_CONFIG)
    pid = 1000
    for round_ in range(60):
        codec = codecs[round_ % len(codecs)]
        ts = env.clock.milliseconds()
        kind = rng.random()
        recs = _records(rng, ts, rng.randrange(1, 25), keys=40)
        if kind < 0.6:
            log.append_as_leader(build_batch(recs, 0, compression=codec))
        elif kind < 0.75:  # an idempotent producer (its last batch is kept even when emptied)
            pid += 1
            log.append_as_leader(build_batch(recs, 0, compression=codec, producer_id=pid, producer_epoch=0,
                                             base_sequence=0))
        else:  # a transaction, committed or aborted, with its marker
            pid += 1
            log.append_as_leader(build_batch(recs, 0, compression=codec, producer_id=pid, producer_epoch=0,
                                             base_sequence=0, is_transactional=True))
            log.append_control_marker(pid, 0, 1, commit=rng.random() < 0.6)
        if round_ % 7 == 6:
            env.clock.advance(300)
    log.roll()
    log.append_as_leader(build_batch([Record(0, env.clock.milliseconds(), b"tail", b"x")], 0))
    env.log(config=SMALL_SEGMENTS)


def snapshot(env: Env) -> list[tuple[str, bytes]]:
    log = env.log(config=SMALL_SEGMENTS)
    out = []
    for path in sorted(Path(log.dir).iterdir()):
        if path.suffix in (".log", ".index", ".timeindex", ".txnindex"):
            out.append((path.name, path.read_bytes()))
    return out


def clean_passes(tmp: Path, seed: int, codecs: list[int], io_buffer_size: int = 524_288,
                 throttler: Throttler | None = None, memory: int = 1024 * 1024) -> list[list[tuple[str, bytes]]]:
    clock = ManualClock()
    env = Env(tmp, clock, memory=memory, io_buffer_size=io_buffer_size)
    if throttler is not None:
        env.cleaner.throttler = throttler
    try:
        fill(env, seed, codecs)
        log = env.log(config=SMALL_SEGMENTS)
        passes = []
        for n in range(4):
            env.cleaner.clean_once()
            passes.append(snapshot(env))
            clock.advance(700 if n < 2 else DAY)  # horizons pass; producers expire
            log.remove_expired_producers()
            log.append_as_leader(build_batch([Record(0, clock.milliseconds(), b"key-1", None)], 0))
            log.append_as_leader(build_batch([Record(0, clock.milliseconds(), b"key-2", b"v")], 0))
            log.roll()
        return passes
    finally:
        env.close()


@pytest.fixture
def small_window(c_core: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A 300-byte inflate window in both cores: every compressed batch of these logs is then read from the stream
    run by run (its records longer than the window held whole) instead of inflated whole within the window."""
    monkeypatch.setattr(record_stream, "WINDOW", 300)
    monkeypatch.setattr(record_stream, "READ", 100)
    old = c_core.set_window(300)
    yield
    c_core.set_window(old)


@pytest.mark.parametrize(("codec", "window"), [
    *((codec, "whole") for codec in [*CODECS, "mixed"]),
    *((codec, "stream") for codec in [*CODECS, "mixed"] if codec != "none"),  # a plain batch is read in place
])
def test_c_and_python_cleaners_write_identical_segments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, c_core: object, codec: str,
    window: str,
) -> None:
    if window == "stream":
        request.getfixturevalue("small_window")
    codecs = list(CODECS.values()) if codec == "mixed" else [CODECS[codec]]
    seed = sum(codec.encode())
    with_c = clean_passes(tmp_path / "c", seed, codecs)
    monkeypatch.setattr(core, "accelerator", None)
    with_python = clean_passes(tmp_path / "py", seed, codecs)
    assert [[name for name, _ in p] for p in with_c] == [[name for name, _ in p] for p in with_python]
    for n, (c_pass, py_pass) in enumerate(zip(with_c, with_python, strict=True)):
        for (name, c_bytes), (_, py_bytes) in zip(c_pass, py_pass, strict=True):
            assert c_bytes == py_bytes, f"pass {n}: {name} differs"
    first = dict(with_c[0])
    original = sum(len(b) for name, b in first.items() if name.endswith(".log"))
    assert original > 0


STAT_FIELDS = ("bytes_read", "bytes_written", "map_bytes_read", "map_messages_read", "messages_read",
               "invalid_messages_read", "messages_written")


@pytest.fixture
def pass_counters(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """The CleanerStats counters of every pass, in the order the passes ran (the summary line and history show them)."""
    from tidelog.cleaner import cleaner as cleaner_module

    recorded: list[tuple[int, ...]] = []
    real = cleaner_module.Cleaner.do_clean

    def recording(self: Any, cleanable: Any, now: int) -> Any:
        end, stats = real(self, cleanable, now)
        recorded.append(tuple(getattr(stats, name) for name in STAT_FIELDS))
        return end, stats

    monkeypatch.setattr(cleaner_module.Cleaner, "do_clean", recording)
    return recorded


class StatusSpy:
    """The C core with the statuses of its file functions recorded (the map's and the filter's)."""

    def __init__(self, accelerator: Any) -> None:
        self._accelerator = accelerator
        self.statuses: set[tuple[str, int]] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._accelerator, name)

    def map_file(self, *args: Any) -> Any:
        result = self._accelerator.map_file(*args)
        self.statuses.add(("map", result[3]))
        return result

    def filter_file(self, *args: Any) -> Any:
        result = self._accelerator.filter_file(*args)
        self.statuses.add(("filter", result[3]))
        return result


@pytest.mark.parametrize(("codec", "call_bytes", "window", "memory"), [
    ("none", 900, 2500, 1 << 20), ("none", 1 << 20, 2500, 1 << 20), ("mixed", 900, 2500, 1 << 20),
    ("mixed", 1 << 20, 2500, 1 << 20),
    # a map of 27 entries for 42 keys: passes stop where it fills (MAP_FULL), in a window holding whole segments
    ("mixed", 900, 8000, 24 * 30),
])
def test_c_core_reading_segments_through_a_small_window_writes_what_python_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, c_core: object, codec: str, call_bytes: int, window: int,
    memory: int, pass_counters: list[tuple[int, ...]],
) -> None:
    """The C core reads each segment itself through the cleaner's read buffer (map_file/filter_file). With a
    2,500-byte buffer, batches straddle reads, batches larger than the buffer go to the chunk reader (PARTIAL), and
    control and transactional batches to Python (NEED_PYTHON); with 900 bytes per call, calls end inside a segment.
    The segments stay byte-identical to the pure-Python cleaner's, whose index entries depend on the chunks it
    appends, and so do every pass's statistics and the bytes reported to the throttle."""
    from tidelog.cleaner import cleaner as cleaner_module

    spy = StatusSpy(c_core)
    monkeypatch.setattr(core, "accelerator", spy)
    monkeypatch.setattr(cleaner_module, "FILE_CALL_BYTES", call_bytes)
    codecs = list(CODECS.values()) if codec == "mixed" else [CODECS[codec]]
    seed = 7 + sum(codec.encode())
    c_throttle, py_throttle = CountingThrottler(), CountingThrottler()
    with_c = clean_passes(tmp_path / "c", seed, codecs, 2 * window, c_throttle, memory)  # one thread: window bytes
    c_counters = list(pass_counters)
    pass_counters.clear()
    monkeypatch.setattr(core, "accelerator", None)
    with_python = clean_passes(tmp_path / "py", seed, codecs, 2 * window, py_throttle, memory)
    assert with_c == with_python
    assert c_counters == pass_counters and len(pass_counters) >= 4
    assert c_throttle.observed == py_throttle.observed > 0
    expected = (core.DONE, core.NEED_PYTHON) + ((core.PARTIAL,) if window < 6 * 1024 else ())
    assert {(kind, status) for kind in ("map", "filter") for status in expected} <= spy.statuses
    assert (("map", core.MAP_FULL) in spy.statuses) == (memory < 1 << 20)


def _small_batches_passes(tmp: Path, throttler: Throttler) -> list[list[tuple[str, bytes]]]:
    """64 KiB segments of batches under 1 KiB (some transactional), cleaned twice through a 2,500-byte window."""
    clock = ManualClock()
    env = Env(tmp, clock, io_buffer_size=5000)
    env.cleaner.throttler = throttler
    config = LogConfig(cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.01, segment_bytes=64 * 1024)
    try:
        log = env.log(config=config)
        rng = random.Random(5)
        for i in range(600):
            recs = [Record(j, clock.milliseconds(), b"k%d" % rng.randrange(400), rng.randbytes(rng.randrange(40)))
                    for j in range(rng.randrange(1, 12))]
            if i % 50 == 49:
                log.append_as_leader(build_batch(recs, 0, producer_id=i, producer_epoch=0, base_sequence=0,
                                                 is_transactional=True))
                log.append_control_marker(i, 0, 1, commit=True)
            else:
                log.append_as_leader(build_batch(recs, 0))
            clock.advance(1)
        log.roll()
        passes = []
        for _ in range(2):
            env.cleaner.clean_once()
            passes.append(snapshot_of(log))
            log.append_as_leader(build_batch([Record(0, clock.milliseconds(), b"k1", b"again")], 0))
            log.roll()
        return passes
    finally:
        env.close()


def snapshot_of(log: Any) -> list[tuple[str, bytes]]:
    return [(path.name, path.read_bytes()) for path in sorted(Path(log.dir).iterdir())
            if path.suffix in (".log", ".index", ".timeindex", ".txnindex")]


def test_c_core_output_buffer_filling_up_keeps_the_python_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, c_core: object, pass_counters: list[tuple[int, ...]]
) -> None:
    """Segments much larger than the window and calls of 1 MiB: a call's output fills the output buffer (OUT_FULL)
    and the finished chunks are appended before it goes on. Every chunk is still appended on its own, so the
    sparse index (an entry per append at most) is the pure-Python cleaner's."""
    from tidelog.cleaner import cleaner as cleaner_module

    spy = StatusSpy(c_core)
    monkeypatch.setattr(core, "accelerator", spy)
    monkeypatch.setattr(cleaner_module, "FILE_CALL_BYTES", 1 << 20)
    c_throttle, py_throttle = CountingThrottler(), CountingThrottler()
    with_c = _small_batches_passes(tmp_path / "c", c_throttle)
    c_counters = list(pass_counters)
    pass_counters.clear()
    monkeypatch.setattr(core, "accelerator", None)
    with_python = _small_batches_passes(tmp_path / "py", py_throttle)
    assert with_c == with_python
    assert c_counters == pass_counters and pass_counters
    assert c_throttle.observed == py_throttle.observed > 0
    assert {("filter", core.OUT_FULL), ("filter", core.NEED_PYTHON), ("map", core.NEED_PYTHON)} <= spy.statuses
    assert ("filter", core.PARTIAL) not in spy.statuses
    indexes = [b for name, b in with_c[0] if name.endswith(".index")]
    assert sum(len(b) for b in indexes) >= 8 * 3  # several index entries: the appends matter


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_c_core_decides_a_batch_longer_than_its_window_itself(c_core: Any, small_window: None, codec: int) -> None:
    """With a 300-byte window the C core reads a compressed batch of 200 records from the stream run by run and
    decides it itself (DONE, not NEED_PYTHON): the parity tests' "stream" runs compare its stream with Python's."""
    recs = [Record(i, 1000 + i, b"k%d" % (i % 7), b"v%d" % i * 20, (("h", b"x"),)) for i in range(200)]
    chunk = bytes(build_batch(recs, 0, compression=codec))
    latest_of_each_key = [(b"k%d" % (i % 7), b"v%d" % i * 20) for i in range(193, 200)]
    m = SkimpyOffsetMap(24 * 100)
    pos, status, entries, latest, read, *_ = c_core.map_chunk(
        m.buffer, m.dirty, m.slots, 0, m.max_entries, -1, chunk, 0, len(chunk), 0, stream_inflater)
    assert (pos, status, entries, latest, read) == (len(chunk), core.DONE, 7, 199, 200)
    out = bytearray(4 * len(chunk) + 4096)
    result = c_core.filter_chunk(m.buffer, m.slots, 199, chunk, 0, len(chunk), out, 0, b"", 1000, 0, 1000, 1 << 20,
                                 -1, -1, stream_inflater, records_module.compress)
    assert (result[0], result[1], result[8]) == (len(chunk), core.DONE, 7)  # 7 records written
    assert [(r.key, r.value) for r in records_module.iter_records(out[: result[2]])] == latest_of_each_key
    # the entries Python calls for the batches it decides itself (transactional, control) stream the same way
    records = memoryview(chunk)[61:]
    mapped = c_core.map_payload(m.buffer, m.dirty, m.slots, 7, m.max_entries, -1, records, 0, 200, 0, codec,
                                stream_inflater)
    assert mapped[:4] == (core.DONE, 7, 199, 200)
    decided = c_core.filter_payload(m.buffer, m.slots, 199, records, 0, 200, 1000, 1199, codec, 0, 1000, False,
                                    stream_inflater)
    assert decided[:2] == (7, False)


def test_c_offset_map_matches_python_slot_for_slot(c_core: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """A map small enough that probe sequences run past the 13 hash windows: the C puts leave the same bytes."""
    keys = [f"k{i}".encode() for i in range(190)]
    python_map = SkimpyOffsetMap(24 * 211, load_factor=0.95)
    c_map = SkimpyOffsetMap(24 * 211, load_factor=0.95)
    for offset, key in enumerate(keys + keys[:50]):
        python_map.put(key, offset)
    payload = bytearray()
    for offset, key in enumerate(keys + keys[:50]):
        payload += records_module.encode_record(offset, 0, key, b"v")
    status, entries, latest, read, lookups, probes = c_core.map_payload(  # type: ignore[attr-defined]
        c_map.buffer, c_map.dirty, c_map.slots, 0, c_map.max_entries, -1, bytes(payload), 0, len(keys) + 50, 0)
    c_map.absorb(entries, latest, lookups, probes)
    assert status == core.DONE and read == 240 and entries == python_map.size == 190
    assert bytes(c_map.buffer) == bytes(python_map.buffer)
    assert c_map.dirty == python_map.dirty  # the blocks clear() zeroes
    assert (c_map.lookups, c_map.probes) == (python_map.lookups, python_map.probes)
    assert python_map.probes > python_map.lookups + 13  # some probe went past the hash windows
    for key in keys:
        assert c_map.get(key) == python_map.get(key)
    c_map.clear()  # zeroes the dirty blocks in C
    monkeypatch.setattr(core, "accelerator", None)
    python_map.clear()  # and in Python
    for m in (c_map, python_map):
        assert not any(m.dirty) and not any(bytes(m.buffer)) and m.get(keys[0]) == -1


def test_c_md5_and_crc32c(c_core: object) -> None:
    import crc32c

    rng = random.Random(7)
    for n in [*range(130), 1000, 4096]:
        data = rng.randbytes(n)
        assert c_core.md5(data) == hashlib.md5(data).digest()  # type: ignore[attr-defined]
        assert c_core.crc32c(data) == crc32c.crc32c(data)  # type: ignore[attr-defined]
    for n in (1, 3, 4, 5, 31, 64):  # the four-lane hashing, with keys of every length around one block
        keys = [rng.randbytes(rng.choice([0, 1, 54, 55, 56, 63, 64, 65, rng.randrange(100)])) for _ in range(n)]
        assert c_core.md5_many(keys) == [hashlib.md5(k).digest() for k in keys]  # type: ignore[attr-defined]


def test_c_core_hands_malformed_batches_to_python(c_core: object) -> None:
    """A batch whose records do not parse: both chunk functions stop there (status NEED_PYTHON) and leave it."""
    good = build_batch([Record(0, 1, b"a", b"1"), Record(1, 2, b"b", b"2")], 0)
    bad = bytearray(build_batch([Record(2, 3, b"c", b"3")], 2))
    bad[61] = 0x7F  # the record length now runs past the batch
    chunk = bytes(good + bad)
    m = SkimpyOffsetMap(24 * 100)
    pos, status, entries, latest, read, _, _ = c_core.map_chunk(  # type: ignore[attr-defined]
        m.buffer, m.dirty, m.slots, 0, m.max_entries, -1, chunk, 0, len(chunk), 0)
    assert (pos, status, entries, latest, read) == (len(good), core.NEED_PYTHON, 2, 1, 2)
    out = bytearray(4 * len(chunk))
    result = c_core.filter_chunk(  # type: ignore[attr-defined]
        m.buffer, m.slots, 1, chunk, 0, len(chunk), out, 0, b"", 100, 0, 1000, 1 << 20, -1, -1)
    assert result[:3] == (len(good), core.NEED_PYTHON, len(good))
    assert bytes(out[: len(good)]) == bytes(good)  # both records are the latest of their key: kept as is
    assert struct.unpack_from(">q", out, 0)[0] == 0

    # A compressed batch whose payload does not inflate: the codec error is left to the Python code too.
    garbage = bytearray(build_batch([Record(2, 3, b"c", b"3" * 100)], 2, compression=GZIP))
    garbage[70:80] = bytes(10)
    chunk = bytes(good + garbage)
    m = SkimpyOffsetMap(24 * 100)
    pos, status, *_ = c_core.map_chunk(  # type: ignore[attr-defined]
        m.buffer, m.dirty, m.slots, 0, m.max_entries, -1, chunk, 0, len(chunk), 0, stream_inflater)
    assert (pos, status) == (len(good), core.NEED_PYTHON)
    result = c_core.filter_chunk(  # type: ignore[attr-defined]
        m.buffer, m.slots, 2, chunk, 0, len(chunk), out, 0, b"", 100, 0, 1000, 1 << 20, -1, -1,
        stream_inflater, records_module.compress)
    assert result[:3] == (len(good), core.NEED_PYTHON, len(good))


class CountingThrottler(Throttler):
    """Unlimited, but counts what the cleaner reports (log.cleaner.io.max.bytes.per.second bounds this sum)."""

    def __init__(self) -> None:
        super().__init__(1.7976931348623157e308, ManualClock())
        self.observed = 0.0

    def maybe_throttle(self, observed: float) -> None:
        self.observed += observed
        super().maybe_throttle(observed)


def _throttled_bytes(tmp: Path) -> tuple[float, int, int]:
    env = Env(tmp, ManualClock())
    try:
        fill(env, 11, [NONE])
        counting = CountingThrottler()
        env.cleaner.throttler = counting
        log = env.log(config=SMALL_SEGMENTS)
        before = log.size_in_bytes()
        assert env.cleaner.clean_once()
        return counting.observed, before, log.size_in_bytes()
    finally:
        env.close()


def test_both_cores_report_every_byte_read_and_written_to_the_throttle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, c_core: object
) -> None:
    with_c = _throttled_bytes(tmp_path / "c")
    monkeypatch.setattr(core, "accelerator", None)
    with_python = _throttled_bytes(tmp_path / "py")
    assert with_c == with_python
    observed, before, after = with_c
    assert after < before
    assert observed >= before + after  # every source byte read at least once, every cleaned byte written


def test_c_core_hands_batches_whose_offsets_overflow_to_python(c_core: object) -> None:
    """A corrupt BaseOffset near 2^63 made `base + delta` overflow int64 in C (undefined behaviour; in practice a
    negative offset): the map skipped the batch and the filter dropped a record the Python cleaner keeps or
    refuses. Such a batch goes to Python, like any other the C core is not sure to treat as Python does; and a
    corrupt record count no longer sizes an allocation before it is checked."""
    from tidelog.cleaner.core import NEED_PYTHON
    from tidelog.protocol.records import compress

    accel: Any = c_core
    batch = bytearray(build_batch([Record(0, 1, b"k", b"v"), Record(1, 1, b"k2", b"v")], 0))
    struct.pack_into(">q", batch, 0, (1 << 63) - 1)
    struct.pack_into(">I", batch, 17, accel.crc32c(bytes(batch[21:])))
    chunk = bytes(batch)
    offset_map = SkimpyOffsetMap(24 * 64)
    status = accel.map_chunk(offset_map.buffer, offset_map.dirty, offset_map.slots, 0, offset_map.max_entries, -1,
                             chunk, 0, len(chunk), 0, stream_inflater)[1]
    assert status == NEED_PYTHON
    offset_map.update_latest_offset(100)
    status = accel.filter_chunk(offset_map.buffer, offset_map.slots, 100, chunk, 0, len(chunk), bytearray(4096), 0,
                                b"", -1, 0, 0, 1 << 20, -1, -1, stream_inflater, compress)[1]
    assert status == NEED_PYTHON
    assert accel.filter_payload(offset_map.buffer, offset_map.slots, -1, b"\0" * 10, 0, 0x7FFFFFFF,
                                0, 0, 0, 0, 0, False) is None


def test_a_read_error_in_the_core_raises_and_its_slots_are_cleared(c_core: Any, tmp_path: Path) -> None:
    """map_file raises OSError for a read error (here EISDIR) instead of answering; slots a failed call wrote
    without reporting its counters (the map still says 0 entries) are zeroed by the next clear(), so the thread's
    map cannot carry another log's keys into its next pass."""
    import os

    m = SkimpyOffsetMap(24 * 1000)
    window = bytearray(4096)
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        with pytest.raises(OSError):
            c_core.map_file(m.buffer, m.dirty, m.slots, 0, m.max_entries, -1, fd, 0, 1 << 20, window, 0, 0, 0,
                            1 << 20, 0, stream_inflater)
    finally:
        os.close(fd)
    chunk = bytes(build_batch([Record(i, 1000, b"k%d" % i, b"v") for i in range(10)], 0))
    c_core.map_chunk(m.buffer, m.dirty, m.slots, 0, m.max_entries, -1, chunk, 0, len(chunk), 0, stream_inflater)
    assert len(m) == 0 and m.latest_offset == -1  # the counters were never absorbed
    assert m.buffer[:] != bytes(len(m.buffer))
    m.clear()
    assert m.buffer[:] == bytes(len(m.buffer))
    assert m.get(b"k3") == -1
