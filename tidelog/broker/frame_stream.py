"""A client socket as a stream of request frames (asyncio BufferedProtocol), and its write side.

The kernel copies received bytes straight into this connection's own buffers (`get_buffer`): frames land in a
staging buffer (16 KiB, 256 KiB once the connection has sent a larger frame) and are handed to the handler as
views of it, without a copy; a frame larger than the room left is read straight into a buffer of its own (only
the bytes already staged are copied), so a 1 MiB produce request reaches the handler without passing through
StreamReader's copies. A frame's memoryview is writable: the record batches of a Produce request are
validated and written to the segment from it. Received bytes never overwrite a frame handed out: the staging
buffer is only written past its last frame, and starts again from its front (or moves a partial frame there)
only when no frame still views it; otherwise a fresh staging buffer takes over and the old one is freed with
its last frame.

Reading is paused while `MAX_QUEUED_BYTES` of complete frames wait for the handler (Kafka mutes a channel
while it handles a request; this keeps the memory a pipelining client can pin bounded), and the handler
waits in `drain()` while the socket's send buffer is above its high-water mark (TCP backpressure).

Fetch responses carry FileRecords slices of segment files (protocol/file_records.py). On a plain TCP
connection whose transport has nothing buffered, `write()` sends the response itself on the socket: the
fields with writev, each slice with `os.sendfile` from the segment file (Kafka's FileRecords.transferTo /
TransportLayer.transferFrom), so record bytes go from the page cache to the socket without a copy into the
broker. When the socket's buffer fills, the rest of the response (and anything written after it) waits in
`_tail` until the socket is writable again (a dup of the socket fd watched with loop.add_writer: the transport
owns the fd itself), then continues with sendfile; `drain()` waits for it. A TLS transport, or a transport
with bytes still buffered (byte order), gets the slices' bytes read with pread through the transport.
Accepted sockets get SO_SNDBUF = socket.send.buffer.bytes and SO_RCVBUF = socket.receive.buffer.bytes (Kafka's
Acceptor sets the same sizes).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import struct
import sys
from collections import deque
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from tidelog.protocol.file_records import FileRecords, FileRecordsError
from tidelog.protocol.frame import receive_buffer
from tidelog.protocol.wire import Piece

log = logging.getLogger(__name__)

INITIAL_STAGING_BYTES = 16 * 1024  # what an idle or admin connection keeps
STAGING_BYTES = 256 * 1024  # once a connection has sent a frame too large for its staging buffer
MAX_QUEUED_BYTES = 1 << 20  # complete frames waiting for the handler before reading pauses
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_IOV_MAX = 1024  # writev's limit on pieces per call (Linux UIO_MAXIOV)
_SENDFILE_CHUNK = 1 << 30  # bytes per sendfile call (well under Linux's 0x7ffff000 cap)


class FrameSizeError(Exception):
    """A frame's size prefix is negative or above socket.request.max.bytes (Kafka's InvalidReceiveException)."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


