"""The asyncio (uvloop) listener: accepts connections and runs a Connection per client.

Start-up is kept fast: clients probe with ApiVersions first, so `Server.start` binds the listeners with only
what ApiVersions needs (its handler and the static API table) and answers it at once; other requests wait
for `ready`. A worker thread builds the broker state (`build_broker_state`, which imports storage) and loads
the logs while ApiVersions is answered; then `ready` is set. The coordinators and the cleaner
(`BrokerState.build_services`) are built on a worker thread and started on the loop either before `ready`
(the default: in-process test brokers) or, with `load_services_after_ready` (`tidelog serve`), right after it,
while their APIs answer COORDINATOR_LOAD_IN_PROGRESS as Kafka's loading coordinators do. A warm-up thread
then imports the remaining handlers and kafka-python classes and starts the metrics endpoint.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tidelog.broker.connection import Connection
from tidelog.broker.endpoints import ListenerEndpoints
from tidelog.broker.features import FeatureControl
from tidelog.broker.frame_stream import FrameStream
from tidelog.broker.metrics import BrokerMetrics
from tidelog.broker.registry import ApiRegistry
from tidelog.clock import Clock
from tidelog.config.broker_config import BrokerConfig
from tidelog.metadata import StateFileError
from tidelog.protocol.api_keys import ApiKey
from tidelog.security.manager import BrokerSecurity

if TYPE_CHECKING:
    from tidelog.broker.faults import FaultInjector
    from tidelog.broker.state import BrokerState

log = logging.getLogger(__name__)

WARM_UP_DELAY_S = 0.2


class Server:
    def __init__(self, config: BrokerConfig, clock: Clock | None = None, registry: ApiRegistry | None = None,
                 faults: FaultInjector | None = None) -> None:
        self.config = config
        self.clock = clock
        # tidelog.broker.faults: scripted errors, latency and internal-step hooks for tests; None in production
        self.faults = faults
        self.registry = registry or ApiRegistry()
        self.endpoints = ListenerEndpoints(config)
        self.metrics = BrokerMetrics()
        self.security = BrokerSecurity(config, clock)  # TLS contexts and SASL settings are checked here
        self.features = FeatureControl(config.log_dirs[0], config.node_id)  # ApiVersions reports them from the start
        self.state: BrokerState | None = None  # built by finish_startup()
        self._servers: list[asyncio.AbstractServer] = []
        self.ports: dict[str, int] = {}  # listener name -> bound port
        self._connections: set[asyncio.Task[None]] = set()
        self.host: str = ""
        self.port: int = 0
        # Set once the logs are loaded and the services started; requests other than ApiVersions wait for it.
        self.ready = asyncio.Event()
        self._services_task: asyncio.Task[None] | None = None  # loading the coordinators after `ready`
        # schema.registry.port >= 0: the Schema Registry (tidelog.schema_registry), started right after `ready`
        self.schema_registry: Any = None
        self._schema_registry_task: asyncio.Task[Any] | None = None

    @property
    def broker(self) -> BrokerState:
        """The broker state, once `ready` is set."""
        if self.state is None:
            raise RuntimeError("the broker is not started")
        return self.state

    async def start(self, warm_up: bool = True, sock: socket.socket | None = None,
                    load_services_after_ready: bool = False) -> None:
        """Bind every listener (the first may be the already listening `sock`) and answer ApiVersions from
        then on; load the logs; start the services (or, `load_services_after_ready`, start loading them),
        metrics and the handler warm-up. Returns when ready."""
        await self.start_listening(sock)
        try:
            await self.finish_startup(warm_up, load_services_after_ready)
        except BaseException:
            await self._close_listeners()
            if self.state is not None:
                self.state.shutdown()
            raise

    async def start_listening(self, sock: socket.socket | None = None) -> None:
        """Accept connections: ApiVersions is answered at once, other requests wait for `ready`."""
        self.registry.handler(ApiKey.API_VERSIONS)  # hand-coded: no kafka-python class to build (metadata_codec)

        def stream_for(listener: str) -> Callable[[], FrameStream]:
            async def on_connect(stream: FrameStream) -> None:
                task = asyncio.current_task()
                assert task is not None
                self._connections.add(task)
                try:
                    await Connection(self, stream, listener).run()
                except asyncio.CancelledError:
                    pass  # broker stopping
                finally:
                    self._connections.discard(task)

            max_frame = int(self.config.socket_request_max_bytes)
            send_buffer = int(self.config.get("socket.send.buffer.bytes"))
            receive_buffer = int(self.config.get("socket.receive.buffer.bytes"))
            return lambda: FrameStream(max_frame, on_connect, send_buffer, receive_buffer)

        try:
            for i, (name, host, port) in enumerate(self.endpoints.listeners):
                factory = stream_for(name)
                # loop.create_server, or for a TLS listener the same behind its SSLProtocol (security.tls)
                start = self.security.protocol_server_starter(name)
                if i == 0 and sock is not None:
                    server = await start(factory, sock=sock)
                else:
                    server = await start(factory, host or None, port, reuse_address=True)
                self._servers.append(server)
                bound_host, bound_port = server.sockets[0].getsockname()[:2]
                self.ports[name] = bound_port
                self.endpoints.bound(name, bound_port)
                if i == 0:
                    self.host, self.port = bound_host, bound_port
        except BaseException:
            await self._close_listeners()
            raise

    async def finish_startup(self, warm_up: bool = True, load_services_after_ready: bool = False) -> None:
        """Build the broker state and load the logs on a worker thread (the loop keeps answering ApiVersions),
        then let the waiting requests through; the coordinators and cleaner are loaded before that, or right
        after it with `load_services_after_ready`."""
        self.state = await asyncio.to_thread(self._build_and_load, not load_services_after_ready)
        if not load_services_after_ready:
            await self._load_services(self.state)
        self.ready.set()
        if load_services_after_ready:
            self._services_task = asyncio.create_task(self._load_services_in_background(self.state))
        if int(self.config.get("schema.registry.port")) >= 0:
            self._schema_registry_task = asyncio.create_task(self._start_schema_registry())
        if warm_up:
            threading.Thread(target=self._warm_up, name="tidelog-warm-up", daemon=True).start()

    async def _start_schema_registry(self) -> Any:
        """Replay `_schemas` and open the registry's port on a worker thread (the loop keeps serving)."""
        loop = asyncio.get_running_loop()
        port, host = int(self.config.get("schema.registry.port")), str(self.config.get("schema.registry.host"))

        def start() -> Any:
            # lazy for start-up time: aiohttp and the schema libraries load only when the registry is on
            from tidelog.schema_registry.http import start_schema_registry

            return start_schema_registry(self, loop, host, port)

        try:
            self.schema_registry = await asyncio.to_thread(start)
            self.broker.schema_ids = self.schema_registry.service.state  # Schema ID Validation's lookups
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Starting the schema registry failed")
            raise
        return self.schema_registry

    async def wait_schema_registry(self) -> Any:
        """The running Schema Registry (tidelog.schema_registry.http.SchemaRegistryHttp), once it is started."""
        if self._schema_registry_task is None:
            raise RuntimeError("the schema registry is off (schema.registry.port=-1)")
        return await asyncio.shield(self._schema_registry_task)

    def _build_and_load(self, load_handlers: bool) -> BrokerState:
        # lazy for start-up time: building the state imports storage, on this worker thread
        from tidelog.broker.elr import ensure_cluster_min_isr
        from tidelog.broker.state import build_broker_state

        state = build_broker_state(self.config, self.clock, endpoints=self.endpoints, metrics=self.metrics,
                                   registry=self.registry, features=self.features,
                                   fault_hooks=self.faults, security=self.security)
        ensure_cluster_min_isr(state)  # KIP-966: a new cluster's cluster-level min.insync.replicas
        self.state = state  # visible to start()'s clean-up even if loading fails below
        state.load_logs()
        if load_handlers:
            self.registry.load()  # else the warm-up loads them (a handler is imported at its first request)
        return state

    async def _load_services(self, state: BrokerState) -> None:
        """Build the coordinators and the cleaner on a worker thread (their imports), start them on the loop."""
        state.start_services(await asyncio.to_thread(state.build_services))

    async def _load_services_in_background(self, state: BrokerState) -> None:
        try:
            await self._load_services(state)
        except (asyncio.CancelledError, StateFileError):
            raise  # a damaged metadata file (the share-group state) stops start-up, as every other one does
        except Exception:  # noqa: BLE001 - the broker keeps serving; coordinator APIs stay "loading"
            log.exception("Loading the group and transaction coordinators failed")

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
        # Not at once: its imports would take turns on the GIL with the loop answering the first Metadata.
        time.sleep(WARM_UP_DELAY_S)
        try:
            self.registry.load()
            self.registry.warm_up()
            # lazy for start-up time: imported here, at warm-up
            from tidelog.storage import file_space

            file_space.warm_up()  # the first busy segment's block reservation would load ctypes on the loop
            self._start_http()
        except Exception:  # noqa: BLE001 - the first request will report the same error on its connection
            log.exception("Warm-up failed")

    def _start_http(self) -> None:
        """The metrics port: the web console (aiohttp, serving /metrics too) unless console.enable=false."""
        port, host = int(self.config.metrics_port), self.config.metrics_host
        if port < 0 or not self.config.get("console.enable"):
            self.metrics.start(port, host)
            return
        self.metrics.start()
        # lazy for start-up time: the console (aiohttp, jinja2, kafka-python) starts at warm-up, if enabled
        from tidelog.console.http import serve_console

        console = serve_console(self, host, port)
        self.metrics.attach_http(console, console.port)

    async def wait_services_loaded(self) -> None:
        """Until the coordinators and the cleaner are started (at once unless they load after `ready`)."""
        if self._services_task is not None:
            await asyncio.shield(self._services_task)

    async def stop(self) -> None:
        """Stop accepting, close every connection, then shut the broker state down (flush, checkpoints)."""
        if self._services_task is not None:
            self._services_task.cancel()
            await asyncio.gather(self._services_task, return_exceptions=True)
        await self._stop_schema_registry()
        await self._close_listeners()
        if self.state is not None:
            self.state.shutdown()

    async def _stop_schema_registry(self) -> None:
        task, self._schema_registry_task = self._schema_registry_task, None
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)  # a registry still starting finishes first
        registry, self.schema_registry = self.schema_registry, None
        if registry is not None:
            await asyncio.to_thread(registry.shutdown)

