"""Transaction bookkeeping of one cleaning pass (Kafka's CleanedTransactionMetadata), docs/STORAGE.md "Cleaning rules".

Aborted ranges come from the `.txnindex` files. The tracker is fed every batch in offset order and says whether
that batch is discardable; ABORT markers that must stay are re-entered in the output segment's `.txnindex`.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterable

from tidelog.protocol.record_batch import HEADER_SIZE, RecordBatchHeader
from tidelog.protocol.records import iter_records
from tidelog.storage.transaction_index import AbortedTxn, TransactionIndex

ABORT, COMMIT = 0, 1
_CONTROL_KEY = struct.Struct(">hh")


class _AbortedTxnState:
    __slots__ = ("txn", "last_observed_batch_offset")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.last_observed_batch_offset: int | None = None


def control_type(batch: bytes | bytearray | memoryview, pos: int = 0) -> int | None:
    """COMMIT/ABORT of the control batch at `pos`, or None when it has no record left (already cleaned)."""
    for record in iter_records(batch, pos):
        if record.key is None or len(record.key) < 4:
            return -1  # Kafka parses an unreadable key as UNKNOWN: kept, never discarded
        return int(_CONTROL_KEY.unpack_from(record.key, 0)[1])
    return None


class CleanedTransactionMetadata:
    def __init__(self) -> None:
        self.ongoing_committed_txns: set[int] = set()
        self.ongoing_aborted_txns: dict[int, _AbortedTxnState] = {}
        self._aborted: list[tuple[int, int, AbortedTxn]] = []  # heap by first offset
        self._seq = 0
        self.cleaned_index: TransactionIndex | None = None

    def add_aborted_transactions(self, txns: Iterable[AbortedTxn]) -> None:
        for txn in txns:
            self._seq += 1
            heapq.heappush(self._aborted, (txn.first_offset, self._seq, txn))

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            _, _, txn = heapq.heappop(self._aborted)
            self.ongoing_aborted_txns.setdefault(txn.producer_id, _AbortedTxnState(txn))

    def on_control_batch_read(self, header: RecordBatchHeader, batch: bytes | bytearray | memoryview) -> bool:
        """True when the marker may be discarded (subject to its delete horizon)."""
        self._consume_aborted_up_to(header.last_offset)
        kind = control_type(batch) if header.records_count > 0 and len(batch) > HEADER_SIZE else None
        if kind is None:
            return True  # an empty control batch was cleaned before
        producer_id = header.producer_id
        if kind == ABORT:
            state = self.ongoing_aborted_txns.pop(producer_id, None)
            # Keep the marker while any batch of its transaction is still in the log.
            if state is not None and state.last_observed_batch_offset is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(state.txn)
                return False
            return True
        if kind == COMMIT:
            if producer_id in self.ongoing_committed_txns:
                self.ongoing_committed_txns.discard(producer_id)
                return False
            return True
        return False

    def on_batch_read(self, header: RecordBatchHeader) -> bool:
        """True when the data batch belongs to an aborted transaction."""
        self._consume_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        state = self.ongoing_aborted_txns.get(header.producer_id)
        if state is not None:
            state.last_observed_batch_offset = header.last_offset
            return True
        self.ongoing_committed_txns.add(header.producer_id)
        return False
