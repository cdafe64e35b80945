"""One cleaning pass over one log (Kafka's Cleaner), docs/STORAGE.md "Offset map", "Cleaning rules", "Cleaner swap".

build the offset map over the dirty section -> group [0, endOffset) into size-bounded groups -> copy each group
through the batch filter into a `.cleaned` segment -> Log.replace_segments swaps it in.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelog.cleaner import core
from tidelog.cleaner.batch_filter import BatchFilter, LastRecord, whole_batches_end
from tidelog.cleaner.offset_map import SkimpyOffsetMap
from tidelog.cleaner.pacing import Pacer
from tidelog.cleaner.record_scan import scan_records
from tidelog.cleaner.record_stream import stream_inflater
from tidelog.cleaner.stats import CleanerStats, Throttler
from tidelog.cleaner.transactions import CleanedTransactionMetadata
from tidelog.clock import Clock
from tidelog.protocol.record_batch import (
    HEADER_SIZE,
    RecordBatchHeader,
    batch_size_at,
    iter_batches,
    read_header,
)
from tidelog.storage import TopicPartition
from tidelog.storage.fault_hooks import NO_FAULTS, FaultHooks, FaultPoint
from tidelog.storage.log_file_utils import (
    CLEANED_FILE_SUFFIX,
)
from tidelog.storage.log_segment import LogSegment

if TYPE_CHECKING:
    from tidelog.storage.log import Log

logger = logging.getLogger(__name__)
INT32_MAX = 0x7FFFFFFF
# The C core reads a segment itself for up to this many bytes per call (one GIL release, then the abort check and
# the throttle): per read of io_buffer_size, the GIL hand-offs of a pread and a core call cost two threads cleaning
# two logs a fifth of their CPU time (perf, 1 KiB records).
FILE_CALL_BYTES = 4 * 1024 * 1024
# A call also returns once this much output is ready, to write it: with a 4 MiB output buffer (a whole call's) the
# buffer fell out of the CPU cache, and the write's copy into the page cache took 4.5x the samples with two threads
# (perf, 1 KiB records); smaller, a mostly-kept segment (every cleaned one, each pass) returns once per chunk.
OUT_BUFFER_BYTES = 1024 * 1024


class LogCleaningAbortedError(Exception):
    """The partition's cleaning was aborted (truncation, deletion); the pass is abandoned (Kafka's
    LogCleaningAbortedException)."""


class SegmentCorruptError(Exception):
    """A batch that cannot be read even with the largest buffer: the partition becomes uncleanable."""


@dataclass(slots=True)
class LogToClean:
    """A log chosen for cleaning with its cleanable range (Kafka's LogToClean), docs/STORAGE.md "Choosing what to clean"."""

    topic_partition: TopicPartition
    log: Any
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool = False
    compaction_delay_ms: int = 0

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0



def last_records_of_active_producers(log: Log) -> dict[int, LastRecord]:
    """Kafka's UnifiedLog.lastRecordsOfActiveProducers: per non-expired producer, its last data offset."""
    return {pid: LastRecord(*value) for pid, value in log.last_records_of_active_producers().items()}


def group_segments_by_size(
    segments: list[LogSegment], max_size: int, max_index_size: int, first_uncleanable_offset: int
) -> list[list[LogSegment]]:
    """Greedy oldest-first grouping so each output segment stays within segment.bytes, segment.index.bytes and
    the int32 relative-offset range (docs/STORAGE.md "Cleaning rules")."""
    groups: list[list[LogSegment]] = []
    segs = list(segments)
    i = 0
    while i < len(segs):
        group = [segs[i]]
        log_size = segs[i].size
        index_size = segs[i].offset_index.size_in_bytes
        time_index_size = segs[i].time_index.size_in_bytes
        i += 1
        while i < len(segs):
            nxt = segs[i]
            estimated_last = segs[i + 1].base_offset - 1 if i + 1 < len(segs) else first_uncleanable_offset - 1
            if (
                log_size + nxt.size <= max_size
                and index_size + nxt.offset_index.size_in_bytes <= max_index_size
                and time_index_size + nxt.time_index.size_in_bytes <= max_index_size
                and (nxt.size == 0 or estimated_last - group[0].base_offset <= INT32_MAX)
            ):
                group.append(nxt)
                log_size += nxt.size
                index_size += nxt.offset_index.size_in_bytes
                time_index_size += nxt.time_index.size_in_bytes
                i += 1
            else:
                break
        groups.append(group)
    return groups



class Cleaner:
    """The worker of one cleaner thread. `check_done(tp)` raises LogCleaningAbortedError when the
    partition's cleaning was aborted; it is called before every chunk read."""

    def __init__(
        self,
        cleaner_id: int,
        offset_map: SkimpyOffsetMap,
        io_buffer_size: int,
        max_io_buffer_size: int,
        throttler: Throttler,
        clock: Clock,
        check_done: Callable[[TopicPartition], None],
        fault_hooks: FaultHooks = NO_FAULTS,
    ) -> None:
        self.id = cleaner_id
        self.fault_hooks = fault_hooks
        self.offset_map = offset_map
        self.io_buffer_size = max(io_buffer_size, HEADER_SIZE)
        self.max_io_buffer_size = max_io_buffer_size
        self.throttler = throttler
        self.clock = clock
        self.check_done = check_done
        self._out_buffer = bytearray()  # the batch filter's output buffer, kept for the thread's life
        self._window = bytearray(self.io_buffer_size)  # the C core's read buffer (Kafka's read buffer)

    # --- the pass ---------------------------------------------------------------------------------------

    def clean(self, cleanable: LogToClean) -> tuple[int, CleanerStats]:
        return self.do_clean(cleanable, self.clock.milliseconds())

    def do_clean(self, cleanable: LogToClean, now: int) -> tuple[int, CleanerStats]:
        """Clean the log; returns (endOffset = the new first dirty offset, stats)."""
        log = cleanable.log
        stats = CleanerStats(self.clock)
        upper_bound = cleanable.first_uncleanable_offset
        self.build_offset_map(log, cleanable.first_dirty_offset, upper_bound, self.offset_map, stats)
        end_offset = max(self.offset_map.latest_offset + 1, cleanable.first_dirty_offset)
        stats.index_done()
        txn_metadata = CleanedTransactionMetadata()
        with log.lock:
            to_clean = log.segments.values(0, end_offset)
        groups = group_segments_by_size(
            to_clean,
            log.config.segment_bytes,
            log.config.segment_index_bytes,
            upper_bound,
        )
        for group in groups:
            self.clean_segments(log, group, self.offset_map, now, stats, txn_metadata, upper_bound)
        stats.buffer_utilization = self.offset_map.utilization
        stats.collision_rate = self.offset_map.collision_rate
        self.offset_map.clear()  # hands the touched pages back: an idle cleaner holds no map memory
        stats.all_done()
        return end_offset, stats

    # --- the offset map ---------------------------------------------------------------------------------

    def build_offset_map(
        self, log: Log, start: int, end: int, offset_map: SkimpyOffsetMap, stats: CleanerStats
    ) -> None:
        """Map the latest offset of every key in [start, end); stops early when the map is full (a partial pass)."""
        offset_map.clear()
        with log.lock:
            dirty = log.segments.values(start, end)
        txn = CleanedTransactionMetadata()
        txn.add_aborted_transactions(log.collect_aborted_transactions(start, end))
        for i, segment in enumerate(dirty):
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            self.check_done(log.topic_partition)
            if self._build_offset_map_for_segment(log, segment, offset_map, start, next_start, txn, stats):
                logger.debug("Offset map for log %s is full; cleaning up to %d", log.topic_partition,
                             offset_map.latest_offset + 1)
                return

    def _build_offset_map_for_segment(
        self,
        log: Log,
        segment: LogSegment,
        offset_map: SkimpyOffsetMap,
        start_offset: int,
        next_segment_start: int,
        txn: CleanedTransactionMetadata,
        stats: CleanerStats,
    ) -> bool:
        """True when the map filled up inside this segment."""
        _, position = segment.offset_index.lookup(start_offset)
        if core.accelerator is not None:
            if self._map_segment_file(log, segment, position, offset_map, start_offset, txn, stats):
                return True
        else:
            pace = Pacer().pace
            for chunk, _chunk_pos, consumed in self._chunks(log, segment, position, stats, for_map=True):
                for rel, header in iter_batches(chunk, 0, consumed):
                    pace()
                    if self._map_batch(chunk, rel, header, offset_map, start_offset, txn, stats):
                        return True
        offset_map.update_latest_offset(next_segment_start - 1)
        return False

    def _map_segment_file(
        self,
        log: Log,
        segment: LogSegment,
        position: int,
        offset_map: SkimpyOffsetMap,
        start_offset: int,
        txn: CleanedTransactionMetadata,
        stats: CleanerStats,
    ) -> bool:
        """The C core reads the segment from `position` in the chunks `_chunks` reads and maps their data batches
        with the GIL released. It stops at a batch that needs the Python code (control, transactional or
        malformed), which is then at the window's start, and at a chunk whose first batch the window cannot hold:
        the chunk reader takes over the rest of the segment (its buffer grows, as Kafka's does, until the segment
        ends). True when the map filled up."""
        c_core = core.accelerator
        window, size = self._window, segment.size
        pos, have, skip, chunk_rest = position, 0, 0, 0  # window[:have] holds the file from pos (see map_file)
        fd = segment.dup_fd()
        try:
            while pos + skip < size:
                self.check_done(log.topic_partition)
                start = pos + skip
                (pos, have, chunk_rest, status, read_bytes, entries, latest, read, lookups,
                 probes) = c_core.map_file(
                    offset_map.buffer, offset_map.dirty, offset_map.slots, offset_map.size, offset_map.max_entries,
                    offset_map.latest_offset, fd, pos, size, window, have, skip, chunk_rest, FILE_CALL_BYTES,
                    start_offset, stream_inflater)
                skip = 0
                offset_map.absorb(entries, latest, lookups, probes)
                stats.index_messages_read(read)
                stats.index_bytes_read(pos - start)
                self.throttler.maybe_throttle(read_bytes)
                if status == core.MAP_FULL:
                    stats.index_bytes_read(chunk_rest)  # the chunk reader counts a chunk whole, where it stops too
                    return True
                if status == core.NEED_PYTHON:
                    header = read_header(window, 0)
                    batch = bytes(memoryview(window)[: header.size])
                    if self._map_batch(batch, 0, header, offset_map, start_offset, txn, stats):
                        stats.index_bytes_read(chunk_rest)
                        return True
                    stats.index_bytes_read(header.size)
                    skip = header.size
                elif status == core.PARTIAL:
                    for chunk, _, consumed in self._chunks(log, segment, pos, stats, for_map=True):
                        if self._map_chunk(chunk, consumed, offset_map, start_offset, txn, stats):
                            return True
                    return False
        finally:
            os.close(fd)
        return False

    def _map_chunk(
        self,
        chunk: bytes,
        consumed: int,
        offset_map: SkimpyOffsetMap,
        start_offset: int,
        txn: CleanedTransactionMetadata,
        stats: CleanerStats,
    ) -> bool:
        """The C core maps the data batches of chunk[:consumed]; the others go through `_map_batch`."""
        c_core = core.accelerator
        rel = 0
        while rel < consumed:
            rel, status, entries, latest, read, lookups, probes = c_core.map_chunk(
                offset_map.buffer, offset_map.dirty, offset_map.slots, offset_map.size, offset_map.max_entries,
                offset_map.latest_offset, chunk, rel, consumed, start_offset, stream_inflater)
            offset_map.absorb(entries, latest, lookups, probes)
            stats.index_messages_read(read)
            if status == core.MAP_FULL:
                return True
            if status == core.NEED_PYTHON:
                header = read_header(chunk, rel)
                if self._map_batch(chunk, rel, header, offset_map, start_offset, txn, stats):
                    return True
                rel += header.size
        return False

    def _map_batch(
        self,
        chunk: bytes,
        rel: int,
        header: RecordBatchHeader,
        offset_map: SkimpyOffsetMap,
        start_offset: int,
        txn: CleanedTransactionMetadata,
        stats: CleanerStats,
    ) -> bool:
        """Map one batch (Kafka's buildOffsetMapForSegment loop body); True when the map filled up."""
        if header.is_control:
            txn.on_control_batch_read(header, memoryview(chunk)[rel : rel + header.size])
            stats.index_messages_read(1)
        elif txn.on_batch_read(header):
            stats.index_messages_read(header.records_count)  # aborted data: nothing to map
        elif header.last_offset >= start_offset:
            c_core = core.accelerator
            if c_core is not None and header.records_count >= 0:
                body = memoryview(chunk)[rel + HEADER_SIZE : rel + header.size]
                done = c_core.map_payload(
                    offset_map.buffer, offset_map.dirty, offset_map.slots, offset_map.size, offset_map.max_entries,
                    offset_map.latest_offset, body, header.base_offset, header.records_count, start_offset,
                    header.attributes, stream_inflater)
                if done is not None:
                    status, entries, latest, read, lookups, probes = done
                    offset_map.absorb(entries, latest, lookups, probes)
                    stats.index_messages_read(read)
                    if status == core.MAP_FULL:
                        return True
                    offset_map.update_latest_offset(header.last_offset)
                    return False
            # Per-record work is kept to the scan and one put: this loop holds the GIL.
            max_entries = offset_map.max_entries
            put = offset_map.put
            read = 0
            for offset, key, _ in scan_records(chunk, rel, header):
                if key is not None and offset >= start_offset:
                    if offset_map.size >= max_entries:
                        stats.index_messages_read(read)
                        return True
                    put(key, offset)
                read += 1
            stats.index_messages_read(read)
        else:
            stats.index_messages_read(header.records_count)
        if header.last_offset >= start_offset:
            offset_map.update_latest_offset(header.last_offset)
        return False

    # --- reading a segment in chunks ----------------------------------------------------------------------

    def _chunks(
        self, log: Log, segment: LogSegment, position: int, stats: CleanerStats, for_map: bool
    ) -> Iterator[tuple[bytes, int, int]]:
        """Yield (chunk bytes, chunk file position, end of its whole batches), reading `io_buffer_size` bytes at
        a time and growing the buffer for a batch that does not fit (Kafka's Cleaner.growBuffersOrFail)."""
        buffer_size = self.io_buffer_size
        max_buffer = max(self.max_io_buffer_size, log.config.max_message_bytes)
        size = segment.size
        while position < size:
            self.check_done(log.topic_partition)
            chunk = segment.read_bytes(position, buffer_size)
            self.throttler.maybe_throttle(len(chunk))
            consumed = whole_batches_end(chunk)
            if not consumed:
                needed = batch_size_at(chunk, 0)
                if needed is None or needed < HEADER_SIZE or position + needed > size:
                    raise SegmentCorruptError(
                        f"batch at position {position} of {segment.log_path} is truncated or corrupt")
                if buffer_size >= max_buffer and needed > buffer_size:
                    # Kafka lets the buffer reach the batch's own size once it is at the topic limit, as long
                    # as the batch fits in the rest of the file.
                    max_buffer = needed
                if buffer_size >= max_buffer:
                    raise SegmentCorruptError(
                        f"batch of {needed} bytes at {position} of {segment.log_path} exceeds the buffer limit")
                buffer_size = min(max(buffer_size * 2, needed), max_buffer)
                continue
            if for_map:
                stats.index_bytes_read(consumed)
            yield chunk, position, consumed
            position += consumed

    # --- cleaning one group -------------------------------------------------------------------------------

    def clean_segments(
        self,
        log: Log,
        segments: list[LogSegment],
        offset_map: SkimpyOffsetMap,
        now: int,
        stats: CleanerStats,
        txn_metadata: CleanedTransactionMetadata,
        upper_bound_offset: int,
    ) -> None:
        """Copy the group into one `.cleaned` segment and swap it in."""
        base = segments[0].base_offset
        cleaned = log.new_cleaned_segment(base)  # docs/STORAGE.md "Cleaner swap": leftovers of an earlier attempt go first
        txn_metadata.cleaned_index = cleaned.txn_index
        try:
            batch_filter = BatchFilter(
                offset_map,
                txn_metadata,
                last_records_of_active_producers(log),
                upper_bound_offset,
                log.config.delete_retention_ms,
                log.config.max_message_bytes,
                now,
                stats,
                str(log.topic_partition),
                self._out_buffer,
            )
            for i, segment in enumerate(segments):
                upper = segments[i + 1].base_offset if i + 1 < len(segments) else segment.read_next_offset()
                txn_metadata.add_aborted_transactions(log.collect_aborted_transactions(segment.base_offset, upper))
                self._clean_into(log, segment, cleaned, batch_filter, stats)
            self._out_buffer = batch_filter.out_buffer
            cleaned.on_became_inactive_segment()
            cleaned.flush()
            # Keep the last source segment's mtime: time retention of compact,delete logs reads it.
            modified_ns = os.stat(segments[-1].log_path).st_mtime_ns
            for path in (cleaned.log_path, cleaned.offset_index.path, cleaned.time_index.path):
                os.utime(path, ns=(modified_ns, modified_ns))
            self.fault_hooks.at(FaultPoint.CLEANED, cleaned)
            logger.info("Swapping in cleaned segment %s for segment(s) %s in log %s", cleaned, segments,
                        log.topic_partition)
            log.replace_segments([cleaned], segments)
        except BaseException:
            try:
                if not cleaned.is_closed and cleaned.has_suffix(CLEANED_FILE_SUFFIX):
                    cleaned.delete_if_exists()
            except OSError:
                logger.warning("could not delete the cleaned segment %s", cleaned)
            raise

    def _clean_into(
        self, log: Log, source: LogSegment, dest: LogSegment, batch_filter: BatchFilter, stats: CleanerStats
    ) -> None:
        if batch_filter.reads_files:
            self._clean_file_into(log, source, dest, batch_filter, stats)
            return
        for chunk, _chunk_pos, consumed in self._chunks(log, source, 0, stats, for_map=False):
            self._clean_chunk_into(chunk, consumed, dest, batch_filter)

    def _clean_chunk_into(self, chunk: bytes, consumed: int, dest: LogSegment, batch_filter: BatchFilter) -> None:
        out, size, last_offset, max_ts, offset_of_max_ts = batch_filter.filter_chunk(chunk, consumed)
        if size:
            dest.append(last_offset, max_ts, offset_of_max_ts, memoryview(out)[:size])
            dest.start_writeback()
            self.throttler.maybe_throttle(size)

    def _clean_file_into(
        self, log: Log, source: LogSegment, dest: LogSegment, batch_filter: BatchFilter, stats: CleanerStats
    ) -> None:
        """The C core reads `source` in the chunks `_chunks` reads and writes what it keeps of each into the filter's
        output buffer, which goes to `dest` a chunk per `append` (as `_clean_chunk_into` appends, and Kafka's
        cleanInto) after every call. The batches it leaves to Python are filtered by `filter` in their place; a
        chunk whose first batch the window cannot hold hands the rest of the segment to the chunk reader (as in
        `_map_segment_file`)."""
        window, size = self._window, source.size
        out = batch_filter.ensure_out_capacity(len(window) + 64)  # the core needs room for a batch + 64 bytes
        full_out = max(OUT_BUFFER_BYTES, len(window) + 64)
        pos, have, skip, chunk_rest = 0, 0, 0, 0  # window[:have] holds the file from pos (see filter_file)
        written = chunk_out = 0  # out[:chunk_out]: finished chunks (appended after each call); then the chunk in progress
        last_offset = max_ts = offset_of_max_ts = -1  # of the chunk in progress
        fd = source.dup_fd()
        try:
            while pos + skip < size:
                self.check_done(log.topic_partition)
                (pos, have, chunk_rest, status, read, chunks, written, chunk_out, last_offset, max_ts,
                 offset_of_max_ts) = batch_filter.filter_file(
                    fd, pos, size, window, have, skip, chunk_rest, FILE_CALL_BYTES, written, chunk_out, last_offset,
                    max_ts, offset_of_max_ts)
                skip = 0
                self.throttler.maybe_throttle(read)
                if chunks:
                    dest.append_chunks(out, chunks)
                    dest.start_writeback()  # the disk works while the pass goes on; the fsync waits for less
                    self.throttler.maybe_throttle(chunks[-1][0])
                freed = chunk_out
                if freed:  # keep only the chunk in progress
                    out[: written - freed] = out[freed:written]
                    written, chunk_out = written - freed, 0
                if status == core.OUT_FULL:
                    # Grown to OUT_BUFFER_BYTES, so later calls return less often; beyond it only when the chunk in
                    # progress alone fills the buffer (a rebuilt batch that grew).
                    if not freed:
                        out = batch_filter.ensure_out_capacity(2 * len(out))
                    elif len(out) < full_out:
                        out = batch_filter.ensure_out_capacity(min(2 * len(out), full_out))
                elif status == core.NEED_PYTHON:
                    header = read_header(window, 0)
                    result = batch_filter.filter(bytes(memoryview(window)[: header.size]), 0, header)
                    skip = header.size
                    if result is not None and len(result.data):
                        out = batch_filter.ensure_out_capacity(written + len(result.data))
                        out[written : written + len(result.data)] = result.data
                        written += len(result.data)
                        last_offset = result.last_offset
                        if result.max_timestamp > max_ts:
                            max_ts, offset_of_max_ts = result.max_timestamp, result.last_offset
                elif status == core.PARTIAL:  # at a chunk's start: nothing is in progress
                    for chunk, _, consumed in self._chunks(log, source, pos, stats, for_map=False):
                        self._clean_chunk_into(chunk, consumed, dest, batch_filter)
                    return
            if written:  # the segment ended with a batch Python filtered: that ends its chunk too
                dest.append(last_offset, max_ts, offset_of_max_ts, memoryview(out)[:written])
                self.throttler.maybe_throttle(written)
        finally:
            os.close(fd)

