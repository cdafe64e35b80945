"""A client socket as a stream of request frames (asyncio BufferedProtocol), and its write side.

The kernel copies received bytes straight into this connection's own buffers (`get_buffer`): small frames
land in a reused staging buffer (16 KiB, 256 KiB once the connection has sent a larger frame) and are copied
out once; a frame larger than the room left is read
straight into a buffer of its own (only the bytes already staged are copied), so a 1 MiB produce request
reaches the handler without passing through StreamReader's copies. A frame's memoryview is writable: the
record batches of a Produce request are validated and written to the segment from it.

Reading is paused while `MAX_QUEUED_BYTES` of complete frames wait for the handler (Kafka mutes a channel
while it handles a request; this keeps the memory a pipelining client can pin bounded), and the handler
waits in `drain()` while the socket's send buffer is above its high-water mark (TCP backpressure).
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

INITIAL_STAGING_BYTES = 16 * 1024  # what an idle or admin connection keeps
STAGING_BYTES = 256 * 1024  # once a connection has sent a frame too large for its staging buffer
MAX_QUEUED_BYTES = 1 << 20  # complete frames waiting for the handler before reading pauses
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")


class FrameSizeError(Exception):
    """A frame's size prefix is negative or above socket.request.max.bytes (Kafka's InvalidReceiveException)."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


class FrameStream(asyncio.BufferedProtocol):
    def __init__(self, max_frame: int, on_open: Callable[[FrameStream], Coroutine[Any, Any, None]]) -> None:
        self.max_frame = max_frame
        self._on_open = on_open
        self._loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.last_activity = 0.0  # loop time of the last bytes received (idle expiry counts them as progress)
        self._buf = bytearray(INITIAL_STAGING_BYTES)
        self._start = 0  # first byte not yet consumed
        self._end = 0  # end of the received bytes
        self._big: bytearray | None = None  # the frame being read into its own buffer
        self._big_filled = 0
        self._frames: deque[memoryview] = deque()
        self._queued = 0
        self._error: FrameSizeError | None = None
        self._eof = False
        self._waiter: asyncio.Future[None] | None = None
        self._reading_paused = False
        self._writing_paused = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self._closed = self._loop.create_future()
        self.task: asyncio.Task[None] | None = None

    # --- protocol callbacks (the event loop calls these) ----------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's TCPTransport is not an asyncio.Transport
        self.last_activity = self._loop.time()
        self.task = self._loop.create_task(self._on_open(self))

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_filled:]
        if self._end == len(self._buf):
            self._compact()
        return memoryview(self._buf)[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        self.last_activity = self._loop.time()
        if self._error is not None:
            return  # after a bad size prefix nothing more is framed (the connection is being closed)
        big = self._big
        if big is not None:
            self._big_filled += nbytes
            if self._big_filled == len(big):
                self._big = None
                self._push(memoryview(big))
            return
        self._end += nbytes
        self._split()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False  # close the transport (a half-closed client gets no more responses, as in Kafka)

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._wake()
        if not self._closed.done():
            self._closed.set_result(None)
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(ConnectionResetError("connection lost"))

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- framing ---------------------------------------------------------------------------------------------

    def _split(self) -> None:
        """Hand out every complete frame in the staging buffer; start a dedicated buffer for a large one."""
        buf = self._buf
        while self._end - self._start >= 4:
            (size,) = _INT32.unpack_from(buf, self._start)
            if size < 0 or size > self.max_frame:
                self._error = FrameSizeError(size)
                self._start = self._end = 0
                self._pause_reading()
                self._wake()
                return
            body = self._start + 4
            have = self._end - body
            if have >= size:
                self._push(memoryview(bytearray(memoryview(buf)[body:body + size])))  # one copy, writable
                self._start = body + size
                continue
            if size > len(buf) - body:
                # Does not fit in the staging buffer: the rest goes straight into a buffer of its own.
                big = bytearray(size)
                big[:have] = buf[body:self._end]
                self._big, self._big_filled = big, have
                self._start = self._end = 0
                if len(buf) < STAGING_BYTES:
                    # A producing connection: a larger staging buffer lets one read take several frames.
                    self._buf = bytearray(STAGING_BYTES)
            break
        if self._start == self._end:
            self._start = self._end = 0

    def _compact(self) -> None:
        """Move a partial frame to the front of the staging buffer (its tail was reached)."""
        n = self._end - self._start
        self._buf[:n] = self._buf[self._start:self._end]
        self._start, self._end = 0, n

    def _push(self, frame: memoryview) -> None:
        self._frames.append(frame)
        self._queued += len(frame)
        if self._queued >= MAX_QUEUED_BYTES:
            self._pause_reading()
        self._wake()

    def _pause_reading(self) -> None:
        if not self._reading_paused and self.transport is not None and not self.transport.is_closing():
            self._reading_paused = True
            self.transport.pause_reading()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- the handler's side ----------------------------------------------------------------------------------

    @property
    def partial(self) -> int:
        """Bytes of an incomplete frame received so far (0 between frames)."""
        return self._big_filled if self._big is not None else self._end - self._start

    def next_api_key(self) -> int | None:
        """The API key of the next complete frame already received (None: none is waiting)."""
        if not self._frames:
            return None
        frame = self._frames[0]
        return _INT16.unpack_from(frame)[0] if len(frame) >= 2 else None

    async def read_frame(self) -> memoryview | None:
        """The next complete frame (without its size prefix); None at EOF. Raises FrameSizeError."""
        while not self._frames:
            if self._error is not None:
                raise self._error
            if self._eof or self.transport is None or self.transport.is_closing():
                return None
            self._waiter = self._loop.create_future()
            await self._waiter
        frame = self._frames.popleft()
        self._queued -= len(frame)
        if self._reading_paused and self._queued < MAX_QUEUED_BYTES and self._error is None:
            self._reading_paused = False
            assert self.transport is not None
            if not self.transport.is_closing():
                self.transport.resume_reading()
        return frame

    def write(self, pieces: Iterable[bytes | memoryview] | bytes) -> None:
        assert self.transport is not None
        if isinstance(pieces, bytes):
            self.transport.write(pieces)
        else:
            self.transport.writelines(pieces)

    async def drain(self) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        if self._writing_paused:
            self._drain_waiter = self._loop.create_future()
            await self._drain_waiter

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.transport.get_extra_info(name, default) if self.transport is not None else default
