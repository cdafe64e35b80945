"""Delayed fetches (Kafka's DelayedFetch in a DelayedOperationPurgatory, keyed by partition).

A Fetch that cannot be answered yet (fewer than min_bytes available) parks here until an append to one of
its partitions wakes it or its max_wait_ms runs out. There is no polling loop: each parked fetch is a future
registered under the logs it reads; Log append listeners resolve those futures, and an asyncio timer (the
event loop's, as the architecture prescribes for timeouts) ends the wait. The woken fetch re-reads its
partitions and decides whether min_bytes is now met.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING

from tidelog.clock import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:
    from tidelog.storage.log import Log

log = logging.getLogger(__name__)


class FetchPurgatory:
    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or SYSTEM_CLOCK
        # id(log) -> futures of the fetches parked on it. Logs are watched once, and held weakly so a
        # deleted topic's Log can go away; a re-created topic's new Log is watched on its first fetch.
        self._waiters: dict[int, set[asyncio.Future[bool]]] = {}
        self._watched: weakref.WeakValueDictionary[int, Log] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()  # append listeners normally run on the loop thread; be safe anyway
        self._closed = False

    def watch(self, log_obj: Log) -> None:
        """Register the append listener on `log_obj` (idempotent)."""
        key = id(log_obj)
        with self._lock:
            if self._watched.get(key) is log_obj:
                return
            self._watched[key] = log_obj
        log_obj.add_append_listener(self._on_append)

    def num_delayed(self) -> int:
        with self._lock:
            return len({f for futures in self._waiters.values() for f in futures})

    async def wait_for_append(self, logs: Iterable[Log], timeout_ms: int) -> bool:
        """Park until any of `logs` is appended to (True) or `timeout_ms` passes (False)."""
        if self._closed or timeout_ms <= 0:
            return False
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        keys = []
        for log_obj in logs:
            self.watch(log_obj)
            keys.append(id(log_obj))
        with self._lock:
            for key in keys:
                self._waiters.setdefault(key, set()).add(future)
        try:
            woken = await asyncio.wait_for(future, timeout_ms / 1000)
        except TimeoutError:
            return False
        finally:
            with self._lock:
                for key in keys:
                    futures = self._waiters.get(key)
                    if futures is not None:
                        futures.discard(future)
                        if not futures:
                            del self._waiters[key]
        return woken

    def _on_append(self, log_obj: Log) -> None:
        self._wake(id(log_obj))

    def wake(self, log_obj: Log) -> None:
        """Wake what waits on `log_obj` though nothing was appended: share records released or acknowledged
        (a woken fetch that finds nothing new waits again for what is left of its time)."""
        self._wake(id(log_obj))

    def _wake(self, key: int) -> None:
        with self._lock:
            futures = list(self._waiters.get(key, ()))
        for future in futures:
            future_loop = future.get_loop()
            if _on_loop_thread(future_loop):
                _resolve(future)
            else:
                future_loop.call_soon_threadsafe(_resolve, future)

    def shutdown(self) -> None:
        """Wake every parked fetch so the server can answer them and stop."""
        self._closed = True
        with self._lock:
            keys = list(self._waiters)
        for key in keys:
            self._wake(key)


def _on_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _resolve(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(True)
