"""One client connection: read size-prefixed frames, dispatch each request, write responses in order.

Requests on a connection are handled strictly one at a time (Kafka mutes a channel until its response is
sent), which gives in-order responses for pipelined requests. Anything malformed closes this connection
with one log line; other connections are unaffected.

While the broker waits on the client (for a request's bytes, or for it to take a response's bytes when the
socket's send buffer is full), it must make progress within connections.max.idle.ms or the connection is
closed (Kafka's Selector idle expiry counts any I/O as activity). Responses are written with drain(), so a
client that stops reading stops the broker from reading its next request: TCP backpressure, bounded memory.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from typing import TYPE_CHECKING, Any

from tidelog.broker.context import CloseConnection, RequestContext

if TYPE_CHECKING:
    from tidelog.broker.server import ApiRegistry
    from tidelog.broker.state import BrokerState

log = logging.getLogger("tidelog.broker.connection")

API_VERSIONS_KEY = 18
_HEADER = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_INT32 = struct.Struct(">i")


class ProtocolError(Exception):
    """The request cannot be parsed or served: close the connection (Kafka: InvalidRequestException).
    `traceback`: the cause is a bug on our side (handler, encoding), logged with its traceback."""

    def __init__(self, message: str, traceback: bool = False) -> None:
        super().__init__(message)
        self.traceback = traceback


def _read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtocolError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ProtocolError("varint too long")


def skip_tagged_fields(buf: memoryview, pos: int) -> int:
    """Skip a tagged-field section (unknown tags are ignored, as Kafka does)."""
    count, pos = _read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise ProtocolError("truncated tagged field")
    return pos


def parse_header_start(frame: memoryview) -> tuple[int, int, int, str | None, int]:
    """(api_key, api_version, correlation_id, client_id, offset after client_id): the part of request
    header v1/v2 that is the same for every version (client_id keeps its INT16 length even in v2)."""
    if len(frame) < _HEADER.size:
        raise ProtocolError(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, n = _HEADER.unpack_from(frame, 0)
    pos = _HEADER.size
    if n < 0:
        if n != -1:
            raise ProtocolError(f"bad client_id length {n}")
        return api_key, api_version, correlation_id, None, pos
    if pos + n > len(frame):
        raise ProtocolError("truncated client_id")
    try:
        client_id = bytes(frame[pos : pos + n]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError("client_id is not UTF-8") from exc
    return api_key, api_version, correlation_id, client_id, pos + n


class Connection:
    def __init__(self, state: BrokerState, registry: ApiRegistry, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, listener: str | None = None,
                 ready: asyncio.Event | None = None) -> None:
        self.state = state
        self.listener = listener or state.listener_name
        self.registry = registry
        self.reader = reader
        self.writer = writer
        self.ready = ready  # requests other than ApiVersions wait for it (the broker is still loading)
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.client_host = peer[0] if isinstance(peer, tuple) else ""
        self.max_request_size = int(state.config.socket_request_max_bytes)
        self._idle_s = max(0.001, int(state.config.connections_max_idle_ms) / 1000)
        self._loop = asyncio.get_running_loop()
        self._idle: asyncio.TimerHandle | None = None
        self._last_activity = 0.0
        self._write_backlog = 0

    async def run(self) -> None:
        metrics = self.state.metrics
        metrics.connection_opened()
        transport = self.writer.transport
        high_water = transport.get_write_buffer_limits()[1]
        try:
            while True:
                self._watch()
                try:
                    size_bytes = await self.reader.readexactly(4)
                except asyncio.IncompleteReadError:
                    return  # clean EOF (or a half-closed socket) between requests
                (size,) = _INT32.unpack(size_bytes)
                if size < 0 or size > self.max_request_size:
                    # Kafka's NetworkReceive: InvalidReceiveException -> close the channel.
                    log.warning("Closing connection from %s: request size %d outside 0..%d (socket.request.max.bytes)",
                                self.peer, size, self.max_request_size)
                    return
                frame = await self._read_frame(size)
                if frame is None:
                    return
                self._unwatch()  # a request being handled is not idleness (Kafka mutes the channel)
                started = time.perf_counter()
                try:
                    out = await self.handle_frame(memoryview(frame))
                except ProtocolError as exc:
                    log.log(logging.ERROR if exc.traceback else logging.WARNING, "Closing connection from %s: %s",
                            self.peer, exc, exc_info=exc.__cause__ if exc.traceback else None)
                    return
                except CloseConnection as exc:
                    metrics.record_bytes(size + 4, 0)
                    log.info("Closing connection from %s: %s", self.peer, exc.reason)
                    return
                if out is None:
                    metrics.record_bytes(size + 4, 0)
                    continue
                response_frame, api_name, error_code = out
                # Recorded before the write so a client that saw the response also sees it counted.
                metrics.record_bytes(size + 4, len(response_frame))
                metrics.record_request(api_name, error_code, time.perf_counter() - started)
                if transport.is_closing():
                    return  # the client went away (or was closed as idle) while its request was handled
                self.writer.write(response_frame)
                if transport.get_write_buffer_size() > high_water:
                    # The client is not taking our bytes as fast as we write them: wait (and watch it).
                    self._watch()
                await self.writer.drain()
                self._unwatch()
                if transport.is_closing():
                    return  # closed for idleness while the client did not read: drop its buffered requests
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:  # noqa: BLE001 - one connection's failure never takes the broker down
            log.exception("Closing connection from %s after an unexpected error", self.peer)
        finally:
            self._unwatch()
            metrics.connection_closed()
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except (Exception, asyncio.CancelledError):  # noqa: BLE001 - peer gone, or broker stopping
                pass

    async def _read_frame(self, size: int) -> bytes | None:
        """The `size` bytes of a request, None (logged) if the client closes first. Each chunk is progress
        for the idle watch, so a slow sender is served and a stalled one is closed."""
        chunk = await self.reader.read(size)
        if len(chunk) == size:
            return chunk  # the usual case: the whole request had arrived
        buf = bytearray(chunk)
        while chunk and len(buf) < size:
            self._last_activity = self._loop.time()
            chunk = await self.reader.read(size - len(buf))
            buf += chunk
        if len(buf) == size:
            return bytes(buf)
        if self.writer.transport.is_closing():
            return None  # closed by the idle watch, which logged it
        log.warning("Closing connection from %s: truncated request (%d of %d bytes)", self.peer, len(buf), size)
        return None

    def _watch(self) -> None:
        """Start (or restart) the idle clock: the client must make progress within connections.max.idle.ms."""
        self._last_activity = self._loop.time()
        self._write_backlog = self.writer.transport.get_write_buffer_size()
        if self._idle is None:
            self._idle = self._loop.call_at(self._last_activity + self._idle_s, self._check_idle)

    def _unwatch(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    def _check_idle(self) -> None:
        self._idle = None
        transport = self.writer.transport
        now = self._loop.time()
        backlog = transport.get_write_buffer_size()
        if backlog < self._write_backlog:  # the client took some of a pending response
            self._last_activity = now
        self._write_backlog = backlog
        due = self._last_activity + self._idle_s
        if now < due:
            self._idle = self._loop.call_at(due, self._check_idle)
            return
        log.info("Closing connection from %s: idle for %.0f s (connections.max.idle.ms)", self.peer, self._idle_s)
        transport.abort()

    async def handle_frame(self, frame: memoryview) -> tuple[bytes, str, int | None] | None:
        """Parse, dispatch and encode one request: the response frame (or None for no response)."""
        api_key, api_version, correlation_id, client_id, pos = parse_header_start(frame)
        if api_key == API_VERSIONS_KEY:
            module = self.registry.api_versions_module()  # answered even while the broker is loading
        else:
            if self.ready is not None and not self.ready.is_set():
                await self.ready.wait()
            module = self.registry.module(api_key)
        if module is None:
            raise ProtocolError(f"unknown api key {api_key} (correlation id {correlation_id})")
        ctx = RequestContext(self.state, api_key, api_version, correlation_id, client_id, self.client_host,
                             self.listener)
        name = module.__name__.rsplit(".", 1)[-1]
        if not module.MIN_VERSION <= api_version <= module.MAX_VERSION:
            if api_key != API_VERSIONS_KEY or api_version < module.MIN_VERSION:
                raise ProtocolError(f"unsupported version {api_version} of {name} (serving "
                                    f"{module.MIN_VERSION}-{module.MAX_VERSION}, client {client_id!r})")
            # KIP-511: a too-new ApiVersions is answered (v0 body, UNSUPPORTED_VERSION), never dropped.
            response = module.unsupported_version_response(ctx)
            return self._encode(ctx, response, name)
        from tidelog.protocol.messages import request_class

        try:
            cls = request_class(api_key)[api_version]
        except (KeyError, IndexError) as exc:
            raise ProtocolError(f"no {name} v{api_version} request schema: {exc!r}", traceback=True) from exc
        try:
            if cls.flexible_version_q(api_version):
                pos = skip_tagged_fields(frame, pos)
            decode = getattr(module, "decode_request", None)  # hand-written hot-path codec (Produce)
            request = decode(frame, pos, api_version) if decode else cls.decode(frame[pos:], version=api_version)
        except ProtocolError:
            raise
        except Exception as exc:  # noqa: BLE001 - kafka-python raises assorted errors on bad bytes
            raise ProtocolError(f"cannot decode {name} v{api_version} request: {exc!r}") from exc
        try:
            response = await module.handle(ctx, request)
        except (asyncio.CancelledError, CloseConnection):
            raise
        except Exception as exc:  # noqa: BLE001 - a handler bug closes this connection only
            raise ProtocolError(f"{name} v{api_version} handler failed: {exc!r}", traceback=True) from exc
        if response is None:
            return None
        return self._encode(ctx, response, name)

    def _encode(self, ctx: RequestContext, response: Any, name: str) -> tuple[bytes, str, int | None]:
        version = ctx.api_version
        try:
            if getattr(response, "API_VERSION", None) is not None:
                version = response.API_VERSION
            body = response.encode(version=version)
            # Response header v1 (tagged fields) for flexible versions, except ApiVersions: always v0 (KIP-511).
            flexible = ctx.api_key != API_VERSIONS_KEY and response.flexible_version_q(version)
        except Exception as exc:  # noqa: BLE001 - a handler built an unencodable response
            raise ProtocolError(f"cannot encode {name} v{version} response: {exc!r}", traceback=True) from exc
        header = _INT32.pack(ctx.correlation_id) + (b"\x00" if flexible else b"")
        size = len(header) + len(body)
        return _INT32.pack(size) + header + body, name, getattr(response, "error_code", None)
