"""Prometheus metrics of one broker, in its own registry (so several in-process brokers coexist).

prometheus_client costs ~0.1 s to import, so nothing is imported until `start()`, which the server calls
after its listener is up. Recording before that is a cheap no-op. Names follow Kafka's JMX beans loosely
(kafka.network RequestMetrics, BrokerTopicMetrics BytesIn/Out, ReplicaManager PartitionCount, Log Size).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterator
from itertools import accumulate
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
        # Recorded on the event loop as plain numbers (prometheus_client takes a lock per increment, which cost
        # more than the rest of the bookkeeping per request) and turned into metric families at scrape time.
        self.request_counts: dict[tuple[str, int | None], int] = {}
        # api -> [per-bucket counts (the last one is +Inf), sum of seconds]
        self.latencies: dict[str, list[Any]] = {}
        self.bytes_in = 0
        self.bytes_out = 0
        self.connections = 0
        self._log_collector: _LogCollector | None = None
        self.collectors: list[Any] = []  # extra collectors (e.g. the log cleaner) registered at start()
        # start() runs on the warm-up thread while subsystems built on the loop or a worker add collectors
        self._collectors_lock = threading.Lock()
        # path -> function returning a JSON-able body, served beside /metrics (e.g. the cleaner's /api/cleaner);
        # called on the HTTP server's request thread, never on the event loop
        self.json_routes: dict[str, Callable[[], Any]] = {}

    def add_json_route(self, path: str, body: Callable[[], Any]) -> None:
        """Serve `GET path` as application/json from `body()` (JSON-able, or already encoded bytes) on the metrics
        HTTP port."""
        self.json_routes[path] = body

    def set_log_sizes(self, log_sizes: Callable[[], Iterator[tuple[str, int, int]]]) -> None:
        """The log-size source, once the LogManager exists (read at scrape time)."""
        self._log_sizes = log_sizes
        if self._log_collector is not None:
            self._log_collector.log_sizes = log_sizes

    def add_collector(self, collector: Any) -> None:
        """Register a subsystem's collector now, or at start() if the registry does not exist yet."""
        with self._collectors_lock:
            if self.registry is not None:
                self.registry.register(collector)
            else:
                self.collectors.append(collector)

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
            from prometheus_client import CollectorRegistry

            reg = CollectorRegistry(auto_describe=True)
            reg.register(_RequestCollector(self))
            self._log_collector = _LogCollector(self._log_sizes)
            reg.register(self._log_collector)
            with self._collectors_lock:
                for collector in self.collectors:
                    reg.register(collector)
                self.registry = reg
        if port >= 0 and self._http_server is None:
            server = _serve_http(host, port, self._wsgi_app())
            self._http_server = server
            self.http_port = server.server_address[1]
            self._serving.set()
            log.info("Metrics served on http://%s:%d/metrics", host, self.http_port)

    def attach_http(self, server: Any, port: int) -> None:
        """Another HTTP server (the web console's) serves /metrics and the JSON routes on `port`; stop() stops
        it through its shutdown()/server_close()."""
        self._http_server = server
        self.http_port = port
        self._serving.set()
        log.info("Metrics and console served on port %d (/metrics, /)", port)

    def stop(self) -> None:
        if self._http_server is not None:
            self._http_server.shutdown()
            self._http_server.server_close()
            self._http_server = None

    def _wsgi_app(self) -> Callable[..., Any]:
        """/metrics (and anything else) as prometheus_client serves it; the JSON routes by exact path."""
        from prometheus_client import make_wsgi_app

        metrics_app = make_wsgi_app(self.registry)

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
            route = self.json_routes.get(environ.get("PATH_INFO", ""))
            if route is None:
                return list(metrics_app(environ, start_response))
            try:
                result = route()
                body = result if isinstance(result, bytes) else json.dumps(result).encode()
                status = "200 OK"
            except Exception as e:  # noqa: BLE001 - one failed request, never the endpoint
                log.exception("Serving %s failed", environ.get("PATH_INFO"))
                body, status = json.dumps({"error": repr(e)}).encode(), "500 Internal Server Error"
            start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]

        return app

    # --- recording (no-ops until start()) ---

    def record_request(self, api: str, error_code: int | None, seconds: float) -> None:
        key = (api, error_code)
        counts = self.request_counts
        counts[key] = counts.get(key, 0) + 1
        latency = self.latencies.get(api)
        if latency is None:
            latency = self.latencies[api] = [[0] * (len(_LATENCY_BUCKETS) + 1), 0.0]
        latency[0][bisect_left(_LATENCY_BUCKETS, seconds)] += 1  # the first bucket whose bound is >= seconds
        latency[1] += seconds

    def record_bytes(self, bytes_in: int, bytes_out: int) -> None:
        self.bytes_in += bytes_in
        self.bytes_out += bytes_out

    def connection_opened(self) -> None:
        self.connections += 1

    def connection_closed(self) -> None:
        self.connections -= 1

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """Current value of one sample (tests and the CLI use this; None if absent)."""
        if self.registry is None:
            return None
        value = self.registry.get_sample_value(name, labels or {})
        return None if value is None else float(value)


def _serve_http(host: str, port: int, app: Callable[..., Any]) -> Any:
    """A thread-per-request WSGI server on a daemon thread (as prometheus_client's start_http_server)."""
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from prometheus_client.exposition import ThreadingWSGIServer

    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    class QuietHandler(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            pass

    server = make_server(host, port, app, Server, handler_class=QuietHandler)
    threading.Thread(target=server.serve_forever, name="tidelog-metrics-http", daemon=True).start()
    return server


class _RequestCollector:
    """The request, latency, byte and connection figures BrokerMetrics records, as Prometheus families."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        m = self.metrics
        requests = CounterMetricFamily("tidelog_requests", "Requests handled, by API and response error code",
                                       labels=["api", "error_code"])
        for (api, code), n in list(m.request_counts.items()):  # list(): the loop thread may add a key meanwhile
            requests.add_metric([api, "" if code is None else str(code)], n)
        yield requests
        latency = HistogramMetricFamily("tidelog_request_latency_seconds",
                                        "Time from request read to response written", labels=["api"])
        bounds = [repr(float(b)) for b in _LATENCY_BUCKETS] + ["+Inf"]  # as prometheus_client writes "le"
        for api, (buckets, total) in list(m.latencies.items()):
            latency.add_metric([api], list(zip(bounds, accumulate(list(buckets)), strict=True)), total)
        yield latency
        bytes_in = CounterMetricFamily("tidelog_network_bytes_in", "Request bytes read")
        bytes_in.add_metric([], m.bytes_in)
        yield bytes_in
        bytes_out = CounterMetricFamily("tidelog_network_bytes_out", "Response bytes written")
        bytes_out.add_metric([], m.bytes_out)
        yield bytes_out
        connections = GaugeMetricFamily("tidelog_connections", "Open client connections")
        connections.add_metric([], m.connections)
        yield connections


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
