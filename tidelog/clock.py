"""An injectable clock, so time-dependent logic (segment.ms, compaction lags, retention,
tombstone horizons, session timeouts) can be tested deterministically."""

from __future__ import annotations

import threading
import time


class Clock:
    """Wall-clock milliseconds (Kafka's `Time.milliseconds()`) and a monotonic clock for timeouts."""

    def milliseconds(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class ManualClock(Clock):
    """A clock that only moves when a test advances it. Both readings move together."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._lock = threading.Lock()

    def milliseconds(self) -> int:
        with self._lock:
            return self._now

    def monotonic_ms(self) -> int:
        return self.milliseconds()

    def advance(self, ms: int) -> None:
        with self._lock:
            self._now += ms

    def set(self, now_ms: int) -> None:
        with self._lock:
            self._now = now_ms


SYSTEM_CLOCK = Clock()
