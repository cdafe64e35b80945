"""KIP-714 client telemetry: Kafka's ClientMetricsManager (subscriptions matched to client instances,
GetTelemetrySubscriptions / PushTelemetry checks) and ClientMetricsConfigs (the CLIENT_METRICS resource's
`metrics`, `interval.ms`, `match`). Subscriptions are kept in `<first log dir>/tidelog-client-metrics.json`
(atomic replace), as Kafka keeps them in its metadata log. Pushed OTLP gauges and sums are exposed on the
broker's Prometheus registry as `tidelog_client_<metric name with dots as underscores>`.
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidelog.clock import Clock
from tidelog.metadata.files import CLIENT_METRICS as SUBSCRIPTIONS
from tidelog.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:  # imported by the first telemetry request, not at start-up
    from tidelog.broker.metrics import BrokerMetrics
    from tidelog.protocol.otlp import NumberPoint

log = logging.getLogger(__name__)

SUBSCRIPTIONS_FILE = SUBSCRIPTIONS.name  # in the first log dir

CLIENT_METRICS = 16  # ConfigResource.Type.CLIENT_METRICS
METRICS_CONFIG, INTERVAL_MS_CONFIG, MATCH_CONFIG = "metrics", "interval.ms", "match"
CONFIG_NAMES = (METRICS_CONFIG, INTERVAL_MS_CONFIG, MATCH_CONFIG)
DEFAULT_INTERVAL_MS = 5 * 60 * 1000  # ClientMetricsConfigs.DEFAULT_INTERVAL_MS
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 60 * 60 * 1000
ALL_METRICS = "*"  # ClientMetricsConfigs: "*" subscribes every metric, sent to clients as the empty prefix
MATCH_KEYS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
              "client_source_address", "client_source_port")
TELEMETRY_MAX_BYTES = 1024 * 1024  # Kafka's telemetry.max.bytes default
# ClientMetricsManager.getSupportedCompressionTypes: every CompressionType but NONE, in enum order
ACCEPTED_COMPRESSION_TYPES = (1, 2, 3, 4)
_MAX_SERIES_PER_CLIENT = 5000  # a client pushing more distinct series is cut off (bounded broker memory)
_MAX_INSTANCES = 16384  # Kafka's ClientMetricsManager.CACHE_MAX_SIZE: least recently seen instances go first


def split_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def validate_configs(name: str, configs: dict[str, str]) -> None:
    """ClientMetricsConfigs.validate: names, interval range, `match` entries `key=regex` with known keys."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key in configs:
        if key not in CONFIG_NAMES:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    if INTERVAL_MS_CONFIG in configs:
        try:
            interval = int(configs[INTERVAL_MS_CONFIG])
        except ValueError:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Invalid value {configs[INTERVAL_MS_CONFIG]} for configuration interval.ms") from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Invalid value {interval} for interval.ms, interval must be between "
                             f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS}")
    if MATCH_CONFIG in configs:
        parse_match(configs[MATCH_CONFIG])


def parse_match(value: str) -> dict[str, re.Pattern[str]]:
    patterns: dict[str, re.Pattern[str]] = {}
    for entry in split_list(value):
        key, sep, regex = entry.partition("=")
        key = key.strip()
        if not sep or not regex.strip():
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {entry}")
        if key not in MATCH_KEYS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid client selector {key}")
        try:
            patterns[key] = re.compile(regex.strip())
        except re.error:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Illegal regex pattern {regex.strip()}") from None
    return patterns


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """Who sent a telemetry request: its client id, address and port, and the software it named in ApiVersions."""

    client_id: str
    host: str
    port: int | None = None
    software_name: str = ""
    software_version: str = ""

    @classmethod
    def of(cls, ctx: Any) -> ClientInfo:
        """From a handler's RequestContext."""
        return cls(ctx.client_id or "", ctx.client_host, ctx.client_port, ctx.client_software_name,
                   ctx.client_software_version)


