"""The ordered segments of one log, by base offset (Kafka's LogSegments)."""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from tidelog.storage.log_segment import LogSegment
from tidelog.storage.transaction_index import TransactionIndex


class LogSegments:
    def __init__(self) -> None:
        self._segments: dict[int, LogSegment] = {}
        self._bases: list[int] = []

    def add(self, segment: LogSegment) -> LogSegment | None:
        """Insert `segment`, replacing (and returning) any segment with the same base offset."""
        previous = self._segments.get(segment.base_offset)
        if previous is None:
            bisect.insort(self._bases, segment.base_offset)
        self._segments[segment.base_offset] = segment
        return previous

    def remove(self, base_offset: int) -> LogSegment | None:
        segment = self._segments.pop(base_offset, None)
        if segment is not None:
            del self._bases[bisect.bisect_left(self._bases, base_offset)]
        return segment

    def clear(self) -> None:
        self._segments.clear()
        self._bases.clear()

    def contains(self, base_offset: int) -> bool:
        return base_offset in self._segments

    def get(self, base_offset: int) -> LogSegment | None:
        return self._segments.get(base_offset)

    def __len__(self) -> int:
        return len(self._bases)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter([self._segments[b] for b in self._bases])

    def __contains__(self, segment: object) -> bool:
        return isinstance(segment, LogSegment) and self._segments.get(segment.base_offset) is segment

    @property
    def is_empty(self) -> bool:
        return not self._bases

    @property
    def first_segment(self) -> LogSegment | None:
        return self._segments[self._bases[0]] if self._bases else None

    @property
    def last_segment(self) -> LogSegment | None:
        return self._segments[self._bases[-1]] if self._bases else None

    @property
    def active_segment(self) -> LogSegment:
        last = self.last_segment
        if last is None:
            raise LookupError("log has no segments")
        return last

    def floor_segment(self, offset: int) -> LogSegment | None:
        """The segment with the greatest base offset <= offset."""
        i = bisect.bisect_right(self._bases, offset)
        return self._segments[self._bases[i - 1]] if i else None

    def higher_segment(self, offset: int) -> LogSegment | None:
        """The segment with the smallest base offset > offset."""
        i = bisect.bisect_right(self._bases, offset)
        return self._segments[self._bases[i]] if i < len(self._bases) else None

    def values(self, from_offset: int | None = None, to_offset: int | None = None) -> list[LogSegment]:
        """Segments that may hold offsets in [from_offset, to_offset): the floor segment of from_offset
        onwards, stopping before the first segment whose base is >= to_offset."""
        start = 0
        if from_offset is not None:
            start = max(0, bisect.bisect_right(self._bases, from_offset) - 1)
        end = len(self._bases) if to_offset is None else bisect.bisect_left(self._bases, to_offset)
        return [self._segments[b] for b in self._bases[start:end]]

    def txn_indexes_from(self, from_offset: int) -> Iterator[TransactionIndex]:
        """The `.txnindex` of the floor segment of from_offset and of every later one that has entries, lazily
        (an aborted-transaction search stops at its first complete index and skips empty ones, which can neither
        add to it nor complete it). The segment list is taken now; a segment removed since is passed over."""
        start = max(0, bisect.bisect_right(self._bases, from_offset) - 1)
        bases = self._bases[start:]
        segments = self._segments

        def walk() -> Iterator[TransactionIndex]:
            for base in bases:
                segment = segments.get(base)
                if segment is not None and segment.txn_index.entry_count:
                    yield segment.txn_index

        return walk()

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments.values())
