"""Bounded streaming decompression of a record batch payload, for the LogValidator's record walk.

Each `Inflater.read(n)` returns at most about `n` bytes (never the whole expanded payload at once), so a
decompression bomb costs at most `limit` bytes of output and one chunk of memory before it is refused.
Kafka decompresses a produced batch as a stream too (DefaultRecordBatch.streamingIterator /
skipKeyValueIterator over CompressionType.wrapForInput), so memory there is bounded by one chunk as well.

Errors: `CorruptPayloadError` when the codec cannot decode the bytes (garbage, bad checksum, a codec stream cut
short) and `DecompressedSizeError` once more than `limit` bytes come out.
"""

from __future__ import annotations

import struct
import zlib
from typing import TYPE_CHECKING, Any

from tidelog.protocol import codec_libs
from tidelog.protocol.records import GZIP, LZ4, SNAPPY, ZSTD, CorruptRecordError

if TYPE_CHECKING:  # the codec libraries are imported when first used (5-10 ms of start-up otherwise)
    import lz4.frame
    import zstandard

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16  # magic, int32 version, int32 compatible version
_INT32 = struct.Struct(">i")
# A snappy element emits at most 64 bytes for 3 input bytes (a 2-byte-offset copy): a block claiming more
# than ~22x its size is corrupt, and is refused before its preamble makes the decoder allocate the claim.
_SNAPPY_MAX_RATIO = 22
_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 * 1024  # zstd's Block_Maximum_Size: no block regenerates more
_ZSTD_FCS_SIZES = (0, 2, 4, 8)
_ZSTD_DICT_SIZES = (0, 1, 2, 4)


class CorruptPayloadError(CorruptRecordError):
    """The compressed payload cannot be decoded (Kafka: CORRUPT_MESSAGE for this project)."""


class DecompressedSizeError(CorruptRecordError):
    """The payload expands past the decompression limit (a decompression bomb)."""


