"""Metadata files written off the event loop, latest state wins: `CoalescingWriter`.

For state that changes on request paths many times a second (streams-group heartbeats), replacing the whole file
with two fsyncs on the event loop for every change stalls every connection of the broker. The owner of such a file
notes each change (`changed()`, on the loop). The writer then takes one snapshot of the state on the loop (encoded
there, so a later change cannot leak into a write under way) and replaces the file on its own thread with
`MetadataFile`'s atomic, fsync'd write. Changes noted while a write runs are carried by the next one, of the
state as it is then: at most one write runs and one more waits, however many changes come in meanwhile.

`durable()` waits, without blocking the loop, until every change noted so far is on disk; `flush()` (broker
shutdown) writes what is left on the calling thread once the running write is done. Without a running event loop
(a tool, a test of the store alone) or after `flush()`, `changed()` writes at once on the calling thread.
`on_written()`, if given, runs on the loop (or the writing thread of `flush()`) after a write of the latest snapshot
taken succeeded: an owner that reports what is on disk (share-group state summaries) records it then.
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
        self._noted = 0  # changes noted (a sequence number)
        self._written = 0  # the last change known on disk, as the loop sees it
        self._on_disk = 0  # the change the file holds, under `_lock` (the writer thread and flush() both write)
        self._lock = threading.Lock()
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None
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
        """Return once every change noted so far is on disk; OSError if the write that was to carry it failed
        (the next change, or the next call, writes again)."""
        target = self._noted
        if self._written >= target:
            return
        if self._closed:
            self._write_now()
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((target, waiter))
        self._start()  # after a failed write nothing may be running
        await waiter

    def flush(self) -> None:
        """Broker shutdown: write what is left, once a write under way is done (a write still waiting for the
        thread then finds the file newer and does nothing). Later changes are written at once."""
        self._closed = True
        try:
            self._write_now()
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)
                self._executor = None

    # --- internals ---------------------------------------------------------------------------------------------

    def _start(self) -> None:
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
            except OSError as exc:
                log.error("Cannot write %s: %s", self.file.path(self.directory), exc)
                self._settle(exc)
                return
            except Exception as exc:  # a bug: its waiters must not wait for ever
                log.exception("Writing %s failed", self.file.path(self.directory))
                self._settle(exc)
                return
            self._done(target)

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
        self._written = max(self._written, target)
        self._settle(None)

    def _settle(self, error: Exception | None) -> None:
        """Answer the waiters whose change is on disk; on an error, every waiter (none of theirs is)."""
        keep: list[tuple[int, asyncio.Future[None]]] = []
        for target, waiter in self._waiters:
            if waiter.done():
                continue  # its request went away
            if error is not None:
                waiter.set_exception(error)
            elif target <= self._written:
                waiter.set_result(None)
            else:
                keep.append((target, waiter))
        self._waiters = keep
