"""Helpers for cleaner tests: real LogManager/Log on tmp dirs, batches built with protocol.records."""

from __future__ import annotations

from pathlib import Path

from tidelog.cleaner.log_cleaner import CleanerConfig, LogCleaner
from tidelog.clock import ManualClock
from tidelog.config.log_config import LogConfig
from tidelog.protocol.record_batch import iter_batches
from tidelog.protocol.records import Record, build_batch, iter_records
from tidelog.storage import TopicPartition
from tidelog.storage.log_manager import LogManager

TOPIC_ID = bytes(range(1, 17))
COMPACT = LogConfig(cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.01, delete_retention_ms=1000,
                    segment_bytes=1024 * 1024)


class Env:
    """A LogManager with one log dir and a LogCleaner over it (threads not started: tests call clean_once)."""

    def __init__(self, path: Path, clock: ManualClock, memory: int = 1024 * 1024,
                 io_buffer_size: int = 524_288) -> None:
        self.path = path
        self.clock = clock
        self.memory = memory
        self.io_buffer_size = io_buffer_size
        self.open()

    def open(self) -> None:
        self.manager = LogManager([str(self.path)], LogConfig(), self.clock)
        self.manager.startup()
        self.cleaner = LogCleaner(CleanerConfig(dedupe_buffer_size=self.memory, backoff_ms=50,
                                                io_buffer_size=self.io_buffer_size),
                                  [str(self.path)], self.manager.all_logs, self.clock,
                                  checkpoint_store=self.manager)

    def restart(self) -> None:
        self.cleaner.shutdown()
        self.manager.shutdown()
        self.open()

    def close(self) -> None:
        self.cleaner.shutdown()
        self.manager.shutdown()

    def log(self, topic: str = "t", config: LogConfig = COMPACT, partition: int = 0):  # noqa: ANN201
        tp = TopicPartition(topic, partition)
        existing = self.manager.get_log(tp)
        if existing is not None:
            existing.update_config(config)
            return existing
        return self.manager.get_or_create_log(tp, config, TOPIC_ID)


def produce(log, key: bytes | str | None, value: bytes | str | None, ts: int | None = None,  # noqa: ANN001
            compression: int = 0) -> int:
    key_b = key.encode() if isinstance(key, str) else key
    value_b = value.encode() if isinstance(value, str) else value
    ts = log.clock.milliseconds() if ts is None else ts
    batch = build_batch([Record(0, ts, key_b, value_b)], 0, compression=compression)
    return log.append_as_leader(batch).first_offset


def produce_many(log, records: list[tuple[bytes | None, bytes | None]], compression: int = 0) -> int:  # noqa: ANN001
    ts = log.clock.milliseconds()
    batch = build_batch([Record(i, ts, k, v) for i, (k, v) in enumerate(records)], 0, compression=compression)
    return log.append_as_leader(batch).first_offset


def read_all(log, start: int | None = None) -> list[Record]:  # noqa: ANN001
    """Every record from `start` (default: log start) as a consumer would see them."""
    out: list[Record] = []
    offset = log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20, log.high_watermark, True)
        if not data:
            break
        last = offset
        for pos, header in iter_batches(data):
            if not header.is_control:
                out.extend(r for r in iter_records(data, pos) if r.offset >= offset)
            last = header.next_offset
        if last <= offset:
            break
        offset = last
    return out


def batch_headers(log) -> list:  # noqa: ANN001
    out = []
    for segment in log.segments:
        out.extend(h for _, h in segment.batches())
    return out
