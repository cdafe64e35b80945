"""The cleaner's key -> latest-offset map (Kafka's OffsetMap / SkimpyOffsetMap), docs/STORAGE.md "Offset map".

An open-addressing hash table held in one bytearray of `memory` bytes: each slot is 16 bytes of MD5(key)
followed by the big-endian int64 offset. Two keys with the same MD5 are treated as one key (Kafka accepts that).
The size of the array is the whole memory cost, so `log.cleaner.dedupe.buffer.size` really bounds it.

The C cleaner core (protocol/_cleaner_core.c) reads and writes the same slots through `buffer` and `dirty`.
"""

from __future__ import annotations

import hashlib
import mmap
import struct

from tidelog.cleaner import core

HASH_SIZE = 16  # MD5
SLOT_SIZE = HASH_SIZE + 8
_OFFSET = struct.Struct(">q")
_FIRST_PROBE = struct.Struct(">i")  # attempt 0 reads the int32 at hash bytes [0, 4)
_md5 = hashlib.md5
_EMPTY_SLOT = bytes(SLOT_SIZE)
_INT32_MIN = -(2**31)
# clear() zeroes the blocks of this size that a put wrote (the C core marks them too). Small, because keys land at
# random: 49,000 keys marked nearly every 4 KiB block of a 128 MiB map, and clear() then zeroed all of it (5% of a
# pass's CPU on 1 KiB records, and memory bandwidth the other cleaner thread wanted).
DIRTY_BLOCK = 256


def _to_int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - 0x1_0000_0000 if value & 0x8000_0000 else value


