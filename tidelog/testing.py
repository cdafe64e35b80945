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
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tidelog.clock import Clock

if TYPE_CHECKING:
    from tidelog.broker.registry import ApiRegistry
    from tidelog.broker.server import Server
    from tidelog.broker.state import BrokerState

T = TypeVar("T")
START_TIMEOUT_S = 60.0  # generous: the test machine is small and shared


class BrokerHandle:
    def __init__(self, state: BrokerState, server: Server, loop: asyncio.AbstractEventLoop, log_dir: str) -> None:
        self.state = state
        self.server = server
        self.loop = loop
        self.log_dir = log_dir
        self.host = "127.0.0.1"
        self.port: int = server.port

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

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


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return asyncio.new_event_loop()


@contextlib.contextmanager
def run_broker(log_dir: str | os.PathLike[str] | None = None, port: int = 0,
               overrides: Mapping[str, Any] | None = None, clock: Clock | None = None,
               registry: ApiRegistry | None = None) -> Iterator[BrokerHandle]:
    """Start a broker in a background thread; stop it (clean shutdown) on exit. A temporary log dir is
    created (and removed afterwards) when `log_dir` is None. `registry` (tidelog.broker.registry.ApiRegistry)
    replaces the handler modules, for tests of the dispatch itself."""
    from tidelog.broker.server import Server
    from tidelog.config.broker_config import BrokerConfig

    tmp = None
    if log_dir is None:
        tmp = tempfile.mkdtemp(prefix="tidelog-")
        log_dir = tmp
    log_dir = str(log_dir)
    settings: dict[str, str] = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": log_dir}
    settings.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (overrides or {}).items()})
    config = BrokerConfig.load(None, {}, settings)

    loop = _new_loop()
    ready: Future[BrokerHandle] = Future()
    stop_event: asyncio.Event | None = None

    async def main() -> None:
        nonlocal stop_event
        stop_event = asyncio.Event()
        server = Server(config, clock, registry)
        try:
            await server.start()
        except BaseException as exc:
            ready.set_exception(exc)
            return
        ready.set_result(BrokerHandle(server.broker, server, loop, log_dir))
        try:
            await stop_event.wait()
        finally:
            await server.stop()

    def thread_main() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(main())
        finally:
            loop.close()

    thread = threading.Thread(target=thread_main, name="tidelog-broker", daemon=True)
    thread.start()
    try:
        handle = ready.result(START_TIMEOUT_S)
        try:
            yield handle
        finally:
            assert stop_event is not None
            loop.call_soon_threadsafe(stop_event.set)
            thread.join(START_TIMEOUT_S)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


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


class BrokerProcess:
    """`python -m tidelog serve` in a subprocess on a fixed free port and log dir."""

    def __init__(self, log_dir: str | os.PathLike[str], port: int | None = None,
                 overrides: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
                 log_file: str | os.PathLike[str] | None = None, args: Sequence[str] = ()) -> None:
        self.log_dir = str(log_dir)
        self.args = list(args)  # extra `tidelog serve` arguments, e.g. ["--log-format", "json"]
        self.port = port or free_port()
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
        import struct

        from tidelog.protocol.messages import request_class

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
        import struct

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
        import struct

        from tidelog.protocol.messages import response_class

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

    def is_closed(self, timeout: float = 30.0) -> bool:
        """True once the broker has closed the connection (EOF or reset) within `timeout`."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
