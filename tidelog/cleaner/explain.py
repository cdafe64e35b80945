"""Why each compacted partition is (not) being cleaned: GET /api/cleaner, `tidelog cleaner status|explain` and
the per-partition Prometheus gauges (docs/STORAGE.md "Choosing what to clean", README "Compaction").

The figures come from the LogCleanerManager's own functions (make_log_to_clean, uncleanable_bounds, should_clean,
earliest_dirty_timestamp), so an explanation cannot disagree with what the next cleaner round decides. It runs on
the HTTP server's request thread, never on the event loop; it takes each log's lock only as long as the cleaner's
own choice does, and the manager's lock only to read a partition's state.

`blocked_by` is the first that applies, in this order (precedence):

1. `cleaner_disabled`: log.cleaner.enable=false or log.cleaner.threads=0, no cleaner thread alive, or cleaning of
   this partition paused (a retention pass, a truncation, a deletion or a log-dir move holds it).
2. `uncleanable`: an earlier pass failed (e.g. a corrupt segment); only a restart or moving/deleting the
   partition clears it (Kafka's LogCleanerManager.uncleanablePartitions).
3. a pass over it is running: `throttled` while log.cleaner.io.max.bytes.per.second holds the threads asleep,
   else `none`.
4. eligible now (Kafka's grabFilthiestCompactedLog filter): `cleaner_backoff` when every cleaner thread sleeps
   log.cleaner.backoff.ms after a round that found nothing, else `none` (the next free thread takes the filthiest).
5. not eligible, with dirty bytes: if the partition would be eligible were every dirty byte cleanable (its dirty
   bytes up to the log end over clean+dirty exceed min.cleanable.dirty.ratio, or max.compaction.lag.ms is due),
   the rule that cuts the cleanable range is the cause: `active_segment`, `open_transaction` (the last stable
   offset) or `min_compaction_lag` — the one with the lowest offset; on a tie the active segment, then the
   transaction, then the lag (which lifts by itself). Otherwise `below_min_dirty_ratio`.
6. `none`: nothing dirty.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tidelog.cleaner.manager import (
    ABORTED,
    IN_PROGRESS,
    PAUSED,
    earliest_dirty_timestamp,
    make_log_to_clean,
    should_clean,
    uncleanable_bounds,
)
from tidelog.cleaner.stats import LastCleaning
from tidelog.config.log_config import LONG_MAX
from tidelog.storage import TopicPartition

if TYPE_CHECKING:
    from tidelog.cleaner.cleaner import LogToClean
    from tidelog.cleaner.log_cleaner import LogCleaner
    from tidelog.storage.log import Log

BLOCKED_BY = ("none", "active_segment", "min_compaction_lag", "open_transaction", "below_min_dirty_ratio",
              "cleaner_backoff", "throttled", "uncleanable", "cleaner_disabled")
# a rule of uncleanable_bounds -> its blocked_by, in tie order
_BOUND_REASONS = (("active_segment", "active_segment"), ("last_stable_offset", "open_transaction"),
                  ("min_compaction_lag", "min_compaction_lag"))


@dataclass(slots=True)
class PartitionCleaning:
    """One element of GET /api/cleaner."""

    topic: str
    partition: int
    dirty_ratio: float  # Kafka's cleanable ratio: cleanable / (clean + cleanable), the figure min.cleanable.dirty.ratio gates
    clean_bytes: int
    dirty_bytes: int  # from the first dirty offset to the log end, the active segment included
    cleanable_bytes: int  # the part of dirty_bytes below first_uncleanable_offset
    first_dirty_offset: int
    first_uncleanable_offset: int  # where the next pass would stop (a segment base)
    log_end_offset: int
    blocked_by: str
    blocked_until_ms: int | None
    max_compaction_lag_due_ms: int | None
    last_cleaned_ms: int | None
    last_cleaning: dict[str, Any] | None  # records_read/retained, bytes_read/written, seconds, offsets
    explanation: str  # one sentence: what holds compaction back and what would release it

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _FIELDS}  # dataclasses.asdict deep-copies: 10x slower


_FIELDS = tuple(f.name for f in fields(PartitionCleaning))
_LAST_FIELDS = tuple(f.name for f in fields(LastCleaning) if f.name != "finished_ms")


@dataclass(slots=True)
class _CleanerView:
    """The broker-wide part of the decision, read once per request."""

    disabled_why: str | None
    backoff_until_ms: int | None  # every live thread sleeps in backoff until then (the earliest wakes first)
    backoff_ms: int
    throttled_until_ms: int | None
    max_io_bytes_per_second: float

    @classmethod
    def of(cls, cleaner: LogCleaner) -> _CleanerView:
        config = cleaner.config
        threads = list(cleaner.threads)
        live = [t for t in threads if t.is_alive() and not t.dead]
        disabled_why = None
        if not config.enable_cleaner:
            disabled_why = "the log cleaner is disabled (log.cleaner.enable=false); enable it and restart the broker"
        elif config.num_threads < 1:
            disabled_why = "log.cleaner.threads is 0; raise it"
        elif not live:
            dead = sum(1 for t in threads if t.dead)
            disabled_why = (f"no cleaner thread is alive ({dead} died, see DeadThreadCount and the broker log)" if dead
                            else "the cleaner threads are not running (the broker is starting or stopping)")
        idle = dict(cleaner.manager.idle_threads)
        backoff_until = None
        if live and all(t.ident in idle for t in live):
            backoff_until = min(idle[t.ident] for t in live if t.ident is not None) + config.backoff_ms
        return cls(disabled_why, backoff_until, config.backoff_ms, cleaner.throttler.throttled_until_ms,
                   config.max_io_bytes_per_second)


def cleaner_status(cleaner: LogCleaner, now: int | None = None) -> list[PartitionCleaning]:
    """One PartitionCleaning per hosted compacted partition, sorted by topic and partition."""
    now = cleaner.clock.milliseconds() if now is None else now
    view = _CleanerView.of(cleaner)
    checkpoints = cleaner.manager.all_cleaner_checkpoints()
    out = []
    for tp, log in sorted(cleaner.logs().items()):
        if not log.config.compact:
            continue
        try:
            out.append(_explain(cleaner, view, tp, log, checkpoints.get(tp), now))
        except Exception as e:  # noqa: BLE001 - a deleted or closing log: report it, never fail the request
            out.append(_unreadable(tp, log, e))
    return out


def _explain(cleaner: LogCleaner, view: _CleanerView, tp: TopicPartition, log: Log, checkpoint: int | None,
             now: int) -> PartitionCleaning:
    manager = cleaner.manager
    with log.lock:  # one consistent view of the segments, as the cleaner's own choice takes
        cleanable, _ = make_log_to_clean(log, tp, checkpoint, now)
        first_dirty = cleanable.first_dirty_offset
        bounds = uncleanable_bounds(log, first_dirty, now)
        dirty_bytes = sum(s.size for s in log.segments.values(first_dirty))
        earliest = earliest_dirty_timestamp(log, first_dirty)
        facts = _Facts(log, cleanable, bounds, dirty_bytes, earliest, now)
    state = manager.cleaning_state(tp)
    uncleanable_why = manager.uncleanable_reasons.get(tp) if manager.is_uncleanable(tp) else None
    reason, until, sentence = _decide(view, state, uncleanable_why, facts)
    last = cleaner.history.get(tp)
    return PartitionCleaning(
        tp.topic, tp.partition, round(cleanable.cleanable_ratio, 6), cleanable.clean_bytes, dirty_bytes,
        cleanable.cleanable_bytes, first_dirty, cleanable.first_uncleanable_offset, log.log_end_offset,
        reason, until, facts.max_lag_due_ms, last.finished_ms if last else None,
        None if last is None else {name: getattr(last, name) for name in _LAST_FIELDS},
        f"{tp.topic}-{tp.partition}: {sentence}.")


class _Facts:
    """What the decision needs from one log, gathered under its lock."""

    def __init__(self, log: Log, cleanable: LogToClean, bounds: dict[str, int], dirty_bytes: int,
                 earliest_dirty_ms: int | None, now: int) -> None:
        config = log.config
        self.cleanable = cleanable
        self.bounds = bounds
        self.dirty_bytes = dirty_bytes
        self.now = now
        self.min_ratio = config.min_cleanable_dirty_ratio
        self.min_lag_ms = max(config.min_compaction_lag_ms, 0)
        self.max_lag_ms = max(config.max_compaction_lag_ms, 0)
        self.max_lag_due_ms = (earliest_dirty_ms + self.max_lag_ms
                               if earliest_dirty_ms is not None and self.max_lag_ms < LONG_MAX // 2 else None)
        self.log_end_offset = log.log_end_offset
        active = log.active_segment
        self.active_base = active.base_offset
        self.active_size = active.size
        self.segment_bytes = config.segment_bytes
        # a compacted log rolls at min(segment.ms, max.compaction.lag.ms) after its first batch (Log._maybe_roll)
        self.roll_ms = min(config.segment_ms, config.max_compaction_lag_ms)
        first_ts = active.first_batch_timestamp() if active.size else -1
        self.roll_after_ms = (first_ts + self.roll_ms - active.roll_jitter_ms
                              if first_ts >= 0 and self.roll_ms < LONG_MAX // 2 else None)
        lag_base = bounds.get("min_compaction_lag")
        lag_segment = log.segments.get(lag_base) if lag_base is not None else None
        self.lag_lifts_ms = lag_segment.largest_timestamp + self.min_lag_ms if lag_segment is not None else None
        self.txn = None
        lso = bounds["last_stable_offset"]
        for producer in log.active_producers():
            if producer.current_txn_start_offset is not None and producer.current_txn_start_offset == lso:
                self.txn = (producer.producer_id, producer.producer_epoch)


def _decide(view: _CleanerView, state: tuple[str, int] | None, uncleanable_why: str | None,
            f: _Facts) -> tuple[str, int | None, str]:
    """(blocked_by, blocked_until_ms, sentence) by the module docstring's precedence."""
    c = f.cleanable
    if view.disabled_why is not None:
        return "cleaner_disabled", None, f"not cleaned: {view.disabled_why}"
    if state is not None and state[0] in (PAUSED, ABORTED):
        return ("cleaner_disabled", None, "cleaning is paused for this partition (a retention pass, truncation, "
                "deletion or log-dir move holds it); it resumes when that finishes")
    if uncleanable_why is not None:
        return ("uncleanable", None, f"marked uncleanable after a failed pass ({uncleanable_why}); it stays so "
                "until the broker restarts or the partition is deleted or moved: repair or remove the damaged "
                "segment first")
    eligible = c.total_bytes > 0 and should_clean(c)
    # IN_PROGRESS also marks every compacted log while a thread applies retention to them: only an eligible
    # log can be the one a thread took for cleaning
    if state is not None and state[0] == IN_PROGRESS and eligible:
        if view.throttled_until_ms is not None:
            return ("throttled", view.throttled_until_ms, f"being cleaned, held back by "
                    f"log.cleaner.io.max.bytes.per.second={view.max_io_bytes_per_second:g} until "
                    f"{_when(view.throttled_until_ms)}; raise that limit to go faster")
        return "none", None, f"being cleaned now (offsets {c.first_dirty_offset}-{c.first_uncleanable_offset - 1})"
    if eligible:
        why = _eligible_why(f)
        if view.backoff_until_ms is not None:
            return ("cleaner_backoff", view.backoff_until_ms, f"{why}; the cleaner threads found nothing to do in "
                    f"their last round and back off (log.cleaner.backoff.ms={view.backoff_ms}) until "
                    f"{_when(view.backoff_until_ms)}")
        return "none", None, f"{why}; the next free cleaner thread takes it"
    if f.dirty_bytes == 0:
        done = f"offsets below {c.first_dirty_offset} are compacted" if f.log_end_offset else "the log is empty"
        return "none", None, f"nothing to clean: {done}"
    total = c.clean_bytes + f.dirty_bytes
    if f.dirty_bytes / total > f.min_ratio or c.needs_compaction_now:
        return _held_back(f)
    return _below_ratio(f, total)


