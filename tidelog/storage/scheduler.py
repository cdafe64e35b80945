"""Delayed deletions driven by the injected Clock (Kafka schedules `delete-file` tasks on its scheduler).

Nothing runs by itself: the broker's periodic task (or a test) calls `run_due()`, which makes the
`file.delete.delay.ms` wait deterministic under ManualClock.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable

from tidelog.clock import Clock

log = logging.getLogger(__name__)


class Scheduler:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._tasks: list[tuple[int, int, str, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()

    def schedule_once(self, name: str, fn: Callable[[], None], delay_ms: int = 0) -> None:
        with self._lock:
            heapq.heappush(self._tasks, (self.clock.milliseconds() + delay_ms, next(self._seq), name, fn))

    def pending(self) -> int:
        with self._lock:
            return len(self._tasks)

    def run_due(self) -> int:
        """Run every task whose time has come; returns how many ran. Task errors are logged, not raised."""
        now = self.clock.milliseconds()
        ran = 0
        while True:
            with self._lock:
                if not self._tasks or self._tasks[0][0] > now:
                    return ran
                _, _, name, fn = heapq.heappop(self._tasks)
            try:
                fn()
            except Exception:  # a failed unlink must not stop the others
                log.exception("scheduled task %s failed", name)
            ran += 1

    def run_all(self) -> int:
        """Run every pending task now, due or not (shutdown: no fetch is left that could still read a `.deleted`
        segment, and its open files must be closed; the next start would remove the files anyway)."""
        with self._lock:
            tasks = sorted(self._tasks)
            self._tasks.clear()
        for _, _, name, fn in tasks:
            try:
                fn()
            except Exception:
                log.exception("scheduled task %s failed", name)
        return len(tasks)
