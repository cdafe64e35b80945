"""Test helpers: an in-process broker (`run_broker`) and a subprocess broker (`BrokerProcess`).

    with run_broker() as b:              # fresh temp log dir, ephemeral port on 127.0.0.1
        KafkaProducer(bootstrap_servers=b.bootstrap)...

`run_broker` runs the server on its own uvloop event loop in a background thread of this process, so tests can
inspect `b.state` (BrokerState). Use `b.call(fn)` to run something on the broker's loop thread.
`BrokerProcess` runs `python -m tidelog serve` (crash tests: `.kill()` is SIGKILL, `.restart()` reuses the
port and log dir).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import uvloop

from tidelog.broker.fault_control import ServerControls, listen_socket
from tidelog.broker.faults import FaultInjector
from tidelog.broker.server import Server
from tidelog.clock import Clock
from tidelog.config.broker_config import BrokerConfig
from tidelog.protocol.messages import request_class, response_class
from tidelog.security.scram_store import MECHANISMS, ScramCredential, ScramCredentialStore
from tidelog.security.throwaway_ca import ThrowawayCA
from tidelog.testing_support import (
    BrokerFaultsMixin,
    ProcessFaultsMixin,
    RecordsMixin,
    TopicRecord,
    join_warm_up_threads,
)

__all__ = ["BrokerHandle", "BrokerProcess", "FaultInjector", "KafkaWire", "TopicRecord", "async_run_broker",
           "free_port", "run_broker", "wait_for_port"]

if TYPE_CHECKING:
    from tidelog.broker.registry import ApiRegistry
    from tidelog.broker.server import Server
    from tidelog.broker.state import BrokerState

T = TypeVar("T")
START_TIMEOUT_S = 60.0  # generous: the test machine is small and shared


class BrokerHandle(BrokerFaultsMixin, RecordsMixin):
    """The broker `run_broker()` yields: `.bootstrap`, `.port`, `.log_dir`, `.state` (BrokerState), `.faults`
    (FaultInjector), the fault controls of `BrokerFaultsMixin` and the record helpers of `RecordsMixin`."""

    def __init__(self, state: BrokerState, server: Server, loop: asyncio.AbstractEventLoop, log_dir: str,
                 faults: FaultInjector | None = None, config: Any = None, clock: Clock | None = None,
                 registry: ApiRegistry | None = None) -> None:
        self.state = state
        self.server = server
        self.loop = loop
        self.log_dir = log_dir
        self.host = "127.0.0.1"
        self.port: int = server.port
        self.faults = faults if faults is not None else FaultInjector()
        self._config = config
        self._clock = clock
        self._registry = registry
        self._controls = ServerControls(server)
        self.settings: dict[str, str] = {}  # what run_broker configured; restart(overrides) starts from it

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def schema_registry_url(self) -> str:
        """The Schema Registry's base URL (a broker started with `schema.registry.port` >= 0), once it runs."""
        registry = self.run_coroutine(self.server.wait_schema_registry())
        return str(registry.url)

    def call(self, fn: Callable[[], T], timeout: float = 60.0) -> T:
        """Run `fn()` on the broker's event loop thread and return its result."""
        fut: Future[T] = Future()

        def run() -> None:
            try:
                fut.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                fut.set_exception(exc)

        self.loop.call_soon_threadsafe(run)
        return fut.result(timeout)

    def wire(self) -> KafkaWire:
        """A raw-protocol client connected to this broker (close it, or use it as a context manager)."""
        return KafkaWire(self.bootstrap)

    def run_coroutine(self, coro: Coroutine[Any, Any, T], timeout: float = START_TIMEOUT_S) -> T:
        """Run `coro` on the broker's event loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    # -------------------------------------------------------------------------- lifecycle (loop side)
    async def _pause(self) -> None:
        await self._controls.pause()

    async def _resume(self) -> None:
        await self._controls.resume()

    async def _drop_connections(self) -> int:
        return await self._controls.drop_connections()

    async def _restart(self, overrides: Mapping[str, Any] | None = None) -> None:
        await self.server.stop()
        if overrides:
            self.settings = {**self.settings, **_settings(overrides)}
            self._config = BrokerConfig.load(None, {}, self.settings)
        server = Server(self._config, self._clock, self._registry, faults=self.faults)
        await server.start(sock=listen_socket(self.host, self.port))
        self.state, self.server, self._controls = server.broker, server, ServerControls(server)


def _settings(overrides: Mapping[str, Any]) -> dict[str, str]:
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in overrides.items()}


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return asyncio.new_event_loop()


@contextlib.contextmanager
def run_broker(log_dir: str | os.PathLike[str] | None = None, port: int = 0,
               overrides: Mapping[str, Any] | None = None, clock: Clock | None = None,
               registry: ApiRegistry | None = None, faults: FaultInjector | None = None,
               topics: Mapping[str, int | Mapping[str, Any]] | None = None,
               fault_hooks: Any = None, load_services_after_ready: bool = False) -> Iterator[BrokerHandle]:
    """Start a broker in a background thread; stop it (clean shutdown) on exit. A temporary log dir is
    created (and removed afterwards) when `log_dir` is None. `registry` (tidelog.broker.registry.ApiRegistry) replaces
    the handler modules, for tests of the dispatch itself. `faults`: the FaultInjector to use (a new one by
    default). `topics`: created before the handle is returned, name -> partitions or
    {"partitions": n, "configs": {...}}. `fault_hooks` (tidelog.storage.fault_hooks.FaultHooks): what happens
    at the named steps of storage, the cleaner and the coordinators (set as the injector's `steps`).
    `load_services_after_ready`: return once the logs are loaded, with the coordinators still loading (as
    `tidelog serve` starts; their APIs answer COORDINATOR_LOAD_IN_PROGRESS until `state.services.loaded`)."""
    tmp = None
    if log_dir is None:
        tmp = tempfile.mkdtemp(prefix="tidelog-")
        log_dir = tmp
    log_dir = str(log_dir)
    settings: dict[str, str] = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": log_dir}
    settings.update(_settings(overrides or {}))
    config = BrokerConfig.load(None, {}, settings)
    injector = faults if faults is not None else FaultInjector()
    if fault_hooks is not None:
        injector.steps = fault_hooks

    loop = _new_loop()
    ready: Future[BrokerHandle] = Future()
    stop_event: asyncio.Event | None = None

    async def main() -> None:
        nonlocal stop_event
        stop_event = asyncio.Event()
        server = Server(config, clock, registry, faults=injector)
        try:
            await server.start(load_services_after_ready=load_services_after_ready)
        except BaseException as exc:
            ready.set_exception(exc)
            return
        handle = BrokerHandle(server.broker, server, loop, log_dir, injector, config, clock, registry)
        handle.settings = settings
        ready.set_result(handle)
        try:
            await stop_event.wait()
        finally:
            await handle.server.stop()
            await asyncio.to_thread(join_warm_up_threads)

    def thread_main() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(main())
        finally:
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    thread = threading.Thread(target=thread_main, name="tidelog-broker", daemon=True)
    thread.start()
    try:
        handle = ready.result(START_TIMEOUT_S)
        try:
            for name, spec in (topics or {}).items():
                handle.create_topic(name, spec)
            yield handle
        finally:
            assert stop_event is not None
            loop.call_soon_threadsafe(stop_event.set)
            thread.join(START_TIMEOUT_S)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


@contextlib.asynccontextmanager
async def async_run_broker(**kwargs: Any) -> AsyncIterator[BrokerHandle]:
    """`run_broker` for asyncio tests (aiokafka): starts and stops the broker on a worker thread so the
    test's event loop keeps running. `async with async_run_broker() as b: AIOKafkaProducer(b.bootstrap)`."""
    manager = run_broker(**kwargs)
    handle = await asyncio.to_thread(manager.__enter__)
    try:
        yield handle
    except BaseException as exc:
        if not await asyncio.to_thread(manager.__exit__, type(exc), exc, exc.__traceback__):
            raise
    else:
        await asyncio.to_thread(manager.__exit__, None, None, None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(host: str, port: int, timeout: float = START_TIMEOUT_S,
                  alive: Callable[[], bool] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return
        except OSError:
            pass
        if alive is not None and not alive():
            raise RuntimeError(f"broker process exited before listening on {host}:{port}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing listening on {host}:{port} after {timeout} s")
        time.sleep(0.05)


class BrokerProcess(ProcessFaultsMixin):
    """`python -m tidelog serve` in a subprocess on a fixed free port and log dir.

    Fault controls as on `BrokerHandle` (inject_errors, set_latency, clear_faults, pause, resume,
    drop_connections) go over the broker's loopback control channel (`--fault-control-port`, on unless
    `fault_control=False`); `restart()` stops the process (SIGTERM, or SIGKILL with kill=True) and starts it
    again on the same port and log dir. Injected faults do not survive a restart (a new process), and the
    record helpers (`records`, `committed_offsets`) are in-process only."""

    def __init__(self, log_dir: str | os.PathLike[str], port: int | None = None,
                 overrides: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
                 log_file: str | os.PathLike[str] | None = None, args: Sequence[str] = (),
                 fault_control: bool = True) -> None:
        self.log_dir = str(log_dir)
        self.args = list(args)  # extra `tidelog serve` arguments, e.g. ["--log-format", "json"]
        self.port = port or free_port()
        self.control_port: int | None = free_port() if fault_control else None
        self.host = "127.0.0.1"
        self.overrides = dict(overrides or {})
        self.env = dict(env) if env is not None else None
        self.log_file = Path(log_file) if log_file else Path(self.log_dir).parent / f"tidelog-{self.port}.out"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "tidelog", "serve", "--override",
               f"listeners=PLAINTEXT://{self.host}:{self.port}", "--override", f"log.dirs={self.log_dir}"]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={str(v).lower() if isinstance(v, bool) else v}"]
        if self.control_port is not None:
            cmd += ["--fault-control-port", str(self.control_port)]
        return cmd + self.args

    def start(self, timeout: float = START_TIMEOUT_S) -> BrokerProcess:
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError("already running")
        env = dict(os.environ if self.env is None else self.env)
        # The subprocess must import this checkout even without `pip install -e`.
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        Path(self.log_dir).mkdir(parents=True, exist_ok=True)
        out = open(self.log_file, "ab")  # noqa: SIM115 - owned by the child for its lifetime
        try:
            self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT, env=env)
        finally:
            out.close()
        proc = self.proc
        wait_for_port(self.host, self.port, timeout, alive=lambda: proc.poll() is None)
        if self.control_port is not None:  # opened once the broker is ready
            wait_for_port(self.host, self.control_port, timeout, alive=lambda: proc.poll() is None)
        return self

    def output(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def kill(self) -> None:
        """SIGKILL: an unclean shutdown (no flush, no checkpoints, no .kafka_cleanshutdown)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(START_TIMEOUT_S)

    def stop(self, timeout: float = START_TIMEOUT_S) -> int | None:
        """SIGTERM and wait for the clean shutdown; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        return self.proc.returncode

    def restart(self, kill: bool = False, timeout: float = START_TIMEOUT_S) -> BrokerProcess:
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start(timeout)

    def __enter__(self) -> BrokerProcess:
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class KafkaWire:
    """A raw Kafka-protocol client over one blocking socket, for protocol-level tests.

    `send(api_key, version, request)` writes one request (kafka-python request object, or raw body bytes)
    and returns its correlation id; `receive(api_key, version)` reads one response and decodes it.
    """

    def __init__(self, bootstrap: str, client_id: str | None = "tidelog-test", timeout: float = 60.0) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.client_id = client_id
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> KafkaWire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def frame(self, api_key: int, version: int, request: Any, correlation_id: int | None = None) -> bytes:
        """The complete size-prefixed request frame (header v1 or v2 by the version's flexibility)."""

        if correlation_id is None:
            self.correlation_id += 1
            correlation_id = self.correlation_id
        header = struct.pack(">hhi", api_key, version, correlation_id)
        if self.client_id is None:
            header += struct.pack(">h", -1)
        else:
            cid = self.client_id.encode()
            header += struct.pack(">h", len(cid)) + cid
        flexible = False
        try:
            flexible = bool(request_class(api_key).flexible_version_q(version))
        except (KeyError, ValueError):
            pass
        if flexible:
            header += b"\x00"
        body = request if isinstance(request, (bytes, bytearray)) else bytes(request.encode(version=version))
        return struct.pack(">i", len(header) + len(body)) + header + body

    def send(self, api_key: int, version: int, request: Any) -> int:
        self.sock.sendall(self.frame(api_key, version, request))
        return self.correlation_id

    def read_frame(self) -> bytes:
        """One response frame without its size prefix; raises EOFError if the broker closed the socket."""
        size = struct.unpack(">i", self._read_exact(4))[0]
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def receive(self, api_key: int, version: int) -> tuple[int, Any]:
        """(correlation id, decoded response); the header is v0 for ApiVersions, else by flexibility."""

        data = self.read_frame()
        (correlation_id,) = struct.unpack_from(">i", data, 0)
        cls = response_class(api_key)
        pos = 4
        if api_key != 18 and cls.flexible_version_q(version):
            pos += 1  # empty tagged fields of response header v1
        return correlation_id, cls[version].decode(data[pos:], version=version)

    def request(self, api_key: int, version: int, request: Any) -> Any:
        correlation_id = self.send(api_key, version, request)
        got, response = self.receive(api_key, version)
        assert got == correlation_id, f"correlation id {got}, expected {correlation_id}"
        return response

    def alter_client_quota(self, entity_type: str, entity_name: str, key: str, value: float | None) -> None:
        """Set (or, with None, remove) one client quota over AlterClientQuotas v1; raises if the broker refuses it."""
        cls = request_class(49)[1]
        E = cls.EntryData
        entry = E(entity=[E.EntityData(entity_type=entity_type, entity_name=entity_name)],
                  ops=[E.OpData(key=key, value=value or 0.0, remove=value is None)])
        codes = [e.error_code for e in self.request(49, 1, cls(entries=[entry], validate_only=False)).entries]
        if codes != [0]:
            raise RuntimeError(f"AlterClientQuotas {entity_type}={entity_name} {key}={value}: error codes {codes}")

    def is_closed(self, timeout: float = 30.0) -> bool:
        """True once the broker has closed the connection (EOF or reset) within `timeout`."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False


# --- security: a broker with TLS and SASL users in one call ---

SECURE_LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT")


class SecureBrokerHandle:
    """A running broker with PLAINTEXT, SSL (client certificates requested), SASL_SSL and SASL_PLAINTEXT
    listeners, a throwaway CA (`ca.ca_pem`), PLAIN and SCRAM users, and client settings for each client library."""

    def __init__(self, broker: BrokerHandle, ca: Any, users: Mapping[str, str]) -> None:
        self.broker = broker
        self.state = broker.state
        self.ca = ca
        self.users = dict(users)
        ports = broker.server.ports
        self.listeners = {name: f"127.0.0.1:{ports[name]}" for name in SECURE_LISTENERS}
        self.bootstrap = self.listeners["SASL_SSL"]

    def client_cert(self, common_name: str) -> Any:
        """A client certificate signed by the CA; the broker's principal for it is
        `User:CN=<common_name>,OU=test,O=tidelog-test`."""
        return self.ca.issue(common_name)

    def confluent_config(self, listener: str = "SASL_SSL", mechanism: str = "SCRAM-SHA-512",
                         user: str | None = None, cert: Any = None) -> dict[str, str]:
        """librdkafka / confluent-kafka / kcat (-X) settings for `listener`."""
        conf = {"bootstrap.servers": self.listeners[listener], "security.protocol": listener}
        if "SSL" in listener:
            conf["ssl.ca.location"] = str(self.ca.ca_pem)
            if cert is not None:
                conf["ssl.certificate.location"] = str(cert.cert_pem)
                conf["ssl.key.location"] = str(cert.key_pem)
        if listener.startswith("SASL"):
            user = user or next(iter(self.users))
            conf.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": self.users[user]})
        return conf

    def kafka_python_config(self, listener: str = "SASL_SSL", mechanism: str = "SCRAM-SHA-512",
                            user: str | None = None, cert: Any = None) -> dict[str, Any]:
        """kafka-python / aiokafka keyword arguments (aiokafka wants `ssl_context` built from ssl_cafile)."""
        conf: dict[str, Any] = {"bootstrap_servers": self.listeners[listener], "security_protocol": listener}
        if "SSL" in listener:
            conf["ssl_cafile"] = str(self.ca.ca_pem)
            if cert is not None:
                conf["ssl_certfile"] = str(cert.cert_pem)
                conf["ssl_keyfile"] = str(cert.key_pem)
        if listener.startswith("SASL"):
            user = user or next(iter(self.users))
            conf.update({"sasl_mechanism": mechanism, "sasl_plain_username": user,
                         "sasl_plain_password": self.users[user]})
        return conf

    def java_properties(self, listener: str = "SASL_SSL", mechanism: str = "SCRAM-SHA-512",
                        user: str | None = None, cert: Any = None) -> dict[str, str]:
        """Java client properties (PEM truststore/keystore, KIP-651)."""
        props = {"bootstrap.servers": self.listeners[listener], "security.protocol": listener}
        if "SSL" in listener:
            props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca.ca_pem)})
            if cert is not None:
                props.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(cert.keystore_pem)})
        if listener.startswith("SASL"):
            user = user or next(iter(self.users))
            module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
                      else "org.apache.kafka.common.security.scram.ScramLoginModule")
            props.update({"sasl.mechanism": mechanism, "sasl.jaas.config":
                          f'{module} required username="{user}" password="{self.users[user]}";'})
        return props


def _jaas_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


@contextlib.contextmanager
def run_secure_broker(log_dir: str | os.PathLike[str] | None = None, users: Mapping[str, str] | None = None,
                      mechanisms: Sequence[str] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
                      ssl_client_auth: str = "requested", authorizer: bool = False,
                      super_users: Sequence[str] = (), overrides: Mapping[str, Any] | None = None,
                      clock: Clock | None = None) -> Iterator[SecureBrokerHandle]:
    """`run_broker` with TLS and SASL: a throwaway CA and broker certificate are generated, every user in
    `users` (name -> password) can log in with PLAIN and SCRAM-SHA-256/512. `authorizer=True` turns on
    StandardAuthorizer with `super_users` (e.g. ["User:admin"])."""
    users = dict(users or {"alice": "alice-secret", "admin": "admin-secret"})
    tmp = None
    if log_dir is None:
        tmp = tempfile.mkdtemp(prefix="tidelog-secure-")
        log_dir = tmp
    data_dir = Path(log_dir) / "data"
    try:
        ca = ThrowawayCA(Path(log_dir) / "certs")
        server_cert = ca.issue("localhost", server=True)
        store = ScramCredentialStore(data_dir)
        for name, password in users.items():
            for mechanism in MECHANISMS:
                store.put(name, mechanism, ScramCredential.from_password(mechanism, password))
        plain_users = " ".join(f'user_{n}="{_jaas_quote(p)}"' for n, p in users.items())
        settings: dict[str, Any] = {
            "listeners": ",".join(f"{n}://127.0.0.1:0" for n in SECURE_LISTENERS),
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server_cert.keystore_pem),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.ca_pem),
            "ssl.client.auth": ssl_client_auth,
            "sasl.enabled.mechanisms": ",".join(mechanisms),
            "connection.failed.authentication.delay.ms": 0,
        }
        for listener in ("sasl_ssl", "sasl_plaintext"):
            settings[f"listener.name.{listener}.plain.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};")
        if authorizer:
            settings["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            settings["super.users"] = ";".join(super_users)
        settings.update(overrides or {})
        with run_broker(data_dir, overrides=settings, clock=clock) as broker:
            yield SecureBrokerHandle(broker, ca, users)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
