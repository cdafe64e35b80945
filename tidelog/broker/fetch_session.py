"""Incremental fetch sessions (KIP-227), as Kafka's FetchSession.scala: FetchSessionCache, FetchSession,
CachedPartition and the three fetch contexts.

* A full fetch (epoch 0) may create a session; its response carries the new session id (0 when the cache
  is full and nothing may be evicted). Epoch -1 with no session is a sessionless fetch.
* An incremental fetch (session id, epoch > 0) names only partitions whose fetch position changed, plus
  forgotten ones; the broker reads every partition of the session and answers only those with news:
  records, a changed high watermark / last stable offset / log start offset, or an error.
* Partitions returned by an incremental fetch move to the end of the session, so a partition whose data
  filled the response does not starve the others (Kafka's partition rotation).
* Eviction (FetchSessionCache.tryEvict): a session unused for `min.incremental.fetch.session.eviction.ms`
  goes first; otherwise a new session may push out the smallest evictable one if it is at least as large.
  Privileged (follower) sessions younger than the eviction threshold are evictable only by privileged ones.

Everything runs on the event loop thread, so no locking is needed.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tidelog.clock import Clock
from tidelog.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from tidelog.broker.metrics import BrokerMetrics

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
FETCH_SESSION_TOPIC_ID_ERROR = ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
DEFAULT_CACHE_SLOTS = 1000  # max.incremental.fetch.session.cache.slots
DEFAULT_EVICTION_MS = 120_000  # min.incremental.fetch.session.eviction.ms


def next_epoch(epoch: int) -> int:
    """JFetchMetadata.nextEpoch: epochs wrap from INT32_MAX back to 1, never to 0 or -1."""
    return 1 if epoch >= 2**31 - 1 else epoch + 1


PartitionKey = tuple[Any, int]  # (topic name, or topic id for v13+ sessions; partition index)


class CachedPartition:
    """One partition of a session: the client's last fetch parameters and what it was last told."""

    __slots__ = ("topic_key", "name", "partition", "fetch_offset", "partition_max_bytes",
                 "current_leader_epoch", "log_start_offset", "last_fetched_epoch", "high_watermark",
                 "last_stable_offset", "local_log_start_offset")

    def __init__(self, topic_key: Any, name: str | None, request: Any) -> None:
        self.topic_key = topic_key
        self.name = name
        self.partition: int = request.partition
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.local_log_start_offset = -1
        self.update_request_params(request)

    def update_request_params(self, request: Any) -> None:
        self.fetch_offset: int = request.fetch_offset
        self.partition_max_bytes: int = request.partition_max_bytes
        self.current_leader_epoch: int = getattr(request, "current_leader_epoch", -1)
        self.log_start_offset: int = getattr(request, "log_start_offset", -1)
        self.last_fetched_epoch: int = getattr(request, "last_fetched_epoch", -1)

    @property
    def key(self) -> PartitionKey:
        return self.topic_key, self.partition

    def maybe_update_response_data(self, error: int, records_size: int, high_watermark: int,
                                   last_stable_offset: int, log_start_offset: int) -> bool:
        """Record what the response tells the client; True if an incremental response must include it."""
        must_respond = records_size > 0 or error != ErrorCode.NONE
        if self.high_watermark != high_watermark:
            must_respond = True
            self.high_watermark = high_watermark
        if self.last_stable_offset != last_stable_offset:
            must_respond = True
            self.last_stable_offset = last_stable_offset
        if self.local_log_start_offset != log_start_offset:
            must_respond = True
            self.local_log_start_offset = log_start_offset
        return must_respond


@dataclass(eq=False)
class FetchSession:
    id: int
    privileged: bool
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    partitions: dict[PartitionKey, CachedPartition] = field(default_factory=dict)  # insertion order = rotation
    cached_size: int = -1  # the size the cache last accounted for

    @property
    def size(self) -> int:
        return len(self.partitions)

    def update(self, fetch_data: Iterable[tuple[Any, str | None, Any]],
               to_forget: Iterable[PartitionKey]) -> tuple[int, int, int]:
        """Apply an incremental request: (added, updated, removed) counts."""
        added = updated = removed = 0
        for topic_key, name, request in fetch_data:
            key = (topic_key, request.partition)
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = CachedPartition(topic_key, name, request)
                added += 1
            else:
                cached.update_request_params(request)
                updated += 1
        for key in to_forget:
            if self.partitions.pop(key, None) is not None:
                removed += 1
        return added, updated, removed

    def move_to_end(self, key: PartitionKey) -> None:
        cached = self.partitions.pop(key, None)
        if cached is not None:
            self.partitions[key] = cached


