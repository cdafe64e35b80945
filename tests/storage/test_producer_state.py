"""Idempotent producer checks, snapshots and transactions in the log (Kafka's ProducerStateManager, docs/STORAGE.md)."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest
from storage_testlib import TOPIC_ID, TP, TS, client_batch, control_batch, crash, open_log

from tidelog.clock import ManualClock
from tidelog.config.log_config import LogConfig
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.storage.log_manager import LogManager
from tidelog.storage.producer_state import ProducerStateManager

PID = 1000


def idem(seq: int, n: int = 2, epoch: int = 0, pid: int = PID) -> bytearray:
    return client_batch(n, producer=(pid, epoch, seq))


def test_duplicate_returns_original_offsets_and_writes_nothing(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock)
    assert lg.append_as_leader(idem(0)).first_offset == 0
    assert lg.append_as_leader(idem(2)).first_offset == 2
    lg.append_as_leader(client_batch(1))  # a non-idempotent batch in between
    size = lg.active_segment.size
    dup = lg.append_as_leader(idem(0))
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (0, 1)
    dup2 = lg.append_as_leader(idem(2))
    assert dup2.duplicate and dup2.first_offset == 2
    assert lg.active_segment.size == size and lg.log_end_offset == 5
    assert lg.append_as_leader(idem(4)).first_offset == 5


def test_only_last_five_batches_are_remembered(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock)
    for i in range(6):
        lg.append_as_leader(idem(i, n=1))
    assert lg.append_as_leader(idem(1, n=1)).duplicate
    with pytest.raises(KafkaError) as e:
        lg.append_as_leader(idem(0, n=1))  # fell out of the window: now out of order
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_sequence_gap_and_epochs(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock)
    lg.append_as_leader(idem(0, epoch=1))
    with pytest.raises(KafkaError) as e:
        lg.append_as_leader(idem(3, epoch=1))  # expected 2
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(KafkaError) as e:
        lg.append_as_leader(idem(2, epoch=0))  # stale epoch
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(KafkaError) as e:
        lg.append_as_leader(idem(5, epoch=2))  # new epoch must start at 0
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert lg.log_end_offset == 2  # failures consumed no offsets
    assert lg.append_as_leader(idem(0, epoch=2)).first_offset == 2
    # unknown producer: any sequence is accepted
    assert lg.append_as_leader(idem(77, pid=2000)).first_offset == 4
    assert lg.append_as_leader(idem(79, pid=2000)).first_offset == 6


def test_sequence_wraps(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock)
    lg.append_as_leader(idem(2**31 - 2, n=2))  # unknown producer: accepted; last seq INT32_MAX
    assert lg.append_as_leader(idem(0, n=1)).first_offset == 2


def test_snapshot_format(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock)
    lg.append_as_leader(idem(0, n=3, epoch=4))
    lg.close()
    path = lg.dir / "00000000000000000003.snapshot"
    data = path.read_bytes()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 1) and crc == crc32c.crc32c(data[6:])
    assert len(data) == 10 + 46
    entry = struct.unpack_from(">qhiqiqiq", data, 10)
    assert entry == (PID, 4, 2, 2, 2, TS, -1, -1)
    entries = ProducerStateManager.read_snapshot(path)
    assert entries[0].last_seq == 2 and entries[0].batch_metadata[0].first_seq == 0


def _manager(tmp_path: Path, clock: ManualClock) -> LogManager:
    m = LogManager([str(tmp_path / "data")], LogConfig(), clock)
    m.startup()
    return m


def test_dedupe_across_clean_restart_via_snapshot(tmp_path: Path, clock: ManualClock) -> None:
    m = _manager(tmp_path, clock)
    lg = m.get_or_create_log(TP, LogConfig(), TOPIC_ID)
    lg.append_as_leader(idem(0))
    lg.append_as_leader(idem(2))
    m.shutdown()
    assert (tmp_path / "data" / "orders-0" / "00000000000000000004.snapshot").exists()
    m2 = _manager(tmp_path, clock)
    lg2 = m2.get_log(TP)
    assert lg2 is not None
    dup = lg2.append_as_leader(idem(2))
    assert dup.duplicate and dup.first_offset == 2
    with pytest.raises(KafkaError) as e:
        lg2.append_as_leader(idem(9))
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    m2.shutdown()


def test_dedupe_across_crash_by_replay(tmp_path: Path, clock: ManualClock) -> None:
    m = _manager(tmp_path, clock)
    lg = m.get_or_create_log(TP, LogConfig(), TOPIC_ID)
    lg.append_as_leader(idem(0))
    lg.append_as_leader(idem(2))
    crash(m)
    part = tmp_path / "data" / "orders-0"
    assert not list(part.glob("*.snapshot"))
    m2 = _manager(tmp_path, clock)
    lg2 = m2.get_log(TP)
    assert lg2 is not None
    assert lg2.append_as_leader(idem(0)).duplicate
    with pytest.raises(KafkaError) as e:
        lg2.append_as_leader(idem(5))
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    m2.shutdown()


def test_corrupt_snapshot_falls_back_to_replay(tmp_path: Path, clock: ManualClock) -> None:
    m = _manager(tmp_path, clock)
    lg = m.get_or_create_log(TP, LogConfig(), TOPIC_ID)
    lg.append_as_leader(idem(0))
    m.shutdown()
    snap = tmp_path / "data" / "orders-0" / "00000000000000000002.snapshot"
    data = bytearray(snap.read_bytes())
    data[-1] ^= 0xFF
    snap.write_bytes(bytes(data))
    m2 = _manager(tmp_path, clock)
    lg2 = m2.get_log(TP)
    assert lg2 is not None and lg2.append_as_leader(idem(0)).duplicate
    m2.shutdown()


def test_producer_expiry(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock, producer_id_expiration_ms=1000)
    lg.append_as_leader(client_batch(1, ts=clock.milliseconds(), producer=(PID, 0, 0)))
    clock.advance(999)
    assert lg.remove_expired_producers() == 0
    clock.advance(1)
    assert lg.remove_expired_producers() == 1
    # forgotten: any sequence is accepted again
    assert lg.append_as_leader(client_batch(1, ts=clock.milliseconds(), producer=(PID, 0, 40))).first_offset == 1


def test_aborted_transaction_goes_to_txnindex(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock)
    lg.append_as_leader(client_batch(1))  # offset 0
    lg.append_as_leader(client_batch(2, producer=(PID, 0, 0), transactional=True))  # 1-2
    lg.append_as_leader(client_batch(1, producer=(2000, 0, 0), transactional=True))  # 3, stays open
    assert lg.last_stable_offset == 1
    lg.append_as_leader(control_batch(PID, 0, 0, coordinator_epoch=7), from_client=False)  # ABORT at 4
    assert lg.last_stable_offset == 3
    txn = lg.dir / "00000000000000000000.txnindex"
    assert txn.read_bytes() == struct.pack(">hqqqq", 0, PID, 1, 4, 3)
    lg.append_as_leader(control_batch(2000, 0, 1), from_client=False)  # COMMIT at 5: no entry
    assert lg.last_stable_offset == lg.high_watermark == 6
    assert len(txn.read_bytes()) == 34
    result = lg.active_segment.txn_index.collect_aborted_txns(0, 6)
    assert [(t.producer_id, t.first_offset) for t in result.aborted_transactions] == [(PID, 1)]
    # Clients may not write markers.
    with pytest.raises(KafkaError) as e:
        lg.append_as_leader(control_batch(PID, 0, 0))
    assert e.value.code == ErrorCode.INVALID_RECORD


def test_txnindex_rebuilt_by_recovery(tmp_path: Path, clock: ManualClock) -> None:
    m = _manager(tmp_path, clock)
    lg = m.get_or_create_log(TP, LogConfig(), TOPIC_ID)
    lg.append_as_leader(client_batch(2, producer=(PID, 0, 0), transactional=True))
    lg.append_as_leader(control_batch(PID, 0, 0), from_client=False)
    lg.append_as_leader(client_batch(1, producer=(PID, 0, 2), transactional=True))  # open txn at 3
    crash(m)
    txn = tmp_path / "data" / "orders-0" / "00000000000000000000.txnindex"
    expected = txn.read_bytes()
    txn.unlink()
    m2 = _manager(tmp_path, clock)
    lg2 = m2.get_log(TP)
    assert lg2 is not None
    assert txn.read_bytes() == expected
    assert lg2.last_stable_offset == 3  # the open transaction was rebuilt from the log
    m2.shutdown()


def test_producer_with_lagging_clock_survives_restart(tmp_path: Path, clock: ManualClock) -> None:
    """Batches stamped long before the broker's now: state is kept for producer.id.expiration.ms from the
    last append (and from loading), not dropped at once."""
    m = _manager(tmp_path, clock)
    lg = m.get_or_create_log(TP, LogConfig(), TOPIC_ID)
    old = clock.milliseconds() - 10 * 86_400_000
    lg.append_as_leader(client_batch(1, ts=old, producer=(PID, 0, 0)))
    assert lg.remove_expired_producers() == 0
    m.shutdown()
    m2 = _manager(tmp_path, clock)
    lg2 = m2.get_log(TP)
    assert lg2 is not None
    with pytest.raises(KafkaError) as e:
        lg2.append_as_leader(client_batch(1, ts=old, producer=(PID, 0, 5)))
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    clock.advance(86_400_000)
    assert lg2.remove_expired_producers() == 1
    m2.shutdown()


def test_log_helpers_for_cleaner_and_fetch(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock, LogConfig(segment_bytes=400))
    lg.append_as_leader(client_batch(2, producer=(PID, 3, 0), transactional=True))  # 0-1
    lg.append_as_leader(control_batch(PID, 3, 0), from_client=False)  # ABORT at 2
    for _ in range(6):
        lg.append_as_leader(client_batch(1))
    lg.append_as_leader(client_batch(1, producer=(2000, 0, 0), transactional=True))  # 9
    lg.append_as_leader(control_batch(2000, 0, 0), from_client=False)  # ABORT at 10
    assert len(lg.segments) > 1
    assert lg.last_records_of_active_producers() == {PID: (1, 3), 2000: (9, 0)}
    found = lg.collect_aborted_transactions(0, lg.high_watermark)
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in found] == [(PID, 0, 2), (2000, 9, 10)]
    assert [t.producer_id for t in lg.collect_aborted_transactions(5, lg.high_watermark)] == [2000]