def _eligible_why(f: _Facts) -> str:
    c = f.cleanable
    if c.cleanable_ratio > f.min_ratio:
        return (f"eligible: dirty ratio {c.cleanable_ratio:.2f} is above min.cleanable.dirty.ratio {f.min_ratio:g} "
                f"(offsets {c.first_dirty_offset}-{c.first_uncleanable_offset - 1} cleanable)")
    return f"eligible: max.compaction.lag.ms={f.max_lag_ms} is due ({c.compaction_delay_ms} ms overdue)"


def _held_back(f: _Facts) -> tuple[str, int | None, str]:
    """The rule with the lowest offset (ties in _BOUND_REASONS order) is what stops the cleanable range."""
    lowest = min(f.bounds.values())
    name, reason = next((n, r) for n, r in _BOUND_REASONS if f.bounds.get(n) == lowest)
    held = f"offsets {max(lowest, f.cleanable.first_dirty_offset)}-{f.log_end_offset - 1}"
    if reason == "active_segment":
        when = (f", or at the first append timestamped after {_when(f.roll_after_ms)} (segment.ms, capped by "
                f"max.compaction.lag.ms: {f.roll_ms} ms)" if f.roll_after_ms is not None else "")
        return (reason, None, f"{held} wait in the active segment (base {f.active_base}), which is never cleaned; "
                f"it rolls when an append would take it past segment.bytes={f.segment_bytes} (it holds "
                f"{f.active_size}){when}")
    if reason == "open_transaction":
        who = f"producer {f.txn[0]} epoch {f.txn[1]}" if f.txn is not None else "a producer"
        return (reason, None, f"an open transaction of {who} pins the last stable offset at {lowest}, so {held} "
                "wait; they become cleanable when it commits or aborts (or times out)")
    return (reason, f.lag_lifts_ms, f"{held} include records younger than min.compaction.lag.ms={f.min_lag_ms} "
            f"(from segment {lowest}); that segment becomes cleanable at {_when(f.lag_lifts_ms)}")


