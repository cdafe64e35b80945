"""LogManager restart (clean and unclean), directory identity, recovery of damaged segments (docs/STORAGE.md)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
from storage_testlib import TOPIC_ID, TP, batch_offsets, client_batch, crash

from tidelog.clock import ManualClock
from tidelog.config.log_config import LogConfig
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.storage import TopicPartition
from tidelog.storage.checkpoints import read_properties
from tidelog.storage.log import Log
from tidelog.storage.log_manager import LogDirLockedError, LogManager

SMALL = LogConfig(segment_bytes=len(client_batch(2, value=b"value-0")) * 4, index_interval_bytes=100)


def manager(tmp_path: Path, clock: ManualClock, config: LogConfig = SMALL) -> LogManager:
    m = LogManager([str(tmp_path / "data")], config, clock)
    m.startup()
    return m


def one_by_one(lg: Log, upto: int) -> list[bytes]:
    """Each 2-record batch on its own (max_bytes 1 + min_one_batch returns exactly one batch)."""
    return [lg.read(o, 1, upto, True) for o in range(0, upto, 2)]


def fill(m: LogManager, n: int, config: LogConfig = SMALL) -> list[bytes]:
    lg = m.get_or_create_log(TP, config, TOPIC_ID)
    for i in range(n):
        lg.append_as_leader(client_batch(2, value=b"value-%d" % i))
    return one_by_one(lg, lg.log_end_offset)


def test_meta_properties_lock_and_ids(tmp_path: Path, clock: ManualClock) -> None:
    m = manager(tmp_path, clock)
    props = read_properties(tmp_path / "data" / "meta.properties")
    assert props["version"] == "1" and props["node.id"] == "1"
    assert len(props["cluster.id"]) == 22 and len(props["directory.id"]) == 22
    assert m.meta_properties()["cluster.id"] == props["cluster.id"]
    text = (tmp_path / "data" / "meta.properties").read_text()
    assert text.startswith("#\n#") and text.endswith("\n")
    assert (tmp_path / "data" / ".lock").exists()
    other = LogManager([str(tmp_path / "data")], SMALL, clock)
    with pytest.raises(LogDirLockedError):
        other.startup()
    m.shutdown()
    again = manager(tmp_path, clock)
    assert again.meta_properties() == m.meta_properties() | {}
    assert read_properties(tmp_path / "data" / "meta.properties") == props
    again.shutdown()


def test_clean_restart_keeps_everything(tmp_path: Path, clock: ManualClock) -> None:
    m = manager(tmp_path, clock)
    before = fill(m, 10)
    lg = m.get_log(TP)
    assert lg is not None
    part = lg.dir
    assert (part / "partition.metadata").exists()
    indexes_active = (part / "00000000000000000016.index").stat().st_size
    assert indexes_active == 10485760
    m.shutdown()
    data = tmp_path / "data"
    assert json.loads((data / ".kafka_cleanshutdown").read_text()) == {"version": 0, "brokerEpoch": -1}
    assert (data / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 0 20\n"
    assert (data / "replication-offset-checkpoint").read_text() == "0\n1\norders 0 20\n"
    assert (data / "log-start-offset-checkpoint").read_text() == "0\n0\n"
    # Clean close trims the active segment's indexes and writes a snapshot at LEO.
    assert (part / "00000000000000000016.index").stat().st_size % 8 == 0
    assert (part / "00000000000000000016.index").stat().st_size < 10485760
    assert (part / "00000000000000000020.snapshot").exists()

    m2 = manager(tmp_path, clock)
    assert not (data / ".kafka_cleanshutdown").exists()  # deleted before logs load
    lg2 = m2.get_log(TP)
    assert lg2 is not None and lg2.topic_id == TOPIC_ID
    assert lg2.log_end_offset == lg2.high_watermark == 20 and lg2.recovery_point == 20
    assert [s.base_offset for s in lg2.segments] == [0, 8, 16]
    assert one_by_one(lg2, 20) == before
    assert (part / "00000000000000000016.index").stat().st_size == 10485760  # enlarged again
    assert lg2.append_as_leader(client_batch(1)).first_offset == 20
    m2.shutdown()


def test_unclean_restart_without_damage(tmp_path: Path, clock: ManualClock) -> None:
    m = manager(tmp_path, clock)
    before = fill(m, 10)
    crash(m)
    m2 = manager(tmp_path, clock)
    lg = m2.get_log(TP)
    assert lg is not None and lg.log_end_offset == 20
    assert one_by_one(lg, 20) == before
    assert lg.recovery_point == 0  # no checkpoint was written before the crash
    m2.shutdown()


def _active_log(tmp_path: Path) -> Path:
    return tmp_path / "data" / "orders-0" / "00000000000000000016.log"


def test_recovery_truncates_torn_tail(tmp_path: Path, clock: ManualClock) -> None:
    m = manager(tmp_path, clock)
    before = fill(m, 10)
    crash(m)
    path = _active_log(tmp_path)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - 10)  # last batch cut mid-way
    m2 = manager(tmp_path, clock)
    lg = m2.get_log(TP)
    assert lg is not None and lg.log_end_offset == 18
    assert path.stat().st_size == size - len(client_batch(2, value=b"value-9"))
    assert one_by_one(lg, 18) == before[:9]
    assert lg.append_as_leader(client_batch(2)).first_offset == 18
    m2.shutdown()


def test_recovery_truncates_garbage_tail_and_zero_fill(tmp_path: Path, clock: ManualClock) -> None:
    m = manager(tmp_path, clock)
    before = fill(m, 10)
    crash(m)
    path = _active_log(tmp_path)
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"\x00" * 100 + os.urandom(50))
    m2 = manager(tmp_path, clock)
    lg = m2.get_log(TP)
    assert lg is not None and lg.log_end_offset == 20 and path.stat().st_size == size
    assert one_by_one(lg, 20) == before
    m2.shutdown()


def test_recovery_stops_at_crc_corruption_and_deletes_later_segments(tmp_path: Path, clock: ManualClock) -> None:
    m = manager(tmp_path, clock)
    before = fill(m, 10)
    crash(m)
    part = tmp_path / "data" / "orders-0"
    middle = part / "00000000000000000008.log"
    batch_size = len(client_batch(2, value=b"value-0"))
    with open(middle, "r+b") as f:  # flip a byte inside the second batch of segment 8 (offsets 10-11)
        f.seek(batch_size + 70)
        byte = f.read(1)
        f.seek(batch_size + 70)
        f.write(bytes([byte[0] ^ 0xFF]))
    m2 = manager(tmp_path, clock)
    lg = m2.get_log(TP)
    assert lg is not None
    assert lg.log_end_offset == 10
    assert [s.base_offset for s in lg.segments] == [0, 8]
    assert not (part / "00000000000000000016.log").exists()
    assert middle.stat().st_size == batch_size
    assert one_by_one(lg, 10) == before[:5]
    # Indexes were rebuilt and the active segment's enlarged to the maximum.
    assert (part / "00000000000000000008.index").stat().st_size == 10485760
    m2.shutdown()


def test_missing_index_is_rebuilt(tmp_path: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_bytes=len(client_batch(2)) * 20, index_interval_bytes=100)
    m = manager(tmp_path, clock, config)
    fill(m, 30, config)
    m.shutdown()
    part = tmp_path / "data" / "orders-0"
    idx = part / "00000000000000000000.index"
    original = idx.read_bytes()
    assert len(original) > 0
    idx.unlink()
    m2 = manager(tmp_path, clock, config)
    assert idx.read_bytes() == original  # same entries rebuilt from the .log (trimmed)
    m2.shutdown()


def test_orphan_index_and_stray_deleted_files_removed(tmp_path: Path, clock: ManualClock) -> None:
    m = manager(tmp_path, clock)
    fill(m, 2)
    m.shutdown()
    part = tmp_path / "data" / "orders-0"
    (part / "00000000000000000099.index").write_bytes(b"\x00" * 8)
    (part / "00000000000000000050.log.deleted").write_bytes(b"x")
    (part / "00000000000000000050.log.cleaned").write_bytes(b"x")
    m2 = manager(tmp_path, clock)
    assert not (part / "00000000000000000099.index").exists()
    assert not (part / "00000000000000000050.log.deleted").exists()
    assert not (part / "00000000000000000050.log.cleaned").exists()
    m2.shutdown()


def test_log_start_offset_checkpoint_and_out_of_range(tmp_path: Path, clock: ManualClock) -> None:
    m = manager(tmp_path, clock)
    fill(m, 10)
    lg = m.get_log(TP)
    assert lg is not None
    with pytest.raises(KafkaError) as e:
        lg.maybe_increment_log_start_offset(21)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert lg.maybe_increment_log_start_offset(5, "delete records")
    data = tmp_path / "data"
    assert (data / "log-start-offset-checkpoint").read_text() == "0\n1\norders 0 5\n"
    with pytest.raises(KafkaError) as e:
        lg.read(4, 100, 20, True)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert batch_offsets(lg.read(5, 1, 20, True)) == [(4, 5)]
    assert lg.fetch_offset_for_timestamp(-2) == (-1, 5, 0)
    assert (lg.dir / "leader-epoch-checkpoint").read_text() == "0\n1\n0 5\n"
    m.shutdown()
    m2 = manager(tmp_path, clock)
    lg2 = m2.get_log(TP)
    assert lg2 is not None and lg2.log_start_offset == 5
    m2.shutdown()


def test_delete_segments_and_scheduled_unlink(tmp_path: Path, clock: ManualClock) -> None:
    m = manager(tmp_path, clock)
    fill(m, 10)
    lg = m.get_log(TP)
    assert lg is not None
    first = lg.segments.first_segment
    assert first is not None
    assert lg.delete_segments([first], "retention") == 1
    part = lg.dir
    assert (part / "00000000000000000000.log.deleted").exists()
    assert lg.log_start_offset == 8
    assert (tmp_path / "data" / "log-start-offset-checkpoint").read_text() == "0\n0\n"  # == first base
    assert m.run_scheduled_deletions() == 0
    clock.advance(60_000)
    assert m.run_scheduled_deletions() >= 1
    assert not (part / "00000000000000000000.log.deleted").exists()
    assert not any(n.startswith("00000000000000000000.") for n in os.listdir(part))
    # Deleting everything keeps a fresh active segment at LEO.
    lg.delete_segments(list(lg.segments), "retention")
    assert [s.base_offset for s in lg.segments] == [20] and lg.log_start_offset == 20
    assert lg.read(20, 100, 20, True) == b""
    m.shutdown()


def test_delete_log_and_cleaner_checkpoints(tmp_path: Path, clock: ManualClock) -> None:
    m = manager(tmp_path, clock)
    fill(m, 2)
    other = TopicPartition("users-compacted", 3)
    m.get_or_create_log(other, SMALL, TOPIC_ID)
    m.write_cleaner_checkpoints({TP: 3, other: 88, TopicPartition("gone", 0): 5})
    text = (tmp_path / "data" / "cleaner-offset-checkpoint").read_text().split("\n")
    assert text[:2] == ["0", "2"] and sorted(text[2:4]) == ["orders 0 3", "users-compacted 3 88"]
    assert m.cleaner_checkpoints() == {TP: 3, other: 88}
    m.update_cleaner_checkpoint(TP, 4)
    assert m.cleaner_checkpoints() == {TP: 4, other: 88}
    m.delete_log(TP)
    assert m.get_log(TP) is None
    assert not (tmp_path / "data" / "orders-0").exists()
    assert not any(n.endswith("-delete") for n in os.listdir(tmp_path / "data"))
    assert m.cleaner_checkpoints() == {other: 88}
    m.shutdown()


def test_unreadable_checkpoints_mean_full_recovery(tmp_path: Path, clock: ManualClock) -> None:
    m = manager(tmp_path, clock)
    before = fill(m, 10)
    m.shutdown()
    data = tmp_path / "data"
    (data / ".kafka_cleanshutdown").unlink()
    (data / "recovery-point-offset-checkpoint").write_text("7\ngarbage\n")
    m2 = manager(tmp_path, clock)
    lg = m2.get_log(TP)
    assert lg is not None and lg.recovery_point == 0 and lg.log_end_offset == 20
    assert one_by_one(lg, 20) == before
    m2.shutdown()


def test_time_index_final_entry_survives_restart(tmp_path: Path, clock: ManualClock) -> None:
    m = manager(tmp_path, clock)
    fill(m, 10)
    m.shutdown()
    tidx = (tmp_path / "data" / "orders-0" / "00000000000000000000.timeindex").read_bytes()
    assert len(tidx) % 12 == 0 and len(tidx) >= 12
    ts, rel = struct.unpack(">qi", tidx[-12:])
    assert ts == 1_700_000_000_000 and rel == 1  # largest timestamp, last offset of its batch
