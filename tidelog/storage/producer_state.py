"""Idempotent/transactional producer state of one partition (Kafka's ProducerStateManager,
ProducerStateEntry, BatchMetadata, ProducerAppendInfo), docs/STORAGE.md "Producer state", "Segments and indexes".

Per producer id: the epoch and the last 5 batches appended (sequence and offset ranges), so retried
batches are recognised as duplicates and gaps/fencing are rejected. Persisted as `<offset>.snapshot`
files in Kafka's format; rebuilt at startup from the newest snapshot plus a replay of the log.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from tidelog.protocol import crc as crc32c
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.record_batch import HEADER_SIZE, RecordBatchHeader
from tidelog.storage.checkpoints import write_atomic
from tidelog.storage.log_file_utils import (
    DELETED_FILE_SUFFIX,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    offset_from_file_name,
    producer_snapshot_file,
)

NUM_BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN, matches max.in.flight=5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 0x7FFFFFFF
SNAPSHOT_VERSION = 1
_SNAP_HEADER = struct.Struct(">hIi")  # version, crc, count
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")  # 46 bytes
CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1
# Kafka's TRANSACTION_COORDINATOR_FENCED; not (yet) in protocol.errors, so looked up defensively.
_COORDINATOR_FENCED = getattr(ErrorCode, "TRANSACTION_COORDINATOR_FENCED", ErrorCode.INVALID_PRODUCER_EPOCH)


def decrement_sequence(seq: int, delta: int) -> int:
    """Sequences wrap from INT32_MAX to 0 (DefaultRecordBatch.decrementSequence)."""
    return seq - delta if seq >= delta else INT32_MAX - (delta - seq) + 1


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(slots=True)
class BatchMetadata:
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batch_metadata: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    last_timestamp: int = -1  # MaxTimestamp of the last batch (what Kafka snapshots and expires by)
    last_append_ms: int = -1  # broker time of the last append / of loading (in memory only)
    current_txn_first_offset: int = -1  # -1: no open transaction

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def maybe_update_producer_epoch(self, epoch: int) -> None:
        if self.producer_epoch != epoch:
            self.batch_metadata.clear()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        self.maybe_update_producer_epoch(epoch)
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def find_duplicate_batch(self, header: RecordBatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        first, last = header.base_sequence, header.last_sequence
        for meta in self.batch_metadata:
            if meta.first_seq == first and meta.last_seq == last:
                return meta
        return None


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


def _read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")
    return (result >> 1) ^ -(result & 1), pos


def read_control_record(batch: bytes | bytearray | memoryview) -> tuple[int, int]:
    """(control type, coordinator epoch) of the single record of an (uncompressed) control batch."""
    pos = HEADER_SIZE
    _, pos = _read_varint(batch, pos)  # record length
    pos += 1  # attributes
    _, pos = _read_varint(batch, pos)  # timestamp delta
    _, pos = _read_varint(batch, pos)  # offset delta
    key_len, pos = _read_varint(batch, pos)
    if key_len < 4:
        raise ValueError("control record key too short")
    control_type = int.from_bytes(batch[pos + 2 : pos + 4], "big", signed=True)
    pos += key_len
    value_len, pos = _read_varint(batch, pos)
    coordinator_epoch = -1
    if value_len >= 6:
        coordinator_epoch = int.from_bytes(batch[pos + 2 : pos + 6], "big", signed=True)
    return control_type, coordinator_epoch


class ProducerStateManager:
    def __init__(self, log_dir: Path, producer_id_expiration_ms: int = 86_400_000) -> None:
        self.log_dir = Path(log_dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing_txns: dict[int, int] = {}  # first offset -> producer id
        self.map_end_offset = 0  # state covers every batch below this offset
        self.last_snap_offset = 0

    # --- checks (before anything is written) ---------------------------------------------------------------

    def find_duplicate_batch(self, header: RecordBatchHeader) -> BatchMetadata | None:
        """The retained batch this append repeats (same epoch and sequence range), if any."""
        if header.producer_id < 0 or header.base_sequence < 0:
            return None
        entry = self.producers.get(header.producer_id)
        return entry.find_duplicate_batch(header) if entry is not None else None

    def check_append(self, header: RecordBatchHeader, from_client: bool = True) -> None:
        """Epoch and sequence rules of Kafka's ProducerAppendInfo (docs/STORAGE.md "Producer state")."""
        if header.producer_id < 0:
            return
        entry = self.producers.get(header.producer_id)
        current_epoch = entry.producer_epoch if entry is not None else NO_PRODUCER_EPOCH
        if header.producer_epoch < current_epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"epoch {header.producer_epoch} of producer {header.producer_id} is older than {current_epoch}",
            )
        if header.is_control:
            return  # markers: only the epoch matters here (coordinator epoch: check_marker)
        if not from_client or header.base_sequence < 0:
            return
        first_seq = header.base_sequence
        if header.producer_epoch != current_epoch:
            if first_seq != 0 and current_epoch != NO_PRODUCER_EPOCH:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"new epoch {header.producer_epoch} of producer {header.producer_id} must start at 0, "
                    f"got {first_seq}",
                )
        else:
            last_seq = entry.last_seq if entry is not None else NO_SEQUENCE
            if not (current_epoch == NO_PRODUCER_EPOCH or in_sequence(last_seq, first_seq)):
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {header.producer_id}: sequence {first_seq} after {last_seq}",
                )

    def check_marker(self, header: RecordBatchHeader, coordinator_epoch: int) -> None:
        entry = self.producers.get(header.producer_id)
        if entry is not None and coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(
                _COORDINATOR_FENCED,
                f"coordinator epoch {coordinator_epoch} below {entry.coordinator_epoch}",
            )

    # --- updates (after the batch is written) --------------------------------------------------------------

    def update(
        self, header: RecordBatchHeader, batch: bytes | bytearray | memoryview | None, now_ms: int = -1
    ) -> CompletedTxn | None:
        """Apply one written batch (offsets assigned). `batch` (its bytes) is only read for control batches.
        `now_ms` is the broker time of the append (or of the load, when replaying).
        Returns the transaction a COMMIT/ABORT marker completed, if there was one open."""
        completed = None
        if header.producer_id >= 0:
            entry = self.producers.get(header.producer_id)
            if entry is None:
                entry = ProducerStateEntry(header.producer_id)
                self.producers[header.producer_id] = entry
            entry.last_append_ms = max(entry.last_append_ms, now_ms)
            if header.is_control:
                completed = self._append_end_txn_marker(entry, header, batch)
            else:
                if header.is_transactional and entry.current_txn_first_offset < 0:
                    entry.current_txn_first_offset = header.base_offset
                    self.ongoing_txns[header.base_offset] = header.producer_id
                entry.add_batch(
                    header.producer_epoch,
                    header.last_sequence,
                    header.last_offset,
                    header.last_offset_delta,
                    header.max_timestamp,
                )
        self.map_end_offset = max(self.map_end_offset, header.next_offset)
        return completed

    def _append_end_txn_marker(
        self, entry: ProducerStateEntry, header: RecordBatchHeader, batch: bytes | bytearray | memoryview | None
    ) -> CompletedTxn | None:
        control_type, coordinator_epoch = CONTROL_TYPE_COMMIT, -1
        if batch is not None and len(batch) > HEADER_SIZE:
            try:
                control_type, coordinator_epoch = read_control_record(batch)
            except (ValueError, IndexError):
                pass
        entry.maybe_update_producer_epoch(header.producer_epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = header.max_timestamp
        completed = None
        if entry.current_txn_first_offset >= 0:
            completed = CompletedTxn(
                header.producer_id,
                entry.current_txn_first_offset,
                header.base_offset,
                control_type == CONTROL_TYPE_ABORT,
            )
            self.ongoing_txns.pop(entry.current_txn_first_offset, None)
            entry.current_txn_first_offset = -1
        return completed

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """LSO once `completed` is done: first offset of the oldest other open transaction, else marker + 1."""
        others = [first for first, pid in self.ongoing_txns.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing_txns) if self.ongoing_txns else None

    # --- expiry ---------------------------------------------------------------------------------------------

    def is_producer_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        """Kafka expires by the last batch's (client) timestamp alone. Here the broker's own time of the last
        append (or of loading the state) counts too, so a producer whose clock lags the broker's is not
        forgotten at once, e.g. right after a restart; with synchronised clocks the two agree."""
        last = max(entry.last_timestamp, entry.last_append_ms)
        return entry.current_txn_first_offset < 0 and now_ms - last >= self.producer_id_expiration_ms

    def remove_expired_producers(self, now_ms: int) -> int:
        expired = [pid for pid, e in self.producers.items() if self.is_producer_expired(now_ms, e)]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Drop snapshots below the new start. Producers stay (Kafka 3.x keeps them until
        producer.id.expiration.ms, so retries after DeleteRecords/retention are still deduplicated)."""
        for offset in self.snapshot_offsets():
            if offset < log_start_offset:
                self._delete_snapshot(offset)
        self.map_end_offset = max(self.map_end_offset, log_start_offset)

    # --- snapshots ------------------------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        offsets = []
        try:
            names = os.listdir(self.log_dir)
        except FileNotFoundError:
            return []
        for name in names:
            if name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX):
                offset = offset_from_file_name(name)
                if offset is not None:
                    offsets.append(offset)
        return sorted(offsets)

    def _delete_snapshot(self, offset: int) -> None:
        try:
            os.unlink(producer_snapshot_file(self.log_dir, offset))
        except FileNotFoundError:
            pass

    def rename_snapshot_to_deleted(self, offset: int) -> Path | None:
        """Kafka deletes a removed segment's snapshot asynchronously: rename it `.deleted` first."""
        path = producer_snapshot_file(self.log_dir, offset)
        target = path.with_name(path.name + DELETED_FILE_SUFFIX)
        try:
            os.replace(path, target)
        except FileNotFoundError:
            return None
        return target

    def encode_snapshot(self) -> bytes:
        body = bytearray()
        entries = list(self.producers.values())
        for e in entries:
            body += _SNAP_ENTRY.pack(
                e.producer_id,
                e.producer_epoch,
                e.last_seq,
                e.last_data_offset,
                e.last_offset_delta,
                e.last_timestamp,
                e.coordinator_epoch,
                e.current_txn_first_offset,
            )
        count = struct.pack(">i", len(entries))
        crc = crc32c.crc32c(count + bytes(body))
        return _SNAP_HEADER.pack(SNAPSHOT_VERSION, crc, len(entries)) + bytes(body)

    def take_snapshot(self, sync: bool = True) -> Path | None:
        """Write `<map_end_offset>.snapshot` if the state advanced since the last snapshot."""
        if self.map_end_offset <= self.last_snap_offset:
            return None
        path = producer_snapshot_file(self.log_dir, self.map_end_offset)
        write_atomic(path, self.encode_snapshot(), sync=sync)
        self.last_snap_offset = self.map_end_offset
        return path

    @staticmethod
    def read_snapshot(path: Path) -> list[ProducerStateEntry]:
        """Parse a snapshot; raises ValueError when it is corrupt (bad version, CRC or size)."""
        data = path.read_bytes()
        if len(data) < _SNAP_HEADER.size:
            raise ValueError(f"snapshot {path} too short")
        version, crc, count = _SNAP_HEADER.unpack_from(data, 0)
        if version != SNAPSHOT_VERSION:
            raise ValueError(f"snapshot {path} has version {version}")
        if crc32c.crc32c(data[6:]) != crc:
            raise ValueError(f"snapshot {path} fails its CRC")
        if count < 0 or len(data) != _SNAP_HEADER.size + count * _SNAP_ENTRY.size:
            raise ValueError(f"snapshot {path} has a wrong size")
        entries = []
        for i in range(count):
            pid, epoch, last_seq, last_offset, delta, ts, coord, txn_first = _SNAP_ENTRY.unpack_from(
                data, _SNAP_HEADER.size + i * _SNAP_ENTRY.size
            )
            entry = ProducerStateEntry(pid, epoch, coordinator_epoch=coord, last_timestamp=ts,
                                       current_txn_first_offset=txn_first)
            if last_offset >= 0:
                entry.batch_metadata.append(BatchMetadata(last_seq, last_offset, delta, ts))
            entries.append(entry)
        return entries

    def clear(self) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> None:
        """Drop snapshots outside (log start, LEO], then load the newest valid one (older ones are tried
        when the newest is corrupt). map_end_offset tells the caller where to start replaying."""
        for offset in self.snapshot_offsets():
            if offset > log_end_offset or offset < log_start_offset:
                self._delete_snapshot(offset)
        self.reload(log_start_offset, log_end_offset, now_ms)

    def reload(self, log_start_offset: int, max_offset: int, now_ms: int) -> None:
        """Load the newest valid snapshot in [log_start_offset, max_offset] without deleting valid ones."""
        self.clear()
        self.map_end_offset = log_start_offset
        self.last_snap_offset = 0
        for offset in reversed(self.snapshot_offsets()):
            if offset > max_offset or offset < log_start_offset:
                continue
            try:
                entries = self.read_snapshot(producer_snapshot_file(self.log_dir, offset))
            except (ValueError, OSError):
                self._delete_snapshot(offset)
                continue
            for entry in entries:
                entry.last_append_ms = now_ms  # expiry counts from the load (see is_producer_expired)
                self.producers[entry.producer_id] = entry
                if entry.current_txn_first_offset >= 0:
                    self.ongoing_txns[entry.current_txn_first_offset] = entry.producer_id
            self.map_end_offset = max(offset, log_start_offset)
            self.last_snap_offset = offset
            return
