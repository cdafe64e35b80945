"""Client quotas: Kafka's quota configuration (DescribeClientQuotas / AlterClientQuotas, KIP-546) and the
enforcement of Kafka's ClientQuotaManager (byte rates, KIP-13), ClientRequestQuotaManager (request time, KIP-124)
and ControllerMutationQuotaManager (KIP-599), throttling as KIP-219 does it.

Configuration. A quota entity is a set of (entity type, name) pairs over `user` and `client-id` (a name of None
is that type's default entity), or a single `ip`. Its values are `producer_byte_rate`, `consumer_byte_rate`,
`request_percentage`, `controller_mutation_rate` (user / client-id) or `connection_creation_rate` (ip). They live
in `<first log dir>/tidelog-quotas.json`, replaced atomically (Kafka keeps them in its metadata log).

Enforcement. Produce bytes (the request size) and Fetch bytes (the response size) are recorded per quota
entity in a windowed rate (`quota.window.num` samples of `quota.window.size.seconds`, Kafka's Rate /
SampledStat); when the rate exceeds the entity's quota the request's throttle time is
`(rate - quota) / quota * window` (Kafka's QuotaUtils.throttleTime). `request_percentage` is enforced the same way
on the event-loop time each request took (broker/request_quota.py), `controller_mutation_rate` on the partitions
CreateTopics / CreatePartitions / DeleteTopics create or delete, with a token bucket (broker/mutation_quota.py).
The response carries the largest of the throttles that apply, and the connection reads nothing more from that
client for that long (Kafka mutes the channel). The entity whose quota applies is chosen as Kafka's
DefaultQuotaCallback does (most specific of user+client-id, user, client-id, with defaults), and all clients that
share it share one rate. `connection_creation_rate` is stored and described but not enforced.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidelog.clock import Clock
from tidelog.metadata.files import QUOTAS
from tidelog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

FILE_NAME = QUOTAS.name
USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
# Kafka's QuotaConfig: which keys each entity type takes, and whether the value must be integral (LONG).
CLIENT_KEYS = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True, REQUEST_PERCENTAGE: False,
               CONTROLLER_MUTATION_RATE: False}
IP_KEYS = {CONNECTION_CREATION_RATE: False}
# The principal of an unauthenticated (PLAINTEXT) connection, Kafka's KafkaPrincipal.ANONYMOUS.
ANONYMOUS = "ANONYMOUS"

# DescribeClientQuotas match types
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2

Entity = tuple[tuple[str, str | None], ...]  # sorted (type, name) pairs; name None = the default entity


def make_entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    # Sorted by type only: a name may be None (the default entity), which does not compare with a str; a type
    # given twice is refused by _validate_entity.
    return tuple(sorted(pairs, key=lambda pair: pair[0] or ""))


def _saved_quotas(document: Any) -> dict[Entity, dict[str, float]]:
    """The quotas a saved `tidelog-quotas.json` holds (raises KeyError/TypeError/ValueError on another shape)."""
    return {make_entity((t, n) for t, n in row["entity"]): {k: float(v) for k, v in row["quotas"].items()}
            for row in document["entities"]}


class QuotaError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _validate_entity(entity: Entity) -> None:
    """Kafka's ClientQuotaControlManager.validateEntity."""
    if not entity:
        raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    types = [t for t, _ in entity]
    if len(set(types)) != len(types):
        raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid quota entity: an entity type appears more than once")
    for t, name in entity:
        if t not in (USER, CLIENT_ID, IP):
            raise QuotaError(ErrorCode.UNSUPPORTED_VERSION, f"Unhandled client quota entity type: {t}")
        if name is not None and name == "" and t != CLIENT_ID:
            raise QuotaError(ErrorCode.INVALID_REQUEST, f"Invalid empty {t} quota entity name")
    if IP in types and len(types) > 1:
        raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid quota entity combination, IP entity should not be "
                                                    "combined with User or ClientId")


def _validate_value(entity: Entity, key: str, value: float) -> None:
    """Kafka's ClientQuotaControlManager.validateQuotaKeyValue."""
    keys = IP_KEYS if entity[0][0] == IP else CLIENT_KEYS
    if key not in keys:
        raise QuotaError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
    if keys[key] and abs(value - round(value)) > 1e-6:
        raise QuotaError(ErrorCode.INVALID_REQUEST, f"Configuration {key} must be a Long value")
    if value <= 0 or math.isnan(value):
        raise QuotaError(ErrorCode.INVALID_REQUEST, f"Configuration {key} must be a positive value")


