"""Statistics of one cleaning pass (Kafka's CleanerStats) and the shared I/O throttle (Kafka's Throttler)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from tidelog.clock import Clock
from tidelog.storage import TopicPartition

MB = 1024 * 1024


@dataclass(slots=True)
class CleanerStats:
    """Counters of one pass. Durations use the injected clock's monotonic reading (ManualClock in tests)."""

    clock: Clock
    start_ms: int = 0
    map_complete_ms: int = -1
    end_ms: int = -1
    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    messages_read: int = 0
    invalid_messages_read: int = 0
    messages_written: int = 0
    buffer_utilization: float = 0.0
    collision_rate: float = 0.0
    # wall time too: ManualClock never advances while a pass runs, the summary line still wants real seconds
    _wall_start: float = field(default_factory=time.monotonic)
    _wall_map: float = 0.0
    _wall_end: float = 0.0

    def __post_init__(self) -> None:
        self.start_ms = self.clock.monotonic_ms()

    def read_messages(self, messages: int, size: int) -> None:
        self.messages_read += messages
        self.bytes_read += size

    def invalid_message(self) -> None:
        self.invalid_messages_read += 1

    def recopy_messages(self, messages: int, size: int) -> None:
        self.messages_written += messages
        self.bytes_written += size

    def index_messages_read(self, count: int) -> None:
        self.map_messages_read += count

    def index_bytes_read(self, size: int) -> None:
        self.map_bytes_read += size

    def index_done(self) -> None:
        self.map_complete_ms = self.clock.monotonic_ms()
        self._wall_map = time.monotonic()

    def all_done(self) -> None:
        self.end_ms = self.clock.monotonic_ms()
        self._wall_end = time.monotonic()

    @property
    def elapsed_secs(self) -> float:
        return max(self._wall_end - self._wall_start, (self.end_ms - self.start_ms) / 1000.0)

    @property
    def elapsed_index_secs(self) -> float:
        return max(self._wall_map - self._wall_start, (self.map_complete_ms - self.start_ms) / 1000.0)

    def summary(self, log_name: str, first_dirty: int, end_offset: int) -> str:
        """Kafka's LogCleaner.recordStats log message, on one line."""

        def mb(n: float) -> float:
            return n / MB

        elapsed = max(self.elapsed_secs, 1e-9)
        index_secs = max(self.elapsed_index_secs, 1e-9)
        clean_secs = max(elapsed - index_secs, 1e-9)
        total_bytes = self.map_bytes_read + self.bytes_read
        return (
            f"Log cleaner thread finished cleaning {log_name} (cleaned offsets [{first_dirty}, {end_offset})): "
            f"{mb(total_bytes):.1f} MB of log processed in {elapsed:.1f} seconds "
            f"({mb(total_bytes) / elapsed:.1f} MB/sec). "
            f"Indexed {mb(self.map_bytes_read):.1f} MB in {index_secs:.1f} seconds "
            f"({mb(self.map_bytes_read) / index_secs:.1f} MB/sec, {100 * index_secs / elapsed:.1f}% of total time); "
            f"buffer utilization {100 * self.buffer_utilization:.1f}%; "
            f"hash collision rate {100 * self.collision_rate:.1f}%. "
            f"Cleaned {mb(self.bytes_read):.1f} MB in {clean_secs:.1f} seconds "
            f"({mb(self.bytes_read) / clean_secs:.1f} MB/sec, {100 * clean_secs / elapsed:.1f}% of total time); "
            f"start size {mb(self.bytes_read):.1f} MB ({self.messages_read} messages), "
            f"end size {mb(self.bytes_written):.1f} MB ({self.messages_written} messages), "
            f"{100 * (1 - self.bytes_written / max(self.bytes_read, 1)):.1f}% size reduction "
            f"({100 * (1 - self.messages_written / max(self.messages_read, 1)):.1f}% fewer messages); "
            f"{self.invalid_messages_read} invalid (null-key) records dropped."
        )


@dataclass(frozen=True, slots=True)
class LastCleaning:
    """What the last finished pass over one partition did (GET /api/cleaner, tidelog/cleaner/explain.py)."""

    finished_ms: int
    first_dirty_offset: int
    end_offset: int
    records_read: int
    records_retained: int
    bytes_read: int
    bytes_written: int
    seconds: float


class CleaningHistory:
    """The last finished pass per partition, written by the cleaner threads and read by the HTTP endpoint."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[TopicPartition, LastCleaning] = {}

    def record(self, tp: TopicPartition, finished_ms: int, first_dirty: int, end_offset: int,
               stats: CleanerStats) -> None:
        entry = LastCleaning(finished_ms, first_dirty, end_offset, stats.messages_read, stats.messages_written,
                             stats.bytes_read, stats.bytes_written, round(stats.elapsed_secs, 6))
        with self._lock:
            self._last[tp] = entry

    def get(self, tp: TopicPartition) -> LastCleaning | None:
        with self._lock:
            return self._last.get(tp)

    def forget(self, tp: TopicPartition) -> None:
        with self._lock:
            self._last.pop(tp, None)


class Throttler:
    """Kafka's Throttler: one instance shared by all cleaner threads. Observed over windows of at least
    300 ms; when the rate exceeds the limit, sleep long enough to bring it back down.

    Sleeping is real time (it paces disk I/O), measured with the clock's monotonic reading."""

    CHECK_INTERVAL_MS = 300

    def __init__(self, desired_rate_per_sec: float, clock: Clock, stop: threading.Event | None = None) -> None:
        self.desired_rate_per_sec = desired_rate_per_sec
        self._clock = clock
        self._lock = threading.Lock()
        self._period_start = clock.monotonic_ms()
        self._observed = 0.0
        self._stop = stop or threading.Event()
        self.throttled_until_ms: int | None = None  # wall-clock end of the current sleep (tidelog/cleaner/explain.py)

    def maybe_throttle(self, observed: float) -> None:
        if self.desired_rate_per_sec >= 1.7e308:  # Double.MAX: unlimited
            return
        with self._lock:
            self._observed += observed
            now = self._clock.monotonic_ms()
            elapsed = now - self._period_start
            if elapsed <= self.CHECK_INTERVAL_MS:
                return
            rate = self._observed * 1000.0 / elapsed
            if rate > self.desired_rate_per_sec:
                sleep_ms = self._observed / (self.desired_rate_per_sec / 1000.0) - elapsed
                if sleep_ms > 0:
                    self.throttled_until_ms = self._clock.milliseconds() + int(sleep_ms)
                    try:
                        self._stop.wait(sleep_ms / 1000.0)
                    finally:
                        self.throttled_until_ms = None
            self._period_start = self._clock.monotonic_ms()
            self._observed = 0.0
