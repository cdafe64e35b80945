"""The log cleaner: `log.cleaner.threads` threads beside the event loop (Kafka's LogCleaner / CleanerThread),
docs/STORAGE.md "Choosing what to clean", "Cleaner metrics".

Each thread repeatedly takes the filthiest cleanable log, cleans it, then applies retention to the compacted
logs, and sleeps `log.cleaner.backoff.ms` when nothing was eligible. `clean_once()` runs one such round on the
caller's thread (tests, tools).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidelog.cleaner.cleaner import Cleaner, LogCleaningAbortedError, LogToClean
from tidelog.cleaner.manager import LogCleanerManager, log_dir_of
from tidelog.cleaner.offset_map import SkimpyOffsetMap
from tidelog.cleaner.stats import CleanerStats, CleaningHistory, Throttler
from tidelog.clock import Clock
from tidelog.storage import TopicPartition
from tidelog.storage.fault_hooks import NO_FAULTS, FaultHooks, FaultPoint
from tidelog.storage.retention import delete_old_segments

if TYPE_CHECKING:
    from tidelog.storage.log import Log

logger = logging.getLogger(__name__)
INT32_MAX = 0x7FFFFFFF
DOUBLE_MAX = 1.7976931348623157e308
DEFAULT_THREAD_NICE = 10  # log.cleaner.thread.nice (tidelog's, not Kafka's): see CleanerThread.lower_priority


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """Kafka's CleanerConfig: the broker-wide log.cleaner.* settings."""

    num_threads: int = 1
    dedupe_buffer_size: int = 134_217_728
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 524_288
    max_message_size: int = 1_048_588
    max_io_bytes_per_second: float = DOUBLE_MAX
    backoff_ms: int = 15_000
    enable_cleaner: bool = True
    thread_nice: int = DEFAULT_THREAD_NICE

    @classmethod
    def from_broker_config(cls, config: Any) -> CleanerConfig:
        return cls(
            num_threads=config.log_cleaner_threads,
            dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
            dedupe_buffer_load_factor=config.log_cleaner_io_buffer_load_factor,
            io_buffer_size=config.log_cleaner_io_buffer_size,
            max_message_size=config.message_max_bytes,
            max_io_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
            backoff_ms=config.log_cleaner_backoff_ms,
            enable_cleaner=config.log_cleaner_enable,
            thread_nice=config.log_cleaner_thread_nice,
        )

    def validate(self) -> None:
        """Kafka's Cleaner refuses an offset map that cannot hold even one entry."""
        slots = self.memory_per_thread // 24
        if slots * self.dedupe_buffer_load_factor <= 1:
            raise ValueError(
                "offset map is too small to fit in even a single message, so log cleaning will never make "
                "progress. You can increase log.cleaner.dedupe.buffer.size or decrease log.cleaner.threads")

    @property
    def memory_per_thread(self) -> int:
        return min(self.dedupe_buffer_size // max(self.num_threads, 1), INT32_MAX)

    @property
    def io_buffer_per_thread(self) -> int:
        return self.io_buffer_size // max(self.num_threads, 1) // 2


class CleanerThread(threading.Thread):
    def __init__(self, owner: LogCleaner, thread_id: int) -> None:
        super().__init__(name=f"kafka-log-cleaner-thread-{thread_id}", daemon=True)
        self.owner = owner
        self.thread_id = thread_id
        self.cleaner: Cleaner | None = None
        self.last_stats: CleanerStats | None = None
        self.last_compaction_delay_ms = 0
        self.dead = False
        self.nice: int | None = None  # the niceness lower_priority() gave this thread (None: not set)
        self._stop_event = threading.Event()

    def get_cleaner(self) -> Cleaner:
        if self.cleaner is None:  # the map is allocated on first use: idle brokers do not pay for it
            self.cleaner = self.owner.new_cleaner(self.thread_id)
        return self.cleaner

    def initiate_shutdown(self) -> None:
        self._stop_event.set()

    def lower_priority(self) -> None:
        """Run this thread at the broker's niceness plus log.cleaner.thread.nice (tidelog's config; Kafka's cleaner
        threads run at the JVM's priority). The C core cleans with the GIL released, so a pass competes with the
        event loop (and anything else of the broker's session) for a CPU rather than for the GIL; at nice 0 on a
        busy machine the loop's wake-ups wait behind the cleaner's time slices. bench/cleaner.py, 7 cleaning phases
        each, load 3-8: produce p99 cleaning/idle, median, 1.35x at nice 10 and 1.76x at nice 0 with the producer in
        its own process (1.72x and 1.89x in the broker's process, where p50 while cleaning stays at idle's at nice
        10 and doubles at 0); the cleaner is slower only while the CPU is contended. Linux's setpriority on a
        thread id renices that thread only; raising niceness needs no privilege. The target is computed from the
        process's niceness, so a replacement thread (started by the dying one, whose niceness it inherits) ends up
        at the same value."""
        wanted = self.owner.config.thread_nice
        if not sys.platform.startswith("linux"):
            return
        try:
            tid = threading.get_native_id()
            target = min(19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + wanted)
            if os.getpriority(os.PRIO_PROCESS, tid) != target:
                os.setpriority(os.PRIO_PROCESS, tid, target)
            self.nice = os.getpriority(os.PRIO_PROCESS, tid)
        except OSError as e:  # e.g. EPERM/EACCES going back below an inherited niceness without CAP_SYS_NICE
            logger.warning("Cleaner thread %s keeps its priority: %s", self.name, e)

    def run(self) -> None:
        try:
            self.lower_priority()
            while not self._stop_event.is_set():
                cleaned = self.owner.try_clean_filthiest_log(self)
                if not cleaned:
                    self._stop_event.wait(self.owner.config.backoff_ms / 1000.0)
                self.owner.manager.maintain_uncleanable_partitions()
        except BaseException:
            self.dead = True
            # KAFKA-7215 (KIP-346): Kafka's thread dies and only DeadThreadCount tells; tidelog counts it there
            # too, says so at ERROR and starts a replacement after log.cleaner.backoff.ms.
            logger.exception("Cleaner thread %s died; a new one starts in %d ms", self.name,
                             self.owner.config.backoff_ms)
            self.owner.replace_dead_thread(self)

    def wait_stopped(self, timeout_s: float) -> bool:
        """Sleep up to `timeout_s`; True when the thread was asked to stop meanwhile."""
        return self._stop_event.wait(timeout_s)


class LogCleaner:
    def __init__(
        self,
        config: CleanerConfig,
        log_dirs: Iterable[str | Path],
        logs: Callable[[], dict[TopicPartition, Log]],
        clock: Clock,
        checkpoint_store: Any = None,
        fault_hooks: FaultHooks = NO_FAULTS,
        has_log: Callable[[TopicPartition], bool] | None = None,
    ) -> None:
        config.validate()
        self.fault_hooks = fault_hooks
        self.config = config
        self.clock = clock
        self._logs = logs
        # Asked once per chunk by the abort check: a lookup, not a copy of every hosted log (`logs()` is one)
        self._has_log = has_log or (lambda tp: tp in logs())
        self.manager = LogCleanerManager(log_dirs, logs, clock, checkpoint_store)
        self._stop_all = threading.Event()
        self.throttler = Throttler(config.max_io_bytes_per_second, clock, self._stop_all)
        self.threads: list[CleanerThread] = []
        self._sync_thread = CleanerThread(self, -1)  # state for clean_once(); never started
        self._lock = threading.Lock()
        self._deaths_lock = threading.Lock()
        self._reconfigure_lock = threading.Lock()  # one reconfiguration at a time
        self._stopped = False  # shutdown() was called: no reconfiguration starts threads again
        self.dead_thread_count = 0  # threads that died since the threads were (re)started: DeadThreadCount
        self.summaries: list[str] = []  # the last few summary lines (for tests and tooling)
        self.history = CleaningHistory()  # the last pass per partition (GET /api/cleaner)

    def logs(self) -> dict[TopicPartition, Log]:
        """The hosted logs the cleaner looks at (compacted or not)."""
        return self._logs()

    # --- lifecycle ------------------------------------------------------------------------------------

    def startup(self) -> None:
        self._stopped = False
        self._start_threads()

    def _start_threads(self) -> None:
        with self._lock:
            if not self.config.enable_cleaner or self.threads or self._stopped:
                return
            self._stop_all.clear()
            self.dead_thread_count = 0
            self.threads = [CleanerThread(self, i) for i in range(self.config.num_threads)]
            for thread in self.threads:
                thread.start()
            logger.info("Started %d log cleaner thread(s)", len(self.threads))

    def replace_dead_thread(self, dead: CleanerThread) -> None:
        """On the dying thread: count it, then after log.cleaner.backoff.ms start a thread with its id in its
        place, unless the cleaner is stopping meanwhile (_stop_threads holds the lock while it joins us)."""
        with self._deaths_lock:
            self.dead_thread_count += 1
        if dead.wait_stopped(self.config.backoff_ms / 1000.0):
            return
        while not dead.wait_stopped(0):
            if not self._lock.acquire(timeout=0.05):
                continue
            try:
                if dead.wait_stopped(0) or dead not in self.threads:
                    return
                replacement = CleanerThread(self, dead.thread_id)
                self.threads[self.threads.index(dead)] = replacement
                replacement.start()
                logger.warning("Started %s in place of the cleaner thread that died", replacement.name)
                return
            finally:
                self._lock.release()

    def shutdown(self) -> None:
        """Prompt: wakes sleeping threads; a running pass stops at its next chunk (abort check)."""
        self._stopped = True
        self._stop_threads()

    def _stop_threads(self) -> None:
        with self._lock:
            self._stop_all.set()
            for thread in self.threads:
                thread.initiate_shutdown()
            for thread in self.threads:
                thread.join(timeout=60)
            self.threads = []
            self._stop_all.clear()  # clean_once() may still be used afterwards

    def reconfigure(self, **changes: Any) -> None:
        """Apply new log.cleaner.* values (CleanerConfig field names); any change restarts the threads (joining
        the old ones, as Kafka's LogCleaner.reconfigure: call it off the event loop)."""
        with self._reconfigure_lock:
            self._reconfigure(changes)

    def _reconfigure(self, changes: dict[str, Any]) -> None:
        new = replace(self.config, **changes)
        if new == self.config:
            return
        new.validate()
        if new.num_threads != self.config.num_threads:
            current = self.config.num_threads
            if new.num_threads < 1 or not current / 2 <= new.num_threads <= current * 2:
                raise ValueError(f"log.cleaner.threads must stay in [{current / 2}, {current * 2}] and >= 1")
        running = bool(self.threads)
        self._stop_threads()
        self.config = new
        self.throttler = Throttler(new.max_io_bytes_per_second, self.clock, self._stop_all)
        self._sync_thread = CleanerThread(self, -1)
        if running:
            self._start_threads()

    def new_cleaner(self, thread_id: int) -> Cleaner:
        offset_map = SkimpyOffsetMap(self.config.memory_per_thread, self.config.dedupe_buffer_load_factor)
        return Cleaner(
            thread_id,
            offset_map,
            self.config.io_buffer_per_thread,
            self.config.max_message_size,
            self.throttler,
            self.clock,
            self._check_done,
            self.fault_hooks,
        )

    def _check_done(self, tp: TopicPartition) -> None:
        if self._stop_all.is_set():
            raise LogCleaningAbortedError(f"{tp}: cleaner shutting down")
        if not self._has_log(tp):
            raise LogCleaningAbortedError(f"{tp}: the partition was deleted")
        self.manager.check_cleaning_aborted(tp)

    # --- one round ------------------------------------------------------------------------------------

    def clean_once(self) -> bool:
        """One round on the calling thread: clean the filthiest log (if any is eligible) and apply retention
        to compacted logs. Returns whether a log was cleaned."""
        return self.try_clean_filthiest_log(self._sync_thread)

    def try_clean_filthiest_log(self, thread: CleanerThread) -> bool:
        cleanable = None
        try:
            cleanable = self.manager.grab_filthiest_compacted_log()
            if cleanable is None:
                return False
            thread.last_compaction_delay_ms = cleanable.compaction_delay_ms
            try:
                self._clean_log(thread, cleanable)
            except BaseException:
                # the error kills the thread (KAFKA-7215): its replacement must find the log cleanable again
                self.manager.cleaning_aborted(cleanable.topic_partition)
                raise
            return True
        finally:
            deletable = self.manager.deletable_logs()
            try:
                now = self.clock.milliseconds()
                for tp, log in deletable:
                    try:
                        delete_old_segments(log, now)
                    except Exception as e:
                        self.manager.mark_uncleanable(log, tp, f"retention failed: {e!r}")
            finally:
                self.manager.done_deleting([tp for tp, _ in deletable])

    def _clean_log(self, thread: CleanerThread, cleanable: LogToClean) -> None:
        tp = cleanable.topic_partition
        log = cleanable.log
        try:
            cleaner = thread.get_cleaner()
            end_offset, stats = cleaner.clean(cleanable)
        except LogCleaningAbortedError:
            logger.info("Cleaning of %s aborted", tp)
            self.manager.cleaning_aborted(tp)
            return
        except Exception as e:
            if not self._has_log(tp):  # deleted under our feet: its files were closed; nothing to mark
                logger.info("Cleaning of %s stopped: the partition was deleted", tp)
                self.manager.cleaning_aborted(tp)
                return
            # Kafka marks the partition uncleanable and keeps serving the others.
            self.manager.mark_uncleanable(log, tp, f"cleaning failed: {e!r}")
            logger.exception("Cleaning of %s failed", tp)
            self.manager.cleaning_aborted(tp)
            return
        thread.last_stats = stats
        summary = stats.summary(f"{tp.topic}-{tp.partition}", cleanable.first_dirty_offset, end_offset)
        logger.info(summary)
        self.summaries = (self.summaries + [summary])[-20:]
        self.history.record(tp, self.clock.milliseconds(), cleanable.first_dirty_offset, end_offset, stats)
        self.fault_hooks.at(FaultPoint.BEFORE_CHECKPOINT, tp)
        self.manager.done_cleaning(tp, log_dir_of(log), end_offset)

    # --- hooks for LogManager-style callers ----------------------------------------------------------------

    def abort_cleaning(self, tp: TopicPartition) -> None:
        self.manager.abort_cleaning(tp)

    def abort_and_pause_cleaning(self, tp: TopicPartition) -> None:
        self.manager.abort_and_pause_cleaning(tp)

    def resume_cleaning(self, tps: Iterable[TopicPartition]) -> None:
        self.manager.resume_cleaning(tps)

    def remove_partition(self, tp: TopicPartition, log_dir: Path) -> None:
        """Call when a partition is deleted: aborts its cleaning and drops its checkpoint entry."""
        self.manager.abort_cleaning(tp)
        self.manager.remove_partition(tp, log_dir)
        self.history.forget(tp)

    # --- metrics (Kafka's LogCleaner gauges) --------------------------------------------------------------------------------------

    def _stats_threads(self) -> list[CleanerThread]:
        return [*self.threads, self._sync_thread]

    def metrics(self) -> dict[str, float]:
        stats = [t.last_stats for t in self._stats_threads() if t.last_stats is not None]
        read = sum(s.bytes_read for s in stats)
        written = sum(s.bytes_written for s in stats)
        return {
            "max-buffer-utilization-percent": max((int(100 * s.buffer_utilization) for s in stats), default=0),
            "cleaner-recopy-percent": int(100 * written / max(read, 1)),
            "max-clean-time-secs": max((int(s.elapsed_secs) for s in stats), default=0),
            "max-compaction-delay-secs": max(
                (t.last_compaction_delay_ms // 1000 for t in self._stats_threads()), default=0),
            "DeadThreadCount": self.dead_thread_count,
            "max-dirty-percent": int(100 * self.manager.dirtiest_log_cleanable_ratio),
            "time-since-last-run-ms": self.clock.milliseconds() - self.manager.time_of_last_run,
        }

    def uncleanable_metrics(self) -> dict[str, tuple[int, int]]:
        """logDirectory -> (uncleanable-partitions-count, uncleanable-bytes)."""
        out = {str(d): (0, 0) for d in self.manager.log_dirs}
        for d, tps in self.manager.uncleanable_partitions.items():
            out[str(d)] = (len(tps), self.manager.uncleanable_bytes.get(d, 0))
        return out