class FrameStream(asyncio.BufferedProtocol):
    def __init__(self, max_frame: int, on_open: Callable[[FrameStream], Coroutine[Any, Any, None]],
                 send_buffer_bytes: int = -1, receive_buffer_bytes: int = -1) -> None:
        self.max_frame = max_frame
        self._send_buffer_bytes = send_buffer_bytes  # socket.send.buffer.bytes: SO_SNDBUF, -1 = the OS default
        self._receive_buffer_bytes = receive_buffer_bytes  # socket.receive.buffer.bytes: SO_RCVBUF, -1 = the same
        self._on_open = on_open
        self._loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.last_activity = 0.0  # loop time of the last bytes received (idle expiry counts them as progress)
        self._buf = receive_buffer(INITIAL_STAGING_BYTES)
        self._start = 0  # first byte not yet consumed
        self._end = 0  # end of the received bytes
        self._big: bytearray | None = None  # the frame being read into its own buffer
        self._big_filled = 0
        self._prefix_first = False  # the next read takes only a size prefix (after a frame read on its own)
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
        # Direct writes (sendfile): the socket's fd on a plain TCP connection, -1 when slices must be copied (TLS).
        self._sock_fd = -1
        self._tail: deque[Piece] | None = None  # what a stalled direct write has still to send, in order
        self._tail_fd = -1  # a dup of the socket fd, watched for writability while _tail waits
        self._tail_waiter: asyncio.Future[None] | None = None
        self.sendfile_bytes = 0  # record bytes this connection sent with sendfile
        self.copied_bytes = 0  # record bytes it read with pread and wrote through the transport

    # --- protocol callbacks (the event loop calls these) ----------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's TCPTransport is not an asyncio.Transport
        self.last_activity = self._loop.time()
        self._sock_fd = _direct_fd(transport)
        if self._send_buffer_bytes > 0:
            _set_buffer(transport, socket.SO_SNDBUF, self._send_buffer_bytes, "socket.send.buffer.bytes")
        if self._receive_buffer_bytes > 0:
            _set_buffer(transport, socket.SO_RCVBUF, self._receive_buffer_bytes, "socket.receive.buffer.bytes")
        self.task = self._loop.create_task(self._on_open(self))

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_filled:]
        if self._start == self._end and self._start:
            # Every byte received is framed: read from the front again once no frame views the buffer (they
            # were handled), or into a fresh buffer when frames still do and little room is left.
            if self._unshared():
                self._start = self._end = 0
            elif len(self._buf) - self._end < len(self._buf) // 2:
                self._buf = receive_buffer(len(self._buf))
                self._start = self._end = 0
        elif self._end == len(self._buf):
            self._restage()
        if self._prefix_first:
            # Only the next size prefix: a large frame then goes straight to a buffer of its own, with no staged
            # head to copy there.
            return memoryview(self._buf)[self._end:self._start + 4]
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
                self._prefix_first = True  # large frames come in runs (a producer's batches)
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
        self._drop_tail(ConnectionResetError("connection lost"))
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
        """Hand out every complete frame in the staging buffer (as views of it); start a buffer of its own for a
        frame that does not fit in the room left."""
        buf = self._buf
        while self._end - self._start >= 4:
            (size,) = _INT32.unpack_from(buf, self._start)
            if size < 0 or size > self.max_frame:
                self._error = FrameSizeError(size)
                self._start = self._end  # frames already handed out keep their bytes
                self._prefix_first = False
                self._pause_reading()
                self._wake()
                return
            body = self._start + 4
            have = self._end - body
            if size > len(buf) - body:
                # The rest goes straight into a buffer of its own (what is staged is copied: nothing after a
                # prefix-only read).
                big = receive_buffer(size)
                big[:have] = memoryview(buf)[body:self._end]
                self._start = self._end
                self._big, self._big_filled = big, have
                if len(buf) < STAGING_BYTES:
                    # A producing connection: a larger staging buffer lets one read take several frames.
                    self._buf = receive_buffer(STAGING_BYTES)
                    self._start = self._end = 0
                break
            self._prefix_first = False
            if have < size:
                break
            self._push(memoryview(buf)[body:body + size])  # a view of the staging buffer, writable
            self._start = body + size

    def _unshared(self) -> bool:
        """No frame handed out views the staging buffer any more (this stream holds its only reference: a view
        holds one), so its bytes may be overwritten."""
        return sys.getrefcount(self._buf) <= 2  # the attribute, and getrefcount's own argument

    def _restage(self) -> None:
        """The staging buffer's end is reached: the partial frame at its tail (at most a size prefix: a frame
        that does not fit went to a buffer of its own) moves to the front, or to a fresh staging buffer while
        frames handed out still view this one."""
        n = self._end - self._start
        tail = self._buf[self._start:self._end]  # a copy: the move may overlap
        if not self._unshared():
            self._buf = receive_buffer(len(self._buf))
        self._buf[:n] = tail
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

    def write(self, pieces: Iterable[Piece] | bytes) -> None:
        """Write response pieces in order: bytes through the transport, FileRecords slices with sendfile when
        the socket is ours to write (see the module docstring). Each slice is closed once written."""
        transport = self.transport
        assert transport is not None
        if isinstance(pieces, bytes):
            pieces = (pieces,)
        if self._tail is not None:  # a direct write waits for the socket: everything else queues behind it
            self._tail.extend(pieces)
            return
        if not isinstance(pieces, list):
            pieces = list(pieces)
        if not any(type(p) is FileRecords for p in pieces):
            transport.writelines(pieces)  # type: ignore[arg-type]  # no slices: bytes and memoryviews only
            return
        if self._sock_fd < 0 or transport.is_closing() or transport.get_write_buffer_size():
            self._write_copied(pieces)
            return
        queue: deque[Piece] = deque(pieces)
        if not self._send_direct(queue):
            self._stall(queue)

    def write_backlog(self) -> int:
        """Bytes written but not yet taken by the socket: the transport's buffer and a stalled direct write."""
        transport = self.transport
        size = transport.get_write_buffer_size() if transport is not None else 0
        if self._tail is not None:
            size += sum(len(p) for p in self._tail)
        return size

    async def drain(self) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        if self._tail is not None:
            if self._tail_waiter is None:
                self._tail_waiter = self._loop.create_future()
            await self._tail_waiter
        if self._writing_paused:
            self._drain_waiter = self._loop.create_future()
            await self._drain_waiter

    def close(self) -> None:
        if self.transport is not None:
            if self._tail is not None and not self.transport.is_closing():
                # The transport flushes what it holds before closing: hand it the stalled rest (copied).
                tail, self._tail = list(self._tail), None
                self._unwatch_tail(None)
                self._write_copied(tail)
            self.transport.close()

    # --- direct writes (sendfile) ------------------------------------------------------------------------------

    def _send_direct(self, queue: deque[Piece]) -> bool:
        """Write `queue` on the socket until it is empty (True) or the socket's buffer is full (False). Written
        pieces leave the queue; a partly written one is replaced by its rest."""
        fd = self._sock_fd
        try:
            while queue:
                piece = queue[0]
                if type(piece) is FileRecords:
                    while piece.size:
                        sent = os.sendfile(fd, piece.fd, piece.position, min(piece.size, _SENDFILE_CHUNK))
                        if sent == 0:
                            raise FileRecordsError(f"file ends before the end of {piece!r}")
                        piece.advance(sent)
                        self.sendfile_bytes += sent
                    piece.close()
                    queue.popleft()
                    continue
                batch: list[bytes | memoryview] = []
                for p in queue:
                    if type(p) is FileRecords or len(batch) == _IOV_MAX:
                        break
                    batch.append(p)  # type: ignore[arg-type]  # not a FileRecords
                sent = os.writev(fd, batch)
                for p in batch:
                    if sent >= len(p):
                        sent -= len(p)
                        queue.popleft()
                    else:
                        queue[0] = memoryview(p)[sent:]
                        return False  # the socket took only part: wait for it
        except BlockingIOError:
            return False
        except InterruptedError:
            return False  # resumed by the next writability event
        except FileRecordsError as exc:
            # The file is shorter than the slice (truncated under it): never send a frame shorter than announced.
            log.error("Closing connection: %s", exc)
            self._abort(queue)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.ETIMEDOUT):
                log.warning("Closing connection: write failed: %r", exc)
            self._abort(queue)
            return True
        return True

    def _stall(self, queue: deque[Piece]) -> None:
        """The socket's buffer is full mid-response: the rest waits until the socket is writable."""
        self._tail = queue
        try:
            self._tail_fd = os.dup(self._sock_fd)  # the transport owns its fd: add_writer refuses that one
            self._loop.add_writer(self._tail_fd, self._on_writable)
        except OSError as exc:
            log.warning("Closing connection: cannot wait for the socket: %r", exc)
            self._tail = None
            self._unwatch_tail(None)
            self._abort(queue)

    def _on_writable(self) -> None:
        tail = self._tail
        if tail is None:
            self._unwatch_tail(None)
            return
        transport = self.transport
        if transport is None or transport.is_closing():
            self._drop_tail(ConnectionResetError("connection closing"))  # aborted, or closed as idle
            return
        if self._send_direct(tail):
            self._tail = None
            self._unwatch_tail(None)

    def _unwatch_tail(self, exc: BaseException | None) -> None:
        fd, self._tail_fd = self._tail_fd, -1
        if fd >= 0:
            self._loop.remove_writer(fd)
            os.close(fd)
        waiter, self._tail_waiter = self._tail_waiter, None
        if waiter is not None and not waiter.done():
            if exc is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(exc)

    def _drop_tail(self, exc: BaseException) -> None:
        tail, self._tail = self._tail, None
        if tail is not None:
            _close_slices(tail)
        self._unwatch_tail(exc)

    def _abort(self, queue: deque[Piece]) -> None:
        _close_slices(queue)
        queue.clear()
        if self.transport is not None:
            self.transport.abort()

    def _write_copied(self, pieces: list[Piece]) -> None:
        """The pieces through the transport, each slice's bytes read with pread (TLS; bytes already buffered)."""
        assert self.transport is not None
        out: list[bytes | memoryview] = []
        try:
            for p in pieces:
                if type(p) is FileRecords:
                    data = p.read()
                    p.close()
                    self.copied_bytes += len(data)
                    out.append(data)
                else:
                    out.append(p)  # type: ignore[arg-type]  # not a FileRecords
        except OSError as exc:
            log.error("Closing connection: cannot read fetched records: %r", exc)
            _close_slices(pieces)
            self.transport.abort()
            return
        self.transport.writelines(out)

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.transport.get_extra_info(name, default) if self.transport is not None else default


