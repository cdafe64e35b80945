"""`.txnindex`: 34-byte aborted-transaction entries (Kafka's TransactionIndex / AbortedTxn), docs/STORAGE.md "Segments and indexes".

Not preallocated; the file only comes into existence when the first entry is written.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
CURRENT_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            CURRENT_VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )


@dataclass(slots=True)
class TxnIndexSearchResult:
    aborted_transactions: list[AbortedTxn]
    is_complete: bool


class TransactionIndex:
    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self._last_offset: int | None = None
        # Entries in the file, kept by every write through this object: an aborted-transaction search walks the
        # indexes of all segments after the fetch offset (Log.collect_aborted_transactions), and most are empty.
        self.entry_count = 0  # read-only outside this class
        self._fd = -1
        if self.path.exists():
            txns = self.all_aborted_txns()
            self._last_offset = txns[-1].last_offset if txns else None
            self.entry_count = len(txns)

    def _open(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def append(self, txn: AbortedTxn) -> None:
        if self._last_offset is not None and self._last_offset >= txn.last_offset:
            raise ValueError(
                f"txn last offset {txn.last_offset} not above previous {self._last_offset} in {self.path}"
            )
        data = txn.encode()
        if os.write(self._open(), data) != len(data):
            raise OSError("short write to transaction index")
        self._last_offset = txn.last_offset
        self.entry_count += 1

    def all_aborted_txns(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        out = []
        for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
            version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
            if version != CURRENT_VERSION:
                raise ValueError(f"unexpected aborted txn version {version} in {self.path}")
            out.append(AbortedTxn(pid, first, last, lso))
        return out

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Entries overlapping [fetch_offset, upper_bound_offset); complete once one has LSO >= upper bound
        (Kafka's TransactionIndex.collectAbortedTxns)."""
        if self.entry_count == 0:
            return TxnIndexSearchResult([], False)
        found = []
        for txn in self.all_aborted_txns():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose last offset is >= offset."""
        keep = [t for t in self.all_aborted_txns() if t.last_offset < offset]
        if not self.path.exists():
            return
        fd = self._open()
        os.ftruncate(fd, len(keep) * ENTRY_SIZE)
        self._last_offset = keep[-1].last_offset if keep else None
        self.entry_count = len(keep)

    def reset(self) -> None:
        if self.path.exists():
            os.ftruncate(self._open(), 0)
        self._last_offset = None
        self.entry_count = 0

    def sanity_check(self) -> bool:
        """False when an entry's last offset is below the segment base (the segment must be rebuilt)."""
        try:
            return all(t.last_offset >= self.base_offset for t in self.all_aborted_txns())
        except ValueError:
            return False

    def flush(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename_to(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = Path(path)

    def delete_if_exists(self) -> bool:
        self.close()
        self._last_offset = None
        self.entry_count = 0
        try:
            os.unlink(self.path)
            return True
        except FileNotFoundError:
            return False