class FetchSessionCache:
    """Kafka's FetchSessionCache: at most `max_entries` sessions (max.incremental.fetch.session.cache.slots)."""

    def __init__(self, clock: Clock, max_entries: int = DEFAULT_CACHE_SLOTS,
                 eviction_ms: int = DEFAULT_EVICTION_MS, rng: random.Random | None = None) -> None:
        self.clock = clock
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self._rng = rng or random.Random()
        self.sessions: dict[int, FetchSession] = {}
        self.num_partitions = 0  # NumIncrementalFetchPartitionsCached
        self.evictions = 0  # IncrementalFetchSessionEvictionsPerSec, as a total

    # --- Kafka's gauges -------------------------------------------------------------------------------
    @property
    def num_incremental_fetch_sessions(self) -> int:
        return len(self.sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def _new_session_id(self) -> int:
        while True:
            candidate = self._rng.randint(1, 2**31 - 1)
            if candidate not in self.sessions:
                return candidate

    def maybe_create_session(self, privileged: bool, size: int, uses_topic_ids: bool,
                             partitions: Callable[[], dict[PartitionKey, CachedPartition]]) -> int:
        """A new session's id, or INVALID_SESSION_ID if there is no room for it."""
        now = self.clock.monotonic_ms()
        if self.max_entries <= 0:
            return INVALID_SESSION_ID
        if len(self.sessions) >= self.max_entries and not self._try_evict(privileged, size, now):
            return INVALID_SESSION_ID
        session = FetchSession(self._new_session_id(), privileged, uses_topic_ids, now, now, next_epoch(INITIAL_EPOCH),
                               partitions())
        self.sessions[session.id] = session
        self.touch(session, now)
        return session.id

    def _evictable(self, session: FetchSession, by_privileged: bool, now: int) -> bool:
        # A young privileged session is protected from unprivileged newcomers (evictableByAll excludes it).
        return by_privileged or not (session.privileged and now - session.creation_ms < self.eviction_ms)

    def _try_evict(self, privileged: bool, size: int, now: int) -> bool:
        stalest = min(self.sessions.values(), key=lambda s: s.last_used_ms)
        if now - stalest.last_used_ms > self.eviction_ms:
            self.remove(stalest.id)
            self.evictions += 1
            return True
        candidates = [s for s in self.sessions.values() if self._evictable(s, privileged, now)]
        if not candidates:
            return False
        # EvictableKey order: privileged first, then size, then id; the newcomer's key has id 0, so it must
        # be strictly more valuable than an equal-sized session to evict it.
        victim = min(candidates, key=lambda s: (s.privileged, s.size, s.id))
        if (privileged, size, 0) < (victim.privileged, victim.size, victim.id):
            return False
        self.remove(victim.id)
        self.evictions += 1
        return True

    def touch(self, session: FetchSession, now: int) -> None:
        """Mark the session used now and account for its current size."""
        session.last_used_ms = now
        if session.cached_size >= 0:
            self.num_partitions -= session.cached_size
        session.cached_size = session.size
        self.num_partitions += session.cached_size

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None and session.cached_size >= 0:
            self.num_partitions -= session.cached_size
            session.cached_size = -1
        return session


@dataclass(slots=True)
class FetchContext:
    """What a Fetch request means for sessions (Kafka's FetchContext subclasses, by `kind`)."""

    kind: str  # "sessionless" | "full" | "incremental" | "error"
    error: int = ErrorCode.NONE
    session: FetchSession | None = None
    uses_topic_ids: bool = False
    privileged: bool = False


def new_context(cache: FetchSessionCache, session_id: int, epoch: int, uses_topic_ids: bool, privileged: bool,
                fetch_data: list[tuple[Any, str | None, Any]], to_forget: list[PartitionKey]) -> FetchContext:
    """FetchManager.newContext."""
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full request
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)  # a full request closes the session it names
        if epoch == FINAL_EPOCH:
            return FetchContext("sessionless", uses_topic_ids=uses_topic_ids)
        return FetchContext("full", uses_topic_ids=uses_topic_ids, privileged=privileged)
    session = cache.get(session_id)
    if session is None:
        return FetchContext("error", ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    if session.epoch != epoch:
        return FetchContext("error", ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    if session.uses_topic_ids != uses_topic_ids:
        return FetchContext("error", FETCH_SESSION_TOPIC_ID_ERROR)
    session.update(fetch_data, to_forget)
    if not session.partitions:
        # Kafka closes a session that no longer holds any partition and answers sessionless
        cache.remove(session.id)
        return FetchContext("sessionless", uses_topic_ids=uses_topic_ids)
    cache.touch(session, cache.clock.monotonic_ms())
    session.epoch = next_epoch(session.epoch)
    return FetchContext("incremental", session=session, uses_topic_ids=uses_topic_ids)


class FetchSessionCacheCollector:
    """Kafka's FetchSessionCache metrics on the Prometheus endpoint, read at scrape time."""

    def __init__(self, cache: FetchSessionCache) -> None:
        self.cache = cache

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterable[Any]:
        # lazy for start-up time: prometheus_client loads only when metrics are served (test_server.py)
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        yield GaugeMetricFamily("tidelog_NumIncrementalFetchSessions",
                                "Incremental fetch sessions in the cache (Kafka's FetchSessionCache "
                                "NumIncrementalFetchSessions)", value=len(self.cache.sessions))
        yield GaugeMetricFamily("tidelog_NumIncrementalFetchPartitionsCached",
                                "Partitions held by all incremental fetch sessions "
                                "(NumIncrementalFetchPartitionsCached)", value=self.cache.num_partitions)
        yield CounterMetricFamily("tidelog_IncrementalFetchSessionEvictions",
                                  "Incremental fetch sessions evicted (IncrementalFetchSessionEvictionsPerSec)",
                                  value=self.cache.evictions)


def create_fetch_session_cache(config: Any, clock: Clock, metrics: BrokerMetrics) -> FetchSessionCache:
    """The broker's cache (`max.incremental.fetch.session.cache.slots`), its metrics registered."""
    cache = FetchSessionCache(clock, int(config.get("max.incremental.fetch.session.cache.slots")))
    metrics.add_collector(FetchSessionCacheCollector(cache))
    return cache


def request_data(request: Any, uses_topic_ids: bool, names: Callable[[Any], str | None]
                 ) -> tuple[list[tuple[Any, str | None, Any]], list[PartitionKey]]:
    """(topic key, topic name, partition request) of every requested partition, and the forgotten keys."""
    fetch_data: list[tuple[Any, str | None, Any]] = []
    for topic in request.topics or []:
        key = topic.topic_id if uses_topic_ids else topic.topic
        name = names(key) if uses_topic_ids else key
        fetch_data.extend((key, name, p) for p in topic.partitions or [])
    forgotten = [(t.topic_id if uses_topic_ids else t.topic, p)
                 for t in getattr(request, "forgotten_topics_data", None) or [] for p in t.partitions or []]
    return fetch_data, forgotten


def session_partitions(context: FetchContext) -> list[CachedPartition]:
    """The partitions an incremental fetch reads: all of its session's, in rotation order."""
    assert context.session is not None
    return list(context.session.partitions.values())


@dataclass(slots=True)
class PartitionResult:
    """What a Fetch response says about one partition (the fields that decide an incremental answer)."""

    topic_key: Any
    name: str | None
    request: Any
    error: int
    records_size: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int


def update_and_generate_response(cache: FetchSessionCache, context: FetchContext,
                                 results: list[PartitionResult]) -> tuple[int, list[bool]]:
    """FetchContext.updateAndGenerateResponseData: the response's session id and, per result, whether the
    response includes it (always for full fetches; only partitions with news for incremental ones)."""
    if context.kind == "sessionless":
        return INVALID_SESSION_ID, [True] * len(results)
    if context.kind == "full":
        def build() -> dict[PartitionKey, CachedPartition]:
            cached: dict[PartitionKey, CachedPartition] = {}
            for r in results:
                part = CachedPartition(r.topic_key, r.name, r.request)
                part.maybe_update_response_data(r.error, r.records_size, r.high_watermark, r.last_stable_offset,
                                                r.log_start_offset)
                cached[part.key] = part
            return cached

        session_id = cache.maybe_create_session(context.privileged, len(results), context.uses_topic_ids, build)
        return session_id, [True] * len(results)
    session = context.session
    assert session is not None
    include = []
    for r in results:
        key = (r.topic_key, r.request.partition)
        cached = session.partitions.get(key)
        must = cached is None or cached.maybe_update_response_data(
            r.error, r.records_size, r.high_watermark, r.last_stable_offset, r.log_start_offset)
        if must and cached is not None:
            session.move_to_end(key)  # rotation: answered partitions go to the back of the session
        include.append(must)
    return session.id, include
