"""One segment of a log: `.log` + `.index` + `.timeindex` [+ `.txnindex`] (Kafka's LogSegment).

Batches arrive already validated, with offsets assigned; the segment writes them, keeps the sparse
indexes (docs/STORAGE.md "Segments and indexes"), answers offset -> position translation and reads, decides when to
roll (docs/STORAGE.md "Rolling"), and recovers itself after an unclean shutdown ("Recovery").
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tidelog.clock import Clock
from tidelog.config.log_config import LogConfig
from tidelog.protocol.file_records import FileRecords
from tidelog.protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    RecordBatchHeader,
    compute_crc,
    read_header,
)
from tidelog.storage import file_space, writeback
from tidelog.storage.log_file_utils import (
    DELETED_FILE_SUFFIX,
    log_file,
    offset_index_file,
    time_index_file,
    transaction_index_file,
)
from tidelog.storage.offset_index import OffsetIndex
from tidelog.storage.time_index import NO_TIMESTAMP, TimeIndex
from tidelog.storage.transaction_index import TransactionIndex

INT32_MAX = 0x7FFFFFFF
# Kafka's Records.HEADER_SIZE_UP_TO_MAGIC: with fewer bytes left the tail is a cut-off batch.
HEADER_SIZE_UP_TO_MAGIC = 17
# Kafka's MIN_RECORD_OVERHEAD (v0 record): a smaller Length is corruption, not a torn write.
MIN_RECORD_OVERHEAD = 14
_READ_CHUNK = 64 * 1024
# Disk blocks are reserved ahead of appends once a segment holds RESERVE_AFTER_BYTES (a quiet or test partition
# never reserves), RESERVE_STEP_BYTES at a time at most (file_space: ext4 then skips per-page delayed allocation).
RESERVE_AFTER_BYTES = 1 << 20
RESERVE_STEP_BYTES = 8 << 20
_NEVER = 1 << 62

# Fetch reads return a FileRecords slice (protocol/file_records.py) that the connection sends with os.sendfile,
# as Kafka's FileRecords.transferTo does; other readers copy bytes out of the page cache with os.pread. The
# `.log` is never mmapped (as in Kafka, which maps only the index files): mapped segment pages a reader touched
# stay in the broker's RSS, while pread and sendfile leave them to the kernel's page cache, shared and
# reclaimable (README, "Memory").


class SegmentClosedError(Exception):
    """The segment's file was closed (deleted, swapped out, its log closed) before or while it was read."""


@dataclass(frozen=True, slots=True)
class LogOffsetPosition:
    """Where a batch sits: its last offset, its start position and its size (Kafka's LogOffsetPosition)."""

    offset: int
    position: int
    size: int


@dataclass(frozen=True, slots=True)
class RollParams:
    max_segment_ms: int
    max_segment_bytes: int
    max_timestamp_in_messages: int
    max_offset_in_messages: int
    messages_size: int
    now: int


class CorruptRecordError(Exception):
    """A batch that fails validation during recovery."""


