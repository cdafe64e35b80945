"""Transactions in storage (Kafka's ProducerStateManager, EndTransactionMarker, TransactionIndex, LSO) on a real
log dir with a ManualClock: open transactions hold the LSO, markers are written in Kafka's bytes, aborts go to
`.txnindex`, and recovery after the process is killed rebuilds ongoing transactions, LSO and `.txnindex`."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import crc32c
import pytest

from tidelog.clock import ManualClock
from tidelog.config.log_config import LogConfig
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.records import Record, build_batch
from tidelog.storage import TopicPartition
from tidelog.storage.log import Log
from tidelog.storage.log_manager import LogManager

TP = TopicPartition("txn", 0)
TOPIC_ID = bytes(range(1, 17))
ROOT = Path(__file__).resolve().parents[2]


def open_log(path: Path, clock: ManualClock) -> Log:
    return Log.load(path / "txn-0", TP, LogConfig(), clock, TOPIC_ID)


def data(pid: int, n: int = 1, epoch: int = 0, seq: int = 0, txn: bool = True, ts: int = 1_700_000_000_000) -> bytes:
    return bytes(build_batch([Record(i, ts + i, b"k%d" % i, b"v%d" % i) for i in range(n)], 0, producer_id=pid,
                             producer_epoch=epoch, base_sequence=seq, is_transactional=txn))


def plain(n: int = 1) -> bytes:
    return bytes(build_batch([Record(i, 1_700_000_000_000, b"p", b"p") for i in range(n)], 0))


def batches_in(path: Path) -> list[bytes]:
    """Each batch of a `.log` file, split by its own length field (independent of tidelog's parser)."""
    raw = path.read_bytes()
    out, pos = [], 0
    while pos + 12 <= len(raw):
        (length,) = struct.unpack_from(">i", raw, pos + 8)
        out.append(raw[pos: pos + 12 + length])
        pos += 12 + length
    return out


def varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1), pos


def decode_marker(batch: bytes) -> dict[str, int]:
    """Kafka's RecordBatch v2 + one control record (EndTransactionMarker), decoded by hand."""
    (base_offset, length, leader_epoch, magic, crc, attributes, last_delta, base_ts, max_ts, pid, pepoch,
     base_seq, count) = struct.unpack_from(">qiibIhiqqqhii", batch, 0)
    assert magic == 2 and length == len(batch) - 12
    assert crc32c.crc32c(batch[21:]) == crc
    pos = 61
    _, pos = varint(batch, pos)  # record length
    rec_attributes = batch[pos]
    pos += 1
    ts_delta, pos = varint(batch, pos)
    off_delta, pos = varint(batch, pos)
    key_len, pos = varint(batch, pos)
    key = batch[pos: pos + key_len]
    pos += key_len
    value_len, pos = varint(batch, pos)
    value = batch[pos: pos + value_len]
    pos += value_len
    headers, pos = varint(batch, pos)
    assert pos == len(batch) and rec_attributes == 0 and ts_delta == 0 and off_delta == 0 and headers == 0
    key_version, control_type = struct.unpack(">hh", key)
    value_version, coordinator_epoch = struct.unpack(">hi", value)
    return {"base_offset": base_offset, "attributes": attributes, "last_delta": last_delta, "pid": pid,
            "epoch": pepoch, "base_seq": base_seq, "count": count, "key_version": key_version,
            "type": control_type, "value_version": value_version, "coordinator_epoch": coordinator_epoch,
            "max_ts": max_ts, "base_ts": base_ts, "leader_epoch": leader_epoch}


def test_open_transaction_holds_the_lso(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock)
    lg.append_as_leader(plain())                 # 0
    lg.append_as_leader(data(7, 2))              # 1-2 open transaction of producer 7
    lg.append_as_leader(plain())                 # 3 non-transactional, after the open txn
    assert (lg.high_watermark, lg.first_unstable_offset(), lg.last_stable_offset) == (4, 1, 1)
    # a read bounded by the LSO returns only the batch before the open transaction
    assert len(lg.read(0, 1 << 20, lg.last_stable_offset, True)) == len(plain())
    [p7] = lg.active_producers()
    assert (p7.producer_id, p7.producer_epoch, p7.last_sequence, p7.current_txn_start_offset) == (7, 0, 1, 1)
    info = lg.append_control_marker(7, 0, coordinator_epoch=3, commit=True)
    assert info.first_offset == info.last_offset == 4
    assert (lg.first_unstable_offset(), lg.last_stable_offset) == (None, 5)
    [p7] = lg.active_producers()
    assert (p7.current_txn_start_offset, p7.coordinator_epoch) == (-1, 3)


def test_markers_are_kafka_control_batches(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock)
    lg.append_as_leader(data(7, 1, epoch=2))
    lg.append_control_marker(7, 2, coordinator_epoch=11, commit=True, timestamp_ms=1_700_000_000_123)
    lg.append_as_leader(data(8, 1, epoch=0))
    lg.append_control_marker(8, 0, coordinator_epoch=12, commit=False)
    raw = batches_in(lg.dir / "00000000000000000000.log")
    commit, abort = decode_marker(raw[1]), decode_marker(raw[3])
    # attributes: transactional (0x10) + control (0x20), no compression, CreateTime
    assert commit == {"base_offset": 1, "attributes": 0x30, "last_delta": 0, "pid": 7, "epoch": 2, "base_seq": -1,
                      "count": 1, "key_version": 0, "type": 1, "value_version": 0, "coordinator_epoch": 11,
                      "max_ts": 1_700_000_000_123, "base_ts": 1_700_000_000_123, "leader_epoch": 0}
    assert (abort["type"], abort["pid"], abort["coordinator_epoch"], abort["base_offset"]) == (0, 8, 12, 3)
    assert abort["max_ts"] == clock.milliseconds()


