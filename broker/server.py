"""The asyncio (uvloop) listener: accepts connections and runs a Connection per client.

Start-up is kept fast: handler modules (and kafka-python behind them) are imported lazily, by a warm-up
thread started once the listener is up, or on the first request that needs them.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import socket
import threading
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.state import BrokerState

log = logging.getLogger("broker.server")


class ApiRegistry:
    """api key -> handler module, from broker.apis.API_MODULES (imported on first use)."""

    def __init__(self, module_names: tuple[str, ...] | None = None) -> None:
        if module_names is None:
            from broker.apis import API_MODULES

            module_names = API_MODULES
        self._names = module_names
        self._by_key: dict[int, ModuleType] | None = None
        self._advertised: list[tuple[int, int, int]] | None = None
        self._lock = threading.Lock()

    def _load(self) -> dict[int, ModuleType]:
        with self._lock:
            if self._by_key is None:
                by_key: dict[int, ModuleType] = {}
                for name in self._names:
                    try:
                        module = importlib.import_module(f"broker.apis.{name}")
                    except ModuleNotFoundError as exc:
                        if exc.name == f"broker.apis.{name}":
                            continue  # registered but not landed yet: not advertised
                        log.exception("Handler module broker.apis.%s cannot be imported; not serving it", name)
                        continue
                    except Exception:  # noqa: BLE001 - one broken handler must not take down every API
                        log.exception("Handler module broker.apis.%s cannot be imported; not serving it", name)
                        continue
                    by_key[module.API_KEY] = module
                self._by_key = by_key
            return self._by_key

    def module(self, api_key: int) -> ModuleType | None:
        by_key = self._by_key if self._by_key is not None else self._load()
        return by_key.get(api_key)

    def modules(self) -> dict[int, ModuleType]:
        return dict(self._by_key if self._by_key is not None else self._load())

    def advertised_ranges(self) -> list[tuple[int, int, int]]:
        """(api_key, min, max) per module; min is ADVERTISED_MIN when a module sets it (Produce: 0,
        KAFKA-18659) so old librdkafka keeps compression enabled."""
        if self._advertised is None:
            self._advertised = sorted(
                (k, int(getattr(m, "ADVERTISED_MIN", m.MIN_VERSION)), int(m.MAX_VERSION))
                for k, m in self.modules().items()
            )
        return self._advertised

    def warm_up(self) -> None:
        """Import every handler module and the kafka-python message classes they use."""
        from protocol.messages import request_class, response_class

        for key in self._load():
            try:
                request_class(key)
                response_class(key)
            except KeyError:
                pass


_default_registry: ApiRegistry | None = None


def default_registry() -> ApiRegistry:
    global _default_registry
    if _default_registry is None:
        _default_registry = ApiRegistry()
    return _default_registry


class Server:
    def __init__(self, state: BrokerState, registry: ApiRegistry | None = None) -> None:
        self.state = state
        self.registry = registry or default_registry()
        state.api_registry = self.registry  # ApiVersions advertises what this server dispatches to
        self._servers: list[asyncio.AbstractServer] = []
        self.ports: dict[str, int] = {}  # listener name -> bound port
        self._connections: set[asyncio.Task[None]] = set()
        self.host: str = ""
        self.port: int = 0

    async def start(self, warm_up: bool = True, sock: socket.socket | None = None) -> None:
        """Load the logs, bind every listener (the first may be the already listening `sock`), then start
        metrics and the handler warm-up."""
        state = self.state
        state.startup()
        from broker.connection import Connection

        def on_connect_for(listener: str) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter],
                                                      Awaitable[None]]:
            async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                task = asyncio.current_task()
                assert task is not None
                self._connections.add(task)
                try:
                    await Connection(state, self.registry, reader, writer, listener).run()
                except asyncio.CancelledError:
                    pass  # broker stopping; finishing normally keeps asyncio's stream callback quiet
                finally:
                    self._connections.discard(task)

            return on_connect

        for i, (name, host, port) in enumerate(state.listeners):
            callback = on_connect_for(name)
            if i == 0 and sock is not None:
                server = await asyncio.start_server(callback, sock=sock, limit=1 << 20)
            else:
                server = await asyncio.start_server(callback, host or None, port, limit=1 << 20,
                                                    reuse_address=True)
            self._servers.append(server)
            bound_host, bound_port = server.sockets[0].getsockname()[:2]
            self.ports[name] = bound_port
            state.listener_bound(name, bound_port)
            if i == 0:
                self.host, self.port = bound_host, bound_port
        if warm_up:
            threading.Thread(target=self._warm_up, name="tidelog-warm-up", daemon=True).start()

    def _warm_up(self) -> None:
        try:
            self.registry.warm_up()
            port = int(self.state.config.metrics_port)
            self.state.metrics.start(port)
        except Exception:  # noqa: BLE001 - the first request will report the same error on its connection
            log.exception("Warm-up failed")

    async def stop(self) -> None:
        """Stop accepting, close every connection, then shut the broker state down (flush, checkpoints)."""
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        for server in servers:
            await server.wait_closed()
        self.state.shutdown()


async def serve(state: BrokerState, stop: asyncio.Event, on_ready: object = None) -> None:
    """Run a broker until `stop` is set (the CLI sets it on SIGTERM/SIGINT)."""
    server = Server(state)
    await server.start()
    if callable(on_ready):
        on_ready(server)
    try:
        await stop.wait()
    finally:
        await server.stop()