class SkimpyOffsetMap:
    """Kafka's SkimpyOffsetMap. `put` overwrites an existing hash; `get` answers -1 for an absent key.

    Probe sequence (attempt i): for i < 13 the big-endian int32 at hash bytes [i, i+4); afterwards the int32
    at [12, 16) plus (i - 12) with int32 wrap-around. The slot is |value| mod slots with |INT32_MIN| read as 0
    (Kafka's Utils.abs)."""

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        self.memory = memory
        self.slots = memory // SLOT_SIZE
        if self.slots * load_factor <= 1:
            raise ValueError(f"offset map of {memory} bytes with load factor {load_factor} holds no entries")
        self.load_factor = load_factor
        self.max_entries = int(self.slots * load_factor)
        # An anonymous mapping: zero-filled by the kernel page by page as it is touched, so a lightly used map
        # costs little resident memory. clear() zeroes the blocks a put wrote (`_dirty`) and hands the pages to
        # the kernel as free-when-needed (MADV_FREE): an idle cleaner's map is reclaimed under memory pressure,
        # and a busy cleaner reuses its pages without a page fault per key (4 KiB faults were 3/4 of the CPU time
        # of a C-core pass of 100-byte records with MADV_DONTNEED).
        self._bytes = mmap.mmap(-1, self.slots * SLOT_SIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self._dirty = bytearray(-(-len(self._bytes) // DIRTY_BLOCK))
        self._entries = 0
        self.latest_offset = -1
        self.lookups = 0
        self.probes = 0

    # --- hashing and probing ------------------------------------------------------------------------------

    def _position(self, digest: bytes, attempt: int) -> int:
        if attempt < HASH_SIZE - 3:
            value = int.from_bytes(digest[attempt : attempt + 4], "big", signed=True)
        else:
            value = _to_int32(int.from_bytes(digest[12:16], "big", signed=True) + attempt - (HASH_SIZE - 4))
        value = 0 if value == _INT32_MIN else abs(value)
        return (value % self.slots) * SLOT_SIZE

    def _find(self, digest: bytes, first_attempt: int = 0) -> tuple[int, bool]:
        """(byte position of the slot, whether it already holds `digest`); position -1 when the table is
        exhausted (only possible once entries == slots, which max_entries forbids)."""
        buf = self._bytes
        for attempt in range(first_attempt, self.slots + HASH_SIZE - 4):
            pos = self._position(digest, attempt)
            self.probes += 1
            stored = buf[pos : pos + HASH_SIZE]
            if stored == digest:
                return pos, True
            if buf[pos : pos + SLOT_SIZE] == _EMPTY_SLOT:
                return pos, False
        return -1, False

    # --- the OffsetMap interface -------------------------------------------------------------------------
    # put/get inline hashing and the first probe (most keys need only that one at the map's load factor):
    # the cleaner calls them for every record while holding the GIL the broker's event loop needs.

    def put(self, key: bytes | bytearray | memoryview, offset: int) -> None:
        self.put_digest(_md5(key, usedforsecurity=False).digest(), offset)

    def put_digest(self, digest: bytes, offset: int) -> None:
        if self._entries >= self.slots:
            raise OverflowError("offset map is full")
        self.lookups += 1
        self.probes += 1
        value = _FIRST_PROBE.unpack_from(digest)[0]
        pos = ((0 if value == _INT32_MIN else abs(value)) % self.slots) * SLOT_SIZE
        buf = self._bytes
        if buf[pos : pos + HASH_SIZE] != digest:
            if buf[pos : pos + SLOT_SIZE] == _EMPTY_SLOT:
                found = False
            else:
                pos, found = self._find(digest, 1)
                if pos < 0:
                    raise OverflowError("offset map is full")
            if not found:
                buf[pos : pos + HASH_SIZE] = digest
                self._entries += 1
                self._dirty[pos // DIRTY_BLOCK] = 1
                self._dirty[(pos + SLOT_SIZE - 1) // DIRTY_BLOCK] = 1
        _OFFSET.pack_into(buf, pos + HASH_SIZE, offset)
        self.latest_offset = offset

    def get(self, key: bytes | bytearray | memoryview) -> int:
        return self.get_digest(_md5(key, usedforsecurity=False).digest())

    def get_digest(self, digest: bytes) -> int:
        self.lookups += 1
        self.probes += 1
        value = _FIRST_PROBE.unpack_from(digest)[0]
        pos = ((0 if value == _INT32_MIN else abs(value)) % self.slots) * SLOT_SIZE
        buf = self._bytes
        if buf[pos : pos + HASH_SIZE] != digest:
            if buf[pos : pos + SLOT_SIZE] == _EMPTY_SLOT:
                return -1
            pos, found = self._find(digest, 1)
            if not found:
                return -1
        return int(_OFFSET.unpack_from(buf, pos + HASH_SIZE)[0])

    def update_latest_offset(self, offset: int) -> None:
        """Raise the covered range without storing a key (gaps, control batches, a fully scanned segment)."""
        self.latest_offset = offset

    def clear(self) -> None:
        """Zero-fill before each cleaning (Kafka does the same rather than reallocating)."""
        # the dirty marks too: a core call that failed (a read error) wrote slots but never reported its counters
        if self._entries or self.latest_offset >= 0 or self._dirty.find(1) >= 0:
            if core.accelerator is not None:  # zeroes, then MADV_FREE, with the GIL released
                core.accelerator.zero_dirty_blocks(self._bytes, self._dirty, True)
            else:
                self._zero_dirty_blocks()
                try:
                    self._bytes.madvise(mmap.MADV_FREE)  # the zeroed pages: reclaimable, or reused as they are
                except (AttributeError, OSError, ValueError):
                    pass  # no MADV_FREE here: the pages stay, zeroed
        self._entries = 0
        self.latest_offset = -1
        self.lookups = 0
        self.probes = 0

    def _zero_dirty_blocks(self) -> None:
        zeros = bytes(DIRTY_BLOCK)
        end = len(self._bytes)
        dirty = self._dirty
        block = dirty.find(1)
        while block >= 0:
            start = block * DIRTY_BLOCK
            n = min(DIRTY_BLOCK, end - start)
            self._bytes[start : start + n] = zeros[:n]
            block = dirty.find(1, block + 1)
        self._dirty = bytearray(len(dirty))

    @property
    def size(self) -> int:
        return self._entries

    @property
    def buffer(self) -> mmap.mmap:
        """The slots, for the C cleaner core (which reads and writes them in this same layout)."""
        return self._bytes

    @property
    def dirty(self) -> bytearray:
        """One byte per DIRTY_BLOCK of `buffer`, set when a put writes into that block (the C core sets them too)."""
        return self._dirty

    def absorb(self, entries: int, latest_offset: int, lookups: int, probes: int) -> None:
        """Take over the counters after the C core worked on `buffer`."""
        self._entries = entries
        self.latest_offset = latest_offset
        self.lookups += lookups
        self.probes += probes

    def __len__(self) -> int:
        return self._entries

    @property
    def utilization(self) -> float:
        """Fraction of slots in use (metric max-buffer-utilization-percent)."""
        return self._entries / self.slots

    @property
    def collision_rate(self) -> float:
        """Extra probes per lookup, logged in the cleaning summary as Kafka does."""
        return (self.probes - self.lookups) / max(self.lookups, 1)
