"""Request framing and headers (Kafka's NetworkReceive + RequestHeader): what every request shares before its
body is decoded with its version's schema.

A frame is an INT32 size then that many bytes. Request header v1/v2 is api_key INT16, api_version INT16,
correlation_id INT32, client_id (INT16-length string even in v2), then in v2 (flexible versions) a tagged-field
section. The response header is the correlation id, plus an empty tagged-field section for flexible versions
except ApiVersions, which always answers header v0 so that any client can read it (KIP-511).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from tidelog.accelerators import load
from tidelog.protocol import wire
from tidelog.protocol.primitives import Buffer

_HEADER = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
INT32 = struct.Struct(">i")


class ProtocolError(Exception):
    """The request cannot be parsed or served: close the connection (Kafka: InvalidRequestException).
    `traceback`: the cause is a bug on our side (handler, encoding), logged with its traceback."""

    def __init__(self, message: str, traceback: bool = False) -> None:
        super().__init__(message)
        self.traceback = traceback


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the body (or, for flexible versions, the header's tagged fields) starts


def parse_request_header(frame: Buffer) -> RequestHeader:
    """The part of request header v1/v2 that is the same for every version (parsed by the C accelerator when it
    is built: the same header and errors)."""
    if _accel is not None:
        return _accel.header(frame)  # type: ignore[no-any-return]
    return _parse_request_header_python(frame)


def _parse_request_header_python(frame: Buffer) -> RequestHeader:
    if len(frame) < _HEADER.size:
        raise ProtocolError(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, n = _HEADER.unpack_from(frame, 0)
    pos = _HEADER.size
    if n < 0:
        if n != -1:
            raise ProtocolError(f"bad client_id length {n}")
        return RequestHeader(api_key, api_version, correlation_id, None, pos)
    if pos + n > len(frame):
        raise ProtocolError("truncated client_id")
    try:
        client_id = bytes(frame[pos : pos + n]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError("client_id is not UTF-8") from exc
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos + n)


def _load_accelerator() -> Any:
    """tidelog.protocol._produce_codec (optional, see produce_codec.py), bound to RequestHeader/ProtocolError."""
    codec = load("tidelog.protocol._produce_codec")
    if codec is not None:
        codec.bind_header(RequestHeader, ProtocolError)
    return codec


_accel = _load_accelerator()
# A bytearray for the socket to fill (broker/frame_stream.py): without zero-filling it first when the accelerator
# is there (an extension built before it had receive_buffer falls back too).
receive_buffer: Callable[[int], bytearray] = getattr(_accel, "receive_buffer", bytearray)


def skip_tagged_fields(buf: Buffer, pos: int) -> int:
    """Skip a tagged-field section (unknown tags are ignored, as Kafka does); malformed, it closes the connection."""
    try:
        return wire.skip_tagged_fields(buf, pos)
    except wire.WireError as exc:
        raise ProtocolError(str(exc)) from exc


def response_frame(correlation_id: int, body: bytes, flexible_header: bool) -> bytes:
    """Size prefix + response header (v1 when `flexible_header`) + body."""
    header = INT32.pack(correlation_id) + (b"\x00" if flexible_header else b"")
    return INT32.pack(len(header) + len(body)) + header + body
