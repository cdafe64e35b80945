"""Kafka's QuotaManagers: the client quotas of broker/quotas.py (byte rates), broker/request_quota.py (request
time) and broker/mutation_quota.py (controller mutations) together, the throttle the dispatch applies after each
handler, and their metrics. Apart from broker/quotas.py so that the three quota modules import only that one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tidelog.broker.mutation_quota import ControllerMutationQuota, ControllerMutationQuotaManager
from tidelog.broker.quotas import (
    ANONYMOUS,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    ClientQuotaManager,
    ClientQuotaStore,
)
from tidelog.broker.request_quota import ClientRequestQuotaManager
from tidelog.clock import Clock
from tidelog.protocol.api_keys import ApiKey

if TYPE_CHECKING:
    from tidelog.broker.metrics import BrokerMetrics


def _records_size(response: Any) -> int:
    """The record bytes of a Fetch response (what Kafka's fetch quota counts, less a few header bytes)."""
    total = 0
    for topic in getattr(response, "responses", None) or []:
        for p in getattr(topic, "partitions", None) or []:
            records = getattr(p, "records", None)
            if records is not None:
                total += len(records)
    return total


class QuotaManagers:
    """Kafka's QuotaManagers: the byte rates, the request quota (broker/request_quota.py) and the controller
    mutation quota (broker/mutation_quota.py), and the hook the connection calls after each handler."""

    def __init__(self, store: ClientQuotaStore, clock: Clock, samples: int = 11, window_s: int = 1) -> None:
        self.store = store
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, store, clock, samples, window_s)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, store, clock, samples, window_s)
        self.request = ClientRequestQuotaManager(store, clock, samples, window_s)
        self.mutation = ControllerMutationQuotaManager(store, clock, samples, window_s)

    @property
    def produce_unrecorded(self) -> bool:
        """A Produce request records nothing and is never throttled: no entity has a produce byte-rate or a
        request quota (`throttle` would return 0 without recording; the connection skips it)."""
        return not self.produce.quotas_enabled and not self.request.quotas_enabled

    def throttle(self, api_key: int, client_id: str | None, request_size: int, response: Any,
                 user: str = ANONYMOUS, request_nanos: int | None = None,
                 mutation: ControllerMutationQuota | None = None) -> int:
        """Record a request against every quota that applies and return the time to mute the connection: the
        largest of the byte-rate throttle (Produce request bytes, Fetch response bytes), the request quota's
        (`request_nanos` of event-loop time; None when not timed or exempt) and the controller mutation quota's
        (`mutation`, spent by CreateTopics/CreatePartitions/DeleteTopics). The response's `throttle_time_ms`
        carries it, and a throttled Fetch is emptied and its bytes taken back (Kafka's KafkaApis: the same for
        either quota, FetchContext.getThrottledResponse). An acks=0 Produce (no response) is recorded and muted
        for its bytes all the same, its time counted as exempt, as Kafka does."""
        client = client_id or ""
        byte_manager: ClientQuotaManager | None = None
        byte_ms = fetched = 0
        # Nothing is recorded for a quota type no entity has (Kafka's maybeRecordAndGetThrottleTimeMs).
        if api_key == ApiKey.PRODUCE:
            if self.produce.quotas_enabled:
                byte_manager = self.produce
                byte_ms = self.produce.record_and_get_throttle_ms(user, client, request_size)
        elif api_key == ApiKey.FETCH:
            if self.fetch.quotas_enabled:
                byte_manager, fetched = self.fetch, _records_size(response)
                byte_ms = self.fetch.record_and_get_throttle_ms(user, client, fetched)
        request_ms = 0
        if request_nanos is not None:
            if response is None:
                self.request.record_exempt(request_nanos)
            else:
                request_ms = self.request.record_time_and_get_throttle_ms(user, client, request_nanos)
        mutation_ms = mutation.throttle_time() if mutation is not None else 0
        ms = max(byte_ms, request_ms, mutation_ms)
        if ms <= 0:
            return 0
        # The throttle-time sensor of the quota that set the mute: another quota only when strictly larger
        # than the request quota's (KafkaApis / RequestHandlerHelper).
        if byte_manager is not None and byte_ms > request_ms:
            byte_manager.record_throttle(user, client, byte_ms)
        elif mutation_ms > request_ms:
            self.mutation.record_throttle(user, client, mutation_ms)
        else:
            self.request.record_throttle(user, client, request_ms)
        if response is not None:
            if api_key == ApiKey.FETCH:
                self.fetch.unrecord(user, client, fetched)
                response.responses = []
            response.throttle_time_ms = ms
        return ms

    def metric_rows(self) -> Mapping[str, list[tuple[str, str, float, float]]]:
        """(user, client-id, rate, throttle-time avg) per entity, by Kafka's quota type."""
        return {"Produce": self.produce.metrics(), "Fetch": self.fetch.metrics(), "Request": self.request.metrics(),
                "ControllerMutation": self.mutation.metrics()}


# Kafka's sensor name for each quota type's rate (ClientQuotaManager / ClientRequestQuotaManager /
# ControllerMutationQuotaManager).
RATE_METRIC = {"Produce": "byte-rate", "Fetch": "byte-rate", "Request": "request-time",
               "ControllerMutation": "mutation-rate"}


class QuotaCollector:
    """Kafka's quota sensors on the Prometheus registry, named as the JMX exporter names
    `kafka.server:type=<type>,user=..,client-id=..` attributes: `byte-rate` (Produce, Fetch), `request-time`
    (Request), `mutation-rate` and `tokens` (ControllerMutation), `throttle-time` (all four), and Request's
    untagged `exempt-request-time`."""

    def __init__(self, quotas: QuotaManagers) -> None:
        self.quotas = quotas

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        labels = ["user", "client_id"]
        for quota_type, rows in self.quotas.metric_rows().items():
            prefix = f"kafka_server_{quota_type.lower()}"
            attribute = RATE_METRIC[quota_type]
            rate = GaugeMetricFamily(f"{prefix}_{attribute.replace('-', '_')}",
                                     f"kafka.server:type={quota_type} {attribute}", labels=labels)
            throttle = GaugeMetricFamily(f"{prefix}_throttle_time", f"kafka.server:type={quota_type} throttle-time",
                                         labels=labels)
            for user, client_id, value, throttle_avg in rows:
                rate.add_metric([user, client_id], value)
                throttle.add_metric([user, client_id], throttle_avg)
            yield rate
            yield throttle
        tokens = GaugeMetricFamily("kafka_server_controllermutation_tokens",
                                   "kafka.server:type=ControllerMutation tokens", labels=labels)
        for user, client_id, value in self.quotas.mutation.token_rows():
            tokens.add_metric([user, client_id], value)
        yield tokens
        yield GaugeMetricFamily("kafka_server_request_exempt_request_time",
                                "kafka.server:type=Request exempt-request-time",
                                value=self.quotas.request.exempt_rate())


def create_quota_managers(config: Any, clock: Clock, broker_metrics: BrokerMetrics) -> QuotaManagers:
    """The store in the first log dir, the quota managers with `quota.window.*`, and their metrics."""
    store = ClientQuotaStore(config.log_dirs[0])
    quotas = QuotaManagers(store, clock, int(config.get("quota.window.num")),
                           int(config.get("quota.window.size.seconds")))
    broker_metrics.add_collector(QuotaCollector(quotas))
    return quotas
