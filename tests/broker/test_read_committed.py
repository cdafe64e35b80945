"""read_committed over the wire (Kafka: Fetch bounded by the LSO with aborted_transactions from the `.txnindex`,
ListOffsets latest = LSO, and a fetcher parked at the LSO woken when a marker moves it).

Transactional batches and markers go through the storage API on the broker's event loop (Log.append_as_leader,
Log.append_control_marker: what Produce and the transaction coordinator call); reads are raw Fetch/ListOffsets."""

from __future__ import annotations

import threading
import time
from typing import Any

from test_fetch import fetch, partition_data
from test_list_offsets import list_offsets

from tidelog.protocol.record_batch import iter_batches
from tidelog.protocol.records import Record, build_batch
from tidelog.storage import TopicPartition
from tidelog.testing import BrokerHandle, KafkaWire


def now_ms() -> int:
    # Current timestamps: a batch more than segment.ms older than the next one would roll the segment.
    return int(time.time() * 1000)


def txn_batch(pid: int, n: int = 1, seq: int = 0) -> bytes:
    return bytes(build_batch([Record(i, now_ms(), b"t", b"txn%d" % i) for i in range(n)], 0, producer_id=pid,
                             producer_epoch=0, base_sequence=seq, is_transactional=True))


def plain_batch(n: int = 1) -> bytes:
    return bytes(build_batch([Record(i, now_ms(), b"p", b"plain%d" % i) for i in range(n)], 0))


def log_of(broker: BrokerHandle, topic: str) -> Any:
    return broker.state.log_manager.get_log(TopicPartition(topic, 0))


def append(broker: BrokerHandle, topic: str, records: bytes) -> int:
    return broker.call(lambda: log_of(broker, topic).append_as_leader(records).first_offset)


def end_txn(broker: BrokerHandle, topic: str, pid: int, commit: bool) -> int:
    return broker.call(lambda: log_of(broker, topic).append_control_marker(pid, 0, 0, commit).first_offset)


def offsets(records: bytes | None) -> list[int]:
    return [h.base_offset for _, h in iter_batches(records or b"")]


def test_fetch_stops_at_the_lso_and_lists_aborted_txns(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.create_topic("rc-lso")
    assert append(tidelog_module_broker, "rc-lso", plain_batch()) == 0
    assert append(tidelog_module_broker, "rc-lso", txn_batch(100, 2)) == 1      # 1-2 producer 100, open
    assert append(tidelog_module_broker, "rc-lso", plain_batch()) == 3          # non-transactional, after the open txn
    [p] = partition_data(fetch(client, [("rc-lso", 0, 0)], isolation_level=1))
    assert (p.high_watermark, p.last_stable_offset) == (4, 1)
    assert offsets(p.records) == [0] and p.aborted_transactions == []
    [p] = partition_data(fetch(client, [("rc-lso", 0, 0)], isolation_level=0))
    assert offsets(p.records) == [0, 1, 3] and p.last_stable_offset == 1
    [latest] = list_offsets(client, "rc-lso", [(0, -1)], isolation_level=1)
    assert latest.offset == 1
    [latest] = list_offsets(client, "rc-lso", [(0, -1)], isolation_level=0)
    assert latest.offset == 4

    assert end_txn(tidelog_module_broker, "rc-lso", 100, commit=False) == 4
    [p] = partition_data(fetch(client, [("rc-lso", 0, 0)], isolation_level=1))
    assert (p.high_watermark, p.last_stable_offset) == (5, 5)
    assert offsets(p.records) == [0, 1, 3, 4]
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(100, 1)]
    # Kafka's TransactionIndex.collectAbortedTxns: listed while the range reaches the ABORT marker ...
    [p] = partition_data(fetch(client, [("rc-lso", 0, 3)], isolation_level=1))
    assert [a.producer_id for a in p.aborted_transactions] == [100] and offsets(p.records) == [3, 4]
    # ... not for a range after it
    assert append(tidelog_module_broker, "rc-lso", plain_batch()) == 5
    [p] = partition_data(fetch(client, [("rc-lso", 0, 5)], isolation_level=1))
    assert p.aborted_transactions == [] and offsets(p.records) == [5]
    [latest] = list_offsets(client, "rc-lso", [(0, -1)], isolation_level=1)
    assert latest.offset == 6