def _below_ratio(f: _Facts, total: int) -> tuple[str, int | None, str]:
    c = f.cleanable
    ratio = f.dirty_bytes / total
    if f.min_ratio >= 1:
        more = "min.cleanable.dirty.ratio=1 never triggers cleaning"
    else:
        needed = int((f.min_ratio * total - f.dirty_bytes) / (1 - f.min_ratio)) + 1
        more = f"about {needed} more dirty bytes outside the active segment would pass it"
    until = f.max_lag_due_ms if c.cleanable_bytes > 0 else None
    lag = (f", and max.compaction.lag.ms={f.max_lag_ms} forces a pass at {_when(f.max_lag_due_ms)}"
           if f.max_lag_due_ms is not None else "")
    return ("below_min_dirty_ratio", until, f"dirty ratio {ratio:.2f} ({f.dirty_bytes} of {total} bytes from "
            f"offset {c.first_dirty_offset}) is not above min.cleanable.dirty.ratio {f.min_ratio:g}; {more}{lag}")


def _unreadable(tp: TopicPartition, log: Log, e: Exception) -> PartitionCleaning:
    return PartitionCleaning(tp.topic, tp.partition, 0.0, 0, 0, 0, -1, -1, -1, "uncleanable", None, None, None,
                             None, f"{tp.topic}-{tp.partition}: its cleanable range cannot be computed ({e!r}).")


