"""One request's way through the broker (Kafka's KafkaApis.handle with its RequestChannel): a single path,

    authenticate -> decode -> fault point -> handler -> throttle -> encode

taken by every request of a connection (broker/connection.py is the transport that feeds it frames). The
steps that vary are strategies chosen once per request, not separate roads:

* authenticate: the connection's security session (TLS/SASL listeners, tidelog.security.authenticator) admits
  the request, or answers a bare SASL token itself, or closes the connection; PLAINTEXT has none.
* handler: the registry's handler, behind the fault injector while faults are armed (tests); for a plain
  Produce (apis/produce.handle_plain) the shortcut that appends without building a RequestContext, which
  falls back to the handler whenever it cannot answer alone.
* timing: the request's event-loop time is measured only while some client has a request quota.
* an exception of the handler is answered with the API's own error response (Kafka's requestHelper
  .handleError, broker/error_response.py); only undecodable requests and what Kafka itself disconnects for
  close the connection.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from tidelog.broker.apis import api_versions
from tidelog.broker.context import CloseConnection, RequestContext
from tidelog.broker.error_response import error_response
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
from tidelog.protocol.messages import encode_response, request_class
from tidelog.protocol.produce_codec import FLEXIBLE_MIN_VERSION as PRODUCE_FLEXIBLE_MIN_VERSION
from tidelog.protocol.produce_codec import decode_produce_request
from tidelog.protocol.request_checks import check_nulls
from tidelog.protocol.request_limits import check_limits
from tidelog.protocol.wire import EncodedResponse, Piece

if TYPE_CHECKING:
    from tidelog.broker.faults import FaultInjector
    from tidelog.broker.features import FeatureControl
    from tidelog.broker.metrics import BrokerMetrics
    from tidelog.broker.mutation_quota import ControllerMutationQuota
    from tidelog.broker.registry import ApiRegistry, Handler
    from tidelog.broker.state import BrokerState
    from tidelog.config.broker_config import BrokerConfig
    from tidelog.security.manager import BrokerSecurity

log = logging.getLogger("tidelog.broker.connection")  # the name operators filter on, as before the split

# (frame pieces, frame size, api name, error code): an encoded answer, as the transport writes it.
Answer = tuple[list[Piece], int, str, int | None]

_SIZE_AND_ID = struct.Struct(">ii")  # a response frame's size prefix and correlation id
_JOIN_BELOW = 4096  # a one-piece hand-encoded body up to this size is joined to its header (one piece to write)
PLAIN_PRODUCE_VERSIONS = (3, 12)  # what apis/produce.handle_plain answers (v13 names topics by id)
_SASL_APIS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)


class Server(Protocol):
    """What a connection and its dispatch use of the server (broker/server.Server is one; named here so that
    the request path does not import the listener that runs it)."""

    config: BrokerConfig
    registry: ApiRegistry
    ready: asyncio.Event
    faults: FaultInjector | None
    features: FeatureControl
    metrics: BrokerMetrics
    security: BrokerSecurity
    state: BrokerState | None

    @property
    def broker(self) -> BrokerState: ...


class Dispatcher:
    """The request path of one connection: what it knows of its client, and the steps above."""

    def __init__(self, server: Server, listener: str, peer: str, client_host: str, client_port: int | None,
                 session: Any) -> None:
        self.server = server
        self.registry = server.registry
        self.ready = server.ready  # requests other than ApiVersions wait for it (the broker is still loading)
        self.listener = listener
        self.peer = peer
        self.client_host = client_host
        self.client_port = client_port
        self.client_software = ("", "")  # (name, version) from a valid ApiVersions v3+ request (KIP-511)
        self.session = session  # tidelog.security.authenticator.Session on TLS/SASL listeners, else None
        self.throttle_ms = 0  # set by a request over one of its client quotas (broker/quotas.py)

    async def handle(self, frame: memoryview) -> Answer | None:
        """Answer one request frame (None: no response). CloseConnection or ProtocolError close the connection."""
        session = self.session
        if session is not None:  # authenticate: admitted, answered (a bare SASL token), or closed
            token_answer: Answer | None = await session.admit(frame)
            if token_answer is not None:
                return token_answer
        answer = await self._dispatch(parse_request_header(frame), frame)
        if session is not None:
            await session.after_request(None if answer is None else answer[0])  # a failed authentication closes
        return answer

    async def _dispatch(self, header: RequestHeader, frame: memoryview) -> Answer | None:
        api_key, api_version = header.api_key, header.api_version
        entry = self.registry.entry(api_key)
        if entry is None:
            raise ProtocolError(f"unknown api key {api_key} (correlation id {header.correlation_id})")
        name = entry.module  # the metrics label and log name
        if api_key == ApiKey.API_VERSIONS:  # answered even while the broker is loading (KIP-511)
            return await self._api_versions(header, frame)
        if not self.ready.is_set():
            await self.ready.wait()
        if not entry.min_version <= api_version <= entry.max_version:
            raise ProtocolError(f"unsupported version {api_version} of {name} (serving "
                                f"{entry.min_version}-{entry.max_version}, client {header.client_id!r})")
        broker = self.server.broker
        request_quota = broker.quotas.request
        timing = request_quota.quotas_enabled  # strategy: measure the loop time only when some quota needs it
        started = time.perf_counter_ns() if timing else 0
        if api_key == ApiKey.PRODUCE and PLAIN_PRODUCE_VERSIONS[0] <= api_version <= PLAIN_PRODUCE_VERSIONS[1]:
            answer = await self._plain_produce(header, frame)  # strategy: the plain-Produce shortcut
            if answer is not None:
                return answer
        request = decode_request(header, frame, name)
        ctx = RequestContext(broker, api_key, api_version, header.correlation_id, header.client_id,
                             self.client_host, self.listener, self.session, self.client_port, *self.client_software)
        spent = LoopTime() if timing else None
        try:
            call = self._handler(api_key)(ctx, request)  # the fault point wraps it while faults are armed
            if spent is not None:
                spent.nanos = time.perf_counter_ns() - started  # decoding it
                response = await timed(call, spent)
            else:
                response = await call
        except (asyncio.CancelledError, CloseConnection):
            raise
        except Exception as exc:  # noqa: BLE001 - a handler bug is answered, the connection stays open
            response = self._error_response(header, request, name, exc)
        if spent is not None and self.session is not None and api_key in _SASL_APIS:
            request_quota.record_exempt(spent.nanos)  # the SASL exchange is the authenticator's (exempt)
            spent = None
        self._throttle(header, len(frame), response, None if spent is None else spent.nanos, ctx.mutation_quota)
        if response is None:
            return None
        if not timing:
            return self._encode_or_error(header, request, response, name)
        started = time.perf_counter_ns()
        answer = self._encode_or_error(header, request, response, name)
        # Encoding is Kafka's network-thread time: counted, never throttled (recordNetworkThreadTimeCallback).
        request_quota.record_time_no_throttle(self._quota_user(), header.client_id or "",
                                              time.perf_counter_ns() - started)
        return answer

    def _handler(self, api_key: int) -> Handler:
        """The fault point: the registry's handler, or the fault injector in front of it (tests)."""
        handler = self.registry.handler(api_key)
        faults = self.server.faults  # FaultInjector (tests): one attribute check when nothing is injected
        if faults is None or not faults.armed:
            return handler
        # Only an API with injected errors has its responses edited (a latency fault needs no edit).
        inner = _editable(handler) if faults.pending_errors(api_key) else handler
        return lambda ctx, request: faults.dispatch(ctx, request, inner)

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

    def _encode_or_error(self, header: RequestHeader, request: Any, response: Any, name: str) -> Answer:
        """The response encoded; one a handler built wrong is a handler bug, answered as one."""
        try:
            return encode(header.api_key, header.correlation_id, header.api_version, response, name)
        except ProtocolError as exc:  # its cause's traceback is logged with it
            error = self._error_response(header, request, name, exc)
            return encode(header.api_key, header.correlation_id, header.api_version, error, name)

    async def _plain_produce(self, header: RequestHeader, frame: memoryview) -> Answer | None:
        """The plain Produce request (apis/produce.handle_plain) without a RequestContext: on a PLAINTEXT
        connection with no authorizer, no quota a Produce records and no armed fault, where the handler would
        throttle nothing. None: the handler answers it (nothing was appended), decode errors included."""
        broker = self.server.broker
        faults = self.server.faults
        if (self.session is not None or broker.security.authorizer is not None
                or (faults is not None and faults.armed) or not broker.quotas.produce_unrecorded):
            return None
        produce = _produce_api()
        version = header.api_version
        pos = header.body_offset
        try:
            if version >= PRODUCE_FLEXIBLE_MIN_VERSION:  # the header's tagged fields: almost always none
                pos = pos + 1 if pos < len(frame) and frame[pos] == 0 else skip_tagged_fields(frame, pos)
            request = decode_produce_request(frame, pos, version)
        except Exception:  # noqa: BLE001 - decoded again by the generic step, which answers or closes
            return None
        planned = produce.handle_plain(broker, version, request)
        if planned is None:
            return None
        response, pending = planned
        if pending:
            await produce.flush_pending(broker, pending)
        return encode(ApiKey.PRODUCE, header.correlation_id, version, response, "produce")

    def _quota_user(self) -> str:
        """The quota entity's user: the principal's name (Kafka's sanitized session user), ANONYMOUS on PLAINTEXT."""
        return self.session.principal.name if self.session is not None else ANONYMOUS

    def _throttle(self, header: RequestHeader, size: int, response: Any, request_nanos: int | None,
                  mutation: ControllerMutationQuota | None) -> None:
        """Client quotas (KIP-219): the largest throttle goes in the response's throttle_time_ms, then the
        transport mutes the channel for it (QuotaManagers.throttle)."""
        self.throttle_ms = self.server.broker.quotas.throttle(header.api_key, header.client_id, size, response,
                                                              self._quota_user(), request_nanos, mutation)

    async def _api_versions(self, header: RequestHeader, frame: memoryview) -> Answer:
        """ApiVersions needs no broker state (KIP-511: a too-new version gets a v0 UNSUPPORTED_VERSION body
        listing our own range, never a closed connection), except a v5 request naming the cluster and node it
        means (KIP-1242), which waits for the cluster id the logs hold. Its throttle time is set before it is
        encoded when request quotas apply (Kafka's KafkaApis.handleApiVersionsRequest throttles it), except
        during a SASL exchange (the authenticator's)."""
        started = time.perf_counter_ns()
        entry = self.registry.entries[ApiKey.API_VERSIONS]
        if header.api_version > entry.max_version:
            response = api_versions.unsupported_version_response(entry)
            version = 0
        else:
            if header.api_version < entry.min_version:
                raise ProtocolError(f"unsupported version {header.api_version} of ApiVersions")
            request = decode_request(header, frame, entry.module)
            version = header.api_version
            this_node = None
            if api_versions.names_a_node(version, request):
                if not self.ready.is_set():
                    await self.ready.wait()
                    started = time.perf_counter_ns()  # the wait is not this request's loop time
                this_node = (self.server.broker.cluster_id, self.server.config.node_id)
            response = api_versions.respond(version, request, self.registry.advertised_ranges(),
                                            self.server.features, this_node)
            if version >= 3 and response.error_code == 0:
                self.client_software = (request.client_software_name, request.client_software_version)
        quotas = self.server.broker.quotas if self.ready.is_set() else None
        timing = (quotas is not None and quotas.request.quotas_enabled
                  and (self.session is None or self.session.authenticated))
        if timing:
            self._throttle(header, len(frame), response, time.perf_counter_ns() - started, None)
        return encode(ApiKey.API_VERSIONS, header.correlation_id, version, response, entry.module)


