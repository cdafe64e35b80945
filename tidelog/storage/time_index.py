"""`.timeindex`: 12-byte entries `int64 timestamp, int32 relativeOffset` (Kafka's TimeIndex), docs/STORAGE.md "Segments and indexes"."""

from __future__ import annotations

import struct

from tidelog.storage.abstract_index import AbstractIndex, CorruptIndexError, IndexError_

_ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


class TimeIndex(AbstractIndex):
    ENTRY_SIZE = 12

    def entry(self, n: int) -> tuple[int, int]:
        """(timestamp, absolute offset) of entry n."""
        assert self._mmap is not None
        ts, rel = _ENTRY.unpack_from(self._mmap, n * 12)
        return ts, self.base_offset + rel

    def _timestamp(self, n: int) -> int:
        assert self._mmap is not None
        return int(_ENTRY.unpack_from(self._mmap, n * 12)[0])

    def _relative_offset(self, n: int) -> int:
        assert self._mmap is not None
        return int(_ENTRY.unpack_from(self._mmap, n * 12)[1])

    def is_full(self) -> bool:
        # Kafka keeps the last slot free for the final entry written at roll/close (TimeIndex.isFull).
        return self._entries >= self._length // 12 - 1

    @property
    def last_entry(self) -> tuple[int, int]:
        with self._lock:
            return self.entry(self._entries - 1) if self._entries else (NO_TIMESTAMP, self.base_offset)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) when timestamp is strictly above the last entry's."""
        with self._lock:  # is_full() and entry(), inline: this runs for most produced batches
            entries = self._entries
            if not skip_full_check and entries >= self._length // 12 - 1:
                raise IndexError_(f"attempt to append to a full time index {self.path}")
            rel = offset - self.base_offset
            if entries:
                assert self._mmap is not None
                last_ts, last_rel = _ENTRY.unpack_from(self._mmap, entries * 12 - 12)
                if rel < last_rel:
                    raise IndexError_(f"offset {offset} below last time-index offset "
                                      f"{self.base_offset + last_rel} in {self.path}")
                if timestamp < last_ts:
                    raise IndexError_(f"timestamp {timestamp} below last time-index timestamp {last_ts}")
            else:
                last_ts = NO_TIMESTAMP
            # An empty index reads as (-1, base): a segment without timestamps gets no entry at all.
            if timestamp <= last_ts:
                return
            if entries >= self._length // 12:
                # Only reachable with skip_full_check on a trimmed file: grow by one slot.
                self.resize(self._length + self.ENTRY_SIZE)
            self._store(entries * 12, _ENTRY.pack(timestamp, rel))
            self._entries = entries + 1

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """The last entry with timestamp <= target, else (-1, base offset)."""
        with self._lock:
            slot = self._largest_lower_bound_slot(target_timestamp, self._timestamp)
            if slot < 0:
                return NO_TIMESTAMP, self.base_offset
            return self.entry(slot)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= `offset`."""
        with self._lock:
            rel = offset - self.base_offset
            slot = self._largest_lower_bound_slot(rel, self._relative_offset)
            if slot < 0:
                self.truncate_to_entries(0)
            elif self._relative_offset(slot) == rel:
                self.truncate_to_entries(slot)
            else:
                self.truncate_to_entries(slot + 1)

    def sanity_check(self) -> None:
        if self._length % self.ENTRY_SIZE:
            raise CorruptIndexError(f"time index {self.path} length is not a multiple of {self.ENTRY_SIZE}")
        if self._entries and self.last_entry[1] < self.base_offset:
            raise CorruptIndexError(f"corrupt time index {self.path}: last offset below base")
