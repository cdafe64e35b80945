"""A slice of a segment's `.log` file, sent to the client without passing through Python (Kafka's FileRecords,
in org.apache.kafka.common.record as here in protocol: the connection's write path imports it at start-up, so
this module imports nothing from storage and the batch-header parser only when it is used).

Kafka answers a Fetch with `FileRecords.slice(position, size)` views of its segment files and writes them with
`FileChannel.transferTo`, i.e. sendfile(2): the page-cache pages go to the socket with no copy into the broker's
memory. `FileRecords` is that slice here: the Fetch path (`Log.read_slice`) returns one per partition, the fetch
codec counts it with `len()`, and the connection's write path (`broker/frame_stream.py`) hands it to
`os.sendfile`. Callers that need the bytes (a TLS listener, the test fault injector, an old Fetch version's
zstd check) call `read()`.

The slice owns its own file descriptor, an `os.dup()` of the segment's, taken under the segment's fd lock: the
segment may be closed, renamed `.deleted`, unlinked (retention, DeleteRecords, the cleaner's swap, topic deletion)
while the response waits to be written, and the slice still reads the same inode. The bytes below a segment's
valid size are never rewritten (appends go after them, the cleaner writes new files), so the slice's bytes
cannot change. The descriptor is closed by `close()` once the slice is written, or when the slice is dropped
(`__del__`: a response emptied by a quota, a partition an incremental fetch session leaves out, a connection
that went away).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tidelog.protocol.record_batch import RecordBatchHeader


class FileRecordsError(OSError):
    """The file holds fewer bytes than the slice claims (it was truncated under it): never send a short frame."""


class FileRecords:
    """`size` bytes at `position` of an owned file descriptor (Kafka's FileRecords slice)."""

    __slots__ = ("fd", "position", "size", "segment_base_offset")

    def __init__(self, fd: int, position: int, size: int, segment_base_offset: int | None = None) -> None:
        self.fd = fd  # owned: closed by close() or when the slice is dropped
        self.position = position
        self.size = size
        self.segment_base_offset = segment_base_offset  # the log segment it was read from (None: not a segment)

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileRecords(fd={self.fd}, position={self.position}, size={self.size})"

    def read(self) -> bytes:
        """The slice's bytes (os.pread; the slice stays usable)."""
        return self.read_at(0, self.size)

    def __bytes__(self) -> bytes:
        return self.read()

    def read_at(self, offset: int, size: int) -> bytes:
        """`size` bytes from `offset` within the slice; raises FileRecordsError if the file is shorter."""
        if offset < 0 or size < 0 or offset + size > self.size:
            raise ValueError(f"[{offset}, {offset + size}) outside a slice of {self.size} bytes")
        if size == 0:
            return b""
        if self.fd < 0:
            raise ValueError("read of a closed FileRecords")
        out = os.pread(self.fd, size, self.position + offset)
        while len(out) < size:  # pread may return short; 0 bytes means the file ends before the slice does
            more = os.pread(self.fd, size - len(out), self.position + offset + len(out))
            if not more:
                raise FileRecordsError(f"file ends {size - len(out)} bytes before the end of {self!r}")
            out += more
        return out

    def batch_headers(self) -> Iterator[tuple[int, RecordBatchHeader]]:
        """(position within the slice, header) of every batch whose whole 61-byte header lies in the slice, in
        order, reading only the headers (one pread each): a trailing cut-off batch is included when its header
        is. For the checks that need batch metadata of a fetch response (the aborted-transaction bound, the
        zstd check of old Fetch versions) without copying the records."""
        # lazy for start-up time: record_batch imports protocol.crc (test_startup_imports)
        from tidelog.protocol.record_batch import HEADER_SIZE, read_header

        pos = 0
        while pos + HEADER_SIZE <= self.size:
            header = read_header(self.read_at(pos, HEADER_SIZE))
            yield pos, header
            if header.size <= 0:
                return
            pos += header.size

    def advance(self, sent: int) -> None:
        """Drop the first `sent` bytes (they have been written)."""
        self.position += sent
        self.size -= sent

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        fd = self.fd
        if fd >= 0:
            self.fd = -1
            try:
                os.close(fd)
            except OSError:
                pass
