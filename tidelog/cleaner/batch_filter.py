"""Decide, batch by batch, what a cleaning pass keeps (Kafka's LogCleaner filter + MemoryRecords.filterTo),
docs/STORAGE.md "Cleaning rules".

Headers decide first; records are decoded only for batches that survive the batch-level decision.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass

from tidelog.cleaner import core
from tidelog.cleaner.offset_map import SkimpyOffsetMap
from tidelog.cleaner.pacing import Pacer
from tidelog.cleaner.record_scan import scan_records
from tidelog.cleaner.record_stream import iter_batch_records, stream_inflater
from tidelog.cleaner.stats import CleanerStats
from tidelog.cleaner.transactions import CleanedTransactionMetadata
from tidelog.protocol.record_batch import (
    COMPRESSION_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    RecordBatchHeader,
    compute_crc,
    iter_batches,
    read_header,
)
from tidelog.protocol.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    Record,
    build_batch,
    compress,
)

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">qiibIhiqqqhii")
# The attribute bits an empty header keeps from the original: timestamp type, transactional, control.
_EMPTY_KEPT_ATTRIBUTES = TIMESTAMP_TYPE_MASK | 0x10 | 0x20
_SAFE_TIME = 1 << 62  # horizons the C core handles; beyond, the Python code decides (and fails as it does)


def whole_batches_end(chunk: bytes) -> int:
    """End of the complete batches at the start of `chunk` (iter_batches' rule)."""
    c_core = core.accelerator
    if c_core is not None:
        return int(c_core.whole_batches_end(chunk))
    end = 0
    for pos, header in iter_batches(chunk):
        end = pos + header.size
    return end


@dataclass(slots=True, frozen=True)
class LastRecord:
    """Kafka's LastRecord: an active producer's last data offset (None if it has none) and epoch."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass(slots=True, frozen=True)
class FilteredBatch:
    data: bytes | bytearray | memoryview  # what to write (empty: nothing)
    max_timestamp: int
    last_offset: int
    records_kept: int


def empty_header(header: RecordBatchHeader) -> bytearray:
    """A 61-byte batch with no records that keeps the original's offsets and producer fields (Kafka's RETAIN_EMPTY batches)."""
    attributes = header.attributes & _EMPTY_KEPT_ATTRIBUTES
    out = bytearray(HEADER_SIZE)
    _HEADER.pack_into(out, 0, header.base_offset, HEADER_SIZE - LOG_OVERHEAD, header.partition_leader_epoch, 2, 0,
                      attributes, header.last_offset_delta, NO_TIMESTAMP, header.max_timestamp,
                      header.producer_id, header.producer_epoch, header.base_sequence, 0)
    struct.pack_into(">I", out, CRC_OFFSET, compute_crc(out, 0, HEADER_SIZE))
    return out


class BatchFilter:
    """The filter of one cleaning round; `filter` is called for every batch of every source segment."""

    def __init__(
        self,
        offset_map: SkimpyOffsetMap,
        txn_metadata: CleanedTransactionMetadata,
        last_records_of_active_producers: dict[int, LastRecord],
        upper_bound_offset: int,
        delete_retention_ms: int,
        max_message_bytes: int,
        now: int,
        stats: CleanerStats,
        log_name: str = "",
        out_buffer: bytearray | None = None,
    ) -> None:
        self.map = offset_map
        self.txn = txn_metadata
        self.active_producers = last_records_of_active_producers
        self.upper_bound_offset = upper_bound_offset
        self.delete_retention_ms = delete_retention_ms
        self.max_message_bytes = max_message_bytes
        self.now = now
        self.stats = stats
        self.log_name = log_name
        # For the C core: (producer id, last data offset) pairs sorted by producer id, as native int64s.
        pairs = sorted((pid, last.last_data_offset) for pid, last in last_records_of_active_producers.items()
                       if last.last_data_offset is not None)
        self._active_packed = struct.pack(f"={2 * len(pairs)}q", *(v for pair in pairs for v in pair))
        self._out = bytearray() if out_buffer is None else out_buffer
        self._c_usable = -_SAFE_TIME < now + delete_retention_ms < _SAFE_TIME and -_SAFE_TIME < now < _SAFE_TIME

    def filter_chunk(self, chunk: bytes, end: int) -> tuple[bytearray, int, int, int, int]:
        """Filter the whole batches chunk[0:end]: (output buffer, bytes used, last offset, max timestamp, offset of
        the max timestamp). The C core does the data batches with the GIL released (compressed ones inflated as bounded
        streams and deflated through the codec functions, which release it too); the rest go through `filter`.
        The buffer is reused by the next call: write its first `bytes used` bytes out before that."""
        c_core = core.accelerator if self._c_usable else None
        out = bytearray()
        size = 0
        last_offset = max_ts = offset_of_max_ts = -1
        if c_core is None:
            pace = Pacer().pace
            for pos, header in iter_batches(chunk, 0, end):
                pace()
                result = self.filter(chunk, pos, header)
                if result is None:
                    continue
                out += result.data
                last_offset = result.last_offset
                if result.max_timestamp > max_ts:
                    max_ts = result.max_timestamp
                    offset_of_max_ts = result.last_offset
            return out, len(out), last_offset, max_ts, offset_of_max_ts
        # One output buffer for the cleaner thread (`out_buffer`, see `out_buffer` below): the caller writes each
        # chunk's output before the next chunk is filtered. Allocating it per chunk, then per segment group, cost a
        # zero-fill and its page faults with the GIL held (per group: a quarter of the GIL-held samples of a C-core
        # pass on 8 MiB segments, py-spy --gil).
        out = self._out
        if len(out) < 2 * end + 4096:
            out = self._out = bytearray(2 * end + 4096)
        offset_map = self.map
        stats = self.stats
        rel = 0
        while rel < end:
            (rel, status, size, last, max_ts, offset_of_max_ts, messages_read, bytes_read, messages_written,
             bytes_written, invalid, lookups, probes) = c_core.filter_chunk(
                offset_map.buffer, offset_map.slots, offset_map.latest_offset, chunk, rel, end, out, size,
                self._active_packed, self.upper_bound_offset, self.now, self.delete_retention_ms,
                self.max_message_bytes, max_ts, offset_of_max_ts, stream_inflater, compress)
            if last >= 0:
                last_offset = last
            stats.read_messages(messages_read, bytes_read)
            stats.recopy_messages(messages_written, bytes_written)
            stats.invalid_messages_read += invalid
            offset_map.lookups += lookups
            offset_map.probes += probes
            if status == core.OUT_FULL:
                out += bytes(len(out))
            elif status == core.NEED_PYTHON:
                header = read_header(chunk, rel)
                result = self.filter(chunk, rel, header)
                rel += header.size
                if result is not None:
                    n = len(result.data)
                    if size + n > len(out):
                        out += bytes(size + n)
                    out[size : size + n] = result.data
                    size += n
                    last_offset = result.last_offset
                    if result.max_timestamp > max_ts:
                        max_ts = result.max_timestamp
                        offset_of_max_ts = result.last_offset
        return out, size, last_offset, max_ts, offset_of_max_ts

    @property
    def reads_files(self) -> bool:
        """Whether the C core reads the source segments itself (`filter_file`); else the caller reads chunks."""
        return self._c_usable and core.accelerator is not None

    def filter_file(
        self, fd: int, pos: int, end: int, window: bytearray, have: int, skip: int, chunk_rest: int, limit: int,
        out_pos: int, chunk_out: int, last_offset: int, max_ts: int, offset_of_max_ts: int,
    ) -> tuple[int, int, int, int, int, list[tuple[int, int, int, int]], int, int, int, int, int]:
        """The C core cleans the `.log` behind `fd` into `self.out_buffer` (filter_file in _cleaner_core.c): (pos,
        have, chunk_rest, status, bytes read, finished chunks, out_pos, chunk_out, and the last offset, max timestamp
        and its offset of the chunk in progress)."""
        (pos, have, chunk_rest, status, read, chunks, out_pos, chunk_out, last_offset, max_ts, offset_of_max_ts,
         messages_read, bytes_read, messages_written, bytes_written, invalid, lookups,
         probes) = core.accelerator.filter_file(
            self.map.buffer, self.map.slots, self.map.latest_offset, fd, pos, end, window, have, skip, chunk_rest,
            limit, self._out, out_pos, chunk_out, self._active_packed, self.upper_bound_offset, self.now,
            self.delete_retention_ms, self.max_message_bytes, last_offset, max_ts, offset_of_max_ts,
            stream_inflater, compress)
        self.stats.read_messages(messages_read, bytes_read)
        self.stats.recopy_messages(messages_written, bytes_written)
        self.stats.invalid_messages_read += invalid
        self.map.lookups += lookups
        self.map.probes += probes
        return pos, have, chunk_rest, status, read, chunks, out_pos, chunk_out, last_offset, max_ts, offset_of_max_ts

    def ensure_out_capacity(self, size: int) -> bytearray:
        """The output buffer, grown to at least `size` bytes (its contents kept)."""
        if len(self._out) < size:
            self._out += bytes(size - len(self._out))
        return self._out

    @property
    def out_buffer(self) -> bytearray:
        """The output buffer as grown by this filter, for the next group's filter."""
        return self._out

    def _is_last_batch_of_active_producer(self, header: RecordBatchHeader) -> bool:
        last = self.active_producers.get(header.producer_id)
        if last is None:
            return False
        if last.last_data_offset is not None:
            return header.last_offset == last.last_data_offset
        return header.is_control and header.producer_epoch == last.producer_epoch

    def filter(self, buf: bytes | bytearray | memoryview, pos: int, header: RecordBatchHeader) -> FilteredBatch | None:
        """What replaces the batch at buf[pos]: None to drop it entirely."""
        batch = memoryview(buf)[pos : pos + header.size]
        if header.is_control:
            can_discard = self.txn.on_control_batch_read(header, batch)
            # Markers piggy-back on the tombstone horizon: discarded only once it has passed (KIP-534).
            discard_records = can_discard and header.has_delete_horizon and header.delete_horizon_ms <= self.now
        else:
            can_discard = self.txn.on_batch_read(header)
            discard_records = can_discard
        if header.has_producer_id and self._is_last_batch_of_active_producer(header):
            retain_empty = True
        elif header.next_offset == self.upper_bound_offset:
            # KAFKA-17076 (Kafka >= 4.0): keep the round's last batch so the log end offset is not lost.
            retain_empty = True
        elif discard_records:
            self.stats.read_messages(header.records_count, header.size)
            return None
        else:
            retain_empty = False
        marker_for_empty_txn = can_discard and header.is_control

        self.stats.read_messages(header.records_count, header.size)
        if not discard_records and self._c_usable and core.accelerator is not None:
            # the batches the C chunk loop leaves here (transactional, control, ...): records decided in C
            done = self._filter_payload(batch, header, marker_for_empty_txn, retain_empty)
            if not isinstance(done, bool):
                return done
        kept_offsets: set[int] = set()
        all_kept = True
        contains_tombstones = False
        if discard_records:
            all_kept = header.records_count == 0
        else:
            # The lean scan decides; full records are decoded only if the batch must be rebuilt. The
            # per-record decision (Kafka's shouldRetainRecord) is inlined: this loop runs for every record
            # while holding the GIL the broker's event loop needs.
            is_control = header.is_control
            latest_offset = self.map.latest_offset
            get = self.map.get
            tombstones_expired = header.has_delete_horizon and self.now >= header.delete_horizon_ms
            for offset, key, value_is_null in scan_records(batch, 0, header):
                if is_control or offset > latest_offset:
                    retain = True
                elif key is None:
                    # Keyless records cannot be compacted: Kafka drops them and counts them as invalid.
                    self.stats.invalid_message()
                    retain = False
                elif offset < get(key):
                    retain = False
                else:
                    retain = not (value_is_null and tombstones_expired)
                if retain:
                    kept_offsets.add(offset)
                    if value_is_null:
                        contains_tombstones = True
                else:
                    all_kept = False
        need_horizon = (contains_tombstones or marker_for_empty_txn) and not header.has_delete_horizon
        if kept_offsets:
            if all_kept and not need_horizon:
                self.stats.recopy_messages(len(kept_offsets), header.size)
                return FilteredBatch(batch, header.max_timestamp, header.last_offset, len(kept_offsets))
            kept = [r for r in iter_batch_records(batch, 0, header) if r.offset in kept_offsets]
            data = self._rebuild(header, kept, need_horizon)
            self.stats.recopy_messages(len(kept), len(data))
            max_ts = _HEADER.unpack_from(data, 0)[8]
            return FilteredBatch(data, max_ts, header.last_offset, len(kept))
        if retain_empty:
            data = empty_header(header)
            self.stats.recopy_messages(0, len(data))
            return FilteredBatch(data, header.max_timestamp, header.last_offset, 0)
        return None

    def _filter_payload(
        self, batch: memoryview, header: RecordBatchHeader, marker_for_empty_txn: bool, retain_empty: bool
    ) -> FilteredBatch | None | bool:
        """The record loop of `filter` in the C core (a compressed batch inflated and deflated by the codec libraries,
        which release the GIL); False when the core leaves the batch to the Python loop."""
        done = core.accelerator.filter_payload(
            self.map.buffer, self.map.slots, self.map.latest_offset, batch[HEADER_SIZE:], header.base_offset,
            header.records_count, header.base_timestamp, header.max_timestamp, header.attributes, self.now,
            self.now + self.delete_retention_ms, marker_for_empty_txn, stream_inflater)
        if done is None:
            return False
        kept, all_kept, need_horizon, invalid, lookups, probes, records, base_ts, max_ts, horizon = done
        self.stats.invalid_messages_read += invalid
        self.map.lookups += lookups
        self.map.probes += probes
        if kept:
            if all_kept and not need_horizon:
                self.stats.recopy_messages(kept, header.size)
                return FilteredBatch(batch, header.max_timestamp, header.last_offset, kept)
            data = self._assemble(header, records, kept, base_ts, max_ts, horizon)
            self.stats.recopy_messages(kept, len(data))
            return FilteredBatch(data, max_ts, header.last_offset, kept)
        if retain_empty:
            data = empty_header(header)
            self.stats.recopy_messages(0, len(data))
            return FilteredBatch(data, header.max_timestamp, header.last_offset, 0)
        return None

    def _assemble(
        self, header: RecordBatchHeader, records: bytes, count: int, base_ts: int, max_ts: int, horizon: int
    ) -> bytearray:
        """build_batch's framing around records the C core re-encoded: the batch's codec at its default level."""
        body = compress(header.compression, records, None)
        attributes = header.attributes & (COMPRESSION_MASK | TIMESTAMP_TYPE_MASK | 0x10 | 0x20)
        if horizon >= 0:
            attributes |= DELETE_HORIZON_FLAG
        size = HEADER_SIZE + len(body)
        out = bytearray(size)
        _HEADER.pack_into(out, 0, header.base_offset, size - LOG_OVERHEAD, header.partition_leader_epoch, 2, 0,
                          attributes, header.last_offset_delta, base_ts, max_ts, header.producer_id,
                          header.producer_epoch, header.base_sequence, count)
        out[HEADER_SIZE:] = body
        struct.pack_into(">I", out, CRC_OFFSET, compute_crc(out, 0, size))
        if size > self.max_message_bytes:
            log.warning("Record batch %d of %s is %d bytes after cleaning, above max.message.bytes %d",
                        header.base_offset, self.log_name, size, self.max_message_bytes)
        return out

    def _rebuild(self, header: RecordBatchHeader, kept: list[Record], need_horizon: bool) -> bytearray:
        if need_horizon:
            horizon = self.now + self.delete_retention_ms
        elif header.has_delete_horizon:
            horizon = header.delete_horizon_ms  # once set, every later rebuild keeps it
        else:
            horizon = NO_TIMESTAMP
        data = build_batch(
            kept,
            header.base_offset,
            compression=header.compression,
            compression_level=None,  # the codec's default level, not the topic's (MemoryRecords.filterTo)
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            is_transactional=header.is_transactional,
            is_control=header.is_control,
            partition_leader_epoch=header.partition_leader_epoch,
            timestamp_type=LOG_APPEND_TIME if header.is_log_append_time else CREATE_TIME,
            log_append_time=header.max_timestamp if header.is_log_append_time else NO_TIMESTAMP,
            delete_horizon_ms=horizon,
            last_offset_delta=header.last_offset_delta,
        )
        if len(data) > self.max_message_bytes:
            log.warning("Record batch %d of %s is %d bytes after cleaning, above max.message.bytes %d",
                        header.base_offset, self.log_name, len(data), self.max_message_bytes)
        return data

