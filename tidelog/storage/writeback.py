"""Start writing a file range back to disk without waiting for it: Linux's sync_file_range(SYNC_FILE_RANGE_WRITE).

The cleaner writes a `.cleaned` segment and fsyncs it before the swap (Kafka's Cleaner flushes it too). Written
in one go, the fsync waits for all of it: 11-26% of a pass's wall time on 1 KiB records, and when two cleaner
threads fsync at once their waits queue on the disk. Writeback started as the segment is written overlaps the
disk with the cleaning that follows, and the fsync waits only for the tail. Durability is unchanged: the fsync
still decides. Python's os module lacks the call, so libc's is made with ctypes; where it does not exist (not
Linux, or the kernel says ENOSYS) `start` does nothing.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from types import ModuleType

SYNC_FILE_RANGE_WRITE = 2  # linux/fs.h

_sync_file_range: Callable[[int, int, int, int], int] | None = None
_ctypes: ModuleType | None = None  # imported at first use, off the start-up path (as storage/file_space.py)
_available = True  # False once this platform has no such call (ctypes, libc or the kernel: ENOSYS)


def _load() -> Callable[[int, int, int, int], int] | None:
    global _sync_file_range, _available, _ctypes
    if _sync_file_range is None and _available:
        try:
            import ctypes  # lazy for start-up time: only cleaner threads call this

            _ctypes = ctypes
            fn = ctypes.CDLL(None, use_errno=True).sync_file_range
        except (ImportError, OSError, AttributeError):
            _available = False
            return None
        fn.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
        fn.restype = ctypes.c_int
        _sync_file_range = fn
    return _sync_file_range if _available else None


def start(fd: int, offset: int, length: int) -> None:
    """Queue the dirty pages of [offset, offset + length) of `fd` for writeback and return (ctypes releases the
    GIL for the call). Errors are ignored: the fsync that follows reports any that matter."""
    global _available
    fn = _load()
    if fn is None or length <= 0:
        return
    if fn(fd, offset, length, SYNC_FILE_RANGE_WRITE) != 0 and _ctypes is not None:
        if _ctypes.get_errno() == errno.ENOSYS:
            _available = False
