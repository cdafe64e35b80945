"""BrokerState: everything a request handler can reach through `ctx.broker` (see docs/ARCHITECTURE.md).

Optional subsystems (group coordinator, producer ids, cleaner, purgatory) are created only when their module
exists, through `_optional` below: one line per subsystem, so landing a new one is a one-line change.
"""

from __future__ import annotations

import base64
import logging
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.metrics import BrokerMetrics
from config.broker_config import parse_listeners
from tidelog.clock import Clock

if TYPE_CHECKING:
    from config.broker_config import BrokerConfig

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


def new_cluster_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): 22 chars of URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


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
        self.log_manager: Any = self._create_log_manager()
        from broker.topics import TopicManager

        self.topics: Any = TopicManager(config, self.log_manager)
        self.metrics = BrokerMetrics(self._log_sizes)
        self.cluster_id: str = ""
        self.api_registry: Any = None  # set by the Server that serves this state
        # --- optional subsystems: one line each ---
        self.purgatory: Any = _optional("broker.purgatory", lambda m: m.FetchPurgatory(self.clock))
        # the coordinator persists to __consumer_offsets through self.topics (created above)
        self.groups: Any = _optional("broker.groups", lambda m: m.create_group_coordinator(self))
        self.producer_ids: Any = _optional("broker.producer_ids", lambda m: m.ProducerIdManager(config.log_dirs[0]))
        self.cleaner: Any = _optional("cleaner.broker", lambda m: m.create_log_cleaner(self))
        self._started = False

    def _create_log_manager(self) -> Any:
        from storage.log_manager import LogManager

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
        for d in self.config.log_dirs:
            Path(d).mkdir(parents=True, exist_ok=True)
        self.log_manager.startup()
        self._started = True  # from here on shutdown() must close the logs, even if a later step fails
        self.cluster_id = self.log_manager.meta_properties().get("cluster.id") or ""
        if not self.cluster_id:
            self.cluster_id = self.config.cluster_id or new_cluster_id()
        self.topics.startup()
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
        for tp, lg in list(self.log_manager.all_logs().items()):
            size = getattr(lg, "size", None)
            if size is None:
                size = sum(f.stat().st_size for f in Path(lg.dir).glob("*.log"))
            yield tp.topic, tp.partition, int(size() if callable(size) else size)
