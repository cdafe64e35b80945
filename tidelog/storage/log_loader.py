"""Opening a partition directory (Kafka's LogLoader): settle interrupted swaps, load segments, recover
after an unclean shutdown, rebuild producer state (docs/STORAGE.md "Recovery", "Cleaner swap")."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from tidelog.clock import Clock
from tidelog.config.log_config import LogConfig
from tidelog.protocol.record_batch import HEADER_SIZE, LOG_OVERHEAD, RecordBatchHeader, read_header
from tidelog.storage import TopicPartition
from tidelog.storage.abstract_index import CorruptIndexError, IndexError_
from tidelog.storage.batch_effects import apply_written_batch
from tidelog.storage.leader_epoch import LeaderEpochFileCache
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
from tidelog.storage.log_segments import LogSegments
from tidelog.storage.producer_state import ProducerStateManager

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
    """docs/STORAGE.md "Cleaner swap" startup steps 1-5: drop `.deleted`/`.cleaned`, roll back or complete `.swap`."""
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


@dataclass
class LoadedLogOffsets:
    """What LogLoader.load() found (Kafka's LoadedLogOffsets plus the state it built): Log is made from it."""

    log_start_offset: int
    recovery_point: int
    next_offset: int  # LEO: the offset after the last valid batch
    segments: LogSegments
    producer_state_manager: ProducerStateManager  # rebuilt up to next_offset, ongoing transactions included
    leader_epoch_cache: LeaderEpochFileCache  # truncated to [log start, LEO]


class LogLoader:
    """Loads one partition directory; never sees a Log (Kafka's LogLoader works on LocalLog's parts too)."""

    def __init__(
        self,
        directory: Path,
        topic_partition: TopicPartition,
        config: LogConfig,
        clock: Clock,
        producer_state_manager: ProducerStateManager,
        leader_epoch_cache: LeaderEpochFileCache,
        had_clean_shutdown: bool,
        recovery_point_checkpoint: int,
        log_start_offset_checkpoint: int,
    ) -> None:
        self.dir = Path(directory)
        self.topic_partition = topic_partition
        self.config = config
        self.clock = clock
        self.producer_state = producer_state_manager
        self.epoch_cache = leader_epoch_cache
        self.had_clean_shutdown = had_clean_shutdown
        self.recovery_point_checkpoint = recovery_point_checkpoint
        self.log_start_offset_checkpoint = log_start_offset_checkpoint
        self.segments = LogSegments()

    def load(self) -> LoadedLogOffsets:
        tp = self.topic_partition
        settle_swap_files(self.dir)
        delete_orphan_indexes(self.dir)
        self._load_segments()
        if not self.had_clean_shutdown:
            self._recover_unflushed()
        segments = self.segments
        last = segments.last_segment
        leo = last.read_next_offset() if last is not None else 0
        if last is not None and leo < self.log_start_offset_checkpoint:
            log.warning("%s: every segment is below the log start checkpoint; deleting them", tp)
            for segment in list(segments):
                segments.remove(segment.base_offset)
                segment.delete_if_exists()
        if segments.is_empty:
            leo = max(0, self.log_start_offset_checkpoint)  # a new empty segment: LEO is its base
            segments.add(LogSegment.open(self.dir, leo, self.config, self.clock, preallocate=self.config.preallocate))
        first = segments.first_segment
        assert first is not None
        log_start_offset = max(self.log_start_offset_checkpoint, first.base_offset)
        recovery_point = leo if self.had_clean_shutdown else min(self.recovery_point_checkpoint, leo)
        self.epoch_cache.truncate_from_end(leo)
        self.epoch_cache.truncate_from_start(log_start_offset)
        self.epoch_cache.ensure_file()
        self._rebuild_producer_state(log_start_offset, leo)
        segments.active_segment.resize_indexes(self.config.segment_index_bytes)
        return LoadedLogOffsets(log_start_offset, recovery_point, leo, segments, self.producer_state,
                                self.epoch_cache)

    # --- segments -----------------------------------------------------------------------------------------

    def _load_segments(self) -> None:
        bases = sorted(
            off
            for name in os.listdir(self.dir)
            if name.endswith(LOG_FILE_SUFFIX) and (off := offset_from_file_name(name)) is not None
        )
        for base in bases:
            index_missing = not offset_index_file(self.dir, base).exists()
            segment = LogSegment.open(self.dir, base, self.config, self.clock, file_already_exists=True)
            needs_rebuild = index_missing or not segment.txn_index.sanity_check()
            try:
                segment.offset_index.sanity_check()
                segment.time_index.sanity_check()
            except CorruptIndexError as e:
                log.warning("%s; rebuilding", e)
                needs_rebuild = True
            self.segments.add(segment)
            if needs_rebuild:
                log.info("%s: rebuilding indexes of segment %d", self.topic_partition, base)
                self._recover_segment(segment)

    def _recover_segment(self, segment: LogSegment) -> int:
        """Recover one segment with producer state built up to its base (for correct `.txnindex`): each
        valid batch goes through the same apply_written_batch as an append (Kafka's LogLoader.recoverSegment)."""
        psm = self.producer_state
        psm.reload(0, segment.base_offset, self.clock.milliseconds())
        self._replay(psm.map_end_offset, segment.base_offset)
        now = self.clock.milliseconds()

        def on_batch(header: RecordBatchHeader, data: bytes) -> None:
            apply_written_batch(header, data if header.is_control else None, psm, self.epoch_cache,
                                segment.txn_index, now, strict=True)

        return segment.recover(on_batch)

    def _recover_unflushed(self) -> None:
        tp = self.topic_partition
        unflushed = self.segments.values(self.recovery_point_checkpoint)
        for i, segment in enumerate(unflushed):
            try:
                truncated = self._recover_segment(segment)
            except (OSError, IndexError_, ValueError) as e:
                log.error("%s: recovery of segment %d failed (%s); emptying it", tp, segment.base_offset, e)
                segment.truncate_fully()
                truncated = 1
            if truncated > 0:
                log.warning("%s: truncated %d invalid bytes from segment %d", tp, truncated, segment.base_offset)
                for later in unflushed[i + 1 :]:
                    log.warning("%s: deleting segment %d after a truncated one", tp, later.base_offset)
                    self.segments.remove(later.base_offset)
                    later.delete_if_exists()
                break

    # --- producer state ------------------------------------------------------------------------------------

    def _replay(self, from_offset: int, to_offset: int) -> None:
        """Producer state only (Kafka's loadProducersFromRecords) for batches in [from_offset, to_offset)."""
        if from_offset >= to_offset:
            return
        psm = self.producer_state
        now = self.clock.milliseconds()
        for segment in self.segments.values(from_offset, to_offset):
            mapping = segment.translate_offset(from_offset)
            if mapping is None:
                continue
            for pos, header in segment.batches(mapping.position):
                if header.base_offset >= to_offset:
                    return
                if header.base_offset < from_offset:
                    continue
                data = segment.read_bytes(pos, header.size) if header.is_control else None
                psm.update(header, data, now)

    def _rebuild_producer_state(self, log_start_offset: int, leo: int) -> None:
        psm = self.producer_state
        psm.truncate_and_reload(log_start_offset, leo, self.clock.milliseconds())
        self._replay(psm.map_end_offset, leo)
        psm.map_end_offset = leo