@dataclass(frozen=True)
class Subscription:
    """SubscriptionInfo: one CLIENT_METRICS resource."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: dict[str, re.Pattern[str]]

    @classmethod
    def from_configs(cls, name: str, configs: dict[str, str]) -> Subscription:
        return cls(name, tuple(split_list(configs.get(METRICS_CONFIG, ""))),
                   int(configs.get(INTERVAL_MS_CONFIG, DEFAULT_INTERVAL_MS)), parse_match(configs.get(MATCH_CONFIG, "")))

    def matches(self, selectors: dict[str, str]) -> bool:
        # ClientMetricsInstanceMetadata.isMatch: every pattern must match its selector fully
        return all(p.fullmatch(selectors.get(key, "")) for key, p in self.match.items())


def _java_uuid_hash(value: uuid.UUID) -> int:
    """Kafka's Uuid.hashCode (as java.util.UUID's), as a signed int32."""
    msb, lsb = value.int >> 64, value.int & (2**64 - 1)
    h = msb ^ lsb
    r = ((h >> 32) ^ h) & 0xFFFFFFFF
    return r - (1 << 32) if r >= 1 << 31 else r


def _int32(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n >= 1 << 31 else n


@dataclass
class ClientInstance:
    """ClientMetricsInstance: one client's subscription and request timestamps."""

    instance_id: uuid.UUID
    version: int  # subscriptions version it was computed from; a change re-creates it (Kafka's cache)
    subscription_id: int
    metrics: list[str]
    push_interval_ms: int
    client_id: str
    last_get_ms: int = -1
    last_push_ms: int = -1
    last_seen_ms: int = 0
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.NONE

    def maybe_update_get_timestamp(self, now: int) -> bool:
        last = max(self.last_get_ms, self.last_push_ms)
        if last < 0 or now - last >= self.push_interval_ms:
            self.last_get_ms = now
            return True
        return False

    def maybe_update_push_timestamp(self, now: int) -> bool:
        # a push right after a GetTelemetrySubscriptions is accepted: clients jitter the interval (0.5x-1.5x)
        accept = self.last_get_ms > self.last_push_ms or self.last_push_ms < 0
        if not accept:
            accept = now - self.last_push_ms >= self.push_interval_ms
        if accept:
            self.last_push_ms = now
        return accept


@dataclass
class _Series:
    kind: str
    monotonic: bool
    value: float


@dataclass
class _ClientSeries:
    client_id: str
    series: dict[tuple[str, tuple[tuple[str, str], ...]], _Series] = field(default_factory=dict)