def _when(ms: int | None) -> str:
    if ms is None:
        return "an unknown time"
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class StatusSnapshots:
    """cleaner_status() for the HTTP endpoint and the Prometheus scrape: one computation at a time, and callers
    within MIN_INTERVAL_S of the last one share its result, so a burst of requests costs the broker (whose GIL the
    request thread shares with the event loop) at most one computation per interval. bench/cleaner_explain.py
    measures it."""

    MIN_INTERVAL_S = 0.5

    def __init__(self, cleaner: LogCleaner) -> None:
        self.cleaner = cleaner
        self._lock = threading.Lock()
        self._rows: list[PartitionCleaning] = []
        self._body: bytes | None = None
        self._computed_at: float | None = None

    def rows(self) -> list[PartitionCleaning]:
        with self._lock:
            return self._fresh()

    def _fresh(self) -> list[PartitionCleaning]:
        if self._computed_at is None or time.monotonic() - self._computed_at >= self.MIN_INTERVAL_S:
            self._rows = cleaner_status(self.cleaner)
            self._body = None
            self._computed_at = time.monotonic()
        return self._rows

    def json_body(self) -> bytes:
        """The GET /api/cleaner body (a JSON array), encoded once per computation."""
        with self._lock:
            rows = self._fresh()
            if self._body is None:
                self._body = json.dumps([p.to_json() for p in rows]).encode()
            return self._body
