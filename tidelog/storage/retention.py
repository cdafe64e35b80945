"""Segment deletion by log start offset, size and time (Kafka's UnifiedLog.deleteOldSegments and
LogManager.cleanupLogs), docs/STORAGE.md "Retention".

`delete_old_segments(log, now)` is one pass over one log. `RetentionTask` runs it over every log whose policy
lacks `compact`, every `log.retention.check.interval.ms`; compacted logs get it from the cleaner threads.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tidelog.clock import Clock
from tidelog.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from tidelog.storage import TopicPartition
    from tidelog.storage.log import Log
    from tidelog.storage.log_segment import LogSegment

logger = logging.getLogger(__name__)

SegmentPredicate = Callable[["LogSegment", "LogSegment | None"], bool]


def deletable_segments(log: Log, predicate: SegmentPredicate) -> list[LogSegment]:
    """The longest prefix of segments that satisfy `predicate`, each entirely below the HW; an empty last
    segment never qualifies (Kafka's UnifiedLog.deletableSegments)."""
    segments = list(log.segments)
    out: list[LogSegment] = []
    for i, segment in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        upper = nxt.base_offset if nxt is not None else log.log_end_offset
        is_last_and_empty = nxt is None and segment.size == 0
        if log.high_watermark >= upper and not is_last_and_empty and predicate(segment, nxt):
            out.append(segment)
        else:
            break
    return out


def _delete(log: Log, predicate: SegmentPredicate, reason: str) -> int:
    with log.lock:
        doomed = deletable_segments(log, predicate)
        if not doomed:
            return 0
        return log.delete_segments(doomed, reason)


def delete_log_start_offset_breached_segments(log: Log) -> int:
    start = log.log_start_offset

    def breached(_segment: LogSegment, nxt: LogSegment | None) -> bool:
        return nxt is not None and nxt.base_offset <= start

    return _delete(log, breached, f"log start offset {start} breach")


def delete_retention_size_breached_segments(log: Log) -> int:
    limit = log.config.retention_bytes
    size = log.size_in_bytes()
    if limit < 0 or size < limit:
        return 0
    excess = [size - limit]

    def breached(segment: LogSegment, _nxt: LogSegment | None) -> bool:
        if excess[0] - segment.size >= 0:
            excess[0] -= segment.size
            return True
        return False

    return _delete(log, breached, f"retention size {limit} breach, log size {size}")


def delete_retention_ms_breached_segments(log: Log, now: int) -> int:
    retention_ms = log.config.retention_ms
    if retention_ms < 0:
        return 0

    def breached(segment: LogSegment, _nxt: LogSegment | None) -> bool:
        return now - segment.largest_timestamp > retention_ms

    return _delete(log, breached, f"retention time {retention_ms}ms breach")


def delete_old_segments(log: Log, now: int) -> int:
    """One retention pass over one log: log-start breach always, size and time only with `delete`."""
    if log.config.delete:
        return (
            delete_log_start_offset_breached_segments(log)
            + delete_retention_size_breached_segments(log)
            + delete_retention_ms_breached_segments(log, now)
        )
    return delete_log_start_offset_breached_segments(log)


def delete_records(log: Log, offset: int) -> int:
    """DeleteRecords on one log: raise the log start offset (≤ HW), then drop the segments wholly below it.
    Returns the new log start offset. Raises KafkaError(POLICY_VIOLATION / OFFSET_OUT_OF_RANGE)."""
    if not log.config.delete:
        raise KafkaError(ErrorCode.POLICY_VIOLATION,
                         f"Records of partition {log.topic_partition} can not be deleted due to the configured "
                         "policy")
    with log.lock:
        target = log.high_watermark if offset == -1 else offset  # -1 means "up to the high watermark"
        if target < 0 or target > log.high_watermark:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"Cannot increment the log start offset to {offset} of partition "
                             f"{log.topic_partition} since it is larger than the high watermark "
                             f"{log.high_watermark}")
        log.maybe_increment_log_start_offset(target, "client delete records request")
        start = log.log_start_offset
    if not log.config.compact:
        # Compacted logs get their segment deletions from the cleaner threads only (Kafka), so that a
        # deletion never races a cleaning pass over the same segments.
        delete_log_start_offset_breached_segments(log)
    return start


class RetentionTask:
    """Kafka's `kafka-log-retention` scheduled task, on its own daemon thread.

    `cleaner` (a LogCleaner or None) pauses every non-compacted log while the task works on it, so that a
    policy switch cannot let the cleaner and this task touch one log at once."""

    TICK_S = 1.0

    def __init__(self, logs: Callable[[], dict[TopicPartition, Log]], clock: Clock, interval_ms: int,
                 cleaner: Any = None, tick: Callable[[], Any] | None = None) -> None:
        """`tick` runs every second on the same thread (the LogManager's delayed file deletions)."""
        self._logs = logs
        self.clock = clock
        self.interval_ms = interval_ms
        self.cleaner = cleaner
        self.tick = tick
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_run_ms = clock.milliseconds()

    def cleanup_logs(self) -> int:
        """One pass (Kafka's LogManager.cleanupLogs); returns the number of segments deleted."""
        now = self.clock.milliseconds()
        manager = getattr(self.cleaner, "manager", None)
        if manager is not None:
            to_clean = manager.pause_cleaning_for_non_compacted_partitions()
        else:
            to_clean = [(tp, log) for tp, log in self._logs().items() if not log.config.compact]
        total = 0
        try:
            for tp, log in to_clean:
                try:
                    total += delete_old_segments(log, now)
                except Exception:  # one bad log must not stop retention of the others
                    logger.exception("Retention failed for %s", tp)
        finally:
            if manager is not None:
                manager.resume_cleaning([tp for tp, _ in to_clean])
        if total:
            logger.info("Log retention deleted %d segment(s)", total)
        return total

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="kafka-log-retention", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(min(self.TICK_S, self.interval_ms / 1000.0)):
            try:
                if self.tick is not None:
                    self.tick()
                now = self.clock.milliseconds()
                if now - self._last_run_ms >= self.interval_ms:
                    self._last_run_ms = now
                    self.cleanup_logs()
            except Exception:
                logger.exception("Log retention pass failed")

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
