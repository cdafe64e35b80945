"""One client connection's transport: read size-prefixed frames, hand each to the dispatch (broker/dispatch.py),
write the answers in order; idle expiry and flow control (the shape of uvicorn's protocols/http/flow_control.py).

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
import time

from tidelog.broker.context import CloseConnection
from tidelog.broker.dispatch import Dispatcher, Server
from tidelog.broker.frame_stream import FrameSizeError, FrameStream
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.frame import ProtocolError
from tidelog.protocol.wire import Piece

log = logging.getLogger(__name__)

MAX_COALESCED_PIECES = 256  # response pieces gathered before a write even while more Produce requests wait


class Connection:
    def __init__(self, server: Server, stream: FrameStream, listener: str) -> None:
        self.server = server
        self.listener = listener
        self.metrics = server.metrics
        self.stream = stream  # frames read into this connection's own buffers (broker/frame_stream.py)
        peer = stream.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.client_host = peer[0] if isinstance(peer, tuple) else ""
        self.client_port: int | None = peer[1] if isinstance(peer, tuple) else None
        config = server.config
        self._idle_s = max(0.001, int(config.connections_max_idle_ms) / 1000)
        self._loop = asyncio.get_running_loop()
        self._idle: asyncio.TimerHandle | None = None
        self._last_activity = 0.0
        self._write_backlog = 0
        self._closed_idle = False
        self._busy = False
        # TLS/SASL listeners: the authentication phase (tidelog.security.authenticator); None on PLAINTEXT.
        self.session = server.security.new_session(listener)
        self.dispatcher = Dispatcher(server, listener, self.peer, self.client_host, self.client_port, self.session)

    async def run(self) -> None:
        metrics = self.metrics
        metrics.connection_opened()
        stream = self.stream
        if self.session is not None and not await self.session.start(self.peer, stream.get_extra_info("ssl_object")):
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
                    out = await self.dispatcher.handle(frame)
                except ProtocolError as exc:
                    log.log(logging.ERROR if exc.traceback else logging.WARNING, "Closing connection from %s: %s",
                            self.peer, exc, exc_info=exc.__cause__ if exc.traceback else None)
                    return
                except CloseConnection as exc:
                    metrics.record_bytes(size + 4, 0)
                    if exc.answer is not None and not transport.is_closing():  # e.g. a failed SASL exchange's
                        stream.write([*pending, *exc.answer])
                        pending = []
                        try:
                            await stream.drain()
                        except ConnectionError:
                            pass
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
                if self.dispatcher.throttle_ms > 0:
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

    async def _mute_if_throttled(self) -> None:
        """Read nothing more from a throttled client until its throttle time has passed (Kafka mutes the channel)."""
        delay, self.dispatcher.throttle_ms = self.dispatcher.throttle_ms, 0
        if delay > 0:
            await asyncio.sleep(delay / 1000)