class ClientQuotaStore:
    """Configured quotas by entity, durable in `<log dir>/tidelog-quotas.json`."""

    def __init__(self, log_dir: str | Path) -> None:
        self.log_dir = Path(log_dir)
        self.path = QUOTAS.path(log_dir)
        self._lock = threading.Lock()
        self.quotas: dict[Entity, dict[str, float]] = {}
        self.version = 0  # bumped on every change, so enforcement re-resolves entities
        self.quotas.update(QUOTAS.read(log_dir, _saved_quotas) or {})

    def snapshot(self) -> dict[Entity, dict[str, float]]:
        with self._lock:
            return {e: dict(v) for e, v in self.quotas.items()}

    def alter(self, entity: Entity, ops: list[tuple[str, float | None]], validate_only: bool) -> None:
        """Apply `ops` ((key, value) to set, (key, None) to remove) to one entity; raises QuotaError."""
        _validate_entity(entity)
        seen: set[str] = set()
        for key, value in ops:
            if key in seen:
                raise QuotaError(ErrorCode.INVALID_REQUEST, f"Duplicate quota key {key} in request")
            seen.add(key)
            if value is not None:
                _validate_value(entity, key, value)
            elif key not in (IP_KEYS if entity[0][0] == IP else CLIENT_KEYS):
                raise QuotaError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
        if validate_only:
            return
        with self._lock:
            values = dict(self.quotas.get(entity, {}))
            for key, value in ops:
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
            if values:
                self.quotas[entity] = values
            else:
                self.quotas.pop(entity, None)
            self.version += 1
            self._save()

    def describe(self, components: list[tuple[str, int, str | None]], strict: bool) -> dict[Entity, dict[str, float]]:
        """Kafka's ClientQuotasImage.describe: entities matching every component (and no other type if strict)."""
        types = [t for t, _, _ in components]
        if len(set(types)) != len(types):
            raise QuotaError(ErrorCode.INVALID_REQUEST, "Duplicate entity type in filter")
        for t, match_type, match in components:
            if t not in (USER, CLIENT_ID, IP):
                raise QuotaError(ErrorCode.INVALID_REQUEST, f"Unknown entity type: {t}")
            if match_type == MATCH_EXACT and match is None:
                raise QuotaError(ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match "
                                                            "string to null.")
            if match_type in (MATCH_DEFAULT, MATCH_ANY) and match is not None:
                raise QuotaError(ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_DEFAULT or "
                                                            "MATCH_TYPE_ANY, but also specified a match string.")
            if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
                raise QuotaError(ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}")
        if IP in types and len(types) > 1:
            raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination, IP filter "
                                                        "component should not be used with User or ClientId filter "
                                                        "component.")
        found: dict[Entity, dict[str, float]] = {}
        for entity, values in self.snapshot().items():
            names = dict(entity)
            if strict and set(names) != set(types):
                continue
            ok = True
            for t, match_type, match in components:
                if t not in names:
                    ok = False
                elif match_type == MATCH_EXACT:
                    ok = names[t] == match
                elif match_type == MATCH_DEFAULT:
                    ok = names[t] is None
                if not ok:
                    break
            if ok:
                found[entity] = values
        return found

    def _save(self) -> None:
        rows = [{"entity": [list(p) for p in e], "quotas": v} for e, v in sorted(
            self.quotas.items(), key=lambda item: [(t, n or "") for t, n in item[0]])]
        QUOTAS.write(self.log_dir, {"entities": rows})


# --- enforcement -----------------------------------------------------------------------------------------


@dataclass
class _Sample:
    """One window of a rate: when it started and what it counted."""

    start_ms: int
    value: float = 0.0


@dataclass
class WindowedRate:
    """Kafka's Rate over a SampledStat: `samples` windows of `window_ms`; the rate divides the total of the live
    samples by the elapsed time, counted as at least `samples - 1` full windows."""

    samples: int
    window_ms: int
    _samples: list[_Sample] = field(default_factory=list)

    def idle(self, now_ms: int) -> bool:
        """Every sample has left the window (Kafka expires such a client's sensors)."""
        return not self._samples or now_ms - self._samples[-1].start_ms >= self.samples * self.window_ms

    def record(self, value: float, now_ms: int) -> None:
        current = self._samples[-1] if self._samples else None
        if current is None or now_ms >= current.start_ms + self.window_ms:
            current = _Sample(now_ms)
            self._samples.append(current)
        current.value += value
        self._purge(now_ms)

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        self._samples = [s for s in self._samples if now_ms - s.start_ms < expire][-self.samples:]

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        oldest = self._samples[0].start_ms if self._samples else now_ms
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return elapsed

    def measure(self, now_ms: int) -> float:
        """Per second."""
        size = self.window_size_ms(now_ms)
        return sum(s.value for s in self._samples) / (size / 1000.0)


