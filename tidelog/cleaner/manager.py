"""Which log to clean next, cleaning states and the cleaner checkpoints (Kafka's LogCleanerManager),
docs/STORAGE.md "Choosing what to clean", "Cleaner checkpoint"."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidelog.cleaner.cleaner import LogCleaningAbortedError, LogToClean
from tidelog.clock import Clock
from tidelog.storage import TopicPartition
from tidelog.storage.checkpoints import CLEANER_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile

if TYPE_CHECKING:
    from tidelog.storage.log import Log

logger = logging.getLogger(__name__)

IN_PROGRESS = "in-progress"
ABORTED = "aborted"
PAUSED = "paused"


@dataclass(slots=True)
class OffsetsToClean:
    first_dirty_offset: int
    first_uncleanable_dirty_offset: int
    force_update_checkpoint: bool = False


def log_dir_of(log: Log) -> Path:
    return Path(log.dir).parent


def cleanable_offsets(log: Log, last_clean_offset: int | None, now: int) -> OffsetsToClean:
    """[first dirty, first uncleanable) of a log (Kafka's LogCleanerManager.cleanableOffsets)."""
    log_start = log.log_start_offset
    force = False
    if last_clean_offset is None:
        first_dirty = log_start
    elif last_clean_offset < log_start or last_clean_offset > log.log_end_offset:
        logger.warning("Resetting first dirty offset of %s to log start offset %d since the checkpointed "
                       "offset %d is invalid", log.topic_partition, log_start, last_clean_offset)
        first_dirty = log_start
        force = True
    else:
        first_dirty = last_clean_offset
    bounds = uncleanable_bounds(log, first_dirty, now)
    return OffsetsToClean(first_dirty, max(first_dirty, min(bounds.values())), force)


def uncleanable_bounds(log: Log, first_dirty: int, now: int) -> dict[str, int]:
    """Each rule's offset the cleaner may not clean past, by rule name (Kafka's cleanableOffsets: the last stable
    offset, the active segment's base and, with min.compaction.lag.ms, the first dirty segment younger than the lag);
    the first uncleanable offset is their minimum. tidelog/cleaner/explain.py names the binding one."""
    bounds = {"last_stable_offset": log.last_stable_offset, "active_segment": log.active_segment.base_offset}
    min_lag = max(log.config.min_compaction_lag_ms, 0)
    if min_lag > 0:
        # KIP-58: segments holding a record younger than the lag stay dirty.
        for segment in log.segments.values(first_dirty)[:-1] if len(log.segments) else []:
            if segment is log.active_segment:
                break
            if segment.largest_timestamp > now - min_lag:
                bounds["min_compaction_lag"] = segment.base_offset
                break
    return bounds


def earliest_dirty_timestamp(log: Log, first_dirty_offset: int) -> int | None:
    """The earliest first-batch timestamp of the dirty non-active segments, the one max.compaction.lag.ms
    counts from (KIP-354); None when there is none."""
    segments = [s for s in log.segments.values(first_dirty_offset) if s is not log.active_segment]
    first_batch_timestamps = []
    for segment in segments:
        ts = segment.first_batch_timestamp()
        if ts > 0:
            first_batch_timestamps.append(ts)
    return min(first_batch_timestamps) if first_batch_timestamps else None


def max_compaction_delay(log: Log, first_dirty_offset: int, now: int) -> int:
    """How long the oldest dirty record has waited beyond max.compaction.lag.ms (KIP-354)."""
    earliest = earliest_dirty_timestamp(log, first_dirty_offset)
    if earliest is None:
        return 0
    clean_until = now - max(log.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


def should_clean(cleanable: LogToClean) -> bool:
    """Whether a log with bytes to clean is eligible this round (Kafka's grabFilthiestCompactedLog filter):
    max.compaction.lag.ms is due with something cleanable, or the cleanable ratio exceeds min.cleanable.dirty.ratio."""
    return ((cleanable.needs_compaction_now and cleanable.cleanable_bytes > 0)
            or cleanable.cleanable_ratio > cleanable.log.config.min_cleanable_dirty_ratio)


def calculate_cleanable_bytes(log: Log, first_dirty_offset: int, uncleanable_offset: int) -> tuple[int, int]:
    """(first uncleanable offset rounded down to a segment base, cleanable bytes), docs/STORAGE.md "Choosing what to clean"."""
    floor = log.segments.floor_segment(uncleanable_offset)
    if floor is None or floor is log.active_segment:
        first_uncleanable_segment = log.active_segment
    else:
        first_uncleanable_segment = floor
    first_uncleanable = first_uncleanable_segment.base_offset
    cleanable = sum(
        s.size for s in log.segments.values(min(first_dirty_offset, first_uncleanable), first_uncleanable)
    )
    return first_uncleanable, cleanable


def make_log_to_clean(log: Log, tp: TopicPartition, last_clean_offset: int | None, now: int) -> tuple[LogToClean,
                                                                                                  bool]:
    with log.lock:  # a consistent view of the segment list while appends roll new segments
        return _make_log_to_clean(log, tp, last_clean_offset, now)


def _make_log_to_clean(log: Log, tp: TopicPartition, last_clean_offset: int | None, now: int) -> tuple[LogToClean,
                                                                                                   bool]:
    offsets = cleanable_offsets(log, last_clean_offset, now)
    delay = max_compaction_delay(log, offsets.first_dirty_offset, now)
    first_uncleanable, cleanable_bytes = calculate_cleanable_bytes(
        log, offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset)
    clean_bytes = sum(s.size for s in log.segments.values(None, offsets.first_dirty_offset)) \
        if offsets.first_dirty_offset > 0 else 0
    cleanable = LogToClean(
        tp, log, offsets.first_dirty_offset, first_uncleanable, clean_bytes, cleanable_bytes,
        needs_compaction_now=delay > 0, compaction_delay_ms=delay,
    )
    return cleanable, offsets.force_update_checkpoint


class LogCleanerManager:
    """Shared by all cleaner threads; every method is thread-safe."""

    def __init__(self, log_dirs: Iterable[str | Path], logs: Callable[[], dict[TopicPartition, Log]],
                 clock: Clock, checkpoint_store: Any = None) -> None:
        """`checkpoint_store` (the LogManager) owns the cleaner-offset-checkpoint files when given, so that
        its own updates (partition deletion) and the cleaner's go through one lock."""
        self.log_dirs = [Path(d).resolve() for d in log_dirs]
        self._logs = logs
        self.checkpoint_store = checkpoint_store
        self.clock = clock
        self._lock = threading.Condition(threading.RLock())
        self._states: dict[TopicPartition, tuple[str, int]] = {}
        self.uncleanable_partitions: dict[Path, set[TopicPartition]] = {}
        self.checkpoints = {d: OffsetCheckpointFile(d / CLEANER_OFFSET_CHECKPOINT_FILE) for d in self.log_dirs}
        # gauges (Kafka's LogCleanerManager metrics)
        self.dirtiest_log_cleanable_ratio = 0.0
        self.time_of_last_run = clock.milliseconds()
        self.max_compaction_delay_secs = 0
        self.uncleanable_bytes: dict[Path, int] = {}
        # for tidelog/cleaner/explain.py: why each partition was marked uncleanable, and the threads whose last
        # round found nothing eligible (thread id -> that round's time), i.e. that sleep log.cleaner.backoff.ms
        self.uncleanable_reasons: dict[TopicPartition, str] = {}
        self.idle_threads: dict[int, int] = {}

    # --- checkpoints ----------------------------------------------------------------------------------

    def _checkpoint_file(self, log_dir: Path) -> OffsetCheckpointFile:
        log_dir = Path(log_dir).resolve()
        file = self.checkpoints.get(log_dir)
        if file is None:
            file = self.checkpoints[log_dir] = OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT_FILE)
        return file

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        if self.checkpoint_store is not None:
            return dict(self.checkpoint_store.cleaner_checkpoints())
        with self._lock:
            for file in list(self.checkpoints.values()):
                try:
                    out.update(file.read())
                except Exception as e:  # an unreadable checkpoint means "clean from the log start"
                    logger.warning("Failed to read cleaner checkpoint %s: %s", file.path, e)
        return out

    def update_checkpoints(self, log_dir: Path, update: tuple[TopicPartition, int] | None = None,
                           remove: TopicPartition | None = None) -> None:
        """Rewrite the directory's checkpoint; entries of partitions not hosted any more are dropped (docs/STORAGE.md "Cleaner checkpoint")."""
        if self.checkpoint_store is not None:
            # the store rewrites every dir's file with the partitions it hosts (others dropped)
            if update is not None:
                self.checkpoint_store.update_cleaner_checkpoint(update[0], update[1])
            if remove is not None:
                self.checkpoint_store.update_cleaner_checkpoint(remove, None)
            return
        with self._lock:
            file = self._checkpoint_file(log_dir)
            try:
                existing = file.read()
            except Exception:
                existing = {}
            hosted = self._logs()
            here = Path(log_dir).resolve()
            entries = {tp: off for tp, off in existing.items()
                       if tp in hosted and log_dir_of(hosted[tp]).resolve() == here}
            if update is not None:
                entries[update[0]] = update[1]
            if remove is not None:
                entries.pop(remove, None)
            file.write(entries)

    # --- choosing a log (filthiest first) ----------------------------------------------------------------------------

    def grab_filthiest_compacted_log(self, now: int | None = None) -> LogToClean | None:
        now = self.clock.milliseconds() if now is None else now
        with self._lock:
            self.time_of_last_run = now
            checkpoints = self.all_cleaner_checkpoints()
            candidates: list[LogToClean] = []
            for tp, log in self._logs().items():
                if not log.config.compact or tp in self._states or self._is_uncleanable(log, tp):
                    continue
                try:
                    cleanable, force = make_log_to_clean(log, tp, checkpoints.get(tp), now)
                    if force:
                        self.update_checkpoints(log_dir_of(log), update=(tp, cleanable.first_dirty_offset))
                except Exception as e:
                    self.mark_uncleanable(log, tp, f"failed to compute cleanable range: {e!r}")
                    continue
                if cleanable.total_bytes > 0:
                    candidates.append(cleanable)
            self.max_compaction_delay_secs = max((c.compaction_delay_ms for c in candidates), default=0) // 1000
            self.dirtiest_log_cleanable_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
            eligible = [c for c in candidates if should_clean(c)]
            if not eligible:
                self.idle_threads[threading.get_ident()] = now  # the caller backs off (explain.py reads this)
                return None
            self.idle_threads.pop(threading.get_ident(), None)
            filthiest = max(eligible, key=lambda c: c.cleanable_ratio)
            self._states[filthiest.topic_partition] = (IN_PROGRESS, 0)
            return filthiest

    def deletable_logs(self) -> list[tuple[TopicPartition, Log]]:
        """Compacted logs the cleaner thread applies retention to; each is marked in progress (Kafka's LogCleanerManager.deletableLogs)."""
        with self._lock:
            out = []
            for tp, log in self._logs().items():
                if log.config.compact and tp not in self._states and not self._is_uncleanable(log, tp):
                    self._states[tp] = (IN_PROGRESS, 0)
                    out.append((tp, log))
            return out

    def done_deleting(self, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in tps:
                state = self._states.get(tp)
                if state is None:
                    continue
                if state[0] == IN_PROGRESS:
                    del self._states[tp]
                elif state[0] == ABORTED:
                    self._states[tp] = (PAUSED, 1)
                self._lock.notify_all()

    def pause_cleaning_for_non_compacted_partitions(self) -> list[tuple[TopicPartition, Log]]:
        """For the retention task: mark every non-compacted idle log paused while it works (Kafka's pauseCleaningForNonCompactedPartitions)."""
        with self._lock:
            out = []
            for tp, log in self._logs().items():
                if not log.config.compact and tp not in self._states:
                    self._states[tp] = (PAUSED, 1)
                    out.append((tp, log))
            return out

    # --- states (LogCleaningState) ----------------------------------------------------------------------------------

    def cleaning_state(self, tp: TopicPartition) -> tuple[str, int] | None:
        with self._lock:
            return self._states.get(tp)

    def check_cleaning_aborted(self, tp: TopicPartition) -> None:
        with self._lock:
            state = self._states.get(tp)
            if state is not None and state[0] == ABORTED:
                raise LogCleaningAbortedError(str(tp))

    def abort_cleaning(self, tp: TopicPartition) -> None:
        """Abort and wait, then resume: used before a log is deleted."""
        with self._lock:
            self.abort_and_pause_cleaning(tp)
            self.resume_cleaning([tp])

    def abort_and_pause_cleaning(self, tp: TopicPartition, timeout_s: float = 60.0) -> None:
        """InProgress -> Aborted, then wait until the cleaner noticed it; the log ends up Paused(n)."""
        with self._lock:
            state = self._states.get(tp)
            if state is None:
                self._states[tp] = (PAUSED, 1)
            elif state[0] == IN_PROGRESS:
                self._states[tp] = (ABORTED, 0)
            elif state[0] == PAUSED:
                self._states[tp] = (PAUSED, state[1] + 1)
            self._lock.wait_for(lambda: self._states.get(tp, (PAUSED,))[0] == PAUSED, timeout=timeout_s)

    def resume_cleaning(self, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in tps:
                state = self._states.get(tp)
                if state is None or state[0] != PAUSED:
                    continue
                if state[1] <= 1:
                    del self._states[tp]
                else:
                    self._states[tp] = (PAUSED, state[1] - 1)

    def done_cleaning(self, tp: TopicPartition, log_dir: Path, end_offset: int) -> None:
        """Write the checkpoint of a finished pass and clear InProgress; an aborted pass becomes Paused(1)."""
        with self._lock:
            state = self._states.get(tp)
            if state is not None and state[0] == IN_PROGRESS:
                self.update_checkpoints(log_dir, update=(tp, end_offset))
                del self._states[tp]
            elif state is not None and state[0] == ABORTED:
                self._states[tp] = (PAUSED, 1)
            self._lock.notify_all()

    def cleaning_aborted(self, tp: TopicPartition) -> None:
        """The cleaner stopped on seeing Aborted (or failed): no checkpoint."""
        with self._lock:
            state = self._states.get(tp)
            if state is not None and state[0] == ABORTED:
                self._states[tp] = (PAUSED, 1)
            elif state is not None and state[0] == IN_PROGRESS:
                del self._states[tp]
            self._lock.notify_all()

    # --- uncleanable partitions ---------------------------------------------------------------------------

    def _is_uncleanable(self, log: Log, tp: TopicPartition) -> bool:
        return tp in self.uncleanable_partitions.get(log_dir_of(log).resolve(), set())

    def mark_uncleanable(self, log: Log, tp: TopicPartition, why: str) -> None:
        with self._lock:
            logger.error("Partition %s marked uncleanable: %s", tp, why)
            self.uncleanable_reasons[tp] = why
            self.uncleanable_partitions.setdefault(log_dir_of(log).resolve(), set()).add(tp)

    def is_uncleanable(self, tp: TopicPartition) -> bool:
        with self._lock:
            return any(tp in s for s in self.uncleanable_partitions.values())

    def maintain_uncleanable_partitions(self) -> None:
        """Forget uncleanable marks of partitions no longer hosted (Kafka's maintainUncleanablePartitions); refresh the bytes gauge."""
        with self._lock:
            hosted = self._logs()
            checkpoints = None
            for log_dir, tps in self.uncleanable_partitions.items():
                tps.intersection_update(hosted.keys())
                for gone in set(self.uncleanable_reasons) - set(hosted):
                    del self.uncleanable_reasons[gone]
                total = 0
                for tp in tps:
                    if checkpoints is None:
                        checkpoints = self.all_cleaner_checkpoints()
                    try:
                        cleanable, _ = make_log_to_clean(hosted[tp], tp, checkpoints.get(tp),
                                                         self.clock.milliseconds())
                        total += cleanable.cleanable_bytes
                    except Exception:  # the log is broken: that is why it is uncleanable
                        pass
                self.uncleanable_bytes[log_dir] = total

    def remove_partition(self, tp: TopicPartition, log_dir: Path) -> None:
        """A deleted partition: forget its state and checkpoint entry."""
        with self._lock:
            self._states.pop(tp, None)
            for tps in self.uncleanable_partitions.values():
                tps.discard(tp)
            self.uncleanable_reasons.pop(tp, None)
            self.update_checkpoints(log_dir, remove=tp)
            self._lock.notify_all()
