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
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tidelog.broker.context import CloseConnection, RequestContext
from tidelog.broker.error_response import error_response
from tidelog.broker.frame_stream import FrameSizeError, FrameStream
from tidelog.broker.quotas import ANONYMOUS
from tidelog.broker.request_quota import LoopTime, timed
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.frame import (
    ProtocolError,
    RequestHeader,
    parse_request_header,
    response_frame,
    skip_tagged_fields,
)
from tidelog.protocol.hot_codecs import HAND_DECODERS
from tidelog.protocol.messages import encode_response
from tidelog.protocol.produce_codec import FLEXIBLE_MIN_VERSION as PRODUCE_FLEXIBLE_MIN_VERSION
from tidelog.protocol.produce_codec import decode_produce_request
from tidelog.protocol.wire import EncodedResponse, Piece

if TYPE_CHECKING:
    from tidelog.broker.mutation_quota import ControllerMutationQuota
    from tidelog.broker.registry import Handler
    from tidelog.broker.server import Server

log = logging.getLogger(__name__)

_NOT_TIMED = LoopTime()  # a request not measured for the request quota (none is set)
_SIZE_AND_ID = struct.Struct(">ii")  # a response frame's size prefix and correlation id
_JOIN_BELOW = 4096  # a one-piece hand-encoded body up to this size is joined to its header (one piece to write)
PLAIN_PRODUCE_VERSIONS = (3, 12)  # what apis/produce.handle_plain answers (v13 names topics by id)
MAX_COALESCED_PIECES = 256  # response pieces gathered before a write even while more Produce requests wait