def decode_request(header: RequestHeader, frame: memoryview, name: str) -> Any:
    """The request body: a hand decoder's object (Produce: record batches stay views of the frame) or a
    kafka-python one. ProtocolError (the connection closes, as Kafka's does) when the bytes do not decode."""
    version = header.api_version
    pos = header.body_offset
    hand = HAND_DECODERS.get(header.api_key)
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

    try:
        cls = request_class(header.api_key)[version]
    except (KeyError, IndexError) as exc:
        raise ProtocolError(f"no {name} v{version} request schema: {exc!r}", traceback=True) from exc
    try:
        flexible = bool(cls.flexible_version_q(version))
        if flexible:
            pos = skip_tagged_fields(frame, pos)
        check_limits(cls._struct, version, flexible, frame, pos)  # Kafka 4.4's array/tagged-field caps: close
        request = cls.decode(frame[pos:], version=version)
        check_nulls(request, version)  # Kafka's readers refuse a null non-nullable field: close
        return request
    except ProtocolError:
        raise
    except Exception as exc:  # noqa: BLE001 - kafka-python raises assorted errors on bad bytes
        raise ProtocolError(f"cannot decode {name} v{version} request: {exc!r}") from exc


def encode(api_key: int, correlation_id: int, version: int, response: Any, name: str) -> Answer:
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
        # lazy for start-up time (see the docstring)
        from tidelog.broker.apis import produce

        _PRODUCE_API.append(produce)
    return _PRODUCE_API[0]


def _editable(handler: Handler) -> Callable[[RequestContext, Any], Awaitable[Any]]:
    """`handler` answering with kafka-python objects, which the fault injector edits (hand-encoded responses
    are decoded back; only while faults are armed, i.e. in tests)."""

    async def handle(ctx: RequestContext, request: Any) -> Any:
        response = await handler(ctx, request)
        if isinstance(response, EncodedResponse):
            return response.decoded(ctx.api_key, ctx.api_version)
        return response

    return handle