def random_segment_jitter(config: LogConfig) -> int:
    """Kafka's LogConfig.randomSegmentJitter: drawn once per segment, in [0, min(jitter, segment.ms))."""
    if config.segment_jitter_ms <= 0:
        return 0
    return random.randrange(min(config.segment_jitter_ms, config.segment_ms))


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        log_fd: int,
        log_path: Path,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        txn_index: TransactionIndex,
        index_interval_bytes: int,
        roll_jitter_ms: int,
        clock: Clock,
    ) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self._fd = log_fd
        self._fd_lock = threading.Lock()  # dup_fd() vs closing _fd: a slice never dups a closed or reused number
        self.log_path = log_path
        self.offset_index = offset_index
        self.time_index = time_index
        self.txn_index = txn_index
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self._clock = clock
        self._size = os.fstat(log_fd).st_size
        self.created = clock.milliseconds()
        self.bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        self._writeback_from = self._size  # start_writeback: where the bytes not yet queued for writeback begin
        # Where the disk blocks reserved past the end stop (file_space.reserve): 0 none, _NEVER not on this file.
        self._reserved_end = 0
        # (largest timestamp, last offset of the batch holding it); starts from the time index's last entry.
        last_ts, last_off = time_index.last_entry
        self.max_timestamp_so_far = last_ts
        self.offset_of_max_timestamp_so_far = last_off

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        clock: Clock,
        file_already_exists: bool = False,
        preallocate: bool = False,
        file_suffix: str = "",
        roll_jitter_ms: int = 0,
    ) -> LogSegment:
        """Open (or create) the segment at `base_offset`. `file_suffix` ('.cleaned', '.swap') is appended
        to every file name; the cleaner creates its output segments with file_suffix='.cleaned'."""
        directory = Path(directory)
        path = log_file(directory, base_offset, file_suffix)
        flags = os.O_RDWR | os.O_CREAT
        fd = os.open(path, flags, 0o644)
        try:
            if preallocate and not file_already_exists and os.fstat(fd).st_size == 0:
                # Like Kafka's RandomAccessFile.setLength: the file gets its full length (sparse).
                os.ftruncate(fd, config.segment_bytes)
                size_hint = 0
            else:
                size_hint = None
            offset_index = OffsetIndex(
                offset_index_file(directory, base_offset, file_suffix), base_offset, config.segment_index_bytes
            )
            time_index = TimeIndex(
                time_index_file(directory, base_offset, file_suffix), base_offset, config.segment_index_bytes
            )
        except BaseException:
            os.close(fd)
            raise
        txn_index = TransactionIndex(transaction_index_file(directory, base_offset, file_suffix), base_offset)
        segment = cls(
            directory,
            base_offset,
            fd,
            path,
            offset_index,
            time_index,
            txn_index,
            config.index_interval_bytes,
            roll_jitter_ms,
            clock,
        )
        if size_hint is not None:
            segment._size = size_hint
        return segment

    # --- basic properties --------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Bytes of valid batches in the `.log` (what readers may see)."""
        return self._size

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size}, path={self.log_path.name})"

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    @property
    def largest_timestamp(self) -> int:
        """Largest record timestamp, or the `.log` mtime when the segment has none (retention uses this)."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return self.last_modified

    @property
    def last_modified(self) -> int:
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    # --- reading the .log --------------------------------------------------------------------------------

    def _pread(self, size: int, position: int) -> bytes:
        """os.pread of the `.log` through the segment's own fd, under its lock: a segment another thread closed
        meanwhile (a deleted log, retention's delayed delete while the cleaner reads it) raises
        SegmentClosedError, never reads whatever file has since been given the same fd number."""
        with self._fd_lock:
            if self._fd < 0:
                raise SegmentClosedError(str(self.log_path))
            return os.pread(self._fd, size, position)

    def read_bytes(self, position: int, size: int) -> bytes:
        """Raw bytes [position, position+size) clipped to the valid size."""
        size = max(0, min(size, self._size - position))
        if size == 0:
            return b""
        out = self._pread(size, position)
        while len(out) < size:  # pread may return short on some filesystems
            more = self._pread(size - len(out), position + len(out))
            if not more:
                break
            out += more
        return out

    def batches(
        self, start_pos: int = 0, end_pos: int | None = None, fd: int | None = None
    ) -> Iterator[tuple[int, RecordBatchHeader]]:
        """Yield (position, header) for each complete batch from `start_pos` (a batch boundary).

        Used by the cleaner and by retention: headers only, read in 64 KiB chunks, CRCs not checked. `fd`:
        read through this descriptor of the `.log` (a fetch slice's own) instead of the segment's."""
        end = self._size if end_pos is None else min(end_pos, self._size)
        pos = start_pos
        buf = b""
        buf_start = pos
        while end - pos >= HEADER_SIZE:
            off = pos - buf_start
            if off < 0 or len(buf) - off < HEADER_SIZE:
                chunk = min(_READ_CHUNK, end - pos)
                buf = self._pread(chunk, pos) if fd is None else os.pread(fd, chunk, pos)
                buf_start, off = pos, 0
                if len(buf) < HEADER_SIZE:
                    return
            header = read_header(buf, off)
            if header.length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > end:
                return
            yield pos, header
            pos += header.size

    def translate_offset(
        self, offset: int, starting_file_position: int = 0, fd: int | None = None
    ) -> LogOffsetPosition | None:
        """The first batch whose last offset is >= `offset` (index lookup, then a scan), or None. `fd`: read
        through this descriptor of the `.log` instead of the segment's own."""
        _, position = self.offset_index.lookup(offset)
        for pos, header in self.batches(max(position, starting_file_position), fd=fd):
            if header.last_offset >= offset:
                return LogOffsetPosition(header.last_offset, pos, header.size)
        return None

    def read(
        self, start_offset: int, max_size: int, max_position: int | None = None, min_one_message: bool = False
    ) -> bytes | None:
        """Raw slice starting at the batch holding `start_offset`; None when no batch here reaches it.

        Up to min(max_position - start, max_size) bytes; with min_one_message the first batch is returned
        whole even when it exceeds max_size (Kafka's LogSegment.read). The slice is a copy (os.pread)."""
        found = self._read_range(start_offset, max_size, max_position, min_one_message, self._fd)
        if found is None:
            return None
        position, size = found
        return self.read_bytes(position, size) if size > 0 else b""

    def read_slice(
        self, start_offset: int, max_size: int, max_position: int | None = None, min_one_message: bool = False
    ) -> FileRecords | None:
        """`read()` as a FileRecords slice with its own fd (the Fetch path: sent with sendfile, never copied
        into the broker). An empty range is a slice of size 0. Raises SegmentClosedError if the segment's
        file is already closed; the offset lookup itself reads through the slice's fd."""
        fd = self.dup_fd()
        try:
            found = self._read_range(start_offset, max_size, max_position, min_one_message, fd)
        except BaseException:
            os.close(fd)
            raise
        if found is None:
            os.close(fd)
            return None
        position, size = found
        return FileRecords(fd, position, max(0, size), self.base_offset)

    def dup_fd(self) -> int:
        """A new descriptor of this segment's `.log` (the caller closes it); SegmentClosedError once closed."""
        with self._fd_lock:
            if self._fd < 0:
                raise SegmentClosedError(str(self.log_path))
            return os.dup(self._fd)

    def _read_range(
        self, start_offset: int, max_size: int, max_position: int | None, min_one_message: bool, fd: int
    ) -> tuple[int, int] | None:
        """(position, size) of what read() returns (size <= 0: nothing), or None when no batch reaches it."""
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size}")
        start = self.translate_offset(start_offset, fd=fd)
        if start is None:
            return None
        adjusted_max_size = max(max_size, start.size) if min_one_message else max_size
        if adjusted_max_size == 0:
            return start.position, 0
        limit = self._size if max_position is None else min(max_position, self._size)
        fetch_size = min(limit - start.position, adjusted_max_size)
        return start.position, min(fetch_size, self._size - start.position)

    def read_next_offset(self) -> int:
        """The offset after the last batch, or the base offset for an empty segment."""
        _, position = self.offset_index.lookup(self.offset_index.last_offset)
        next_offset = self.base_offset
        for _, header in self.batches(position):
            next_offset = header.next_offset
        return next_offset

    def first_batch(self) -> RecordBatchHeader | None:
        for _, header in self.batches(0):
            return header
        return None

    # --- appending ----------------------------------------------------------------------------------------

    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        shallow_offset_of_max_timestamp: int,
        records: bytes | bytearray | memoryview,
        sync: bool = False,
    ) -> None:
        """Write validated batches at the end, then maintain the sparse indexes (docs/STORAGE.md "Segments and indexes").

        `shallow_offset_of_max_timestamp` is the last offset of the batch holding `largest_timestamp`.
        With `sync` the `.log` is fdatasync'ed before returning (flush_on_append). On OSError the segment
        is put back exactly as it was (no partial batch stays) and the error is re-raised."""
        size = len(records)
        if size == 0:
            return
        self._check_offset(largest_offset)
        physical_position = self._size
        saved = self._index_state()
        try:
            self._write(records, physical_position, size)
            if sync:
                os.fdatasync(self._fd)
            self._index_append(largest_offset, largest_timestamp, shallow_offset_of_max_timestamp, physical_position,
                               size)
        except Exception:  # OSError above all; anything else is rolled back just the same
            self._roll_back(saved, physical_position)
            raise
        self._size = physical_position + size

    def append_chunks(self, records: bytearray, chunks: list[tuple[int, int, int, int]]) -> None:
        """Append records[:end of the last chunk] with one write, indexed as one `append` per chunk: each chunk is
        (end in records, largest offset, largest timestamp, shallow offset of that timestamp). The cleaner appends
        what it kept of each chunk it read, as Kafka's cleanInto does (where the sparse index gets its entries
        depends on those appends)."""
        if not chunks:
            return
        size = chunks[-1][0]
        for _, largest_offset, _, _ in chunks:
            self._check_offset(largest_offset)
        physical_position = self._size
        saved = self._index_state()
        try:
            self._write(memoryview(records)[:size], physical_position, size)
            start = 0
            for end, largest_offset, largest_timestamp, shallow_offset in chunks:
                self._index_append(largest_offset, largest_timestamp, shallow_offset, physical_position + start,
                                   end - start)
                start = end
        except Exception:
            self._roll_back(saved, physical_position)
            raise
        self._size = physical_position + size

    def start_writeback(self, min_bytes: int = 1 << 20) -> None:
        """Queue what was appended since the last call for writeback once it is `min_bytes` or more, without
        waiting (storage/writeback.py): the cleaner's `.cleaned` segments, whose fsync then waits only for the
        tail."""
        start = self._writeback_from
        if self._size - start >= min_bytes:
            writeback.start(self._fd, start, self._size - start)
            self._writeback_from = self._size

    def _check_offset(self, largest_offset: int) -> None:
        if not 0 <= largest_offset - self.base_offset <= INT32_MAX:
            raise ValueError(f"offset {largest_offset} cannot be stored in segment {self.base_offset}")

    def _write(self, records: bytes | bytearray | memoryview, physical_position: int, size: int) -> None:
        end = physical_position + size
        if end > self._reserved_end and physical_position >= RESERVE_AFTER_BYTES:
            self._reserve_ahead(physical_position, end)
        written = os.pwrite(self._fd, records, physical_position)  # all of it, but for a short write:
        if written < size:
            view = memoryview(records).cast("B")
            while written < size:
                written += os.pwrite(self._fd, view[written:], physical_position + written)

    def _index_append(
        self, largest_offset: int, largest_timestamp: int, shallow_offset_of_max_timestamp: int,
        physical_position: int, size: int,
    ) -> None:
        """Kafka's LogSegment.append after the write: at most one index entry per append."""
        if physical_position == 0:
            self._rolling_based_timestamp = largest_timestamp
        if largest_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = largest_timestamp
            self.offset_of_max_timestamp_so_far = shallow_offset_of_max_timestamp
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(largest_offset, physical_position)
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size

    def _index_state(self) -> tuple[int, int, int, int | None, int, int]:
        return (
            self.bytes_since_last_index_entry,
            self.max_timestamp_so_far,
            self.offset_of_max_timestamp_so_far,
            self._rolling_based_timestamp,
            self.offset_index.entries,
            self.time_index.entries,
        )

    def _roll_back(self, saved: tuple[int, int, int, int | None, int, int], physical_position: int) -> None:
        """Put the segment back as it was before a failed append: no partial batch stays."""
        (
            self.bytes_since_last_index_entry,
            self.max_timestamp_so_far,
            self.offset_of_max_timestamp_so_far,
            self._rolling_based_timestamp,
            off_entries,
            time_entries,
        ) = saved
        self.offset_index.truncate_to_entries(off_entries)
        self.time_index.truncate_to_entries(time_entries)
        try:
            os.ftruncate(self._fd, physical_position)  # frees any reservation too: ask again next time
            self._reserved_end = 0
        except OSError:
            pass  # the bytes beyond _size are invisible; the next append overwrites them

    def _reserve_ahead(self, position: int, end: int) -> None:
        """Reserve the disk blocks of this append and of up to RESERVE_STEP_BYTES after it (never more than the
        segment already holds, so a slow partition reserves little), keeping the file's size (file_space)."""
        ahead = min(RESERVE_STEP_BYTES, position)
        if file_space.reserve(self._fd, position, end - position + ahead):
            self._reserved_end = end + ahead
        else:
            self._reserved_end = _NEVER  # unsupported here, or the disk is full: plain appends (which may fail)

    # --- rolling -----------------------------------------------------------------------------------------

    def _load_first_batch_timestamp(self) -> None:
        if self._rolling_based_timestamp is None and self._size > 0:
            first = self.first_batch()
            if first is not None:
                self._rolling_based_timestamp = first.max_timestamp

    def first_batch_timestamp(self) -> int:
        """The first batch's MaxTimestamp, -1 for an empty segment (Kafka's LogSegment.getFirstBatchTimestamp)."""
        self._load_first_batch_timestamp()
        return self._rolling_based_timestamp if self._rolling_based_timestamp is not None else NO_TIMESTAMP

    def time_waited_for_roll(self, now: int, message_timestamp: int) -> int:
        """Time since the first batch's MaxTimestamp (record time), else since creation (wall clock)."""
        if self._rolling_based_timestamp is None:
            self._load_first_batch_timestamp()
        if self._rolling_based_timestamp is not None and self._rolling_based_timestamp >= 0:
            return message_timestamp - self._rolling_based_timestamp
        return now - self.created

    def should_roll(self, params: RollParams) -> bool:
        """The roll conditions of docs/STORAGE.md "Rolling" (Kafka's LogSegment.shouldRoll)."""
        return self.should_roll_for(params.messages_size, params.max_timestamp_in_messages,
                                    params.max_offset_in_messages, params.now, params.max_segment_ms,
                                    params.max_segment_bytes)

    def should_roll_for(self, messages_size: int, max_timestamp: int, max_offset: int, now: int,
                        max_segment_ms: int, max_segment_bytes: int) -> bool:
        """should_roll without a RollParams (the append path: one call, no object per append)."""
        size = self._size
        if size > 0:  # time_waited_for_roll, inline: this runs for every append
            if self._rolling_based_timestamp is None:
                self._load_first_batch_timestamp()
            first = self._rolling_based_timestamp
            waited = max_timestamp - first if first is not None and first >= 0 else now - self.created
            if waited > max_segment_ms - self.roll_jitter_ms:
                return True
        return (
            size > max_segment_bytes - messages_size
            or self.offset_index.is_full()
            or self.time_index.is_full()
            or not 0 <= max_offset - self.base_offset <= INT32_MAX
        )

    def on_became_inactive_segment(self) -> None:
        """At roll: write the final time-index entry and trim indexes (and a preallocated `.log`)."""
        self.time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
        )
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._trim_log()

    def _trim_log(self) -> None:
        """Cut the `.log` to its valid size: what Kafka's preallocation added, and blocks reserved past the end."""
        if self._reserved_end or os.fstat(self._fd).st_size != self._size:
            os.ftruncate(self._fd, self._size)
            self._reserved_end = 0

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    # --- recovery / truncation ---------------------------------------------------------------------------

    def recover(self, on_batch: Callable[[RecordBatchHeader, bytes], None] | None = None) -> int:
        """Rebuild the indexes from the `.log`, stopping at the first invalid batch and truncating there.

        `on_batch(header, batch_bytes)` is called for every valid batch (producer state, leader epochs,
        `.txnindex`). Returns the number of bytes truncated."""
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        file_size = os.fstat(self._fd).st_size
        self._size = file_size
        self._writeback_from = min(self._writeback_from, self._size)
        valid_bytes = 0
        last_index_entry = 0
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = self.base_offset
        self._rolling_based_timestamp = None
        while True:
            batch = self._read_valid_batch(valid_bytes, file_size)
            if batch is None:
                break
            header, data = batch
            if not self.can_convert_to_relative_offset(header.last_offset):
                break  # only pre-v2 data can do this in Kafka (it splits the segment); treat as the end
            if header.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = header.max_timestamp
                self.offset_of_max_timestamp_so_far = header.last_offset
            if valid_bytes - last_index_entry > self.index_interval_bytes:
                # A full index (config shrunk since the segment was written) just stays sparser.
                if not self.offset_index.is_full():
                    self.offset_index.append(header.last_offset, valid_bytes)
                if not self.time_index.is_full():
                    self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
                last_index_entry = valid_bytes
            if on_batch is not None:
                on_batch(header, data)
            valid_bytes += header.size
        truncated = file_size - valid_bytes
        if truncated > 0 or file_space.blocks_past_end(self._fd, valid_bytes):  # a crash can leave reservations
            os.ftruncate(self._fd, valid_bytes)
        self._reserved_end = 0
        self._size = valid_bytes
        self._writeback_from = min(self._writeback_from, self._size)
        self.bytes_since_last_index_entry = valid_bytes - last_index_entry if valid_bytes else 0
        self.offset_index.trim_to_valid_size()
        self.time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
        )
        self.time_index.trim_to_valid_size()
        return truncated

    def _read_valid_batch(self, pos: int, end: int) -> tuple[RecordBatchHeader, bytes] | None:
        """The batch at `pos` if it is complete and valid (Kafka's FileLogInputStream + ensureValid)."""
        if end - pos < HEADER_SIZE_UP_TO_MAGIC:
            return None
        head = self._pread(LOG_OVERHEAD, pos)
        if len(head) < LOG_OVERHEAD:
            return None
        length = int.from_bytes(head[8:12], "big", signed=True)
        if length < MIN_RECORD_OVERHEAD:
            return None
        size = length + LOG_OVERHEAD
        if pos + size > end or size < HEADER_SIZE:
            return None
        data = self.read_bytes_unchecked(pos, size)
        if len(data) < size:
            return None
        header = read_header(data, 0)
        if header.magic != 2 or compute_crc(data, 0, size) != header.crc:
            return None
        return header, data

    def read_bytes_unchecked(self, position: int, size: int) -> bytes:
        """Like read_bytes but not clipped to the valid size (recovery reads past it)."""
        return self._pread(size, position)

    def truncate_to(self, offset: int) -> int:
        """Cut the `.log` at the start of the batch holding `offset` (so offsets >= offset are gone) and
        drop index entries from there (Kafka's LogSegment.truncateTo). Returns bytes removed."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        if mapping is None:
            return 0
        removed = self._size - mapping.position
        os.ftruncate(self._fd, mapping.position)  # also frees blocks reserved past the end
        self._size = mapping.position
        self._writeback_from = min(self._writeback_from, self._size)
        self._reserved_end = 0
        if self._size == 0:
            self.created = self._clock.milliseconds()
            self._rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        last_ts, last_off = self.time_index.last_entry
        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = last_ts, last_off
        return removed

    def truncate_fully(self) -> None:
        """Empty the segment and its indexes whatever their state (recovery of an unreadable segment)."""
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        os.ftruncate(self._fd, 0)
        self._size = 0
        self._writeback_from = min(self._writeback_from, self._size)
        self._reserved_end = 0
        self.created = self._clock.milliseconds()
        self._rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = NO_TIMESTAMP, self.base_offset

    # --- files -------------------------------------------------------------------------------------------

    def flush(self) -> None:
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Clean close: final time-index entry, trimmed indexes and `.log`."""
        if self._fd < 0:
            return
        if self.max_timestamp_so_far >= 0:
            self.time_index.maybe_append(
                self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
            )
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        self._trim_log()
        with self._fd_lock:
            os.close(self._fd)
            self._fd = -1

    def close_handlers(self) -> None:
        """Release file handles without trimming (used after a failure)."""
        self.offset_index.close_handler()
        self.time_index.close_handler()
        self.txn_index.close()
        with self._fd_lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    @property
    def is_closed(self) -> bool:
        return self._fd < 0

    def _files(self) -> list[tuple[Path, Callable[[Path], None]]]:
        return [
            (self.log_path, self._rename_log),
            (self.offset_index.path, self.offset_index.rename_to),
            (self.time_index.path, self.time_index.rename_to),
            (self.txn_index.path, self.txn_index.rename_to),
        ]

    def _rename_log(self, path: Path) -> None:
        os.replace(self.log_path, path)
        self.log_path = path

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file of the segment from `<name><old_suffix>` to `<name><new_suffix>`."""
        for path, rename in self._files():
            name = path.name
            if old_suffix and not name.endswith(old_suffix):
                raise ValueError(f"{name} does not end with {old_suffix}")
            base = name[: len(name) - len(old_suffix)] if old_suffix else name
            rename(path.with_name(base + new_suffix))  # a missing .txnindex only changes its path

    def has_suffix(self, suffix: str) -> bool:
        return self.log_path.name.endswith(suffix)

    def rename_to_deleted(self) -> None:
        self.change_file_suffixes("", DELETED_FILE_SUFFIX)

    def delete_if_exists(self) -> None:
        """Close and unlink all files (whatever their current suffix)."""
        self.close_handlers()
        for path, _ in self._files():
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
