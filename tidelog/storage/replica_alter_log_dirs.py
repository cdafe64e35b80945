"""Moving a partition between log dirs online (KIP-113: Kafka's ReplicaAlterLogDirsThread, the future log of
LogManager.getOrCreateLog(isFuture=true) and LogManager.replaceCurrentWithFutureLog), docs/STORAGE.md
"Moving a partition between log dirs".

The future dir `<topic>-<p>.<uuid>-future` in the target dir is filled by copying the source's files while the
source keeps serving appends: closed segments on a worker thread, then under the source's lock (on the event
loop, so no Produce runs in between) the tail. Then the swap, in Kafka's order: the complete future dir is
renamed to the normal name, the old dir renamed `-delete` and removed. The preferred dir is persisted first
(LogManager's `preferred-log-dir-checkpoint`), so start-up can tell which copy is in use after a crash: a
`-future` dir is discarded and the move restarted, of two normal-named copies the one in the preferred dir
wins, a `-delete` dir is removed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tidelog.storage import TopicPartition
from tidelog.storage.checkpoints import PartitionMetadataFile
from tidelog.storage.fault_hooks import FaultPoint
from tidelog.storage.log_file_utils import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    fsync_dir,
    offset_from_file_name,
    remove_tree,
)

if TYPE_CHECKING:
    from tidelog.storage.log import Log
    from tidelog.storage.log_manager import LogManager

log = logging.getLogger(__name__)

_SEGMENT_FILE_SUFFIXES = (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)
_CHUNK = 1 << 20


def suffixed_dir_name(tp: TopicPartition, suffix: str) -> str:
    """`<topic>-<p>.<uuid><suffix>` (Kafka's UnifiedLog.logFutureDirName / logDeleteDirName)."""
    return f"{tp.topic}-{tp.partition}.{uuid.uuid4().hex}{suffix}"


@dataclass
class FutureLog:
    """A partition's `-future` dir being filled from its current log."""

    tp: TopicPartition
    target_dir: Path
    path: Path
    copied: dict[str, tuple[int, int]] = field(default_factory=dict)  # file name -> (size, mtime_ns) copied
    copied_offset: int = 0  # next offset not yet in the future dir (DescribeLogDirs' OffsetLag)
    cancelled: bool = False
    task: asyncio.Task[None] | None = None

    def size_in_bytes(self) -> int:
        return sum(size for name, (size, _) in self.copied.items() if name.endswith(LOG_FILE_SUFFIX))


class ReplicaAlterLogDirsManager:
    """Runs the moves of one LogManager; `alter(tp, dir)` starts one, `startup()` resumes persisted ones."""

    def __init__(self, manager: LogManager) -> None:
        self.manager = manager
        self.futures: dict[TopicPartition, FutureLog] = {}

    # --- requests --------------------------------------------------------------------------------------

    def alter(self, tp: TopicPartition, target: Path) -> None:
        """Move `tp` to `target` (a configured log dir); a move to another dir under way is abandoned
        (Kafka's Partition.futureReplicaDirChanged). Moving to the current dir is a no-op."""
        current = self.manager.log_dir_of(tp)
        existing = self.futures.get(tp)
        if existing is not None:
            if existing.target_dir == target:
                return
            self._abandon(existing)
        self.manager.maybe_update_preferred_log_dir(tp, target)
        if current is None or current == target:
            return
        self._start(tp, target)

    def startup(self) -> None:
        """On the loop thread: restart the moves whose preferred dir is not the current one."""
        for tp, target in self.manager.preferred_log_dirs().items():
            current = self.manager.log_dir_of(tp)
            if current is not None and current != target and tp not in self.futures:
                log.info("resuming the move of %s from %s to %s", tp, current, target)
                self._start(tp, target)

    def shutdown(self) -> None:
        for future in list(self.futures.values()):
            future.cancelled = True
            if future.task is not None:
                future.task.cancel()
        self.futures.clear()

    def _start(self, tp: TopicPartition, target: Path) -> None:
        future = FutureLog(tp, target, target / suffixed_dir_name(tp, FUTURE_DIR_SUFFIX))
        self.futures[tp] = future
        future.task = asyncio.get_running_loop().create_task(self._run(future), name=f"alter-log-dir {tp}")

    def _abandon(self, future: FutureLog) -> None:
        future.cancelled = True
        if future.task is not None:
            future.task.cancel()
        self.futures.pop(future.tp, None)
        remove_tree(future.path)

    # --- the move --------------------------------------------------------------------------------------

    async def _run(self, future: FutureLog) -> None:
        hooks = self.manager.fault_hooks
        cleaner = getattr(self.manager.retention, "cleaner", None)
        paused = False
        try:
            source = self.manager.get_log(future.tp)
            if source is None:
                return
            if cleaner is not None:  # no cleaner swap while segments are copied (Kafka's abortAndPauseCleaning)
                await asyncio.to_thread(cleaner.abort_and_pause_cleaning, future.tp)
                paused = True
            await asyncio.to_thread(self._create_future_dir, future, source)
            # Copy until only the active segment's tail is left, so the final step under the lock is short.
            while not future.cancelled:
                source = self.manager.get_log(future.tp)
                if source is None:
                    return
                pending = await asyncio.to_thread(self._copy_pass, future, source, False)
                if pending == 0:
                    break
            # Hooks of the copy run on a worker thread: a test may hold the move there while the loop serves.
            await asyncio.to_thread(hooks.at, FaultPoint.ALTER_DIR_FUTURE_COPIED, future.tp)
            if future.cancelled:
                return
            source = self.manager.get_log(future.tp)
            if source is None:
                return
            self._complete(future, source)  # on the loop thread: no append runs meanwhile
        except asyncio.CancelledError:
            raise
        except Exception:
            # The source stays in use; the future dir is dropped and the move restarts on the next start-up.
            log.exception("moving %s to %s failed", future.tp, future.target_dir)
            remove_tree(future.path)
        finally:
            if paused and cleaner is not None:
                cleaner.resume_cleaning([future.tp])
            if self.futures.get(future.tp) is future:
                del self.futures[future.tp]

    def _create_future_dir(self, future: FutureLog, source: Log) -> None:
        future.path.mkdir(parents=True)
        PartitionMetadataFile(future.path).write(source.topic_id)
        fsync_dir(future.path)
        fsync_dir(future.target_dir)
        self.manager.fault_hooks.at(FaultPoint.ALTER_DIR_FUTURE_CREATED, future.tp)

    def _copy_pass(self, future: FutureLog, source: Log, final: bool) -> int:
        """Copy the source's files the future dir lacks or has stale copies of; returns how many files of
        closed segments had to be copied (0: only the tail is left). With `final` (the caller holds the
        source's lock on the loop thread) everything is copied and files gone from the source are removed."""
        with source.lock:
            segments = list(source.segments)
            active = source.active_segment.base_offset if segments else None
            active_size = source.active_segment.size if segments else 0
            next_offset = source.log_end_offset
        wanted: dict[str, int | None] = {}  # file name -> bytes to copy (None: the whole file)
        for segment in segments:
            for suffix in _SEGMENT_FILE_SUFFIXES:
                name = f"{segment.base_offset:020d}{suffix}"
                if segment.base_offset == active:
                    if suffix == LOG_FILE_SUFFIX:  # complete batches only; its indexes are rebuilt on load
                        wanted[name] = active_size
                elif (source.dir / name).exists():
                    wanted[name] = None
        if final:
            for name in os.listdir(source.dir):
                if name.endswith(".snapshot") or name == "leader-epoch-checkpoint":
                    wanted[name] = None
        copied = 0
        for name, limit in wanted.items():
            src = source.dir / name
            try:
                st = src.stat()
            except FileNotFoundError:
                continue
            size = st.st_size if limit is None else min(limit, st.st_size)
            if future.copied.get(name) == (size, st.st_mtime_ns) and limit is None:
                continue
            if limit is not None and future.copied.get(name, (-1, 0))[0] == size:
                continue
            try:
                _copy_file(src, future.path / name, size)
            except FileNotFoundError:  # deleted by retention or replaced by the cleaner meanwhile
                continue
            future.copied[name] = (size, st.st_mtime_ns)
            if limit is None and not name.endswith((".snapshot", "leader-epoch-checkpoint")):
                copied += 1
        if final:
            for name in set(future.copied) - set(wanted):
                (future.path / name).unlink(missing_ok=True)
                del future.copied[name]
            for name in os.listdir(future.path):
                path = future.path / name
                if name not in wanted and offset_from_file_name(name) is not None and path.is_file():
                    path.unlink()
        future.copied_offset = next_offset  # the active segment was copied up to this offset's batch end
        return copied

    def _complete(self, future: FutureLog, source: Log) -> None:
        """Catch up and swap under the source's lock (Kafka's replaceCurrentWithFutureLog)."""
        hooks = self.manager.fault_hooks
        tp = future.tp
        # The manager's lock too (taken first, as LogManager does): no periodic checkpoint of the target dir
        # runs between its log-start entry for the moved copy and the swap.
        with self.manager.lock, source.lock:
            source.flush()
            psm = source.producer_state_manager
            psm.map_end_offset = max(psm.map_end_offset, source.log_end_offset)
            psm.take_snapshot()
            self._copy_pass(future, source, final=True)
            for name in os.listdir(future.path):
                _fsync_path(future.path / name)
            fsync_dir(future.path)
            active_base = source.active_segment.base_offset
            log_start = source.log_start_offset
            final_path = future.target_dir / tp.dir_name()
            first = source.segments.first_segment
            self.manager.checkpoint_moved_log_start(future.target_dir, tp, log_start,
                                                    first.base_offset if first is not None else log_start)
            os.replace(future.path, final_path)
            fsync_dir(future.target_dir)
            hooks.at(FaultPoint.ALTER_DIR_FUTURE_RENAMED, tp)
            try:
                # Loaded as after an unclean shutdown from the active segment on: its indexes are rebuilt.
                # lazy for start-up time: log_manager imports this module, storage.log loads with the first log
                from tidelog.storage.log import Log

                new_log = Log.load(final_path, tp, source.config, self.manager.clock, source.topic_id,
                                   had_clean_shutdown=False, recovery_point=active_base,
                                   log_start_offset=log_start, **self.manager.log_kwargs())
            except BaseException:
                # The source stays in use and keeps appending: this copy must not win at the next start-up.
                remove_tree(final_path)
                fsync_dir(future.target_dir)
                raise
            new_log.leader_epoch = source.leader_epoch
            source_dir = source.dir
            source_log_dir = self.manager.log_dir_of(tp)
            delete_path = source_dir.parent / suffixed_dir_name(tp, DELETE_DIR_SUFFIX)
            os.replace(source_dir, delete_path)
            fsync_dir(source_dir.parent)
            hooks.at(FaultPoint.ALTER_DIR_CURRENT_DELETED, tp)
            self.manager.replace_current_with_future_log(tp, source, new_log, future.target_dir, source_log_dir)
        remove_tree(delete_path)
        log.info("moved %s to %s", tp, future.target_dir)

    # --- DescribeLogDirs -------------------------------------------------------------------------------

    def future_logs(self) -> dict[TopicPartition, FutureLog]:
        return dict(self.futures)


def _copy_file(src: Path, dst: Path, size: int) -> None:
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        remaining = size
        while remaining > 0:
            chunk = fin.read(min(_CHUNK, remaining))
            if not chunk:
                break
            fout.write(chunk)
            remaining -= len(chunk)


def _fsync_path(path: Path) -> None:
    if not path.is_file():
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
