"""Test controls of a running Server: pause/resume its listener, drop its connections, and a small loopback
control channel so a broker in another process (`tidelog serve --fault-control-port N`, used by
`tidelog.testing.BrokerProcess`) can be scripted like the in-process one.

Channel protocol: one JSON object per line each way. Request `{"op": NAME, ...arguments}` with NAME one of
inject_errors (api, errors, topic), inject_handler_exceptions (api, count), set_latency (ms, api), clear_faults, pending_errors (api),
drop_connections, pause, resume; answer `{"ok": true, "result": ...}` or `{"ok": false, "error": "..."}`.
It listens on 127.0.0.1 only and exists only when asked for: a production broker has neither.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidelog.broker.faults import FaultInjector
    from tidelog.broker.server import Server

log = logging.getLogger(__name__)


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening socket on `port` again (SO_REUSEADDR: the connections just closed linger in TIME_WAIT)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(512)
    except BaseException:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


class ServerControls:
    """pause/resume/drop_connections of one Server (call on its event loop)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.paused = False

    async def pause(self) -> None:
        """Close the listener and every connection: clients see a down broker (connection refused)."""
        if not self.paused:
            self.paused = True
            await self.server._close_listeners()  # noqa: SLF001 - Server.stop's first half, without the shutdown

    async def resume(self) -> None:
        """Listen on the same port again; the broker state was never touched."""
        if self.paused:
            await self.server.start_listening(listen_socket(self.server.host, self.server.port))
            self.paused = False

    async def drop_connections(self) -> int:
        tasks = list(self.server._connections)  # noqa: SLF001 - one asyncio task per client connection
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        return len(tasks)


class FaultControlChannel:
    def __init__(self, server: Server, faults: FaultInjector) -> None:
        self.controls = ServerControls(server)
        self.faults = faults
        self._listener: asyncio.AbstractServer | None = None

    async def start(self, port: int, host: str = "127.0.0.1") -> None:
        self._listener = await asyncio.start_server(self._serve, host, port, reuse_address=True)

    async def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
            await self._listener.wait_closed()
            self._listener = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                try:
                    answer: dict[str, Any] = {"ok": True, "result": await self.execute(json.loads(line))}
                except Exception as exc:  # noqa: BLE001 - reported to the test that sent it
                    answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
                writer.write(json.dumps(answer).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def execute(self, command: dict[str, Any]) -> Any:
        op = command.get("op")
        if op == "inject_errors":
            self.faults.inject_errors(command["api"], command["errors"], command.get("topic"))
        elif op == "inject_handler_exceptions":
            self.faults.inject_handler_exceptions(command["api"], int(command.get("count", 1)))
        elif op == "set_latency":
            self.faults.set_latency(int(command["ms"]), command.get("api"))
        elif op == "clear_faults":
            self.faults.clear()
        elif op == "pending_errors":
            return self.faults.pending_errors(command["api"])
        elif op == "drop_connections":
            return await self.controls.drop_connections()
        elif op == "pause":
            await self.controls.pause()
        elif op == "resume":
            await self.controls.resume()
        else:
            raise ValueError(f"unknown op {op!r}")
        return None
