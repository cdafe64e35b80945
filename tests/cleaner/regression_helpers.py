"""Helpers of the KAFKA-issue regression tests: transactional producers writing straight into a Log, the view a
read_committed consumer gets, and segments written on disk with offset holes (as a log copied from a Kafka broker
that compacted it has)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from cleaner_env import Env

from tidelog.protocol.record_batch import RecordBatchHeader, iter_batches
from tidelog.protocol.records import Record, build_batch, iter_records
from tidelog.storage.log_segment import LogSegment

ABORT_KEY = struct.pack(">hh", 0, 0)  # the key of an ABORT control record (Kafka's ControlRecordType.recordKey)
COMMIT_KEY = struct.pack(">hh", 0, 1)
SEGMENT_FILE_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")


def as_bytes(value: bytes | str | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


@dataclass
class TxnProducer:
    """A transactional producer appending to one log as the broker does: data batches from the client
    (sequence numbers checked), COMMIT/ABORT markers from the coordinator (Kafka's appendTransactionalAsLeader)."""

    log: Any
    producer_id: int
    epoch: int = 0
    next_sequence: int = field(default=0)

    def send(self, records: list[tuple[bytes | str, bytes | str | None]]) -> int:
        """One transactional batch; returns its base offset."""
        ts = self.log.clock.milliseconds()
        batch = build_batch([Record(i, ts, as_bytes(k), as_bytes(v)) for i, (k, v) in enumerate(records)], 0,
                            producer_id=self.producer_id, producer_epoch=self.epoch,
                            base_sequence=self.next_sequence, is_transactional=True)
        self.next_sequence += len(records)
        return int(self.log.append_as_leader(batch).first_offset)

    def commit(self) -> int:
        return int(self.log.append_control_marker(self.producer_id, self.epoch, 0, commit=True).first_offset)

    def abort(self) -> int:
        return int(self.log.append_control_marker(self.producer_id, self.epoch, 0, commit=False).first_offset)


def all_batches(log: Any) -> list[tuple[RecordBatchHeader, list[Record]]]:
    """Every batch on disk with its records, oldest first."""
    out = []
    for segment in log.segments:
        data = segment.read_bytes(0, segment.size)
        out.extend((header, list(iter_records(data, pos))) for pos, header in iter_batches(data))
    return out


def read_committed(log: Any) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of what a read_committed consumer gets from the log start: the aborted-transaction
    list the broker hands out with a fetch (Log.collect_aborted_transactions) applied as Kafka's consumer does
    (a producer's batches are skipped from its aborted transaction's first offset until its ABORT marker)."""
    aborted = sorted(log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset),
                     key=lambda t: t.first_offset)
    skipping: set[int] = set()
    out = []
    for header, records in all_batches(log):
        while aborted and aborted[0].first_offset <= header.last_offset:
            skipping.add(aborted.pop(0).producer_id)
        if header.is_control:
            if records and records[0].key == ABORT_KEY:
                skipping.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in skipping:
            continue
        out.extend((r.offset, r.key, r.value) for r in records)
    return out


def offsets_in_log(log: Any) -> list[int]:
    """Offsets of every record on disk, control records included (Kafka's LogCleanerTest.offsetsInLog)."""
    return [r.offset for _, records in all_batches(log) for r in records]


def last_offsets_per_batch(log: Any) -> list[int]:
    return [header.last_offset for header, _ in all_batches(log)]


def write_segments(env: Env, log: Any, segments: list[tuple[int, list[tuple[int, bytes]]]]) -> Any:
    """Close the broker's logs, replace the log's segments by `segments` — (base offset, [(offset, key)]) with one
    single-record batch per offset, any holes allowed — and open the log again from disk."""
    directory, config = log.dir, log.config
    env.close()
    for path in list(directory.iterdir()):
        if path.suffix in SEGMENT_FILE_SUFFIXES:
            path.unlink()
    ts = env.clock.milliseconds()
    for base, records in segments:
        segment = LogSegment.open(directory, base, config, env.clock)
        for offset, key in records:
            segment.append(offset, ts, offset, build_batch([Record(offset, ts, key, b"v%d" % offset)], offset))
        segment.flush()
        segment.close()
    env.open()
    return env.log(log.topic_partition.topic, config)
