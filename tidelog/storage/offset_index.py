"""`.index`: 8-byte entries `int32 relativeOffset, int32 position` (Kafka's OffsetIndex), docs/STORAGE.md "Segments and indexes"."""

from __future__ import annotations

import struct

from tidelog.storage.abstract_index import AbstractIndex, CorruptIndexError, IndexError_

_ENTRY = struct.Struct(">ii")


class OffsetIndex(AbstractIndex):
    ENTRY_SIZE = 8

    def entry(self, n: int) -> tuple[int, int]:
        """(absolute offset, position) of entry n."""
        assert self._mmap is not None
        rel, pos = _ENTRY.unpack_from(self._mmap, n * 8)
        return self.base_offset + rel, pos

    def _relative_offset(self, n: int) -> int:
        assert self._mmap is not None
        return int(_ENTRY.unpack_from(self._mmap, n * 8)[0])

    def _position(self, n: int) -> int:
        assert self._mmap is not None
        return int(_ENTRY.unpack_from(self._mmap, n * 8)[1])

    @property
    def last_offset(self) -> int:
        with self._lock:
            return self.entry(self._entries - 1)[0] if self._entries else self.base_offset

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position). Offsets must strictly increase; the index must not be full."""
        with self._lock:  # is_full() and _relative_offset(), inline: this runs for most batches
            entries = self._entries
            if entries >= self._length // 8:
                raise IndexError_(f"attempt to append to a full index {self.path}")
            rel = offset - self.base_offset
            if entries and self._mmap is not None and rel <= _ENTRY.unpack_from(self._mmap, entries * 8 - 8)[0]:
                raise IndexError_(
                    f"offset {offset} not larger than last offset {self.last_offset} in {self.path}"
                )
            if not 0 <= rel <= 0x7FFFFFFF:
                raise IndexError_(f"offset {offset} out of the relative range of base {self.base_offset}")
            self._store(entries * 8, _ENTRY.pack(rel, position))
            self._entries = entries + 1

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """The last entry with offset <= target, else (base offset, 0)."""
        with self._lock:
            rel_target = target_offset - self.base_offset
            slot = self._largest_lower_bound_slot(rel_target, self._relative_offset)
            if slot < 0:
                return self.base_offset, 0
            return self.entry(slot)

    def fetch_upper_bound_offset(self, position: int) -> int | None:
        """The offset of the first entry at or after file position `position`, None when there is none (Kafka's
        OffsetIndex.fetchUpperBoundOffset: no batch read below that position holds an offset past it)."""
        with self._lock:
            if self._mmap is None:
                return None
            # entries are sorted by position too: the slot after the last one below `position`
            slot = self._largest_lower_bound_slot(position - 1, self._position) + 1
            return self.entry(slot)[0] if slot < self._entries else None

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= `offset`."""
        with self._lock:
            slot = self._largest_lower_bound_slot(offset - self.base_offset, self._relative_offset)
            if slot < 0:
                self.truncate_to_entries(0)
            elif self.entry(slot)[0] == offset:
                self.truncate_to_entries(slot)
            else:
                self.truncate_to_entries(slot + 1)

    def sanity_check(self) -> None:
        if self._entries and self.last_offset < self.base_offset:
            raise CorruptIndexError(f"corrupt index {self.path}: last offset below base")
        if self._length % self.ENTRY_SIZE:
            raise CorruptIndexError(f"index file {self.path} length is not a multiple of {self.ENTRY_SIZE}")
