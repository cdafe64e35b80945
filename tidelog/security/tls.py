"""Stream servers for TLS listeners. The loop's own SSLProtocol (uvloop's, or asyncio's) wraps each
connection as `start_server(ssl=...)` does, but with a waiter we watch: a failed handshake (a plaintext client
on a TLS port, an untrusted client certificate) is logged as one line naming the peer and the listener (asyncio
logs those only in debug mode), and the connection is never handed to the broker."""

from __future__ import annotations

import asyncio
import logging
import ssl
from asyncio.sslproto import SSLProtocol
from collections.abc import Awaitable, Callable
from typing import Any

import uvloop
import uvloop.loop

log = logging.getLogger("tidelog.security.tls")

TLS_HANDSHAKE_TIMEOUT_S = 10.0
ConnectedCallback = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _ssl_protocol_base(loop: asyncio.AbstractEventLoop) -> type:
    if isinstance(loop, uvloop.Loop):
        return uvloop.loop.SSLProtocol  # type: ignore[attr-defined,no-any-return]
    return SSLProtocol


_classes: dict[type, type] = {}


def _logged_protocol(base: type) -> type:
    cls = _classes.get(base)
    if cls is None:
        class PeerRecordingSSLProtocol(base):  # type: ignore[misc]
            peer = "?"

            def connection_made(self, transport: Any) -> None:
                peer = transport.get_extra_info("peername")
                self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
                super().connection_made(transport)

        cls = _classes[base] = PeerRecordingSSLProtocol
    return cls


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or exc.__class__.__name__
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "no TLS handshake within the timeout (a plaintext client?)"
    return type(exc).__name__


async def start_tls_server(context: ssl.SSLContext, listener: str, client_connected_cb: ConnectedCallback,
                           host: str | None = None, port: int | None = None, *, limit: int = 2 ** 16,
                           **kwds: Any) -> asyncio.AbstractServer:
    """asyncio.start_server(ssl=context) with one log line per failed handshake."""
    loop = asyncio.get_running_loop()

    def stream_protocol() -> asyncio.BaseProtocol:
        return asyncio.StreamReaderProtocol(asyncio.StreamReader(limit=limit, loop=loop), client_connected_cb,
                                            loop=loop)

    return await create_tls_server(context, listener, stream_protocol, host, port, **kwds)


async def create_tls_server(context: ssl.SSLContext, listener: str,
                            protocol_factory: Callable[[], asyncio.BaseProtocol], host: str | None = None,
                            port: int | None = None, **kwds: Any) -> asyncio.AbstractServer:
    """loop.create_server(protocol_factory, ssl=context) with one log line per failed handshake: each
    connection's protocol (a BufferedProtocol too) sits behind the loop's SSLProtocol."""
    loop = asyncio.get_running_loop()
    protocol_cls = _logged_protocol(_ssl_protocol_base(loop))

    def factory() -> asyncio.BaseProtocol:
        app = protocol_factory()
        waiter = loop.create_future()
        protocol = protocol_cls(loop, app, context, waiter, server_side=True,
                                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)

        def done(fut: asyncio.Future[None]) -> None:
            if not fut.cancelled() and fut.exception() is not None:
                log.info("Closing connection from %s: TLS handshake failed on listener %s (%s)", protocol.peer,
                         listener, _describe(fut.exception()))  # type: ignore[arg-type]

        waiter.add_done_callback(done)
        return protocol  # type: ignore[no-any-return]

    return await loop.create_server(factory, host, port, **kwds)
