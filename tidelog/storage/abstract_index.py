"""Shared machinery of the offset and time indexes (Kafka's AbstractIndex), docs/STORAGE.md "Segments and indexes".

The file is preallocated to the maximum size and kept memory-mapped for lookups; the number of valid
entries lives in memory. Entries are *written* with pwrite rather than through the mapping: Linux keeps
both views coherent (one page cache), and a write into a sparse preallocated file on a full disk then
fails with ENOSPC (-> KAFKA_STORAGE_ERROR) instead of killing the process with SIGBUS.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections.abc import Callable
from pathlib import Path


class IndexError_(Exception):
    """An append that would break the index invariants (Kafka's InvalidOffsetException / full index)."""


class CorruptIndexError(Exception):
    """An index whose contents contradict its segment (Kafka's CorruptIndexException)."""


def round_down_to_multiple(number: int, factor: int) -> int:
    return factor * (number // factor)


class AbstractIndex:
    ENTRY_SIZE = 8

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self._lock = threading.RLock()
        newly_created = not self.path.exists()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if newly_created:
            # Preallocate (sparse, like Kafka's RandomAccessFile.setLength).
            os.ftruncate(self._fd, round_down_to_multiple(max_index_size, self.ENTRY_SIZE))
        self._length = os.fstat(self._fd).st_size
        self._mmap: mmap.mmap | None = None
        self._map()
        # Kafka: a freshly created index has 0 entries; an existing one has length / entrySize entries
        # (which is why files are trimmed on close and rebuilt by recovery after a crash).
        self._entries = 0 if newly_created else self._length // self.ENTRY_SIZE

    # --- mapping ---------------------------------------------------------------------------------------------

    def _map(self) -> None:
        if self._length > 0:
            self._mmap = mmap.mmap(self._fd, self._length, access=mmap.ACCESS_READ)
        else:
            self._mmap = None

    def _unmap(self) -> None:
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    # --- sizes -----------------------------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._length // self.ENTRY_SIZE

    @property
    def length(self) -> int:
        """Current file length in bytes."""
        return self._length

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self.ENTRY_SIZE

    def is_full(self) -> bool:
        return self._entries >= self._length // self.ENTRY_SIZE

    def resize(self, new_size: int) -> bool:
        """Set the file length to `new_size` rounded down to whole entries; True if it changed."""
        with self._lock:
            rounded = round_down_to_multiple(new_size, self.ENTRY_SIZE)
            if rounded == self._length:
                return False
            self._unmap()
            os.ftruncate(self._fd, rounded)
            self._length = rounded
            self._entries = min(self._entries, rounded // self.ENTRY_SIZE)
            self._map()
            return True

    def trim_to_valid_size(self) -> None:
        self.resize(self.size_in_bytes)

    def reset(self) -> None:
        """Drop every entry and grow back to the maximum size (Kafka's reset())."""
        with self._lock:
            self._entries = 0
            self.resize(self.max_index_size)

    def truncate_to_entries(self, entries: int) -> None:
        with self._lock:
            self._entries = max(0, min(entries, self._entries))

    # --- raw I/O ---------------------------------------------------------------------------------------------

    def _write_entry(self, data: bytes) -> None:
        pos = self._entries * self.ENTRY_SIZE
        if os.pwrite(self._fd, data, pos) != len(data):
            raise OSError("short write to index")
        self._entries += 1

    def _largest_lower_bound_slot(self, target: int, key: Callable[[int], int]) -> int:
        """Slot of the last entry whose key is <= target, or -1 (entries are sorted by key)."""
        lo, hi = 0, self._entries - 1
        if hi < 0 or key(0) > target:
            return -1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if key(mid) <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    # --- lifecycle -------------------------------------------------------------------------------------------

    def flush(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.fsync(self._fd)

    def close(self) -> None:
        """Trim to the used size, then release the file (clean shutdown / roll)."""
        with self._lock:
            if self._fd < 0:
                return
            self.trim_to_valid_size()
            self.close_handler()

    def close_handler(self) -> None:
        with self._lock:
            self._unmap()
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def rename_to(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = Path(path)

    def delete_if_exists(self) -> bool:
        self.close_handler()
        try:
            os.unlink(self.path)
            return True
        except FileNotFoundError:
            return False
