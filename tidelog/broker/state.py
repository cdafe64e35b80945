"""BrokerState: everything a request handler can reach through `ctx.broker` (see docs/ARCHITECTURE.md).

Optional subsystems (group coordinator, producer ids, cleaner, purgatory) are created only when their module
exists, through `_optional` below: one line per subsystem, so landing a new one is a one-line change.

Construction is cheap: the subsystems (and storage, groups and cleaner behind them, the bulk of start-up's
imports) are built by `load()`, which `Server.start` runs on a worker thread while the listener already answers
ApiVersions (protocol-compat §9 quirk 17). Reading one of them before that builds them on the spot, so
`state.topics` etc. are always usable.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidelog.broker.metrics import BrokerMetrics
from tidelog.clock import Clock
from tidelog.config.broker_config import parse_listeners

if TYPE_CHECKING:
    from tidelog.config.broker_config import BrokerConfig

log = logging.getLogger(__name__)


def _optional(module: str, build: Callable[[Any], Any]) -> Any:
    """`build(module)` if `module` can be imported, else None (the subsystem has not landed yet)."""
    import importlib

    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        return None
    return build(mod)


_SUBSYSTEMS = frozenset({"log_manager", "topics", "purgatory", "groups", "producer_ids", "cleaner"})


def new_cluster_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): 22 chars of URL-safe base64 without padding."""
    from tidelog.storage.checkpoints import random_kafka_uuid, uuid_to_base64

    return uuid_to_base64(random_kafka_uuid())


class BrokerState:
    def __init__(self, config: BrokerConfig, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or Clock()
        self.node_id: int = config.node_id
        self.listeners: list[tuple[str, str, int]] = parse_listeners(config.listeners)
        advertised = {name: (host, port) for name, host, port in
                      parse_listeners(config.advertised_listeners, "advertised.listeners")}
        # Per listener, what Metadata tells clients that connected through it (Kafka: the endpoint of the
        # request's listener). Kafka advertises the canonical host name when the host is empty (all
        # interfaces); port 0 (ephemeral) is replaced by the bound port in Server.start().
        self.advertised_endpoints: dict[str, tuple[str, int]] = {}
        for name, host, port in self.listeners:
            adv_host, adv_port = advertised.get(name, (host, port))
            self.advertised_endpoints[name] = (adv_host or socket.gethostname(), adv_port)
        self.listener_name: str = self.listeners[0][0]
        self.advertised_host, self.advertised_port = self.advertised_endpoints[self.listener_name]
        self.metrics = BrokerMetrics(self._log_sizes)
        from tidelog.security.manager import BrokerSecurity

        self.security = BrokerSecurity(config, self.clock)  # listeners' TLS/SASL, SCRAM users, ACLs, authorizer
        self.cluster_id: str = ""
        self.api_registry: Any = None  # set by the Server that serves this state
        self._load_lock = threading.Lock()
        self._loading: threading.Thread | None = None
        self._loaded = False
        self._started = False

    # The subsystems below are attributes once load() ran; __getattr__ runs it on first access before that.
    log_manager: Any
    topics: Any
    purgatory: Any
    groups: Any
    producer_ids: Any
    cleaner: Any

    def __getattr__(self, name: str) -> Any:
        # Only called for attributes not set yet: a subsystem read before load(), or (by a subsystem's
        # constructor, inside load()) one built after it, which stays an AttributeError as it always was.
        if name in _SUBSYSTEMS and self.__dict__.get("_loading") is not threading.current_thread():
            self.load()
            if name in self.__dict__:
                return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def load(self) -> None:
        """Build the subsystems (idempotent, thread-safe; the logs are read by load_logs())."""
        with self._load_lock:
            if self._loaded:
                return
            self._loading = threading.current_thread()
            try:
                self._build_subsystems()
            finally:
                self._loading = None
            self._loaded = True

    def _build_subsystems(self) -> None:
        config = self.config
        self.log_manager = self._create_log_manager()
        from tidelog.broker.topics import TopicManager

        self.topics = TopicManager(config, self.log_manager)
        # --- optional subsystems: one line each ---
        self.purgatory = _optional("tidelog.broker.purgatory", lambda m: m.FetchPurgatory(self.clock))
        # the coordinator persists to __consumer_offsets through self.topics (created above)
        self.groups = _optional("tidelog.coordinator.group", lambda m: m.create_group_coordinator(self))
        self.producer_ids = _optional("tidelog.broker.producer_ids", lambda m: m.ProducerIdManager(config.log_dirs[0]))
        self.cleaner = _optional("tidelog.cleaner.broker", lambda m: m.create_log_cleaner(self))

    def _create_log_manager(self) -> Any:
        from tidelog.storage.log_manager import LogManager

        return LogManager(list(self.config.log_dirs), self.config.default_log_config(), self.clock,
                          flush_on_append=self.config.log_flush_on_append)

    def advertised_endpoint(self, listener: str) -> tuple[str, int]:
        return self.advertised_endpoints.get(listener, (self.advertised_host, self.advertised_port))

    def listener_bound(self, listener: str, port: int) -> None:
        """Record the port a listener got; an advertised port 0 becomes that port."""
        host, adv_port = self.advertised_endpoints[listener]
        if adv_port == 0:
            self.advertised_endpoints[listener] = (host, port)
        if listener == self.listener_name:
            self.advertised_host, self.advertised_port = self.advertised_endpoints[listener]

    # --- lifecycle (called on the event loop thread: the group coordinator uses loop timers) ---

    def startup(self) -> None:
        """Everything at once, on the loop thread (Server.start splits it: load_logs() on a worker thread)."""
        self.load_logs()
        self.start_services()

    def load_logs(self) -> None:
        """Build the subsystems, load (recover) every log and reconcile the topics. Touches no event loop, so
        Server.start runs it on a worker thread while connections are answered."""
        self.load()
        for d in self.config.log_dirs:
            Path(d).mkdir(parents=True, exist_ok=True)
        self.log_manager.startup()
        self._started = True  # from here on shutdown() must close the logs, even if a later step fails
        self.cluster_id = self.log_manager.meta_properties().get("cluster.id") or ""
        if not self.cluster_id:
            self.cluster_id = self.config.cluster_id or new_cluster_id()
        self.topics.startup()

    def start_services(self) -> None:
        """Start the group coordinator (replays __consumer_offsets; arms loop timers, so on the loop thread)
        and the cleaner threads, after load_logs()."""
        for part in (self.groups, self.cleaner):
            if part is not None and hasattr(part, "startup"):
                part.startup()

    def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        for part in (self.groups, self.cleaner, self.purgatory):
            if part is not None and hasattr(part, "shutdown"):
                try:
                    part.shutdown()
                except Exception:  # noqa: BLE001 - keep going: the logs must still be closed cleanly
                    log.exception("Shutting down %s failed", type(part).__name__)
        self.log_manager.shutdown()
        self.metrics.stop()

    def _log_sizes(self) -> Iterator[tuple[str, int, int]]:
        # Kafka's UnifiedLog.size: the segments' valid bytes, no file system calls per scrape. The lock keeps
        # the segment list still while it is summed (the scrape runs on the metrics HTTP thread).
        for tp, lg in list(self.log_manager.all_logs().items()):
            with lg.lock:
                size = lg.size_in_bytes()
            yield tp.topic, tp.partition, size
