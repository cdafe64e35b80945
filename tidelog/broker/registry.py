"""The handler of each Kafka API, from the static table in `tidelog.broker.apis` (API_TABLE).

`advertised_ranges()` needs only the table, so ApiVersions is answered before any handler module is
imported; `load()` imports them all (on the start-up worker thread) and fails loudly if one cannot be.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Iterable
from types import ModuleType
from typing import Any, Protocol, cast

from tidelog.broker.apis import API_TABLE, ApiEntry
from tidelog.protocol.messages import request_class, response_class

# A handler takes the RequestContext (broker/context.py) and the request; typed loosely here so that the registry,
# which the broker state holds, does not import the context (which names the state).
Handler = Callable[[Any, Any], Awaitable[Any]]


class HandlerModule(Protocol):
    API_KEY: int

    async def handle(self, ctx: Any, request: Any) -> Any: ...


class ApiRegistry:
    def __init__(self, table: Iterable[ApiEntry] = API_TABLE,
                 modules: dict[str, ModuleType] | None = None) -> None:
        """`modules` supplies handler modules by name instead of importing them (tests of the dispatch)."""
        self.entries: dict[int, ApiEntry] = {int(e.key): e for e in table}
        self._given = dict(modules or {})
        self._handlers: dict[int, Handler] = {}

    def entry(self, api_key: int) -> ApiEntry | None:
        return self.entries.get(api_key)

    def advertised_ranges(self) -> list[tuple[int, int, int]]:
        """(api_key, min, max) for ApiVersions; min is the entry's advertised_min when it has one."""
        return sorted(e.advertised for e in self.entries.values())

    def load(self) -> None:
        """Import every handler module (idempotent)."""
        for key, entry in self.entries.items():
            if key not in self._handlers:
                self._handlers[key] = self._import(entry)

    def _import(self, entry: ApiEntry) -> Handler:
        module = self._given.get(entry.module) or importlib.import_module(f"tidelog.broker.apis.{entry.module}")
        if int(module.API_KEY) != int(entry.key):
            raise ImportError(f"tidelog.broker.apis.{entry.module} handles key {module.API_KEY}, "
                              f"registered as {entry.key!r}")
        return cast(Handler, module.handle)

    def handler(self, api_key: int) -> Handler:
        handler = self._handlers.get(api_key)
        if handler is None:  # ApiVersions before load(), or a registry used without load()
            handler = self._handlers[api_key] = self._import(self.entries[api_key])
        return handler

    def warm_up(self) -> None:
        """Import the kafka-python message classes of every API and the codec libraries (which records.py and
        inflaters.py import when first used), off the loop, after start-up."""
        import cramjam  # noqa: F401
        import lz4.frame  # noqa: F401
        import zstandard  # noqa: F401


        for key in self.entries:
            try:
                request_class(key)
                response_class(key)
            except KeyError:
                pass
