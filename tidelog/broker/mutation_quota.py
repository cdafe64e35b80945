"""Controller mutation quotas (`controller_mutation_rate`, KIP-599): Kafka's ControllerMutationQuotaManager.

CreateTopics, CreatePartitions and DeleteTopics spend one permit per partition created or deleted from a token
bucket per quota entity (Kafka's TokenBucket stat): it refills at `controller_mutation_rate` permits per second
up to a burst of `quota * quota.window.num * quota.window.size.seconds`, and starts full. A request gets a
ControllerMutationQuota for its lifetime (`new_quota_for`):

- strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+; StrictControllerMutationQuota): a topic is
  refused with THROTTLING_QUOTA_EXCEEDED while the bucket is below zero, else accepted even if it takes the bucket
  below zero (so one large topic is never refused outright);
- permissive (older versions; PermissiveControllerMutationQuota): everything is accepted and spent.

Either way, once the bucket is below zero the throttle time is the time to refill it to zero,
`-tokens / quota * 1000` ms (ControllerMutationQuotaManager.throttleTimeMs), less the time since it was measured;
the response carries the larger of it and the request quota's throttle and the connection is muted for that long
(RequestHandlerHelper.sendResponseMaybeThrottleWithControllerQuota, done by QuotaManagers.throttle). As in
Kafka's ReplicationControlManager the quota is spent after a topic passed validation, validate_only included.
"""

from __future__ import annotations

from tidelog.broker.quotas import CONTROLLER_MUTATION_RATE, ClientQuotaManager, ClientQuotaStore
from tidelog.clock import Clock
from tidelog.protocol.errors import ErrorCode, KafkaError

# Errors.THROTTLING_QUOTA_EXCEEDED's default message, which Kafka's StrictControllerMutationQuota sends.
THROTTLING_MESSAGE = "The throttling quota has been exceeded."


class TokenBucket:
    """Kafka's TokenBucket stat: `tokens` refill at `quota` per second up to `burst`; a record spends them."""

    __slots__ = ("tokens", "last_ms", "quota")

    def __init__(self, burst: float, now_ms: int, quota: float) -> None:
        self.tokens = burst  # Kafka's bucket starts empty at time 0, so at any real time it is full
        self.last_ms = now_ms
        self.quota = quota  # the quota it was last measured with (for the `tokens` metric)

    def measure(self, quota: float, burst: float, now_ms: int) -> float:
        self.quota = quota
        self.tokens = min(burst, self.tokens + quota * (now_ms - self.last_ms) / 1000.0)
        self.last_ms = now_ms
        return self.tokens

    def record(self, permits: float, quota: float, burst: float, now_ms: int) -> None:
        self.tokens = min(burst, self.measure(quota, burst, now_ms) - permits)


class ControllerMutationQuota:
    """A request's quota when no entity has a `controller_mutation_rate` (Kafka's
    UnboundedControllerMutationQuota); the base of the strict and permissive ones."""

    bounded = False

    def record(self, permits: float) -> None:
        """Spend `permits` (partitions created or deleted); a strict quota raises THROTTLING_QUOTA_EXCEEDED."""

    def throttle_time(self) -> int:
        return 0


UNBOUNDED = ControllerMutationQuota()


class _BoundedControllerMutationQuota(ControllerMutationQuota):
    """Kafka's AbstractControllerMutationQuota: remembers the last throttle time and when it was computed."""

    bounded = True

    def __init__(self, manager: ControllerMutationQuotaManager, user: str, client_id: str) -> None:
        self.manager = manager
        self.user = user
        self.client_id = client_id
        self._throttle_ms = 0
        self._recorded_ms = 0

    def _violated(self, tokens: float, quota: float) -> None:
        self._throttle_ms = round(-tokens / quota * 1000)
        self._recorded_ms = self.manager.clock.milliseconds()

    def throttle_time(self) -> int:
        # Less the time since it was computed (the request may have waited since, Kafka's throttleTime).
        return max(0, self._throttle_ms - (self.manager.clock.milliseconds() - self._recorded_ms))


class StrictControllerMutationQuota(_BoundedControllerMutationQuota):
    def record(self, permits: float) -> None:
        violation = self.manager.record_permits(self.user, self.client_id, permits, strict=True)
        if violation is not None:
            self._violated(*violation)
            raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLING_MESSAGE)


class PermissiveControllerMutationQuota(_BoundedControllerMutationQuota):
    def record(self, permits: float) -> None:
        violation = self.manager.record_permits(self.user, self.client_id, permits, strict=False)
        if violation is not None:
            self._violated(*violation)


class ControllerMutationQuotaManager(ClientQuotaManager):
    """Kafka's ControllerMutationQuotaManager: per entity a `mutation-rate` (Rate) and a `tokens` TokenBucket."""

    def __init__(self, store: ClientQuotaStore, clock: Clock, samples: int, window_s: int) -> None:
        super().__init__(CONTROLLER_MUTATION_RATE, store, clock, samples, window_s)
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def new_quota_for(self, user: str, client_id: str | None, api_version: int,
                      strict_since: int) -> ControllerMutationQuota:
        """The quota for one request: strict from `strict_since`, permissive before (Kafka's newQuotaFor)."""
        if not self.quotas_enabled:
            return UNBOUNDED
        cls = StrictControllerMutationQuota if api_version >= strict_since else PermissiveControllerMutationQuota
        return cls(self, user, client_id or "")

    def _burst(self, quota: float) -> float:
        return quota * self.samples * self.window_ms / 1000.0

    def record_permits(self, user: str, client_id: str, permits: float,
                       strict: bool) -> tuple[float, float] | None:
        """Spend `permits`; (tokens, quota) when the bucket is below zero: before spending for a strict quota
        (then nothing is spent: Sensor.checkQuotas before record), after spending for a permissive one."""
        quota, tags = self.quota_for(user, client_id)
        now = self.clock.milliseconds()
        with self._lock:
            rate = self._rate(tags, now)
            if quota is None:  # Kafka's bucket without a quota neither counts nor refuses
                rate.record(permits, now)
                return None
            burst = self._burst(quota)
            bucket = self._buckets.get(tags)
            if bucket is None:
                if len(self._buckets) >= len(self._rates) + 1024:  # follow the expiry of idle clients' rates
                    self._buckets = {k: b for k, b in self._buckets.items() if k in self._rates}
                bucket = self._buckets[tags] = TokenBucket(burst, now, quota)
            if strict:
                tokens = bucket.measure(quota, burst, now)
                if tokens < 0:
                    return tokens, quota
            rate.record(permits, now)
            bucket.record(permits, quota, burst, now)
            if not strict and bucket.tokens < 0:
                return bucket.tokens, quota
            return None

    def token_rows(self) -> list[tuple[str, str, float]]:
        """(user, client-id, tokens) per entity with a quota: Kafka's `tokens` metric."""
        now = self.clock.milliseconds()
        with self._lock:
            return [(tags[0], tags[1], bucket.measure(bucket.quota, self._burst(bucket.quota), now))
                    for tags, bucket in self._buckets.items()]
