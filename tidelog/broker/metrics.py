"""Prometheus metrics of one broker, in its own registry (so several in-process brokers coexist).

prometheus_client costs ~0.1 s to import, so nothing is imported until `start()`, which the server calls
after its listener is up. Recording before that is a cheap no-op. Names follow Kafka's JMX beans loosely
(kafka.network RequestMetrics, BrokerTopicMetrics BytesIn/Out, ReplicaManager PartitionCount, Log Size).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

log = logging.getLogger(__name__)

# Latency buckets in seconds: sub-millisecond ApiVersions up to long-polled fetches.
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class BrokerMetrics:
    def __init__(self, log_sizes: Callable[[], Iterator[tuple[str, int, int]]] | None = None) -> None:
        """`log_sizes` yields (topic, partition, size_bytes) for the log-size collector (read lazily)."""
        self._log_sizes = log_sizes
        self.registry: Any = None
        self.http_port: int | None = None
        self._serving = threading.Event()  # set once the HTTP endpoint listens (started by the warm-up thread)
        self._http_server: Any = None
        self._requests: Any = None
        self._latency: Any = None
        self._bytes_in: Any = None
        self._bytes_out: Any = None
        self._connections: Any = None
        self._log_collector: _LogCollector | None = None
        self.collectors: list[Any] = []  # extra collectors (e.g. the log cleaner) registered at start()
        # (api, error code) -> (requests counter child, latency histogram child): labels() per request costs
        # more than the increment itself.
        self._children: dict[tuple[str, int | None], tuple[Any, Any]] = {}

    def set_log_sizes(self, log_sizes: Callable[[], Iterator[tuple[str, int, int]]]) -> None:
        """The log-size source, once the LogManager exists (read at scrape time)."""
        self._log_sizes = log_sizes
        if self._log_collector is not None:
            self._log_collector.log_sizes = log_sizes

    def wait_http_port(self, timeout: float = 60.0) -> int:
        """The port of the HTTP endpoint once it listens (it starts after the broker is ready, off the loop);
        raises TimeoutError if it does not within `timeout` seconds."""
        if not self._serving.wait(timeout) or self.http_port is None:
            raise TimeoutError("the metrics endpoint did not start (is metrics.port set?)")
        return self.http_port

    @property
    def started(self) -> bool:
        return self.registry is not None

    def start(self, port: int = -1, host: str = "127.0.0.1") -> None:
        """Create the registry and metrics; serve them over HTTP when `port >= 0` (0 = ephemeral)."""
        if self.registry is None:
            from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

            reg = CollectorRegistry(auto_describe=True)
            self._requests = Counter(
                "tidelog_requests", "Requests handled, by API and response error code", ["api", "error_code"],
                registry=reg,
            )
            self._latency = Histogram(
                "tidelog_request_latency_seconds", "Time from request read to response written", ["api"],
                buckets=_LATENCY_BUCKETS, registry=reg,
            )
            self._bytes_in = Counter("tidelog_network_bytes_in", "Request bytes read", registry=reg)
            self._bytes_out = Counter("tidelog_network_bytes_out", "Response bytes written", registry=reg)
            self._connections = Gauge("tidelog_connections", "Open client connections", registry=reg)
            self._log_collector = _LogCollector(self._log_sizes)
            reg.register(self._log_collector)
            for collector in self.collectors:
                reg.register(collector)
            self.registry = reg
        if port >= 0 and self._http_server is None:
            from prometheus_client import start_http_server

            server, _thread = start_http_server(port, addr=host, registry=self.registry)
            self._http_server = server
            self.http_port = server.server_address[1]
            self._serving.set()
            log.info("Metrics served on http://%s:%d/metrics", host, self.http_port)

    def stop(self) -> None:
        if self._http_server is not None:
            self._http_server.shutdown()
            self._http_server.server_close()
            self._http_server = None

    # --- recording (no-ops until start()) ---

    def record_request(self, api: str, error_code: int | None, seconds: float) -> None:
        if self.registry is None:
            return
        children = self._children.get((api, error_code))
        if children is None:
            children = (self._requests.labels(api, "" if error_code is None else str(error_code)),
                        self._latency.labels(api))
            self._children[(api, error_code)] = children
        children[0].inc()
        children[1].observe(seconds)

    def record_bytes(self, bytes_in: int, bytes_out: int) -> None:
        if self.registry is None:
            return
        if bytes_in:
            self._bytes_in.inc(bytes_in)
        if bytes_out:
            self._bytes_out.inc(bytes_out)

    def connection_opened(self) -> None:
        if self.registry is not None:
            self._connections.inc()

    def connection_closed(self) -> None:
        if self.registry is not None:
            self._connections.dec()

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """Current value of one sample (tests and the CLI use this; None if absent)."""
        if self.registry is None:
            return None
        value = self.registry.get_sample_value(name, labels or {})
        return None if value is None else float(value)


class _LogCollector:
    """Partition count and per-partition log size, read from the LogManager at scrape time."""

    def __init__(self, log_sizes: Callable[[], Iterator[tuple[str, int, int]]] | None) -> None:
        self.log_sizes = log_sizes

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        count = GaugeMetricFamily("tidelog_partition_count", "Partitions hosted by this broker")
        sizes = GaugeMetricFamily("tidelog_log_size_bytes", "Size of a partition's log", labels=["topic", "partition"])
        n = 0
        if self.log_sizes is not None:
            try:
                for topic, partition, size in self.log_sizes():
                    n += 1
                    sizes.add_metric([topic, str(partition)], size)
            except Exception:  # noqa: BLE001 - a scrape must never take the broker down
                log.exception("Collecting log sizes failed")
        count.add_metric([], n)
        yield count
        yield sizes
