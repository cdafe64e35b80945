"""Cooperative GIL hand-off for the pure-Python cleaner only.

The C cleaner core (protocol/_cleaner_core.c) releases the GIL for each chunk of batches and does not pace: in
bench/cleaner.py the event loop's produce p50 during a C-core pass stays near idle, while pacing still helps the
Python fallback, which holds the GIL for every record. The rest of this note is about that fallback.

A pure-Python cleaning pass is CPU-bound Python: while it runs, the broker's event loop waits for the GIL up to the
interpreter's switch interval (5 ms) every time it wakes up, and a produce request wakes it several times,
so produce p99 grew from ~2.5 ms to ~16 ms during a large cleaning (bench/cleaner.py). Releasing the GIL
with a zero sleep does not help: the cleaner takes it straight back before the waiting thread is scheduled.
A short real sleep after every `work_s` of cleaning lets a waiting thread in; once the loop holds the GIL
it keeps it for a whole switch interval, long enough to finish its request. Kafka has no equivalent (JVM
threads run in parallel); log.cleaner.io.max.bytes.per.second (the Throttler) still applies on top.
"""

from __future__ import annotations

import time

# Module switches: bench/cleaner.py turns pacing off to measure its effect in the same run.
ENABLED = True
WORK_S = 0.001  # cleaning time between two hand-offs
PAUSE_S = 0.00005  # long enough for a waiting thread to wake and take the GIL


class Pacer:
    """Call `pace()` between batches; it sleeps PAUSE_S once WORK_S of wall time has passed since the last
    hand-off. Real time (perf_counter), not the injectable Clock: this paces CPU, not log time."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next = time.perf_counter() + WORK_S

    def pace(self) -> None:
        now = time.perf_counter()
        if now >= self._next:
            if ENABLED:
                time.sleep(PAUSE_S)
                now = time.perf_counter()
            self._next = now + WORK_S