class ClientMetricsManager:
    def __init__(self, log_dir: str, clock: Clock, telemetry_max_bytes: int = TELEMETRY_MAX_BYTES) -> None:
        self.log_dir = Path(log_dir)
        self.clock = clock
        self.telemetry_max_bytes = telemetry_max_bytes
        self._configs: dict[str, dict[str, str]] = {}
        self._subscriptions: dict[str, Subscription] = {}
        self._version = 0
        self._next_expiry_ms = 0
        self._instances: dict[uuid.UUID, ClientInstance] = {}
        self._series: dict[uuid.UUID, _ClientSeries] = {}
        self._lock = threading.Lock()  # the Prometheus scrape reads series on its own thread
        self._load()

    # --- subscriptions (CLIENT_METRICS config resources) ---

    def _load(self) -> None:
        saved = SUBSCRIPTIONS.read(self.log_dir, lambda document: {
            str(name): {str(k): str(v) for k, v in configs.items()}
            for name, configs in document.get("subscriptions", {}).items()})
        for name, configs in (saved or {}).items():
            self._configs[name] = configs
            self._subscriptions[name] = Subscription.from_configs(name, configs)

    def _save(self) -> None:
        SUBSCRIPTIONS.write(self.log_dir, {"subscriptions": self._configs})

    def names(self) -> list[str]:
        return sorted(self._configs)

    def configs(self, name: str) -> dict[str, str]:
        return dict(self._configs.get(name, {}))

    def set_configs(self, name: str, configs: dict[str, str], validate_only: bool = False) -> None:
        """The new config set of subscription `name` (empty removes it); validated as Kafka does."""
        validate_configs(name, configs)
        if validate_only:
            return
        if configs:
            self._configs[name] = dict(configs)
            self._subscriptions[name] = Subscription.from_configs(name, configs)
        else:
            self._configs.pop(name, None)
            self._subscriptions.pop(name, None)
        self._save()
        self._version += 1  # every cached client instance is re-evaluated on its next request

    # --- client instances ---

    @staticmethod
    def _selectors(instance_id: uuid.UUID, client: ClientInfo) -> dict[str, str]:
        """Kafka's ClientMetricsInstanceMetadata: what a subscription's `match` patterns are tested against."""
        return {"client_instance_id": str(instance_id), "client_id": client.client_id,
                "client_software_name": client.software_name, "client_software_version": client.software_version,
                "client_source_address": client.host, "client_source_port": str(client.port) if client.port else ""}

    def _instance(self, instance_id: uuid.UUID, client: ClientInfo) -> ClientInstance:
        now = self.clock.milliseconds()
        self._expire(now)
        current = self._instances.get(instance_id)
        if current is not None and current.version == self._version:
            current.last_seen_ms = now
            return current
        selectors = self._selectors(instance_id, client)
        matching = [s for _, s in sorted(self._subscriptions.items()) if s.matches(selectors)]
        metrics: list[str] = []
        for sub in matching:
            for prefix in sub.metrics:
                prefix = "" if prefix == ALL_METRICS else prefix
                if prefix not in metrics:
                    metrics.append(prefix)
        if "" in metrics:
            metrics = [""]
        interval = min((s.interval_ms for s in matching), default=DEFAULT_INTERVAL_MS)
        # ClientMetricsManager.computeSubscriptionId: a CRC32C of the metrics and interval plus the instance
        # hash, so it changes with the matching subscriptions and differs between clients
        from tidelog.protocol import crc as crc32c  # the extension only (the package __init__ costs ~15 ms)

        digest = crc32c.crc32c((str(metrics) + str(interval)).encode())
        sub_id = _int32(digest + _java_uuid_hash(instance_id))
        instance = ClientInstance(instance_id, self._version, sub_id, metrics, interval, client.client_id,
                                  last_seen_ms=now)
        self._instances[instance_id] = instance
        return instance

    def _expire(self, now: int) -> None:
        # Kafka's instance cache expiry: an instance idle for 3 push intervals (at least a minute) is dropped;
        # beyond the cache size, the least recently seen ones. Checked at most once a second.
        if now < self._next_expiry_ms and len(self._instances) < _MAX_INSTANCES:
            return
        self._next_expiry_ms = now + 1000
        dead = [iid for iid, inst in self._instances.items()
                if now - inst.last_seen_ms > max(3 * inst.push_interval_ms, 60_000)]
        excess = len(self._instances) - len(dead) - (_MAX_INSTANCES - 1)
        if excess > 0:
            alive = sorted((inst.last_seen_ms, iid) for iid, inst in self._instances.items() if iid not in dead)
            dead += [iid for _, iid in alive[:excess]]
        for iid in dead:
            del self._instances[iid]
            with self._lock:
                self._series.pop(iid, None)

    def get_subscriptions(self, instance_id: uuid.UUID | None,
                          client: ClientInfo) -> tuple[ErrorCode, ClientInstance]:
        if instance_id is None or instance_id.int == 0:
            instance_id = uuid.uuid4()
            while instance_id in self._instances:
                instance_id = uuid.uuid4()
        instance = self._instance(instance_id, client)
        error = ErrorCode.NONE
        if (not instance.maybe_update_get_timestamp(self.clock.milliseconds())
                and instance.last_error not in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                                                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)):
            error = ErrorCode.THROTTLING_QUOTA_EXCEEDED
        instance.last_error = error
        return error, instance

    def push(self, instance_id: uuid.UUID | None, subscription_id: int, terminating: bool, compression: int,
             metrics: bytes, client: ClientInfo) -> ErrorCode:
        """ClientMetricsManager.processPushTelemetryRequest: validate, then decode and keep the metrics."""
        if instance_id is None or instance_id.int == 0:
            return ErrorCode.INVALID_REQUEST
        instance = self._instance(instance_id, client)
        error = self._validate_push(instance, subscription_id, terminating, compression, len(metrics))
        instance.last_error = error
        if error is not ErrorCode.NONE:
            return error
        if terminating:
            instance.terminating = True
        if metrics and instance.metrics:
            try:
                points = _decode(compression, metrics, self.telemetry_max_bytes)
            except ValueError as exc:
                log.info("Client %s pushed undecodable telemetry: %s", instance_id, exc)
                instance.last_error = ErrorCode.INVALID_RECORD
                return ErrorCode.INVALID_RECORD
            self._record(instance, points)
        return ErrorCode.NONE

    def _validate_push(self, instance: ClientInstance, subscription_id: int, terminating: bool, compression: int,
                       size: int) -> ErrorCode:
        if instance.terminating:
            return ErrorCode.INVALID_REQUEST  # a push after the client's terminating push
        if subscription_id != instance.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if not instance.maybe_update_push_timestamp(self.clock.milliseconds()) and not terminating:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        if compression != 0 and compression not in ACCEPTED_COMPRESSION_TYPES:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if size > self.telemetry_max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE
        return ErrorCode.NONE

    def _record(self, instance: ClientInstance, points: list[NumberPoint]) -> None:
        from tidelog.protocol.otlp import CUMULATIVE

        prefixes = instance.metrics
        with self._lock:
            store = self._series.setdefault(instance.instance_id, _ClientSeries(instance.client_id))
            for point in points:
                if not any(point.metric.startswith(p) for p in prefixes):
                    continue
                key = (point.metric, point.attributes)
                series = store.series.get(key)
                if series is None:
                    if len(store.series) >= _MAX_SERIES_PER_CLIENT:
                        continue
                    series = store.series[key] = _Series(point.kind, point.monotonic, 0.0)
                if point.kind == "sum" and point.temporality != CUMULATIVE:
                    series.value += point.value  # delta temporality: the broker accumulates
                else:
                    series.value = point.value

    def snapshot(self) -> list[tuple[str, str, str, tuple[tuple[str, str], ...], str, bool, float]]:
        """(instance id as Kafka prints it, client id, metric, attributes, kind, monotonic, value) per series."""
        from tidelog.storage.checkpoints import uuid_to_base64

        with self._lock:
            return [(uuid_to_base64(iid.bytes), cs.client_id, metric, attrs, s.kind, s.monotonic, s.value)
                    for iid, cs in self._series.items() for (metric, attrs), s in cs.series.items()]


