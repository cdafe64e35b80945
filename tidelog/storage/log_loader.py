"""Opening a partition directory (Kafka's LogLoader): settle interrupted swaps, load segments, recover
after an unclean shutdown, rebuild producer state (storage-format.md §11, log-cleaner.md §6)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from tidelog.protocol.record_batch import HEADER_SIZE, LOG_OVERHEAD, RecordBatchHeader, read_header
from tidelog.storage.abstract_index import CorruptIndexError, IndexError_
from tidelog.storage.log_file_utils import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    log_file,
    offset_from_file_name,
    offset_index_file,
)
from tidelog.storage.log_segment import LogSegment
from tidelog.storage.transaction_index import AbortedTxn

if TYPE_CHECKING:
    from tidelog.storage.log import Log

log = logging.getLogger(__name__)


def scan_next_offset(path: Path, base_offset: int) -> int:
    """Next offset after the last complete batch of a `.log` file (base offset when it has none)."""
    next_offset = base_offset
    fd = os.open(path, os.O_RDONLY)
    try:
        end = os.fstat(fd).st_size
        pos = 0
        while end - pos >= HEADER_SIZE:
            head = os.pread(fd, HEADER_SIZE, pos)
            if len(head) < HEADER_SIZE:
                break
            header = read_header(head)
            if header.length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > end:
                break
            next_offset = header.next_offset
            pos += header.size
    finally:
        os.close(fd)
    return next_offset


def settle_swap_files(directory: Path) -> None:
    """log-cleaner.md §6 startup steps 1-5: drop `.deleted`/`.cleaned`, roll back or complete `.swap`."""
    names = sorted(os.listdir(directory))
    min_cleaned: int | None = None
    cleaned: list[Path] = []
    swaps: list[Path] = []
    for name in names:
        path = directory / name
        if not path.is_file():
            continue
        if name.endswith(DELETED_FILE_SUFFIX):
            path.unlink(missing_ok=True)
        elif name.endswith(CLEANED_FILE_SUFFIX):
            offset = offset_from_file_name(name)
            if offset is not None:
                min_cleaned = offset if min_cleaned is None else min(min_cleaned, offset)
            cleaned.append(path)
        elif name.endswith(SWAP_FILE_SUFFIX):
            swaps.append(path)
    remaining = []
    for swap in swaps:
        offset = offset_from_file_name(swap.name)
        if min_cleaned is not None and offset is not None and offset >= min_cleaned:
            log.info("rolling back interrupted swap: deleting %s", swap)
            swap.unlink(missing_ok=True)
        else:
            remaining.append(swap)
    for path in cleaned:
        path.unlink(missing_ok=True)
    log_swaps = [p for p in remaining if p.name.endswith(LOG_FILE_SUFFIX + SWAP_FILE_SUFFIX)]
    if log_swaps:
        bases = [offset_from_file_name(p.name) or 0 for p in log_swaps]
        min_base = min(bases)
        max_next = max(scan_next_offset(p, b) for p, b in zip(log_swaps, bases, strict=True))
        replaceable = SEGMENT_SUFFIXES + (PRODUCER_SNAPSHOT_FILE_SUFFIX,)
        for name in os.listdir(directory):
            if name.endswith(SWAP_FILE_SUFFIX) or not name.endswith(replaceable):
                continue
            offset = offset_from_file_name(name)
            if offset is not None and min_base <= offset < max_next:
                log.info("completing interrupted swap: deleting replaced %s", name)
                (directory / name).unlink(missing_ok=True)
    for swap in remaining:
        target = swap.with_name(swap.name[: -len(SWAP_FILE_SUFFIX)])
        os.replace(swap, target)


def delete_orphan_indexes(directory: Path) -> None:
    for name in os.listdir(directory):
        if name.endswith((INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)):
            offset = offset_from_file_name(name)
            if offset is None or not log_file(directory, offset).exists():
                log.info("deleting index %s without a .log", name)
                (directory / name).unlink(missing_ok=True)


class LogLoader:
    def __init__(self, log_obj: Log, had_clean_shutdown: bool, recovery_point: int, log_start_offset: int) -> None:
        self.log = log_obj
        self.had_clean_shutdown = had_clean_shutdown
        self.recovery_point_checkpoint = recovery_point
        self.log_start_offset_checkpoint = log_start_offset

    def load(self) -> None:
        lg = self.log
        directory = lg.dir
        settle_swap_files(directory)
        delete_orphan_indexes(directory)
        self._load_segments()
        if not self.had_clean_shutdown:
            self._recover_unflushed()
        last = lg.segments.last_segment
        leo = last.read_next_offset() if last is not None else 0
        if last is not None and leo < self.log_start_offset_checkpoint:
            log.warning("%s: every segment is below the log start checkpoint; deleting them", lg.topic_partition)
            for segment in list(lg.segments):
                lg.segments.remove(segment.base_offset)
                segment.delete_if_exists()
        if lg.segments.is_empty:
            leo = max(0, self.log_start_offset_checkpoint)  # a new empty segment: LEO is its base
            lg.segments.add(LogSegment.open(directory, leo, lg.config, lg.clock, preallocate=lg.config.preallocate))
        active = lg.segments.active_segment
        first = lg.segments.first_segment
        assert first is not None
        lg._next_offset = leo
        lg.log_start_offset = max(self.log_start_offset_checkpoint, first.base_offset)
        if self.had_clean_shutdown:
            lg.recovery_point = leo
        else:
            lg.recovery_point = min(self.recovery_point_checkpoint, leo)
        lg.leader_epoch_cache.truncate_from_end(leo)
        lg.leader_epoch_cache.truncate_from_start(lg.log_start_offset)
        lg.leader_epoch_cache.ensure_file()
        self._rebuild_producer_state(leo)
        active.resize_indexes(lg.config.segment_index_bytes)

    # --- segments -----------------------------------------------------------------------------------------

    def _load_segments(self) -> None:
        lg = self.log
        bases = sorted(
            off
            for name in os.listdir(lg.dir)
            if name.endswith(LOG_FILE_SUFFIX) and (off := offset_from_file_name(name)) is not None
        )
        for base in bases:
            index_missing = not offset_index_file(lg.dir, base).exists()
            segment = LogSegment.open(lg.dir, base, lg.config, lg.clock, file_already_exists=True)
            needs_rebuild = index_missing or not segment.txn_index.sanity_check()
            try:
                segment.offset_index.sanity_check()
                segment.time_index.sanity_check()
            except CorruptIndexError as e:
                log.warning("%s; rebuilding", e)
                needs_rebuild = True
            lg.segments.add(segment)
            if needs_rebuild:
                log.info("%s: rebuilding indexes of segment %d", lg.topic_partition, base)
                self._recover_segment(segment)

    def _recover_segment(self, segment: LogSegment) -> int:
        """Recover one segment with producer state built up to its base (for correct `.txnindex`)."""
        lg = self.log
        psm = lg.producer_state_manager
        psm.reload(0, segment.base_offset, lg.clock.milliseconds())
        self._replay(psm.map_end_offset, segment.base_offset)

        def on_batch(header: RecordBatchHeader, data: bytes) -> None:
            if header.partition_leader_epoch >= 0:
                lg.leader_epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
            completed = psm.update(header, data if header.is_control else None, lg.clock.milliseconds())
            if completed is not None and completed.is_aborted:
                segment.txn_index.append(
                    AbortedTxn(
                        completed.producer_id,
                        completed.first_offset,
                        completed.last_offset,
                        psm.last_stable_offset(completed),
                    )
                )

        return segment.recover(on_batch)

    def _recover_unflushed(self) -> None:
        lg = self.log
        unflushed = lg.segments.values(self.recovery_point_checkpoint)
        for i, segment in enumerate(unflushed):
            try:
                truncated = self._recover_segment(segment)
            except (OSError, IndexError_, ValueError) as e:
                log.error("%s: recovery of segment %d failed (%s); emptying it", lg.topic_partition,
                          segment.base_offset, e)
                segment.truncate_to(segment.base_offset)
                os.ftruncate(segment._fd, 0)
                segment._size = 0
                truncated = 1
            if truncated > 0:
                log.warning("%s: truncated %d invalid bytes from segment %d", lg.topic_partition, truncated,
                            segment.base_offset)
                for later in unflushed[i + 1 :]:
                    log.warning("%s: deleting segment %d after a truncated one", lg.topic_partition,
                                later.base_offset)
                    lg.segments.remove(later.base_offset)
                    later.delete_if_exists()
                break

    # --- producer state ------------------------------------------------------------------------------------

    def _replay(self, from_offset: int, to_offset: int) -> None:
        psm = self.log.producer_state_manager
        if from_offset >= to_offset:
            return
        now = self.log.clock.milliseconds()
        for segment, pos, header in self.log.batches_from(from_offset):
            if header.base_offset >= to_offset:
                break
            if header.base_offset < from_offset:
                continue
            data = segment.read_bytes(pos, header.size) if header.is_control else None
            psm.update(header, data, now)

    def _rebuild_producer_state(self, leo: int) -> None:
        lg = self.log
        psm = lg.producer_state_manager
        psm.truncate_and_reload(lg.log_start_offset, leo, lg.clock.milliseconds())
        self._replay(psm.map_end_offset, leo)
        psm.map_end_offset = leo