class Inflater:
    """Pull decompressed bytes in bounded chunks; `read` returns b"" at the end of a well-formed stream."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.produced = 0

    def _count(self, out: bytes) -> bytes:
        self.produced += len(out)
        if self.produced > self.limit:
            raise DecompressedSizeError(f"decompressed records exceed {self.limit} bytes")
        return out

    def read(self, n: int) -> bytes:
        raise NotImplementedError


class _GzipInflater(Inflater):
    _SLICE = 16 * 1024  # input fed at a time, so zlib's unconsumed tail stays small

    def __init__(self, data: bytes | memoryview, limit: int, zlib_header: bool = False) -> None:
        super().__init__(limit)
        # gzip framing only, as Kafka's GZIPInputStream (a bare zlib stream is not a gzip payload); the cleaner,
        # reading what is already in the log, accepts a zlib header too, as records.decompress always has
        self._d = zlib.decompressobj(wbits=(32 if zlib_header else 16) + zlib.MAX_WBITS)
        self._data = memoryview(data)
        self._pos = 0

    def read(self, n: int) -> bytes:
        d = self._d
        while not d.eof:
            pending: bytes | memoryview = d.unconsumed_tail
            if not pending:
                if self._pos >= len(self._data):
                    raise CorruptPayloadError("gzip stream is truncated")
                pending = self._data[self._pos:self._pos + self._SLICE]
                self._pos += len(pending)
            try:
                out = d.decompress(pending, n)
            except zlib.error as exc:
                raise CorruptPayloadError(f"gzip: {exc}") from None
            if out:
                return self._count(out)
        # Bytes after the gzip trailer are ignored, as GZIPInputStream does when they are no gzip member.
        return b""


# Decoder contexts cost more to create than a small batch costs to decode (a ZstdDecompressor about 12 us): idle
# ones are kept for the next batch. An inflater takes one for itself (list.pop and append are atomic, so threads never
# share one) and gives it back only once its stream ended cleanly; one left mid-stream by an error is dropped.
_IDLE_LZ4: list[lz4.frame.LZ4FrameDecompressor] = []
_IDLE_LZ4_CONTEXTS: list[Any] = []  # lz4_whole's: bare LZ4F decompression contexts
_IDLE_ZSTD: list[zstandard.ZstdDecompressor] = []
_MAX_IDLE = 4


class _Lz4Inflater(Inflater):
    # Input fed at a time: python-lz4 keeps the input a bounded read leaves unused and copies it again on the
    # next call, so feeding the whole payload made each read cost the payload (a 48 MiB section in 256 KiB
    # reads: 246 ms fed whole, against 37 ms for one unbounded call).
    _SLICE = 64 * 1024

    def __init__(self, data: bytes | memoryview, limit: int) -> None:
        super().__init__(limit)
        try:
            self._d = _IDLE_LZ4.pop()
        except IndexError:
            self._d = codec_libs.lz4_frame().LZ4FrameDecompressor()
        self._data: bytes = bytes(data)
        self._pos = 0
        self._returned = False

    def read(self, n: int) -> bytes:
        d = self._d
        while not d.eof:
            pending = b""
            if d.needs_input:
                if self._pos >= len(self._data):
                    raise CorruptPayloadError("lz4 frame is truncated")
                pending = self._data[self._pos:self._pos + self._SLICE]
                self._pos += len(pending)
            try:
                out = d.decompress(pending, max_length=n)
            except RuntimeError as exc:  # python-lz4 reports every LZ4F error as RuntimeError
                raise CorruptPayloadError(f"lz4: {exc}") from None
            if out:
                return self._count(out)
        if not self._returned:
            self._returned = True
            if len(_IDLE_LZ4) < _MAX_IDLE:
                d.reset()
                _IDLE_LZ4.append(d)
        return b""


class _SnappyInflater(Inflater):
    """xerial snappy-java framing (what Kafka writes), or one raw snappy block (snappy-java reads both)."""

    def __init__(self, data: bytes | memoryview, limit: int) -> None:
        super().__init__(limit)
        self._data = bytes(data)
        xerial = self._data[:8] == _XERIAL_MAGIC
        if xerial and len(self._data) < _XERIAL_HEADER_SIZE:
            raise CorruptPayloadError("xerial snappy header is truncated")
        self._pos = _XERIAL_HEADER_SIZE if xerial else 0
        self._xerial = xerial

    def _block(self, block: bytes) -> bytes:
        snappy = codec_libs.snappy()
        try:
            size = snappy.decompress_raw_len(block)
        except Exception as exc:  # noqa: BLE001 - cramjam raises its own DecompressionError
            raise CorruptPayloadError(f"snappy: {exc}") from None
        if size > _SNAPPY_MAX_RATIO * len(block) + 64 or self.produced + size > self.limit:
            if size <= _SNAPPY_MAX_RATIO * len(block) + 64:
                raise DecompressedSizeError(f"decompressed records exceed {self.limit} bytes")
            raise CorruptPayloadError(f"snappy block of {len(block)} bytes claims {size} bytes")
        try:
            return self._count(bytes(snappy.decompress_raw(block)))
        except CorruptRecordError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise CorruptPayloadError(f"snappy: {exc}") from None

    def read(self, n: int) -> bytes:
        data, pos = self._data, self._pos
        if not self._xerial:
            if pos:
                return b""
            self._pos = 1
            return self._block(data) if data else b""
        while pos < len(data):
            if len(data) - pos < 4:
                raise CorruptPayloadError("xerial snappy block length is truncated")
            (size,) = _INT32.unpack_from(data, pos)
            pos += 4
            if size < 0 or pos + size > len(data):
                raise CorruptPayloadError("xerial snappy block is truncated")
            block = data[pos:pos + size]
            pos += size
            self._pos = pos
            out = self._block(block)
            if out:
                return out
        self._pos = pos
        return b""


class _ZstdInflater(Inflater):
    """Frames are walked block by block (RFC 8878 §3.1) and each block is fed to the decoder on its own, so one
    call never regenerates more than 128 KiB per block fed; a frame cut short is found by the walk."""

    def __init__(self, data: bytes | memoryview, limit: int) -> None:
        super().__init__(limit)
        self._data = bytes(data)
        self._pos = 0
        self._d: zstandard.ZstdDecompressionObj | None = None
        self._frame_left = False  # inside a frame whose blocks are not all fed yet
        self._checksum = 0
        self._decompressor: zstandard.ZstdDecompressor | None = None  # taken at the first frame

    def _start_frame(self) -> None:
        data, pos = self._data, self._pos
        if len(data) - pos < 4:
            raise CorruptPayloadError("zstd frame header is truncated")
        magic = int.from_bytes(data[pos:pos + 4], "little")
        if 0x184D2A50 <= magic <= 0x184D2A5F:  # skippable frame
            if len(data) - pos < 8:
                raise CorruptPayloadError("zstd skippable frame is truncated")
            size = int.from_bytes(data[pos + 4:pos + 8], "little")
            if pos + 8 + size > len(data):
                raise CorruptPayloadError("zstd skippable frame is truncated")
            self._pos = pos + 8 + size
            return
        if magic != _ZSTD_MAGIC:
            raise CorruptPayloadError("zstd: unknown frame magic")
        if len(data) - pos < 5:
            raise CorruptPayloadError("zstd frame header is truncated")
        fhd = data[pos + 4]
        single_segment = (fhd >> 5) & 1
        if fhd & 0x08:
            raise CorruptPayloadError("zstd frame header sets a reserved bit")
        fcs = _ZSTD_FCS_SIZES[fhd >> 6] or single_segment
        header = 5 + (0 if single_segment else 1) + _ZSTD_DICT_SIZES[fhd & 3] + fcs
        if pos + header > len(data):
            raise CorruptPayloadError("zstd frame header is truncated")
        self._checksum = 4 if fhd & 0x04 else 0
        if self._decompressor is None:
            try:
                self._decompressor = _IDLE_ZSTD.pop()
            except IndexError:
                self._decompressor = codec_libs.zstandard().ZstdDecompressor()
        self._d = self._decompressor.decompressobj()
        self._frame_left = True
        self._feed(header)

    def _feed(self, size: int) -> bytes:
        assert self._d is not None
        chunk = self._data[self._pos:self._pos + size]
        self._pos += size
        try:
            return self._d.decompress(chunk)
        except codec_libs.zstandard().ZstdError as exc:
            raise CorruptPayloadError(f"zstd: {exc}") from None

    def read(self, n: int) -> bytes:
        data = self._data
        out: list[bytes] = []
        got = 0
        while got < n:
            if not self._frame_left:
                if self._pos >= len(data):
                    self._give_back()
                    break
                self._start_frame()
                continue
            pos = self._pos
            if len(data) - pos < 3:
                raise CorruptPayloadError("zstd block header is truncated")
            bh = int.from_bytes(data[pos:pos + 3], "little")
            last, btype, bsize = bh & 1, (bh >> 1) & 3, bh >> 3
            if btype == 3 or bsize > _ZSTD_BLOCK_MAX:
                raise CorruptPayloadError("zstd block header is invalid")
            size = 3 + (1 if btype == 1 else bsize)
            if last:
                size += self._checksum
            if pos + size > len(data):
                raise CorruptPayloadError("zstd block is truncated")
            chunk = self._feed(size)
            if last:
                assert self._d is not None
                if not self._d.eof:
                    raise CorruptPayloadError("zstd frame did not end at its last block")
                self._frame_left = False
            if chunk:
                out.append(self._count(chunk))
                got += len(chunk)
        return b"".join(out)

    def _give_back(self) -> None:
        """The stream ended cleanly (every frame complete): its decoder can serve the next batch."""
        decompressor, self._decompressor = self._decompressor, None
        if decompressor is not None and len(_IDLE_ZSTD) < _MAX_IDLE:
            _IDLE_ZSTD.append(decompressor)


def lz4_whole(payload: bytes | memoryview, limit: int) -> bytes | None:
    """The whole decompressed LZ4 frame in one call when it ends cleanly within `limit` bytes, else None (the
    produce fast lane's inflate: no stream object; anything else is left to `inflater`). Like _Lz4Inflater,
    it stops at the frame's end mark.

    It calls python-lz4's low-level `decompress_chunk` on a bare context, which reads the memoryview in place:
    LZ4FrameDecompressor.decompress copies it into bytes first (measured with half-random records: 5.2 -> 3.5 us
    per 64 KiB batch, 67 -> 49 us per 1 MiB one)."""
    lz4f = _LZ4F or _import_lz4f()
    try:
        context = _IDLE_LZ4_CONTEXTS.pop()
    except IndexError:
        context = lz4f.create_decompression_context()
    try:
        out: bytes
        out, _consumed, ended = lz4f.decompress_chunk(context, payload, max_length=limit)
    except RuntimeError:  # python-lz4's error for every LZ4F error: this context is dropped
        return None
    if not ended:  # cut short, or more than `limit` bytes: the context is left mid-frame, dropped
        return None
    if len(_IDLE_LZ4_CONTEXTS) < _MAX_IDLE:
        lz4f.reset_decompression_context(context)
        _IDLE_LZ4_CONTEXTS.append(context)
    return out


_LZ4F: Any = None  # lz4.frame, imported by the first LZ4 batch (off the start-up path)


def _import_lz4f() -> Any:
    global _LZ4F
    _LZ4F = codec_libs.lz4_frame()
    return _LZ4F


def inflater(codec: int, payload: bytes | memoryview, limit: int, zlib_header: bool = False) -> Inflater:
    """A bounded stream over the decompressed records of a batch compressed with `codec` (1..4); `zlib_header`:
    a gzip payload may have a zlib header instead (records.decompress's rule, for the cleaner)."""
    if codec == GZIP:
        return _GzipInflater(payload, limit, zlib_header)
    if codec == SNAPPY:
        return _SnappyInflater(payload, limit)
    if codec == LZ4:
        return _Lz4Inflater(payload, limit)
    if codec == ZSTD:
        return _ZstdInflater(payload, limit)
    raise CorruptPayloadError(f"unknown compression codec {codec}")