def _decode(compression: int, payload: bytes, limit: int) -> list[NumberPoint]:
    from tidelog.protocol.inflaters import inflater
    from tidelog.protocol.otlp import number_points
    from tidelog.protocol.records import CorruptRecordError

    data = payload
    if compression:
        # bounded: a push expands to at most 64x telemetry.max.bytes
        try:
            source = inflater(compression, payload, limit * 64)
            chunks = []
            while chunk := source.read(1 << 16):
                chunks.append(chunk)
        except CorruptRecordError as exc:
            raise ValueError(str(exc)) from exc
        data = b"".join(chunks)
    return number_points(data)


_NAME_RE = re.compile(r"[^a-zA-Z0-9_:]")


def prometheus_name(otlp_name: str) -> str:
    return "tidelog_client_" + _NAME_RE.sub("_", otlp_name)


class ClientMetricsCollector:
    """Pushed client metrics at scrape time: gauges as gauges, monotonic sums as counters."""

    def __init__(self, manager: ClientMetricsManager) -> None:
        self.manager = manager

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        families: dict[str, tuple[bool, list[tuple[dict[str, str], float]]]] = {}
        for iid, client_id, metric, attrs, kind, monotonic, value in self.manager.snapshot():
            counter = kind == "sum" and monotonic
            name = prometheus_name(metric)
            labels = {"client_instance_id": iid, "client_id": client_id}
            for key, val in attrs:
                labels.setdefault(_NAME_RE.sub("_", key) or "_", val)
            families.setdefault(name, (counter, []))[1].append((labels, value))
        for name, (counter, samples) in sorted(families.items()):
            keys = sorted({k for labels, _ in samples for k in labels})
            family: Any
            if counter:
                family = CounterMetricFamily(name, "Client metric pushed with KIP-714", labels=keys)
            else:
                family = GaugeMetricFamily(name, "Client metric pushed with KIP-714", labels=keys)
            for labels, value in samples:
                family.add_metric([labels.get(k, "") for k in keys], value)
            yield family


def create_client_metrics_manager(config: Any, clock: Clock, broker_metrics: BrokerMetrics) -> ClientMetricsManager:
    manager = ClientMetricsManager(config.log_dirs[0], clock)
    broker_metrics.add_collector(ClientMetricsCollector(manager))
    return manager
