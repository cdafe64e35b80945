"""The shared I/O throttle and cleaner reconfiguration rules (Kafka's LogCleaner.reconfigure)."""

from __future__ import annotations

import threading

import pytest

from tidelog.cleaner.log_cleaner import CleanerConfig, LogCleaner
from tidelog.cleaner.stats import Throttler
from tidelog.clock import ManualClock


class RecordingEvent(threading.Event):
    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        return False


def test_throttle_sleeps_to_bring_the_rate_down() -> None:
    clock = ManualClock()
    event = RecordingEvent()
    throttler = Throttler(1000.0, clock, event)  # 1000 bytes/s
    throttler.maybe_throttle(500)
    clock.advance(100)
    throttler.maybe_throttle(500)  # within the 300 ms window: no check yet
    assert event.waits == []
    clock.advance(400)  # 1500 bytes in 500 ms = 3000 B/s
    throttler.maybe_throttle(500)
    assert event.waits == [pytest.approx(1.0)]  # 1500 / 1 B per ms - 500 ms = 1000 ms


def test_unlimited_throttle_never_sleeps() -> None:
    event = RecordingEvent()
    throttler = Throttler(1.7976931348623157e308, ManualClock(), event)
    throttler.maybe_throttle(10**9)
    assert event.waits == []


def test_thread_count_changes_stay_within_half_and_double(tmp_path) -> None:  # noqa: ANN001
    cleaner = LogCleaner(CleanerConfig(num_threads=2, backoff_ms=10), [str(tmp_path)], dict, ManualClock())
    with pytest.raises(ValueError):
        cleaner.reconfigure(num_threads=5)
    with pytest.raises(ValueError):
        cleaner.reconfigure(num_threads=0)
    cleaner.reconfigure(num_threads=4)
    assert cleaner.config.num_threads == 4
    assert cleaner.config.memory_per_thread == 134_217_728 // 4
    assert cleaner.config.io_buffer_per_thread == 524_288 // 4 // 2


def test_too_small_dedupe_buffer_is_refused(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(ValueError):
        LogCleaner(CleanerConfig(dedupe_buffer_size=24), [str(tmp_path)], dict, ManualClock())
    cleaner = LogCleaner(CleanerConfig(num_threads=1), [str(tmp_path)], dict, ManualClock())
    with pytest.raises(ValueError):
        cleaner.reconfigure(dedupe_buffer_size=24)
