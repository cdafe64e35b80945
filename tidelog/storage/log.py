"""A partition's log (Kafka's UnifiedLog + LocalLog): segments, offsets, appends, reads, roll, flush,
and the primitives retention and the cleaner build on.

Locking: `lock` (an RLock) is held for appends, for changes to the segment list (roll, swap, delete)
and while a read picks its segments. Appends and reads run on the event-loop thread; the cleaner and
retention call in from worker threads.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import struct
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tidelog.clock import Clock
from tidelog.config.log_config import LogConfig
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.file_records import FileRecords
from tidelog.protocol.record_batch import HEADER_SIZE, iter_batches, read_header
from tidelog.protocol.records import Record, build_batch, iter_records
from tidelog.storage import TopicPartition
from tidelog.storage.batch_effects import apply_written_batch
from tidelog.storage.fault_hooks import NO_FAULTS, FaultHooks, FaultPoint
from tidelog.storage.leader_epoch import LeaderEpochFileCache
from tidelog.storage.log_file_utils import (
    CLEANED_FILE_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_FILE_SUFFIX,
    filename_prefix_from_offset,
    fsync_dir,
)
from tidelog.storage.log_loader import LoadedLogOffsets, LogLoader
from tidelog.storage.log_segment import LogSegment, SegmentClosedError, random_segment_jitter
from tidelog.storage.log_segments import LogSegments
from tidelog.storage.log_validator import RecordCheck, ValidationResult, validate_records
from tidelog.storage.producer_state import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    ProducerStateManager,
    read_control_record,
)
from tidelog.storage.scheduler import Scheduler
from tidelog.storage.transaction_index import AbortedTxn

if TYPE_CHECKING:
    from tidelog.protocol.record_batch import RecordBatchHeader

log = logging.getLogger(__name__)

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


_READ_RETRIES = 3  # read_slice: segment lookups retried when the segment found was closed meanwhile
_CONTROL_KEY = struct.Struct(">hh")  # version 0, type (ControlRecordType ABORT 0 / COMMIT 1)
_CONTROL_VALUE = struct.Struct(">hi")  # version 0, coordinator epoch (EndTransactionMarker)
_PRODUCER_ID = struct.Struct(">q")
_PRODUCER_ID_OFFSET = 43  # in the batch header: a batch without a producer id cannot be a duplicate


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    """One producer's state on a partition (DescribeProducers' ProducerState)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1: no open transaction


@dataclass(slots=True)
class LogAppendInfo:
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless LogAppendTime
    log_start_offset: int
    duplicate: bool = False
    # Set by append_as_leader(defer_flush=True) when the flush policy wants this append fsynced before it
    # is acknowledged: the caller runs `flush_appended(info)` on a worker, then `expose_flushed(info)`.
    flush_required: bool = False


def _storage_error(e: BaseException) -> KafkaError:
    return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"I/O error in log storage: {e}")


