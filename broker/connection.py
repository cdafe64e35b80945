"""One client connection: read size-prefixed frames, dispatch each request, write responses in order.

Requests on a connection are handled strictly one at a time (Kafka mutes a channel until its response is
sent), which gives in-order responses for pipelined requests. Anything malformed closes this connection
with one log line; other connections are unaffected.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from typing import TYPE_CHECKING, Any

from broker.context import RequestContext

if TYPE_CHECKING:
    from broker.server import ApiRegistry
    from broker.state import BrokerState

log = logging.getLogger("broker.connection")

API_VERSIONS_KEY = 18
_HEADER = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_INT32 = struct.Struct(">i")


class ProtocolError(Exception):
    """The request cannot be parsed or served: close the connection (Kafka: InvalidRequestException)."""


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
                 writer: asyncio.StreamWriter, listener: str | None = None) -> None:
        self.state = state
        self.listener = listener or state.listener_name
        self.registry = registry
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.client_host = peer[0] if isinstance(peer, tuple) else ""
        self.max_request_size = int(state.config.socket_request_max_bytes)

    async def run(self) -> None:
        metrics = self.state.metrics
        metrics.connection_opened()
        loop = asyncio.get_running_loop()
        idle_s = max(0.001, int(self.state.config.connections_max_idle_ms) / 1000)
        try:
            while True:
                # Kafka's Selector closes connections idle for connections.max.idle.ms (clients reconnect).
                idle = loop.call_later(idle_s, self._close_idle, idle_s)
                try:
                    size_bytes = await self.reader.readexactly(4)
                except asyncio.IncompleteReadError:
                    return  # clean EOF (or a half-closed socket) between requests
                finally:
                    idle.cancel()
                (size,) = _INT32.unpack(size_bytes)
                if size < 0 or size > self.max_request_size:
                    # Kafka's NetworkReceive: InvalidReceiveException -> close the channel.
                    log.warning("Closing connection from %s: request size %d outside 0..%d (socket.request.max.bytes)",
                                self.peer, size, self.max_request_size)
                    return
                try:
                    frame = await self.reader.readexactly(size)
                except asyncio.IncompleteReadError as exc:
                    log.warning("Closing connection from %s: truncated request (%d of %d bytes)", self.peer,
                                len(exc.partial), size)
                    return
                started = time.perf_counter()
                try:
                    out = await self.handle_frame(memoryview(frame))
                except ProtocolError as exc:
                    log.warning("Closing connection from %s: %s", self.peer, exc)
                    return
                if out is None:
                    metrics.record_bytes(size + 4, 0)
                    continue
                response_frame, api_name, error_code = out
                # Recorded before the write so a client that saw the response also sees it counted.
                metrics.record_bytes(size + 4, len(response_frame))
                metrics.record_request(api_name, error_code, time.perf_counter() - started)
                self.writer.write(response_frame)
                await self.writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:  # noqa: BLE001 - one connection's failure never takes the broker down
            log.exception("Closing connection from %s after an unexpected error", self.peer)
        finally:
            metrics.connection_closed()
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except (Exception, asyncio.CancelledError):  # noqa: BLE001 - peer gone, or broker stopping
                pass

    def _close_idle(self, idle_s: float) -> None:
        log.info("Closing connection from %s: idle for %.0f s (connections.max.idle.ms)", self.peer, idle_s)
        self.writer.transport.abort()

    async def handle_frame(self, frame: memoryview) -> tuple[bytes, str, int | None] | None:
        """Parse, dispatch and encode one request: the response frame (or None for no response)."""
        api_key, api_version, correlation_id, client_id, pos = parse_header_start(frame)
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
        from protocol.messages import request_class

        cls = request_class(api_key)[api_version]
        try:
            if cls.flexible_version_q(api_version):
                pos = skip_tagged_fields(frame, pos)
            request = cls.decode(frame[pos:], version=api_version)
        except ProtocolError:
            raise
        except Exception as exc:  # noqa: BLE001 - kafka-python raises assorted errors on bad bytes
            raise ProtocolError(f"cannot decode {name} v{api_version} request: {exc!r}") from exc
        try:
            response = await module.handle(ctx, request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a handler bug closes this connection only
            log.exception("Handler %s v%d failed for %s", name, api_version, self.peer)
            raise ProtocolError(f"{name} handler failed: {exc!r}") from exc
        if response is None:
            return None
        return self._encode(ctx, response, name)

    def _encode(self, ctx: RequestContext, response: Any, name: str) -> tuple[bytes, str, int | None]:
        version = response.API_VERSION
        if version is None:
            version = ctx.api_version
        try:
            body = response.encode(version=version)
        except Exception as exc:  # noqa: BLE001 - a handler built an unencodable response
            log.exception("Encoding %s v%d response failed", name, version)
            raise ProtocolError(f"cannot encode {name} v{version} response: {exc!r}") from exc
        # Response header v1 (tagged fields) for flexible versions, except ApiVersions: always v0 (KIP-511).
        flexible = ctx.api_key != API_VERSIONS_KEY and response.flexible_version_q(version)
        header = _INT32.pack(ctx.correlation_id) + (b"\x00" if flexible else b"")
        size = len(header) + len(body)
        return _INT32.pack(size) + header + body, name, getattr(response, "error_code", None)
