"""FaultInjector: scripted misbehaviour for tests (injected error responses and latency).

One plain object, handed to `BrokerState(faults=...)` by whoever builds the broker (`tidelog.testing.run_broker`
always does); never a global or an environment variable. The request dispatch (broker/connection.py) asks only
`faults is not None and faults.armed` per request: when nothing is injected, that is all it costs.

* `inject_errors(api, errors, topic=None)`: the next requests of `api` (Kafka's API name, "Produce", or its key)
  are answered with one error each, in order, and not applied. Partition-level APIs (Produce, Fetch,
  ListOffsets, OffsetCommit, OffsetFetch with a topic, ...) get the error on every partition of the request
  (only on `topic`'s partitions when given; the request's other partitions are served normally);
  Metadata gets it per topic; every other API in its top-level `error_code` (group/coordinator APIs).
* `inject_handler_exceptions(api, count=1)`: the next `count` requests of `api` raise an exception where their
  handler runs, which the dispatch answers as any handler bug (Kafka's KafkaApis.handleError: the API's own
  error response with UNKNOWN_SERVER_ERROR, the connection kept).
* `set_latency(ms, api=None)`: responses of `api` (or all) are delayed by `ms` before they are handled.
* `clear()`: undo all of them.

The injector is also the seam for the broker's own internal fault hooks: a subsystem given the same object
can consult it without the dispatch knowing.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tidelog.broker.context import CloseConnection, RequestContext
from tidelog.broker.error_response import error_entries, error_response
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import _MESSAGES, _install_lazy_kafka_package, response_class
from tidelog.storage.fault_hooks import FaultHooks, FaultPoint

Handler = Callable[[RequestContext, Any], Awaitable[Any]]


class InjectedHandlerError(RuntimeError):
    """What an injected handler exception raises (`FaultInjector.inject_handler_exceptions`)."""


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where a partition-level request and its response keep topics (kafka-python names)."""

    request_topics: str
    topic_name: str  # the same field name in the request's and the response's topic entries
    response_topics: str
    mutating: bool  # served without the faulted partitions (Produce) vs. served then overwritten (Fetch)


_PARTITION_APIS: dict[int, _Layout] = {
    0: _Layout("topic_data", "name", "responses", True),
    1: _Layout("topics", "topic", "responses", False),
    2: _Layout("topics", "name", "topics", False),
    8: _Layout("topics", "name", "topics", True),
    9: _Layout("topics", "name", "topics", False),
    21: _Layout("topics", "name", "topics", True),
    23: _Layout("topics", "topic", "topics", False),
    28: _Layout("topics", "name", "topics", True),
}
_METADATA = 3
_OFFSET_FETCH = 9
_OFFSET_FETCH_GROUPS_MIN_VERSION = 8  # KIP-709: OffsetFetch batches groups
_API_VERSIONS = 18


def api_keys_by_name() -> dict[str, int]:
    """Kafka's API names ("Produce", "JoinGroup", ...) -> key, for every API tidelog has classes for."""
    return {request.removesuffix("Request"): key for key, (_module, request, _response) in _MESSAGES.items()}


def resolve_api(api: str | int) -> int:
    names = api_keys_by_name()
    if isinstance(api, int):
        if api not in names.values():
            raise ValueError(f"unknown API key {api}")
        return api
    if api not in names:
        raise ValueError(f"unknown API {api!r}; Kafka's names: {', '.join(sorted(names))}")
    return names[api]


def _kafka_error_names() -> dict[str, int]:
    """Every error name Kafka's Errors enum has, from kafka-python's table (ours lists only those the broker
    itself answers with): NETWORK_EXCEPTION, NOT_ENOUGH_REPLICAS_AFTER_APPEND, THROTTLING_QUOTA_EXCEEDED..."""
    _install_lazy_kafka_package()
    import kafka.errors

    return {str(cls.message): int(code) for code, cls in kafka.errors.kafka_errors.items() if code is not None}


def resolve_error(error: str | int) -> int:
    """Kafka's error name ("NOT_LEADER_OR_FOLLOWER") or code -> code."""
    if isinstance(error, str):
        if error in ErrorCode.__members__:
            return int(ErrorCode[error])
        code_by_name = _kafka_error_names()
        if error not in code_by_name:
            raise ValueError(f"unknown Kafka error name {error!r}")
        return code_by_name[error]
    code = int(error)
    if code == 0:
        raise ValueError("error code 0 (NONE) is not an error")
    return code


