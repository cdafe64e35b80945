"""Disk blocks reserved past an active segment's end (storage/file_space.py, docs/STORAGE.md "Segments and
indexes"): the `.log` keeps its exact size and bytes while blocks are reserved ahead of the appends, and the
blocks past the end are given back at roll, at close, at truncation and by recovery after a crash."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from storage_testlib import TOPIC_ID, TP, TS, batch_offsets, client_batch, crash, open_log, small_tmpfs

from tidelog.clock import ManualClock
from tidelog.config.log_config import LogConfig
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.storage import file_space
from tidelog.storage.log import Log
from tidelog.storage.log_manager import LogManager
from tidelog.storage.log_segment import RESERVE_AFTER_BYTES, LogSegment
from tidelog.testing import run_broker

BATCH = client_batch(60, value=b"x" * 1000)  # ~61 KiB, about what a producer's 64 KiB batch carries
CONFIG = LogConfig(segment_bytes=64 << 20)
RESERVED = 512 * 1024  # at 3 MiB a segment has reserved 1 MiB or more past its end (as much as it holds, <= 8 MiB)


@pytest.fixture(autouse=True)
def reservations_here(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    fd = os.open(probe, os.O_RDWR | os.O_CREAT)
    try:
        if not file_space.reserve(fd, 0, 1 << 20):
            pytest.skip("this file system does not reserve blocks past a file's end (fallocate KEEP_SIZE)")
    finally:
        os.close(fd)
        probe.unlink()


def allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def reserved_past_end(path: Path) -> int:
    return allocated(path) - os.stat(path).st_size


def fill(lg: Log, nbytes: int) -> int:
    """Append BATCH until the active segment holds `nbytes`; the number of records."""
    records = 0
    while lg.active_segment.size < nbytes:
        lg.append_as_leader(bytearray(BATCH))
        records += 60
    return records


def open_manager(tmp_path: Path, clock: ManualClock) -> LogManager:
    m = LogManager([str(tmp_path / "data")], CONFIG, clock)
    m.startup()
    return m


def test_a_small_segment_reserves_nothing(tmp_path: Path, clock: ManualClock) -> None:
    m = open_manager(tmp_path, clock)
    lg = m.get_or_create_log(TP, CONFIG, TOPIC_ID)
    fill(lg, RESERVE_AFTER_BYTES - len(BATCH))
    path = lg.active_segment.log_path
    assert reserved_past_end(path) < 64 * 1024
    m.shutdown()


def test_reserved_ahead_size_and_bytes_exact_then_given_back_at_roll_and_close(tmp_path: Path,
                                                                               clock: ManualClock) -> None:
    m = open_manager(tmp_path, clock)
    lg = m.get_or_create_log(TP, CONFIG, TOPIC_ID)
    records = fill(lg, 3 << 20)
    first = lg.active_segment
    path = first.log_path
    size = first.size
    assert os.stat(path).st_size == size  # the size a reader (and Kafka) sees is unchanged
    assert reserved_past_end(path) >= RESERVED  # blocks reserved ahead of the next appends
    data = path.read_bytes()
    assert len(data) == size
    assert batch_offsets(data)[-1][1] == records - 1
    assert lg.read(0, size, lg.log_end_offset, True) == data

    lg.roll()
    assert os.stat(path).st_size == size
    assert reserved_past_end(path) < 64 * 1024  # given back by the roll's trim
    records += fill(lg, 3 << 20)
    second = lg.active_segment.log_path
    assert reserved_past_end(second) >= RESERVED
    m.shutdown()
    assert reserved_past_end(second) < 64 * 1024  # and by the clean close

    again = open_manager(tmp_path, clock)
    lg = again.get_or_create_log(TP, CONFIG, TOPIC_ID)
    assert lg.log_end_offset == records
    assert batch_offsets(lg.read(records - 60, 1, records, True)) == [(records - 60, records - 1)]
    again.shutdown()


def test_truncation_gives_the_reservation_back(tmp_path: Path, clock: ManualClock) -> None:
    """LogSegment.truncate_to (recovery's cut at a torn batch) frees what was reserved past the new end."""
    segment = LogSegment.open(tmp_path, 0, CONFIG, clock)
    offset = 0
    while segment.size < 3 << 20:
        batch = bytearray(BATCH)
        batch[0:8] = offset.to_bytes(8, "big")
        segment.append(offset + 59, TS, offset + 59, batch)
        offset += 60
    path = segment.log_path
    assert reserved_past_end(path) >= RESERVED
    segment.truncate_to(600)
    assert os.stat(path).st_size == segment.size == 10 * len(BATCH)
    assert reserved_past_end(path) < 64 * 1024
    assert batch_offsets(path.read_bytes())[-1] == (540, 599)
    segment.close()


def test_recovery_after_a_crash_gives_a_left_reservation_back(tmp_path: Path, clock: ManualClock) -> None:
    m = open_manager(tmp_path, clock)
    lg = m.get_or_create_log(TP, CONFIG, TOPIC_ID)
    records = fill(lg, 3 << 20)
    path = lg.active_segment.log_path
    data = path.read_bytes()
    crash(m)  # no trim, no checkpoint: the reservation stays on disk
    assert reserved_past_end(path) >= RESERVED

    again = open_manager(tmp_path, clock)
    lg = again.get_or_create_log(TP, CONFIG, TOPIC_ID)
    assert lg.log_end_offset == records
    assert path.read_bytes() == data  # recovery kept every acknowledged byte
    assert reserved_past_end(path) < 64 * 1024
    again.shutdown()


def test_a_full_disk_answers_storage_error_and_keeps_every_acknowledged_batch(tmp_path: Path,
                                                                              clock: ManualClock) -> None:
    """Once the disk cannot hold the next reservation, appends go on without one until the disk is full:
    then KAFKA_STORAGE_ERROR, and the `.log` holds exactly the batches acknowledged before it."""
    with small_tmpfs(tmp_path, "3m") as mount:
        lg = open_log(mount, clock, LogConfig(segment_bytes=64 << 20, segment_index_bytes=64 * 1024))
        acknowledged = 0
        with pytest.raises(KafkaError) as failed:
            for _ in range(100):  # 6 MiB: twice the disk
                lg.append_as_leader(bytearray(BATCH))
                acknowledged += 60
        assert failed.value.code == ErrorCode.KAFKA_STORAGE_ERROR
        assert acknowledged * 1000 > 3 << 19  # well past where reservations start (and then stop fitting)
        assert lg.log_end_offset == acknowledged
        data = lg.active_segment.log_path.read_bytes()
        assert len(data) == lg.active_segment.size == acknowledged // 60 * len(BATCH)
        assert batch_offsets(data) == [(o, o + 59) for o in range(0, acknowledged, 60)]
        lg.close()


def test_a_served_partition_reserves_ahead_and_a_clean_stop_gives_it_back(tmp_path: Path) -> None:
    """End to end: confluent-kafka produces 3 MiB to one partition of a real broker; the segment on disk has
    its exact size with blocks reserved ahead, every record reads back, and after the broker's clean stop the
    blocks past the end are gone and the data is the same."""
    from confluent_kafka import Consumer, Producer

    value = os.urandom(1000)
    count = 3 * 1024
    with run_broker(tmp_path / "logs", topics={"big": 1}) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 65536,
                             "compression.type": "none"})
        for _ in range(count):
            producer.produce("big", value)
            producer.poll(0)
        assert producer.flush(60) == 0
        segment = tmp_path / "logs" / "big-0" / "00000000000000000000.log"
        size = os.stat(segment).st_size
        assert size > count * 1000
        assert reserved_past_end(segment) >= RESERVED
        data = segment.read_bytes()
        assert len(data) == size

        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        consumer.subscribe(["big"])
        seen = 0
        try:
            while seen < count:
                msg = consumer.poll(30)
                assert msg is not None and msg.error() is None
                assert msg.offset() == seen and msg.value() == value
                seen += 1
        finally:
            consumer.close()
    assert segment.read_bytes() == data
    assert reserved_past_end(segment) < 64 * 1024


