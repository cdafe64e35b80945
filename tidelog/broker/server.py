"""The asyncio (uvloop) listener: accepts connections and runs a Connection per client.

Start-up is kept fast (protocol-compat §9 quirk 17: answer ApiVersions immediately). `Server.start` first
binds the listeners with only what ApiVersions needs loaded (its handler, kafka-python's ApiVersions classes and
the advertised ranges, read from the handler sources without importing them); other requests wait for `ready`.
Then a worker thread builds the broker state and loads the logs and handler modules while ApiVersions is
answered; the group coordinator and cleaner start on the loop; `ready` is set; and a warm-up thread imports the
remaining kafka-python classes and starts the metrics endpoint.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import re
import socket
import sys
import threading
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tidelog.broker.state import BrokerState

log = logging.getLogger("tidelog.broker.server")

API_VERSIONS_KEY = 18
# A module-level `NAME = <int literal>` (optionally `NAME: int = ...`) in a handler's source.
_CONSTANT = re.compile(r"^(API_KEY|MIN_VERSION|MAX_VERSION|ADVERTISED_MIN)\s*(?::\s*int\s*)?=\s*(\d+)\s*(?:#.*)?$",
                       re.MULTILINE)


def _source_constants(name: str) -> dict[str, int] | None:
    """API_KEY, MIN_VERSION, MAX_VERSION (and ADVERTISED_MIN) of handler module `name` without importing it:
    {} if the module does not exist, None if they cannot be read as plain literals (import it instead)."""
    full = f"tidelog.broker.apis.{name}"
    module = sys.modules.get(full)
    if module is not None:
        found = {k: int(getattr(module, k)) for k in ("API_KEY", "MIN_VERSION", "MAX_VERSION", "ADVERTISED_MIN")
                 if hasattr(module, k)}
        return found if {"API_KEY", "MIN_VERSION", "MAX_VERSION"} <= found.keys() else None
    try:
        spec = importlib.util.find_spec(full)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return {}
    if spec.origin is None or not spec.origin.endswith(".py"):
        return None
    try:
        with open(spec.origin, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    found: dict[str, int] = {}
    for key, value in _CONSTANT.findall(text):
        if found.setdefault(key, int(value)) != int(value):
            return None  # assigned twice: only the import knows which value wins
    if not {"API_KEY", "MIN_VERSION", "MAX_VERSION"} <= found.keys():
        return None
    return found


class ApiRegistry:
    """api key -> handler module, from broker.apis.API_MODULES (imported on first use)."""

    def __init__(self, module_names: tuple[str, ...] | None = None) -> None:
        if module_names is None:
            from tidelog.broker.apis import API_MODULES

            module_names = API_MODULES
        self._names = module_names
        self._by_key: dict[int, ModuleType] | None = None
        self._advertised: list[tuple[int, int, int]] | None = None
        self._scanned: list[tuple[int, int, int]] | None = None
        self._lock = threading.Lock()

    def _load(self) -> dict[int, ModuleType]:
        with self._lock:
            if self._by_key is None:
                by_key: dict[int, ModuleType] = {}
                for name in self._names:
                    try:
                        module = importlib.import_module(f"tidelog.broker.apis.{name}")
                    except Exception as exc:  # noqa: BLE001 - one broken handler must not take down every API
                        if isinstance(exc, ModuleNotFoundError) and exc.name == f"tidelog.broker.apis.{name}":
                            continue  # registered but not landed yet: not advertised
                        log.exception("Handler module broker.apis.%s cannot be imported; not serving it", name)
                        continue
                    by_key[module.API_KEY] = module
                self._by_key = by_key
            return self._by_key

    @property
    def loaded(self) -> bool:
        return self._by_key is not None

    def module(self, api_key: int) -> ModuleType | None:
        by_key = self._by_key if self._by_key is not None else self._load()
        return by_key.get(api_key)

    def api_versions_module(self) -> ModuleType | None:
        """The ApiVersions handler, importing only it while the other modules are not loaded yet."""
        if self._by_key is None and "api_versions" in self._names:
            try:
                module = importlib.import_module("tidelog.broker.apis.api_versions")
            except Exception:  # noqa: BLE001 - the full load logs it and leaves ApiVersions unserved
                module = None
            if module is not None and getattr(module, "API_KEY", None) == API_VERSIONS_KEY:
                return module
        return self.module(API_VERSIONS_KEY)

    def prepare_api_versions(self) -> None:
        """Import what the first ApiVersions needs (its handler and kafka-python classes; the ranges are read
        from the sources), so answering it on the loop never waits for other imports."""
        module = self.api_versions_module()
        if module is not None:
            from tidelog.protocol.messages import request_class

            request_class(API_VERSIONS_KEY)
        self.advertised_ranges()

    def modules(self) -> dict[int, ModuleType]:
        return dict(self._by_key if self._by_key is not None else self._load())

    def advertised_ranges(self) -> list[tuple[int, int, int]]:
        """(api_key, min, max) per module; min is ADVERTISED_MIN when a module sets it (Produce: 0,
        KAFKA-18659) so old librdkafka keeps compression enabled."""
        if self._advertised is not None:
            return self._advertised
        if self._by_key is None:
            # Before the modules are imported: the same constants read from their sources (a module that
            # then fails to import stops being advertised once the load has logged it).
            scanned = self._scanned_ranges()
            if scanned is not None:
                return scanned
        self._advertised = sorted(
            (k, int(getattr(m, "ADVERTISED_MIN", m.MIN_VERSION)), int(m.MAX_VERSION))
            for k, m in self.modules().items()
        )
        return self._advertised

    def _scanned_ranges(self) -> list[tuple[int, int, int]] | None:
        if self._scanned is None:
            by_key: dict[int, tuple[int, int, int]] = {}
            for name in self._names:
                found = _source_constants(name)
                if found is None:
                    return None
                if found:
                    key = found["API_KEY"]
                    by_key[key] = (key, found.get("ADVERTISED_MIN", found["MIN_VERSION"]), found["MAX_VERSION"])
            self._scanned = sorted(by_key.values())
        return self._scanned

    def warm_up(self) -> None:
        """Import every handler module and the kafka-python message classes they use."""
        from tidelog.protocol.messages import request_class, response_class

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
        # Set once the logs are loaded and the services started; requests other than ApiVersions wait for it.
        self.ready = asyncio.Event()

    async def start(self, warm_up: bool = True, sock: socket.socket | None = None) -> None:
        """Bind every listener (the first may be the already listening `sock`) and answer ApiVersions from
        then on; load the logs; start the services, metrics and the handler warm-up. Returns when ready."""
        await self.start_listening(sock)
        try:
            await self.finish_startup(warm_up)
        except BaseException:
            await self._close_listeners()
            raise

    async def start_listening(self, sock: socket.socket | None = None) -> None:
        """Accept connections: ApiVersions is answered at once, other requests wait for `ready`."""
        state = self.state
        from tidelog.broker.connection import Connection

        self.registry.prepare_api_versions()

        def on_connect_for(listener: str) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter],
                                                      Awaitable[None]]:
            async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                task = asyncio.current_task()
                assert task is not None
                self._connections.add(task)
                try:
                    await Connection(state, self.registry, reader, writer, listener, self.ready).run()
                except asyncio.CancelledError:
                    pass  # broker stopping; finishing normally keeps asyncio's stream callback quiet
                finally:
                    self._connections.discard(task)

            return on_connect

        try:
            for i, (name, host, port) in enumerate(state.listeners):
                callback = on_connect_for(name)
                start = state.security.server_starter(name)  # asyncio.start_server, or a TLS one (security.tls)
                if i == 0 and sock is not None:
                    server = await start(callback, sock=sock, limit=1 << 20)
                else:
                    server = await start(callback, host or None, port, limit=1 << 20, reuse_address=True)
                self._servers.append(server)
                bound_host, bound_port = server.sockets[0].getsockname()[:2]
                self.ports[name] = bound_port
                state.listener_bound(name, bound_port)
                if i == 0:
                    self.host, self.port = bound_host, bound_port
        except BaseException:
            await self._close_listeners()
            raise

    async def finish_startup(self, warm_up: bool = True) -> None:
        """Load the logs and handler modules on a worker thread (the loop keeps answering ApiVersions), start
        the group coordinator and cleaner on the loop, then let the waiting requests through."""
        await asyncio.to_thread(self._load)
        self.state.start_services()
        self.ready.set()
        if warm_up:
            threading.Thread(target=self._warm_up, name="tidelog-warm-up", daemon=True).start()

    def _load(self) -> None:
        self.state.load_logs()
        self.registry.modules()

    async def _close_listeners(self) -> None:
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        for server in servers:
            await server.wait_closed()

    def _warm_up(self) -> None:
        try:
            self.registry.warm_up()
            config = self.state.config
            self.state.metrics.start(int(config.metrics_port), config.metrics_host)
        except Exception:  # noqa: BLE001 - the first request will report the same error on its connection
            log.exception("Warm-up failed")

    async def stop(self) -> None:
        """Stop accepting, close every connection, then shut the broker state down (flush, checkpoints)."""
        await self._close_listeners()
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