class FaultInjector:
    """One seam for every injected fault: request-level errors and latency (consulted by the dispatch), and
    named internal steps (`at`, the storage/cleaner/coordinator FaultHooks protocol) delegated to `steps`,
    e.g. `ExitAt` for crash tests or a test's own hook that blocks an fsync."""

    def __init__(self, steps: FaultHooks | None = None) -> None:
        self.steps = steps  # what happens at named internal steps; None: nothing
        self.armed = False  # the one flag the dispatch reads: True while anything is injected
        self._lock = threading.Lock()  # tests call from their thread, the broker consumes on its loop
        self._errors: dict[int, deque[tuple[int, str | None]]] = {}
        self._exceptions: dict[int, int] = {}  # api key -> handler calls still to fail
        self._latency_all_ms = 0
        self._latency_ms: dict[int, int] = {}

    def at(self, point: FaultPoint, subject: object = None) -> None:
        """FaultHooks: storage, the cleaner and the coordinators call this at their named steps."""
        steps = self.steps
        if steps is not None:
            steps.at(point, subject)

    # ------------------------------------------------------------------------------------- test side
    def inject_errors(self, api: str | int, errors: Iterable[str | int], topic: str | None = None) -> None:
        key = resolve_api(api)
        codes = [resolve_error(e) for e in errors]
        if key == _API_VERSIONS:
            raise ValueError("ApiVersions cannot be faulted (clients must learn the versions first)")
        if topic is not None and key not in _PARTITION_APIS and key != _METADATA:
            raise ValueError(f"topic= applies to partition-level APIs and Metadata, not to API key {key}")
        with self._lock:
            queue = self._errors.setdefault(key, deque())
            queue.extend((code, topic) for code in codes)
            self._rearm()

    def inject_handler_exceptions(self, api: str | int, count: int = 1) -> None:
        """The next `count` requests of `api` raise InjectedHandlerError in place of their handler."""
        key = resolve_api(api)
        if key == _API_VERSIONS:
            raise ValueError("ApiVersions cannot be faulted (clients must learn the versions first)")
        if count < 1:
            raise ValueError("count must be >= 1")
        with self._lock:
            self._exceptions[key] = self._exceptions.get(key, 0) + int(count)
            self._rearm()

    def pending_handler_exceptions(self, api: str | int) -> int:
        with self._lock:
            return self._exceptions.get(resolve_api(api), 0)

    def set_latency(self, ms: int, api: str | int | None = None) -> None:
        if ms < 0:
            raise ValueError("latency must be >= 0")
        with self._lock:
            if api is None:
                self._latency_all_ms = int(ms)
            else:
                self._latency_ms[resolve_api(api)] = int(ms)
            self._rearm()

    def clear(self) -> None:
        with self._lock:
            self._errors.clear()
            self._exceptions.clear()
            self._latency_ms.clear()
            self._latency_all_ms = 0
            self._rearm()

    def pending_errors(self, api: str | int) -> int:
        """How many injected errors of `api` have not been answered yet."""
        with self._lock:
            return len(self._errors.get(resolve_api(api), ()))

    def _rearm(self) -> None:
        self.armed = bool(self._latency_all_ms or any(self._latency_ms.values())
                          or any(self._errors.values()) or any(self._exceptions.values()))

    # ----------------------------------------------------------------------------------- broker side
    async def dispatch(self, ctx: RequestContext, request: Any, handle: Handler) -> Any:
        """Serve one request through the faults: delay it, answer it with an injected error, or pass it on."""
        delay_ms = self._latency_ms.get(ctx.api_key, self._latency_all_ms)
        if delay_ms:
            await asyncio.sleep(delay_ms / 1000)
        if self._take_exception(ctx.api_key):
            raise InjectedHandlerError(f"injected exception in the handler of API key {ctx.api_key}")
        layout = _PARTITION_APIS.get(ctx.api_key)
        if ctx.api_key == _OFFSET_FETCH and ctx.api_version >= _OFFSET_FETCH_GROUPS_MIN_VERSION:
            layout = None  # batched groups: a group-level error
        injected = self._take(ctx, request, layout)
        if injected is None:
            return await handle(ctx, request)
        code, topic, targeted = injected
        if ctx.api_key == _METADATA:
            return await self._metadata(ctx, request, handle, code, topic)
        if layout is None:
            return self._top_level(ctx, request, code)
        return await self._partitions(ctx, request, handle, layout, targeted, code)

    def _take_exception(self, api_key: int) -> bool:
        with self._lock:
            left = self._exceptions.get(api_key, 0)
            if not left:
                return False
            self._exceptions[api_key] = left - 1
            self._rearm()
            return True

    def _take(self, ctx: RequestContext, request: Any, layout: _Layout | None
              ) -> tuple[int, str | None, list[Any]] | None:
        """Pop the next injected error of this API if this request is one it applies to."""
        with self._lock:
            queue = self._errors.get(ctx.api_key)
            if not queue:
                return None
            code, topic = queue[0]
            targeted: list[Any] = []
            if layout is not None or ctx.api_key == _METADATA:
                targeted = self._targeted(ctx, request, layout, topic)
                if not targeted:
                    return None  # the error waits for a request that names `topic`
            queue.popleft()
            self._rearm()
            return code, topic, targeted

    def _topic_name(self, ctx: RequestContext, entry: Any, name_field: str) -> str | None:
        name = getattr(entry, name_field, None)
        if name:
            return str(name)
        topic_id = getattr(entry, "topic_id", None)
        if topic_id is None:
            return None
        raw = topic_id.bytes if isinstance(topic_id, uuid.UUID) else bytes(topic_id)
        info = ctx.broker.topics.by_id(raw) if any(raw) else None
        return None if info is None else str(info.name)

    def _targeted(self, ctx: RequestContext, request: Any, layout: _Layout | None, topic: str | None) -> list[Any]:
        if layout is None:  # Metadata: the whole request is targeted unless it names topics
            entries = getattr(request, "topics", None) or []
            if topic is None:
                return [request]
            return [t for t in entries if t.name == topic]
        entries = getattr(request, layout.request_topics, None) or []
        if topic is None:
            return list(entries)
        return [t for t in entries if self._topic_name(ctx, t, layout.topic_name) == topic]

    def _top_level(self, ctx: RequestContext, request: Any, code: int) -> Any:
        """The API's own error response (every error field of it, as a handler's unexpected exception gets)."""
        response = error_response(ctx.api_key, ctx.api_version, request, code)
        if response is None:
            raise CloseConnection(f"injected error {code} has no place in a v{ctx.api_version} response of "
                                  f"API key {ctx.api_key}")
        return response

    async def _metadata(self, ctx: RequestContext, request: Any, handle: Handler, code: int,
                        topic: str | None) -> Any:
        """Metadata is served, then the named topics (every topic when `topic` is None) carry the error."""
        response = await handle(ctx, request)
        for entry in response.topics or []:
            if topic is None or entry.name == topic:
                entry.error_code = code
                entry.partitions = []
        return response

    async def _partitions(self, ctx: RequestContext, request: Any, handle: Handler, layout: _Layout,
                          targeted: list[Any], code: int) -> Any:
        entries = list(getattr(request, layout.request_topics, None) or [])
        rest = [t for t in entries if not any(t is x for x in targeted)]
        cls = response_class(ctx.api_key)[ctx.api_version]
        if layout.mutating:
            # The faulted partitions are not applied: serve only the others, then add the errors.
            if rest:
                setattr(request, layout.request_topics, rest)
                response = await handle(ctx, request)
                if response is None:  # acks=0 Produce: no response to carry an error
                    raise CloseConnection("injected error on an acks=0 Produce (Kafka closes the connection)")
            else:
                response = self._empty(ctx, cls, request)
            topics = list(getattr(response, layout.response_topics) or [])
            topics.extend(self._error_topics(ctx, cls, layout, targeted, code))
            setattr(response, layout.response_topics, topics)
            return response
        # Read-only APIs: served as usual (nothing to undo), then the faulted partitions carry the error.
        if not rest:
            response = self._empty(ctx, cls, request)
            setattr(response, layout.response_topics, self._error_topics(ctx, cls, layout, targeted, code))
            return response
        response = await handle(ctx, request)
        names = {id(t) for t in targeted}
        faulted_keys = {(getattr(t, layout.topic_name, None), getattr(t, "topic_id", None))
                        for t in entries if id(t) in names}
        kept = [t for t in getattr(response, layout.response_topics) or []
                if (getattr(t, layout.topic_name, None), getattr(t, "topic_id", None)) not in faulted_keys]
        setattr(response, layout.response_topics, kept + self._error_topics(ctx, cls, layout, targeted, code))
        return response

    def _empty(self, ctx: RequestContext, cls: Any, request: Any) -> Any:
        response = cls()
        if ctx.api_key == 0 and request.acks == 0:
            raise CloseConnection("injected error on an acks=0 Produce (Kafka closes the connection)")
        if ctx.api_key == 1 and ctx.api_version >= 7:
            response.session_id = 0  # no session was created or advanced (Kafka: FetchSession INVALID_SESSION_ID)
        return response

    def _error_topics(self, ctx: RequestContext, cls: Any, layout: _Layout, targeted: list[Any],
                      code: int) -> list[Any]:
        return error_entries(ctx.api_key, ctx.api_version, layout.response_topics, targeted, code)
