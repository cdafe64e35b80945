"""Metadata files written off the event loop, latest state wins: `CoalescingWriter`.

For state that changes on request paths many times a second (streams-group heartbeats), replacing the whole file
with two fsyncs on the event loop for every change stalls every connection of the broker. The owner of such a file
notes each change (`changed()`, on the loop). The writer then takes one snapshot of the state on the loop (encoded
there, so a later change cannot leak into a write under way) and replaces the file on its own thread with
`MetadataFile`'s atomic, fsync'd write. Changes noted while a write runs are carried by the next one, of the
state as it is then: at most one write runs and one more waits, however many changes come in meanwhile.

`durable()` waits, without blocking the loop, until every change noted so far is on disk; `flush()` (broker
shutdown) writes what is left on the calling thread once the running write is done, then joins the thread.
Without a running event loop (a tool, a test of the store alone) or after `flush()`, `changed()` writes at once on
the calling thread. `on_written()`, if given, runs on the loop (or the writing thread of `flush()`) after a write
of the latest snapshot taken succeeded: an owner that reports what is on disk (share-group state summaries)
records it then.

A failed write fails the waiters whose changes it carried (their handlers answer an error; the change stays in
memory, no revert) and is tried again on the loop's timer, with a backoff doubling up to a cap, while changes are
left unwritten, whether or not anyone waits for them (a change a timer made, such as a session expiry, has no
request to retry it). Waiters for changes noted after the failed snapshot wait for the retry. A streak of
failures is logged once, and its end once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from tidelog.metadata.store import MetadataFile

log = logging.getLogger(__name__)

# The retry backoff of a failed write: the Kafka clients' retry.backoff.ms / retry.backoff.max.ms defaults (KIP-580)
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_MAX_MS = 1_000


class MetadataFaultPoint(StrEnum):
    """Named steps for the broker's fault hooks (tidelog.storage.fault_hooks objects; subject: the file name)."""

    WRITE = "metadata-write"  # on the writer thread, before a coalesced write replaces the file


class CoalescingWriter:
    """One metadata file, written on a thread of its own from snapshots `snapshot()` takes on the loop."""

    def __init__(self, file: MetadataFile, directory: str | Path, snapshot: Callable[[], Mapping[str, Any]],
                 fault_hooks: Any = None, on_written: Callable[[], None] | None = None) -> None:
        self.file = file
        self.directory = Path(directory)
        self._snapshot = snapshot
        self._on_written = on_written
        self._hooks = fault_hooks  # tidelog.storage.fault_hooks.FaultHooks (Any: metadata sits below storage)
        self.writes = 0  # file replacements done: many changes noted close together take far fewer
        self.failures = 0  # failed writes in the current streak (0: the last write succeeded)
        self._noted = 0  # changes noted (a sequence number)
        self._written = 0  # the last change known on disk, as the loop sees it
        self._on_disk = 0  # the change the file holds, under `_lock` (the writer thread and flush() both write)
        self._lock = threading.Lock()
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None
        self._retry: asyncio.TimerHandle | None = None  # the next attempt after a failed write
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._closed = False

    @property
    def pending(self) -> int:
        """Changes noted and not yet on disk."""
        return self._noted - self._written

    def changed(self) -> None:
        """The state changed: write it soon (on the loop), or now (no running loop, or after flush())."""
        self._noted += 1
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._write_now()
            return
        if self._closed:
            self._write_now()
        else:
            self._start()

    async def durable(self) -> None:
        """Return once every change noted so far is on disk; the write's exception (OSError, or a bug's) if the
        write that was to carry them failed (it is retried: the state stays as changed)."""
        target = self._noted
        if self._written >= target:
            return
        if self._closed:
            self._write_now()
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((target, waiter))
        self._start()
        await waiter

    def flush(self) -> None:
        """Broker shutdown: write what is left, once a write under way is done (a write still waiting for the
        thread then finds the file newer and does nothing), then join the writer thread. Later changes are
        written at once. A failed write fails every waiter and raises."""
        self._closed = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        try:
            self._write_now()
        except Exception as exc:
            self._settle(exc, self._noted)
            raise
        finally:
            if self._executor is not None:
                # after the write above (under the lock) the thread has at most a write to skip left: join it
                # (queued writes are cancelled; a fault hook holding the thread holds the shutdown too)
                self._executor.shutdown(wait=True, cancel_futures=True)
                self._executor = None

    # --- internals ---------------------------------------------------------------------------------------------

    def _start(self) -> None:
        if self._retry is not None:
            return  # after a failed write, the next attempt waits for its backoff
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"write {self.file.name}")

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self._written < self._noted and not self._closed:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"write-{self.file.name}")
            target = self._noted
            try:
                data = self.file.encode(self._snapshot())
                await loop.run_in_executor(self._executor, self._replace, data, target, True)
                if self._on_written is not None:
                    self._on_written()
            except Exception as exc:  # OSError, or a bug: its waiters must not wait for ever
                self._failed(loop, target, exc)
                return
            self._done(target)

    def _failed(self, loop: asyncio.AbstractEventLoop, target: int, exc: Exception) -> None:
        """The write of change `target` failed: its waiters get `exc`, and the write is tried again later."""
        if self.failures == 0:  # once per streak
            if isinstance(exc, OSError):
                log.error("Cannot write %s: %s (retried until it succeeds)", self.file.path(self.directory), exc)
            else:
                log.error("Writing %s failed (retried until it succeeds)", self.file.path(self.directory),
                          exc_info=exc)
        self.failures += 1
        self._settle(exc, target)
        if not self._closed:
            delay_ms = min(RETRY_BACKOFF_MAX_MS, RETRY_BACKOFF_MS << min(self.failures - 1, 16))
            self._retry = loop.call_later(delay_ms / 1000, self._retry_now)

    def _retry_now(self) -> None:
        self._retry = None
        if not self._closed:
            self._start()

    def _write_now(self) -> None:
        target = self._noted
        with self._lock:
            behind = self._on_disk < target
        if behind:
            self._replace(self.file.encode(self._snapshot()), target, False)
            if self._on_written is not None:
                self._on_written()
        self._done(target)

    def _replace(self, data: bytes, target: int, background: bool) -> None:
        """Put the state of change `target` in the file unless the file already holds that change or a later one
        (a flush() that overtook a write still waiting for its thread)."""
        if background and self._hooks is not None:
            self._hooks.at(MetadataFaultPoint.WRITE, self.file.name)
        with self._lock:
            if self._on_disk >= target:
                return
            self.file.write_encoded(self.directory, data)
            self._on_disk = target
            self.writes += 1

    def _done(self, target: int) -> None:
        if self.failures:  # a streak of failed writes ends
            log.warning("Wrote %s after %d failed attempt(s)", self.file.path(self.directory), self.failures)
            self.failures = 0
        self._written = max(self._written, target)
        self._settle(None, target)

    def _settle(self, error: Exception | None, target: int) -> None:
        """Answer the waiters whose change is on disk or, on an error, those whose change the failed write of
        change `target` carried; the others wait on."""
        keep: list[tuple[int, asyncio.Future[None]]] = []
        for wanted, waiter in self._waiters:
            if waiter.done():
                continue  # its request went away
            if error is not None and wanted <= target:
                waiter.set_exception(error)
            elif error is None and wanted <= self._written:
                waiter.set_result(None)
            else:
                keep.append((wanted, waiter))
        self._waiters = keep
