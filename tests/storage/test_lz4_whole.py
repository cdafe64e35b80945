"""`inflaters.lz4_whole`, the produce fast lane's one-call LZ4 inflate: the whole frame within the limit, else None
(the full path then decides), and a decoder context that failed never serves the next batch."""

from __future__ import annotations

import os

from tidelog.protocol.inflaters import _IDLE_LZ4_CONTEXTS, lz4_whole
from tidelog.protocol.records import LZ4, compress

DATA = os.urandom(3000) * 30  # 90 KB: two 64 KiB blocks, compressible


def test_a_whole_frame_within_the_limit() -> None:
    frame = compress(LZ4, DATA)
    assert lz4_whole(frame, len(DATA)) == DATA
    assert lz4_whole(memoryview(frame), 1 << 20) == DATA
    assert lz4_whole(memoryview(bytearray(b"batch header" + frame))[12:], 1 << 20) == DATA  # as the fast lane passes it


def test_more_than_the_limit_is_refused() -> None:
    assert lz4_whole(compress(LZ4, DATA), len(DATA) - 1) is None


def test_a_cut_or_garbled_frame_is_refused_and_its_decoder_dropped() -> None:
    frame = compress(LZ4, DATA)
    _IDLE_LZ4_CONTEXTS.clear()
    assert lz4_whole(frame[:-7], 1 << 20) is None  # cut short: no end mark
    assert _IDLE_LZ4_CONTEXTS == []  # not given back mid-stream
    assert lz4_whole(b"\x04\x22\x4d\x18" + os.urandom(64), 1 << 20) is None  # a frame magic, then garbage
    assert lz4_whole(os.urandom(64), 1 << 20) is None  # not a frame
    assert _IDLE_LZ4_CONTEXTS == []
    assert lz4_whole(frame, 1 << 20) == DATA  # a fresh decoder serves the next batch
    assert len(_IDLE_LZ4_CONTEXTS) == 1  # and is kept for the one after


def test_a_frame_stops_at_its_end_mark() -> None:
    # As the streaming inflater (the full path) reads it: bytes after the end mark are not part of the records.
    assert lz4_whole(compress(LZ4, DATA) + b"trailing", 1 << 20) == DATA