def test_abort_goes_to_txnindex(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock)
    lg.append_as_leader(data(5, 2))              # 0-1 producer 5 (aborted below)
    lg.append_as_leader(data(6, 1))              # 2   producer 6 (still open at the abort)
    lg.append_control_marker(5, 0, 1, commit=False)  # 3
    lg.append_control_marker(6, 0, 1, commit=True)   # 4
    # Kafka's AbortedTxn entry: version 0, producer id, first offset, last offset, LSO at the abort
    raw = (lg.dir / "00000000000000000000.txnindex").read_bytes()
    assert raw == struct.pack(">hqqqq", 0, 5, 0, 3, 2)
    assert [(t.producer_id, t.first_offset) for t in lg.collect_aborted_transactions(0, 5)] == [(5, 0)]
    assert lg.collect_aborted_transactions(4, 5) == []
    assert lg.last_stable_offset == 5


def test_marker_epoch_rules(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock)
    lg.append_as_leader(data(9, 1, epoch=3))
    with pytest.raises(KafkaError) as e:
        lg.append_control_marker(9, 2, 0, commit=True)  # older producer epoch (ProducerAppendInfo)
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert lg.log_end_offset == 1 and lg.first_unstable_offset() == 0
    lg.append_control_marker(9, 3, 5, commit=False)
    with pytest.raises(KafkaError) as e:
        lg.append_control_marker(9, 3, 4, commit=False)  # older coordinator epoch
    assert e.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    # no open transaction here: the marker is still written (Kafka does), nothing becomes unstable
    info = lg.append_control_marker(42, 0, 0, commit=True)
    assert info.first_offset == 2 and lg.first_unstable_offset() is None and lg.log_end_offset == 3


def test_snapshot_keeps_the_open_transaction(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock)
    lg.append_as_leader(plain())     # 0
    lg.append_as_leader(data(3, 1))  # 1 open
    lg.close()                       # clean: snapshot at LEO carries CurrentTxnFirstOffset
    assert (lg.dir / "00000000000000000002.snapshot").exists()
    reopened = open_log(tmp_path, clock)
    assert (reopened.first_unstable_offset(), reopened.last_stable_offset) == (1, 1)


CRASHER = textwrap.dedent("""
    import os, signal, sys
    from tidelog.clock import ManualClock
    from tidelog.config.log_config import LogConfig
    from tidelog.protocol.records import Record, build_batch
    from tidelog.storage import TopicPartition
    from tidelog.storage.log_manager import LogManager

    def data(pid, ts=1_700_000_000_000):
        return bytes(build_batch([Record(0, ts, b"k", b"v")], 0, producer_id=pid, producer_epoch=0,
                                 base_sequence=0, is_transactional=True))

    m = LogManager([sys.argv[1]], LogConfig(segment_bytes=300), ManualClock(1_700_000_000_000))
    m.startup()
    lg = m.get_or_create_log(TopicPartition("txn", 0), LogConfig(segment_bytes=300), bytes(range(1, 17)))
    lg.append_as_leader(data(1))                 # 0: producer 1, aborted below
    lg.append_as_leader(data(2))                 # 1: producer 2, left open
    lg.append_control_marker(1, 0, 0, False)     # 2: ABORT -> .txnindex
    for _ in range(4):
        lg.append_as_leader(bytes(build_batch([Record(0, 1_700_000_000_000, b"p", b"x" * 100)], 0)))
    # No checkpoint is written: the recovery point stays 0 and recovery replays every segment. (A rolled segment's
    # background flush may move the in-memory recovery point past segment 0; written, it would keep recovery off
    # the segment whose derived files the test deletes, as Kafka's would, and the test would race that flush.)
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_recovery_after_sigkill_rebuilds_open_txn_lso_and_txnindex(tmp_path: Path, clock: ManualClock) -> None:
    data_dir = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", CRASHER, str(data_dir)], env=env, capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    part = data_dir / "txn-0"
    assert not (data_dir / ".kafka_cleanshutdown").exists()
    # Lose every derived file: producer snapshots and transaction indexes are rebuilt from the log alone.
    for f in part.iterdir():
        if f.suffix in (".snapshot", ".txnindex"):
            f.unlink()
    m = LogManager([str(data_dir)], LogConfig(segment_bytes=300), clock)
    m.startup()
    try:
        lg = m.get_log(TP)
        assert lg is not None and lg.log_end_offset == 7
        assert (lg.first_unstable_offset(), lg.last_stable_offset) == (1, 1)  # producer 2 still open
        assert {p.producer_id: p.current_txn_start_offset for p in lg.active_producers()} == {1: -1, 2: 1}
        assert [(t.producer_id, t.first_offset, t.last_offset) for t in lg.collect_aborted_transactions(0, 7)] \
            == [(1, 0, 2)]
        assert struct.pack(">hqqqq", 0, 1, 0, 2, 1) in (part / "00000000000000000000.txnindex").read_bytes()
        # the coordinator completes it after the restart
        lg.append_control_marker(2, 0, 0, commit=True)
        assert (lg.first_unstable_offset(), lg.last_stable_offset) == (None, 8)
    finally:
        m.shutdown()
