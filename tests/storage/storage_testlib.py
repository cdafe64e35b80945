"""Helpers for the storage tests: client-style batches, opening logs, simulated crashes."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tidelog.clock import Clock
from tidelog.config.log_config import LogConfig
from tidelog.protocol.record_batch import iter_batches
from tidelog.protocol.records import NONE, Record, build_batch
from tidelog.storage import TopicPartition
from tidelog.storage.log import Log
from tidelog.storage.log_manager import LogManager

TS = 1_700_000_000_000
TOPIC_ID = bytes(range(1, 17))
TP = TopicPartition("orders", 0)


def client_batch(
    n: int = 1,
    ts: int = TS,
    value: bytes = b"v",
    key: bytes | None = b"k",
    producer: tuple[int, int, int] = (-1, -1, -1),
    transactional: bool = False,
    compression: int = NONE,
    ts_step: int = 0,
) -> bytearray:
    """A batch as a producer sends it: base offset 0, offsets 0..n-1."""
    records = [Record(i, ts + i * ts_step, key, value) for i in range(n)]
    pid, epoch, seq = producer
    return build_batch(
        records,
        0,
        compression=compression,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=transactional,
    )


def control_batch(pid: int, epoch: int, control_type: int, coordinator_epoch: int = 0, ts: int = TS) -> bytearray:
    key = (0).to_bytes(2, "big") + control_type.to_bytes(2, "big")
    value = (0).to_bytes(2, "big") + coordinator_epoch.to_bytes(4, "big", signed=True)
    return build_batch(
        [Record(0, ts, key, value)], 0, producer_id=pid, producer_epoch=epoch, is_transactional=True, is_control=True
    )


def open_log(path: Path, clock: Clock, config: LogConfig | None = None, **kwargs: object) -> Log:
    return Log.load(path / TP.dir_name(), TP, config or LogConfig(), clock, TOPIC_ID, **kwargs)  # type: ignore[arg-type]


def batch_offsets(data: bytes) -> list[tuple[int, int]]:
    """(base offset, last offset) of each complete batch in a raw slice."""
    return [(h.base_offset, h.last_offset) for _, h in iter_batches(data)]


def crash(manager: LogManager) -> None:
    """Simulate a process crash: drop file handles and locks without flushing, trimming or checkpoints."""
    for lg in manager.all_logs().values():
        lg.close_handlers()
    if manager._flush_executor is not None:
        manager._flush_executor.shutdown(wait=True)
    for fd in manager._lock_fds.values():
        os.close(fd)
    manager._lock_fds.clear()


def segment_files(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n[0].isdigit())


@contextmanager
def small_tmpfs(directory: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (mount's size=, e.g. "256k") mounted at `directory`/disk: a real disk that fills up.
    Skips the test where it cannot be mounted (mounting needs root)."""
    mount = directory / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)