class ClientQuotaManager:
    """One quota type (Kafka's ClientQuotaManager for Produce or Fetch): sensors keyed by the metric tags of the
    entity whose quota applies."""

    def __init__(self, quota_key: str, store: ClientQuotaStore, clock: Clock, samples: int, window_s: int) -> None:
        self.quota_key = quota_key
        self.store = store
        self.clock = clock
        self.samples = samples
        self.window_ms = window_s * 1000
        self._rates: dict[tuple[str, str], WindowedRate] = {}
        self.throttle_total_ms: dict[tuple[str, str], float] = {}
        self.throttle_count: dict[tuple[str, str], int] = {}
        self._cache: dict[tuple[str, str], tuple[float | None, tuple[str, str]]] = {}
        self._cache_version = -1
        self._lock = threading.Lock()
        self._enabled = False
        self._enabled_version = -1

    @property
    def quotas_enabled(self) -> bool:
        """Some entity has (or once had) a quota of this type (Kafka's ClientQuotaManager.quotasEnabled, which
        stays on once set): until then nothing of this type is recorded."""
        if not self._enabled and self._enabled_version != self.store.version:
            self._enabled_version = self.store.version
            self._enabled = any(self.quota_key in values for values in self.store.snapshot().values())
        return self._enabled

    def quota_for(self, user: str, client_id: str) -> tuple[float | None, tuple[str, str]]:
        """(quota in bytes/s or None, (user tag, client-id tag)) as Kafka's DefaultQuotaCallback resolves it."""
        if self._cache_version != self.store.version:
            self._cache.clear()
            self._cache_version = self.store.version
        cached = self._cache.get((user, client_id))
        if cached is not None:
            return cached
        quotas = self.store.quotas
        candidates: list[tuple[Entity, tuple[str, str]]] = [
            (make_entity([(USER, user), (CLIENT_ID, client_id)]), (user, client_id)),
            (make_entity([(USER, user), (CLIENT_ID, None)]), (user, client_id)),
            (make_entity([(USER, user)]), (user, "")),
            (make_entity([(USER, None), (CLIENT_ID, client_id)]), (user, client_id)),
            (make_entity([(USER, None), (CLIENT_ID, None)]), (user, client_id)),
            (make_entity([(USER, None)]), (user, "")),
            (make_entity([(CLIENT_ID, client_id)]), ("", client_id)),
            (make_entity([(CLIENT_ID, None)]), ("", client_id)),
        ]
        result: tuple[float | None, tuple[str, str]] = (None, ("", client_id))
        for entity, tags in candidates:
            value = quotas.get(entity, {}).get(self.quota_key)
            if value is not None:
                result = (value, tags)
                break
        self._cache[(user, client_id)] = result
        return result

    def _rate(self, tags: tuple[str, str], now: int) -> WindowedRate:
        rate = self._rates.get(tags)
        if rate is None:
            if len(self._rates) >= 1024:
                # drop the sensors of clients idle for a whole window (Kafka's sensor expiry)
                for key in [k for k, r in self._rates.items() if r.idle(now)]:
                    del self._rates[key]
                    self.throttle_total_ms.pop(key, None)
                    self.throttle_count.pop(key, None)
            rate = self._rates[tags] = WindowedRate(self.samples, self.window_ms)
        return rate

    def record_and_get_throttle_ms(self, user: str, client_id: str, value: float) -> int:
        """Record `value` for this client; the throttle time (ms) if its entity is over quota, else 0."""
        quota, tags = self.quota_for(user, client_id)
        now = self.clock.milliseconds()
        with self._lock:
            rate = self._rate(tags, now)
            rate.record(value, now)
            if quota is None:
                return 0
            observed = rate.measure(now)
            if observed <= quota:
                return 0
            # Kafka's QuotaUtils.throttleTime: how long until the windowed rate is back at the quota.
            return round((observed - quota) / quota * rate.window_size_ms(now))

    def record_no_throttle(self, user: str, client_id: str, value: float) -> None:
        """Kafka's recordNoThrottle: count `value` without checking the quota."""
        _, tags = self.quota_for(user, client_id)
        now = self.clock.milliseconds()
        with self._lock:
            self._rate(tags, now).record(value, now)

    def record_throttle(self, user: str, client_id: str, throttle_ms: int) -> None:
        """The connection was muted for `throttle_ms` because of this quota (Kafka's `throttle-time` sensor,
        recorded by the quota manager whose throttle time was the largest)."""
        _, tags = self.quota_for(user, client_id)
        with self._lock:
            self.throttle_total_ms[tags] = self.throttle_total_ms.get(tags, 0.0) + throttle_ms
            self.throttle_count[tags] = self.throttle_count.get(tags, 0) + 1

    def unrecord(self, user: str, client_id: str, value: float) -> None:
        """Take back bytes that were not sent after all (a throttled Fetch answers empty, as Kafka does)."""
        _, tags = self.quota_for(user, client_id)
        with self._lock:
            rate = self._rates.get(tags)
            if rate is not None:
                rate.record(-value, self.clock.milliseconds())

    def metrics(self) -> list[tuple[str, str, float, float]]:
        """(user, client-id, byte-rate, throttle-time avg) per entity: Kafka's `byte-rate` / `throttle-time`."""
        now = self.clock.milliseconds()
        with self._lock:
            rows = []
            for tags, rate in self._rates.items():
                count = self.throttle_count.get(tags, 0)
                avg = self.throttle_total_ms.get(tags, 0.0) / count if count else 0.0
                rows.append((tags[0], tags[1], rate.measure(now), avg))
            return rows