def test_parked_read_committed_fetch_is_woken_by_the_marker(tidelog_module_broker: BrokerHandle) -> None:
    tidelog_module_broker.create_topic("rc-wake")
    append(tidelog_module_broker, "rc-wake", txn_batch(200))                    # 0, open: LSO 0
    result: list[Any] = []
    parked = threading.Event()

    def long_poll() -> None:
        with KafkaWire(tidelog_module_broker.bootstrap, timeout=120) as wire:
            parked.set()
            result.append(fetch(wire, [("rc-wake", 0, 0)], isolation_level=1, max_wait_ms=60_000, min_bytes=1))

    thread = threading.Thread(target=long_poll)
    thread.start()
    assert parked.wait(30)
    # More data of the open transaction arrives: the fetcher re-reads, still sees nothing below the LSO.
    append(tidelog_module_broker, "rc-wake", txn_batch(200, seq=1))             # 1
    assert not result
    end_txn(tidelog_module_broker, "rc-wake", 200, commit=True)                 # 2: COMMIT moves the LSO to 3
    thread.join(55)  # well below max_wait_ms: only a wake-up by the marker answers this soon
    assert not thread.is_alive()
    [p] = partition_data(result[0])
    assert p.last_stable_offset == 3 and offsets(p.records) == [0, 1, 2]


def test_read_committed_bounds_aborted_txns_by_the_offset_index(tidelog_module_broker: BrokerHandle, client: KafkaWire,
                                                                 monkeypatch: Any) -> None:
    """Kafka's LocalLog.addAbortedTransactions bounds the aborted-transaction lookup with the offset index (the
    first entry at or after the returned bytes' end), so a fetch of many small batches reads none of their
    headers; transactions aborted past that bound are not listed."""
    from tidelog.protocol.file_records import FileRecords

    tidelog_module_broker.create_topic("rc-index")
    first = append(tidelog_module_broker, "rc-index", txn_batch(300))
    end_txn(tidelog_module_broker, "rc-index", 300, commit=False)  # aborted: 0, marker 1
    for _ in range(300):  # ~22 KB of small batches: several offset-index entries (index.interval.bytes 4096)
        append(tidelog_module_broker, "rc-index", plain_batch())
    late = append(tidelog_module_broker, "rc-index", txn_batch(301))
    end_txn(tidelog_module_broker, "rc-index", 301, commit=False)

    def walked(*_: Any) -> Any:
        raise AssertionError("a read_committed fetch walked the batch headers")

    monkeypatch.setattr(FileRecords, "batch_headers", walked)
    [p] = partition_data(fetch(client, [("rc-index", 0, 0)], isolation_level=1, partition_max_bytes=2000))
    assert 0 < len(p.records) <= 2000
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(300, first)]
    [p] = partition_data(fetch(client, [("rc-index", 0, 0)], isolation_level=1))
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(300, first), (301, late)]


def test_aborted_txn_is_listed_when_its_marker_lies_in_a_later_segment(tidelog_module_broker: BrokerHandle,
                                                                       client: KafkaWire) -> None:
    """The `.txnindex` entry of an aborted transaction is written to the segment of its ABORT marker; a fetch
    that returns only earlier segments must still list it (Kafka's LocalLog.collectAbortedTransactions reads
    the following segments' indexes until TxnIndexSearchResult.isComplete). librdkafka's 0129_fetch_aborted_msgs
    saw 992 of 1,000 aborted records without this."""
    tidelog_module_broker.create_topic("rc-span")

    def roll() -> None:
        tidelog_module_broker.call(lambda: log_of(tidelog_module_broker, "rc-span").roll())

    assert append(tidelog_module_broker, "rc-span", txn_batch(400, 2)) == 0          # 0-1, aborted below
    assert append(tidelog_module_broker, "rc-span", txn_batch(401, 1)) == 2          # 2, committed below
    roll()
    assert append(tidelog_module_broker, "rc-span", plain_batch()) == 3
    roll()
    assert append(tidelog_module_broker, "rc-span", txn_batch(400, 2, seq=2)) == 4   # 4-5, same transaction
    assert end_txn(tidelog_module_broker, "rc-span", 401, commit=True) == 6
    roll()
    assert end_txn(tidelog_module_broker, "rc-span", 400, commit=False) == 7
    assert append(tidelog_module_broker, "rc-span", plain_batch()) == 8
    for fetch_offset, max_bytes in [(0, 1), (0, 1 << 20), (1, 1), (3, 1), (4, 1), (7, 1)]:
        [p] = partition_data(fetch(client, [("rc-span", 0, fetch_offset)], isolation_level=1,
                                   partition_max_bytes=max_bytes))
        assert p.last_stable_offset == 9
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(400, 0)], fetch_offset
    [p] = partition_data(fetch(client, [("rc-span", 0, 8)], isolation_level=1))
    assert p.aborted_transactions == [] and offsets(p.records) == [8]
