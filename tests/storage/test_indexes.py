"""Offset, time and transaction indexes: file sizes, entry bytes, lookups (docs/STORAGE.md)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tidelog.storage.abstract_index import IndexError_
from tidelog.storage.offset_index import OffsetIndex
from tidelog.storage.time_index import TimeIndex
from tidelog.storage.transaction_index import AbortedTxn, TransactionIndex


def test_offset_index_preallocated_then_trimmed(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    idx = OffsetIndex(path, 100, 1003)  # rounded down to whole 8-byte entries
    assert path.stat().st_size == 1000
    assert idx.entries == 0 and idx.max_entries == 125
    idx.append(105, 0)
    idx.append(110, 4200)
    with pytest.raises(IndexError_):
        idx.append(110, 9000)  # offsets must strictly increase
    assert idx.lookup(99) == (100, 0)  # no entry <= target: (base, 0)
    assert idx.lookup(105) == (105, 0)
    assert idx.lookup(109) == (105, 0)
    assert idx.lookup(1000) == (110, 4200)
    idx.close()
    assert path.read_bytes() == struct.pack(">iiii", 5, 0, 10, 4200)
    reopened = OffsetIndex(path, 100, 1000)
    assert reopened.entries == 2  # length / 8
    assert reopened.lookup(111) == (110, 4200)
    reopened.resize(1000)
    assert path.stat().st_size == 1000 and reopened.entries == 2
    reopened.truncate_to(110)
    assert reopened.entries == 1
    reopened.close()


def test_offset_index_fetch_upper_bound_offset(tmp_path: Path) -> None:
    """Kafka's OffsetIndex.fetchUpperBoundOffset: the first entry at or after a file position, or none."""
    idx = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1000)
    assert idx.fetch_upper_bound_offset(0) is None  # empty
    for offset, position in ((105, 0), (110, 4200), (130, 8400), (131, 12600)):
        idx.append(offset, position)
    assert idx.fetch_upper_bound_offset(0) == 105
    assert idx.fetch_upper_bound_offset(1) == 110
    assert idx.fetch_upper_bound_offset(4200) == 110
    assert idx.fetch_upper_bound_offset(8401) == 131
    assert idx.fetch_upper_bound_offset(12601) is None
    idx.close()


def test_offset_index_full(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 16)
    idx.append(1, 10)
    idx.append(2, 20)
    assert idx.is_full()
    with pytest.raises(IndexError_):
        idx.append(3, 30)
    idx.close()


def test_time_index_rules(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    idx = TimeIndex(path, 0, 12 * 4 + 5)
    assert path.stat().st_size == 48 and idx.max_entries == 4
    assert idx.last_entry == (-1, 0)
    idx.maybe_append(-1, 0)  # no timestamp: nothing written
    assert idx.entries == 0
    idx.maybe_append(1000, 3)
    idx.maybe_append(1000, 5)  # not strictly greater: skipped
    assert idx.entries == 1
    idx.maybe_append(2000, 9)
    with pytest.raises(IndexError_):
        idx.maybe_append(3000, 8)  # offset going backwards
    idx.maybe_append(3000, 12)
    assert idx.is_full()  # one slot early: the last one is for the final entry
    with pytest.raises(IndexError_):
        idx.maybe_append(4000, 13)
    idx.maybe_append(4000, 13, skip_full_check=True)
    assert idx.lookup(999) == (-1, 0)
    assert idx.lookup(1500) == (1000, 3)
    assert idx.lookup(3000) == (3000, 12)
    idx.close()
    assert path.read_bytes() == b"".join(
        struct.pack(">qi", ts, off) for ts, off in [(1000, 3), (2000, 9), (3000, 12), (4000, 13)]
    )


def test_transaction_index_created_on_first_write(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    idx = TransactionIndex(path, 0)
    assert not path.exists()
    assert idx.all_aborted_txns() == []
    idx.append(AbortedTxn(1000, 5, 9, 10))
    idx.append(AbortedTxn(1001, 7, 20, 21))
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(1002, 8, 20, 21))
    idx.close()
    data = path.read_bytes()
    assert len(data) == 68
    assert data[:34] == struct.pack(">hqqqq", 0, 1000, 5, 9, 10)
    reopened = TransactionIndex(path, 0)
    result = reopened.collect_aborted_txns(10, 15)
    assert [t.producer_id for t in result.aborted_transactions] == [1001]
    assert result.is_complete is True  # 21 >= 15
    assert reopened.collect_aborted_txns(0, 100).is_complete is False
    reopened.truncate_to(20)
    assert reopened.all_aborted_txns() == [AbortedTxn(1000, 5, 9, 10)]
    assert reopened.sanity_check()
    assert not TransactionIndex(path, 100).sanity_check()
    reopened.close()