class Connection:
    def __init__(self, server: Server, stream: FrameStream, listener: str) -> None:
        self.server = server
        self.listener = listener
        self.registry = server.registry
        self.metrics = server.metrics
        self.stream = stream  # frames read into this connection's own buffers (broker/frame_stream.py)
        self.ready = server.ready  # requests other than ApiVersions wait for it (the broker is still loading)
        peer = stream.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.client_host = peer[0] if isinstance(peer, tuple) else ""
        self.client_port: int | None = peer[1] if isinstance(peer, tuple) else None
        self.client_software = ("", "")  # (name, version) from a valid ApiVersions v3+ request (KIP-511)
        config = server.config
        self._idle_s = max(0.001, int(config.connections_max_idle_ms) / 1000)
        self._loop = asyncio.get_running_loop()
        self._idle: asyncio.TimerHandle | None = None
        self._last_activity = 0.0
        self._write_backlog = 0
        self._closed_idle = False
        self._busy = False
        self._throttle_ms = 0  # set by a request over one of its client quotas (broker/quotas.py)
        # TLS/SASL listeners: the authentication phase (tidelog.security.authenticator); None on PLAINTEXT.
        self.session = server.security.new_session(listener)

    async def run(self) -> None:
        metrics = self.metrics
        metrics.connection_opened()
        stream = self.stream
        if self.session is not None and not await self.session.start(self):  # client certificate (logged)
            metrics.connection_closed()
            stream.close()
            return
        transport = stream.transport
        assert transport is not None
        high_water = transport.get_write_buffer_limits()[1]
        # Responses not yet written: while the next request already received is another Produce (a pipelining
        # producer), answers are gathered and written together, one send for several (still in order). Anything
        # else may wait (a Fetch long-polls, a JoinGroup waits for the rebalance), so it never holds them back.
        pending: list[Piece] = []
        try:
            while True:
                if pending and (len(pending) >= MAX_COALESCED_PIECES or stream.next_api_key() != ApiKey.PRODUCE):
                    stream.write(pending)
                    pending = []
                    if not await self._drained(transport, high_water):
                        return
                self._watch()
                try:
                    frame = await stream.read_frame()
                except FrameSizeError as exc:
                    # Kafka's NetworkReceive: InvalidReceiveException -> close the channel.
                    log.warning("Closing connection from %s: request size %d outside 0..%d (socket.request.max.bytes)",
                                self.peer, exc.size, stream.max_frame)
                    return
                if frame is None:
                    if stream.partial and not self._closed_idle:
                        log.warning("Closing connection from %s: truncated request (%d bytes of a frame)",
                                    self.peer, stream.partial)
                    return  # clean EOF between requests, or closed by the idle watch (which logged it)
                size = len(frame)
                self._unwatch()  # a request being handled is not idleness (Kafka mutes the channel)
                started = time.perf_counter()
                try:
                    if self.session is None:
                        out = await self.handle_frame(frame)
                    else:
                        out = await self.session.handle_frame(self, frame)
                except ProtocolError as exc:
                    log.log(logging.ERROR if exc.traceback else logging.WARNING, "Closing connection from %s: %s",
                            self.peer, exc, exc_info=exc.__cause__ if exc.traceback else None)
                    return
                except CloseConnection as exc:
                    metrics.record_bytes(size + 4, 0)
                    log.info("Closing connection from %s: %s", self.peer, exc.reason)
                    return
                del frame  # the request's buffer is not needed once it is answered
                if out is None:
                    metrics.record_bytes(size + 4, 0)
                else:
                    pieces, response_size, api_name, error_code = out
                    # Recorded before the write so a client that saw the response also sees it counted.
                    metrics.record_bytes(size + 4, response_size)
                    metrics.record_request(api_name, error_code, time.perf_counter() - started)
                    if transport.is_closing():
                        return  # the client went away (or was closed as idle) while its request was handled
                    pending.extend(pieces)
                if self._throttle_ms > 0:
                    if pending:  # a throttled client gets its answers before the channel is muted
                        stream.write(pending)
                        pending = []
                        if not await self._drained(transport, high_water):
                            return
                    await self._mute_if_throttled()
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:  # noqa: BLE001 - one connection's failure never takes the broker down
            log.exception("Closing connection from %s after an unexpected error", self.peer)
        finally:
            if pending and not transport.is_closing():
                stream.write(pending)  # answers gathered before the request that ended the connection
            self._stop_idle_timer()
            metrics.connection_closed()
            self._end_share_sessions()
            stream.close()
            try:
                await stream.wait_closed()
            except (Exception, asyncio.CancelledError):  # noqa: BLE001 - peer gone, or broker stopping
                pass

    def _end_share_sessions(self) -> None:
        """The share sessions this connection opened end with it (Kafka's ShareSessionCache connection listener)."""
        state = self.server.state
        if state is not None and state.share_sessions_started:
            from tidelog.broker.share_acks import connection_closed

            try:
                connection_closed(state, (self.listener, self.client_host, self.client_port))
            except Exception:  # noqa: BLE001 - the connection still closes
                log.exception("Ending the share sessions of %s failed", self.peer)

    async def _drained(self, transport: asyncio.Transport, high_water: int) -> bool:
        """After a write: wait while the client is not taking our bytes as fast as we write them (and watch it
        for idleness meanwhile). False when the connection is closing (its buffered requests are dropped)."""
        if self.stream.write_backlog() > high_water:  # the transport's buffer, or a sendfile waiting
            self._watch()
            await self.stream.drain()
            self._unwatch()
        return not transport.is_closing()

    def _watch(self) -> None:
        """Start (or restart) the idle clock: the client must make progress within connections.max.idle.ms.
        One timer per connection, re-armed only when it fires: no timer is created or cancelled per request."""
        self._last_activity = self._loop.time()
        self._busy = False
        self._write_backlog = self.stream.write_backlog()
        if self._idle is None:
            self._idle = self._loop.call_at(self._last_activity + self._idle_s, self._check_idle)

    def _unwatch(self) -> None:
        """A request is being handled: not idleness (Kafka mutes the channel meanwhile)."""
        self._busy = True

    def _stop_idle_timer(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    def _check_idle(self) -> None:
        self._idle = None
        transport = self.stream.transport
        if transport is None or transport.is_closing():
            return
        now = self._loop.time()
        if self._busy:
            self._last_activity = now
        backlog = self.stream.write_backlog()
        if backlog < self._write_backlog:  # the client took some of a pending response
            self._last_activity = now
        self._write_backlog = backlog
        # Bytes of a request received are progress too (a slow sender is served, a stalled one closed).
        due = max(self._last_activity, self.stream.last_activity) + self._idle_s
        if now < due:
            self._idle = self._loop.call_at(due, self._check_idle)
            return
        log.info("Closing connection from %s: idle for %.0f s (connections.max.idle.ms)", self.peer, self._idle_s)
        self._closed_idle = True
        transport.abort()

    async def handle_frame(self, frame: memoryview) -> tuple[list[Piece], int, str, int | None] | None:
        """Parse, dispatch and encode one request: the response frame (or None for no response)."""
        header = parse_request_header(frame)
        api_key, api_version = header.api_key, header.api_version
        if api_key == ApiKey.PRODUCE and PLAIN_PRODUCE_VERSIONS[0] <= api_version <= PLAIN_PRODUCE_VERSIONS[1]:
            out = await self._plain_produce(header, frame)
            if out is not None:
                return out
        entry = self.registry.entry(api_key)
        if entry is None:
            raise ProtocolError(f"unknown api key {api_key} (correlation id {header.correlation_id})")
        name = entry.module  # the metrics label and log name, as before
        # Request quotas (broker/request_quota.py): the event-loop time of a request is measured only once some
        # entity has a request_percentage; the SASL exchange is the authenticator's, exempt as in Kafka.
        quotas = self.server.broker.quotas if self.ready.is_set() else None
        timing = quotas is not None and quotas.request.quotas_enabled
        if api_key == ApiKey.API_VERSIONS:  # answered even while the broker is loading
            if not timing or (self.session is not None and not self.session.authenticated):
                return self._api_versions(header, frame, None)
            started = time.perf_counter_ns()
            return self._api_versions(header, frame, lambda response: self._throttle(
                header, len(frame), response, time.perf_counter_ns() - started, None))
        if not self.ready.is_set():
            await self.ready.wait()
            quotas = self.server.broker.quotas
            timing = quotas.request.quotas_enabled
        if not entry.min_version <= api_version <= entry.max_version:
            raise ProtocolError(f"unsupported version {api_version} of {name} (serving "
                                f"{entry.min_version}-{entry.max_version}, client {header.client_id!r})")
        started = time.perf_counter_ns() if timing else 0
        request = self._decode(header, frame, name)
        ctx = RequestContext(self.server.broker, api_key, api_version, header.correlation_id, header.client_id,
                             self.client_host, self.listener, self.session, self.client_port, *self.client_software)
        faults = self.server.faults  # FaultInjector (tests): one attribute check when nothing is injected
        spent = _NOT_TIMED
        try:
            if faults is None or not faults.armed:
                call = self.registry.handler(api_key)(ctx, request)
            else:
                handler = self.registry.handler(api_key)
                # Only an API with injected errors has its responses edited (a latency fault needs no edit).
                call = faults.dispatch(ctx, request, _editable(handler) if faults.pending_errors(api_key)
                                       else handler)
            if timing:
                spent = LoopTime()
                spent.nanos = time.perf_counter_ns() - started  # decoding it
                response = await timed(call, spent)
            else:
                response = await call
        except (asyncio.CancelledError, CloseConnection):
            raise
        except Exception as exc:  # noqa: BLE001 - a handler bug is answered, the connection stays open
            response = self._error_response(header, request, name, exc)
        if not timing:
            self._throttle(header, len(frame), response, None, ctx.mutation_quota)
            return None if response is None else self._encode(api_key, header.correlation_id, api_version,
                                                                 response, name)
        if self.session is not None and api_key in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
            self.server.broker.quotas.request.record_exempt(spent.nanos)
            self._throttle(header, len(frame), response, None, ctx.mutation_quota)
        else:
            self._throttle(header, len(frame), response, spent.nanos, ctx.mutation_quota)
        if response is None:
            return None
        started = time.perf_counter_ns()
        out = self._encode(api_key, header.correlation_id, api_version, response, name)
        # Encoding is Kafka's network-thread time: counted, never throttled (recordNetworkThreadTimeCallback).
        self.server.broker.quotas.request.record_time_no_throttle(self._quota_user(), header.client_id or "",
                                                                  time.perf_counter_ns() - started)
        return out

    def _error_response(self, header: RequestHeader, request: Any, name: str, exc: Exception) -> Any:
        """Kafka's KafkaApis.handleError: an exception of a handler is logged once with the request header and
        answered with the API's own error response (its code for a KafkaError, else UNKNOWN_SERVER_ERROR);
        an acks=0 Produce, which has no response, closes the connection."""
        code = exc.code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
        log.error("Error handling %s v%d request (correlation id %d, client id %r) from %s on %s: answered %s",
                  name, header.api_version, header.correlation_id, header.client_id, self.peer, self.listener,
                  _error_name(code), exc_info=exc)
        try:
            response = error_response(header.api_key, header.api_version, request, int(code))
        except Exception as build_exc:  # noqa: BLE001 - no answer can be built: close (logged above)
            raise ProtocolError(f"cannot build the {name} v{header.api_version} error response: {build_exc!r}",
                                traceback=True) from build_exc
        if response is None:
            raise CloseConnection(f"{name} v{header.api_version} failed and has no response to carry the error")
        return response

    async def _plain_produce(self, header: RequestHeader,
                             frame: memoryview) -> tuple[list[Piece], int, str, int | None] | None:
        """The plain Produce request (apis/produce.handle_plain) without the generic dispatch: on a PLAINTEXT
        connection of a ready broker with no authorizer, no quota a Produce records and no armed fault, where
        the generic path would call the handler directly and throttle nothing. None: the generic path answers
        it (nothing was appended), decode errors included."""
        if self.session is not None or not self.ready.is_set():
            return None
        broker = self.server.broker
        faults = self.server.faults
        if (broker.security.authorizer is not None or (faults is not None and faults.armed)
                or not broker.quotas.produce_unrecorded):
            return None
        produce = _produce_api()
        version = header.api_version
        pos = header.body_offset
        try:
            if version >= PRODUCE_FLEXIBLE_MIN_VERSION:  # the header's tagged fields: almost always none
                pos = pos + 1 if pos < len(frame) and frame[pos] == 0 else skip_tagged_fields(frame, pos)
            request = decode_produce_request(frame, pos, version)
        except Exception:  # noqa: BLE001 - the generic path decodes it again and answers or closes as it does
            return None
        planned = produce.handle_plain(broker, version, request)
        if planned is None:
            return None
        response, pending = planned
        if pending:
            await produce.flush_pending(broker, pending)
        return self._encode(ApiKey.PRODUCE, header.correlation_id, version, response, "produce")

    def _quota_user(self) -> str:
        """The quota entity's user: the principal's name (Kafka's sanitized session user), ANONYMOUS on PLAINTEXT."""
        return self.session.principal.name if self.session is not None else ANONYMOUS

    def _throttle(self, header: RequestHeader, size: int, response: Any, request_nanos: int | None,
                  mutation: ControllerMutationQuota | None) -> None:
        """Client quotas (KIP-219): the largest throttle goes in the response's throttle_time_ms, then the channel
        is muted for it (QuotaManagers.throttle)."""
        self._throttle_ms = self.server.broker.quotas.throttle(header.api_key, header.client_id, size, response,
                                                               self._quota_user(), request_nanos, mutation)

    async def _mute_if_throttled(self) -> None:
        """Read nothing more from a throttled client until its throttle time has passed (Kafka mutes the channel)."""
        if self._throttle_ms > 0:
            delay, self._throttle_ms = self._throttle_ms, 0
            await asyncio.sleep(delay / 1000)

    def _api_versions(self, header: RequestHeader, frame: memoryview,
                      throttle: Callable[[Any], None] | None) -> tuple[list[Piece], int, str, int | None]:
        """ApiVersions needs no broker state (KIP-511: a too-new version gets a v0 UNSUPPORTED_VERSION body
        listing our own range, never a closed connection). `throttle` sets its throttle time before it is
        encoded when request quotas apply (Kafka's KafkaApis.handleApiVersionsRequest throttles it)."""
        from tidelog.broker.apis import api_versions

        entry = self.registry.entries[ApiKey.API_VERSIONS]
        ranges = self.registry.advertised_ranges()
        if header.api_version > entry.max_version:
            response = api_versions.unsupported_version_response(entry)
            if throttle is not None:
                throttle(response)
            return self._encode(ApiKey.API_VERSIONS, header.correlation_id, 0, response, entry.module)
        if header.api_version < entry.min_version:
            raise ProtocolError(f"unsupported version {header.api_version} of ApiVersions")
        request = self._decode(header, frame, entry.module)
        response = api_versions.respond(header.api_version, request, ranges, self.server.features)
        if header.api_version >= 3 and response.error_code == 0:
            self.client_software = (request.client_software_name, request.client_software_version)
        if throttle is not None:
            throttle(response)
        return self._encode(ApiKey.API_VERSIONS, header.correlation_id, header.api_version, response, entry.module)

    @staticmethod
    def _decode(header: RequestHeader, frame: memoryview, name: str) -> Any:
        version = header.api_version
        pos = header.body_offset
        hand = HAND_DECODERS.get(header.api_key)  # Produce: record batches stay views of the frame
        if hand is not None:
            decode, flexible_from = hand
            try:
                if version >= flexible_from:
                    # the header's tagged fields: almost always none (one 0 byte)
                    pos = pos + 1 if pos < len(frame) and frame[pos] == 0 else skip_tagged_fields(frame, pos)
                return decode(frame, pos, version)
            except ProtocolError:
                raise
            except Exception as exc:  # noqa: BLE001 - WireError, or a bug of the decoder: close the connection
                raise ProtocolError(f"cannot decode {name} v{version} request: {exc!r}") from exc
        from tidelog.protocol.messages import request_class
        from tidelog.protocol.request_checks import check_nulls

        try:
            cls = request_class(header.api_key)[version]
        except (KeyError, IndexError) as exc:
            raise ProtocolError(f"no {name} v{version} request schema: {exc!r}", traceback=True) from exc
        try:
            if cls.flexible_version_q(version):
                pos = skip_tagged_fields(frame, pos)
            request = cls.decode(frame[pos:], version=version)
            check_nulls(request, version)  # Kafka's readers refuse a null non-nullable field: close
            return request
        except ProtocolError:
            raise
        except Exception as exc:  # noqa: BLE001 - kafka-python raises assorted errors on bad bytes
            raise ProtocolError(f"cannot decode {name} v{version} request: {exc!r}") from exc

    @staticmethod
    def _encode(api_key: int, correlation_id: int, version: int, response: Any,
                name: str) -> tuple[list[Piece], int, str, int | None]:
        """(frame pieces, frame size, api name, error code): a hand-encoded response (EncodedResponse) keeps
        its pieces (fetched records are written as they are); a kafka-python one is one piece."""
        try:
            if isinstance(response, EncodedResponse):
                parts = response.pieces()
                body_size = 0
                for part in parts:
                    body_size += len(part)
                header = (_SIZE_AND_ID.pack(body_size + 5, correlation_id) + b"\x00" if response.flexible
                          else _SIZE_AND_ID.pack(body_size + 4, correlation_id))
                if len(parts) == 1 and isinstance(parts[0], bytes) and body_size <= _JOIN_BELOW:
                    out = header + parts[0]  # e.g. a Produce or Metadata answer: one piece, written as one
                    return [out], len(out), name, response.error_code
                return [header, *parts], len(header) + body_size, name, response.error_code
            body = encode_response(response, version)
            # Response header v1 (tagged fields) for flexible versions, except ApiVersions: always v0 (KIP-511).
            flexible = api_key != ApiKey.API_VERSIONS and response.flexible_version_q(version)
        except Exception as exc:  # noqa: BLE001 - a handler built an unencodable response
            raise ProtocolError(f"cannot encode {name} v{version} response: {exc!r}", traceback=True) from exc
        frame = response_frame(correlation_id, body, flexible)
        return [frame], len(frame), name, getattr(response, "error_code", None)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


_PRODUCE_API: list[ModuleType] = []


def _produce_api() -> ModuleType:
    """apis/produce, imported at the first Produce request (not on the start-up path)."""
    if not _PRODUCE_API:
        from tidelog.broker.apis import produce

        _PRODUCE_API.append(produce)
    return _PRODUCE_API[0]


def _editable(handler: Handler) -> Handler:
    """`handler` answering with kafka-python objects, which the fault injector edits (hand-encoded responses
    are decoded back; only while faults are armed, i.e. in tests)."""

    async def handle(ctx: RequestContext, request: Any) -> Any:
        response = await handler(ctx, request)
        if isinstance(response, EncodedResponse):
            return response.decoded(ctx.api_key, ctx.api_version)
        return response

    return handle