class Log:
    def __init__(
        self,
        directory: Path,
        topic_partition: TopicPartition,
        config: LogConfig,
        clock: Clock,
        topic_id: bytes,
        scheduler: Scheduler | None = None,
        producer_id_expiration_ms: int = 86_400_000,
        flush_on_append: bool = False,
        flush_executor: concurrent.futures.Executor | None = None,
        fault_hooks: FaultHooks = NO_FAULTS,
        loaded: LoadedLogOffsets | None = None,
    ) -> None:
        """Use `Log.load()` (or LogManager) to open a log: it passes what LogLoader found as `loaded`;
        without it the log is empty state."""
        self.fault_hooks = fault_hooks
        self.dir = Path(directory)
        self.topic_partition = topic_partition
        self.config = config
        self.clock = clock
        self.topic_id = topic_id
        self.scheduler = scheduler or Scheduler(clock)
        self.flush_on_append = flush_on_append
        self._flush_executor = flush_executor
        self.lock = threading.RLock()
        if loaded is None:
            loaded = LoadedLogOffsets(0, 0, 0, LogSegments(), ProducerStateManager(self.dir, producer_id_expiration_ms),
                                      LeaderEpochFileCache(self.dir))
        self.segments = loaded.segments
        self.leader_epoch_cache = loaded.leader_epoch_cache
        self.producer_state_manager = loaded.producer_state_manager
        self.log_start_offset = loaded.log_start_offset
        self.recovery_point = loaded.recovery_point
        # HW from replication-offset-checkpoint is clamped to [log start, LEO]; with a single replica the
        # leader raises it to LEO at once (Kafka's Partition.maybeIncrementLeaderHW), so it starts at LEO.
        self.high_watermark = loaded.next_offset
        self.leader_epoch = 0
        self._next_offset = loaded.next_offset
        self._unflushed_messages = 0
        self._last_flush_ms = clock.milliseconds()
        self._listeners: list[Callable[[Log], None]] = []
        self._unsynced_files: list[Path] = []
        self.on_log_start_offset_changed: Callable[[Log], None] | None = None
        self.closed = False

    # --- loading ---------------------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        directory: Path,
        topic_partition: TopicPartition,
        config: LogConfig,
        clock: Clock,
        topic_id: bytes,
        had_clean_shutdown: bool = True,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int | None = None,
        **kwargs: object,
    ) -> Log:
        """Open a partition directory (creating it if needed), recovering after an unclean shutdown
        (docs/STORAGE.md "Recovery"). `recovery_point`/`log_start_offset`/`high_watermark` come from the
        log-dir checkpoints; the HW checkpoint is moot with one replica (see __init__)."""
        del high_watermark
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        expiration = kwargs.pop("producer_id_expiration_ms", 86_400_000)
        assert isinstance(expiration, int)
        loaded = LogLoader(
            path,
            topic_partition,
            config,
            clock,
            ProducerStateManager(path, expiration),
            LeaderEpochFileCache(path),
            had_clean_shutdown,
            recovery_point,
            log_start_offset,
        ).load()
        return cls(path, topic_partition, config, clock, topic_id, producer_id_expiration_ms=expiration,
                   loaded=loaded, **kwargs)  # type: ignore[arg-type]

    # --- offsets ---------------------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self.producer_state_manager.first_unstable_offset()
        if first_unstable is None:
            return self.high_watermark
        return min(first_unstable, self.high_watermark)

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction, or None (Kafka's UnifiedLog.firstUnstableOffset)."""
        with self.lock:
            return self.producer_state_manager.first_unstable_offset()

    def active_producers(self) -> list[ActiveProducer]:
        """Every producer this partition tracks, for DescribeProducers (Kafka's UnifiedLog.activeProducers)."""
        with self.lock:
            return [
                ActiveProducer(
                    producer_id=e.producer_id,
                    producer_epoch=e.producer_epoch,
                    last_sequence=e.last_seq,
                    last_timestamp=e.last_timestamp,
                    coordinator_epoch=e.coordinator_epoch,
                    current_txn_start_offset=e.current_txn_first_offset,
                )
                for e in self.producer_state_manager.producers.values()
            ]

    @property
    def active_segment(self) -> LogSegment:
        return self.segments.active_segment

    def size_in_bytes(self) -> int:
        """Bytes of all segments' `.log` data (Kafka's UnifiedLog.size)."""
        return self.segments.size_in_bytes()

    def update_config(self, config: LogConfig) -> None:
        with self.lock:
            self.config = config

    def add_append_listener(self, fn: Callable[[Log], None]) -> None:
        self._listeners.append(fn)

    def remove_append_listener(self, fn: Callable[[Log], None]) -> None:
        try:
            self._listeners.remove(fn)
        except ValueError:
            pass

    # --- append ----------------------------------------------------------------------------------------

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int = 0,
        from_client: bool = True,
        defer_flush: bool = False,
        record_check: RecordCheck | None = None,
    ) -> LogAppendInfo:
        """Validate, assign offsets, check producer state, roll if needed, write, index, flush policy.

        `from_client=False` is for the broker's own writes (transaction markers, coordinator records).
        `defer_flush=True` (the Produce path on the event loop): when the flush policy (log.flush.on.append,
        flush.messages, flush.ms) asks for an fsync, none is done here; the result has `flush_required`
        and the records stay invisible (the high watermark does not move) until the caller has run
        `flush_appended(info)` off the loop and then `expose_flushed(info)`.
        Raises KafkaError; on failure nothing becomes visible and no offset is consumed."""
        with self.lock:
            if self.closed:
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"log {self.topic_partition} is closed")
            psm = self.producer_state_manager
            # Duplicates are answered before any offset is assigned (Kafka: analyzeAndValidateProducerState).
            if (from_client and len(records) >= HEADER_SIZE and records[16] == 2
                    and _PRODUCER_ID.unpack_from(records, _PRODUCER_ID_OFFSET)[0] >= 0):
                incoming = read_header(records)
                duplicate = psm.find_duplicate_batch(incoming)
                if duplicate is not None:
                    # Kafka reports the original batch's timestamp as append time; only meaningful with
                    # LogAppendTime, so CreateTime topics keep -1 as clients expect.
                    append_time = duplicate.timestamp if self.config.log_append_time else -1
                    return LogAppendInfo(
                        duplicate.first_offset, duplicate.last_offset, append_time, self.log_start_offset, True
                    )
            now = self.clock.milliseconds()
            result = validate_records(
                records, self.config, self._next_offset, leader_epoch, now, from_client=from_client,
                record_check=record_check,
            )
            out = result.records
            control_bytes: dict[int, bytes] = {}
            if result.headers is not None:
                # The fast lane's one ordinary batch (never a control batch): its max timestamp is in it.
                headers = result.headers
                if headers[0].producer_id >= 0:
                    psm.check_append(headers[0], from_client)
                shallow_offset_of_max_ts = result.last_offset
            else:
                headers, shallow_offset_of_max_ts = self._check_batches(out, result, from_client, control_bytes)
            sync = self.flush_on_append and not defer_flush
            if sync:
                self.fault_hooks.at(FaultPoint.FSYNC, self.topic_partition)
            try:
                segment = self._maybe_roll(len(out), result.max_timestamp, result.first_offset, result.last_offset)
                segment.append(
                    result.last_offset,
                    result.max_timestamp,
                    shallow_offset_of_max_ts,
                    out,
                    sync=sync,
                )
            except OSError as e:
                log.error("append to %s failed: %s", self.topic_partition, e)
                raise _storage_error(e) from e
            self._after_write(segment, headers, control_bytes, now)
            self._next_offset = result.last_offset + 1
            self._unflushed_messages += result.record_count
            info = LogAppendInfo(result.first_offset, result.last_offset, result.log_append_time, self.log_start_offset)
            flush_due = self._flush_due(now)
            if defer_flush and (self.flush_on_append or flush_due):
                info.flush_required = True
                return info  # visible (HW, listeners) only after the fsync: expose_flushed()
            self.high_watermark = self._next_offset
            if flush_due:
                self._flush_logging_errors()
        self._notify_listeners()
        return info

    def _check_batches(self, out: bytes | bytearray | memoryview, result: ValidationResult, from_client: bool,
                       control_bytes: dict[int, bytes]) -> tuple[list[RecordBatchHeader], int]:
        """Producer-state checks of every validated batch (markers' coordinator epochs too; their bytes go to
        `control_bytes`): the headers as written, and the last offset of the batch holding the max timestamp."""
        psm = self.producer_state_manager
        batches = list(iter_batches(out))  # headers as written: offsets and epoch already assigned
        headers = [h for _, h in batches]
        for header in headers:
            psm.check_append(header, from_client)
        for pos, header in batches:
            if header.is_control and header.producer_id >= 0:
                data = bytes(out[pos : pos + header.size])
                control_bytes[header.base_offset] = data
                try:
                    _, coordinator_epoch = read_control_record(data)
                except (ValueError, IndexError):
                    coordinator_epoch = -1
                psm.check_marker(header, coordinator_epoch)
        for header in headers:
            if header.base_offset <= result.offset_of_max_timestamp <= header.last_offset:
                return headers, header.last_offset
        return headers, result.last_offset

    def flush_appended(self, info: LogAppendInfo) -> None:
        """Worker thread: fsync everything up to and including a deferred append (raises OSError)."""
        self.flush(info.last_offset + 1)

    def expose_flushed(self, info: LogAppendInfo) -> None:
        """Event-loop thread, after flush_appended(info): the records become visible to fetchers."""
        with self.lock:
            self.high_watermark = max(self.high_watermark, min(info.last_offset + 1, self._next_offset))
        self._notify_listeners()

    def _notify_listeners(self) -> None:
        for listener in list(self._listeners):
            try:
                listener(self)
            except Exception:
                log.exception("append listener failed")

    def append_control_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        timestamp_ms: int | None = None,
        defer_flush: bool = False,
        transaction_version: int = 0,
    ) -> LogAppendInfo:
        """Write a COMMIT/ABORT marker for `producer_id` (Kafka's WriteTxnMarkers path: one control batch,
        transactional, base sequence -1, key version 0 + type, value version 0 + coordinator epoch;
        EndTransactionMarker). Completes the producer's open transaction (an ABORT goes to `.txnindex`),
        advances the LSO and wakes fetch waiters. A marker without an open transaction is still written,
        as Kafka does. Raises KafkaError(INVALID_PRODUCER_EPOCH) for an epoch older than the producer's
        (ProducerAppendInfo.checkProducerEpoch) and TRANSACTION_COORDINATOR_FENCED for an older
        coordinator epoch. `defer_flush` as for append_as_leader (then `LogManager.flush_appended`).
        `transaction_version` 2: the marker of a transactions-v2 end carries the bumped epoch, so it must be above
        the producer's epoch here; one that is not is late or a duplicate and is refused INVALID_PRODUCER_EPOCH
        (KIP-1228, ProducerAppendInfo.checkProducerEpoch)."""
        if transaction_version >= 2:
            entry = self.producer_state_manager.producers.get(producer_id)
            if entry is not None and producer_epoch <= entry.producer_epoch:
                raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                 f"marker epoch {producer_epoch} of producer {producer_id} is not above "
                                 f"{entry.producer_epoch} (TV2)")
        ts = self.clock.milliseconds() if timestamp_ms is None else timestamp_ms
        key = _CONTROL_KEY.pack(0, CONTROL_TYPE_COMMIT if commit else CONTROL_TYPE_ABORT)
        value = _CONTROL_VALUE.pack(0, coordinator_epoch)
        batch = build_batch(
            [Record(0, ts, key, value)],
            0,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=-1,
            is_transactional=True,
            is_control=True,
            partition_leader_epoch=self.leader_epoch,
        )
        return self.append_as_leader(batch, self.leader_epoch, from_client=False, defer_flush=defer_flush)

    def _after_write(
        self, segment: LogSegment, headers: list[RecordBatchHeader], control_bytes: dict[int, bytes], now: int
    ) -> None:
        """Leader epochs, producer state and `.txnindex` for batches that are now in the log."""
        for header in headers:
            apply_written_batch(
                header,
                control_bytes.get(header.base_offset),
                self.producer_state_manager,
                self.leader_epoch_cache,
                segment.txn_index,
                now,
            )

    def _maybe_roll(self, size: int, max_timestamp: int, first_offset: int, last_offset: int) -> LogSegment:
        segment = self.segments.active_segment
        config = self.config
        max_segment_ms = min(config.segment_ms, config.max_compaction_lag_ms) if config.compact else config.segment_ms
        if segment.should_roll_for(size, max_timestamp, last_offset, self.clock.milliseconds(), max_segment_ms,
                                   config.segment_bytes):
            return self.roll(max(first_offset, self._next_offset))
        return segment

    # --- roll / flush ----------------------------------------------------------------------------------

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, LEO) (docs/STORAGE.md "Rolling").

        The old segment gets its final time-index entry and trimmed files; a producer snapshot is
        written under the new base offset; the old segment is fsynced in the background, after which
        the recovery point moves to the new base. Rolling an empty active segment is a no-op."""
        with self.lock:
            new_offset = max(expected_next_offset or 0, self._next_offset)
            active = self.segments.last_segment
            if active is not None and active.base_offset == new_offset:
                return active  # empty active segment at that offset already
            if active is not None and new_offset < active.base_offset:
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot roll back to {new_offset}")
            self._delete_stale_segment_files(new_offset, "")  # stray files with the new name (Kafka deletes them)
            if active is not None:
                active.on_became_inactive_segment()
            segment = LogSegment.open(
                self.dir,
                new_offset,
                self.config,
                self.clock,
                preallocate=self.config.preallocate,
                roll_jitter_ms=random_segment_jitter(self.config),
            )
            self.segments.add(segment)
            psm = self.producer_state_manager
            psm.map_end_offset = max(psm.map_end_offset, new_offset)
            snapshot = psm.take_snapshot(sync=False)
            if snapshot is not None:
                self._unsynced_files.append(snapshot)  # fsynced with the old segment (docs/STORAGE.md "Rolling")
            self._schedule_flush(new_offset)
            return segment

    def _delete_stale_segment_files(self, base_offset: int, file_suffix: str) -> None:
        prefix = filename_prefix_from_offset(base_offset)
        for suffix in SEGMENT_SUFFIXES:
            stale = self.dir / f"{prefix}{suffix}{file_suffix}"
            if stale.exists():
                log.warning("deleting stale %s before creating segment %d", stale, base_offset)
                stale.unlink()

    def _schedule_flush(self, offset: int) -> None:
        if self._flush_executor is None:
            self.flush(offset)
            return
        try:
            self._flush_executor.submit(self._background_flush, offset)
        except RuntimeError:  # executor shut down
            self.flush(offset)

    def _background_flush(self, offset: int) -> None:
        try:
            self.flush(offset)
        except (OSError, ValueError) as e:
            log.error("background flush of %s failed: %s", self.topic_partition, e)

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets below `offset` (default LEO) from the recovery point on,
        plus the producer snapshots and the directory; then recovery point = offset."""
        with self.lock:
            target = self._next_offset if offset is None else offset
            if target <= self.recovery_point:
                return
            segments = self.segments.values(self.recovery_point, target)
            unsynced, self._unsynced_files = self._unsynced_files, []
        self.fault_hooks.at(FaultPoint.FSYNC, self.topic_partition)
        for segment in segments:
            if not segment.is_closed:
                segment.flush()
        for path in unsynced:
            _fsync_file(path)
        fsync_dir(self.dir)
        with self.lock:
            if target > self.recovery_point:
                self.recovery_point = target
            if offset is None or target >= self._next_offset:
                self._unflushed_messages = 0
            self._last_flush_ms = self.clock.milliseconds()

    def _flush_due(self, now: int) -> bool:
        return self._unflushed_messages >= self.config.flush_messages or (
            self.config.flush_ms < 2**62 and now - self._last_flush_ms >= self.config.flush_ms
        )

    def _flush_logging_errors(self) -> None:
        try:
            self.flush()
        except OSError as e:
            log.error("flush of %s failed: %s", self.topic_partition, e)

    def flush_if_due(self) -> None:
        """Periodic flush.ms check (Kafka's log flusher)."""
        with self.lock:
            due = self._next_offset > self.recovery_point and (
                self.config.flush_ms < 2**62 and self.clock.milliseconds() - self._last_flush_ms >= self.config.flush_ms
            )
        if due:
            self.flush()

    # --- read ------------------------------------------------------------------------------------------

    def read(self, fetch_offset: int, max_bytes: int, upper_bound: int, min_one_batch: bool) -> bytes:
        """Raw `.log` bytes from the start of the batch holding `fetch_offset` (docs/STORAGE.md "Reads").

        The result is a copy read with os.pread from one segment (the `.log` files are not mapped: pages
        stay in the kernel's page cache, not in the broker's RSS); later appends, rolls or deletion of the
        segment do not change it. The Fetch path uses `read_slice` instead (no copy).

        `upper_bound` is an offset (HW, LSO or LEO) on a batch boundary; nothing at or after it is
        returned. A segment without a batch reaching fetch_offset (compaction gap) moves on to the next.
        Raises KafkaError(OFFSET_OUT_OF_RANGE) below the log start offset or above LEO."""
        for segment, max_position in self._read_segments(fetch_offset, upper_bound):
            data = segment.read(fetch_offset, max_bytes, max_position, min_one_batch)
            if data is not None:
                return data
        return b""

    def read_slice(self, fetch_offset: int, max_bytes: int, upper_bound: int,
                   min_one_batch: bool) -> FileRecords | None:
        """`read()` for the Fetch path: the same range as a FileRecords slice of the segment file, with its own
        fd (protocol/file_records.py), which the connection sends with sendfile as Kafka's FileRecords.transferTo
        does: the records never pass through the broker's memory. None when there is nothing to return.

        A segment closed between the lookup and taking its fd (deleted by retention after file.delete.delay.ms,
        or the log closed) is looked up again: the log start offset has moved past it (OFFSET_OUT_OF_RANGE) or
        another segment holds the offsets now."""
        for _ in range(_READ_RETRIES):
            try:
                for segment, max_position in self._read_segments(fetch_offset, upper_bound):
                    data = segment.read_slice(fetch_offset, max_bytes, max_position, min_one_batch)
                    if data is not None:
                        if not data.size:
                            data.close()
                            return None
                        return data
                return None
            except SegmentClosedError:
                continue
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"segments of {self.topic_partition} closed while read")

    def _read_segments(self, fetch_offset: int, upper_bound: int) -> Iterator[tuple[LogSegment, int | None]]:
        """(segment, max position or None) to read in turn for `read` / `read_slice`: the segment holding
        `fetch_offset`, then (compaction gap) the next ones below the bound. Raises OFFSET_OUT_OF_RANGE."""
        with self.lock:
            leo = self._next_offset
            if fetch_offset < self.log_start_offset or fetch_offset > leo:
                raise KafkaError(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    f"offset {fetch_offset} outside [{self.log_start_offset}, {leo}] of {self.topic_partition}",
                )
            upper_bound = min(upper_bound, leo)
            if fetch_offset >= upper_bound:
                return
            segment = self.segments.floor_segment(fetch_offset)
            bound_segment = self.segments.floor_segment(upper_bound) if upper_bound < leo else None
            bound_position = None
            if bound_segment is not None:
                mapping = bound_segment.translate_offset(upper_bound)
                bound_position = mapping.position if mapping is not None else bound_segment.size
        while segment is not None:
            yield segment, (bound_position if segment is bound_segment else None)
            if segment is bound_segment:
                break
            with self.lock:  # compaction gap: go on with the next segment, if it starts below the bound
                segment = self.segments.higher_segment(segment.base_offset)
            if segment is not None and segment.base_offset >= upper_bound:
                break

    def batches_from(self, offset: int) -> Iterable[tuple[LogSegment, int, RecordBatchHeader]]:
        """(segment, position, header) of every batch holding offsets >= `offset`, in order."""
        with self.lock:
            segments = self.segments.values(offset)
        for segment in segments:
            mapping = segment.translate_offset(offset)
            if mapping is None:
                continue
            for pos, header in segment.batches(mapping.position):
                yield segment, pos, header

    # --- timestamps / epochs ---------------------------------------------------------------------------

    def fetch_offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """(timestamp, offset, leader epoch or -1) per docs/STORAGE.md "Offsets by timestamp", or None if nothing matches.

        Handles -1 (LEO; callers bound it to HW/LSO), -2/-4 (log start), -3 (max timestamp), -5
        (None: no tiered storage) and timestamps >= 0."""
        with self.lock:
            if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                first = self.leader_epoch_cache.earliest_entry()
                epoch = first[0] if first is not None and first[1] <= self.log_start_offset else -1
                return -1, self.log_start_offset, epoch
            if timestamp == LATEST_TIMESTAMP:
                return -1, self._next_offset, self.leader_epoch_cache.latest_epoch
            if timestamp == MAX_TIMESTAMP:
                return self.max_timestamp_offset()
            if timestamp < 0:
                return None
            segments = list(self.segments)
            log_start = self.log_start_offset
        for segment in segments:
            if segment.largest_timestamp >= timestamp:
                found = _find_offset_by_timestamp(segment, timestamp, log_start)
                if found is not None:
                    return found
        return None

    def max_timestamp_offset(self) -> tuple[int, int, int] | None:
        """ListOffsets -3 (KIP-734): the first record carrying the log's largest timestamp."""
        with self.lock:
            segments = list(self.segments)
        if not segments:
            return None
        best = max(segments, key=lambda s: s.max_timestamp_so_far)
        ts, off = best.max_timestamp_so_far, best.offset_of_max_timestamp_so_far
        _, position = best.offset_index.lookup(off)
        for pos, header in best.batches(position):
            if header.max_timestamp == ts:
                epoch = header.partition_leader_epoch if header.partition_leader_epoch >= 0 else -1
                if header.is_log_append_time:
                    return ts, header.base_offset, epoch
                for rec_offset, rec_ts in _record_timestamps(best.read_bytes(pos, header.size)):
                    if rec_ts == ts:
                        return ts, rec_offset, epoch
                return ts, header.base_offset, epoch
        return None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) per Kafka's LeaderEpochFileCache.endOffsetFor, or (-1, -1)."""
        with self.lock:
            return self.leader_epoch_cache.end_offset_for(epoch, self._next_offset)

    # --- primitives for retention and the cleaner ------------------------------------------------------

    def maybe_increment_log_start_offset(self, new_log_start_offset: int, reason: str = "") -> bool:
        """Raise the log start offset (DeleteRecords, retention): trims leader epochs and producer state,
        writes the log-start checkpoint via the LogManager hook. Raises OFFSET_OUT_OF_RANGE above HW."""
        with self.lock:
            if new_log_start_offset > self.high_watermark:
                raise KafkaError(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    f"cannot increment log start to {new_log_start_offset} above HW {self.high_watermark}",
                )
            if new_log_start_offset <= self.log_start_offset:
                return False
            log.info("%s: log start offset %d -> %d (%s)", self.topic_partition, self.log_start_offset,
                     new_log_start_offset, reason)
            self.log_start_offset = new_log_start_offset
            self.recovery_point = max(self.recovery_point, new_log_start_offset)
            self.leader_epoch_cache.truncate_from_start(new_log_start_offset)
            self.producer_state_manager.on_log_start_offset_incremented(new_log_start_offset)
            callback = self.on_log_start_offset_changed
        if callback is not None:
            callback(self)
        return True

    def delete_segments(self, segments: Iterable[LogSegment], reason: str = "") -> int:
        """Remove whole segments (retention): out of the list, files renamed `.deleted` and unlinked after
        file.delete.delay.ms by the scheduler, producer snapshots named by them too; the log start
        offset moves to the new first segment. Deleting the active segment rolls first (the log always
        keeps one). Returns how many segments were deleted."""
        with self.lock:
            doomed = [s for s in segments if s in self.segments]
            if not doomed:
                return 0
            active = self.segments.active_segment
            if active in doomed:
                if active.size == 0 and len(self.segments) == len(doomed):
                    doomed.remove(active)
                else:
                    self.roll()
            for segment in doomed:
                self.segments.remove(segment.base_offset)
            self._async_delete(doomed, delete_snapshots=True)
            first = self.segments.first_segment
            assert first is not None
            if first.base_offset > self.log_start_offset:
                self.maybe_increment_log_start_offset(first.base_offset, reason or "segment deletion")
            log.info("%s: deleted %d segment(s) (%s)", self.topic_partition, len(doomed), reason)
            return len(doomed)

    def _async_delete(self, segments: list[LogSegment], delete_snapshots: bool) -> None:
        delay = self.config.file_delete_delay_ms
        for segment in segments:
            try:
                segment.rename_to_deleted()
            except OSError as e:
                raise _storage_error(e) from e
            self.scheduler.schedule_once(f"delete-file {segment.log_path}", segment.delete_if_exists, delay)
            if delete_snapshots:
                snap = self.producer_state_manager.rename_snapshot_to_deleted(segment.base_offset)
                if snap is not None:
                    self.scheduler.schedule_once(f"delete-file {snap}", _unlinker(snap), delay)

    def replace_segments(self, new_segments: list[LogSegment], old_segments: list[LogSegment]) -> None:
        """Swap cleaner output in for the segments it replaces (docs/STORAGE.md "Cleaner swap", Kafka's replaceSegments).

        `new_segments` were opened with `LogSegment.open(..., file_suffix='.cleaned')`, written, then
        `on_became_inactive_segment()` and `flush()`ed by the caller. Steps: rename new `.cleaned` ->
        `.swap` (descending) and put them in the list; take each old segment out (unless a new one has
        its base), rename its files `.deleted` and schedule the unlink; rename `.swap` -> final names;
        fsync the directory. A crash at any point is settled by startup recovery."""
        with self.lock:
            new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
            old_sorted = sorted(old_segments, key=lambda s: s.base_offset)
            new_bases = {s.base_offset for s in new_sorted}
            try:
                hooks = self.fault_hooks
                for segment in reversed(new_sorted):
                    if segment.has_suffix(CLEANED_FILE_SUFFIX):
                        segment.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
                        hooks.at(FaultPoint.SWAP, segment)
                    self.segments.add(segment)
                not_replaced = []
                for i, segment in enumerate(old_sorted):
                    if segment.base_offset not in new_bases:
                        if self.segments.get(segment.base_offset) is segment:
                            self.segments.remove(segment.base_offset)
                        not_replaced.append(segment)
                    self._async_delete([segment], delete_snapshots=False)
                    if i == 0:
                        hooks.at(FaultPoint.DELETED_FIRST, segment)
                    if i == len(old_sorted) - 1:
                        hooks.at(FaultPoint.DELETED, segment)
                if not_replaced:
                    self._async_delete_snapshots([s.base_offset for s in not_replaced])
                for segment in new_sorted:
                    if segment.has_suffix(SWAP_FILE_SUFFIX):
                        segment.change_file_suffixes(SWAP_FILE_SUFFIX, "")
                        hooks.at(FaultPoint.LIVE, segment)
            except OSError as e:
                raise _storage_error(e) from e
        # The directory fsync makes the renames durable; it runs outside `lock` so appends and fetches
        # of this partition are not stalled behind the disk (a crash before it is settled by recovery).
        try:
            fsync_dir(self.dir)
        except OSError as e:
            raise _storage_error(e) from e

    def _async_delete_snapshots(self, offsets: list[int]) -> None:
        for offset in offsets:
            snap = self.producer_state_manager.rename_snapshot_to_deleted(offset)
            if snap is not None:
                self.scheduler.schedule_once(f"delete-file {snap}", _unlinker(snap), self.config.file_delete_delay_ms)

    def new_cleaned_segment(self, base_offset: int) -> LogSegment:
        """A fresh `.cleaned` segment for the cleaner (stale `.cleaned` files of that base removed first)."""
        self._delete_stale_segment_files(base_offset, CLEANED_FILE_SUFFIX)
        return LogSegment.open(self.dir, base_offset, self.config, self.clock, file_suffix=CLEANED_FILE_SUFFIX)

    def last_records_of_active_producers(self) -> dict[int, tuple[int | None, int]]:
        """producer id -> (last data offset or None, epoch), a consistent copy taken under the lock (the
        cleaner keeps each active producer's last batch; Kafka's UnifiedLog.lastRecordsOfActiveProducers)."""
        with self.lock:
            return {
                pid: (e.last_data_offset if e.last_data_offset >= 0 else None, e.producer_epoch)
                for pid, e in self.producer_state_manager.producers.items()
            }

    def fetch_upper_bound_offset(self, segment_base_offset: int, end_position: int) -> int | None:
        """An offset no batch of `segment_base_offset`'s segment below file position `end_position` reaches:
        the first offset-index entry at or after it, else the next segment's base offset, else the log end offset
        (Kafka's LocalLog.addAbortedTransactions bound for a read_committed fetch). None when that segment is
        gone (deleted or swapped since the read)."""
        with self.lock:
            segment = self.segments.get(segment_base_offset)
            if segment is None:
                return None
            following = self.segments.higher_segment(segment_base_offset)
            bound = following.base_offset if following is not None else self._next_offset
        found = segment.offset_index.fetch_upper_bound_offset(end_position)
        return bound if found is None else min(found, bound)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start, upper bound): the `.txnindex` of the segment holding start,
        then of every later segment until an entry's LSO reaches the bound (Kafka's
        LocalLog.collectAbortedTransactions, TxnIndexSearchResult.isComplete).

        The search must not stop at the bound's segment: an aborted transaction's entry lives in the segment of
        its ABORT marker, which can lie any number of segments after the records it aborts."""
        if upper_bound_offset <= start_offset:
            return []
        with self.lock:
            indexes = self.segments.txn_indexes_from(start_offset)
        found: list[AbortedTxn] = []
        for index in indexes:
            result = index.collect_aborted_txns(start_offset, upper_bound_offset)
            found.extend(result.aborted_transactions)
            if result.is_complete:
                break
        return found

    def remove_expired_producers(self) -> int:
        with self.lock:
            return self.producer_state_manager.remove_expired_producers(self.clock.milliseconds())

    # --- lifecycle -------------------------------------------------------------------------------------

    def close(self) -> None:
        """Clean close: producer snapshot at LEO, segments closed with trimmed indexes."""
        with self.lock:
            if self.closed:
                return
            try:
                psm = self.producer_state_manager
                psm.map_end_offset = max(psm.map_end_offset, self._next_offset)
                psm.take_snapshot()
            except OSError as e:
                log.error("could not write producer snapshot for %s: %s", self.topic_partition, e)
            for segment in self.segments:
                segment.close()
            self.closed = True

    def close_handlers(self) -> None:
        with self.lock:
            for segment in self.segments:
                segment.close_handlers()
            self.closed = True

    def delete(self) -> None:
        """Close file handles and remove the directory's segment files (LogManager removes the dir)."""
        with self.lock:
            for segment in self.segments:
                segment.delete_if_exists()
            self.segments.clear()
            self.closed = True


def _fsync_file(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return  # already deleted (retention/cleaning)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlinker(path: Path) -> Callable[[], None]:
    def unlink() -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    return unlink


def _record_timestamps(batch: bytes) -> Iterable[tuple[int, int]]:
    """(offset, timestamp) of each record of one batch, decompressing if needed."""
    for record in iter_records(batch):
        yield record.offset, record.timestamp


def _find_offset_by_timestamp(segment: LogSegment, timestamp: int, starting_offset: int) -> tuple[int, int, int] | None:
    """Kafka's LogSegment.findOffsetByTimestamp: time index, then offset index, then a batch scan."""
    _, ts_offset = segment.time_index.lookup(timestamp)
    _, position = segment.offset_index.lookup(max(ts_offset, starting_offset))
    for pos, header in segment.batches(position):
        if header.max_timestamp < timestamp:
            continue
        epoch = header.partition_leader_epoch if header.partition_leader_epoch >= 0 else -1
        # Record-level: with LogAppendTime every record reads as MaxTimestamp (the parser does that).
        for rec_offset, rec_ts in _record_timestamps(segment.read_bytes(pos, header.size)):
            if rec_ts >= timestamp and rec_offset >= starting_offset:
                return rec_ts, rec_offset, epoch
    return None
