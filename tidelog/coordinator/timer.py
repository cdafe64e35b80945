"""One keyed deadline timer for the coordinators (Kafka's CoordinatorTimer: schedule and cancel by key).

A coordinator schedules an operation under a key (a member's session, a group's join or sync deadline, a
transaction's timeout) for a deadline on the injected Clock; scheduling a key again replaces its operation, and
cancelling it forgets it. `run_due()` runs, in deadline order, every operation whose deadline has passed on the
clock; once `start()`ed, the timer also arms one event-loop timer for the earliest deadline, so nothing rescans
every member or transaction to find the next one. Tests on a ManualClock advance the clock and call `run_due()`
(the coordinators' `check_expirations()` / `run_periodic_tasks()`).

An operation decides for itself, when it runs, whether its deadline still holds (a heartbeat moves a member's
session deadline later without rescheduling it; the operation then schedules itself again for the new deadline),
so keys may outlive what they were for: an operation for a member that is gone does nothing.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

Operation = Callable[[], None]


@dataclass(order=True)
class _Entry:
    deadline_ms: int
    seq: int
    key: Hashable = field(compare=False)
    operation: Operation = field(compare=False)


class DeadlineTimer:
    """Operations by key, each with a deadline in `now()`'s milliseconds (Kafka's CoordinatorTimer)."""

    def __init__(self, now: Callable[[], int], name: str = "coordinator") -> None:
        self._now = now
        self._name = name
        self._entries: dict[Hashable, _Entry] = {}
        self._heap: list[_Entry] = []  # may hold replaced or cancelled entries; `_entries` has the live ones
        self._seq = itertools.count()
        self._started = False
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for = -1

    # --- Kafka's CoordinatorTimer -------------------------------------------------------------------------------

    def schedule(self, key: Hashable, deadline_ms: int, operation: Operation) -> None:
        """Run `operation` at `deadline_ms`, replacing whatever `key` had."""
        entry = _Entry(deadline_ms, next(self._seq), key, operation)
        self._entries[key] = entry
        heapq.heappush(self._heap, entry)
        if len(self._heap) > 2 * len(self._entries) + 64:
            self._heap = sorted(self._entries.values())  # drop replaced and cancelled entries
        self._arm()

    def schedule_if_absent(self, key: Hashable, deadline_ms: int, operation: Operation) -> None:
        if key not in self._entries:
            self.schedule(key, deadline_ms, operation)

    def cancel(self, key: Hashable) -> None:
        self._entries.pop(key, None)  # its heap entry is skipped when it comes up

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._entries

    def deadline(self, key: Hashable) -> int | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.deadline_ms

    def __len__(self) -> int:
        return len(self._entries)

    # --- running ------------------------------------------------------------------------------------------------

    def run_due(self) -> int:
        """Run every operation whose deadline has passed, earliest first (ties in scheduling order), including
        those an operation schedules for a deadline that has passed too; the number run. An operation that
        raises is logged and the others still run."""
        ran = 0
        while self._heap:
            entry = self._heap[0]
            if self._entries.get(entry.key) is not entry:
                heapq.heappop(self._heap)
                continue
            if entry.deadline_ms > self._now():
                break
            heapq.heappop(self._heap)
            del self._entries[entry.key]
            ran += 1
            try:
                entry.operation()
            except Exception:  # noqa: BLE001 - one failed operation must not stop the others or the loop
                log.exception("%s timer operation %r failed", self._name, entry.key)
        self._arm()
        return ran

    def start(self) -> None:
        """Arm an event-loop timer for the earliest deadline from now on (when called on a running loop)."""
        self._started = True
        self._arm()

    def stop(self) -> None:
        """Disarm the event-loop timer; scheduled operations stay (run_due still runs them)."""
        self._started = False
        self._disarm()

    def _earliest(self) -> int:
        while self._heap and self._entries.get(self._heap[0].key) is not self._heap[0]:
            heapq.heappop(self._heap)
        return self._heap[0].deadline_ms if self._heap else -1

    def _arm(self) -> None:
        if not self._started:
            return
        due = self._earliest()
        if due == self._armed_for and self._handle is not None:
            return
        self._disarm()
        if due < 0:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # not on the loop (a test driving run_due itself)
        self._armed_for = due
        self._handle = loop.call_later(max(0.0, (due - self._now()) / 1000), self._on_loop_timer)

    def _disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle = None
        self._armed_for = -1

    def _on_loop_timer(self) -> None:
        self._handle = None
        self._armed_for = -1
        self.run_due()