def test_without_fallocate_segments_are_written_as_before(tmp_path: Path, clock: ManualClock,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Not Linux, or a libc or Python without the call: no reservation, the same bytes, no error."""
    monkeypatch.setattr(file_space, "_fallocate", None)
    monkeypatch.setattr(file_space, "_available", False)
    m = open_manager(tmp_path, clock)
    lg = m.get_or_create_log(TP, CONFIG, TOPIC_ID)
    records = fill(lg, 3 << 20)
    path = lg.active_segment.log_path
    assert reserved_past_end(path) < 64 * 1024
    assert batch_offsets(path.read_bytes())[-1][1] == records - 1
    m.shutdown()


def test_a_log_dir_without_fallocate_leaves_the_others_reserving(tmp_path: Path, clock: ManualClock) -> None:
    """ramfs has no fallocate (EOPNOTSUPP): its segments are written without reservations, and a segment on
    this test's own file system still reserves afterwards (the refusal is the file system's, not the process's)."""
    import subprocess

    ramfs = tmp_path / "ramfs"
    ramfs.mkdir()
    done = subprocess.run(["mount", "-t", "ramfs", "ramfs", str(ramfs)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a ramfs here: {done.stderr.decode().strip()}")
    try:
        on_ramfs = open_log(ramfs, clock, CONFIG)
        records = fill(on_ramfs, 3 << 20)
        assert batch_offsets(on_ramfs.active_segment.log_path.read_bytes())[-1][1] == records - 1
        on_ramfs.close()
        here = open_log(tmp_path, clock, CONFIG)
        fill(here, 3 << 20)
        assert reserved_past_end(here.active_segment.log_path) >= RESERVED
        here.close()
    finally:
        subprocess.run(["umount", str(ramfs)], check=False)
