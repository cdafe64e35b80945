"""Shared machinery of the offset and time indexes (Kafka's AbstractIndex), docs/STORAGE.md "Segments and indexes".

The file is preallocated (sparse) to the maximum size and kept memory-mapped; the number of valid entries
lives in memory. Entries are written through the mapping, as Kafka's MappedByteBuffer does (no system call per
entry: a produced batch adds one to each index). A store into a sparse page of a full disk would kill the process
with SIGBUS, so the disk blocks are reserved with fallocate ahead of the entries (`ALLOCATE_AHEAD` bytes at a
time, one call per thousands of entries): a full disk then fails that call with ENOSPC (-> KAFKA_STORAGE_ERROR)
before any store. A filesystem without fallocate gets its entries with pwrite, as before.
"""

from __future__ import annotations

import errno
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


ALLOCATE_AHEAD = 64 * 1024  # disk blocks reserved past the last entry before entries are stored in the mapping
PAGE = 4096


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
        # Bytes from the start whose disk blocks this object has reserved (fallocate); entries are stored in the
        # mapping only below it. 0 at open: a file left sparse by a crash is reserved again (cheap where its
        # blocks exist). None: this filesystem has no fallocate, entries are written with pwrite.
        self._allocated: int | None = 0

    # --- mapping ---------------------------------------------------------------------------------------------

    def _map(self) -> None:
        if self._length > 0:
            self._mmap = mmap.mmap(self._fd, self._length, access=mmap.ACCESS_WRITE)
            # No read-around on a fault: the first store into a fresh (sparse) index would otherwise make the kernel
            # fill the device's whole readahead window (read_ahead_kb, 8 MiB here) with zero pages, with the GIL
            # held, and a trim would drop them again; 12% of a C-core cleaning pass's CPU on 8 MiB segments
            # (bench/cleaner.py, perf). Lookups are binary searches: readahead never helped them.
            try:
                self._mmap.madvise(mmap.MADV_RANDOM)
            except (AttributeError, OSError, ValueError):
                pass
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
            if self._allocated is not None:
                self._allocated = min(self._allocated, rounded // PAGE * PAGE)
            self._map()
            return True

    def trim_to_valid_size(self) -> None:
        self.resize(self.size_in_bytes)

    def reset(self) -> None:
        """Drop every entry and grow back to the maximum size (Kafka's reset())."""
        with self._lock:
            self._entries = 0
            self.resize(self.max_index_size)
            if self._allocated is not None:
                self._allocated = 0  # whatever the file held may have been sparse

    def truncate_to_entries(self, entries: int) -> None:
        with self._lock:
            self._entries = max(0, min(entries, self._entries))

    # --- raw I/O ---------------------------------------------------------------------------------------------

    def _write_entry(self, data: bytes) -> None:
        pos = self._entries * self.ENTRY_SIZE
        self._store(pos, data)
        self._entries += 1

    def _store(self, pos: int, data: bytes) -> None:
        """Put an entry's bytes at `pos` (< the file length): through the mapping once its disk blocks are
        reserved, else with pwrite. Raises OSError (ENOSPC on a full disk) with nothing stored."""
        end = pos + len(data)
        allocated = self._allocated
        if allocated is not None and end > allocated:
            allocated = self._reserve(end)
        if allocated is None or self._mmap is None:
            if os.pwrite(self._fd, data, pos) != len(data):
                raise OSError("short write to index")
        else:
            self._mmap[pos:end] = data

    def _reserve(self, end: int) -> int | None:
        """fallocate the blocks from `_allocated` to past `end` (ALLOCATE_AHEAD more, within the file)."""
        assert self._allocated is not None
        upto = min(self._length, (end + PAGE - 1) // PAGE * PAGE + ALLOCATE_AHEAD)
        try:
            os.posix_fallocate(self._fd, self._allocated, upto - self._allocated)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                raise  # ENOSPC, EIO: the append fails (KAFKA_STORAGE_ERROR), nothing was stored
            self._allocated = None  # no fallocate here: pwrite from now on
            return None
        self._allocated = upto
        return upto

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