def _direct_fd(transport: asyncio.BaseTransport) -> int:
    """The socket fd a response may be written to directly (sendfile), or -1: a TLS transport encrypts what it
    is given, so its socket is never written behind its back."""
    if transport.get_extra_info("sslcontext") is not None or transport.get_extra_info("ssl_object") is not None:
        return -1
    sock = transport.get_extra_info("socket")
    if sock is None or not hasattr(transport, "get_write_buffer_size"):
        return -1
    try:
        return int(sock.fileno())
    except (OSError, ValueError):
        return -1


def _set_buffer(transport: asyncio.BaseTransport, option: int, size: int, config: str) -> None:
    """SO_SNDBUF / SO_RCVBUF of an accepted connection: Kafka's Acceptor gives accepted sockets
    socket.send.buffer.bytes and its server socket (inherited by them) socket.receive.buffer.bytes, both 102400
    by default; -1 leaves the kernel's autotuning. With sendfile the send buffer bounds what one call queues on
    the socket: at Kafka's default, the consume benchmark's broker CPU per GB is lower than with Linux's
    autotuned multi-MB buffer."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, option, size)
    except OSError as exc:
        log.warning("cannot set the socket buffer to %d (%s): %r", size, config, exc)


def _close_slices(pieces: Iterable[Piece]) -> None:
    for p in pieces:
        if type(p) is FileRecords:
            p.close()
